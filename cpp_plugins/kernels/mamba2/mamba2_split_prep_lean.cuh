// ReplaySSM Mamba-2 split replay (variant 4): the one-token prep kernel with a lean instruction stream
// (thirteenth session). Same grid, workspace head records and ring appends as splitPrepBody<1, ...>
// (mamba2_split_kernel.cuh); what differs is how it gets there:
//   - the record dots B_j . C read B_j and C straight from global memory as 16-byte pieces (8 threads per
//     record, N / 64 pieces each, three shuffles), instead of staging B_j in shared memory through cp.async
//     and reducing a lane-strided loop with five shuffles per record;
//   - x is appended as 16-byte pieces (P / 8 lanes per head), dt of this step's token is computed once per
//     warp for all its heads (lane k holds head k's softplus) instead of once per head in a divergent lane;
//   - the activation dtype and dstate are template parameters; ring offsets are 32-bit within a slot.
// The launcher (launchSplit) takes it for standard steps when Bm, Cm, x, ring_B and ring_x are 16-byte
// aligned row by row; RSSM_MAMBA2_SPLIT_PREP=w4|lb8|default forces the previous kernels (A/B timing).
// The dot sums run in a different order from splitPrepBody (within fp32 rounding of each other).
#pragma once
#include "common/pdl.h"
#include "common/warp_scan.cuh"
#include "mamba2/mamba2_split_kernel.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kLeanPrepThreads = 128;
constexpr int kLeanPrepWarps = kLeanPrepThreads / 32;
constexpr int kLeanPrepHeadsPerWarp = kSplitHeadsPerPrep / kLeanPrepWarps;  // 4
constexpr int kLeanDotThreads = 8;                                         // threads per record dot
constexpr int kLeanDotRecordsPerPass = kLeanPrepThreads / kLeanDotThreads;  // 16
static_assert(kSplitMaxRecords <= 2 * kLeanDotRecordsPerPass, "two dot passes cover every record");

// Sum of the products of the 8 16-bit activations in a and c (bf16 or fp16 bits), accumulated in fp32.
template <bool BF16>
__device__ __forceinline__ float dotPiece(const uint4 a, const uint4 c, float acc) {
    const uint32_t aw[4] = {a.x, a.y, a.z, a.w}, cw[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        if constexpr (BF16) {
            acc = fmaf(__uint_as_float(aw[i] << 16), __uint_as_float(cw[i] << 16), acc);
            acc = fmaf(__uint_as_float(aw[i] & 0xffff0000u), __uint_as_float(cw[i] & 0xffff0000u), acc);
        } else {
            const float2 af = __half22float2(*reinterpret_cast<const __half2*>(&aw[i]));
            const float2 cf = __half22float2(*reinterpret_cast<const __half2*>(&cw[i]));
            acc = fmaf(af.x, cf.x, acc);
            acc = fmaf(af.y, cf.y, acc);
        }
    }
    return acc;
}

// One CTA of 128 threads per (row b, group g, chunk of <= 16 heads): standard mode, one token.
template <int N, bool BF16>
__global__ void __launch_bounds__(kLeanPrepThreads, N <= 128 ? 12 : 8) mamba2SplitPrepLeanKernel(const Mamba2ReplayParams p) {
    static_assert(N % 64 == 0, "dstate: a multiple of 64 (8 threads x 16-byte pieces)");
    constexpr int V = N / 64;  // 16-byte pieces per thread and record
    pdlChainEntry();  // RSSM_PDL_CHAIN (common/pdl.h); then the readout may be scheduled (it waits for this grid)
    const int b = blockIdx.z, g = blockIdx.y;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int H = p.nheads, G = p.ngroups, P = p.headdim, L = p.window, Cap = p.ring_capacity;
    const int hpg = H / G;
    const int h0 = g * hpg + blockIdx.x * kSplitHeadsPerPrep;
    const int nh = min(kSplitHeadsPerPrep, (g + 1) * hpg - h0);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int RW = splitRecordWordsM2(L, 1);
    float* ws = static_cast<float*>(p.workspace) + ((int64_t)b * H + h0) * RW;

    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    if (!(o >= 0 && o < Cap && h >= 0 && h <= L - 1 && h + 1 <= Cap)) {  // invalid: the readout poisons the outputs
        if (tid < nh) ws[tid * RW + 9] = __int_as_float(-1);
        return;
    }
    const bool flush = h + 1 == L;
    if (flush && p.skip_flush_rows) {  // the dual-precision decode handles this row
        if (tid < nh) ws[tid * RW + 9] = __int_as_float(kSplitSkipRow);
        return;
    }
    const int R = h + 1;
    const int rrNew = o + h >= Cap ? o + h - Cap : o + h;  // ring row of this step's record
    __shared__ float sDot[kSplitMaxRecords];

    // ---- every load first: C piece, B_j pieces (ring or this step's), dt_j, this step's dt and x per head
    const uint16_t* ringB = static_cast<const uint16_t*>(p.ring_B) + (int64_t)slot * Cap * G * N + g * N;
    const uint16_t* Bin = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)g * p.stride_B_g;
    const uint16_t* Cin = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g;
    const int q = tid & (kLeanDotThreads - 1);
    uint4 cv[V], bv[V];
