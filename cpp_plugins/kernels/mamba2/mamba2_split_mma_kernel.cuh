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
#include "common/pdl.h"
#include "mamba2/mamba2_split_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace mmareadout {
constexpr int kN = foldmma::kN;             // dstate
constexpr int kKT = kN / 16;            // pairs of 8-column tiles (readout TF32 k-tiles, fold accumulators)
constexpr int kChunk = foldmma::kChunk;     // records per fold k step
constexpr int kBStride = foldmma::kBStride;  // staged B row stride (bf16): ldmatrix rows 16 bytes apart in the banks
constexpr int kBBytes = kChunk * kBStride * 2;
constexpr int kXBytes = kSplitMaxRecords * kSplitRows * 2;
constexpr int kCtaThreads = kSplitReadoutThreads;

using foldmma::ldmatrixX4Trans;
using foldmma::mmaBf16;
using foldmma::packBf16;
using foldmma::split3;

__device__ __forceinline__ float bf16Lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16Hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
// fp32 -> TF32 operand, rounded to nearest (ties away from zero): add half a TF32 ulp and let the tensor core drop the
// 13 low mantissa bits, as it does for every TF32 operand (CUTLASS's round_half_ulp_truncate). One IADD instead of
// cvt.rna.tf32.f32, which sm_90 expands into a 5-instruction sequence with inf / NaN checks (it was a fifth of the
// readout's instructions, ninth session ncu). Finite inputs only: an infinite state value would read as NaN.
__device__ __forceinline__ uint32_t tf32(float x) { return __float_as_uint(x) + 0x1000u; }
// d += a . b, m16n8k8 TF32 (A rows g + 8: a[1] = a[3] = 0).
__device__ __forceinline__ void mmaTf32(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
#endif
}

// Stores of a lane's 4 state values of 16-column block k (row pointer `row`, element type ST; the layout above).
template <typename ST>
struct LaneRow;
template <>
struct LaneRow<float> {
    static constexpr bool kExactInBf16 = false;
    __device__ static void storeTile(const float (&v)[4], float* row, int k, int q) {
        *reinterpret_cast<float2*>(row + 16 * k + 2 * q) = make_float2(v[0], v[1]);
        *reinterpret_cast<float2*>(row + 16 * k + 8 + 2 * q) = make_float2(v[2], v[3]);
    }
};
template <typename H16>
struct LaneRow16 {
    static constexpr bool kExactInBf16 = std::is_same<H16, __nv_bfloat16>::value;
    __device__ static float2 toF2(uint32_t v) {
        if constexpr (kExactInBf16) return make_float2(bf16Lo(v), bf16Hi(v));
        else return __half22float2(*reinterpret_cast<const __half2*>(&v));
    }
    __device__ static uint32_t fromF2(float a, float b) {
        if constexpr (kExactInBf16) return packBf16(a, b);
        const __half2 h = __floats2half2_rn(a, b);
        return *reinterpret_cast<const uint32_t*>(&h);
    }
    __device__ static void storeTile(const float (&v)[4], H16* row, int k, int q) {
        *reinterpret_cast<uint32_t*>(row + 16 * k + 2 * q) = fromF2(v[0], v[1]);
        *reinterpret_cast<uint32_t*>(row + 16 * k + 8 + 2 * q) = fromF2(v[2], v[3]);
    }
};
template <>
struct LaneRow<__half> : LaneRow16<__half> {};
template <>
struct LaneRow<__nv_bfloat16> : LaneRow16<__nv_bfloat16> {};

// B_j rows of records c0 .. c0 + 15 of the ring into a warp's staging rows (common/fold_mma.cuh).
using foldmma::stageBRows;

