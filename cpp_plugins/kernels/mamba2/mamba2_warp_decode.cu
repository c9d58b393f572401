// Instantiations of the conventional Mamba-2 warp-item decode (variant 4 of Mamba2Decode): state fp32 /
// fp16 / bf16 x N = 128 / 256 x {one token, 1..8 tokens} (mamba2_warp_decode_kernel.cuh).
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_warp_decode_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {
template <typename ST, bool ONE, int RWS>
const void* warpDecodeByN(int N) {
    switch (N) {
        case 128: return reinterpret_cast<const void*>(&mamba2WarpDecodeKernel<ST, 128, ONE, RWS>);
        case 256: return reinterpret_cast<const void*>(&mamba2WarpDecodeKernel<ST, 256, ONE, RWS>);
        default: return nullptr;
    }
}
template <typename ST>
const void* warpDecodeByT(int N, int T, int rows) {
    if (T != 1) return rows == 8 ? warpDecodeByN<ST, false, 8>(N) : nullptr;
    return rows == 8 ? warpDecodeByN<ST, true, 8>(N) : nullptr;
}
}  // namespace

const void* warpDecodeKernel(int stateDtype, int dstate, int numTokens, int rows) {
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return warpDecodeByT<float>(dstate, numTokens, rows);
        case RSSM_DTYPE_FP16: return warpDecodeByT<__half>(dstate, numTokens, rows);
        case RSSM_DTYPE_BF16: return warpDecodeByT<__nv_bfloat16>(dstate, numTokens, rows);
        default: return nullptr;
    }
}
const void* warpDecodePipeKernel(int stages) {
    switch (stages) {
        case 2: return reinterpret_cast<const void*>(&mamba2WarpDecodePipeKernel<2, 3>);
        case 3: return reinterpret_cast<const void*>(&mamba2WarpDecodePipeKernel<3, 2>);
        default: return nullptr;
    }
}
size_t warpDecodePipeSmem(int stages) { return (size_t)(kWarpDecodeThreads / 32) * stages * pipe::kItemBytes; }
int warpDecodeThreads() { return kWarpDecodeThreads; }
int warpDecodeRows() { return kWarpDecodeRows; }

}  // namespace mamba2
}  // namespace rssm