#pragma unroll
    for (int v = 0; v < V; ++v) cv[v] = *reinterpret_cast<const uint4*>(Cin + (v * kLeanDotThreads + q) * 8);
    const int j0 = tid >> 3;  // record of this thread's first dot pass
    if (j0 < R) {
        int rr = o + j0;
        rr = rr >= Cap ? rr - Cap : rr;
        const uint16_t* src = j0 < h ? ringB + rr * G * N : Bin;
#pragma unroll
        for (int v = 0; v < V; ++v) bv[v] = *reinterpret_cast<const uint4*>(src + (v * kLeanDotThreads + q) * 8);
    }
    // x of the CTA's heads as 16-byte pieces: piece i = (head hl, piece v), at most 2 per thread (P <= 128).
    const int ppr = P / 8;
    // hl = (i * magic) >> 16 for i < 16 * ppr. (A run-time division here, not xPieceMagic: with its reciprocal this
    // kernel spilled 4 bytes at its 40-register bound, and the standard step read 0.3-0.5% slower in 3 of 4 cases of
    // one side-by-side pair; thirty-first session, docs/kernels-mamba2.md.)
    const int magic = (65536 + ppr - 1) / ppr;
    const uint16_t* xRow = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b;
    uint4 xv[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const int i = tid + kLeanPrepThreads * e;
        if (i < nh * ppr) {
            const int hl = (i * magic) >> 16, v = i - hl * ppr;
            xv[e] = *reinterpret_cast<const uint4*>(xRow + (int64_t)(h0 + hl) * p.stride_x_h + v * 8);
        }
    }
    const int64_t ringHeadRow = (int64_t)slot * Cap * H;  // ring_dt / ring_x row of (slot, ring row 0, head 0)
    int rrLane = o + lane;
    rrLane = rrLane >= Cap ? rrLane - Cap : rrLane;
    const float* ringDt = p.ring_dt + ringHeadRow;
    float dtj[kLeanPrepHeadsPerWarp];
#pragma unroll
    for (int k = 0; k < kLeanPrepHeadsPerWarp; ++k) {
        const int hl = warp + kLeanPrepWarps * k;
        dtj[k] = (hl < nh && lane < h) ? ringDt[rrLane * H + h0 + hl] : 0.f;
    }
    // Lane k holds head warp + NW k's A, D and this step's dt (one softplus evaluation per warp).
    float dtNew = 0.f, Ak = 0.f, Dk = 0.f;
    if (lane < kLeanPrepHeadsPerWarp && warp + kLeanPrepWarps * lane < nh) {
        const int head = h0 + warp + kLeanPrepWarps * lane;
        Ak = p.A[head];
        Dk = p.D ? p.D[head] : 0.f;
        dtNew = loadDt(p.dt_raw, p.dt_dtype == RSSM_DTYPE_FP32, BF16, (int64_t)b * p.stride_dt_b + (int64_t)head * p.stride_dt_h,
                       p.dt_bias, head);
    }
    // ---- stores: this step's B (the group's first chunk), dt and x records
    if (blockIdx.x == 0 && j0 == h) {
        uint16_t* dstB = static_cast<uint16_t*>(p.ring_B) + ((int64_t)slot * Cap + rrNew) * G * N + g * N;
#pragma unroll
        for (int v = 0; v < V; ++v) *reinterpret_cast<uint4*>(dstB + (v * kLeanDotThreads + q) * 8) = bv[v];
    }
    uint16_t* ringX = static_cast<uint16_t*>(p.ring_x) + ringHeadRow * P;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        const int i = tid + kLeanPrepThreads * e;
        if (i < nh * ppr) {
            const int hl = (i * magic) >> 16, v = i - hl * ppr;
            *reinterpret_cast<uint4*>(ringX + (rrNew * H + h0 + hl) * P + v * 8) = xv[e];
        }
    }
