// ReplaySSM Mamba-2 decode, variant 4 ("split"): two kernels per step, so that the state stream runs
// without a per-head preamble in its way. With la_j = dt_j A and cum_k = sum_{i<=k} la_i:
//
//   1. Prep kernel, one CTA per (row b, group g, chunk of <= 16 heads of the group): reads the cursors,
//      appends this step's records (dt, x, B) to the ring, forms the record dots B_j . C_s once per
//      group and the prefix sums per head, and writes one head record per (row, head) to the workspace:
//        gamma_s = exp(cum_{h+s}),
//        coef_{s,j} = exp(cum_{h+s} - cum_j) dt_j (B_j . C_s) for j <= h + s, plus D at j = h + s,
//        on a flush step fw_j = exp(cum_{nf-1} - cum_j) dt_j and gfold = exp(cum_{nf-1}),
//        and the cursors (nf, o, h).
//   2. Readout kernel, persistent warps over items of 8 state rows of one (row b, head), taken from a
//      per-CTA counter (a static grid stride at small batch).
//      Lane j of a warp loads x_j[8 rows] of record j (one 16-byte load) and its coefficients, so
//        y_s[p] = (sum over lanes of gamma_s S[p, lane cols] . C_s[lane cols] + coef_{s,lane} x_lane[p])
//                 * silu(z_s[p])
//      is one reduce-scatter per token. The next item's loads (state rows, x_j, coefficients, z, C) are
//      issued before the current item is computed; the slot and the head record's cursors two items
//      ahead. On a flush step the warp stages B_j and fw_j x_j in shared memory (two chunks of 8 records
//      in flight) and folds S <- gfold S + sum_{j < nf} fw_j x_j B_j^T into its rows, then stores them.
// Records per step R = h + T <= 32 (one record per lane): standard mode L <= 32, speculative L + T <= 32
// (the launcher refuses larger windows for this variant).
// Same function, records, appends and skip rules as the other variants (mamba2_stream_kernel.cuh):
// padding rows untouched, invalid cursors -> NaN outputs and nothing written; with skip_flush_rows the prep
// marks flushing rows (kSplitSkipRow) and neither kernel touches them (the dual-precision decode does).
// The readout also reads read-only fp8 / nvfp4 rows (common/read_rows.cuh); the read-copy readout at the
// end of this file is the 16-row variant for read-only rows (docs/precision.md, sixth session).
#pragma once
#include "common/fold_mma.cuh"
#include "common/pdl.h"
#include "common/read_rows.cuh"
#include "common/stream_rows.cuh"
#include "common/warp_scan.cuh"
#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kSplitHeadsPerPrep = 16;
constexpr int kSplitPrepThreads = 256;
constexpr int kSplitReadoutThreads = 256;
constexpr int kSplitRows = 8;        // state rows per readout item (one warp)
constexpr int kSplitMaxRecords = 32;  // records per step (one per lane)
constexpr int kSplitFoldChunk = 8;    // records per staged B chunk (fold)
constexpr int kSplitCoef = 16;        // head record: first coefficient word
constexpr int kSplitSkipRow = -2;     // head record nf: a flushing row under skip_flush_rows (readout: untouched)

// ceil(2^16 / ppr) for ppr = P / 8 16-byte pieces per x row (ppr <= 16: headdim <= 128, as the preps' launchers
// require), so that the row of piece i is (i * magic) >> 16 for i < 16 ppr. From the reciprocal rounded up (exact
// for powers of two, at most one ulp above 1 / ppr otherwise, i.e. at most 2^-7 above 2^16 / ppr, less than the
// 1 / ppr that a non-integer 2^16 / ppr lies below the next integer): a few register instructions instead of a
// run-time integer division (4.4% of the four-token prep's instructions: the lambda below divided at each of its two
// call sites; thirty-first session). A table in constant memory, tried first, made the one-token fused step of the
// same module 0.2 us slower at B = 1 (docs/kernels-mamba2.md "Thirty-first session"). ppr > 16 (not reached) divides.
__device__ __forceinline__ int xPieceMagic(int ppr) {
    return ppr <= 16 ? __float2int_ru(__frcp_ru((float)ppr) * 65536.f) : (65536 + ppr - 1) / ppr;
}

// Head record (fp32 words, one per (row b, head)): [0, 8) gamma_s; [8] gfold; [9] nf (int bits, -1:
// invalid cursors); [10] o (int bits); [11] h (int bits); [16 + s * (L + T) + j] coef_{s,j};
// [16 + T * (L + T) + j] fw_j. Rounded up to 4 words (16-byte aligned records).
__host__ __device__ inline int splitRecordWordsM2(int L, int T) { return (kSplitCoef + (T + 1) * (L + T) + 3) / 4 * 4; }
__host__ __device__ inline size_t splitWorkspaceBytesM2(int B, int T, int H, int L) {
    return (size_t)B * H * splitRecordWordsM2(L, T) * sizeof(float);
}
// Prep kernel dynamic shared memory: B_j bits [R][N], C_s [T][N] fp32, dots [T][R]; or, with the record dots on
// tensor cores (MMADOT), B_j bits [R][N + 8] and C_s bits [T][N + 8] (padded rows: conflict-free ldmatrix), dots
// [T][R]. Sized for the larger of the two layouts (one size for every prep instance). T > 1: then (XSM) this step's x
// rows of the CTA's heads, [heads][T][P] bits (heads = min(16, heads per group)), at a 16-byte aligned offset
// (splitPrepXStageOffsetM2).
// (32-bit arithmetic: R <= 40 records, N <= 256, T <= 8 keep every term far below 2^32; the prep computes it per CTA)
__host__ __device__ inline size_t splitPrepXStageOffsetM2(int L, int T, int N) {
    const unsigned R = (unsigned)(L + T), t = (unsigned)T, n = (unsigned)N;
    const unsigned scalar = R * n * 2u + t * n * 4u + t * R * 4u;
    const unsigned mma = (R + t) * (n + 8u) * 2u + t * R * 4u;
    return ((scalar > mma ? scalar : mma) + 15u) / 16u * 16u;
}
__host__ __device__ inline size_t splitPrepSmemBytesM2(int L, int T, int N, int P, int headsPerGroup) {
    const int heads = headsPerGroup < kSplitHeadsPerPrep ? headsPerGroup : kSplitHeadsPerPrep;
    return splitPrepXStageOffsetM2(L, T, N) + (T > 1 ? (size_t)heads * T * P * 2 : 0);
}
static_assert(kSplitHeadsPerPrep % (kSplitPrepThreads / 32) == 0, "heads per prep warp");
// Readout kernel dynamic shared memory: per warp two chunks of kSplitFoldChunk B_j rows (16-bit) and
// their fold weights times x (fp32 [8 records][8 rows]).
__host__ __device__ inline size_t splitReadoutWarpSmemBytesM2(int N) {
    return 2 * (size_t)kSplitFoldChunk * N * 2 + 2 * (size_t)kSplitFoldChunk * kSplitRows * 4;
}
__host__ __device__ inline size_t splitReadoutSmemBytesM2(int N) {
    return (size_t)(kSplitReadoutThreads / 32) * splitReadoutWarpSmemBytesM2(N);
}
// The readout with the tensor-core fold (kSplitMmaFold, N = 128): per warp the larger of the two folds' areas.
__host__ __device__ constexpr size_t splitMmaFoldWarpSmemBytesM2(int N) {
    return (size_t)foldmma::kFoldMmaWarpBytes > 2 * (size_t)kSplitFoldChunk * N * 2 + 2 * (size_t)kSplitFoldChunk * kSplitRows * 4
               ? (size_t)foldmma::kFoldMmaWarpBytes
               : 2 * (size_t)kSplitFoldChunk * N * 2 + 2 * (size_t)kSplitFoldChunk * kSplitRows * 4;
}
__host__ __device__ inline size_t splitMmaFoldSmemBytesM2(int N) {
    return (size_t)(kSplitReadoutThreads / 32) * splitMmaFoldWarpSmemBytesM2(N);
}

