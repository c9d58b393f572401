// Row dot products of a read-only read copy on tensor cores (the dual-precision non-flush step): a warp
// takes a tile of 16 state rows x 128 columns in the copy's own format and forms, for each row, its dot
// product with one 128-element vector (Mamba-2: C of the row's group), without decoding the rows element by
// element and without a cross-lane reduction per row:
//   fp16 rows   : m16n8k16 f16 x f16 -> f32; the vector as fp16, scaled by a power of two into range;
//   fp8 rows    : m16n8k32 e4m3 x e4m3 -> f32 (sm_89+) on the raw codes; the vector as two e4m3 terms
//                 c s = hi + lo / 16 (exact for bf16 / fp16 inputs above 2^-14 of the vector's maximum);
//                 the row's fp32 scale applied to the row's sum;
//   nvfp4 rows  : e2m1 codes widened to e4m3 by a shift (code value x 2^-6, exact), then as fp8; every lane
//                 keeps its own 16-element scale blocks apart (below), so the block scale multiplies the
//                 block's partial sum.
// Layout (t = lane & 3, g = lane >> 2, the mma's thread-in-group and group): lane (g, t) loads rows g and
// g + 8 of the tile, and only the 32 columns of "thread set" t (fp16: 32 i + 8 t + [0, 8), i < 4; fp8:
// 64 i + 16 t + [0, 16), i < 2; nvfp4: 32 t + [0, 32)): one warp load instruction covers 8 whole 64- or
// 128-byte row pieces. The mma's k order is a permutation of the columns, so the vector is laid out in the
// same permutation (readmma::VectorFragments). Column n of the B operand belongs to thread set n >> 1 (fp8,
// nvfp4: n & 1 = the hi / lo term; fp16: even n only), so each lane's accumulator holds the partial dot of
// its own thread set for rows g and g + 8, and a row's dot is the sum of its four lanes (two xor shuffles).
// Accumulation in fp32 (fp8 mma: per 32 products; its internal precision is what Hopper gives, well below the
// read copy's own rounding). Pure CUDA; the tile / fragment helpers below, used by the Mamba-2 read-copy
// readout (mamba2/mamba2_read_mma_kernel.cuh).
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/fold_mma.cuh"

namespace rssm {
namespace readmma {

enum Format { kFp16 = 0, kFp8 = 1, kNvfp4 = 2 };

// d += a . b, m16n8k32 e4m3 x e4m3 -> f32 (sm_89+; a trap below, the launcher never picks it there).
__device__ __forceinline__ void mmaE4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}

// e2m1 codes -> e4m3 bytes of the same value x 2^-6 (sign to bit 7, the three magnitude bits to bits 2-4; e2m1's
// subnormal 0.5 becomes e4m3's subnormal 2^-7). `evens`: the low nibble of each byte; odds: the high nibble.
__device__ __forceinline__ uint32_t e2m1EvensToE4m3(uint32_t w) {
    return ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);
}
__device__ __forceinline__ uint32_t e2m1OddsToE4m3(uint32_t w) { return ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u); }

__device__ __forceinline__ uint32_t u4At(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Tile traits per format: raw row pieces of one lane (rows g and g + 8), the loads, the mma A fragments.
template <int FMT>
struct Tile;

template <>
struct Tile<kFp16> {
    static constexpr int kPieces = 4;  // uint4 per row and lane: bytes 64 i + 16 t
    static constexpr int kBlocks = 8;  // k16 blocks
    static constexpr int kBFrags = 8;  // B fragment pairs per vector
    uint4 r[2][kPieces];
    __device__ __forceinline__ void load(const uint8_t* rowG, const uint8_t* rowG8, int t) {
#pragma unroll
        for (int i = 0; i < kPieces; ++i) {
            r[0][i] = __ldcs(reinterpret_cast<const uint4*>(rowG + 64 * i + 16 * t));
            r[1][i] = __ldcs(reinterpret_cast<const uint4*>(rowG8 + 64 * i + 16 * t));
        }
    }
    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < kPieces; ++i) r[0][i] = r[1][i] = make_uint4(0u, 0u, 0u, 0u);
    }
    // block j: words 2j, 2j + 1 of the lane's 16 per row (= elements 4j .. 4j + 3 of its thread set)
    __device__ __forceinline__ void fragment(uint32_t (&a)[4], int j) const {
        a[0] = u4At(r[0][j >> 1], 2 * (j & 1));
        a[1] = u4At(r[1][j >> 1], 2 * (j & 1));
        a[2] = u4At(r[0][j >> 1], 2 * (j & 1) + 1);
        a[3] = u4At(r[1][j >> 1], 2 * (j & 1) + 1);
    }
};

