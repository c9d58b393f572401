// Instantiations of the Mamba-2 decode kernel for a bf16 state (N = 64, 128, 256).
// One state dtype per file so the library builds in parallel.
#include "mamba2/mamba2_decode_kernel.cuh"
#include "mamba2/mamba2_persistent.cuh"
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

// Variants 1 (8 consumer warps) and 2 (4 consumer warps): mamba2_persistent.cuh.
const void* decodePersistentKernel_bf16(int dstate, int consumerWarps) {
    if (consumerWarps == 8) {
        switch (dstate) {
            case 64: return reinterpret_cast<const void*>(&mamba2DecodePersistentKernel<__nv_bfloat16, 64, 8>);
            case 128: return reinterpret_cast<const void*>(&mamba2DecodePersistentKernel<__nv_bfloat16, 128, 8>);
            case 256: return reinterpret_cast<const void*>(&mamba2DecodePersistentKernel<__nv_bfloat16, 256, 8>);
            default: return nullptr;
        }
    }
    if (consumerWarps == 4) {
        switch (dstate) {
            case 64: return reinterpret_cast<const void*>(&mamba2DecodePersistentKernel<__nv_bfloat16, 64, 4>);
            case 128: return reinterpret_cast<const void*>(&mamba2DecodePersistentKernel<__nv_bfloat16, 128, 4>);
            case 256: return reinterpret_cast<const void*>(&mamba2DecodePersistentKernel<__nv_bfloat16, 256, 4>);
            default: return nullptr;
        }
    }
    return nullptr;
}

}  // namespace mamba2
}  // namespace rssm
