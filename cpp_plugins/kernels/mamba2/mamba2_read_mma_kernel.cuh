// Mamba-2 read-copy readout on tensor cores (dual-precision decode, standard mode, non-flush rows): the
// second kernel of a split step (after mamba2SplitPrepKernel, which appends the records, writes the head
// records and marks flushing rows kSplitSkipRow) for a read-only read copy in fp16, fp8-e4m3 or nvfp4 with
// dstate 128. Per state row p of head `head`, row b:
//   y[p] = (gamma * S[p, :] . C + sum_{j < R} coef_j x_j[p]) * silu(z[p]),
// the same function as mamba2SplitReadCopyKernel (mamba2_split_kernel.cuh) with the row dots on tensor cores
// (common/read_mma.cuh: the rows as f16 A fragments, C as the B operand in fp16 scaled by a power of two).
//
// Work: tiles of 16 rows of one (row b, head); each warp takes a contiguous range of tiles, so consecutive tiles
// share a head and a group (C's fragments are rebuilt only when the (row, group) changes). Every input of a tile
// (its rows, row / block scales, z, the ring inputs x_j, the head record's gamma and coefficients) is copied into
// one of STAGES per-warp shared-memory slots with cp.async, STAGES - 1 tiles ahead of the one computed, so the
// loads in flight do not hold registers. The stage cursor keeps the next head's slot and cursors one head ahead.
// Ring terms on CUDA cores in the mma's layout: lane (g, t) sums coef_j x_j over records j = t + 4m for its rows
// 2g, 2g + 1, added to its partial dot before the four lanes of a row are summed.
// Padding rows and skipped (flushing) rows are untouched; invalid cursors give NaN outputs. Pure CUDA.
#pragma once
#include "common/cp_async.cuh"
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "common/read_mma_walk.cuh"
#include "common/small_divisor.h"
#include "common/read_rows.cuh"
#include "mamba2/mamba2_split_kernel.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kReadMmaThreads = 128;

// One staged tile (per-warp shared memory; 16-byte aligned parts). MAXM: ring records per lane (R <= 4 MAXM).
template <int FMT, int MAXM>
struct ReadMmaSlot {
    static constexpr int kRows = 0;                                      // 16 rows (readmma::stagedChunkOffset)
    static constexpr int kX = 16 * readmma::rowBytes<FMT>();             // [4 MAXM records][16 rows] activation bits
    static constexpr int kCoef = kX + 4 * MAXM * 32;                     // [4 MAXM] fp32 (zero past R)
    static constexpr int kScale = kCoef + 4 * MAXM * 4;                  // fp8: [16] fp32; nvfp4: [16][8] e4m3
    static constexpr int kZ = kScale + 128;                              // [16] activation bits
    static constexpr int kHead = kZ + 32;                                // gamma, (nvfp4) state scale
    static constexpr int kYOff = kHead + 8;                              // (LEAN) int64 y offset of (b, head)
    static constexpr int kInfo = kHead + 16;                             // b, head, key, tile row block | flags
    static constexpr int kBytes = kInfo + 16;
};
constexpr int kReadMmaNormal = 1 << 16;  // info flag: the tile is computed
constexpr int kReadMmaPoison = 1 << 17;  // info flag: invalid cursors, NaN outputs

template <int FMT, int MAXM, int STAGES>
__host__ __device__ constexpr size_t readMmaSmemBytes() {
    return (size_t)(kReadMmaThreads / 32) * STAGES * ReadMmaSlot<FMT, MAXM>::kBytes;
}

struct ReadMmaHead {
    int bh, b, head, key;  // key: b * G + group (the C fragments' identity)
    int slot;              // < 0: padding row (or out of range)
    int nf, o, R;          // nf >= 0 normal; kSplitSkipRow skipped; other negatives: invalid cursors
};

