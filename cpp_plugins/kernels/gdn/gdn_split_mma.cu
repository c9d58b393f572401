// Instantiations of the GDN speculative verify readout on tensor cores (variant 6, readout "mma",
// gdn_split_mma_kernel.cuh): fp32 / fp16 / bf16 checkpoints x token bucket (MAXT 4: vectors in M rows 0..7;
// 8: all 16), K = 128. The launch is in gdn_split.cu (useVerifyMma).
#include "gdn/gdn_split.h"
#include "gdn/gdn_split_mma_kernel.cuh"

namespace rssm {
namespace gdn {
namespace {
template <typename ST>
const void* entry(int maxTokens, bool wide) {
    if (maxTokens <= 4) return reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 4, 3, false>);
    return wide ? reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 2, true>)
                : reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 3, false>);
}
}  // namespace

const void* verifyMmaKernel(int stateDtype, int numTokens, bool wide) {
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return entry<float>(numTokens, wide);
        case RSSM_DTYPE_FP16: return entry<__half>(numTokens, wide);
        case RSSM_DTYPE_BF16: return entry<__nv_bfloat16>(numTokens, wide);
        default: return nullptr;
    }
}
size_t verifyMmaSmemBytes(int stateDtype) {
    const int perWarp = stateDtype == RSSM_DTYPE_FP32 ? mmaverify::warpBytes<float>() : mmaverify::warpBytes<__half>();
    return (size_t)(mmaverify::kCtaThreads / 32) * perWarp;
}
int verifyMmaThreads() { return mmaverify::kCtaThreads; }

}  // namespace gdn
}  // namespace rssm
