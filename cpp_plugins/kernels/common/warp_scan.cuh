// Warp prefix sums shared by every replay kernel family (the log-decay / log-gate prefix sums of the
// records: cum_j = sum_{i<=j} la_i). Pure CUDA, internal header.
#pragma once
#include <cuda_runtime.h>

namespace rssm {
namespace scan {

// Inclusive sum over lanes 0..lane of v (Hillis-Steele: 5 up-shuffles); every lane of the warp calls it.
__device__ __forceinline__ float warpInclusiveSum(float v, int lane) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const float t = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += t;
    }
    return v;
}

// sOut[j] = sum_{i<=j} sIn[i] * mul for j < n, 32 records per pass with a carry; one warp calls it.
__device__ __forceinline__ void warpPrefixScaled(const float* sIn, float mul, float* sOut, int n) {
    const int lane = threadIdx.x & 31;
    float carry = 0.f;
    for (int base = 0; base < n; base += 32) {
        const int j = base + lane;
        float v = warpInclusiveSum(j < n ? sIn[j] * mul : 0.f, lane);
        v += carry;
        if (j < n) sOut[j] = v;
        carry = __shfl_sync(0xffffffffu, v, 31);
    }
}

}  // namespace scan
}  // namespace rssm
