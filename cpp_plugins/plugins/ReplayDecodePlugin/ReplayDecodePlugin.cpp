// ReplayDecode: ReplaySSM decode (Mamba-2 standard / speculative; GDN standard). Translate, launch.
//
// read_dtype 'none': one checkpoint, flushed in place by this layer (rssm_mamba2_replay_launch /
// rssm_gdn_replay_launch). read_dtype fp16 / fp8_e4m3 / nvfp4: the dual-precision decode
// (rssm_dual_precision_decode_launch) reads the read copy on non-flush rows and the recurrence
// checkpoint on flush rows, appends the records and writes no checkpoint; the flush itself is the
// DualPrecisionFlush layer that follows. CMake defines RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL when the
// dual-precision kernel sources (decode and flush, cpp_plugins/kernels/dual_precision/) are present;
// without them a read-copy configuration fails at enqueue with RSSM_ERR_UNSUPPORTED, never silently.
#include "ReplayDecodePlugin.h"

#include "rssm_kernel_params.h"

namespace rssm {
namespace plugin {

int32_t ReplayDecodePlugin::launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out,
                                   int32_t nbOutputs, void* workspace, cudaStream_t stream) {
    if (config().e("read_dtype") != "none") {
        DualPrecisionDecodeParams p = core::toDualPrecisionDecodeParams(config(), in, nbInputs, out, nbOutputs);
#ifdef RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL
        if (workspace) {  // the split path's head records (bounded by kernelWorkspaceSize at the maximum shapes)
            p.workspace = workspace;
            p.workspace_bytes = rssm_dual_precision_decode_workspace_bytes(&p);
        }
        return rssm_dual_precision_decode_launch(&p, stream);
#else
        (void) p;
        (void) workspace;
        (void) stream;
        return rssm::setError(RSSM_ERR_UNSUPPORTED,
                              "ReplayDecode: read_dtype needs the dual-precision decode kernel, which this build "
                              "does not have (cpp_plugins/kernels/dual_precision/*.cu absent)");
#endif
    }
    // The workspace TensorRT hands over holds at least kernelWorkspaceSize() at the profile's maximum shapes,
    // which bounds the need at these shapes; with no workspace the automatic choice stays off the split kernels.
    if (config().e("family") == "mamba2") {
        Mamba2ReplayParams p = core::toMamba2ReplayParams(config(), in, nbInputs, out, nbOutputs);
        if (workspace) {
            p.workspace = workspace;
            p.workspace_bytes = rssm_mamba2_replay_workspace_bytes(&p);
        }
        return rssm_mamba2_replay_launch(&p, stream);
    }
    GdnReplayParams p = core::toGdnReplayParams(config(), in, nbInputs, out, nbOutputs);
    if (workspace) {
        p.workspace = workspace;
        p.workspace_bytes = rssm_gdn_replay_workspace_bytes(&p);
    }
    return rssm_gdn_replay_launch(&p, stream);
}

size_t ReplayDecodePlugin::kernelWorkspaceSize(core::TensorDesc const* in, int32_t nbInputs) const {
    if (config().e("read_dtype") != "none") {
#ifdef RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL
        // the dual-precision decode's split path (monotone in batch and tokens: the maximum shapes bound it)
        DualPrecisionDecodeParams const p = core::dualPrecisionDecodeSizes(config(), in, nbInputs);
        return static_cast<size_t>(rssm_dual_precision_decode_workspace_bytes(&p));
#else
        return 0;
#endif
    }
    if (config().e("family") == "mamba2") {
        Mamba2ReplayParams const p = core::mamba2ReplaySizes(config(), in, nbInputs);
        return static_cast<size_t>(rssm_mamba2_replay_workspace_bound(&p));
    }
    GdnReplayParams const p = core::gdnReplaySizes(config(), in, nbInputs);
    return static_cast<size_t>(rssm_gdn_replay_workspace_bound(&p));
}

}  // namespace plugin
}  // namespace rssm