template <>
struct Tile<kFp8> {
    static constexpr int kPieces = 2;  // bytes 64 i + 16 t
    static constexpr int kBlocks = 4;  // k32 blocks
    static constexpr int kBFrags = 4;
    uint4 r[2][kPieces];
    __device__ __forceinline__ void load(const uint8_t* rowG, const uint8_t* rowG8, int t) {
#pragma unroll
        for (int i = 0; i < kPieces; ++i) {
            r[0][i] = __ldcs(reinterpret_cast<const uint4*>(rowG + 64 * i + 16 * t));
            r[1][i] = __ldcs(reinterpret_cast<const uint4*>(rowG8 + 64 * i + 16 * t));
        }
    }
    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < kPieces; ++i) r[0][i] = r[1][i] = make_uint4(0u, 0u, 0u, 0u);
    }
    // block j: words 2j, 2j + 1 (= elements 8j .. 8j + 7 of the thread set)
    __device__ __forceinline__ void fragment(uint32_t (&a)[4], int j) const {
        a[0] = u4At(r[0][j >> 1], 2 * (j & 1));
        a[1] = u4At(r[1][j >> 1], 2 * (j & 1));
        a[2] = u4At(r[0][j >> 1], 2 * (j & 1) + 1);
        a[3] = u4At(r[1][j >> 1], 2 * (j & 1) + 1);
    }
};

template <>
struct Tile<kNvfp4> {
    static constexpr int kPieces = 1;  // bytes 16 t of a 64-byte row
    static constexpr int kBlocks = 4;
    static constexpr int kBFrags = 4;
    uint4 r[2][kPieces];
    __device__ __forceinline__ void load(const uint8_t* rowG, const uint8_t* rowG8, int t) {
        r[0][0] = __ldcs(reinterpret_cast<const uint4*>(rowG + 16 * t));
        r[1][0] = __ldcs(reinterpret_cast<const uint4*>(rowG8 + 16 * t));
    }
    __device__ __forceinline__ void zero() { r[0][0] = r[1][0] = make_uint4(0u, 0u, 0u, 0u); }
    // block j: word j (elements 8j .. 8j + 7 of the thread set); a0 / a1 the even elements, a2 / a3 the odd ones
    __device__ __forceinline__ void fragment(uint32_t (&a)[4], int j) const {
        const uint32_t wg = u4At(r[0][0], j), wg8 = u4At(r[1][0], j);
        a[0] = e2m1EvensToE4m3(wg);
        a[1] = e2m1EvensToE4m3(wg8);
        a[2] = e2m1OddsToE4m3(wg);
        a[3] = e2m1OddsToE4m3(wg8);
    }
};

// Bytes of one row in the format (N = 128).
template <int FMT>
__host__ __device__ constexpr int rowBytes() {
    return FMT == kFp16 ? 256 : FMT == kFp8 ? 128 : 64;
}

// Offset (elements) of chunk i (of 4 x 8 elements) of the lane's thread set t; the set in this chunk order is
// the "natural" order the fragments index (VectorFragments).
template <int FMT>
__device__ __forceinline__ int setChunk(int i, int t) {
    return FMT == kFp16 ? 32 * i + 8 * t : FMT == kFp8 ? 64 * (i >> 1) + 16 * t + 8 * (i & 1) : 32 * t + 8 * i;
}

// Four floats -> four e4m3 codes (byte q = value q), round to nearest; the callers keep |v| < 2^9, so the
// hardware conversion's saturation never applies (non-finite vectors are made NaN before, see build()).
__device__ __forceinline__ uint32_t e4m3x4(float a, float b, float c, float d) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return (lo & 0xFFFFu) | (hi << 16);
}
__device__ __forceinline__ float e4m3ToFloat(uint32_t byte) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)byte, __NV_E4M3);
    return __half2float(__half(h));
}

// The B fragments of one 128-element vector v (16-bit activation bits at `vec`, bf16 or fp16) for a tile of
// format FMT, and the power of two the vector was scaled by (inv = its inverse). Lane (g, t) supplies B
// column g: fp16 lanes g = 2t (the vector of thread set t), fp8 / nvfp4 lanes g >> 1 = t (term g & 1: hi or
// lo); other lanes zero. All lanes of the warp call it (a warp max).
template <int FMT>
struct VectorFragments {
    uint32_t b[Tile<FMT>::kBFrags][2];
    float inv;  // 1 / scale