// The prep kernel's body for CTAs of THREADS threads (heads per warp = 16 / warps). Two entry points below:
// the default one (256 threads, no occupancy bound) and bounded ones for the occupancy A/B of launchSplit.
// LF (T > 1, dstate <= 128): this step's B / C of all T tokens are loaded before any of their stores (one round trip;
// a thread's loads of token s + 1 cannot pass its ring store of token s, which may alias them, so the token loop
// paid one round trip per token), and stored after the dt loads are issued.
// MMADOT (with LF's path only): the record dots B_j . C_s on tensor cores (m16n8k16, the raw 16-bit B and C bits,
// exact products, fp32 accumulation), one warp per 16 records, instead of a warp per record with shuffle reductions
// (twenty-first session: the dots were about 30% of the eight-token prep's stall samples).
// XSM (T > 1; the launcher picks it for 16-byte aligned x only): this step's x rows are copied to shared memory with
// cp.async beside the other loads and appended to the ring from there after the wait, instead of through 2 x 4 uint4
// registers per lane (the eight-token prep's largest register block; twenty-first session).
// EXACT (with LF, MMADOT and XSM; thirty-third session): T = MAXT and dstate = 128 at compile time, so the token and
// element bounds fold, and this step's B / C move as 8-byte pieces (4 elements per thread and tensor: THREADS x 4 = T x
// 128) instead of 16-bit values. The launcher instantiates it for exactly four tokens only (128 threads), for dstate 128
// and 8-byte aligned B / C rows; an eight-token instance measured slower (docs/kernels-mamba2.md "Thirty-third session").
template <int MAXT, int THREADS, bool LF = false, bool MMADOT = false, bool XSM = false, bool EXACT = false>
__device__ __forceinline__ void splitPrepBody(const Mamba2ReplayParams& p) {
    static_assert(!EXACT || (LF && MMADOT && XSM && THREADS * 4 == MAXT * 128), "EXACT: the x-staged MMA-dot prep, "
                                                                               "one 4-element piece per thread");
    // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h); then the readout may be
    // scheduled (it waits for this grid before reading its output)
    pdlChainEntry();
    const int b = blockIdx.z, g = blockIdx.y;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int H = p.nheads, G = p.ngroups, P = p.headdim, N = EXACT ? 128 : p.dstate;
    const int T = EXACT ? MAXT : p.num_tokens, L = p.window, Cap = p.ring_capacity;
    const int hpg = H / G;
    const int h0 = g * hpg + blockIdx.x * kSplitHeadsPerPrep;  // first head of this CTA
    const int nh = min(kSplitHeadsPerPrep, (g + 1) * hpg - h0);
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    constexpr int NW = THREADS / 32;
    constexpr int HPW = kSplitHeadsPerPrep / NW;  // heads per warp (2 at 256 threads)
    static_assert(kSplitHeadsPerPrep % NW == 0, "heads per prep warp");
    const int RM = L + T, RW = splitRecordWordsM2(L, T);

    float* ws = static_cast<float*>(p.workspace) + ((int64_t)b * H + h0) * RW;  // head record of head h0

    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool valid = o >= 0 && o < Cap && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L) && h + T <= Cap;
    if (!valid) {  // the readout poisons these rows' outputs; nothing is appended
        if (tid < nh) ws[tid * RW + 9] = __int_as_float(-1);
        return;
    }
    const bool flush = p.mode == 0 ? (h + 1 == L) : (h + T > L);
    if (flush && p.skip_flush_rows) {  // the dual-precision decode handles this row (outputs and appends)
        if (tid < nh) ws[tid * RW + 9] = __int_as_float(kSplitSkipRow);
        return;
    }
    const int nf = flush ? (p.mode == 0 ? h + 1 : h) : 0;
    const int R = h + T;  // records seen this step (<= 32: one per lane)
    const int64_t ringRowSlot = (int64_t)slot * Cap;
    int rrLane = o + lane;  // ring row of record `lane`
    rrLane = rrLane >= Cap ? rrLane - Cap : rrLane;

    // LF / MMADOT as in the comment above: LF for N <= 128 only, MMADOT on LF's path only
    constexpr int kLfPer = LF ? (MAXT * 128 + THREADS - 1) / THREADS : 1;
    const bool lf = LF && MAXT > 1 && N <= 128;
    const bool mmaDots = MMADOT && lf;
    const int sbStride = mmaDots ? N + 8 : N;  // B_j / C_s row stride (elements)

    extern __shared__ __align__(16) unsigned char smemSplit[];
    uint16_t* sX = reinterpret_cast<uint16_t*>(smemSplit + splitPrepXStageOffsetM2(L, T, N));  // (XSM) x rows
    bool xStaged = false;
    // (XSM) fn(hl, i, s, v, ppr) for each 16-byte x piece of this lane: piece i = s ppr + v (token s, piece v of its
    // row; ppr = P / 8 pieces per row) of the warp's heads hl = warp + NW k
    const int ppr = P / 8;
    const int magic = xPieceMagic(ppr);  // token = (i * magic) >> 16 for i < T * ppr
    auto forEachXPiece = [&](auto&& fn) {
        constexpr int kPiecesPerLane = (MAXT * 16 + 31) / 32;  // T tokens x P / 8 <= 16 pieces per head and token
#pragma unroll
        for (int k = 0; k < HPW; ++k) {
            const int hl = warp + NW * k;
#pragma unroll
            for (int e = 0; e < kPiecesPerLane; ++e) {
                const int i = lane + 32 * e;
                if (hl < nh && i < T * ppr) {
                    const int s = (i * magic) >> 16, v = i - s * ppr;
                    fn(hl, i, s, v, ppr);
                }
            }
        }
    };
    uint16_t* sB = reinterpret_cast<uint16_t*>(smemSplit);      // [R][sbStride] B_j bits
    float* sC = reinterpret_cast<float*>(sB + R * N);           // (scalar dots) [T][N]
    uint16_t* sC16 = sB + R * sbStride;                         // (MMADOT) [T][sbStride] C_s bits
    float* sDot = mmaDots ? reinterpret_cast<float*>(sC16 + T * sbStride) : sC + T * N;  // [T][R]

    // ---- committed B_j of the group (cp.async; one warp per record), this step's B_s / C_s
    const uint16_t* rB = static_cast<const uint16_t*>(p.ring_B);
    for (int j = warp; j < h; j += NW) {
        int rr = o + j;
        rr = rr >= Cap ? rr - Cap : rr;
        for (int v = lane; v < N / 8; v += 32) cpAsync16(sB + j * sbStride + v * 8, rB + ((ringRowSlot + rr) * G + g) * N + v * 8);
    }
    cpAsyncCommit();
    // LF: B / C of this step as packed pairs (B bits | C bits << 16), element i = s N + n of the lane's tid + e THREADS
    const int nShift = __ffs(N) - 1;  // N is a power of two (launcher)
    uint32_t bcLf[kLfPer];
    const uint16_t* Bg = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)g * p.stride_B_g;
    const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g;
    uint2 bExact = make_uint2(0u, 0u), cExact = make_uint2(0u, 0u);  // (EXACT) elements 4 tid .. 4 tid + 3
    if constexpr (EXACT) {
        const int s = tid >> 5, n = (tid & 31) * 4;
        bExact = *reinterpret_cast<const uint2*>(Bg + s * p.stride_B_t + n);
        cExact = *reinterpret_cast<const uint2*>(Cg + s * p.stride_C_t + n);
    } else if (lf) {
#pragma unroll
        for (int e = 0; e < kLfPer; ++e) {
            const int i = tid + e * THREADS, s = i >> nShift, n = i - (s << nShift);
            bcLf[e] = i < T * N ? (uint32_t)Bg[s * p.stride_B_t + n] | ((uint32_t)Cg[s * p.stride_C_t + n] << 16) : 0u;
        }
    } else {
        uint16_t* wB = static_cast<uint16_t*>(p.ring_B);
        const bool writeB = blockIdx.x == 0;
        for (int s = 0; s < T; ++s) {
            int rr = o + h + s;
            rr = rr >= Cap ? rr - Cap : rr;
            for (int n = tid; n < N; n += THREADS) {
                const uint16_t bb = Bg[s * p.stride_B_t + n];
                sB[(h + s) * N + n] = bb;
                sC[s * N + n] = actToFloat(Cg[s * p.stride_C_t + n], actBf16);
                if (writeB) wB[((ringRowSlot + rr) * G + g) * N + n] = bb;
            }
        }
    }
    // ---- per head (a warp owns heads warp + NW k): dt_j of record j = lane (ring or this step's,
    //      appended), and the x append of this step's records. Every load of the warp's heads and tokens
    //      first, then the stores: a store between two loads would order them (one round trip each).
    //      x rows go as 16-byte pieces when x is 16-byte aligned (one piece per lane and (head, token) group:
    //      lane = token * P / 8 + piece), else as 16-bit values.
    float dtj[HPW];
    // The one-token branch is the pre-ninth-session code verbatim (its codegen was measured for the standard step);
    // the T > 1 branch's 16-bit fallback repeats it. Folding the two (ninth session, tried after the last device
    // run) leaves the one-token PTX identical but changes the T > 1 kernels' registers and spills (MAXT = 2: +4 B
    // of spills), so it waits for a session that can re-test and re-time them.
    if constexpr (MAXT == 1) {  // (one token: the 16-bit copies, as measured for the standard step)
        constexpr int kXPerLane = 4;  // headdim <= 128
        uint16_t xv[HPW][MAXT][kXPerLane];
    #pragma unroll
        for (int k = 0; k < HPW; ++k) {
            const int hl = warp + NW * k;
            dtj[k] = 0.f;
            if (hl < nh) {
                const int head = h0 + hl;
                if (lane < h) {
                    dtj[k] = p.ring_dt[(ringRowSlot + rrLane) * H + head];
                } else if (lane < R) {
                    const int s = lane - h;
                    dtj[k] = loadDt(p.dt_raw, dtF32, actBf16,
                                    (int64_t)b * p.stride_dt_b + (int64_t)s * p.stride_dt_t + (int64_t)head * p.stride_dt_h,
                                    p.dt_bias, head);
                }
                const uint16_t* xg = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b + (int64_t)head * p.stride_x_h;
    #pragma unroll
                for (int s = 0; s < MAXT; ++s)
    #pragma unroll
                    for (int i = 0; i < kXPerLane; ++i) {
                        const int row = lane + 32 * i;
                        xv[k][s][i] = (s < T && row < P) ? xg[(int64_t)s * p.stride_x_t + row] : (uint16_t)0;
                    }
            }
        }
    #pragma unroll
        for (int k = 0; k < HPW; ++k) {
            const int hl = warp + NW * k;
            if (hl < nh) {
                const int head = h0 + hl;
                if (lane >= h && lane < R) p.ring_dt[(ringRowSlot + rrLane) * H + head] = dtj[k];
                uint16_t* wX = static_cast<uint16_t*>(p.ring_x);
    #pragma unroll
                for (int s = 0; s < MAXT; ++s) {
                    if (s < T) {
                        int rr = o + h + s;
                        rr = rr >= Cap ? rr - Cap : rr;
    #pragma unroll
                        for (int i = 0; i < kXPerLane; ++i) {
                            const int row = lane + 32 * i;
                            if (row < P) wX[((ringRowSlot + rr) * H + head) * P + row] = xv[k][s][i];
                        }
                    }
                }
            }
        }
    } else {
        // dt_j of the committed records (lane j < h) per head from the ring. Up to four tokens (kDtOnePass), this step's
        // dt of all the warp's heads in one pass, lane k MAXT + s = (head warp + NW k, token s): one softplus evaluation
        // per warp instead of one divergent pass per head (thirty-third session); lanes h .. R - 1 take theirs by a
        // shuffle before the ring append. Eight tokens keep the per-head pass (the one-pass form added 12 bytes of spills
        // to the 32-register eight-token prep).
        constexpr bool kDtOnePass = MAXT <= 4;
        static_assert(!kDtOnePass || HPW * MAXT <= 32, "one lane per (head, token) of the warp");
        float dtNew = 0.f;
    #pragma unroll
        for (int k = 0; k < HPW; ++k) {
            const int hl = warp + NW * k;
            dtj[k] = 0.f;
            if (hl < nh && lane < R) {
                const int head = h0 + hl;
                if (lane < h) {
                    dtj[k] = p.ring_dt[(ringRowSlot + rrLane) * H + head];
                } else if (!kDtOnePass) {
                    const int s = lane - h;
                    dtj[k] = loadDt(p.dt_raw, dtF32, actBf16,
                                    (int64_t)b * p.stride_dt_b + (int64_t)s * p.stride_dt_t + (int64_t)head * p.stride_dt_h,
                                    p.dt_bias, head);
                }
            }
        }
        if constexpr (kDtOnePass) {
            const int kk = lane / MAXT, s = lane % MAXT, hl = warp + NW * kk;  // MAXT: a power of two
            if (lane < HPW * MAXT && hl < nh && s < T) {
                const int head = h0 + hl;
                dtNew = loadDt(p.dt_raw, dtF32, actBf16,
                               (int64_t)b * p.stride_dt_b + (int64_t)s * p.stride_dt_t + (int64_t)head * p.stride_dt_h,
                               p.dt_bias, head);
            }
        }
        if constexpr (EXACT) {  // the same stores as 4-element pieces (mmaDots: padded rows, 8-byte aligned)
            const int s = tid >> 5, n = (tid & 31) * 4;
            *reinterpret_cast<uint2*>(sB + (h + s) * sbStride + n) = bExact;
            *reinterpret_cast<uint2*>(sC16 + s * sbStride + n) = cExact;
            if (blockIdx.x == 0) {
                int rr = o + h + s;
                rr = rr >= Cap ? rr - Cap : rr;
                *reinterpret_cast<uint2*>(static_cast<uint16_t*>(p.ring_B) + ((ringRowSlot + rr) * G + g) * N + n) = bExact;
            }
        } else if (lf) {  // this step's B / C into shared memory, B appended to the ring once per group
            uint16_t* wB = static_cast<uint16_t*>(p.ring_B);
            const bool writeB = blockIdx.x == 0;
#pragma unroll
            for (int e = 0; e < kLfPer; ++e) {
                const int i = tid + e * THREADS, s = i >> nShift, n = i - (s << nShift);
                if (i < T * N) {
                    const uint16_t bb = (uint16_t)(bcLf[e] & 0xFFFFu);
                    if (mmaDots) {
                        sB[(h + s) * sbStride + n] = bb;
                        sC16[s * sbStride + n] = (uint16_t)(bcLf[e] >> 16);
                    } else {
                        sB[(h + s) * N + n] = bb;
                        sC[s * N + n] = actToFloat((uint16_t)(bcLf[e] >> 16), actBf16);
                    }
                    if (writeB) {
                        int rr = o + h + s;
                        rr = rr >= Cap ? rr - Cap : rr;
                        wB[((ringRowSlot + rr) * G + g) * N + n] = bb;
                    }
                }
            }
        }
        uint16_t* wX = static_cast<uint16_t*>(p.ring_x);
            const bool xVec = (P % 8) == 0 && (reinterpret_cast<uintptr_t>(p.x) % 16) == 0 &&
                          (p.stride_x_b % 8) == 0 && (p.stride_x_t % 8) == 0 && (p.stride_x_h % 8) == 0 &&
                          (reinterpret_cast<uintptr_t>(wX) % 16) == 0;
        if constexpr (XSM) {
          if (xVec && T > 1) {
            // piece i = token * P / 8 + piece of head hl at sX + (hl T P / 8 + i) 16 bytes; stored after the wait below
            xStaged = true;
            forEachXPiece([&](int hl, int i, int s, int v, int ppr) {
                cpAsync16(sX + (hl * T * ppr + i) * 8,
                          static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b + (int64_t)s * p.stride_x_t +
                              (int64_t)(h0 + hl) * p.stride_x_h + 8 * v);
            });
          } else {  // (the launcher picks XSM instances for aligned x only; correct but slow otherwise)
            const uint16_t* xb = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b;
    #pragma unroll 1
            for (int k = 0; k < HPW; ++k) {
                const int hl = warp + NW * k;
                if (hl >= nh) break;
    #pragma unroll 1
                for (int i = lane; i < T * P; i += 32) {
                    const int s = i / P, row = i - s * P;
                    int rr = o + h + s;
                    rr = rr >= Cap ? rr - Cap : rr;
                    wX[((ringRowSlot + rr) * H + h0 + hl) * P + row] =
                        xb[(int64_t)s * p.stride_x_t + (int64_t)(h0 + hl) * p.stride_x_h + row];
                }
            }
          }
        } else if (xVec) {
            constexpr int kPiecesPerLane = (MAXT * 16 + 31) / 32;  // per head: T tokens x P / 8 <= 16 pieces
            // ppr = P / 8 16-byte pieces per (token, head) row; token = (i * magic) >> 16 for i < T * ppr (above)
            uint4 xv[HPW][kPiecesPerLane];
    #pragma unroll
            for (int k = 0; k < HPW; ++k) {
                const int hl = warp + NW * k;
    #pragma unroll
                for (int e = 0; e < kPiecesPerLane; ++e) {
                    const int i = lane + 32 * e;
                    xv[k][e] = make_uint4(0u, 0u, 0u, 0u);
                    if (hl < nh && i < T * ppr) {
                        const int s = (i * magic) >> 16, v = i - s * ppr;
                        xv[k][e] = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b +
                                                                   (int64_t)s * p.stride_x_t + (int64_t)(h0 + hl) * p.stride_x_h +
                                                                   8 * v);
                    }
                }
            }
    #pragma unroll
            for (int k = 0; k < HPW; ++k) {
                const int hl = warp + NW * k;
    #pragma unroll
                for (int e = 0; e < kPiecesPerLane; ++e) {
                    const int i = lane + 32 * e;
                    if (hl < nh && i < T * ppr) {
                        const int s = (i * magic) >> 16, v = i - s * ppr;
                        int rr = o + h + s;
                        rr = rr >= Cap ? rr - Cap : rr;
                        *reinterpret_cast<uint4*>(wX + ((ringRowSlot + rr) * H + h0 + hl) * P + 8 * v) = xv[k][e];
                    }
                }
            }
        } else {
            constexpr int kXPerLane = 4;  // headdim <= 128
            uint16_t xv[HPW][MAXT][kXPerLane];
    #pragma unroll
            for (int k = 0; k < HPW; ++k) {
                const int hl = warp + NW * k;
                const uint16_t* xg = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b +
                                     (int64_t)(h0 + (hl < nh ? hl : 0)) * p.stride_x_h;
    #pragma unroll
                for (int s = 0; s < MAXT; ++s)
    #pragma unroll
                    for (int i = 0; i < kXPerLane; ++i) {
                        const int row = lane + 32 * i;
                        xv[k][s][i] = (hl < nh && s < T && row < P) ? xg[(int64_t)s * p.stride_x_t + row] : (uint16_t)0;
                    }
            }
    #pragma unroll
            for (int k = 0; k < HPW; ++k) {
                const int hl = warp + NW * k;
                if (hl < nh) {
    #pragma unroll
                    for (int s = 0; s < MAXT; ++s) {
                        if (s < T) {
                            int rr = o + h + s;
                            rr = rr >= Cap ? rr - Cap : rr;
    #pragma unroll
                            for (int i = 0; i < kXPerLane; ++i) {
                                const int row = lane + 32 * i;
                                if (row < P) wX[((ringRowSlot + rr) * H + h0 + hl) * P + row] = xv[k][s][i];
                            }
                        }
                    }
                }
            }
        }
    #pragma unroll
        for (int k = 0; k < HPW; ++k) {
            const int hl = warp + NW * k;
            if constexpr (kDtOnePass) {
                const float d = __shfl_sync(stream::kFull, dtNew, k * MAXT + ((lane - h) & (MAXT - 1)));
                if (hl < nh && lane >= h && lane < R) dtj[k] = d;
            }
            if (hl < nh && lane >= h && lane < R) p.ring_dt[(ringRowSlot + rrLane) * H + h0 + hl] = dtj[k];
        }
    }
    cpAsyncWaitAll();
    if (XSM && xStaged) {  // the ring append of this step's x rows (each lane stores the pieces it copied)
        uint16_t* wX = static_cast<uint16_t*>(p.ring_x);
        forEachXPiece([&](int hl, int i, int s, int v, int ppr) {
            int rr = o + h + s;
            rr = rr >= Cap ? rr - Cap : rr;
            *reinterpret_cast<uint4*>(wX + ((ringRowSlot + rr) * H + h0 + hl) * P + 8 * v) =
                *reinterpret_cast<const uint4*>(sX + (hl * T * ppr + i) * 8);
        });
    }
    __syncthreads();

    // ---- record dots B_j . C_s (token s sees records j <= h + s; every pair j < R, s < T is formed)
    if (mmaDots) {
        // records as M (16 per warp), tokens as N (one n-tile, T <= 8), dstate as the reduction. ldmatrix rows:
        // A (records) row (lane & 7) + 8 ((lane >> 3) & 1), column half lane >> 4; B (tokens) row lane & 7, the four
        // matrices the four 8-column quarters of two k-steps. Rows past R / T read row 0 (their results are unused).
        const int mt = warp;
        if (mt * 16 < R) {
            const int jr = mt * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
            const uint16_t* aRow = sB + (jr < R ? jr : 0) * sbStride + 8 * (lane >> 4);
            const uint16_t* bRow = sC16 + ((lane & 7) < T ? (lane & 7) : 0) * sbStride + 8 * (lane >> 3);
            float d[4] = {0.f, 0.f, 0.f, 0.f};
            for (int k2 = 0; k2 < N / 32; ++k2) {
                uint32_t a0[4], a1[4], bb[4];
                foldmma::ldmatrixX4(bb, bRow + 32 * k2);
                foldmma::ldmatrixX4(a0, aRow + 32 * k2);
                foldmma::ldmatrixX4(a1, aRow + 32 * k2 + 16);
                foldmma::mma16(d, a0, bb[0], bb[1], actBf16);
                foldmma::mma16(d, a1, bb[2], bb[3], actBf16);
            }
            const int gq = lane >> 2, q = lane & 3;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int j = mt * 16 + gq + 8 * (e >> 1), s = 2 * q + (e & 1);
                if (j < R && s < T) sDot[s * R + j] = d[e];
            }
        }
    } else
    for (int j = warp; j < R; j += NW) {
        float acc[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) acc[s] = 0.f;
        for (int n = lane; n < N; n += 32) {
            const float bv = actToFloat(sB[j * N + n], actBf16);
#pragma unroll
            for (int s = 0; s < MAXT; ++s)
                if (s < T) acc[s] = fmaf(bv, sC[s * N + n], acc[s]);
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                float v = acc[s];
#pragma unroll
                for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(stream::kFull, v, m);
                if (lane == 0) sDot[s * R + j] = v;
            }
        }
    }
    __syncthreads();

    // ---- head records: lane j = record j. Prefix sums of dt_j A, gammas, coefficients (D at
    //      j = h + s), fold weights, cursors. The record dots do not depend on the head: up to four tokens they are read
    //      from shared memory once per warp (registers), not once per head.
    constexpr bool kDotsInRegs = MAXT > 1 && MAXT <= 4;
    float dotReg[kDotsInRegs ? MAXT : 1];
    if constexpr (kDotsInRegs) {
#pragma unroll
        for (int s = 0; s < MAXT; ++s) dotReg[s] = s < T && lane < R ? sDot[s * R + lane] : 0.f;
    }
