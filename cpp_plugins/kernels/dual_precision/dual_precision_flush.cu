// DualPrecisionFlush kernels (Algorithms 3 and 6, flush part) and the state codec launcher.
// Work item: one (flushing decode row, state head), on a CTA of 256 threads; warp w owns state rows w, w + 8, ...;
// lane l holds columns 4l..4l+3 (N = 128). Default grid: one wave of CTAs that scan the cursors and share the
// flushing rows' items (flushCompactKernel); RSSM_DP_FLUSH_GRID=items: one CTA per (head, row), non-flushing rows
// exit at once (paper App. D.2). An item puts the folded records' 16-bit rows (Mamba-2 B_j and x_j, GDN v_j) in
// flight by cp.async into dynamic shared memory together with its checkpoint rows, folds in fp32 registers, and
// encodes both copies row by row from a shared-memory state tile. Deferred flushing rows (ABI 7) take this step's
// token from the step inputs and also write the rows' outputs (docs/precision.md, twelfth session).
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "common/cp_async.cuh"
#include "dual_precision/dp_state_io.cuh"
#include "dual_precision/dual_precision.h"
#include "dual_precision/dual_precision_flush.h"

namespace rssm {
namespace dp {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxRec = 64 + 1;  // records a flush folds: standard h + 1 <= L, speculative h <= L

__device__ __forceinline__ float actF(const void* base, int64_t i, bool bf16) {
    const uint16_t r = static_cast<const uint16_t*>(base)[i];
    return bf16 ? bf16Value(r) : fp16Value(r);
}
__device__ __forceinline__ float4 act4(const void* base, int64_t i, bool bf16) {
    const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + i);
    if (bf16) return make_float4(bf16Value(w.x & 0xffffu), bf16Value(w.x >> 16), bf16Value(w.y & 0xffffu),
                                 bf16Value(w.y >> 16));
    return make_float4(fp16Value(w.x & 0xffffu), fp16Value(w.x >> 16), fp16Value(w.y & 0xffffu), fp16Value(w.y >> 16));
}

// Layout of the Mamba-2 item's fw_j x_j weights in shared memory: [nf][P] (T = false), or [nf][kWarps][RPW] (T = true:
// a warp's weights of a record contiguous, row = warp + kWarps r at warp * RPW + r). index: of element i = j P + r.
template <bool T, int RPW>
struct XwLayout {
    static __device__ __forceinline__ int index(int i, int j, int r) {
        if constexpr (T) return j * (kWarps * RPW) + (int)(((unsigned)r % kWarps) * RPW + (unsigned)r / kWarps);
        else return i;
    }
    static __device__ __forceinline__ int warpStart(int warp) {
        if constexpr (T) return warp * RPW;
        else return warp;
    }
    static __host__ __device__ __forceinline__ int recordFloats(int P) {
        if constexpr (T) return kWarps * RPW;
        else return P;
    }
};

// Component i (0..3, compile-time after unrolling) of a float4.
__device__ __forceinline__ float f4Part(const float4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Stage nf folded records' 16-bit rows into sDst [nf][len]: record j's row is at element
// (recBase + (o + j) % Cap) * recStride + off of g. 16-byte cp.async when the rows allow it (len,
// recStride and off multiples of 8; g 16-byte aligned, checked by the launcher), plain loads otherwise.
__device__ __forceinline__ void stageRows(uint16_t* sDst, const uint16_t* g, int64_t recBase, int o, int Cap, int nf,
                                          int len, int64_t recStride, int64_t off) {
    if (((len | recStride | off) & 7) == 0) {
        const int vr = len >> 3;
        for (int i = threadIdx.x; i < nf * vr; i += kThreads) {
            const int j = i / vr, v = i - j * vr;
            async::copy16(sDst + j * len + 8 * v, g + (recBase + (o + j) % Cap) * recStride + off + 8 * v);
        }
    } else {
        for (int i = threadIdx.x; i < nf * len; i += kThreads) {
            const int j = i / len, c = i - j * len;
            sDst[i] = g[(recBase + (o + j) % Cap) * recStride + off + c];
        }
    }
}

// Bytes of the staged 16-bit records of up to window + 1 folded records (Mamba-2: B_j [nf][128] and x_j [nf][P];
// GDN: v_j [nf][V]), rounded up to 16 bytes.
__host__ __device__ __forceinline__ int flushStageBytes(int family, int window, int headdim) {
    const int nf = window + 1;
    const int b = family == RSSM_FAMILY_MAMBA2 ? nf * (kRowN + headdim) * 2 : nf * headdim * 2;
    return (b + 15) & ~15;
}
// Byte offset of the fp32 state tile [P][128] in the dynamic shared memory: after the staged records and, for
// Mamba-2, fw_j * x_j in fp32 [nf][P].
__host__ __device__ __forceinline__ int flushTileOffset(int family, int window, int headdim) {
    const int extra = family == RSSM_FAMILY_MAMBA2 ? (window + 1) * headdim * 4 : 0;
    return flushStageBytes(family, window, headdim) + extra;
}
// The same with xwRow floats per record of fw_j * x_j (the Mamba-2 fixed-format instances: [nf][kWarps][RPW], each
// warp's weights contiguous, xwRow = kWarps * RPW >= headdim).
__host__ __device__ __forceinline__ int flushTileOffset(int family, int window, int headdim, int xwRow) {
    return flushTileOffset(family, window, headdim) +
           (family == RSSM_FAMILY_MAMBA2 ? (window + 1) * (xwRow - headdim) * 4 : 0);
}
// Dynamic shared memory of the flush kernels: the records, and the folded state (the encoders read it row by row).
int flushSmemBytes(int family, int window, int headdim, int xwRow) {
    return flushTileOffset(family, window, headdim, xwRow) + headdim * kRowN * 4;
}

struct FlushCopies {
    CopyRef hp, lp;
    bool shared;  // ckpt_hp == NULL: one copy (lp) read and written with `rounding`
};

__device__ __forceinline__ FlushCopies flushCopies(const DualPrecisionFlushParams& p) {
    FlushCopies c;
    c.shared = p.ckpt_hp == nullptr;
    c.hp = CopyRef{p.recurrence_dtype, p.ckpt_hp, p.stride_hp_slot, p.stride_hp_head, p.stride_hp_row,
                   p.ckpt_hp_scale, nullptr};
    c.lp = CopyRef{p.read_dtype, p.ckpt_lp, p.stride_lp_slot, p.stride_lp_head, p.stride_lp_row, p.ckpt_lp_scale,
                   p.ckpt_lp_gscale};
    return c;
}

// Flush plan of decode row b from the pre-step cursors: the number of folded records, or -1 when the row
// does not flush (or is padding / invalid); slot and ring origin of a flushing row.
__device__ __forceinline__ int flushPlan(const DualPrecisionFlushParams& p, int b, int* slotOut, int* originOut) {
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return -1;
    const int o = p.ring_origin[slot], h = p.ring_len[slot];
    const int T = p.num_tokens, L = p.window, Cap = p.ring_capacity;
    const bool valid = o >= 0 && o < Cap && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L) && h + T <= Cap;
    const bool flush = valid && (p.mode == 0 ? h + 1 == L : h + T > L);
    *slotOut = slot;
    *originOut = o;
    return flush ? (p.mode == 0 ? h + 1 : h) : -1;
}
__device__ __forceinline__ int flushedCode(const DualPrecisionFlushParams& p, int b, int nf) {
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    return (slot < 0 || slot >= p.num_slots) ? -1 : nf >= 0 ? 1 : 0;
}

// One flush item: decode row b (slot, ring origin o, nf folded records) x state head `head`.
struct FlushItem {
    int b, slot, o, nf, head;
};

// Cast the fp32 accumulator rows S into both copies (independently) and store them. The rows go through shared
// memory (sTile [P][128] fp32, each warp its own rows) so that the encoders run in a loop over rows that is not
// unrolled: unrolled, the two encoders of every row made a straight-line body of ~4,000 instructions per item, and
// the warps stalled on instruction fetch (ncu: "no instruction" 40% of the samples).
// HPF / LPF: the copies' formats fixed at compile time (two copies), or kFmtAny for both (any formats, one or two
// copies: the formats read at run time). Fixed formats only: rk, the seed's Philox round keys (FixedFlushArgs); newton,
// whether the nvfp4 divisions take the shared-reciprocal path (storeRow's rcp6g).
template <int RPW, int HPF = kFmtAny, int LPF = kFmtAny>
__device__ __forceinline__ void castAndStore(const DualPrecisionFlushParams& p, const FlushCopies& cp, int slot,
                                             int b, int head, const float4 (&S)[RPW], float* sScratch, float* sTile,
                                             const PhiloxRoundKeys* rk, bool newton = true) {
    static_assert((HPF == kFmtAny) == (LPF == kFmtAny), "fix both copies' formats or neither");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int H = p.nheads, P = p.headdim;
    SrKey key;
    key.slot = (uint32_t)slot;
    key.layer = (uint32_t)p.layer_index;
    key.flush = p.flush_index ? (uint32_t)p.flush_index[b] : 0u;
    key.k0 = p.seed_lo;
    key.k1 = p.seed_hi;
    const bool sr = p.rounding == RSSM_ROUNDING_SR;
    const bool shared = LPF == kFmtAny && cp.shared;  // fixed formats: two copies (the launcher's rule)
    float g = 1.f;
    bool finite = true;
    if ((LPF == kFmtAny ? cp.lp.fmt : LPF) == RSSM_DTYPE_NVFP4) {
        float a = 0.f;
#pragma unroll
        for (int r = 0; r < RPW; ++r)
            if (warp + kWarps * r < P) a = amaxNan(a, amax4(S[r]));
        g = nvfp4Global(ctaAmaxNan(a, sScratch), &finite);
        if (threadIdx.x == 0) writeNvfp4Global(cp.lp, slot, head, H, g, finite);
    }
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        if (row < P) *reinterpret_cast<float4*>(sTile + row * kRowN + 4 * lane) = S[r];
    }
    __syncwarp();
    const uint32_t eHead = (uint32_t)head * (uint32_t)P * kRowN;
    if constexpr (LPF != kFmtAny) {
        // fixed formats: the rows' payload and scale offsets advance by the warp's row step instead of being formed
        // from (slot, head, row) per row (the same addresses)
        int64_t hpOff = (int64_t)slot * cp.hp.sSlot + (int64_t)head * cp.hp.sHead + (int64_t)warp * cp.hp.sRow;
        int64_t lpOff = (int64_t)slot * cp.lp.sSlot + (int64_t)head * cp.lp.sHead + (int64_t)warp * cp.lp.sRow;
        int64_t scaleRow = ((int64_t)slot * H + head) * P + warp;
        const int64_t hpStep = (int64_t)kWarps * cp.hp.sRow, lpStep = (int64_t)kWarps * cp.lp.sRow;
        // (rcp6g = 0: every nvfp4 division by __fdiv_rn, storeRow; RSSM_DP_FLUSH_FIXED_FMT=2 asks for that)
        const float rcp6g = LPF == RSSM_DTYPE_NVFP4 && newton ? nvfp4Rcp6g(g) : 0.f;
#pragma unroll 1
        for (int row = warp; row < P; row += kWarps, hpOff += hpStep, lpOff += lpStep, scaleRow += kWarps) {
            const float4 v = *reinterpret_cast<const float4*>(sTile + row * kRowN + 4 * lane);
            const uint32_t e0 = eHead + (uint32_t)row * kRowN + 4u * lane;
            storeRow<HPF, true>(cp.hp, slot, head, row, H, P, lane, v, sr, key, e0, 1.f, true, hpOff, scaleRow, rk);
            storeRow<LPF, true>(cp.lp, slot, head, row, H, P, lane, v, false, key, e0, g, finite, lpOff, scaleRow,
                                nullptr, rcp6g);
        }
    } else {
#pragma unroll 1
        for (int row = warp; row < P; row += kWarps) {
            const float4 v = *reinterpret_cast<const float4*>(sTile + row * kRowN + 4 * lane);
            const uint32_t e0 = eHead + (uint32_t)row * kRowN + 4u * lane;
            if (!shared) storeRow<HPF>(cp.hp, slot, head, row, H, P, lane, v, sr, key, e0, 1.f, true);
            storeRow<LPF>(cp.lp, slot, head, row, H, P, lane, v, shared ? sr : false, key, e0, g, finite);
        }
    }
}

