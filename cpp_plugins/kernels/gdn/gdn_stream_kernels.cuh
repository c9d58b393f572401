// Gated DeltaNet decode kernels, variant 3 ("stream" kernels): the conventional decode and the
// ReplaySSM standard / speculative step with the state rows held in registers in a
// column-per-lane layout. Same math, params, record formats and skip rules as variants 0-2
// (docs/kernels-gdn.md, "Variant 3").
//
// Layout. A CTA of NW warps (variant 3: 8, variants 4 and 5: 4) owns ROWS = NW * RW state rows of one (row b, value head
// hv); warp w owns rows w*RW .. w*RW+RW-1, RW = 16 at K = 128 (8 at K = 256 or with more than 2
// tokens). Lane l owns the columns of quads c = l + 32 i (i < K / 128) of *every* row of its warp,
// so one warp load moves 512 contiguous bytes of one row, the k / q quads a lane needs are the same
// for all its rows (loaded once per token), and the state of the warp's rows is loaded by every
// lane with RW (x K/128) independent 16-byte loads issued before anything else (right after the
// slot index): the whole 64 KB of a head is in flight per CTA before the cursors are read.
// Row dot products: each lane has RW partial sums (one per row); a reduce-scatter over the warp
// (xor shuffles halving the row set per level, RW - 1 shuffles, then log2(32 / RW) plain ones)
// leaves the full sum of row rowOf(lane) in lane, LPR = 32 / RW lanes per row. Register slot r of
// a lane holds row r ^ rowOf(lane), so every level is a plain shuffle + add (no selects); the
// loads, the flush and the stores address rows through that permutation. The per-row
// epilogue (ring terms, forward substitution, outputs) runs on the row's lanes.
// K in {128, 256} (K = 64 is refused by the launcher for this variant).
#pragma once
#include <type_traits>
#include "common/pdl.h"
#include "gdn/gdn_kernels.cuh"
#include "gdn/gdn_tile_kernels.cuh"  // cpAsync16, cpAsyncWaitAll

