// rssm_dual_precision_decode_launch: host validation and dispatch (dual_precision.h).
#include <stdlib.h>
#include <string.h>

#include "dual_precision/dp_decode_dispatch.h"
#include "dual_precision/dp_read_chunk.cuh"
#include "dual_precision/dual_precision_flush.h"

namespace rssm {
namespace dp {
int decodeTileRows(int readDtype, int headdim) {
    int rows = 32;
    switch (readDtype) {
        case RSSM_DTYPE_FP32: rows = ReadFmt<RSSM_DTYPE_FP32>::kRows; break;
        case RSSM_DTYPE_FP16: rows = ReadFmt<RSSM_DTYPE_FP16>::kRows; break;
        case RSSM_DTYPE_BF16: rows = ReadFmt<RSSM_DTYPE_BF16>::kRows; break;
        case RSSM_DTYPE_FP8_E4M3: rows = ReadFmt<RSSM_DTYPE_FP8_E4M3>::kRows; break;
        default: rows = ReadFmt<RSSM_DTYPE_NVFP4>::kRows; break;
    }
    return rows < headdim ? rows : headdim;
}
const char* forcedPathName() {
    const char* env = getenv("RSSM_DP_DECODE_PATH");
    return env && env[0] ? env : nullptr;
}
bool forcedPathKnown(const char* forced) {
    return strcmp(forced, "tile") == 0 || strcmp(forced, "stream") == 0 || strcmp(forced, "split") == 0;
}
DecodePath pickPath(DecodePath base, bool ruleSplit) {
    if (const char* forced = forcedPathName()) {
        if (strcmp(forced, "tile") == 0) return DecodePath::kTile;
        if (strcmp(forced, "split") == 0) return DecodePath::kSplit;
        return base;  // "stream": the family's path without the split rule
    }
    return ruleSplit ? DecodePath::kSplit : base;
}
}  // namespace dp
}  // namespace rssm

using namespace rssm;

extern "C" int64_t rssm_dual_precision_decode_workspace_bytes(const DualPrecisionDecodeParams* p) {
    if (!p || p->dstate != dp::kRowN || p->headdim < 8 || p->headdim > 128 || p->headdim % 8 || p->nheads < 1 ||
        p->ngroups < 1 || p->nheads % p->ngroups || p->window < 1 || p->window > RSSM_DP_MAX_WINDOW ||
        (p->mode != 0 && p->mode != 1))
        return 0;
    if (p->family == RSSM_FAMILY_MAMBA2) return dp::mamba2DpSplitWorkspaceBytes(*p);
    if (p->family == RSSM_FAMILY_GDN) return dp::gdnDpSplitWorkspaceBytes(*p);
    return 0;
}

extern "C" int rssm_dual_precision_decode_path(const DualPrecisionDecodeParams* p) {
    if (!p || (p->family != RSSM_FAMILY_MAMBA2 && p->family != RSSM_FAMILY_GDN)) return -1;
    if (const char* forced = dp::forcedPathName())
        if (!dp::forcedPathKnown(forced)) return -1;
    const bool mamba = p->family == RSSM_FAMILY_MAMBA2;
    const bool haveWs = mamba ? dp::mamba2DpHaveWorkspace(*p, dp::mamba2DpSplitWorkspaceBytes(*p))
                              : dp::gdnDpHaveWorkspace(*p, dp::gdnDpSplitWorkspaceBytes(*p));
    const dp::DecodePath path = mamba ? dp::chooseMamba2DpPath(*p, haveWs) : dp::chooseGdnDpPath(*p, haveWs);
    if (path == dp::DecodePath::kSplit && !haveWs) return -1;
    return static_cast<int>(path);
}

extern "C" int rssm_dual_precision_split_min_batch_heads(int family, int read_dtype, int num_tokens, int headdim) {
    if (family == RSSM_FAMILY_MAMBA2) return dp::mamba2DpSplitMinBatchHeads(read_dtype, num_tokens, headdim);
    if (family == RSSM_FAMILY_GDN) return dp::gdnDpSplitMinBatchHeads(read_dtype, num_tokens);
    return 0;
}

