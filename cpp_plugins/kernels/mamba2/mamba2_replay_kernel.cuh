// ReplaySSM Mamba-2 decode (design.md 3.1): standard mode (Algorithm 1, T = 1) and speculative
// mode (Algorithm 2, T <= 8), one CTA per (P tile, head, row).
//
// Records j = 0..h-1 are the committed ring records (ring index (o + j) % C); records h..h+T-1 are
// this step's tokens, taken from the inputs (and appended to the ring at (o + h + s) % C).
// With la_j = dt_j * A and cum_k = sum_{i<=k} la_i, the output of token s is (Eq. 6 / Eq. 14)
//   y_s[p] = exp(cum_{h+s}) (S_ckpt[p,:] . C_s) + sum_{j<=h+s} exp(cum_{h+s} - cum_j) dt_j x_j[p] (B_j . C_s)
//            + D x_s[p],  times silu(z_s[p]) if z,
// so the checkpoint is read once for all T queries and never materialized per token; B_j . C_s
// (K^T Q) is computed once per CTA (not per P row), from records shared by the group.
// Flush rows (standard: h + 1 == L, folding records 0..h; speculative: h + T > L, folding the h
// committed records) also compute S' = exp(cum_{nf-1}) S + sum_{j<nf} exp(cum_{nf-1} - cum_j) dt_j x_j B_j^T
// and write it over the checkpoint tile this CTA owns. Cursors are only read.
#pragma once
#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

struct ReplaySmem {
    int nrecMax, xsLd;
    size_t offState, offRB, offXs, offC, offDt, offCum, offFw, offCoef, offGam, offRing, offZ, bytes;
};

// Shared-memory plan (bytes) for T tokens, window L, rowsPerCta rows, state size N.
__host__ __device__ inline ReplaySmem replaySmemPlan(int T, int L, int N, int rowsPerCta, int stateBytes) {
    ReplaySmem s;
    s.nrecMax = L + T;
    s.xsLd = rowsPerCta;  // multiple of 8: 16-byte aligned rows for cp.async
    size_t o = 0;
    auto take = [&o](size_t bytes) { const size_t at = o; o += (bytes + 15) & ~size_t(15); return at; };
    s.offState = take((size_t)rowsPerCta * N * stateBytes);          // checkpoint tile
    s.offRB = take(sizeof(uint16_t) * s.nrecMax * N);                // B_j bits, records 0..h+T-1
    s.offXs = take(sizeof(uint16_t) * s.nrecMax * s.xsLd);           // x_j bits of the tile rows
    s.offC = take(sizeof(float) * T * N);                            // C_s
    s.offDt = take(sizeof(float) * s.nrecMax);
    s.offCum = take(sizeof(float) * s.nrecMax);
    s.offFw = take(sizeof(float) * s.nrecMax);
    s.offCoef = take(sizeof(float) * T * s.nrecMax);
    s.offGam = take(sizeof(float) * (RSSM_MAMBA2_MAX_TOKENS + 4));
    s.offRing = take(sizeof(float) * T * rowsPerCta);                // sum_j coef_sj x_j[p]
    s.offZ = take(sizeof(float) * T * rowsPerCta);                   // silu(z_s[p]) (1 without a gate)
    s.bytes = o;
    return s;
}

