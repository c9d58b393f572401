// ReplaySSM Gated DeltaNet decode, variant 6 ("split"): the design of Mamba-2 variant 4
// (mamba2/mamba2_split_kernel.cuh) for GDN. Two kernels per step, so that the state stream runs without a
// per-head preamble in its way. Math as in gdn_kernels.cuh ("ReplaySSM math as implemented"): with P the
// prefix sums of the log-decays of the records (committed j < h from ring_g, then this step's drafts) and
// cum_j = P[j + 1]:
//
//   1. Prep kernel, one warp per (row b, key head), no CTA barriers: reads the cursors, appends this step's
//      raw keys (once per key head) and log-decays, normalizes the drafts' keys and queries, forms the record
//      dots kn_j . kn_s and kn_j . qn_s once per key head, and per value head (lane = record) the prefix
//      sums and one head record in the workspace:
//        gk_s = exp(cum_{h+s}) / |k_s|, gq_s = exp(cum_{h+s}) scale / |q_s|, beta_s,
//        ck_{s,j} = exp(cum_{h+s} - cum_j) kn_j . kn_s (j < h + s),
//        cq_{s,j} = exp(cum_{h+s} - cum_j) kn_j . qn_s (j <= h + s),
//        on a flush step fw_j = exp(cum_{nf-1} - cum_j) / |k_j| and gfold = exp(cum_{nf-1}),
//        and the cursors (nf, o, h).
//   2. Readout kernel, persistent warps over items of 8 value rows of one (row b, value head), grid-strided.
//      Lane j loads u_j[8 rows] of committed record j (one 16-byte load) and its coefficients, so
//        X_s[v] = gk_s S[v, :] . k_s + sum_{j<h} ck_{s,j} u_j[v]      (= alpha_s S_{t_s - 1} kn_s, committed part)
//        Y_s[v] = gq_s S[v, :] . q_s + sum_{j<h} cq_{s,j} u_j[v]
//      are two reduce-scatters per token (raw k_s, q_s: the norms are in gk, gq). The row's lanes finish
//      the drafts by forward substitution (Eq. 10 / 11):
//        u_s = beta_s (v_s - X_s - sum_{i<s} ck_{s,h+i} u_{h+i}),  o_s = Y_s + sum_{i<=s} cq_{s,h+i} u_{h+i},
//      store o_s and append u_s (fp16) to the ring: the readout appends u, because u depends on the state.
//      On a flush step the warp stages the raw keys k_j (ring_k, two chunks of 8 records in flight) and
//      fw_j u_j[v] in shared memory and folds S <- gfold S + sum_{j < nf} fw_j u_j k_j^T into its rows, then
//      stores them. In standard mode the current token's (unrounded) u comes from the row lanes through
//      shuffles, its raw key from the ring row the prep kernel appended.
// Committed records per step h <= 32 and records h + T <= 32 (one per lane): standard mode L <= 32,
// speculative L + T <= 32 (the launcher refuses larger windows for this variant). K in {128, 256}, V % 8 == 0.
// Same function, records, appends and skip rules as the other variants: padding rows and rows with invalid
// cursors are untouched (nothing of theirs is written); with skip_flush_rows the prep marks flushing rows
// (kSplitSkipRow) and appends the two-precision records (raw beta, v) of the others. The readout also reads
// read-only fp8 / nvfp4 rows; the read-copy readout at the end of this file is the 16-row variant for
// read-only rows (docs/precision.md, sixth session).
#pragma once
#include "common/pdl.h"
#include "common/cp_async.cuh"
#include "common/fold_mma.cuh"
#include "common/read_rows.cuh"
#include "common/small_divisor.h"
#include "common/stream_rows.cuh"
#include "common/warp_scan.cuh"
#include "gdn/gdn_kernels.cuh"

