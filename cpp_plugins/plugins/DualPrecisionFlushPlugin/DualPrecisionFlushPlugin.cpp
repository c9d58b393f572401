// DualPrecisionFlush: flush launch for two checkpoints (Algorithms 3 and 6); non-flushing rows exit.
//
// The kernel lives in cpp_plugins/kernels/dual_precision/; CMake defines
// RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL when its source is present. In a build without it, enqueue
// translates the descriptors (so shape / dtype errors still surface) and then fails with
// RSSM_ERR_UNSUPPORTED and a logged message: never a silent no-op.
#include "DualPrecisionFlushPlugin.h"

#include "rssm_kernel_params.h"

namespace rssm {
namespace plugin {

int32_t DualPrecisionFlushPlugin::launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out,
                                         int32_t nbOutputs, void*, cudaStream_t stream) {
    DualPrecisionFlushParams const p = core::toDualPrecisionFlushParams(config(), in, nbInputs, out, nbOutputs);
#ifdef RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL
    return rssm_dual_precision_flush_launch(&p, stream);
#else
    (void) p;
    (void) stream;
    return rssm::setError(RSSM_ERR_UNSUPPORTED,
                          "DualPrecisionFlush: the dual-precision flush kernel is not implemented in this build "
                          "(cpp_plugins/kernels/dual_precision/ has only its header); the layer cannot run");
#endif
}

}  // namespace plugin
}  // namespace rssm
