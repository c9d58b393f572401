// Gated DeltaNet decode kernels, variants >= 1 ("tile" kernels): latency-tolerant designs of the
// conventional decode and the ReplaySSM standard / speculative step. Same math, params and
// outputs as the variant-0 kernels in gdn_kernels.cuh (docs/kernels-gdn.md, "Variants").
//
// What changes against variant 0:
//   * The CTA's state / checkpoint tile (rows_per_cta rows x K) goes to shared memory through the
//     bulk-copy engine (cp.async.bulk, one mbarrier, issued by one warp right after the slot load,
//     before the cursors are read). Fallback (pre-sm_90, or a 16-bit state not 16-byte aligned):
//     8-byte cp.async by all threads. No register holds a row while it is in flight, so the kernels
//     need few registers and many CTAs (5-6 per SM) keep their tiles in flight together.
//   * Replay: the ring records the CTA needs (g, the u block of its rows, the raw committed keys)
//     are cp.async'ed into shared memory right after the cursor load (small-batch route: the whole
//     ring right after the slot load, without waiting for the cursors), so a step costs about two
//     dependent memory round trips; the per-head preamble (prefix sums, key norms, key/query dots,
//     decay coefficients) runs once per CTA from shared memory behind three barriers.
//   * Rows are read from shared memory with the quad order permuted per row group
//     (q ^ (grp & kSwz)) so a warp's 16-byte (8-byte) reads of 2-8 rows hit distinct banks.
#pragma once
#include "common/cp_async.cuh"
#include "gdn/gdn_kernels.cuh"

namespace rssm {
namespace gdn {

constexpr int kTileThreads = 128;
// Register caps through the CTAs-per-SM bound: 65536 / (128 * 6) = 85 -> 80 registers.
#ifndef RSSM_GDN_REPLAY_TILE_MIN_BLOCKS
#define RSSM_GDN_REPLAY_TILE_MIN_BLOCKS 6
#endif
constexpr int kReplayTileMinBlocks = RSSM_GDN_REPLAY_TILE_MIN_BLOCKS;
constexpr int kDecodeTileMinBlocks = 6;

// ---------------------------------------------------------------------------------------------
// Asynchronous copies
// ---------------------------------------------------------------------------------------------
// (common/cp_async.cuh)
using async::smemAddr;
__device__ __forceinline__ void cpAsync16(void* dst, const void* src) { async::copy16(dst, src); }
__device__ __forceinline__ void cpAsync8(void* dst, const void* src) { async::copy8(dst, src); }
__device__ __forceinline__ void cpAsync4(void* dst, const void* src) { async::copy4(dst, src); }
__device__ __forceinline__ void cpAsyncWaitAll() { async::waitAll(); }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RSSM_GDN_HAS_BULK 1
#else
#define RSSM_GDN_HAS_BULK 0
#endif

__device__ __forceinline__ void mbarInit(uint64_t* bar, uint32_t count) {
#if RSSM_GDN_HAS_BULK
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddr(bar)), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
#if RSSM_GDN_HAS_BULK
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddr(bar)), "r"(bytes)
                 : "memory");
#endif
}
__device__ __forceinline__ void bulkG2S(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if RSSM_GDN_HAS_BULK
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            smemAddr(dst)),
        "l"(src), "r"(bytes), "r"(smemAddr(bar))
        : "memory");
#endif
}
__device__ __forceinline__ void mbarWait(uint64_t* bar, uint32_t phase) {
#if RSSM_GDN_HAS_BULK
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n .reg .pred P1;\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%1], %2;\n selp.b32 %0, 1, 0, P1;\n}\n"
            : "=r"(done)
            : "r"(smemAddr(bar)), "r"(phase)
            : "memory");
    } while (!done);
#endif
}

