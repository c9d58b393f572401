// ReplaySSM Mamba-2 standard decode at small batch in one launch (fourteenth session): the split kernels' prep
// and readout (mamba2_split_prep_lean.cuh, mamba2_split_kernel.cuh) fused into one CTA per (row b, head).
//
// At B = 1 the split step is latency-bound: two dependent launches (prep -> readout through PDL) and a chain of
// round trips in each. Here one CTA of ceil(P / 8) warps owns all 8-row items of one (row, head):
//   1. once the slot is known, every load that does not need the cursors is issued: the warp's checkpoint rows,
//      every ring row's x block (lane = ring row, ring capacity <= 32), ring dt, C, z, this step's x / dt / B,
//      and all ring B rows of the head's group (ring rows past the committed records are loaded and not used);
//   2. the record dots B_r . C per ring row and for this step's B (8 threads per row, 16-byte pieces; the heads
//      of a group repeat these dots, which is cheap at small batch) go to shared memory (one barrier); this
//      step's x and dt of the head are appended to the ring, and the group's first head appends B;
//   3. every warp forms the head record in registers (prefix sums over its lanes = records, cursors mapped to
//      ring rows by shuffles): no workspace round trip, no second barrier;
//   4. each warp runs the split readout's item body on its rows (splitProcess), flush included.
// The newest record's B row is appended by the group's first head in the same launch, so the fold reads it from
// the step's B input instead (splitProcess's bNew); its x comes from the input too.
// Same function, records, appends, padding and invalid-cursor rules as the split kernels; standard mode, one
// token, writable checkpoints (fp32 / fp16 / bf16), no skip_flush_rows. The launcher (launchSplit) takes it when
// the grid (B x H CTAs) fits one wave and the rows are 16-byte aligned; RSSM_MAMBA2_FUSED=0|1 forces it off / on.
// The workspace is not used. A programmatic dependent launch after it (the commit, replay_commit.cu) may be
// scheduled from its start; the commit waits for this grid to complete before it moves the cursors.
#pragma once
#include "common/pdl.h"
#include "common/warp_scan.cuh"
#include "mamba2/mamba2_split_kernel.cuh"
#include "mamba2/mamba2_split_prep_lean.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kFusedMaxWarps = 16;  // headdim <= 128: one warp per 8-row item
constexpr int kFusedStagedRows = 32;  // MMAF: record B rows staged in shared memory (window <= 32)

// Dynamic shared memory: per warp the fold's buffers (MMAF: the tensor-core fold's transpose + weights; else the
// split readout's staging buffers). MMAF also has kFusedStagedRows B rows of static shared memory.
__host__ __device__ inline size_t splitFusedSmemBytesM2(int N, int warps, bool mmaFold) {
    return (size_t)warps * (mmaFold ? (size_t)foldmma::kFoldMmaStagedWarpBytes : splitReadoutWarpSmemBytesM2(N));
}

// MMAF (N = 128, bf16 activations): a flush folds on tensor cores from the B rows the record dots loaded, staged in
// shared memory in record order (no second load of the ring's B rows); else the split readout's CUDA-core fold,
// which stages them from global memory.
template <typename ST, int N, bool BF16, bool MMAF>
__global__ void __launch_bounds__(kFusedMaxWarps * 32) mamba2SplitFusedKernel(const Mamba2ReplayParams p) {
    static_assert(N % 64 == 0, "dstate: a multiple of 64 (8 threads x 16-byte pieces)");
    static_assert(!MMAF || (N == 128 && BF16), "the tensor-core fold: dstate 128, bf16 activations");
    constexpr int V = N / 64;
    constexpr int QPL = N / 128;
    using RS = stream::RowScatter<kSplitRows>;
    extern __shared__ __align__(16) unsigned char smemSplitFused[];
    __shared__ float sDot[kSplitMaxRecords + 1];  // per ring row; [Cap]: this step's B
    __shared__ __align__(16) uint16_t sBRec[MMAF ? kFusedStagedRows * foldmma::kBStride : 8];  // MMAF: B_j, j < R
    pdlChainEntryStep();  // RSSM_PDL_CHAIN (common/pdl.h); then the commit may be scheduled (it waits for this grid)
    const int head = blockIdx.x, b = blockIdx.y;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nthreads = blockDim.x;
    const int H = p.nheads, G = p.ngroups, P = p.headdim, L = p.window, Cap = p.ring_capacity;
    const int hpg = H / G, g = head / hpg;
    const int nrb = (P + kSplitRows - 1) / kSplitRows;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched (uniform over the CTA)
    const bool actBf16 = BF16;
    const int rl = RS::rowOf(lane), sub = lane & (RS::LPR - 1);
    const unsigned bh = (unsigned)b * H + head;
    const unsigned it = bh * (unsigned)nrb + warp;  // this warp's item (warp < nrb)
    const bool hasItem = warp < nrb;
    const int vw = warp * kSplitRows;
    const stream::ReadCopyScales rc{};
    const int64_t ringSlotRow = (int64_t)slot * Cap;

    // ---- every load that needs only the slot, before the cursors are loaded (Cap <= 32, launcher rule), so that
    //      the step has two dependent round trips (slot, then everything): the item's checkpoint rows; every ring
    //      row's x block (lane = ring row), C bits, z, this step's x block; ring dt (lane = ring row) and this
    //      step's dt; the dot threads' C pieces and their first ring B row (or this step's B).
    SplitItem<ST, N, 1> cur;
    uint4 xRing = make_uint4(0u, 0u, 0u, 0u), xNew = make_uint4(0u, 0u, 0u, 0u);
    const uint16_t* xIn = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b + (int64_t)head * p.stride_x_h;
    if (hasItem) {
        splitLoadRows(cur, p, rc, it, slot, nrb, rl);
        if (lane < Cap)
            xRing = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.ring_x) +
                                                    ((ringSlotRow + lane) * H + head) * P + vw);
        xNew = *reinterpret_cast<const uint4*>(xIn + vw);
        const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g +
                             lane * 4;
