// GDN read-copy readout on tensor cores (dual-precision decode, standard mode, non-flush rows): the second kernel
// of a split step (after gdnSplitPrepKernel, which writes the head records, appends the step's key, gate, raw beta
// and v, and marks flushing rows kSplitSkipRow) for a read-only read copy in fp16, fp8-e4m3 or nvfp4 with K = 128.
// Per value row v of value head hv, row b (the same function as gdnSplitReadCopyKernel, one token):
//   X = gk (S[v, :] . k) + sum_{j < h} ck_j u_j[v],   Y = gq (S[v, :] . q) + sum_{j < h} cq_j u_j[v],
//   u = beta (v_in[v] - X)  (appended to ring_u at record o + h),   o[v] = Y + cq_h u.
// The row dots with k and q on tensor cores (common/read_mma.cuh, two vectors: B columns 2t = k, 2t + 1 = q of
// thread set t), the ring terms on CUDA cores in the mma's layout (records t + 4m). Tiles of 16 rows of one
// (row b, value head) in contiguous ranges per warp, every input of a tile staged by cp.async into per-warp
// shared-memory slots (the Mamba-2 read-copy readout's scheme, mamba2/mamba2_read_mma_kernel.cuh); k / q fragments
// rebuilt when the (row, key head) changes. Padding rows, invalid cursors and skipped (flushing) rows: nothing
// written (as the CUDA-core readout). Pure CUDA.
#pragma once
#include "common/cp_async.cuh"
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "common/read_mma_walk.cuh"
#include "common/small_divisor.h"
#include "common/read_rows.cuh"
#include "gdn/gdn_split_kernels.cuh"