#pragma unroll
    for (int k = 0; k < HPW; ++k) {
        const int hl = warp + NW * k;
        if (hl >= nh) break;
        const int head = h0 + hl;
        const float cum = scan::warpInclusiveSum(lane < R ? dtj[k] * p.A[head] : 0.f, lane);
        float* rec = ws + hl * RW;
        const float Dh = p.D ? p.D[head] : 0.f;
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                const float cs = __shfl_sync(stream::kFull, cum, h + s);
                if (lane < R) {
                    float dot;
                    if constexpr (kDotsInRegs) dot = dotReg[s];
                    else dot = sDot[s * R + lane];
                    float c = lane <= h + s ? __expf(cs - cum) * dtj[k] * dot : 0.f;
                    if (lane == h + s) c += Dh;
                    rec[kSplitCoef + s * RM + lane] = c;
                }
            }
        }
        // gamma_s = exp(cum_{h+s}) by lane s (h + s <= R - 1 <= 31 for lanes s < T): one shuffle and exponential per
        // head instead of one per token in lane 0 (the same values)
        const float cg = __shfl_sync(stream::kFull, cum, (h + lane) & 31);
        if (lane < T) rec[lane] = __expf(cg);
        const float cl = __shfl_sync(stream::kFull, cum, nf > 0 ? nf - 1 : 0);
        if (lane < nf) rec[kSplitCoef + T * RM + lane] = __expf(cl - cum) * dtj[k];
        if (lane == 0) stream::putSplitRecordCursors(rec, nf > 0 ? __expf(cl) : 1.f, nf, o, h);
    }
}

