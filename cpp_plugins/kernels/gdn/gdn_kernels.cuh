// Gated DeltaNet decode kernels (templates). Instantiated per state dtype in gdn_<dtype>.cu.
//
// Thread layout shared by every kernel: a state row v (K elements) is owned by TPR = K/32
// consecutive lanes; lane l of the group holds the 8 quads (4 elements each) with quad index
// q*TPR + l, q = 0..7, so each warp load instruction moves 16 contiguous bytes per lane (fp32)
// and a group's lanes read 64 contiguous bytes. Row dot products reduce over the TPR lanes with
// xor shuffles. RPT rows per thread are loaded together (bytes in flight), and the first batch
// of rows is loaded before the per-head preamble (norms, gates, ring coefficients) runs.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/stream_rows.cuh"
#include "common/warp_scan.cuh"
#include "gdn/gdn.h"

namespace rssm {
namespace gdn {

constexpr unsigned kFull = 0xffffffffu;
constexpr float kL2Eps = 1e-6f;

// ---------------------------------------------------------------------------------------------
// Loads and stores
// ---------------------------------------------------------------------------------------------
using stream::u2ToF4;

// 4 consecutive 16-bit activations at element offset `off` (8-byte aligned).
__device__ __forceinline__ float4 ldAct4(const void* base, int64_t off, bool bf16) {
    const uint2 r = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + off));
    return u2ToF4(r, bf16);
}
__device__ __forceinline__ uint2 ldRaw4(const void* base, int64_t off) {
    return __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + off));
}
__device__ __forceinline__ void stRaw4(void* base, int64_t off, uint2 r) {
    *reinterpret_cast<uint2*>(static_cast<uint16_t*>(base) + off) = r;
}
__device__ __forceinline__ float ldAct(const void* base, int64_t off, bool bf16) {
    const uint16_t r = static_cast<const uint16_t*>(base)[off];
    if (bf16) return __bfloat162float(__ushort_as_bfloat16(r));
    return __half2float(__ushort_as_half(r));
}
__device__ __forceinline__ void stAct(void* base, int64_t off, float x, bool bf16) {
    uint16_t r;
    if (bf16) r = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    else r = __half_as_ushort(__float2half_rn(x));
    static_cast<uint16_t*>(base)[off] = r;
}
// One 16-bit value (bf16 or fp16 bits) as float.
__device__ __forceinline__ float u16ToF(uint16_t r, bool bf16) {
    return bf16 ? __bfloat162float(__ushort_as_bfloat16(r)) : __half2float(__ushort_as_half(r));
}
// Round a correction to the ring_u storage format (fp16, or bf16 for the accuracy study).
__device__ __forceinline__ float roundU(float x, bool bf16) {
    if (bf16) return __bfloat162float(__float2bfloat16_rn(x));
    return __half2float(__float2half_rn(x));
}

// State quads: the shared row-streaming implementation (common/stream_rows.cuh).
template <typename ST>
using StateIO = stream::StateRow4<ST>;

using stream::dot4;
__device__ __forceinline__ float4 ld4s(const float* p) { return *reinterpret_cast<const float4*>(p); }
using stream::scale4;

template <int TPR>
__device__ __forceinline__ float groupSum(float x) {
#pragma unroll
    for (int o = TPR / 2; o > 0; o >>= 1) x += __shfl_xor_sync(kFull, x, o);
    return x;
}
__device__ __forceinline__ float warpSum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFull, x, o);
    return x;
}

__device__ __forceinline__ float softplusf(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
// g = -exp(A_log) * softplus(a + dt_bias)
__device__ __forceinline__ float gdnLogDecay(float a, float A_log, float dt_bias) {
    return -expf(A_log) * softplusf(a + dt_bias);
}
__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + expf(-x)); }

