// ReplayCommit: advance the per-slot cursors on the device (design.md sections 3.2 and 6).
#include "ReplayCommitPlugin.h"

#include "rssm_kernel_params.h"

namespace rssm {
namespace plugin {

int32_t ReplayCommitPlugin::launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out,
                                   int32_t nbOutputs, void*, cudaStream_t stream) {
    ReplayCommitParams const p = core::toReplayCommitParams(config(), in, nbInputs, out, nbOutputs);
    // Output 'error_slot' is TensorRT-owned and uninitialised: -1 (all bits set) = no violation yet.
    if (cudaMemsetAsync(p.error_slot, 0xFF, sizeof(int32_t), stream) != cudaSuccess)
        return rssm::setError(RSSM_ERR_CUDA, "ReplayCommit: cudaMemsetAsync of output 'error_slot' failed");
    return rssm_replay_commit_launch(&p, stream);
}

}  // namespace plugin
}  // namespace rssm
