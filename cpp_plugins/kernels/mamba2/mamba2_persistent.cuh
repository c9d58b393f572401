// Persistent, warp-specialized Mamba-2 kernels (variants 1 and 2, docs/kernels-mamba2.md):
//   mamba2ReplayPersistentKernel  ReplaySSM decode (standard / speculative), same math as
//                                 mamba2ReplayKernel (mamba2_replay_kernel.cuh)
//   mamba2DecodePersistentKernel  conventional decode / per-draft-snapshot verify, same math as
//                                 mamba2DecodeKernel
//
// Grid: (CTAs per SM) x SMs, each CTA loops over work items it = blockIdx.x + m * gridDim.x,
// item = (row b, head, P tile of rows_per_cta rows). Per CTA: NC consumer warps + 1 producer warp.
//
// Producer warp (the last warp): holds slot (and cursors) of 32 items per lane-batch in registers,
// loaded 16 items before they are needed (so the slot -> cursors chain never stalls the stream);
// for item m it waits until stage m % 2 is free (empty mbarrier), then issues everything the item
// needs at once: the checkpoint tile, records B_j / x_j and this step's x, z, B, C with
// cp.async.bulk (TMA, completion counted in bytes on the stage's full mbarrier), and the 4-byte
// scalars (ring dt_j, dt_raw, A, D, dt_bias) with cp.async + cp.async.mbarrier.arrive.noinc.
// So every item's inputs are in flight one item ahead, in 1 dependent round trip.
//
// Consumer warps: wait on the full mbarrier of the stage, then (replay)
//   phase 1  warp 0: dt (softplus of tokens) and prefix sums of dt*A; all warps: K^T Q dots
//            B_j . C_s for all T tokens of a record in one pass (lanes split N, T partial sums
//            reduced by one transposed butterfly: 9 shuffles for 8 values); ring append stores
//   phase 2  coefficients; readout S[p,:] . C_s for 8 rows x T tokens per warp pass (same
//            transposed reduction); flush rows fold the records in registers and store the tile
//   phase 3  y = gamma_s dot + sum_j coef_sj x_j[p] + D x_s[p] (times silu z), coalesced stores
// with two named barriers (consumers only) per item; then each warp arrives on the stage's empty
// mbarrier. Shared-memory scratch is per stage, so warps can be one phase apart across items.
#pragma once
#include <type_traits>

#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

// ------------------------------------------------------------------------------- PTX helpers
__device__ __forceinline__ uint32_t smemU32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemU32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void fenceBarrierInit() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarExpectTx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smemU32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarArrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemU32(bar)) : "memory");
}
__device__ __forceinline__ void mbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemU32(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred P1;\n"
        "LAB_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra DONE;\n"
        "bra LAB_WAIT;\n"
        "DONE:\n"
        "}\n" ::"r"(smemU32(bar)),
        "r"(parity)
        : "memory");
}
// Global -> shared bulk copy (TMA, no tensor map): bytes % 16 == 0, both addresses 16-byte aligned.
__device__ __forceinline__ void bulkG2S(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smemU32(dst)),
                 "l"(src), "r"(bytes), "r"(smemU32(bar))
                 : "memory");
}
// Same with an L2 evict-first hint (the checkpoint / state tile is read once per step).
__device__ __forceinline__ void bulkG2SEvictFirst(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                  uint64_t policy) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
        "%4;\n" ::"r"(smemU32(dst)),
        "l"(src), "r"(bytes), "r"(smemU32(bar)), "l"(policy)
        : "memory");
}
__device__ __forceinline__ uint64_t policyEvictFirst() {
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
    return pol;
}
// cpAsync4: mamba2_common.cuh
// The mbarrier receives one arrival when all prior cp.async of this thread have completed (counted
// in the barrier's expected arrivals: .noinc).
__device__ __forceinline__ void cpAsyncArriveNoinc(uint64_t* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smemU32(bar)) : "memory");
}
// Barrier among the consumer warps only (id 1; the producer warp never joins it).
template <int kThreadsC>
__device__ __forceinline__ void consumerSync() {
    asm volatile("bar.sync 1, %0;\n" ::"n"(kThreadsC) : "memory");
}

// ----------------------------------------------------------------------- vector helpers
// A lane's slice of one row of N columns: E = N / 32 elements as KV vectors of VE elements, vector
// k starting at column (k * 32 + lane) * VE (a warp reads whole rows contiguously: no bank conflict).
template <typename StateT, int N>
struct LaneSlice {
    static constexpr int E = N / 32;
    static constexpr int VE = (E * (int)sizeof(StateT) <= 16) ? E : 16 / (int)sizeof(StateT);
    static constexpr int KV = E / VE;
    static_assert(E * 32 == N && KV * VE == E && (VE == 2 || VE == 4 || VE == 8), "slice");
    __device__ __forceinline__ static int col(int lane, int k) { return (k * 32 + lane) * VE; }
};

template <typename StateT, int VE>
__device__ __forceinline__ void ldsState(const StateT* ptr, float* out) {
    if constexpr (std::is_same<StateT, float>::value) {
        if constexpr (VE == 2) {
            const float2 t = *reinterpret_cast<const float2*>(ptr);
            out[0] = t.x; out[1] = t.y;
        } else {
            static_assert(VE == 4, "VE");
            const float4 t = *reinterpret_cast<const float4*>(ptr);
            out[0] = t.x; out[1] = t.y; out[2] = t.z; out[3] = t.w;
        }
    } else {
        loadAct<VE>(reinterpret_cast<const uint16_t*>(ptr), std::is_same<StateT, __nv_bfloat16>::value, out);
    }
}

template <typename StateT>
__device__ __forceinline__ uint32_t packState2(float a, float b) {
    if constexpr (std::is_same<StateT, __half>::value) {
        const __half2 h = __floats2half2_rn(a, b);
        return *reinterpret_cast<const uint32_t*>(&h);
    } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        return *reinterpret_cast<const uint32_t*>(&h);
    }
}

