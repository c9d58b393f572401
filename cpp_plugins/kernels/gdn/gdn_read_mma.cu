// Instantiations of the GDN read-copy readout on tensor cores (gdn_read_mma_kernel.cuh): per read format (fp16 /
// fp8_e4m3 / nvfp4 rows, K = 128, one token) and ring size (window <= 16: 4 records per lane, else 8).
#include "common/env_switch.h"
#include "gdn/gdn_read_mma_kernel.cuh"
#include "gdn/gdn_split.h"

namespace rssm {
namespace gdn {
namespace {
constexpr int kStages = 2;  // slots per warp (the Mamba-2 readout's measured choice)
template <int FMT, int MAXM, int MINB, int AK = 0, int EARLY = 0, int LEAN = 0>
const void* instance(size_t* smem) {
    *smem = readMmaSmemBytesGdn<FMT, MAXM, kStages>();
    return reinterpret_cast<const void*>(&gdnReadCopyMmaKernel<FMT, MAXM, kStages, MINB, AK, EARLY, LEAN>);
}
// The instance compiled for the activation / u formats (fp16 u with bf16 or fp16 activations: Qwen3.5 layers), window
// <= 16; NULL for other formats. The bf16-activation instance copies each warp's first tile's rows before the wait
// for the prep grid (EARLY): side by side (122B layer, B = 256, L = 16, non-flush step, nineteenth session, call 3)
// nvfp4 122.8 -> 117.4 us, fp8 122.7 -> 122.1 us (its nvfp4 instance also compiles without the 8 bytes of spills of
// the other). RSSM_GDN_READ_MMA_EARLY=0 (read per launch) takes the instance without it, for A/B.
// These instances are also the lean ones (gdn_read_mma_kernel.cuh, LEAN; twentieth session): RSSM_GDN_READ_MMA_LEAN=0
// (read per launch) takes the instances without it, for A/B.
template <int FMT, int MINB>
const void* specialized(int actDtype, int uDtype, size_t* smem) {
    const bool lean = envSwitch("RSSM_GDN_READ_MMA_LEAN", true);
    if (uDtype == RSSM_DTYPE_FP16 && actDtype == RSSM_DTYPE_BF16) {
        if (envSwitch("RSSM_GDN_READ_MMA_EARLY", true))
            return lean ? instance<FMT, 4, MINB, 1, 1, 1>(smem) : instance<FMT, 4, MINB, 1, 1>(smem);
        return lean ? instance<FMT, 4, MINB, 1, 0, 1>(smem) : instance<FMT, 4, MINB, 1>(smem);
    }
    if (uDtype == RSSM_DTYPE_FP16 && actDtype == RSSM_DTYPE_FP16)
        return lean ? instance<FMT, 4, MINB, 2, 0, 1>(smem) : instance<FMT, 4, MINB, 2>(smem);
    return nullptr;
}
// CTAs per SM the registers of the compiled-format instances (window <= 16) are bounded for: nvfp4 5 (96 registers, no
// spills), fp16 / fp8 4. Measured side by side (H200, 122B layer, B = 256, L = 16, non-flush step, bench precision
// --layers 4, RSSM_READ_MMA_MINB, 28ecd8c) at 4 / 5 / 6 CTAs: fp8 128.4 / 148.1 / 133.2 us, nvfp4 133.5 / 129.6 /
// 137.8 us; fp16 at 4 / 6: 188.2 / 190.1 us. The instances that read the formats from the params (and window > 16)
// keep 4: at 5 they spill 24-184 bytes.
template <int FMT>
constexpr int kMinBlocks() {
    return FMT == readmma::kNvfp4 ? 5 : 4;
}
template <int FMT>
const void* kernelOf(int window, int actDtype, int uDtype, size_t* smem) {
    if (window > 16) return instance<FMT, 8, 4>(smem);
    // RSSM_READ_MMA_MINB=4|5|6 forces the bound of the compiled-format instance (A/B; 6 spills 16-28 bytes)
    const int forced = readmma::forcedReadMmaMinBlocks();
    const void* k = forced == 4   ? specialized<FMT, 4>(actDtype, uDtype, smem)
                    : forced == 5 ? specialized<FMT, 5>(actDtype, uDtype, smem)
                    : forced == 6 ? specialized<FMT, 6>(actDtype, uDtype, smem)
                                  : specialized<FMT, kMinBlocks<FMT>()>(actDtype, uDtype, smem);
    return k ? k : instance<FMT, 4, 4>(smem);
}
}  // namespace

const void* readCopyMmaKernel(int stateDtype, int window, int actDtype, int uDtype, size_t* smem) {
    using namespace readmma;
    switch (stateDtype) {
        case RSSM_DTYPE_FP16: return kernelOf<kFp16>(window, actDtype, uDtype, smem);
        case RSSM_DTYPE_FP8_E4M3: return kernelOf<kFp8>(window, actDtype, uDtype, smem);
        case RSSM_DTYPE_NVFP4: return kernelOf<kNvfp4>(window, actDtype, uDtype, smem);
        default: return nullptr;
    }
}
int readCopyMmaThreads() { return kReadMmaThreads; }

}  // namespace gdn
}  // namespace rssm
