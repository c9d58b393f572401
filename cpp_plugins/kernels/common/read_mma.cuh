// Row dot products of a read-only read copy on tensor cores (the dual-precision non-flush step): a warp
// takes a tile of 16 state rows x 128 columns in the copy's own format and forms, for each row, its dot
// product with one 128-element vector (Mamba-2: C of the row's group) on m16n8k16 f16 mma with fp32
// accumulation, without a cross-lane reduction per row:
//   fp16 rows  : the rows themselves are the A operand;
//   fp8 rows   : e4m3 codes -> f16 by the hardware conversion (exact), the row's fp32 scale applied to its sum;
//   nvfp4 rows : e2m1 codes -> e4m3 by a shift (value x 2^-6, exact) -> f16; every lane keeps its own
//                16-element scale blocks apart (below), so the block scale multiplies the block's partial sum.
// (Hopper has no e4m3 mma.sync of its own: ptxas lowers m16n8k32.e4m3 to the same conversions plus f16 mma, and
// converts the B operand again at every mma. Converting A here and keeping B in f16 saves that.)
// The vector is the B operand in fp16, scaled by a power of two that puts its maximum in [2^14, 2^15) (bf16 and
// fp16 inputs are exact there down to 2^-10 of the maximum; smaller elements round at 2^-24 of it).
//
// Layout (t = lane & 3, g = lane >> 2, the mma's thread-in-group and group): the mma's rows g and g + 8 are the
// tile's rows 2g and 2g + 1, and lane (g, t) takes only the 32 columns of "thread set" t of them (fp16:
// 32 i + 8 t + [0, 8), i < 4; fp8: 64 i + 16 t + [0, 16), i < 2; nvfp4: 32 t + [0, 32)), 16-byte pieces of the
// staged rows. The mma's k order is a permutation of the columns, so the vector's fragments follow the same
// permutation (VectorFragments). Column n of the B operand belongs to thread set n / 2 (even n; odd columns are
// zero), so each lane's accumulator holds the partial dot of its own thread set for its two rows, and a row's dot
// is the sum of its four lanes (two xor shuffles). Pure CUDA; used by the Mamba-2 read-copy readout
// (mamba2/mamba2_read_mma_kernel.cuh).
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/fold_mma.cuh"

namespace rssm {
namespace readmma {

enum Format { kFp16 = 0, kFp8 = 1, kNvfp4 = 2 };

// silu(v) = v / (1 + e^-v) with the approximate exponential and reciprocal (2 ulp; the readouts round the gated
// output to 16 bits). Large negative v gives -0, NaN stays NaN.
__device__ __forceinline__ float fastSilu(float v) {
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * -1.4426950408889634f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
    return v * r;
}

// Bytes of one 128-element row in the format.
template <int FMT>
__host__ __device__ constexpr int rowBytes() {
    return FMT == kFp16 ? 256 : FMT == kFp8 ? 128 : 64;
}

// Byte offset of 16-byte chunk `c` of tile row `r` (16 rows of rowBytes) in shared memory. The rows a quarter
// warp reads with one 16-byte load are 4p + {0, 2} (or + {1, 3}), four chunks each; the swizzle puts them in
// different banks: rows of >= 128 bytes flip chunk bit 2 with row bit 1, 64-byte rows swap places r <-> r ^ 1
// when row bit 1 is set (a 64-byte row spans half the banks).
template <int FMT>
__device__ __forceinline__ int stagedChunkOffset(int r, int c) {
    if constexpr (FMT == kNvfp4) return (r ^ ((r >> 1) & 1)) * 64 + 16 * c;
    else return r * rowBytes<FMT>() + 16 * (c ^ (((r >> 1) & 1) << 2));
}

// e2m1 codes -> e4m3 bytes of the same value x 2^-6 (sign to bit 7, the three magnitude bits to bits 2-4; e2m1's
// subnormal 0.5 becomes e4m3's subnormal 2^-7). Evens: the low nibble of each byte; odds: the high nibble.
__device__ __forceinline__ uint32_t e2m1EvensToE4m3(uint32_t w) {
    return ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);
}
__device__ __forceinline__ uint32_t e2m1OddsToE4m3(uint32_t w) { return ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u); }

// Two e4m3 codes (bits 0-7, 8-15 of w16) -> f16x2 (low half from bits 0-7); exact.
__device__ __forceinline__ uint32_t e4m3x2ToF16x2(uint32_t w16) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w16 & 0xFFFFu), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}

