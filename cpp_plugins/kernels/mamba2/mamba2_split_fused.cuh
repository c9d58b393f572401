// ReplaySSM Mamba-2 standard decode at small batch in one launch (fourteenth session): the split kernels' prep
// and readout (mamba2_split_prep_lean.cuh, mamba2_split_kernel.cuh) fused into one CTA per (row b, head).
//
// At B = 1 the split step is latency-bound: two dependent launches (prep -> readout through PDL) and a chain of
// round trips in each. Here one CTA of ceil(P / 8) warps owns all 8-row items of one (row, head):
//   1. every warp issues its item's checkpoint rows (nothing in this launch writes them before the flush);
//   2. the CTA reads the row's cursors, forms the record dots B_j . C of the head's group (8 threads per
//      record, 16-byte pieces; the 16 heads of a group repeat these dots, which is cheap at small batch),
//      appends this step's x and dt of its head to the ring, and the group's first head appends B;
//   3. warp 0 writes the head record (the split readout's layout, in the same workspace) after the prefix sums;
//   4. each warp runs the split readout's item body on its rows (splitIssue / splitProcess), flush included.
// The ring rows read in step 4 were appended by this CTA (x, dt; visible after __syncthreads) except the newest
// record's B row, which the group's first head appends in the same launch: the fold reads that row from the
// step's B input instead (splitProcess's bNew), and the record dots read it from the input too.
// Same function, records, appends, padding and invalid-cursor rules as the split kernels; standard mode, one
// token, writable checkpoints (fp32 / fp16 / bf16), no skip_flush_rows. The launcher (launchSplit) takes it when
// the grid (B x H CTAs) fits one wave and the rows are 16-byte aligned; RSSM_MAMBA2_FUSED=0|1 forces it off / on.
// The commit that follows is launched as a programmatic dependent (replay_commit.cu): this kernel lets it be
// scheduled at its start; the commit waits for this grid to complete before it moves the cursors.
#pragma once
#include "common/pdl.h"
#include "common/warp_scan.cuh"
#include "mamba2/mamba2_split_kernel.cuh"
#include "mamba2/mamba2_split_prep_lean.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kFusedMaxWarps = 16;  // headdim <= 128: one warp per 8-row item

// Dynamic shared memory: the split readout's fold buffers, one per warp.
__host__ __device__ inline size_t splitFusedSmemBytesM2(int N, int warps) {
    return (size_t)warps * splitReadoutWarpSmemBytesM2(N);
}

template <typename ST, int N, bool BF16>
__global__ void __launch_bounds__(kFusedMaxWarps * 32) mamba2SplitFusedKernel(const Mamba2ReplayParams p) {
    static_assert(N % 64 == 0, "dstate: a multiple of 64 (8 threads x 16-byte pieces)");
    constexpr int V = N / 64;
    using RS = stream::RowScatter<kSplitRows>;
    extern __shared__ __align__(16) unsigned char smemSplitFused[];
    __shared__ float sDot[kSplitMaxRecords];
    __shared__ int4 sMeta;
    pdlLaunchDependents();  // the commit may be scheduled; it waits for this grid to complete
    const int head = blockIdx.x, b = blockIdx.y;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nthreads = blockDim.x;
    const int H = p.nheads, G = p.ngroups, P = p.headdim, L = p.window, Cap = p.ring_capacity;
    const int hpg = H / G, g = head / hpg;
    const int nrb = (P + kSplitRows - 1) / kSplitRows;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched (uniform over the CTA)
    const int rl = RS::rowOf(lane), sub = lane & (RS::LPR - 1);
    const int RW = splitRecordWordsM2(L, 1);
    const unsigned bh = (unsigned)b * H + head;
    const unsigned it = bh * (unsigned)nrb + warp;  // this warp's item (warp < nrb)
    const bool hasItem = warp < nrb;
    const stream::ReadCopyScales rc{};
    SplitItem<ST, N, 1> cur;
    if (hasItem) splitLoadRows(cur, p, rc, it, slot, nrb, rl);

    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool valid = o >= 0 && o < Cap && h >= 0 && h <= L - 1 && h + 1 <= Cap;
    const int R = h + 1;
    const bool flush = R == L;
    const uint16_t* Bin = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)g * p.stride_B_g;
    float dtj = 0.f, Ah = 0.f, Dh = 0.f;
    if (valid) {  // uniform over the CTA
        const int rrNew = o + h >= Cap ? o + h - Cap : o + h;  // ring row of this step's record
        const int64_t ringSlotRow = (int64_t)slot * Cap;
        // ---- x of this head (16-byte pieces) and, in warp 0, dt_j of the head's records (lane j)
        const int ppr = P / 8;
        if (tid < ppr) {
            const uint4 xv = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b +
                                                             (int64_t)head * p.stride_x_h + tid * 8);
            *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.ring_x) + ((ringSlotRow + rrNew) * H + head) * P + tid * 8) = xv;
        }
        if (warp == 0) {
            int rr = o + lane;
            rr = rr >= Cap ? rr - Cap : rr;
            if (lane < h) dtj = p.ring_dt[(ringSlotRow + rr) * H + head];
            Ah = p.A[head];
            Dh = p.D ? p.D[head] : 0.f;
            if (lane == h) {
                dtj = loadDt(p.dt_raw, p.dt_dtype == RSSM_DTYPE_FP32, BF16,
                             (int64_t)b * p.stride_dt_b + (int64_t)head * p.stride_dt_h, p.dt_bias, head);
                p.ring_dt[(ringSlotRow + rrNew) * H + head] = dtj;
            }
        }
        // ---- record dots B_j . C (8 threads per record; passes of nthreads / 8 records, uniform over the CTA)
        const uint16_t* ringB = static_cast<const uint16_t*>(p.ring_B) + ringSlotRow * G * N + g * N;
        const uint16_t* Cin = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g;
        const int q = tid & (kLeanDotThreads - 1);
        uint4 cv[V];
