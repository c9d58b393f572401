// Instantiations of the unit-staged GDN read-copy readout (gdn_read_head_kernel.cuh; the default where it applies,
// RSSM_GDN_READ_MMA_HEAD=0 off): nvfp4 rows, K = 128, head_v % 64 == 0, window <= 16, fp16 u with bf16 / fp16
// activations.
#include "gdn/gdn_read_head_kernel.cuh"
#include "gdn/gdn_split.h"

namespace rssm {
namespace gdn {

// 5 CTAs of 3 warps per SM (7.5 KB per stage): the shared-memory bound.
const void* readCopyHeadKernel(int stateDtype, int window, int headV, int actDtype, int uDtype, size_t* smem) {
    if (stateDtype != RSSM_DTYPE_NVFP4 || window > 16 || headV % kReadHeadRows != 0 || uDtype != RSSM_DTYPE_FP16)
        return nullptr;
    *smem = readHeadSmemBytesGdn();
    if (actDtype == RSSM_DTYPE_BF16) return reinterpret_cast<const void*>(&gdnReadCopyHeadKernel<5, 1>);
    if (actDtype == RSSM_DTYPE_FP16) return reinterpret_cast<const void*>(&gdnReadCopyHeadKernel<5, 2>);
    return nullptr;
}
int readCopyHeadThreads() { return kReadHeadThreads; }
int readCopyHeadRows() { return kReadHeadRows; }

}  // namespace gdn
}  // namespace rssm