// The same for the two codes in bits 16-31 of w, taken as the upper half of the register (no shift in the PTX: ptxas
// may read the half directly). The e4m3x2 conversion is sm_89+; older targets (sm_80 builds) shift and take the
// intrinsic's software path (same values).
__device__ __forceinline__ uint32_t e4m3x2HiToF16x2(uint32_t w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    uint32_t r;
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;\n}\n" : "=r"(r) : "r"(w));
    return r;
#else
    return e4m3x2ToF16x2(w >> 16);
#endif
}

__device__ __forceinline__ uint32_t u4At(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// A fragments of the 8 k16 blocks of one tile, read from the staged rows (rows 2g, 2g + 1 of `rows`, the lane's
// thread set), as f16x2 words: a[j] = {row 2g lo, row 2g + 1 lo, row 2g hi, row 2g + 1 hi} of block j.
// HI: the upper code pairs converted by e4m3x2HiToF16x2 (the lean GDN read-copy readout) instead of a shift first.
template <int FMT, bool HI = false>
struct TileFragments {
    uint32_t a[8][4];
    __device__ __forceinline__ static uint32_t hiPair(uint32_t w) {
        if constexpr (HI) return e4m3x2HiToF16x2(w);
        else return e4m3x2ToF16x2(w >> 16);
    }
    __device__ __forceinline__ void load(const uint8_t* rows, int g, int t) {
        const int r0 = 2 * g, r1 = 2 * g + 1;
        if constexpr (FMT == kFp16) {  // piece i: chunk 4i + t (elements 32 i + 8 t ..); block j: words 2j, 2j + 1
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint4 p0 = *reinterpret_cast<const uint4*>(rows + stagedChunkOffset<FMT>(r0, 4 * i + t));
                const uint4 p1 = *reinterpret_cast<const uint4*>(rows + stagedChunkOffset<FMT>(r1, 4 * i + t));
                a[2 * i][0] = p0.x;
                a[2 * i][1] = p1.x;
                a[2 * i][2] = p0.y;
                a[2 * i][3] = p1.y;
                a[2 * i + 1][0] = p0.z;
                a[2 * i + 1][1] = p1.z;
                a[2 * i + 1][2] = p0.w;
                a[2 * i + 1][3] = p1.w;
            }
        } else if constexpr (FMT == kFp8) {  // piece i: chunk 4i + t; word k = elements 4k .. 4k + 3 = block k
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const uint4 p0 = *reinterpret_cast<const uint4*>(rows + stagedChunkOffset<FMT>(r0, 4 * i + t));
                const uint4 p1 = *reinterpret_cast<const uint4*>(rows + stagedChunkOffset<FMT>(r1, 4 * i + t));
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const uint32_t w0 = u4At(p0, m), w1 = u4At(p1, m);
                    a[4 * i + m][0] = e4m3x2ToF16x2(w0);
                    a[4 * i + m][1] = e4m3x2ToF16x2(w1);
                    a[4 * i + m][2] = hiPair(w0);
                    a[4 * i + m][3] = hiPair(w1);
                }
            }
        } else {  // piece = chunk t; word w = elements 8w .. 8w + 7 -> blocks 2w (evens / odds 0-3), 2w + 1 (4-7)
            const uint4 p0 = *reinterpret_cast<const uint4*>(rows + stagedChunkOffset<FMT>(r0, t));
            const uint4 p1 = *reinterpret_cast<const uint4*>(rows + stagedChunkOffset<FMT>(r1, t));
#pragma unroll
            for (int w = 0; w < 4; ++w) {
                const uint32_t e0 = e2m1EvensToE4m3(u4At(p0, w)), o0 = e2m1OddsToE4m3(u4At(p0, w));
                const uint32_t e1 = e2m1EvensToE4m3(u4At(p1, w)), o1 = e2m1OddsToE4m3(u4At(p1, w));
                a[2 * w][0] = e4m3x2ToF16x2(e0);
                a[2 * w][1] = e4m3x2ToF16x2(e1);
                a[2 * w][2] = e4m3x2ToF16x2(o0);
                a[2 * w][3] = e4m3x2ToF16x2(o1);
                a[2 * w + 1][0] = hiPair(e0);
                a[2 * w + 1][1] = hiPair(e1);
                a[2 * w + 1][2] = hiPair(o0);
                a[2 * w + 1][3] = hiPair(o1);
            }
        }
    }
};

