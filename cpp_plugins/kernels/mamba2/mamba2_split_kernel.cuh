// ReplaySSM Mamba-2 decode, variant 4 ("split"): two kernels per step, so that the state stream runs
// without a per-head preamble in its way.
//
//   1. Prep kernel, one CTA per (row b, group g, chunk of <= 16 heads of the group): reads the cursors,
//      appends this step's records (dt, x, B) to the ring, forms the record dots B_j . C_s once per
//      group, the prefix sums of dt_j A per head and from them, per (row, head), into the workspace:
//        gamma_s = exp(cum_{h+s}),
//        ring_s[p] = sum_{j <= h+s} exp(cum_{h+s} - cum_j) dt_j (B_j . C_s) x_j[p] + D x_s[p],
//        and on a flush step the fold weights fw_j = exp(cum_{nf-1} - cum_j) dt_j, gfold = exp(cum_{nf-1}).
//   2. Readout kernel, persistent warps over items of 8 state rows of one (row b, head): loads the rows
//      (the only dependency is the slot index), y_s[p] = (gamma_s (S[p,:] . C_s) + ring_s[p]) * silu(z_s[p]);
//      on a flush step the warp folds the committed records into its rows and stores them:
//        S <- gfold S + sum_{j < nf} fw_j x_j B_j^T.
// Same function, records, appends and skip rules as the other variants (mamba2_stream_kernel.cuh):
// padding rows untouched, invalid cursors -> NaN outputs and nothing written.
#pragma once
#include "common/stream_rows.cuh"
#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

// Workspace layout (fp32 words): head records [B][H][kSplitHeadRec], then ring parts [B][T][H][P].
// Head record: [0, 8) gamma_s; [8] gfold; [9] nf as int bits (-1: invalid cursors); [10] ring origin
// o as int bits; [16, 16 + nf) fold weights.
constexpr int kSplitHeadRec = 96;
constexpr int kSplitFw = 16;
constexpr int kSplitHeadsPerPrep = 16;
constexpr int kSplitPrepThreads = 256;
constexpr int kSplitReadoutThreads = 256;
constexpr int kSplitRows = 8;  // state rows per readout item (one warp)
static_assert(kSplitFw + RSSM_MAMBA2_MAX_WINDOW + RSSM_MAMBA2_MAX_TOKENS <= kSplitHeadRec, "head record size");

__host__ __device__ inline size_t splitWorkspaceBytesM2(int B, int T, int H, int P) {
    return ((size_t)B * H * kSplitHeadRec + (size_t)B * T * H * P) * sizeof(float);
}
// Prep kernel dynamic shared memory: B_j bits [R][N], C_s [T][N] fp32, dots [T][R], dt / cum [16][R],
// coefficients [16][T][R] with R = h + T <= L + T records.
__host__ __device__ inline size_t splitPrepSmemBytesM2(int L, int T, int N) {
    const size_t R = (size_t)L + T;
    return R * N * 2 + (size_t)T * N * 4 + (size_t)T * R * 4 + 2 * (size_t)kSplitHeadsPerPrep * R * 4 +
           (size_t)kSplitHeadsPerPrep * T * R * 4;
}

