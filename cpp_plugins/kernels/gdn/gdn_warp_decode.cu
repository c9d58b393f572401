// Conventional Gated DeltaNet decode, variant 6 ("warp items"): the Mamba-2 warp-item decode
// (mamba2/mamba2_warp_decode_kernel.cuh) for GDN. One warp per item of 8 value rows of one (row b, value
// head), a full grid of 8-warp CTAs (one item per warp; grid-strided if the grid were capped). A lane holds
// the quads lane + 32 i of its warp's rows (stream::loadWarpRows, XOR-permuted register slots) and the same
// quads of this step's k and q, so the whole step is per-warp:
//   |k|, |q|, k . q by warp sums (no shared memory, no CTA barrier, no serial preamble warp),
//   alpha = exp(-exp(A_log) softplus(a + dt_bias)), beta = sigmoid(b),
//   X = S kn, Y = S qn (two reduce-scatters of 8 row dots), u = beta (v - alpha X),
//   o = alpha Y + u (kn . qn),  S <- alpha S + u kn^T (u of each row by a shuffle), rows stored in place.
// Same math and results as variants 0-5 (gdn_kernels.cuh). One token, no snapshots (the launcher runs variant 5
// for the rest). Padding rows (slot < 0 or >= num_slots) are untouched.
#include <stdlib.h>

#include <type_traits>

#include "common/pdl.h"
#include "common/rssm_common.h"
#include "common/warp_item_pipe.cuh"
#include "gdn/gdn_kernels.cuh"
#include "gdn/gdn_warp_decode.h"

