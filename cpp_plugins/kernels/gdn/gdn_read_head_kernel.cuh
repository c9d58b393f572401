// GDN read-copy readout on tensor cores, staged per 64-row unit (forty-second session; the default since the
// forty-third, RSSM_GDN_READ_MMA_HEAD=0 off): the same function as gdnReadCopyMmaKernel (gdn_read_mma_kernel.cuh) for
// nvfp4 read copies, K = 128, head_v a multiple of 64, windows <= 16, fp16 u with bf16 / fp16 activations. Per value
// row v of value head hv, row b:
//   X = gk (S[v, :] . k) + sum_{j < h} ck_j u_j[v],   Y = gq (S[v, :] . q) + sum_{j < h} cq_j u_j[v],
//   u = beta (v_in[v] - X)  (appended to ring_u at record o + h),   o[v] = Y + cq_h u.
//
// The Mamba-2 head-staged readout's scheme (mamba2/mamba2_read_head_kernel.cuh) with a unit of 64 rows of one
// (row b, value head), four 16-row tiles: one commit group stages the unit's rows, the ring u_j of its rows, its block
// scales and v, the coefficients ck / cq and the head scalars (gk, gq, beta, cq_h, the state scale), and the compute
// loop runs the four tiles with the coefficients and scalars in registers. Per tile it computes exactly what the tile
// kernel computes, in the same order (tile mma with the k / q columns, block factors, the scalar products, ring terms
// m = 0..3, the four-shuffle row sums, u and o): the same values and stores, bit for bit. (A whole head of 128 rows
// would need ~13 KB per stage: 6 warps per SM instead of 15.)
//
// Work: units in contiguous ranges over the grid's warps; two stages per warp, the next unit's copies in flight while
// one is computed; the next head's slot and cursors loaded one head ahead (UnitWalk). 96-thread CTAs (~7.5 KB per
// stage: 5 CTAs of 3 warps per SM). Padding rows, invalid cursors and skipped (flushing) rows: nothing written (as
// the tile kernel).
// Pure CUDA.
#pragma once
#include "common/cp_async.cuh"
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "common/read_mma_walk.cuh"
#include "common/read_rows.cuh"
#include "common/small_divisor.h"
#include "gdn/gdn_split_kernels.cuh"

