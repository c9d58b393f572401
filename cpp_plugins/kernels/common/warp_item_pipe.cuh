// The item walk of the conventional decodes' PIPE launch shapes (gdn/gdn_warp_decode.cu RSSM_GDN_WARP_CFG = 8 / 9,
// mamba2/mamba2_warp_decode_kernel.cuh RSSM_MAMBA2_WARP_PIPE = 2 / 3; seventy-first session): a persistent warp walks
// its items (8 fp32 rows of 128 columns each) grid-strided and keeps the next STAGES - 1 items' rows in flight. Each
// lane copies its own 16-byte quad of each row (cp.async with the L2 256-byte prefetch hint) into the warp's
// shared-memory stage, in the register-slot order of stream::loadWarpRows (slot r holds row r ^ rl, at + 512 r), one
// commit group per item (an empty group for a padding row or past the end keeps the count), and waits only for the
// current item's group before the body reads it back. A lane reads only what it copied: no barrier. Internal header.
#pragma once
#include "common/cp_async.cuh"
#include "common/stream_rows.cuh"

namespace rssm {
namespace pipe {
constexpr int kItemBytes = 8 * 32 * 16;  // 8 rows x 128 fp32: one stage of one warp

// This lane's quad of the item's rows (`rows`: the item's first row plus this lane's column offset; null: no copies)
// into the stage at shared address `stage`, then one commit group.
__device__ __forceinline__ void issueItemRows(unsigned stage, const float* rows, int64_t rowStride, int rl) {
    if (rows) {
#pragma unroll
        for (int r = 0; r < 8; ++r) async::copy16Pf256At(stage + r * 512, rows + (int64_t)(r ^ rl) * rowStride);
    }
    async::commit();
}

// This warp's items of (heads x blocks) items per batch row (8-row blocks), walked grid-strided over every warp of
// the grid (< `items`, which the launcher keeps below 2^31). slotOf(cursor): the item's state slot, -1 for a padding
// row (no copies, body not called); rowsOf(slot, cursor): the lane's pointer into the item's first row (its column
// offset included); body(cursor, slot, rowsInSmem): the item's work once its rows are in this lane's stage (generic
// pointer to slot 0, slot r at + 512 r). `smem`: the CTA's dynamic shared memory, warps x STAGES x kItemBytes. The
// slots of the items in flight are a shift register with compile-time indices (registers, not local memory); the
// slot of the item after the last in flight is loaded one item early, so its copies issue without waiting.
template <int STAGES, typename SlotOf, typename RowsOf, typename Body>
__device__ __forceinline__ void walkItems(int heads, int blocks, unsigned items, const unsigned char* smem,
                                          int64_t rowStride, SlotOf slotOf, RowsOf rowsOf, Body body) {
    static_assert(STAGES >= 2, "at least one item in flight");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rl = stream::RowScatter<8>::rowOf(lane);
    const unsigned nw = gridDim.x * (blockDim.x >> 5);
    unsigned it = blockIdx.x * (blockDim.x >> 5) + warp;
    if (it >= items) return;
    const unsigned laneOff = warp * (STAGES * kItemBytes) + lane * 16;
    const unsigned laneSmem = async::smemAddr(smem) + laneOff;
    const unsigned char* laneSmemPtr = smem + laneOff;
    const stream::ItemWalker walk(heads, blocks, nw);
    auto inRange = [&](int ahead) { return (unsigned long long)it + (unsigned long long)ahead * nw < items; };
    auto issue = [&](int slot, const stream::ItemCursor& c, int stage) {
        issueItemRows(laneSmem + stage * kItemBytes, slot >= 0 ? rowsOf(slot, c) : nullptr, rowStride, rl);
    };
    stream::ItemCursor c = walk.at(it), ahead = c;
    int slots[STAGES];  // slots[j]: item it + j nw, in stage (stage + j) mod STAGES
#pragma unroll
    for (int k = 0; k < STAGES - 1; ++k) {
        slots[k] = inRange(k) ? slotOf(ahead) : -1;
        issue(slots[k], ahead, k);
        ahead = walk.next(ahead);
    }
    int aheadSlot = inRange(STAGES - 1) ? slotOf(ahead) : -1;
    for (int stage = 0; it < items; it += nw) {
        slots[STAGES - 1] = aheadSlot;
        issue(aheadSlot, ahead, stage == 0 ? STAGES - 1 : stage - 1);  // into the stage the previous item freed
        ahead = walk.next(ahead);
        aheadSlot = inRange(STAGES) ? slotOf(ahead) : -1;
        const int slot = slots[0];
#pragma unroll
        for (int j = 0; j < STAGES - 1; ++j) slots[j] = slots[j + 1];
        if (slot >= 0) {
            async::waitGroup<STAGES - 1>();  // this item's group (the later ones may still be in flight)
            body(c, slot, laneSmemPtr + stage * kItemBytes);
        }
        c = walk.next(c);
        stage = stage + 1 == STAGES ? 0 : stage + 1;
    }
    async::waitAll();  // nothing is left in flight (every issued item was waited for)
}
}  // namespace pipe
}  // namespace rssm
