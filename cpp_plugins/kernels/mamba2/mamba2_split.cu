// Instantiations of the Mamba-2 split replay kernels (variant 4): prep kernel per token bucket
// (MAXT = 1 standard, 2, 4, 8), readout kernel per state dtype (fp32 / fp16 / bf16) x N (128 / 256) x
// token bucket, and per read-only dual-precision read format (fp8_e4m3 / nvfp4, N = 128) x token bucket.
#include "common/env_switch.h"
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_split_kernel.cuh"
#include "mamba2/mamba2_split_prep_lean.cuh"

namespace rssm {
namespace mamba2 {
namespace {
int bucket(int mode, int T) { return mode == 0 ? 1 : (T <= 2 ? 2 : T <= 4 ? 4 : 8); }
template <typename ST, int N>
const void* readoutByTokens(int maxT) {
    switch (maxT) {
        case 1: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, N, 1, kSplitPlain>);
        case 2: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, N, 2, kSplitPlain>);
        case 4: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, N, 4, kSplitPlain>);
        default: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, N, 8, kSplitPlain>);
    }
}
// N = 128, fp32 / 16-bit rows, pipe kSplitMmaFold: the plain readout with the tensor-core fold, any token bucket.
// N = 128 with one token (standard mode): `pipe` picks the plain readout (kSplitPlain), the pipelined one (next
// item's loads in flight, 2 CTAs / SM) or the one with the next item's cursors in flight; more tokens or N = 256
// run the plain one.
template <typename ST>
const void* readoutByN(int N, int maxT, int pipe) {
    switch (N) {
        case 128:
            if constexpr (!stream::RowQuad<ST>::kScaled) {  // read-only scaled copies never fold
                if (pipe == kSplitMmaFold) {
                    switch (maxT) {
                        case 1: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, 128, 1, kSplitMmaFold>);
                        case 2: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, 128, 2, kSplitMmaFold>);
                        case 4: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, 128, 4, kSplitMmaFold>);
                        default: return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, 128, 8, kSplitMmaFold>);
                    }
                }
            }
            if (maxT == 1 && pipe == kSplitPipelined)
                return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, 128, 1, kSplitPipelined>);
            if (maxT == 1 && pipe == kSplitCursorsAhead)
                return reinterpret_cast<const void*>(&mamba2SplitReadoutKernel<ST, 128, 1, kSplitCursorsAhead>);
            return readoutByTokens<ST, 128>(maxT);
        case 256:
            if constexpr (stream::RowQuad<ST>::kScaled) return nullptr;  // scaled read formats: N = 128 only
            else return readoutByTokens<ST, 256>(maxT);
        default: return nullptr;
    }
}
}  // namespace

