// Dual-precision decode kernels (templates over the read format; instantiated in
// dual_precision_decode_{mamba2,gdn}.cu). Grid (row tiles, heads, B), 128 threads. Per row: flush
// decided from the cursors; this step's records appended; outputs output-only (Eq. 6 / 11) from the
// read copy (non-flush) or the recurrence copy (flush; exact decode, warp per row). No checkpoint
// is written (the flush kernel does that). Internal header.
//
// Latency: right after the cursors, the CTA puts everything it reads in flight at once: the read-copy
// tile (registers, ReadChunk), the committed ring records of its tile (cp.async into dynamic shared
// memory: Mamba-2 x_j rows + B_j group rows, GDN u_j rows + k_j key rows; layout dpRingSmemBytes),
// and this step's tokens. The rest of the CTA then works from shared memory: two dependent memory
// round trips per CTA instead of one per record.
#pragma once
#include <stdlib.h>

#include "common/cp_async.cuh"
#include "common/pdl.h"
#include "common/read_rows.cuh"
#include "common/warp_scan.cuh"
#include "dual_precision/dp_read_chunk.cuh"
#include "dual_precision/dual_precision.h"

namespace rssm {
namespace dp {

constexpr int kMaxRecs = RSSM_DP_MAX_WINDOW + RSSM_DP_MAX_TOKENS;  // h + T <= L + T

// Dynamic shared memory of the decode kernels: committed records h <= window, each a tile row
// segment (tileRows 16-bit values: Mamba-2 x, GDN u) and a 128-wide 16-bit row (Mamba-2 B, GDN k).
__host__ __device__ __forceinline__ int dpRingSmemBytes(int window, int tileRows) {
    return window * (tileRows + kRowN) * 2;
}

// Issue cp.async of the committed records j < h of one row (ring slot base recBase = slot * Cap,
// origin o) into sRow [h][tileRows] (the row segment at rowOff of a record of rowRecStride elements,
// tileN % 8 == 0 values) and sVec [h][128] (the 128-wide row at vecOff of a record of vecRecStride).
__device__ __forceinline__ void stageRecords(uint16_t* sRow, uint16_t* sVec, const uint16_t* gRow,
                                             const uint16_t* gVec, int64_t recBase, int o, int Cap, int h,
                                             int tileRows, int tileN, int64_t rowRecStride, int64_t rowOff,
                                             int64_t vecRecStride, int64_t vecOff) {
    const int vr = tileN >> 3;
    for (int i = threadIdx.x; i < h * vr; i += kDecodeThreads) {
        const int j = i / vr, v = i - j * vr;
        async::copy16(sRow + j * tileRows + 8 * v, gRow + (recBase + (o + j) % Cap) * rowRecStride + rowOff + 8 * v);
    }
    for (int i = threadIdx.x; i < h * (kRowN / 8); i += kDecodeThreads) {
        const int j = i / (kRowN / 8), v = i % (kRowN / 8);
        async::copy16(sVec + j * kRowN + 8 * v, gVec + (recBase + (o + j) % Cap) * vecRecStride + vecOff + 8 * v);
    }
}

__device__ __forceinline__ float actVal(const void* base, int64_t i, bool bf16) {
    const uint16_t r = static_cast<const uint16_t*>(base)[i];
    return bf16 ? bf16Value(r) : fp16Value(r);
}
__device__ __forceinline__ uint16_t actBits(float v, bool bf16) {
    return bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}
__device__ __forceinline__ float4 actVal4(const void* base, int64_t i, bool bf16) {
    const uint2 w = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + i);
    if (bf16) return make_float4(bf16Value(w.x & 0xffffu), bf16Value(w.x >> 16), bf16Value(w.y & 0xffffu), bf16Value(w.y >> 16));
    return make_float4(fp16Value(w.x & 0xffffu), fp16Value(w.x >> 16), fp16Value(w.y & 0xffffu), fp16Value(w.y >> 16));
}
__device__ __forceinline__ float warpSumF(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

struct RowPlan {
    int slot, o, h;
    bool valid, flush;
};
__device__ __forceinline__ bool planRow(const DualPrecisionDecodeParams& p, int b, RowPlan* r) {
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return false;
    r->slot = slot;
    r->o = p.ring_origin[slot];
    r->h = p.ring_len[slot];
    const int T = p.num_tokens, L = p.window, Cap = p.ring_capacity;
    r->valid = r->o >= 0 && r->o < Cap && r->h >= 0 && (p.mode == 0 ? r->h <= L - 1 : r->h <= L) && r->h + T <= Cap;
    r->flush = p.mode == 0 ? (r->h + 1 == L) : (r->h + T > L);
    return true;
}
__device__ __forceinline__ CopyRef readCopy(const DualPrecisionDecodeParams& p) {
    return CopyRef{p.read_dtype, const_cast<void*>(p.ckpt_lp), p.stride_lp_slot, p.stride_lp_head, p.stride_lp_row,
                   const_cast<void*>(p.ckpt_lp_scale), const_cast<float*>(p.ckpt_lp_gscale)};
}
__device__ __forceinline__ CopyRef recurrenceCopy(const DualPrecisionDecodeParams& p) {
    return CopyRef{p.recurrence_dtype, const_cast<void*>(p.ckpt_hp), p.stride_hp_slot, p.stride_hp_head,
                   p.stride_hp_row, const_cast<float*>(p.ckpt_hp_scale), nullptr};
}

// ------------------------------------------------------------------------------------ Mamba-2
// CTAs per SM the decode kernels' register budget is set for (20-24 warps): the 16/32-bit formats
// fit without spills (a few bytes at 6 for the T = 1 instance), fp8 / nvfp4 hold more decode
// temporaries (nvfp4 spills ~230 B even at 4, ~390 B at 5).
constexpr int decodeMinBlocks(int fmt, bool one) {
    return fmt == RSSM_DTYPE_NVFP4 ? 4 : fmt == RSSM_DTYPE_FP8_E4M3 ? (one ? 5 : 4) : (one ? 6 : 5);
}

// FO = false: grid (row tiles, heads, B), one row per CTA. FO = true (flushOnly): only flushing rows and rows
// with invalid cursors are decoded here (a replay kernel decodes the other rows straight from the read
// copy: the stream and split paths). Its work items are (row group of kFlushGroup rows, head, row tile), in
// that order, and the grid is one wave of CTAs (launchDpDecodeAs), each taking a contiguous range of items:
// a CTA checks the cursors of a group's kFlushGroup rows once (one load chain, lanes < kFlushGroup) for all
// of its items in that group, then decodes the group's flushing rows for each item in turn. On a step where
// no row flushes, the kernel is one wave of cursor checks (a grid of one CTA per (row group, head, tile) took
// 7.7 us at B = 256, H = 128: five waves of dependent loads; a grid of one CTA per (row, head) 33 us).
constexpr int kFlushGroup = 8;
// FO (flushOnly) is a template argument so that the one-row instance keeps its register allocation (the
// row loop of the grouped instance costs spills). decodeRow(b, plan, row tile, head).
template <bool FO, typename RowFn>
__device__ __forceinline__ void dpDecodeRows(const DualPrecisionDecodeParams& p, int tileRows, RowFn decodeRow) {
    // defer_flush_rows: valid flushing rows are the flush's (outputs and records); invalid rows stay here (NaN outputs)
    if constexpr (!FO) {
        RowPlan rp;
        if (planRow(p, blockIdx.z, &rp) && !(p.defer_flush_rows && rp.valid && rp.flush))
            decodeRow(blockIdx.z, rp, (int)blockIdx.x, (int)blockIdx.y);
        return;
    }
    const int lane = threadIdx.x & 31;
    const int tiles = (p.headdim + tileRows - 1) / tileRows;
    const long long perGroup = (long long)p.nheads * tiles;
    const long long items = perGroup * ((p.batch + kFlushGroup - 1) / kFlushGroup);
    const long long i0 = items * blockIdx.x / gridDim.x, i1 = items * (blockIdx.x + 1) / gridDim.x;
    long long grp = -1;
    unsigned mask = 0u;
    for (long long it = i0; it < i1; ++it) {
        const long long g = it / perGroup;
        const int rem = (int)(it - g * perGroup);
        const int head = rem / tiles, tile = rem - head * tiles;
        const int b0 = (int)g * kFlushGroup;
        if (g != grp) {  // CTA-uniform
            grp = g;
            RowPlan mine;
            const bool take = lane < kFlushGroup && b0 + lane < p.batch && planRow(p, b0 + lane, &mine) &&
                              (!mine.valid || (mine.flush && !p.defer_flush_rows));
            mask = __ballot_sync(0xffffffffu, take);  // the same in every warp of the CTA
        }
        unsigned todo = mask;
        // launched as a programmatic dependent of the kernel that decoded the other rows: wait for it (and what it
        // waited for) before the first row is decoded; a CTA without flushing rows never waits
        if (todo) pdlWaitPrimary();
        while (todo) {
            const int i = __ffs(todo) - 1;
            todo &= todo - 1;
            RowPlan rp;
            planRow(p, b0 + i, &rp);
            decodeRow(b0 + i, rp, tile, head);
            __syncthreads();  // shared memory is reused by the next row
        }
    }
}
// ONE: instance for num_tokens == 1 (standard decode, and T = 1 verification): per-token arrays and
// the unrolled per-token loops shrink to one entry (fewer instructions and less shared memory).
// One (row tile, head, row b) of the decode; CTA-uniform early returns.
template <int RF, bool ONE>
__device__ __forceinline__ void mamba2DpDecodeRow(const DualPrecisionDecodeParams& p, int tileRows, int b, const RowPlan& rp,
                                                  int tileIdx, int head) {
    constexpr int N = kRowN;
    constexpr int kT = ONE ? 1 : RSSM_DP_MAX_TOKENS;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int H = p.nheads, P = p.headdim, G = p.ngroups, T = p.num_tokens, Cap = p.ring_capacity;
    const int tile0 = tileIdx * tileRows, tileEnd = min(P, tile0 + tileRows);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    uint16_t* y = static_cast<uint16_t*>(p.y);
    const int64_t yRow = (int64_t)b * T * H * P + (int64_t)head * P;  // + s*H*P + row
    if (!rp.valid) {
        for (int i = tid; i < T * (tileEnd - tile0); i += kDecodeThreads) {
            const int s = i / (tileEnd - tile0), row = tile0 + i % (tileEnd - tile0);
            y[yRow + (int64_t)s * H * P + row] = actBits(__uint_as_float(0x7fc00000u), bf16);
        }
        return;
    }
    const int slot = rp.slot, o = rp.o, h = rp.h, nrec = h + T;
    const bool useHp = rp.flush && p.ckpt_hp != nullptr;
    const int grp = head / (H / G);
    const int64_t slotRec = (int64_t)slot * Cap;
    extern __shared__ __align__(16) unsigned char dpSmem[];
    uint16_t* sXr = reinterpret_cast<uint16_t*>(dpSmem);  // [h][tileRows] committed x_j of the tile rows
    uint16_t* sBr = sXr + p.window * tileRows;             // [h][N] committed B_j of the group
    stageRecords(sXr, sBr, static_cast<const uint16_t*>(p.ring_x), static_cast<const uint16_t*>(p.ring_B),
                 slotRec, o, Cap, h, tileRows, tileEnd - tile0, (int64_t)H * P, (int64_t)head * P + tile0,
                 (int64_t)G * N, (int64_t)grp * N);
    ReadChunk<RF> chunk;
    if (!useHp) chunk.load(readCopy(p), slot, head, H, P, tile0, tileEnd);

    __shared__ __align__(16) float sC[kT * N];
    __shared__ __align__(16) float sDot[kT * 128];
    __shared__ float sDt[kMaxRecs], sCum[kMaxRecs], sCoef[kT][kMaxRecs], sGam[kT];
    for (int i = tid; i < T * N; i += kDecodeThreads) {
        const int s = i / N, n = i - s * N;
        sC[i] = actVal(p.Cm, (((int64_t)b * T + s) * G + grp) * N + n, bf16);
    }
    for (int j = tid; j < nrec; j += kDecodeThreads) {
        float dt;
        if (j < h) {
            dt = p.ring_dt[(slotRec + (o + j) % Cap) * H + head];
        } else {
            const int s = j - h;
            const int64_t off = ((int64_t)b * T + s) * H + head;
            float raw = p.dt_dtype == RSSM_DTYPE_FP32 ? static_cast<const float*>(p.dt_raw)[off] : actVal(p.dt_raw, off, bf16);
            if (p.dt_bias) raw += p.dt_bias[head];
            dt = softplusAcc(raw);
            if (tileIdx == 0) p.ring_dt[(slotRec + (o + h + s) % Cap) * H + head] = dt;
        }
        sDt[j] = dt;
    }
    async::waitAll();
    __syncthreads();
    // state part: sDot[s][row] = S0[row, :] . C_s
    if (!useHp) chunk.dots(sC, T, sDot, tileRows, tile0, tile0, tileEnd);
    else exactDots(recurrenceCopy(p), slot, head, H, P, sC, T, sDot, tileRows, tile0, tileEnd);
    if (warp == 0) scan::warpPrefixScaled(sDt, p.A[head], sCum, nrec);
    __syncthreads();
    // B_j . C_s (warp per record) -> coefficients exp(cum_{h+s} - cum_j) dt_j (B_j . C_s), j <= h + s
    const bool writeB = (head % (H / G) == 0) && tileIdx == 0;
    for (int j = warp; j < nrec; j += kDecodeThreads / 32) {
        float4 Bj;
        if (j < h) {
            Bj = actVal4(sBr, j * N + 4 * lane, bf16);
        } else {
            const int64_t src = (((int64_t)b * T + (j - h)) * G + grp) * N + 4 * lane;
            const uint2 bits = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.Bm) + src);
            if (writeB)
                *reinterpret_cast<uint2*>(static_cast<uint16_t*>(p.ring_B) + ((slotRec + (o + j) % Cap) * G + grp) * N +
                                          4 * lane) = bits;
            Bj = actVal4(p.Bm, src, bf16);
        }
        for (int s = (j > h ? j - h : 0); s < T; ++s) {
            const float4 c = *reinterpret_cast<const float4*>(sC + s * N + 4 * lane);
            const float d = warpSumF(Bj.x * c.x + Bj.y * c.y + Bj.z * c.z + Bj.w * c.w);
            if (lane == 0) sCoef[s][j] = expf(sCum[h + s] - sCum[j]) * sDt[j] * d;
        }
    }
    if (tid < T) sGam[tid] = expf(sCum[h + tid]);
    __syncthreads();
    // ring part and outputs: one state row per thread
    const float Dh = p.D ? p.D[head] : 0.f;
    for (int row = tile0 + tid; row < tileEnd; row += kDecodeThreads) {
        float acc[kT];
#pragma unroll
        for (int s = 0; s < kT; ++s) acc[s] = 0.f;
#pragma unroll 4
        for (int j = 0; j < nrec; ++j) {
            float xj;
            if (j < h) {
                xj = actVal(sXr, j * tileRows + row - tile0, bf16);
            } else {
                const uint16_t bits = static_cast<const uint16_t*>(p.x)[(((int64_t)b * T + (j - h)) * H + head) * P + row];
                static_cast<uint16_t*>(p.ring_x)[((slotRec + (o + j) % Cap) * H + head) * P + row] = bits;
                xj = bf16 ? bf16Value(bits) : fp16Value(bits);
            }
#pragma unroll
            for (int s = 0; s < kT; ++s)
                if (s < T && j <= h + s) acc[s] = fmaf(sCoef[s][j], xj, acc[s]);
        }
        for (int s = 0; s < T; ++s) {
            const int64_t io = (((int64_t)b * T + s) * H + head) * P + row;
            const float xs = actVal(p.x, io, bf16);
            float yv = fmaf(sGam[s], sDot[s * tileRows + row - tile0], acc[s]);
            yv = fmaf(Dh, xs, yv);
            if (p.z) {
                const float zv = actVal(p.z, io, bf16);
                yv *= zv / (1.f + expf(-zv));
            }
            y[io] = actBits(yv, bf16);
        }
    }
}