template <int MAXT>
__global__ void __launch_bounds__(kSplitPrepThreads) mamba2SplitPrepKernel(const Mamba2ReplayParams p) {
    const int b = blockIdx.z, g = blockIdx.y;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int H = p.nheads, G = p.ngroups, P = p.headdim, N = p.dstate;
    const int T = p.num_tokens, L = p.window, Cap = p.ring_capacity;
    const int hpg = H / G;
    const int h0 = g * hpg + blockIdx.x * kSplitHeadsPerPrep;  // first head of this CTA
    const int nh = min(kSplitHeadsPerPrep, (g + 1) * hpg - h0);
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    constexpr int NW = kSplitPrepThreads / 32;

    float* wsHead = static_cast<float*>(p.workspace) + ((int64_t)b * H + h0) * kSplitHeadRec;
    float* wsRing = static_cast<float*>(p.workspace) + (int64_t)p.batch * H * kSplitHeadRec;

    const int o = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool valid = o >= 0 && o < Cap && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L) && h + T <= Cap;
    if (!valid) {  // the readout poisons these rows' outputs; nothing is appended
        if (tid < nh) wsHead[tid * kSplitHeadRec + 9] = __int_as_float(-1);
        return;
    }
    const bool flush = p.mode == 0 ? (h + 1 == L) : (h + T > L);
    const int nf = flush ? (p.mode == 0 ? h + 1 : h) : 0;
    const int R = h + T;  // records seen this step
    const int64_t ringRowSlot = (int64_t)slot * Cap;

    extern __shared__ __align__(16) unsigned char smemSplit[];
    uint16_t* sB = reinterpret_cast<uint16_t*>(smemSplit);                 // [R][N] B_j bits
    float* sC = reinterpret_cast<float*>(sB + (size_t)R * N);              // [T][N]
    float* sDot = sC + T * N;                                               // [T][R]
    float* sDt = sDot + T * R;                                              // [16][R]
    float* sCum = sDt + kSplitHeadsPerPrep * R;                             // [16][R]
    float* sCoef = sCum + kSplitHeadsPerPrep * R;                           // [16][T][R]

    // ---- committed B_j of the group (cp.async), this step's B_s / C_s (+ ring_B append, chunk 0 only)
    const uint16_t* rB = static_cast<const uint16_t*>(p.ring_B);
    const int nbv = N / 8;
    for (int i = tid; i < h * nbv; i += kSplitPrepThreads) {
        const int j = i / nbv, v = i - j * nbv;
        cpAsync16(sB + j * N + v * 8, rB + ((ringRowSlot + (o + j) % Cap) * G + g) * N + v * 8);
    }
    cpAsyncCommit();
    {
        const uint16_t* Bg = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)g * p.stride_B_g;
        const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)g * p.stride_C_g;
        uint16_t* wB = static_cast<uint16_t*>(p.ring_B);
        const bool writeB = blockIdx.x == 0;
        for (int i = tid; i < T * N; i += kSplitPrepThreads) {
            const int s = i / N, n = i - s * N;
            const uint16_t bb = Bg[s * p.stride_B_t + n];
            sB[(h + s) * N + n] = bb;
            sC[s * N + n] = actToFloat(Cg[s * p.stride_C_t + n], actBf16);
            if (writeB) wB[((ringRowSlot + (o + h + s) % Cap) * G + g) * N + n] = bb;
        }
    }
    // ---- dt: committed (ring) and this step's (computed, appended)
    for (int i = tid; i < h * nh; i += kSplitPrepThreads) {
        const int j = i / nh, hl = i - j * nh;  // consecutive heads are contiguous in the ring
        sDt[hl * R + j] = p.ring_dt[(ringRowSlot + (o + j) % Cap) * H + h0 + hl];
    }
    for (int i = tid; i < T * nh; i += kSplitPrepThreads) {
        const int s = i / nh, hl = i - s * nh;
        const float dt = loadDt(p.dt_raw, dtF32, actBf16,
                                (int64_t)b * p.stride_dt_b + (int64_t)s * p.stride_dt_t + (int64_t)(h0 + hl) * p.stride_dt_h,
                                p.dt_bias, h0 + hl);
        sDt[hl * R + h + s] = dt;
        p.ring_dt[(ringRowSlot + (o + h + s) % Cap) * H + h0 + hl] = dt;
    }
    cpAsyncWaitAll();
    __syncthreads();

    // ---- record dots B_j . C_s (a warp per record; token s sees records j <= h + s), prefix sums
    for (int j = warp; j < R; j += NW) {
        float acc[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) acc[s] = 0.f;
        for (int n = lane; n < N; n += 32) {
            const float bv = actToFloat(sB[j * N + n], actBf16);
#pragma unroll
            for (int s = 0; s < MAXT; ++s)
                if (s < T) acc[s] = fmaf(bv, sC[s * N + n], acc[s]);
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                float v = acc[s];
#pragma unroll
                for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(stream::kFull, v, m);
                if (lane == 0) sDot[s * R + j] = v;
            }
        }
    }
    for (int hl = warp; hl < nh; hl += NW) {
        const float Ah = p.A[h0 + hl];
        float carry = 0.f;
        for (int base = 0; base < R; base += 32) {
            const int j = base + lane;
            float v = j < R ? sDt[hl * R + j] * Ah : 0.f;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                const float t = __shfl_up_sync(stream::kFull, v, off);
                if (lane >= off) v += t;
            }
            v += carry;
            if (j < R) sCum[hl * R + j] = v;
            carry = __shfl_sync(stream::kFull, v, 31);
        }
    }
    __syncthreads();

    // ---- coefficients, gammas, fold weights -> shared memory / head records
    for (int i = tid; i < nh * T * R; i += kSplitPrepThreads) {
        const int hl = i / (T * R), r = i - hl * T * R, s = r / R, j = r - s * R;
        const float* cum = sCum + hl * R;
        sCoef[i] = j <= h + s ? __expf(cum[h + s] - cum[j]) * sDt[hl * R + j] * sDot[s * R + j] : 0.f;
    }
    for (int i = tid; i < nh * T; i += kSplitPrepThreads) {
        const int hl = i / T, s = i - hl * T;
        wsHead[hl * kSplitHeadRec + s] = __expf(sCum[hl * R + h + s]);
    }
    if (tid < nh) {
        wsHead[tid * kSplitHeadRec + 8] = nf > 0 ? __expf(sCum[tid * R + nf - 1]) : 1.f;
        wsHead[tid * kSplitHeadRec + 9] = __int_as_float(nf);
        wsHead[tid * kSplitHeadRec + 10] = __int_as_float(o);
    }
    for (int i = tid; i < nh * nf; i += kSplitPrepThreads) {
        const int hl = i / nf, j = i - hl * nf;
        wsHead[hl * kSplitHeadRec + kSplitFw + j] = __expf(sCum[hl * R + nf - 1] - sCum[hl * R + j]) * sDt[hl * R + j];
    }
    __syncthreads();

    // ---- ring parts (+ D x_s) per (head, p), and the x append of this step's records
    const uint16_t* rX = static_cast<const uint16_t*>(p.ring_x);
    uint16_t* wX = static_cast<uint16_t*>(p.ring_x);
    for (int i = tid; i < nh * P; i += kSplitPrepThreads) {
        const int hl = i / P, row = i - hl * P, head = h0 + hl;
        const float Dh = p.D ? p.D[head] : 0.f;
        const float* coef = sCoef + hl * T * R;
        float acc[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) acc[s] = 0.f;
        const uint16_t* xr = rX + (ringRowSlot * H + head) * P + row;  // record in ring row r: xr[r * H * P]
        const int64_t rowStride = (int64_t)H * P;
        int r = o;
#pragma unroll 4
        for (int j = 0; j < h; ++j) {
            const float xv = actToFloat(xr[r * rowStride], actBf16);
#pragma unroll
            for (int s = 0; s < MAXT; ++s)
                if (s < T) acc[s] = fmaf(coef[s * R + j], xv, acc[s]);
            r = r + 1 == Cap ? 0 : r + 1;
        }
        const uint16_t* xg = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b + (int64_t)head * p.stride_x_h + row;
        float xs[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            xs[s] = 0.f;
            if (s < T) {
                const uint16_t bits = xg[s * p.stride_x_t];
                wX[((ringRowSlot + (o + h + s) % Cap) * H + head) * P + row] = bits;
                xs[s] = actToFloat(bits, actBf16);
            }
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s)
#pragma unroll
            for (int k = 0; k < MAXT; ++k)
                if (s < T && k <= s) acc[s] = fmaf(coef[s * R + h + k], xs[k], acc[s]);
#pragma unroll
        for (int s = 0; s < MAXT; ++s)
            if (s < T) wsRing[(((int64_t)b * T + s) * H + head) * P + row] = fmaf(Dh, xs[s], acc[s]);
    }
}

