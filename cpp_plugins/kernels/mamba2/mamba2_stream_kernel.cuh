// ReplaySSM Mamba-2 decode, variant 3 ("stream" kernel): standard (Algorithm 1) and speculative
// (Algorithm 2) modes with the checkpoint rows of one (row b, head) held in registers in the
// column-per-lane layout of common/stream_rows.cuh. Same math, records, appends and skip rules as
// mamba2_replay_kernel.cuh (variant 0): with la_j = dt_j A and cum_k = sum_{i<=k} la_i,
//   y_s[p] = exp(cum_{h+s}) (S[p,:] . C_s) + sum_{j<=h+s} exp(cum_{h+s} - cum_j) dt_j (B_j . C_s) x_j[p]
//            + D x_s[p],   times silu(z_s[p]) with a gate,
// flush: S <- exp(cum_{nf-1}) S + sum_{j<nf} exp(cum_{nf-1} - cum_j) dt_j x_j B_j^T (written in place).
// One CTA per (head, row): ceil(P / RW) warps, warp w owns rows w*RW .. w*RW+RW-1 (RW = 16 at N = 128
// with T <= 2, else 8); lane l owns the state columns of quads l + 32 i (N = 128 or 256). The
// checkpoint rows are loaded right after the slot index, before the cursors are read.
#pragma once
#include "common/stream_rows.cuh"
#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

__host__ __device__ constexpr int streamRowsPerWarpM2(int N, int maxT) { return (N == 128 && maxT <= 2) ? 16 : 8; }
// Dynamic shared memory: x bits [R + T][P] and B bits [R + T][N] of the records, R = L (committed
// records in logical order) or C (full-ring mode: every ring row in physical order).
__host__ __device__ inline size_t replayStreamSmemBytesM2(int R, int T, int P, int N) {
    return (size_t)(R + T) * (size_t)(P + N) * 2u;
}

