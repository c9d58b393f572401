// Bulk global -> shared copies (TMA without a tensor map, sm_90+) completed on an mbarrier, and the mbarrier
// operations around them. Below sm_90 every function is a no-op: callers pick these paths only on sm_90+
// (the launchers check the device; kernels that use them keep a fallback or are never launched there).
#pragma once
#include <cstdint>
#include "common/cp_async.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RSSM_HAS_BULK_COPY 1
#else
#define RSSM_HAS_BULK_COPY 0
#endif

namespace rssm {
namespace bulk {

// Initializes the barrier for `count` arrivals and makes the initialization visible to the async proxy.
__device__ __forceinline__ void mbarInit(uint64_t* bar, uint32_t count) {
#if RSSM_HAS_BULK_COPY
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(async::smemAddr(bar)), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
// One arrival that also expects `bytes` of transactions (the bulk copies of this phase).
__device__ __forceinline__ void mbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
#if RSSM_HAS_BULK_COPY
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(async::smemAddr(bar)), "r"(bytes)
                 : "memory");
#endif
}
// dst (shared) <- src (global), `bytes` % 16 == 0, both 16-byte aligned; completes `bytes` on `bar`.
__device__ __forceinline__ void bulkG2S(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if RSSM_HAS_BULK_COPY
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            async::smemAddr(dst)),
        "l"(src), "r"(bytes), "r"(async::smemAddr(bar))
        : "memory");
#endif
}
// Waits until the barrier's phase with parity `phase` has completed.
__device__ __forceinline__ void mbarWait(uint64_t* bar, uint32_t phase) {
#if RSSM_HAS_BULK_COPY
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n .reg .pred P1;\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n selp.b32 %0, 1, 0, P1;\n}\n"
            : "=r"(done)
            : "r"(async::smemAddr(bar)), "r"(phase)
            : "memory");
    } while (!done);
#endif
}
// Orders this thread's earlier generic-proxy shared-memory accesses before later async-proxy ones (a bulk copy
// that overwrites a buffer the thread has read).
__device__ __forceinline__ void fenceProxyAsyncShared() {
#if RSSM_HAS_BULK_COPY
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace bulk
}  // namespace rssm
