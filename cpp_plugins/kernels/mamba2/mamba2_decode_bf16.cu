// Instantiations of the Mamba-2 decode kernel for a bf16 state (N = 64, 128, 256).
// One state dtype per file so the library builds in parallel.
#include "mamba2/mamba2_decode_kernel.cuh"
#include "mamba2/mamba2_dispatch.h"

namespace rssm {
namespace mamba2 {

const void* decodeKernel_bf16(int dstate) {
    switch (dstate) {
        case 64: return reinterpret_cast<const void*>(&mamba2DecodeKernel<__nv_bfloat16, 64>);
        case 128: return reinterpret_cast<const void*>(&mamba2DecodeKernel<__nv_bfloat16, 128>);
        case 256: return reinterpret_cast<const void*>(&mamba2DecodeKernel<__nv_bfloat16, 256>);
        default: return nullptr;
    }
}

}  // namespace mamba2
}  // namespace rssm
