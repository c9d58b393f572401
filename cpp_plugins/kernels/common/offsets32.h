// Element offsets in 32-bit arithmetic, the readouts that use them (GDN OFF32 / LEAN32, Mamba-2 L32) and the host rule
// that lets them run: a 32-bit offset product is cheaper than a 64-bit one per item (one IMAD instead of a wide
// multiply-add pair), and the launchers take those instances only where every offset they form stays below 2^31.
#pragma once
#include <stdint.h>

#include <initializer_list>

namespace rssm {

// Host side, the rule in two steps (the largest offsets are products of the strides, so they are formed only once the
// strides are known to be small): every stride non-negative and below 2^31 ...
inline bool stridesFit32(std::initializer_list<int64_t> strides) {
    for (int64_t st : strides)
        if (st < 0 || st >= (int64_t(1) << 31)) return false;
    return true;
}
// ... and every largest offset (reached at the last row / token / head / slot / ring row of its tensor) below 2^31.
inline bool lastOffsetsFit32(std::initializer_list<int64_t> lastOffsets) {
    for (int64_t off : lastOffsets)
        if (off >= (int64_t(1) << 31)) return false;
    return true;
}

#if defined(__CUDACC__)
// Device side: x sx + y sy + z sz in 32-bit arithmetic (the launcher checked its rule with the two functions above).
__device__ __forceinline__ int64_t offset32(int x, int64_t sx, int y, int64_t sy, int z, int64_t sz) {
    return (int64_t)(x * (int)sx + y * (int)sy + z * (int)sz);
}
#endif

}  // namespace rssm