namespace rssm {
namespace gdn {

constexpr int kSplitPrepMaxThreads = 128;  // prep CTA: at most 4 warps, one (row, key head) each
constexpr int kSplitPrepMinBlocks = 6;      // prep CTAs per SM the registers are capped for (80)
constexpr int kSplitRows = 8;         // value rows per readout item (one warp)
constexpr int kSplitMaxRecords = 32;  // records per step (one per lane)
constexpr int kSplitFoldChunk = 8;    // records per staged key chunk (fold)
constexpr int kSplitCoef = 32;        // head record: first coefficient word
constexpr int kSplitSkipRow = -2;     // head record nf: a flushing row under skip_flush_rows (readout: untouched)

// Head record (fp32 words, one per (row b, value head)), RM = L + T:
//   [0, 8) gk_s; [8] gfold; [9] nf (int bits; -1: invalid cursors); [10] o (int bits); [11] h (int bits);
//   [16, 24) gq_s; [24, 32) beta_s; [32 + s RM + j] ck_{s,j}; [32 + (T + s) RM + j] cq_{s,j};
//   [32 + 2 T RM + j] fw_j, rounded up to 4 words (16-byte aligned); then, for T >= 2, the block of the
//   tensor-core verify readout (gdn_split_mma_kernel.cuh; written by the prep only when that readout runs):
//   the committed-record coefficients of vector m (m < 2T: ck_{m,j}, cq_{m-T,j}) as rows [2T][CS] with zeros
//   from j = h on (CS = L rounded up to 8), and the drafts' solve as two [8][8] matrices (zero-padded):
//   M = (I + diag(beta) Lk)^-1 diag(beta), Lk[s][i] = ck_{s,h+i} (i < s), and N = Cq M, Cq[s][i] = cq_{s,h+i}
//   (i <= s), so that with w_i = v_i - X0_i (X0, Y0: the state and committed-record parts of X, Y)
//   u_{h+s} = (M w)_s and o_s = Y0_s + (N w)_s, which is the forward substitution of Eq. 10 / 11.
__host__ __device__ inline int splitMmaCoefStrideGdn(int L) { return (L + 7) / 8 * 8; }
__host__ __device__ inline int splitMmaBlockOffsetGdn(int L, int T) {
    return (kSplitCoef + (2 * T + 1) * (L + T) + 3) / 4 * 4;
}
__host__ __device__ inline int splitRecordWordsGdn(int L, int T) {
    return splitMmaBlockOffsetGdn(L, T) + (T >= 2 ? 2 * T * splitMmaCoefStrideGdn(L) + 2 * 64 : 0);
}
__host__ __device__ inline size_t splitWorkspaceBytesGdn(int B, int T, int HV, int L) {
    return (size_t)B * HV * splitRecordWordsGdn(L, T) * sizeof(float);
}
// Prep kernel dynamic shared memory per warp: the raw keys of the committed records [L][K + 8] and the step's raw
// draft keys and queries [2T][K + 8] (16-bit; rows padded by 16 bytes so that the ldmatrix rows of the record dots
// spread over the banks), dots [2][T][L + T], inverse key norms [L + T] and query scales [T] (fp32), and for
// T >= 2 the drafts' coefficients of one value head for the verify block ([2][8][8] + 8 betas, fp32); rounded
// up to 16 bytes.
constexpr int kSplitTriWords = 2 * 64 + 8;
__host__ __device__ inline int splitPrepKeyStrideGdn(int K) { return K + 8; }
// (gdnSplitPrepKernel's L32 computes the same bytes with its own 32-bit copy of this formula: change both together)
__host__ __device__ inline size_t splitPrepWarpSmemBytesGdn(int L, int T, int K) {
    const size_t R = (size_t)L + T;
    return (((size_t)L + 2 * T) * splitPrepKeyStrideGdn(K) * 2 + 2 * (size_t)T * R * 4 + R * 4 + (size_t)T * 4 +
            (T >= 2 ? kSplitTriWords * 4 : 0) + 15) / 16 * 16;
}
// Readout kernel dynamic shared memory: per warp `keyBufs` chunks of kSplitFoldChunk raw key rows (16-bit; two, or one
// in the KEY1 instances) and their fold weights times u (fp32 [2][8 records][8 rows]).
__host__ __device__ inline size_t splitReadoutFoldBytesGdn(int K, int keyBufs = 2) {
    return (size_t)keyBufs * kSplitFoldChunk * K * 2;
}
__host__ __device__ inline size_t splitReadoutWarpSmemBytesGdn(int K, int keyBufs = 2) {
    return splitReadoutFoldBytesGdn(K, keyBufs) + 2 * (size_t)kSplitFoldChunk * kSplitRows * 4;
}
__host__ __device__ inline size_t splitReadoutSmemBytesGdn(int K, int threads, int keyBufs = 2) {
    return (size_t)(threads / 32) * splitReadoutWarpSmemBytesGdn(K, keyBufs);
}

// The drafts' solve of the tensor-core verify readout's block (layout above), from the coefficients of one value
// head staged in shared memory by the prep (sTri: Lk [8][8] = ck_{s,h+i}, Cq [8][8] = cq_{s,h+i}, beta [8]; only
// entries i <= s, s < T are read). Lane c < 8 forms column c of M by forward substitution (M[s][c] = 0 for s < c,
// beta_c for s = c, -beta_s sum_{c<=i<s} Lk[s][i] M[i][c] below) and of N = Cq M, and stores both ([8][8] each,
// zero outside s < T, c <= s) at Mg.
template <int MAXT>
__device__ __forceinline__ void writeDraftSolve(float* Mg, const float* sTri, int T, int lane) {
    __syncwarp();  // sTri is written
    if (lane < 8) {
        const int c = lane;
        float mc[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            mc[s] = 0.f;
            if (s < T && s >= c) {
                float acc = 0.f;
#pragma unroll
                for (int i = 0; i < s; ++i) acc = fmaf(sTri[s * 8 + i], mc[i], acc);  // mc[i] = 0 for i < c
                const float beta = sTri[128 + s];
                mc[s] = s == c ? beta : -beta * acc;
            }
        }
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            float ns = 0.f;
            if (s < MAXT && s < T && s >= c) {
#pragma unroll
                for (int i = 0; i <= (s < MAXT ? s : 0); ++i) ns = fmaf(sTri[64 + s * 8 + i], mc[i], ns);
            }
            Mg[s * 8 + c] = s < MAXT ? mc[s < MAXT ? s : 0] : 0.f;
            Mg[64 + s * 8 + c] = ns;
        }
    }
    __syncwarp();  // sTri is rewritten by the next value head
}

// Prep kernel: one warp per (row b, key head hk), no CTA barriers (the CTA's warps handle consecutive pairs
// independently), so that the whole batch is one wave: B x H warps. Grid ceil(B H / warps), block warps x 32,
// dynamic shared memory warps x splitPrepWarpSmemBytesGdn(L, T, K).
// mmaBlock: also write the record block of the tensor-core verify readout (T >= 2). MINB: prep CTAs per SM the
// registers are capped for (the launcher takes 8 for K = 128 with one token).
// MNORM (the default one-token K = 128 prep since the twenty-fifth session, 14.46 -> 12.54 us; RSSM_GDN_PREP_MNORM=0
// for A/B): the committed keys' squared norms from the diagonal of the records' own Gram tile on tensor cores (one more
// ldmatrix and two mma per k-step of each 16-record tile, inside the record-dot loop) instead of one warp reduction per
// record before it (~17% of this prep's instructions, docs/kernels-gdn.md "Twenty-fourth session"). The products of
// 16-bit keys are exact in both; only the fp32 summation order differs. At the 64-register bound it spills 4 bytes (12
// bytes of spill loads); the other instances have none.
// LEAN (the default one-token prep since the twenty-fifth session, with MNORM, for value-head groups of at most 32;
// RSSM_GDN_PREP_LEAN=0 for A/B): the same records, bit for bit, with 26% fewer instructions (12.54 -> 11.84 us), for a
// prep whose time follows its instruction count (one wave, the schedulers 65% busy): T = 1 at compile time (the
// shared-memory layout and the token loops fold), the gates of all the group's value heads in one pass (lane w
// computes value head w's softplus / sigmoid once, instead of one pass per value head in which 31 lanes idle), the
// committed keys copied with one record half-row per lane (no division, one 64-bit multiply per copy) and the draft's
// key / query pieces without the per-piece selects.
// L32 (A/B, twenty-fifth session, NOT yet run on a GPU; RSSM_GDN_PREP_MNORM_SPEC=2, the speculative preps with MNORM):
// the per-warp shared-memory layout in 32-bit arithmetic. In the T = 4 prep's source counters (twenty-fourth session)
// the size_t layout expressions, rematerialized under the 80-register cap, were ~23% of the warp's instructions.
// EXACT (fifty-fifth session; the default at T = 2, 4, 8 since the fifty-sixth and at every T since the
// fifty-seventh, RSSM_GDN_PREP_EXACT=0 turns it off): on the default prep, the step's token count is MAXT at compile
// time (the launcher instantiates MAXT = num_tokens, under the readout instance of the next larger MAXT for T = 3 and
// 5-7), so the shared-memory layout, the draft key / query copy loop and the token loops fold, as Mamba-2's EXACT
// four-token prep did (docs/kernels-mamba2.md "Thirty-third session"). Same records, bit for bit (the layout follows
// the run-time T). Side by side on an H100: against the run-time-T prep, verify steps 0.4-1.1% faster at
// T = 2 / 4 / 8 (B = 256; fifty-sixth session); against EXACT at T = 2 / 4 / 8 only, T = 3 1-8% and T = 5-7 up to
// 4.6% (fifty-seventh; docs/kernels-gdn.md).
template <int K, int MAXT, int MINB = kSplitPrepMinBlocks, bool MNORM = false, bool LEAN = false, bool L32 = false,
          bool EXACT = false>
__global__ void __launch_bounds__(kSplitPrepMaxThreads, MINB)
    gdnSplitPrepKernel(const GdnReplayParams p, int mmaBlock) {
    static_assert(!LEAN || MAXT == 1, "the lean prep is the one-token (standard-step) prep");
    static_assert(!EXACT || (!LEAN && MAXT >= 2), "EXACT is a speculative prep (the lean prep has T = 1 already)");
    // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h); then the readout may be
    // scheduled (it waits for this grid before reading its output)
    pdlChainEntry();
    constexpr int QL = K / 128;  // quads per lane of a K-vector
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int pair = blockIdx.x * (blockDim.x >> 5) + warp;
    if (pair >= p.batch * p.num_heads) return;
    const int b = pair / p.num_heads, hk = pair - b * p.num_heads;
    const int slot = p.state_batch_indices[b];
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int HV = p.num_v_heads, group = HV / p.num_heads;
    const int T = LEAN ? 1 : (EXACT ? MAXT : p.num_tokens), L = p.window, C = p.ring_capacity;
    const int RM = L + T, RW = splitRecordWordsGdn(L, T);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool spec = p.mode == GDN_REPLAY_SPECULATIVE;
    float* ws = static_cast<float*>(p.workspace) + ((int64_t)b * HV + (int64_t)hk * group) * RW;

    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    // Cursor invariants (design.md 3.2): a violating row is skipped by both kernels.
    if (h < 0 || h > L || o < 0 || o >= C || (!spec && h >= L)) {
        for (int w = lane; w < group; w += 32) ws[w * RW + 9] = __int_as_float(-1);
        return;
    }
    const bool flush = spec ? (h + T > L) : (h + 1 == L);
    if (flush && p.skip_flush_rows) {  // the dual-precision decode handles this row (outputs and appends)
        for (int w = lane; w < group; w += 32) ws[w * RW + 9] = __int_as_float(kSplitSkipRow);
        return;
    }
    const int nf = flush ? (spec ? h : h + 1) : 0;
    const int R = h + T;  // records seen this step (<= 32: one per lane)

    extern __shared__ __align__(16) unsigned char smemGdnSplitPrep[];
    constexpr int KP = K + 8;  // splitPrepKeyStrideGdn
    // L32: the warp's layout in 32-bit arithmetic (the same bytes as splitPrepWarpSmemBytesGdn, which the launcher
    // sizes the CTA with; a CTA's shared memory is far below 2^32). The formula is written twice: change both together.
    const unsigned warpBytes32 = L32 ? ((unsigned)((L + 2 * T) * KP * 2 + 2 * T * RM * 4 + RM * 4 + T * 4 +
                                                   (T >= 2 ? kSplitTriWords * 4 : 0)) + 15u) & ~15u
                                     : 0u;
    uint16_t* sKr = reinterpret_cast<uint16_t*>(
        smemGdnSplitPrep + (L32 ? (size_t)(warp * warpBytes32) : warp * splitPrepWarpSmemBytesGdn(L, T, K)));
    uint16_t* sV16 = sKr + (L32 ? (size_t)(L * KP) : (size_t)L * KP);  // [2T][KP] raw draft keys, raw queries
    // [T][RM] kn_j . kn_s
    float* sDk = reinterpret_cast<float*>(sV16 + (L32 ? (size_t)(2 * T * KP) : (size_t)2 * T * KP));
    float* sDq = sDk + T * RM;                                    // [T][RM] kn_j . qn_s
    float* sInv = sDq + T * RM;                                   // [RM] 1 / |k_j| (drafts included)
    float* sQinv = sInv + RM;                                     // [T] scale / |q_s|
    float* sTri = sQinv + T;  // T >= 2: [2][8][8] + [8] drafts' coefficients of one value head (verify block)
    const int CS = splitMmaCoefStrideGdn(L);

    // ---- committed raw keys of the key head (cp.async)
    const uint16_t* ringK = static_cast<const uint16_t*>(p.ring_k);
    const int64_t rkBase = (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
    constexpr int KCH = K / 8;
    if constexpr (LEAN) {  // lane: 16-byte chunk lane % KCH of records lane / KCH, + 32 / KCH, ...
        static_assert(32 % KCH == 0, "a record row spans a divisor of the warp");
        const int c = lane % KCH;
        const uint16_t* src = ringK + rkBase + c * 8;
        for (int j = lane / KCH; j < h; j += 32 / KCH) {
            int rr = o + j;
            rr = rr >= C ? rr - C : rr;
            async::copy16(sKr + j * KP + c * 8, src + (int64_t)rr * p.ring_k_stride_rec);
        }
        // the token's raw key and query (8-byte pieces: q / k rows are 8-byte aligned, launcher rule)
        const uint16_t* kRow =
            static_cast<const uint16_t*>(p.k) + (int64_t)b * p.k_stride_b + (int64_t)hk * p.k_stride_h;
        const uint16_t* qRow =
            static_cast<const uint16_t*>(p.q) + (int64_t)b * p.q_stride_b + (int64_t)hk * p.q_stride_h;
#pragma unroll
        for (int c4 = lane; c4 < K / 4; c4 += 32) {
            async::copy8(sV16 + c4 * 4, kRow + c4 * 4);
            async::copy8(sV16 + KP + c4 * 4, qRow + c4 * 4);
        }
    } else {
        for (int i = lane; i < h * KCH; i += 32) {
            const int j = i / KCH, c = i - j * KCH;
            int rr = o + j;
            rr = rr >= C ? rr - C : rr;
            async::copy16(sKr + j * KP + c * 8, ringK + rkBase + (int64_t)rr * p.ring_k_stride_rec + c * 8);
        }
        // the step's raw draft keys and queries (8-byte pieces: q / k rows are 8-byte aligned, launcher rule)
        for (int i = lane; i < 2 * T * (K / 4); i += 32) {
            const int r = i / (K / 4), c = i - r * (K / 4);
            const uint16_t* src =
                r < T ? static_cast<const uint16_t*>(p.k) + (int64_t)b * p.k_stride_b + (int64_t)r * p.k_stride_t +
                            (int64_t)hk * p.k_stride_h
                      : static_cast<const uint16_t*>(p.q) + (int64_t)b * p.q_stride_b +
                            (int64_t)(r - T) * p.q_stride_t + (int64_t)hk * p.q_stride_h;
            async::copy8(sV16 + r * KP + c * 4, src + c * 4);
        }
    }
    async::commit();
    // LEAN: the token's gates of the group's value heads, lane w for value head hk group + w (group <= 32, launcher
    // rule); loadDecay takes value head w's from lane w
    float gTok = 0.f, betaTok = 0.f;
    if constexpr (LEAN) {
        if (lane < group) {
            const int hv = hk * group + lane;
            const float a = ldAct(p.a, (int64_t)b * p.a_stride_b + hv, bf16);
            const float bb = ldAct(p.b, (int64_t)b * p.b_stride_b + hv, bf16);
            gTok = gdnLogDecay(a, p.A_log[hv], p.dt_bias[hv]);
            betaTok = sigmoidf(bb);
        }
    }
    // Log-decay of record j = lane for value head hk * group + w (ring, or this step's: with beta). Loads and
    // stores are separate steps, so that the next value head's loads go out before this one's appends (a
    // store between two loads would order them: one round trip per value head).
    auto loadDecay = [&](int w, float& g, float& beta) {
        const int hv = hk * group + w;
        int rr = o + lane;
        rr = rr >= C ? rr - C : rr;
        g = 0.f;
        beta = 0.f;
        if constexpr (LEAN) {
            const float gt = __shfl_sync(kFull, gTok, w), bt = __shfl_sync(kFull, betaTok, w);
            if (lane < h) {
                g = p.ring_g[(int64_t)slot * p.ring_g_stride_slot + hv + (int64_t)rr * p.ring_g_stride_rec];
            } else if (lane == h) {
                g = gt;
                beta = bt;
            }
            return;
        }
        if (lane < h) {
            g = p.ring_g[(int64_t)slot * p.ring_g_stride_slot + hv + (int64_t)rr * p.ring_g_stride_rec];
        } else if (lane < R) {
            const int s = lane - h;
            const float a = ldAct(p.a, (int64_t)b * p.a_stride_b + (int64_t)s * p.a_stride_t + hv, bf16);
            const float bb = ldAct(p.b, (int64_t)b * p.b_stride_b + (int64_t)s * p.b_stride_t + hv, bf16);
            g = gdnLogDecay(a, p.A_log[hv], p.dt_bias[hv]);
            beta = sigmoidf(bb);
        }
    };
    auto storeDecay = [&](int w, float g, float beta) {  // this step's records: appended, beta into the head record
        if (lane >= h && lane < R) {
            const int hv = hk * group + w, s = lane - h;
            int rr = o + lane;
            rr = rr >= C ? rr - C : rr;
            const int64_t gi = (int64_t)slot * p.ring_g_stride_slot + hv + (int64_t)rr * p.ring_g_stride_rec;
            p.ring_g[gi] = g;
            ws[w * RW + 24 + s] = beta;
            if (p.ring_beta) p.ring_beta[gi] = beta;  // two-precision record
        }
    };
    float gCur, betaCur;  // value head 0's, loaded here so that they overlap the key copies
    loadDecay(0, gCur, betaCur);
    // Two-precision records (dual-precision decode): this step's raw v_s of the group's value heads, bit copies
    // (loads of up to 4 value heads x 128 elements first, then the stores).
    if (p.ring_v) {
        constexpr int kVW = 4, kVE = 4;  // value heads x elements per lane per batch
        for (int s = 0; s < T; ++s) {
            int rr = o + h + s;
            rr = rr >= C ? rr - C : rr;
            for (int w0 = 0; w0 < group; w0 += kVW) {
                for (int e0 = 0; e0 < p.head_v; e0 += 32 * kVE) {
                    uint16_t vv[kVW][kVE];
#pragma unroll
                    for (int w = 0; w < kVW; ++w) {
                        const uint16_t* vs = static_cast<const uint16_t*>(p.v) + (int64_t)b * p.v_stride_b +
                                             (int64_t)s * p.v_stride_t + (int64_t)(hk * group + w0 + w) * p.v_stride_h;
#pragma unroll
                        for (int i = 0; i < kVE; ++i) {
                            const int e = e0 + lane + 32 * i;
                            vv[w][i] = (w0 + w < group && e < p.head_v) ? vs[e] : (uint16_t)0;
                        }
                    }
#pragma unroll
                    for (int w = 0; w < kVW; ++w) {
                        uint16_t* vd = static_cast<uint16_t*>(p.ring_v) + (int64_t)slot * p.ring_u_stride_slot +
                                       (int64_t)rr * p.ring_u_stride_rec + (int64_t)(hk * group + w0 + w) * p.ring_u_stride_head;
#pragma unroll
                        for (int i = 0; i < kVE; ++i) {
                            const int e = e0 + lane + 32 * i;
                            if (w0 + w < group && e < p.head_v) vd[e] = vv[w][i];
                        }
                    }
                }
            }
        }
    }
    // ---- this step's drafts: norms, append the raw keys to the ring
    for (int s = 0; s < T; ++s) {
        const int64_t kOff = (int64_t)b * p.k_stride_b + (int64_t)s * p.k_stride_t + (int64_t)hk * p.k_stride_h;
        const int64_t qOff = (int64_t)b * p.q_stride_b + (int64_t)s * p.q_stride_t + (int64_t)hk * p.q_stride_h;
        float ssk = 0.f, ssq = 0.f;
        int rr = o + h + s;
        rr = rr >= C ? rr - C : rr;
#pragma unroll
        for (int i = 0; i < QL; ++i) {
            const int c = lane + 32 * i;
            const uint2 kr = ldRaw4(p.k, kOff + c * 4);
            const float4 kf = stream::u2ToF4(kr, bf16), qf = ldAct4(p.q, qOff + c * 4, bf16);
            ssk += dot4(kf, kf);
            ssq += dot4(qf, qf);
            stRaw4(p.ring_k, rkBase + (int64_t)rr * p.ring_k_stride_rec + c * 4, kr);
        }
        ssk = warpSum(ssk);
        ssq = warpSum(ssq);
        if (lane == 0) {
            sInv[h + s] = rsqrtf(ssk + kL2Eps);
            sQinv[s] = rsqrtf(ssq + kL2Eps) * p.scale;
        }
    }
    async::waitAll();
    __syncwarp();
    // ---- inverse norms of the committed keys (MNORM: in the record-dot loop below)
    for (int j = 0; j < (MNORM ? 0 : h); ++j) {
        float ss = 0.f;
#pragma unroll
        for (int i = 0; i < QL; ++i) {
            const float4 kf = stream::u2ToF4(*reinterpret_cast<const uint2*>(sKr + j * KP + (lane + 32 * i) * 4), bf16);
            ss += dot4(kf, kf);
        }
        ss = warpSum(ss);
        if (lane == 0) sInv[j] = rsqrtf(ss + kL2Eps);
    }
    __syncwarp();
    // ---- record dots on tensor cores: D[j][n] = k_j . v_n (raw 16-bit keys and vectors, fp32 accumulation; the
    //      products are exact), records j < R as M (committed from sKr, drafts from sV16), the 2T vectors (draft
    //      keys, queries) as N, K as the reduction. Then kn_j . kn_s = D inv_j inv_{h+s}, kn_j . qn_s = D inv_j
    //      qscale_s into sDk / sDq.
    {
        const int g = lane >> 2, q = lane & 3;
        const int nMt = (R + 15) / 16, nNt = (2 * T + 7) / 8;
        // ldmatrix row addresses: A (records) row (lane & 7) + 8 ((lane >> 3) & 1), column half lane >> 4;
        // B (vectors) row (lane & 7) + 8 (lane >> 4), column half (lane >> 3) & 1
        const int vr = (lane & 7) + 8 * (lane >> 4);
        const uint16_t* bRow = sV16 + (vr < 2 * T ? vr : 0) * KP + 8 * ((lane >> 3) & 1);
        for (int mt = 0; mt < nMt; ++mt) {
            const int jr = mt * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);
            const uint16_t* aRow = (jr < h ? sKr + jr * KP : jr < R ? sV16 + (jr - h) * KP : sV16) + 8 * (lane >> 4);
            float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
            // MNORM: the tile's records as the B operand too (rows as bRow's layout), Gram tile in n0 / n1
            float n0[4] = {0.f, 0.f, 0.f, 0.f}, n1[4] = {0.f, 0.f, 0.f, 0.f};
            const int nr = mt * 16 + (lane & 7) + 8 * (lane >> 4);
            const uint16_t* rRow = (nr < h ? sKr + nr * KP : nr < R ? sV16 + (nr - h) * KP : sV16) + 8 * ((lane >> 3) & 1);
#pragma unroll
            for (int ks = 0; ks < K / 16; ++ks) {
                uint32_t a[4], bb[4];
                foldmma::ldmatrixX4(a, aRow + 16 * ks);
                foldmma::ldmatrixX4(bb, bRow + 16 * ks);
                foldmma::mma16(d0, a, bb[0], bb[1], bf16);
                if (nNt > 1) foldmma::mma16(d1, a, bb[2], bb[3], bf16);
                if constexpr (MNORM) {
                    uint32_t rb[4];
                    foldmma::ldmatrixX4(rb, rRow + 16 * ks);
                    foldmma::mma16(n0, a, rb[0], rb[1], bf16);
                    foldmma::mma16(n1, a, rb[2], rb[3], bf16);
                }
            }
            if constexpr (MNORM) {
                // Gram element (g, 2q + c) sits in n0[c], (g + 8, 8 + 2q + c) in n1[2 + c]: the diagonal entries
                // of records mt 16 + g and mt 16 + 8 + g are in the lanes with q = g / 2, element c = g & 1
                if (q == (g >> 1)) {
                    const int ja = mt * 16 + g, jb = ja + 8;
                    if (ja < h) sInv[ja] = rsqrtf(((g & 1) ? n0[1] : n0[0]) + kL2Eps);
                    if (jb < h) sInv[jb] = rsqrtf(((g & 1) ? n1[3] : n1[2]) + kL2Eps);
                }
                __syncwarp();  // the tile's inverse norms are read below
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int j = mt * 16 + g + 8 * ((e >> 1) & 1), n = 8 * (e >> 2) + 2 * q + (e & 1);
                const float d = (e >> 2) ? d1[e & 3] : d0[e & 3];
                if (j < R && n < 2 * T) {
                    if (n < T) sDk[n * RM + j] = d * sInv[j] * sInv[h + n];
                    else sDq[(n - T) * RM + j] = d * sInv[j] * sQinv[n - T];
                }
            }
        }
    }
    __syncwarp();

    // ---- head records, one value head at a time (lane j = record j): prefix sums, coefficients, fold
    //      weights, cursors
    for (int w = 0; w < group; ++w) {
        float* rec = ws + w * RW;
        const float g = gCur;
        if (MAXT >= 2 && mmaBlock && lane >= h && lane < R) sTri[128 + lane - h] = betaCur;
        {
            float gNext = 0.f, betaNext = 0.f;
            if (w + 1 < group) loadDecay(w + 1, gNext, betaNext);  // in flight before this head's stores
            storeDecay(w, gCur, betaCur);
            gCur = gNext;
            betaCur = betaNext;
        }
        const float cum = scan::warpInclusiveSum(g, lane);
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                const float cs = __shfl_sync(kFull, cum, h + s);
                float ckv = 0.f, cqv = 0.f;
                if (lane < R) {
                    const float e = expf(cs - cum);  // only used where lane <= h + s (cum_j >= cs there)
                    ckv = lane < h + s ? e * sDk[s * RM + lane] : 0.f;
                    cqv = lane <= h + s ? e * sDq[s * RM + lane] : 0.f;
                    rec[kSplitCoef + s * RM + lane] = ckv;
                    rec[kSplitCoef + (T + s) * RM + lane] = cqv;
                }
                if (MAXT >= 2 && mmaBlock) {  // the verify block: committed coefficients, drafts' ones staged
                    float* blk = rec + splitMmaBlockOffsetGdn(L, T);
                    if (lane < CS) {
                        blk[s * CS + lane] = lane < h ? ckv : 0.f;
                        blk[(T + s) * CS + lane] = lane < h ? cqv : 0.f;
                    }
                    if (lane >= h && lane < R) {
                        sTri[s * 8 + lane - h] = ckv;
                        sTri[64 + s * 8 + lane - h] = cqv;
                    }
                }
                if (lane == 0) {
                    const float gam = expf(cs);
                    rec[s] = gam * sInv[h + s];
                    rec[16 + s] = gam * sQinv[s];
                }
            }
        }
        const float cl = __shfl_sync(kFull, cum, nf > 0 ? nf - 1 : 0);
        if (lane < nf) rec[kSplitCoef + 2 * T * RM + lane] = expf(cl - cum) * sInv[lane];
        if (lane == 0) stream::putSplitRecordCursors(rec, nf > 0 ? expf(cl) : 1.f, nf, o, h);
        if constexpr (MAXT >= 2) {
            if (mmaBlock) writeDraftSolve<MAXT>(rec + splitMmaBlockOffsetGdn(L, T) + 2 * T * CS, sTri, T, lane);
        }
    }
}

