// Conventional Mamba-2 decode, variant 4 ("warp items"): the layout of the split readout
// (mamba2_split_kernel.cuh) for the conventional recurrence. Persistent warps walk items of 8 state rows
// of one (row b, head), grid-strided; a lane holds the quads lane + 32 i of each of its warp's rows
// (stream::loadWarpRows, XOR-permuted register slots), so per token
//
//   dt = softplus(dt_raw + dt_bias),  S[p, :] <- exp(dt A) S[p, :] + dt x[p] B,
//   y[p] = (C . S[p, :] + D x[p]) * silu(z[p])
//
// is one reduce-scatter of 8 row dots (stream::RowScatter<8>), and the rows go back with 16-byte
// streaming stores (in place, or to snapshot [slot, s] after token s in per-draft mode). No shared memory,
// no barriers: the next item's slot index is loaded one item ahead, so each item is one dependent round
// trip (its rows and token inputs, issued together). Padding rows (slot < 0 or >= num_slots) are untouched.
// Limits (launcher falls back to variant 2 otherwise): N in {128, 256}, headdim % 8 == 0, 16-byte aligned
// x / z rows, 8-byte aligned B / C rows, B x H x headdim / 8 < 2^31.
#pragma once
#include <type_traits>

#include "common/warp_item_pipe.cuh"
#include "common/pdl.h"
#include "common/stream_rows.cuh"
#include "mamba2/mamba2_common.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kWarpDecodeThreads = 256;
constexpr int kWarpDecodeRows = 8;

// x of rows vw .. vw + 7 into the XOR-permuted register slots (slot r: row vw + (r ^ rl)). (A 16-row item variant
// measured at 66% of copy bandwidth, seventh session; the item size stays a template parameter.)
template <int RWS>
__device__ __forceinline__ void loadPermutedX(const uint16_t* xr, int rl, bool bf16, float (&xf)[RWS]) {
    static_assert(RWS == 8, "8 rows per item");
    stream::unpack8(stream::xorPermute8(*reinterpret_cast<const uint4*>(xr), rl), bf16, xf);
}

// PIPE (the PIPE kernel below): the item's rows come from this lane's quads in the warp's shared-memory stage
// `stageRows` (slot r at + 512 r), copied there earlier by the same lane, instead of from global memory.
template <typename ST, int N, bool ONE, int RWS, bool PIPE = false>
__device__ __forceinline__ void warpDecodeItem(const Mamba2DecodeParams& p, int b, int head, int vw, int slot, int rl,
                                               int lane, const unsigned char* stageRows = nullptr) {
    using RS = stream::RowScatter<RWS>;
    constexpr int QPL = N / 128, LPR = RS::LPR;
    const int P = p.headdim, T = ONE ? 1 : p.num_tokens;
    const int g = head / (p.nheads / p.ngroups);
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16, dtF32 = p.dt_dtype == RSSM_DTYPE_FP32;
    const int sub = lane & (LPR - 1), row = vw + rl;
    ST* st = static_cast<ST*>(p.state) + (int64_t)slot * p.stride_state_slot + (int64_t)head * p.stride_state_head;
    float4 S[RWS][QPL];
    if constexpr (PIPE) {
        static_assert(QPL == 1 && std::is_same<ST, float>::value, "PIPE: fp32 state, N = 128");
#pragma unroll
        for (int r = 0; r < RWS; ++r) S[r][0] = *reinterpret_cast<const float4*>(stageRows + r * 512);
    } else {
        stream::loadWarpRows<RWS, QPL, ST>(S, st, p.stride_state_p, vw, P, rl, lane);
    }
    const float A = p.A[head], D = p.D ? p.D[head] : 0.f;
    for (int s = 0; s < T; ++s) {
        // This token's inputs (issued with the rows for s = 0).
        const uint16_t* xr = static_cast<const uint16_t*>(p.x) + (int64_t)b * p.stride_x_b + (int64_t)s * p.stride_x_t +
                             (int64_t)head * p.stride_x_h + vw;
        const int64_t tokOff = (int64_t)b * p.stride_dt_b + (int64_t)s * p.stride_dt_t + (int64_t)head * p.stride_dt_h;
        const float dt = loadDt(p.dt_raw, dtF32, actBf16, tokOff, p.dt_bias, head);
        const uint16_t* Bg = static_cast<const uint16_t*>(p.Bm) + (int64_t)b * p.stride_B_b + (int64_t)s * p.stride_B_t +
                             (int64_t)g * p.stride_B_g + lane * 4;
        const uint16_t* Cg = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b + (int64_t)s * p.stride_C_t +
                             (int64_t)g * p.stride_C_g + lane * 4;
        uint2 bq[QPL], cq[QPL];
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            bq[i] = *reinterpret_cast<const uint2*>(Bg + 128 * i);
            cq[i] = *reinterpret_cast<const uint2*>(Cg + 128 * i);
        }
        uint16_t zb = 0;
        const bool writer = (s % LPR) == sub && row < P;
        if (p.z && writer)
            zb = static_cast<const uint16_t*>(p.z)[(int64_t)b * p.stride_z_b + (int64_t)s * p.stride_z_t +
                                                   (int64_t)head * p.stride_z_h + row];
        const float dA = __expf(dt * A);
        float xf[RWS];  // x of the row in each register slot (slot r: row vw + (r ^ rl))
        loadPermutedX<RWS>(xr, rl, actBf16, xf);
        float4 b4[QPL], c4[QPL];
#pragma unroll
        for (int i = 0; i < QPL; ++i) {
            b4[i] = stream::u2ToF4(bq[i], actBf16);
            c4[i] = stream::u2ToF4(cq[i], actBf16);
        }
        float part[RWS];
#pragma unroll
        for (int r = 0; r < RWS; ++r) {
            const float w = dt * xf[r];
            float d = 0.f;
#pragma unroll
            for (int i = 0; i < QPL; ++i) {
                S[r][i] = stream::fma4s(stream::scale4(S[r][i], dA), w, b4[i]);
                d += stream::dot4(S[r][i], c4[i]);
            }
            part[r] = d;
        }
        if (p.snapshots) {
            ST* sn = static_cast<ST*>(p.snapshots) + (int64_t)slot * p.stride_snap_slot + (int64_t)s * p.stride_snap_tok +
                     (int64_t)head * p.stride_snap_head;
            stream::storeWarpRows<RWS, QPL, ST>(S, sn, p.stride_snap_p, vw, P, rl, lane);
        } else if (s + 1 == T) {
            stream::storeWarpRows<RWS, QPL, ST>(S, st, p.stride_state_p, vw, P, rl, lane);
        }
        const float Y = RS::reduce(part, lane);  // row vw + rl
        if (writer) {
            float y = fmaf(D, xf[0], Y);  // slot 0 holds row vw + rl
            if (p.z) y *= siluF(actToFloat(zb, actBf16));
            static_cast<uint16_t*>(p.y)[(int64_t)b * p.stride_y_b + (int64_t)s * p.stride_y_t +
                                        (int64_t)head * p.stride_y_h + row] = floatToAct(y, actBf16);
        }
    }
}

