// Mamba-2 read-copy readout on tensor cores (dual-precision decode, standard mode, non-flush rows): the
// second kernel of a split step (after mamba2SplitPrepKernel, which appends the records, writes the head
// records and marks flushing rows kSplitSkipRow) for a read-only read copy in fp16, fp8-e4m3 or nvfp4 with
// dstate 128. Per state row p of head `head`, row b:
//   y[p] = (gamma * S[p, :] . C + sum_{j < R} coef_j x_j[p]) * silu(z[p]),
// the same function as mamba2SplitReadCopyKernel (mamba2_split_kernel.cuh) with the row dots on tensor cores
// (common/read_mma.cuh: the rows stay in their format, C is the mma's B operand, scaled by a power of two).
//
// Work: tiles of 16 rows of one (row b, head); each warp takes a contiguous range of tiles, so consecutive
// tiles share a head (gamma, coefficients, cursors) and a group (C's fragments, rebuilt only when the
// (row, group) changes). The next tile's rows, row scales and ring inputs x_j are loaded while the current
// one is computed (two register buffers); the next head's slot and cursors one head ahead.
// Ring terms on CUDA cores in the mma's layout: lane (g, t) sums coef_j x_j over records j = t + 4m for rows
// g and g + 8, added to its partial dot before the four lanes of a row are summed.
// Padding rows and skipped (flushing) rows are untouched; invalid cursors give NaN outputs. Pure CUDA.
#pragma once
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "common/read_rows.cuh"
#include "mamba2/mamba2_split_kernel.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kReadMmaThreads = 128;
__device__ const uint32_t kReadMmaZeroWord = 0u;

template <int MAXM>  // records per lane: t + 4m, m < MAXM (R <= 4 MAXM)
struct ReadMmaHead {
    int bh;    // b * H + head
    int b, head, key;  // key: b * G + group (the C fragments' identity)
    int slot;  // < 0: padding row (or out of range)
    int nf;    // >= 0 normal; kSplitSkipRow skipped; other negatives: invalid cursors
    int o, R;
    float gam, gs;  // gamma; nvfp4 state scale
    float coef[MAXM];
    __device__ __forceinline__ bool normal() const { return slot >= 0 && nf >= 0; }
};

template <int FMT, int MAXM>
struct ReadMmaStaged {
    readmma::Tile<FMT> rows;
    uint32_t sc[2];     // fp8: fp32 scale bits of rows 2g, 2g + 1; nvfp4: their block scale pairs (blocks 2t, 2t + 1)
    uint32_t x[MAXM];   // x_j of the lane's rows 2g (low half) and 2g + 1 (high half)
    uint32_t z;         // lanes t = 0: z of rows 2g, 2g + 1
};