using stream::unpack8;
using stream::xorPermute8;

// Element r (compile-time after unrolling) of 8 packed 16-bit values, as float.
__device__ __forceinline__ float u16At(uint4 q, int r, bool bf16) {
    const unsigned w = r < 2 ? q.x : r < 4 ? q.y : r < 6 ? q.z : q.w;
    const uint16_t bits = (uint16_t)((r & 1) ? (w >> 16) : (w & 0xffffu));
    return u16ToF(bits, bf16);
}

// Head-record coefficients of token s for record `lane` (zero past the committed records) and the drafts'
// coefficients ckd[i] = ck_{s, h+i} (i < s), cqd[i] = cq_{s, h+i} (i <= s). Both readouts load them before the
// row dots, so that none is a dependent round trip after the reductions (the compiler does not hoist loads
// over shuffles).
template <int MAXT>
__device__ __forceinline__ void loadTokenCoefs(const float* rec, int s, int T, int RM, int h, int lane, float& ck,
                                               float& cq, float& gk, float& gq, float& beta, float (&ckd)[MAXT],
                                               float (&cqd)[MAXT]) {
    ck = lane < h ? __ldg(rec + kSplitCoef + s * RM + lane) : 0.f;
    cq = lane < h ? __ldg(rec + kSplitCoef + (T + s) * RM + lane) : 0.f;
    gk = __ldg(rec + s), gq = __ldg(rec + 16 + s);
    beta = __ldg(rec + 24 + s);
#pragma unroll
    for (int i = 0; i < MAXT; ++i) {
        ckd[i] = i < s ? __ldg(rec + kSplitCoef + s * RM + h + i) : 0.f;
        cqd[i] = i <= s ? __ldg(rec + kSplitCoef + (T + s) * RM + h + i) : 0.f;
    }
}