// ONE: one token per row (standard decode; T is a compile-time 1), else 1..8 tokens (per-draft snapshots).
// RWS: state rows per item (8).
template <typename ST, int N, bool ONE, int RWS>
__global__ void __launch_bounds__(kWarpDecodeThreads, ONE && N == 128 && RWS == 8 ? 3 : 2)
    mamba2WarpDecodeKernel(const Mamba2DecodeParams p) {
    pdlChainEntryStep();  // RSSM_PDL_CHAIN: a programmatic dependent of the kernel before it (common/pdl.h)
    const int nrb = p.headdim / RWS;
    const unsigned items = (unsigned)p.batch * p.nheads * nrb;  // < 2^31 (launcher)
    const int lane = threadIdx.x & 31;
    const int rl = stream::RowScatter<RWS>::rowOf(lane);
    const unsigned wpc = blockDim.x >> 5;  // warps per CTA (the launcher may run fewer than kWarpDecodeThreads)
    const unsigned nw = gridDim.x * wpc;
    unsigned it = blockIdx.x * wpc + (threadIdx.x >> 5);
    if (it >= items) return;
    const stream::ItemWalker walk(p.nheads, nrb, nw);
    auto slotOf = [&](int b) {
        const int s = p.state_batch_indices ? p.state_batch_indices[b] : b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;
    };
    stream::ItemCursor c = walk.at(it);
    int slot = slotOf(c.b);
    for (; it < items; it += nw) {
        const stream::ItemCursor nc = walk.next(c);
        const int nslot = it + nw < items ? slotOf(nc.b) : -1;  // one item ahead
        if (slot >= 0) warpDecodeItem<ST, N, ONE, RWS>(p, c.b, c.head, c.blk * RWS, slot, rl, lane);
        c = nc;
        slot = nslot;
    }
}

// PIPE (RSSM_MAMBA2_WARP_PIPE = 2 / 3; A/B, off; seventy-first session, not yet run on a GPU): the one-token fp32,
// N = 128 step of the kernel above on a persistent grid whose warps keep the next STAGES - 1 items' state rows in
// flight while they work on the current one (pipe::walkItems, common/warp_item_pipe.cuh: each lane copies its own
// quad of each row by cp.async into the warp's shared-memory stage and reads back only what it copied). Why: this
// kernel reaches 96.5% of copy on the H100 but 89.6-91.1% in every recorded H200 run (an in-place read-modify-write
// reaches 99.5% on both), which points at too few bytes in flight for the H200; gdn_warp_decode.cu has the GDN form
// (cfg 8 / 9). Same arithmetic as the kernel above (warpDecodeItem), so the same results.
template <int STAGES, int MINB>
__global__ void __launch_bounds__(kWarpDecodeThreads, MINB) mamba2WarpDecodePipeKernel(const Mamba2DecodeParams p) {
    pdlChainEntryStep();
    constexpr int RWS = 8;
    extern __shared__ __align__(16) unsigned char pipeRows[];
    const int nrb = p.headdim / RWS;
    const unsigned items = (unsigned)p.batch * p.nheads * nrb;  // < 2^31 (launcher)
    const int lane = threadIdx.x & 31, rl = stream::RowScatter<RWS>::rowOf(lane);
    const float* state = static_cast<const float*>(p.state);
    auto slotOf = [&](const stream::ItemCursor& c) {
        const int s = p.state_batch_indices ? p.state_batch_indices[c.b] : c.b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;  // padding row: no copies, untouched
    };
    auto rowsOf = [&](int slot, const stream::ItemCursor& c) {
        return state + (int64_t)slot * p.stride_state_slot + (int64_t)c.head * p.stride_state_head +
               (int64_t)(c.blk * RWS) * p.stride_state_p + lane * 4;
    };
    auto body = [&](const stream::ItemCursor& c, int slot, const unsigned char* src) {
        warpDecodeItem<float, 128, true, RWS, true>(p, c.b, c.head, c.blk * RWS, slot, rl, lane, src);
    };
    pipe::walkItems<STAGES>(p.nheads, nrb, items, pipeRows, p.stride_state_p, slotOf, rowsOf, body);
}

}  // namespace mamba2
}  // namespace rssm
