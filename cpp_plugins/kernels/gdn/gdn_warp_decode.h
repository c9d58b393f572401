// Host interface of the GDN warp-item conventional decode (variant 6 of GdnDecode, gdn_warp_decode.cu).
#pragma once
#include <cuda_runtime_api.h>

#include "gdn/gdn.h"

namespace rssm {
namespace gdn {
constexpr int kWarpDecodeRowsGdn = 8;  // value rows per warp item
// True when the warp-item kernel runs `p` (one token in place, head_k 128 / 256, head_v % 8 == 0,
// rows_per_cta 0, B x HV x head_v / 8 < 2^31); the launcher runs variant 5 otherwise.
bool warpDecodeRuns(const GdnDecodeParams& p);
// Launches it (p.scale already resolved); the caller validated the inputs.
cudaError_t launchDecodeWarpItems(const GdnDecodeParams& p, cudaStream_t s);
}  // namespace gdn
}  // namespace rssm