#pragma unroll
        for (int v = 0; v < V; ++v) cv[v] = *reinterpret_cast<const uint4*>(Cin + (v * kLeanDotThreads + q) * 8);
        for (int base = 0; base < R; base += nthreads / kLeanDotThreads) {
            const int j = base + (tid >> 3);
            float acc = 0.f;
            if (j < R) {
                int rr = o + j;
                rr = rr >= Cap ? rr - Cap : rr;
                const uint16_t* src = j < h ? ringB + (int64_t)rr * G * N : Bin;
                uint4 bv[V];
#pragma unroll
                for (int v = 0; v < V; ++v) {
                    bv[v] = *reinterpret_cast<const uint4*>(src + (v * kLeanDotThreads + q) * 8);
                    acc = dotPiece<BF16>(bv[v], cv[v], acc);
                }
                if (j == h && head == g * hpg) {  // the group's first head appends this step's B
                    uint16_t* dstB = static_cast<uint16_t*>(p.ring_B) + (ringSlotRow + rrNew) * G * N + g * N;
#pragma unroll
                    for (int v = 0; v < V; ++v) *reinterpret_cast<uint4*>(dstB + (v * kLeanDotThreads + q) * 8) = bv[v];
                }
            }
            acc += __shfl_xor_sync(stream::kFull, acc, 4);
            acc += __shfl_xor_sync(stream::kFull, acc, 2);
            acc += __shfl_xor_sync(stream::kFull, acc, 1);
            if (q == 0 && j < R) sDot[j] = acc;
        }
    }
    __syncthreads();
    // ---- head record (warp 0): lane j = record j; the split readout reads coefficients and fold weights from it
    if (warp == 0) {
        float* rec = static_cast<float*>(p.workspace) + (size_t)bh * RW;
        if (valid) {
            const float dot = lane < R ? sDot[lane] : 0.f;
            const float cum = scan::warpInclusiveSum(lane < R ? dtj * Ah : 0.f, lane);
            const float cs = __shfl_sync(stream::kFull, cum, h);
            if (lane < R) {
                const float w = __expf(cs - cum) * dtj;
                float c = w * dot;
                if (lane == h) c += Dh;
                rec[kSplitCoef + lane] = c;
                if (flush) rec[kSplitCoef + L + 1 + lane] = w;
            }
            if (lane == 0) {
                const float gam = __expf(cs);
                rec[0] = gam;
                sMeta = make_int4(__float_as_int(flush ? gam : 1.f), flush ? R : 0, o, h);
            }
        } else if (lane == 0) {
            sMeta = make_int4(0, -1, 0, 0);  // invalid cursors: the item body poisons the outputs, writes nothing
        }
    }
    __syncthreads();
    if (hasItem) {
        uint16_t* sFold = reinterpret_cast<uint16_t*>(smemSplitFused + warp * splitReadoutWarpSmemBytesM2(N));
        splitIssue(cur, p, rc, it, slot, sMeta, nrb, rl, sub, /*rowsLoaded=*/true);
        splitProcess<ST, N, 1, false>(cur, p, rl, sub, sFold, Bin);
    }
}

}  // namespace mamba2
}  // namespace rssm
