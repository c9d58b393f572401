// Instantiations of the Mamba-2 replay kernel for a fp16 state (N = 64, 128, 256).
// One state dtype per file so the library builds in parallel.
#include "mamba2/mamba2_replay_kernel.cuh"
#include "mamba2/mamba2_persistent.cuh"
#include "mamba2/mamba2_dispatch.h"

namespace rssm {
namespace mamba2 {

const void* replayKernel_fp16(int dstate) {
    switch (dstate) {
        case 64: return reinterpret_cast<const void*>(&mamba2ReplayKernel<__half, 64>);
        case 128: return reinterpret_cast<const void*>(&mamba2ReplayKernel<__half, 128>);
        case 256: return reinterpret_cast<const void*>(&mamba2ReplayKernel<__half, 256>);
        default: return nullptr;
    }
}

// Variants 1 (8 consumer warps) and 2 (4 consumer warps): mamba2_persistent.cuh.
const void* replayPersistentKernel_fp16(int dstate, int consumerWarps) {
    if (consumerWarps == 8) {
        switch (dstate) {
            case 64: return reinterpret_cast<const void*>(&mamba2ReplayPersistentKernel<__half, 64, 8>);
            case 128: return reinterpret_cast<const void*>(&mamba2ReplayPersistentKernel<__half, 128, 8>);
            case 256: return reinterpret_cast<const void*>(&mamba2ReplayPersistentKernel<__half, 256, 8>);
            default: return nullptr;
        }
    }
    if (consumerWarps == 4) {
        switch (dstate) {
            case 64: return reinterpret_cast<const void*>(&mamba2ReplayPersistentKernel<__half, 64, 4>);
            case 128: return reinterpret_cast<const void*>(&mamba2ReplayPersistentKernel<__half, 128, 4>);
            case 256: return reinterpret_cast<const void*>(&mamba2ReplayPersistentKernel<__half, 256, 4>);
            default: return nullptr;
        }
    }
    return nullptr;
}

}  // namespace mamba2
}  // namespace rssm
