// Mamba-2 read-copy readout on tensor cores, staged per head (forty-second session; default since the forty-third):
// the same function as mamba2ReadCopyMmaKernel (mamba2_read_mma_kernel.cuh) for nvfp4 read copies, dstate 128,
// head dim 16 NT (NT = 4: Nemotron-3-Super's 64; 5: Nano's 80), windows <= 16 and bf16 / fp16 activations:
//   y[p] = (gamma * S[p, :] . C + sum_{j < R} coef_j x_j[p]) * silu(z[p])
// for the non-flush rows of a dual-precision standard step.
//
// Why: the 16-row tile kernel is issue-bound and spends about 40% of its ~400 warp instructions per tile on work that
// repeats per tile (the tile's copies and their addresses, the per-lane copy roles, the tile's info word, the head
// record's coefficients and gamma read back per tile) and a per-head plan that a 64-row head shares among only four
// tiles (Nsight Compute, twentieth session; static SASS, forty-second session). Here a warp's unit is a whole head:
// one commit group stages all NT tiles of its rows, the ring inputs x_j of all its rows, its scales, z, coefficients,
// gamma and state scale (one copy plan per head, the destinations at immediate offsets), and the compute loop runs
// the NT tiles with the head's coefficients, gamma and state scale in registers. Per tile it computes exactly what the
// tile kernel computes, in the same order (tile mma, block factors, gamma, the ring terms m = 0..3, the two-shuffle row
// sum, silu, one store per row): the same values and stores, bit for bit.
//
// Work: heads bh = b H + head in contiguous ranges over the grid's warps (head-granular: at most one head of
// imbalance); two shared-memory stages per warp, the next head's copies in flight while one head is computed; the next
// head's slot and cursors loaded one head ahead. 96-thread CTAs (a stage is ~7.4 KB at NT = 4, so 5 CTAs of 3 warps fit
// an SM). Padding rows and skipped (flushing) rows are untouched; invalid cursors give NaN outputs. Pure CUDA.
#pragma once
#include "common/cp_async.cuh"
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "common/read_mma_walk.cuh"
#include "common/read_rows.cuh"
#include "common/small_divisor.h"
#include "mamba2/mamba2_split_kernel.cuh"

