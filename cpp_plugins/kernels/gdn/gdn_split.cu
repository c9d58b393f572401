// Instantiations and launch of the GDN split replay kernels (variant 6): prep kernel per K (128 / 256) x
// token bucket (MAXT = 1 standard, 2, 4, 8), readout kernel per state dtype (fp32 / fp16 / bf16) x K x
// token bucket.
#include "gdn/gdn_split.h"

#include <stdlib.h>

#include "gdn/gdn_split_kernels.cuh"

namespace rssm {
namespace gdn {
namespace {

template <typename F>
cudaError_t allowDynamicSmem(F* kernel, size_t smem) {
    if (smem <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

// Resident CTAs per SM of the readout (cached per kernel: a host query, no stream work).
template <typename F>
int readoutOccupancy(F* kernel, size_t smem) {
    struct Entry { const void* f; int dev; int occ; };
    static Entry cache[32] = {};
    int dev = 0;
    cudaGetDevice(&dev);
    for (const Entry& e : cache)
        if (e.f == reinterpret_cast<const void*>(kernel) && e.dev == dev) return e.occ;
    int occ = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kSplitReadoutThreads, smem) != cudaSuccess ||
        occ < 1) {
        cudaGetLastError();
        occ = 1;
    }
    for (Entry& e : cache)
        if (e.f == nullptr) { e = Entry{reinterpret_cast<const void*>(kernel), dev, occ}; break; }
    return occ;
}

template <typename ST, int K, int MAXT>
cudaError_t launchSplitKT(const GdnReplayParams& p, int smCount, cudaStream_t s) {
    auto* prep = gdnSplitPrepKernel<K, MAXT>;
    const size_t prepSmem = splitPrepSmemBytesGdn(p.window, p.num_tokens, K);
    cudaError_t e = allowDynamicSmem(prep, prepSmem);
    if (e != cudaSuccess) return e;
    prep<<<dim3(p.num_heads, p.batch), kSplitPrepThreads, prepSmem, s>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    // Standard mode at K = 128: 3 CTAs / SM (80 registers) unless RSSM_GDN_SPLIT_MINB=2 (read once) asks
    // for 2 (128 registers, no spills); everything else 2.
    static const bool two = [] {
        const char* e = getenv("RSSM_GDN_SPLIT_MINB");
        return e && e[0] == '2';
    }();
    void (*readout)(GdnReplayParams) = gdnSplitReadoutKernel<ST, K, MAXT, 2>;
    if constexpr (K == 128 && MAXT == 1) {
        if (!two) readout = gdnSplitReadoutKernel<ST, K, MAXT, 3>;
    }
    const size_t smem = splitReadoutSmemBytesGdn(K);
    if ((e = allowDynamicSmem(readout, smem)) != cudaSuccess) return e;
    const long long items = (long long)p.batch * p.num_v_heads * (p.head_v / kSplitRows);
    const long long ctasNeeded = (items + kSplitReadoutThreads / 32 - 1) / (kSplitReadoutThreads / 32);
    const long long resident = (long long)readoutOccupancy(readout, smem) * smCount;
    const int grid = (int)(ctasNeeded < resident ? ctasNeeded : resident);
    readout<<<grid, kSplitReadoutThreads, smem, s>>>(p);
    return cudaGetLastError();
}
template <typename ST, int K>
cudaError_t launchSplitK(const GdnReplayParams& p, int smCount, cudaStream_t s) {
    if (p.mode == GDN_REPLAY_STANDARD) return launchSplitKT<ST, K, 1>(p, smCount, s);
    if (p.num_tokens <= 2) return launchSplitKT<ST, K, 2>(p, smCount, s);
    if (p.num_tokens <= 4) return launchSplitKT<ST, K, 4>(p, smCount, s);
    return launchSplitKT<ST, K, 8>(p, smCount, s);
}
template <typename ST>
cudaError_t launchSplitST(const GdnReplayParams& p, int smCount, cudaStream_t s) {
    return p.head_k == 128 ? launchSplitK<ST, 128>(p, smCount, s) : launchSplitK<ST, 256>(p, smCount, s);
}
}  // namespace

size_t splitWorkspaceBytes(int batch, int numTokens, int numVHeads, int window) {
    return splitWorkspaceBytesGdn(batch, numTokens, numVHeads, window);
}
int splitMaxRecords() { return kSplitMaxRecords; }
int splitRows() { return kSplitRows; }

cudaError_t launchSplit(const GdnReplayParams& p, int smCount, cudaStream_t s) {
    switch (p.state_dtype) {
        case RSSM_DTYPE_FP32: return launchSplitST<float>(p, smCount, s);
        case RSSM_DTYPE_FP16: return launchSplitST<__half>(p, smCount, s);
        default: return launchSplitST<__nv_bfloat16>(p, smCount, s);
    }
}

}  // namespace gdn
}  // namespace rssm
