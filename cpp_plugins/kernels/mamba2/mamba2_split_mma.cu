// Instantiations of the Mamba-2 split readout on tensor cores (variant 4, readout "mma",
// mamba2_split_mma_kernel.cuh): fp32 / fp16 / bf16 checkpoints, dstate 128, any mode and T <= 8.
#include <type_traits>
#include "common/env_switch.h"
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_split_mma_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {
template <typename ST>
const void* entry(bool hoistC, bool prefetchX, bool zPairs, bool off32) {
    // fp32 rows with the default C / x loads and 4-byte aligned z pairs: z one item ahead and the head records before
    // C (mamba2SplitReadoutMmaStagedKernel's ZPF); RSSM_MAMBA2_MMA_ZPF=0 (A/B, read per launch) turns it off. off32:
    // its L32 instance (32-bit item offsets; the caller checked the rule)
    if constexpr (std::is_same<ST, float>::value) {
        if (hoistC && prefetchX && zPairs && envSwitch("RSSM_MAMBA2_MMA_ZPF", true))
            return off32 ? reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<ST, true, true, true, true>)
                         : reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<ST, true, true, true>);
    }
    if (prefetchX)
        return hoistC ? reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<ST, true, true>)
                      : reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<ST, false, true>);
    return hoistC ? reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<ST, true, false>)
                  : reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<ST, false, false>);
}
}  // namespace

const void* splitMmaReadoutKernel(int stateDtype, int dstate, bool hoistC, bool prefetchX, bool zPairs, bool off32) {
    if (dstate != mmareadout::kN) return nullptr;
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return entry<float>(hoistC, prefetchX, zPairs, off32);
        case RSSM_DTYPE_FP16: return entry<__half>(hoistC, prefetchX, zPairs, off32);
        case RSSM_DTYPE_BF16: return entry<__nv_bfloat16>(hoistC, prefetchX, zPairs, off32);
        default: return nullptr;
    }
}
size_t splitMmaReadoutSmemBytes(int stateDtype) {
    const int perWarp = stateDtype == RSSM_DTYPE_FP32 ? mmareadout::stagedWarpBytes<float>()
                                                      : mmareadout::stagedWarpBytes<__half>();
    return (size_t)(mmareadout::kCtaThreads / 32) * perWarp;
}

}  // namespace mamba2
}  // namespace rssm