// Streaming store of VE state values (round to nearest for 16-bit states).
template <typename StateT, int VE>
__device__ __forceinline__ void stgState(StateT* ptr, const float* v) {
    if constexpr (std::is_same<StateT, float>::value) {
        if constexpr (VE == 2) {
            __stcs(reinterpret_cast<float2*>(ptr), make_float2(v[0], v[1]));
        } else {
            __stcs(reinterpret_cast<float4*>(ptr), make_float4(v[0], v[1], v[2], v[3]));
        }
    } else {
        if constexpr (VE == 2) {
            __stcs(reinterpret_cast<unsigned int*>(ptr), packState2<StateT>(v[0], v[1]));
        } else if constexpr (VE == 4) {
            __stcs(reinterpret_cast<uint2*>(ptr), make_uint2(packState2<StateT>(v[0], v[1]), packState2<StateT>(v[2], v[3])));
        } else {
            __stcs(reinterpret_cast<uint4*>(ptr), make_uint4(packState2<StateT>(v[0], v[1]), packState2<StateT>(v[2], v[3]),
                                                            packState2<StateT>(v[4], v[5]), packState2<StateT>(v[6], v[7])));
        }
    }
}

// Transposed butterfly: 8 partial sums per lane, summed over the 32 lanes of the warp with 9
// shuffles (instead of 8 x 5). Returns the full sum of value index (lane >> 2).
__device__ __forceinline__ float reduce8(float (&v)[8], int lane) {
    {
        const bool up = (lane & 16) != 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float send = up ? v[i] : v[i + 4];
            const float keep = up ? v[i + 4] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
        }
    }
    {
        const bool up = (lane & 8) != 0;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const float send = up ? v[i] : v[i + 2];
            const float keep = up ? v[i + 2] : v[i];
            v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
        }
    }
    {
        const bool up = (lane & 4) != 0;
        const float send = up ? v[0] : v[1];
        const float keep = up ? v[1] : v[0];
        v[0] = keep + __shfl_xor_sync(0xffffffffu, send, 4);
    }
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], 2);
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], 1);
    return v[0];
}

// Decodes a dt_raw word fetched by a 4-byte cp.async (fp32, or the aligned pair holding a 16-bit value).
__device__ __forceinline__ float rawDtValue(uint32_t word, bool dtF32, bool actBf16, int64_t elemOff) {
    if (dtF32) return __uint_as_float(word);
    const uint16_t bits = (elemOff & 1) ? uint16_t(word >> 16) : uint16_t(word & 0xffffu);
    return actToFloat(bits, actBf16);
}

// Producer: 4-byte cp.async of dt_raw[off] (the aligned word holding it for 16-bit dt).
__device__ __forceinline__ void cpAsyncDtRaw(uint32_t* dst, const void* dtRaw, bool dtF32, int64_t off) {
    const char* base = reinterpret_cast<const char*>(dtRaw);
    const char* src = dtF32 ? base + off * 4 : base + ((off * 2) & ~int64_t(3));
    cpAsync4(dst, src);
}

constexpr int kPipeStages = 2;
constexpr int kBarBytes = 64;  // 2 full + 2 empty mbarriers, padded

// -------------------------------------------------------------------- shared-memory plans
// Byte offsets inside one pipeline stage; the stage repeats kPipeStages times after kBarBytes.
struct PersistentPlan {
    size_t tile, rB, rX, bIn, cIn, xIn, zIn, raw, dt, cum, coef, dot, meta, stage, total;
    int ldCoef;
};

// Replay: committed records j < h <= L (B_j bits [L][N], x_j bits [L][rows]), this step's tokens
// (B_s, C_s [T][N], x_s, z_s [T][rows]), raw scalars [L + T] (ring dt_j at j, dt_raw of token s at
// L + s), dt and prefix sums [L + T], coefficients [T][L + T], dots [T][rows], meta.
__host__ __device__ inline PersistentPlan replayPersistentPlan(int T, int L, int N, int rows, int sb) {
    PersistentPlan s{};
    size_t o = 0;
    auto take = [&o](size_t bytes) { const size_t at = o; o += (bytes + 15) & ~size_t(15); return at; };
    s.tile = take((size_t)rows * N * sb);
    s.rB = take((size_t)2 * L * N);
    s.rX = take((size_t)2 * L * rows);
    s.bIn = take((size_t)2 * T * N);
    s.cIn = take((size_t)2 * T * N);
    s.xIn = take((size_t)2 * T * rows);
    s.zIn = take((size_t)2 * T * rows);
    s.raw = take((size_t)4 * (L + T));
    s.dt = take((size_t)4 * (L + T));
    s.cum = take((size_t)4 * (L + T));
    s.ldCoef = L + T;
    s.coef = take((size_t)4 * T * (L + T));
    s.dot = take((size_t)4 * T * rows);
    s.meta = take(64);
    s.stage = o;
    s.total = kBarBytes + kPipeStages * s.stage;
    return s;
}

// Conventional: tile, B_s, C_s [T][N], x_s, z_s [T][rows], raw dt [T], dots [T][rows], meta.
__host__ __device__ inline PersistentPlan decodePersistentPlan(int T, int N, int rows, int sb) {
    PersistentPlan s{};
    size_t o = 0;
    auto take = [&o](size_t bytes) { const size_t at = o; o += (bytes + 15) & ~size_t(15); return at; };
    s.tile = take((size_t)rows * N * sb);
    s.bIn = take((size_t)2 * T * N);
    s.cIn = take((size_t)2 * T * N);
    s.xIn = take((size_t)2 * T * rows);
    s.zIn = take((size_t)2 * T * rows);
    s.raw = take((size_t)4 * T);
    s.dot = take((size_t)4 * T * rows);
    s.meta = take(64);
    s.stage = o;
    s.total = kBarBytes + kPipeStages * s.stage;
    return s;
}