#pragma unroll
    for (int k = 0; k < kLeanPrepHeadsPerWarp; ++k) {
        const float dk = __shfl_sync(stream::kFull, dtNew, k);
        if (warp + kLeanPrepWarps * k < nh && lane == h) {
            dtj[k] = dk;
            p.ring_dt[ringHeadRow + rrNew * H + h0 + warp + kLeanPrepWarps * k] = dk;
        }
    }
    // ---- record dots (8 threads per record; a second pass for records 16..31 of windows > 16)
    {
        float acc = 0.f;
        if (j0 < R) {
#pragma unroll
            for (int v = 0; v < V; ++v) acc = dotPiece<BF16>(bv[v], cv[v], acc);
        }
        acc += __shfl_xor_sync(stream::kFull, acc, 4);
        acc += __shfl_xor_sync(stream::kFull, acc, 2);
        acc += __shfl_xor_sync(stream::kFull, acc, 1);
        if (q == 0 && j0 < R) sDot[j0] = acc;
    }
    if (R > kLeanDotRecordsPerPass) {  // uniform: every thread of the CTA takes the shuffles
        const int j1 = j0 + kLeanDotRecordsPerPass;
        float acc = 0.f;
        if (j1 < R) {
            int rr = o + j1;
            rr = rr >= Cap ? rr - Cap : rr;
            const uint16_t* src = j1 < h ? ringB + rr * G * N : Bin;
#pragma unroll
            for (int v = 0; v < V; ++v) {
                bv[v] = *reinterpret_cast<const uint4*>(src + (v * kLeanDotThreads + q) * 8);
                acc = dotPiece<BF16>(bv[v], cv[v], acc);
            }
            if (blockIdx.x == 0 && j1 == h) {
                uint16_t* dstB = static_cast<uint16_t*>(p.ring_B) + ((int64_t)slot * Cap + rrNew) * G * N + g * N;
#pragma unroll
                for (int v = 0; v < V; ++v) *reinterpret_cast<uint4*>(dstB + (v * kLeanDotThreads + q) * 8) = bv[v];
            }
        }
        acc += __shfl_xor_sync(stream::kFull, acc, 4);
        acc += __shfl_xor_sync(stream::kFull, acc, 2);
        acc += __shfl_xor_sync(stream::kFull, acc, 1);
        if (q == 0 && j1 < R) sDot[j1] = acc;
    }
    __syncthreads();

    // ---- head records: lane j = record j (standard mode: every record j <= h is seen by the one token; on a
    //      flush step nf = R and the fold weights share the coefficients' decay factor)
    const float dot = lane < R ? sDot[lane] : 0.f;
#pragma unroll
    for (int k = 0; k < kLeanPrepHeadsPerWarp; ++k) {
        const int hl = warp + kLeanPrepWarps * k;
        if (hl >= nh) break;
        const float Ah = __shfl_sync(stream::kFull, Ak, k), Dh = __shfl_sync(stream::kFull, Dk, k);
        const float cum = scan::warpInclusiveSum(lane < R ? dtj[k] * Ah : 0.f, lane);
        const float cs = __shfl_sync(stream::kFull, cum, h);
        float* rec = ws + hl * RW;
        if (lane < R) {
            const float w = __expf(cs - cum) * dtj[k];
            float c = w * dot;
            if (lane == h) c += Dh;
            rec[kSplitCoef + lane] = c;
            if (flush) rec[kSplitCoef + L + 1 + lane] = w;
        }
        if (lane == 0) {
            rec[0] = __expf(cs);
            stream::putSplitRecordCursors(rec, flush ? __expf(cs) : 1.f, flush ? R : 0, o, h);
        }
    }
}

}  // namespace mamba2
}  // namespace rssm
