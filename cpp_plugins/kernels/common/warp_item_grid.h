// Grid choice of a grid-strided warp-item kernel: persistent (every resident CTA, items walked grid-strided)
// or one item per warp (a full grid of short-lived CTAs). Measured on the H200 (docs/kernels-mamba2.md,
// seventh session): the Mamba-2 warp-item decode runs at 87.6% of copy bandwidth on a full grid and 79.7%
// persistent (B = 256); the split readouts of both families were slower on a full grid (they stay persistent).
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

}  // namespace rssm