// Row batch: rows vb + grp + r*NG, r < RPT. Invalid rows load zeros.
template <int K, typename ST, int NG, int RPT>
__device__ __forceinline__ void loadRows(float4 (&S)[RPT][8], const ST* base, int64_t stride_v,
                                         int vb, int grp, int l, int v_end) {
    constexpr int TPR = K / 32;
#pragma unroll
    for (int r = 0; r < RPT; ++r) {
        const int v = vb + grp + r * NG;
        if (v < v_end) {
            const ST* row = base + (int64_t)v * stride_v;
#pragma unroll
            for (int q = 0; q < 8; ++q) S[r][q] = StateIO<ST>::ld(row + (q * TPR + l) * 4);
        } else {
#pragma unroll
            for (int q = 0; q < 8; ++q) S[r][q] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
}
template <int K, typename ST, int NG, int RPT>
__device__ __forceinline__ void storeRow(const float4 (&S)[8], ST* row, int l) {
    constexpr int TPR = K / 32;
#pragma unroll
    for (int q = 0; q < 8; ++q) StateIO<ST>::st(row + (q * TPR + l) * 4, S[q]);
}

// Coefficients of record r for draft s (all replay kernels): committed records r < h give the
// decayed key / query dots; a draft record i = r - h enters strictly upper-triangular for the keys
// and upper-triangular for the queries (Eq. 10 / 11). dk, dq: the raw dots times the key's inverse norm.
template <int MAXT>
__device__ __forceinline__ void putRecordCoef(float (*s_ck)[MAXT], float (*s_cq)[MAXT], const float* s_P, int h, int r,
                                              int s, float Pr, float dk, float dq) {
    const float gam = __expf(s_P[h + s + 1] - Pr);
    float ck = gam * dk, cq = gam * dq;
    if (r >= h) {  // draft i = r - h: strict upper for keys, upper for queries
        const int di = r - h;
        if (di >= s) ck = 0.f;
        if (di > s) cq = 0.f;
    }
    s_ck[r][s] = ck;
    s_cq[r][s] = cq;
}
// Decay of the checkpoint term per draft (s_D) and, on flush rows, the fold weights of the nf records
// (s_fw) and of the checkpoint (s_fD). Called by all threads of the CTA.
__device__ __forceinline__ void putDecayWeights(float* s_D, float* s_fw, float* s_fD, const float* s_P, int h, int T,
                                                bool flush, int nf, int tid, int nt) {
    if (tid < T) s_D[tid] = __expf(s_P[h + tid + 1]);
    if (flush) {
        for (int j = tid; j < nf; j += nt) s_fw[j] = __expf(s_P[nf] - s_P[j + 1]);
        if (tid == 0) *s_fD = __expf(s_P[nf]);
    }
}

// Normalizes one key/query vector (K elements, 16-bit act) with one warp; writes it scaled into
// smem dst[K]. Returns sum of squares (all lanes).
template <int K>
__device__ __forceinline__ float warpNormalizeInto(const void* src, bool bf16, float extra_scale,
                                                   float* dst, int lane) {
    constexpr int KQ = K / 4;
    constexpr int KQL = (KQ + 31) / 32;
    float4 x[KQL];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < KQL; ++i) {
        const int c = lane + 32 * i;
        x[i] = c < KQ ? ldAct4(src, c * 4, bf16) : make_float4(0.f, 0.f, 0.f, 0.f);
        ss += dot4(x[i], x[i]);
    }
    ss = warpSum(ss);
    const float inv = rsqrtf(ss + kL2Eps) * extra_scale;
#pragma unroll
    for (int i = 0; i < KQL; ++i) {
        const int c = lane + 32 * i;
        if (c < KQ) *reinterpret_cast<float4*>(dst + c * 4) = scale4(x[i], inv);
    }
    return ss;
}

// =============================================================================================
// Conventional decode (standard in place, or per-draft snapshots).
// Grid: (ceil(V / rows_per_cta), HV, B); block NT threads.
// =============================================================================================
template <int K, typename ST, int NT, int RPT>
__global__ void __launch_bounds__(NT) gdnDecodeKernel(const GdnDecodeParams p) {
    constexpr int TPR = K / 32;
    constexpr int NG = NT / TPR;
    constexpr int NW = NT / 32;
    const int b = blockIdx.z, hv = blockIdx.y;
    const int32_t* idx = p.state_indices + (int64_t)b * p.indices_stride_b;
    int slotIn = idx[0];
    if (slotIn < 0) return;  // padding row
    if (p.snapshot && p.num_accepted != nullptr) {
        const int acc = p.num_accepted[b];
        if (acc < 1 || acc > p.indices_cols) return;
        slotIn = idx[acc - 1];
    }
    if (slotIn < 0 || slotIn >= p.num_slots) return;

    const int T = p.num_tokens;
    const int hk = hv / (p.num_v_heads / p.num_heads);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l = tid % TPR, grp = tid / TPR;
    const int v_begin = blockIdx.x * p.rows_per_cta;
    const int v_end = min(p.head_v, v_begin + p.rows_per_cta);

    ST* state = static_cast<ST*>(p.state);
    const ST* src = state + (int64_t)slotIn * p.state_stride_slot + (int64_t)hv * p.state_stride_head;

    __shared__ __align__(16) float s_k[GDN_MAX_TOKENS][K];
    __shared__ __align__(16) float s_q[GDN_MAX_TOKENS][K];
    __shared__ float s_alpha[GDN_MAX_TOKENS], s_beta[GDN_MAX_TOKENS], s_kq[GDN_MAX_TOKENS];

    float4 S[RPT][8];
    int vb = v_begin;
    loadRows<K, ST, NG, RPT>(S, src, p.state_stride_v, vb, grp, l, v_end);

    // ---- preamble: normalized q/k per token, gates ----
    for (int t = warp; t < T; t += NW) {
        const void* kp = static_cast<const uint16_t*>(p.k) + b * p.k_stride_b + t * p.k_stride_t +
                         hk * p.k_stride_h;
        const void* qp = static_cast<const uint16_t*>(p.q) + b * p.q_stride_b + t * p.q_stride_t +
                         hk * p.q_stride_h;
        warpNormalizeInto<K>(kp, bf16, 1.f, s_k[t], lane);
        warpNormalizeInto<K>(qp, bf16, p.scale, s_q[t], lane);
        __syncwarp();
        float kq = 0.f;
        for (int e = lane * 4; e < K; e += 128) kq += dot4(ld4s(&s_k[t][e]), ld4s(&s_q[t][e]));
        kq = warpSum(kq);
        if (lane == 0) {
            const float a = ldAct(p.a, b * p.a_stride_b + t * p.a_stride_t + hv, bf16);
            const float bb = ldAct(p.b, b * p.b_stride_b + t * p.b_stride_t + hv, bf16);
            const float g = gdnLogDecay(a, p.A_log[hv], p.dt_bias[hv]);
            s_alpha[t] = expf(g);
            s_beta[t] = sigmoidf(bb);
            s_kq[t] = kq;
        }
    }
    __syncthreads();

    const int64_t vbase = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h;
    const int64_t obase = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h;
    for (;;) {
        for (int t = 0; t < T; ++t) {
            const float alpha = s_alpha[t], beta = s_beta[t], kq = s_kq[t];
            float X[RPT], Y[RPT];
#pragma unroll
            for (int r = 0; r < RPT; ++r) X[r] = Y[r] = 0.f;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int e = (q * TPR + l) * 4;
                const float4 kk = ld4s(&s_k[t][e]);
                const float4 qq = ld4s(&s_q[t][e]);
#pragma unroll
                for (int r = 0; r < RPT; ++r) {
                    X[r] += dot4(S[r][q], kk);
                    Y[r] += dot4(S[r][q], qq);
                }
            }
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
                X[r] = groupSum<TPR>(X[r]);
                Y[r] = groupSum<TPR>(Y[r]);
            }
            int slotOut = -1;
            if (p.snapshot) {
                slotOut = idx[t];
                if (slotOut >= p.num_slots) slotOut = -1;
            }
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
                const int v = vb + grp + r * NG;
                const bool valid = v < v_end;
                const float vv = valid ? ldAct(p.v, vbase + t * p.v_stride_t + v, bf16) : 0.f;
                const float u = beta * (vv - alpha * X[r]);
                const float o = alpha * Y[r] + u * kq;
                if (valid && l == 0) stAct(p.o, obase + t * p.o_stride_t + v, o, bf16);
#pragma unroll
                for (int q = 0; q < 8; ++q) {
                    const int e = (q * TPR + l) * 4;
                    const float4 kk = ld4s(&s_k[t][e]);
                    S[r][q].x = alpha * S[r][q].x + u * kk.x;
                    S[r][q].y = alpha * S[r][q].y + u * kk.y;
                    S[r][q].z = alpha * S[r][q].z + u * kk.z;
                    S[r][q].w = alpha * S[r][q].w + u * kk.w;
                }
                if (valid && slotOut >= 0) {
                    ST* row = state + (int64_t)slotOut * p.state_stride_slot +
                              (int64_t)hv * p.state_stride_head + (int64_t)v * p.state_stride_v;
                    storeRow<K, ST, NG, RPT>(S[r], row, l);
                }
            }
        }
        if (!p.snapshot) {
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
                const int v = vb + grp + r * NG;
                if (v < v_end) {
                    ST* row = state + (int64_t)slotIn * p.state_stride_slot +
                              (int64_t)hv * p.state_stride_head + (int64_t)v * p.state_stride_v;
                    storeRow<K, ST, NG, RPT>(S[r], row, l);
                }
            }
        }
        vb += NG * RPT;
        if (vb >= v_end) break;
        loadRows<K, ST, NG, RPT>(S, src, p.state_stride_v, vb, grp, l, v_end);
    }
}

