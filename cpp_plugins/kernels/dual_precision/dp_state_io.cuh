// Row-wise load / store of one checkpoint copy in any stored format, used by the flush and the codec
// kernels. Layout: a warp owns whole state rows (N = 128 columns); lane l holds columns 4l..4l+3 as
// one float4. Loads decode exactly (formats.md: value(code) * scale as one fp32 multiplication);
// stores encode bit for bit like replayssm_trtllm/formats (RTN, or SR with Philox words).
// Internal header (not part of the C ABI).
#pragma once
#include "common/rssm_common.h"
#include "dual_precision/dp_codec.cuh"

namespace rssm {
namespace dp {

constexpr int kRowN = 128;  // state columns (d_k) the row-wise kernels support
constexpr unsigned kFullMask = 0xffffffffu;

// A copy's format as a template argument: kFmtAny reads CopyRef::fmt at run time (every format); an RSSM_DTYPE_*
// value fixes it at compile time, so the format dispatch folds away (the flush's fixed-format instances,
// RSSM_DP_FLUSH_FIXED_FMT). The same operations on the same values either way.
constexpr int kFmtAny = -1;

// One stored copy: payload with int64 strides (elements; bytes for fp8 / nvfp4 payloads), scale
// tensors contiguous [S, H, P, N/128] fp32 (fp8) or [S, H, P, N/16] e4m3 bytes (nvfp4), global
// scales [S, H] fp32 (nvfp4).
struct CopyRef {
    int fmt;
    void* data;
    int64_t sSlot, sHead, sRow;
    void* scale;
    float* gscale;
};

// The format of copy c: FMT, or c.fmt for kFmtAny (read at each use, as the run-time-format code always did).
template <int FMT>
__device__ __forceinline__ int fmtOf(const CopyRef& c) {
    return FMT == kFmtAny ? c.fmt : FMT;
}

// Mamba-2 dt from the biased raw value (the decode kernels, and the flush of deferred rows: the same dt bits).
__device__ __forceinline__ float softplusAcc(float x) { return x > 20.f ? x : log1pf(expf(x)); }

__device__ __forceinline__ int64_t rowScaleIndex(int slot, int head, int row, int H, int P, int perRow, int i) {
    return (((int64_t)slot * H + head) * P + row) * perRow + i;
}

// Payload offset of a row (elements; bytes for fp8 / nvfp4), or `atOff` when the caller formed it (AT).
template <bool AT>
__device__ __forceinline__ int64_t rowOffset(const CopyRef& c, int slot, int head, int row, int64_t atOff) {
    if constexpr (AT) return atOff;
    else return (int64_t)slot * c.sSlot + (int64_t)head * c.sHead + (int64_t)row * c.sRow;
}
// Scale index of a row's block i (perRow blocks per row), or from the caller's scale row `atScaleRow` (AT).
template <bool AT>
__device__ __forceinline__ int64_t scaleIndex(int slot, int head, int row, int H, int P, int perRow, int i,
                                              int64_t atScaleRow) {
    if constexpr (AT) return atScaleRow * perRow + i;
    else return rowScaleIndex(slot, head, row, H, P, perRow, i);
}

// Exact decode of columns 4*lane..4*lane+3 of one row (FMT: c.fmt, or kFmtAny to read it at run time).
template <int FMT = kFmtAny>
__device__ __forceinline__ float4 loadRowExact(const CopyRef& c, int slot, int head, int row, int H, int P, int lane) {
    const int64_t off = (int64_t)slot * c.sSlot + (int64_t)head * c.sHead + (int64_t)row * c.sRow;
    switch (fmtOf<FMT>(c)) {
        case RSSM_DTYPE_FP32:
            return *reinterpret_cast<const float4*>(static_cast<const float*>(c.data) + off + 4 * lane);
        case RSSM_DTYPE_FP16:
        case RSSM_DTYPE_BF16: {
            const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(c.data) + off + 4 * lane);
            if (fmtOf<FMT>(c) == RSSM_DTYPE_FP16)
                return make_float4(fp16Value(w.x & 0xffffu), fp16Value(w.x >> 16), fp16Value(w.y & 0xffffu),
                                   fp16Value(w.y >> 16));
            return make_float4(bf16Value(w.x & 0xffffu), bf16Value(w.x >> 16), bf16Value(w.y & 0xffffu),
                               bf16Value(w.y >> 16));
        }
        case RSSM_DTYPE_FP8_E4M3: {
            const uint32_t w = *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(c.data) + off + 4 * lane);
            const float s = static_cast<const float*>(c.scale)[rowScaleIndex(slot, head, row, H, P, kRowN / 128,
                                                                              (4 * lane) / 128)];
            return make_float4(__fmul_rn(e4m3Value(w & 0xff), s), __fmul_rn(e4m3Value((w >> 8) & 0xff), s),
                               __fmul_rn(e4m3Value((w >> 16) & 0xff), s), __fmul_rn(e4m3Value(w >> 24), s));
        }
        default: {  // NVFP4: 4 nibbles = 2 bytes at byte offset 2*lane of the row
            const uint32_t w = *reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(c.data) + off + 2 * lane);
            const uint32_t bs = static_cast<const uint8_t*>(c.scale)[rowScaleIndex(slot, head, row, H, P, kRowN / 16,
                                                                                 lane / 4)];
            const float d = __fmul_rn(e4m3Value(bs), c.gscale[(int64_t)slot * H + head]);
            return make_float4(__fmul_rn(e2m1Value(w & 0xf), d), __fmul_rn(e2m1Value((w >> 4) & 0xf), d),
                               __fmul_rn(e2m1Value((w >> 8) & 0xf), d), __fmul_rn(e2m1Value((w >> 12) & 0xf), d));
        }
    }
}

