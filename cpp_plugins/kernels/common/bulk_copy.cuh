// Bulk global -> shared copies (cp.async.bulk, the sm_90 TMA unit without a tensor map) and the mbarriers that count
// their bytes: the one definition every kernel family uses (the Mamba-2 persistent kernel and the GDN standard-step
// readout's row prefetch). Compiled only for sm_90+ (the launchers check the device). Internal header.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace rssm {
namespace bulk {
__device__ __forceinline__ uint32_t smemU32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemU32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fenceBarrierInit() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Orders this thread's earlier generic-proxy accesses to shared memory before its later async-proxy ones (a bulk copy
// into a buffer the warp has just read, or the first copy after an mbarrier's initialization).
__device__ __forceinline__ void fenceProxyAsyncShared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void mbarExpectTx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smemU32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarArrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemU32(bar)) : "memory");
}
__device__ __forceinline__ void mbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemU32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred P1;\n"
        "LAB_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra DONE;\n"
        "bra LAB_WAIT;\n"
        "DONE:\n"
        "}\n" ::"r"(smemU32(bar)),
        "r"(parity)
        : "memory");
}
// Global -> shared bulk copy (TMA, no tensor map): bytes % 16 == 0, both addresses 16-byte aligned.
__device__ __forceinline__ void bulkG2S(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smemU32(dst)),
                 "l"(src), "r"(bytes), "r"(smemU32(bar))
                 : "memory");
}
// Same with an L2 evict-first hint (the checkpoint / state tile is read once per step).
__device__ __forceinline__ void bulkG2SEvictFirst(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                  uint64_t policy) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
        "%4;\n" ::"r"(smemU32(dst)),
        "l"(src), "r"(bytes), "r"(smemU32(bar)), "l"(policy)
        : "memory");
}
__device__ __forceinline__ uint64_t policyEvictFirst() {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}
}  // namespace bulk
}  // namespace rssm
