// Grid size of a grid-strided warp-item kernel (the split readouts, the warp-item conventional decode):
// either persistent (every resident CTA, items walked grid-strided) or one item per warp (a full grid of
// short-lived CTAs). Measured on the H200 (docs/kernels-mamba2.md, seventh session): the Mamba-2 warp-item
// decode runs at 87.6% of copy bandwidth on a full grid and 79.7% persistent (B = 256).
#pragma once
#include <stdlib.h>
#include <string.h>

namespace rssm {

enum class WarpItemGrid { kPersistent, kFull };

// `envVar` (read per launch, for side-by-side timing) = "full" or "persistent" overrides `dflt`.
inline WarpItemGrid warpItemGridChoice(const char* envVar, WarpItemGrid dflt) {
    const char* e = getenv(envVar);
    if (e && strcmp(e, "full") == 0) return WarpItemGrid::kFull;
    if (e && strcmp(e, "persistent") == 0) return WarpItemGrid::kPersistent;
    return dflt;
}

// CTAs to launch: `ctasNeeded` (one item per warp) on a full grid, else at most `resident`.
inline int warpItemGridSize(WarpItemGrid g, long long ctasNeeded, long long resident) {
    if (g == WarpItemGrid::kFull || ctasNeeded < resident) return (int)ctasNeeded;
    return (int)resident;
}

}  // namespace rssm
