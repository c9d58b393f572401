// Instantiations of the one-launch small-batch standard step (mamba2_split_fused.cuh): checkpoint dtype
// (fp32 / fp16 / bf16) x dstate (128 / 256) x activation dtype (bf16 / fp16).
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_split_fused.cuh"

namespace rssm {
namespace mamba2 {
namespace {
template <typename ST>
const void* fusedByShape(int dstate, bool bf16) {
    switch (dstate) {
        case 128: return bf16 ? reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 128, true>)
                              : reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 128, false>);
        case 256: return bf16 ? reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 256, true>)
                              : reinterpret_cast<const void*>(&mamba2SplitFusedKernel<ST, 256, false>);
        default: return nullptr;
    }
}
}  // namespace

const void* splitFusedKernel(int stateDtype, int dstate, int actDtype) {
    const bool bf16 = actDtype == RSSM_DTYPE_BF16;
    if (!bf16 && actDtype != RSSM_DTYPE_FP16) return nullptr;
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return fusedByShape<float>(dstate, bf16);
        case RSSM_DTYPE_FP16: return fusedByShape<__half>(dstate, bf16);
        case RSSM_DTYPE_BF16: return fusedByShape<__nv_bfloat16>(dstate, bf16);
        default: return nullptr;
    }
}
size_t splitFusedSmemBytes(int dstate, int warps) { return splitFusedSmemBytesM2(dstate, warps); }

}  // namespace mamba2
}  // namespace rssm