namespace rssm {
namespace gdn {

constexpr int kReadMmaThreads = 128;

// One staged tile (per-warp shared memory; 16-byte aligned parts). MAXM: ring records per lane (h <= 4 MAXM).
template <int FMT, int MAXM>
struct ReadMmaSlotGdn {
    static constexpr int kRows = 0;                           // 16 rows (readmma::stagedChunkOffset)
    static constexpr int kU = 16 * readmma::rowBytes<FMT>();  // [4 MAXM records][16 rows] u bits
    static constexpr int kCk = kU + 4 * MAXM * 32;            // [4 MAXM] fp32 (zero from h on)
    static constexpr int kCq = kCk + 4 * MAXM * 4;            // [4 MAXM] fp32 (zero from h on)
    static constexpr int kScale = kCq + 4 * MAXM * 4;         // fp8: [16] fp32; nvfp4: [16][8] e4m3
    static constexpr int kV = kScale + 128;                   // [16] activation bits
    static constexpr int kHead = kV + 32;                     // gk, gq, beta, cq_h, (nvfp4) state scale
    static constexpr int kInfo = kHead + 32;                  // b, hv, key, row block | flags
    static constexpr int kBytes = kInfo + 16;
};

template <int FMT, int MAXM, int STAGES>
__host__ __device__ constexpr size_t readMmaSmemBytesGdn() {
    return (size_t)(kReadMmaThreads / 32) * STAGES * ReadMmaSlotGdn<FMT, MAXM>::kBytes;
}

// AK: activation and u formats, 0 = read from the params (act_dtype, u_dtype), 1 = bf16 activations with fp16 u,
// 2 = fp16 activations with fp16 u (compile-time: the conversions of u, v and the outputs without a select).
// EARLY = 1: the warp's first tile's rows are copied into its slot before the wait for the prep grid (the read copy is
// not the prep's output and nothing this step writes it before this kernel; the prep is an ordinary launch), so they
// overlap the prep's tail; the tile's other inputs follow after the wait in the same commit group.
// LEAN = 1: fewer instructions per tile (the kernel is issue-bound: ~480 warp instructions per 16-row nvfp4 tile in the
// twentieth session's source counters, of which ~100 decode the rows). The optional per-lane copies are predicated
// cp.async instructions instead of branches (no divergent regions in the copy path), the coefficients ck / cq are
// staged in lane order (lane t reads its records t + 4m with one 16-byte load each), the epilogue computes on every
// lane and only the stores are predicated, and the o row offset of a tile's head travels with its slot (no 64-bit
// index arithmetic per tile), and the upper e4m3 code pairs of fp8 / nvfp4 rows are converted from the register's upper
// half (e4m3x2HiToF16x2) instead of after a shift. Since the thirty-second session also: the tile's copy sources
// and its o / u stores at 32-bit offsets from the head's row 0 (one wide multiply-add each instead of 64-bit products),
// and the coefficients past h zero-filled through cp.async's ignore-src predicate (a run-time source size made ptxas
// adjust the address of each copy): 442 -> 422 warp instructions per nvfp4 tile. Same values, same stores.
template <int FMT, int MAXM, int STAGES, int MINB, int AK = 0, int EARLY = 0, int LEAN = 0>
__global__ void __launch_bounds__(kReadMmaThreads, MINB)
    gdnReadCopyMmaKernel(const GdnReplayParams p, const stream::ReadCopyScales rc) {
    using namespace readmma;
    using Slot = ReadMmaSlotGdn<FMT, MAXM>;
    constexpr int kNormal = 1 << 16;
    extern __shared__ __align__(16) uint8_t smemRaw[];
    const int HV = p.num_v_heads, V = p.head_v, C = p.ring_capacity;
    const int group = HV / p.num_heads;
    const int nt = V / 16;
    const int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
    uint8_t* wsm = smemRaw + (threadIdx.x >> 5) * STAGES * Slot::kBytes;
    const WarpTiles wt = warpTiles<kReadMmaThreads>((long long)p.batch * HV * nt);  // tiles < 2^31 (launcher)
    const int tEnd = wt.tEnd;
    int tile = wt.tile;
    if (tile >= tEnd) {
        pdlWaitPrimary();
        pdlLaunchDependents();
        return;
    }
    const int RW = splitRecordWordsGdn(p.window, 1), RM = p.window + 1;
    const float* ws = static_cast<const float*>(p.workspace);
    const bool bf16 = AK == 0 ? p.act_dtype == RSSM_DTYPE_BF16 : AK == 1;
    const bool ubf16 = AK == 0 ? p.u_dtype == RSSM_DTYPE_BF16 : false;
    const int64_t unit = FMT == kFp16 ? 2 : 1;  // bytes per stride unit
    const int64_t rowStride = p.state_stride_v * unit;
    const uint32_t rowStride32 = (uint32_t)rowStride;  // head_v x rowStride < 2^31 (the launcher's sizes)
    const uint8_t* state = static_cast<const uint8_t*>(p.state);
    const uint16_t* ringU = static_cast<const uint16_t*>(p.ring_u);

    struct Head {
        int bh, b, hv, key, slot, nf, o, h;
    };
    auto slotOf = [&](int b) {
        const int s = p.state_batch_indices ? p.state_batch_indices[b] : b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;
    };
    auto metaOf = [&](int bh) { return *reinterpret_cast<const int4*>(ws + (size_t)bh * RW + 8); };
    const SmallDivisor groupDiv((uint32_t)group);  // hv / group (heads < 2^16: the launcher's sizes)
    auto headOf = [&](int bh, int b, int hv, int slot, int4 meta) {
        Head hd;
        hd.bh = bh;
        hd.b = b;
        hd.hv = hv;
        hd.key = b * p.num_heads + (int)groupDiv.div((uint32_t)hv);
        hd.slot = slot;
        hd.nf = slot < 0 ? kSplitSkipRow : meta.y;
        hd.o = meta.z;
        hd.h = meta.w;
        return hd;
    };
    // Per-lane copy plan: row chunk (lane % CPR) of rows lane / CPR + (32 / CPR) i; ring record lane / 2 (+ 16),
    // half lane & 1; coefficients ck / cq of record `lane`; lanes 0-4 the head scalars; 8-15 the tile's scales;
    // 16-17 v.
    constexpr int CPR = rowBytes<FMT>() / 16;
    constexpr int XR = (4 * MAXM * 2 + 31) / 32;
    const int rowL = lane / CPR, chL = lane % CPR;
    const int scaleLanes = FMT == kFp8 ? 4 : FMT == kNvfp4 ? 8 : 0;
    struct Plan {
        const uint8_t* rows;
        const uint8_t* u[XR];  // null: record past h
        const float* coef;     // ck of record `lane` (cq at + RM); past h: the workspace base (read with 0 bytes)
        unsigned coefBytes;    // 4, or 0 past h (selected once per head, not per tile)
        const float* scalar;   // lanes 0-4: gk, gq, beta, cq_h, state scale
        const uint8_t* scale;  // lanes 8 ..: the tile's scale chunk at tile row 0
        const uint8_t* v;      // lanes 16-17: v at tile row 0
        int64_t uOut;          // ring_u element offset of record o + h (rows at + r)
        int64_t oOut;          // o element offset of (row b, value head) (rows at + r)
    };
    auto rowsOf = [&](int slot, int hv) {  // the lane's chunk of row block 0 of (slot, value head)
        return state + ((int64_t)slot * p.state_stride_slot + (int64_t)hv * p.state_stride_head) * unit +
               rowL * rowStride + 16 * chL;
    };
    auto planOf = [&](const Head& hd) {
        Plan pl;
        pl.rows = rowsOf(hd.slot, hd.hv);
        const int64_t ruBase = (int64_t)hd.slot * p.ring_u_stride_slot + (int64_t)hd.hv * p.ring_u_stride_head;
#pragma unroll
        for (int i = 0; i < XR; ++i) {
            const int jr = (lane >> 1) + 16 * i;
            int rr = hd.o + jr;
            rr = rr >= C ? rr - C : rr;
            pl.u[i] = jr < hd.h ? reinterpret_cast<const uint8_t*>(ringU + ruBase + (int64_t)rr * p.ring_u_stride_rec +
                                                                   8 * (lane & 1))
                                : nullptr;
        }
        {
            int rr = hd.o + hd.h;
            rr = rr >= C ? rr - C : rr;
            pl.uOut = ruBase + (int64_t)rr * p.ring_u_stride_rec;
        }
        pl.oOut = (int64_t)hd.b * p.o_stride_b + (int64_t)hd.hv * p.o_stride_h;
        const float* rec = ws + (size_t)hd.bh * RW;
        const bool hasCoef = lane < hd.h && lane < 4 * MAXM;
        pl.coef = hasCoef ? rec + kSplitCoef + lane : ws;
        pl.coefBytes = hasCoef ? 4u : 0u;
        pl.scalar = lane == 0 ? rec : lane == 1 ? rec + 16 : lane == 2 ? rec + 24 : lane == 3 ? rec + kSplitCoef + RM + hd.h
                  : (FMT == kNvfp4 && lane == 4) ? rc.gscale + (int64_t)hd.slot * rc.nheads + hd.hv : nullptr;
        const int64_t srow = ((int64_t)hd.slot * rc.nheads + hd.hv) * V;
        pl.scale = (lane >= 8 && lane < 8 + scaleLanes)
                       ? static_cast<const uint8_t*>(rc.scale) + srow * (FMT == kFp8 ? 4 : 8) + 16 * (lane - 8)
                       : nullptr;
        pl.v = (lane == 16 || lane == 17)
                   ? reinterpret_cast<const uint8_t*>(static_cast<const uint16_t*>(p.v) + (int64_t)hd.b * p.v_stride_b +
                                                      (int64_t)hd.hv * p.v_stride_h + 8 * (lane - 16))
                   : nullptr;
        return pl;
    };
    const int64_t scaleRowBytes = FMT == kFp8 ? 4 : 8;
    // LEAN: the lanes of the optional copies (planOf gives these lanes their sources)
    const bool coefLane = lane < 4 * MAXM;
    const bool scalarLane = lane < (FMT == kNvfp4 ? 5 : 4);
    const bool scaleLane = lane >= 8 && lane < 8 + scaleLanes;
    const bool vLane = lane == 16 || lane == 17;
    auto copyRows = [&](uint8_t* sl, const uint8_t* src) {  // the tile's 16 rows from src (row 0)
#pragma unroll
        for (int i = 0; i < CPR / 2; ++i)
            async::copy16(sl + Slot::kRows + stagedChunkOffset<FMT>(rowL + (32 / CPR) * i, chL),
                          src + (32 / CPR) * i * rowStride);
    };
    // LEAN: the same from the head's row 0 with 32-bit row offsets (one wide multiply-add per copy, no 64-bit product)
    auto copyRowsAt = [&](uint8_t* sl, const uint8_t* src0, int r0) {
#pragma unroll
        for (int i = 0; i < CPR / 2; ++i)
            async::copy16(sl + Slot::kRows + stagedChunkOffset<FMT>(rowL + (32 / CPR) * i, chL),
                          src0 + (uint32_t)(r0 + (32 / CPR) * i) * rowStride32);
    };
    bool rowsStaged = false;  // EARLY: the first tile's rows are already in flight
    if constexpr (EARLY != 0) {
        const int bh0 = tile / nt, tr0 = tile - bh0 * nt, b0 = bh0 / HV, hv0 = bh0 - b0 * HV;
        const int s0 = slotOf(b0);
        if (s0 >= 0) {
            copyRows(wsm, rowsOf(s0, hv0) + (int64_t)tr0 * 16 * rowStride);
            rowsStaged = true;
        }
    }
    auto issue = [&](uint8_t* sl, const Head& hd, const Plan& pl, int tr) {
        const bool normal = hd.slot >= 0 && hd.nf >= 0;
        const bool staged = rowsStaged;  // only the first tile's (a skipped row's early copy lands unused)
        rowsStaged = false;
        if (lane == 0) *reinterpret_cast<int4*>(sl + Slot::kInfo) = make_int4(hd.b, hd.hv, hd.key, tr | (normal ? kNormal : 0));
        if (normal) {
            const int r0 = tr * 16;
            if (!staged) {
                if constexpr (LEAN != 0) copyRowsAt(sl, pl.rows, r0);
                else copyRows(sl, pl.rows + r0 * rowStride);
            }
#pragma unroll
            for (int i = 0; i < XR; ++i) {
                if ((lane >> 1) + 16 * i < 4 * MAXM) {
                    const uint8_t* us = pl.u[i];
                    async::copy16Prefix(sl + Slot::kU + 32 * (lane >> 1) + 512 * i + 16 * (lane & 1),
                                        us ? us + 2 * r0 : pl.rows, us ? 16u : 0u);
                }
            }
            if constexpr (LEAN != 0) {
                // record `lane` at lane-order position (lane & 3) MAXM + lane / 4; past h: zero-filled (no read)
                const int pos = 4 * ((lane & 3) * MAXM + (lane >> 2));
                async::copy4ZeroIf(coefLane, sl + Slot::kCk + pos, pl.coef, pl.coefBytes == 0u);
                // (past h: ws + RM is inside the first head record, RM < RW; no byte is read)
                async::copy4ZeroIf(coefLane, sl + Slot::kCq + pos, pl.coef + RM, pl.coefBytes == 0u);
                async::copy4If(scalarLane, sl + Slot::kHead + 4 * lane, pl.scalar);
                // (pointer + offset as integers: the other lanes' pointers are null, and their copies are predicated off;
                // 32-bit offsets: r0 < head_v)
                auto at = [](const uint8_t* q, uint32_t off) {
                    return reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(q) + (uintptr_t)off);
                };
                async::copy16If(scaleLane, sl + Slot::kScale + 16 * (lane - 8),
                                at(pl.scale, (uint32_t)scaleRowBytes * (uint32_t)r0));
                async::copy16If(vLane, sl + Slot::kV + 16 * (lane - 16), at(pl.v, 2u * (uint32_t)r0));
            } else {
                if (lane < 4 * MAXM) {
                    if (pl.coefBytes) {
                        async::copy4(sl + Slot::kCk + 4 * lane, pl.coef);
                        async::copy4(sl + Slot::kCq + 4 * lane, pl.coef + RM);
                    } else {
                        *reinterpret_cast<float*>(sl + Slot::kCk + 4 * lane) = 0.f;
                        *reinterpret_cast<float*>(sl + Slot::kCq + 4 * lane) = 0.f;
                    }
                }
                if (pl.scalar) async::copy4(sl + Slot::kHead + 4 * lane, pl.scalar);
                if (pl.scale) async::copy16(sl + Slot::kScale + 16 * (lane - 8), pl.scale + scaleRowBytes * r0);
                if (pl.v) async::copy16(sl + Slot::kV + 16 * (lane - 16), pl.v + 2 * r0);
            }
        }
        async::commit();
    };