// An output value as its 16-bit activation code (RTN).
__device__ __forceinline__ uint16_t actCode(float v, bool bf16) {
    return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

// A state row (the lane's 4 columns s) dotted with a vector (the lane's 4 columns v), summed over the warp.
__device__ __forceinline__ float warpRowDot(const float4& s, const float4& v) {
    float d = s.x * v.x + s.y * v.y + s.z * v.z + s.w * v.w;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(kFullMask, d, off);
    return d;
}

// Outputs of a deferred (fused) flushing row: y[row] = (C_t . S_t[row] + D x_t[row]) * silu(z_t[row]) for the warp's
// rows, from the folded fp32 state in registers. Lane r < RPW owns row warp + kWarps * r and keeps its row's dot; the
// lanes then finish their rows' outputs together (one silu per lane instead of RPW single-lane passes; fortieth
// session: the serialized epilogue was 2.7% of the flush's instructions; loading x_t / z_t before the dots spilled a
// register). The same operations on the same values, so the same bits.
template <int RPW>
__device__ __forceinline__ void writeOutputs(const DualPrecisionFlushParams& p, int b, int head, int grp,
                                             const float4 (&S)[RPW], bool bf16) {
    static_assert(RPW <= 32, "one output row per lane");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int H = p.nheads, P = p.headdim, G = p.ngroups;
    const int myRow = warp + kWarps * lane;
    const bool mine = lane < RPW && myRow < P;
    const int64_t io = ((int64_t)b * H + head) * P + myRow;
    const float4 c = act4(p.Cm, ((int64_t)b * G + grp) * kRowN + 4 * lane, bf16);
    float d = 0.f;
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        if (row >= P) break;  // warp-uniform
        const float dr = warpRowDot(S[r], c);
        if (lane == r) d = dr;
    }
    if (mine) {
        const float Dh = p.D ? p.D[head] : 0.f;
        const float xv = actF(p.x, io, bf16), zv = p.z ? actF(p.z, io, bf16) : 0.f;
        float yv = fmaf(Dh, xv, d);
        if (p.z) yv *= zv / (1.f + expf(-zv));
        static_cast<uint16_t*>(p.y)[io] = actCode(yv, bf16);
    }
}

