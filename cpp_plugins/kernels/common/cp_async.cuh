// 16-byte asynchronous global -> shared copies (cp.async, sm_80+) for kernels that stage ring records
// in shared memory: every copy of a CTA is issued at once, so the records are one memory round trip
// away instead of one per record. Internal header.
#pragma once
#include <cuda_runtime.h>

namespace rssm {
namespace async {
// dst (shared) and src (global) 16-byte aligned.
__device__ __forceinline__ void copy16(void* dst, const void* src) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}
// Waits for every cp.async this thread issued (the caller then synchronizes the CTA).
__device__ __forceinline__ void waitAll() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
}  // namespace async
}  // namespace rssm
