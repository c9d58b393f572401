// Instantiations of the mamba2 dual-precision decode kernel over the read format, and the paths that
// decode the non-flush rows straight from the read copy with a replay kernel (skip_flush_rows) while this
// kernel decodes only the flushing rows from the recurrence copy (docs/precision.md):
//   split: the Mamba-2 split kernels (variant 4), any read format (fp8 / nvfp4 through their scaled row
//          loads), with a workspace and above one wave of (row, head) pairs;
//   stream: the persistent replay kernel (variant 2), 16-bit read copies.
#include <stdlib.h>
#include <string.h>

#include "dual_precision/dp_decode_dispatch.h"
#include "dual_precision/dp_decode_kernels.cuh"
#include "common/read_rows.cuh"
#include "mamba2/mamba2.h"
#include "mamba2/mamba2_dispatch.h"

namespace rssm {
namespace dp {
namespace {

// Mamba2ReplayParams over the dual-precision decode's tensors (contiguous inputs and rings, the read
// copy as the checkpoint), skipping flushing rows.
Mamba2ReplayParams streamParams(const DualPrecisionDecodeParams& p) {
    Mamba2ReplayParams q;
    memset(&q, 0, sizeof(q));
    const int T = p.num_tokens, H = p.nheads, P = p.headdim, N = p.dstate, G = p.ngroups;
    q.batch = p.batch;
    q.num_tokens = T;
    q.nheads = H;
    q.headdim = P;
    q.dstate = N;
    q.ngroups = G;
    q.num_slots = p.num_slots;
    q.window = p.window;
    q.ring_capacity = p.ring_capacity;
    q.mode = p.mode;
    q.state_dtype = p.read_dtype;
    q.act_dtype = p.act_dtype;
    q.dt_dtype = p.dt_dtype;
    q.rows_per_cta = 0;
    q.variant = 2;
    q.skip_flush_rows = 1;
    q.stride_state_slot = p.stride_lp_slot;
    q.stride_state_head = p.stride_lp_head;
    q.stride_state_p = p.stride_lp_row;
    q.stride_x_b = q.stride_z_b = q.stride_y_b = (int64_t)T * H * P;
    q.stride_x_t = q.stride_z_t = q.stride_y_t = (int64_t)H * P;
    q.stride_x_h = q.stride_z_h = q.stride_y_h = P;
    q.stride_dt_b = (int64_t)T * H;
    q.stride_dt_t = H;
    q.stride_dt_h = 1;
    q.stride_B_b = q.stride_C_b = (int64_t)T * G * N;
    q.stride_B_t = q.stride_C_t = (int64_t)G * N;
    q.stride_B_g = q.stride_C_g = N;
    q.state_batch_indices = p.state_batch_indices;
    q.ring_origin = p.ring_origin;
    q.ring_len = p.ring_len;
    q.state = const_cast<void*>(p.ckpt_lp);
    q.ring_dt = p.ring_dt;
    q.ring_x = p.ring_x;
    q.ring_B = p.ring_B;
    q.x = p.x;
    q.dt_raw = p.dt_raw;
    q.Bm = p.Bm;
    q.Cm = p.Cm;
    q.z = p.z;
    q.A = p.A;
    q.D = p.D;
    q.dt_bias = p.dt_bias;
    q.y = p.y;
    return q;
}
// Head dims of the Mamba-2 replay kernels (the stream and split paths run them); others take the tile path.
bool replayHeaddim(int P) { return P == 32 || P == 64 || P == 80 || P == 128; }

bool splitSizesFit(const DualPrecisionDecodeParams& p) {
    const int records = p.mode == 0 ? p.window : p.window + p.num_tokens;
    return records <= 32 && p.dstate == 128 && replayHeaddim(p.headdim) &&
           (long long)p.batch * p.nheads * ((p.headdim + 7) / 8) < (1LL << 31);
}

// Non-flush rows on the split kernels (variant 4) from the read copy, flushing rows skipped.
int launchSplitPath(const DualPrecisionDecodeParams& p, cudaStream_t s) {
    Mamba2ReplayParams q = streamParams(p);
    q.variant = RSSM_MAMBA2_VARIANT_SPLIT;
    q.workspace = p.workspace;
    q.workspace_bytes = p.workspace_bytes;
    if (p.read_dtype == RSSM_DTYPE_FP8_E4M3 || p.read_dtype == RSSM_DTYPE_NVFP4) {
        return mamba2::replaySplitReadCopy(q, readCopyScales(p), s);
    }
    return rssm_mamba2_replay_launch(&q, s);
}
}  // namespace

int64_t mamba2DpSplitWorkspaceBytes(const DualPrecisionDecodeParams& p) {
    if (!splitSizesFit(p) || p.batch <= 0 || p.num_tokens <= 0) return 0;
    Mamba2ReplayParams q = streamParams(p);
    q.variant = RSSM_MAMBA2_VARIANT_SPLIT;
    return rssm_mamba2_replay_workspace_bytes(&q);
}

bool mamba2DpHaveWorkspace(const DualPrecisionDecodeParams& p, int64_t need) {
    return need > 0 && p.workspace && p.workspace_bytes >= need;
}

// The smallest batch x heads at which the automatic rule takes the split path, per read format and tokens per step
// (T = 1..8). Measured side by side on an H100 (fifty-third session, scripts/dp_path_timing.py --family mamba2 on the
// Nemotron-3 Super (128 x 64) and Nano (96 x 80) heads, B = 1-64, T = 1 / 2 / 4 / 8; docs/precision.md "Fifty-third
// session"): each entry lies between the largest measured B x H at which the split path was slower (by more than 2%)
// and the smallest from which it was faster on both shapes; T = 3 takes T = 4's entry and T = 5-7 T = 8's (not
// measured). The split path then also runs B = 1 standard steps (0.51-0.82x of the stream / tile kernel there).
//   16-bit read copies (against the stream kernel 3): always at T <= 2, 768 at T = 3-4, 1536 from T = 5;
//   FP8 (against the tile kernel): always at T = 1, 768 from T = 2, or 384 where the head dim is not a multiple of the
//     tile kernel's 64-row FP8 chunk (Nano's 80: its second chunk is a quarter full, and the split path wins from
//     B = 4: 0.65-0.67x, against 1.03-1.07x at B = 2; Super's 64 at B = 4 is 1.11-1.17x);
//   NVFP4 (against the tile kernel): always at T <= 4, 129 from T = 5 (T = 8: Super B = 1 1.07x, Nano B = 2 0.79x);
//   FP32 read copies: the replay rule (batch x heads > 128; not measured on this path).
int mamba2DpSplitMinBatchHeads(int readDtype, int numTokens, int headdim) {
    if (numTokens < 1 || numTokens > RSSM_DP_MAX_TOKENS) return 0;
    switch (readDtype) {
        case RSSM_DTYPE_FP16:
        case RSSM_DTYPE_BF16: return numTokens <= 2 ? 1 : numTokens <= 4 ? 768 : 1536;
        case RSSM_DTYPE_FP8_E4M3:
            return numTokens == 1 ? 1 : headdim % ReadFmt<RSSM_DTYPE_FP8_E4M3>::kRows ? 384 : 768;
        case RSSM_DTYPE_NVFP4: return numTokens <= 4 ? 1 : 129;
        default: return 129;
    }
}

DecodePath chooseMamba2DpPath(const DualPrecisionDecodeParams& p, bool haveWs) {
    const bool wide = p.read_dtype == RSSM_DTYPE_FP16 || p.read_dtype == RSSM_DTYPE_BF16;
    const int minBH = mamba2DpSplitMinBatchHeads(p.read_dtype, p.num_tokens, p.headdim);
    return pickPath(wide && replayHeaddim(p.headdim) ? DecodePath::kStream : DecodePath::kTile,
                    haveWs && minBH > 0 && (long long)p.batch * p.nheads >= minBH);
}

int launchMamba2DpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    const int64_t need = mamba2DpSplitWorkspaceBytes(p);
    const bool haveWs = mamba2DpHaveWorkspace(p, need);
    const DecodePath path = chooseMamba2DpPath(p, haveWs);
    if (path == DecodePath::kSplit && !haveWs)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "DualPrecisionDecode: RSSM_DP_DECODE_PATH=split needs a workspace of "
                        "%lld bytes (rssm_dual_precision_decode_workspace_bytes; 0 = these sizes cannot use it); got "
                        "ptr=%p bytes=%lld", (long long)need, p.workspace, (long long)p.workspace_bytes);
    int flushOnly = 0;
    if (path != DecodePath::kTile) {
        const int st = path == DecodePath::kSplit ? launchSplitPath(p, s) : [&] {
            const Mamba2ReplayParams q = streamParams(p);
            return rssm_mamba2_replay_launch(&q, s);
        }();
        if (st != RSSM_OK) return st;
        flushOnly = 1;
        // Deferred flushing rows: the flush-only kernel would have only the rows with invalid cursors left, whose
        // NaN outputs the replay kernels above already write (the same skip rules), so it is not launched.
        if (p.defer_flush_rows) return RSSM_OK;
    }
    launchDpDecodeRows<Mamba2DpKernels>(p, tileRows, s, flushOnly != 0);
    return RSSM_OK;
}
}  // namespace dp
}  // namespace rssm