// Outputs of a deferred GDN flushing row: o[row] = S_t[row] . qn_t with qn_t = q_t * scale / sqrt(|q_t|^2 + 1e-6)
// (the decode's normalization); lane r writes row warp + kWarps * r.
template <int RPW>
__device__ __forceinline__ void gdnWriteOutputs(const DualPrecisionFlushParams& p, int b, int head, int hk,
                                                const float4 (&S)[RPW], bool bf16) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int HV = p.nheads, V = p.headdim, HK = p.ngroups;
    const float4 q = act4(p.q, ((int64_t)b * HK + hk) * kRowN + 4 * lane, bf16);
    const float qq = warpRowDot(q, q);
    const float iq = (p.scale > 0.f ? p.scale : rsqrtf((float)kRowN)) / sqrtf(qq + 1e-6f);
    const float4 qn = make_float4(q.x * iq, q.y * iq, q.z * iq, q.w * iq);
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        if (row >= V) break;  // warp-uniform
        const float d = warpRowDot(S[r], qn);
        if (lane == r)
            static_cast<uint16_t*>(p.o)[((int64_t)b * HV + head) * V + row] = actCode(d, bf16);
    }
}

// Shared memory of the Mamba-2 item body: fold weights, the CTA amax scratch, the staged 16-bit records
// (dynamic: [nf][128] B_j of the group, [nf][P] x_j of the head) and fw_j * x_j in fp32 ([nf][P], dynamic).
struct Mamba2FlushShared {
    float fw[kMaxRec];
    float scratch[32];
    float gam;
};

// Mamba-2 flush of one item: S' = exp(cum_{nf-1}) S + sum_j exp(cum_{nf-1} - cum_j) dt_j x_j B_j^T with
// cum_j = sum_{i <= j} dt_i A, accumulated in fp32 (the same operations in the same order for every grid).
// FULL (P == kWarps * RPW: the fold without its row guard, which the compiler re-evaluated for every record, short of
// predicate registers) and ACT (the activation format fixed: 1 bf16, 0 fp16; -1 read at run time: the compiler issued
// both conversions of B_j under a select) specialize the fixed-format instances' fold (flushItem); the same FMAs in the
// same order. The run-time-format kernel runs <false, -1>.
template <int RPW, int HPF, int LPF, bool FULL = false, int ACT = -1>
__device__ __forceinline__ void mamba2FlushItem(const DualPrecisionFlushParams& p, const FlushItem& it,
                                                Mamba2FlushShared& sh, unsigned char* dyn, const PhiloxRoundKeys* rk,
                                                bool newton) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int H = p.nheads, P = p.headdim, G = p.ngroups, Cap = p.ring_capacity;
    const int head = it.head, slot = it.slot, o = it.o, nf = it.nf;
    const int grp = head / (H / G);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const FlushCopies cp = flushCopies(p);
    const CopyRef src = (LPF == kFmtAny && cp.shared) ? cp.lp : cp.hp;
    uint16_t* sB = reinterpret_cast<uint16_t*>(dyn);  // [nf][128]
    uint16_t* sX = sB + nf * kRowN;                   // [nf][P]
    // fw_j x_j: [nf][P], or (fixed-format instances, XWT) [nf][kWarps][RPW] so that a warp loads its rows' weights of a
    // record as RPW / 4 16-byte words (the fold's weight loads were 8 or 16 4-byte loads per record and warp)
    constexpr bool XWT = LPF != kFmtAny;
    float* sXw = reinterpret_cast<float*>(dyn + flushStageBytes(RSSM_FAMILY_MAMBA2, nf - 1, P));
    const int64_t recBase = (int64_t)slot * Cap;
    // deferred rows (p.x != NULL): records 0 .. nf - 2 from the ring, record nf - 1 (this step's token) from the inputs
    const bool fused = p.x != nullptr;
    const int nRing = fused ? nf - 1 : nf;
    stageRows(sB, static_cast<const uint16_t*>(p.ring_B), recBase, o, Cap, nRing, kRowN, (int64_t)G * kRowN,
              (int64_t)grp * kRowN);
    stageRows(sX, static_cast<const uint16_t*>(p.ring_x), recBase, o, Cap, nRing, P, (int64_t)H * P, (int64_t)head * P);
    if (fused) {  // as one more record at ring position 0 of a ring of capacity 1 (row it.b of the inputs)
        stageRows(sB + nRing * kRowN, static_cast<const uint16_t*>(p.Bm), it.b, 0, 1, 1, kRowN, (int64_t)G * kRowN,
                  (int64_t)grp * kRowN);
        stageRows(sX + nRing * P, static_cast<const uint16_t*>(p.x), it.b, 0, 1, 1, P, (int64_t)H * P,
                  (int64_t)head * P);
    }
    float4 S[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        S[r] = row < P ? loadRowExact<HPF>(src, slot, head, row, H, P, lane) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (warp == 0) {
        const float A = p.A[head];
        float carry = 0.f, last = 0.f;
        float dts[3], cums[3];
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            const int j = c * 32 + lane;
            float dt = j < nRing ? p.ring_dt[((int64_t)slot * Cap + (o + j) % Cap) * H + head] : 0.f;
            if (j == nRing && fused) {
                const int64_t off = (int64_t)it.b * H + head;
                float raw = p.dt_dtype == RSSM_DTYPE_FP32 ? static_cast<const float*>(p.dt_raw)[off]
                                                          : actF(p.dt_raw, off, bf16);
                if (p.dt_bias) raw += p.dt_bias[head];
                dt = softplusAcc(raw);
            }
            float v = dt * A;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const float t = __shfl_up_sync(kFullMask, v, off);
                if (lane >= off) v += t;
            }
            v += carry;
            carry = __shfl_sync(kFullMask, v, 31);
            dts[c] = dt;
            cums[c] = v;
            const float lc = __shfl_sync(kFullMask, v, (nf - 1) & 31);  // cum_{nf-1} when it lies in chunk c
            if (c == (nf - 1) / 32) last = lc;
        }
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            const int j = c * 32 + lane;
            if (j < nf) sh.fw[j] = expf(last - cums[c]) * dts[c];
        }
        if (lane == 0) sh.gam = expf(last);
    }
    async::waitAll();
    __syncthreads();
    // fw_j * x_j[row] once per item (fp32, the product the fold multiplies B_j by); record j = i / P tracked
    // incrementally (i advances by kThreads = jStep * P + rStep) instead of one integer division per element
    {
        const int jStep = kThreads / P, rStep = kThreads - jStep * P;
        int j = threadIdx.x / P, r = threadIdx.x - j * P;
        for (int i = threadIdx.x; i < nf * P; i += kThreads) {
            sXw[XwLayout<XWT, RPW>::index(i, j, r)] = sh.fw[j] * actF(sX, i, bf16);
            j += jStep;
            r += rStep;
            if (r >= P) {
                r -= P;
                ++j;
            }
        }
    }
    __syncthreads();
    const float gam = sh.gam;
