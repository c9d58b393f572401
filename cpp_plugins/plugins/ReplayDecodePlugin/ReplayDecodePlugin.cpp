// ReplayDecode: ReplaySSM decode (Mamba-2 standard / speculative; GDN standard). Translate, launch.
#include "ReplayDecodePlugin.h"

#include "rssm_kernel_params.h"

namespace rssm {
namespace plugin {

int32_t ReplayDecodePlugin::launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out,
                                   int32_t nbOutputs, void*, cudaStream_t stream) {
    if (config().e("family") == "mamba2") {
        Mamba2ReplayParams const p = core::toMamba2ReplayParams(config(), in, nbInputs, out, nbOutputs);
        return rssm_mamba2_replay_launch(&p, stream);
    }
    GdnReplayParams const p = core::toGdnReplayParams(config(), in, nbInputs, out, nbOutputs);
    return rssm_gdn_replay_launch(&p, stream);
}

}  // namespace plugin
}  // namespace rssm