template <int RF, bool ONE, bool FO>
__global__ void __launch_bounds__(kDecodeThreads, decodeMinBlocks(RF, ONE))
    mamba2DpDecodeKernel(const DualPrecisionDecodeParams p, int tileRows) {
    dpDecodeRows<FO>(p, tileRows, [&](int b, const RowPlan& rp, int tileIdx, int head) {
        mamba2DpDecodeRow<RF, ONE>(p, tileRows, b, rp, tileIdx, head);
    });
}

// ---------------------------------------------------------------------------------------- GDN
// One (row tile, head, row b) of the decode; CTA-uniform early returns.
template <int RF, bool ONE>
__device__ __forceinline__ void gdnDpDecodeRow(const DualPrecisionDecodeParams& p, int tileRows, int b, const RowPlan& rp,
                                                  int tileIdx, int head) {
    constexpr int K = kRowN;
    constexpr int kT = ONE ? 1 : RSSM_DP_MAX_TOKENS;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int HV = p.nheads, V = p.headdim, HK = p.ngroups, T = p.num_tokens, Cap = p.ring_capacity;
    const int tile0 = tileIdx * tileRows, tileEnd = min(V, tile0 + tileRows);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    uint16_t* out = static_cast<uint16_t*>(p.o);
    if (!rp.valid) {
        for (int i = tid; i < T * (tileEnd - tile0); i += kDecodeThreads) {
            const int s = i / (tileEnd - tile0), row = tile0 + i % (tileEnd - tile0);
            out[(((int64_t)b * T + s) * HV + head) * V + row] = actBits(__uint_as_float(0x7fc00000u), bf16);
        }
        return;
    }
    const int slot = rp.slot, o = rp.o, h = rp.h, nrec = h + T;
    const bool useHp = rp.flush && p.ckpt_hp != nullptr;
    const int hk = head / (HV / HK);
    const int64_t slotRec = (int64_t)slot * Cap;
    extern __shared__ __align__(16) unsigned char dpSmem[];
    uint16_t* sUr = reinterpret_cast<uint16_t*>(dpSmem);  // [h][tileRows] committed fp16 u_j of the tile rows
    uint16_t* sKr = sUr + p.window * tileRows;             // [h][K] committed raw k_j of the key head
    stageRecords(sUr, sKr, static_cast<const uint16_t*>(p.ring_u), static_cast<const uint16_t*>(p.ring_k),
                 slotRec, o, Cap, h, tileRows, tileEnd - tile0, (int64_t)HV * V, (int64_t)head * V + tile0,
                 (int64_t)HK * K, (int64_t)hk * K);
    ReadChunk<RF> chunk;
    if (!useHp) chunk.load(readCopy(p), slot, head, HV, V, tile0, tileEnd);

    // sVec rows 0..T-1: kn of the drafts; rows T..2T-1: qn_s * scale
    __shared__ __align__(16) float sVec[2 * kT * K];
    __shared__ __align__(16) float sDot[2 * kT * 128];
    __shared__ float sG[kMaxRecs], sCum[kMaxRecs], sBeta[kT], sGam[kT];
    __shared__ float sCK[kT][kMaxRecs], sCQ[kT][kMaxRecs];
    const float qscale = p.scale > 0.f ? p.scale : rsqrtf((float)K);
    const bool writeK = (head % (HV / HK) == 0) && tileIdx == 0;
    for (int s = warp; s < T; s += kDecodeThreads / 32) {
        const int64_t src = (((int64_t)b * T + s) * HK + hk) * K + 4 * lane;
        const uint2 kbits = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p.k) + src);
        if (writeK)
            *reinterpret_cast<uint2*>(static_cast<uint16_t*>(p.ring_k) + ((slotRec + (o + h + s) % Cap) * HK + hk) * K +
                                      4 * lane) = kbits;
        const float4 k = actVal4(p.k, src, bf16), q = actVal4(p.q, src, bf16);
        const float ik = 1.f / sqrtf(warpSumF(k.x * k.x + k.y * k.y + k.z * k.z + k.w * k.w) + 1e-6f);
        const float iq = qscale / sqrtf(warpSumF(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w) + 1e-6f);
        *reinterpret_cast<float4*>(sVec + s * K + 4 * lane) = make_float4(k.x * ik, k.y * ik, k.z * ik, k.w * ik);
        *reinterpret_cast<float4*>(sVec + (T + s) * K + 4 * lane) = make_float4(q.x * iq, q.y * iq, q.z * iq, q.w * iq);
    }
    for (int j = tid; j < nrec; j += kDecodeThreads) {
        float g;
        if (j < h) {
            g = p.ring_g[(slotRec + (o + j) % Cap) * HV + head];
        } else {
            const int s = j - h;
            const int64_t off = ((int64_t)b * T + s) * HV + head;
            const float av = actVal(p.a, off, bf16), bv = actVal(p.b, off, bf16);
            g = -expf(p.A_log[head]) * softplusAcc(av + p.gdn_dt_bias[head]);
            const float beta = 1.f / (1.f + expf(-bv));
            sBeta[s] = beta;
            if (tileIdx == 0) {
                const int64_t r = (slotRec + (o + h + s) % Cap) * HV + head;
                p.ring_g[r] = g;
                if (p.ring_beta) p.ring_beta[r] = beta;
            }
        }
        sG[j] = g;
    }
    async::waitAll();
    __syncthreads();
    if (!useHp) chunk.dots(sVec, 2 * T, sDot, tileRows, tile0, tile0, tileEnd);
    else exactDots(recurrenceCopy(p), slot, head, HV, V, sVec, 2 * T, sDot, tileRows, tile0, tileEnd);
    if (warp == 0) scan::warpPrefixScaled(sG, 1.f, sCum, nrec);
    __syncthreads();
    // coefficients: CK[s][j] = exp(cum_{h+s} - cum_j) kn_j . kn_{h+s} (j < h+s), CQ[s][j] (j <= h+s) with qn_s
    for (int j = warp; j < nrec; j += kDecodeThreads / 32) {
        float4 kn;
        if (j < h) {
            const float4 k = actVal4(sKr, j * K + 4 * lane, bf16);
            const float ik = 1.f / sqrtf(warpSumF(k.x * k.x + k.y * k.y + k.z * k.z + k.w * k.w) + 1e-6f);
            kn = make_float4(k.x * ik, k.y * ik, k.z * ik, k.w * ik);
        } else {
            kn = *reinterpret_cast<const float4*>(sVec + (j - h) * K + 4 * lane);
        }
        for (int s = (j > h ? j - h : 0); s < T; ++s) {
            const float4 ks = *reinterpret_cast<const float4*>(sVec + s * K + 4 * lane);
            const float4 qs = *reinterpret_cast<const float4*>(sVec + (T + s) * K + 4 * lane);
            const float dk = warpSumF(kn.x * ks.x + kn.y * ks.y + kn.z * ks.z + kn.w * ks.w);
            const float dq = warpSumF(kn.x * qs.x + kn.y * qs.y + kn.z * qs.z + kn.w * qs.w);
            if (lane == 0) {
                const float dec = expf(sCum[h + s] - sCum[j]);
                sCK[s][j] = j < h + s ? dec * dk : 0.f;
                sCQ[s][j] = dec * dq;
            }
        }
    }
    if (tid < T) sGam[tid] = expf(sCum[h + tid]);
    __syncthreads();
    // per state row: committed sums, then the draft solve (Eq. 10) and outputs (Eq. 11)
    for (int row = tile0 + tid; row < tileEnd; row += kDecodeThreads) {
        float accK[kT], accQ[kT], uD[kT];
#pragma unroll
        for (int s = 0; s < kT; ++s) accK[s] = accQ[s] = uD[s] = 0.f;
#pragma unroll 4
        for (int j = 0; j < h; ++j) {
            const float uj = fp16Value(sUr[j * tileRows + row - tile0]);
#pragma unroll
            for (int s = 0; s < kT; ++s)
                if (s < T) {
                    accK[s] = fmaf(sCK[s][j], uj, accK[s]);
                    accQ[s] = fmaf(sCQ[s][j], uj, accQ[s]);
                }
        }
#pragma unroll
        for (int s = 0; s < kT; ++s) {
            if (s >= T) break;
            float kk = fmaf(sGam[s], sDot[s * tileRows + row - tile0], accK[s]);
#pragma unroll
            for (int t = 0; t < s; ++t) kk = fmaf(sCK[s][h + t], uD[t], kk);
            const int64_t io = (((int64_t)b * T + s) * HV + head) * V + row;
            const uint16_t vbits = static_cast<const uint16_t*>(p.v)[io];
            const float vv = bf16 ? bf16Value(vbits) : fp16Value(vbits);
            const float u = sBeta[s] * (vv - kk);
            uD[s] = u;
            float ov = fmaf(sGam[s], sDot[(T + s) * tileRows + row - tile0], accQ[s]);
#pragma unroll
            for (int t = 0; t <= s; ++t) ov = fmaf(sCQ[s][h + t], uD[t], ov);
            out[io] = actBits(ov, bf16);
            const int64_t rr = ((slotRec + (o + h + s) % Cap) * HV + head) * V + row;
            static_cast<uint16_t*>(p.ring_u)[rr] = __half_as_ushort(__float2half_rn(u));
            if (p.ring_v) static_cast<uint16_t*>(p.ring_v)[rr] = vbits;
        }
    }
}