#pragma unroll
    for (int r = 0; r < RPW; ++r) S[r] = make_float4(S[r].x * gam, S[r].y * gam, S[r].z * gam, S[r].w * gam);
    const float* xw = sXw + XwLayout<XWT, RPW>::warpStart(warp);
    for (int j = 0; j < nf; ++j, xw += XwLayout<XWT, RPW>::recordFloats(P)) {
        const float4 Bj = act4(sB, j * kRowN + 4 * lane, ACT < 0 ? bf16 : ACT == 1);
        float4 w4[XWT ? RPW / 4 : 1];
        if constexpr (XWT) {
#pragma unroll
            for (int q = 0; q < RPW / 4; ++q) w4[q] = reinterpret_cast<const float4*>(xw)[q];
        }
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
            if (FULL || warp + kWarps * r < P) {
                const float w = XWT ? f4Part(w4[XWT ? r / 4 : 0], r % 4) : xw[kWarps * r];
                S[r].x = fmaf(w, Bj.x, S[r].x);
                S[r].y = fmaf(w, Bj.y, S[r].y);
                S[r].z = fmaf(w, Bj.z, S[r].z);
                S[r].w = fmaf(w, Bj.w, S[r].w);
            }
        }
    }
    if (fused) writeOutputs<RPW>(p, it.b, head, grp, S, bf16);
    int tileOffset;
    if constexpr (XWT) tileOffset = flushTileOffset(RSSM_FAMILY_MAMBA2, nf - 1, P, kWarps * RPW);
    else tileOffset = flushTileOffset(RSSM_FAMILY_MAMBA2, nf - 1, P);
    castAndStore<RPW, HPF, LPF>(p, cp, slot, it.b, head, S, sh.scratch, reinterpret_cast<float*>(dyn + tileOffset), rk,
                                newton);
}

struct GdnFlushShared {
    __align__(16) float kn[kMaxRec][kRowN];
    float alpha[kMaxRec], beta[kMaxRec];
    float scratch[32];
};

// GDN flush of one item: re-derive u_j = beta_j (v_j - alpha_j S_{j-1} kn_j) on the high-precision path
// from the raw records, then S_j = alpha_j S_{j-1} + u_j kn_j^T (App. B.4).
// FULL / ACT: as mamba2FlushItem's, for the re-derivation's row guard and the v_j conversion.
template <int RPW, int HPF, int LPF, bool FULL = false, int ACT = -1>
__device__ __forceinline__ void gdnFlushItem(const DualPrecisionFlushParams& p, const FlushItem& it,
                                             GdnFlushShared& sh, unsigned char* dyn, const PhiloxRoundKeys* rk,
                                             bool newton) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int HV = p.nheads, V = p.headdim, HK = p.ngroups, Cap = p.ring_capacity;
    const int head = it.head, slot = it.slot, o = it.o, nf = it.nf;
    const int hk = head / (HV / HK);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const FlushCopies cp = flushCopies(p);
    const CopyRef src = (LPF == kFmtAny && cp.shared) ? cp.lp : cp.hp;
    uint16_t* sV = reinterpret_cast<uint16_t*>(dyn);  // [nf][V] raw v_j of the head
    // deferred rows (p.q != NULL): records 0 .. nf - 2 from the ring, record nf - 1 (this step's token) from the inputs
    const bool fused = p.q != nullptr;
    const int nRing = fused ? nf - 1 : nf;
    stageRows(sV, static_cast<const uint16_t*>(p.ring_v), (int64_t)slot * Cap, o, Cap, nRing, V, (int64_t)HV * V,
              (int64_t)head * V);
    if (fused)
        stageRows(sV + nRing * V, static_cast<const uint16_t*>(p.v), it.b, 0, 1, 1, V, (int64_t)HV * V,
                  (int64_t)head * V);
    float4 S[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        S[r] = row < V ? loadRowExact<HPF>(src, slot, head, row, HV, V, lane) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int j = warp; j < nf; j += kWarps) {
        const int64_t rec = (int64_t)slot * Cap + (o + j) % Cap;
        const bool input = j >= nRing;  // this step's token (deferred rows): the decode's gate expressions
        const float4 k = input ? act4(p.k, ((int64_t)it.b * HK + hk) * kRowN + 4 * lane, bf16)
                               : act4(p.ring_k, (rec * HK + hk) * kRowN + 4 * lane, bf16);
        float ss = k.x * k.x + k.y * k.y + k.z * k.z + k.w * k.w;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(kFullMask, ss, off);
        const float inv = 1.f / sqrtf(ss + 1e-6f);
        *reinterpret_cast<float4*>(&sh.kn[j][4 * lane]) = make_float4(k.x * inv, k.y * inv, k.z * inv, k.w * inv);
        if (lane == 0) {
            if (input) {
                const int64_t off = (int64_t)it.b * HV + head;
                const float g = -expf(p.A_log[head]) * softplusAcc(actF(p.a, off, bf16) + p.gdn_dt_bias[head]);
                sh.alpha[j] = expf(g);
                sh.beta[j] = 1.f / (1.f + expf(-actF(p.b, off, bf16)));
            } else {
                sh.alpha[j] = expf(p.ring_g[rec * HV + head]);
                sh.beta[j] = p.ring_beta[rec * HV + head];
            }
        }
    }
    async::waitAll();
    __syncthreads();
    for (int j = 0; j < nf; ++j) {
        const float4 kn = *reinterpret_cast<const float4*>(&sh.kn[j][4 * lane]);
        const float alpha = sh.alpha[j], beta = sh.beta[j];
        float dot[RPW];
#pragma unroll
        for (int r = 0; r < RPW; ++r) dot[r] = S[r].x * kn.x + S[r].y * kn.y + S[r].z * kn.z + S[r].w * kn.w;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
#pragma unroll
            for (int r = 0; r < RPW; ++r) dot[r] += __shfl_xor_sync(kFullMask, dot[r], off);
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
            const int row = warp + kWarps * r;
            if (FULL || row < V) {
                const float v = actF(sV, j * V + row, ACT < 0 ? bf16 : ACT == 1);
                const float u = beta * (v - alpha * dot[r]);
                S[r].x = fmaf(alpha, S[r].x, u * kn.x);
                S[r].y = fmaf(alpha, S[r].y, u * kn.y);
                S[r].z = fmaf(alpha, S[r].z, u * kn.z);
                S[r].w = fmaf(alpha, S[r].w, u * kn.w);
            }
        }
    }
    if (fused) gdnWriteOutputs<RPW>(p, it.b, head, hk, S, bf16);
    castAndStore<RPW, HPF, LPF>(p, cp, slot, it.b, head, S, sh.scratch,
                      reinterpret_cast<float*>(dyn + flushTileOffset(RSSM_FAMILY_GDN, nf - 1, V)), rk, newton);
}