// meta words of a stage
enum MetaField { kMetaStatus = 0, kMetaSlot, kMetaO, kMetaH, kMetaA, kMetaD, kMetaBias, kMetaCount };
enum ItemStatus { kItemSkip = 0, kItemInvalid = 1, kItemActive = 2 };

struct ItemCoord {
    int b, head, tile0, nRows;
};
__device__ __forceinline__ ItemCoord itemCoord(long long it, int nTiles, int H, int P, int rows) {
    ItemCoord c;
    const long long bh = it / nTiles;
    const int tile = (int)(it - bh * nTiles);
    c.head = (int)(bh % H);
    c.b = (int)(bh / H);
    c.tile0 = tile * rows;
    c.nRows = min(rows, P - c.tile0);
    return c;
}

__device__ __forceinline__ int slotOfRow(const int32_t* sbi, int b) { return sbi ? sbi[b] : b; }

// Producer-side batch of item metadata: lane l holds item (base + l) of this CTA.
struct MetaBatch {
    int slot, o, h;
};

__device__ __forceinline__ void loadSlots(MetaBatch& m, long long firstItem, long long stride, long long numItems,
                                          int nTiles, int H, const int32_t* sbi, int lane) {
    const long long it = firstItem + (long long)lane * stride;
    m.slot = -1;
    m.o = 0;
    m.h = 0;
    if (it < numItems) m.slot = slotOfRow(sbi, (int)(it / nTiles / H));
}
__device__ __forceinline__ void loadCursors(MetaBatch& m, const int32_t* origin, const int32_t* len, int S) {
    m.o = 0;
    m.h = 0;
    if (m.slot >= 0 && m.slot < S) {
        m.o = origin[m.slot];
        m.h = len[m.slot];
    }
}

