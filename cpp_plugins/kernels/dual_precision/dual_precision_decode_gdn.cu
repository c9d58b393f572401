// Instantiations of the gdn dual-precision decode kernel over the read format.
#include "dual_precision/dp_decode_dispatch.h"
#include "dual_precision/dp_decode_kernels.cuh"

namespace rssm {
namespace dp {
void launchGdnDpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    const dim3 grid((p.headdim + tileRows - 1) / tileRows, p.nheads, p.batch);
    switch (p.ckpt_lp ? p.read_dtype : RSSM_DTYPE_FP32) {
        case RSSM_DTYPE_FP32: gdnDpDecodeKernel<RSSM_DTYPE_FP32><<<grid, kDecodeThreads, 0, s>>>(p, tileRows); break;
        case RSSM_DTYPE_FP16: gdnDpDecodeKernel<RSSM_DTYPE_FP16><<<grid, kDecodeThreads, 0, s>>>(p, tileRows); break;
        case RSSM_DTYPE_BF16: gdnDpDecodeKernel<RSSM_DTYPE_BF16><<<grid, kDecodeThreads, 0, s>>>(p, tileRows); break;
        case RSSM_DTYPE_FP8_E4M3: gdnDpDecodeKernel<RSSM_DTYPE_FP8_E4M3><<<grid, kDecodeThreads, 0, s>>>(p, tileRows); break;
        default: gdnDpDecodeKernel<RSSM_DTYPE_NVFP4><<<grid, kDecodeThreads, 0, s>>>(p, tileRows); break;
    }
}
}  // namespace dp
}  // namespace rssm
