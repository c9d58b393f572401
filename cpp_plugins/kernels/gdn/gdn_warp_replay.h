// Host interface of the GDN warp-item ReplaySSM standard step (WIR, fiftieth session; gdn_warp_replay.cu): variant 5's
// standard step at small batches.
#pragma once
#include <cuda_runtime_api.h>

#include "gdn/gdn.h"

namespace rssm {
namespace gdn {
constexpr int kWarpReplayRows = 8;            // value rows per warp
constexpr int kWarpReplayWarps = 4;           // warps per CTA: 32 value rows of one (row b, value head)
constexpr int kWarpReplayMaxWindow = 16;      // h + 1 <= 16 records per step (4 records per warp for the dots)
constexpr int kWarpReplayMaxWindowLong = 32;  // second instance (sixty-eighth session): windows 17-32, 8 records a warp
// Whether variant 5 takes the second instance by default: yes since the sixty-ninth session. Its GPU tests passed on an
// H100 (sixty-eighth session), and side by side on an H100 (one process per setting) the B = 1, L = 32 standard step
// took 4.30 / 5.72 us against the stream kernel's 5.77 / 6.80 us (q35-4b / q35-122b: 0.98x / 0.93x of the
// conventional step instead of 0.76x / 0.81x). RSSM_GDN_WIR_LONG=0 (read per launch) keeps windows 17-32 on the
// stream kernel (A/B).
constexpr bool kWarpReplayLongByDefault = true;
constexpr int kWarpReplayMaxCapacity = 32;    // ring positions: one lane each (gates), one shared-memory row each (keys)
// Default route up to batch x num_v_heads of 128: Qwen3.5-4B (32 value heads) B <= 4, Qwen3.5-122B (64) B <= 2. Side by
// side (fifty-first session, the fiftieth session's form) it took 7-8% less time than the better stream kernel (variant
// 4 or 5) at B x HV = 128 on an H200 and 8-15% less than variant 4 at 32-64 on an H100; at 256 variant 4 was up to 7%
// faster (H200: q35-4b B = 8 in phase, q35-122b B = 4), at B = 16 / 64 WIR 0.5-9% slower (fiftieth session, H100).
constexpr long long kWarpReplayMaxBatchHeads = 128;
// True when the warp-item kernel can run `p`: standard mode (T = 1), head_k 128, head_v % 8 == 0, window <= 32 (two
// instances: <= 16 and 17-32),
// ring_capacity <= 32, no dual-precision fields (skip_flush_rows, ring_beta, ring_v), 16-byte aligned ring_k and
// ring_u rows (base and strides).
bool warpReplayRuns(const GdnReplayParams& p);
// Whether variant 5 runs it for `p`: warpReplayRuns(p) and batch x num_v_heads <= kWarpReplayMaxBatchHeads (windows
// 17-32 unless RSSM_GDN_WIR_LONG=0; kWarpReplayLongByDefault).
// RSSM_GDN_WIR (read per launch, A/B): "1" wherever it can run (any batch), "0" never (the stream kernel).
bool warpReplayWanted(const GdnReplayParams& p);
// Launches it (p.scale already resolved); the caller validated the inputs.
cudaError_t launchReplayWarpItems(const GdnReplayParams& p, cudaStream_t s);
}  // namespace gdn
}  // namespace rssm