// The fold's A fragments (rows x records) of one 16-record chunk: W[row g][j] = fw_j x_j[row g] for the records
// c0 + 2q, + 1 and c0 + 8 + 2q, + 1, each as three bf16 terms (24 significant bits: the fold keeps fp32 accuracy;
// B_j is bf16 already, so the B operand is exact). xr0 / xr1: those records' x_j[row g] (packed bf16, the readout's
// B fragment); fw: their fold weights (0 past nf).
__device__ __forceinline__ void foldWeights(uint32_t (&a)[3][4], uint32_t xr0, uint32_t xr1, const float (&fw)[4]) {
    float w[4][3];
    split3(fw[0] * bf16Lo(xr0), w[0][0], w[0][1], w[0][2]);
    split3(fw[1] * bf16Hi(xr0), w[1][0], w[1][1], w[1][2]);
    split3(fw[2] * bf16Lo(xr1), w[2][0], w[2][1], w[2][2]);
    split3(fw[3] * bf16Hi(xr1), w[3][0], w[3][1], w[3][2]);
#pragma unroll
    for (int t = 0; t < 3; ++t) {
        a[t][0] = packBf16(w[0][t], w[1][t]);  // (row g, records 2q, 2q + 1)
        a[t][1] = 0u;                          // rows g + 8: none
        a[t][2] = packBf16(w[2][t], w[3][t]);  // (row g, records 2q + 8, 2q + 9)
        a[t][3] = 0u;
    }
}
// Columns 16k .. 16k + 15 of the fold for one chunk: v (the lane's 4 values of k-tile k) += W . B_chunk.
// ldmatrix.x4.trans: matrix mi = lane / 8 holds records (mi & 1) * 8 .. + 7 (its rows) x columns 16k + (mi / 2) * 8
// .. + 7, so a lane receives B_{2q}, B_{2q+1} (and + 8) of column 16k + g (and + 8): the B fragments of the
// 8-column tiles 2k and 2k + 1, whose accumulators (row g, columns 2q, 2q + 1) are v[0..1] and v[2..3].
__device__ __forceinline__ void foldTile(float (&v)[4], const uint32_t (&a)[3][4], const uint16_t* sB, int k, int lane) {
    const int mi = lane >> 3;
    uint32_t b[4];
    ldmatrixX4Trans(b, sB + ((mi & 1) * 8 + (lane & 7)) * kBStride + (mi >> 1) * 8 + 16 * k);
    float d0[4] = {v[0], v[1], 0.f, 0.f};
    float d1[4] = {v[2], v[3], 0.f, 0.f};
#pragma unroll
    for (int t = 2; t >= 0; --t) {  // small terms first
        mmaBf16(d0, a[t], b[0], b[1]);
        mmaBf16(d1, a[t], b[2], b[3]);
    }
    v[0] = d0[0];
    v[1] = d0[1];
    v[2] = d1[0];
    v[3] = d1[1];
}

