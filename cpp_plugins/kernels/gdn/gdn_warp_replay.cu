// ReplaySSM Gated DeltaNet standard step on warp items (WIR, fiftieth session): the small-batch standard step
// (Algorithm 4, T = 1) with the conventional warp-item decode's row layout (gdn_warp_decode.cu) instead of the stream
// kernel's CTA-wide phases (gdn_stream_kernels.cuh: one warp scanning the gates, the record dots of every draft spread
// over the CTA, two barriers). Variant 5 runs it for its standard steps where warpReplayRuns(p) holds and the batch is
// small (gdn_warp_replay.h: warpReplayWanted).
//
// CTA: 4 warps, 32 value rows of one (row b, value head); warp w holds rows vw .. vw + 7 in registers as the
// conventional kernel does (stream::loadWarpRows: lane l the quad l of every row, XOR-permuted slots). Right after the
// slot index, without waiting for the cursors:
//   - the whole ring of raw keys (C <= 32 positions x 256 bytes) into shared memory by cp.async (the CTA's threads),
//   - each warp the 16-bit u of its 8 rows at every ring position (lane p: position p, 16 bytes) the same way,
//   - lane p the gate g of ring position p (a register), the checkpoint rows (registers), the cursors.
// While they land: this step's kn, qn (warp sums), and from the gates and the cursors alone the log-decay prefix sums
// P by a warp scan (lane 2j: record j's gate, lane 2h: this token's), Ptot = P[h + 1], w_j = exp(Ptot - P[j + 1]).
// Barrier 1 (the copies). Record j's dots |k_j|^2, k_j . kn, k_j . qn on 8 lanes of warp j / 4 (16 key elements each,
// three xor levels); those lanes form fw_j = w_j / |k_j|, ck_j = fw_j (k_j . kn), cq_j = fw_j (k_j . qn) into shared
// memory. Barrier 2. Then each warp on its own:
//   - X = e^Ptot S kn + sum_j ck_j u_j, Y = e^Ptot S qn + sum_j cq_j u_j (the record terms split over the row's 4 lanes,
//     records sub + 4 i, then the row dots reduce-scattered);
//   - u = beta (v - X), o = Y + u (kn . qn); o and the record (g, u, raw k) appended at ring index (o + h) % C;
//   - flush (h + 1 == L): S <- e^Ptot S + sum_{j<h} fw_j u_j[row] k_j + u kn (u unrounded), rows stored in place.
// Same math as every other variant (gdn_kernels.cuh, docs/design.md section 2); the arithmetic order differs, so the
// results agree to rounding, not bit for bit. Padding rows (slot < 0 or >= num_slots) and rows whose cursors violate
// the invariants are skipped: nothing of theirs is written.
//
// Measured (H100, docs/kernels-gdn.md "Fiftieth session" and "Fifty-first session"): the fiftieth session's form took
// the B = 1 window-amortized step 10% (q35-4b) / 7-8% (q35-122b) below the stream kernel's; the fifty-first session's
// (activations' dtype at compile time, the record terms without per-record branches, beta's division before barrier 1)
// another 11% / 9% (q35-4b 4.4 -> 3.9 us, q35-122b 5.5 -> 5.1 us), below the conventional step's. The forms tried on
// the way (record dots on every warp, on lane pairs or 8 lanes per record; the row dots before the second barrier; the
// L2 prefetch hint on the rows) are in the git history (b7fe00d).
#include <stdint.h>

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
static_assert(kWarpReplayWarps * 4 == kWarpReplayMaxWindow, "record dots: 4 records per warp cover the window");
static_assert(kWarpReplayMaxWindowLong == 2 * kWarpReplayMaxWindow, "the long instance: two passes of record dots");
static_assert(kWarpReplayMaxWindowLong <= kWarpReplayMaxCapacity, "h + 1 <= L <= C <= 32: one lane per record");

// Ring index of record j (0 <= j <= h) of a row whose committed records start at o0 < C: o0 + j < 2C, as h < L <= C.
__device__ __forceinline__ int ringIndex(int o0, int j, int C) {
    const int r = o0 + j;
    return r >= C ? r - C : r;
}

