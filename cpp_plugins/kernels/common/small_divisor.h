// Exact division of small non-negative integers by a run-time divisor with one multiply-high (twenty-third session).
// Used where a kernel divides per item by a launch constant (e.g. value head -> key head, hv / group), which costs
// ~27 instructions per item as an integer division.
//
// For 1 <= d < 2^16 and 0 <= n < 2^16: with m = ceil(2^32 / d), m d = 2^32 + e with 0 <= e <= d - 1, so
// n m / 2^32 = n / d + n e / (d 2^32), and n e < 2^32 keeps floor(n m / 2^32) = floor(n / d). d = 1 (m would be 2^32)
// returns n. Host and device; the host form is tested exhaustively (tests/core/test_small_divisor.py).
#pragma once
#include <stdint.h>

#if defined(__CUDACC__)
#define RSSM_SMALL_DIV_HD __host__ __device__ __forceinline__
#else
#define RSSM_SMALL_DIV_HD inline
#endif

namespace rssm {

struct SmallDivisor {
    static constexpr uint32_t kMaxOperand = 1u << 16;  // divisor and dividend: below this
    uint32_t d, m;
    RSSM_SMALL_DIV_HD explicit SmallDivisor(uint32_t divisor)
        : d(divisor), m(divisor > 1 ? (uint32_t)((0x100000000ull + divisor - 1) / divisor) : 0u) {}
    RSSM_SMALL_DIV_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
        const uint32_t q = __umulhi(n, m);
#else
        const uint32_t q = (uint32_t)(((uint64_t)n * m) >> 32);
#endif
        return d > 1 ? q : n;
    }
};

}  // namespace rssm