template <int FAMILY, int RPW, int HPF, int LPF, bool FULL, int ACT, typename Shared>
__device__ __forceinline__ void flushItem(const DualPrecisionFlushParams& p, const FlushItem& it, Shared& sh,
                                          unsigned char* dyn, const PhiloxRoundKeys* rk, bool newton) {
    if constexpr (FAMILY == RSSM_FAMILY_MAMBA2) mamba2FlushItem<RPW, HPF, LPF, FULL, ACT>(p, it, sh, dyn, rk, newton);
    else gdnFlushItem<RPW, HPF, LPF, FULL, ACT>(p, it, sh, dyn, rk, newton);
}

template <int FAMILY>
using FlushShared = typename std::conditional<FAMILY == RSSM_FAMILY_MAMBA2, Mamba2FlushShared, GdnFlushShared>::type;

// Item grid (RSSM_DP_FLUSH_GRID=items, A/B): one CTA per (state head, decode row); non-flushing rows exit.
template <int FAMILY, int RPW>
__global__ void __launch_bounds__(kThreads) flushItemGridKernel(const DualPrecisionFlushParams p) {
    const int head = blockIdx.x, b = blockIdx.y;
    FlushItem it;
    it.b = b;
    it.head = head;
    it.nf = flushPlan(p, b, &it.slot, &it.o);
    if (head == 0 && threadIdx.x == 0 && p.flushed) p.flushed[b] = flushedCode(p, b, it.nf);
    if (it.nf < 0) return;
    __shared__ FlushShared<FAMILY> sh;
    extern __shared__ __align__(16) unsigned char flushSmem[];
    flushItem<FAMILY, RPW, kFmtAny, kFmtAny, false, -1>(p, it, sh, flushSmem, nullptr, true);
}

// Compacted flush (default): one wave of CTAs. Every CTA scans the cursors of a chunk of kScanRows decode rows
// (one row per thread, all in parallel) and lists the flushing rows in shared memory in row order; the CTAs then
// share the chunk's (row, head) items round-robin. The rows that do not flush cost one parallel scan per CTA
// instead of one early-exiting CTA per (row, head), which is most of the launch when 1/L of the rows flush.
constexpr int kScanRows = 2 * kThreads;

// Four CTAs per SM for head dims <= 64 (64 registers, no spills; 2,048 items of B = 256, H = 128 then take 4 rounds
// of 528 CTAs instead of 6 of 396); two for larger head dims (128 registers). HPF / LPF: kFmtAny (flushCompactKernel:
// any formats), or the two copies' formats fixed at compile time (flushCompactFixedKernel, the default where it applies).
template <int FAMILY, int RPW, int HPF, int LPF, bool FULL = false, int ACT = -1>
__device__ __forceinline__ void flushCompactBody(const DualPrecisionFlushParams& p, const PhiloxRoundKeys* rk,
                                                 bool newton) {
    __shared__ FlushShared<FAMILY> sh;
    __shared__ int4 sRows[kScanRows];  // (b, slot, origin, nf) of the chunk's flushing rows
    __shared__ int sCount[kScanRows / 32];
    extern __shared__ __align__(16) unsigned char flushSmem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int H = p.nheads;
    long long done = 0;  // items of the chunks before this one
    for (int c0 = 0; c0 < p.batch; c0 += kScanRows) {
        int4 rowPlan[kScanRows / kThreads];
        bool fl[kScanRows / kThreads];
#pragma unroll
        for (int k = 0; k < kScanRows / kThreads; ++k) {
            const int b = c0 + k * kThreads + threadIdx.x;
            int slot = 0, o = 0, nf = -1;
            if (b < p.batch) {
                nf = flushPlan(p, b, &slot, &o);
                if (blockIdx.x == 0 && p.flushed) p.flushed[b] = flushedCode(p, b, nf);
            }
            fl[k] = nf >= 0;
            rowPlan[k] = make_int4(b, slot, o, nf);
            const unsigned m = __ballot_sync(kFullMask, fl[k]);
            if (lane == 0) sCount[k * kWarps + warp] = __popc(m);
        }
        __syncthreads();
        int total = 0;
#pragma unroll
        for (int k = 0; k < kScanRows / kThreads; ++k) {
            const unsigned m = __ballot_sync(kFullMask, fl[k]);
            int before = 0;
            for (int i = 0; i < kScanRows / 32; ++i) {
                const int c = sCount[i];
                if (i < k * kWarps + warp) before += c;
                total += (k == 0) ? c : 0;
            }
            if (fl[k]) sRows[before + __popc(m & ((1u << lane) - 1u))] = rowPlan[k];
        }
        __syncthreads();
        const long long items = (long long)total * H;
        // this CTA's items: chunk-local i with (done + i) % gridDim.x == blockIdx.x
        long long i = ((long long)blockIdx.x - done % gridDim.x + gridDim.x) % gridDim.x;
        for (; i < items; i += gridDim.x) {
            const int4 r = sRows[i / H];
            FlushItem it;
            it.b = r.x;
            it.slot = r.y;
            it.o = r.z;
            it.nf = r.w;
            it.head = (int)(i % H);
            flushItem<FAMILY, RPW, HPF, LPF, FULL, ACT>(p, it, sh, flushSmem, rk, newton);
            __syncthreads();  // the item's shared memory is reused by the next one
        }
        done += items;
    }
}
template <int FAMILY, int RPW>
__global__ void __launch_bounds__(kThreads, RPW <= 8 ? 4 : 2) flushCompactKernel(const DualPrecisionFlushParams p) {
    flushCompactBody<FAMILY, RPW, kFmtAny, kFmtAny>(p, nullptr, true);
}
// The fixed-format instances' launch argument: the params, the seed's Philox round keys (philoxRoundKeys) and whether
// the nvfp4 divisions take the shared-reciprocal path (1) or __fdiv_rn each (0: RSSM_DP_FLUSH_FIXED_FMT=2, to tell
// that path's bytes apart from the rest's).
struct FixedFlushArgs {
    DualPrecisionFlushParams p;
    PhiloxRoundKeys rk;
    int newton;
};
// FULL / ACT (mamba2FlushItem, gdnFlushItem): the fold for head dims of exactly kWarps * RPW rows and a fixed
// activation format.
template <int FAMILY, int RPW, int HPF, int LPF, bool FULL, int ACT>
__global__ void __launch_bounds__(kThreads, RPW <= 8 ? 4 : 2) flushCompactFixedKernel(const FixedFlushArgs a) {
    flushCompactBody<FAMILY, RPW, HPF, LPF, FULL, ACT>(a.p, &a.rk, a.newton != 0);
}

