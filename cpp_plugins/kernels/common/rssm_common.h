// Common C ABI of the replayssm kernel library: status codes, dtype codes, last-error message.
// Pure C/CUDA: no TensorRT, torch or c10 headers anywhere under cpp_plugins/kernels/.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum RssmStatus {
    RSSM_OK = 0,
    RSSM_ERR_INVALID_ARGUMENT = 1,  // a params field is out of range; see rssm_last_error()
    RSSM_ERR_UNSUPPORTED = 2,       // a valid but unsupported combination (dtype, head size, ...)
    RSSM_ERR_CUDA = 3,              // the launch itself failed (cudaGetLastError after launch)
};

enum RssmDtype {
    RSSM_DTYPE_FP32 = 0,
    RSSM_DTYPE_FP16 = 1,
    RSSM_DTYPE_BF16 = 2,
    RSSM_DTYPE_FP8_E4M3 = 3,
    RSSM_DTYPE_NVFP4 = 4,
};

// Version of the C ABI (params structs and launcher signatures). Bump on any layout change.
#define RSSM_KERNEL_ABI_VERSION 8

int rssm_kernel_abi_version(void);
// Comma-separated SM architectures this library carries machine code for, e.g. "90a,100a".
const char* rssm_build_archs(void);
// Message of the last failed launcher call on this host thread ("" if none).
const char* rssm_last_error(void);

#ifdef __cplusplus
}  // extern "C"

#include <cstdarg>
#include <cstddef>
namespace rssm {
// CTAs of `threads` threads with `smem` bytes of dynamic shared memory resident per SM for kernel `func` on the
// current device (cudaOccupancyMaxActiveBlocksPerMultiprocessor; at least 1), cached per (kernel, threads, smem,
// device) behind a lock. A host query: no stream work, safe during graph capture.
int occupancyPerSm(const void* func, int threads, size_t smem);
// SMs of the current device (cached per device; 1 if the query fails).
int deviceSmCount();
// Carve-out requests of applyCarveout: the driver's choice (no preference) or the minimal one above.
constexpr int kCarveoutDriver = -1;
constexpr int kCarveoutMinimal = -2;
// Applies a shared-memory carve-out (cudaFuncAttributePreferredSharedMemoryCarveout) to `func` on the current device:
// kCarveoutDriver, kCarveoutMinimal or a percentage 0-100 of the SM's maximum shared memory. kCarveoutMinimal: the
// smallest that still holds occupancyPerSm(func, threads, smem) CTAs (dynamic + static shared memory + the per-CTA
// reservation, times those CTAs, rounded up to a whole percent; the driver rounds up to the next configuration it
// has), so the rest of the SM's L1 / shared storage stays L1; if a fresh occupancy query then reports fewer CTAs per
// SM, the driver's choice is restored. The attribute call is made only when the request differs
// from the last one applied to that kernel on that device (a cached table behind a lock), so a per-launch call costs a
// lookup. Host-only, no stream work. Returns the cudaError_t of the attribute call as an int (0 on success).
int applyCarveout(const void* func, int threads, size_t smem, int request);
// A 16-bit row tensor whose rows can be copied in 16-byte pieces: base 16-byte aligned, three element strides
// multiples of 8 (launcher rules of the GDN split and warp-item kernels).
inline bool aligned16Rows(const void* ptr, int64_t a, int64_t b, int64_t c) {
    return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0 && a % 8 == 0 && b % 8 == 0 && c % 8 == 0;
}
// Records a printf-style message for rssm_last_error() and returns `status`.
int setError(int status, const char* fmt, ...);
void clearError();

// Workspace that covers every launch up to the sizes of *p (batch and num_tokens are maxima) for a family whose
// automatic variant `autoVariant` picks the split variant `splitVariant` only where the batch is large enough for the
// step's token count and the records per step fit (monotone in the batch at each token count; the GDN threshold
// depends on the token count, fifty-second session): whether the predicate holds at the maximum batch for some token
// count up to the maximum, and if so the size at the maximum tokens. `bytes` is the family's workspace query
// (rssm_*_replay_workspace_bytes). Host-only.
template <typename Params, typename BytesFn>
int64_t splitWorkspaceBound(const Params* p, int autoVariant, int splitVariant, BytesFn bytes) {
    if (!p) return 0;
    Params q = *p;
    q.variant = autoVariant;
    for (int t = 1; t <= p->num_tokens; ++t) {
        q.num_tokens = t;
        if (bytes(&q) > 0) {
            q.num_tokens = p->num_tokens;
            q.variant = splitVariant;
            return bytes(&q);
        }
    }
    return 0;
}
}  // namespace rssm
#endif