// A warp's copy of an item's 8 checkpoint rows in shared memory: rows kStride elements apart (padded so that the
// lanes' reads of one k-tile spread over the banks), filled with 16-byte cp.async, read in the register layout
// above (Rows::read: the 4 values of k-tile k).
template <typename ST>
struct SmemRows {
    static constexpr int kRowBytes = kN * (int)sizeof(ST);
    static constexpr int kPad = 8;  // elements: 32 bytes (fp32), 16 bytes (16-bit)
    static constexpr int kStride = kN + kPad;
    // a multiple of 16; also holds a staged 16-record chunk of B_j rows (the fold)
    static constexpr int kBufBytes =
        kSplitRows * kStride * (int)sizeof(ST) > kBBytes ? kSplitRows * kStride * (int)sizeof(ST) : kBBytes;
    static constexpr int kPieces = kRowBytes / 16;  // 16-byte pieces per row
    __device__ static void issue(ST* dst, const ST* src, int64_t rowStride, int lane) {
#pragma unroll
        for (int i = lane; i < kSplitRows * kPieces; i += 32) {
            const int r = i / kPieces, v = i - r * kPieces;
            async::copy16(reinterpret_cast<unsigned char*>(dst + r * kStride) + 16 * v,
                          reinterpret_cast<const unsigned char*>(src + r * rowStride) + 16 * v);
        }
    }
    __device__ static void read(float (&v)[4], const ST* row, int k, int q) {
        if constexpr (sizeof(ST) == 4) {
            const float2 a = *reinterpret_cast<const float2*>(row + 16 * k + 2 * q);
            const float2 b = *reinterpret_cast<const float2*>(row + 16 * k + 8 + 2 * q);
            v[0] = a.x;
            v[1] = a.y;
            v[2] = b.x;
            v[3] = b.y;
        } else {
            const float2 a = LaneRow16<ST>::toF2(*reinterpret_cast<const uint32_t*>(row + 16 * k + 2 * q));
            const float2 b = LaneRow16<ST>::toF2(*reinterpret_cast<const uint32_t*>(row + 16 * k + 8 + 2 * q));
            v[0] = a.x;
            v[1] = a.y;
            v[2] = b.x;
            v[3] = b.y;
        }
    }
};
template <typename ST>
__host__ __device__ constexpr int stagedWarpBytes() { return 2 * SmemRows<ST>::kBufBytes + kXBytes; }


}  // namespace mmareadout

