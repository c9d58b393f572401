// Bulk L2 prefetch (sm_90+: the TMA unit's cp.async.bulk.prefetch.L2): a hint with no completion, no shared memory
// and no register result. Used by the GDN split prep's L2PF instance (gdn/gdn_split_kernels.cuh) to start the
// readout's state stream while the prep itself moves almost no bytes. A no-op below sm_90.
#pragma once
#include <cstdint>

namespace rssm {

// `bytes` from `src`: both 16-byte multiples (the caller checks).
__device__ __forceinline__ void prefetchBulkL2(const void* src, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#else
    (void)src;
    (void)bytes;
#endif
}

}  // namespace rssm
