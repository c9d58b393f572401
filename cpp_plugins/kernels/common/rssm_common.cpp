#include "rssm_common.h"

#include <cstdio>

#ifndef RSSM_BUILD_ARCHS
#define RSSM_BUILD_ARCHS "unknown"
#endif

namespace {
thread_local char gLastError[1024] = {0};
}

extern "C" int rssm_kernel_abi_version(void) { return RSSM_KERNEL_ABI_VERSION; }
extern "C" const char* rssm_build_archs(void) { return RSSM_BUILD_ARCHS; }
extern "C" const char* rssm_last_error(void) { return gLastError; }

namespace rssm {
int setError(int status, const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(gLastError, sizeof(gLastError), fmt, args);
    va_end(args);
    return status;
}
void clearError() { gLastError[0] = 0; }
}  // namespace rssm
