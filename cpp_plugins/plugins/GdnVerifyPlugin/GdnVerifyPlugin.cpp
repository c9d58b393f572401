// GdnVerify: GDN speculative verification (Algorithm 5, T x T triangular solve in the kernel).
#include "GdnVerifyPlugin.h"

#include "rssm_kernel_params.h"

namespace rssm {
namespace plugin {

int32_t GdnVerifyPlugin::launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out,
                                int32_t nbOutputs, void*, cudaStream_t stream) {
    GdnReplayParams const p = core::toGdnReplayParams(config(), in, nbInputs, out, nbOutputs);
    return rssm_gdn_replay_launch(&p, stream);
}

}  // namespace plugin
}  // namespace rssm
