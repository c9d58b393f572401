// Instantiations of the unit-staged GDN read-copy readout (gdn_read_head_kernel.cuh; the default where it applies,
// RSSM_GDN_READ_MMA_HEAD=0 off): nvfp4 rows, K = 128, head_v a multiple of the unit (64 rows, or 32 with =2), window
// <= 16, fp16 u with bf16 / fp16 activations.
#include "gdn/gdn_read_head_kernel.cuh"
#include "gdn/gdn_split.h"

namespace rssm {
namespace gdn {

// 64-row units: 5 CTAs of 3 warps per SM (7.5 KB per stage: the shared-memory bound). 32-row units
// (RSSM_GDN_READ_MMA_HEAD=2, A/B): 4.1 KB per stage; under a bound of 6 CTAs ptxas gives 96 registers and no spills,
// so 7 CTAs fit (a bound of 7 gave 80 registers and 24 bytes of spills).
constexpr int kMinb32 = 6;
const void* readCopyHeadKernel(int stateDtype, int window, int headV, int actDtype, int uDtype, int unitRows,
                               size_t* smem) {
    if (stateDtype != RSSM_DTYPE_NVFP4 || window > 16 || (unitRows != 64 && unitRows != 32) || headV % unitRows != 0 ||
        uDtype != RSSM_DTYPE_FP16)
        return nullptr;
    if (unitRows == 32) {
        *smem = readHeadSmemBytesGdn<32>();
        if (actDtype == RSSM_DTYPE_BF16) return reinterpret_cast<const void*>(&gdnReadCopyHeadKernel<kMinb32, 1, 32>);
        if (actDtype == RSSM_DTYPE_FP16) return reinterpret_cast<const void*>(&gdnReadCopyHeadKernel<kMinb32, 2, 32>);
        return nullptr;
    }
    *smem = readHeadSmemBytesGdn();
    if (actDtype == RSSM_DTYPE_BF16) return reinterpret_cast<const void*>(&gdnReadCopyHeadKernel<5, 1>);
    if (actDtype == RSSM_DTYPE_FP16) return reinterpret_cast<const void*>(&gdnReadCopyHeadKernel<5, 2>);
    return nullptr;
}
int readCopyHeadThreads() { return kReadHeadThreads; }

}  // namespace gdn
}  // namespace rssm