// =============================================================================================
// ReplaySSM decode: standard (Algorithm 4, MAXT = 1) and speculative verify (Algorithm 5).
//
// Per slot: committed records j = 0..h-1 at ring index (o + j) % C, drafts s = 0..T-1 at
// (o + h + s) % C. With P the prefix sums of the log-decays g over records 0..h+T-1 (P[0] = 0,
// P[n] = g_0 + ... + g_{n-1}) and t_s = h + s:
//   X_s = e^{P[t_s+1]} S_ckpt kn_s + sum_{j<h} e^{P[t_s+1]-P[j+1]} (kn_j.kn_s) u_j    (= alpha S_{t-1} kn_s
//         without the draft terms)
//   u_s = beta_s (v_s - X_s - sum_{i<s} e^{P[t_s+1]-P[h+i+1]} (kn_{h+i}.kn_s) u_{h+i})   (Eq. 10,
//         forward substitution of the unit upper-triangular system)
//   o_s = e^{P[t_s+1]} S_ckpt qn_s + sum_{j<h} (...)(kn_j.qn_s) u_j + sum_{i<=s} (...)(kn_{h+i}.qn_s) u_{h+i}
//         (Eq. 11)
// S_ckpt kn_s and S_ckpt qn_s for all s come from one pass over the checkpoint row; the committed
// terms are spread over the TPR lanes of the row group before the group reduction.
// Flush (standard: h + 1 == L, folds the h records and the token; speculative: h + T > L, folds
// the h committed records): S_ckpt <- e^{P[nf]} S_ckpt + sum_{j<nf} e^{P[nf]-P[j+1]} u_j kn_j^T,
// with u_j as stored in the ring (the record format), written in place.
// Grid: (ceil(V / rows_per_cta), HV, B); block NT threads.
// =============================================================================================
template <int K, typename ST, int MAXT, int NT, int RPT>
__global__ void __launch_bounds__(NT, 512 / NT) gdnReplayKernel(const GdnReplayParams p) {
    constexpr int TPR = K / 32;
    constexpr int NG = NT / TPR;
    constexpr int NW = NT / 32;
    constexpr int KQ = K / 4;
    constexpr int KQL = (KQ + 31) / 32;
    constexpr int MAXREC = GDN_MAX_WINDOW + MAXT;

    const int b = blockIdx.z, hv = blockIdx.y;
    const int slot = p.state_batch_indices[b];
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int T = p.num_tokens;
    const int C = p.ring_capacity;
    const int o0 = p.ring_origin[slot];
    const int h = p.ring_len[slot];
    const bool spec = p.mode == GDN_REPLAY_SPECULATIVE;
    // Cursor invariants (design.md 3.2); a violating row is skipped (the commit kernel reports it).
    if (h < 0 || h > p.window || o0 < 0 || o0 >= C || (!spec && h >= p.window)) return;
    const bool flush = spec ? (h + T > p.window) : (h + 1 == p.window);
    const int nf = spec ? h : h + 1;  // records folded by a flush
    const int nrec = h + T;
    const int group = p.num_v_heads / p.num_heads;
    const int hk = hv / group;
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool ubf16 = p.u_dtype == RSSM_DTYPE_BF16;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l = tid % TPR, grp = tid / TPR;
    const int v_begin = blockIdx.x * p.rows_per_cta;
    const int v_end = min(p.head_v, v_begin + p.rows_per_cta);

    ST* ckpt = static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot +
               (int64_t)hv * p.state_stride_head;
    const uint16_t* ring_k = static_cast<const uint16_t*>(p.ring_k);
    const int64_t rk_base = (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
    const int64_t ru_base = (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;

    __shared__ __align__(16) float s_kd[MAXT][K];  // normalized draft keys
    __shared__ __align__(16) float s_qd[MAXT][K];  // normalized, scaled queries
    __shared__ float s_P[MAXREC + 1];
    __shared__ float s_gd[MAXT], s_beta[MAXT], s_D[MAXT];
    __shared__ float s_invn[GDN_MAX_WINDOW];
    __shared__ float s_ck[MAXREC][MAXT];  // committed: decay * kn_j.kn_s; drafts: A[i][s] (i < s)
    __shared__ float s_cq[MAXREC][MAXT];  // committed: decay * kn_j.qn_s; drafts: Aq[i][s] (i <= s)
    __shared__ float s_fw[GDN_MAX_WINDOW + 1];
    __shared__ float s_fD;

    float4 S[RPT][8];
    int vb = v_begin;
    loadRows<K, ST, NG, RPT>(S, ckpt, p.state_stride_v, vb, grp, l, v_end);

    // Everything else that depends only on the cursors is put in flight now (latency at small B):
    // the first UPF committed corrections of this lane's rows, the draft values, and the first
    // chunk of committed keys of this warp (phase B).
    constexpr int UPF = 4;
    constexpr int RB = KQL == 1 ? 4 : 2;
    const int64_t vbase = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h;
    float upf[RPT][UPF], vpf[RPT][MAXT];
    auto prefetchRows = [&](int vb_) {
#pragma unroll
        for (int r = 0; r < RPT; ++r) {
            const int v = vb_ + grp + r * NG;
            const bool valid = v < v_end;
#pragma unroll
            for (int i = 0; i < UPF; ++i) {
                const int j = l + i * TPR;
                upf[r][i] = (valid && j < h)
                                ? ldAct(p.ring_u, ru_base + (int64_t)((o0 + j) % C) * p.ring_u_stride_rec + v, ubf16)
                                : 0.f;
            }
#pragma unroll
            for (int s = 0; s < MAXT; ++s)
                vpf[r][s] = (valid && s < T) ? ldAct(p.v, vbase + s * p.v_stride_t + v, bf16) : 0.f;
        }
    };
    prefetchRows(vb);
    float4 kr0[RB][KQL];
#pragma unroll
    for (int i = 0; i < RB; ++i) {
        const int r = warp + i * NW;
#pragma unroll
        for (int c4 = 0; c4 < KQL; ++c4) {
            const int c = lane + 32 * c4;
            kr0[i][c4] = (r < h && c < KQ)
                             ? ldAct4(ring_k, rk_base + (int64_t)((o0 + r) % C) * p.ring_k_stride_rec + c * 4, bf16)
                             : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }

    // ---- phase A: draft gates + prefix sums of g (warp 0), normalized drafts (all warps) ----
    if (warp == 0) {
        if (lane < T) {
            const float a = ldAct(p.a, b * p.a_stride_b + lane * p.a_stride_t + hv, bf16);
            const float bb = ldAct(p.b, b * p.b_stride_b + lane * p.b_stride_t + hv, bf16);
            s_gd[lane] = gdnLogDecay(a, p.A_log[hv], p.dt_bias[hv]);
            s_beta[lane] = sigmoidf(bb);
        }
        __syncwarp();
        float carry = 0.f;
        if (lane == 0) s_P[0] = 0.f;
        for (int base = 0; base < nrec; base += 32) {
            const int j = base + lane;
            float g = 0.f;
            if (j < nrec) {
                g = j < h ? p.ring_g[(int64_t)slot * p.ring_g_stride_slot +
                                     (int64_t)((o0 + j) % C) * p.ring_g_stride_rec + hv]
                          : s_gd[j - h];
            }
            g = scan::warpInclusiveSum(g, lane);
            g += carry;
            if (j < nrec) s_P[j + 1] = g;
            carry = __shfl_sync(kFull, g, 31);
        }
    }
    for (int s = warp; s < T; s += NW) {
        const void* kp = static_cast<const uint16_t*>(p.k) + b * p.k_stride_b + s * p.k_stride_t +
                         hk * p.k_stride_h;
        const void* qp = static_cast<const uint16_t*>(p.q) + b * p.q_stride_b + s * p.q_stride_t +
                         hk * p.q_stride_h;
        warpNormalizeInto<K>(kp, bf16, 1.f, s_kd[s], lane);
        warpNormalizeInto<K>(qp, bf16, p.scale, s_qd[s], lane);
    }
    __syncthreads();

    // ---- ring appends (records of this step's tokens; cursors untouched) ----
    if (blockIdx.x == 0) {
        if (tid < T)
            p.ring_g[(int64_t)slot * p.ring_g_stride_slot +
                     (int64_t)((o0 + h + tid) % C) * p.ring_g_stride_rec + hv] = s_gd[tid];
        if (hv % group == 0) {  // raw k, once per key head
            for (int i = tid; i < T * KQ; i += NT) {
                const int s = i / KQ, c = i % KQ;
                const uint2 r = ldRaw4(p.k, b * p.k_stride_b + s * p.k_stride_t + hk * p.k_stride_h + c * 4);
                stRaw4(p.ring_k, rk_base + (int64_t)((o0 + h + s) % C) * p.ring_k_stride_rec + c * 4, r);
            }
        }
    }

    // ---- phase B: per-record dot products with the drafts -> decay-weighted coefficients ----
    // Each warp takes RB records at once so their (L2) loads are in flight together; the first
    // chunk's committed keys were prefetched into kr0 before phase A.
    for (int r0 = warp; r0 < nrec; r0 += NW * RB) {
        float4 kr[RB][KQL];
        const bool first = r0 == warp;
#pragma unroll
        for (int i = 0; i < RB; ++i) {
            const int r = r0 + i * NW;
#pragma unroll
            for (int c4 = 0; c4 < KQL; ++c4) {
                const int c = lane + 32 * c4;
                kr[i][c4] = make_float4(0.f, 0.f, 0.f, 0.f);
                if (c < KQ) {
                    if (r < h)
                        kr[i][c4] = first ? kr0[i][c4]
                                          : ldAct4(ring_k, rk_base + (int64_t)((o0 + r) % C) * p.ring_k_stride_rec +
                                                               c * 4,
                                                   bf16);
                    else if (r < nrec)
                        kr[i][c4] = ld4s(&s_kd[r - h][c * 4]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < RB; ++i) {
            const int r = r0 + i * NW;
            if (r >= nrec) break;  // warp-uniform
            if (r < h) {
                float ss = 0.f;
#pragma unroll
                for (int c4 = 0; c4 < KQL; ++c4) ss += dot4(kr[i][c4], kr[i][c4]);
                ss = warpSum(ss);
                const float inv = rsqrtf(ss + kL2Eps);
#pragma unroll
                for (int c4 = 0; c4 < KQL; ++c4) kr[i][c4] = scale4(kr[i][c4], inv);
                if (lane == 0) s_invn[r] = inv;
            }
            float dk[MAXT], dq[MAXT];
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                dk[s] = dq[s] = 0.f;
                if (s < T) {
#pragma unroll
                    for (int c4 = 0; c4 < KQL; ++c4) {
                        const int c = lane + 32 * c4;
                        if (c < KQ) {
                            dk[s] += dot4(kr[i][c4], ld4s(&s_kd[s][c * 4]));
                            dq[s] += dot4(kr[i][c4], ld4s(&s_qd[s][c * 4]));
                        }
                    }
                    dk[s] = warpSum(dk[s]);
                    dq[s] = warpSum(dq[s]);
                }
            }
            if (lane == 0) {
                const float Pr = s_P[r + 1];
#pragma unroll
                for (int s = 0; s < MAXT; ++s) {
                    if (s < T) {
                        putRecordCoef<MAXT>(s_ck, s_cq, s_P, h, r, s, Pr, dk[s], dq[s]);
                    }
                }
            }
        }
    }
    putDecayWeights(s_D, s_fw, &s_fD, s_P, h, T, flush, nf, tid, NT);
    __syncthreads();

    // ---- main: rows ----
    const int64_t obase = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h;
    for (;;) {
        float X[RPT][MAXT], Y[RPT][MAXT];
#pragma unroll
        for (int r = 0; r < RPT; ++r)
#pragma unroll
            for (int s = 0; s < MAXT; ++s) X[r][s] = Y[r][s] = 0.f;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const int e = (q * TPR + l) * 4;
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                if (s < T) {
                    const float4 kk = ld4s(&s_kd[s][e]);
                    const float4 qq = ld4s(&s_qd[s][e]);
#pragma unroll
                    for (int r = 0; r < RPT; ++r) {
                        X[r][s] += dot4(S[r][q], kk);
                        Y[r][s] += dot4(S[r][q], qq);
                    }
                }
            }
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                const float D = s_D[s];
#pragma unroll
                for (int r = 0; r < RPT; ++r) {
                    X[r][s] *= D;
                    Y[r][s] *= D;
                }
            }
        }
        // committed records, spread over the TPR lanes of the group (first UPF prefetched)
#pragma unroll
        for (int i = 0; i < UPF; ++i) {
            const int j = l + i * TPR;
            if (j < h) {
#pragma unroll
                for (int s = 0; s < MAXT; ++s) {
                    if (s < T) {
                        const float ck = s_ck[j][s], cq = s_cq[j][s];
#pragma unroll
                        for (int r = 0; r < RPT; ++r) {
                            X[r][s] += ck * upf[r][i];
                            Y[r][s] += cq * upf[r][i];
                        }
                    }
                }
            }
        }
#pragma unroll 4
        for (int j = l + UPF * TPR; j < h; j += TPR) {
            const int64_t uoff = ru_base + (int64_t)((o0 + j) % C) * p.ring_u_stride_rec;
            float uj[RPT];
#pragma unroll
            for (int r = 0; r < RPT; ++r) {
                const int v = vb + grp + r * NG;
                uj[r] = v < v_end ? ldAct(p.ring_u, uoff + v, ubf16) : 0.f;
            }
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                if (s < T) {
                    const float ck = s_ck[j][s], cq = s_cq[j][s];
#pragma unroll
                    for (int r = 0; r < RPT; ++r) {
                        X[r][s] += ck * uj[r];
                        Y[r][s] += cq * uj[r];
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < RPT; ++r)
#pragma unroll
            for (int s = 0; s < MAXT; ++s)
                if (s < T) {
                    X[r][s] = groupSum<TPR>(X[r][s]);
                    Y[r][s] = groupSum<TPR>(Y[r][s]);
                }

#pragma unroll
        for (int r = 0; r < RPT; ++r) {
            const int v = vb + grp + r * NG;
            const bool valid = v < v_end;
            float ud[MAXT];
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                ud[s] = 0.f;
                if (s < T) {
                    const float vv = vpf[r][s];
                    float acc = X[r][s];
#pragma unroll
                    for (int i = 0; i < s; ++i) acc += s_ck[h + i][s] * ud[i];
                    ud[s] = s_beta[s] * (vv - acc);
                }
            }
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                if (s < T) {
                    float o = Y[r][s];
#pragma unroll
                    for (int i = 0; i <= s; ++i) o += s_cq[h + i][s] * ud[i];
                    if (valid && (s % TPR) == l) {
                        stAct(p.o, obase + s * p.o_stride_t + v, o, bf16);
                        stAct(p.ring_u, ru_base + (int64_t)((o0 + h + s) % C) * p.ring_u_stride_rec + v,
                              ud[s], ubf16);
                    }
                }
            }
            if (flush) {  // CTA-uniform
                const float fD = s_fD;
                float4 acc[8];
#pragma unroll
                for (int q = 0; q < 8; ++q) acc[q] = scale4(S[r][q], fD);
                for (int j = 0; j < nf; ++j) {
                    if (j < h) {
                        const float uj = valid ? ldAct(p.ring_u, ru_base + (int64_t)((o0 + j) % C) *
                                                                               p.ring_u_stride_rec + v,
                                                       ubf16)
                                               : 0.f;
                        const float w = s_fw[j] * uj * s_invn[j];
                        const int64_t off = rk_base + (int64_t)((o0 + j) % C) * p.ring_k_stride_rec;
#pragma unroll
                        for (int q = 0; q < 8; ++q) {
                            const float4 kk = ldAct4(ring_k, off + (q * TPR + l) * 4, bf16);
                            acc[q].x += w * kk.x;
                            acc[q].y += w * kk.y;
                            acc[q].z += w * kk.z;
                            acc[q].w += w * kk.w;
                        }
                    } else {  // standard mode: the current token (record h), unrounded u (as the reference)
                        const float w = s_fw[j] * ud[0];
#pragma unroll
                        for (int q = 0; q < 8; ++q) {
                            const float4 kk = ld4s(&s_kd[0][(q * TPR + l) * 4]);
                            acc[q].x += w * kk.x;
                            acc[q].y += w * kk.y;
                            acc[q].z += w * kk.z;
                            acc[q].w += w * kk.w;
                        }
                    }
                }
                if (valid) storeRow<K, ST, NG, RPT>(acc, ckpt + (int64_t)v * p.state_stride_v, l);
            }
        }
        vb += NG * RPT;
        if (vb >= v_end) break;
        loadRows<K, ST, NG, RPT>(S, ckpt, p.state_stride_v, vb, grp, l, v_end);
        prefetchRows(vb);
    }
}

// (Host side, shared by the launchers of gdn_dispatch.cuh and gdn_warp_decode.cu.)
// Opt the kernel in to `smem` dynamic shared bytes. The 48 KB default covers static plus dynamic
// shared memory together, so a kernel with static shared arrays (the MAXT = 8 replay tile kernel
// has 13.8 KB) needs the opt-in below 48 KB of dynamic memory too; without it the launch fails
// with "invalid argument". Static + dynamic above the device's opt-in limit is reported here.
template <typename F>
cudaError_t setSmem(F* kernel, int smem) {
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
    if (e != cudaSuccess) return e;
    if ((size_t)smem + attr.sharedSizeBytes <= 48 * 1024) return cudaSuccess;
    if (smem <= attr.maxDynamicSharedSizeBytes) return cudaSuccess;  // already opted in
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
}

}  // namespace gdn
}  // namespace rssm
