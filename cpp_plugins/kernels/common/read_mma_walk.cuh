// The parts of the tensor-core read-copy readouts (mamba2/mamba2_read_mma_kernel.cuh, gdn/gdn_read_mma_kernel.cuh)
// that do not depend on the family: a warp's contiguous tile range, the stage cursor that walks the tiles a warp
// copies into its shared-memory slots (with the next head's slot and cursors loaded one head ahead), the mma of one
// staged tile, and the nvfp4 block factors of a lane's rows. The family supplies what a head is and how a tile is
// copied (functors). Pure CUDA.
#pragma once
#include <stdint.h>
#include <stdlib.h>

#include "common/cp_async.cuh"
#include "common/fold_mma.cuh"
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "common/read_rows.cuh"

namespace rssm {
namespace readmma {

// Staged ring records of the head-staged readouts (mamba2_read_head_kernel.cuh, gdn_read_head_kernel.cuh): the smallest
// record stride in words that holds w words and is 8 words past a multiple of 32, so that the four records t + 4m
// (t = 0..3) a warp reads with g = 0..7 fall in different banks.
__host__ __device__ constexpr int stagedRecordStrideWords(int w) { return (w + 23) / 32 * 32 + 8; }
static_assert(stagedRecordStrideWords(32) == 40 && stagedRecordStrideWords(40) == 40,
              "record strides of 64 / 80 rows (bf16 / fp16 values)");

// The row copies of a head-staged readout's unit: ROWS nvfp4 rows of 64 bytes, this lane's chunk lane % 4 of rows
// lane / 4 + 8 k (`rows`: its first source row and chunk, rows rowStride bytes apart) to d + rowDst + 512 k (rowDst:
// the lane's swizzled offset in the unit's first tile, stagedChunkOffset<kNvfp4>).
template <int ROWS>
__device__ __forceinline__ void copyUnitRowsAt(unsigned d, uint32_t rowDst, const uint8_t* rows, uint32_t rowStride) {
#pragma unroll
    for (int k = 0; k < ROWS / 8; ++k) async::copy16At(d + rowDst + 512 * k, rows + (uint32_t)(8 * k) * rowStride);
}

// CTAs of 128 threads per SM the Mamba-2 readout's registers are bounded for (__launch_bounds__), per read format:
// fp16 streams the most bytes and keeps 4 (up to 128 registers); fp8 / nvfp4 are bound by instructions and take 5
// (96 registers, no spills at the default depth) for more warps to issue from. Measured side by side (H200, Super
// layer, B = 256, L = 16, bench precision --layers 4, 28ecd8c) at 4 / 5 / 6 CTAs: fp8 110.5 / 109.2 / 111.7 us, nvfp4
// 118.7 / 119.4 / 118.8 us (within the run-to-run spread); fp16 at 4 / 6: 165.9 / 164.6 us. (GDN: gdn_read_mma.cu.)
template <int FMT>
__host__ __device__ constexpr int readMmaMinBlocks() {
    return FMT == kFp16 ? 4 : 5;
}
// RSSM_READ_MMA_MINB = 4 | 5 | 6 forces the bound of the window <= 16 instances compiled for the activation
// format (side-by-side timing); 0 = the per-format default. Host side, read per launch.
inline int forcedReadMmaMinBlocks() {
    const char* e = getenv("RSSM_READ_MMA_MINB");
    if (!e || !e[0]) return 0;
    return (e[0] >= '4' && e[0] <= '6') && e[1] == 0 ? e[0] - '0' : 0;
}

// The warp's tiles [tile, tEnd) of `tiles` (< 2^31), in contiguous ranges over the grid's warps.
struct WarpTiles {
    int tile, tEnd;
};
template <int THREADS>
__device__ __forceinline__ WarpTiles warpTiles(long long tiles) {
    const long long nw = (long long)gridDim.x * (THREADS / 32);
    const long long w = (long long)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
    return WarpTiles{(int)(tiles * w / nw), (int)(tiles * (w + 1) / nw)};
}

// Stage cursor over tiles (head bh = b * H + head, row block tr; nt row blocks per head) of [tile0, tEnd). The row b and
// head of each bh are tracked incrementally (one division in the constructor, none per head). Functors:
// slotOf(b) -> slot (< 0: padding), metaOf(bh) -> the head record's cursor words, headOf(bh, b, head, slot, meta) ->
// Head, planOf(Head) -> Plan (the lane's copy sources), issue(slot memory, Head, Plan, tr) (one commit group).
// The constructor waits for the prep grid (PDL) after the first slot load and before the first cursor load, then lets
// this grid's programmatic dependent be scheduled (the flush-only decode kernel of the dual-precision split path, which
// waits for this grid before it decodes a row).
template <typename Head, typename Plan, typename SlotOf, typename MetaOf, typename HeadOf, typename PlanOf,
          typename Issue>
struct StageCursor {
    const SlotOf& slotOf;
    const MetaOf& metaOf;
    const HeadOf& headOf;
    const PlanOf& planOf;
    const Issue& issue;
    int nt, H, tEnd, lastBh, bh, b, head, tr, tile, nSlot;
    int4 nMeta;
    Head hd;
    Plan pl;
    __device__ __forceinline__ StageCursor(int tile0, int tEnd_, int nt_, int H_, int skipRow, const SlotOf& so,
                                           const MetaOf& mo, const HeadOf& ho, const PlanOf& po, const Issue& is)
        : slotOf(so), metaOf(mo), headOf(ho), planOf(po), issue(is), nt(nt_), H(H_), tEnd(tEnd_) {
        bh = tile0 / nt;
        tr = tile0 - bh * nt;
        tile = tile0;
        b = bh / H;
        head = bh - b * H;
        {
            const int s0 = slotOf(b);
            pdlWaitPrimary();  // the head records and the ring's new records are the prep kernel's output
            pdlLaunchDependents();  // a programmatic dependent (the flush-only decode) may be scheduled now
            hd = headOf(bh, b, head, s0, metaOf(bh));
        }
        pl = planOf(hd);
        lastBh = (tEnd - 1) / nt;
        nSlot = -1;
        nMeta = make_int4(0, skipRow, 0, 0);
        if (bh < lastBh) {
            nSlot = slotOf(head + 1 == H ? b + 1 : b);
            nMeta = metaOf(bh + 1);
        }
    }
    // the first tile into slot memory sl
    __device__ __forceinline__ void first(uint8_t* sl) { issue(sl, hd, pl, tr); }
    // the next tile into slot memory sl (an empty commit group past the range)
    __device__ __forceinline__ void next(uint8_t* sl) {
        if (tile + 1 >= tEnd) {
            async::commit();
            return;
        }
        ++tile;
        if (++tr == nt) {
            tr = 0;
            ++bh;
            if (++head == H) {
                head = 0;
                ++b;
            }
            hd = headOf(bh, b, head, nSlot, nMeta);
            pl = planOf(hd);
            if (bh < lastBh) {
                nSlot = slotOf(head + 1 == H ? b + 1 : b);
                nMeta = metaOf(bh + 1);
            }
        }
        issue(sl, hd, pl, tr);
    }
};
template <typename Head, typename Plan, typename SlotOf, typename MetaOf, typename HeadOf, typename PlanOf,
          typename Issue>
__device__ __forceinline__ StageCursor<Head, Plan, SlotOf, MetaOf, HeadOf, PlanOf, Issue> makeStageCursor(
    int tile0, int tEnd, int nt, int H, int skipRow, const SlotOf& so, const MetaOf& mo, const HeadOf& ho,
    const PlanOf& po, const Issue& is) {
    return StageCursor<Head, Plan, SlotOf, MetaOf, HeadOf, PlanOf, Issue>(tile0, tEnd, nt, H, skipRow, so, mo, ho, po,
                                                                          is);
}

// Walk over units (nu units per head bh = b * H + head, heads in order) of [u0, uEnd) for the head-staged read-copy
// readouts (mamba2/mamba2_read_head_kernel.cuh: nu = 1; gdn/gdn_read_head_kernel.cuh: 64-row units): the unit being
// issued (b, head, bh, part) with its head's slot and cursor words, and the next head's, loaded one head ahead. The
// constructor waits for the prep grid (PDL) after the first slot load and before the first cursor load, then lets
// this grid's programmatic dependent be scheduled (as StageCursor). Between the two, early(head, part, slot) may issue
// copies of the first unit's inputs that the prep does not write (its read-copy rows), so they overlap the prep's tail.
template <typename SlotOf, typename MetaOf>
struct UnitWalk {
    const SlotOf& slotOf;
    const MetaOf& metaOf;
    int H, nu, uEnd, lastBh, un, bh, b, head, part, slot, nSlot;
    int4 meta, nMeta;
    template <typename Early>
    __device__ __forceinline__ UnitWalk(int u0, int uEnd_, int nu_, int H_, int skipRow, const SlotOf& so,
                                        const MetaOf& mo, const Early& early)
        : slotOf(so), metaOf(mo), H(H_), nu(nu_), uEnd(uEnd_), un(u0) {
        bh = u0 / nu;
        part = u0 - bh * nu;
        b = bh / H;
        head = bh - b * H;
        lastBh = (uEnd - 1) / nu;
        slot = slotOf(b);
        early(head, part, slot);
        pdlWaitPrimary();       // the head records and the ring's new records are the prep kernel's output
        pdlLaunchDependents();  // a programmatic dependent (the flush-only decode) may be scheduled now
        meta = metaOf(bh);
        nSlot = -1;
        nMeta = make_int4(0, skipRow, 0, 0);
        if (bh < lastBh) {
            nSlot = slotOf(head + 1 == H ? b + 1 : b);
            nMeta = metaOf(bh + 1);
        }
    }
    __device__ __forceinline__ bool more() const { return un + 1 < uEnd; }
    // to the next unit (more() must hold)
    __device__ __forceinline__ void advance() {
        ++un;
        if (++part == nu) {
            part = 0;
            ++bh;
            if (++head == H) {
                head = 0;
                ++b;
            }
            slot = nSlot;
            meta = nMeta;
            if (bh < lastBh) {
                nSlot = slotOf(head + 1 == H ? b + 1 : b);
                nMeta = metaOf(bh + 1);
            }
        }
    }
};
template <typename SlotOf, typename MetaOf, typename Early>
__device__ __forceinline__ UnitWalk<SlotOf, MetaOf> makeUnitWalk(int u0, int uEnd, int nu, int H, int skipRow,
                                                                 const SlotOf& so, const MetaOf& mo, const Early& early) {
    return UnitWalk<SlotOf, MetaOf>(u0, uEnd, nu, H, skipRow, so, mo, early);
}

// The 8 k16 mma of one staged tile (rows at `rows`) against vf: acc (nvfp4: k blocks 0-3, the lane's first scale
// block; else all) and acc2 (nvfp4: blocks 4-7).
template <int FMT, int NV, bool HI = false>
__device__ __forceinline__ void tileMma(float (&acc)[4], float (&acc2)[4], const uint8_t* rows,
                                        const VectorFragments<FMT, NV>& vf, int g, int t) {
    TileFragments<FMT, HI> tf;
    tf.load(rows, g, t);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        if (FMT == kNvfp4 && j >= 4) foldmma::mma16(acc2, tf.a[j], vf.b[j][0], vf.b[j][1], false);
        else foldmma::mma16(acc, tf.a[j], vf.b[j][0], vf.b[j][1], false);
    }
}

// nvfp4: the multipliers of a lane's block sums, f[r][k] for row 2g + r and block 2t + k: value(bs) * gs * 2^6 (the
// codes are widened to e4m3 as value x 2^-6). `scales`: the staged [16 rows][8] e4m3 block scales. A pair of block
// scales is widened by one e4m3x2 -> f16x2 conversion (hardware on sm_89+, cuda_fp8.h's fallback before): e4m3 values
// are exact in fp16, NaN (0x7F / 0xFF) stays NaN, so each factor equals RowQuad<Nvfp4Rows>::factor bit for bit
// (value(bs) * gs rounded once in fp32, then powers of two).
__device__ __forceinline__ float2 nvfp4ScalePair(uint32_t pair16) {
    const uint32_t h = e4m3x2ToF16x2(pair16);  // common/read_mma.cuh
    return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
__device__ __forceinline__ void nvfp4BlockFactors(const uint8_t* scales, float gs, int g, int t, float (&f)[2][2]) {
    const float k = 16384.f / 256.f;
    const uint32_t s0 = *reinterpret_cast<const uint16_t*>(scales + 16 * g + 2 * t);
    const uint32_t s1 = *reinterpret_cast<const uint16_t*>(scales + 16 * g + 8 + 2 * t);
    const float2 v0 = nvfp4ScalePair(s0), v1 = nvfp4ScalePair(s1);
    f[0][0] = __fmul_rn(v0.x, gs) * k;
    f[0][1] = __fmul_rn(v0.y, gs) * k;
    f[1][0] = __fmul_rn(v1.x, gs) * k;
    f[1][1] = __fmul_rn(v1.y, gs) * k;
}

}  // namespace readmma
}  // namespace rssm
