// Tensor-core readouts of 8-row warp items (sm_80+), the pieces the Mamba-2 and the GDN verify readouts share
// (mamba2/mamba2_split_mma_kernel.cuh, gdn/gdn_split_mma_kernel.cuh): TF32 operands, the m16n8k8 TF32 mma, and an
// item's 8 state rows of kN = 128 columns staged in shared memory and read in the register layout
//
//   lane (g = lane / 4, q = lane % 4) holds row g, columns 16k + 2q, 16k + 2q + 1, 16k + 8 + 2q, 16k + 9 + 2q (k < 8).
//
// Per 8-column tile n that is the accumulator (row g, columns 2q, 2q + 1) of an m16n8 fold over the rows, and the B
// fragment of a TF32 k-tile n with its K order permuted (k = q is column 8n + 2q, k = q + 4 is 8n + 2q + 1; the A
// fragment of the vectors the rows are multiplied with uses the same order). Internal header.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>
#include "common/cp_async.cuh"
#include "common/fold_mma.cuh"

namespace rssm {
namespace mmarows {
constexpr int kN = foldmma::kN;        // state columns
constexpr int kRows = foldmma::kRows;  // state rows per item
constexpr int kKT = kN / 16;           // pairs of 8-column tiles (readout TF32 k-tiles, fold accumulators)

using foldmma::packBf16;

__device__ __forceinline__ float bf16Lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16Hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
// fp32 -> TF32 operand, rounded to nearest (ties away from zero): add half a TF32 ulp and let the tensor core drop the
// 13 low mantissa bits, as it does for every TF32 operand (CUTLASS's round_half_ulp_truncate). One IADD instead of
// cvt.rna.tf32.f32, which sm_90 expands into a 5-instruction sequence with inf / NaN checks (it was a fifth of the
// Mamba-2 readout's instructions, ninth session ncu). Finite inputs only: an infinite state value would read as NaN.
__device__ __forceinline__ uint32_t tf32(float x) { return __float_as_uint(x) + 0x1000u; }
// d += a . b, m16n8k8 TF32 (A rows g + 8: a[1] = a[3] = 0).
__device__ __forceinline__ void mmaTf32(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
#endif
}
// d += a . b, m16n8k8 TF32 with all 16 A rows: a0 (row g, k q), a1 (row g + 8, k q), a2 (row g, k q + 4), a3 (row
// g + 8, k q + 4).
__device__ __forceinline__ void mmaTf32Full(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// Stores of a lane's 4 state values of 16-column block k (row pointer `row`, element type ST; the layout above).
template <typename ST>
struct LaneRow;
template <>
struct LaneRow<float> {
    static constexpr bool kExactInBf16 = false;
    __device__ static void storeTile(const float (&v)[4], float* row, int k, int q) {
        *reinterpret_cast<float2*>(row + 16 * k + 2 * q) = make_float2(v[0], v[1]);
        *reinterpret_cast<float2*>(row + 16 * k + 8 + 2 * q) = make_float2(v[2], v[3]);
    }
};
template <typename H16>
struct LaneRow16 {
    static constexpr bool kExactInBf16 = std::is_same<H16, __nv_bfloat16>::value;
    __device__ static float2 toF2(uint32_t v) {
        if constexpr (kExactInBf16) return make_float2(bf16Lo(v), bf16Hi(v));
        else return __half22float2(*reinterpret_cast<const __half2*>(&v));
    }
    __device__ static uint32_t fromF2(float a, float b) {
        if constexpr (kExactInBf16) return packBf16(a, b);
        const __half2 h = __floats2half2_rn(a, b);
        return *reinterpret_cast<const uint32_t*>(&h);
    }
    __device__ static void storeTile(const float (&v)[4], H16* row, int k, int q) {
        *reinterpret_cast<uint32_t*>(row + 16 * k + 2 * q) = fromF2(v[0], v[1]);
        *reinterpret_cast<uint32_t*>(row + 16 * k + 8 + 2 * q) = fromF2(v[2], v[3]);
    }
};
template <>
struct LaneRow<__half> : LaneRow16<__half> {};
template <>
struct LaneRow<__nv_bfloat16> : LaneRow16<__nv_bfloat16> {};

// A warp's copy of an item's 8 checkpoint rows in shared memory: rows kStride elements apart (padded so that the
// lanes' reads of one k-tile spread over the banks), filled with 16-byte cp.async, read in the register layout
// above (read: the 4 values of k-tile k).
template <typename ST>
struct SmemRows {
    static constexpr int kRowBytes = kN * (int)sizeof(ST);
    static constexpr int kPad = 8;  // elements: 32 bytes (fp32), 16 bytes (16-bit)
    static constexpr int kStride = kN + kPad;
    // a multiple of 16; also holds a staged 16-record chunk of B_j / key rows (the fold)
    static constexpr int kBufBytes = kRows * kStride * (int)sizeof(ST) > foldmma::kBBytes
                                         ? kRows * kStride * (int)sizeof(ST)
                                         : foldmma::kBBytes;
    static constexpr int kPieces = kRowBytes / 16;  // 16-byte pieces per row
    __device__ static void issue(ST* dst, const ST* src, int64_t rowStride, int lane) {
#pragma unroll
        for (int i = lane; i < kRows * kPieces; i += 32) {
            const int r = i / kPieces, v = i - r * kPieces;
            async::copy16(reinterpret_cast<unsigned char*>(dst + r * kStride) + 16 * v,
                          reinterpret_cast<const unsigned char*>(src + r * rowStride) + 16 * v);
        }
    }
    // columns 16k + 4q .. 16k + 4q + 3 (a contiguous quad: one shared-memory load)
    __device__ static float4 readQuad(const ST* row, int k, int q) {
        if constexpr (sizeof(ST) == 4) {
            return *reinterpret_cast<const float4*>(row + 16 * k + 4 * q);
        } else {
            const uint2 w = *reinterpret_cast<const uint2*>(row + 16 * k + 4 * q);
            const float2 a = LaneRow16<ST>::toF2(w.x), b = LaneRow16<ST>::toF2(w.y);
            return make_float4(a.x, a.y, b.x, b.y);
        }
    }
    __device__ static void read(float (&v)[4], const ST* row, int k, int q) {
        if constexpr (sizeof(ST) == 4) {
            const float2 a = *reinterpret_cast<const float2*>(row + 16 * k + 2 * q);
            const float2 b = *reinterpret_cast<const float2*>(row + 16 * k + 8 + 2 * q);
            v[0] = a.x;
            v[1] = a.y;
            v[2] = b.x;
            v[3] = b.y;
        } else {
            const float2 a = LaneRow16<ST>::toF2(*reinterpret_cast<const uint32_t*>(row + 16 * k + 2 * q));
            const float2 b = LaneRow16<ST>::toF2(*reinterpret_cast<const uint32_t*>(row + 16 * k + 8 + 2 * q));
            v[0] = a.x;
            v[1] = a.y;
            v[2] = b.x;
            v[3] = b.y;
        }
    }
};

// The fold's A fragments (rows x records) of one 16-record chunk from the four weights of this lane, W[row g][j] for
// the records c0 + 2q, + 1 and c0 + 8 + 2q, + 1 (weight(i), i < 4, in that order), each as three bf16 terms (24
// significant bits: the fold keeps fp32 accuracy; the B operand, bf16 B_j / key rows, is exact).
template <typename WeightOf>
__device__ __forceinline__ void foldWeightTerms(uint32_t (&a)[3][4], WeightOf weight) {
    float t[4][3];
#pragma unroll
    for (int i = 0; i < 4; ++i) foldmma::split3(weight(i), t[i][0], t[i][1], t[i][2]);
#pragma unroll
    for (int s = 0; s < 3; ++s) {
        a[s][0] = packBf16(t[0][s], t[1][s]);  // (row g, records 2q, 2q + 1)
        a[s][1] = 0u;                          // rows g + 8: none
        a[s][2] = packBf16(t[2][s], t[3][s]);  // (row g, records 2q + 8, 2q + 9)
        a[s][3] = 0u;
    }
}
// Columns 16k .. 16k + 15 of the fold for one chunk: v (the lane's 4 values of k-tile k) += W . B_chunk.
// ldmatrix.x4.trans: matrix mi = lane / 8 holds records (mi & 1) * 8 .. + 7 (its rows) x columns 16k + (mi / 2) * 8
// .. + 7, so a lane receives B_{2q}, B_{2q+1} (and + 8) of column 16k + g (and + 8): the B fragments of the
// 8-column tiles 2k and 2k + 1, whose accumulators (row g, columns 2q, 2q + 1) are v[0..1] and v[2..3].
__device__ __forceinline__ void foldTile(float (&v)[4], const uint32_t (&a)[3][4], const uint16_t* sB, int k,
                                         int lane) {
    const int mi = lane >> 3;
    uint32_t b[4];
    foldmma::ldmatrixX4Trans(b, sB + ((mi & 1) * 8 + (lane & 7)) * foldmma::kBStride + (mi >> 1) * 8 + 16 * k);
    float d0[4] = {v[0], v[1], 0.f, 0.f};
    float d1[4] = {v[2], v[3], 0.f, 0.f};
#pragma unroll
    for (int t = 2; t >= 0; --t) {  // small terms first
        foldmma::mmaBf16(d0, a[t], b[0], b[1]);
        foldmma::mmaBf16(d1, a[t], b[2], b[3]);
    }
    v[0] = d0[0];
    v[1] = d0[1];
    v[2] = d1[0];
    v[3] = d1[1];
}

}  // namespace mmarows
}  // namespace rssm