namespace rssm {
namespace gdn {
namespace {

// RW value rows per warp item, CTAs of THREADS threads, register bound for MINB CTAs per SM; PF = 1: the state
// loads carry the L2 256-byte prefetch hint (stream::ldStreamPf256, fp32 state).
template <typename ST, int K, int RW, int THREADS, int MINB, int PF = 0>
__global__ void __launch_bounds__(THREADS, MINB) gdnWarpDecodeKernel(const GdnDecodeParams p) {
    pdlChainEntryStep();  // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h)
    using RS = stream::RowScatter<RW>;
    constexpr int QPL = K / 128;
    const int HV = p.num_v_heads, V = p.head_v;
    const int nrb = V / RW;
    const unsigned items = (unsigned)p.batch * HV * nrb;  // < 2^31 (launcher)
    const int lane = threadIdx.x & 31, rl = RS::rowOf(lane);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const unsigned wpc = blockDim.x >> 5;
    const unsigned nw = gridDim.x * wpc;
    unsigned it = blockIdx.x * wpc + (threadIdx.x >> 5);
    if (it >= items) return;
    const stream::ItemWalker walk(HV, nrb, nw);
    for (stream::ItemCursor c = walk.at(it); it < items; it += nw, c = walk.next(c)) {
        const int b = c.b, hv = c.head, vw = c.blk * RW;
        const int slot = p.state_indices[(int64_t)b * p.indices_stride_b];
        if (slot < 0 || slot >= p.num_slots) continue;  // padding row: untouched
        ST* st = static_cast<ST*>(p.state) + (int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head;
        float4 S[RW][QPL];
        stream::loadWarpRows<RW, QPL, ST, PF>(S, st, p.state_stride_v, vw, V, rl, lane);
        const int hk = hv / (HV / p.num_heads);
        float4 k4[QPL], q4[QPL];
        float kss = 0.f, qss = 0.f, kq = 0.f;
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            k4[i] = ldAct4(p.k, (int64_t)b * p.k_stride_b + (int64_t)hk * p.k_stride_h + (lane + 32 * i) * 4, bf16);
            q4[i] = ldAct4(p.q, (int64_t)b * p.q_stride_b + (int64_t)hk * p.q_stride_h + (lane + 32 * i) * 4, bf16);
        }
        const int row = vw + rl;
        const float vr = ldAct(p.v, (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h + row, bf16);
        const float a = ldAct(p.a, (int64_t)b * p.a_stride_b + hv, bf16);
        const float bl = ldAct(p.b, (int64_t)b * p.b_stride_b + hv, bf16);
        const float alog = p.A_log[hv], dtb = p.dt_bias[hv];
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            kss += dot4(k4[i], k4[i]);
            qss += dot4(q4[i], q4[i]);
            kq += dot4(k4[i], q4[i]);
        }
        kss = warpSum(kss);
        qss = warpSum(qss);
        kq = warpSum(kq);
        const float invk = rsqrtf(kss + kL2Eps), invq = rsqrtf(qss + kL2Eps) * p.scale;
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            k4[i] = scale4(k4[i], invk);
            q4[i] = scale4(q4[i], invq);
        }
        const float X = stream::warpRowDot<RW, QPL>(S, k4, lane), Y = stream::warpRowDot<RW, QPL>(S, q4, lane);
        const float alpha = expf(gdnLogDecay(a, alog, dtb)), beta = sigmoidf(bl);
        const float u = beta * (vr - alpha * X);
        if ((lane & (RS::LPR - 1)) == 0 && row < V)
            stAct(p.o, (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + row, alpha * Y + u * (kq * invk * invq), bf16);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const float ur = __shfl_sync(kFull, u, RS::laneOf(r ^ rl));  // u of the row in slot r
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = stream::fma4s(scale4(S[r][i], alpha), ur, k4[i]);
        }
        stream::storeWarpRows<RW, QPL, ST>(S, st, p.state_stride_v, vw, V, rl, lane);
    }
}

// PIPE (RSSM_GDN_WARP_CFG = 8 / 9; A/B, off; seventy-first session, not yet run on a GPU): the same step on a
// persistent grid whose warps keep the next STAGES - 1 items' state rows in flight while they work on the current
// one. The question it answers: the default shape reaches 95.4-96.5% of copy on the H100 but 88.9-91.2% on the H200
// in every recorded run (while an in-place read-modify-write reaches 99.5% on both), which points at too few bytes in
// flight for the H200's bandwidth: a warp of the default shape holds its item's 4 KB in registers and has nothing in
// flight while it computes and stores. The walk is pipe::walkItems (common/warp_item_pipe.cuh): each lane copies its
// own quad of each row of the items ahead by cp.async (L2 256-byte hint) into the warp's shared-memory stages, waits
// only for the current item's group, reads its quads back in loadWarpRows' register-slot order and computes and
// stores as the default shape does; no barrier. STAGES = 2 (cfg 8: 64 KB per CTA, 3 CTAs per SM) or 3 (cfg 9: 96 KB
// per CTA, 2 CTAs per SM). fp32 state, K = 128, head_v % 8 == 0 (warpDecodeRuns); other cases run the default shape.
// Same arithmetic as the default shape, so the same results. The item body below is deliberately a copy of the default
// kernel's loop body: moving that body into a shared function reordered the default kernel's SASS (205 of its 1,432
// instructions, the same count; seventy-first session's review), and the baseline's code should not change unmeasured.
// When PIPE is adopted or removed, one of the two goes.
template <int STAGES, int MINB>
__global__ void __launch_bounds__(256, MINB) gdnWarpDecodePipeKernel(const GdnDecodeParams p) {
    pdlChainEntryStep();
    constexpr int RW = 8, QPL = 1;
    using RS = stream::RowScatter<RW>;
    extern __shared__ __align__(16) unsigned char pipeRows[];
    const int HV = p.num_v_heads, V = p.head_v;
    const int nrb = V / RW;
    const unsigned items = (unsigned)p.batch * HV * nrb;  // < 2^31 (launcher)
    const int lane = threadIdx.x & 31, rl = RS::rowOf(lane);
    const bool bf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const float* state = static_cast<const float*>(p.state);
    auto slotOf = [&](const stream::ItemCursor& c) {
        const int s = p.state_indices[(int64_t)c.b * p.indices_stride_b];
        return (s < 0 || s >= p.num_slots) ? -1 : s;  // padding row: no copies, untouched
    };
    auto rowsOf = [&](int slot, const stream::ItemCursor& c) {
        return state + (int64_t)slot * p.state_stride_slot + (int64_t)c.head * p.state_stride_head +
               (int64_t)(c.blk * RW) * p.state_stride_v + lane * 4;
    };
    auto body = [&](const stream::ItemCursor& c, int slot, const unsigned char* src) {
        const int b = c.b, hv = c.head, vw = c.blk * RW;
        float4 S[RW][QPL];
#pragma unroll
        for (int r = 0; r < RW; ++r) S[r][0] = *reinterpret_cast<const float4*>(src + r * 512);
        const int hk = hv / (HV / p.num_heads);
        float4 k4[QPL], q4[QPL];
        k4[0] = ldAct4(p.k, (int64_t)b * p.k_stride_b + (int64_t)hk * p.k_stride_h + lane * 4, bf16);
        q4[0] = ldAct4(p.q, (int64_t)b * p.q_stride_b + (int64_t)hk * p.q_stride_h + lane * 4, bf16);
        const int row = vw + rl;
        const float vr = ldAct(p.v, (int64_t)b * p.v_stride_b + (int64_t)hv * p.v_stride_h + row, bf16);
        const float a = ldAct(p.a, (int64_t)b * p.a_stride_b + hv, bf16);
        const float bl = ldAct(p.b, (int64_t)b * p.b_stride_b + hv, bf16);
        const float alog = p.A_log[hv], dtb = p.dt_bias[hv];
        const float kss = warpSum(dot4(k4[0], k4[0])), qss = warpSum(dot4(q4[0], q4[0]));
        const float kq = warpSum(dot4(k4[0], q4[0]));
        const float invk = rsqrtf(kss + kL2Eps), invq = rsqrtf(qss + kL2Eps) * p.scale;
        k4[0] = scale4(k4[0], invk);
        q4[0] = scale4(q4[0], invq);
        const float X = stream::warpRowDot<RW, QPL>(S, k4, lane), Y = stream::warpRowDot<RW, QPL>(S, q4, lane);
        const float alpha = expf(gdnLogDecay(a, alog, dtb)), beta = sigmoidf(bl);
        const float u = beta * (vr - alpha * X);
        if ((lane & (RS::LPR - 1)) == 0 && row < V)
            stAct(p.o, (int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + row,
                  alpha * Y + u * (kq * invk * invq), bf16);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const float ur = __shfl_sync(kFull, u, RS::laneOf(r ^ rl));  // u of the row in slot r
            S[r][0] = stream::fma4s(scale4(S[r][0], alpha), ur, k4[0]);
        }
        float* st = static_cast<float*>(p.state) + (int64_t)slot * p.state_stride_slot +
                    (int64_t)hv * p.state_stride_head;
        stream::storeWarpRows<RW, QPL, float>(S, st, p.state_stride_v, vw, V, rl, lane);
    };
    pipe::walkItems<STAGES>(HV, nrb, items, pipeRows, p.state_stride_v, slotOf, rowsOf, body);
}

// Launch shapes of the fp32-state, K = 128 instance (the serving case), for side-by-side timing of the
// conventional baseline: RSSM_GDN_WARP_CFG (read per launch) = 0 (default: 8 rows per warp, 256 threads, 3 CTAs
// per SM, the state loads with the L2 256-byte prefetch hint), 1 (8 rows, 128 threads, 7 CTAs), 2 (8 rows, 128
// threads, 6 CTAs), 3 (16 rows, 256 threads, 2 CTAs), 4 (16 rows, 128 threads, 4 CTAs), 5 (8 rows, 256 threads, 4
// CTAs: spills), 6 (0 without the prefetch hint: the default until the nineteenth session). Shapes 1-5 load without
// the hint. The hint measured 0.7-0.8 points of copy bandwidth faster than shape 6 at B = 256 (both shapes, median of
// 5 interleaved rounds, docs/kernels-gdn.md "Nineteenth session"). 16-bit states ignore the hint. Other states / key
// dims, or head_v not a multiple of the rows, run 0.
struct WarpDecodeShape {
    const void* kernel;
    int rows, threads;
};

template <typename ST>
WarpDecodeShape warpDecodeShapeFor(int K, int V, int cfg) {
    if (K != 128) return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<ST, 256, 8, 256, 2>), 8, 256};
    if (!std::is_same<ST, float>::value || (cfg >= 3 && V % 16 != 0)) cfg = 0;
    switch (cfg) {
        case 1: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<float, 128, 8, 128, 7>), 8, 128};
        case 2: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<float, 128, 8, 128, 6>), 8, 128};
        case 3: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<float, 128, 16, 256, 2>), 16, 256};
        case 4: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<float, 128, 16, 128, 4>), 16, 128};
        case 5: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<float, 128, 8, 256, 4>), 8, 256};
        case 6: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<float, 128, 8, 256, 3, 0>), 8, 256};
        default: return {reinterpret_cast<const void*>(&gdnWarpDecodeKernel<ST, 128, 8, 256, 3, 1>), 8, 256};
    }
}

}  // namespace