template <int RF, bool ONE, bool FO>
__global__ void __launch_bounds__(kDecodeThreads, decodeMinBlocks(RF, ONE))
    gdnDpDecodeKernel(const DualPrecisionDecodeParams p, int tileRows) {
    dpDecodeRows<FO>(p, tileRows, [&](int b, const RowPlan& rp, int tileIdx, int head) {
        gdnDpDecodeRow<RF, ONE>(p, tileRows, b, rp, tileIdx, head);
    });
}

// ---- host: the read copy's scale tensors as the split readouts take them (fp8 / nvfp4 read copies)
inline stream::ReadCopyScales readCopyScales(const DualPrecisionDecodeParams& p) {
    stream::ReadCopyScales rc;
    rc.scale = p.ckpt_lp_scale;
    rc.gscale = p.ckpt_lp_gscale;
    rc.nheads = p.nheads;
    rc.headdim = p.headdim;
    return rc;
}

// ---- host: the decode kernel of a family for the read format, token count and flush-only mode
struct Mamba2DpKernels {
    template <int RF, bool ONE, bool FO>
    static auto kernel() { return &mamba2DpDecodeKernel<RF, ONE, FO>; }
};
struct GdnDpKernels {
    template <int RF, bool ONE, bool FO>
    static auto kernel() { return &gdnDpDecodeKernel<RF, ONE, FO>; }
};
// Grid of a decode launch: (row tiles, heads, B) CTAs, or for the flush-only instances one wave of CTAs (at most
// one per (row group, head, row tile) item; dpDecodeRows).
template <bool FO, typename Kernel>
void launchDpDecodeGrid(Kernel kernel, const DualPrecisionDecodeParams& p, int tileRows, int smem, cudaStream_t s) {
    const int tiles = (p.headdim + tileRows - 1) / tileRows;
    if (!FO) {
        launchDpDecode(kernel, dim3(tiles, p.nheads, p.batch), smem, s, p, tileRows);
        return;
    }
    const long long items = (long long)tiles * p.nheads * ((p.batch + kFlushGroup - 1) / kFlushGroup);
    long long wave = (long long)occupancyPerSm(reinterpret_cast<const void*>(kernel), kDecodeThreads, smem) *
                     deviceSmCount();
    // RSSM_DP_FLUSH_ONLY_CTAS=n (tests): at most n CTAs, so each takes many items across row groups
    if (const char* e = getenv("RSSM_DP_FLUSH_ONLY_CTAS")) {
        const long long n = atoll(e);
        if (n > 0 && n < wave) wave = n;
    }
    launchDpDecode(kernel, dim3((unsigned)(items < wave ? items : wave)), smem, s, p, tileRows, true);
}
template <typename Family, bool ONE, bool FO>
void launchDpDecodeAs(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    const int smem = dpRingSmemBytes(p.window, tileRows);  // <= 64 * 256 * 2 = 32 KB
    switch (p.ckpt_lp ? p.read_dtype : RSSM_DTYPE_FP32) {
        case RSSM_DTYPE_FP32: launchDpDecodeGrid<FO>(Family::template kernel<RSSM_DTYPE_FP32, ONE, FO>(), p, tileRows, smem, s); break;
        case RSSM_DTYPE_FP16: launchDpDecodeGrid<FO>(Family::template kernel<RSSM_DTYPE_FP16, ONE, FO>(), p, tileRows, smem, s); break;
        case RSSM_DTYPE_BF16: launchDpDecodeGrid<FO>(Family::template kernel<RSSM_DTYPE_BF16, ONE, FO>(), p, tileRows, smem, s); break;
        case RSSM_DTYPE_FP8_E4M3: launchDpDecodeGrid<FO>(Family::template kernel<RSSM_DTYPE_FP8_E4M3, ONE, FO>(), p, tileRows, smem, s); break;
        default: launchDpDecodeGrid<FO>(Family::template kernel<RSSM_DTYPE_NVFP4, ONE, FO>(), p, tileRows, smem, s); break;
    }
}
// The decode launch of a family: T = 1 instances for one token, flush-only instances when another kernel
// decoded the non-flush rows.
template <typename Family>
void launchDpDecodeRows(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s, bool flushOnly) {
    if (p.num_tokens == 1) {
        if (flushOnly) launchDpDecodeAs<Family, true, true>(p, tileRows, s);
        else launchDpDecodeAs<Family, true, false>(p, tileRows, s);
    } else {
        if (flushOnly) launchDpDecodeAs<Family, false, true>(p, tileRows, s);
        else launchDpDecodeAs<Family, false, false>(p, tileRows, s);
    }
}

}  // namespace dp
}  // namespace rssm
