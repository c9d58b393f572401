// Instantiations of the Mamba-2 replay kernel for a bf16 state (N = 64, 128, 256).
// One state dtype per file so the library builds in parallel.
#include "mamba2/mamba2_replay_kernel.cuh"
#include "mamba2/mamba2_dispatch.h"

namespace rssm {
namespace mamba2 {

const void* replayKernel_bf16(int dstate) {
    switch (dstate) {
        case 64: return reinterpret_cast<const void*>(&mamba2ReplayKernel<__nv_bfloat16, 64>);
        case 128: return reinterpret_cast<const void*>(&mamba2ReplayKernel<__nv_bfloat16, 128>);
        case 256: return reinterpret_cast<const void*>(&mamba2ReplayKernel<__nv_bfloat16, 256>);
        default: return nullptr;
    }
}

}  // namespace mamba2
}  // namespace rssm