template <int MAXT, bool LF = false, bool MMADOT = false>
__global__ void __launch_bounds__(kSplitPrepThreads) mamba2SplitPrepKernel(const Mamba2ReplayParams p) {
    splitPrepBody<MAXT, kSplitPrepThreads, LF, MMADOT>(p);
}
// With a minimum of MINB CTAs per SM (ptxas then caps the registers). An explicit minimum of 1 is not the
// same as none: ptxas gives the MAXT = 1 body 64 instead of 40 registers, hence the separate entry point.
template <int MAXT, int THREADS, int MINB, bool LF = false, bool MMADOT = false, bool XSM = false, bool EXACT = false>
__global__ void __launch_bounds__(THREADS, MINB) mamba2SplitPrepKernelBounded(const Mamba2ReplayParams p) {
    splitPrepBody<MAXT, THREADS, LF, MMADOT, XSM, EXACT>(p);
}

using stream::unpack8;
using stream::xorPermute8;

template <typename ST, int N, int MAXT>
struct SplitItem {
    static constexpr int QPL = N / 128;
    stream::WarpRows<kSplitRows, QPL, ST> S;  // raw checkpoint rows (decoded in splitProcess)
    uint2 cq[MAXT][QPL];  // C_s bits of this lane's columns
    uint4 xq;             // x_j[vw .. vw + 7] of record j = lane, natural order (0 past the records)
    float coef[MAXT];     // coef_{s, lane}
    float fw;             // fw_lane (flush items)
    float gam[MAXT];
    float zv[MAXT];       // z_s[row] bits (the lanes that finish token s)
    float gf;
    int b, head, vw, slot, nf, o;  // slot < 0: padding row
};

