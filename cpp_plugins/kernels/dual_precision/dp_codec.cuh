// Device codec of the checkpoint formats (docs/formats.md): Philox4x32-10, RTN / SR rounding onto the
// fp16 / bf16 / e4m3fn / e2m1 grids, exact decoders, and fast "raw" decoders for the read path.
// Internal header (not part of the C ABI). Every encode step is one IEEE binary32 operation written
// with __fdiv_rn / __fmul_rn (no FMA contraction, no fast-math), so the bytes equal the torch codec
// (replayssm_trtllm/formats) for the same input and Philox key.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace rssm {
namespace dp {

// ------------------------------------------------------------------------------------- Philox
// One Philox4x32 round with the round's keys.
__device__ __forceinline__ uint4 philoxRound(uint4 c, uint32_t k0, uint32_t k1) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c.x), lo0 = 0xD2511F53u * c.x;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c.z), lo1 = 0xCD9E8D57u * c.z;
    return make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
}
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint32_t k0, uint32_t k1) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        c = philoxRound(c, k0, k1);
    }
    return c;
}

// The ten round keys of Philox4x32-10 for one seed (round r: k0 + r * 0x9E3779B9, k1 + r * 0xBB67AE85, mod 2^32, the
// values philox4x32_10 forms as it goes), formed on the host by the launchers of kernels that take them as a launch
// argument: in the kernel's parameter space they are constant-bank operands of the rounds instead of registers or
// per-use additions. The same words.
struct PhiloxRoundKeys {
    uint32_t k0[10], k1[10];
};
inline PhiloxRoundKeys philoxRoundKeys(uint32_t k0, uint32_t k1) {
    PhiloxRoundKeys rk;
    for (int r = 0; r < 10; ++r) {
        rk.k0[r] = k0 + (uint32_t)r * 0x9E3779B9u;
        rk.k1[r] = k1 + (uint32_t)r * 0xBB67AE85u;
    }
    return rk;
}
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, const PhiloxRoundKeys& rk) {
#pragma unroll
    for (int r = 0; r < 10; ++r) c = philoxRound(c, rk.k0[r], rk.k1[r]);
    return c;
}

// Key of one SR cast (formats.md section 5): counter words 1..3 and the 64-bit seed.
struct SrKey {
    uint32_t slot, layer, flush, k0, k1;
};
// Words of elements e..e+3 (e % 4 == 0) of one (slot, layer) state.
__device__ __forceinline__ uint4 srWords4(const SrKey& k, uint32_t e) {
    return philox4x32_10(make_uint4(e >> 2, k.slot, k.layer, k.flush), k.k0, k.k1);
}
// The same words with the seed's round keys given (k.k0 / k.k1 unused).
__device__ __forceinline__ uint4 srWords4(const SrKey& k, uint32_t e, const PhiloxRoundKeys& rk) {
    return philox4x32_10(make_uint4(e >> 2, k.slot, k.layer, k.flush), rk);
}

// ------------------------------------------------------------------------------------ rounding
// Grid of formats.md section 3: m mantissa bits, emin, largest finite magnitude code, IEEE overflow
// (fp16 / bf16: toward inf) or saturation (e4m3, e2m1), sign bit, NaN code (-1: none).
struct Grid {
    int m, emin, maxCode;
    bool ieee;
    int signBit, nanCode;
    float maxValue;
};
constexpr Grid kFP16 = {10, -14, 0x7BFF, true, 15, 0x7FFF, 65504.f};
constexpr Grid kBF16 = {7, -126, 0x7F7F, true, 15, 0x7FFF, 3.38953139e38f};
constexpr Grid kE4M3 = {3, -6, 0x7E, false, 7, 0x7F, 448.f};
constexpr Grid kE2M1 = {1, 0, 0x7, false, 3, -1, 6.f};

