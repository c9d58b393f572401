// Instantiations of the Mamba-2 read-copy readout on tensor cores (mamba2_read_mma_kernel.cuh): per read format
// (fp16 / fp8_e4m3 / nvfp4 rows, dstate 128, one token) and ring size (window <= 16: 4 records per lane, else 8).
#include "common/env_switch.h"
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_read_mma_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {
// The default-depth instance compiled for the activation format (bf16 / fp16), window <= 16; NULL for others. These are
// also the lean instances (mamba2_read_mma_kernel.cuh, LEAN; twentieth session): RSSM_MAMBA2_READ_MMA_LEAN=0 (read per
// launch) takes the instances without it, for A/B.
template <int FMT, int MINB>
const void* specialized(int actDtype, size_t* smem) {
    constexpr int S = readMmaStages<FMT>();
    *smem = readMmaSmemBytes<FMT, 4, S>();
    const bool lean = envSwitch("RSSM_MAMBA2_READ_MMA_LEAN", true);
    if (actDtype == RSSM_DTYPE_BF16)
        return lean ? reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, S, MINB, 1, 1>)
                    : reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, S, MINB, 1>);
    if (actDtype == RSSM_DTYPE_FP16)
        return lean ? reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, S, MINB, 2, 1>)
                    : reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, S, MINB, 2>);
    return nullptr;
}
// stages 0: the format's default (readMmaStages); 2 / 3 / 4 / 6 (window <= 16): A/B builds (RSSM_MAMBA2_READ_MMA_DEPTH)
// that read the activation format from the params; RSSM_READ_MMA_MINB=4|5|6 forces the occupancy bound of the
// default-depth instance (A/B; at 6 it has 80 registers without spills).
template <int FMT>
const void* kernelOf(int window, int stages, int actDtype, size_t* smem) {
    constexpr int MB = readMmaMinBlocks<FMT>(), S = readMmaStages<FMT>();
    if (window > 16) {
        *smem = readMmaSmemBytes<FMT, 8, S>();
        return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 8, S, MB>);
    }
    if (stages == 0 || stages == S) {
        const int forced = readmma::forcedReadMmaMinBlocks();
        const void* k = forced == 4   ? specialized<FMT, 4>(actDtype, smem)
                        : forced == 5 ? specialized<FMT, 5>(actDtype, smem)
                        : forced == 6 ? specialized<FMT, 6>(actDtype, smem)
                                      : specialized<FMT, MB>(actDtype, smem);
        if (k) return k;
    }
#define RSSM_READ_MMA_CASE(N)                                                       \
    case N:                                                                         \
        *smem = readMmaSmemBytes<FMT, 4, N>();                                      \
        return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, N, MB>);
    switch (stages) {
        RSSM_READ_MMA_CASE(2)
        RSSM_READ_MMA_CASE(3)
        RSSM_READ_MMA_CASE(4)
        RSSM_READ_MMA_CASE(6)
        default:
            *smem = readMmaSmemBytes<FMT, 4, S>();
            return reinterpret_cast<const void*>(&mamba2ReadCopyMmaKernel<FMT, 4, S, MB>);
    }
#undef RSSM_READ_MMA_CASE
}
}  // namespace

const void* splitReadCopyMmaKernel(int stateDtype, int window, int stages, int actDtype, size_t* smem) {
    using namespace readmma;
    switch (stateDtype) {
        case RSSM_DTYPE_FP16: return kernelOf<kFp16>(window, stages, actDtype, smem);
        case RSSM_DTYPE_FP8_E4M3: return kernelOf<kFp8>(window, stages, actDtype, smem);
        case RSSM_DTYPE_NVFP4: return kernelOf<kNvfp4>(window, stages, actDtype, smem);
        default: return nullptr;
    }
}
int readMmaThreads() { return kReadMmaThreads; }

}  // namespace mamba2
}  // namespace rssm