// ----------------------------------------------------------------------------------- codec
template <int RPW>
__global__ void __launch_bounds__(kThreads) codecKernel(const DualPrecisionCodecParams p) {
    const int head = blockIdx.x, s = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int H = p.nheads, P = p.headdim;
    __shared__ float sScratch[32];
    const int64_t sRow = p.fmt == RSSM_DTYPE_NVFP4 ? kRowN / 2 : kRowN;
    const CopyRef c{p.fmt, p.data, sRow * P * H, sRow * P, sRow, p.scale, p.gscale};
    float* x = p.x;
    if (p.direction == 1) {
        for (int r = 0; r < RPW; ++r) {
            const int row = warp + kWarps * r;
            if (row >= P) break;
            const float4 v = loadRowExact(c, s, head, row, H, P, lane);
            *reinterpret_cast<float4*>(x + (((int64_t)s * H + head) * P + row) * kRowN + 4 * lane) = v;
        }
        return;
    }
    float4 S[RPW];
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        S[r] = row < P ? *reinterpret_cast<const float4*>(x + (((int64_t)s * H + head) * P + row) * kRowN + 4 * lane)
                       : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    SrKey key;
    key.slot = p.slot_ids ? (uint32_t)p.slot_ids[s] : (uint32_t)s;
    key.layer = (uint32_t)p.layer_index;
    key.flush = p.flush_index ? (uint32_t)p.flush_index[s] : 0u;
    key.k0 = p.seed_lo;
    key.k1 = p.seed_hi;
    const bool sr = p.rounding == RSSM_ROUNDING_SR;
    float g = 1.f;
    bool finite = true;
    if (p.fmt == RSSM_DTYPE_NVFP4) {
        float a = 0.f;
#pragma unroll
        for (int r = 0; r < RPW; ++r)
            if (warp + kWarps * r < P) a = amaxNan(a, amax4(S[r]));
        g = nvfp4Global(ctaAmaxNan(a, sScratch), &finite);
        if (threadIdx.x == 0) writeNvfp4Global(c, s, head, H, g, finite);
    }
    const uint32_t eHead = (uint32_t)head * (uint32_t)P * kRowN;
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
        const int row = warp + kWarps * r;
        if (row >= P) break;
        storeRow(c, s, head, row, H, P, lane, S[r], sr, key, eHead + (uint32_t)row * kRowN + 4u * lane, g, finite);
    }
}

// Launch with `smem` bytes of dynamic shared memory, opted in where static + dynamic exceed 48 KB
// (the GDN kernels hold 34 KB of normalized keys statically). grid.x == 0: the compacted kernel on one wave
// of CTAs (as many as fit on the device, at most one per item).
// args: the kernel's launch argument (p, or FixedFlushArgs for the fixed-format instances).
template <typename Args>
int launchFlush(void (*kernel)(const Args), dim3 grid, int smem, cudaStream_t stream, const DualPrecisionFlushParams& p,
                const Args& args) {
    // Opt in every time (a per-function attribute: whether static + dynamic passes 48 KB depends on the sizes of
    // this launch, not of an earlier one); fail clearly where the device cannot hold it.
    int dev = 0, optin = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && (long long)fa.sharedSizeBytes + smem > optin)
        return setError(RSSM_ERR_UNSUPPORTED, "DualPrecisionFlush: needs %lld bytes of shared memory per CTA (window "
                        "%d, headdim %d); the device allows %d", (long long)fa.sharedSizeBytes + smem, p.window,
                        p.headdim, optin);
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (grid.x == 0) {
        const long long items = (long long)p.batch * p.nheads;
        int perSm = occupancyPerSm(reinterpret_cast<const void*>(kernel), kThreads, smem);
        // RSSM_DP_FLUSH_CTAS_PER_SM=n (read per launch, A/B timing): at most n CTAs per SM, leaving room for a decode
        // that runs beside the flush (the caches' concurrent_flush); the items are shared round-robin, so any grid
        // gives the same bytes
        const char* cap = getenv("RSSM_DP_FLUSH_CTAS_PER_SM");
        const int capN = cap ? atoi(cap) : 0;
        if (capN > 0 && capN < perSm) perSm = capN;
        long long g = (long long)perSm * deviceSmCount();
        if (g > items) g = items;
        grid = dim3((unsigned)(g > 0 ? g : 1));
    }
    kernel<<<grid, kThreads, smem, stream>>>(args);
    return RSSM_OK;
}

using FixedFlushKernelFn = void (*)(const FixedFlushArgs);

