// The GSH instance of the Mamba-2 tensor-core verify readout (mamba2_split_mma_kernel.cuh: fp32 rows, ZPF, L32, the
// group by a shift; A/B, RSSM_MAMBA2_MMA_GSH=1), in a translation unit of its own: instantiated beside the others in
// mamba2_split_mma.cu it changed the generated code of two of them (thirty-seventh session).
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_split_mma_kernel.cuh"

namespace rssm {
namespace mamba2 {
const void* splitMmaReadoutGshKernel() {
    return reinterpret_cast<const void*>(&mamba2SplitReadoutMmaStagedKernel<float, true, true, true, true, false, true>);
}
}  // namespace mamba2
}  // namespace rssm