namespace rssm {
namespace mamba2 {

constexpr int kReadHeadThreads = 96;
constexpr int kReadHeadStages = 2;

// One staged head (per-warp shared memory; every part 16-byte aligned): NT tiles of 16 nvfp4 rows (64 bytes each).
template <int NT>
struct ReadHeadSlot {
    static constexpr int P = 16 * NT;  // the head's rows
    static constexpr int kRows = 0;  // tile i at 1024 i, rows swizzled as readmma::stagedChunkOffset<kNvfp4>
    // ring record j's P activation values at kX + j kXStride (readmma::stagedRecordStrideWords: 40 words at P = 64
    // and 80)
    static constexpr int kXStride = readmma::stagedRecordStrideWords(P / 2) * 4;
    static constexpr int kX = kRows + NT * 1024;
    static constexpr int kScale = kX + 16 * kXStride;        // [P rows][8] e4m3 block scales
    static constexpr int kZ = kScale + 8 * P;                // [P] activation bits
    static constexpr int kCoef = kZ + (2 * P + 15) / 16 * 16;  // [16] fp32 (zero past R)
    static constexpr int kHead = kCoef + 64;                 // gamma, state scale
    static constexpr int kBytes = kHead + 16;
};

template <int NT>
__host__ __device__ constexpr size_t readHeadSmemBytes() {
    return (size_t)(kReadHeadThreads / 32) * kReadHeadStages * ReadHeadSlot<NT>::kBytes;
}

// AK: 1 = bf16 activations, 2 = fp16 (compile-time, as the tile kernel's specialized instances).
template <int NT, int MINB, int AK>
__global__ void __launch_bounds__(kReadHeadThreads, MINB)
    mamba2ReadCopyHeadKernel(const Mamba2ReplayParams p, const stream::ReadCopyScales rc) {
    using namespace readmma;
    using Slot = ReadHeadSlot<NT>;
    constexpr int P = Slot::P;
    constexpr int S = kReadHeadStages;
    constexpr int XC = P / 8;             // 16-byte chunks of one record's x (P bf16 / fp16 values)
    constexpr int XK = (16 * XC + 31) / 32;  // ring copies per lane
    constexpr int SC = P / 2;             // 16-byte chunks of the head's block scales (P rows x 8 bytes)
    constexpr int SK = (SC + 31) / 32;
    static_assert(AK == 1 || AK == 2, "compiled for the activation format");
    extern __shared__ __align__(16) uint8_t smemRaw[];
    const int H = p.nheads, Cap = p.ring_capacity;
    const int hpg = H / p.ngroups;  // heads per group (< 2^16: the launcher)
    const int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
    uint8_t* wsm = smemRaw + (threadIdx.x >> 5) * S * Slot::kBytes;
    const unsigned wsmS = async::smemAddr(wsm);
    const WarpTiles wr = warpTiles<kReadHeadThreads>((long long)p.batch * H);  // heads < 2^31 (launcher)
    const int hEnd = wr.tEnd, bh = wr.tile;
    if (bh >= hEnd) {
        pdlWaitPrimary();
        pdlLaunchDependents();
        return;
    }
    constexpr bool actBf16 = AK == 1;
    const int RW = splitRecordWordsM2(p.window, 1);
    const float* ws = static_cast<const float*>(p.workspace);
    const uint32_t rowStride = (uint32_t)p.stride_state_p;  // nvfp4: bytes; P rows x rowStride < 2^31 (launcher)
    const uint8_t* state = static_cast<const uint8_t*>(p.state);
    const uint16_t* ringX = static_cast<const uint16_t*>(p.ring_x);
    const int64_t recBytes = 2LL * H * P;  // ring record stride (bytes)
    const SmallDivisor hpgDiv((uint32_t)hpg);

    auto slotOf = [&](int b) {
        const int s = p.state_batch_indices ? p.state_batch_indices[b] : b;
        return (s < 0 || s >= p.num_slots) ? -1 : s;
    };
    auto metaOf = [&](int h) { return *reinterpret_cast<const int4*>(ws + (size_t)h * RW + 8); };

    // The lane's fixed part of the copy plan. Rows: chunk lane % 4 of head rows lane / 4 + 8 k (k < P / 8), i.e.
    // slot offset rowDst + 512 k. Ring: piece q = lane + 32 k is record q / XC, chunk q % XC.
    const int rowL = lane >> 2, chL = lane & 3;
    const uint32_t rowDst = Slot::kRows + (uint32_t)stagedChunkOffset<kNvfp4>(rowL, chL);

    // The rows of head hd of `slot` into stage memory d.
    auto issueRows = [&](uint32_t d, int hd, int slot) {
        const uint8_t* rows = state + ((int64_t)slot * p.stride_state_slot + (int64_t)hd * p.stride_state_head) +
                              rowL * (int64_t)rowStride + 16 * chL;
        copyUnitRowsAt<P>(d, rowDst, rows, rowStride);
    };
    bool rowsStaged = false;  // the first head's rows, copied before the wait for the prep grid (the prep does not
                              // write the read copy; a head that turns out not to be computed ignores them)
    // Issues the copies of head h (row b, head hd, slot, cursor words) into stage memory d; one commit group (with the
    // early rows of the first head), empty for a head that is not computed.
    auto issue = [&](uint32_t d, int b, int hd, int h, int slot, int4 meta) {
        const bool staged = rowsStaged;
        rowsStaged = false;
        if (slot >= 0 && meta.y >= 0) {  // warp-uniform
            const int o = meta.z, R = meta.w + 1;
            if (!staged) issueRows(d, hd, slot);
            const uint8_t* x0 = reinterpret_cast<const uint8_t*>(ringX + ((int64_t)slot * Cap * H + hd) * P);
#pragma unroll
            for (int k = 0; k < XK; ++k) {
                const int q = lane + 32 * k;
                const int j = q / XC, c = q - j * XC;
                if (16 * XC % 32 == 0 || q < 16 * XC) {  // compile-time true but for the last copy of odd XC
                    int rr = o + j;
                    rr = rr >= Cap ? rr - Cap : rr;
                    const uint8_t* src = x0 + (j < R ? (int64_t)rr * recBytes : 0) + 16 * c;  // past R: never read
                    async::copy16ZeroIfAt(d + Slot::kX + j * Slot::kXStride + 16 * c, src, j >= R);
                }
            }
            const int64_t sh = (int64_t)slot * rc.nheads + hd;
            const uint8_t* scale = static_cast<const uint8_t*>(rc.scale) + sh * P * 8;
#pragma unroll
            for (int k = 0; k < SK; ++k) {
                const int q = lane + 32 * k;
                if (SC % 32 == 0) async::copy16At(d + Slot::kScale + 16 * q, scale + 16 * q);
                else async::copy16IfAt(q < SC, d + Slot::kScale + 16 * q, scale + 16 * q);
            }
            if (p.z) {  // uniform
                const uint16_t* z = static_cast<const uint16_t*>(p.z) + (int64_t)b * p.stride_z_b +
                                    (int64_t)hd * p.stride_z_h;
                async::copy16IfAt(lane < XC, d + Slot::kZ + 16 * lane, z + 8 * lane);
            }
            const float* hr = ws + (size_t)h * RW;
            async::copy4ZeroIfAt(lane < 16, d + Slot::kCoef + 4 * lane, hr + kSplitCoef + lane, lane >= R);
            async::copy4IfAt(lane == 16, d + Slot::kHead, hr);                    // gamma
            async::copy4IfAt(lane == 17, d + Slot::kHead + 4, rc.gscale + sh);  // the state's nvfp4 scale
        }
        async::commit();
    };

    // walk (common/read_mma_walk.cuh, one unit per head): the head being issued with its slot and cursors, and the
    // next head's (loaded one head ahead)
    auto early = [&](int hd, int, int slot) {
        if (slot >= 0) {
            issueRows(wsmS, hd, slot);
            rowsStaged = true;
        }
    };
    auto walk = makeUnitWalk(bh, hEnd, 1, H, kSplitSkipRow, slotOf, metaOf, early);
    issue(wsmS, walk.b, walk.head, walk.bh, walk.slot, walk.meta);

    VectorFragments<kNvfp4> vf;
    int vfKey = -1;
    for (int k = 0;; ++k) {
        // the head computed now (issued last), then the next head into the other stage
        const int cb = walk.b, chd = walk.head, cSlot = walk.slot;
        const int4 cMeta = walk.meta;
        const bool more = walk.more();
        if (more) {
            walk.advance();
            issue(wsmS + ((k + 1) % S) * Slot::kBytes, walk.b, walk.head, walk.bh, walk.slot, walk.meta);
        } else {
            async::commit();
        }
        async::waitGroup<S - 1>();  // this head's group has landed (for this lane)
        __syncwarp();               // ... and every lane's
        const uint8_t* sl = wsm + (k % S) * Slot::kBytes;
        uint16_t* y = static_cast<uint16_t*>(p.y) + (int64_t)cb * p.stride_y_b + (int64_t)chd * p.stride_y_h + 2 * g;
        if (cSlot >= 0 && cMeta.y >= 0) {  // warp-uniform
            const int grp = (int)hpgDiv.div((uint32_t)chd), key = cb * p.ngroups + grp;
            if (key != vfKey) {  // warp-uniform
                const uint16_t* cv =
                    static_cast<const uint16_t*>(p.Cm) + (int64_t)cb * p.stride_C_b + (int64_t)grp * p.stride_C_g;
                vf.build(cv, cv, actBf16, lane);
                vfKey = key;
            }
            float coef[4];
#pragma unroll
            for (int m = 0; m < 4; ++m) coef[m] = *reinterpret_cast<const float*>(sl + Slot::kCoef + 4 * (t + 4 * m));
            const float gm = *reinterpret_cast<const float*>(sl + Slot::kHead) * vf.inv[0];
            const float gs = *reinterpret_cast<const float*>(sl + Slot::kHead + 4);
            const int odd = t & 1;
#pragma unroll
            for (int i = 0; i < NT; ++i) {
                float acc[4] = {0.f, 0.f, 0.f, 0.f}, acc2[4] = {0.f, 0.f, 0.f, 0.f};
                tileMma<kNvfp4, 1, true>(acc, acc2, sl + Slot::kRows + 1024 * i, vf, g, t);
                float f[2][2];  // block scales of blocks 2t, 2t + 1 of rows 16 i + 2g, + 1
                nvfp4BlockFactors(sl + Slot::kScale + 128 * i, gs, g, t, f);
                float pg = acc[0] * f[0][0] + acc2[0] * f[0][1];
                float pg1 = acc[2] * f[1][0] + acc2[2] * f[1][1];
                pg *= gm;
                pg1 *= gm;
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = t + 4 * m;
                    const uint32_t x =
                        *reinterpret_cast<const uint32_t*>(sl + Slot::kX + j * Slot::kXStride + 32 * i + 4 * g);
                    pg = fmaf(coef[m], actToFloat((uint16_t)(x & 0xFFFFu), actBf16), pg);
                    pg1 = fmaf(coef[m], actToFloat((uint16_t)(x >> 16), actBf16), pg1);
                }
                // row sums over the four lanes of the row pair, transposed (lanes t = 0 / 2: row 2g, 1 / 3: 2g + 1)
                float v = odd ? pg1 : pg;
                v += __shfl_xor_sync(0xFFFFFFFFu, odd ? pg : pg1, 1);
                v += __shfl_xor_sync(0xFFFFFFFFu, v, 2);
                if (p.z) {
                    const uint16_t zb = *reinterpret_cast<const uint16_t*>(sl + Slot::kZ + 32 * i + 4 * g + 2 * odd);
                    v *= readmma::fastSilu(actToFloat(zb, actBf16));
                }
                async::storeGlobal2If(t < 2, y + 16 * i + odd, floatToAct(v, actBf16));
            }
        } else if (cSlot >= 0 && cMeta.y != kSplitSkipRow && t == 0) {  // invalid cursors: NaN, nothing else touched
            const uint32_t nan = floatToAct(__int_as_float(0x7fc00000), actBf16);
#pragma unroll
            for (int i = 0; i < NT; ++i) *reinterpret_cast<uint32_t*>(y + 16 * i) = nan | (nan << 16);
        }
        __syncwarp();  // every lane is done with this stage before it is refilled
        if (!more) break;
    }
    async::waitAll();
}

}  // namespace mamba2
}  // namespace rssm
