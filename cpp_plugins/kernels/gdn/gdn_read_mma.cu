// Instantiations of the GDN read-copy readout on tensor cores (gdn_read_mma_kernel.cuh): per read format (fp16 /
// fp8_e4m3 / nvfp4 rows, K = 128, one token) and ring size (window <= 16: 4 records per lane, else 8).
#include "gdn/gdn_read_mma_kernel.cuh"
#include "gdn/gdn_split.h"

namespace rssm {
namespace gdn {
namespace {
constexpr int kStages = 2;  // slots per warp (the Mamba-2 readout's measured choice)
constexpr int kMinBlocks = 4;
template <int FMT>
const void* kernelOf(int window, size_t* smem) {
    if (window > 16) {
        *smem = readMmaSmemBytesGdn<FMT, 8, kStages>();
        return reinterpret_cast<const void*>(&gdnReadCopyMmaKernel<FMT, 8, kStages, kMinBlocks>);
    }
    *smem = readMmaSmemBytesGdn<FMT, 4, kStages>();
    return reinterpret_cast<const void*>(&gdnReadCopyMmaKernel<FMT, 4, kStages, kMinBlocks>);
}
}  // namespace

const void* readCopyMmaKernel(int stateDtype, int window, size_t* smem) {
    using namespace readmma;
    switch (stateDtype) {
        case RSSM_DTYPE_FP16: return kernelOf<kFp16>(window, smem);
        case RSSM_DTYPE_FP8_E4M3: return kernelOf<kFp8>(window, smem);
        case RSSM_DTYPE_NVFP4: return kernelOf<kNvfp4>(window, smem);
        default: return nullptr;
    }
}
int readCopyMmaThreads() { return kReadMmaThreads; }

}  // namespace gdn
}  // namespace rssm
