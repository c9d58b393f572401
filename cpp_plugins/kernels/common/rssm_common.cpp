#include "rssm_common.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>

#ifndef RSSM_BUILD_ARCHS
#define RSSM_BUILD_ARCHS "unknown"
#endif

namespace {
thread_local char gLastError[1024] = {0};
}

extern "C" int rssm_kernel_abi_version(void) { return RSSM_KERNEL_ABI_VERSION; }
extern "C" const char* rssm_build_archs(void) { return RSSM_BUILD_ARCHS; }
extern "C" const char* rssm_last_error(void) { return gLastError; }

namespace rssm {
int setError(int status, const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(gLastError, sizeof(gLastError), fmt, args);
    va_end(args);
    return status;
}
void clearError() { gLastError[0] = 0; }

namespace {
std::mutex gOccupancyLock;
int currentDevice() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        dev = 0;
    }
    return dev;
}
}  // namespace

int occupancyPerSm(const void* func, int threads, size_t smem) {
    struct Entry {
        const void* func;
        int threads;
        size_t smem;
        int dev, occ;
    };
    static Entry cache[128] = {};
    const int dev = currentDevice();
    std::lock_guard<std::mutex> guard(gOccupancyLock);
    for (const Entry& e : cache)
        if (e.func == func && e.threads == threads && e.smem == smem && e.dev == dev) return e.occ;
    int occ = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, func, threads, smem) != cudaSuccess || occ < 1) {
        cudaGetLastError();
        occ = 1;
    }
    for (Entry& e : cache)
        if (e.func == nullptr) {
            e = Entry{func, threads, smem, dev, occ};
            break;
        }
    return occ;
}

// The carve-out percentage of kCarveoutMinimal (applyCarveout, rssm_common.h); -1 if a device query fails.
static int minimalCarveoutPercent(const void* func, int threads, size_t smem) {
    const int dev = currentDevice();
    int maxSmem = 0, reserved = 0;
    cudaFuncAttributes attr{};
    if (cudaDeviceGetAttribute(&maxSmem, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev) != cudaSuccess ||
        cudaFuncGetAttributes(&attr, func) != cudaSuccess || maxSmem <= 0) {
        cudaGetLastError();
        return -1;
    }
    const long long perCta = (long long)smem + (long long)attr.sharedSizeBytes + reserved;
    const long long needed = perCta * occupancyPerSm(func, threads, smem);
    const long long pct = (needed * 100 + maxSmem - 1) / maxSmem;
    return (int)(pct < 0 ? 0 : pct > 100 ? 100 : pct);
}

int applyCarveout(const void* func, int threads, size_t smem, int request) {
    struct Entry {
        const void* func;
        int dev, applied;
    };
    static Entry table[32] = {};
    const int dev = currentDevice();
    Entry* slot = nullptr;
    {
        std::lock_guard<std::mutex> guard(gOccupancyLock);
        for (Entry& e : table)
            if (e.func == func && e.dev == dev) {
                if (e.applied == request) return 0;
                slot = &e;
                break;
            }
        if (!slot && request == kCarveoutDriver) return 0;  // never set on this kernel: it has the driver's choice
    }
    int status = 0;
    if (request == kCarveoutMinimal) {
        const int occ = occupancyPerSm(func, threads, smem);  // with the driver's carve-out (cached before any change)
        const int pct = minimalCarveoutPercent(func, threads, smem);
        status = pct < 0 ? (int)cudaErrorInvalidValue
                         : (int)cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout, pct);
        int after = 0;
        if (status == 0 &&
            (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&after, func, threads, smem) != cudaSuccess || after < occ))
            status = (int)cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout, -1);
    } else {
        status = (int)cudaFuncSetAttribute(func, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           request < 0 ? -1 : request > 100 ? 100 : request);
    }
    if (status != 0) {
        cudaGetLastError();
        return status;
    }
    std::lock_guard<std::mutex> guard(gOccupancyLock);
    if (!slot)
        for (Entry& e : table)
            if (e.func == nullptr || (e.func == func && e.dev == dev)) {
                slot = &e;
                break;
            }
    if (slot) *slot = Entry{func, dev, request};  // (a full table: the call is repeated next time, still correct)
    return 0;
}

int deviceSmCount() {
    static int cached[64] = {0};
    const int dev = currentDevice();
    std::lock_guard<std::mutex> guard(gOccupancyLock);
    if (dev < 0 || dev >= 64) return 1;
    if (cached[dev] == 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v < 1) {
            cudaGetLastError();
            v = 1;
        }
        cached[dev] = v;
    }
    return cached[dev];
}
}  // namespace rssm
