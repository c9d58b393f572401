// Host side: the A/B environment switches of the launchers (side-by-side timing, tests), read per launch.
#pragma once
#include <stdlib.h>
#include <string.h>

namespace rssm {

// true if `name` is set to "1", false if set to "0", otherwise `dflt` (unset or any other value).
inline bool envSwitch(const char* name, bool dflt) {
    const char* e = getenv(name);
    if (e && strcmp(e, "1") == 0) return true;
    if (e && strcmp(e, "0") == 0) return false;
    return dflt;
}

}  // namespace rssm
