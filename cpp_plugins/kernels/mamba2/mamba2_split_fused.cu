// Instantiations of the one-launch small-batch standard step (mamba2_split_fused.cuh): checkpoint dtype
// (fp32 / fp16 / bf16) x dstate (128 / 256) x activation dtype (bf16 / fp16), and for dstate 128 with bf16
// activations the tensor-core fold from staged rows (mmaFold) or the CUDA-core one.
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_split_fused.cuh"

namespace rssm {
namespace mamba2 {
namespace {
template <typename ST>
const void* fusedByShape(int dstate, bool bf16, bool mmaFold) {
    switch (dstate) {
        case 128:
            if (bf16 && mmaFold) return reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 128, true, true>);
            return bf16 ? reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 128, true, false>)
                        : reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 128, false, false>);
        case 256: return bf16 ? reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 256, true, false>)
                              : reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 256, false, false>);
        default: return nullptr;
    }
}
}  // namespace

const void* splitFusedKernel(int stateDtype, int dstate, int actDtype, bool mmaFold) {
    const bool bf16 = actDtype == RSSM_DTYPE_BF16;
    if (!bf16 && actDtype != RSSM_DTYPE_FP16) return nullptr;
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return fusedByShape<float>(dstate, bf16, mmaFold);
        case RSSM_DTYPE_FP16: return fusedByShape<__half>(dstate, bf16, mmaFold);
        case RSSM_DTYPE_BF16: return fusedByShape<__nv_bfloat16>(dstate, bf16, mmaFold);
        default: return nullptr;
    }
}
size_t splitFusedSmemBytes(int dstate, int warps, bool mmaFold) { return splitFusedSmemBytesM2(dstate, warps, mmaFold); }
bool splitFusedMmaFoldRuns(int dstate, int actDtype) { return dstate == 128 && actDtype == RSSM_DTYPE_BF16; }

}  // namespace mamba2
}  // namespace rssm