// Tile of `nrows` rows (row v at src + v * stride_v, K elements of ST each) into dst[TILE][K].
// Bulk path: warp 0 issues one bulk copy per row on `bar` (phase 0); returns true. Fallback: every
// thread issues 8-byte cp.async (the caller waits with cp.async.wait_all); returns false.
// Rows nrows..TILE-1 of dst are zero-filled (they are computed on and never stored).
template <int K, typename ST>
__device__ __forceinline__ bool issueTileLoad(ST* dst, const ST* src, int64_t stride_v, int nrows, int tile,
                                              uint64_t* bar, int tid) {
    constexpr int ROWB = K * (int)sizeof(ST);
    #pragma unroll 1
    for (int i = tid; i < (tile - nrows) * (ROWB / 16); i += kTileThreads)
        reinterpret_cast<uint4*>(dst + (int64_t)nrows * K)[i] = make_uint4(0u, 0u, 0u, 0u);
#if RSSM_GDN_HAS_BULK
    const bool bulk = ((reinterpret_cast<uintptr_t>(src) & 15u) == 0) && ((stride_v * (int64_t)sizeof(ST)) % 16 == 0);
    if (bulk) {
        if (tid < 32) {
            if (tid == 0) {
                mbarInit(bar, 1);
                mbarArriveExpectTx(bar, (uint32_t)(nrows * ROWB));
            }
            __syncwarp();
            #pragma unroll 1
            for (int r = tid; r < nrows; r += 32) bulkG2S(dst + (int64_t)r * K, src + (int64_t)r * stride_v, ROWB, bar);
        }
        return true;
    }
#endif
    constexpr int CH = ROWB / 8;  // 8-byte chunks per row (contract: 8-byte aligned rows)
    #pragma unroll 1
    for (int i = tid; i < nrows * CH; i += kTileThreads) {
        const int r = i / CH, c = i - r * CH;
        cpAsync8(reinterpret_cast<unsigned char*>(dst + (int64_t)r * K) + c * 8,
                 reinterpret_cast<const unsigned char*>(src + (int64_t)r * stride_v) + c * 8);
    }
    return false;
}

// Row reads from the shared tile. Thread (grp, l) reads quad q of its row at quad index
// ((q ^ (grp & kSwz)) * TPR + l): the rows a warp reads in one shared-memory phase land in distinct
// banks. The same index is used for the key/query vectors (any fixed permutation of the quads
// leaves the dot products unchanged).
template <int K, typename ST>
struct TileLayout {
    static constexpr int TPR = K / 32;
    static constexpr int QB = 4 * (int)sizeof(ST);         // bytes per quad
    static constexpr int RPP = 128 / (TPR * QB) > 1 ? 128 / (TPR * QB) : 1;  // rows per 128-byte phase
    static constexpr int kSwz = RPP - 1;                    // < 8
    static __device__ __forceinline__ int quad(int q, int grp, int l) { return ((q ^ (grp & kSwz)) * TPR + l); }
};

template <typename ST>
__device__ __forceinline__ float4 ldTileQuad(const ST* rowp, int qi);
template <>
__device__ __forceinline__ float4 ldTileQuad<float>(const float* rowp, int qi) {
    return *reinterpret_cast<const float4*>(rowp + qi * 4);
}
template <>
__device__ __forceinline__ float4 ldTileQuad<__half>(const __half* rowp, int qi) {
    return u2ToF4(*reinterpret_cast<const uint2*>(rowp + qi * 4), false);
}
template <>
__device__ __forceinline__ float4 ldTileQuad<__nv_bfloat16>(const __nv_bfloat16* rowp, int qi) {
    return u2ToF4(*reinterpret_cast<const uint2*>(rowp + qi * 4), true);
}

// Intermediate rows of a multi-token step (T > 1, in place) written back to the tile. A 16-bit
// state rounds to its dtype between tokens here, exactly as T single-token steps would.
template <typename ST>
__device__ __forceinline__ void stTileQuad(ST* rowp, int qi, float4 v);
template <>
__device__ __forceinline__ void stTileQuad<float>(float* rowp, int qi, float4 v) {
    *reinterpret_cast<float4*>(rowp + qi * 4) = v;
}
template <>
__device__ __forceinline__ void stTileQuad<__half>(__half* rowp, int qi, float4 v) {
    __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    uint2 r;
    r.x = *reinterpret_cast<uint32_t*>(&lo);
    r.y = *reinterpret_cast<uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(rowp + qi * 4) = r;
}
template <>
__device__ __forceinline__ void stTileQuad<__nv_bfloat16>(__nv_bfloat16* rowp, int qi, float4 v) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    uint2 r;
    r.x = *reinterpret_cast<uint32_t*>(&lo);
    r.y = *reinterpret_cast<uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(rowp + qi * 4) = r;
}