// Readout: warp-granular items (row b, head, 8-row block), grid-strided over the warps of the grid so
// that the flushing rows of a staggered batch spread over all warps. With PIPE the warp issues the
// loads of its next item (state rows, head record, ring parts, z) before it computes the current
// one, and the slot index two items ahead, so its state stream never waits on a dependent load.
template <typename ST, int N, int MAXT>
struct SplitItem {
    static constexpr int QPL = N / 128;
    float4 S[kSplitRows][QPL];
    float rv[MAXT], zv[MAXT];
    int b, head, vw, slot, nf;  // slot < 0: padding row (nothing to do)
};

template <typename ST, int N, int MAXT>
__device__ __forceinline__ void splitIssue(SplitItem<ST, N, MAXT>& u, const Mamba2ReplayParams& p, long long it,
                                           int slot, int nrb, int rl, int sub) {
    constexpr int QPL = N / 128;
    constexpr int LPR = stream::RowScatter<kSplitRows>::LPR;
    const int H = p.nheads, P = p.headdim, T = p.num_tokens;
    u.vw = (int)(it % nrb) * kSplitRows;
    const long long bh = it / nrb;
    u.head = (int)(bh % H);
    u.b = (int)(bh / H);
    u.slot = (slot < 0 || slot >= p.num_slots) ? -1 : slot;
    if (u.slot < 0) return;
    const ST* ckpt = static_cast<const ST*>(p.state) + (int64_t)u.slot * p.stride_state_slot +
                     (int64_t)u.head * p.stride_state_head;
    stream::loadWarpRows<kSplitRows, QPL, ST>(u.S, ckpt, p.stride_state_p, u.vw, P, rl, threadIdx.x & 31);
    const float* hr = static_cast<const float*>(p.workspace) + ((int64_t)u.b * H + u.head) * kSplitHeadRec;
    u.nf = __float_as_int(hr[9]);
    const float* wsRing = static_cast<const float*>(p.workspace) + (int64_t)p.batch * H * kSplitHeadRec;
    const int row = u.vw + rl;
    const uint16_t* zg = p.z ? static_cast<const uint16_t*>(p.z) + (int64_t)u.b * p.stride_z_b +
                                   (int64_t)u.head * p.stride_z_h + row
                             : nullptr;
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        u.rv[s] = 0.f;
        u.zv[s] = 0.f;
        if (s < T && (s % LPR) == sub && row < P) {
            u.rv[s] = wsRing[(((int64_t)u.b * T + s) * H + u.head) * P + row];
            if (zg) u.zv[s] = __uint_as_float((uint32_t)zg[s * p.stride_z_t]);  // raw bits, converted later
        }
    }
}

