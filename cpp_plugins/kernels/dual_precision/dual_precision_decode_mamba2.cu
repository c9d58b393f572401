// Instantiations of the mamba2 dual-precision decode kernel over the read format, and the stream path:
// with a 16-bit read copy the persistent Mamba-2 replay kernel (variant 2) decodes the non-flush rows
// straight from the read copy (skip_flush_rows), and this kernel decodes only the flushing rows from the
// recurrence copy (docs/precision.md).
#include <stdlib.h>
#include <string.h>

#include "dual_precision/dp_decode_dispatch.h"
#include "dual_precision/dp_decode_kernels.cuh"
#include "mamba2/mamba2.h"

namespace rssm {
namespace dp {
namespace {
template <bool ONE>
void launchRead(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s, int flushOnly) {
    const dim3 grid((p.headdim + tileRows - 1) / tileRows, p.nheads, p.batch);
    const int smem = dpRingSmemBytes(p.window, tileRows);  // <= 64 * 256 * 2 = 32 KB
    switch (p.ckpt_lp ? p.read_dtype : RSSM_DTYPE_FP32) {
        case RSSM_DTYPE_FP32: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_FP32, ONE>, grid, smem, s, p, tileRows, flushOnly); break;
        case RSSM_DTYPE_FP16: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_FP16, ONE>, grid, smem, s, p, tileRows, flushOnly); break;
        case RSSM_DTYPE_BF16: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_BF16, ONE>, grid, smem, s, p, tileRows, flushOnly); break;
        case RSSM_DTYPE_FP8_E4M3: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_FP8_E4M3, ONE>, grid, smem, s, p, tileRows, flushOnly); break;
        default: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_NVFP4, ONE>, grid, smem, s, p, tileRows, flushOnly); break;
    }
}

// RSSM_DP_DECODE_PATH=tile forces the single-kernel path (for A/B timing).
bool useStreamPath(const DualPrecisionDecodeParams& p) {
    const char* env = getenv("RSSM_DP_DECODE_PATH");
    if (env && strcmp(env, "tile") == 0) return false;
    return p.read_dtype == RSSM_DTYPE_FP16 || p.read_dtype == RSSM_DTYPE_BF16;
}

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
}  // namespace

int launchMamba2DpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    int flushOnly = 0;
    if (useStreamPath(p)) {
        const Mamba2ReplayParams q = streamParams(p);
        const int st = rssm_mamba2_replay_launch(&q, s);
        if (st != RSSM_OK) return st;
        flushOnly = 1;
    }
    if (p.num_tokens == 1) launchRead<true>(p, tileRows, s, flushOnly);
    else launchRead<false>(p, tileRows, s, flushOnly);
    return RSSM_OK;
}
}  // namespace dp
}  // namespace rssm
