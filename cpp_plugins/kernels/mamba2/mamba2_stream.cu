// Instantiations of the Mamba-2 stream replay kernel (variant 3): state fp32 / fp16 / bf16,
// N = 128 / 256, token buckets MAXT = 1 (standard), 2, 4, 8.
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_stream_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {
template <typename ST, int N>
const void* byTokens(int mode, int T) {
    if (mode == 0) return reinterpret_cast<const void*>(&mamba2ReplayStreamKernel<ST, N, 1>);
    if (T <= 2) return reinterpret_cast<const void*>(&mamba2ReplayStreamKernel<ST, N, 2>);
    if (T <= 4) return reinterpret_cast<const void*>(&mamba2ReplayStreamKernel<ST, N, 4>);
    return reinterpret_cast<const void*>(&mamba2ReplayStreamKernel<ST, N, 8>);
}
template <typename ST>
const void* byN(int N, int mode, int T) {
    switch (N) {
        case 128: return byTokens<ST, 128>(mode, T);
        case 256: return byTokens<ST, 256>(mode, T);
        default: return nullptr;
    }
}
}  // namespace

const void* replayStreamKernel(int stateDtype, int dstate, int mode, int numTokens) {
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return byN<float>(dstate, mode, numTokens);
        case RSSM_DTYPE_FP16: return byN<__half>(dstate, mode, numTokens);
        case RSSM_DTYPE_BF16: return byN<__nv_bfloat16>(dstate, mode, numTokens);
        default: return nullptr;
    }
}
int replayStreamRowsPerWarp(int dstate, int mode, int numTokens) {
    const int maxT = mode == 0 ? 1 : (numTokens <= 2 ? 2 : numTokens <= 4 ? 4 : 8);
    return streamRowsPerWarpM2(dstate, maxT);
}
size_t replayStreamSmemBytes(int window, int numTokens, int headdim, int dstate) {
    return replayStreamSmemBytesM2(window, numTokens, headdim, dstate);
}

}  // namespace mamba2
}  // namespace rssm