    // It runs once per (row, group) a warp meets. The e4m3 forms are out of line (inlined they would double the
    // readout's code); the fp16 one is short and stays inline (measured: out of line it cost the fp16 step 13 us).
    __device__ __forceinline__ void build(const uint16_t* vec, bool bf16, int lane) {
        if constexpr (FMT == kFp16) buildTerms(vec, bf16, lane);
        else buildOutOfLine(vec, bf16, lane);
    }
    __device__ __noinline__ void buildOutOfLine(const uint16_t* vec, bool bf16, int lane) { buildTerms(vec, bf16, lane); }
    __device__ __forceinline__ void buildTerms(const uint16_t* vec, bool bf16, int lane) {
        const int t = lane & 3, g = lane >> 2;
        uint4 raw[4];  // chunk i of the lane's thread set: elements 8i .. 8i + 7 of its natural order
#pragma unroll
        for (int i = 0; i < 4; ++i) raw[i] = *reinterpret_cast<const uint4*>(vec + setChunk<FMT>(i, t));
        auto val = [bf16](const uint4& w, int k) {  // element k < 8 of a chunk
            const uint32_t x = u4At(w, k >> 1);
            const uint16_t h = (uint16_t)((k & 1) ? x >> 16 : x & 0xFFFFu);
            return bf16 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
        };
        uint32_t m = 0u;
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int k = 0; k < 8; ++k) m = max(m, __float_as_uint(val(raw[i], k)) & 0x7FFFFFFFu);
        m = __reduce_max_sync(0xFFFFFFFFu, m);
        // scale 2^(K - e(max)): the maximum lands in [2^K, 2^(K+1)) (fp16 K = 14, e4m3 K = 7); clamped so the
        // scale and its inverse are normal floats (a zero, tiny or non-finite vector keeps a bounded scale)
        constexpr int K = FMT == kFp16 ? 14 : 7;
        int field = 254 + K - (int)(m >> 23);
        field = field < 2 ? 2 : field > 252 ? 252 : field;
        // a non-finite element makes every term NaN (so the outputs are NaN, as the reference's would be)
        const float s = m >= 0x7F800000u ? __uint_as_float(0x7FC00000u) : __uint_as_float((uint32_t)field << 23);
        inv = __uint_as_float((uint32_t)(254 - field) << 23);
        const bool active = FMT == kFp16 ? (g == 2 * t) : ((g >> 1) == t);
        const bool lo = FMT != kFp16 && (g & 1);
#pragma unroll
        for (int j = 0; j < Tile<FMT>::kBFrags; ++j) {
            uint32_t b0 = 0u, b1 = 0u;
            if constexpr (FMT == kFp16) {  // block j: elements 4j .. 4j + 3 (chunk j / 2)
                const uint4& w = raw[j >> 1];
                const int k0 = 4 * (j & 1);
                const __half2 h0 = __floats2half2_rn(val(w, k0) * s, val(w, k0 + 1) * s);
                const __half2 h1 = __floats2half2_rn(val(w, k0 + 2) * s, val(w, k0 + 3) * s);
                b0 = *reinterpret_cast<const uint32_t*>(&h0);
                b1 = *reinterpret_cast<const uint32_t*>(&h1);
            } else {
                // block j = chunk j; element order: fp8 [0, 4) / 4 + [0, 4); nvfp4 2q / 2q + 1
                const uint4& w = raw[j];
                float e0[4], e1[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    e0[q] = val(w, FMT == kFp8 ? q : 2 * q) * s;
                    e1[q] = val(w, FMT == kFp8 ? 4 + q : 2 * q + 1) * s;
                }
                const uint32_t h0 = e4m3x4(e0[0], e0[1], e0[2], e0[3]);
                const uint32_t h1 = e4m3x4(e1[0], e1[1], e1[2], e1[3]);
                if (!lo) {
                    b0 = h0;
                    b1 = h1;
                } else {  // residual x 16 (exact in fp32; fits e4m3 since |residual| <= half an hi ulp)
                    float r0[4], r1[4];
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        r0[q] = (e0[q] - e4m3ToFloat((h0 >> (8 * q)) & 0xFFu)) * 16.f;
                        r1[q] = (e1[q] - e4m3ToFloat((h1 >> (8 * q)) & 0xFFu)) * 16.f;
                    }
                    b0 = e4m3x4(r0[0], r0[1], r0[2], r0[3]);
                    b1 = e4m3x4(r1[0], r1[1], r1[2], r1[3]);
                }
            }
            b[j][0] = active ? b0 : 0u;
            b[j][1] = active ? b1 : 0u;
        }
    }
};

// Host side: the device's SM version (major * 10 + minor), cached per device; 0 if unknown.
inline int deviceSmVersion() {
    static int cache[64] = {0};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        cudaGetLastError();
        return 0;
    }
    if (cache[dev] == 0) {
        int ma = 0, mi = 0;
        if (cudaDeviceGetAttribute(&ma, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&mi, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
        cache[dev] = ma * 10 + mi;
    }
    return cache[dev];
}

}  // namespace readmma
}  // namespace rssm