// AK: activation format, 0 = read from the params (act_dtype), 1 = bf16, 2 = fp16 (compile-time: the conversions of
// the ring inputs, z and y without a per-element select).
// LEAN = 1 (twentieth session, as the GDN read-copy readout's): the upper e4m3 code pairs of fp8 / nvfp4 rows converted
// from the register's upper half (no shift first), the y offset of a tile's (row, head) computed once per head and
// staged with the tile's info (no 64-bit index arithmetic per tile), and the gate / store epilogue computed on every
// lane with only the store predicated (no divergent branch). Same values, same stores.
template <int FMT, int MAXM, int STAGES, int MINB, int AK = 0, int LEAN = 0>
__global__ void __launch_bounds__(kReadMmaThreads, MINB)
    mamba2ReadCopyMmaKernel(const Mamba2ReplayParams p, const stream::ReadCopyScales rc) {
    using namespace readmma;
    using Slot = ReadMmaSlot<FMT, MAXM>;
    extern __shared__ __align__(16) uint8_t smemRaw[];
    const int H = p.nheads, P = p.headdim, Cap = p.ring_capacity;
    const int hpg = H / p.ngroups;
    const int nt = P / 16;
    const int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
    uint8_t* wsm = smemRaw + (threadIdx.x >> 5) * STAGES * Slot::kBytes;
    const WarpTiles wt = warpTiles<kReadMmaThreads>((long long)p.batch * H * nt);  // tiles < 2^31 (launcher)
    const int tEnd = wt.tEnd;
    int tile = wt.tile;
    if (tile >= tEnd) {
        pdlWaitPrimary();
        pdlLaunchDependents();
        return;
    }
    const int RW = splitRecordWordsM2(p.window, 1);
    const float* ws = static_cast<const float*>(p.workspace);
    const bool actBf16 = AK == 0 ? p.act_dtype == RSSM_DTYPE_BF16 : AK == 1;
    const int64_t unit = FMT == kFp16 ? 2 : 1;  // bytes per stride unit
    const int64_t rowStride = p.stride_state_p * unit;
    const uint8_t* state = static_cast<const uint8_t*>(p.state);
    const uint16_t* ringX = static_cast<const uint16_t*>(p.ring_x);
    const int HP = H * P;  // ring record stride (elements; the launcher keeps C * H * P < 2^31)

    auto slotOf = [&](int b) {
        const int s = p.state_batch_indices ? p.state_batch_indices[b] : b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;
    };
    // cursors of head bh (loaded whatever the slot, so the load does not wait for the slot's; a padding row's
    // record is stale and never used)
    auto metaOf = [&](int bh) { return *reinterpret_cast<const int4*>(ws + (size_t)bh * RW + 8); };
    const SmallDivisor hpgDiv((uint32_t)hpg);  // head / hpg (heads < 2^16: the launcher's sizes)
    auto headOf = [&](int bh, int b, int head, int slot, int4 meta) {
        ReadMmaHead hd;
        hd.bh = bh;
        hd.b = b;
        hd.head = head;
        hd.key = b * p.ngroups + (int)hpgDiv.div((uint32_t)head);
        hd.slot = slot;
        hd.nf = slot < 0 ? kSplitSkipRow : meta.y;
        hd.o = meta.z;
        hd.R = meta.w + 1;
        return hd;
    };
    // Per-lane copy plan, fixed for the kernel: lane l copies row chunk (l % CPR) of rows l / CPR + (32 / CPR) i,
    // ring record l / 2 (and l / 2 + 16 for 8 records per lane), half l & 1, and at most one small piece (role):
    // lanes 0-7 coefficient chunks, 8 gamma, 9 the nvfp4 state scale, 16-23 the tile's row / block scales, 24-25 z.
    constexpr int CPR = rowBytes<FMT>() / 16;  // 16-byte chunks per row
    constexpr int XR = (4 * MAXM * 2 + 31) / 32;  // ring copies per lane
    const int rowL = lane / CPR, chL = lane % CPR;
    const int scaleLanes = FMT == kFp8 ? 4 : FMT == kNvfp4 ? 8 : 0;
    const int role = lane < MAXM ? 0 : lane == 8 ? 1 : (FMT == kNvfp4 && lane == 9) ? 2
                   : (lane >= 16 && lane < 16 + scaleLanes) ? 3 : (p.z && (lane == 24 || lane == 25)) ? 4 : -1;
    // Per-head part of the plan (stage cursor's head): sources at tile row 0.
    struct Plan {
        const uint8_t* rows;   // row chunk of this lane
        const uint8_t* x[XR];  // ring record of this lane (rows 8 (lane & 1) ..), or null past R
        const uint8_t* small;  // role source
        unsigned smallBytes;   // coefficient prefix bytes (role 0)
        int64_t yOff;          // y element offset of (row b, head) (rows at + r)
    };
    auto planOf = [&](const ReadMmaHead& hd) {
        Plan pl;
        pl.rows = state + ((int64_t)hd.slot * p.stride_state_slot + (int64_t)hd.head * p.stride_state_head) * unit +
                  rowL * rowStride + 16 * chL;
        const uint16_t* x0 = ringX + ((int64_t)hd.slot * Cap * H + hd.head) * P + 8 * (lane & 1);
#pragma unroll
        for (int i = 0; i < XR; ++i) {
            const int jr = (lane >> 1) + 16 * i;
            int rr = hd.o + jr;
            rr = rr >= Cap ? rr - Cap : rr;
            pl.x[i] = jr < hd.R ? reinterpret_cast<const uint8_t*>(x0 + rr * HP) : nullptr;
        }
        const float* hr = ws + (size_t)hd.bh * RW;
        const int64_t srow = ((int64_t)hd.slot * rc.nheads + hd.head) * P;
        pl.small = nullptr;
        pl.smallBytes = 16;
        pl.yOff = (int64_t)hd.b * p.stride_y_b + (int64_t)hd.head * p.stride_y_h;
        if (role == 0) {
            pl.small = reinterpret_cast<const uint8_t*>(hr + kSplitCoef + 4 * lane);
            const int left = hd.R - 4 * lane;
            pl.smallBytes = left <= 0 ? 0u : left >= 4 ? 16u : 4u * left;
        } else if (role == 1) {
            pl.small = reinterpret_cast<const uint8_t*>(hr);
        } else if (role == 2) {
            pl.small = reinterpret_cast<const uint8_t*>(rc.gscale + (int64_t)hd.slot * rc.nheads + hd.head);
        } else if (role == 3) {
            pl.small = static_cast<const uint8_t*>(rc.scale) + srow * (FMT == kFp8 ? 4 : 8) + 16 * (lane - 16);
        } else if (role == 4) {
            pl.small = reinterpret_cast<const uint8_t*>(static_cast<const uint16_t*>(p.z) + (int64_t)hd.b * p.stride_z_b +
                                                        (int64_t)hd.head * p.stride_z_h + 8 * (lane - 24));
        }
        return pl;
    };
    // slot offsets of this lane's copies (tile independent)
    const int smallDst = role == 0 ? Slot::kCoef + 16 * lane : role == 1 ? Slot::kHead : role == 2 ? Slot::kHead + 4
                       : role == 3 ? Slot::kScale + 16 * (lane - 16) : Slot::kZ + 16 * (lane - 24);
    const int64_t smallRowBytes = role == 3 ? (FMT == kFp8 ? 4 : 8) : role == 4 ? 2 : 0;  // per tile row
    // cp.async of tile row block tr of the head (plan pl) into slot `sl`: one commit group per call, empty for tiles
    // that are not computed; lane 0 writes the tile's info word
    auto issue = [&](uint8_t* sl, const ReadMmaHead& hd, const Plan& pl, int tr) {
        const bool normal = hd.slot >= 0 && hd.nf >= 0;
        if (lane == 0) {
            const int flags = normal ? kReadMmaNormal : (hd.slot >= 0 && hd.nf != kSplitSkipRow) ? kReadMmaPoison : 0;
            *reinterpret_cast<int4*>(sl + Slot::kInfo) = make_int4(hd.b, hd.head, hd.key, tr | flags);
            if constexpr (LEAN != 0) *reinterpret_cast<int64_t*>(sl + Slot::kYOff) = pl.yOff;
        }
        if (normal) {
            const int r0 = tr * 16;
            if constexpr (LEAN != 0) {  // 32-bit row offsets from the head's row 0: one wide multiply-add per copy
#pragma unroll
                for (int i = 0; i < CPR / 2; ++i)
                    async::copy16(sl + Slot::kRows + stagedChunkOffset<FMT>(rowL + (32 / CPR) * i, chL),
                                  pl.rows + (uint32_t)(r0 + (32 / CPR) * i) * (uint32_t)rowStride);
            } else {
                const uint8_t* src = pl.rows + r0 * rowStride;
#pragma unroll
                for (int i = 0; i < CPR / 2; ++i)
                    async::copy16(sl + Slot::kRows + stagedChunkOffset<FMT>(rowL + (32 / CPR) * i, chL),
                                  src + (32 / CPR) * i * rowStride);
            }
#pragma unroll
            for (int i = 0; i < XR; ++i) {
                if ((lane >> 1) + 16 * i < 4 * MAXM) {
                    const uint8_t* xs = pl.x[i];
                    async::copy16Prefix(sl + Slot::kX + 32 * (lane >> 1) + 512 * i + 16 * (lane & 1),
                                        xs ? xs + 2u * (uint32_t)r0 : pl.rows, xs ? 16u : 0u);
                }
            }
            if (role == 1 || role == 2) async::copy4(sl + smallDst, pl.small);  // gamma, state scale: 4 bytes each
            else if (role >= 0)  // LEAN: a 32-bit offset (r0 < headdim)
                async::copy16Prefix(sl + smallDst,
                                    LEAN != 0 ? pl.small + (uint32_t)smallRowBytes * (uint32_t)r0 : pl.small + smallRowBytes * r0,
                                    pl.smallBytes);
        }
        async::commit();
    };

    // Stage cursor: the last issued tile and the next head's slot / cursors (common/read_mma_walk.cuh).
    auto cursor = makeStageCursor<ReadMmaHead, Plan>(tile, tEnd, nt, H, kSplitSkipRow, slotOf, metaOf, headOf, planOf,
                                                      issue);
    cursor.first(wsm);
#pragma unroll
    for (int d = 1; d + 1 < STAGES; ++d) cursor.next(wsm + d * Slot::kBytes);

    VectorFragments<FMT> vf;
    int vfKey = -1;  // b * G + group of vf
    for (int k = 0;; ++k) {
        cursor.next(wsm + ((k + STAGES - 1) % STAGES) * Slot::kBytes);
        async::waitGroup<STAGES - 1>();  // this tile's group has landed (for this lane)
        __syncwarp();                     // ... and every lane's
        const uint8_t* sl = wsm + (k % STAGES) * Slot::kBytes;
        const int4 info = *reinterpret_cast<const int4*>(sl + Slot::kInfo);
        const int b = info.x, head = info.y, r2 = (info.w & 0xFFFF) * 16 + 2 * g;
        uint16_t* yp = static_cast<uint16_t*>(p.y) + r2 +
                       (LEAN != 0 ? *reinterpret_cast<const int64_t*>(sl + Slot::kYOff)
                                  : (int64_t)b * p.stride_y_b + (int64_t)head * p.stride_y_h);
        if (info.w & kReadMmaNormal) {
            if (info.z != vfKey) {  // warp-uniform
                const uint16_t* cv = static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b +
                                     (int64_t)(head / hpg) * p.stride_C_g;
                vf.build(cv, cv, actBf16, lane);
                vfKey = info.z;
            }
            float acc[4] = {0.f, 0.f, 0.f, 0.f}, acc2[4] = {0.f, 0.f, 0.f, 0.f};
            tileMma<FMT, 1, LEAN != 0>(acc, acc2, sl + Slot::kRows, vf, g, t);
            float pg, pg1;  // rows 2g, 2g + 1
            if constexpr (FMT == kFp16) {
                pg = acc[0];
                pg1 = acc[2];
            } else if constexpr (FMT == kFp8) {
                const float2 sc = *reinterpret_cast<const float2*>(sl + Slot::kScale + 8 * g);
                pg = acc[0] * sc.x;
                pg1 = acc[2] * sc.y;
            } else {
                float f[2][2];  // block scales of blocks 2t, 2t + 1 of each row
                nvfp4BlockFactors(sl + Slot::kScale, *reinterpret_cast<const float*>(sl + Slot::kHead + 4), g, t, f);
                pg = acc[0] * f[0][0] + acc2[0] * f[0][1];
                pg1 = acc[2] * f[1][0] + acc2[2] * f[1][1];
            }
            const float gm = *reinterpret_cast<const float*>(sl + Slot::kHead) * vf.inv[0];
            pg *= gm;
            pg1 *= gm;
#pragma unroll
            for (int m = 0; m < MAXM; ++m) {
                const int j = t + 4 * m;
                const float c = *reinterpret_cast<const float*>(sl + Slot::kCoef + 4 * j);
                const uint32_t x = *reinterpret_cast<const uint32_t*>(sl + Slot::kX + 32 * j + 4 * g);
                pg = fmaf(c, actToFloat((uint16_t)(x & 0xFFFFu), actBf16), pg);
                pg1 = fmaf(c, actToFloat((uint16_t)(x >> 16), actBf16), pg1);
            }
            // row sums over the four lanes of the row pair, transposed on the way: lanes t = 0 / 2 end with row 2g,
            // t = 1 / 3 with row 2g + 1 (two shuffles instead of four); lanes t < 2 gate and store their row
            const int odd = t & 1;
            float v = odd ? pg1 : pg;
            v += __shfl_xor_sync(0xFFFFFFFFu, odd ? pg : pg1, 1);
            v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
            if constexpr (LEAN != 0) {  // every lane computes (lanes t >= 2 duplicate t - 2); lanes t < 2 store
                if (p.z) v *= readmma::fastSilu(actToFloat(*reinterpret_cast<const uint16_t*>(sl + Slot::kZ + 4 * g + 2 * odd),
                                                           actBf16));
                const uint16_t yb = floatToAct(v, actBf16);
                if (t < 2) yp[odd] = yb;
            } else if (t < 2) {
                if (p.z) v *= readmma::fastSilu(actToFloat(*reinterpret_cast<const uint16_t*>(sl + Slot::kZ + 4 * g + 2 * t),
                                                           actBf16));
                yp[t] = floatToAct(v, actBf16);
            }
        } else if ((info.w & kReadMmaPoison) && t == 0) {  // invalid cursors: NaN, nothing else touched
            const uint32_t nan = floatToAct(__int_as_float(0x7fc00000), actBf16);
            *reinterpret_cast<uint32_t*>(yp) = nan | (nan << 16);
        }
        __syncwarp();  // every lane is done with this slot before it is refilled
        if (++tile >= tEnd) break;
    }
    async::waitAll();
}

// Pipeline depth (slots per warp) per read format, instantiated in mamba2_read_mma.cu (occupancy bound:
// readmma::readMmaMinBlocks, common/read_mma_walk.cuh).
using readmma::readMmaMinBlocks;
// Slots per warp: 2 (one tile in flight while one is computed). Measured side by side (H200, Super shape, B = 256,
// L = 16, non-flush step; RSSM_MAMBA2_READ_MMA_DEPTH): fp16 / fp8 / nvfp4 at 2 slots 194.2 / 134.5 / 146.1 us, at 3
// slots 196.7 / 134.8 / 148.9 us, at 4 / 4 / 6 slots (the first defaults) 196.6 / 135.6 / 148.4 us: once the copy
// addresses were planned per head the kernel is bound by instructions, not by loads in flight.
template <int FMT>
constexpr int readMmaStages() {
    return 2;
}

}  // namespace mamba2
}  // namespace rssm