// AB: bf16 activations (else fp16), a template argument so that every conversion is one instruction.
// MW: the largest window of the instance. 16 (the fiftieth session's kernel): lane pair j holds record j's gate and
// each warp forms the dots of 4 records. 32 (sixty-eighth session, windows 17-32, C <= 32): lane j holds record j's
// gate (lane h this token's) and each warp forms the dots of 8 records in two passes; the rest is the same code.
template <typename ST, bool UB, bool AB, int MW>
__global__ void __launch_bounds__(kWarpReplayWarps * 32, 4) gdnReplayWarpStdKernel(const GdnReplayParams p) {
    static_assert(MW == kWarpReplayMaxWindow || MW == kWarpReplayMaxWindowLong, "instances: windows 16 and 32");
    constexpr int kDotPasses = MW / kWarpReplayMaxWindow;  // records 4 w + rp + 16 pass on warp w
    pdlChainEntryStep();  // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h)
    using RS = stream::RowScatter<kWarpReplayRows>;
    constexpr int K = kWirK;
    __shared__ __align__(16) uint16_t s_k[kWarpReplayMaxCapacity * K];               // raw keys, ring order
    __shared__ __align__(16) uint16_t s_u[kWarpReplayMaxCapacity * kWirCtaRows];     // u of the CTA's rows
    __shared__ __align__(16) float s_kn[kWarpReplayWarps][K], s_qn[kWarpReplayWarps][K];  // per warp
    __shared__ float s_coef[MW][3];  // record j: fw_j, ck_j, cq_j

    const int b = blockIdx.z, hv = blockIdx.y;
    const int slot = p.state_batch_indices[b];  // first: the head of the dependent chain
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int V = p.head_v, C = p.ring_capacity;
    const int vw = blockIdx.x * kWirCtaRows + warp * kWarpReplayRows;  // the warp's first row
    const bool rowsHere = vw < V;  // head_v % 8 == 0: all 8 rows or none
    const int vPerK = p.num_v_heads / p.num_heads, hk = hv / vPerK;
    constexpr bool bf16 = AB;
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
        stream::loadWarpRows<kWarpReplayRows, 1, ST>(S, ckpt, p.state_stride_v, vw, V, rl, lane);
    } else {
#pragma unroll
        for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const uint16_t* ring_k = static_cast<const uint16_t*>(p.ring_k);
    const uint16_t* ring_u = static_cast<const uint16_t*>(p.ring_u);
    const int64_t rkBase = (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
    const int64_t ruBase = (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;
    const int64_t rgBase = (int64_t)slot * p.ring_g_stride_slot + hv;
    for (int i = tid; i < C * (K / 8); i += kWarpReplayWarps * 32) {
        const int r = i / (K / 8), c = i - r * (K / 8);
        async::copy16(s_k + r * K + c * 8, ring_k + rkBase + (int64_t)r * p.ring_k_stride_rec + c * 8);
    }
    if (rowsHere && lane < C)
        async::copy16(s_u + lane * kWirCtaRows + warp * kWarpReplayRows,
                      ring_u + ruBase + (int64_t)lane * p.ring_u_stride_rec + vw);
    const float gPos = lane < C ? p.ring_g[rgBase + (int64_t)lane * p.ring_g_stride_rec] : 0.f;  // position `lane`
    const int o0 = p.ring_origin[slot];
    const int h = p.ring_len[slot];

    // ---- this step's key and query (while the loads are in flight) ----
    const float4 kf = u2ToF4(kRaw, bf16), qf = u2ToF4(qRaw, bf16);
    const float kss = warpSum(dot4(kf, kf)), qss = warpSum(dot4(qf, qf)), kq = warpSum(dot4(kf, qf));
    const float invk = rsqrtf(kss + kL2Eps), invq = rsqrtf(qss + kL2Eps) * p.scale;
    const float4 kn = scale4(kf, invk), qn = scale4(qf, invq);
    *reinterpret_cast<float4*>(&s_kn[warp][lane * 4]) = kn;
    *reinterpret_cast<float4*>(&s_qn[warp][lane * 4]) = qn;
    const float gCur = gdnLogDecay(aIn, aLog, dtBias);
    float beta = sigmoidf(bIn);

    // Cursor invariants (design.md 3.2; standard mode: 0 <= h < L, 0 <= o < C); a violating row is skipped (the
    // commit kernel reports it). CTA-uniform: every thread read the same cursors.
    if (h < 0 || h >= p.window || o0 < 0 || o0 >= C) {
        async::waitAll();  // drain the copies into this CTA's shared memory
        return;
    }
    const bool flush = h + 1 == p.window;

    // ---- the decays need only the gates and the cursors. MW 16: lane pair j (lanes 2j, 2j + 1) takes record j's gate
    //      (lane 2h this token's); odd lanes add nothing, so lanes 2j and 2j + 1 both end with P[j + 1]. MW 32: lane
    //      j takes record j's gate (lane h this token's) and ends with P[j + 1] ----
    constexpr int kLanesPerRec = MW == kWarpReplayMaxWindow ? 2 : 1;
    const int jp = lane / kLanesPerRec;  // h <= MW - 1: every record has its lane (pair)
    const int pjp = jp < h ? ringIndex(o0, jp, C) : 0;
    const float gRec = __shfl_sync(kFull, gPos, pjp);
    const float gLane = (kLanesPerRec == 2 && (lane & 1)) ? 0.f : jp < h ? gRec : (jp == h ? gCur : 0.f);
    const float P = scan::warpInclusiveSum(gLane, lane);
    const float Ptot = __shfl_sync(kFull, P, kLanesPerRec * h);  // P[h + 1]
    const float D = expf(Ptot);
    const float wLane = jp < h ? expf(Ptot - P) : 0.f;  // w_j on lane (pair) j
    // beta's division (and its slow path) here, while the copies land, not next to its use at the end of the chain
    asm volatile("" : "+f"(beta));
    async::waitAll();
    __syncthreads();  // barrier 1: the ring copies (and each warp's kn / qn rows) visible

    // ---- record dots over the CTA: warp w takes records 4 w + rp on 8 lanes each (elements 16 sl .. 16 sl + 15, its
    //      two halves in the order c2 ^ (sl >> 2): the 8 lanes of a shared-memory phase hit distinct banks); the
    //      record's lane sl = 0 forms its coefficients for the whole CTA ----
#pragma unroll
    for (int pass = 0; pass < kDotPasses; ++pass) {
        const int rp = lane >> 3, sl = lane & 7, jr = 4 * warp + rp + kWarpReplayMaxWindow * pass;
        float a0 = 0.f, a1 = 0.f, a2 = 0.f;
        if (jr < h) {
            const int pr = ringIndex(o0, jr, C);
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
        const float wj = __shfl_sync(kFull, wLane, kLanesPerRec * jr);
        if (sl == 0 && jr < h) {
            const float fwj = wj * rsqrtf(a0 + kL2Eps);
            s_coef[jr][0] = fwj;
            s_coef[jr][1] = fwj * a1;
            s_coef[jr][2] = fwj * a2;
        }
    }
    __syncthreads();  // barrier 2: the CTA's record coefficients visible
    if (!rowsHere) return;

    // ---- committed-record terms (records sub + 4 i on the row's 4 lanes), then the row dots ----
    const uint16_t* uCol = s_u + warp * kWarpReplayRows + rl;  // u of this lane's row at ring position 0
    float xs = 0.f, ys = 0.f;
#pragma unroll
    for (int i = 0; i < MW / RS::LPR; ++i) {
        // no branch, so that the four records' loads issue together (per-record branches serialized them: the B = 1
        // step ~10% longer, fifty-first session); records jj >= h (s_coef not written this step) are selected away
        const int jj = sub + RS::LPR * i;  // < MW: s_coef[jj] in bounds
        const bool rec = jj < h;
        const float uj = u16ToF(uCol[ringIndex(o0, rec ? jj : 0, C) * kWirCtaRows], UB);
        const float c1 = s_coef[jj][1], c2 = s_coef[jj][2];
        xs = rec ? fmaf(c1, uj, xs) : xs;
        ys = rec ? fmaf(c2, uj, ys) : ys;
    }
    xs = RS::rowLanesSum(xs);
    ys = RS::rowLanesSum(ys);
    const float4 knA[1] = {kn}, qnA[1] = {qn};
    const float X = fmaf(D, stream::warpRowDot<kWarpReplayRows, 1>(S, knA, lane), xs);
    const float Y = fmaf(D, stream::warpRowDot<kWarpReplayRows, 1>(S, qnA, lane), ys);
    const float u = beta * (vr - X);
    const float o = fmaf(u, kq * invk * invq, Y);

    // ---- outputs and the record of this token at ring index (o0 + h) % C ----
    const int pos = ringIndex(o0, h, C);
    if (sub == 0) {
        stAct(p.o, (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + row, o, bf16);
        stAct(p.ring_u, ruBase + (int64_t)pos * p.ring_u_stride_rec + row, u, UB);
    }
    if (blockIdx.x == 0 && warp == 0) {
        if (lane == 0) p.ring_g[rgBase + (int64_t)pos * p.ring_g_stride_rec] = gCur;
        if (hv == hk * vPerK)  // the raw key, once per key head
            stRaw4(p.ring_k, rkBase + (int64_t)pos * p.ring_k_stride_rec + lane * 4, kRaw);
    }

    // ---- flush: fold the h committed records and this token into the rows, store them ----
    if (flush) {
#pragma unroll
        for (int r = 0; r < kWarpReplayRows; ++r) S[r][0] = scale4(S[r][0], D);
        const uint16_t* uRows = s_u + warp * kWarpReplayRows;
#pragma unroll 2
        for (int jj = 0; jj < h; ++jj) {
            const int pp = ringIndex(o0, jj, C);
            const float4 kj =
                scale4(u2ToF4(*reinterpret_cast<const uint2*>(s_k + pp * K + lane * 4), bf16), s_coef[jj][0]);
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

template <typename ST, bool AB, int MW>
const void* warpReplayKernel(bool ub) {
    return ub ? reinterpret_cast<const void*>(&gdnReplayWarpStdKernel<ST, true, AB, MW>)
              : reinterpret_cast<const void*>(&gdnReplayWarpStdKernel<ST, false, AB, MW>);
}
template <typename ST, int MW>
const void* warpReplayKernel(bool ub, bool ab) {
    return ab ? warpReplayKernel<ST, true, MW>(ub) : warpReplayKernel<ST, false, MW>(ub);
}
template <int MW>
const void* warpReplayKernelFor(const GdnReplayParams& p) {
    const bool ub = p.u_dtype == RSSM_DTYPE_BF16;
    const bool ab = p.act_dtype == RSSM_DTYPE_BF16;
    return p.state_dtype == RSSM_DTYPE_FP32   ? warpReplayKernel<float, MW>(ub, ab)
           : p.state_dtype == RSSM_DTYPE_FP16 ? warpReplayKernel<__half, MW>(ub, ab)
                                              : warpReplayKernel<__nv_bfloat16, MW>(ub, ab);
}

}  // namespace

bool warpReplayRuns(const GdnReplayParams& p) {
    return p.mode == GDN_REPLAY_STANDARD && p.num_tokens == 1 && p.head_k == kWirK &&
           p.head_v % kWarpReplayRows == 0 && p.window <= kWarpReplayMaxWindowLong &&
           p.ring_capacity <= kWarpReplayMaxCapacity && p.skip_flush_rows == 0 && p.ring_beta == nullptr &&
           p.ring_v == nullptr &&
           aligned16Rows(p.ring_k, p.ring_k_stride_slot, p.ring_k_stride_rec, p.ring_k_stride_head) &&
           aligned16Rows(p.ring_u, p.ring_u_stride_slot, p.ring_u_stride_rec, p.ring_u_stride_head);
}

bool warpReplayWanted(const GdnReplayParams& p) {
    // RSSM_GDN_WIR "1" / "0" overrides the batch rule (common/env_switch.h), never warpReplayRuns; windows 17-32 (the
    // second instance) by default since the sixty-ninth session, RSSM_GDN_WIR_LONG=0 keeps them on the stream kernel
    // (kWarpReplayLongByDefault)
    if (p.window > kWarpReplayMaxWindow && !envSwitch("RSSM_GDN_WIR_LONG", kWarpReplayLongByDefault)) return false;
    return warpReplayRuns(p) &&
           envSwitch("RSSM_GDN_WIR", (long long)p.batch * p.num_v_heads <= kWarpReplayMaxBatchHeads);
}

cudaError_t launchReplayWarpItems(const GdnReplayParams& p, cudaStream_t s) {
    const void* kern = p.window <= kWarpReplayMaxWindow ? warpReplayKernelFor<kWarpReplayMaxWindow>(p)
                                                        : warpReplayKernelFor<kWarpReplayMaxWindowLong>(p);
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