extern "C" int rssm_dual_precision_decode_launch(const DualPrecisionDecodeParams* p, cudaStream_t stream) {
    const char* op = "DualPrecisionDecode";
    if (!p) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params is NULL", op);
    const bool mamba = p->family == RSSM_FAMILY_MAMBA2;
    if (!mamba && p->family != RSSM_FAMILY_GDN)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: family must be 0 (mamba2) or 1 (gdn); got %d", op, p->family);
    if (p->batch < 0 || p->num_slots < 1 || p->nheads < 1 || p->ngroups < 1 || p->nheads % p->ngroups)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: need batch >= 0, num_slots >= 1, nheads a positive multiple "
                        "of ngroups; got batch=%d num_slots=%d nheads=%d ngroups=%d", op, p->batch, p->num_slots,
                        p->nheads, p->ngroups);
    if (p->dstate != dp::kRowN)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: dstate (N / K) must be %d; got %d", op, dp::kRowN, p->dstate);
    if (p->headdim < 8 || p->headdim > 128 || p->headdim % 8)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: headdim (P / V) must be a multiple of 8 in [8, 128]; got %d", op,
                        p->headdim);
    if (p->window < 1 || p->window > RSSM_DP_MAX_WINDOW)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: window must be in [1, %d]; got %d", op, RSSM_DP_MAX_WINDOW,
                        p->window);
    if (p->mode != 0 && p->mode != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mode must be 0 or 1; got %d", op, p->mode);
    if (p->num_tokens < 1 || p->num_tokens > RSSM_DP_MAX_TOKENS || (p->mode == 0 && p->num_tokens != 1))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_tokens must be 1 (standard) or in [1, %d] (speculative); "
                        "got %d in mode %d", op, RSSM_DP_MAX_TOKENS, p->num_tokens, p->mode);
    const int need = p->mode == 0 ? p->window : p->window + p->num_tokens;
    if (p->ring_capacity < need)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_capacity must be >= %d; got %d", op, need, p->ring_capacity);
    if (p->act_dtype != RSSM_DTYPE_FP16 && p->act_dtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: act_dtype must be FP16 (1) or BF16 (2); got %d", op, p->act_dtype);
    if (p->read_dtype < RSSM_DTYPE_FP32 || p->read_dtype > RSSM_DTYPE_NVFP4)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: read_dtype must be FP32/FP16/BF16/FP8_E4M3/NVFP4; got %d", op,
                        p->read_dtype);
    if (p->ckpt_hp && (p->recurrence_dtype < RSSM_DTYPE_FP32 || p->recurrence_dtype > RSSM_DTYPE_FP8_E4M3))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: recurrence_dtype must be FP32/FP16/BF16/FP8_E4M3; got %d", op,
                        p->recurrence_dtype);
    if (!p->ckpt_lp || !p->ring_origin || !p->ring_len)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_lp, ring_origin and ring_len are required", op);
    if ((p->read_dtype == RSSM_DTYPE_FP8_E4M3 || p->read_dtype == RSSM_DTYPE_NVFP4) && !p->ckpt_lp_scale)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_lp_scale is required for read_dtype %d", op, p->read_dtype);
    if (p->read_dtype == RSSM_DTYPE_NVFP4 && !p->ckpt_lp_gscale)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_lp_gscale is required for an nvfp4 read copy", op);
    if (p->ckpt_hp && p->recurrence_dtype == RSSM_DTYPE_FP8_E4M3 && !p->ckpt_hp_scale)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ckpt_hp_scale is required for an fp8_e4m3 recurrence copy", op);
    if (reinterpret_cast<uintptr_t>(p->ckpt_lp) % 16 || (p->ckpt_hp && reinterpret_cast<uintptr_t>(p->ckpt_hp) % 16))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: checkpoint copies must be 16-byte aligned", op);
    const int eltBytes = p->read_dtype == RSSM_DTYPE_FP32 ? 4 : p->read_dtype <= RSSM_DTYPE_BF16 ? 2 : 1;
    if ((p->stride_lp_row * eltBytes) % 16 || (p->stride_lp_head * eltBytes) % 16 || (p->stride_lp_slot * eltBytes) % 16)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: read-copy strides must be multiples of 16 bytes; got slot=%lld "
                        "head=%lld row=%lld elements", op, (long long)p->stride_lp_slot, (long long)p->stride_lp_head,
                        (long long)p->stride_lp_row);
    if (mamba) {
        if (!p->x || !p->dt_raw || !p->Bm || !p->Cm || !p->A || !p->ring_dt || !p->ring_x || !p->ring_B || !p->y)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mamba2 needs x, dt_raw, Bm, Cm, A, ring_dt, ring_x, ring_B "
                            "and y", op);
        if (p->dt_dtype != RSSM_DTYPE_FP32 && p->dt_dtype != p->act_dtype)
            return setError(RSSM_ERR_UNSUPPORTED, "%s: dt_dtype must be FP32 or act_dtype; got %d", op, p->dt_dtype);
    } else {
        if (!p->q || !p->k || !p->v || !p->a || !p->b || !p->A_log || !p->gdn_dt_bias || !p->ring_g || !p->ring_u ||
            !p->ring_k || !p->o)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: gdn needs q, k, v, a, b, A_log, gdn_dt_bias, ring_g, ring_u, "
                            "ring_k and o", op);
    }
    const auto misaligned = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) % 16) != 0; };
    if (mamba ? misaligned(p->ring_x) || misaligned(p->ring_B) : misaligned(p->ring_u) || misaligned(p->ring_k))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring records (%s) must be 16-byte aligned", op,
                        mamba ? "ring_x, ring_B" : "ring_u, ring_k");
    if (p->workspace_bytes < 0 || (p->workspace && misaligned(p->workspace)))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: workspace must be 16-byte aligned with workspace_bytes >= 0; "
                        "got ptr=%p bytes=%lld", op, p->workspace, (long long)p->workspace_bytes);
    if (p->defer_flush_rows != 0 && p->defer_flush_rows != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: defer_flush_rows must be 0 or 1; got %d", op, p->defer_flush_rows);
    if (p->defer_flush_rows && p->mode != 0)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: defer_flush_rows (the flush writes the flushing rows' outputs) is a "
                        "standard-mode path; got mode %d", op, p->mode);
    if (const char* forced = dp::forcedPathName())
        if (!dp::forcedPathKnown(forced))
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: RSSM_DP_DECODE_PATH must be tile, stream or split; got '%s'",
                            op, forced);
    if (p->batch == 0) return RSSM_OK;
    const int tileRows = dp::decodeTileRows(p->read_dtype, p->headdim);
    const int st = mamba ? dp::launchMamba2DpDecode(*p, tileRows, stream) : dp::launchGdnDpDecode(*p, tileRows, stream);
    if (st != RSSM_OK) return st;  // the replay launcher's message (stream path) stands
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return setError(RSSM_ERR_CUDA, "%s: launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}
