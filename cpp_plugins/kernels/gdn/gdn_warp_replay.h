// Host interface of the GDN warp-item ReplaySSM standard step (WIR, fiftieth session; gdn_warp_replay.cu): the
// small-batch standard step of variant 5 when RSSM_GDN_WIR=1 (an A/B switch, off by default until measured).
#pragma once
#include <cuda_runtime_api.h>

#include "gdn/gdn.h"

namespace rssm {
namespace gdn {
constexpr int kWarpReplayRows = 8;        // value rows per warp
constexpr int kWarpReplayWarps = 4;       // warps per CTA: 32 value rows of one (row b, value head)
constexpr int kWarpReplayMaxWindow = 16;  // h + 1 <= 16 records per step: two lanes per record
constexpr int kWarpReplayMaxCapacity = 32;  // ring positions: one lane each (gates), one shared-memory row each (keys)
// True when the warp-item kernel can run `p`: standard mode (T = 1), head_k 128, head_v % 8 == 0, window <= 16,
// ring_capacity <= 32, no dual-precision fields (skip_flush_rows, ring_beta, ring_v), 16-byte aligned ring_k and
// ring_u rows (base and strides).
bool warpReplayRuns(const GdnReplayParams& p);
// RSSM_GDN_WIR ("1" on, "0" off; read per launch; default off) and warpReplayRuns(p): variant 5 then runs it.
bool warpReplayWanted(const GdnReplayParams& p);
// Launches it (p.scale already resolved); the caller validated the inputs.
cudaError_t launchReplayWarpItems(const GdnReplayParams& p, cudaStream_t s);
}  // namespace gdn
}  // namespace rssm