namespace rssm {
namespace gdn {

// Configurations (variant -> warps per CTA, rows per warp, CTAs per SM for the register cap):
//   3: 8 warps, RW = 16 (K = 128, T <= 2) else 8, 2 CTAs/SM (128 registers)
//   4: 4 warps, same RW, 4 CTAs/SM (128 registers): half a head per CTA at K = 128, more CTAs
//   5: 4 warps, RW = 8 (K = 128) else 4, 6 CTAs/SM (80 registers)
__host__ __device__ constexpr int streamWarps(int variant) { return variant == 3 ? 8 : 4; }
__host__ __device__ constexpr int streamMinBlocks(int variant) { return variant == 3 ? 2 : variant == 4 ? 4 : 6; }
__host__ __device__ constexpr int streamRowsPerWarp(int K, int maxT, int variant) {
    return variant == 5 ? (K == 128 ? 8 : 4) : ((K == 128 && maxT <= 2) ? 16 : 8);
}
__host__ __device__ constexpr int streamRowsPerCta(int K, int maxT, int variant) {
    return streamWarps(variant) * streamRowsPerWarp(K, maxT, variant);
}
// Dynamic shared memory of the replay kernel: u block [L][ROWS] (16-bit), raw committed keys [L][K]
// (16-bit), this step's values [T][ROWS] fp32.
__host__ __device__ inline int replayStreamSmemBytes(int K, int rows, int window, int T) {
    return window * rows * 2 + window * K * 2 + T * rows * 4;
}

using stream::loadWarpRows;
using stream::RowScatter;
using stream::storeWarpRows;

using stream::fma4s;

// =============================================================================================
// Conventional decode / per-draft snapshots, variant 3. Grid (ceil(V / ROWS), HV, B), 256 threads.
// =============================================================================================
template <int K, typename ST, int VAR>
__global__ void __launch_bounds__(streamWarps(VAR) * 32, streamMinBlocks(VAR))
    gdnDecodeStreamKernel(const GdnDecodeParams p) {
    pdlChainEntryStep();  // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h)
    constexpr int QPL = K / 128;
    constexpr int kStreamWarps = streamWarps(VAR);
    constexpr int kStreamThreads = kStreamWarps * 32;
    constexpr int RW = streamRowsPerWarp(K, 1, VAR);
    constexpr int ROWS = kStreamWarps * RW;
    using RS = RowScatter<RW>;
    const int b = blockIdx.z, hv = blockIdx.y;
    const int32_t* idx = p.state_indices + (int64_t)b * p.indices_stride_b;
    int slotIn = idx[0];
    if (slotIn < 0) return;  // padding row
    if (p.snapshot && p.num_accepted != nullptr) {
        const int acc = p.num_accepted[b];
        if (acc < 1 || acc > p.indices_cols) return;
        slotIn = idx[acc - 1];
    }
    if (slotIn < 0 || slotIn >= p.num_slots) return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int T = p.num_tokens;
    const int hk = hv / (p.num_v_heads / p.num_heads);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int v_begin = blockIdx.x * ROWS;
    const int vw = v_begin + warp * RW;
    ST* state = static_cast<ST*>(p.state);
    const int64_t headOff = (int64_t)hv * p.state_stride_head;
    const ST* src = state + (int64_t)slotIn * p.state_stride_slot + headOff;

    const int rowL = RS::rowOf(lane);  // this lane's row after the reductions; slot r holds row r ^ rowL
    float4 S[RW][QPL];
    loadWarpRows<RW, QPL, ST>(S, src, p.state_stride_v, vw, p.head_v, rowL, lane);

    __shared__ __align__(16) float s_k[GDN_MAX_TOKENS][K];
    __shared__ __align__(16) float s_q[GDN_MAX_TOKENS][K];
    __shared__ float s_alpha[GDN_MAX_TOKENS], s_beta[GDN_MAX_TOKENS], s_kq[GDN_MAX_TOKENS];
    __shared__ float s_v[GDN_MAX_TOKENS][ROWS];
    const int64_t vbase = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h;
    for (int i = tid; i < T * ROWS; i += kStreamThreads) {
        const int t = i / ROWS, vl = i - t * ROWS;
        s_v[t][vl] = v_begin + vl < p.head_v ? ldAct(p.v, vbase + t * p.v_stride_t + v_begin + vl, bf16) : 0.f;
    }
    for (int t = warp; t < T; t += kStreamWarps) {
        const void* kp = static_cast<const uint16_t*>(p.k) + b * p.k_stride_b + t * p.k_stride_t + hk * p.k_stride_h;
        const void* qp = static_cast<const uint16_t*>(p.q) + b * p.q_stride_b + t * p.q_stride_t + hk * p.q_stride_h;
        warpNormalizeInto<K>(kp, bf16, 1.f, s_k[t], lane);
        warpNormalizeInto<K>(qp, bf16, p.scale, s_q[t], lane);
        __syncwarp();
        float kq = 0.f;
        for (int e = lane * 4; e < K; e += 128) kq += dot4(ld4s(&s_k[t][e]), ld4s(&s_q[t][e]));
        kq = warpSum(kq);
        if (lane == 0) {
            const float a = ldAct(p.a, b * p.a_stride_b + t * p.a_stride_t + hv, bf16);
            const float bb = ldAct(p.b, b * p.b_stride_b + t * p.b_stride_t + hv, bf16);
            s_alpha[t] = expf(gdnLogDecay(a, p.A_log[hv], p.dt_bias[hv]));
            s_beta[t] = sigmoidf(bb);
            s_kq[t] = kq;
        }
    }
    __syncthreads();

    const int vr = vw + rowL;
    const bool lead = (lane & (RS::LPR - 1)) == 0;
    const int64_t obase = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h;
#pragma unroll 1
    for (int t = 0; t < T; ++t) {
        float4 kk[QPL], qq[QPL];
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            kk[i] = ld4s(&s_k[t][(lane + 32 * i) * 4]);
            qq[i] = ld4s(&s_q[t][(lane + 32 * i) * 4]);
        }
        const float X = stream::warpRowDot<RW, QPL>(S, kk, lane);
        const float Y = stream::warpRowDot<RW, QPL>(S, qq, lane);
        const float alpha = s_alpha[t];
        const float u = s_beta[t] * (s_v[t][warp * RW + rowL] - alpha * X);
        if (lead && vr < p.head_v) stAct(p.o, obase + t * p.o_stride_t + vr, alpha * Y + u * s_kq[t], bf16);
        int slotOut = -1;
        if (p.snapshot) {
            slotOut = idx[t];
            if (slotOut >= p.num_slots) slotOut = -1;
        }
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const float ur = __shfl_sync(kFull, u, RS::laneOf(r ^ rowL));  // u of the row in slot r
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = fma4s(scale4(S[r][i], alpha), ur, kk[i]);
        }
        if (slotOut >= 0)
            storeWarpRows<RW, QPL, ST>(S, state + (int64_t)slotOut * p.state_stride_slot + headOff, p.state_stride_v, vw,
                                       p.head_v, rowL, lane);
    }
    if (!p.snapshot)
        storeWarpRows<RW, QPL, ST>(S, state + (int64_t)slotIn * p.state_stride_slot + headOff, p.state_stride_v, vw,
                                   p.head_v, rowL, lane);
}

