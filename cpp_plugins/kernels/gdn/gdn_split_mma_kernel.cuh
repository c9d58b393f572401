// ReplaySSM Gated DeltaNet speculative verify on tensor cores (variant 6, readout "mma"; K = 128, bf16 activations,
// fp16 u, fp32 / fp16 / bf16 checkpoints). Same prep kernel, head records, items (row b, value head, 8 value rows),
// skip rules, outputs and u appends as gdnSplitReadoutKernel (gdn_split_kernels.cuh); the arithmetic of an item is
//
//   D[vectors x rows] = A[vectors x K] . S^T[K x rows]                    m16n8k8 TF32: S rounded to TF32, A exact
//       A rows 0 .. T-1 the raw draft keys k_s, rows T .. 2T-1 the raw queries q_s (bf16: exact in TF32)
//   E[m][v] = g_m D[m][v] + sum_{j<h} c_{m,j} u_j[v]                      m16n8k8 TF32: c rounded, u (fp16) exact
//       g_m = gk_m (m < T) / gq_{m-T}; c_{m,j} = ck_{m,j} / cq_{m-T,j}: the head record's word 32 + m RM + j
//   forward substitution of the drafts (Eq. 10 / 11) on 8 lanes, one per value row, from E in shared memory:
//       u_s = beta_s (v_s - E[s] - sum_{i<s} ck_{s,h+i} u_i),  o_s = E[T+s] + sum_{i<=s} cq_{s,h+i} u_i
//   flush: S[rows x K] <- gfold S + W[rows x records] . Kr[records x K]    m16n8k16 bf16, W = fw_j u_j[row] as three
//                                                                            bf16 terms (fp32-accurate: the state)
//
// All 2T <= 16 vectors of a step are one M tile, so the product does not grow with T (the CUDA-core readout pays two
// dot products and two warp reduce-scatters per token). The design and register layout are the Mamba-2 tensor-core
// readout's (mamba2/mamba2_split_mma_kernel.cuh, common/mma_rows.cuh): lane (g, q) holds value row g of the item,
// columns 16k + 2q, + 1, 16k + 8 + 2q, + 1, which is the TF32 B fragment of k-tile 2k / 2k + 1 with a permuted K order
// (the A fragments of the keys and queries are loaded in the same order) and the accumulator layout of the fold.
//
// Precision (unlike Mamba-2, the readout's error reaches the recurrence): u_s is computed from the TF32 product and
// appended to the ring, so a committed u carries the TF32 rounding of S (relative 2^-11 per element, about 3e-4 on
// the dot product) on top of its own fp16 rounding (2^-11); the flush folds it into the fp32 state. The GPU tests
// hold ring_u and the checkpoint to 2e-3 of the float64 reference over 40 steps with flushes (tests/kernels/test_gdn.py
// "mma"), as every other variant.
#pragma once
#include "common/mma_rows.cuh"
#include "common/offsets32.h"
#include "common/prefetch_l1.cuh"
#include "gdn/gdn_split_kernels.cuh"