template <typename ST, int N, int MAXT>
__device__ __forceinline__ void splitProcess(SplitItem<ST, N, MAXT>& u, const Mamba2ReplayParams& p, int rl, int sub) {
    constexpr int QPL = N / 128;
    constexpr int RW = kSplitRows;
    using RS = stream::RowScatter<RW>;
    constexpr int LPR = RS::LPR;
    if (u.slot < 0) return;  // padding row: untouched
    const int H = p.nheads, P = p.headdim, T = p.num_tokens, G = p.ngroups, Cap = p.ring_capacity;
    const int hpg = H / G, g = u.head / hpg;
    const int lane = threadIdx.x & 31;
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int row = u.vw + rl;
    uint16_t* yg = static_cast<uint16_t*>(p.y) + (int64_t)u.b * p.stride_y_b + (int64_t)u.head * p.stride_y_h + row;
    if (u.nf < 0) {  // invalid cursors: poison, touch nothing else
#pragma unroll
        for (int s = 0; s < MAXT; ++s)
            if (s < T && (s % LPR) == sub && row < P) yg[s * p.stride_y_t] = floatToAct(__int_as_float(0x7fc00000), actBf16);
        return;
    }
    const float* hr = static_cast<const float*>(p.workspace) + ((int64_t)u.b * H + u.head) * kSplitHeadRec;
    const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)u.b * p.stride_C_b + (int64_t)g * p.stride_C_g +
                         lane * 4;
#pragma unroll
    for (int s = 0; s < MAXT; ++s) {
        if (s < T) {
            float4 cq[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i)
                cq[i] = stream::u2ToF4(*reinterpret_cast<const uint2*>(Cg + s * p.stride_C_t + 128 * i), actBf16);
            float part[RW];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                part[r] = stream::dot4(u.S[r][0], cq[0]);
#pragma unroll
                for (int i = 1; i < QPL; ++i) part[r] += stream::dot4(u.S[r][i], cq[i]);
            }
            const float Y = RS::reduce(part, lane) * hr[s];
            if ((s % LPR) == sub && row < P) {
                const float gate = p.z ? siluF(actToFloat((uint16_t)__float_as_uint(u.zv[s]), actBf16)) : 1.f;
                yg[s * p.stride_y_t] = floatToAct((Y + u.rv[s]) * gate, actBf16);
            }
        }
    }
    if (u.nf > 0) {  // warp-uniform: fold the committed records into the rows, store them
        const int nf = u.nf;
        const float gf = hr[8];
        const int o = __float_as_int(hr[10]);
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int i = 0; i < QPL; ++i) u.S[r][i] = stream::scale4(u.S[r][i], gf);
        const uint16_t* rB = static_cast<const uint16_t*>(p.ring_B) + ((int64_t)u.slot * Cap * G + g) * p.dstate + lane * 4;
        // lane l reads x_j of block row (l & 7); slot r of this lane needs row r ^ rl: one shuffle each
        const uint16_t* rX = static_cast<const uint16_t*>(p.ring_x) + ((int64_t)u.slot * Cap * H + u.head) * P + u.vw +
                             (lane & 7);
        const bool xIn = u.vw + (lane & 7) < P;
        const int64_t strideB = (int64_t)G * p.dstate, strideX = (int64_t)H * P;
        // two records in flight: the loads of record j + 1 are issued before record j is folded
        int rr = o;
        uint2 bNext[QPL];
        uint16_t xNext = 0;
        float fwNext = hr[kSplitFw];