bool warpDecodeRuns(const GdnDecodeParams& p) {
    return p.num_tokens == 1 && p.snapshot == 0 && (p.head_k == 128 || p.head_k == 256) &&
           p.head_v % kWarpDecodeRowsGdn == 0 && p.rows_per_cta == 0 &&
           (long long)p.batch * p.num_v_heads * (p.head_v / kWarpDecodeRowsGdn) < (1LL << 31);
}

// PIPE launch (cfg 8 / 9): a persistent grid of at most (resident CTAs per SM) x SMs CTAs; returns false where the
// shape does not apply (the caller then launches the default shapes).
template <int STAGES, int MINB>
bool launchPipe(const GdnDecodeParams& p, cudaStream_t s, cudaError_t* err) {
    auto* kern = gdnWarpDecodePipeKernel<STAGES, MINB>;
    const void* kernel = reinterpret_cast<const void*>(kern);
    const size_t smem = (size_t)8 * STAGES * pipe::kItemBytes;
    if (setSmem(kern, (int)smem) != cudaSuccess) {  // opted in once (setSmem skips an opted-in kernel)
        cudaGetLastError();
        return false;
    }
    const long long items = (long long)p.batch * p.num_v_heads * (p.head_v / 8);
    const long long resident = (long long)occupancyPerSm(kernel, 256, smem) * deviceSmCount();
    long long ctas = (items + 7) / 8;
    if (ctas > resident) ctas = resident;
    GdnDecodeParams q = p;
    void* args[] = {&q};
    cudaError_t e = launchMaybeDependent(kernel, dim3((unsigned)ctas), dim3(256), smem, s, args, pdlChainEnabled());
    *err = e != cudaSuccess ? e : cudaGetLastError();
    return true;
}