template <typename StateT, int N>
__global__ void __launch_bounds__(kThreads, kMinBlocks) mamba2ReplayKernel(const Mamba2ReplayParams p) {
    using Lay = Layout<StateT, N>;
    constexpr int DK = N / 32;  // state columns per lane in the K^T Q dots
    const int b = blockIdx.z;
    const int head = blockIdx.y;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row

    const int P = p.headdim, H = p.nheads, G = p.ngroups;
    const int T = p.num_tokens, L = p.window, Cap = p.ring_capacity;
    const int tileRows = p.rows_per_cta;
    const int tile0 = blockIdx.x * tileRows;
    const int tileEnd = min(P, tile0 + tileRows);
    const int nRows = tileEnd - tile0;
    const int hpg = H / G;
    const int g = head / hpg;
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const int tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int laneN = tid % Lay::kLanes;
    const int rg = tid / Lay::kLanes;

    extern __shared__ float4 smem4[];
    char* sm = reinterpret_cast<char*>(smem4);
    const ReplaySmem plan = replaySmemPlan(T, L, N, tileRows, (int)sizeof(StateT));
    StateT* sState = reinterpret_cast<StateT*>(sm + plan.offState);  // [tileRows][N] checkpoint tile
    uint16_t* sRB = reinterpret_cast<uint16_t*>(sm + plan.offRB);     // [nrec][N] B_j bits
    uint16_t* sXs = reinterpret_cast<uint16_t*>(sm + plan.offXs);     // [nrec][xsLd] x_j bits
    float* sC = reinterpret_cast<float*>(sm + plan.offC);             // [T][N]
    float* sDt = reinterpret_cast<float*>(sm + plan.offDt);           // [nrec] dt_j
    float* sCum = reinterpret_cast<float*>(sm + plan.offCum);         // [nrec] prefix sums of dt_j A
    float* sFw = reinterpret_cast<float*>(sm + plan.offFw);           // [nf] fold weights
    float* sCoef = reinterpret_cast<float*>(sm + plan.offCoef);       // [T][nrecMax]
    float* sGam = reinterpret_cast<float*>(sm + plan.offGam);         // [T] gamma_s, [MAX] fold gamma
    float* sRing = reinterpret_cast<float*>(sm + plan.offRing);       // [T][tileRows]
    float* sZ = reinterpret_cast<float*>(sm + plan.offZ);             // [T][tileRows]
    const int xsLd = plan.xsLd;
    const int nrecMax = plan.nrecMax;

    // ---- the checkpoint tile goes in flight first (depends on the slot only)
    StateT* ckpt = reinterpret_cast<StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                   (int64_t)head * p.stride_state_head;
    tileToShared<StateT, N>(sState, ckpt + (int64_t)tile0 * p.stride_state_p, p.stride_state_p, nRows, tid);

    uint16_t* yg = reinterpret_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b + (int64_t)head * p.stride_y_h;
    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool valid = o >= 0 && o < Cap && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L) && h + T <= Cap;
    if (!valid) {  // cursor invariant broken (a bug upstream): poison this row's outputs, touch nothing
        for (int i = tid; i < T * tileRows; i += kThreads) {
            const int s = i / tileRows, row = tile0 + (i - s * tileRows);
            if (row < tileEnd) yg[s * p.stride_y_t + row] = floatToAct(__int_as_float(0x7fc00000), actBf16);
        }
        cpAsyncWaitAll();
        return;
    }
    const bool flush = p.mode == 0 ? (h + 1 == L) : (h + T > L);
    const int nf = flush ? (p.mode == 0 ? h + 1 : h) : 0;  // records folded into the checkpoint
    const int nrec = h + T;
    const int64_t ringRowSlot = (int64_t)slot * Cap;

    // ---- committed records: B_j (whole group row) and x_j (tile rows) by cp.async, dt_j by loads
    {
        const uint16_t* rB = reinterpret_cast<const uint16_t*>(p.ring_B);
        constexpr int kBV = N / 8;
        for (int i = tid; i < h * kBV; i += kThreads) {
            const int j = i / kBV, v = i - j * kBV;
            cpAsync16(sRB + j * N + v * 8, rB + ((ringRowSlot + (o + j) % Cap) * G + g) * N + v * 8);
        }
        const uint16_t* rX = reinterpret_cast<const uint16_t*>(p.ring_x);
        const int nvec = nRows >> 3;  // P % 8 == 0, tile0 % 8 == 0
        for (int i = tid; i < h * nvec; i += kThreads) {
            const int j = i / nvec, v = i - j * nvec;
            cpAsync16(sXs + j * xsLd + v * 8, rX + ((ringRowSlot + (o + j) % Cap) * H + head) * P + tile0 + v * 8);
        }
        cpAsyncCommit();
        for (int j = tid; j < h; j += kThreads) sDt[j] = p.ring_dt[(ringRowSlot + (o + j) % Cap) * H + head];
    }
    // ---- this step's tokens: stage them as records h..h+T-1 and append them to the ring
    {
        const bool writeB = (head % hpg == 0) && blockIdx.x == 0;  // one CTA per group writes ring_B
        const uint16_t* Bg = reinterpret_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b +
                             (int64_t)g * p.stride_B_g;
        const uint16_t* Cg = reinterpret_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b +
                             (int64_t)g * p.stride_C_g;
        uint16_t* wB = reinterpret_cast<uint16_t*>(p.ring_B);
        for (int i = tid; i < T * N; i += kThreads) {
            const int s = i / N, n = i - s * N;
            const uint16_t bb = Bg[s * p.stride_B_t + n];
            sRB[(h + s) * N + n] = bb;
            sC[i] = actToFloat(Cg[s * p.stride_C_t + n], actBf16);
            if (writeB) wB[((ringRowSlot + (o + h + s) % Cap) * G + g) * N + n] = bb;
        }
        if (tid < T) {
            const float dt = loadDt(p.dt_raw, dtF32, actBf16,
                                    (int64_t)b * p.stride_dt_b + (int64_t)tid * p.stride_dt_t +
                                        (int64_t)head * p.stride_dt_h,
                                    p.dt_bias, head);
            sDt[h + tid] = dt;
            if (blockIdx.x == 0) p.ring_dt[(ringRowSlot + (o + h + tid) % Cap) * H + head] = dt;
        }
        const uint16_t* xg = reinterpret_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b +
                             (int64_t)head * p.stride_x_h;
        // z is staged here with x so the output loop reads shared memory only (a global z load
        // there serialized every CTA on memory latency once per token and chunk).
        const uint16_t* zg = p.z ? reinterpret_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                       (int64_t)head * p.stride_z_h
                                 : nullptr;
        uint16_t* wX = reinterpret_cast<uint16_t*>(p.ring_x);
        for (int i = tid; i < T * tileRows; i += kThreads) {
            const int s = i / tileRows, r = i - s * tileRows, row = tile0 + r;
            uint16_t bits = 0;
            float zv = 1.f;
            if (row < tileEnd) {
                bits = xg[s * p.stride_x_t + row];
                if (zg) zv = siluF(actToFloat(zg[s * p.stride_z_t + row], actBf16));
                wX[((ringRowSlot + (o + h + s) % Cap) * H + head) * P + row] = bits;
            }
            sXs[(h + s) * xsLd + r] = bits;
            sZ[s * tileRows + r] = zv;
        }
    }
    // Wait for the records (and the checkpoint tile, issued earlier: cp.async groups complete in order;
    // waiting for all is what the fold and the readout need anyway).
    cpAsyncWaitAll();
    __syncthreads();

    // ---- prefix sums of the log-decays (warp 0) and K^T Q dots from shared memory (all warps)
    const float Ah = p.A[head];
    if (warp == 0) {
        float carry = 0.f;
        for (int base = 0; base < nrec; base += 32) {
            const int j = base + lane;
            float v = j < nrec ? sDt[j] * Ah : 0.f;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const float t = __shfl_up_sync(0xffffffffu, v, off);
                if (lane >= off) v += t;
            }
            v += carry;
            if (j < nrec) sCum[j] = v;
            carry = __shfl_sync(0xffffffffu, v, 31);
        }
    }
    for (int j = warp; j < nrec; j += kThreads / 32) {
        float bj[DK];
        loadAct<DK>(sRB + j * N + lane * DK, actBf16, bj);
        for (int s = (j > h ? j - h : 0); s < T; ++s) {  // token s sees records j <= h + s
            float acc = 0.f;
#pragma unroll
            for (int k = 0; k < DK; ++k) acc = fmaf(bj[k], sC[s * N + lane * DK + k], acc);
            acc = rowReduce<32>(acc);
            if (lane == 0) sCoef[s * nrecMax + j] = acc;
        }
    }
    __syncthreads();

    // ---- output coefficients w_{j,s} dt_j (B_j . C_s), gammas, fold weights
    for (int i = tid; i < T * nrec; i += kThreads) {
        const int s = i / nrec, j = i - s * nrec;
        float c = 0.f;
        if (j <= h + s) c = __expf(sCum[h + s] - sCum[j]) * sDt[j] * sCoef[s * nrecMax + j];
        sCoef[s * nrecMax + j] = c;
    }
    if (tid < T) sGam[tid] = __expf(sCum[h + tid]);
    if (nf > 0) {
        const float cl = sCum[nf - 1];
        for (int j = tid; j < nf; j += kThreads) sFw[j] = __expf(cl - sCum[j]) * sDt[j];
        if (tid == 0) sGam[RSSM_MAMBA2_MAX_TOKENS] = __expf(cl);
    }
    __syncthreads();
    // ring part of every output: sRing[s][r] = sum_{j <= h+s} coef_sj x_j[r]  (one row per thread)
    for (int i = tid; i < T * nRows; i += kThreads) {
        const int s = i / nRows, r = i - s * nRows;
        const float* coef = sCoef + s * nrecMax;
        float acc = 0.f;
        for (int j = 0; j <= h + s; ++j) acc = fmaf(coef[j], actToFloat(sXs[j * xsLd + r], actBf16), acc);
        sRing[s * tileRows + r] = acc;
    }
    __syncthreads();

    // ---- one pass over the checkpoint tile: T outputs, then the fold on flush rows
    const float Dh = p.D ? p.D[head] : 0.f;
    for (int c0 = tile0; c0 < tileEnd; c0 += Lay::kChunk) {
        const int cEnd = min(c0 + Lay::kChunk, tileEnd);
        StateChunk<StateT, N> cur;
        cur.loadShared(sState, c0 - tile0, cEnd - tile0, rg, laneN);

        for (int s = 0; s < T; ++s) {
            float cv[Lay::kElems];
#pragma unroll
            for (int k = 0; k < Lay::kNV; ++k) {
#pragma unroll
                for (int q = 0; q < Lay::kVec; q += 4) {
                    const int n = (laneN + k * Lay::kLanes) * Lay::kVec + q;
                    const float4 c4 = *reinterpret_cast<const float4*>(sC + s * N + n);
                    const int e = k * Lay::kVec + q;
                    cv[e] = c4.x; cv[e + 1] = c4.y; cv[e + 2] = c4.z; cv[e + 3] = c4.w;
                }
            }
            float part[Lay::kRPT];
#pragma unroll
            for (int r = 0; r < Lay::kRPT; ++r) {
                float acc = 0.f;
#pragma unroll
                for (int e = 0; e < Lay::kElems; ++e) acc = fmaf(cur.v[r][e], cv[e], acc);
                part[r] = acc;
            }
#pragma unroll
            for (int r = 0; r < Lay::kRPT; ++r) part[r] = rowReduce<Lay::kLanes>(part[r]);
            if (laneN == 0) {
                const float gam = sGam[s];
#pragma unroll
                for (int r = 0; r < Lay::kRPT; ++r) {
                    const int row = c0 + rg + r * Lay::kRPP;
                    if (row < cEnd) {
                        const int rl = row - tile0;
                        const float xs = actToFloat(sXs[(h + s) * xsLd + rl], actBf16);
                        float yv = fmaf(gam, part[r], sRing[s * tileRows + rl]);
                        yv = fmaf(Dh, xs, yv) * sZ[s * tileRows + rl];
                        yg[s * p.stride_y_t + row] = floatToAct(yv, actBf16);
                    }
                }
            }
        }

        if (nf > 0) {  // flush: fold records 0..nf-1 into this checkpoint chunk and write it back
            const float gf = sGam[RSSM_MAMBA2_MAX_TOKENS];
#pragma unroll
            for (int r = 0; r < Lay::kRPT; ++r)
#pragma unroll
                for (int e = 0; e < Lay::kElems; ++e) cur.v[r][e] *= gf;
            for (int j = 0; j < nf; ++j) {
                float bv[Lay::kElems];
#pragma unroll
                for (int k = 0; k < Lay::kNV; ++k)
                    loadAct<Lay::kVec>(sRB + j * N + (laneN + k * Lay::kLanes) * Lay::kVec, actBf16, &bv[k * Lay::kVec]);
                const float fw = sFw[j];
#pragma unroll
                for (int r = 0; r < Lay::kRPT; ++r) {
                    const int row = c0 + rg + r * Lay::kRPP;
                    const float xw = row < cEnd ? fw * actToFloat(sXs[j * xsLd + row - tile0], actBf16) : 0.f;
#pragma unroll
                    for (int e = 0; e < Lay::kElems; ++e) cur.v[r][e] = fmaf(xw, bv[e], cur.v[r][e]);
                }
            }
            cur.store(ckpt, p.stride_state_p, c0, cEnd, rg, laneN);
        }
    }
}

}  // namespace mamba2
}  // namespace rssm