// Readout items (row b, value head, row block): stream::ItemCursor / ItemWalker.
using stream::ItemCursor;

// Activation / u formats of the readout: kDtRuntime reads p.act_dtype / p.u_dtype; kDtBf16ActFp16U is the
// serving combination (bf16 activations, fp16 u) with the conversions fixed at compile time.
constexpr int kDtRuntime = 0;
constexpr int kDtBf16ActFp16U = 1;

// Readout: warp-granular items (row b, value head, 8-row block), grid-strided over the warps of the grid
// so that the flushing rows of a staggered batch spread over all warps.
// NT threads per CTA, MINB CTAs per SM the register budget is cut for (256 x 3: 80 registers, some spills at
// K = 128; 256 x 2: 128 registers; 128 x 5: 96 registers). Dynamic shared memory:
// (NT / 32) x splitReadoutWarpSmemBytesGdn(K). (A two-stage cp.async state pipeline in shared memory measured
// slower: 4B B = 256 215 vs 186 us, more instructions; docs/kernels-gdn.md "Variant 6".)
// UPD (the serving standard-step instance's default since the twenty-third session: 0.4-1.7% faster per step on the
// H200; RSSM_GDN_SPLIT_UPD=0 for A/B): the committed records' u_j block is permuted into the lane's row slots after
// token 0's k / q / v / coefficient loads are issued, not right after its own load. The permute consumes the load, so in the default order every item waits one
// round trip for u_j before it even issues the rest (the Mamba-2 verify readout's gate z had the same pattern: 18% of
// its stall samples, 5-7% of the step once moved; docs/kernels-mamba2.md "Twenty-second session").
// FDIV (the serving standard-step instance's default since the twenty-fourth session, with UPD; 0.5-1.1% faster alone
// on the H200; RSSM_GDN_SPLIT_FDIV=0 for A/B): the key head hv / group by one multiply-high (common/small_divisor.h)
// instead of an integer division per item, which the source counters put at 27 of the item's 616 warp instructions
// (docs/kernels-gdn.md "Twenty-third session").
// OFF32 (default with FDIV since the twenty-fourth session: 2.3-4.0% faster per standard step together;
// RSSM_GDN_SPLIT_OFF32=0 for A/B): the item's offsets into the workspace, k / q / v / o and ring u in 32-bit
// arithmetic (the launcher takes it only when every such offset stays below 2^31; the checkpoint keeps 64-bit
// offsets: its pool may be larger, and 32-bit checkpoint offsets measured no faster, twenty-fourth session). The same
// counters put ~85 of the 616 warp instructions per item in 64-bit offset arithmetic.
// EARLY (the serving standard-step instance's default since the twenty-fifth session; RSSM_GDN_SPLIT_EARLY=0 for A/B):
// the warp's first item's state rows are loaded before the wait for the prep grid. The rows are not written by the
// prep, and the prep itself starts only once the previous step's kernels are complete (it is not a programmatic
// dependent), so they are final; the cursors and everything else the prep writes are read after the wait as before.
// A readout CTA that lands on an SM while the prep's last CTAs still run has its first rows in flight meanwhile.
// ESTAGE (the serving standard-step instance's default since the twenty-seventh session, launched without programmatic
// dependent launch; RSSM_GDN_SPLIT_ESTAGE=0 for A/B): a flush item issues the cp.async copies of
// its first two chunks of raw keys (16 records) and loads its fold weights' fw_j at the item's start, with the rows and
// the token's loads, instead of after the token's work: the keys' round trip runs under the token's dots and
// reductions. The same copies, weights and FMAs in the same order: bit-identical rows.
// KEY1 (the serving standard-step instance's default since the thirtieth session, on top of ESTAGE;
// RSSM_GDN_SPLIT_KEY1=0 for A/B): one key-chunk buffer per warp instead of two (a flush item stages chunk c + 1 after
// chunk c's fold instead of ahead of it), so the CTA needs 10 instead of 18 KB of shared memory and the SM keeps more
// of its L1 (a 100% shared-memory carve-out made this readout 22-32% slower in the same session; KEY1 measured
// 0.1-0.7% faster per standard step). Same copies, weights and FMAs in the same order: bit-identical rows.
template <typename ST, int K, int MAXT, int NT, int MINB, int DT, int UPD = 0, bool FDIV = false, bool OFF32 = false,
          bool EARLY = false, bool ESTAGE = false, bool KEY1 = false>