#pragma unroll
        for (int i = 0; i < QPL; ++i) bNext[i] = *reinterpret_cast<const uint2*>(rB + (int64_t)rr * strideB + 128 * i);
        if (xIn) xNext = rX[(int64_t)rr * strideX];
        for (int j = 0; j < nf; ++j) {
            uint2 bCur[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i) bCur[i] = bNext[i];
            const uint16_t xCur = xNext;
            const float fw = fwNext;
            if (j + 1 < nf) {
                rr = rr + 1 == Cap ? 0 : rr + 1;
#pragma unroll
                for (int i = 0; i < QPL; ++i) bNext[i] = *reinterpret_cast<const uint2*>(rB + (int64_t)rr * strideB + 128 * i);
                if (xIn) xNext = rX[(int64_t)rr * strideX];
                fwNext = hr[kSplitFw + j + 1];
            }
            const float xw = fw * actToFloat(xCur, actBf16);
            float4 bq[QPL];
#pragma unroll
            for (int i = 0; i < QPL; ++i) bq[i] = stream::u2ToF4(bCur[i], actBf16);
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const float xr = __shfl_sync(stream::kFull, xw, r ^ rl);  // rows past P: xIn false -> 0
#pragma unroll
                for (int i = 0; i < QPL; ++i) u.S[r][i] = stream::fma4s(u.S[r][i], xr, bq[i]);
            }
        }
        ST* ckpt = static_cast<ST*>(p.state) + (int64_t)u.slot * p.stride_state_slot + (int64_t)u.head * p.stride_state_head;
        stream::storeWarpRows<RW, QPL, ST>(u.S, ckpt, p.stride_state_p, u.vw, P, rl, lane);
    }
}

template <typename ST, int N, int MAXT, bool PIPE>
__global__ void __launch_bounds__(kSplitReadoutThreads, PIPE ? 2 : (N == 128 ? 3 : 2))
    mamba2SplitReadoutKernel(const Mamba2ReplayParams p) {
    using RS = stream::RowScatter<kSplitRows>;
    const int nrb = (p.headdim + kSplitRows - 1) / kSplitRows;
    const long long items = (long long)p.batch * p.nheads * nrb;
    const int lane = threadIdx.x & 31;
    const long long nw = (long long)gridDim.x * (kSplitReadoutThreads / 32);
    long long it = (long long)blockIdx.x * (kSplitReadoutThreads / 32) + (threadIdx.x >> 5);
    const int rl = RS::rowOf(lane);
    const int sub = lane & (RS::LPR - 1);
    auto slotOf = [&](long long i) {
        if (i >= items) return -1;
        const int b = (int)(i / ((long long)nrb * p.nheads));
        return p.state_batch_indices ? p.state_batch_indices[b] : b;
    };
    if constexpr (PIPE) {
        if (it >= items) return;
        SplitItem<ST, N, MAXT> cur, nxt;
        splitIssue(nxt, p, it, slotOf(it), nrb, rl, sub);
        int slot2 = slotOf(it + nw);
        for (; it < items; it += nw) {
            cur = nxt;
            if (it + nw < items) {
                const int s1 = slot2;
                slot2 = slotOf(it + 2 * nw);
                splitIssue(nxt, p, it + nw, s1, nrb, rl, sub);
            }
            splitProcess(cur, p, rl, sub);
        }
    } else {
        for (; it < items; it += nw) {
            SplitItem<ST, N, MAXT> cur;
            splitIssue(cur, p, it, slotOf(it), nrb, rl, sub);
            splitProcess(cur, p, rl, sub);
        }
    }
}

}  // namespace mamba2
}  // namespace rssm
