// Instantiations of the head-staged Mamba-2 read-copy readout (mamba2_read_head_kernel.cuh; the default where it
// applies, RSSM_MAMBA2_READ_MMA_HEAD=0 keeps the tile kernel): nvfp4 rows, dstate 128, head dim 64 / 80, window <= 16,
// bf16 / fp16 activations.
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_read_head_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {
// 5 CTAs of 3 warps per SM at head dim 64 (7.4 KB per stage), 4 at 80 (8.6 KB): the shared-memory bound. (Half-head
// units, forty-third session, gave 24 warps per SM but measured 2.6% slower on the H100 and were removed in the
// forty-fourth.)
template <int NT>
const void* headKernelOf(int actDtype, size_t* smem) {
    constexpr int MINB = NT == 4 ? 5 : 4;
    *smem = readHeadSmemBytes<NT>();
    if (actDtype == RSSM_DTYPE_BF16) return reinterpret_cast<const void*>(&mamba2ReadCopyHeadKernel<NT, MINB, 1>);
    if (actDtype == RSSM_DTYPE_FP16) return reinterpret_cast<const void*>(&mamba2ReadCopyHeadKernel<NT, MINB, 2>);
    return nullptr;
}
}  // namespace

const void* splitReadCopyHeadKernel(int stateDtype, int window, int headdim, int actDtype, size_t* smem) {
    if (stateDtype != RSSM_DTYPE_NVFP4 || window > 16) return nullptr;
    if (headdim == 64) return headKernelOf<4>(actDtype, smem);
    if (headdim == 80) return headKernelOf<5>(actDtype, smem);
    return nullptr;
}
int readHeadThreads() { return kReadHeadThreads; }

}  // namespace mamba2
}  // namespace rssm
