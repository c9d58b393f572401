// Instantiations of the gdn dual-precision decode kernel over the read format, and the paths that decode
// the non-flush rows straight from the read copy with a replay kernel (skip_flush_rows, appending beta and
// raw v for the flush) while this kernel decodes only the flushing rows from the recurrence copy
// (docs/precision.md):
//   split: the GDN split kernels (variant 6), any read format (fp8 / nvfp4 through their scaled row loads),
//          with slot indices and a workspace, at B x HV >= gdnDpSplitMinBatchHeads(read format, T) (fifty-third
//          session: measured per read format and tokens per step against the stream / tile path, docs/precision.md);
//   stream: the replay stream kernel (variant 4), 16-bit read copies with slot indices.
#include <stdlib.h>
#include <string.h>

#include "dual_precision/dp_decode_dispatch.h"
#include "dual_precision/dp_decode_kernels.cuh"
#include "common/read_rows.cuh"
#include "gdn/gdn.h"
#include "gdn/gdn_split.h"

namespace rssm {
namespace dp {
namespace {

// GdnReplayParams over the dual-precision decode's tensors (contiguous inputs and rings, the read
// copy as the checkpoint), skipping flushing rows and appending the two-precision records.
GdnReplayParams streamParams(const DualPrecisionDecodeParams& p) {
    GdnReplayParams q;
    memset(&q, 0, sizeof(q));
    const int B = p.batch, T = p.num_tokens, HK = p.ngroups, HV = p.nheads, K = p.dstate, V = p.headdim;
    const int C = p.ring_capacity;
    q.batch = B;
    q.num_tokens = T;
    q.num_heads = HK;
    q.num_v_heads = HV;
    q.head_k = K;
    q.head_v = V;
    q.num_slots = p.num_slots;
    q.window = p.window;
    q.ring_capacity = C;
    q.mode = p.mode == 0 ? GDN_REPLAY_STANDARD : GDN_REPLAY_SPECULATIVE;
    q.state_dtype = p.read_dtype;
    q.act_dtype = p.act_dtype;
    q.u_dtype = RSSM_DTYPE_FP16;
    q.rows_per_cta = 0;
    q.scale = p.scale;
    q.variant = 4;
    q.state_stride_slot = p.stride_lp_slot;
    q.state_stride_head = p.stride_lp_head;
    q.state_stride_v = p.stride_lp_row;
    q.q_stride_b = q.k_stride_b = (int64_t)T * HK * K;
    q.q_stride_t = q.k_stride_t = (int64_t)HK * K;
    q.q_stride_h = q.k_stride_h = K;
    q.v_stride_b = q.o_stride_b = (int64_t)T * HV * V;
    q.v_stride_t = q.o_stride_t = (int64_t)HV * V;
    q.v_stride_h = q.o_stride_h = V;
    q.a_stride_b = q.b_stride_b = (int64_t)T * HV;
    q.a_stride_t = q.b_stride_t = HV;
    q.ring_g_stride_slot = (int64_t)C * HV;
    q.ring_g_stride_rec = HV;
    q.ring_u_stride_slot = (int64_t)C * HV * V;
    q.ring_u_stride_rec = (int64_t)HV * V;
    q.ring_u_stride_head = V;
    q.ring_k_stride_slot = (int64_t)C * HK * K;
    q.ring_k_stride_rec = (int64_t)HK * K;
    q.ring_k_stride_head = K;
    q.state = const_cast<void*>(p.ckpt_lp);
    q.state_batch_indices = p.state_batch_indices;
    q.ring_origin = p.ring_origin;
    q.ring_len = p.ring_len;
    q.ring_g = p.ring_g;
    q.ring_u = p.ring_u;
    q.ring_k = p.ring_k;
    q.q = p.q;
    q.k = p.k;
    q.v = p.v;
    q.a = p.a;
    q.b = p.b;
    q.A_log = p.A_log;
    q.dt_bias = p.gdn_dt_bias;
    q.o = p.o;
    q.skip_flush_rows = 1;
    q.ring_beta = p.ring_beta;
    q.ring_v = p.ring_v;
    return q;
}
}  // namespace

int64_t gdnDpSplitWorkspaceBytes(const DualPrecisionDecodeParams& p) {
    const int records = p.mode == 0 ? p.window : p.window + p.num_tokens;
    if (p.batch <= 0 || p.num_tokens <= 0 || p.dstate != 128 || p.headdim % 8 || records > 32 ||
        (long long)p.batch * p.nheads * (p.headdim / 8) >= (1LL << 31))
        return 0;
    GdnReplayParams q = streamParams(p);
    q.variant = GDN_VARIANT_SPLIT;
    return rssm_gdn_replay_workspace_bytes(&q);
}

// The smallest batch x value heads at which the automatic rule takes the split path, per read format and tokens per
// step (T = 1..8). Measured side by side on an H100 (fifty-third session, scripts/dp_path_timing.py at HV = 32 and 64,
// B = 1-64, T = 1 / 2 / 4 / 8; docs/precision.md "Fifty-third session"): each entry is the smallest measured B x HV at
// which the split path was not slower on either head count; T = 3 takes T = 2's entry, T = 5-7 T = 4's (not measured).
//   16-bit read copies (against the stream kernel 4): 1024 at T <= 3, 512 from T = 4 (the replay rule's T = 2 entry,
//     8192 for fp32 checkpoints, does not hold here: with 16-bit rows the split kernels win from 1024);
//   FP8 (against the tile kernel): 512 at T = 1, 1024 from T = 2;
//   NVFP4 (against the tile kernel): always at T = 1 (from B x HV = 64: 0.73-0.83x), 256 from T = 2;
//   FP32 read copies: 8192 (the replay kernels' old rule; not measured on this path).
int gdnDpSplitMinBatchHeads(int readDtype, int numTokens) {
    if (numTokens < 1 || numTokens > GDN_MAX_TOKENS) return 0;
    switch (readDtype) {
        case RSSM_DTYPE_FP16:
        case RSSM_DTYPE_BF16: return numTokens <= 3 ? 1024 : 512;
        case RSSM_DTYPE_FP8_E4M3: return numTokens == 1 ? 512 : 1024;
        case RSSM_DTYPE_NVFP4: return numTokens == 1 ? 1 : 256;
        default: return 8192;
    }
}

DecodePath chooseGdnDpPath(const DualPrecisionDecodeParams& p, bool haveWs) {
    const bool wide = p.read_dtype == RSSM_DTYPE_FP16 || p.read_dtype == RSSM_DTYPE_BF16;
    return pickPath(wide && p.state_batch_indices ? DecodePath::kStream : DecodePath::kTile,
                    haveWs && (long long)p.batch * p.nheads >= gdnDpSplitMinBatchHeads(p.read_dtype, p.num_tokens));
}

bool gdnDpHaveWorkspace(const DualPrecisionDecodeParams& p, int64_t need) {
    return need > 0 && p.workspace && p.workspace_bytes >= need && p.state_batch_indices != nullptr;
}

int launchGdnDpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    const int64_t need = gdnDpSplitWorkspaceBytes(p);
    const bool haveWs = gdnDpHaveWorkspace(p, need);
    const DecodePath path = chooseGdnDpPath(p, haveWs);
    if (path == DecodePath::kSplit && !haveWs)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "DualPrecisionDecode: RSSM_DP_DECODE_PATH=split needs slot indices and "
                        "a workspace of %lld bytes (rssm_dual_precision_decode_workspace_bytes; 0 = these sizes cannot "
                        "use it); got state_batch_indices=%p workspace=%p bytes=%lld", (long long)need,
                        (const void*)p.state_batch_indices, p.workspace, (long long)p.workspace_bytes);
    int flushOnly = 0;
    if (path != DecodePath::kTile) {
        GdnReplayParams q = streamParams(p);
        int st;
        if (path == DecodePath::kSplit) {
            q.variant = GDN_VARIANT_SPLIT;
            q.workspace = p.workspace;
            q.workspace_bytes = p.workspace_bytes;
            if (p.read_dtype == RSSM_DTYPE_FP8_E4M3 || p.read_dtype == RSSM_DTYPE_NVFP4) {
                st = gdn::replaySplitReadCopy(q, readCopyScales(p), s);
            } else {
                st = rssm_gdn_replay_launch(&q, s);
            }
        } else {
            st = rssm_gdn_replay_launch(&q, s);
        }
        if (st != RSSM_OK) return st;
        flushOnly = 1;
    }
    launchDpDecodeRows<GdnDpKernels>(p, tileRows, s, flushOnly != 0);
    return RSSM_OK;
}
}  // namespace dp
}  // namespace rssm
