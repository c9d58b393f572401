// ReplaySSM Gated DeltaNet standard step on warp items (WIR, fiftieth session): the small-batch standard step
// (Algorithm 4, T = 1) with the conventional warp-item decode's layout (gdn_warp_decode.cu) instead of the stream
// kernel's CTA-wide phases (gdn_stream_kernels.cuh: a gate-scan warp, two CTA barriers, record dots shared through
// shared memory). Variant 5 runs it when RSSM_GDN_WIR=1 and warpReplayRuns(p) (gdn_warp_replay.h).
//
// CTA: 4 warps, 32 value rows of one (row b, value head); warp w holds rows vw .. vw + 7 in registers as the
// conventional kernel does (stream::loadWarpRows: lane l the quad l of every row, XOR-permuted slots). Before the
// cursors are read (they arrive with everything else, one round trip after the slot index):
//   - the whole ring of raw keys (C <= 32 positions x 256 bytes) into shared memory by cp.async (the CTA's threads),
//   - each warp the 16-bit u of its 8 rows at every ring position (lane p: position p, 16 bytes) the same way,
//   - lane p the gate g of ring position p (a register), the checkpoint rows (registers), the step's inputs.
// One CTA barrier (the copies). Then each warp on its own, without shared results:
//   - record j < h on lanes 2j, 2j + 1 (64 key elements each): |k_j|^2, k_j . kn, k_j . qn, one xor level;
//   - the log-decay prefix sums P by a warp scan (lane 2j: g_j; lane 2h: this token's g), Ptot = P[h + 1];
//   - w_j = exp(Ptot - P[j + 1]), fw_j = w_j / |k_j|: ck_j = fw_j (k_j . kn), cq_j = fw_j (k_j . qn);
//   - X = e^Ptot S kn + sum_j ck_j u_j, Y = e^Ptot S qn + sum_j cq_j u_j (the row dots reduce-scattered, the record
//     terms split over the row's 4 lanes, records sub + 4 i);
//   - u = beta (v - X), o = Y + u (kn . qn); o and the record (g, u, raw k) appended at ring index (o + h) % C;
//   - flush (h + 1 == L): S <- e^Ptot S + sum_{j<h} fw_j u_j[row] k_j + u kn (u unrounded), rows stored in place.
// Same math as every other variant (gdn_kernels.cuh, docs/design.md section 2); the arithmetic order differs, so the
// results agree to rounding, not bit for bit. Padding rows (slot < 0 or >= num_slots) and rows whose cursors violate
// the invariants are skipped: nothing of theirs is written.
#include <stdint.h>
#include <stdlib.h>

#include "common/cp_async.cuh"
#include "common/env_switch.h"
#include "common/pdl.h"
#include "gdn/gdn_kernels.cuh"
#include "gdn/gdn_warp_replay.h"