__global__ void __launch_bounds__(NT, MINB) gdnSplitReadoutKernel(const GdnReplayParams p,
                                                                   const stream::ReadCopyScales rc) {
    static_assert(!EARLY || std::is_same<ST, float>::value, "EARLY: the fp32-row readout");
    static_assert(!KEY1 || ESTAGE, "KEY1: on top of ESTAGE");
    if constexpr (!EARLY) pdlWaitPrimary();  // launched as a programmatic dependent of the prep kernel
    constexpr bool kScaled = stream::RowQuad<ST>::kScaled;  // read-only fp8 / nvfp4 rows (skip_flush_rows)
    using RS = stream::RowScatter<kSplitRows>;
    constexpr int QPL = K / 128;
    constexpr int RWS = kSplitRows;
    constexpr int LPR = RS::LPR;
    constexpr int kVecPerRec = K / 8;
    extern __shared__ __align__(16) unsigned char smemGdnSplitReadout[];
    constexpr int kKeyBufs = KEY1 ? 1 : 2;  // key-chunk buffers per warp (a power of two)
    uint16_t* sFoldWarp = reinterpret_cast<uint16_t*>(
        smemGdnSplitReadout + (threadIdx.x >> 5) * splitReadoutWarpSmemBytesGdn(K, kKeyBufs));
    float* wFold = reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(sFoldWarp) +
                                            splitReadoutFoldBytesGdn(K, kKeyBufs));  // [2][8 records][8 rows]
    const int HV = p.num_v_heads, V = p.head_v, T = p.num_tokens, C = p.ring_capacity;
    const int group = HV / p.num_heads;
    const SmallDivisor groupDiv(FDIV ? (unsigned)group : 1u);  // FDIV: the key head by a multiply-high
    const bool spec = p.mode == GDN_REPLAY_SPECULATIVE;
    const bool bf16 = DT == kDtBf16ActFp16U ? true : p.act_dtype == RSSM_DTYPE_BF16;
    const bool ubf16 = DT == kDtBf16ActFp16U ? false : p.u_dtype == RSSM_DTYPE_BF16;
    const int nrb = V / kSplitRows;
    const int lane = threadIdx.x & 31;
    const int RW = splitRecordWordsGdn(p.window, T), RM = p.window + T;
    const int rl = RS::rowOf(lane);
    const int sub = lane & (LPR - 1);
    const uint16_t* ringU = static_cast<const uint16_t*>(p.ring_u);
    const uint16_t* ringK = static_cast<const uint16_t*>(p.ring_k);
    // Items it = (b HV + hv) nrb + blk, grid-strided by the warps of the grid (stream::ItemWalker; 32-bit: the
    // launcher keeps B x HV x V / 8 below 2^31).
    const stream::ItemWalker walk(HV, nrb, gridDim.x * (NT / 32));
    ItemCursor cur = walk.at(blockIdx.x * (NT / 32) + (threadIdx.x >> 5));
    auto advance = [&](ItemCursor c) { return walk.next(c); };
    // The slot and the head record's cursors (gfold bits, nf, o, h) of an item: loaded one item ahead, so
    // that an item's state rows, ring rows and coefficients are all issued at once.
    auto slotOf = [&](const ItemCursor& c) { return c.b < p.batch ? p.state_batch_indices[c.b] : -1; };
    auto metaOf = [&](const ItemCursor& c) {
        if constexpr (OFF32) {
            return c.b < p.batch ? *reinterpret_cast<const int4*>(static_cast<const float*>(p.workspace) +
                                                                  ((c.b * HV + c.head) * RW + 8))
                                 : make_int4(0, -1, 0, 0);
        } else {
            return c.b < p.batch ? *reinterpret_cast<const int4*>(static_cast<const float*>(p.workspace) +
                                                                  ((size_t)c.b * HV + c.head) * RW + 8)
                                 : make_int4(0, -1, 0, 0);
        }
    };
    // One item: the state rows S (already loaded), the ring terms, outputs and appends, and on a flush step the
    // fold (raw keys staged in foldBuf: 2 chunks of 8 records x K 16-bit values) and the row stores.
    // fac: the rows' dot-product multipliers (scaled read formats; unused otherwise).
    auto process = [&](const ItemCursor& c, int slot, int4 meta, float4 (&S)[RWS][QPL], const float (&fac)[RWS],
                       uint16_t* foldBuf) {
        const int b = c.b, hv = c.head, vw = c.blk * kSplitRows;
        const size_t bh = (size_t)b * HV + hv;
        const int nf = meta.y, o = meta.z, h = meta.w;
        const float* rec = OFF32 ? static_cast<const float*>(p.workspace) + ((b * HV + hv) * RW)
                                 : static_cast<const float*>(p.workspace) + bh * RW;
        ST* ckpt = static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head;
        uint16_t* sFold = foldBuf;
        // element offset x sx + y sy + z (in 32-bit arithmetic with OFF32: the launcher checked that it fits)
        auto lin = [&](int x, int64_t sx, int y, int64_t sy, int z) -> int64_t {
            return OFF32 ? (int64_t)(x * (int)sx + y * (int)sy + z) : (int64_t)x * sx + (int64_t)y * sy + z;
        };
        const int64_t ruBase = lin(slot, p.ring_u_stride_slot, hv, p.ring_u_stride_head, 0);
        // element offset of ring u row rr, column col
        auto ruAt = [&](int rr, int col) {
            return OFF32 ? (int64_t)((int)ruBase + rr * (int)p.ring_u_stride_rec + col)
                         : ruBase + (int64_t)rr * p.ring_u_stride_rec + col;
        };
        // u_j[vw .. vw + 7] of committed record j = lane, natural order (zero past the committed records)
        auto loadU = [&]() {
            uint4 q = make_uint4(0u, 0u, 0u, 0u);
            if (lane < h) {
                int rr = o + lane;
                rr = rr >= C ? rr - C : rr;
                q = *reinterpret_cast<const uint4*>(ringU + ruAt(rr, vw));
            }
            return q;
        };
        // u_lane of the rows in this lane's register slots (packed); UPD: permuted after token 0's loads (uraw)
        const uint4 uraw = UPD != 0 ? loadU() : make_uint4(0u, 0u, 0u, 0u);
        uint4 uperm = UPD != 0 ? make_uint4(0u, 0u, 0u, 0u) : xorPermute8(loadU(), rl);
        int hk;
        if constexpr (FDIV) {
            hk = (int)groupDiv.div((unsigned)hv);  // the launcher keeps HV below 2^16
        } else {
            hk = hv / group;
        }
        // the key head's ring keys (raw k_j). ESTAGE forms this address twice (item start and flush branch) rather than
        // hold the pointer in two registers over the token loop of every item; only flush items form it.
        auto ringKeys = [&]() {
            return ringK + (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
        };
        // raw k_j of records 8c .. 8c + 7 into key buffer c & 1 (one cp.async group)
        auto stageKeys = [&](int c, const uint16_t* rK) {
            uint16_t* dst = sFold + (c & (kKeyBufs - 1)) * kSplitFoldChunk * K;
            const int n = min(kSplitFoldChunk, nf - c * kSplitFoldChunk);
            for (int i = lane; i < n * kVecPerRec; i += 32) {
                const int jj = i / kVecPerRec, v = i - jj * kVecPerRec;
                int rr = o + c * kSplitFoldChunk + jj;
                rr = rr >= C ? rr - C : rr;
                async::copy16(dst + jj * K + v * 8, rK + (int64_t)rr * p.ring_k_stride_rec + v * 8);
            }
            async::commit();
        };
        // ESTAGE: a flush item's first two key chunks and its fw_j, issued with the token's loads
        float fwEarly = 0.f;
        if constexpr (ESTAGE) {
            if (nf > 0) {  // warp-uniform
                const uint16_t* rK = ringKeys();
                stageKeys(0, rK);
                if (!KEY1 && nf > kSplitFoldChunk) stageKeys(1, rK);
                fwEarly = lane < nf ? rec[kSplitCoef + 2 * T * RM + lane] : 0.f;
            }
        }
        const int row = vw + rl;
        const int64_t kBase = lin(b, p.k_stride_b, hk, p.k_stride_h, lane * 4);
        const int64_t qBase = lin(b, p.q_stride_b, hk, p.q_stride_h, lane * 4);
        const int64_t vOff = lin(b, p.v_stride_b, hv, p.v_stride_h, row);
        const int64_t oOff = lin(b, p.o_stride_b, hv, p.o_stride_h, row);
        float ud[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            ud[s] = 0.f;
            if (s < T) {
                float4 kk[QPL], qq[QPL];
#pragma unroll
                for (int i = 0; i < QPL; ++i) {
                    kk[i] = ldAct4(p.k, kBase + (int64_t)s * p.k_stride_t + 128 * i, bf16);
                    qq[i] = ldAct4(p.q, qBase + (int64_t)s * p.q_stride_t + 128 * i, bf16);
                }
                // Every coefficient of token s is loaded here, before the row dots, so that none of them is a
                // dependent round trip after the reductions (the compiler does not hoist loads over shuffles).
                const float vv = ldAct(p.v, vOff + (int64_t)s * p.v_stride_t, bf16);
                float ck, cq, gk, gq, beta, ckd[MAXT], cqd[MAXT];
                loadTokenCoefs<MAXT>(rec, s, T, RM, h, lane, ck, cq, gk, gq, beta, ckd, cqd);
                if constexpr (UPD != 0) {
                    if (s == 0) uperm = xorPermute8(uraw, rl);
                }
                // g (S[row] . vec) + c u_lane[row], summed over the warp: the full value of row rl in this lane
                auto rowTerm = [&](const float4 (&vec)[QPL], float g, float c) {
                    float part[RWS];
#pragma unroll
                    for (int r = 0; r < RWS; ++r) {
                        float d = dot4(S[r][0], vec[0]);
#pragma unroll
                        for (int i = 1; i < QPL; ++i) d += dot4(S[r][i], vec[i]);
                        if constexpr (kScaled) d *= fac[r];
                        part[r] = fmaf(g, d, c * u16At(uperm, r, ubf16));
                    }
                    return RS::reduce(part, lane);
                };
                float X = rowTerm(kk, gk, ck);
                float Y = rowTerm(qq, gq, cq);
                // drafts before s (forward substitution, Eq. 10 / 11)
#pragma unroll
                for (int i = 0; i < s; ++i) {
                    X = fmaf(ckd[i], ud[i], X);
                    Y = fmaf(cqd[i], ud[i], Y);
                }
                ud[s] = beta * (vv - X);
                Y = fmaf(cqd[s], ud[s], Y);
                if ((s % LPR) == sub && row < V) {
                    int rr = o + h + s;
                    rr = rr >= C ? rr - C : rr;
                    stAct(p.o, oOff + (int64_t)s * p.o_stride_t, Y, bf16);
                    stAct(p.ring_u, ruAt(rr, row), ud[s], ubf16);
                }
            }
        }
        if constexpr (!stream::RowQuad<ST>::kWritable) {
            return;  // read-only copies run with skip_flush_rows (launcher rule): no flush items here
        } else if (nf > 0) {  // warp-uniform: fold the records into the rows, store them
            const float gf = __int_as_float(meta.x);
#pragma unroll
            for (int r = 0; r < RWS; ++r)
#pragma unroll
                for (int i = 0; i < QPL; ++i) S[r][i] = scale4(S[r][i], gf);
            const float fw = ESTAGE ? fwEarly : (lane < nf ? rec[kSplitCoef + 2 * T * RM + lane] : 0.f);
            float un[RWS];  // u_lane[vw + k], natural order (reloaded: not held over the token loop)
            unpack8(loadU(), ubf16, un);
            if (!spec) {  // standard mode: the current token (record h) with its unrounded u from the row lanes
#pragma unroll
                for (int r = 0; r < RWS; ++r) {
                    const float t = __shfl_sync(kFull, ud[0], RS::laneOf(r));
                    if (lane == h) un[r] = t;
                }
            }
            const uint16_t* rK = ringKeys();
            auto stageWeights = [&](int c) {  // lane j holds record j's u block and fw_j: fw_j u_j[k] into buffer c & 1
                const int n = min(kSplitFoldChunk, nf - c * kSplitFoldChunk);
                const int jj = lane - c * kSplitFoldChunk;
                if (jj >= 0 && jj < n) {
                    float4* w4 = reinterpret_cast<float4*>(wFold + ((c & 1) * kSplitFoldChunk + jj) * RWS);
                    w4[0] = make_float4(fw * un[0], fw * un[1], fw * un[2], fw * un[3]);
                    w4[1] = make_float4(fw * un[4], fw * un[5], fw * un[6], fw * un[7]);
                }
            };
            auto foldChunk = [&](int c) {  // raw k_j, fw_j u_j of chunk c (staged and visible to the warp)
                const uint16_t* buf = sFold + (c & (kKeyBufs - 1)) * kSplitFoldChunk * K;
                const float* wb = wFold + (c & 1) * kSplitFoldChunk * RWS;
                const int n = min(kSplitFoldChunk, nf - c * kSplitFoldChunk);
                stream::foldStagedRecords<RWS, QPL>(S, buf, K, wb, n, rl, lane, bf16);
            };
            const int nchunks = (nf + kSplitFoldChunk - 1) / kSplitFoldChunk;
            if constexpr (KEY1) {  // key chunk 0 is in flight since the item's start; one buffer
                stageWeights(0);
                for (int c = 0; c < nchunks; ++c) {
                    async::waitAll();
                    __syncwarp();
                    foldChunk(c);
                    __syncwarp();  // the key buffer is restaged by chunk c + 1
                    if (c + 1 < nchunks) {
                        stageKeys(c + 1, rK);
                        stageWeights(c + 1);
                    }
                }
            } else if constexpr (ESTAGE) {  // key chunks 0 and 1 are in flight since the item's start
                stageWeights(0);
                if (nchunks > 1) stageWeights(1);
                for (int c = 0; c < nchunks; ++c) {
                    if (c + 1 < nchunks) {
                        async::waitAllButOne();  // chunk c + 1's keys may still be in flight
                    } else {
                        async::waitAll();
                    }
                    __syncwarp();
                    foldChunk(c);
                    __syncwarp();  // buffer c & 1 is restaged by chunk c + 2
                    if (c + 2 < nchunks) {
                        stageKeys(c + 2, rK);
                        stageWeights(c + 2);
                    }
                }
            } else {
                stageKeys(0, rK);
                stageWeights(0);
                for (int c = 0; c < nchunks; ++c) {
                    if (c + 1 < nchunks) {
                        stageKeys(c + 1, rK);
                        stageWeights(c + 1);
                        async::waitAllButOne();
                    } else {
                        async::waitAll();
                    }
                    __syncwarp();
                    foldChunk(c);
                    __syncwarp();  // buffer c & 1 is restaged by chunk c + 2
                }
            }
            stream::storeWarpRows<RWS, QPL, ST>(S, ckpt, p.state_stride_v, vw, V, rl, lane);
        }
    };
    auto valid = [&](int slot, int4 meta) { return slot >= 0 && slot < p.num_slots && meta.y >= 0; };
    // the item's state rows (16-bit / fp32 checkpoints; scaled read copies go through stream::WarpRows below)
    auto loadRows = [&](int slot, const ItemCursor& c, float4 (&S)[RWS][QPL]) {
        if constexpr (!kScaled) {
            const ST* ckpt = static_cast<const ST*>(p.state) + (int64_t)slot * p.state_stride_slot +
                             (int64_t)c.head * p.state_stride_head;
            stream::loadWarpRows<RWS, QPL, ST>(S, ckpt, p.state_stride_v, c.blk * kSplitRows, V, rl, lane);
        }
    };
    {
        int slotNext = slotOf(cur);
        float4 S[RWS][QPL];
        bool early = false;  // EARLY: S holds the first item's rows
        if constexpr (EARLY) {
            if (slotNext >= 0 && slotNext < p.num_slots) {
                loadRows(slotNext, cur, S);
                early = true;
            }
            pdlWaitPrimary();  // everything below may read what the prep wrote
        }
        int4 metaNext = metaOf(cur);
#pragma unroll 1
        for (; cur.b < p.batch; cur = advance(cur)) {
            const int slot = slotNext;
            const int4 meta = metaNext;
            {
                const ItemCursor nx = advance(cur);
                slotNext = slotOf(nx);
                metaNext = metaOf(nx);
            }
            const bool loaded = early;
            early = false;
            // padding rows and invalid cursors: nothing written
            if (!valid(slot, meta)) continue;
            float fac[RWS];
            if (EARLY && loaded) {
                // the rows came in before the wait (loadRows)
            } else if constexpr (kScaled) {
                stream::WarpRows<RWS, QPL, ST> wr;
                const uint8_t* ck = static_cast<const uint8_t*>(p.state) + (int64_t)slot * p.state_stride_slot +
                                    (int64_t)cur.head * p.state_stride_head;
                wr.load(ck, p.state_stride_v, cur.blk * kSplitRows, V, rl, lane, rc, (int64_t)slot * rc.nheads + cur.head);
                wr.decode(S);
#pragma unroll
                for (int r = 0; r < RWS; ++r) fac[r] = wr.factor(r);
            } else {
                loadRows(slot, cur, S);
            }
            process(cur, slot, meta, S, fac, sFoldWarp);
        }
    }
}