namespace rssm {
namespace gdn {
namespace mmaverify {
using mmarows::kKT;
using mmarows::kN;
constexpr int kCtaThreads = 256;
constexpr int kUBytes = kSplitMaxRecords * kSplitRows * 2;  // [32 records][8 rows] fp16 u_j block
constexpr int kSubBytes = 16 * kSplitRows * 4;               // [16 vectors][8 rows] fp32 E, aliases the u_j block
static_assert(kSubBytes <= kUBytes, "the substitution block reuses the u_j block");
static_assert(kSplitRows == mmarows::kRows, "items of 8 rows");
// The instances whose flush items stage their fold weights with their keys (foldmma::stageFoldChunk): MAXT = 8 only
// (gdnSplitVerifyMmaKernel's kStageW says why).
template <int MAXT>
constexpr bool kStagesFoldWeights = MAXT > 4;
// MNS (MAXT = 8): a non-flush item's solve matrices M and N (rows s < MAXT, MAXT fp32 values each), staged per warp
template <int MAXT>
__host__ __device__ constexpr int mnBytes() { return 2 * MAXT * MAXT * 4; }
template <typename ST, int MAXT, bool MNS = false, bool KEYB = false>
__host__ __device__ constexpr int warpBytes() {
    return KEYB ? 2 * mmarows::SmemRows<ST>::kBufBytes + kUBytes + foldmma::kBBytes + foldmma::kFwBytes
                : 2 * mmarows::SmemRows<ST>::kBufBytes + kUBytes + (kStagesFoldWeights<MAXT> ? foldmma::kFwBytes : 0) +
                      (MNS ? mnBytes<MAXT>() : 0);
}
// KEYB (forty-fourth session; the default at T > 4): the fold's key chunk in a buffer of its own after the u_j block,
// its fold weights after it; the solve matrices (MNS) of a non-flush item share the key buffer (only flush items stage
// keys, and the next item's matrices are staged after this item's fold).
static_assert(mnBytes<8>() <= foldmma::kBBytes, "MNS rows fit the key buffer");

// Four values of a row of the drafts' solve matrices: MNS and a non-flush item, from the warp's staged copy; else from the
// head record.
template <bool MNS>
__device__ __forceinline__ float4 mnRow(bool flushItem, const float* staged, const float* head) {
    if constexpr (MNS) {
        if (!flushItem) return *reinterpret_cast<const float4*>(staged);
    }
    return __ldg(reinterpret_cast<const float4*>(head));
}

// MNS: rows s < T of the drafts' solve matrices M and N of item c's head record (workspace words hrOff(c) + mnOff: M
// at + 8 s, N at + 64 + 8 s) into `dst` ([M rows | N rows] x MAXT fp32) by cp.async, one 16-byte piece per lane, then
// one commit group. A function rather than a lambda in the kernel: such a lambda changed the generated code of
// instances that never call it.
template <int MAXT>
__device__ __forceinline__ void stageSolveRows(float* dst, const float* ws, stream::ItemCursor c, int HV, int RW,
                                               int mnOff, int T, int lane) {
    static_assert(mnBytes<MAXT>() == 32 * 16, "one 16-byte piece per lane");
    const float* mn = ws + ((c.b * HV + c.head) * RW + mnOff);  // 32-bit: MNS runs under LEAN32's rule
    const int mtx = lane >> 4, s = (lane >> 1) & 7, half = lane & 1;
    if (s < T) async::copy16(dst + mtx * MAXT * MAXT + s * MAXT + 4 * half, mn + mtx * 64 + s * 8 + 4 * half);
    async::commit();
}

// fp16 pair (lo, hi) as two fp32 values (exact; fp16 has TF32's 10 mantissa bits, so the TF32 operand is exact too).
__device__ __forceinline__ float2 halfPair(uint32_t v) { return __half22float2(*reinterpret_cast<const __half2*>(&v)); }
}  // namespace mmaverify

// Launcher rules (gdn_split.cu, useVerifyMma): speculative mode, K = 128, V % 8 == 0, bf16 activations and fp16 u,
// fp32 / fp16 / bf16 checkpoints with 16-byte aligned rows (16-bit rows: window <= 16, one chunk of records to fold),
// q / k with 4-byte aligned pairs, no skip_flush_rows. Items (row b, value head, 8 rows) are grid-strided over the
// warps and walked without divisions (stream::ItemWalker). Each item's checkpoint rows are staged through shared
// memory with the next item's rows in flight (cp.async into the warp's other row buffer); a flush item stages its raw
// keys k_j there instead and issues the next item's rows after its fold. The next item's slot and head-record
// cursors are loaded one item ahead, the slot index three. Shared memory warpBytes<ST>() per warp (9.2 KB): up to 3
// CTAs of 8 warps per SM. MAXT <= 4: the vectors fit rows 0..7 of the M tile (rows g + 8 are zero).
// MINB: CTAs per SM the registers are capped for (3: 80 registers; 2: 128). HOISTB (MAXT > 4): the A fragments of
// vector rows g + 8 loaded with the other per-item loads instead of inside the product loop. UPF: the next item's
// u_j block (one 16-byte ring load per committed-record lane) loaded during this item, after its products, instead of
// at the item's start ahead of the shared-memory store and ldmatrix (the Mamba-2 readout's x_j prefetch); 4 more
// registers. Committed records' u_j are never written by this kernel (it appends the drafts' u behind them). The
// launcher takes it for T <= 4 (gdn_split.cu).
// LEAN32 (thirty-sixth session; the launcher's default for fp32 rows, RSSM_GDN_VERIFY_LEAN32=0 turns it off; the
// standard readout's FDIV + OFF32 carried over): the item's offsets into k / q / v / o, ring u and the workspace in
// 32-bit arithmetic (the launcher's OFF32 rule, as the standard readout's), the key head by a shift (the launcher
// requires a power-of-two number of value heads per key head), and the ring's key address formed on flush items only.
// The source counters of the T = 4 instance (thirty-fifth session) put the key head's division at 31 of ~800 warp
// instructions per item and the 64-bit offset products of the item's loads at ~15%. Same loads, same values: bit-identical results.
// (REFILL, a one-chunk flush item refilling its own row buffer with the next item's rows tile by tile during its fold,
// measured 0.2-6.4% slower in the thirty-ninth session and was removed in the fortieth; docs/kernels-gdn.md.)
// MNS (thirty-seventh session; the default since the thirty-ninth, RSSM_GDN_VERIFY_MNS=0 turns it off; the LEAN32
// fp32 instance at T > 4): a non-flush item's solve matrices M and N (head record) are copied into the warp's shared
// memory by cp.async at the end of the item before, in their own commit group (waited for with the item's rows), and
// the solve reads them from there instead of by __ldg right before use (9% of the T = 4 readout's stall samples in the
// twenty-ninth session). That session measured it at every T (4796fb2): T = 8 0-3.5% faster, T = 4 11-16% slower (its
// extra shared memory left 2 instead of 3 CTAs per SM); the T > 4 instance is held to 2 CTAs per SM by its registers
// anyway. Flush items keep the __ldg. mnBytes<8>() = 512 more bytes of shared memory per warp. Same values.
// KEYB (forty-fourth session; the default, RSSM_GDN_VERIFY_KEYB=0 off; the MNS instance only): a flush item stages its
// key chunk into a third buffer of the warp (warpBytes<..., KEYB>: 3.8 KB more per warp, still 2 CTAs per SM) and
// issues the next item's rows at its start, as a non-flush item does, instead of after its fold: the fold no longer
// sits between the rows' issue and their use. Groups of a flush item: its rows (issued by the item before), the key
// chunk, the next item's rows; its rows are waited for with two groups in flight, the keys with one. Same arithmetic,
// same values.
// Side by side on an H100: T = 8 all-accepted steps 1.3-1.7% faster, the rest within 0.4% (docs/kernels-gdn.md).
// HRPF (forty-fifth session; the default, RSSM_GDN_VERIFY_HRPF=0 turns it off; gdn_split.cu): after its products an
// item issues one prefetch.global.L1 per line of the next item's head-record words that the next item loads by __ldg
// at its start (mmarows::prefetchHeadRecordL1, common/prefetch_l1.cuh): the committed-record coefficients, whose L2
// round trip was the largest wait of the T = 4 readout (15% of its stall samples, twenty-ninth session), the draft
// scales and, where they are not staged by cp.async, the fold weights and the solve matrices. Same loads, same
// values. Side by side on the H200: T = 4 steps 1.4-3.4% faster, T = 8 0.1-1.5% (docs/kernels-gdn.md "Forty-fifth
// session"); the same prefetch in the Mamba-2 tensor-core readout measured 0.5-2.0% slower at T = 4 / 8 and was
// removed.
template <typename ST, int MAXT, int MINB, bool HOISTB, bool UPF = false, bool LEAN32 = false, bool MNS = false,
          bool KEYB = false, bool HRPF = false>
__global__ void __launch_bounds__(mmaverify::kCtaThreads, MINB) gdnSplitVerifyMmaKernel(const GdnReplayParams p) {
    using namespace mmaverify;
    using Rows = mmarows::SmemRows<ST>;
    static_assert(!MNS || (MAXT > 4 && LEAN32), "MNS: the LEAN32 T > 4 instance");
    static_assert(!KEYB || MNS, "KEYB: the MNS instance");
    static_assert(!HRPF || LEAN32, "HRPF: the LEAN32 instances");
    constexpr bool kTall = MAXT > 4;  // vectors in rows g + 8 of the M tile
    // A flush item stages its fold weights with its keys in one cp.async group and reads them after the wait
    // (foldmma::stageFoldChunk), MAXT = 8 only: side by side on the H200 (thirty-fifth session) the T = 8 steps with
    // flushes were 2-4% faster, the T = 4 ones (MAXT = 4 instance) 1-3% slower, also where few items flush.
    constexpr bool kStageW = kStagesFoldWeights<MAXT>;
    extern __shared__ __align__(16) unsigned char smemGdnVerifyMma[];
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    unsigned char* wsm = smemGdnVerifyMma + (threadIdx.x >> 5) * warpBytes<ST, MAXT, MNS, KEYB>();
    auto sRows = [&](int i) { return reinterpret_cast<ST*>(wsm + i * Rows::kBufBytes); };
    uint16_t* sU = reinterpret_cast<uint16_t*>(wsm + 2 * Rows::kBufBytes);  // [32 records][8 rows] fp16
    float* sSub = reinterpret_cast<float*>(sU);  // [16 vectors][8 rows]: once the u_j fragments are in registers
    // (kStageW) a fold chunk's weights; a lambda so that the four-token instances form no address for it (their code
    // stays the measured one, instruction for instruction)
    auto sFw = [&]() {
        return reinterpret_cast<float*>(wsm + 2 * Rows::kBufBytes + kUBytes + (KEYB ? foldmma::kBBytes : 0));
    };
    // MNS: [M rows | N rows] x MAXT fp32, after the fold weights (KEYB: at the start of the key buffer)
    auto sMn = [&]() {
        return reinterpret_cast<float*>(wsm + 2 * Rows::kBufBytes + kUBytes +
                                        (KEYB ? 0 : kStageW ? foldmma::kFwBytes : 0));
    };
    const int HV = p.num_v_heads, T = p.num_tokens, C = p.ring_capacity;
    const int group = HV / p.num_heads;
    const int groupShift = LEAN32 ? __ffs(group) - 1 : 0;  // LEAN32: group is a power of two (launcher)
    const int nrb = p.head_v / kSplitRows;
    const unsigned items = (unsigned)p.batch * HV * nrb;  // < 2^31 (launcher)
    const int RW = splitRecordWordsGdn(p.window, T), RM = p.window + T;
    const unsigned nw = gridDim.x * (kCtaThreads / 32);
    const uint16_t* ringU = static_cast<const uint16_t*>(p.ring_u);
    const uint16_t* ringK = static_cast<const uint16_t*>(p.ring_k);
    const float* ws = static_cast<const float*>(p.workspace);
    auto validSlot = [&](int sl) { return (sl < 0 || sl >= p.num_slots) ? -1 : sl; };
    auto slotOf = [&](int b) { return validSlot(p.state_batch_indices[b]); };
    auto rowsOf = [&](stream::ItemCursor c, int slot) {  // the item's first checkpoint row
        return static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot + (int64_t)c.head * p.state_stride_head +
               (int64_t)(c.blk * kSplitRows) * p.state_stride_v;
    };
    auto metaOf = [&](stream::ItemCursor c) {
        if constexpr (LEAN32) return *reinterpret_cast<const int4*>(ws + ((c.b * HV + c.head) * RW + 8));
        else return *reinterpret_cast<const int4*>(ws + ((size_t)c.b * HV + c.head) * RW + 8);
    };
    // Vector row m of the M tile for row b, key head hk: the raw key (m < T) or query (m - T < T) of a draft, at this
    // lane's column quad 4q (uint2: 4 bf16; + 4 per 16-column block).
    auto vectorRow = [&](int m, int b, int hk) -> const uint2* {
        if constexpr (LEAN32) {
            if (m < T)
                return reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.k) +
                                                      offset32(b, p.k_stride_b, m, p.k_stride_t, hk, p.k_stride_h) +
                                                      4 * q);
            if (m < 2 * T)
                return reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.q) +
                                                      offset32(b, p.q_stride_b, m - T, p.q_stride_t, hk, p.q_stride_h) +
                                                      4 * q);
            return nullptr;
        } else {
            if (m < T)
                return reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.k) + (int64_t)b * p.k_stride_b +
                                                      (int64_t)m * p.k_stride_t + (int64_t)hk * p.k_stride_h + 4 * q);
            if (m < 2 * T)
                return reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.q) + (int64_t)b * p.q_stride_b +
                                                      (int64_t)(m - T) * p.q_stride_t + (int64_t)hk * p.q_stride_h +
                                                      4 * q);
            return nullptr;
        }
    };
    const int CS = splitMmaCoefStrideGdn(p.window), blkOff = splitMmaBlockOffsetGdn(p.window, T);
    unsigned it = blockIdx.x * (kCtaThreads / 32) + (threadIdx.x >> 5);
    if (it >= items) return;
    const stream::ItemWalker walk(HV, nrb, nw);
    stream::ItemCursor cC = walk.at(it), cN = walk.next(cC);
    // prologue: the first item's rows (the prep kernel never writes the checkpoint), then wait for the prep grid
    int slotC = slotOf(cC.b);
    if (slotC >= 0) Rows::issue(sRows(0), rowsOf(cC, slotC), p.state_stride_v, lane);
    async::commit();
    int slotN = it + nw < items ? slotOf(cN.b) : -1;
    int rawNN = it + 2 * nw < items ? p.state_batch_indices[walk.next(cN).b] : -1;  // validated one item later
    pdlWaitPrimary();
    int4 metaC = slotC >= 0 ? metaOf(cC) : make_int4(0, -1, 0, 0);
    // MNS: a non-flush item's M and N rows into the warp's copy (mmaverify::stageSolveRows; no group for flush,
    // padding and invalid items), issued at the end of the item before (the first item: here, after its rows' group),
    // so the item's waitAllButOne covers them
    if constexpr (MNS) {
        if (slotC >= 0 && metaC.y == 0) stageSolveRows<MAXT>(sMn(), ws, cC, HV, RW, blkOff + 2 * T * CS, T, lane);
    }
    // u_j[vw .. vw + 7] of committed record j = lane of item c (o = m.z, h = m.w; nothing for padding / invalid rows)
    auto loadU = [&](stream::ItemCursor c, int sl, int4 m) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (sl >= 0 && m.y >= 0 && lane < m.w) {
            int rr = m.z + lane;
            rr = rr >= C ? rr - C : rr;
            if constexpr (LEAN32)
                v = *reinterpret_cast<const uint4*>(ringU +
                                                    offset32(sl, p.ring_u_stride_slot, c.head, p.ring_u_stride_head, rr,
                                                             p.ring_u_stride_rec) +
                                                    c.blk * kSplitRows);
            else
                v = *reinterpret_cast<const uint4*>(ringU + (int64_t)sl * p.ring_u_stride_slot +
                                                    (int64_t)c.head * p.ring_u_stride_head +
                                                    (int64_t)rr * p.ring_u_stride_rec + c.blk * kSplitRows);
        }
        return v;
    };
    uint4 uqNext = make_uint4(0u, 0u, 0u, 0u);
    if constexpr (UPF) uqNext = loadU(cC, slotC, metaC);
    for (int buf = 0; it < items; it += nw, buf ^= 1) {
        const int slot = slotC;
        const int4 meta = metaC;
        const int nf = meta.y, o = meta.z, h = meta.w;
        const int b = cC.b, hv = cC.head, vw = cC.blk * kSplitRows;
        const int hk = LEAN32 ? hv >> groupShift : hv / group;
        // the key head's ring keys (raw k_j); LEAN32 forms the address where a flush item uses it (ringKeys), not for
        // every item (the expression is written twice so that the instances without LEAN32 keep their measured code:
        // ringKh through ringKeys() reordered their PTX)
        const uint16_t* ringKh =
            LEAN32 ? nullptr
                   : ringK + (int64_t)(slot < 0 ? 0 : slot) * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
        auto ringKeys = [&]() {
            return ringK + (int64_t)(slot < 0 ? 0 : slot) * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
        };
        // next item: rows in flight (an empty group when there are none), cursors one item ahead. A flush item first
        // stages its raw keys into the other buffer instead; the next item's rows follow its fold.
        const bool flushItem = slot >= 0 && nf > 0;
        uint16_t* sB = reinterpret_cast<uint16_t*>(sRows(buf ^ 1));
        if constexpr (KEYB) sB = reinterpret_cast<uint16_t*>(wsm + 2 * Rows::kBufBytes + kUBytes);  // the key buffer
        if (flushItem) {
            if constexpr (kStageW)
                foldmma::stageFoldChunk(sB, sFw(), LEAN32 ? ringKeys() : ringKh,
                                        ws + ((size_t)b * HV + hv) * RW + kSplitCoef + 2 * T * RM, 0, nf, o, C,
                                        (int)p.ring_k_stride_rec, lane);
            else
                foldmma::stageBRows(sB, LEAN32 ? ringKeys() : ringKh, 0, nf, o, C, p.ring_k_stride_rec, lane);
            if constexpr (KEYB) {  // the next item's rows now, in their own group behind the key chunk's
                if (slotN >= 0) Rows::issue(sRows(buf ^ 1), rowsOf(cN, slotN), p.state_stride_v, lane);
                async::commit();
            }
        }
        else if (slotN >= 0) Rows::issue(sRows(buf ^ 1), rowsOf(cN, slotN), p.state_stride_v, lane);
        if (!flushItem) async::commit();
        const int4 metaN = slotN >= 0 ? metaOf(cN) : make_int4(0, -1, 0, 0);
        const stream::ItemCursor cNN = walk.next(cN);
        const int slotNN = validSlot(rawNN);
        rawNN = it + 3 * nw < items ? p.state_batch_indices[walk.next(cNN).b] : -1;

        bool uIssued = false;  // UPF: the next item's u_j loads
        if (slot >= 0 && nf >= 0) {  // else padding row / invalid cursors: nothing written
            const float* hr = LEAN32 ? ws + (b * HV + hv) * RW : ws + ((size_t)b * HV + hv) * RW;
            const int64_t ruBase = LEAN32 ? offset32(slot, p.ring_u_stride_slot, hv, p.ring_u_stride_head, 0, 0)
                                          : (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;
            uint4 uq;  // u_j[vw .. vw + 7] of committed record j = lane
            if constexpr (UPF) uq = uqNext;
            else uq = loadU(cC, slot, meta);
            // The product's K order: k-tile 2k / 2k + 1 of this lane are columns 16k + 4q, + 1 / 16k + 4q + 2, + 3 (a
            // contiguous quad of the state row and of the vectors: one load each; the fold below uses the layout of
            // common/mma_rows.cuh). A fragments of vector rows g (and g + 8):
            const uint2* va = vectorRow(g, b, hk);
            uint2 aw[kKT];
#pragma unroll
            for (int k = 0; k < kKT; ++k) aw[k] = va ? __ldg(va + 4 * k) : make_uint2(0u, 0u);
            const uint2* vb = kTall ? vectorRow(g + 8, b, hk) : nullptr;
            uint2 bw[HOISTB ? kKT : 1];
            if constexpr (HOISTB) {
#pragma unroll
                for (int k = 0; k < kKT; ++k) bw[k] = vb ? __ldg(vb + 4 * k) : make_uint2(0u, 0u);
            }
            // v_g of value rows vw + 2q, + 1 (lanes of the key rows g < T: w_g = v_g - X0_g is formed there)
            uint32_t vpair = 0u;
            if (g < T)
                vpair = __ldg(reinterpret_cast<const uint32_t*>(
                    static_cast<const uint16_t*>(p.v) +
                    (LEAN32 ? offset32(b, p.v_stride_b, g, p.v_stride_t, hv, p.v_stride_h)
                            : (int64_t)b * p.v_stride_b + (int64_t)g * p.v_stride_t + (int64_t)hv * p.v_stride_h) +
                    vw + 2 * q));
            // committed-record coefficients of vector rows g (and g + 8), records 8c + 2q, + 1 (zero from h on: the
            // head record's block, rows of CS words)
            const float* blk = hr + blkOff;
            const bool rowA = g < 2 * T, rowB = kTall && g + 8 < 2 * T;
            float2 cfA[4], cfB[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const bool in = 8 * c < h;  // h <= CS
                cfA[c] = (rowA && in) ? __ldg(reinterpret_cast<const float2*>(blk + g * CS + 8 * c + 2 * q))
                                      : make_float2(0.f, 0.f);
                cfB[c] = (rowB && in) ? __ldg(reinterpret_cast<const float2*>(blk + (g + 8) * CS + 8 * c + 2 * q))
                                      : make_float2(0.f, 0.f);
            }
            const float scA = g < T ? __ldg(hr + g) : rowA ? __ldg(hr + 16 + g - T) : 0.f;
            const float scB = !rowB ? 0.f : g + 8 < T ? __ldg(hr + g + 8) : __ldg(hr + 16 + g + 8 - T);
            *reinterpret_cast<uint4*>(sU + lane * kSplitRows) = uq;
            __syncwarp();
            uint32_t ub[4];  // ub[c]: u_{8c+2q}[g], u_{8c+2q+1}[g] (fp16 pair)
            foldmma::ldmatrixX4Trans(ub, sU + lane * kSplitRows);
            float accR[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                if (8 * c >= h) break;
                const float2 u2 = halfPair(ub[c]);
                mmarows::mmaTf32Full(accR, mmarows::tf32(cfA[c].x), mmarows::tf32(cfB[c].x), mmarows::tf32(cfA[c].y),
                                     mmarows::tf32(cfB[c].y), __float_as_uint(u2.x), __float_as_uint(u2.y));
            }
            // this item's rows (the next item's rows / the key chunk may be in flight; KEYB flush items: both)
            if constexpr (KEYB) {
                if (flushItem) async::waitGroup<2>();
                else async::waitAllButOne();
            } else {
                async::waitAllButOne();
            }
            __syncwarp();  // also: every lane's u_j fragments are in registers (sSub may be written)
            const ST* rowG = sRows(buf) + g * Rows::kStride;
            float accE[4] = {0.f, 0.f, 0.f, 0.f}, accO[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int k = 0; k < kKT; ++k) {
                const float4 sv = Rows::readQuad(rowG, k, q);
                const uint2 a = aw[k];
                if constexpr (kTall) {
                    uint2 bq;
                    if constexpr (HOISTB) bq = bw[k];
                    else bq = vb ? __ldg(vb + 4 * k) : make_uint2(0u, 0u);
                    mmarows::mmaTf32Full(accE, a.x << 16, bq.x << 16, a.x & 0xffff0000u, bq.x & 0xffff0000u,
                                         mmarows::tf32(sv.x), mmarows::tf32(sv.y));
                    mmarows::mmaTf32Full(accO, a.y << 16, bq.y << 16, a.y & 0xffff0000u, bq.y & 0xffff0000u,
                                         mmarows::tf32(sv.z), mmarows::tf32(sv.w));
                } else {
                    mmarows::mmaTf32(accE, a.x << 16, a.x & 0xffff0000u, mmarows::tf32(sv.x), mmarows::tf32(sv.y));
                    mmarows::mmaTf32(accO, a.y << 16, a.y & 0xffff0000u, mmarows::tf32(sv.z), mmarows::tf32(sv.w));
                }
            }
            if constexpr (UPF) {
                uqNext = loadU(cN, slotN, metaN);
                uIssued = true;
            }
            if constexpr (HRPF) {  // the next item's head-record lines into L1 (MNS: its solve matrices are staged)
                if (slotN >= 0 && metaN.y >= 0)  // (32-bit offset: HRPF runs under LEAN32's rule)
                    mmarows::prefetchHeadRecordL1(ws + (cN.b * HV + cN.head) * RW,
                                                  MNS ? blkOff : kSplitCoef + 2 * T * RM,
                                                  MNS ? blkOff + 2 * T * CS : RW, lane);
            }
            // E rows g (and g + 8), value rows 2q, 2q + 1: key rows g < T hold w_g = v_g - X0_g, query rows Y0
            float e0 = fmaf(scA, accE[0] + accO[0], accR[0]), e1 = fmaf(scA, accE[1] + accO[1], accR[1]);
            if (g < T) {
                e0 = mmarows::bf16Lo(vpair) - e0;
                e1 = mmarows::bf16Hi(vpair) - e1;
            }
            *reinterpret_cast<float2*>(sSub + g * kSplitRows + 2 * q) = make_float2(e0, e1);
            if constexpr (kTall)  // rows g + 8 >= T: queries
                *reinterpret_cast<float2*>(sSub + (g + 8) * kSplitRows + 2 * q) =
                    make_float2(fmaf(scB, accE[2] + accO[2], accR[2]), fmaf(scB, accE[3] + accO[3], accR[3]));
            __syncwarp();
            {  // the drafts' solve (head record M, N): lane (value row n = lane % 8, token s = lane / 8, + 4)
                const int n = lane & 7, row = vw + n;
                const float* Mb = blk + 2 * T * CS;
#pragma unroll
                for (int s0 = 0; s0 < MAXT; s0 += 4) {
                    const int s = s0 + (lane >> 3);
                    if (s < T) {
                        // MNS: a non-flush item's rows from the warp's copy (waited for with this item's rows); other
                        // instances never read `sm` (it points into the head record only to stay a valid pointer)
                        const float* sm = Mb;
                        if constexpr (MNS) sm = sMn() + s * MAXT;
                        const float4 m0 = mnRow<MNS>(flushItem, sm, Mb + s * 8);
                        const float4 n0 = mnRow<MNS>(flushItem, sm + MAXT * MAXT, Mb + 64 + s * 8);
                        float4 m1 = make_float4(0.f, 0.f, 0.f, 0.f), n1 = m1;
                        if constexpr (MAXT > 4) {
                            m1 = mnRow<MNS>(flushItem, sm + 4, Mb + s * 8 + 4);
                            n1 = mnRow<MNS>(flushItem, sm + MAXT * MAXT + 4, Mb + 64 + s * 8 + 4);
                        }
                        const float mr[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
                        const float nr[8] = {n0.x, n0.y, n0.z, n0.w, n1.x, n1.y, n1.z, n1.w};
                        float u = 0.f, y = sSub[(T + s) * kSplitRows + n];
#pragma unroll
                        for (int i = 0; i < MAXT; ++i) {
                            if (i < T) {  // M[s][i] = N[s][i] = 0 for i > s
                                const float w = sSub[i * kSplitRows + n];
                                u = fmaf(mr[i], w, u);
                                y = fmaf(nr[i], w, y);
                            }
                        }
                        int rr = o + h + s;
                        rr = rr >= C ? rr - C : rr;
                        if constexpr (LEAN32) {
                            static_cast<__nv_bfloat16*>(
                                p.o)[offset32(b, p.o_stride_b, s, p.o_stride_t, hv, p.o_stride_h) + row] =
                                __float2bfloat16_rn(y);
                            static_cast<__half*>(p.ring_u)[(int)ruBase + rr * (int)p.ring_u_stride_rec + row] =
                                __float2half_rn(u);
                        } else {
                            static_cast<__nv_bfloat16*>(p.o)[(int64_t)b * p.o_stride_b + (int64_t)s * p.o_stride_t +
                                                             (int64_t)hv * p.o_stride_h + row] = __float2bfloat16_rn(y);
                            static_cast<__half*>(p.ring_u)[ruBase + (int64_t)rr * p.ring_u_stride_rec + row] =
                                __float2half_rn(u);
                        }
                    }
                }
            }
            // The fold repeats the Mamba-2 readout's (mamba2_split_mma_kernel.cuh) with fp16 u weights and the raw keys
            // as B rows. One shared function (tried in the tenth session: a foldStagedRows in common/mma_rows.cuh with
            // the second chunk's weights and staging as a callback) changed the generated code of both measured
            // kernels, which that session could no longer re-test on the GPU; merge it with a GPU run of both suites.
            if (nf > 0) {  // warp-uniform: fold the committed records into the rows, store them
                const float gf = __int_as_float(meta.x);
                const float* fwp = hr + kSplitCoef + 2 * T * RM;
                // weight terms of 16-record chunk c: W[row g][j] = fw_j u_j[g], records 16c + 2q, + 1, 16c + 8 + 2q, + 1
                // (kStageW: fw_j staged with the chunk's keys, read after the wait that covers them, zero from nf on)
                auto chunkWeights = [&](uint32_t (&w)[3][4], int c) {
                    float fw[4];
                    if constexpr (kStageW) {
                        foldmma::stagedChunkWeights(fw, sFw(), q);
                    } else {
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int j = foldmma::kChunk * c + (i >> 1) * 8 + 2 * q + (i & 1);
                            fw[i] = j < nf ? __ldg(fwp + j) : 0.f;
                        }
                    }
                    mmarows::foldWeightTerms(w, [&](int i) {
                        const float2 u2 = halfPair(ub[2 * c + (i >> 1)]);
                        return fw[i] * ((i & 1) ? u2.y : u2.x);
                    });
                };
                uint32_t a[3][4];
                if constexpr (!kStageW) chunkWeights(a, 0);
                ST* ckRow = rowsOf(cC, slot) + (int64_t)g * p.state_stride_v;
                if constexpr (KEYB) async::waitAllButOne();  // the key chunk and its weights (not the next rows)
                else async::waitAll();                        // the key chunk (kStageW: and its weights)
                __syncwarp();
                if constexpr (kStageW) chunkWeights(a, 0);
                if (nf <= foldmma::kChunk) {  // one chunk (window <= 16): column tile by column tile
#pragma unroll 2
                    for (int k = 0; k < kKT; ++k) {
                        float v[4];
                        Rows::read(v, rowG, k, q);
#pragma unroll
                        for (int e = 0; e < 4; ++e) v[e] *= gf;
                        mmarows::foldTile(v, a, sB, k, lane);
                        mmarows::LaneRow<ST>::storeTile(v, ckRow, k, q);
                    }
                } else if constexpr (sizeof(ST) == 4) {  // two chunks: the first chunk's result back in place
                    float* rowW = reinterpret_cast<float*>(sRows(buf)) + g * Rows::kStride;
#pragma unroll 2
                    for (int k = 0; k < kKT; ++k) {
                        float v[4];
                        Rows::read(v, rowG, k, q);
#pragma unroll
                        for (int e = 0; e < 4; ++e) v[e] *= gf;
                        mmarows::foldTile(v, a, sB, k, lane);
                        *reinterpret_cast<float2*>(rowW + 16 * k + 2 * q) = make_float2(v[0], v[1]);
                        *reinterpret_cast<float2*>(rowW + 16 * k + 8 + 2 * q) = make_float2(v[2], v[3]);
                    }
                    if constexpr (kStageW) {
                        __syncwarp();  // every lane is done with the first chunk's keys and weights
                        foldmma::stageFoldChunk(sB, sFw(), LEAN32 ? ringKeys() : ringKh, fwp, foldmma::kChunk, nf, o, C,
                                                (int)p.ring_k_stride_rec, lane);
                        async::waitAll();
                        __syncwarp();
                        chunkWeights(a, 1);
                    } else {
                        chunkWeights(a, 1);
                        __syncwarp();  // every lane is done with the first chunk's keys
                        foldmma::stageBRows(sB, LEAN32 ? ringKeys() : ringKh, foldmma::kChunk, nf, o, C,
                                            p.ring_k_stride_rec, lane);
                        async::waitAll();
                        __syncwarp();
                    }
#pragma unroll 2
                    for (int k = 0; k < kKT; ++k) {
                        float v[4];
                        Rows::read(v, rowG, k, q);
                        mmarows::foldTile(v, a, sB, k, lane);
                        mmarows::LaneRow<ST>::storeTile(v, ckRow, k, q);
                    }
                } else {
                    __trap();  // 16-bit rows with more than 16 records to fold: the launcher runs the CUDA-core readout
                }
            }
        }
        if constexpr (UPF) {
            if (!uIssued) uqNext = loadU(cN, slotN, metaN);
        }
        if constexpr (!KEYB) {
            if (flushItem) {  // the other buffer is free again: the next item's rows
                __syncwarp();
                if (slotN >= 0) Rows::issue(sRows(buf ^ 1), rowsOf(cN, slotN), p.state_stride_v, lane);
                async::commit();
            }
        }
        if constexpr (MNS) {
            __syncwarp();  // every lane has read this item's M and N
            if (slotN >= 0 && metaN.y == 0) stageSolveRows<MAXT>(sMn(), ws, cN, HV, RW, blkOff + 2 * T * CS, T, lane);
        }
        __syncwarp();  // this item's buffers are rewritten by the item after next / the next item's u_j block
        cC = cN;
        cN = cNN;
        slotC = slotN;
        slotN = slotNN;
        metaC = metaN;
    }
    async::waitAll();
}

}  // namespace gdn
}  // namespace rssm