__device__ __forceinline__ void fma4(float4& acc, float w, float4 k) {
    acc.x += w * k.x;
    acc.y += w * k.y;
    acc.z += w * k.z;
    acc.w += w * k.w;
}

// Dynamic shared memory of the tile kernels (host and device agree on it).
__host__ __device__ inline int tileRingKStride(int K) { return K * 2 + K / 4; }  // bytes, bank-spread rows
__host__ __device__ inline int tileRingUStride(int tile) { return tile * 2 + 16; }
__host__ __device__ inline int replayTileSmemBytes(int K, int stBytes, int tile, int nrr, int T) {
    return tile * K * stBytes + nrr * tileRingUStride(tile) + nrr * tileRingKStride(K) + nrr * 4 + T * tile * 4;
}
__host__ __device__ inline int decodeTileSmemBytes(int K, int stBytes, int tile, int T) {
    return tile * K * stBytes + 2 * T * K * 4 + T * tile * 4;
}

// =============================================================================================
// Conventional decode, tile variant (variants 1, 2). Grid (ceil(V / rows_per_cta), HV, B), 128
// threads; rows_per_cta is a multiple of 128 / (K / 32). Dynamic smem: decodeTileSmemBytes.
// =============================================================================================
template <int K, typename ST>
__global__ void __launch_bounds__(kTileThreads, kDecodeTileMinBlocks) gdnDecodeTileKernel(const GdnDecodeParams p) {
    constexpr int NT = kTileThreads;
    constexpr int TPR = K / 32;
    constexpr int NG = NT / TPR;
    constexpr int NW = NT / 32;
    using TL = TileLayout<K, ST>;
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
    const int TILE = p.rows_per_cta;
    const int hk = hv / (p.num_v_heads / p.num_heads);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l = tid % TPR, grp = tid / TPR;
    const int v_begin = blockIdx.x * TILE;
    const int v_end = min(p.head_v, v_begin + TILE);

    extern __shared__ __align__(128) unsigned char smem[];
    ST* s_tile = reinterpret_cast<ST*>(smem);
    float* s_k = reinterpret_cast<float*>(smem + (size_t)TILE * K * sizeof(ST));  // [T][K]
    float* s_q = s_k + T * K;                                                    // [T][K]
    float* s_v = s_q + T * K;                                                    // [T][TILE]
    __shared__ float s_alpha[GDN_MAX_TOKENS], s_beta[GDN_MAX_TOKENS], s_kq[GDN_MAX_TOKENS];
    __shared__ int s_out[GDN_MAX_TOKENS];
    __shared__ __align__(8) uint64_t s_bar;

    ST* state = static_cast<ST*>(p.state);
    const ST* src = state + (int64_t)slotIn * p.state_stride_slot + (int64_t)hv * p.state_stride_head +
                    (int64_t)v_begin * p.state_stride_v;
    const bool bulk = issueTileLoad<K, ST>(s_tile, src, p.state_stride_v, v_end - v_begin, TILE, &s_bar, tid);

    // ---- preamble (overlaps the tile load) ----
    const int64_t vbase = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h;
    #pragma unroll 1
    for (int i = tid; i < T * TILE; i += NT) {
        const int t = i / TILE, vl = i - t * TILE;
        s_v[i] = v_begin + vl < v_end ? ldAct(p.v, vbase + t * p.v_stride_t + v_begin + vl, bf16) : 0.f;
    }
    if (tid < T) {
        int so = -1;
        if (p.snapshot) {
            so = idx[tid];
            if (so >= p.num_slots) so = -1;
        }
        s_out[tid] = so;
    }
    for (int t = warp; t < T; t += NW) {
        const void* kp = static_cast<const uint16_t*>(p.k) + b * p.k_stride_b + t * p.k_stride_t +
                         hk * p.k_stride_h;
        const void* qp = static_cast<const uint16_t*>(p.q) + b * p.q_stride_b + t * p.q_stride_t +
                         hk * p.q_stride_h;
        warpNormalizeInto<K>(kp, bf16, 1.f, s_k + t * K, lane);
        warpNormalizeInto<K>(qp, bf16, p.scale, s_q + t * K, lane);
        __syncwarp();
        float kq = 0.f;
        for (int e = lane * 4; e < K; e += 128) kq += dot4(ld4s(s_k + t * K + e), ld4s(s_q + t * K + e));
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
    if (!bulk) cpAsyncWaitAll();
    __syncthreads();
    if (bulk) mbarWait(&s_bar, 0);

    // Rows stay in shared memory: each thread reads, updates and writes back only its own quads
    // (no barrier needed), so no row is held in registers across the group reduction.
    const int64_t obase = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h;
    for (int vl = grp; vl < TILE; vl += NG) {
        const int v = v_begin + vl;
        const bool valid = v < v_end;
        ST* rowp = s_tile + (int64_t)vl * K;
        for (int t = 0; t < T; ++t) {
            const float* kt = s_k + t * K;
            const float* qt = s_q + t * K;
            float X = 0.f, Y = 0.f;
#pragma unroll 4
            for (int q = 0; q < 8; ++q) {
                const int qi = TL::quad(q, grp, l);
                const float4 Sq = ldTileQuad<ST>(rowp, qi);
                X += dot4(Sq, ld4s(kt + qi * 4));
                Y += dot4(Sq, ld4s(qt + qi * 4));
            }
            X = groupSum<TPR>(X);
            Y = groupSum<TPR>(Y);
            const float alpha = s_alpha[t];
            const float u = s_beta[t] * (s_v[t * TILE + vl] - alpha * X);
            const float o = alpha * Y + u * s_kq[t];
            if (valid && l == 0) stAct(p.o, obase + t * p.o_stride_t + v, o, bf16);
            const int so = p.snapshot ? s_out[t] : (t == T - 1 ? slotIn : -1);
            ST* row = (valid && so >= 0) ? state + (int64_t)so * p.state_stride_slot +
                                               (int64_t)hv * p.state_stride_head + (int64_t)v * p.state_stride_v
                                         : nullptr;
            const bool keep = t + 1 < T;  // later tokens read the updated row back
#pragma unroll 4
            for (int q = 0; q < 8; ++q) {
                const int qi = TL::quad(q, grp, l);
                float4 Sq = scale4(ldTileQuad<ST>(rowp, qi), alpha);
                fma4(Sq, u, ld4s(kt + qi * 4));
                if (row != nullptr) StateIO<ST>::st(row + qi * 4, Sq);
                if (keep) stTileQuad<ST>(rowp, qi, Sq);
            }
        }
    }
}

// =============================================================================================
// ReplaySSM standard (MAXT = 1) / speculative verify, tile variant (variants 1, 2).
// Grid (ceil(V / rows_per_cta), HV, B), 128 threads; rows_per_cta a multiple of 128 / (K / 32).
// full_ring = 1 (small-batch route, only when C <= GDN_MAX_WINDOW + MAXT): all C ring records are
// copied right after the slot load (shared rows indexed by ring index); else only the h committed
// records, right after the cursor load (shared rows indexed by record number).
// Dynamic smem: replayTileSmemBytes(K, sizeof(ST), rows_per_cta, full_ring ? C : L, T).
// =============================================================================================
template <int K, typename ST, int MAXT>
__global__ void __launch_bounds__(kTileThreads, kReplayTileMinBlocks) gdnReplayTileKernel(const GdnReplayParams p, const int full_ring) {
    constexpr int NT = kTileThreads;
    constexpr int TPR = K / 32;
    constexpr int NG = NT / TPR;
    constexpr int MAXREC = GDN_MAX_WINDOW + MAXT;
    constexpr int KSTR = K * 2 + K / 4;  // tileRingKStride(K)
    using TL = TileLayout<K, ST>;

    const int b = blockIdx.z, hv = blockIdx.y;
    const int slot = p.state_batch_indices[b];
    if (slot < 0 || slot >= p.num_slots) return;  // padding row: untouched
    const int T = p.num_tokens;
    const int C = p.ring_capacity;
    const int TILE = p.rows_per_cta;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int l = tid % TPR, grp = tid / TPR;
    const int v_begin = blockIdx.x * TILE;
    const int v_end = min(p.head_v, v_begin + TILE);
    const int group = p.num_v_heads / p.num_heads;
    const int hk = hv / group;
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool ubf16 = p.u_dtype == RSSM_DTYPE_BF16;
    const int nrr = full_ring ? C : p.window;

    extern __shared__ __align__(128) unsigned char smem[];
    ST* s_tile = reinterpret_cast<ST*>(smem);
    const int ustr = tileRingUStride(TILE);
    unsigned char* s_u = smem + (size_t)TILE * K * sizeof(ST);  // [nrr][ustr]: u block of the tile's rows
    unsigned char* s_kr = s_u + (size_t)nrr * ustr;             // [nrr][KSTR]: raw committed keys
    float* s_g = reinterpret_cast<float*>(s_kr + (size_t)nrr * KSTR);  // [nrr]
    float* s_v = s_g + nrr;                                            // [T][TILE]
    __shared__ __align__(16) float s_kd[MAXT][K];  // normalized draft keys
    __shared__ __align__(16) float s_qd[MAXT][K];  // normalized, scaled queries
    __shared__ float s_P[MAXREC + 1];
    __shared__ float s_gd[MAXT], s_beta[MAXT], s_D[MAXT];
    __shared__ float s_inv[GDN_MAX_WINDOW];
    __shared__ __align__(16) float s_ck[MAXREC][MAXT];  // committed: decay * kn_j.kn_s; drafts: A[i][s] (i < s)
    __shared__ __align__(16) float s_cq[MAXREC][MAXT];  // committed: decay * kn_j.qn_s; drafts: Aq[i][s] (i <= s)
    __shared__ float s_fw[GDN_MAX_WINDOW + 1];
    __shared__ float s_fD;
    __shared__ __align__(8) uint64_t s_bar;

    // ---- 1. checkpoint tile in flight before the cursors are even read ----
    ST* ckpt = static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head;
    const bool bulk = issueTileLoad<K, ST>(s_tile, ckpt + (int64_t)v_begin * p.state_stride_v, p.state_stride_v,
                                           v_end - v_begin, TILE, &s_bar, tid);
    const int o0 = p.ring_origin[slot];
    const int h = p.ring_len[slot];

    const uint16_t* ring_u = static_cast<const uint16_t*>(p.ring_u);
    const uint16_t* ring_k = static_cast<const uint16_t*>(p.ring_k);
    const int64_t rk_base = (int64_t)slot * p.ring_k_stride_slot + (int64_t)hk * p.ring_k_stride_head;
    const int64_t ru_base = (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head;
    const int64_t rg_base = (int64_t)slot * p.ring_g_stride_slot + hv;
    // ---- 2. ring records -> shared (rows [0, n) of ring index ring0 + r, or record r) ----
    auto issueRing = [&](int n, bool physical) {
        const bool uvec = ((reinterpret_cast<uintptr_t>(ring_u) & 15u) == 0) && p.ring_u_stride_slot % 8 == 0 &&
                          p.ring_u_stride_rec % 8 == 0 && p.ring_u_stride_head % 8 == 0 && p.head_v % 8 == 0;
        const int vrow = v_end - v_begin;
        if (uvec) {
            const int UCH = vrow / 8;
            #pragma unroll 1
            for (int i = tid; i < n * UCH; i += NT) {
                const int r = i / UCH, c = i - r * UCH;
                int ri = r;
                if (!physical) { ri = o0 + r; if (ri >= C) ri -= C; }
                cpAsync16(s_u + r * ustr + c * 16, ring_u + ru_base + (int64_t)ri * p.ring_u_stride_rec + v_begin + c * 8);
            }
        } else {
            #pragma unroll 1
            for (int i = tid; i < n * vrow; i += NT) {
                const int r = i / vrow, c = i - r * vrow;
                int ri = r;
                if (!physical) { ri = o0 + r; if (ri >= C) ri -= C; }
                reinterpret_cast<uint16_t*>(s_u + r * ustr)[c] =
                    ring_u[ru_base + (int64_t)ri * p.ring_u_stride_rec + v_begin + c];
            }
        }
        const bool kvec = ((reinterpret_cast<uintptr_t>(ring_k) & 15u) == 0) && p.ring_k_stride_slot % 8 == 0 &&
                          p.ring_k_stride_rec % 8 == 0 && p.ring_k_stride_head % 8 == 0;
        if (kvec) {
            constexpr int KCH = K / 8;
            #pragma unroll 1
            for (int i = tid; i < n * KCH; i += NT) {
                const int r = i / KCH, c = i - r * KCH;
                int ri = r;
                if (!physical) { ri = o0 + r; if (ri >= C) ri -= C; }
                cpAsync16(s_kr + r * KSTR + c * 16, ring_k + rk_base + (int64_t)ri * p.ring_k_stride_rec + c * 8);
            }
        } else {
            constexpr int KCH = K / 4;
            #pragma unroll 1
            for (int i = tid; i < n * KCH; i += NT) {
                const int r = i / KCH, c = i - r * KCH;
                int ri = r;
                if (!physical) { ri = o0 + r; if (ri >= C) ri -= C; }
                cpAsync8(s_kr + r * KSTR + c * 8, ring_k + rk_base + (int64_t)ri * p.ring_k_stride_rec + c * 4);
            }
        }
        #pragma unroll 1
        for (int r = tid; r < n; r += NT) {
            int ri = r;
            if (!physical) { ri = o0 + r; if (ri >= C) ri -= C; }
            cpAsync4(s_g + r, p.ring_g + rg_base + (int64_t)ri * p.ring_g_stride_rec);
        }
    };
    if (full_ring) issueRing(C, true);

    // ---- 3. this step's inputs (overlap the copies): values, draft gates, normalized drafts ----
    const int64_t vbase = (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h;
    #pragma unroll 1
    for (int i = tid; i < T * TILE; i += NT) {
        const int s = i / TILE, vl = i - s * TILE;
        s_v[i] = v_begin + vl < v_end ? ldAct(p.v, vbase + s * p.v_stride_t + v_begin + vl, bf16) : 0.f;
    }
    if (tid < T) {
        const float a = ldAct(p.a, b * p.a_stride_b + tid * p.a_stride_t + hv, bf16);
        const float bb = ldAct(p.b, b * p.b_stride_b + tid * p.b_stride_t + hv, bf16);
        s_gd[tid] = gdnLogDecay(a, p.A_log[hv], p.dt_bias[hv]);
        s_beta[tid] = sigmoidf(bb);
    }
    for (int s = warp; s < T; s += NT / 32) {
        const void* kp = static_cast<const uint16_t*>(p.k) + b * p.k_stride_b + s * p.k_stride_t + hk * p.k_stride_h;
        const void* qp = static_cast<const uint16_t*>(p.q) + b * p.q_stride_b + s * p.q_stride_t + hk * p.q_stride_h;
        warpNormalizeInto<K>(kp, bf16, 1.f, s_kd[s], lane);
        warpNormalizeInto<K>(qp, bf16, p.scale, s_qd[s], lane);
    }

    // ---- 4. cursors ----
    const bool spec = p.mode == GDN_REPLAY_SPECULATIVE;
    // Cursor invariants (design.md 3.2); a violating row is skipped (the commit kernel reports it).
    // CTA-uniform; the copies in flight into this CTA's shared memory are drained first.
    if (h < 0 || h > p.window || o0 < 0 || o0 >= C || (!spec && h >= p.window)) {
        cpAsyncWaitAll();
        if (bulk && tid == 0) mbarWait(&s_bar, 0);  // tid 0 initialized the barrier
        return;
    }
    if (!full_ring) issueRing(h, false);
    const bool flush = spec ? (h + T > p.window) : (h + 1 == p.window);
    const int nf = spec ? h : h + 1;  // records folded by a flush
    const int nrec = h + T;
    auto urow = [&](int j) {  // shared row of committed record j
        if (!full_ring) return j;
        int r = o0 + j;
        return r >= C ? r - C : r;
    };

    // ---- ring appends of this step's records (global -> global; cursors untouched) ----
    if (blockIdx.x == 0) {
        if (tid < T) {
            int ri = o0 + h + tid;
            ri %= C;
            p.ring_g[rg_base + (int64_t)ri * p.ring_g_stride_rec] = s_gd[tid];
        }
        if (hv % group == 0) {  // raw k, once per key head
            constexpr int KQ = K / 4;
            #pragma unroll 1
            for (int i = tid; i < T * KQ; i += NT) {
                const int s = i / KQ, c = i % KQ;
                const uint2 r = ldRaw4(p.k, b * p.k_stride_b + s * p.k_stride_t + hk * p.k_stride_h + c * 4);
                stRaw4(p.ring_k, rk_base + (int64_t)((o0 + h + s) % C) * p.ring_k_stride_rec + c * 4, r);
            }
        }
    }
    cpAsyncWaitAll();
    __syncthreads();  // (A) ring records, values, gates, drafts visible

    // ---- 5. prefix sums of g over records 0..h+T-1 (warp 0) ----
    if (warp == 0) {
        float carry = 0.f;
        if (lane == 0) s_P[0] = 0.f;
        for (int base = 0; base < nrec; base += 32) {
            const int j = base + lane;
            float g = 0.f;
            if (j < nrec) g = j < h ? s_g[urow(j)] : s_gd[j - h];
            g = scan::warpInclusiveSum(g, lane);
            g += carry;
            if (j < nrec) s_P[j + 1] = g;
            carry = __shfl_sync(kFull, g, 31);
        }
    }
    __syncthreads();  // (B)

    // ---- 6. per-record dots with the drafts (a row group per record) -> decay coefficients ----
#pragma unroll 1
    for (int rb = 0; rb < nrec; rb += NG) {  // CTA-uniform trip count (the group sums are warp-wide)
        const int r = rb + grp;
        const bool active = r < nrec;
        // Key of record r, quad q of this lane (committed: raw act from the ring copy, normalized by
        // `inv` at the end; draft: normalized fp32). Re-read per use: nothing kept in registers.
        const bool committed = r < h;
        const unsigned char* kp = s_kr + (committed ? urow(r) : 0) * KSTR;
        const float* kdr = &s_kd[committed || !active ? 0 : r - h][0];
        auto keyQuad = [&](int q) -> float4 {
            if (committed) return u2ToF4(*reinterpret_cast<const uint2*>(kp + (q * TPR + l) * 8), bf16);
            return ld4s(kdr + (q * TPR + l) * 4);
        };
        float ss = 0.f;  // every lane takes part in the group sum (r < h differs across groups)
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float4 k4 = keyQuad(q);
            ss += dot4(k4, k4);
        }
        ss = groupSum<TPR>(ss);
        const float inv = committed ? rsqrtf(ss + kL2Eps) : 1.f;
        if (committed && l == 0) s_inv[r] = inv;
        const float Pr = active ? s_P[r + 1] : 0.f;
#pragma unroll 1
        for (int s = 0; s < T; ++s) {
            float dk = 0.f, dq = 0.f;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const float4 k4 = keyQuad(q);
                dk += dot4(k4, ld4s(&s_kd[s][(q * TPR + l) * 4]));
                dq += dot4(k4, ld4s(&s_qd[s][(q * TPR + l) * 4]));
            }
            dk = groupSum<TPR>(dk) * inv;
            dq = groupSum<TPR>(dq) * inv;
            if (active && l == 0) {
                putRecordCoef<MAXT>(s_ck, s_cq, s_P, h, r, s, Pr, dk, dq);
            }
        }
    }
    putDecayWeights(s_D, s_fw, &s_fD, s_P, h, T, flush, nf, tid, NT);
    __syncthreads();  // (C)
    if (bulk) mbarWait(&s_bar, 0);

    // ---- 7. rows ----
    const int64_t obase = (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h;
#pragma unroll 1
    for (int vl = grp; vl < TILE; vl += NG) {
        const int v = v_begin + vl;
        const bool valid = v < v_end;
        const ST* rowp = s_tile + (int64_t)vl * K;
        float X[MAXT], Y[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) X[s] = Y[s] = 0.f;
#pragma unroll 2
        for (int q = 0; q < 8; ++q) {
            const int qi = TL::quad(q, grp, l);
            const float4 Sq = ldTileQuad<ST>(rowp, qi);
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                if (s < T) {
                    X[s] += dot4(Sq, ld4s(&s_kd[s][qi * 4]));
                    Y[s] += dot4(Sq, ld4s(&s_qd[s][qi * 4]));
                }
            }
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                X[s] *= s_D[s];
                Y[s] *= s_D[s];
            }
        }
        // committed records, spread over the TPR lanes of the group
#pragma unroll 2
        for (int j = l; j < h; j += TPR) {
            const uint16_t ur = reinterpret_cast<const uint16_t*>(s_u + urow(j) * ustr)[vl];
            const float uj = ubf16 ? __bfloat162float(__ushort_as_bfloat16(ur)) : __half2float(__ushort_as_half(ur));
#pragma unroll
            for (int s = 0; s < MAXT; ++s) {
                if (s < T) {
                    X[s] += s_ck[j][s] * uj;
                    Y[s] += s_cq[j][s] * uj;
                }
            }
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                X[s] = groupSum<TPR>(X[s]);
                Y[s] = groupSum<TPR>(Y[s]);
            }
        }
        float ud[MAXT];
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            ud[s] = 0.f;
            if (s < T) {
                float acc = X[s];
#pragma unroll
                for (int i = 0; i < s; ++i) acc += s_ck[h + i][s] * ud[i];
                ud[s] = s_beta[s] * (s_v[s * TILE + vl] - acc);
            }
        }
