// GdnVerify: GDN speculative verification (Algorithm 5, T x T triangular solve in the kernel).
#include "GdnVerifyPlugin.h"

#include "rssm_kernel_params.h"

namespace rssm {
namespace plugin {

int32_t GdnVerifyPlugin::launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out,
                                int32_t nbOutputs, void* workspace, cudaStream_t stream) {
    GdnReplayParams p = core::toGdnReplayParams(config(), in, nbInputs, out, nbOutputs);
    if (workspace) {  // at least kernelWorkspaceSize() at the maximum shapes, which bounds the need here
        p.workspace = workspace;
        p.workspace_bytes = rssm_gdn_replay_workspace_bytes(&p);
    }
    return rssm_gdn_replay_launch(&p, stream);
}

size_t GdnVerifyPlugin::kernelWorkspaceSize(core::TensorDesc const* in, int32_t nbInputs) const {
    GdnReplayParams const p = core::gdnReplaySizes(config(), in, nbInputs);
    return static_cast<size_t>(rssm_gdn_replay_workspace_bound(&p));
}

}  // namespace plugin
}  // namespace rssm