// Per-item cursors from the head record, loaded two items ahead: (gfold bits, nf, o, h).
__device__ __forceinline__ int4 splitMeta(const Mamba2ReplayParams& p, unsigned it, unsigned items, int nrb, int RW) {
    if (it >= items) return make_int4(0, -1, 0, 0);
    const unsigned bh = it / (unsigned)nrb;
    return *reinterpret_cast<const int4*>(static_cast<const float*>(p.workspace) + (size_t)bh * RW + 8);
}

// The item's checkpoint rows only (the readout's first item, before it waits for the prep grid).
template <typename ST, int N, int MAXT>
__device__ __forceinline__ void splitLoadRows(SplitItem<ST, N, MAXT>& u, const Mamba2ReplayParams& p,
                                              const stream::ReadCopyScales& rc, unsigned it, int slot, int nrb, int rl) {
    const unsigned bh = it / (unsigned)nrb;
    const int head = (int)(bh % p.nheads), vw = (int)(it - bh * (unsigned)nrb) * kSplitRows;
    const int64_t off = (int64_t)slot * p.stride_state_slot + (int64_t)head * p.stride_state_head;
    const void* ckpt = stream::RowQuad<ST>::kScaled ? static_cast<const void*>(static_cast<const uint8_t*>(p.state) + off)
                                                    : static_cast<const void*>(static_cast<const ST*>(p.state) + off);
    u.S.load(ckpt, p.stride_state_p, vw, p.headdim, rl, threadIdx.x & 31, rc, (int64_t)slot * rc.nheads + head);
}

template <typename ST, int N, int MAXT>
__device__ __forceinline__ void splitIssue(SplitItem<ST, N, MAXT>& u, const Mamba2ReplayParams& p,
                                           const stream::ReadCopyScales& rc, unsigned it, int slot, int4 meta, int nrb,
                                           int rl, int sub, bool rowsLoaded = false) {
    constexpr int QPL = N / 128;
    constexpr int LPR = stream::RowScatter<kSplitRows>::LPR;
    const int H = p.nheads, P = p.headdim, T = p.num_tokens, Cap = p.ring_capacity;
    const int lane = threadIdx.x & 31;
    const unsigned bh = it / (unsigned)nrb;
    u.vw = (int)(it - bh * (unsigned)nrb) * kSplitRows;
    u.head = (int)(bh % H);
    u.b = (int)(bh / H);
    u.slot = (slot < 0 || slot >= p.num_slots) ? -1 : slot;
    u.nf = meta.y;
    u.o = meta.z;
    u.gf = __int_as_float(meta.x);
    if (u.slot < 0 || u.nf < 0) return;
    const int64_t ckptOff = (int64_t)u.slot * p.stride_state_slot + (int64_t)u.head * p.stride_state_head;
    const void* ckpt = stream::RowQuad<ST>::kScaled ? static_cast<const void*>(static_cast<const uint8_t*>(p.state) + ckptOff)
                                                    : static_cast<const void*>(static_cast<const ST*>(p.state) + ckptOff);
    if (!rowsLoaded) u.S.load(ckpt, p.stride_state_p, u.vw, P, rl, lane, rc, (int64_t)u.slot * rc.nheads + u.head);
    const int R = meta.w + T;
    const int RW = splitRecordWordsM2(p.window, T), RM = p.window + T;
    const float* hr = static_cast<const float*>(p.workspace) + (size_t)bh * RW;
    u.xq = make_uint4(0u, 0u, 0u, 0u);
    u.fw = 0.f;
    if (lane < R) {
        int rr = u.o + lane;
        rr = rr >= Cap ? rr - Cap : rr;
        u.xq = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.ring_x) +
                                                (((int64_t)u.slot * Cap + rr) * H + u.head) * P + u.vw);
        if (lane < u.nf) u.fw = hr[kSplitCoef + T * RM + lane];
    }
    const int g = u.head / (H / p.ngroups);
    const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)u.b * p.stride_C_b + (int64_t)g * p.stride_C_g +
                         lane * 4;
    const int row = u.vw + rl;
    const uint16_t* zg = p.z ? static_cast<const uint16_t*>(p.z) + (int64_t)u.b * p.stride_z_b +
                                   (int64_t)u.head * p.stride_z_h + row
                             : nullptr;
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        u.coef[s] = 0.f;
        u.gam[s] = 0.f;
        u.zv[s] = 0.f;
        if (s < T) {
            if (lane < R) u.coef[s] = hr[kSplitCoef + s * RM + lane];
            u.gam[s] = hr[s];
#pragma unroll
            for (int i = 0; i < QPL; ++i) u.cq[s][i] = *reinterpret_cast<const uint2*>(Cg + s * p.stride_C_t + 128 * i);
            if (zg && (s % LPR) == sub && row < P) u.zv[s] = __uint_as_float((uint32_t)zg[s * p.stride_z_t]);
        }
    }
}