// Code (sign included) of float32 y on grid G; sr selects stochastic rounding with `word`.
// Integer evaluation of formats.md section 4 (the same int32 steps as formats/minifloat.py).
template <int M, int EMIN, int MAXCODE, bool IEEE, int SIGNBIT, int NANCODE>
__device__ __forceinline__ uint32_t roundCode(float y, bool sr, uint32_t word, float maxValue) {
    const uint32_t sign = (__float_as_uint(y) >> 31) << SIGNBIT;
    if (y != y) return NANCODE >= 0 ? uint32_t(NANCODE) : 0u;
    float a = fabsf(y);
    if (!IEEE) a = fminf(a, maxValue);  // inf -> max (NaN handled above)
    const int32_t bits = (int32_t)__float_as_uint(a);
    const int32_t E = bits >> 23;
    const bool finite = E < 255;
    int32_t sig = bits & 0x7FFFFF;
    if (E > 0) sig |= 0x800000;
    const int32_t e = max(E - 127, EMIN);
    const int32_t sh = e - max(E, 1) + (150 - M);
    const int32_t c = min(sh, 30);
    const int32_t k = sig >> c;
    const int32_t rem = sig & ((1 << c) - 1);
    bool up;
    if (!sr) {
        const int32_t half = 1 << (c - 1);
        up = rem > half || (rem == half && (k & 1));
    } else {
        const int32_t r24 = (int32_t)(word >> 8);
        const int32_t t = min(max(sh - 24, 0), 30);
        const int32_t thrHi = (rem + (1 << t) - 1) >> t;
        const int32_t thrLo = rem << max(24 - sh, 0);
        up = r24 < (sh >= 24 ? thrHi : thrLo);
    }
    int32_t mag = (e - EMIN) * (1 << M) + k + (up ? 1 : 0);
    if (IEEE) mag = finite ? min(mag, MAXCODE + 1) : MAXCODE + 1;
    else mag = finite ? mag : MAXCODE;
    return uint32_t(mag) | sign;
}
// The shift path of fp16 SR (|y| in [2^-14, inf), mag = |y|'s bits).
__device__ __forceinline__ uint32_t fp16ShiftSr(uint32_t bits, uint32_t mag, uint32_t w) {
    const uint32_t up = (w >> 19) < (mag & 0x1FFFu) ? 1u : 0u;
    return min((mag >> 13) - (112u << 10) + up, 0x7C00u) | ((bits >> 16) & 0x8000u);
}
// RTN onto fp16 / bf16 is IEEE round-to-nearest-even with overflow to inf, which the hardware
// conversion (cvt.rn) computes in one instruction; NaN maps to the formats' code 0x7FFF explicitly.
// SR: on the values where the shift of section 4 is a constant (fp16: |y| >= 2^-14, sh = 13; bf16: every
// finite y, sh = 16) the integer steps reduce to the fp32 bits shifted right by sh with the exponent
// rebiased, plus one when the word's top sh bits are below the sh dropped bits (rem): r24 = word >> 8 is below
// rem << (24 - sh) exactly when word >> (32 - sh) is below rem, as rem << (24 - sh) has 24 - sh zero low bits. Saturation as in
// roundCode (IEEE: to the inf code). Other values (fp16 subnormals / zero, inf, NaN) take roundCode.
// (Mirrored on the CPU in tests/formats/test_fast_codes.py against the torch codec.)
__device__ __forceinline__ uint32_t fp16Code(float y, bool sr, uint32_t w) {
    if (!sr) return y != y ? 0x7FFFu : (uint32_t)__half_as_ushort(__float2half_rn(y));
    const uint32_t bits = __float_as_uint(y), mag = bits & 0x7FFFFFFFu;
    if (mag >= (113u << 23) && mag < (255u << 23)) return fp16ShiftSr(bits, mag, w);
    return roundCode<10, -14, 0x7BFF, true, 15, 0x7FFF>(y, sr, w, 65504.f);
}
// fp16ShiftSr as one addition: the 13 dropped bits rem plus 0x1FFF - (w >> 19) (= (w >> 19) ^ 0x1FFF) carry into bit
// 13 exactly when w >> 19 < rem, and the exponent rebias (112 << 23) is a multiple of 2^13, so it is subtracted
// before the shift. The same code (CPU mirror: tests/formats/test_fast_codes.py).
__device__ __forceinline__ uint32_t fp16ShiftSrCarry(uint32_t bits, uint32_t mag, uint32_t w) {
    return min((mag + ((w >> 19) ^ 0x1FFFu) - (112u << 23)) >> 13, 0x7C00u) | ((bits >> 16) & 0x8000u);
}
// fp16Code(y, true, w) of four values with one range test for the four (the fixed-format flush instances): the
// shift path when all four take it, else fp16Code each. The same codes; packed as two 16-bit pairs.
__device__ __forceinline__ uint2 fp16CodesSr4(float4 v, uint4 w) {
    const uint32_t b0 = __float_as_uint(v.x), b1 = __float_as_uint(v.y), b2 = __float_as_uint(v.z),
                   b3 = __float_as_uint(v.w);
    const uint32_t m0 = b0 & 0x7FFFFFFFu, m1 = b1 & 0x7FFFFFFFu, m2 = b2 & 0x7FFFFFFFu, m3 = b3 & 0x7FFFFFFFu;
    constexpr uint32_t lo = 113u << 23, span = (255u - 113u) << 23;  // mag in [lo, 255 << 23)
    if (m0 - lo < span && m1 - lo < span && m2 - lo < span && m3 - lo < span)
        return make_uint2(fp16ShiftSrCarry(b0, m0, w.x) | (fp16ShiftSrCarry(b1, m1, w.y) << 16),
                          fp16ShiftSrCarry(b2, m2, w.z) | (fp16ShiftSrCarry(b3, m3, w.w) << 16));
    return make_uint2(fp16Code(v.x, true, w.x) | (fp16Code(v.y, true, w.y) << 16),
                      fp16Code(v.z, true, w.z) | (fp16Code(v.w, true, w.w) << 16));
}
__device__ __forceinline__ uint32_t bf16Code(float y, bool sr, uint32_t w) {
    if (!sr) return y != y ? 0x7FFFu : (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(y));
    const uint32_t bits = __float_as_uint(y), mag = bits & 0x7FFFFFFFu;
    if (mag < (255u << 23)) {
        const uint32_t up = (w >> 16) < (mag & 0xFFFFu) ? 1u : 0u;
        return min((mag >> 16) + up, 0x7F80u) | ((bits >> 16) & 0x8000u);
    }
    return roundCode<7, -126, 0x7F7F, true, 15, 0x7FFF>(y, sr, w, 3.38953139e38f);
}
// RTN onto e4m3fn on sm_89+: the hardware conversion (cvt.rn.satfinite.e4m3x2.f32) is round-to-nearest-even with
// the sign kept and |y| > 448 (inf included) saturated to 448, as roundCode; NaN keeps the integer path (code 0x7F).
__device__ __forceinline__ uint32_t e4m3Code(float y, bool sr, uint32_t w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if (!sr && y == y) return (uint32_t)__nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3);
#endif
    return roundCode<3, -6, 0x7E, false, 7, 0x7F>(y, sr, w, 448.f);
}
// RTN onto e2m1 (not NaN): the grid has spacing 0.5 below 2, 1 in [2, 4) and 2 in [4, 6], so the magnitude
// code is rint(|y| / spacing) (round half even; the division is an exact power-of-two product) plus 0 / 2 / 4,
// and ties to an even quotient are ties to an even code. Saturates at 6 like roundCode. (CPU mirror:
// tests/formats/test_fast_codes.py.)
__device__ __forceinline__ uint32_t e2m1Code(float y, bool sr, uint32_t w) {
    if (!sr && y == y) {
        const float a = fminf(fabsf(y), 6.f);
        const float m = a < 2.f ? 2.f : (a < 4.f ? 1.f : 0.5f);
        const int off = a < 2.f ? 0 : (a < 4.f ? 2 : 4);
        return (uint32_t)(__float2int_rn(a * m) + off) | ((__float_as_uint(y) >> 28) & 8u);
    }
    return roundCode<1, 0, 0x7, false, 3, -1>(y, sr, w, 6.f);
}
// The magnitude (sign bit clear) of the RTN code by integer steps on the fp32 bits (y not NaN), for the flush's
// fixed-format instances: |y| >= 1 keeps one mantissa bit, rounded half to even by adding 0x1FFFFF plus the kept
// bit (a carry moves into the exponent, as on the grid), and (biased exponent, kept bit) is then the code plus 252,
// saturated at 7 (6.0; inf included); |y| < 1 is rint(2 |y|) (spacing 0.5, round half even) by the exact sum
// 2 |y| + 1.5 * 2^23. e2m1Code(y) == e2m1MagnitudeRtnBits(y) | (sign of y) << 3.
// (CPU mirror: tests/formats/test_fast_codes.py, every float32 in [2^-3, 8] and random values.)
__device__ __forceinline__ uint32_t e2m1MagnitudeRtnBits(float y) {
    const uint32_t mag = __float_as_uint(y) & 0x7FFFFFFFu;
    return mag < 0x3F800000u ? __float_as_uint(fmaf(__uint_as_float(mag), 2.f, 12582912.f)) - 0x4B400000u
                             : min(((mag + 0x1FFFFFu + ((mag >> 22) & 1u)) >> 22) - 252u, 7u);
}

