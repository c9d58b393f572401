// ReplaySSM Mamba-2 split readout on tensor cores (variant 4, readout "mma"; dstate 128, bf16 activations,
// fp32 / fp16 / bf16 checkpoints). Same items (row b, head, 8 state rows), head records, prep kernel, skip rules
// and results as mamba2SplitReadoutKernel (mamba2_split_kernel.cuh); the arithmetic of an item is three
// mma.sync products with fp32 accumulation:
//
//   Y[tokens x rows]  = gamma_s (C[tokens x N] . S^T[N x rows])          m16n8k8 TF32: S rounded to TF32
//                     + coef[tokens x records] . X[records x rows]       m16n8k8 TF32: coef rounded, x exact
//   flush: S[rows x N] <- gfold S + W[rows x records] . B[records x N]   m16n8k16 bf16, W = fw_j x_j[row] as three
//                                                                          bf16 terms (fp32-accurate: the state)
//
// All T <= 8 tokens of a step are one M tile, so the readout's arithmetic does not grow with T: the CUDA-core
// readout pays a dot product and a warp reduce-scatter per token (~70 us per extra token at B = 256 on Super,
// eighth session); FlashInfer 0.7.4's checkpointing_ssu computes its outputs the same matrix way
// (docs/analysis-flashinfer-cssu.md), with the state narrowed to bf16 (2.6e-3 relative output error). A TF32 state
// operand measured 3.3e-4 on the CPU (scripts/mma_operand_precision.py), below the bf16 rounding of the output
// (2^-9 = 2e-3), and it costs one cvt per value (a bf16 hi + lo split cost six instructions per pair, and the
// readout was issue-bound: ninth session, docs/kernels-mamba2.md). The readout error never enters the state.
//
// State register layout: lane (g = lane / 4, q = lane % 4) holds row g of the item, columns 16k + 2q, 16k + 2q + 1,
// 16k + 8 + 2q, 16k + 9 + 2q for k < 8. Per 8-column tile n that is the accumulator (row g of the M = 16 tile,
// columns 2q, 2q + 1) of the fold, and the B fragment of the readout's TF32 k-tile n with its K order permuted
// (k = q is column 8n + 2q, k = q + 4 is 8n + 2q + 1; C's A fragment uses the same order). So the two products
// share the registers without shuffles or shared-memory transposes (rows g + 8 of the M tiles are zero). Shared
// memory per warp: the x_j block of each record ([32 records][8 rows] bf16, read with ldmatrix.trans) and one
// 16-record chunk of B_j rows for the fold (ldmatrix.trans again).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <type_traits>
#include "common/fold_mma.cuh"
#include "common/mma_rows.cuh"
#include "common/pdl.h"
#include "mamba2/mamba2_split_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace mmareadout {
using mmarows::kKT;
using mmarows::kN;                          // dstate
constexpr int kChunk = foldmma::kChunk;     // records per fold k step
constexpr int kBStride = foldmma::kBStride;  // staged B row stride (bf16): ldmatrix rows 16 bytes apart in the banks
constexpr int kBBytes = kChunk * kBStride * 2;
constexpr int kXBytes = kSplitMaxRecords * kSplitRows * 2;
constexpr int kCtaThreads = kSplitReadoutThreads;
static_assert(kSplitRows == mmarows::kRows, "items of 8 rows");

using foldmma::ldmatrixX4Trans;
using foldmma::packBf16;
using mmarows::bf16Hi;
using mmarows::bf16Lo;
using mmarows::foldTile;
using mmarows::LaneRow;
using mmarows::LaneRow16;
using mmarows::mmaTf32;
using mmarows::SmemRows;
using mmarows::tf32;

constexpr int kFwBytes = foldmma::kFwBytes;  // a fold chunk's weights

// A fold chunk (B_j rows and fold weights) into a warp's shared memory (common/fold_mma.cuh).
using foldmma::stageFoldChunk;

// The fold's A fragments (rows x records) of one 16-record chunk: W[row g][j] = fw_j x_j[row g] for the records
// c0 + 2q, + 1 and c0 + 8 + 2q, + 1 (common/mma_rows.cuh: three bf16 terms each). xr0 / xr1: those records'
// x_j[row g] (packed bf16, the readout's B fragment); fw: their fold weights (0 past nf).
__device__ __forceinline__ void foldWeights(uint32_t (&a)[3][4], uint32_t xr0, uint32_t xr1, const float (&fw)[4]) {
    mmarows::foldWeightTerms(a, [&](int i) {
        const uint32_t xr = i < 2 ? xr0 : xr1;
        return fw[i] * ((i & 1) ? bf16Hi(xr) : bf16Lo(xr));
    });
}