template <int FMT, int MAXM, int DEPTH, int MINB>
__global__ void __launch_bounds__(kReadMmaThreads, MINB)
    mamba2ReadCopyMmaKernel(const Mamba2ReplayParams p, const stream::ReadCopyScales rc) {
    using namespace readmma;
    const int H = p.nheads, P = p.headdim, Cap = p.ring_capacity;
    const int hpg = H / p.ngroups;
    const int nt = P / 16;
    const int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
    const long long tiles = (long long)p.batch * H * nt;
    const long long nw = (long long)gridDim.x * (kReadMmaThreads / 32);
    const long long w = (long long)blockIdx.x * (kReadMmaThreads / 32) + (threadIdx.x >> 5);
    const int tEnd = (int)(tiles * (w + 1) / nw);  // tiles < 2^31 (launcher)
    int tile = (int)(tiles * w / nw);
    if (tile >= tEnd) {
        pdlWaitPrimary();
        return;
    }
    const int RW = splitRecordWordsM2(p.window, 1);
    const float* ws = static_cast<const float*>(p.workspace);
    const bool actBf16 = p.act_dtype == RSSM_DTYPE_BF16;
    const int64_t unit = FMT == kFp16 ? 2 : 1;  // bytes per stride unit
    const int64_t rowStride = p.stride_state_p * unit;
    const uint8_t* state = static_cast<const uint8_t*>(p.state);
    const uint16_t* ringX = static_cast<const uint16_t*>(p.ring_x);
    const int HP = H * P;  // ring record stride (elements; the launcher keeps C * H * P < 2^31)

    auto slotOf = [&](int bh) {
        const int b = bh / H;
        const int s = p.state_batch_indices ? p.state_batch_indices[b] : b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;
    };
    // cursors of head bh: nf, o, h (loaded whatever the slot, so the load does not wait for the slot's; a padding
    // row's record is stale and never used)
    auto metaOf = [&](int bh) { return *reinterpret_cast<const int4*>(ws + (size_t)bh * RW + 8); };
    // the rest of a head's context once its cursors are known
    auto completeHead = [&](ReadMmaHead<MAXM>& hd, int bh, int slot, int4 meta) {
        hd.bh = bh;
        hd.b = bh / H;
        hd.head = bh - hd.b * H;
        hd.key = hd.b * p.ngroups + hd.head / hpg;
        hd.slot = slot;
        hd.nf = slot < 0 ? kSplitSkipRow : meta.y;
        hd.o = meta.z;
        hd.R = meta.w + 1;
        hd.gam = 0.f;
        hd.gs = 1.f;
#pragma unroll
        for (int m = 0; m < MAXM; ++m) hd.coef[m] = 0.f;
        if (!hd.normal()) return;
        const float* hr = ws + (size_t)bh * RW;
        hd.gam = hr[0];
#pragma unroll
        for (int m = 0; m < MAXM; ++m)
            if (t + 4 * m < hd.R) hd.coef[m] = hr[kSplitCoef + t + 4 * m];
        if constexpr (FMT == kNvfp4) hd.gs = __ldg(rc.gscale + (int64_t)slot * rc.nheads + hd.head);
    };
    // loads of tile row block tr of head hd into st (nothing for padding / skipped / invalid rows). The mma's rows
    // g and g + 8 are the tile's rows 2g and 2g + 1, so a lane's two rows are adjacent: their x_j, z and y are one
    // 32-bit access each (the launcher checks the alignment).
    auto stage = [&](ReadMmaStaged<FMT, MAXM>& st, const ReadMmaHead<MAXM>& hd, int tr) {
        if (!hd.normal()) return;
        const int head = hd.head;
        const int r2 = tr * 16 + 2 * g;
        const uint8_t* base = state + ((int64_t)hd.slot * p.stride_state_slot + (int64_t)head * p.stride_state_head) * unit;
        st.rows.load(base + r2 * rowStride, base + (r2 + 1) * rowStride, t);
        const int64_t srow = ((int64_t)hd.slot * rc.nheads + head) * P + r2;
        if constexpr (FMT == kFp8) {
            const float2 sc = __ldg(reinterpret_cast<const float2*>(static_cast<const float*>(rc.scale) + srow));
            st.sc[0] = __float_as_uint(sc.x);
            st.sc[1] = __float_as_uint(sc.y);
        } else if constexpr (FMT == kNvfp4) {
            const uint8_t* sb = static_cast<const uint8_t*>(rc.scale) + srow * 8 + 2 * t;
            st.sc[0] = __ldg(reinterpret_cast<const unsigned short*>(sb));
            st.sc[1] = __ldg(reinterpret_cast<const unsigned short*>(sb + 8));
        }
        st.z = 0u;
        if (p.z && t == 0)
            st.z = *reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(p.z) +
                                                      (int64_t)hd.b * p.stride_z_b + (int64_t)head * p.stride_z_h + r2);
        const uint16_t* x0 = ringX + ((int64_t)hd.slot * Cap * H + head) * P + r2;  // record slot 0 of the ring
#pragma unroll
        for (int m = 0; m < MAXM; ++m) {  // records past R read a zero word (a select, not a branch per record)
            const int j = t + 4 * m;
            int rr = hd.o + j;
            rr = rr >= Cap ? rr - Cap : rr;
            const uint32_t* src = j < hd.R ? reinterpret_cast<const uint32_t*>(x0 + rr * HP) : &kReadMmaZeroWord;
            st.x[m] = *src;
        }
    };

    VectorFragments<FMT> vf;
    int vfKey = -1;  // b * G + group of vf
    // Compute cursor (tile, its head bhC / row block trC, context hc) and stage cursor (the last staged tile bhS /
    // trS, context hs), DEPTH - 1 tiles ahead. Heads have >= 2 tiles (P >= 32), so when the compute cursor enters a
    // new head the stage cursor is already in it (hc = hs).
    int bhC = tile / nt, trC = tile - bhC * nt;
    int bhS = bhC, trS = trC;
    int tileS = tile;
    ReadMmaHead<MAXM> hc, hs;
    ReadMmaStaged<FMT, MAXM> buf[DEPTH];
    {
        const int s0 = slotOf(bhC);
        pdlWaitPrimary();  // the head records and the ring's new records are the prep kernel's output
        completeHead(hs, bhC, s0, metaOf(bhC));
    }
    hc = hs;
    const int lastBh = (tEnd - 1) / nt;
    int nSlot = -1;  // slot and cursors of head bhS + 1, loaded one head ahead
    int4 nMeta = make_int4(0, kSplitSkipRow, 0, 0);
    if (bhS < lastBh) {
        nSlot = slotOf(bhS + 1);
        nMeta = metaOf(bhS + 1);
    }
    // the next tile of the stage cursor into st (nothing past the warp's range)
    auto stageNext = [&](ReadMmaStaged<FMT, MAXM>& st) {
        if (tileS + 1 >= tEnd) return;
        ++tileS;
        if (++trS == nt) {
            trS = 0;
            ++bhS;
            completeHead(hs, bhS, nSlot, nMeta);
            if (bhS < lastBh) {
                nSlot = slotOf(bhS + 1);
                nMeta = metaOf(bhS + 1);
            }
        }
        stage(st, hs, trS);
    };
    stage(buf[0], hs, trS);