// ---- Read-copy readout: the split readout for a read-only checkpoint under skip_flush_rows (the
//      dual-precision decode's non-flush rows: 16-bit / fp8 / nvfp4 read copies, K = 128, head_v % 16 == 0).
//      No flush items reach it (the prep marks flushing rows kSplitSkipRow), so there is no fold and an item
//      holds 16 value rows: the per-item work (cursors, head record, k_s / q_s, the coefficients) is amortized
//      over twice the state of the 8-row items. The rows stay raw bits in registers and are decoded at the
//      dots; u_j of 16 rows comes in two 16-byte loads per record lane. Same outputs and u appends as the
//      8-row readout (forward substitution of the drafts in the row lanes).
constexpr int kReadRows = 16;

template <typename ST, int MAXT, int NT, int MINB, int DT>
__global__ void __launch_bounds__(NT, MINB) gdnSplitReadCopyKernel(const GdnReplayParams p,
                                                                    const stream::ReadCopyScales rc) {
    pdlWaitPrimary();  // launched as a programmatic dependent of the prep kernel
    using RS = stream::RowScatter<kReadRows>;
    constexpr int RWS = kReadRows;
    constexpr int LPR = RS::LPR;
    constexpr bool kScaled = stream::RawQuad<ST>::kScaled;
    const int HV = p.num_v_heads, V = p.head_v, T = p.num_tokens, C = p.ring_capacity;
    const int group = HV / p.num_heads;
    const bool bf16 = DT == kDtBf16ActFp16U ? true : p.act_dtype == RSSM_DTYPE_BF16;
    const bool ubf16 = DT == kDtBf16ActFp16U ? false : p.u_dtype == RSSM_DTYPE_BF16;
    const int nrb = V / RWS;
    const int lane = threadIdx.x & 31;
    const int RW = splitRecordWordsGdn(p.window, T), RM = p.window + T;
    const int rl = RS::rowOf(lane);
    const int sub = lane & (LPR - 1);
    const uint16_t* ringU = static_cast<const uint16_t*>(p.ring_u);
    const float* ws = static_cast<const float*>(p.workspace);
    const unsigned items = (unsigned)p.batch * HV * nrb;  // < 2^31 (launcher)
    const unsigned it0 = blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
    if (it0 >= items) return;
    const stream::ItemWalker walk(HV, nrb, gridDim.x * (NT / 32));
    ItemCursor cur = walk.at(it0);
    auto advance = [&](ItemCursor c) { return walk.next(c); };
    auto slotOf = [&](const ItemCursor& c) { return c.b < p.batch ? p.state_batch_indices[c.b] : -1; };
    auto metaOf = [&](const ItemCursor& c) {
        return c.b < p.batch ? *reinterpret_cast<const int4*>(ws + ((size_t)c.b * HV + c.head) * RW + 8)
                             : make_int4(0, -1, 0, 0);
    };
    int slotNext = slotOf(cur);
    int4 metaNext = metaOf(cur);
#pragma unroll 1
    for (; cur.b < p.batch; cur = advance(cur)) {
        const int slot = slotNext;
        const int4 meta = metaNext;
        {
            const ItemCursor nx = advance(cur);
            slotNext = slotOf(nx);
            metaNext = metaOf(nx);
        }
        // padding rows, invalid cursors and skipped (flushing) rows: nothing written here. nf > 0 cannot
        // occur: the launcher runs this kernel only with skip_flush_rows.
        if (slot < 0 || slot >= p.num_slots || meta.y < 0) continue;
        const int b = cur.b, hv = cur.head, vw = cur.blk * RWS, row = vw + rl;
        const int o = meta.z, h = meta.w;
        const float* rec = ws + ((size_t)b * HV + hv) * RW;
        stream::RawWarpRows<RWS, ST> rows;
        const int64_t unit = kScaled ? 1 : 2;
        rows.load(static_cast<const uint8_t*>(p.state) +
                      ((int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head) * unit,
                  p.state_stride_v, vw, rl, lane, rc, (int64_t)slot * rc.nheads + hv);
        const int64_t ruBase = (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;
        uint4 ulo = make_uint4(0u, 0u, 0u, 0u), uhi = ulo;
        if (lane < h) {  // u_j[vw .. vw + 15] of committed record j = lane
            int rr = o + lane;
            rr = rr >= C ? rr - C : rr;
            const uint4* up = reinterpret_cast<const uint4*>(ringU + ruBase + (int64_t)rr * p.ring_u_stride_rec + vw);
            ulo = up[0];
            uhi = up[1];
        }
        const int hk = hv / group;
        const int64_t kBase = (int64_t)b * p.k_stride_b + (int64_t)hk * p.k_stride_h + lane * 4;
        const int64_t qBase = (int64_t)b * p.q_stride_b + (int64_t)hk * p.q_stride_h + lane * 4;
        const int64_t vOff = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h + row;
        const int64_t oOff = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + row;
        float uf[RWS];  // u_lane of the rows in this lane's register slots
        stream::unpack16Permuted(ulo, uhi, rl, ubf16, uf);
        float ud[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            ud[s] = 0.f;
            if (s < T) {
                const float4 kk = ldAct4(p.k, kBase + (int64_t)s * p.k_stride_t, bf16);
                const float4 qq = ldAct4(p.q, qBase + (int64_t)s * p.q_stride_t, bf16);
                const float vv = ldAct(p.v, vOff + (int64_t)s * p.v_stride_t, bf16);
                float ck, cq, gk, gq, beta, ckd[MAXT], cqd[MAXT];
                loadTokenCoefs<MAXT>(rec, s, T, RM, h, lane, ck, cq, gk, gq, beta, ckd, cqd);
                float pk[RWS], pq[RWS];
#pragma unroll
                for (int r = 0; r < RWS; ++r) {
                    const float4 sr = rows.decode(r);
                    float dk = dot4(sr, kk), dq = dot4(sr, qq);
                    if constexpr (kScaled) {
                        const float f = rows.factor(r);
                        dk *= f;
                        dq *= f;
                    }
                    pk[r] = fmaf(gk, dk, ck * uf[r]);
                    pq[r] = fmaf(gq, dq, cq * uf[r]);
                }
                float X = RS::reduce(pk, lane);
                float Y = RS::reduce(pq, lane);
#pragma unroll
                for (int i = 0; i < s; ++i) {  // drafts before s (forward substitution, Eq. 10 / 11)
                    X = fmaf(ckd[i], ud[i], X);
                    Y = fmaf(cqd[i], ud[i], Y);
                }
                ud[s] = beta * (vv - X);
                Y = fmaf(cqd[s], ud[s], Y);
                if ((s % LPR) == sub) {
                    int rr = o + h + s;
                    rr = rr >= C ? rr - C : rr;
                    stAct(p.o, oOff + (int64_t)s * p.o_stride_t, Y, bf16);
                    stAct(p.ring_u, ruBase + (int64_t)rr * p.ring_u_stride_rec + row, ud[s], ubf16);
                }
            }
        }
    }
}

}  // namespace gdn
}  // namespace rssm
