// Conventional Mamba-2 decode (and per-draft-snapshot verify): one CTA per (P tile, head, row).
// The CTA's whole state tile is put in flight at once with 16-byte cp.async into shared memory
// (bytes in flight do not cost registers); then each chunk of rows is pulled into registers
// (kRPT x kNV 16-byte vectors per thread), the T tokens are applied in order, each output row is
// reduced across the kLanes lanes of the row, and the state (or one snapshot per token) is stored
// with 16-byte streaming stores.
#pragma once
#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

// Dynamic shared memory in bytes for T tokens and rowsPerCta rows.
__host__ __device__ inline size_t decodeSmemBytes(int T, int N, int rowsPerCta, int stateBytes) {
    return (size_t)rowsPerCta * N * stateBytes +
           sizeof(float) * (size_t)(2 * T * N + 2 * T * rowsPerCta + 2 * RSSM_MAMBA2_MAX_TOKENS);
}

template <typename StateT, int N>
__global__ void __launch_bounds__(kThreads, kMinBlocks) mamba2DecodeKernel(const Mamba2DecodeParams p) {
    using Lay = Layout<StateT, N>;
    const int b = blockIdx.z;
    const int head = blockIdx.y;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: nothing read or written

    const int P = p.headdim;
    const int T = p.num_tokens;
    const int tileRows = p.rows_per_cta;
    const int tile0 = blockIdx.x * tileRows;
    const int tileEnd = min(P, tile0 + tileRows);
    const int g = head / (p.nheads / p.ngroups);
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const int tid = threadIdx.x;
    const int laneN = tid % Lay::kLanes;
    const int rg = tid / Lay::kLanes;

    extern __shared__ float4 smem4[];
    StateT* sState = reinterpret_cast<StateT*>(smem4);                            // [tileRows][N]
    float* sB = reinterpret_cast<float*>(sState + (size_t)tileRows * N);           // [T][N]
    float* sC = sB + T * N;                         // [T][N]
    float* sX = sC + T * N;                         // [T][tileRows]
    float* sZ = sX + T * tileRows;                  // [T][tileRows] silu(z) (1 without a gate)
    float* sDt = sZ + T * tileRows;                 // [MAX_TOKENS]
    float* sAl = sDt + RSSM_MAMBA2_MAX_TOKENS;      // [MAX_TOKENS]

    const StateT* src = reinterpret_cast<const StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                        (int64_t)head * p.stride_state_head;
    tileToShared<StateT, N>(sState, src + (int64_t)tile0 * p.stride_state_p, p.stride_state_p, tileEnd - tile0, tid);
    cpAsyncCommit();  // whole tile in flight while the token inputs are staged

    const uint16_t* Bg = reinterpret_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b +
                         (int64_t)g * p.stride_B_g;
    const uint16_t* Cg = reinterpret_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b +
                         (int64_t)g * p.stride_C_g;
    for (int i = tid; i < T * N; i += kThreads) {
        const int s = i / N, n = i - s * N;
        sB[i] = actToFloat(Bg[s * p.stride_B_t + n], actBf16);
        sC[i] = actToFloat(Cg[s * p.stride_C_t + n], actBf16);
    }
    const uint16_t* xg = reinterpret_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b +
                         (int64_t)head * p.stride_x_h;
    // z is staged with x so no global load sits in the output loop (it serialized the CTA on
    // memory latency once per token and chunk).
    const uint16_t* zg = p.z ? reinterpret_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                   (int64_t)head * p.stride_z_h
                             : nullptr;
    for (int i = tid; i < T * tileRows; i += kThreads) {
        const int s = i / tileRows, row = tile0 + (i - s * tileRows);
        sX[i] = row < tileEnd ? actToFloat(xg[s * p.stride_x_t + row], actBf16) : 0.f;
        sZ[i] = (zg && row < tileEnd) ? siluF(actToFloat(zg[s * p.stride_z_t + row], actBf16)) : 1.f;
    }
    if (tid < T) {
        const float dt = loadDt(p.dt_raw, dtF32, actBf16,
                                (int64_t)b * p.stride_dt_b + (int64_t)tid * p.stride_dt_t +
                                    (int64_t)head * p.stride_dt_h,
                                p.dt_bias, head);
        sDt[tid] = dt;
        sAl[tid] = __expf(dt * p.A[head]);
    }
    cpAsyncWaitAll();
    __syncthreads();

    const float Dh = p.D ? p.D[head] : 0.f;
    uint16_t* yg = reinterpret_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b + (int64_t)head * p.stride_y_h;
    StateT* dst = p.snapshots ? nullptr
                              : reinterpret_cast<StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                                    (int64_t)head * p.stride_state_head;

    for (int c0 = tile0; c0 < tileEnd; c0 += Lay::kChunk) {
        const int cEnd = min(c0 + Lay::kChunk, tileEnd);
        StateChunk<StateT, N> cur;
        cur.loadShared(sState, c0 - tile0, cEnd - tile0, rg, laneN);

        for (int s = 0; s < T; ++s) {
            float bv[Lay::kElems], cv[Lay::kElems];
#pragma unroll
            for (int k = 0; k < Lay::kNV; ++k) {
#pragma unroll
                for (int q = 0; q < Lay::kVec; q += 4) {
                    const int n = (laneN + k * Lay::kLanes) * Lay::kVec + q;
                    const float4 b4 = *reinterpret_cast<const float4*>(sB + s * N + n);
                    const float4 c4 = *reinterpret_cast<const float4*>(sC + s * N + n);
                    const int e = k * Lay::kVec + q;
                    bv[e] = b4.x; bv[e + 1] = b4.y; bv[e + 2] = b4.z; bv[e + 3] = b4.w;
                    cv[e] = c4.x; cv[e + 1] = c4.y; cv[e + 2] = c4.z; cv[e + 3] = c4.w;
                }
            }
            const float dt = sDt[s], al = sAl[s];
            float part[Lay::kRPT], xr[Lay::kRPT];
#pragma unroll
            for (int r = 0; r < Lay::kRPT; ++r) {
                const int row = c0 + rg + r * Lay::kRPP;
                xr[r] = row < cEnd ? sX[s * tileRows + row - tile0] : 0.f;
                const float dx = dt * xr[r];
                float acc = 0.f;
#pragma unroll
                for (int e = 0; e < Lay::kElems; ++e) {
                    const float v = fmaf(al, cur.v[r][e], dx * bv[e]);
                    cur.v[r][e] = v;
                    acc = fmaf(v, cv[e], acc);
                }
                part[r] = acc;
            }
#pragma unroll
            for (int r = 0; r < Lay::kRPT; ++r) part[r] = rowReduce<Lay::kLanes>(part[r]);
            if (laneN == 0) {
#pragma unroll
                for (int r = 0; r < Lay::kRPT; ++r) {
                    const int row = c0 + rg + r * Lay::kRPP;
                    if (row < cEnd) {
                        const float yv = fmaf(Dh, xr[r], part[r]) * sZ[s * tileRows + row - tile0];
                        yg[s * p.stride_y_t + row] = floatToAct(yv, actBf16);
                    }
                }
            }
            if (p.snapshots) {
                StateT* snap = reinterpret_cast<StateT*>(p.snapshots) + (int64_t)slot * p.stride_snap_slot +
                               (int64_t)s * p.stride_snap_tok + (int64_t)head * p.stride_snap_head;
                cur.store(snap, p.stride_snap_p, c0, cEnd, rg, laneN);
            }
        }
        if (dst) cur.store(dst, p.stride_state_p, c0, cEnd, rg, laneN);
    }
}

}  // namespace mamba2
}  // namespace rssm