__device__ __forceinline__ float warpAmaxNan(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = amaxNan(v, __shfl_xor_sync(kFullMask, v, o));
    return v;
}
__device__ __forceinline__ float amax4(float4 v) {
    return amaxNan(amaxNan(amaxNan(fabsf(v.x), v.y), v.z), v.w);
}

// Per-state NVFP4 global scale from the state amax (formats.md section 7): g (1 for zero /
// underflow / non-finite states, for the arithmetic) and whether the state is finite.
__device__ __forceinline__ float nvfp4Global(float amaxState, bool* finite) {
    *finite = isfinite(amaxState);
    float g = __fdiv_rn(amaxState, 2688.0f);
    if (g == 0.f || !*finite) g = 1.f;
    return g;
}

// The four e2m1 RTN codes (packed, element i in bits 4i..4i+3) of ys[i] / ds, ds > 0 finite, for the fixed-format
// instances: with `newton` and where ds is normal and moderate (always, but for states of extreme magnitude) the
// division's fast path with ds's reciprocal formed once for the four (dp_codec.cuh divNewton), else __fdiv_rn; the
// integer code of each quotient's magnitude with the element's sign (the quotient's sign, as ds > 0; zeros included:
// the Newton quotient of -0 is +0). The same codes as __fdiv_rn and e2m1Code.
__device__ __forceinline__ uint32_t nvfp4PackedRtn(const float (&ys)[4], float ds, bool newton) {
    float qs[4];
    if (newton && ds >= 0x1p-90f && ds <= 0x1p90f) {  // one branch for the four
        const float r = rcpNewton(ds);
#pragma unroll
        for (int i = 0; i < 4; ++i) qs[i] = divNewton(ys[i], ds, r);
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) qs[i] = __fdiv_rn(ys[i], ds);
    }
    uint32_t packed = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
        packed |= (e2m1MagnitudeRtnBits(qs[i]) | ((__float_as_uint(ys[i]) >> 28) & 8u)) << (4 * i);
    return packed;
}

