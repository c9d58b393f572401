// Checkpoint row formats of the split readouts (Mamba-2 variant 4, GDN variant 6) in the column-per-lane
// layout of stream_rows.cuh: lane l holds the 4 elements 4 l + 128 i (i < QPL) of each of the warp's rows.
// The rows are loaded as raw bits (the item's registers stay small) and decoded at use:
//   float / __half / __nv_bfloat16: the checkpoint dtypes (read and written on flush items);
//   Fp8Rows: e4m3 codes with one fp32 scale per 128 elements of a row (read-only: the dual-precision
//            read copy, formats.md section 6);
//   Nvfp4Rows: e2m1 codes, one e4m3 scale per 16 elements and one fp32 scale per state (read-only;
//            formats.md section 7).
// For the scaled formats decode() returns the exact code values times a power of two (the bit-rebias
// decoders of dual_precision/dp_codec.cuh) and factor() the row's multiplier, so a row dot product is
// factor * sum_k decode_k c_k (one multiply per row instead of one per element). Pure CUDA.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "common/rssm_common.h"
#include "common/stream_rows.cuh"

namespace rssm {
namespace stream {

struct Fp8Rows {};
struct Nvfp4Rows {};

// Scale tensors of a scaled read copy (kernel argument of the split readouts; unused for float / 16-bit
// checkpoints). Contiguous, indexed by (slot, head, row) as dual_precision/dp_state_io.cuh rowScaleIndex.
struct ReadCopyScales {
    const void* scale;    // fp8: fp32 [S, H, P, N / 128]; nvfp4: e4m3 bytes [S, H, P, N / 16]
    const float* gscale;  // nvfp4: fp32 [S, H]
    int32_t nheads;       // H of the scale tensors' layout
    int32_t headdim;      // P (rows per state)
};

// Launcher rule of a scaled read copy (host): format FP8_E4M3 / NVFP4, state row length 128 (`rowLen`: Mamba-2
// dstate, GDN head_k), scale tensors given for [S, heads, headdim] states. RSSM_OK or the error, named by op.
inline int checkReadCopy(const char* op, int fmt, const char* rowName, int rowLen, const ReadCopyScales& rc, int heads,
                         int headdim) {
    if (fmt != RSSM_DTYPE_FP8_E4M3 && fmt != RSSM_DTYPE_NVFP4)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: the read format must be FP8_E4M3 (%d) or NVFP4 (%d); got %d", op,
                        RSSM_DTYPE_FP8_E4M3, RSSM_DTYPE_NVFP4, fmt);
    if (rowLen != 128)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: scaled read formats need %s 128; got %d", op, rowName, rowLen);
    if (!rc.scale || (fmt == RSSM_DTYPE_NVFP4 && !rc.gscale) || rc.nheads != heads || rc.headdim != headdim)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: the read copy's scale tensors (scale %p, gscale %p) must be "
                        "given for [S, %d, %d] states; got layout [S, %d, %d]", op, rc.scale, (const void*)rc.gscale,
                        heads, headdim, rc.nheads, rc.headdim);
    return RSSM_OK;
}

