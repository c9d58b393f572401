// Host side: the A/B environment switches of the launchers (side-by-side timing, tests), read per launch.
#pragma once
#include <stdlib.h>
#include <string.h>

#include "common/rssm_common.h"

namespace rssm {

// true if `name` is set to "1", false if set to "0", otherwise `dflt` (unset or any other value).
inline bool envSwitch(const char* name, bool dflt) {
    const char* e = getenv(name);
    if (e && strcmp(e, "1") == 0) return true;
    if (e && strcmp(e, "0") == 0) return false;
    return dflt;
}

// The single digit 0..maxDigit that `name` is set to, otherwise `dflt` (unset, empty, longer or any other value).
inline int envDigit(const char* name, int maxDigit, int dflt) {
    const char* e = getenv(name);
    return (e && e[0] >= '0' && e[0] <= '0' + maxDigit && e[1] == 0) ? e[0] - '0' : dflt;
}

// A shared-memory carve-out request for rssm::applyCarveout: "min" kCarveoutMinimal, "driver" kCarveoutDriver, a
// number 0-100 that percentage (larger numbers: 100); unset or anything else: `dflt`.
inline int envCarveout(const char* name, int dflt) {
    const char* e = getenv(name);
    if (!e) return dflt;
    if (strcmp(e, "min") == 0) return kCarveoutMinimal;
    if (strcmp(e, "driver") == 0) return kCarveoutDriver;
    if (e[0] >= '0' && e[0] <= '9') return atoi(e) > 100 ? 100 : atoi(e);
    return dflt;
}

}  // namespace rssm