// ------------------------------------------------------------ division with a shared reciprocal
// The fast path of the IEEE division y / d (div.rn.f32 on sm_90: MUFU.RCP, one Newton step, the quotient, its
// residual and one correction, each an FMA), with d's refined reciprocal formed once (rcpNewton) and shared by the
// divisions by d. Where the hardware's range check (FCHK) passes, div.rn computes exactly these operations, so
// divNewton returns the same bits; the caller keeps to operands where that holds (the nvfp4 encoder: a normal d in
// [2^-90, 2^90] and quotients of magnitude <= 7, whose e2m1 code is what it needs; tiny quotients code to zero either
// way).
__device__ __forceinline__ float rcpNewton(float d) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
    return fmaf(r, fmaf(-d, r, 1.f), r);
}
__device__ __forceinline__ float divNewton(float y, float d, float r) {
    const float q = fmaf(y, r, 0.f);
    return fmaf(r, fmaf(-d, q, y), q);
}

// ------------------------------------------------------------------------------ exact decoders
__device__ __forceinline__ float e4m3Value(uint32_t c) {
    const uint32_t mag = c & 0x7F;
    if (mag == 0x7F) return __uint_as_float(0x7FC00000u);
    const uint32_t E = mag >> 3, M = mag & 7;
    const float v = E == 0 ? __fmul_rn((float)M, 0.001953125f)  // M * 2^-9 (exact)
                           : __uint_as_float(((E + 120u) << 23) | (M << 20));
    return (c & 0x80) ? -v : v;
}
// e4m3Value of a code that is not NaN (0x7F / 0xFF), by the hardware conversion on sm_89+ (every e4m3fn value is an
// fp16 value, so e4m3 -> f16 -> f32 is exact): the fixed-format flush instances' nvfp4 block scales, whose codes come
// from e4m3Code(finite r, RTN, satfinite) <= 0x7E.
__device__ __forceinline__ float e4m3ValueFinite(uint32_t c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3)));
#else
    return e4m3Value(c);
