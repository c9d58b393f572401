// Instantiations of the Mamba-2 read-copy readout on tensor cores (mamba2_read_mma_kernel.cuh): one kernel per
// read format (fp16 / fp8_e4m3 / nvfp4 rows, dstate 128, one token).
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_read_mma_kernel.cuh"

namespace rssm {
namespace mamba2 {

namespace {
// depth 0: the format's default (readMmaDepth); 2 / 3 / 4 (window <= 16): A/B builds (RSSM_MAMBA2_READ_MMA_DEPTH)
template <int FMT>
const void* byWindow(int window, int depth) {
    constexpr int MB = readMmaMinBlocks<FMT>();
    if (window <= 16) {
        switch (depth) {
            case 2: return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, 2, MB>);
            case 3: return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, 3, MB>);
            case 4: return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, 4, MB>);
            default: return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, readMmaDepth<FMT>(), MB>);
        }
    }
    return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 8, readMmaDepth<FMT>(), MB>);
}
}  // namespace

const void* splitReadCopyMmaKernel(int stateDtype, int window, int depth) {
    using namespace readmma;
    switch (stateDtype) {
        case RSSM_DTYPE_FP16:
            return byWindow<kFp16>(window, depth);
        case RSSM_DTYPE_FP8_E4M3:
            return byWindow<kFp8>(window, depth);
        case RSSM_DTYPE_NVFP4:
            return byWindow<kNvfp4>(window, depth);
        default: return nullptr;
    }
}
int readMmaThreads() { return kReadMmaThreads; }
int readMmaRowBytes(int stateDtype) {
    using namespace readmma;
    return stateDtype == RSSM_DTYPE_FP16 ? rowBytes<kFp16>() : stateDtype == RSSM_DTYPE_FP8_E4M3 ? rowBytes<kFp8>()
                                                                                                  : rowBytes<kNvfp4>();
}

}  // namespace mamba2
}  // namespace rssm