template <typename ST>
struct RowQuad {  // float / __half / __nv_bfloat16: decoded at load (StateRow4), as the float4 itself
    static constexpr bool kScaled = false;
    static constexpr bool kWritable = true;
    using Raw = float4;
    static __device__ __forceinline__ float4 decode(float4 r) { return r; }
};
template <>
struct RowQuad<Fp8Rows> {
    static constexpr bool kScaled = true;
    static constexpr bool kWritable = false;
    using Raw = uint32_t;  // 4 e4m3 codes (byte k = element k)
    // value * 2^-8 of each code (exact: e4m3 normals and subnormals are fp16 values after a rebias)
    static __device__ __forceinline__ float4 decode(uint32_t w) {
        const uint32_t lo = ((w & 0x007F007Fu) << 7) | ((w & 0x00800080u) << 8);  // elements 0, 2
        const uint32_t hi = ((w & 0x7F007F00u) >> 1) | (w & 0x80008000u);        // elements 1, 3
        const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
        const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
        return make_float4(a.x, b.x, a.y, b.y);
    }
    // row scale (fp32 bits) -> multiplier of decode()'s values
    static __device__ __forceinline__ float factor(uint32_t sc, float) { return __uint_as_float(sc) * 256.f; }
};
template <>
struct RowQuad<Nvfp4Rows> {
    static constexpr bool kScaled = true;
    static constexpr bool kWritable = false;
    using Raw = uint32_t;  // 4 e2m1 codes in bits 0-15 (nibble k = element k)
    // value * 2^-14 of each code (exact, e2m1 values are fp16 values after a rebias)
    static __device__ __forceinline__ float4 decode(uint32_t w16) {
        const uint32_t x = __byte_perm(w16, 0u, 0x4140u);  // nibbles 0, 4 = elements 0, 2; nibbles 1, 5 = 1, 3
        const uint32_t y = x >> 4;
        const uint32_t h0 = ((x & 0x00070007u) << 9) | ((x & 0x00080008u) << 12);
        const uint32_t h1 = ((y & 0x00070007u) << 9) | ((y & 0x00080008u) << 12);
        const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&h0));
        const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&h1));
        return make_float4(a.x, b.x, a.y, b.y);
    }
    // block scale (e4m3 code in bits 0-7), state scale g -> value(bs) * g * 2^14 (value(bs) * g rounded
    // once in fp32, as the reference decoder's block multiplier; the power of two is exact)
    static __device__ __forceinline__ float factor(uint32_t bs, float g) {
        const uint32_t h = ((bs & 0x7Fu) << 7) | ((bs & 0x80u) << 8);  // value * 2^-8 as fp16
        float v = __half2float(__ushort_as_half((uint16_t)h)) * 256.f;
        if ((bs & 0x7Fu) == 0x7Fu) v = __uint_as_float(0x7FC00000u);  // e4m3 NaN
        return __fmul_rn(v, g) * 16384.f;
    }
};

// Loads of the warp's RW rows (row vw + (r ^ rl) into slot r; rows >= nv read as zero codes) of one
// (slot, head) state whose row 0 starts at `base` (bytes for the scaled formats, stride_row in the
// payload's units: elements of ST, bytes for Fp8Rows / Nvfp4Rows). Scaled formats also load the scale
// word of each row and lane (fp8: the row's fp32 scale; nvfp4: the e4m3 block scale of the lane's 16
// elements) from sc.scale at state index `state` (slot * H + head).
template <int RW, int QPL, typename ST>
struct WarpRows {
    using RQ = RowQuad<ST>;
    typename RQ::Raw raw[RW][QPL];
    uint32_t sc[RQ::kScaled ? RW : 1][QPL];
    float g;  // nvfp4 state scale

    __device__ __forceinline__ void load(const void* base, int64_t strideRow, int vw, int nv, int rl, int lane,
                                         const ReadCopyScales& rs, int64_t state) {
        if constexpr (!RQ::kScaled) {
            loadWarpRows<RW, QPL, ST>(raw, static_cast<const ST*>(base), strideRow, vw, nv, rl, lane);
        } else {
            static_assert(QPL == 1, "scaled read formats need N = 128");
            constexpr bool kFp8 = std::is_same<ST, Fp8Rows>::value;
            const uint8_t* rp = static_cast<const uint8_t*>(base) + (int64_t)vw * strideRow + lane * (kFp8 ? 4 : 2);
            const int64_t row0 = state * rs.headdim + vw;
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const int row = r ^ rl;
                raw[r][0] = 0u;
                sc[r][0] = 0u;
                if (vw + RW <= nv || vw + row < nv) {
                    const uint8_t* q = rp + (int64_t)row * strideRow;
                    if constexpr (kFp8) {
                        raw[r][0] = __ldcs(reinterpret_cast<const unsigned int*>(q));
                        sc[r][0] = __float_as_uint(__ldg(static_cast<const float*>(rs.scale) + row0 + row));
                    } else {
                        raw[r][0] = __ldcs(reinterpret_cast<const unsigned short*>(q));
                        sc[r][0] = __ldg(static_cast<const uint8_t*>(rs.scale) + (row0 + row) * 8 + (lane >> 2));
                    }
                }
            }
            g = kFp8 ? 1.f : __ldg(rs.gscale + state);
        }
    }
    // Decoded rows (float / 16-bit formats: the state values; scaled formats: see RowQuad::decode).
    __device__ __forceinline__ void decode(float4 (&S)[RW][QPL]) const {
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = RQ::decode(raw[r][i]);
    }
    // Multiplier of row slot r's dot products (1 for unscaled formats).
    __device__ __forceinline__ float factor(int r) const {
        if constexpr (RQ::kScaled) return RQ::factor(sc[r][0], g);
        else return 1.f;
    }
};