// ==================================================================================== replay
template <typename StateT, int N, int NC>
__global__ void __launch_bounds__((NC + 1) * 32, (NC >= 8 ? 2 : 3))
    mamba2ReplayPersistentKernel(const Mamba2ReplayParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // bulk copies / mbarriers need sm_90; the launcher never picks this kernel below sm_90
#else
    using Sl = LaneSlice<StateT, N>;
    constexpr int E = Sl::E, VE = Sl::VE, KV = Sl::KV;
    constexpr int kCT = NC * 32;
    extern __shared__ float4 smem4[];
    char* sm = reinterpret_cast<char*>(smem4);
    uint64_t* fullBar = reinterpret_cast<uint64_t*>(sm);
    uint64_t* emptyBar = fullBar + kPipeStages;

    const int T = p.num_tokens, L = p.window, Cap = p.ring_capacity;
    const int P = p.headdim, H = p.nheads, G = p.ngroups, S = p.num_slots;
    const int rows = p.rows_per_cta;
    const int nTiles = (P + rows - 1) / rows;
    const int hpg = H / G;
    const long long numItems = (long long)p.batch * H * nTiles;
    const long long grid = gridDim.x;
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const PersistentPlan plan = replayPersistentPlan(T, L, N, rows, (int)sizeof(StateT));
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

    if (tid == 0) {
        for (int i = 0; i < kPipeStages; ++i) {
            mbarInit(&fullBar[i], 33);  // producer lane 0 (arrive.expect_tx) + 32 cp.async arrivals
            mbarInit(&emptyBar[i], NC);  // one arrival per consumer warp
        }
        fenceBarrierInit();
    }
    __syncthreads();

    if (warp == NC) {
        // ------------------------------------------------------------------ producer warp
        const uint64_t pol = policyEvictFirst();
        const bool hasZ = p.z != nullptr;
        // Part A of an item needs only its slot: checkpoint tile, this step's x, z, B, C, dt_raw and
        // the head's A, D, dt_bias (mbarrier.expect_tx, no arrival). Part B needs the cursors: the
        // committed records, the meta words, then the producer's arrivals (arrive.expect_tx + the
        // 32 cp.async arrivals). The first two items issue part A before their cursors are loaded.
        auto issueA = [&](int st, int slot, const ItemCoord& c) {
            char* sg = sm + kBarBytes + st * plan.stage;
            const int g = c.head / hpg;
            const uint32_t tileBytes = (uint32_t)(c.nRows * N * sizeof(StateT));
            const uint32_t bytes = tileBytes + (uint32_t)T * (4 * N + 2 * c.nRows * (hasZ ? 2 : 1));
            if (lane == 0) mbarExpectTx(&fullBar[st], bytes);
            __syncwarp();
            const StateT* ck = reinterpret_cast<const StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                               (int64_t)c.head * p.stride_state_head + (int64_t)c.tile0 * p.stride_state_p;
            StateT* sTile = reinterpret_cast<StateT*>(sg + plan.tile);
            if (p.stride_state_p == N) {
                if (lane == 0) bulkG2SEvictFirst(sTile, ck, tileBytes, &fullBar[st], pol);
            } else {
                for (int r = lane; r < c.nRows; r += 32)
                    bulkG2SEvictFirst(sTile + r * N, ck + (int64_t)r * p.stride_state_p, (uint32_t)(N * sizeof(StateT)),
                                      &fullBar[st], pol);
            }
            uint32_t* sRaw = reinterpret_cast<uint32_t*>(sg + plan.raw);
            if (lane < T) {
                const int s = lane;
                const uint16_t* xg = reinterpret_cast<const uint16_t*>(p.x) + (int64_t)c.b * p.stride_x_b +
                                     (int64_t)s * p.stride_x_t + (int64_t)c.head * p.stride_x_h + c.tile0;
                bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.xIn) + s * rows, xg, 2 * c.nRows, &fullBar[st]);
                if (hasZ) {
                    const uint16_t* zg = reinterpret_cast<const uint16_t*>(p.z) + (int64_t)c.b * p.stride_z_b +
                                         (int64_t)s * p.stride_z_t + (int64_t)c.head * p.stride_z_h + c.tile0;
                    bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.zIn) + s * rows, zg, 2 * c.nRows, &fullBar[st]);
                }
                const uint16_t* bg = reinterpret_cast<const uint16_t*>(p.Bm) + (int64_t)c.b * p.stride_B_b +
                                     (int64_t)s * p.stride_B_t + (int64_t)g * p.stride_B_g;
                bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.bIn) + s * N, bg, 2 * N, &fullBar[st]);
                const uint16_t* cg = reinterpret_cast<const uint16_t*>(p.Cm) + (int64_t)c.b * p.stride_C_b +
                                     (int64_t)s * p.stride_C_t + (int64_t)g * p.stride_C_g;
                bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.cIn) + s * N, cg, 2 * N, &fullBar[st]);
                cpAsyncDtRaw(sRaw + L + s, p.dt_raw, dtF32,
                             (int64_t)c.b * p.stride_dt_b + (int64_t)s * p.stride_dt_t + (int64_t)c.head * p.stride_dt_h);
            }
            float* metaF = reinterpret_cast<float*>(sg + plan.meta);
            if (lane == 31) cpAsync4(metaF + kMetaA, p.A + c.head);
            if (lane == 30 && p.D) cpAsync4(metaF + kMetaD, p.D + c.head);
            if (lane == 29 && p.dt_bias) cpAsync4(metaF + kMetaBias, p.dt_bias + c.head);
        };
        auto issueB = [&](int st, int slot, int o, int h, const ItemCoord& c) {
            char* sg = sm + kBarBytes + st * plan.stage;
            int* meta = reinterpret_cast<int*>(sg + plan.meta);
            const int g = c.head / hpg;
            int status = kItemSkip;
            if (slot >= 0 && slot < S) {
                const bool valid = o >= 0 && o < Cap && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L) && h + T <= Cap;
                // dual-precision decode: a flushing row is left to the kernel that reads the recurrence
                // copy (part A already in flight completes the stage like an invalid row's)
                const bool skipFlush = p.skip_flush_rows && (p.mode == 0 ? h + 1 == L : h + T > L);
                status = valid ? (skipFlush ? kItemSkip : kItemActive) : kItemInvalid;
            }
            if (lane == 0) {
                meta[kMetaStatus] = status;
                meta[kMetaSlot] = slot;
                meta[kMetaO] = o;
                meta[kMetaH] = h;
                if (!p.D) reinterpret_cast<float*>(meta)[kMetaD] = 0.f;
                if (!p.dt_bias) reinterpret_cast<float*>(meta)[kMetaBias] = 0.f;
            }
            if (status == kItemActive) {
                const uint32_t bytes = (uint32_t)h * (2 * N + 2 * c.nRows);
                if (lane == 0) mbarArriveExpectTx(&fullBar[st], bytes);
                __syncwarp();
                const int64_t ringSlot = (int64_t)slot * Cap;
                uint16_t* sRB = reinterpret_cast<uint16_t*>(sg + plan.rB);
                uint16_t* sRX = reinterpret_cast<uint16_t*>(sg + plan.rX);
                uint32_t* sRaw = reinterpret_cast<uint32_t*>(sg + plan.raw);
                for (int j = lane; j < h; j += 32) {
                    const int64_t ri = ringSlot + (o + j) % Cap;
                    bulkG2S(sRB + j * N, reinterpret_cast<const uint16_t*>(p.ring_B) + (ri * G + g) * N, 2 * N,
                            &fullBar[st]);
                    bulkG2S(sRX + j * rows, reinterpret_cast<const uint16_t*>(p.ring_x) + (ri * H + c.head) * P + c.tile0,
                            2 * c.nRows, &fullBar[st]);
                    cpAsync4(sRaw + j, p.ring_dt + ri * H + c.head);
                }
            } else {
                if (lane == 0) mbarArrive(&fullBar[st]);
            }
            cpAsyncArriveNoinc(&fullBar[st]);
        };

        MetaBatch cur, nxt;
        loadSlots(cur, blockIdx.x, grid, numItems, nTiles, H, p.state_batch_indices, lane);
        // items 0 and 1: part A as soon as their slots are known (stages start empty)
        for (int m = 0; m < kPipeStages; ++m) {
            const long long it = blockIdx.x + (long long)m * grid;
            const int slot = __shfl_sync(0xffffffffu, cur.slot, m);
            if (it < numItems && slot >= 0 && slot < S) issueA(m, slot, itemCoord(it, nTiles, H, P, rows));
        }
        loadCursors(cur, p.ring_origin, p.ring_len, S);
        nxt = cur;
        for (long long m = 0;; ++m) {
            const long long it = blockIdx.x + m * grid;
            if (it >= numItems) break;
            const int mi = (int)(m & 31);
            if (mi == 0 && m > 0) cur = nxt;
            if (mi == 8) loadSlots(nxt, blockIdx.x + (m - 8 + 32) * grid, grid, numItems, nTiles, H,
                                   p.state_batch_indices, lane);
            if (mi == 16) loadCursors(nxt, p.ring_origin, p.ring_len, S);
            const int slot = __shfl_sync(0xffffffffu, cur.slot, mi);
            const int o = __shfl_sync(0xffffffffu, cur.o, mi);
            const int h = __shfl_sync(0xffffffffu, cur.h, mi);
            const int st = (int)(m & 1);
            const uint32_t use = (uint32_t)(m >> 1);
            const ItemCoord c = itemCoord(it, nTiles, H, P, rows);
            if (m >= kPipeStages) {
                mbarWait(&emptyBar[st], (use & 1u) ^ 1u);
                if (slot >= 0 && slot < S) issueA(st, slot, c);
            }
            issueB(st, slot, o, h, c);
        }
        cpAsyncWaitAll();  // no cp.async of an exited thread left in flight
        return;
    }

    // ---------------------------------------------------------------------- consumer warps
    const int64_t ringStrideH = H;
    for (long long m = 0;; ++m) {
        const long long it = blockIdx.x + m * grid;
        if (it >= numItems) break;
        const int st = (int)(m & 1);
        const uint32_t use = (uint32_t)(m >> 1);
        mbarWait(&fullBar[st], use & 1u);
        char* sg = sm + kBarBytes + st * plan.stage;
        const int* meta = reinterpret_cast<const int*>(sg + plan.meta);
        const int status = meta[kMetaStatus];
        const ItemCoord c = itemCoord(it, nTiles, H, P, rows);
        uint16_t* yg = reinterpret_cast<uint16_t*>(p.y) + (int64_t)c.b * p.stride_y_b + (int64_t)c.head * p.stride_y_h +
                       c.tile0;
        if (status == kItemActive) {
            const int slot = meta[kMetaSlot], o = meta[kMetaO], h = meta[kMetaH];
            const float Ah = reinterpret_cast<const float*>(meta)[kMetaA];
            const float Dh = reinterpret_cast<const float*>(meta)[kMetaD];
            const float bias = reinterpret_cast<const float*>(meta)[kMetaBias];
            const int g = c.head / hpg;
            const int nrec = h + T;
            const bool flush = p.mode == 0 ? (h + 1 == L) : (h + T > L);
            const int nf = flush ? (p.mode == 0 ? h + 1 : h) : 0;
            const StateT* sTile = reinterpret_cast<const StateT*>(sg + plan.tile);
            const uint16_t* sRB = reinterpret_cast<const uint16_t*>(sg + plan.rB);
            const uint16_t* sRX = reinterpret_cast<const uint16_t*>(sg + plan.rX);
            const uint16_t* sBin = reinterpret_cast<const uint16_t*>(sg + plan.bIn);
            const uint16_t* sCin = reinterpret_cast<const uint16_t*>(sg + plan.cIn);
            const uint16_t* sXin = reinterpret_cast<const uint16_t*>(sg + plan.xIn);
            const uint16_t* sZin = reinterpret_cast<const uint16_t*>(sg + plan.zIn);
            const uint32_t* sRaw = reinterpret_cast<const uint32_t*>(sg + plan.raw);
            float* sDt = reinterpret_cast<float*>(sg + plan.dt);
            float* sCum = reinterpret_cast<float*>(sg + plan.cum);
            float* sCoef = reinterpret_cast<float*>(sg + plan.coef);
            float* sDot = reinterpret_cast<float*>(sg + plan.dot);
            const int ld = plan.ldCoef;
            const int64_t ringSlot = (int64_t)slot * Cap;

            // ---- phase 1: dt + prefix sums (warp 0), K^T Q dots (all warps), ring append
            if (warp == 0) {
                float carry = 0.f;
                for (int base = 0; base < nrec; base += 32) {
                    const int j = base + lane;
                    float dt = 0.f;
                    if (j < h) {
                        dt = __uint_as_float(sRaw[j]);
                    } else if (j < nrec) {
                        const int s = j - h;
                        const int64_t off = (int64_t)c.b * p.stride_dt_b + (int64_t)s * p.stride_dt_t +
                                            (int64_t)c.head * p.stride_dt_h;
                        dt = softplusF(rawDtValue(sRaw[L + s], dtF32, actBf16, off) + bias);
                        if (c.tile0 == 0) p.ring_dt[(ringSlot + (o + h + s) % Cap) * ringStrideH + c.head] = dt;
                    }
                    float v = dt * Ah;
#pragma unroll
                    for (int off = 1; off < 32; off <<= 1) {
                        const float t = __shfl_up_sync(0xffffffffu, v, off);
                        if (lane >= off) v += t;
                    }
                    v += carry;
                    if (j < nrec) {
                        sDt[j] = dt;
                        sCum[j] = v;
                    }
                    carry = __shfl_sync(0xffffffffu, v, 31);
                }
            }
            {
                float cq[RSSM_MAMBA2_MAX_TOKENS][E];
#pragma unroll
                for (int s = 0; s < RSSM_MAMBA2_MAX_TOKENS; ++s) {
#pragma unroll
                    for (int k = 0; k < KV; ++k) {
                        if (s < T) {
                            loadAct<VE>(sCin + s * N + Sl::col(lane, k), actBf16, &cq[s][k * VE]);
                        } else {
#pragma unroll
                            for (int e = 0; e < VE; ++e) cq[s][k * VE + e] = 0.f;
                        }
                    }
                }
                for (int j = warp; j < nrec; j += NC) {
                    const uint16_t* bj = j < h ? sRB + j * N : sBin + (j - h) * N;
                    float bv[E];
#pragma unroll
                    for (int k = 0; k < KV; ++k) loadAct<VE>(bj + Sl::col(lane, k), actBf16, &bv[k * VE]);
                    float part[8];
#pragma unroll
                    for (int s = 0; s < 8; ++s) {
                        float a = 0.f;
#pragma unroll
                        for (int e = 0; e < E; ++e) a = fmaf(bv[e], cq[s][e], a);
                        part[s] = a;
                    }
                    const float d = reduce8(part, lane);
                    const int s = lane >> 2;
                    if ((lane & 3) == 0 && s < T) sCoef[s * ld + j] = (j <= h + s) ? d : 0.f;
                }
            }
            {
                const int nxv = c.nRows >> 3;
                uint16_t* rX = reinterpret_cast<uint16_t*>(p.ring_x);
                for (int i = tid; i < T * nxv; i += kCT) {
                    const int s = i / nxv, v = i - s * nxv;
                    const uint4 val = *reinterpret_cast<const uint4*>(sXin + s * rows + v * 8);
                    *reinterpret_cast<uint4*>(rX + ((ringSlot + (o + h + s) % Cap) * H + c.head) * P + c.tile0 + v * 8) = val;
                }
                if (c.tile0 == 0 && c.head % hpg == 0) {
                    constexpr int nbv = N / 8;
                    uint16_t* rB = reinterpret_cast<uint16_t*>(p.ring_B);
                    for (int i = tid; i < T * nbv; i += kCT) {
                        const int s = i / nbv, v = i - s * nbv;
                        const uint4 val = *reinterpret_cast<const uint4*>(sBin + s * N + v * 8);
                        *reinterpret_cast<uint4*>(rB + ((ringSlot + (o + h + s) % Cap) * G + g) * N + v * 8) = val;
                    }
                }
            }
            consumerSync<kCT>();

            // ---- phase 2: coefficients; readout (8 rows x T tokens per warp pass); fold on flush
            for (int i = tid; i < T * nrec; i += kCT) {
                const int s = i / nrec, j = i - s * nrec;
                if (j <= h + s) sCoef[s * ld + j] *= __expf(sCum[h + s] - sCum[j]) * sDt[j];
            }
            {
                const int nBatch = c.nRows >> 3;
                const float cl = nf > 0 ? sCum[nf - 1] : 0.f;
                for (int rb = warp; rb < nBatch; rb += NC) {
                    const int r0 = rb * 8;
                    float sv[8][E];
#pragma unroll
                    for (int r = 0; r < 8; ++r)
#pragma unroll
                        for (int k = 0; k < KV; ++k)
                            ldsState<StateT, VE>(sTile + (r0 + r) * N + Sl::col(lane, k), &sv[r][k * VE]);
                    for (int s = 0; s < T; ++s) {
                        float cv[E];
#pragma unroll
                        for (int k = 0; k < KV; ++k) loadAct<VE>(sCin + s * N + Sl::col(lane, k), actBf16, &cv[k * VE]);
                        float part[8];
#pragma unroll
                        for (int r = 0; r < 8; ++r) {
                            float a = 0.f;
#pragma unroll
                            for (int e = 0; e < E; ++e) a = fmaf(sv[r][e], cv[e], a);
                            part[r] = a;
                        }
                        const float d = reduce8(part, lane);
                        if ((lane & 3) == 0) sDot[s * rows + r0 + (lane >> 2)] = d;
                    }
                    if (nf > 0) {
                        const float gf = __expf(cl);
#pragma unroll
                        for (int r = 0; r < 8; ++r)
#pragma unroll
                            for (int e = 0; e < E; ++e) sv[r][e] *= gf;
                        for (int j = 0; j < nf; ++j) {
                            const uint16_t* bj = j < h ? sRB + j * N : sBin + (j - h) * N;
                            const uint16_t* xj = j < h ? sRX + j * rows : sXin + (j - h) * rows;
                            const float fw = __expf(cl - sCum[j]) * sDt[j];
                            float bv[E], xw[8];
#pragma unroll
                            for (int k = 0; k < KV; ++k) loadAct<VE>(bj + Sl::col(lane, k), actBf16, &bv[k * VE]);
                            loadAct<8>(xj + r0, actBf16, xw);
#pragma unroll
                            for (int r = 0; r < 8; ++r) {
                                const float w = fw * xw[r];
#pragma unroll
                                for (int e = 0; e < E; ++e) sv[r][e] = fmaf(w, bv[e], sv[r][e]);
                            }
                        }
                        StateT* ck = reinterpret_cast<StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                                     (int64_t)c.head * p.stride_state_head;
#pragma unroll
                        for (int r = 0; r < 8; ++r)
#pragma unroll
                            for (int k = 0; k < KV; ++k)
                                stgState<StateT, VE>(ck + (int64_t)(c.tile0 + r0 + r) * p.stride_state_p + Sl::col(lane, k),
                                                     &sv[r][k * VE]);
                    }
                }
            }
            consumerSync<kCT>();

            // ---- phase 3: outputs
            for (int i = tid; i < T * c.nRows; i += kCT) {
                const int s = i / c.nRows, r = i - s * c.nRows;
                const float* coef = sCoef + s * ld;
                float acc = __expf(sCum[h + s]) * sDot[s * rows + r];
                const int jEnd = h + s;  // inclusive
                int j = 0;
                const int jh = min(jEnd + 1, h);
#pragma unroll 4
                for (; j < jh; ++j) acc = fmaf(coef[j], actToFloat(sRX[j * rows + r], actBf16), acc);
#pragma unroll 4
                for (; j <= jEnd; ++j) acc = fmaf(coef[j], actToFloat(sXin[(j - h) * rows + r], actBf16), acc);
                const float xs = actToFloat(sXin[s * rows + r], actBf16);
                acc = fmaf(Dh, xs, acc);
                if (p.z) acc *= siluF(actToFloat(sZin[s * rows + r], actBf16));
                yg[(int64_t)s * p.stride_y_t + r] = floatToAct(acc, actBf16);
            }
        } else if (status == kItemInvalid) {
            const uint16_t nanBits = floatToAct(__int_as_float(0x7fc00000), actBf16);
            for (int i = tid; i < T * c.nRows; i += kCT) {
                const int s = i / c.nRows, r = i - s * c.nRows;
                yg[(int64_t)s * p.stride_y_t + r] = nanBits;
            }
        }
        __syncwarp();
        if (lane == 0) mbarArrive(&emptyBar[st]);
    }
