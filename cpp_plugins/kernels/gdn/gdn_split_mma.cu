// Instantiations of the GDN speculative verify readout on tensor cores (variant 6, readout "mma",
// gdn_split_mma_kernel.cuh): fp32 / fp16 / bf16 checkpoints x token bucket (MAXT 4: vectors in M rows 0..7;
// 8: all 16), K = 128. The launch is in gdn_split.cu (useVerifyMma).
#include "gdn/gdn_split.h"
#include "gdn/gdn_split_mma_kernel.cuh"

#include <type_traits>

namespace rssm {
namespace gdn {
namespace {
// T <= 4: 3 CTAs per SM (80 registers). T > 4: 2 CTAs per SM (128 registers) with the vectors of M rows 8..15 held
// in registers: the 3-CTA build of it (80 registers, those loads inside the product loop, 140 bytes of spills) ran
// 1.2-1.9x slower (q35-4b B = 256 T = 8: 538-824 vs 327-434 us; tenth session, docs/kernels-gdn.md).
template <typename ST>
const void* entry(int maxTokens, bool prefetchU, bool lean32, bool mns, bool keyb, bool hrpf) {
    if (maxTokens <= 4) {
        // LEAN32 (fp32 rows with the u_j prefetch, the T <= 4 default): 32-bit item offsets, the key head by a shift;
        // HRPF (the default) on top
        if constexpr (std::is_same<ST, float>::value) {
            if (prefetchU && lean32 && hrpf)
                return reinterpret_cast<const void*>(
                    &gdnSplitVerifyMmaKernel<ST, 4, 3, false, true, true, false, false, true>);
            if (prefetchU && lean32)
                return reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 4, 3, false, true, true>);
        }
        return prefetchU ? reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 4, 3, false, true>)
                         : reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 4, 3, false, false>);
    }
    // LEAN32 (fp32 rows without the u_j prefetch: the T > 4 default); MNS, KEYB and HRPF (the defaults) on top
    if constexpr (std::is_same<ST, float>::value) {
        if (!prefetchU && lean32) {
            if (mns && keyb && hrpf)
                return reinterpret_cast<const void*>(
                    &gdnSplitVerifyMmaKernel<ST, 8, 2, true, false, true, true, true, true>);
            if (mns && keyb)
                return reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 2, true, false, true, true, true>);
            if (mns) return reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 2, true, false, true, true>);
            return reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 2, true, false, true>);
        }
    }
    return prefetchU ? reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 2, true, true>)
                     : reinterpret_cast<const void*>(&gdnSplitVerifyMmaKernel<ST, 8, 2, true, false>);
}
// shared memory per warp of the token bucket entry() picks (16-bit rows: the __half layout); mns: the MNS instance's,
// keyb: its KEYB form's
template <typename ST>
int perWarpBytes(int maxTokens, bool mns, bool keyb) {
    return maxTokens <= 4 ? mmaverify::warpBytes<ST, 4>()
           : mns          ? (keyb ? mmaverify::warpBytes<ST, 8, true, true>() : mmaverify::warpBytes<ST, 8, true>())
                          : mmaverify::warpBytes<ST, 8>();
}
}  // namespace

const void* verifyMmaKernel(int stateDtype, int numTokens, bool prefetchU, bool lean32, bool mns, bool keyb,
                            bool hrpf) {
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return entry<float>(numTokens, prefetchU, lean32, mns, keyb, hrpf);
        case RSSM_DTYPE_FP16: return entry<__half>(numTokens, prefetchU, lean32, false, false, false);
        case RSSM_DTYPE_BF16: return entry<__nv_bfloat16>(numTokens, prefetchU, lean32, false, false, false);
        default: return nullptr;
    }
}
size_t verifyMmaSmemBytes(int stateDtype, int numTokens, bool mns, bool keyb) {
    const int perWarp = stateDtype == RSSM_DTYPE_FP32 ? perWarpBytes<float>(numTokens, mns, keyb)
                                                      : perWarpBytes<__half>(numTokens, false, false);
    return (size_t)(mmaverify::kCtaThreads / 32) * perWarp;
}
int verifyMmaThreads() { return mmaverify::kCtaThreads; }

}  // namespace gdn
}  // namespace rssm