template <typename ST, int N, int MAXT>
__global__ void __launch_bounds__(512) mamba2ReplayStreamKernel(const Mamba2ReplayParams p, int full_ring) {
    constexpr int QPL = N / 128;
    constexpr int RW = streamRowsPerWarpM2(N, MAXT);
    using RS = stream::RowScatter<RW>;
    constexpr int LPR = RS::LPR;
    constexpr int MAXREC = RSSM_MAMBA2_MAX_WINDOW + MAXT;

    const int b = blockIdx.z, head = blockIdx.y;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int P = p.headdim, H = p.nheads, G = p.ngroups;
    const int T = p.num_tokens, L = p.window, Cap = p.ring_capacity;
    const int hpg = H / G, g = head / hpg;
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int NT = blockDim.x, NW = NT >> 5;
    const int vw = warp * RW;  // first row of this warp

    // ---- 1. checkpoint rows -> registers (depend on the slot only)
    ST* ckpt = static_cast<ST*>(p.state) + (int64_t)slot * p.stride_state_slot + (int64_t)head * p.stride_state_head;
    const int rowL = RS::rowOf(lane);  // this lane's row after the reductions; slot r holds row r ^ rowL
    float4 S[RW][QPL];
    stream::loadWarpRows<RW, QPL, ST>(S, ckpt, p.stride_state_p, vw, P, rowL, lane);

    uint16_t* yg = static_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b + (int64_t)head * p.stride_y_h;
    const int64_t ringRowSlot = (int64_t)slot * Cap;
    // Shared rows of the records: committed records in rows 0..h-1 (logical order), or, in full-ring
    // mode (small batches, the launcher's choice), every ring row in physical order (rows 0..C-1,
    // copied before the cursors are read); this step's tokens follow at row R + s.
    const int R = full_ring ? Cap : L;
    extern __shared__ __align__(128) unsigned char smemM2[];
    uint16_t* sXs = reinterpret_cast<uint16_t*>(smemM2);  // [R + T][P] x_j bits
    uint16_t* sRB = sXs + (size_t)(R + T) * P;             // [R + T][N] B_j bits
    __shared__ __align__(16) float sC[MAXT][N];
    __shared__ float sZ[MAXT][128];                        // silu(z_s[p]) (1 without a gate); P <= 128
    __shared__ float sDt[MAXREC], sCum[MAXREC], sFw[MAXREC];
    __shared__ float sDtRing[MAXREC];                      // full-ring mode: ring dt of every ring row
    __shared__ float sCoef[MAXT][MAXREC];
    __shared__ float sGam[MAXT + 1];

    // ---- 2. committed records: B_j (group row), x_j (head rows) by cp.async, dt_j: n ring rows from
    //         ring index `first` into shared rows 0..n-1
    auto issueRecords = [&](int n, int first, float* dtDst) {
        const uint16_t* rB = static_cast<const uint16_t*>(p.ring_B);
        constexpr int kBV = N / 8;
        for (int i = tid; i < n * kBV; i += NT) {
            const int j = i / kBV, v = i - j * kBV;
            cpAsync16(sRB + j * N + v * 8, rB + ((ringRowSlot + (first + j) % Cap) * G + g) * N + v * 8);
        }
        const uint16_t* rX = static_cast<const uint16_t*>(p.ring_x);
        const int nvec = P >> 3;  // P % 8 == 0
        for (int i = tid; i < n * nvec; i += NT) {
            const int j = i / nvec, v = i - j * nvec;
            cpAsync16(sXs + j * P + v * 8, rX + ((ringRowSlot + (first + j) % Cap) * H + head) * P + v * 8);
        }
        cpAsyncCommit();
        for (int j = tid; j < n; j += NT) cpAsync4(dtDst + j, p.ring_dt + (ringRowSlot + (first + j) % Cap) * H + head);
    };
    if (full_ring) issueRecords(Cap, 0, sDtRing);

    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool valid = o >= 0 && o < Cap && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L) && h + T <= Cap;
    if (!valid) {  // cursor invariant broken (a bug upstream): poison this row's outputs, touch nothing
        for (int i = tid; i < T * P; i += NT) {
            const int s = i / P, row = i - s * P;
            yg[s * p.stride_y_t + row] = floatToAct(__int_as_float(0x7fc00000), actBf16);
        }
        cpAsyncWaitAll();  // drain the copies into this CTA's shared memory (full-ring mode)
        return;
    }
    const bool flush = p.mode == 0 ? (h + 1 == L) : (h + T > L);
    const int nf = flush ? (p.mode == 0 ? h + 1 : h) : 0;  // records folded into the checkpoint
    const int nrec = h + T;
    if (!full_ring) issueRecords(h, o, sDt);
    auto recRow = [&](int j) {  // shared row of record j (committed j < h, this step's tokens after)
        if (j >= h) return R + (j - h);
        if (!full_ring) return j;
        const int r = o + j;
        return r >= Cap ? r - Cap : r;
    };

    // ---- 3. this step's tokens: records h..h+T-1, appended to the ring
    {
        const bool writeB = head % hpg == 0;  // one CTA per group writes ring_B
        const uint16_t* Bg = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)g * p.stride_B_g;
        const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g;
        uint16_t* wB = static_cast<uint16_t*>(p.ring_B);
        for (int i = tid; i < T * N; i += NT) {
            const int s = i / N, n = i - s * N;
            const uint16_t bb = Bg[s * p.stride_B_t + n];
            sRB[(R + s) * N + n] = bb;
            sC[s][n] = actToFloat(Cg[s * p.stride_C_t + n], actBf16);
            if (writeB) wB[((ringRowSlot + (o + h + s) % Cap) * G + g) * N + n] = bb;
        }
        if (tid < T) {
            const float dt = loadDt(p.dt_raw, dtF32, actBf16,
                                    (int64_t)b * p.stride_dt_b + (int64_t)tid * p.stride_dt_t + (int64_t)head * p.stride_dt_h,
                                    p.dt_bias, head);
            sDt[h + tid] = dt;
            p.ring_dt[(ringRowSlot + (o + h + tid) % Cap) * H + head] = dt;
        }
        const uint16_t* xg = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b + (int64_t)head * p.stride_x_h;
        const uint16_t* zg =
            p.z ? static_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b + (int64_t)head * p.stride_z_h : nullptr;
        uint16_t* wX = static_cast<uint16_t*>(p.ring_x);
        for (int i = tid; i < T * P; i += NT) {
            const int s = i / P, row = i - s * P;
            const uint16_t bits = xg[s * p.stride_x_t + row];
            sXs[(R + s) * P + row] = bits;
            sZ[s][row] = zg ? siluF(actToFloat(zg[s * p.stride_z_t + row], actBf16)) : 1.f;
            wX[((ringRowSlot + (o + h + s) % Cap) * H + head) * P + row] = bits;
        }
    }
    cpAsyncWaitAll();
    __syncthreads();  // (A)
    if (full_ring) {  // committed dt in logical order (sDt[h..] holds this step's tokens)
        for (int j = tid; j < h; j += NT) sDt[j] = sDtRing[recRow(j)];
        __syncthreads();
    }

    // ---- 4. prefix sums of the log-decays (warp 0), K^T Q dots (all warps, a record per warp)
    const float Ah = p.A[head];
    if (warp == 0) {
        float carry = 0.f;
        for (int base = 0; base < nrec; base += 32) {
            const int j = base + lane;
            float v = j < nrec ? sDt[j] * Ah : 0.f;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const float t = __shfl_up_sync(stream::kFull, v, off);
                if (lane >= off) v += t;
            }
            v += carry;
            if (j < nrec) sCum[j] = v;
            carry = __shfl_sync(stream::kFull, v, 31);
        }
    }
    for (int j = warp; j < nrec; j += NW) {
        float4 bq[QPL];
#pragma unroll
        for (int i = 0; i < QPL; ++i)
            bq[i] = stream::u2ToF4(*reinterpret_cast<const uint2*>(sRB + recRow(j) * N + (lane + 32 * i) * 4), actBf16);
        for (int s = (j > h ? j - h : 0); s < T; ++s) {  // token s sees records j <= h + s
            float acc = 0.f;
#pragma unroll
            for (int i = 0; i < QPL; ++i) {
                const float4 c4 = *reinterpret_cast<const float4*>(&sC[s][(lane + 32 * i) * 4]);
                acc = fmaf(bq[i].x, c4.x, fmaf(bq[i].y, c4.y, fmaf(bq[i].z, c4.z, fmaf(bq[i].w, c4.w, acc))));
            }
#pragma unroll
            for (int m = 16; m >= 1; m >>= 1) acc += __shfl_xor_sync(stream::kFull, acc, m);
            if (lane == 0) sCoef[s][j] = acc;
        }
    }
    __syncthreads();  // (B)
    // ---- output coefficients exp(cum_{h+s} - cum_j) dt_j (B_j . C_s), gammas, fold weights
    for (int i = tid; i < T * nrec; i += NT) {
        const int s = i / nrec, j = i - s * nrec;
        sCoef[s][j] = j <= h + s ? __expf(sCum[h + s] - sCum[j]) * sDt[j] * sCoef[s][j] : 0.f;
    }
    if (tid < T) sGam[tid] = __expf(sCum[h + tid]);
    if (nf > 0) {
        const float cl = sCum[nf - 1];
        for (int j = tid; j < nf; j += NT) sFw[j] = __expf(cl - sCum[j]) * sDt[j];
        if (tid == 0) sGam[MAXT] = __expf(cl);
    }
    __syncthreads();  // (C)

    // ---- 5. row dots S . C_s (reduce-scatter: this lane ends with row vw + rowL), outputs
    const int row = vw + rowL;
    const int sub = lane & (LPR - 1);
    const float Dh = p.D ? p.D[head] : 0.f;
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        if (s < T) {
            float part[RW];
            float4 cq[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i) cq[i] = *reinterpret_cast<const float4*>(&sC[s][(lane + 32 * i) * 4]);
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                part[r] = stream::dot4(S[r][0], cq[0]);
#pragma unroll
                for (int i = 1; i < QPL; ++i) part[r] += stream::dot4(S[r][i], cq[i]);
            }
            const float Y = RS::reduce(part, lane) * sGam[s];
            float ring = 0.f;
            if (row < P)
                for (int j = sub; j <= h + s; j += LPR)
                    ring = fmaf(sCoef[s][j], actToFloat(sXs[recRow(j) * P + row], actBf16), ring);
            ring = RS::rowLanesSum(ring);
            if (row < P && (s % LPR) == sub) {
                const float xs = actToFloat(sXs[(R + s) * P + row], actBf16);
                const float yv = fmaf(Dh, xs, Y + ring) * sZ[s][row];
                yg[s * p.stride_y_t + row] = floatToAct(yv, actBf16);
            }
        }
    }

    // ---- 6. flush: fold records 0..nf-1 into the registers, write the checkpoint rows
    if (nf > 0) {  // CTA-uniform
        const float gf = sGam[MAXT];
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = stream::scale4(S[r][i], gf);
        for (int j = 0; j < nf; ++j) {
            float4 bq[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i)
                bq[i] = stream::u2ToF4(*reinterpret_cast<const uint2*>(sRB + recRow(j) * N + (lane + 32 * i) * 4), actBf16);
            const float fw = sFw[j];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const int rr = vw + (r ^ rowL);  // row held in slot r
                const float xw = rr < P ? fw * actToFloat(sXs[recRow(j) * P + rr], actBf16) : 0.f;
#pragma unroll
                for (int i = 0; i < QPL; ++i) S[r][i] = stream::fma4s(S[r][i], xw, bq[i]);
            }
        }
        stream::storeWarpRows<RW, QPL, ST>(S, ckpt, p.stride_state_p, vw, P, rowL, lane);
    }
}

}  // namespace mamba2
}  // namespace rssm