    // Stage cursor (common/read_mma_walk.cuh); the ring_u output offset (record o + h of the tile's head) travels
    // with each slot: registers, static slot indices through the unrolled loop below
    auto cursor = makeStageCursor<Head, Plan>(tile, tEnd, nt, HV, kSplitSkipRow, slotOf, metaOf, headOf, planOf, issue);
    int64_t uOutSlot[STAGES], oOutSlot[STAGES];
    uOutSlot[0] = cursor.pl.uOut;
    oOutSlot[0] = cursor.pl.oOut;
    cursor.first(wsm);
#pragma unroll
    for (int d = 1; d + 1 < STAGES; ++d) {
        cursor.next(wsm + d * Slot::kBytes);
        uOutSlot[d] = cursor.pl.uOut;
        oOutSlot[d] = cursor.pl.oOut;
    }

    VectorFragments<FMT, 2> vf;
    int vfKey = -1;  // b * H + key head of vf
    auto body = [&](int cs, int ns) -> bool {  // cs / ns: the computed / refilled slot
        cursor.next(wsm + ns * Slot::kBytes);
        uOutSlot[ns] = cursor.pl.uOut;
        oOutSlot[ns] = cursor.pl.oOut;
        async::waitGroup<STAGES - 1>();
        __syncwarp();
        const uint8_t* sl = wsm + cs * Slot::kBytes;
        const int4 info = *reinterpret_cast<const int4*>(sl + Slot::kInfo);
        if (info.w & kNormal) {
            const int b = info.x, hv = info.y, r2 = (info.w & 0xFFFF) * 16 + 2 * g;
            if (info.z != vfKey) {  // warp-uniform
                const int hk = hv / group;
                vf.build(static_cast<const uint16_t*>(p.k) + (int64_t)b * p.k_stride_b + (int64_t)hk * p.k_stride_h,
                         static_cast<const uint16_t*>(p.q) + (int64_t)b * p.q_stride_b + (int64_t)hk * p.q_stride_h, bf16,
                         lane);
                vfKey = info.z;
            }
            float acc[4] = {0.f, 0.f, 0.f, 0.f}, acc2[4] = {0.f, 0.f, 0.f, 0.f};
            tileMma<FMT, 2, LEAN != 0>(acc, acc2, sl + Slot::kRows, vf, g, t);
            // acc: [row 2g k, row 2g q, row 2g + 1 k, row 2g + 1 q] partial dots of this lane's columns
            float dk0, dq0, dk1, dq1;
            if constexpr (FMT == kFp16) {
                dk0 = acc[0], dq0 = acc[1], dk1 = acc[2], dq1 = acc[3];
            } else if constexpr (FMT == kFp8) {
                const float2 sc = *reinterpret_cast<const float2*>(sl + Slot::kScale + 8 * g);
                dk0 = acc[0] * sc.x, dq0 = acc[1] * sc.x, dk1 = acc[2] * sc.y, dq1 = acc[3] * sc.y;
            } else {
                float f[2][2];  // block scales of blocks 2t, 2t + 1 of each row
                nvfp4BlockFactors(sl + Slot::kScale, *reinterpret_cast<const float*>(sl + Slot::kHead + 16), g, t, f);
                dk0 = acc[0] * f[0][0] + acc2[0] * f[0][1];
                dq0 = acc[1] * f[0][0] + acc2[1] * f[0][1];
                dk1 = acc[2] * f[1][0] + acc2[2] * f[1][1];
                dq1 = acc[3] * f[1][0] + acc2[3] * f[1][1];
            }
            const float4 hsc = *reinterpret_cast<const float4*>(sl + Slot::kHead);  // gk, gq, beta, cq_h
            const float gk = hsc.x * vf.inv[0], gq = hsc.y * vf.inv[1];
            float X0 = gk * dk0, X1 = gk * dk1, Y0 = gq * dq0, Y1 = gq * dq1;
            float ckL[MAXM], cqL[MAXM];  // LEAN: records t + 4m, staged in lane order at t MAXM + m (16-byte loads)
            if constexpr (LEAN != 0) {
                static_assert(MAXM % 4 == 0, "lane-order coefficients: whole 16-byte pieces");
#pragma unroll
                for (int q = 0; q < MAXM / 4; ++q) {
                    const float4 k4 = *reinterpret_cast<const float4*>(sl + Slot::kCk + 16 * (t * (MAXM / 4) + q));
                    const float4 q4 = *reinterpret_cast<const float4*>(sl + Slot::kCq + 16 * (t * (MAXM / 4) + q));
                    ckL[4 * q] = k4.x, ckL[4 * q + 1] = k4.y, ckL[4 * q + 2] = k4.z, ckL[4 * q + 3] = k4.w;
                    cqL[4 * q] = q4.x, cqL[4 * q + 1] = q4.y, cqL[4 * q + 2] = q4.z, cqL[4 * q + 3] = q4.w;
                }
            }
#pragma unroll
            for (int m = 0; m < MAXM; ++m) {
                const int j = t + 4 * m;
                float ck, cq;
                if constexpr (LEAN != 0) {
                    ck = ckL[m];
                    cq = cqL[m];
                } else {
                    ck = *reinterpret_cast<const float*>(sl + Slot::kCk + 4 * j);
                    cq = *reinterpret_cast<const float*>(sl + Slot::kCq + 4 * j);
                }
                const uint32_t u = *reinterpret_cast<const uint32_t*>(sl + Slot::kU + 32 * j + 4 * g);
                const float u0 = u16ToF((uint16_t)(u & 0xFFFFu), ubf16), u1 = u16ToF((uint16_t)(u >> 16), ubf16);
                X0 = fmaf(ck, u0, X0);
                X1 = fmaf(ck, u1, X1);
                Y0 = fmaf(cq, u0, Y0);
                Y1 = fmaf(cq, u1, Y1);
            }
            // row sums over the four lanes of the row pair, transposed on the way: lanes t = 0 / 2 end with row 2g,
            // t = 1 / 3 with row 2g + 1 (four shuffles instead of eight); lanes t < 2 finish and store their row
            const int odd = t & 1;
            float X = odd ? X1 : X0, Y = odd ? Y1 : Y0;
            X += __shfl_xor_sync(0xFFFFFFFFu, odd ? X0 : X1, 1);
            Y += __shfl_xor_sync(0xFFFFFFFFu, odd ? Y0 : Y1, 1);
            X += __shfl_xor_sync(0xFFFFFFFFu, X, 2);
            Y += __shfl_xor_sync(0xFFFFFFFFu, Y, 2);
            auto bits = [](float x, bool isBf16) {
                return isBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
            };
            if constexpr (LEAN != 0) {  // every lane computes (lanes t >= 2 duplicate t - 2); lanes t < 2 store
                const uint16_t vb = *reinterpret_cast<const uint16_t*>(sl + Slot::kV + 4 * g + 2 * odd);
                const float u = hsc.z * (u16ToF(vb, bf16) - X);
                const float o = fmaf(hsc.w, u, Y);
                const uint16_t ob = bits(o, bf16), ub = bits(u, ubf16);
                const uint32_t e = (uint32_t)(r2 + odd);  // the row in the head: a 32-bit offset from the head's row 0
                if (t < 2) {
                    (static_cast<uint16_t*>(p.o) + oOutSlot[cs])[e] = ob;
                    (static_cast<uint16_t*>(p.ring_u) + uOutSlot[cs])[e] = ub;
                }
            } else if (t < 2) {
                const uint16_t vb = *reinterpret_cast<const uint16_t*>(sl + Slot::kV + 4 * g + 2 * t);
                const float u = hsc.z * (u16ToF(vb, bf16) - X);
                const float o = fmaf(hsc.w, u, Y);
                static_cast<uint16_t*>(p.o)[(int64_t)b * p.o_stride_b + (int64_t)hv * p.o_stride_h + r2 + t] = bits(o, bf16);
                static_cast<uint16_t*>(p.ring_u)[uOutSlot[cs] + r2 + t] = bits(u, ubf16);
            }
        }
        __syncwarp();  // every lane is done with this slot before it is refilled
        return ++tile < tEnd;
    };
    static_assert(STAGES == 2 || STAGES == 3, "slots per warp");
    if constexpr (STAGES == 2) {
        while (body(0, 1) && body(1, 0)) {
        }
    } else {
        while (body(0, 2) && body(1, 0) && body(2, 1)) {
        }
    }
    async::waitAll();
}

}  // namespace gdn
}  // namespace rssm