// ---- Read-only rows kept as raw bits until use (the read-copy readout: 16 rows per item, N = 128, one
//      quad per lane and row). 16-bit formats stay packed (uint2) instead of decoded at load.
template <typename ST>
struct RawQuad : RowQuad<ST> {};  // Fp8Rows, Nvfp4Rows
template <bool BF16>
struct RawQuad16 {  // 4 packed 16-bit values, decoded at use
    static constexpr bool kScaled = false;
    using Raw = uint2;
    static __device__ __forceinline__ float4 decode(uint2 r) { return u2ToF4(r, BF16); }
    static __device__ __forceinline__ float factor(uint32_t, float) { return 1.f; }
};
template <>
struct RawQuad<__half> : RawQuad16<false> {};
template <>
struct RawQuad<__nv_bfloat16> : RawQuad16<true> {};

template <int RW, typename ST>
struct RawWarpRows {
    using RQ = RawQuad<ST>;
    static constexpr bool kFp8 = std::is_same<ST, Fp8Rows>::value;
    static constexpr bool kNvfp4 = std::is_same<ST, Nvfp4Rows>::value;
    static constexpr int kLaneBytes = kNvfp4 ? 2 : kFp8 ? 4 : 8;  // 4 elements
    static constexpr int kUnitBytes = RQ::kScaled ? 1 : 2;         // payload stride unit (bytes / elements)
    typename RQ::Raw raw[RW];
    uint32_t sc[RQ::kScaled ? RW : 1];
    float g;

    // Rows vw + (r ^ rl) of the state at `base` (its row 0; strideRow in payload units), all in range.
    __device__ __forceinline__ void load(const void* base, int64_t strideRow, int vw, int rl, int lane,
                                         const ReadCopyScales& rs, int64_t state) {
        const int64_t sb = strideRow * kUnitBytes;
        const uint8_t* rp = static_cast<const uint8_t*>(base) + (int64_t)vw * sb + lane * kLaneBytes;
        const int64_t row0 = state * rs.headdim + vw;
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const int row = r ^ rl;
            const uint8_t* q = rp + (int64_t)row * sb;
            if constexpr (kNvfp4) {
                raw[r] = __ldcs(reinterpret_cast<const unsigned short*>(q));
                sc[r] = __ldg(static_cast<const uint8_t*>(rs.scale) + (row0 + row) * 8 + (lane >> 2));
            } else if constexpr (kFp8) {
                raw[r] = __ldcs(reinterpret_cast<const unsigned int*>(q));
                sc[r] = __float_as_uint(__ldg(static_cast<const float*>(rs.scale) + row0 + row));
            } else {
                raw[r] = __ldcs(reinterpret_cast<const uint2*>(q));
            }
        }
        g = kNvfp4 ? __ldg(rs.gscale + state) : 1.f;
    }
    __device__ __forceinline__ float4 decode(int r) const { return RQ::decode(raw[r]); }
    __device__ __forceinline__ float factor(int r) const {
        if constexpr (RQ::kScaled) return RQ::factor(sc[r], g);
        else return 1.f;
    }
};

// 16 packed 16-bit values of rows vw .. vw + 15 (lo: 0-7, hi: 8-15) -> f[r] = value of row r ^ rl (the
// XOR-permuted register slots of RowScatter<16>).
__device__ __forceinline__ void unpack16Permuted(uint4 lo, uint4 hi, int rl, bool bf16, float (&f)[16]) {
    if (rl & 8) {
        const uint4 t = lo;
        lo = hi;
        hi = t;
    }
    float a[8], c[8];
    unpack8(xorPermute8(lo, rl & 7), bf16, a);
    unpack8(xorPermute8(hi, rl & 7), bf16, c);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        f[i] = a[i];
        f[8 + i] = c[i];
    }
}

}  // namespace stream
}  // namespace rssm