// Fixed-format instances of the compacted kernel (the default; RSSM_DP_FLUSH_FIXED_FMT=0 off): two copies, read
// fp16 / fp8_e4m3 / nvfp4 x recurrence fp32 / fp16 (the combinations `bench precision` times); NULL for any other
// combination or a shared copy, which take the run-time-format kernel. The instances also fix whether the head dim
// fills the warps' rows (FULL) and the activation format (ACT).
template <int FAMILY, int RPW, int HPF, bool FULL, int ACT>
FixedFlushKernelFn fixedFormatByRead(int read) {
    switch (read) {
        case RSSM_DTYPE_FP16: return &flushCompactFixedKernel<FAMILY, RPW, HPF, RSSM_DTYPE_FP16, FULL, ACT>;
        case RSSM_DTYPE_FP8_E4M3: return &flushCompactFixedKernel<FAMILY, RPW, HPF, RSSM_DTYPE_FP8_E4M3, FULL, ACT>;
        case RSSM_DTYPE_NVFP4: return &flushCompactFixedKernel<FAMILY, RPW, HPF, RSSM_DTYPE_NVFP4, FULL, ACT>;
        default: return nullptr;
    }
}
template <int FAMILY, int RPW, bool FULL, int ACT>
FixedFlushKernelFn fixedFormatByCopies(const DualPrecisionFlushParams& p) {
    switch (p.recurrence_dtype) {
        case RSSM_DTYPE_FP32: return fixedFormatByRead<FAMILY, RPW, RSSM_DTYPE_FP32, FULL, ACT>(p.read_dtype);
        case RSSM_DTYPE_FP16: return fixedFormatByRead<FAMILY, RPW, RSSM_DTYPE_FP16, FULL, ACT>(p.read_dtype);
        default: return nullptr;
    }
}
template <int FAMILY, int RPW>
FixedFlushKernelFn fixedFormatKernel(const DualPrecisionFlushParams& p) {
    if (!p.ckpt_hp) return nullptr;
    const bool full = p.headdim == kWarps * RPW, bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    if (full) return bf16 ? fixedFormatByCopies<FAMILY, RPW, true, 1>(p) : fixedFormatByCopies<FAMILY, RPW, true, 0>(p);
    return bf16 ? fixedFormatByCopies<FAMILY, RPW, false, 1>(p) : fixedFormatByCopies<FAMILY, RPW, false, 0>(p);
}

template <int FAMILY>
int launchFamily(const DualPrecisionFlushParams& p, bool itemGrid, int smem, cudaStream_t stream) {
    const bool small = p.headdim <= 64;
    // The fixed-format instances by default (1); RSSM_DP_FLUSH_FIXED_FMT=0: the run-time-format kernel (A/B); =2: the
    // fixed-format instances with every nvfp4 division by __fdiv_rn
    const char* ff = getenv("RSSM_DP_FLUSH_FIXED_FMT");
    const int fixedFmt = ff && (strcmp(ff, "0") == 0 || strcmp(ff, "2") == 0) ? ff[0] - '0' : 1;
    if (!itemGrid && fixedFmt) {
        const FixedFlushKernelFn k = small ? fixedFormatKernel<FAMILY, 8>(p) : fixedFormatKernel<FAMILY, 16>(p);
        // (Mamba-2: fw_j x_j as [nf][kWarps][RPW], mamba2FlushItem)
        const int smemFixed = flushSmemBytes(FAMILY, p.window, p.headdim, kWarps * (small ? 8 : 16));
        if (k)
            return launchFlush(k, dim3(0), smemFixed, stream, p,
                               FixedFlushArgs{p, philoxRoundKeys(p.seed_lo, p.seed_hi), fixedFmt == 1 ? 1 : 0});
    }
    if (itemGrid) {
        const dim3 grid(p.nheads, p.batch);
        return small ? launchFlush(&flushItemGridKernel<FAMILY, 8>, grid, smem, stream, p, p)
                     : launchFlush(&flushItemGridKernel<FAMILY, 16>, grid, smem, stream, p, p);
    }
    return small ? launchFlush(&flushCompactKernel<FAMILY, 8>, dim3(0), smem, stream, p, p)
                 : launchFlush(&flushCompactKernel<FAMILY, 16>, dim3(0), smem, stream, p, p);
}

bool isStoredFmt(int f) {
    return f == RSSM_DTYPE_FP32 || f == RSSM_DTYPE_FP16 || f == RSSM_DTYPE_BF16 || f == RSSM_DTYPE_FP8_E4M3 ||
           f == RSSM_DTYPE_NVFP4;
}

bool aligned(const void* p, int a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

}  // namespace
}  // namespace dp
}  // namespace rssm

using namespace rssm;
using namespace rssm::dp;

