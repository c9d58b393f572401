// Asynchronous global -> shared copies (cp.async, sm_80+), the one definition every kernel family uses
// (the Mamba-2 and GDN headers keep their short names as aliases). Staging rows this way puts every
// copy of a CTA in flight at once without holding registers. Internal header.
#pragma once
#include <cuda_runtime.h>

namespace rssm {
namespace async {
__device__ __forceinline__ unsigned smemAddr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// dst (shared) and src (global) aligned to the copy size; 16 bytes bypass L1 (.cg), 8 and 4 do not. The *At forms
// take a 32-bit shared-memory address (a warp's slot address formed once, not converted per copy); the pointer forms
// convert dst and call them.
__device__ __forceinline__ void copy16At(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void copy16(void* dst, const void* src) { copy16At(smemAddr(dst), src); }
// copy16At with the L2 256-byte prefetch hint (the conventional warp decode's state loads carry the same hint).
__device__ __forceinline__ void copy16Pf256At(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void copy8(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smemAddr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void copy4(void* dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smemAddr(dst)), "l"(src) : "memory");
}
// 16-byte copy of which only the first `bytes` (0-16) are read; the rest of dst is zero-filled.
__device__ __forceinline__ void copy16Prefix(void* dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(dst)), "l"(src), "r"(bytes) : "memory");
}
// Predicated forms (no branch: the copy is one predicated instruction, so optional per-lane copies do not split the
// warp into divergent regions): copied only where `pred`; copy4ZeroIf writes zeros instead of reading src where `zero`
// (cp.async's ignore-src operand: one predicate, where a run-time src-size made ptxas adjust the address per copy).
__device__ __forceinline__ void copy16IfAt(bool pred, unsigned dst, const void* src) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n"
                 ::"r"(dst), "l"(src), "r"((int)pred)
                 : "memory");
}
__device__ __forceinline__ void copy16If(bool pred, void* dst, const void* src) {
    copy16IfAt(pred, smemAddr(dst), src);
}
__device__ __forceinline__ void copy4IfAt(bool pred, unsigned dst, const void* src) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], 4;\n}\n"
                 ::"r"(dst), "l"(src), "r"((int)pred)
                 : "memory");
}
__device__ __forceinline__ void copy4If(bool pred, void* dst, const void* src) {
    copy4IfAt(pred, smemAddr(dst), src);
}
__device__ __forceinline__ void copy4ZeroIfAt(bool pred, unsigned dst, const void* src, bool zero) {
    asm volatile(
        "{\n .reg .pred p, z;\n setp.ne.b32 p, %2, 0;\n setp.ne.b32 z, %3, 0;\n"
        " @p cp.async.ca.shared.global [%0], [%1], 4, z;\n}\n" ::"r"(dst),
        "l"(src), "r"((int)pred), "r"((int)zero)
        : "memory");
}
__device__ __forceinline__ void copy4ZeroIf(bool pred, void* dst, const void* src, bool zero) {
    copy4ZeroIfAt(pred, smemAddr(dst), src, zero);
}
// 16-byte copy that writes zeros instead of reading src where `zero` (ignore-src; src is then never dereferenced).
__device__ __forceinline__ void copy16ZeroIfAt(unsigned dst, const void* src, bool zero) {
    asm volatile("{\n .reg .pred z;\n setp.ne.b32 z, %2, 0;\n cp.async.cg.shared.global [%0], [%1], 16, z;\n}\n"
                 ::"r"(dst), "l"(src), "r"((int)zero)
                 : "memory");
}
__device__ __forceinline__ void copy16ZeroIf(void* dst, const void* src, bool zero) {
    copy16ZeroIfAt(smemAddr(dst), src, zero);
}
// A predicated 2-byte global store (one instruction, no divergent region).
__device__ __forceinline__ void storeGlobal2If(bool pred, void* dst, unsigned short v) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p st.global.b16 [%1], %2;\n}\n"
                 ::"r"((int)pred), "l"(dst), "h"(v)
                 : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits for every cp.async this thread issued (the caller then synchronizes the CTA).
__device__ __forceinline__ void waitAll() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// Waits until at most one of this thread's committed groups is still in flight (double buffering).
__device__ __forceinline__ void waitAllButOne() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight (N-deep pipelines).
template <int N>
__device__ __forceinline__ void waitGroup() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
}  // namespace async
}  // namespace rssm