#pragma unroll
    for (int d = 1; d + 1 < DEPTH; ++d) stageNext(buf[d]);

    // one tile: stage DEPTH - 1 ahead into `nb`, compute the current one from `cb`; false after the last tile
    auto body = [&](ReadMmaStaged<FMT, MAXM>& cb, ReadMmaStaged<FMT, MAXM>& nb) -> bool {
        stageNext(nb);
        const int b = hc.b, head = hc.head;
        const int r2 = trC * 16 + 2 * g;
        if (hc.normal()) {
            const int key = hc.key;
            if (key != vfKey) {  // warp-uniform
                vf.build(static_cast<const uint16_t*>(p.Cm) + (int64_t)b * p.stride_C_b +
                             (int64_t)(head / hpg) * p.stride_C_g,
                         actBf16, lane);
                vfKey = key;
            }
            float acc[4] = {0.f, 0.f, 0.f, 0.f}, acc2[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int j = 0; j < Tile<FMT>::kBlocks; ++j) {
                uint32_t a[4];
                cb.rows.fragment(a, j);
                if constexpr (FMT == kFp16) {
                    foldmma::mma16(acc, a, vf.b[j][0], vf.b[j][1], false);
                } else if (FMT == kNvfp4 && j >= 2) {
                    mmaE4m3(acc2, a, vf.b[j][0], vf.b[j][1]);
                } else {
                    mmaE4m3(acc, a, vf.b[j][0], vf.b[j][1]);
                }
            }
            float pg, pg8;
            if constexpr (FMT == kFp16) {
                pg = acc[0];
                pg8 = acc[2];
            } else if constexpr (FMT == kFp8) {
                pg = fmaf(acc[1], 0.0625f, acc[0]) * __uint_as_float(cb.sc[0]);
                pg8 = fmaf(acc[3], 0.0625f, acc[2]) * __uint_as_float(cb.sc[1]);
            } else {
                // block scales of blocks 2t (low byte) and 2t + 1; value(bs) * g * 2^6 (codes are x 2^-6)
                using RQ = stream::RowQuad<stream::Nvfp4Rows>;
                const float k = 1.f / 256.f;
                pg = fmaf(acc[1], 0.0625f, acc[0]) * (RQ::factor(cb.sc[0] & 0xFFu, hc.gs) * k) +
                     fmaf(acc2[1], 0.0625f, acc2[0]) * (RQ::factor(cb.sc[0] >> 8, hc.gs) * k);
                pg8 = fmaf(acc[3], 0.0625f, acc[2]) * (RQ::factor(cb.sc[1] & 0xFFu, hc.gs) * k) +
                      fmaf(acc2[3], 0.0625f, acc2[2]) * (RQ::factor(cb.sc[1] >> 8, hc.gs) * k);
            }
            const float gm = hc.gam * vf.inv;
            pg *= gm;
            pg8 *= gm;
#pragma unroll
            for (int m = 0; m < MAXM; ++m) {
                pg = fmaf(hc.coef[m], actToFloat((uint16_t)(cb.x[m] & 0xFFFFu), actBf16), pg);
                pg8 = fmaf(hc.coef[m], actToFloat((uint16_t)(cb.x[m] >> 16), actBf16), pg8);
            }
            pg += __shfl_xor_sync(0xFFFFFFFFu, pg, 1);
            pg8 += __shfl_xor_sync(0xFFFFFFFFu, pg8, 1);
            pg += __shfl_xor_sync(0xFFFFFFFFu, pg, 2);
            pg8 += __shfl_xor_sync(0xFFFFFFFFu, pg8, 2);
            if (t == 0) {
                if (p.z) {
                    pg *= siluF(actToFloat((uint16_t)(cb.z & 0xFFFFu), actBf16));
                    pg8 *= siluF(actToFloat((uint16_t)(cb.z >> 16), actBf16));
                }
                *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b +
                                             (int64_t)head * p.stride_y_h + r2) =
                    (uint32_t)floatToAct(pg, actBf16) | ((uint32_t)floatToAct(pg8, actBf16) << 16);
            }
        } else if (hc.slot >= 0 && hc.nf != kSplitSkipRow && t == 0) {  // invalid cursors: poison
            const uint32_t nan = floatToAct(__int_as_float(0x7fc00000), actBf16);
            *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p.y) + (int64_t)b * p.stride_y_b +
                                         (int64_t)head * p.stride_y_h + r2) = nan | (nan << 16);
        }
        if (++tile >= tEnd) return false;
        if (++trC == nt) {
            trC = 0;
            ++bhC;
            hc = hs;
        }
        return true;
    };
    static_assert(DEPTH >= 2 && DEPTH <= 4, "pipeline depth");
    if constexpr (DEPTH == 2) {
        while (body(buf[0], buf[1]) && body(buf[1], buf[0])) {
        }
    } else if constexpr (DEPTH == 3) {
        while (body(buf[0], buf[2]) && body(buf[1], buf[0]) && body(buf[2], buf[1])) {
        }
    } else {
        while (body(buf[0], buf[3]) && body(buf[1], buf[0]) && body(buf[2], buf[1]) && body(buf[3], buf[2])) {
        }
    }
}

// Occupancy and pipeline depth (tiles in flight per warp) per read format (instantiated in mamba2_read_mma.cu).
template <int FMT>
constexpr int readMmaMinBlocks() {
    return FMT == readmma::kFp16 ? 3 : 4;
}
template <int FMT>
constexpr int readMmaDepth() {
    return FMT == readmma::kNvfp4 ? 3 : 2;
}

}  // namespace mamba2
}  // namespace rssm
