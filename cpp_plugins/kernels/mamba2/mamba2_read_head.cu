// Instantiations of the head-staged Mamba-2 read-copy readout (mamba2_read_head_kernel.cuh; the default where it
// applies, RSSM_MAMBA2_READ_MMA_HEAD=0 keeps the tile kernel): nvfp4 rows, dstate 128, head dim 64 / 80, window <= 16,
// bf16 / fp16 activations.
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_read_head_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {
// 5 CTAs of 3 warps per SM at head dim 64 (7.4 KB per stage), 4 at 80 (8.6 KB): the shared-memory bound.
// Half-head units (U = 2, head dim 64, RSSM_MAMBA2_READ_MMA_HEAD=2, A/B): 4.0 KB per stage (shared memory would take
// 9 CTAs); the bound asks for 7 CTAs of 3 warps per SM and ptxas gives 80 registers, no spills (94 under a bound of
// 6), so 8 CTAs fit (24 warps, against 15 for whole heads).
template <int NT, int U = 1>
const void* headKernelOf(int actDtype, size_t* smem) {
    constexpr int MINB = U == 2 ? 7 : NT == 4 ? 5 : 4;
    *smem = readHeadSmemBytes<NT>();
    if (actDtype == RSSM_DTYPE_BF16) return reinterpret_cast<const void*>(&mamba2ReadCopyHeadKernel<NT, MINB, 1, U>);
    if (actDtype == RSSM_DTYPE_FP16) return reinterpret_cast<const void*>(&mamba2ReadCopyHeadKernel<NT, MINB, 2, U>);
    return nullptr;
}
}  // namespace

const void* splitReadCopyHeadKernel(int stateDtype, int window, int headdim, int actDtype, int unitsPerHead,
                                    size_t* smem) {
    if (stateDtype != RSSM_DTYPE_NVFP4 || window > 16) return nullptr;
    if (headdim == 64) return unitsPerHead == 2 ? headKernelOf<2, 2>(actDtype, smem) : headKernelOf<4>(actDtype, smem);
    if (headdim == 80 && unitsPerHead == 1) return headKernelOf<5>(actDtype, smem);
    return nullptr;
}
int readHeadThreads() { return kReadHeadThreads; }

}  // namespace mamba2
}  // namespace rssm