// S: the item's rows as fp32 (float / 16-bit checkpoints: u.S.raw itself, updated in place by a flush).
// MMAFOLD (N = 128): flush items with bf16 activations fold on tensor cores (common/fold_mma.cuh; sFold then points
// at splitMmaFoldWarpSmemBytesM2 bytes); fp16 activations keep the CUDA-core fold.
// bNew (the one-launch small-batch kernel, mamba2_split_fused.cuh): where a flush reads the B row of its newest
// record (nf - 1, this step's token in standard mode) instead of the ring, because another CTA appends that ring
// row in the same launch. nullptr (every other caller): all B_j from the ring.
// sBStaged (MMAFOLD only; the same kernel): every record's B row already in shared memory in record order
// (foldmma::foldRowsMmaStaged), so the tensor-core fold loads nothing; sFold is then kFoldMmaStagedWarpBytes.
template <typename ST, int N, int MAXT, bool MMAFOLD = false>
__device__ __forceinline__ void splitProcessRows(SplitItem<ST, N, MAXT>& u, float4 (&S)[kSplitRows][N / 128],
                                                 const Mamba2ReplayParams& p, int rl, int sub, uint16_t* sFold,
                                                 const uint16_t* bNew = nullptr, const uint16_t* sBStaged = nullptr) {
    constexpr int QPL = N / 128;
    constexpr int RWS = kSplitRows;
    using RS = stream::RowScatter<RWS>;
    constexpr int LPR = RS::LPR;
    if (u.slot < 0 || u.nf == kSplitSkipRow) return;  // padding row / skipped flushing row: untouched
    const int H = p.nheads, P = p.headdim, T = p.num_tokens, G = p.ngroups, Cap = p.ring_capacity;
    const int lane = threadIdx.x & 31;
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int row = u.vw + rl;
    uint16_t* yg = static_cast<uint16_t*>(p.y) + (int64_t)u.b * p.stride_y_b + (int64_t)u.head * p.stride_y_h + row;
    if (u.nf < 0) {  // invalid cursors: poison, touch nothing else
#pragma unroll
        for (int s = 0; s < MAXT; ++s)
            if (s < T && (s % LPR) == sub && row < P) yg[s * p.stride_y_t] = floatToAct(__int_as_float(0x7fc00000), actBf16);
        return;
    }
    float xf[RWS];  // x_lane of the rows in this lane's register slots
    unpack8(xorPermute8(u.xq, rl), actBf16, xf);
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        if (s < T) {
            float4 c4[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i) c4[i] = stream::u2ToF4(u.cq[s][i], actBf16);
            float part[RWS];
#pragma unroll
            for (int r = 0; r < RWS; ++r) {
                float d = stream::dot4(S[r][0], c4[0]);
#pragma unroll
                for (int i = 1; i < QPL; ++i) d += stream::dot4(S[r][i], c4[i]);
                if constexpr (stream::RowQuad<ST>::kScaled) d *= u.S.factor(r);
                part[r] = fmaf(u.gam[s], d, u.coef[s] * xf[r]);
            }
            const float Y = RS::reduce(part, lane);
            if ((s % LPR) == sub && row < P) {
                const float gate = p.z ? siluF(actToFloat((uint16_t)__float_as_uint(u.zv[s]), actBf16)) : 1.f;
                yg[s * p.stride_y_t] = floatToAct(Y * gate, actBf16);
            }
        }
    }
    if constexpr (!stream::RowQuad<ST>::kWritable) {
        return;  // read-only copies run with skip_flush_rows (launcher rule): no flush items here
    } else if (u.nf > 0) {  // warp-uniform: fold the committed records into the rows, store them
        const int nf = u.nf, g = u.head / (H / G);
        if constexpr (MMAFOLD && N == 128) {
            if (actBf16) {
                const uint16_t* rB0 = static_cast<const uint16_t*>(p.ring_B) + ((int64_t)u.slot * Cap * G + g) * N;
                if (sBStaged)  // every record's B row already in shared memory (the one-launch small-batch step)
                    foldmma::foldRowsMmaStaged(S, u.gf, nf, sBStaged, u.xq, u.fw,
                                               reinterpret_cast<unsigned char*>(sFold), rl, lane);
                else
                    foldmma::foldRowsMma(S, u.gf, nf, rB0, u.o, Cap, (int64_t)G * N, u.xq, u.fw,
                                         reinterpret_cast<unsigned char*>(sFold), rl, lane);
                ST* ck = static_cast<ST*>(p.state) + (int64_t)u.slot * p.stride_state_slot +
                         (int64_t)u.head * p.stride_state_head;
                stream::storeWarpRows<RWS, QPL, ST>(S, ck, p.stride_state_p, u.vw, P, rl, lane);
                return;
            }
        }
#pragma unroll
        for (int r = 0; r < RWS; ++r)
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = stream::scale4(S[r][i], u.gf);
        const uint16_t* rB = static_cast<const uint16_t*>(p.ring_B) + ((int64_t)u.slot * Cap * G + g) * N;
        constexpr int kVecPerRec = N / 8;
        float* wFold = reinterpret_cast<float*>(sFold + 2 * kSplitFoldChunk * N);  // [2][8 records][8 rows]
        auto stage = [&](int c) {  // B_j of records 8c .. 8c + 7 into buffer c & 1, and fw_j x_j[k]
            uint16_t* dst = sFold + (c & 1) * kSplitFoldChunk * N;
            const int n = min(kSplitFoldChunk, nf - c * kSplitFoldChunk);
            for (int i = lane; i < n * kVecPerRec; i += 32) {
                const int jj = i / kVecPerRec, v = i - jj * kVecPerRec;
                int rr = u.o + c * kSplitFoldChunk + jj;
                rr = rr >= Cap ? rr - Cap : rr;
                cpAsync16(dst + jj * N + v * 8, (bNew && c * kSplitFoldChunk + jj == nf - 1)
                                                    ? bNew + v * 8
                                                    : rB + (int64_t)rr * G * N + v * 8);
            }
            cpAsyncCommit();
            const int jj = lane - c * kSplitFoldChunk;  // lane j holds record j's x block and fw_j
            if (jj >= 0 && jj < n) {
                float xv[RWS];
                unpack8(u.xq, actBf16, xv);
                float4* w4 = reinterpret_cast<float4*>(wFold + ((c & 1) * kSplitFoldChunk + jj) * RWS);
                w4[0] = make_float4(u.fw * xv[0], u.fw * xv[1], u.fw * xv[2], u.fw * xv[3]);
                w4[1] = make_float4(u.fw * xv[4], u.fw * xv[5], u.fw * xv[6], u.fw * xv[7]);
            }
        };
        const int nchunks = (nf + kSplitFoldChunk - 1) / kSplitFoldChunk;
        stage(0);
        for (int c = 0; c < nchunks; ++c) {
            if (c + 1 < nchunks) {
                stage(c + 1);
                async::waitAllButOne();
            } else {
                cpAsyncWaitAll();
            }
            __syncwarp();
            const uint16_t* buf = sFold + (c & 1) * kSplitFoldChunk * N;
            const float* wb = wFold + (c & 1) * kSplitFoldChunk * RWS;
            const int n = min(kSplitFoldChunk, nf - c * kSplitFoldChunk);
            stream::foldStagedRecords<RWS, QPL>(S, buf, N, wb, n, rl, lane, actBf16);  // B_j, fw_j x_j
            __syncwarp();  // buffer c & 1 is restaged by chunk c + 2
        }
        ST* ckpt = static_cast<ST*>(p.state) + (int64_t)u.slot * p.stride_state_slot + (int64_t)u.head * p.stride_state_head;
        stream::storeWarpRows<RWS, QPL, ST>(S, ckpt, p.stride_state_p, u.vw, P, rl, lane);
    }
}