// Encode columns 4*lane..4*lane+3 of one row into copy c. All 32 lanes of the warp must call it
// together (fp8 / nvfp4 reduce across lanes). e0: flat element index of column 4*lane in the
// (slot, layer) state (SR counter); g, stateFinite: nvfp4 per-state global scale (nvfp4Global);
// lane 0 of warp 0 of the CTA writes the global scale separately (writeNvfp4Global). FMT: c.fmt, or kFmtAny.
// rk (fixed-format instances): the seed's Philox round keys, for the SR words; NULL: formed from key.k0 / key.k1.
// rcp6g (fixed-format instances, nvfp4): nvfp4Rcp6g(g), or 0 for __fdiv_rn in every division of the row.
// AT = true: the caller gives the row's payload offset `atOff` (elements; bytes for fp8 / nvfp4) and its scale row
// `atScaleRow` = (slot * H + head) * P + row, and (slot, head, row) are not used; AT = false: both are formed from
// (slot, head, row).
template <int FMT = kFmtAny, bool AT = false>
__device__ __forceinline__ void storeRow(const CopyRef& c, int slot, int head, int row, int H, int P, int lane,
                                         float4 v, bool sr, const SrKey& key, uint32_t e0, float g, bool stateFinite,
                                         int64_t atOff = 0, int64_t atScaleRow = 0,
                                         const PhiloxRoundKeys* rk = nullptr, float rcp6g = 0.f) {
    const int64_t off = rowOffset<AT>(c, slot, head, row, atOff);
    uint4 w = make_uint4(0, 0, 0, 0);
    if (sr && fmtOf<FMT>(c) != RSSM_DTYPE_FP32) {
        if constexpr (FMT != kFmtAny) w = rk ? srWords4(key, e0, *rk) : srWords4(key, e0);
        else w = srWords4(key, e0);
    }
    switch (fmtOf<FMT>(c)) {
        case RSSM_DTYPE_FP32:
            *reinterpret_cast<float4*>(static_cast<float*>(c.data) + off + 4 * lane) = v;
            return;
        case RSSM_DTYPE_FP16:
        case RSSM_DTYPE_BF16: {
            if (FMT == RSSM_DTYPE_FP16 && sr) {  // fixed-format instances: one range test for the four
                *reinterpret_cast<uint2*>(static_cast<uint16_t*>(c.data) + off + 4 * lane) = fp16CodesSr4(v, w);
                return;
            }
            const bool h = fmtOf<FMT>(c) == RSSM_DTYPE_FP16;
            const uint32_t c0 = h ? fp16Code(v.x, sr, w.x) : bf16Code(v.x, sr, w.x);
            const uint32_t c1 = h ? fp16Code(v.y, sr, w.y) : bf16Code(v.y, sr, w.y);
            const uint32_t c2 = h ? fp16Code(v.z, sr, w.z) : bf16Code(v.z, sr, w.z);
            const uint32_t c3 = h ? fp16Code(v.w, sr, w.w) : bf16Code(v.w, sr, w.w);
            *reinterpret_cast<uint2*>(static_cast<uint16_t*>(c.data) + off + 4 * lane) =
                make_uint2(c0 | (c1 << 16), c2 | (c3 << 16));
            return;
        }
        case RSSM_DTYPE_FP8_E4M3: {
            const float amax = warpAmaxNan(amax4(v));  // one 128-block per row (N = 128)
            const bool finite = isfinite(amax);
            float s = __fdiv_rn(amax, 448.0f);
            if (s == 0.f) s = 1.f;
            uint32_t q = 0x7F7F7F7Fu;
            if (finite) {
                q = e4m3Code(__fdiv_rn(v.x, s), sr, w.x) | (e4m3Code(__fdiv_rn(v.y, s), sr, w.y) << 8) |
                    (e4m3Code(__fdiv_rn(v.z, s), sr, w.z) << 16) | (e4m3Code(__fdiv_rn(v.w, s), sr, w.w) << 24);
            } else {
                s = __uint_as_float(0x7FC00000u);
            }
            *reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(c.data) + off + 4 * lane) = q;
            if (lane == 0) static_cast<float*>(c.scale)[scaleIndex<AT>(slot, head, row, H, P, 1, 0, atScaleRow)] = s;
            return;
        }
        default: {  // NVFP4: a 16-block is 4 consecutive lanes
            float ab = amax4(v);
            ab = amaxNan(ab, __shfl_xor_sync(kFullMask, ab, 1));
            ab = amaxNan(ab, __shfl_xor_sync(kFullMask, ab, 2));
            const float sixG = __fmul_rn(6.0f, g);
            // fixed-format instances: the division's fast path with 6g's reciprocal rcp6g (nvfp4Rcp6g, formed once per
            // state; 0 outside [2^-90, 2^90]); ab <= 448 * 6g, so a quotient outside FCHK's range is tiny or
            // non-finite, and codes to 0 / is zeroed below either way (nvfp4PackedRtn's argument)
            float r = (FMT != kFmtAny && rcp6g != 0.f) ? divNewton(ab, sixG, rcp6g) : __fdiv_rn(ab, sixG);
            if (!isfinite(r)) r = 0.f;
            uint32_t bs = e4m3Code(r, false, 0u);
            const float d = __fmul_rn(FMT != kFmtAny ? e4m3ValueFinite(bs) : e4m3Value(bs), g);
            const bool zero = d == 0.f;
            const float ds = zero ? 1.f : d;
            const float ys[4] = {v.x, v.y, v.z, v.w};
            const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
            uint32_t packed = 0;
            if (FMT != kFmtAny && !sr) {  // fixed-format instances (RTN: their nvfp4 copy is the read copy)
                packed = (zero || !stateFinite) ? 0u : nvfp4PackedRtn(ys, ds, rcp6g != 0.f);
            } else {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    // (a NaN y needs no care: with a finite state every element and ds are finite, ds non-zero; a
                    // non-finite state's codes are zeroed below)
                    const float y = __fdiv_rn(ys[i], ds);
                    uint32_t code = e2m1Code(y, sr, ws[i]);
                    if (zero || !stateFinite) code = 0;
                    packed |= code << (4 * i);
                }
            }
            if (!stateFinite) bs = 0x7F;
            *reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(c.data) + off + 2 * lane) = (uint16_t)packed;
            if ((lane & 3) == 0)
                static_cast<uint8_t*>(c.scale)[scaleIndex<AT>(slot, head, row, H, P, kRowN / 16, lane / 4, atScaleRow)] =
                    (uint8_t)bs;
            return;
        }
    }
}

// The reciprocal of 6g for the fixed-format instances' nvfp4 block scales (rcpNewton), or 0 where 6g is outside
// [2^-90, 2^90] (those take __fdiv_rn).
__device__ __forceinline__ float nvfp4Rcp6g(float g) {
    const float sixG = __fmul_rn(6.0f, g);
    return sixG >= 0x1p-90f && sixG <= 0x1p90f ? rcpNewton(sixG) : 0.f;
}

__device__ __forceinline__ void writeNvfp4Global(const CopyRef& c, int slot, int head, int H, float g, bool finite) {
    c.gscale[(int64_t)slot * H + head] = finite ? g : __uint_as_float(0x7FC00000u);
}

// NaN-propagating amax over a CTA (blockDim.x = 32 * nWarps <= 1024); every thread gets the result.
__device__ __forceinline__ float ctaAmaxNan(float v, float* sScratch /*[32]*/) {
    v = warpAmaxNan(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sScratch[warp] = v;
    __syncthreads();
    float r = lane < nw ? sScratch[lane] : 0.f;
    r = warpAmaxNan(r);
    return r;
}

}  // namespace dp
}  // namespace rssm