const void* splitPrepKernel(int mode, int numTokens, int occupancy, int* threads, bool xAligned, bool exactFour) {
    *threads = kSplitPrepThreads;
    const int maxT = bucket(mode, numTokens);
    if (maxT == 1 && occupancy == 1) return reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<1, 256, 8>);
    if (maxT == 1 && occupancy == 2) {
        *threads = 128;
        return reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<1, 128, 16>);
    }
    // T > 1: this step's B / C loaded before their stores (splitPrepBody's LF; eighteenth session), unless
    // RSSM_MAMBA2_PREP_LF=0 (read per launch; A/B timing, tests).
    // With LF, the record dots on tensor cores (splitPrepBody's MMADOT; twenty-first session) unless
    // RSSM_MAMBA2_PREP_MMA_DOTS=0, and for 16-byte aligned x the x rows staged in shared memory (XSM), which frees
    // the registers for more CTAs per SM: T = 4 capped for 5 CTAs / SM (48 registers, no spills), T = 8 for 8 (32
    // registers, 20 bytes of spills; measured 4-15 us faster per T = 8 step than 6 CTAs / SM with 40 registers and no
    // spills, twenty-first session). RSSM_MAMBA2_PREP_XSM=0 keeps the register copies; =6 (A/B) runs T = 8 at 6 CTAs
    // / SM. All read per launch.
    const bool lf = envSwitch("RSSM_MAMBA2_PREP_LF", true);
    const bool mmaDots = lf && envSwitch("RSSM_MAMBA2_PREP_MMA_DOTS", true);
    const char* xe = getenv("RSSM_MAMBA2_PREP_XSM");
    const bool xsm = mmaDots && xAligned && !(xe && strcmp(xe, "0") == 0);
    const bool xsm6 = xsm && xe && strcmp(xe, "6") == 0;
    // The x-staged four-token prep runs 128-thread CTAs (4 warps x 4 heads, capped for 12 CTAs / SM: 40 registers, no
    // spills) instead of 256 (8 warps x 2 heads): each warp's preamble (slot, cursors, layout) is paid by half as many
    // warps. Measured side by side (thirty-third session, B = 256, L = 16, two processes each): every T = 4 step 1.0-1.4%
    // faster on both layers; the eight-token prep at 128 threads was 2-26% slower (its shared memory allows 8 CTAs / SM,
    // i.e. 32 warps; that instance is removed), so it keeps 256. RSSM_MAMBA2_PREP_SPEC_W4=0 (read per launch; A/B): the
    // four-token prep in 256-thread CTAs.
    const bool w4t4 = xsm && envSwitch("RSSM_MAMBA2_PREP_SPEC_W4", true);
    switch (maxT) {
        case 1: return reinterpret_cast<const void*>(&mamba2SplitPrepKernel<1>);
        case 2: return mmaDots ? reinterpret_cast<const void*>(&mamba2SplitPrepKernel<2, true, true>)
                     : lf      ? reinterpret_cast<const void*>(&mamba2SplitPrepKernel<2, true>)
                               : reinterpret_cast<const void*>(&mamba2SplitPrepKernel<2>);
        case 4:  // occupancy 4 (RSSM_MAMBA2_SPLIT_PREP=lb5, A/B): capped for 5 CTAs / SM (48 registers, 12 B spills)
            if (occupancy == 4) return reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<4, 256, 5>);
            if (w4t4) {
                *threads = 128;
                // exactly four tokens, dstate 128, 8-byte aligned B / C rows: T and N at compile time (splitPrepBody's
                // EXACT), unless RSSM_MAMBA2_PREP_EXACT=0 (read per launch; A/B)
                if (exactFour && envSwitch("RSSM_MAMBA2_PREP_EXACT", true))
                    return reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<4, 128, 12, true, true, true, true>);
                return reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<4, 128, 12, true, true, true>);
            }
            return xsm     ? reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<4, 256, 5, true, true, true>)
                 : mmaDots ? reinterpret_cast<const void*>(&mamba2SplitPrepKernel<4, true, true>)
                 : lf      ? reinterpret_cast<const void*>(&mamba2SplitPrepKernel<4, true>)
                           : reinterpret_cast<const void*>(&mamba2SplitPrepKernel<4>);
        default:
            // eight tokens: 114 registers (2 CTAs / SM, 7.8 waves at B = 256, G = 8) unless capped for 4 CTAs / SM
            // (64 registers, 96 bytes of spills); occupancy 3 (RSSM_MAMBA2_SPLIT_PREP=default) keeps the uncapped one
            if (occupancy == 3) return reinterpret_cast<const void*>(&mamba2SplitPrepKernel<8>);
            return xsm6    ? reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<8, 256, 6, true, true, true>)
                 : xsm     ? reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<8, 256, 8, true, true, true>)
                 : mmaDots ? reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<8, 256, 4, true, true>)
                 : lf      ? reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<8, 256, 4, true>)
                           : reinterpret_cast<const void*>(&mamba2SplitPrepKernelBounded<8, 256, 4>);
    }
}
const void* splitPrepLeanKernel(int dstate, int actDtype) {
    const bool bf16 = actDtype == RSSM_DTYPE_BF16;
    if (!bf16 && actDtype != RSSM_DTYPE_FP16) return nullptr;
    switch (dstate) {
        case 128: return bf16 ? reinterpret_cast<const void*>(&mamba2SplitPrepLeanKernel<128, true>)
                              : reinterpret_cast<const void*>(&mamba2SplitPrepLeanKernel<128, false>);
        case 256: return bf16 ? reinterpret_cast<const void*>(&mamba2SplitPrepLeanKernel<256, true>)
                              : reinterpret_cast<const void*>(&mamba2SplitPrepLeanKernel<256, false>);
        default: return nullptr;
    }
}
int splitPrepLeanThreads() { return kLeanPrepThreads; }
const void* splitReadoutKernel(int stateDtype, int dstate, int mode, int numTokens, int pipe) {
    const int maxT = bucket(mode, numTokens);
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return readoutByN<float>(dstate, maxT, pipe);
        case RSSM_DTYPE_FP16: return readoutByN<__half>(dstate, maxT, pipe);
        case RSSM_DTYPE_BF16: return readoutByN<__nv_bfloat16>(dstate, maxT, pipe);
        case RSSM_DTYPE_FP8_E4M3: return dstate == 128 ? readoutByN<stream::Fp8Rows>(128, maxT, pipe) : nullptr;
        case RSSM_DTYPE_NVFP4: return dstate == 128 ? readoutByN<stream::Nvfp4Rows>(128, maxT, pipe) : nullptr;
        default: return nullptr;
    }
}
const void* splitReadCopyKernel(int stateDtype, int mode, int numTokens) {
    const int maxT = bucket(mode, numTokens);
    auto byT = [maxT](auto tag) -> const void* {
        using ST = decltype(tag);
        switch (maxT) {
            case 1: return reinterpret_cast<const void*>(&mamba2SplitReadCopyKernel<ST, 1>);
            case 2: return reinterpret_cast<const void*>(&mamba2SplitReadCopyKernel<ST, 2>);
            case 4: return reinterpret_cast<const void*>(&mamba2SplitReadCopyKernel<ST, 4>);
            default: return reinterpret_cast<const void*>(&mamba2SplitReadCopyKernel<ST, 8>);
        }
    };
    switch (stateDtype) {
        case RSSM_DTYPE_FP16: return byT(__half{});
        case RSSM_DTYPE_BF16: return byT(__nv_bfloat16{});
        case RSSM_DTYPE_FP8_E4M3: return byT(stream::Fp8Rows{});
        case RSSM_DTYPE_NVFP4: return byT(stream::Nvfp4Rows{});
        default: return nullptr;
    }
}
int splitReadRows() { return kReadRows; }
size_t splitWorkspaceBytes(int batch, int numTokens, int nheads, int window) {
    return splitWorkspaceBytesM2(batch, numTokens, nheads, window);
}
size_t splitReadoutSmemBytes(int dstate) { return splitReadoutSmemBytesM2(dstate); }
size_t splitMmaFoldSmemBytes(int dstate) { return splitMmaFoldSmemBytesM2(dstate); }
int splitMaxRecords() { return kSplitMaxRecords; }
size_t splitPrepSmemBytes(int window, int numTokens, int dstate, int headdim, int headsPerGroup) {
    return splitPrepSmemBytesM2(window, numTokens, dstate, headdim, headsPerGroup);
}
int splitHeadsPerPrep() { return kSplitHeadsPerPrep; }
int splitReadoutThreads() { return kSplitReadoutThreads; }
int splitRows() { return kSplitRows; }

}  // namespace mamba2
}  // namespace rssm