#pragma unroll
        for (int i = 0; i < QPL; ++i) cur.cq[0][i] = *reinterpret_cast<const uint2*>(Cg + 128 * i);
        cur.zv[0] = 0.f;
        const int row = vw + rl;
        if (p.z && sub == 0 && row < P)
            cur.zv[0] = __uint_as_float((uint32_t)(static_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                                   (int64_t)head * p.stride_z_h)[row]);
    }
    float dtRing = 0.f, dtBias = 0.f;
    if (lane < Cap) dtRing = p.ring_dt[(ringSlotRow + lane) * H + head];
    const int64_t dtOff = (int64_t)b * p.stride_dt_b + (int64_t)head * p.stride_dt_h;
    const float dtRaw = p.dt_dtype == RSSM_DTYPE_FP32 ? static_cast<const float*>(p.dt_raw)[dtOff]
                                                      : actToFloat(static_cast<const uint16_t*>(p.dt_raw)[dtOff], actBf16);
    if (p.dt_bias) dtBias = p.dt_bias[head];
    const float Ah = p.A[head];
    const float Dh = p.D ? p.D[head] : 0.f;
    const uint16_t* Bin = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)g * p.stride_B_g;
    const uint16_t* ringB = static_cast<const uint16_t*>(p.ring_B) + ringSlotRow * G * N + g * N;
    const uint16_t* Cin = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g;
    const int q = tid & (kLeanDotThreads - 1);
    const int rowsPerPass = nthreads / kLeanDotThreads, r0 = tid >> 3;
    uint4 cv[V], bv0[V];  // bv0: ring row r0 < Cap, or this step's B (r0 == Cap)