template <typename ST, int N, int MAXT, bool MMAFOLD = false>
__device__ __forceinline__ void splitProcess(SplitItem<ST, N, MAXT>& u, const Mamba2ReplayParams& p, int rl, int sub,
                                             uint16_t* sFold, const uint16_t* bNew = nullptr,
                                             const uint16_t* sBStaged = nullptr) {
    if constexpr (stream::RowQuad<ST>::kScaled) {
        float4 S[kSplitRows][N / 128];
        u.S.decode(S);
        splitProcessRows<ST, N, MAXT, MMAFOLD>(u, S, p, rl, sub, sFold, bNew, sBStaged);
    } else {
        splitProcessRows<ST, N, MAXT, MMAFOLD>(u, u.S.raw, p, rl, sub, sFold, bNew, sBStaged);
    }
}

// Readout: warp-granular items (row b, head, 8-row block), grid-strided over the warps of the grid so
// that the flushing rows of a staggered batch spread over all warps. With PIPE the warp issues the
// loads of its next item before it computes the current one.
// PIPE: kSplitPlain (0), kSplitPipelined (1: the next item's loads in flight), kSplitCursorsAhead (2: only the next
// item's slot and head-record cursors in flight, so each item is one dependent round trip).
// kSplitMmaFold (3): the plain loop with the tensor-core fold (N = 128; common/fold_mma.cuh).
constexpr int kSplitPlain = 0, kSplitPipelined = 1, kSplitCursorsAhead = 2, kSplitMmaFold = 3;
template <typename ST, int N, int MAXT, int PIPE>
__global__ void __launch_bounds__(kSplitReadoutThreads, PIPE == kSplitPipelined ? 2 : ((N == 128 && MAXT == 1) ? 3 : 2))
    mamba2SplitReadoutKernel(const Mamba2ReplayParams p, const stream::ReadCopyScales rc) {
    using RS = stream::RowScatter<kSplitRows>;
    extern __shared__ __align__(16) unsigned char smemSplitReadout[];
    constexpr bool kMmaFold = PIPE == kSplitMmaFold;
    static_assert(!kMmaFold || N == 128, "tensor-core fold: N = 128");
    uint16_t* sFold = reinterpret_cast<uint16_t*>(
        smemSplitReadout + (threadIdx.x >> 5) * (kMmaFold ? splitMmaFoldWarpSmemBytesM2(N) : splitReadoutWarpSmemBytesM2(N)));
    const int nrb = (p.headdim + kSplitRows - 1) / kSplitRows;
    // 32-bit item arithmetic (the launcher keeps B x H x ceil(P / 8) below 2^31): 64-bit divisions are emulated.
    const unsigned items = (unsigned)p.batch * p.nheads * nrb;
    const int lane = threadIdx.x & 31;
    const int RW = splitRecordWordsM2(p.window, p.num_tokens);
    const unsigned nw = gridDim.x * (kSplitReadoutThreads / 32);
    unsigned it = blockIdx.x * (kSplitReadoutThreads / 32) + (threadIdx.x >> 5);
    const int rl = RS::rowOf(lane);
    const int sub = lane & (RS::LPR - 1);
    auto slotOf = [&](unsigned i) {
        if (i >= items) return -1;
        const int b = (int)(i / ((unsigned)nrb * p.nheads));
        return p.state_batch_indices ? p.state_batch_indices[b] : b;
    };
    if constexpr (PIPE == kSplitPipelined) {
        pdlWaitPrimary();
        if (it >= items) return;
        SplitItem<ST, N, MAXT> cur, nxt;
        splitIssue(nxt, p, rc, it, slotOf(it), splitMeta(p, it, items, nrb, RW), nrb, rl, sub);
        int slot2 = slotOf(it + nw);
        int4 meta2 = splitMeta(p, it + nw, items, nrb, RW);
        for (; it < items; it += nw) {
            cur = nxt;
            if (it + nw < items) {
                const int s1 = slot2;
                const int4 m1 = meta2;
                slot2 = slotOf(it + 2 * nw);
                meta2 = splitMeta(p, it + 2 * nw, items, nrb, RW);
                splitIssue(nxt, p, rc, it + nw, s1, m1, nrb, rl, sub);
            }
            splitProcess(cur, p, rl, sub, sFold);
        }
    } else if constexpr (PIPE == kSplitCursorsAhead) {
        pdlWaitPrimary();
        int slotN = slotOf(it);
        int4 metaN = splitMeta(p, it, items, nrb, RW);
        for (; it < items; it += nw) {
            const int slot0 = slotN;
            const int4 meta0 = metaN;
            slotN = slotOf(it + nw);
            metaN = splitMeta(p, it + nw, items, nrb, RW);
            SplitItem<ST, N, MAXT> cur;
            splitIssue(cur, p, rc, it, slot0, meta0, nrb, rl, sub);
            splitProcess(cur, p, rl, sub, sFold);
        }
    } else {
        // Item schedule (thirteenth session). Dynamic (default): CTA c owns items c + gridDim.x m (m = 0, 1, ...;
        // consecutive m are 0.4 rows apart at the model shapes, so every CTA sees the batch's share of flushing
        // rows), and its warps take the next m from a shared-memory counter when they finish an item, so a warp
        // that folds a flushing item takes fewer items. Static (p.rows_per_cta == 1, set by the launcher for few
        // items per warp or RSSM_MAMBA2_SPLIT_SCHED=static): warp w of the grid takes items w + k nw (the previous
        // schedule; at Super B = 256 a warp gets 4, 5 or 6 flushing items and the step waits for those with six).
        // Programmatic dependent launch: the first item's slot and checkpoint rows (which the prep kernel does not
        // write) are loaded before waiting for the prep grid; everything else after.
        __shared__ unsigned sNextItem;
        const bool dynamic = p.rows_per_cta != 1;
        unsigned m = threadIdx.x >> 5;
        if (dynamic) {
            if (threadIdx.x == 0) sNextItem = kSplitReadoutThreads / 32;
            __syncthreads();
            it = blockIdx.x + gridDim.x * m;
        }
        bool first = true;
        while (it < items) {
            SplitItem<ST, N, MAXT> cur;
            const int slot = slotOf(it);
            bool early = false;
            if (first) {
                early = slot >= 0 && slot < p.num_slots;
                if (early) splitLoadRows(cur, p, rc, it, slot, nrb, rl);
                pdlWaitPrimary();
                first = false;
            }
            splitIssue(cur, p, rc, it, slot, splitMeta(p, it, items, nrb, RW), nrb, rl, sub, early);
            splitProcess<ST, N, MAXT, kMmaFold>(cur, p, rl, sub, sFold);
            if (dynamic) {
                unsigned next = 0;
                if (lane == 0) next = atomicAdd(&sNextItem, 1u);
                m = __shfl_sync(stream::kFull, next, 0);
                it = m < items ? blockIdx.x + gridDim.x * m : items;  // (the launcher keeps items x grid < 2^32)
            } else {
                it += nw;
            }
        }
    }
}