// Offset (elements) of chunk i (of 4 x 8 elements) of thread set t; the set in this chunk order is the "natural"
// order li = 8 i + k the fragments index.
template <int FMT>
__device__ __forceinline__ int setChunk(int i, int t) {
    return FMT == kFp16 ? 32 * i + 8 * t : FMT == kFp8 ? 64 * (i >> 1) + 16 * t + 8 * (i & 1) : 32 * t + 8 * i;
}

// B fragments of NV (1 or 2) 128-element vectors (16-bit activation bits, bf16 or fp16) and the inverses of the
// powers of two they were scaled by. Lane (g, t) supplies B column g: with one vector, lanes g = 2t carry it at thread
// set t's elements in the tile's k order (odd columns zero); with two, lanes g = 2t carry vector 0 and g = 2t + 1
// vector 1, so a lane's accumulators c0 / c1 (c2 / c3) are its partial dots with vectors 0 / 1 for row 2g (2g + 1).
// Other lanes zero. All lanes of the warp call it (warp maxima).
template <int FMT, int NV = 1>
struct VectorFragments {
    uint32_t b[8][2];
    float inv[NV];  // 1 / scale of each vector

    __device__ __forceinline__ void build(const uint16_t* vec0, const uint16_t* vec1, bool bf16, int lane) {
        const int t = lane & 3, g = lane >> 2;
        const int which = NV == 2 ? (g & 1) : 0;
        const uint16_t* vec = which ? vec1 : vec0;
        uint4 raw[4];  // chunk i of the lane's thread set: natural elements 8i .. 8i + 7
#pragma unroll
        for (int i = 0; i < 4; ++i) raw[i] = *reinterpret_cast<const uint4*>(vec + setChunk<FMT>(i, t));
        auto val = [bf16, &raw](int li) {  // natural element li < 32
            const uint32_t x = u4At(raw[li >> 3], (li & 7) >> 1);
            const uint16_t h = (uint16_t)((li & 1) ? x >> 16 : x & 0xFFFFu);
            return bf16 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
        };
        uint32_t m = 0u;
#pragma unroll
        for (int li = 0; li < 32; ++li) m = max(m, __float_as_uint(val(li)) & 0x7FFFFFFFu);
        // scale 2^(14 - e(max)) per vector, clamped so the scale and its inverse are normal floats; a non-finite
        // element makes every term of its vector NaN (the outputs are NaN, as the reference's would be)
        float s = 1.f;
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            const uint32_t mv = __reduce_max_sync(0xFFFFFFFFu, which == v ? m : 0u);
            int field = 268 - (int)(mv >> 23);
            field = field < 2 ? 2 : field > 252 ? 252 : field;
            const float sv = mv >= 0x7F800000u ? __uint_as_float(0x7FC00000u) : __uint_as_float((uint32_t)field << 23);
            inv[v] = __uint_as_float((uint32_t)(254 - field) << 23);
            if (which == v) s = sv;
        }
        const bool active = NV == 2 ? ((g >> 1) == t) : (g == 2 * t);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            // block j's k pairs: fp16 / fp8 natural elements (4j, 4j + 1), (4j + 2, 4j + 3); nvfp4 (block 2w + h)
            // (8w + 4h, 8w + 4h + 2), (8w + 4h + 1, 8w + 4h + 3)
            const int e00 = FMT == kNvfp4 ? 8 * (j >> 1) + 4 * (j & 1) : 4 * j;
            const int e01 = FMT == kNvfp4 ? e00 + 2 : e00 + 1;
            const int e10 = FMT == kNvfp4 ? e00 + 1 : e00 + 2;
            const int e11 = e00 + 3;
            const __half2 h0 = __floats2half2_rn(val(e00) * s, val(e01) * s);
            const __half2 h1 = __floats2half2_rn(val(e10) * s, val(e11) * s);
            b[j][0] = active ? *reinterpret_cast<const uint32_t*>(&h0) : 0u;
            b[j][1] = active ? *reinterpret_cast<const uint32_t*>(&h1) : 0u;
        }
    }
};

// RSSM_READ_MMA_CTAS = n (tests) caps a read-copy readout's grid at n CTAs, so that each warp walks many tiles across
// heads and rows; otherwise `grid`. Host side, read per launch.
inline int cappedReadMmaGrid(int grid) {
    const char* cap = getenv("RSSM_READ_MMA_CTAS");
    const int n = cap ? atoi(cap) : 0;
    return n > 0 && n < grid ? n : grid;
}

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