namespace rssm {
namespace gdn {

constexpr int kReadHeadThreads = 96;
constexpr int kReadHeadStages = 2;
constexpr int kReadHeadRows = 64;  // rows per unit (four tiles)

// One staged unit (per-warp shared memory; every part 16-byte aligned). 64 nvfp4 rows of 64 bytes.
struct ReadHeadSlotGdn {
    static constexpr int kRows = 0;      // tile i at 1024 i, rows swizzled as readmma::stagedChunkOffset<kNvfp4>
    // ring record j's 64 u values at kU + 160 j (readmma::stagedRecordStrideWords: 40 words, 8 past a multiple of 32,
    // so the reads are conflict-free)
    static constexpr int kUStride = readmma::stagedRecordStrideWords(kReadHeadRows / 2) * 4;
    static constexpr int kU = kRows + 4 * 1024;
    static constexpr int kCk = kU + 16 * kUStride;  // [16] fp32 (zero from h on)
    static constexpr int kCq = kCk + 64;            // [16] fp32 (zero from h on)
    static constexpr int kScale = kCq + 64;         // [64 rows][8] e4m3 block scales
    static constexpr int kV = kScale + 8 * kReadHeadRows;  // [64] activation bits
    static constexpr int kHead = kV + 2 * kReadHeadRows;   // gk, gq, beta, cq_h, state scale
    static constexpr int kBytes = kHead + 32;
};
static_assert(ReadHeadSlotGdn::kUStride == 160, "the 64-row units' layout");

__host__ __device__ constexpr size_t readHeadSmemBytesGdn() {
    return (size_t)(kReadHeadThreads / 32) * kReadHeadStages * ReadHeadSlotGdn::kBytes;
}

// AK: 1 = bf16 activations, 2 = fp16 (u fp16 in both; compile-time, as the tile kernel's specialized instances).
template <int MINB, int AK>
__global__ void __launch_bounds__(kReadHeadThreads, MINB)
    gdnReadCopyHeadKernel(const GdnReplayParams p, const stream::ReadCopyScales rc) {
    using namespace readmma;
    using Slot = ReadHeadSlotGdn;
    constexpr int S = kReadHeadStages;
    constexpr int UR = kReadHeadRows;
    static_assert(AK == 1 || AK == 2, "compiled for the activation format");
    extern __shared__ __align__(16) uint8_t smemRaw[];
    const int HV = p.num_v_heads, C = p.ring_capacity;
    const int group = HV / p.num_heads;
    const int upv = p.head_v / UR;  // units per value head
    const int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
    uint8_t* wsm = smemRaw + (threadIdx.x >> 5) * S * Slot::kBytes;
    const unsigned wsmS = async::smemAddr(wsm);
    const WarpTiles wr = warpTiles<kReadHeadThreads>((long long)p.batch * HV * upv);  // units < 2^31 (launcher)
    const int uEnd = wr.tEnd, un = wr.tile;
    if (un >= uEnd) {
        pdlWaitPrimary();
        pdlLaunchDependents();
        return;
    }
    constexpr bool bf16 = AK == 1;
    const int RW = splitRecordWordsGdn(p.window, 1), RM = p.window + 1;
    const float* ws = static_cast<const float*>(p.workspace);
    const uint32_t rowStride = (uint32_t)p.state_stride_v;  // nvfp4: bytes; head_v x rowStride < 2^31 (launcher)
    const uint8_t* state = static_cast<const uint8_t*>(p.state);
    const uint16_t* ringU = static_cast<const uint16_t*>(p.ring_u);
    const SmallDivisor groupDiv((uint32_t)group);

    auto slotOf = [&](int b) {
        const int s = p.state_batch_indices ? p.state_batch_indices[b] : b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;
    };
    auto metaOf = [&](int bh) { return *reinterpret_cast<const int4*>(ws + (size_t)bh * RW + 8); };

    // The lane's fixed part of the copy plan. Rows: chunk lane % 4 of unit rows lane / 4 + 8 k (k < 8), slot offset
    // rowDst + 512 k. Ring: piece lane + 32 k is record lane / 8 + 4 k, chunk lane % 8 (8 rows).
    const int rowL = lane >> 2, chL = lane & 3;
    const uint32_t rowDst = Slot::kRows + (uint32_t)stagedChunkOffset<kNvfp4>(rowL, chL);
    const int xj = lane >> 3, xc = lane & 7;

    // Copies of unit (row b, value head hv, rows r0 ..; head bh = b HV + hv) into stage memory d: one commit group,
    // empty for a unit that is not computed.
    auto issueRows = [&](uint32_t d, int hv, int r0, int slot) {  // the unit's rows into stage memory d
        const uint8_t* rows = state + ((int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head) +
                              (int64_t)(r0 + rowL) * rowStride + 16 * chL;
        copyUnitRowsAt<UR>(d, rowDst, rows, rowStride);
    };
    bool rowsStaged = false;  // the first unit's rows, copied before the wait for the prep grid (the prep does not
                              // write the read copy; a unit that turns out not to be computed ignores them)
    auto issue = [&](uint32_t d, int b, int hv, int bh, int r0, int slot, int4 meta) {
        const bool staged = rowsStaged;
        rowsStaged = false;
        if (slot >= 0 && meta.y >= 0) {  // warp-uniform
            const int o = meta.z, h = meta.w;
            if (!staged) issueRows(d, hv, r0, slot);
            const uint16_t* u0 =
                ringU + (int64_t)slot * p.ring_u_stride_slot + (int64_t)hv * p.ring_u_stride_head + r0 + 8 * xc;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int j = xj + 4 * k;
                int rr = o + j;
                rr = rr >= C ? rr - C : rr;
                const uint16_t* src = u0 + (j < h ? (int64_t)rr * p.ring_u_stride_rec : 0);  // past h: never read
                async::copy16ZeroIfAt(d + Slot::kU + j * Slot::kUStride + 16 * xc, src, j >= h);
            }
            const float* rec = ws + (size_t)bh * RW;
            async::copy4ZeroIfAt(lane < 16, d + Slot::kCk + 4 * lane, rec + kSplitCoef + lane, lane >= h);
            async::copy4ZeroIfAt(lane < 16, d + Slot::kCq + 4 * lane, rec + kSplitCoef + RM + lane, lane >= h);
            const int64_t sh = (int64_t)slot * rc.nheads + hv;
            async::copy16At(d + Slot::kScale + 16 * lane,
                            static_cast<const uint8_t*>(rc.scale) + (sh * p.head_v + r0) * 8 + 16 * lane);
            const uint16_t* vIn = static_cast<const uint16_t*>(p.v) + (int64_t)b * p.v_stride_b +
                                  (int64_t)hv * p.v_stride_h + r0;
            async::copy16IfAt(lane < 8, d + Slot::kV + 16 * lane, vIn + 8 * lane);
            // head scalars: lanes 16-19 gk, gq, beta, cq_h (record words 0, 16, 24, coefficient RM + h), 20 the state
            // scale
            const float* sc = lane == 20 ? rc.gscale + sh
                            : rec + (lane == 16 ? 0 : lane == 17 ? 16 : lane == 18 ? 24 : kSplitCoef + RM + h);
            async::copy4IfAt(lane >= 16 && lane <= 20, d + Slot::kHead + 4 * (lane - 16), sc);
        }
        async::commit();
    };

    // walk (common/read_mma_walk.cuh): the unit being issued, its head's slot and cursors, and the next head's (loaded
    // one head ahead)
    auto early = [&](int hv, int part, int slot) {
        if (slot >= 0) {
            issueRows(wsmS, hv, part * UR, slot);
            rowsStaged = true;
        }
    };
    auto walk = makeUnitWalk(un, uEnd, upv, HV, kSplitSkipRow, slotOf, metaOf, early);
    issue(wsmS, walk.b, walk.head, walk.bh, walk.part * UR, walk.slot, walk.meta);

    VectorFragments<kNvfp4, 2> vf;
    int vfKey = -1;  // b * H + key head of vf
    for (int k = 0;; ++k) {
        const int cb = walk.b, chv = walk.head, cr0 = walk.part * UR, cSlot = walk.slot;
        const int4 cMeta = walk.meta;
        const bool more = walk.more();
        if (more) {
            walk.advance();
            issue(wsmS + ((k + 1) % S) * Slot::kBytes, walk.b, walk.head, walk.bh, walk.part * UR, walk.slot,
                  walk.meta);
        } else {
            async::commit();
        }
        async::waitGroup<S - 1>();  // this unit's group has landed (for this lane)
        __syncwarp();               // ... and every lane's
        const uint8_t* sl = wsm + (k % S) * Slot::kBytes;
        if (cSlot >= 0 && cMeta.y >= 0) {  // warp-uniform
            const int hk = (int)groupDiv.div((uint32_t)chv);
            const int key = cb * p.num_heads + hk;
            if (key != vfKey) {  // warp-uniform
                const uint16_t* kv =
                    static_cast<const uint16_t*>(p.k) + (int64_t)cb * p.k_stride_b + (int64_t)hk * p.k_stride_h;
                const uint16_t* qv =
                    static_cast<const uint16_t*>(p.q) + (int64_t)cb * p.q_stride_b + (int64_t)hk * p.q_stride_h;
                vf.build(kv, qv, bf16, lane);
                vfKey = key;
            }
            float ck[4], cq[4];
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                ck[m] = *reinterpret_cast<const float*>(sl + Slot::kCk + 4 * (t + 4 * m));
                cq[m] = *reinterpret_cast<const float*>(sl + Slot::kCq + 4 * (t + 4 * m));
            }
            const float4 hsc = *reinterpret_cast<const float4*>(sl + Slot::kHead);  // gk, gq, beta, cq_h
            const float gs = *reinterpret_cast<const float*>(sl + Slot::kHead + 16);
            const float gk = hsc.x * vf.inv[0], gq = hsc.y * vf.inv[1];
            const int odd = t & 1;
            const int64_t oOut = (int64_t)cb * p.o_stride_b + (int64_t)chv * p.o_stride_h + cr0;
            int rr = cMeta.z + cMeta.w;  // the step's record o + h
            rr = rr >= C ? rr - C : rr;
            const int64_t uOut = (int64_t)cSlot * p.ring_u_stride_slot + (int64_t)chv * p.ring_u_stride_head +
                                 (int64_t)rr * p.ring_u_stride_rec + cr0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float acc[4] = {0.f, 0.f, 0.f, 0.f}, acc2[4] = {0.f, 0.f, 0.f, 0.f};
                tileMma<kNvfp4, 2, true>(acc, acc2, sl + Slot::kRows + 1024 * i, vf, g, t);
                float f[2][2];  // block scales of blocks 2t, 2t + 1 of rows 16 i + 2g, + 1
                nvfp4BlockFactors(sl + Slot::kScale + 128 * i, gs, g, t, f);
                const float dk0 = acc[0] * f[0][0] + acc2[0] * f[0][1];
                const float dq0 = acc[1] * f[0][0] + acc2[1] * f[0][1];
                const float dk1 = acc[2] * f[1][0] + acc2[2] * f[1][1];
                const float dq1 = acc[3] * f[1][0] + acc2[3] * f[1][1];
                float X0 = gk * dk0, X1 = gk * dk1, Y0 = gq * dq0, Y1 = gq * dq1;
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = t + 4 * m;
                    const uint32_t u =
                        *reinterpret_cast<const uint32_t*>(sl + Slot::kU + j * Slot::kUStride + 32 * i + 4 * g);
                    const float u0 = u16ToF((uint16_t)(u & 0xFFFFu), false), u1 = u16ToF((uint16_t)(u >> 16), false);
                    X0 = fmaf(ck[m], u0, X0);
                    X1 = fmaf(ck[m], u1, X1);
                    Y0 = fmaf(cq[m], u0, Y0);
                    Y1 = fmaf(cq[m], u1, Y1);
                }
                // row sums over the four lanes of the row pair, transposed (lanes t = 0 / 2: row 2g, 1 / 3: 2g + 1)
                float X = odd ? X1 : X0, Y = odd ? Y1 : Y0;
                X += __shfl_xor_sync(0xFFFFFFFFu, odd ? X0 : X1, 1);
                Y += __shfl_xor_sync(0xFFFFFFFFu, odd ? Y0 : Y1, 1);
                X += __shfl_xor_sync(0xFFFFFFFFu, X, 2);
                Y += __shfl_xor_sync(0xFFFFFFFFu, Y, 2);
                const uint16_t vb = *reinterpret_cast<const uint16_t*>(sl + Slot::kV + 32 * i + 4 * g + 2 * odd);
                const float uu = hsc.z * (u16ToF(vb, bf16) - X);
                const float o = fmaf(hsc.w, uu, Y);
                const uint16_t ob =
                    bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(o)) : __half_as_ushort(__float2half_rn(o));
                const uint16_t ub = __half_as_ushort(__float2half_rn(uu));
                const int e = 16 * i + 2 * g + odd;  // the row in the unit
                async::storeGlobal2If(t < 2, static_cast<uint16_t*>(p.o) + oOut + e, ob);
                async::storeGlobal2If(t < 2, static_cast<uint16_t*>(p.ring_u) + uOut + e, ub);
            }
        }
        __syncwarp();  // every lane is done with this stage before it is refilled
        if (!more) break;
    }
    async::waitAll();
}

}  // namespace gdn
}  // namespace rssm
