// Host side: a shared-memory carve-out request (rssm::applyCarveout) from an environment switch, read per launch.
#pragma once
#include <stdlib.h>
#include <string.h>

#include "common/rssm_common.h"

namespace rssm {

// "min": kCarveoutMinimal; "driver": kCarveoutDriver; a number 0-100: that percentage (larger numbers: 100);
// unset or anything else: `dflt`.
inline int envCarveout(const char* name, int dflt) {
    const char* e = getenv(name);
    if (!e) return dflt;
    if (strcmp(e, "min") == 0) return kCarveoutMinimal;
    if (strcmp(e, "driver") == 0) return kCarveoutDriver;
    if (e[0] >= '0' && e[0] <= '9') return atoi(e) > 100 ? 100 : atoi(e);
    return dflt;
}

}  // namespace rssm