#pragma unroll
        for (int s = 0; s < MAXT; ++s) {
            if (s < T) {
                float o = Y[s];
#pragma unroll
                for (int i = 0; i <= s; ++i) o += s_cq[h + i][s] * ud[i];
                if (valid && (s % TPR) == l) {
                    stAct(p.o, obase + s * p.o_stride_t + v, o, bf16);
                    stAct(p.ring_u, ru_base + (int64_t)((o0 + h + s) % C) * p.ring_u_stride_rec + v, ud[s], ubf16);
                }
            }
        }
        if (flush) {  // CTA-uniform; two halves of 4 quads keep 16 accumulators live, not 32
            const float fD = s_fD;
            ST* row = valid ? ckpt + (int64_t)v * p.state_stride_v : nullptr;
#pragma unroll 1
            for (int half = 0; half < 2; ++half) {
                float4 acc[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[q] = scale4(ldTileQuad<ST>(rowp, TL::quad(half * 4 + q, grp, l)), fD);
                for (int j = 0; j < nf; ++j) {
                    if (j < h) {
                        const int rj = urow(j);
                        const uint16_t ur = reinterpret_cast<const uint16_t*>(s_u + rj * ustr)[vl];
                        const float uj =
                            ubf16 ? __bfloat162float(__ushort_as_bfloat16(ur)) : __half2float(__ushort_as_half(ur));
                        const float w = s_fw[j] * uj * s_inv[j];
                        const unsigned char* kp = s_kr + rj * KSTR;
#pragma unroll
                        for (int q = 0; q < 4; ++q)
                            fma4(acc[q], w,
                                 u2ToF4(*reinterpret_cast<const uint2*>(kp + TL::quad(half * 4 + q, grp, l) * 8), bf16));
                    } else {  // standard mode: the current token (record h), unrounded u (as the reference)
                        const float w = s_fw[j] * ud[0];
#pragma unroll
                        for (int q = 0; q < 4; ++q) fma4(acc[q], w, ld4s(&s_kd[0][TL::quad(half * 4 + q, grp, l) * 4]));
                    }
                }
                if (row != nullptr) {
#pragma unroll
                    for (int q = 0; q < 4; ++q) StateIO<ST>::st(row + TL::quad(half * 4 + q, grp, l) * 4, acc[q]);
                }
            }
        }
    }
}

}  // namespace gdn
}  // namespace rssm