// ---- Read-copy readout: the split readout for a read-only checkpoint under skip_flush_rows (the
//      dual-precision decode's non-flush rows: 16-bit / fp8 / nvfp4 read copies, N = 128, headdim % 16 == 0).
//      No flush items reach it (the prep marks flushing rows kSplitSkipRow), so there is no fold and an item
//      can hold 16 rows: the per-item work (cursors, head record, C_s, x_j, the reduction) is amortized over
//      twice the state of the 8-row items, which matters once the rows are 2-8x narrower than fp32. The state
//      rows stay raw bits in registers and are decoded at the dot products. Items (row b, head, 16-row block)
//      are walked with a division-free cursor; the next item's slot and cursors are loaded one item ahead.
constexpr int kReadRows = 16;

template <typename ST, int MAXT>
__global__ void __launch_bounds__(kSplitReadoutThreads, MAXT == 1 ? 3 : 2)
    mamba2SplitReadCopyKernel(const Mamba2ReplayParams p, const stream::ReadCopyScales rc) {
    pdlWaitPrimary();  // launched as a programmatic dependent of the prep kernel
    using RS = stream::RowScatter<kReadRows>;
    constexpr int RWS = kReadRows;
    constexpr int LPR = RS::LPR;
    constexpr bool kScaled = stream::RawQuad<ST>::kScaled;
    const int H = p.nheads, P = p.headdim, T = p.num_tokens, Cap = p.ring_capacity;
    const int hpg = H / p.ngroups;
    const int nrb = P / RWS;
    const unsigned items = (unsigned)p.batch * H * nrb;  // < 2^31 (launcher)
    const int lane = threadIdx.x & 31;
    const int RW = splitRecordWordsM2(p.window, T), RM = p.window + T;
    const int rl = RS::rowOf(lane);
    const int sub = lane & (LPR - 1);
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const float* ws = static_cast<const float*>(p.workspace);
    const unsigned nw = gridDim.x * (kSplitReadoutThreads / 32);
    const unsigned it0 = blockIdx.x * (kSplitReadoutThreads / 32) + (threadIdx.x >> 5);
    if (it0 >= items) return;
    // (b, head, blk) of the warp's first item, advanced by carries (stream::ItemWalker)
    const stream::ItemWalker walk(H, nrb, nw);
    int b, head, blk;
    {
        const stream::ItemCursor c0 = walk.at(it0);
        b = c0.b;
        head = c0.head;
        blk = c0.blk;
    }
    auto slotOf = [&](int bb) { return p.state_batch_indices ? p.state_batch_indices[bb] : bb; };
    auto metaOf = [&](int bb, int hh) {
        return *reinterpret_cast<const int4*>(ws + ((size_t)bb * H + hh) * RW + 8);
    };
    int slot = slotOf(b);
    int4 meta = metaOf(b, head);
    for (unsigned it = it0; it < items; it += nw) {
        // next item: cursor, slot and head-record cursors in flight before this item's loads
        const stream::ItemCursor nc = walk.next(stream::ItemCursor{b, head, blk});
        const int nb = nc.b, nh = nc.head, nblk = nc.blk;
        int nslot = -1;
        int4 nmeta = make_int4(0, -1, 0, 0);
        if (it + nw < items) {
            nslot = slotOf(nb);
            nmeta = metaOf(nb, nh);
        }
        const int nf = meta.y;
        if (slot >= 0 && slot < p.num_slots && nf != kSplitSkipRow) {  // else padding / skipped: untouched
            const int vw = blk * RWS, row = vw + rl;
            uint16_t* yg = static_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b + (int64_t)head * p.stride_y_h + row;
            if (nf < 0) {  // invalid cursors: poison, touch nothing else
#pragma unroll
                for (int s = 0; s < MAXT; ++s)
                    if (s < T && (s % LPR) == sub) yg[s * p.stride_y_t] = floatToAct(__int_as_float(0x7fc00000), actBf16);
            } else {  // nf == 0: the launcher runs this kernel only with skip_flush_rows
                const int o = meta.z, R = meta.w + T;
                stream::RawWarpRows<RWS, ST> rows;
                const int64_t unit = kScaled ? 1 : 2;
                const uint8_t* ckpt = static_cast<const uint8_t*>(p.state) +
                                      ((int64_t)slot * p.stride_state_slot + (int64_t)head * p.stride_state_head) * unit;
                rows.load(ckpt, p.stride_state_p, vw, rl, lane, rc, (int64_t)slot * rc.nheads + head);
                uint4 xlo = make_uint4(0u, 0u, 0u, 0u), xhi = xlo;
                if (lane < R) {
                    int rr = o + lane;
                    rr = rr >= Cap ? rr - Cap : rr;
                    const uint4* xp = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.ring_x) +
                                                                     (((int64_t)slot * Cap + rr) * H + head) * P + vw);
                    xlo = xp[0];
                    xhi = xp[1];
                }
                const float* hr = ws + ((size_t)b * H + head) * RW;
                const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b +
                                     (int64_t)(head / hpg) * p.stride_C_g + lane * 4;
                const uint16_t* zg = p.z ? static_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                               (int64_t)head * p.stride_z_h + row
                                         : nullptr;
                float coef[MAXT], gam[MAXT], zv[MAXT];
                uint2 cq[MAXT];
#pragma unroll
                for (int s = 0; s < MAXT; ++s) {
                    coef[s] = gam[s] = zv[s] = 0.f;
                    cq[s] = make_uint2(0u, 0u);
                    if (s < T) {
                        if (lane < R) coef[s] = hr[kSplitCoef + s * RM + lane];
                        gam[s] = hr[s];
                        cq[s] = *reinterpret_cast<const uint2*>(Cg + s * p.stride_C_t);
                        if (zg && (s % LPR) == sub) zv[s] = actToFloat(zg[s * p.stride_z_t], actBf16);
                    }
                }
                float xf[RWS];  // x_lane of the rows in this lane's register slots
                stream::unpack16Permuted(xlo, xhi, rl, actBf16, xf);
#pragma unroll
                for (int s = 0; s < MAXT; ++s) {
                    if (s < T) {
                        const float4 c4 = stream::u2ToF4(cq[s], actBf16);
                        float part[RWS];
#pragma unroll
                        for (int r = 0; r < RWS; ++r) {
                            float d = stream::dot4(rows.decode(r), c4);
                            if constexpr (kScaled) d *= rows.factor(r);
                            part[r] = fmaf(gam[s], d, coef[s] * xf[r]);
                        }
                        const float Y = RS::reduce(part, lane);
                        if ((s % LPR) == sub) {
                            const float gate = zg ? siluF(zv[s]) : 1.f;
                            yg[s * p.stride_y_t] = floatToAct(Y * gate, actBf16);
                        }
                    }
                }
            }
        }
        b = nb;
        head = nh;
        blk = nblk;
        slot = nslot;
        meta = nmeta;
    }
}

}  // namespace mamba2
}  // namespace rssm