extern "C" int rssm_dual_precision_flush_launch(const DualPrecisionFlushParams* p, cudaStream_t stream) {
    const char* op = "DualPrecisionFlush";
    if (!p) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params is NULL", op);
    if (p->family != RSSM_FAMILY_MAMBA2 && p->family != RSSM_FAMILY_GDN)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: family must be 0 (mamba2) or 1 (gdn); got %d", op, p->family);
    if (p->batch < 0 || p->num_slots < 1 || p->nheads < 1 || p->ngroups < 1 || p->nheads % p->ngroups)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: need batch >= 0, num_slots >= 1, nheads a positive multiple of ngroups; got batch=%d "
                        "num_slots=%d nheads=%d ngroups=%d", op, p->batch, p->num_slots, p->nheads, p->ngroups);
    if (p->dstate != kRowN)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: dstate (N / K) must be %d; got %d", op, kRowN, p->dstate);
    // a multiple of 8, as the decode launcher requires (the Mamba-2 item keeps fw_j x_j as [nf][P] fp32 in front of
    // its 16-byte aligned state tile: any P that is not a multiple of 4 would misalign the tile)
    if (p->headdim < 8 || p->headdim > 128 || p->headdim % 8)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: headdim (P / V) must be a multiple of 8 in [8, 128]; got %d", op,
                        p->headdim);
    if (p->window < 1 || p->window > 64)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: window must be in [1, 64]; got %d", op, p->window);
    if (p->mode != 0 && p->mode != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mode must be 0 or 1; got %d", op, p->mode);
    if (p->num_tokens < 1 || p->num_tokens > 8 || (p->mode == 0 && p->num_tokens != 1))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_tokens must be 1 (standard) or in [1, 8] (speculative); "
                        "got %d in mode %d", op, p->num_tokens, p->mode);
    const int need = p->mode == 0 ? p->window : p->window + p->num_tokens;
    if (p->ring_capacity < need)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_capacity must be >= %d; got %d", op, need,
                        p->ring_capacity);
    if (p->act_dtype != RSSM_DTYPE_FP16 && p->act_dtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: act_dtype must be FP16 (1) or BF16 (2); got %d", op, p->act_dtype);
    const bool shared = p->ckpt_hp == nullptr;
    if (!shared && p->recurrence_dtype != RSSM_DTYPE_FP32 && p->recurrence_dtype != RSSM_DTYPE_FP16 &&
        p->recurrence_dtype != RSSM_DTYPE_BF16 && p->recurrence_dtype != RSSM_DTYPE_FP8_E4M3)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: recurrence_dtype must be FP32/FP16/BF16/FP8_E4M3; got %d", op,
                        p->recurrence_dtype);
    if (!isStoredFmt(p->read_dtype))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: read_dtype must be FP32/FP16/BF16/FP8_E4M3/NVFP4; got %d", op,
                        p->read_dtype);
    if (p->rounding != RSSM_ROUNDING_RTN && p->rounding != RSSM_ROUNDING_SR)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rounding must be 0 (RTN) or 1 (SR); got %d", op, p->rounding);
    if (!p->ring_origin || !p->ring_len || !p->ckpt_lp)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_origin, ring_len and ckpt_lp are required", op);
    if (!shared && p->recurrence_dtype == RSSM_DTYPE_FP8_E4M3 && !p->ckpt_hp_scale)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_hp_scale is required for an fp8_e4m3 recurrence copy", op);
    if ((p->read_dtype == RSSM_DTYPE_FP8_E4M3 || p->read_dtype == RSSM_DTYPE_NVFP4) && !p->ckpt_lp_scale)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_lp_scale is required for read_dtype %d", op, p->read_dtype);
    if (p->read_dtype == RSSM_DTYPE_NVFP4 && !p->ckpt_lp_gscale)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_lp_gscale is required for an nvfp4 read copy", op);
    if (p->family == RSSM_FAMILY_MAMBA2 && (!p->A || !p->ring_dt || !p->ring_x || !p->ring_B))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mamba2 needs A, ring_dt, ring_x and ring_B", op);
    if (p->family == RSSM_FAMILY_GDN && (!p->ring_g || !p->ring_k || !p->ring_beta || !p->ring_v))
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: gdn needs the two-precision records ring_g, ring_k, ring_beta and ring_v", op);
    if (!aligned(p->ckpt_lp, 16) || (!shared && !aligned(p->ckpt_hp, 16)))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: checkpoint copies must be 16-byte aligned", op);
    if (p->family == RSSM_FAMILY_MAMBA2 ? !aligned(p->ring_x, 16) || !aligned(p->ring_B, 16) : !aligned(p->ring_v, 16))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring records (%s) must be 16-byte aligned", op,
                        p->family == RSSM_FAMILY_MAMBA2 ? "ring_x, ring_B" : "ring_v");
    if (p->q) {  // deferred flushing rows of a GDN standard step
        if (p->family != RSSM_FAMILY_GDN || p->mode != 0 || p->x)
            return setError(RSSM_ERR_UNSUPPORTED, "%s: deferred GDN flushing rows (q != NULL) need family 1 (gdn), "
                            "mode 0 and no Mamba-2 inputs; got family %d, mode %d", op, p->family, p->mode);
        if (!p->k || !p->v || !p->a || !p->b || !p->A_log || !p->gdn_dt_bias || !p->o)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: deferred GDN flushing rows need q, k, v, a, b, A_log, "
                            "gdn_dt_bias and o", op);
        if (!aligned(p->q, 16) || !aligned(p->k, 16) || !aligned(p->v, 16) || !aligned(p->o, 4))
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: q, k and v must be 16-byte aligned, o 4-byte aligned; got "
                            "q=%p k=%p v=%p o=%p", op, p->q, p->k, p->v, p->o);
    }
    if (p->x) {  // deferred flushing rows of a Mamba-2 standard step: this step's token from the inputs, outputs y
        if (p->family != RSSM_FAMILY_MAMBA2 || p->mode != 0)
            return setError(RSSM_ERR_UNSUPPORTED, "%s: deferred flushing rows (x != NULL: the flush writes their outputs) "
                            "are a Mamba-2 standard-mode path; got family %d, mode %d", op, p->family, p->mode);
        if (!p->dt_raw || !p->Bm || !p->Cm || !p->y)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: deferred flushing rows need x, dt_raw, Bm, Cm and y "
                            "(z, D, dt_bias optional)", op);
        if (p->dt_dtype != RSSM_DTYPE_FP32 && p->dt_dtype != p->act_dtype)
            return setError(RSSM_ERR_UNSUPPORTED, "%s: dt_dtype must be FP32 (0) or act_dtype (%d); got %d", op,
                            p->act_dtype, p->dt_dtype);
        if (!aligned(p->x, 16) || !aligned(p->Bm, 16) || !aligned(p->Cm, 16) || !aligned(p->y, 4) ||
            (p->z && !aligned(p->z, 4)))
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: x, Bm and Cm must be 16-byte aligned, y and z 4-byte "
                            "aligned; got x=%p Bm=%p Cm=%p y=%p z=%p", op, p->x, p->Bm, p->Cm, p->y, p->z);
    }
    if (p->batch == 0) return RSSM_OK;
    const int smem = flushSmemBytes(p->family, p->window, p->headdim, p->headdim);
    // RSSM_DP_FLUSH_GRID=items (read per launch, A/B timing): one CTA per (state head, decode row) instead of
    // the compacted one-wave kernel; the same item body, so the same bytes.
    const char* fg = getenv("RSSM_DP_FLUSH_GRID");
    const bool itemGrid = fg && strcmp(fg, "items") == 0;
    const int st = p->family == RSSM_FAMILY_MAMBA2 ? launchFamily<RSSM_FAMILY_MAMBA2>(*p, itemGrid, smem, stream)
                                                   : launchFamily<RSSM_FAMILY_GDN>(*p, itemGrid, smem, stream);
    if (st != RSSM_OK) return st;
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return setError(RSSM_ERR_CUDA, "%s: launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}

extern "C" int rssm_dual_precision_codec_launch(const DualPrecisionCodecParams* p, cudaStream_t stream) {
    const char* op = "DualPrecisionCodec";
    if (!p) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params is NULL", op);
    if (p->direction != 0 && p->direction != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: direction must be 0 (encode) or 1 (decode); got %d", op,
                        p->direction);
    if (!isStoredFmt(p->fmt)) return setError(RSSM_ERR_UNSUPPORTED, "%s: unknown fmt %d", op, p->fmt);
    if (p->dstate != kRowN)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: dstate must be %d; got %d", op, kRowN, p->dstate);
    if (p->headdim < 1 || p->headdim > 128 || p->nheads < 1 || p->num_states < 0)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: need headdim in [1, 128], nheads >= 1, num_states >= 0; got "
                        "headdim=%d nheads=%d num_states=%d", op, p->headdim, p->nheads, p->num_states);
    if (!p->x || !p->data || ((p->fmt == RSSM_DTYPE_FP8_E4M3 || p->fmt == RSSM_DTYPE_NVFP4) && !p->scale) ||
        (p->fmt == RSSM_DTYPE_NVFP4 && !p->gscale))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: x, data (and scale / gscale for fp8 / nvfp4) are required", op);
    if (!aligned(p->x, 16) || !aligned(p->data, 16))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: x and data must be 16-byte aligned", op);
    if (p->rounding != RSSM_ROUNDING_RTN && p->rounding != RSSM_ROUNDING_SR)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rounding must be 0 or 1; got %d", op, p->rounding);
    if (p->num_states == 0) return RSSM_OK;
    const dim3 grid(p->nheads, p->num_states);
    if (p->headdim <= 64) codecKernel<8><<<grid, kThreads, 0, stream>>>(*p);
    else codecKernel<16><<<grid, kThreads, 0, stream>>>(*p);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return setError(RSSM_ERR_CUDA, "%s: launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}
