// Instantiations of the mamba2 dual-precision decode kernel over the read format.
#include "dual_precision/dp_decode_dispatch.h"
#include "dual_precision/dp_decode_kernels.cuh"

namespace rssm {
namespace dp {
namespace {
template <bool ONE>
void launchRead(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    const dim3 grid((p.headdim + tileRows - 1) / tileRows, p.nheads, p.batch);
    const int smem = dpRingSmemBytes(p.window, tileRows);  // <= 64 * 256 * 2 = 32 KB
    switch (p.ckpt_lp ? p.read_dtype : RSSM_DTYPE_FP32) {
        case RSSM_DTYPE_FP32: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_FP32, ONE>, grid, smem, s, p, tileRows, 0); break;
        case RSSM_DTYPE_FP16: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_FP16, ONE>, grid, smem, s, p, tileRows, 0); break;
        case RSSM_DTYPE_BF16: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_BF16, ONE>, grid, smem, s, p, tileRows, 0); break;
        case RSSM_DTYPE_FP8_E4M3: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_FP8_E4M3, ONE>, grid, smem, s, p, tileRows, 0); break;
        default: launchDpDecode(&mamba2DpDecodeKernel<RSSM_DTYPE_NVFP4, ONE>, grid, smem, s, p, tileRows, 0); break;
    }
}
}  // namespace

void launchMamba2DpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s) {
    if (p.num_tokens == 1) launchRead<true>(p, tileRows, s);
    else launchRead<false>(p, tileRows, s);
}
}  // namespace dp
}  // namespace rssm
