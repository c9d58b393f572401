// Asynchronous copies to 32-bit shared-memory addresses and predicated stores (sm_80+), for kernels that form their
// slots' shared addresses once instead of converting a generic pointer per copy (the head-staged Mamba-2 read-copy
// readout). Kept apart from cp_async.cuh so that the kernels including that header are not rebuilt. Internal header.
#pragma once
#include <cuda_runtime.h>

namespace rssm {
namespace async {
// The same copies to a 32-bit shared-memory address (a warp's slot address formed once, not converted per copy).
__device__ __forceinline__ void copy16At(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void copy16ZeroIfAt(unsigned dst, const void* src, bool zero) {
    asm volatile("{\n .reg .pred z;\n setp.ne.b32 z, %2, 0;\n cp.async.cg.shared.global [%0], [%1], 16, z;\n}\n" ::"r"(dst),
                 "l"(src), "r"((int)zero)
                 : "memory");
}
__device__ __forceinline__ void copy16IfAt(bool pred, unsigned dst, const void* src) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.cg.shared.global [%0], [%1], 16;\n}\n" ::"r"(dst),
                 "l"(src), "r"((int)pred)
                 : "memory");
}
__device__ __forceinline__ void copy4IfAt(bool pred, unsigned dst, const void* src) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p cp.async.ca.shared.global [%0], [%1], 4;\n}\n" ::"r"(dst),
                 "l"(src), "r"((int)pred)
                 : "memory");
}
__device__ __forceinline__ void copy4ZeroIfAt(bool pred, unsigned dst, const void* src, bool zero) {
    asm volatile(
        "{\n .reg .pred p, z;\n setp.ne.b32 p, %2, 0;\n setp.ne.b32 z, %3, 0;\n @p cp.async.ca.shared.global [%0], [%1], 4, "
        "z;\n}\n" ::"r"(dst),
        "l"(src), "r"((int)pred), "r"((int)zero)
        : "memory");
}
// A predicated 2-byte global store (one instruction, no divergent region).
__device__ __forceinline__ void storeGlobal2If(bool pred, void* dst, unsigned short v) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p st.global.b16 [%1], %2;\n}\n" ::"r"((int)pred), "l"(dst),
                 "h"(v)
                 : "memory");
}
}  // namespace async
}  // namespace rssm
