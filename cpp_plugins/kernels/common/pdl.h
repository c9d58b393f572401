// Programmatic dependent launch (PDL, sm_90+) between the two kernels of a split step: the readout is
// launched with programmatic stream serialization, so its CTAs may be scheduled while the prep kernel's
// last CTAs still run; the readout waits (pdlWaitPrimary) before it reads anything the prep writes.
// Host side: the launch helper. Device side: the two instructions (no-ops below sm_90).
#pragma once
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_switch.h"

namespace rssm {

// Device side.
__device__ __forceinline__ void pdlWaitPrimary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Host side. PDL is used on devices of compute capability >= 9.0 unless RSSM_PDL=0 (read per launch, for
// side-by-side timing and as an escape hatch). The capability is queried once per device.
inline bool pdlEnabled() {
    const char* e = getenv("RSSM_PDL");
    if (e && strcmp(e, "0") == 0) return false;
    static int major[64] = {0};  // 0: not queried yet
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        cudaGetLastError();
        return false;
    }
    if (major[dev] == 0) {
        int m = 0;
        if (cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || m <= 0) {
            cudaGetLastError();
            return false;
        }
        major[dev] = m;
    }
    return major[dev] >= 9;
}

// pdlEnabled() and a launcher's own switch `name` ("1": on, "0": off, otherwise `dflt`): RSSM_PDL_M2_VERIFY and
// RSSM_PDL_GDN_VERIFY, the tensor-core verify readouts after their preps, whose default is PDL only above 4 tokens
// (twenty-eighth session, docs/switches.md). RSSM_PDL=0 turns them off too.
inline bool pdlEnabled(const char* name, bool dflt) { return envSwitch(name, dflt) && pdlEnabled(); }

// RSSM_PDL_CHAIN ("1": on, "0": off, read per launch; see pdlChainDefault for the default): the first kernel of a
// decode step (the split replay preps, the GDN stream replay kernel, the fused Mamba-2 step, the conventional
// warp-item decodes) is launched as a programmatic dependent of whatever kernel precedes it on the stream (the
// previous step's commit, the previous layer's kernel), so that its launch and CTA placement overlap that kernel's
// end. Such a kernel cannot know what its predecessor writes, so it waits (pdlWaitPrimary) before its first global
// memory access and triggers its own dependents only after that wait: a dependent that reads before its own wait
// (the GDN readouts' EARLY rows) still finds every kernel before this one complete.
// Off by default: measured side by side on both families at B = 1-256 (docs/benchmarks.md "Fifty-fourth session",
// "Fifty-fifth session"): a wash from B = 16, gains at B <= 4 on the replay one-token steps, losses at B = 2-4 on
// the conventional and per-draft baselines and the four-token verify steps.
constexpr bool pdlChainDefault = false;
inline bool pdlChainEnabled() { return pdlEnabled("RSSM_PDL_CHAIN", pdlChainDefault); }

// Device side, the first statements of a chain kernel (above): wait for the predecessor grid, then let this
// kernel's own dependents be scheduled.
__device__ __forceinline__ void pdlChainEntry() {
    pdlWaitPrimary();
    pdlLaunchDependents();
}

// The first statements of a chain kernel that is a whole step by itself (the conventional warp-item decodes, the GDN
// stream kernels, GDN's warp-item replay, the fused Mamba-2 small-batch step), whose dependents are the next step's
// kernels or the commit rather than a readout of the same step. Built with RSSM_PDL_CHAIN_EXIT_TRIGGER (an A/B
// build, fifty-fifth session), such a kernel does not trigger its dependents early: they launch as its CTAs exit,
// so the next step's CTAs are not placed on the SMs while this step's still run. Without it: pdlChainEntry. Not the
// default: it removed the chain's B = 2-4 losses, but with the chain off (the default) it made GDN's automatic
// small-batch steps 0.4-0.5% slower, their commit launching later (docs/benchmarks.md "Fifty-sixth session").
__device__ __forceinline__ void pdlChainEntryStep() {
#ifdef RSSM_PDL_CHAIN_EXIT_TRIGGER
    pdlWaitPrimary();
#else
    pdlChainEntry();
#endif
}

// Launches func(args) on `stream`, as a programmatic dependent of the previous kernel when `dependent`.
inline cudaError_t launchMaybeDependent(const void* func, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                        void** args, bool dependent) {
    if (!dependent) return cudaLaunchKernel(func, grid, block, args, smem, stream);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelExC(&cfg, func, args);
}

}  // namespace rssm