// Launcher rules (mamba2_launch.cu): dstate 128, bf16 activations, headdim % 8 == 0, records per step <= 32,
// fp32 / fp16 / bf16 checkpoints with 16-byte aligned rows (16-bit rows: at most 16 records to fold), any mode and
// T <= 8. Items (row b, head, 8 rows) are grid-strided over the warps and walked without divisions
// (stream::ItemWalker). Each item's checkpoint rows are staged through shared memory, the next item's rows in flight
// (cp.async into the warp's other row buffer) while the current one is computed: a warp keeps up to 8 KB (fp32) of
// state in flight without holding it in registers (a version with the rows in registers, 128 registers and 2 CTAs per
// SM, ran 10-20% slower; ninth session). The next item's slot and head-record cursors are loaded one item ahead. A
// flush item stages its B_j rows in the other row buffer instead and issues the next item's rows after its fold.
// Shared memory: stagedWarpBytes<ST>() per warp (9.2 KB), 76-80 registers: 3 CTAs of 8 warps per SM.
// CHOIST: the item's C_g loads issued with the other per-item loads (16 registers live across them; fp32 rows spill
// 16 B) instead of inside the product loop, where their latency showed as 11% of the stall samples (ninth session).
template <typename ST, bool CHOIST>
__global__ void __launch_bounds__(mmareadout::kCtaThreads, 3)
    mamba2SplitReadoutMmaStagedKernel(const Mamba2ReplayParams p) {
    using namespace mmareadout;
    using Rows = SmemRows<ST>;
    extern __shared__ __align__(16) unsigned char smemSplitMmaStaged[];
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    unsigned char* wsm = smemSplitMmaStaged + (threadIdx.x >> 5) * stagedWarpBytes<ST>();
    auto sRows = [&](int i) { return reinterpret_cast<ST*>(wsm + i * Rows::kBufBytes); };
    uint16_t* sX = reinterpret_cast<uint16_t*>(wsm + 2 * Rows::kBufBytes);  // [32 records][8 rows]
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
        return *reinterpret_cast<const int4*>(ws + ((size_t)c.b * H + c.head) * RW + 8);
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
    for (int buf = 0; it < items; it += nw, buf ^= 1) {
        const int slot = slotC;
        const int4 meta = metaC;
        const int nf = meta.y;
        const int b = cC.b, head = cC.head, vw = cC.blk * kSplitRows;
        const int grp = head / hpg;
        const uint16_t* ringBg = ringB + ((int64_t)(slot < 0 ? 0 : slot) * Cap * G + grp) * kN;
        // next item: rows in flight (an empty group when there are none), cursors one item ahead. A flush item first
        // stages its B_j rows into the other buffer instead; the next item's rows follow its fold.
        const bool flushItem = slot >= 0 && nf > 0;
        uint16_t* sB = reinterpret_cast<uint16_t*>(sRows(buf ^ 1));
        if (flushItem) stageBRows(sB, ringBg, 0, nf, meta.z, Cap, (int64_t)G * kN, lane);
        else if (slotN >= 0) Rows::issue(sRows(buf ^ 1), rowsOf(cN, slotN), p.stride_state_p, lane);
        if (!flushItem) async::commit();
        const int4 metaN = slotN >= 0 ? metaOf(cN) : make_int4(0, -1, 0, 0);
        const stream::ItemCursor cNN = walk.next(cN);
        const int slotNN = validSlot(rawNN);
        rawNN = it + 3 * nw < items ? rawSlot(walk.next(cNN).b) : -1;

        if (slot >= 0 && nf != kSplitSkipRow) {  // else padding row / skipped flushing row: untouched
            uint16_t* yg = static_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b + (int64_t)g * p.stride_y_t +
                           (int64_t)head * p.stride_y_h + vw + 2 * q;
            if (nf < 0) {  // invalid cursors: poison, touch nothing else
                if (actTok) yg[0] = yg[1] = floatToAct(__int_as_float(0x7fc00000), true);
            } else {
                const float* hr = ws + ((size_t)b * H + head) * RW;
                const int o = meta.z, R = meta.w + T;
                uint4 xq = make_uint4(0u, 0u, 0u, 0u);
                if (lane < R) {
                    int rr = o + lane;
                    rr = rr >= Cap ? rr - Cap : rr;
                    xq = *reinterpret_cast<const uint4*>(ringX + (((int64_t)slot * Cap + rr) * H + head) * P + vw);
                }
                const uint32_t* Crow = reinterpret_cast<const uint32_t*>(
                    static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)grp * p.stride_C_g +
                    (int64_t)g * p.stride_C_t + 2 * q);
                uint32_t cw[2 * kKT];  // C_g pairs of this lane's token: columns 16k + 2q, + 1 and 16k + 8 + 2q, + 1
                if constexpr (CHOIST) {
#pragma unroll
                    for (int k = 0; k < kKT; ++k) {
                        cw[2 * k] = actTok ? __ldg(Crow + 8 * k) : 0u;
                        cw[2 * k + 1] = actTok ? __ldg(Crow + 8 * k + 4) : 0u;
                    }
                }
                const float gam = actTok ? hr[g] : 0.f;
                float cf[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const int j = 8 * (i >> 1) + 2 * q + (i & 1);
                    cf[i] = (actTok && j < R) ? hr[kSplitCoef + g * RM + j] : 0.f;
                }
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
                if (actTok) {
                    float y0 = fmaf(gam, accE[0] + accO[0], accR[0]);
                    float y1 = fmaf(gam, accE[1] + accO[1], accR[1]);
                    if (p.z) {
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
                    float fw[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const int j = (i >> 1) * 8 + 2 * q + (i & 1);
                        fw[i] = j < nf ? fwp[j] : 0.f;
                    }
                    uint32_t a[3][4];
                    foldWeights(a, xb[0], xb[1], fw);
                    ST* ckRow = rowsOf(cC, slot) + (int64_t)g * p.stride_state_p;
                    async::waitAll();  // the B_j chunk
                    __syncwarp();
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
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int j = kChunk + (i >> 1) * 8 + 2 * q + (i & 1);
                            fw[i] = j < nf ? fwp[j] : 0.f;
                        }
                        foldWeights(a, xb[2], xb[3], fw);
                        __syncwarp();  // every lane is done with the first chunk's rows
                        stageBRows(sB, ringBg, kChunk, nf, o, Cap, (int64_t)G * kN, lane);
                        async::waitAll();
                        __syncwarp();
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