cudaError_t launchDecodeWarpItems(const GdnDecodeParams& p, cudaStream_t s) {
    const char* env = getenv("RSSM_GDN_WARP_CFG");  // the launch shape (read per launch: A/B switch)
    const int cfg = env ? atoi(env) : 0;
    if (p.state_dtype == RSSM_DTYPE_FP32 && p.head_k == 128) {
        cudaError_t err = cudaSuccess;
        if (cfg == 8 && launchPipe<2, 3>(p, s, &err)) return err;
        if (cfg == 9 && launchPipe<3, 2>(p, s, &err)) return err;
    }
    const int K = p.head_k, V = p.head_v;
    const WarpDecodeShape sh = p.state_dtype == RSSM_DTYPE_FP32   ? warpDecodeShapeFor<float>(K, V, cfg)
                               : p.state_dtype == RSSM_DTYPE_FP16 ? warpDecodeShapeFor<__half>(K, V, cfg)
                                                                  : warpDecodeShapeFor<__nv_bfloat16>(K, V, cfg);
    const long long items = (long long)p.batch * p.num_v_heads * (p.head_v / sh.rows);
    const long long ctas = (items + sh.threads / 32 - 1) / (sh.threads / 32);
    GdnDecodeParams q = p;
    void* args[] = {&q};
    cudaError_t e = launchMaybeDependent(sh.kernel, dim3((unsigned)ctas), dim3(sh.threads), 0, s, args,
                                         pdlChainEnabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace gdn
}  // namespace rssm