#pragma unroll
    for (int v = 0; v < V; ++v) cv[v] = *reinterpret_cast<const uint4*>(Cin + (v * kLeanDotThreads + q) * 8);
    if (r0 <= Cap) {
        const uint16_t* src = r0 < Cap ? ringB + (int64_t)r0 * G * N : Bin;
#pragma unroll
        for (int v = 0; v < V; ++v) bv0[v] = *reinterpret_cast<const uint4*>(src + (v * kLeanDotThreads + q) * 8);
    }
    // ---- the cursors
    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool valid = o >= 0 && o < Cap && h >= 0 && h <= L - 1 && h + 1 <= Cap;  // uniform over the CTA
    const int R = h + 1;
    const bool flush = R == L;
    const int rrNew = o + h >= Cap ? o + h - Cap : o + h;  // ring row of this step's record
    // ---- record dots per ring row r < Cap (B_r . C; rows past the committed records are not used) and for this
    //      step's B (row Cap); 8 threads per row, passes of nthreads / 8 rows (uniform over the CTA; one pass at the
    //      model shapes). MMAF flush steps also stage B_j of every record j < R in sBRec (record order).
    for (int base = 0; base <= Cap; base += rowsPerPass) {
        const int r = base + r0;
        float acc = 0.f;
        if (r <= Cap) {
            uint4 bv[V];
            if (base == 0) {
#pragma unroll
                for (int v = 0; v < V; ++v) bv[v] = bv0[v];
            } else {
                const uint16_t* src = r < Cap ? ringB + (int64_t)r * G * N : Bin;
#pragma unroll
                for (int v = 0; v < V; ++v) bv[v] = *reinterpret_cast<const uint4*>(src + (v * kLeanDotThreads + q) * 8);
            }
#pragma unroll
            for (int v = 0; v < V; ++v) acc = dotPiece<BF16>(bv[v], cv[v], acc);
            if (r == Cap && valid && head == g * hpg) {  // the group's first head appends this step's B
                uint16_t* dstB = static_cast<uint16_t*>(p.ring_B) + (ringSlotRow + rrNew) * G * N + g * N;
#pragma unroll
                for (int v = 0; v < V; ++v) *reinterpret_cast<uint4*>(dstB + (v * kLeanDotThreads + q) * 8) = bv[v];
            }
            if constexpr (MMAF) {
                if (flush && valid) {
                    int j = r - o;  // record index of ring row r; this step's B is record h
                    j = j < 0 ? j + Cap : j;
                    j = r == Cap ? h : j;
                    if (j < R && (r == Cap || j < h)) {
#pragma unroll
                        for (int v = 0; v < V; ++v)
                            *reinterpret_cast<uint4*>(sBRec + j * foldmma::kBStride + (v * kLeanDotThreads + q) * 8) =
                                bv[v];
                    }
                }
            }
        }
        acc += __shfl_xor_sync(stream::kFull, acc, 4);
        acc += __shfl_xor_sync(stream::kFull, acc, 2);
        acc += __shfl_xor_sync(stream::kFull, acc, 1);
        if (q == 0 && r <= Cap) sDot[r] = acc;
    }
    if constexpr (MMAF) {  // zero B rows from R up to the next 16 records (their fold weight is 0; 0 x NaN is not)
        if (flush && valid) {
            constexpr int kVec = foldmma::kBStride / 8;
            const int padRows = ((R + foldmma::kChunk - 1) / foldmma::kChunk) * foldmma::kChunk - R;
            for (int i = tid; i < padRows * kVec; i += nthreads)
                *reinterpret_cast<uint4*>(sBRec + (R + i / kVec) * foldmma::kBStride + (i % kVec) * 8) =
                    make_uint4(0u, 0u, 0u, 0u);
        }
    }
    // ---- this step's x and dt records of the head
    if (valid) {
        if (hasItem && lane == 0)
            *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.ring_x) + ((ringSlotRow + rrNew) * H + head) * P + vw) =
                xNew;
        if (warp == 0 && lane == 0) p.ring_dt[(ringSlotRow + rrNew) * H + head] = softplusF(dtRaw + dtBias);
    }
    __syncthreads();
    // ---- head record, formed by every warp in its registers (lane j = record j): coef_j, fw_j, gamma, cursors
    if (hasItem) {
        cur.b = b;
        cur.head = head;
        cur.vw = vw;
        cur.slot = slot;
        cur.nf = -1;  // invalid cursors: the item body poisons the outputs, writes nothing
        cur.o = 0;
        cur.gf = 0.f;
        if (valid) {
            int src = o + lane;
            src = src >= Cap ? src - Cap : src;
            src &= 31;  // Cap <= 32
            const float dtShfl = __shfl_sync(stream::kFull, dtRing, src);
            const float dtj = lane < h ? dtShfl : (lane == h ? softplusF(dtRaw + dtBias) : 0.f);
            const float dot = lane < h ? sDot[src] : (lane == h ? sDot[Cap] : 0.f);
            const float cum = scan::warpInclusiveSum(lane < R ? dtj * Ah : 0.f, lane);
            const float cs = __shfl_sync(stream::kFull, cum, h);
            const float w = lane < R ? __expf(cs - cum) * dtj : 0.f;
            const float gam = __expf(cs);
            cur.coef[0] = w * dot + (lane == h ? Dh : 0.f);
            cur.fw = flush ? w : 0.f;
            cur.gam[0] = gam;
            cur.nf = flush ? R : 0;
            cur.o = o;
            cur.gf = flush ? gam : 1.f;
            uint4 xs;
            xs.x = __shfl_sync(stream::kFull, xRing.x, src);
            xs.y = __shfl_sync(stream::kFull, xRing.y, src);
            xs.z = __shfl_sync(stream::kFull, xRing.z, src);
            xs.w = __shfl_sync(stream::kFull, xRing.w, src);
            cur.xq = lane < h ? xs : (lane == h ? xNew : make_uint4(0u, 0u, 0u, 0u));
        }
        uint16_t* sFold = reinterpret_cast<uint16_t*>(smemSplitFused + warp * splitFusedSmemBytesM2(N, 1, MMAF));
        splitProcess<ST, N, 1, MMAF>(cur, p, rl, sub, sFold, Bin, MMAF ? sBRec : nullptr);
    }
}

}  // namespace mamba2
}  // namespace rssm