#endif  // sm_90+
}

// ============================================================================== conventional
template <typename StateT, int N, int NC>
__global__ void __launch_bounds__((NC + 1) * 32, (NC >= 8 ? 2 : 3))
    mamba2DecodePersistentKernel(const Mamba2DecodeParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();  // bulk copies / mbarriers need sm_90; the launcher never picks this kernel below sm_90
#else
    using Sl = LaneSlice<StateT, N>;
    constexpr int E = Sl::E, VE = Sl::VE, KV = Sl::KV;
    constexpr int kCT = NC * 32;
    extern __shared__ float4 smem4[];
    char* sm = reinterpret_cast<char*>(smem4);
    uint64_t* fullBar = reinterpret_cast<uint64_t*>(sm);
    uint64_t* emptyBar = fullBar + kPipeStages;

    const int T = p.num_tokens;
    const int P = p.headdim, H = p.nheads, G = p.ngroups, S = p.num_slots;
    const int rows = p.rows_per_cta;
    const int nTiles = (P + rows - 1) / rows;
    const int hpg = H / G;
    const long long numItems = (long long)p.batch * H * nTiles;
    const long long grid = gridDim.x;
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const bool dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const PersistentPlan plan = decodePersistentPlan(T, N, rows, (int)sizeof(StateT));
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

    if (tid == 0) {
        for (int i = 0; i < kPipeStages; ++i) {
            mbarInit(&fullBar[i], 33);
            mbarInit(&emptyBar[i], NC);
        }
        fenceBarrierInit();
    }
    __syncthreads();

    if (warp == NC) {
        // ------------------------------------------------------------------ producer warp
        const uint64_t pol = policyEvictFirst();
        MetaBatch cur, nxt;
        loadSlots(cur, blockIdx.x, grid, numItems, nTiles, H, p.state_batch_indices, lane);
        nxt = cur;
        for (long long m = 0;; ++m) {
            const long long it = blockIdx.x + m * grid;
            if (it >= numItems) break;
            const int mi = (int)(m & 31);
            if (mi == 0 && m > 0) cur = nxt;
            if (mi == 8) loadSlots(nxt, blockIdx.x + (m - 8 + 32) * grid, grid, numItems, nTiles, H,
                                          p.state_batch_indices, lane);
            const int slot = __shfl_sync(0xffffffffu, cur.slot, mi);
            const int st = (int)(m & 1);
            const uint32_t use = (uint32_t)(m >> 1);
            mbarWait(&emptyBar[st], (use & 1u) ^ 1u);

            char* sg = sm + kBarBytes + st * plan.stage;
            int* meta = reinterpret_cast<int*>(sg + plan.meta);
            const ItemCoord c = itemCoord(it, nTiles, H, P, rows);
            const int g = c.head / hpg;
            const int status = (slot >= 0 && slot < S) ? kItemActive : kItemSkip;
            if (lane == 0) {
                meta[kMetaStatus] = status;
                meta[kMetaSlot] = slot;
                if (!p.D) reinterpret_cast<float*>(meta)[kMetaD] = 0.f;
                if (!p.dt_bias) reinterpret_cast<float*>(meta)[kMetaBias] = 0.f;
            }
            if (status == kItemActive) {
                const bool hasZ = p.z != nullptr;
                const uint32_t tileBytes = (uint32_t)(c.nRows * N * sizeof(StateT));
                const uint32_t bytes = tileBytes + (uint32_t)T * (4 * N + 2 * c.nRows * (hasZ ? 2 : 1));
                if (lane == 0) mbarArriveExpectTx(&fullBar[st], bytes);
                __syncwarp();
                const StateT* src = reinterpret_cast<const StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                                    (int64_t)c.head * p.stride_state_head + (int64_t)c.tile0 * p.stride_state_p;
                StateT* sTile = reinterpret_cast<StateT*>(sg + plan.tile);
                if (p.stride_state_p == N) {
                    if (lane == 0) bulkG2SEvictFirst(sTile, src, tileBytes, &fullBar[st], pol);
                } else {
                    for (int r = lane; r < c.nRows; r += 32)
                        bulkG2SEvictFirst(sTile + r * N, src + (int64_t)r * p.stride_state_p,
                                          (uint32_t)(N * sizeof(StateT)), &fullBar[st], pol);
                }
                uint32_t* sRaw = reinterpret_cast<uint32_t*>(sg + plan.raw);
                if (lane < T) {
                    const int s = lane;
                    const uint16_t* xg = reinterpret_cast<const uint16_t*>(p.x) + (int64_t)c.b * p.stride_x_b +
                                         (int64_t)s * p.stride_x_t + (int64_t)c.head * p.stride_x_h + c.tile0;
                    bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.xIn) + s * rows, xg, 2 * c.nRows, &fullBar[st]);
                    if (hasZ) {
                        const uint16_t* zg = reinterpret_cast<const uint16_t*>(p.z) + (int64_t)c.b * p.stride_z_b +
                                             (int64_t)s * p.stride_z_t + (int64_t)c.head * p.stride_z_h + c.tile0;
                        bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.zIn) + s * rows, zg, 2 * c.nRows, &fullBar[st]);
                    }
                    const uint16_t* bg = reinterpret_cast<const uint16_t*>(p.Bm) + (int64_t)c.b * p.stride_B_b +
                                         (int64_t)s * p.stride_B_t + (int64_t)g * p.stride_B_g;
                    bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.bIn) + s * N, bg, 2 * N, &fullBar[st]);
                    const uint16_t* cg = reinterpret_cast<const uint16_t*>(p.Cm) + (int64_t)c.b * p.stride_C_b +
                                         (int64_t)s * p.stride_C_t + (int64_t)g * p.stride_C_g;
                    bulkG2S(reinterpret_cast<uint16_t*>(sg + plan.cIn) + s * N, cg, 2 * N, &fullBar[st]);
                    cpAsyncDtRaw(sRaw + s, p.dt_raw, dtF32,
                                 (int64_t)c.b * p.stride_dt_b + (int64_t)s * p.stride_dt_t +
                                     (int64_t)c.head * p.stride_dt_h);
                }
                float* metaF = reinterpret_cast<float*>(meta);
                if (lane == 31) cpAsync4(metaF + kMetaA, p.A + c.head);
                if (lane == 30 && p.D) cpAsync4(metaF + kMetaD, p.D + c.head);
                if (lane == 29 && p.dt_bias) cpAsync4(metaF + kMetaBias, p.dt_bias + c.head);
            } else {
                if (lane == 0) mbarArrive(&fullBar[st]);
            }
            cpAsyncArriveNoinc(&fullBar[st]);
        }
        cpAsyncWaitAll();  // no cp.async of an exited thread left in flight
        return;
    }

    // ---------------------------------------------------------------------- consumer warps
    for (long long m = 0;; ++m) {
        const long long it = blockIdx.x + m * grid;
        if (it >= numItems) break;
        const int st = (int)(m & 1);
        const uint32_t use = (uint32_t)(m >> 1);
        mbarWait(&fullBar[st], use & 1u);
        char* sg = sm + kBarBytes + st * plan.stage;
        const int* meta = reinterpret_cast<const int*>(sg + plan.meta);
        if (meta[kMetaStatus] == kItemActive) {
            const ItemCoord c = itemCoord(it, nTiles, H, P, rows);
            const int slot = meta[kMetaSlot];
            const float Ah = reinterpret_cast<const float*>(meta)[kMetaA];
            const float Dh = reinterpret_cast<const float*>(meta)[kMetaD];
            const float bias = reinterpret_cast<const float*>(meta)[kMetaBias];
            const StateT* sTile = reinterpret_cast<const StateT*>(sg + plan.tile);
            const uint16_t* sBin = reinterpret_cast<const uint16_t*>(sg + plan.bIn);
            const uint16_t* sCin = reinterpret_cast<const uint16_t*>(sg + plan.cIn);
            const uint16_t* sXin = reinterpret_cast<const uint16_t*>(sg + plan.xIn);
            const uint16_t* sZin = reinterpret_cast<const uint16_t*>(sg + plan.zIn);
            const uint32_t* sRaw = reinterpret_cast<const uint32_t*>(sg + plan.raw);
            float* sDot = reinterpret_cast<float*>(sg + plan.dot);

            // dt and alpha of the T tokens (every thread; T <= 8 softplus + exp)
            float dts[RSSM_MAMBA2_MAX_TOKENS], als[RSSM_MAMBA2_MAX_TOKENS];
#pragma unroll
            for (int s = 0; s < RSSM_MAMBA2_MAX_TOKENS; ++s) {
                dts[s] = 0.f;
                als[s] = 1.f;
                if (s < T) {
                    const int64_t off = (int64_t)c.b * p.stride_dt_b + (int64_t)s * p.stride_dt_t +
                                        (int64_t)c.head * p.stride_dt_h;
                    dts[s] = softplusF(rawDtValue(sRaw[s], dtF32, actBf16, off) + bias);
                    als[s] = __expf(dts[s] * Ah);
                }
            }
            StateT* dst = p.snapshots ? nullptr
                                      : reinterpret_cast<StateT*>(p.state) + (int64_t)slot * p.stride_state_slot +
                                            (int64_t)c.head * p.stride_state_head;
            const int nBatch = c.nRows >> 3;
            for (int rb = warp; rb < nBatch; rb += NC) {
                const int r0 = rb * 8;
                float sv[8][E];
#pragma unroll
                for (int r = 0; r < 8; ++r)
#pragma unroll
                    for (int k = 0; k < KV; ++k)
                        ldsState<StateT, VE>(sTile + (r0 + r) * N + Sl::col(lane, k), &sv[r][k * VE]);
#pragma unroll
                for (int s = 0; s < RSSM_MAMBA2_MAX_TOKENS; ++s) {
                    if (s >= T) break;
                    float bv[E], cv[E], xv[8];
#pragma unroll
                    for (int k = 0; k < KV; ++k) {
                        loadAct<VE>(sBin + s * N + Sl::col(lane, k), actBf16, &bv[k * VE]);
                        loadAct<VE>(sCin + s * N + Sl::col(lane, k), actBf16, &cv[k * VE]);
                    }
                    loadAct<8>(sXin + s * rows + r0, actBf16, xv);
                    float part[8];
#pragma unroll
                    for (int r = 0; r < 8; ++r) {
                        const float dx = dts[s] * xv[r];
                        float a = 0.f;
#pragma unroll
                        for (int e = 0; e < E; ++e) {
                            const float v = fmaf(als[s], sv[r][e], dx * bv[e]);
                            sv[r][e] = v;
                            a = fmaf(v, cv[e], a);
                        }
                        part[r] = a;
                    }
                    const float d = reduce8(part, lane);
                    if ((lane & 3) == 0) sDot[s * rows + r0 + (lane >> 2)] = d;
                    if (p.snapshots) {
                        StateT* snap = reinterpret_cast<StateT*>(p.snapshots) + (int64_t)slot * p.stride_snap_slot +
                                       (int64_t)s * p.stride_snap_tok + (int64_t)c.head * p.stride_snap_head;
#pragma unroll
                        for (int r = 0; r < 8; ++r)
#pragma unroll
                            for (int k = 0; k < KV; ++k)
                                stgState<StateT, VE>(snap + (int64_t)(c.tile0 + r0 + r) * p.stride_snap_p + Sl::col(lane, k),
                                                     &sv[r][k * VE]);
                    }
                }
                if (dst) {
#pragma unroll
                    for (int r = 0; r < 8; ++r)
#pragma unroll
                        for (int k = 0; k < KV; ++k)
                            stgState<StateT, VE>(dst + (int64_t)(c.tile0 + r0 + r) * p.stride_state_p + Sl::col(lane, k),
                                                 &sv[r][k * VE]);
                }
            }
            consumerSync<kCT>();
            uint16_t* yg = reinterpret_cast<uint16_t*>(p.y) + (int64_t)c.b * p.stride_y_b +
                           (int64_t)c.head * p.stride_y_h + c.tile0;
            for (int i = tid; i < T * c.nRows; i += kCT) {
                const int s = i / c.nRows, r = i - s * c.nRows;
                float yv = fmaf(Dh, actToFloat(sXin[s * rows + r], actBf16), sDot[s * rows + r]);
                if (p.z) yv *= siluF(actToFloat(sZin[s * rows + r], actBf16));
                yg[(int64_t)s * p.stride_y_t + r] = floatToAct(yv, actBf16);
            }
        }
        __syncwarp();
        if (lane == 0) mbarArrive(&emptyBar[st]);
    }
#endif  // sm_90+
}

}  // namespace mamba2
}  // namespace rssm