template <typename ST>
__host__ __device__ constexpr int stagedWarpBytes() { return 2 * SmemRows<ST>::kBufBytes + kXBytes + kFwBytes; }


}  // namespace mmareadout

// Launcher rules (mamba2_launch.cu): dstate 128, bf16 activations, headdim % 8 == 0, records per step <= 32,
// fp32 / fp16 / bf16 checkpoints with 16-byte aligned rows (16-bit rows: at most 16 records to fold), any mode and
// T <= 8. Items (row b, head, 8 rows) are grid-strided over the warps and walked without divisions
// (stream::ItemWalker). Each item's checkpoint rows are staged through shared memory, the next item's rows in flight
// (cp.async into the warp's other row buffer) while the current one is computed: a warp keeps up to 8 KB (fp32) of
// state in flight without holding it in registers (a version with the rows in registers, 128 registers and 2 CTAs per
// SM, ran 10-20% slower; ninth session). The next item's slot and head-record cursors are loaded one item ahead. A
// flush item stages its B_j rows in the other row buffer instead (and its fold weights in a 64-byte buffer, the same
// cp.async group: foldmma::stageFoldChunk) and issues the next item's rows after its fold.
// Shared memory: stagedWarpBytes<ST>() per warp (9,280 bytes), 77-80 registers: 3 CTAs of 8 warps per SM.
// CHOIST: the item's C_g loads issued with the other per-item loads (16 registers live across them; fp32 rows spill
// 16 B) instead of inside the product loop, where their latency showed as 11% of the stall samples (ninth session).
// XPF: the next item's x_j block (one 16-byte ring load per record lane) is loaded during this item, after its
// products (the next item's cursors have arrived by then), and the gate z with the item's other loads: the x_j load
// -> shared-memory store -> ldmatrix chain was 14.8% of the stall samples at the store (ninth session) and the z
// load sat between the products and the output store. 4 + 1 more registers (fp32 rows: 80, no spills, where XPF off
// spills 12-16 bytes). Default on (the launcher; RSSM_MAMBA2_MMA_XPF=0 turns it off): Super, B = 256, L = 16, side by
// side, T = 4 0-0.5% and T = 8 2.9-3.1% faster (eighteenth session, docs/kernels-mamba2.md).
// ZPF (with XPF; twenty-second session): the gate z of the lane's two rows is loaded one item ahead (beside the next
// item's x_j block; one 32-bit load and register: the launcher requires 4-byte aligned z pairs), and the item's head records (gamma, coefficients) are issued before its C_g loads.
// Nsight Compute source counters of the T = 4 and T = 8 non-flush steps (Super, B = 256; the default without ZPF) put
// 18% of the stall samples on the z pair's combine right after its loads (a DRAM round trip per item, before the
// coefficient loads were even issued) and 16% on the first coefficient use.
// (An L2 prefetch of the rows two items ahead, L2PF, measured 9% slower at T = 4 and T = 8 in the twenty-second
// session and was removed.)
// Also measured in the twenty-second session and removed: flush items prefetching the next item's rows into L2 before
// their fold (within 1%, slower), and C_g loaded one item ahead with the coefficient products after the state
// products (78 bytes of spills at the 80-register bound: 25-35% slower).
// L32 (thirty-sixth session; the launcher's default, RSSM_MAMBA2_MMA_L32=0 turns it off; the fp32 ZPF instance only):
// the item's offsets into y, z, C, the ring's x and the workspace in 32-bit arithmetic (launcher rule: every such
// offset below 2^31) and the ring's B address formed on flush items only; the GDN verify readout's LEAN32 without its
// key-head shift (Nano's 12 heads per group). Same loads, same values. (The offsets keep the item's column term inside
// the 32-bit sum, so they are written out here rather than through common/offsets32.h's offset32, which converts
// before that term: routed through it, this instance's PTX grew by ~50 instructions of 64-bit adds.) (The thirty-fourth session's LEAN, these plus
// the group by a reciprocal, 8-byte coefficient loads and a fast gate division, measured 3-6% slower.)
// (Measured in the thirty-ninth session and removed in the fortieth, docs/kernels-mamba2.md: REFILL, a one-chunk flush
// item refilling its own row buffer with the next item's rows tile by tile, 5-12% slower; GSH, the group by a shift
// for a power-of-two number of heads per group, neutral.)
// (Measured in the forty-fifth session and not kept: HRPF, the GDN verify readout's L1 prefetch of the next item's
// head-record lines after the products (common/prefetch_l1.cuh), on the L32 instance: 0.5-2.0% slower at T = 4 / 8
// on both shapes, standard steps within 0.4%, side by side on the H200; docs/kernels-mamba2.md "Forty-fifth
// session".)
template <typename ST, bool CHOIST, bool XPF, bool ZPF = false, bool L32 = false>
__global__ void __launch_bounds__(mmareadout::kCtaThreads, 3)
    mamba2SplitReadoutMmaStagedKernel(const Mamba2ReplayParams p) {
    using namespace mmareadout;
    using Rows = SmemRows<ST>;
    extern __shared__ __align__(16) unsigned char smemSplitMmaStaged[];
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    unsigned char* wsm = smemSplitMmaStaged + (threadIdx.x >> 5) * stagedWarpBytes<ST>();
    auto sRows = [&](int i) { return reinterpret_cast<ST*>(wsm + i * Rows::kBufBytes); };
    uint16_t* sX = reinterpret_cast<uint16_t*>(wsm + 2 * Rows::kBufBytes);  // [32 records][8 rows]
    float* sFw = reinterpret_cast<float*>(wsm + 2 * Rows::kBufBytes + kXBytes);  // a fold chunk's weights
    const int H = p.nheads, P = p.headdim, T = p.num_tokens, G = p.ngroups, Cap = p.ring_capacity;
    const int hpg = H / G;
    const int nrb = P / kSplitRows;
    const unsigned items = (unsigned)p.batch * H * nrb;  // < 2^31 (launcher)
    const int RW = splitRecordWordsM2(p.window, T), RM = p.window + T;
    const unsigned nw = gridDim.x * (kCtaThreads / 32);
    const uint16_t* ringX = static_cast<const uint16_t*>(p.ring_x);
    const uint16_t* ringB = static_cast<const uint16_t*>(p.ring_B);
    const float* ws = static_cast<const float*>(p.workspace);
    const bool actTok = g < T;
    auto rawSlot = [&](int b) { return p.state_batch_indices ? p.state_batch_indices[b] : b; };
    auto validSlot = [&](int sl) { return (sl < 0 || sl >= p.num_slots) ? -1 : sl; };
    auto slotOf = [&](int b) { return validSlot(rawSlot(b)); };
    auto rowsOf = [&](stream::ItemCursor c, int slot) {  // the item's first checkpoint row
        return static_cast<ST*>(p.state) + (int64_t)slot * p.stride_state_slot + (int64_t)c.head * p.stride_state_head +
               (int64_t)(c.blk * kSplitRows) * p.stride_state_p;
    };
    auto metaOf = [&](stream::ItemCursor c) {
        if constexpr (L32) return *reinterpret_cast<const int4*>(ws + ((c.b * H + c.head) * RW + 8));
        else return *reinterpret_cast<const int4*>(ws + ((size_t)c.b * H + c.head) * RW + 8);
    };
    unsigned it = blockIdx.x * (kCtaThreads / 32) + (threadIdx.x >> 5);
    if (it >= items) return;
    const stream::ItemWalker walk(H, nrb, nw);
    stream::ItemCursor cC = walk.at(it), cN = walk.next(cC);
    // prologue: the first item's rows (the prep kernel never writes the checkpoint), then wait for the prep grid
    int slotC = slotOf(cC.b);
    if (slotC >= 0) Rows::issue(sRows(0), rowsOf(cC, slotC), p.stride_state_p, lane);
    async::commit();
    int slotN = it + nw < items ? slotOf(cN.b) : -1;
    int rawNN = it + 2 * nw < items ? rawSlot(walk.next(cN).b) : -1;  // validated one item later (load latency)
    pdlWaitPrimary();
    int4 metaC = slotC >= 0 ? metaOf(cC) : make_int4(0, -1, 0, 0);
    // x_j[8 rows] of record `lane` of item c (o = m.z, h = m.w; nothing for padding / skipped / invalid rows)
    auto loadX = [&](stream::ItemCursor c, int sl, int4 m) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (sl >= 0 && m.y >= 0 && lane < m.w + T) {
            int rr = m.z + lane;
            rr = rr >= Cap ? rr - Cap : rr;
            if constexpr (L32)
                v = *reinterpret_cast<const uint4*>(ringX + ((((sl * Cap + rr) * H + c.head) * P) + c.blk * kSplitRows));
            else
                v = *reinterpret_cast<const uint4*>(ringX + (((int64_t)sl * Cap + rr) * H + c.head) * P +
                                                    c.blk * kSplitRows);
        }
        return v;
    };
    uint4 xqNext = make_uint4(0u, 0u, 0u, 0u);
    if constexpr (XPF) xqNext = loadX(cC, slotC, metaC);
    // ZPF: z of the lane's two rows of item c (a bf16 pair, 4-byte aligned; 0 for padding rows or without a gate)
    auto loadZ = [&](stream::ItemCursor c, int sl) {
        uint32_t z = 0u;
        if (actTok && p.z && sl >= 0) {
            if constexpr (L32)
                z = *reinterpret_cast<const uint32_t*>(
                    static_cast<const uint16_t*>(p.z) + (c.b * (int)p.stride_z_b + g * (int)p.stride_z_t +
                                                         c.head * (int)p.stride_z_h + c.blk * kSplitRows + 2 * q));
            else
                z = *reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(p.z) + (int64_t)c.b * p.stride_z_b +
                                                       (int64_t)g * p.stride_z_t + (int64_t)c.head * p.stride_z_h +
                                                       c.blk * kSplitRows + 2 * q);
        }
        return z;
    };
    uint32_t zNext = 0u;
    if constexpr (ZPF) zNext = loadZ(cC, slotC);
    for (int buf = 0; it < items; it += nw, buf ^= 1) {
        const int slot = slotC;
        const int4 meta = metaC;
        const int nf = meta.y;
        const int b = cC.b, head = cC.head, vw = cC.blk * kSplitRows;
        const int grp = head / hpg;
        // the group's ring B rows (L32: formed where a flush item uses them, ringBOf; written twice so that the instances
        // without L32 keep their measured code)
        const uint16_t* ringBg = L32 ? nullptr : ringB + ((int64_t)(slot < 0 ? 0 : slot) * Cap * G + grp) * kN;
        auto ringBOf = [&]() { return ringB + ((int64_t)(slot < 0 ? 0 : slot) * Cap * G + grp) * kN; };
        // next item: rows in flight (an empty group when there are none), cursors one item ahead. A flush item first
        // stages its B_j rows into the other buffer instead; the next item's rows follow its fold.
        const bool flushItem = slot >= 0 && nf > 0;
        uint16_t* sB = reinterpret_cast<uint16_t*>(sRows(buf ^ 1));
        if (flushItem)
            stageFoldChunk(sB, sFw, L32 ? ringBOf() : ringBg, ws + ((size_t)b * H + head) * RW + kSplitCoef + T * RM, 0,
                           nf, meta.z, Cap, G * kN, lane);
        else if (slotN >= 0) Rows::issue(sRows(buf ^ 1), rowsOf(cN, slotN), p.stride_state_p, lane);
        if (!flushItem) async::commit();
        const int4 metaN = slotN >= 0 ? metaOf(cN) : make_int4(0, -1, 0, 0);
        const stream::ItemCursor cNN = walk.next(cN);
        const int slotNN = validSlot(rawNN);
        rawNN = it + 3 * nw < items ? rawSlot(walk.next(cNN).b) : -1;

        bool xIssued = false;  // XPF: the next item's x_j loads
        if (slot >= 0 && nf != kSplitSkipRow) {  // else padding row / skipped flushing row: untouched
            uint16_t* yg = L32 ? static_cast<uint16_t*>(p.y) + (b * (int)p.stride_y_b + g * (int)p.stride_y_t +
                                                                 head * (int)p.stride_y_h + vw + 2 * q)
                               : static_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b + (int64_t)g * p.stride_y_t +
                                     (int64_t)head * p.stride_y_h + vw + 2 * q;
            if (nf < 0) {  // invalid cursors: poison, touch nothing else
                if (actTok) yg[0] = yg[1] = floatToAct(__int_as_float(0x7fc00000), true);
            } else {
                const float* hr = L32 ? ws + (b * H + head) * RW : ws + ((size_t)b * H + head) * RW;
                const int o = meta.z, R = meta.w + T;
                uint4 xq;
                if constexpr (XPF) xq = xqNext;
                else xq = loadX(cC, slot, meta);
                const uint32_t* Crow = reinterpret_cast<const uint32_t*>(
                    L32 ? static_cast<const uint16_t*>(p.Cm) + (b * (int)p.stride_C_b + grp * (int)p.stride_C_g +
                                                                g * (int)p.stride_C_t + 2 * q)
                        : static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)grp * p.stride_C_g +
                              (int64_t)g * p.stride_C_t + 2 * q);
                float gam, cf[8];  // gamma_s and the coefficients of the lane's token, records 8c + 2q, + 1
                auto loadHeadRecords = [&]() {
                    gam = actTok ? hr[g] : 0.f;
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        const int j = 8 * (i >> 1) + 2 * q + (i & 1);
                        cf[i] = (actTok && j < R) ? hr[kSplitCoef + g * RM + j] : 0.f;
                    }
                };
                if constexpr (ZPF) loadHeadRecords();  // before the C_g loads: their round trips overlap
                uint32_t cw[2 * kKT];  // C_g pairs of this lane's token: columns 16k + 2q, + 1 and 16k + 8 + 2q, + 1
                if constexpr (CHOIST) {
#pragma unroll
                    for (int k = 0; k < kKT; ++k) {
                        cw[2 * k] = actTok ? __ldg(Crow + 8 * k) : 0u;
                        cw[2 * k + 1] = actTok ? __ldg(Crow + 8 * k + 4) : 0u;
                    }
                }
                uint32_t zw = 0u;  // XPF: z of the lane's two rows (bf16 pair), loaded with the item's other loads
                const uint32_t zc = zNext;  // ZPF: loaded one item earlier
                if constexpr (XPF && !ZPF) {
                    if (actTok && p.z) {
                        const uint16_t* zg = static_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                             (int64_t)g * p.stride_z_t + (int64_t)head * p.stride_z_h + vw + 2 * q;
                        zw = (uint32_t)zg[0] | ((uint32_t)zg[1] << 16);
                    }
                }
                if constexpr (!ZPF) loadHeadRecords();
                *reinterpret_cast<uint4*>(sX + lane * kSplitRows) = xq;
                __syncwarp();
                uint32_t xb[4];
                ldmatrixX4Trans(xb, sX + lane * kSplitRows);
                float accE[4] = {0.f, 0.f, 0.f, 0.f}, accO[4] = {0.f, 0.f, 0.f, 0.f}, accR[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    if (8 * c >= R) break;
                    mmaTf32(accR, tf32(cf[2 * c]), tf32(cf[2 * c + 1]), xb[c] << 16, xb[c] & 0xffff0000u);
                }
                async::waitAllButOne();  // this item's rows (the next item's rows / B_j chunk may be in flight)
                __syncwarp();
                const ST* rowG = sRows(buf) + g * Rows::kStride;
#pragma unroll
                for (int k = 0; k < kKT; ++k) {
                    uint32_t c0, c1;
                    if constexpr (CHOIST) {
                        c0 = cw[2 * k];
                        c1 = cw[2 * k + 1];
                    } else {
                        c0 = actTok ? __ldg(Crow + 8 * k) : 0u;
                        c1 = actTok ? __ldg(Crow + 8 * k + 4) : 0u;
                    }
                    float v[4];
                    Rows::read(v, rowG, k, q);
                    mmaTf32(accE, c0 << 16, c0 & 0xffff0000u, tf32(v[0]), tf32(v[1]));
                    mmaTf32(accO, c1 << 16, c1 & 0xffff0000u, tf32(v[2]), tf32(v[3]));
                }
                if constexpr (XPF) {
                    xqNext = loadX(cN, slotN, metaN);
                    if constexpr (ZPF) zNext = loadZ(cN, slotN);
                    xIssued = true;
                }
                if (actTok) {
                    float y0 = fmaf(gam, accE[0] + accO[0], accR[0]);
                    float y1 = fmaf(gam, accE[1] + accO[1], accR[1]);
                    if constexpr (ZPF) {
                        if (p.z) {
                            y0 *= siluF(actToFloat((uint16_t)(zc & 0xFFFFu), true));
                            y1 *= siluF(actToFloat((uint16_t)(zc >> 16), true));
                        }
                    } else if constexpr (XPF) {
                        if (p.z) {
                            y0 *= siluF(actToFloat((uint16_t)(zw & 0xFFFFu), true));
                            y1 *= siluF(actToFloat((uint16_t)(zw >> 16), true));
                        }
                    } else if (p.z) {
                        const uint16_t* zg = static_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                             (int64_t)g * p.stride_z_t + (int64_t)head * p.stride_z_h + vw + 2 * q;
                        y0 *= siluF(actToFloat(zg[0], true));
                        y1 *= siluF(actToFloat(zg[1], true));
                    }
                    yg[0] = floatToAct(y0, true);
                    yg[1] = floatToAct(y1, true);
                }
                if (nf > 0) {  // warp-uniform: fold the committed records into the rows, store them
                    const float gf = __int_as_float(meta.x);
                    const float* fwp = hr + kSplitCoef + T * RM;
                    ST* ckRow = rowsOf(cC, slot) + (int64_t)g * p.stride_state_p;
                    async::waitAll();  // the B_j chunk and its weights
                    __syncwarp();
                    float fw[4];
                    foldmma::stagedChunkWeights(fw, sFw, q);
                    uint32_t a[3][4];
                    foldWeights(a, xb[0], xb[1], fw);
                    if (nf <= kChunk) {  // one chunk (L <= 16): column tile by column tile from the staged rows
#pragma unroll 2
                        for (int k = 0; k < kKT; ++k) {
                            float v[4];
                            Rows::read(v, rowG, k, q);
#pragma unroll
                            for (int e = 0; e < 4; ++e) v[e] *= gf;
                            foldTile(v, a, sB, k, lane);
                            LaneRow<ST>::storeTile(v, ckRow, k, q);
                        }
                    } else if constexpr (sizeof(ST) == 4) {  // two chunks: the first chunk's result back in place
                        // (the same pass as above with a shared-memory sink: kept as two loops so that the
                        // one-chunk loop, the common L <= 16 case, has no per-tile branch)
                        float* rowW = reinterpret_cast<float*>(sRows(buf)) + g * Rows::kStride;
#pragma unroll 2
                        for (int k = 0; k < kKT; ++k) {
                            float v[4];
                            Rows::read(v, rowG, k, q);
#pragma unroll
                            for (int e = 0; e < 4; ++e) v[e] *= gf;
                            foldTile(v, a, sB, k, lane);
                            *reinterpret_cast<float2*>(rowW + 16 * k + 2 * q) = make_float2(v[0], v[1]);
                            *reinterpret_cast<float2*>(rowW + 16 * k + 8 + 2 * q) = make_float2(v[2], v[3]);
                        }
                        __syncwarp();  // every lane is done with the first chunk's rows and weights
                        stageFoldChunk(sB, sFw, L32 ? ringBOf() : ringBg, fwp, kChunk, nf, o, Cap, G * kN, lane);
                        async::waitAll();
                        __syncwarp();
                        foldmma::stagedChunkWeights(fw, sFw, q);
                        foldWeights(a, xb[2], xb[3], fw);
#pragma unroll 2
                        for (int k = 0; k < kKT; ++k) {
                            float v[4];
                            Rows::read(v, rowG, k, q);
                            foldTile(v, a, sB, k, lane);
                            LaneRow<ST>::storeTile(v, ckRow, k, q);
                        }
                    } else {
                        __trap();  // 16-bit rows with more than 16 records to fold: the launcher runs the CUDA-core readout
                    }
                }
            }
        }
        if constexpr (XPF) {
            if (!xIssued) {
                xqNext = loadX(cN, slotN, metaN);
                if constexpr (ZPF) zNext = loadZ(cN, slotN);
            }
        }
        if (flushItem) {  // the other buffer is free again: the next item's rows
            __syncwarp();
            if (slotN >= 0) Rows::issue(sRows(buf ^ 1), rowsOf(cN, slotN), p.stride_state_p, lane);
            async::commit();
        }
        __syncwarp();  // this item's buffers are rewritten by the item after next / the next item's x
        cC = cN;
        cN = cNN;
        slotC = slotN;
        slotN = slotNN;
        metaC = metaN;
    }
    async::waitAll();
}

}  // namespace mamba2
}  // namespace rssm