namespace rssm {
namespace gdn {
namespace {

constexpr int kWirK = 128;
constexpr int kWirCtaRows = kWarpReplayWarps * kWarpReplayRows;

// OPT (RSSM_GDN_WIR's value, A/B): 1 the first form (record dots on lane pairs, the record terms after the row dots,
// fold loop not unrolled); 2 the record terms before the row dots (they need only the ring, which arrives before the
// checkpoint rows) and the fold loop unrolled by two; 3 = 2 with the record dots on 8 lanes per record (16 key elements
// each; the lane's 16 elements of kn and qn loaded once and kept over the passes of 4 records), a quarter of the
// shared-memory bytes of the lane-pair form; 4 = 2 with the checkpoint rows loaded with the L2 256-byte prefetch hint
// (fp32 rows; stream::ldStreamPf256, as the conventional warp-item decode's default); 9 = 4 without the ring (no ring
// copies, every row treated as h = 0: wrong outputs where h > 0), a timing diagnostic of the state-read path only;
// 8 = 2 with the ring loaded and waited for but not used (h = 0 in the arithmetic; wrong outputs where h > 0), the
// diagnostic of what the ring's loads cost; 5 = 2 with the record dots split over the CTA's 4 warps (4 records each,
// 8 lanes per record) and shared through shared memory behind a second CTA barrier; 6 = 5 with the decays (gate scan,
// w_j) computed before the first barrier (they need only the gates and the cursors) and the record coefficients
// formed by the records' owner lanes and shared (the record terms and the fold read them, no shuffles); 7 = 6 with the
// row dots before the second barrier and the fold's u of the 8 rows as one 16-byte load.
template <typename ST, bool UB, int OPT>
__global__ void __launch_bounds__(kWarpReplayWarps * 32, 4) gdnReplayWarpStdKernel(const GdnReplayParams p) {
    pdlChainEntry();  // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h)
    using RS = stream::RowScatter<kWarpReplayRows>;
    constexpr int K = kWirK;
    __shared__ __align__(16) uint16_t s_k[kWarpReplayMaxCapacity * K];               // raw keys, ring order
    __shared__ __align__(16) uint16_t s_u[kWarpReplayMaxCapacity * kWirCtaRows];     // u of the CTA's rows
    __shared__ __align__(16) float s_kn[kWarpReplayWarps][K], s_qn[kWarpReplayWarps][K];  // per warp
    __shared__ float s_dots[kWarpReplayWarps][kWarpReplayMaxWindow][3];  // OPT 3: per warp, record j's three dots
    __shared__ float s_ctaDots[kWarpReplayMaxWindow][3];  // OPT 5: the CTA's record dots
    __shared__ float s_coef[kWarpReplayMaxWindow][3];  // OPT 6: the CTA's record coefficients fw_j, ck_j, cq_j

    const int b = blockIdx.z, hv = blockIdx.y;
    const int slot = p.state_batch_indices[b];  // first: the head of the dependent chain
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int V = p.head_v, C = p.ring_capacity;
    const int vw = blockIdx.x * kWirCtaRows + warp * kWarpReplayRows;  // the warp's first row
    const bool rowsHere = vw < V;  // head_v % 8 == 0: all 8 rows or none
    const int hk = hv / (p.num_v_heads / p.num_heads);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int rl = RS::rowOf(lane), row = vw + rl, sub = lane & (RS::LPR - 1);

    // ---- inputs that need only the batch row, issued before the slot index arrives ----
    const uint2 kRaw = ldRaw4(p.k, (int64_t)b * p.k_stride_b + (int64_t)hk * p.k_stride_h + lane * 4);
    const uint2 qRaw = ldRaw4(p.q, (int64_t)b * p.q_stride_b + (int64_t)hk * p.q_stride_h + lane * 4);
    const float vr = rowsHere ? ldAct(p.v, (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h + row, bf16) : 0.f;
    const float aIn = ldAct(p.a, (int64_t)b * p.a_stride_b + hv, bf16);
    const float bIn = ldAct(p.b, (int64_t)b * p.b_stride_b + hv, bf16);
    const float aLog = p.A_log[hv], dtBias = p.dt_bias[hv];
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched (CTA-uniform)

    // ---- checkpoint rows, the whole ring and the cursors: one round trip after the slot ----
    ST* ckpt = static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head;
    float4 S[kWarpReplayRows][1];
    if (rowsHere) {
        stream::loadWarpRows<kWarpReplayRows, 1, ST, (OPT >= 4 ? 1 : 0)>(S, ckpt, p.state_stride_v, vw, V, rl, lane);
    } else {
#pragma unroll
        for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const uint16_t* ring_k = static_cast<const uint16_t*>(p.ring_k);
    const uint16_t* ring_u = static_cast<const uint16_t*>(p.ring_u);
    const int64_t rkBase = (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
    const int64_t ruBase = (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;
    const int64_t rgBase = (int64_t)slot * p.ring_g_stride_slot + hv;
    for (int i = tid; i < (OPT == 9 ? 0 : C) * (K / 8); i += kWarpReplayWarps * 32) {
        const int r = i / (K / 8), c = i - r * (K / 8);
        async::copy16(s_k + r * K + c * 8, ring_k + rkBase + (int64_t)r * p.ring_k_stride_rec + c * 8);
    }
    if (OPT != 9 && rowsHere && lane < C)
        async::copy16(s_u + lane * kWirCtaRows + warp * kWarpReplayRows,
                      ring_u + ruBase + (int64_t)lane * p.ring_u_stride_rec + vw);
    const float gPos = (OPT != 9 && lane < C) ? p.ring_g[rgBase + (int64_t)lane * p.ring_g_stride_rec] : 0.f;
    const int o0 = p.ring_origin[slot];
    const int h = OPT == 9 ? 0 * p.ring_len[slot] : p.ring_len[slot];

    // ---- this step's key and query (while the loads are in flight) ----
    const float4 kf = u2ToF4(kRaw, bf16), qf = u2ToF4(qRaw, bf16);
    const float kss = warpSum(dot4(kf, kf)), qss = warpSum(dot4(qf, qf)), kq = warpSum(dot4(kf, qf));
    const float invk = rsqrtf(kss + kL2Eps), invq = rsqrtf(qss + kL2Eps) * p.scale;
    const float4 kn = scale4(kf, invk), qn = scale4(qf, invq);
    *reinterpret_cast<float4*>(&s_kn[warp][lane * 4]) = kn;
    *reinterpret_cast<float4*>(&s_qn[warp][lane * 4]) = qn;
    const float gCur = gdnLogDecay(aIn, aLog, dtBias), beta = sigmoidf(bIn);

    // Cursor invariants (design.md 3.2; standard mode: 0 <= h < L, 0 <= o < C); a violating row is skipped (the
    // commit kernel reports it). CTA-uniform: every thread read the same cursors.
    if (h < 0 || h >= p.window || o0 < 0 || o0 >= C) {
        async::waitAll();  // drain the copies into this CTA's shared memory
        return;
    }
    const bool flush = h + 1 == p.window;
    if constexpr (OPT == 6 || OPT == 7) {
        // The decays need only the gates and the cursors: lane pair j (lanes 2j, 2j + 1) takes record j's gate (lane
        // 2h this token's), the prefix sums P by a warp scan, w_j = exp(P[h + 1] - P[j + 1]), while the copies land.
        const int jp = lane >> 1;
        int pjp = o0 + jp;
        if (pjp >= C) pjp -= C;
        if (jp >= h) pjp = 0;
        const float gRec = __shfl_sync(kFull, gPos, pjp);
        const float gLane = (lane & 1) ? 0.f : jp < h ? gRec : (jp == h ? gCur : 0.f);
        const float P = scan::warpInclusiveSum(gLane, lane);
        const float Ptot = __shfl_sync(kFull, P, 2 * h);  // P[h + 1]
        const float D = expf(Ptot);
        const float wLane = jp < h ? expf(Ptot - P) : 0.f;
        async::waitAll();
        __syncthreads();  // the ring copies (and each warp's kn / qn rows) visible
        // Record dots split over the CTA's warps: warp w records 4 w + rp on 8 lanes each (elements 16 sl .. 16 sl + 15,
        // halves in the order c2 ^ (sl >> 2): distinct banks per phase); the record's owner lanes turn them into its
        // coefficients (fw_j = w_j / |k_j|, ck_j, cq_j) for the whole CTA.
        {
            const int rp = lane >> 3, sl = lane & 7, jr = 4 * warp + rp;
            float a0 = 0.f, a1 = 0.f, a2 = 0.f;
            if (jr < h) {
                int pr = o0 + jr;
                if (pr >= C) pr -= C;
#pragma unroll
                for (int c2 = 0; c2 < 2; ++c2) {
                    const int e = sl * 16 + (c2 ^ (sl >> 2)) * 8;
                    const uint4 raw = *reinterpret_cast<const uint4*>(s_k + pr * K + e);
                    const float4 k0 = u2ToF4(make_uint2(raw.x, raw.y), bf16), k1 = u2ToF4(make_uint2(raw.z, raw.w), bf16);
                    const float4 n0 = ld4s(&s_kn[warp][e]), n1 = ld4s(&s_kn[warp][e + 4]);
                    const float4 q0 = ld4s(&s_qn[warp][e]), q1 = ld4s(&s_qn[warp][e + 4]);
                    a0 += dot4(k0, k0) + dot4(k1, k1);
                    a1 += dot4(k0, n0) + dot4(k1, n1);
                    a2 += dot4(k0, q0) + dot4(k1, q1);
                }
            }
#pragma unroll
            for (int m = 4; m >= 1; m >>= 1) {
                a0 += __shfl_xor_sync(kFull, a0, m);
                a1 += __shfl_xor_sync(kFull, a1, m);
                a2 += __shfl_xor_sync(kFull, a2, m);
            }
            const float wj = __shfl_sync(kFull, wLane, 2 * jr);
            if (sl == 0 && jr < h) {
                const float fwj = wj * rsqrtf(a0 + kL2Eps);
                s_coef[jr][0] = fwj;
                s_coef[jr][1] = fwj * a1;
                s_coef[jr][2] = fwj * a2;
            }
        }
        // OPT 7: the row dots before the barrier (they need only the checkpoint rows): their shuffle chain overlaps the
        // wait for the other warps' record coefficients instead of following the record terms
        const float4 knA[1] = {kn}, qnA[1] = {qn};
        float XS = 0.f, YS = 0.f;
        if (OPT == 7 && rowsHere) {
            XS = stream::warpRowDot<kWarpReplayRows, 1>(S, knA, lane);
            YS = stream::warpRowDot<kWarpReplayRows, 1>(S, qnA, lane);
        }
        __syncthreads();  // the CTA's record coefficients visible
        if (!rowsHere) return;
        // committed-record terms (records sub + 4 i on the row's 4 lanes), then (OPT 6) the row dots
        const uint16_t* uCol = s_u + warp * kWarpReplayRows + rl;
        float xs = 0.f, ys = 0.f;
#pragma unroll
        for (int i = 0; i < kWarpReplayMaxWindow / RS::LPR; ++i) {
            const int jj = sub + RS::LPR * i;
            if (jj < h) {
                int pp = o0 + jj;
                if (pp >= C) pp -= C;
                const float uj = u16ToF(uCol[pp * kWirCtaRows], UB);
                xs = fmaf(s_coef[jj][1], uj, xs);
                ys = fmaf(s_coef[jj][2], uj, ys);
            }
        }
        xs = RS::rowLanesSum(xs);
        ys = RS::rowLanesSum(ys);
        if (OPT == 6) {
            XS = stream::warpRowDot<kWarpReplayRows, 1>(S, knA, lane);
            YS = stream::warpRowDot<kWarpReplayRows, 1>(S, qnA, lane);
        }
        const float X = fmaf(D, XS, xs);
        const float Y = fmaf(D, YS, ys);
        const float u = beta * (vr - X);
        const float o = fmaf(u, kq * invk * invq, Y);
        int pos = o0 + h;
        if (pos >= C) pos -= C;
        if (sub == 0) {
            stAct(p.o, (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + row, o, bf16);
            stAct(p.ring_u, ruBase + (int64_t)pos * p.ring_u_stride_rec + row, u, UB);
        }
        if (blockIdx.x == 0 && warp == 0) {
            if (lane == 0) p.ring_g[rgBase + (int64_t)pos * p.ring_g_stride_rec] = gCur;
            if (hv % (p.num_v_heads / p.num_heads) == 0)  // the raw key, once per key head
                stRaw4(p.ring_k, rkBase + (int64_t)pos * p.ring_k_stride_rec + lane * 4, kRaw);
        }
        if (flush) {
#pragma unroll
            for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = scale4(S[r][0], D);
            const uint16_t* uRows = s_u + warp * kWarpReplayRows;
#pragma unroll 2
            for (int jj = 0; jj < h; ++jj) {
                int pp = o0 + jj;
                if (pp >= C) pp -= C;
                const float4 kj =
                    scale4(u2ToF4(*reinterpret_cast<const uint2*>(s_k + pp * K + lane * 4), bf16), s_coef[jj][0]);
                const uint16_t* ur = uRows + pp * kWirCtaRows;
                if constexpr (OPT == 7) {  // the 8 rows' u as one 16-byte load, permuted into the lane's slot order
                    float uf[kWarpReplayRows];
                    stream::unpack8(stream::xorPermute8(*reinterpret_cast<const uint4*>(ur), rl), UB, uf);
#pragma unroll
                    for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = stream::fma4s(S[r][0], uf[r], kj);
                } else {
#pragma unroll
                    for (int r = 0; r < kWarpReplayRows; ++r)
                        S[r][0] = stream::fma4s(S[r][0], u16ToF(ur[r ^ rl], UB), kj);
                }
            }
#pragma unroll
            for (int r = 0; r < kWarpReplayRows; ++r) {
                const float ur = __shfl_sync(kFull, u, RS::laneOf(r ^ rl));  // this token's u of the row in slot r
                S[r][0] = stream::fma4s(S[r][0], ur, kn);
            }
            stream::storeWarpRows<kWarpReplayRows, 1, ST>(S, ckpt, p.state_stride_v, vw, V, rl, lane);
        }
        return;
    }
    async::waitAll();
    __syncthreads();  // the ring copies (and each warp's kn / qn rows) visible
    const int hR = OPT == 8 ? 0 : h;  // OPT 8 (timing diagnostic): the ring loaded and waited for, not used
    if constexpr (OPT == 5) {
        // the CTA's record dots split over its warps: warp w records 4 w + rp on 8 lanes each (elements 16 sl ..
        // 16 sl + 15, halves in the order c2 ^ (sl >> 2) as OPT 3), into s_ctaDots, then one more barrier
        const int rp = lane >> 3, sl = lane & 7, jr = 4 * warp + rp;
        float a0 = 0.f, a1 = 0.f, a2 = 0.f;
        if (jr < h) {
            int pr = o0 + jr;
            if (pr >= C) pr -= C;
#pragma unroll
            for (int c2 = 0; c2 < 2; ++c2) {
                const int hc = c2 ^ (sl >> 2);
                const int e = sl * 16 + hc * 8;
                const uint4 raw = *reinterpret_cast<const uint4*>(s_k + pr * K + e);
                const float4 k0 = u2ToF4(make_uint2(raw.x, raw.y), bf16), k1 = u2ToF4(make_uint2(raw.z, raw.w), bf16);
                const float4 n0 = ld4s(&s_kn[warp][e]), n1 = ld4s(&s_kn[warp][e + 4]);
                const float4 q0 = ld4s(&s_qn[warp][e]), q1 = ld4s(&s_qn[warp][e + 4]);
                a0 += dot4(k0, k0) + dot4(k1, k1);
                a1 += dot4(k0, n0) + dot4(k1, n1);
                a2 += dot4(k0, q0) + dot4(k1, q1);
            }
        }
#pragma unroll
        for (int m = 4; m >= 1; m >>= 1) {
            a0 += __shfl_xor_sync(kFull, a0, m);
            a1 += __shfl_xor_sync(kFull, a1, m);
            a2 += __shfl_xor_sync(kFull, a2, m);
        }
        if (sl == 0 && jr < h) {
            s_ctaDots[jr][0] = a0;
            s_ctaDots[jr][1] = a1;
            s_ctaDots[jr][2] = a2;
        }
        __syncthreads();  // the CTA's record dots visible
    }
    if (!rowsHere) return;

    // ---- record j on lanes 2j (key elements 0..63) and 2j + 1 (64..127): |k_j|^2, k_j . kn, k_j . qn. The 16-byte
    //      chunks are walked in a per-lane rotation, so the 8 lanes of a shared-memory phase hit distinct banks. ----
    const int j = lane >> 1, half = lane & 1;
    const bool committed = j < hR;  // h <= 15: every record has its lane pair
    int pj = o0 + j;
    if (pj >= C) pj -= C;  // o0 + j < 2C for j < h (h < L <= C)
    if (!committed) pj = 0;
    float ss = 0.f, dk = 0.f, dq = 0.f;
    if constexpr (OPT == 5) {
        if (committed && !half) {  // the lane pair's halves sum to the record's dots below
            ss = s_ctaDots[j][0];
            dk = s_ctaDots[j][1];
            dq = s_ctaDots[j][2];
        }
    } else if constexpr (OPT == 3) {
        // 8 lanes per record (lane 8 rp + sl: elements 16 sl .. 16 sl + 15 of record 4 pass + rp). The lane walks its
        // two 8-element halves in the order hc = c2 ^ (sl >> 2) (the 8 lanes of a shared-memory phase then hit distinct
        // banks), and its kn / qn quads are loaded once in that order: kq4[2 c2 + i] is quad 2 hc + i.
        const int rp = lane >> 3, sl = lane & 7;
        float4 kq4[4], qq4[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int e = sl * 16 + (2 * ((c >> 1) ^ (sl >> 2)) + (c & 1)) * 4;
            kq4[c] = ld4s(&s_kn[warp][e]);
            qq4[c] = ld4s(&s_qn[warp][e]);
        }
#pragma unroll 1
        for (int jb = 0; jb < hR; jb += 4) {  // warp-uniform trip count
            const int jr = jb + rp;
            int pr = o0 + jr;
            if (pr >= C) pr -= C;
            float a0 = 0.f, a1 = 0.f, a2 = 0.f;
            if (jr < hR) {
#pragma unroll
                for (int c2 = 0; c2 < 2; ++c2) {
                    const int hc = c2 ^ (sl >> 2);  // 8-element half of the lane's 16
                    const uint4 raw = *reinterpret_cast<const uint4*>(s_k + pr * K + sl * 16 + hc * 8);
                    const float4 k0 = u2ToF4(make_uint2(raw.x, raw.y), bf16), k1 = u2ToF4(make_uint2(raw.z, raw.w), bf16);
                    const float4 n0 = kq4[2 * c2], n1 = kq4[2 * c2 + 1], q0 = qq4[2 * c2], q1 = qq4[2 * c2 + 1];
                    a0 += dot4(k0, k0) + dot4(k1, k1);
                    a1 += dot4(k0, n0) + dot4(k1, n1);
                    a2 += dot4(k0, q0) + dot4(k1, q1);
                }
            }
#pragma unroll
            for (int m = 4; m >= 1; m >>= 1) {
                a0 += __shfl_xor_sync(kFull, a0, m);
                a1 += __shfl_xor_sync(kFull, a1, m);
                a2 += __shfl_xor_sync(kFull, a2, m);
            }
            if (sl == 0 && jr < hR) {
                s_dots[warp][jr][0] = a0;
                s_dots[warp][jr][1] = a1;
                s_dots[warp][jr][2] = a2;
            }
        }
        __syncwarp();
        if (committed) {
            ss = half ? 0.f : s_dots[warp][j][0];  // the lane pair's halves sum to the record's dots below
            dk = half ? 0.f : s_dots[warp][j][1];
            dq = half ? 0.f : s_dots[warp][j][2];
        }
    } else if (committed) {
        const uint16_t* kr = s_k + pj * K + half * 64;
        const float* knp = &s_kn[warp][half * 64];
        const float* qnp = &s_qn[warp][half * 64];
#pragma unroll
        for (int it = 0; it < 8; ++it) {
            const int e = ((it + j + 4 * half) & 7) * 8;
            const uint4 raw = *reinterpret_cast<const uint4*>(kr + e);
            const float4 k0 = u2ToF4(make_uint2(raw.x, raw.y), bf16), k1 = u2ToF4(make_uint2(raw.z, raw.w), bf16);
            const float4 n0 = ld4s(knp + e), n1 = ld4s(knp + e + 4), q0 = ld4s(qnp + e), q1 = ld4s(qnp + e + 4);
            ss += dot4(k0, k0) + dot4(k1, k1);
            dk += dot4(k0, n0) + dot4(k1, n1);
            dq += dot4(k0, q0) + dot4(k1, q1);
        }
    }
    ss += __shfl_xor_sync(kFull, ss, 1);
    dk += __shfl_xor_sync(kFull, dk, 1);
    dq += __shfl_xor_sync(kFull, dq, 1);

    // ---- log-decay prefix sums: lane 2j holds g_j (j < h) or this token's g (j == h); odd lanes add nothing, so
    //      lanes 2j and 2j + 1 both end with P[j + 1] ----
    const float gj = __shfl_sync(kFull, gPos, pj);
    const float gLane = half ? 0.f : committed ? gj : (j == hR ? gCur : 0.f);
    const float P = scan::warpInclusiveSum(gLane, lane);
    const float Ptot = __shfl_sync(kFull, P, 2 * hR);  // P[h + 1]
    const float D = expf(Ptot);
    const float fw = committed ? expf(Ptot - P) * rsqrtf(ss + kL2Eps) : 0.f;  // weight of raw key j and u_j
    const float ck = fw * dk, cq = fw * dq;

    // ---- row dots and the committed-record terms (records sub + 4 i on the row's 4 lanes); OPT >= 2: the record
    //      terms first (they need only the ring, which arrives before the checkpoint rows) ----
    const float4 knA[1] = {kn}, qnA[1] = {qn};
    float X = 0.f, Y = 0.f;
    if constexpr (OPT < 2) {
        X = stream::warpRowDot<kWarpReplayRows, 1>(S, knA, lane);
        Y = stream::warpRowDot<kWarpReplayRows, 1>(S, qnA, lane);
    }
    const uint16_t* uCol = s_u + warp * kWarpReplayRows + rl;  // u of this lane's row, ring position 0
    float xs = 0.f, ys = 0.f;
#pragma unroll
    for (int i = 0; i < kWarpReplayMaxWindow / RS::LPR; ++i) {
        const int jj = sub + RS::LPR * i;
        const float ckj = __shfl_sync(kFull, ck, 2 * jj), cqj = __shfl_sync(kFull, cq, 2 * jj);
        if (jj < hR) {
            int pp = o0 + jj;
            if (pp >= C) pp -= C;
            const float uj = u16ToF(uCol[pp * kWirCtaRows], UB);
            xs = fmaf(ckj, uj, xs);
            ys = fmaf(cqj, uj, ys);
        }
    }
    xs = RS::rowLanesSum(xs);
    ys = RS::rowLanesSum(ys);
    if constexpr (OPT >= 2) {
        X = stream::warpRowDot<kWarpReplayRows, 1>(S, knA, lane);
        Y = stream::warpRowDot<kWarpReplayRows, 1>(S, qnA, lane);
    }
    X = fmaf(D, X, xs);
    Y = fmaf(D, Y, ys);
    const float u = beta * (vr - X);
    const float o = fmaf(u, kq * invk * invq, Y);

    // ---- outputs and the record of this token at ring index (o0 + h) % C ----
    int pos = o0 + h;
    if (pos >= C) pos -= C;
    if (sub == 0) {
        stAct(p.o, (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + row, o, bf16);
        stAct(p.ring_u, ruBase + (int64_t)pos * p.ring_u_stride_rec + row, u, UB);
    }
    if (blockIdx.x == 0 && warp == 0) {
        if (lane == 0) p.ring_g[rgBase + (int64_t)pos * p.ring_g_stride_rec] = gCur;
        if (hv % (p.num_v_heads / p.num_heads) == 0)  // the raw key, once per key head
            stRaw4(p.ring_k, rkBase + (int64_t)pos * p.ring_k_stride_rec + lane * 4, kRaw);
    }

    // ---- flush: fold the h committed records and this token into the rows, store them ----
    if (flush) {
#pragma unroll
        for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = scale4(S[r][0], D);
        const uint16_t* uRows = s_u + warp * kWarpReplayRows;
#pragma unroll(OPT >= 2 ? 2 : 1)
        for (int jj = 0; jj < hR; ++jj) {
            int pp = o0 + jj;
            if (pp >= C) pp -= C;
            const float fwj = __shfl_sync(kFull, fw, 2 * jj);
            const float4 kj = scale4(u2ToF4(*reinterpret_cast<const uint2*>(s_k + pp * K + lane * 4), bf16), fwj);
            const uint16_t* ur = uRows + pp * kWirCtaRows;
#pragma unroll
            for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = stream::fma4s(S[r][0], u16ToF(ur[r ^ rl], UB), kj);
        }
#pragma unroll
        for (int r = 0; r < kWarpReplayRows; ++r) {
            const float ur = __shfl_sync(kFull, u, RS::laneOf(r ^ rl));  // this token's u of the row in slot r
            S[r][0] = stream::fma4s(S[r][0], ur, kn);
        }
        stream::storeWarpRows<kWarpReplayRows, 1, ST>(S, ckpt, p.state_stride_v, vw, V, rl, lane);
    }
}

template <typename ST, int OPT>
const void* warpReplayKernelOpt(bool ub) {
    return ub ? reinterpret_cast<const void*>(&gdnReplayWarpStdKernel<ST, true, OPT>)
              : reinterpret_cast<const void*>(&gdnReplayWarpStdKernel<ST, false, OPT>);
}
template <typename ST>
const void* warpReplayKernel(bool ub, int opt) {
    switch (opt) {
        case 1: return warpReplayKernelOpt<ST, 1>(ub);
        case 2: return warpReplayKernelOpt<ST, 2>(ub);
        case 3: return warpReplayKernelOpt<ST, 3>(ub);
        case 4: return warpReplayKernelOpt<ST, 4>(ub);
        case 5: return warpReplayKernelOpt<ST, 5>(ub);
        case 6: return warpReplayKernelOpt<ST, 6>(ub);
        case 7: return warpReplayKernelOpt<ST, 7>(ub);
        case 8: return warpReplayKernelOpt<ST, 8>(ub);
        default: return warpReplayKernelOpt<ST, 9>(ub);
    }
}
// RSSM_GDN_WIR: "1" - "9" the OPT of that value; "0", unset or anything else: off.
int warpReplayOpt() {
    const char* e = getenv("RSSM_GDN_WIR");
    if (!e || e[0] < '1' || e[0] > '9' || e[1] != 0) return 0;
    return e[0] - '0';
}

bool rows16(const void* base, int64_t s0, int64_t s1, int64_t s2) {
    return (reinterpret_cast<uintptr_t>(base) & 15u) == 0 && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
}

}  // namespace

bool warpReplayRuns(const GdnReplayParams& p) {
    return p.mode == GDN_REPLAY_STANDARD && p.num_tokens == 1 && p.head_k == kWirK &&
           p.head_v % kWarpReplayRows == 0 && p.window <= kWarpReplayMaxWindow &&
           p.ring_capacity <= kWarpReplayMaxCapacity && p.skip_flush_rows == 0 && p.ring_beta == nullptr &&
           p.ring_v == nullptr && rows16(p.ring_k, p.ring_k_stride_slot, p.ring_k_stride_rec, p.ring_k_stride_head) &&
           rows16(p.ring_u, p.ring_u_stride_slot, p.ring_u_stride_rec, p.ring_u_stride_head);
}

bool warpReplayWanted(const GdnReplayParams& p) { return warpReplayOpt() != 0 && warpReplayRuns(p); }

cudaError_t launchReplayWarpItems(const GdnReplayParams& p, cudaStream_t s) {
    const bool ub = p.u_dtype == RSSM_DTYPE_BF16;
    const int opt = warpReplayOpt() ? warpReplayOpt() : 1;
    const void* kern = p.state_dtype == RSSM_DTYPE_FP32   ? warpReplayKernel<float>(ub, opt)
                       : p.state_dtype == RSSM_DTYPE_FP16 ? warpReplayKernel<__half>(ub, opt)
                                                          : warpReplayKernel<__nv_bfloat16>(ub, opt);
    const dim3 grid((unsigned)((p.head_v + kWirCtaRows - 1) / kWirCtaRows), (unsigned)p.num_v_heads,
                    (unsigned)p.batch);
    GdnReplayParams q = p;
    void* args[] = {&q};
    const cudaError_t e =
        launchMaybeDependent(kern, grid, dim3(kWarpReplayWarps * 32), 0, s, args, pdlChainEnabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace gdn
}  // namespace rssm