#endif
}
__device__ __forceinline__ float e2m1Value(uint32_t c) {
    const uint32_t mag = c & 7, E = mag >> 1, M = mag & 1;
    const float v = E == 0 ? 0.5f * (float)M : __uint_as_float(((E + 126u) << 23) | (M << 22));
    return (c & 8) ? -v : v;
}
__device__ __forceinline__ float fp16Value(uint32_t bits) { return __half2float(__ushort_as_half((uint16_t)bits)); }
__device__ __forceinline__ float bf16Value(uint32_t bits) { return __uint_as_float(bits << 16); }

// ------------------------------------------------------------ fast raw decoders (read path)
// Two e4m3 codes (bytes 0 and 2, or 1 and 3, of w) as one half2 holding value * 2^-8, exact
// (e4m3 normals and subnormals are fp16 values after the exponent rebias); NaN codes decode to a
// finite value, but their block scale is NaN, so the product is NaN as in the exact decoder.
__device__ __forceinline__ float2 e4m3PairLo(uint32_t w) {  // codes of bytes 0, 2
    const uint32_t h = ((w & 0x007F007Fu) << 7) | ((w & 0x00800080u) << 8);
    return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
__device__ __forceinline__ float2 e4m3PairHi(uint32_t w) {  // codes of bytes 1, 3
    const uint32_t h = ((w & 0x7F007F00u) >> 1) | (w & 0x80008000u);
    return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
// e2m1 nibbles k and k + 4 of w (k = 0..3) as one half2 holding value * 2^-14, exact.
template <int K>
__device__ __forceinline__ float2 e2m1Pair(uint32_t w) {
    const uint32_t x = w >> (4 * K);
    const uint32_t h = ((x & 0x00070007u) << 9) | ((x & 0x00080008u) << 12);
    return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// NaN-propagating max of |x| (formats.md: amax is NaN if any element is NaN). sm_80+: one max.NaN (FMNMX.NAN with
// the |x| operand modifier) instead of a NaN test, a select and a max; its NaN is the canonical 0x7FFFFFFF rather than
// 0x7FC00000, which no caller stores (a NaN amax only selects the non-finite paths, which write their own NaN codes).
__device__ __forceinline__ float amaxNan(float acc, float x) {
    const float a = fabsf(x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(acc), "f"(a));
    return r;
#else
    return (acc != acc || a != a) ? __uint_as_float(0x7FC00000u) : fmaxf(acc, a);
#endif
}

}  // namespace dp
}  // namespace rssm
