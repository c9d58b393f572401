// L1 prefetch of a split kernel's head record (HRPF; the GDN tensor-core verify readout, gdn/gdn_split_mma_kernel.cuh.
// The Mamba-2 tensor-core readout measured 0.5-2.0% slower with it at T = 4 / 8 and does not use it.)
#pragma once
#include <cstdint>

namespace rssm {
namespace mmarows {

// The L1 lines of a head record `hr` (fp32 words) that an item loads from L2 right before use: words [0, 32) (scales
// and cursor words; lanes 0 and 1, since a record is not 128-byte aligned) and [from, to) (the caller's coefficient
// range; lanes 2..31, one line each, so at most its first 30 lines). One prefetch.global.L1 per lane: a hint, no
// register result, no value changed. Called by all 32 lanes of a warp.
__device__ __forceinline__ void prefetchHeadRecordL1(const float* hr, int from, int to, int lane) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(hr + to);
    uintptr_t a;
    if (lane < 2) a = reinterpret_cast<uintptr_t>(hr + 31 * lane);
    else a = (reinterpret_cast<uintptr_t>(hr + from) & ~uintptr_t(127)) + (uintptr_t)(lane - 2) * 128;
    if (lane < 2 || a < end) asm volatile("prefetch.global.L1 [%0];" ::"l"(a));
}

}  // namespace mmarows
}  // namespace rssm