// =============================================================================================
// ReplaySSM standard decode (MAXT = 1) / speculative verify, variant 3. Grid (ceil(V / ROWS), HV, B),
// 256 threads, dynamic smem replayStreamSmemBytes(K, ROWS, window, T). Math: gdn_kernels.cuh.
// =============================================================================================
template <int K, typename ST, int MAXT, int VAR>
__global__ void __launch_bounds__(streamWarps(VAR) * 32, streamMinBlocks(VAR))
    gdnReplayStreamKernel(const GdnReplayParams p, int full_ring) {
    pdlChainEntryStep();  // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h)
    constexpr int QPL = K / 128;
    constexpr int kStreamWarps = streamWarps(VAR);
    constexpr int RW = streamRowsPerWarp(K, MAXT, VAR);
    constexpr int ROWS = kStreamWarps * RW;
    constexpr int MAXREC = GDN_MAX_WINDOW + MAXT;
    constexpr int NT = kStreamWarps * 32;
    using RS = RowScatter<RW>;
    constexpr int LPR = RS::LPR;

    const int b = blockIdx.z, hv = blockIdx.y;
    const int slot = p.state_batch_indices[b];  // first: the head of the dependent chain (checked below)
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int T = p.num_tokens;
    const int C = p.ring_capacity;
    const int v_begin = blockIdx.x * ROWS;
    const int vw = v_begin + warp * RW;
    const int group = p.num_v_heads / p.num_heads;
    const int hk = hv / group;
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool ubf16 = p.u_dtype == RSSM_DTYPE_BF16;
    const int nrows = min(ROWS, p.head_v - v_begin);

    // ---- 0. this step's inputs that need only the batch row (sixteenth session), issued before the slot index
    //         is loaded so that they arrive with it instead of a dependent round trip after the cursors: warp w < T
    //         holds draft w's raw key and query quads (lane + 32 i), thread tid its first value element, the scan
    //         warp's lane s < T draft s's gate inputs. Drafts past the warp count are loaded where they are used.
    const int64_t vbase = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h;
    constexpr bool kPreloadKQ = QPL == 1;  // K = 256: loaded in step 3 (registers: no spills at the 80 cap)
    uint2 kRaw[QPL], qRaw[QPL];
    if (kPreloadKQ && warp < T) {
        const int64_t ko = b * p.k_stride_b + warp * p.k_stride_t + hk * p.k_stride_h;
        const int64_t qo = b * p.q_stride_b + warp * p.q_stride_t + hk * p.q_stride_h;
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            kRaw[i] = ldRaw4(p.k, ko + (lane + 32 * i) * 4);
            qRaw[i] = ldRaw4(p.q, qo + (lane + 32 * i) * 4);
        }
    }
    float vFirst = 0.f;
    {
        const int s = tid / ROWS, vl = tid - s * ROWS;
        if (tid < T * ROWS && vl < nrows) vFirst = ldAct(p.v, vbase + s * p.v_stride_t + v_begin + vl, bf16);
    }
    const bool scanWarp = warp == kStreamWarps - 1;
    float aPre = 0.f, bPre = 0.f, aLogH = 0.f, dtBiasH = 0.f;
    if (scanWarp) {
        if (lane < T) {
            aPre = ldAct(p.a, b * p.a_stride_b + lane * p.a_stride_t + hv, bf16);
            bPre = ldAct(p.b, b * p.b_stride_b + lane * p.b_stride_t + hv, bf16);
        }
        aLogH = p.A_log[hv];
        dtBiasH = p.dt_bias[hv];
    }

    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched

    // ---- 1. checkpoint rows -> registers, before the cursors are read ----
    ST* ckpt = static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head;
    const int rowL = RS::rowOf(lane);  // this lane's row after the reductions; slot r holds row r ^ rowL
    float4 S[RW][QPL];
    loadWarpRows<RW, QPL, ST>(S, ckpt, p.state_stride_v, vw, p.head_v, rowL, lane);

    const int nrr = full_ring ? C : p.window;  // record rows in shared memory
    extern __shared__ __align__(128) unsigned char smem[];  // same declaration as the tile kernels
    uint16_t* s_u = reinterpret_cast<uint16_t*>(smem);        // [nrr][ROWS] committed u of this CTA's rows
    uint16_t* s_kr = s_u + (size_t)nrr * ROWS;                // [nrr][K] raw committed keys
    float* s_v = reinterpret_cast<float*>(s_kr + (size_t)nrr * K);  // [T][ROWS]
    __shared__ __align__(16) float s_kd[MAXT][K];  // normalized draft keys
    __shared__ __align__(16) float s_qd[MAXT][K];  // normalized, scaled queries
    __shared__ float s_P[MAXREC + 1];
    __shared__ float s_gd[MAXT], s_beta[MAXT], s_D[MAXT];
    __shared__ float s_inv[GDN_MAX_WINDOW];
    __shared__ float s_ck[MAXREC][MAXT];  // committed: decay * kn_j.kn_s; drafts: A[i][s] (i < s)
    __shared__ float s_cq[MAXREC][MAXT];  // committed: decay * kn_j.qn_s; drafts: Aq[i][s] (i <= s)
    __shared__ float s_fw[GDN_MAX_WINDOW + 1];
    __shared__ float s_fD;
    __shared__ float s_ut[ROWS];          // standard flush: this token's (unrounded) u per row
    __shared__ float s_gring[MAXREC];     // full-ring mode: ring_g of every ring position

    const uint16_t* ring_u = static_cast<const uint16_t*>(p.ring_u);
    const uint16_t* ring_k = static_cast<const uint16_t*>(p.ring_k);
    const int64_t rk_base = (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
    const int64_t ru_base = (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;
    const int64_t rg_base = (int64_t)slot * p.ring_g_stride_slot + hv;

    // ---- 2. committed records -> shared (u block of the rows, raw keys): n records starting at ring
    //         index `first` into shared rows 0..n-1. Full-ring mode (small batches, the launcher's
    //         choice): all C ring rows in physical order, issued before the cursors are read, so a
    //         step costs one dependent round trip less; record j then sits in row (o0 + j) % C. ----
    auto issueRecords = [&](int n, int first) {
        const bool uvec = ((reinterpret_cast<uintptr_t>(ring_u) & 15u) == 0) && p.ring_u_stride_slot % 8 == 0 &&
                          p.ring_u_stride_rec % 8 == 0 && p.ring_u_stride_head % 8 == 0 && nrows % 8 == 0;
        if (uvec) {
            const int UCH = nrows / 8;
#pragma unroll 1
            for (int i = tid; i < n * UCH; i += NT) {
                const int r = i / UCH, c = i - r * UCH;
                int ri = first + r;
                if (ri >= C) ri -= C;
                cpAsync16(s_u + r * ROWS + c * 8, ring_u + ru_base + (int64_t)ri * p.ring_u_stride_rec + v_begin + c * 8);
            }
        } else {
#pragma unroll 1
            for (int i = tid; i < n * nrows; i += NT) {
                const int r = i / nrows, c = i - r * nrows;
                int ri = first + r;
                if (ri >= C) ri -= C;
                s_u[r * ROWS + c] = ring_u[ru_base + (int64_t)ri * p.ring_u_stride_rec + v_begin + c];
            }
        }
        const bool kvec = ((reinterpret_cast<uintptr_t>(ring_k) & 15u) == 0) && p.ring_k_stride_slot % 8 == 0 &&
                          p.ring_k_stride_rec % 8 == 0 && p.ring_k_stride_head % 8 == 0;
        if (kvec) {
            constexpr int KCH = K / 8;
#pragma unroll 1
            for (int i = tid; i < n * KCH; i += NT) {
                const int r = i / KCH, c = i - r * KCH;
                int ri = first + r;
                if (ri >= C) ri -= C;
                cpAsync16(s_kr + r * K + c * 8, ring_k + rk_base + (int64_t)ri * p.ring_k_stride_rec + c * 8);
            }
        } else {  // contract: 8-byte aligned key rows
            constexpr int KCH = K / 4;
#pragma unroll 1
            for (int i = tid; i < n * KCH; i += NT) {
                const int r = i / KCH, c = i - r * KCH;
                int ri = first + r;
                if (ri >= C) ri -= C;
                *reinterpret_cast<uint2*>(s_kr + r * K + c * 4) =
                    ldRaw4(p.ring_k, rk_base + (int64_t)ri * p.ring_k_stride_rec + c * 4);
            }
        }
    };
    if (full_ring) {
        issueRecords(C, 0);
        if (warp == kStreamWarps - 1)  // the scan warp's gates of every ring position
            for (int i = lane; i < C; i += 32) cpAsync4(s_gring + i, p.ring_g + rg_base + (int64_t)i * p.ring_g_stride_rec);
    }

    // ---- 3. this step's inputs: values, drafts (warp s normalizes draft s), before the cursors are read (they
    //         need only the inputs of step 0, which arrived with the slot index) ----
    if (tid < T * ROWS) s_v[tid] = vFirst;
#pragma unroll 1
    for (int i = tid + NT; i < T * ROWS; i += NT) {
        const int s = i / ROWS, vl = i - s * ROWS;
        s_v[i] = vl < nrows ? ldAct(p.v, vbase + s * p.v_stride_t + v_begin + vl, bf16) : 0.f;
    }
    for (int s = warp; s < T; s += kStreamWarps) {
        uint2 kr[QPL], qr[QPL];
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            kr[i] = kRaw[i];
            qr[i] = qRaw[i];
        }
        if (!kPreloadKQ || s != warp) {  // drafts past the warp count (T > 4)
            const int64_t ko = b * p.k_stride_b + s * p.k_stride_t + hk * p.k_stride_h;
            const int64_t qo = b * p.q_stride_b + s * p.q_stride_t + hk * p.q_stride_h;
#pragma unroll
            for (int i = 0; i < QPL; ++i) {
                kr[i] = ldRaw4(p.k, ko + (lane + 32 * i) * 4);
                qr[i] = ldRaw4(p.q, qo + (lane + 32 * i) * 4);
            }
        }
        float4 kf[QPL], qf[QPL];
        float kss = 0.f, qss = 0.f;
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            kf[i] = u2ToF4(kr[i], bf16);
            qf[i] = u2ToF4(qr[i], bf16);
            kss += dot4(kf[i], kf[i]);
            qss += dot4(qf[i], qf[i]);
        }
        kss = warpSum(kss);
        qss = warpSum(qss);
        const float kInv = rsqrtf(kss + kL2Eps), qInv = rsqrtf(qss + kL2Eps) * p.scale;
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            const int e = (lane + 32 * i) * 4;
            *reinterpret_cast<float4*>(&s_kd[s][e]) = scale4(kf[i], kInv);
            *reinterpret_cast<float4*>(&s_qd[s][e]) = scale4(qf[i], qInv);
        }
    }

    const int o0 = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool spec = p.mode == GDN_REPLAY_SPECULATIVE;
    // Cursor invariants (design.md 3.2); a violating row is skipped (the commit kernel reports it).
    if (h < 0 || h > p.window || o0 < 0 || o0 >= C || (!spec && h >= p.window)) {
        cpAsyncWaitAll();  // drain the copies into this CTA's shared memory (full-ring mode)
        return;
    }
    const bool flush = spec ? (h + T > p.window) : (h + 1 == p.window);
    if (flush && p.skip_flush_rows) {  // dual-precision decode: this row is handled from the recurrence copy
        cpAsyncWaitAll();
        return;
    }
    const int nf = spec ? h : h + 1;  // records folded by a flush
    const int nrec = h + T;
    if (!full_ring) issueRecords(h, o0);
    auto recRow = [&](int j) {  // shared row of committed record j
        if (!full_ring) return j;
        const int r = o0 + j;
        return r >= C ? r - C : r;
    };
    // Ring append of the raw keys (once per key head): warp s appends draft s (its first draft from registers).
    if (blockIdx.x == 0 && hv % group == 0) {
        for (int s = warp; s < T; s += kStreamWarps) {
            const int64_t ko = b * p.k_stride_b + s * p.k_stride_t + hk * p.k_stride_h;
            const int64_t dst = rk_base + (int64_t)((o0 + h + s) % C) * p.ring_k_stride_rec;
#pragma unroll
            for (int i = 0; i < QPL; ++i) {
                const int e = (lane + 32 * i) * 4;
                stRaw4(p.ring_k, dst + e, (kPreloadKQ && s == warp) ? kRaw[i] : ldRaw4(p.k, ko + e));
            }
        }
    }
    // Gates and prefix sums of g over records 0..h+T-1: the last warp, from the ring and the inputs.
    if (warp == kStreamWarps - 1) {
        if (full_ring) {  // this warp's own gate copies
            cpAsyncWaitAll();
            __syncwarp();
        }
        float carry = 0.f;
        if (lane == 0) s_P[0] = 0.f;
        for (int base = 0; base < nrec; base += 32) {
            const int j = base + lane;
            float g = 0.f;
            if (j < h) {
                int ri = o0 + j;
                if (ri >= C) ri -= C;
                g = full_ring ? s_gring[ri] : p.ring_g[rg_base + (int64_t)ri * p.ring_g_stride_rec];
            }
            const int sd = min(max(j - h, 0), 31);  // this lane's draft, if any: gate inputs from lane sd
            const float a = __shfl_sync(kFull, aPre, sd);
            const float bb = __shfl_sync(kFull, bPre, sd);
            if (j >= h && j < nrec) {
                const int s = j - h;
                g = gdnLogDecay(a, aLogH, dtBiasH);
                s_gd[s] = g;
                s_beta[s] = sigmoidf(bb);
                if (blockIdx.x == 0) {  // ring append of g (one CTA per value head)
                    int ri = o0 + j;
                    ri %= C;
                    p.ring_g[rg_base + (int64_t)ri * p.ring_g_stride_rec] = g;
                    if (p.ring_beta) p.ring_beta[rg_base + (int64_t)ri * p.ring_g_stride_rec] = s_beta[s];
                }
            }
            g = scan::warpInclusiveSum(g, lane);
            g += carry;
            if (j < nrec) s_P[j + 1] = g;
            carry = __shfl_sync(kFull, g, 31);
        }
    }
    cpAsyncWaitAll();
    __syncthreads();  // (A) records, values, drafts, gates, prefix sums visible

    // ---- 5. row dots S_ckpt kn_s, S_ckpt qn_s (reduce-scatter: this lane ends with row rowL), right after (A) so
    //         that their shuffle chains can overlap the record dots; scaled by the decays after (B) ----
    const int vl = warp * RW + rowL;  // local row of this lane
    const int v = v_begin + vl;
    const int sub = lane & (LPR - 1);
    float X[MAXT], Y[MAXT];
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        X[s] = Y[s] = 0.f;
        if (s < T) {
            float4 kq[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i) kq[i] = ld4s(&s_kd[s][(lane + 32 * i) * 4]);
            X[s] = stream::warpRowDot<RW, QPL>(S, kq, lane);
#pragma unroll
            for (int i = 0; i < QPL; ++i) kq[i] = ld4s(&s_qd[s][(lane + 32 * i) * 4]);
            Y[s] = stream::warpRowDot<RW, QPL>(S, kq, lane);
        }
    }

    // ---- 4. per-record dots with the drafts -> decay coefficients. A record's K elements are split over its RL
    //         lanes (4 quads each); the 1 + 2T sums reduce over log2(RL) xor levels. ----
    {
        // Sixteenth session: the record's square sum and its dots with draft 0 reduced together; standard steps use
        // K / 16 lanes per record at K = 128 (4 quads per lane: 16 records per pass of 4 warps, one pass for a
        // standard window of 16), other steps K / 8 (2 quads per lane: fewer registers, no spills at the 80-register cap);
        // quad chunks skewed by the record's position in the warp (fewer shared-memory conflicts).
        constexpr int RL = (MAXT == 1 && K == 128) ? K / 16 : K / 8;  // lanes per record
        constexpr int RQ = K / 4 / RL;                 // quads per lane (4 or 2)
        const int sl = lane & (RL - 1);
        const int rw = lane / RL;       // record position in the warp
        const int rpp = kStreamWarps * (32 / RL);  // records per pass of the CTA
#pragma unroll 1
        for (int rb = 0; rb < nrec; rb += rpp) {  // CTA-uniform trip count: all lanes shuffle
            const int r = rb + warp * (32 / RL) + rw;
            const bool active = r < nrec;
            const bool committed = r < h;
            float4 kr[RQ];
            float ss = 0.f, dk = 0.f, dq = 0.f;
#pragma unroll
            for (int i = 0; i < RQ; ++i) {
                const int e = (sl + RL * ((i + rw) & (RQ - 1))) * 4;
                kr[i] = !active ? make_float4(0.f, 0.f, 0.f, 0.f)
                        : committed ? u2ToF4(*reinterpret_cast<const uint2*>(s_kr + recRow(r) * K + e), bf16)
                                    : ld4s(&s_kd[r - h][e]);
                ss += dot4(kr[i], kr[i]);
                dk += dot4(kr[i], ld4s(&s_kd[0][e]));
                dq += dot4(kr[i], ld4s(&s_qd[0][e]));
            }
#pragma unroll
            for (int m = RL / 2; m >= 1; m >>= 1) {
                ss += __shfl_xor_sync(kFull, ss, m);
                dk += __shfl_xor_sync(kFull, dk, m);
                dq += __shfl_xor_sync(kFull, dq, m);
            }
            const float inv = committed ? rsqrtf(ss + kL2Eps) : 1.f;
            if (active && committed && sl == 0) s_inv[r] = inv;
            const float Pr = active ? s_P[r + 1] : 0.f;
            if (active && sl == 0) putRecordCoef<MAXT>(s_ck, s_cq, s_P, h, r, 0, Pr, dk * inv, dq * inv);
#pragma unroll 1
            for (int s = 1; s < T; ++s) {
                dk = dq = 0.f;
#pragma unroll
                for (int i = 0; i < RQ; ++i) {
                    const int e = (sl + RL * ((i + rw) & (RQ - 1))) * 4;
                    dk += dot4(kr[i], ld4s(&s_kd[s][e]));
                    dq += dot4(kr[i], ld4s(&s_qd[s][e]));
                }
#pragma unroll
                for (int m = RL / 2; m >= 1; m >>= 1) {
                    dk += __shfl_xor_sync(kFull, dk, m);
                    dq += __shfl_xor_sync(kFull, dq, m);
                }
                if (active && sl == 0) putRecordCoef<MAXT>(s_ck, s_cq, s_P, h, r, s, Pr, dk * inv, dq * inv);
            }
        }
    }
    putDecayWeights(s_D, s_fw, &s_fD, s_P, h, T, flush, nf, tid, NT);
    __syncthreads();  // (B)
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        if (s < T) {
            X[s] *= s_D[s];
            Y[s] *= s_D[s];
        }
    }

    // ---- 6. committed-record terms (split over the row's lanes), drafts, outputs, u appends ----
    {
        float xs[MAXT], ys[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) xs[s] = ys[s] = 0.f;
#pragma unroll 2
        for (int j = sub; j < h; j += LPR) {
            const float uj = u16ToF(s_u[recRow(j) * ROWS + vl], ubf16);
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                if (s < T) {
                    xs[s] = fmaf(s_ck[j][s], uj, xs[s]);
                    ys[s] = fmaf(s_cq[j][s], uj, ys[s]);
                }
            }
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                X[s] += RS::rowLanesSum(xs[s]);
                Y[s] += RS::rowLanesSum(ys[s]);
            }
        }
    }
    const int64_t obase = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h;
    float ud[MAXT];
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        ud[s] = 0.f;
        if (s < T) {
            float acc = X[s];
#pragma unroll
            for (int i = 0; i < s; ++i) acc += s_ck[h + i][s] * ud[i];
            ud[s] = s_beta[s] * (s_v[s * ROWS + vl] - acc);
            float o = Y[s];
#pragma unroll
            for (int i = 0; i <= s; ++i) o += s_cq[h + i][s] * ud[i];
            if (v < p.head_v && (s % LPR) == sub) {
                stAct(p.o, obase + s * p.o_stride_t + v, o, bf16);
                stAct(p.ring_u, ru_base + (int64_t)((o0 + h + s) % C) * p.ring_u_stride_rec + v, ud[s], ubf16);
                if (p.ring_v)  // raw v (act -> float -> act is exact)
                    stAct(p.ring_v, ru_base + (int64_t)((o0 + h + s) % C) * p.ring_u_stride_rec + v, s_v[s * ROWS + vl],
                          bf16);
            }
        }
    }

    // ---- 7. flush: fold the records into the registers, write the checkpoint rows ----
    if (flush) {  // CTA-uniform
        if (!spec && sub == 0) s_ut[vl] = ud[0];
        __syncwarp();
        const float fD = s_fD;
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = scale4(S[r][i], fD);
        // Committed records j < h (sixteenth session: the u and key formats as template flags, not per-element
        // selects; the fold weight goes into the key quads; two records per trip for ILP), then in standard mode
        // the current token (its unrounded u, its normalized key).
        const int rowBase = warp * RW;
        auto foldCommitted = [&](auto ubTag, auto abTag) {
            constexpr bool UB = decltype(ubTag)::value, AB = decltype(abTag)::value;
#pragma unroll(QPL == 1 ? 2 : 1)
            for (int j = 0; j < h; ++j) {
                const int rr = recRow(j);
                const float kw = s_inv[j] * s_fw[j];
                float4 kj[QPL];
#pragma unroll
                for (int i = 0; i < QPL; ++i)
                    kj[i] = scale4(u2ToF4(*reinterpret_cast<const uint2*>(s_kr + rr * K + (lane + 32 * i) * 4), AB), kw);
                const uint16_t* urow = s_u + rr * ROWS + rowBase;
#pragma unroll
                for (int r = 0; r < RW; ++r) {
                    const uint16_t ub = urow[r ^ rowL];  // slot r holds row r ^ rowL
                    const float w = UB ? __bfloat162float(__ushort_as_bfloat16(ub)) : __half2float(__ushort_as_half(ub));
#pragma unroll
                    for (int i = 0; i < QPL; ++i) S[r][i] = fma4s(S[r][i], w, kj[i]);
                }
            }
        };
        if (ubf16) {
            if (bf16) foldCommitted(std::true_type{}, std::true_type{});
            else foldCommitted(std::true_type{}, std::false_type{});
        } else {
            if (bf16) foldCommitted(std::false_type{}, std::true_type{});
            else foldCommitted(std::false_type{}, std::false_type{});
        }
        if (!spec) {  // standard mode: record h is the current token
            const float fw = s_fw[h];
            float4 kj[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i) kj[i] = scale4(ld4s(&s_kd[0][(lane + 32 * i) * 4]), fw);
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const float w = s_ut[rowBase + (r ^ rowL)];
#pragma unroll
                for (int i = 0; i < QPL; ++i) S[r][i] = fma4s(S[r][i], w, kj[i]);
            }
        }
        storeWarpRows<RW, QPL, ST>(S, ckpt, p.state_stride_v, vw, p.head_v, rowL, lane);
    }
}

}  // namespace gdn
}  // namespace rssm
