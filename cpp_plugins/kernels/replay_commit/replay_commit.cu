// Device commit of the ReplaySSM cursors: one thread per decode row.
#include "replay_commit/replay_commit.h"

#include "common/pdl.h"

namespace rssm {
namespace {

__device__ __forceinline__ void reportError(int32_t* errorSlot, int slot) {
    if (errorSlot) atomicCAS(errorSlot, -1, slot);
}

__global__ void replayCommitKernel(const ReplayCommitParams p) {
    // Launched as a programmatic dependent of the decode before it (sm_90+, launchMaybeDependent): wait for that
    // grid to complete (its kernels read the cursors this kernel moves) before touching anything. The next step's
    // first kernel may be scheduled at once (RSSM_PDL_CHAIN, common/pdl.h): it waits for this grid before it reads.
    pdlLaunchDependents();
    pdlWaitPrimary();
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= p.batch) return;
    const int slot = p.state_batch_indices ? p.state_batch_indices[b] : b;
    if (slot < 0) return;  // padding row
    if (slot >= p.num_slots) {
        reportError(p.error_slot, slot);
        return;
    }
    const int L = p.window, C = p.ring_capacity, T = p.num_tokens;
    int o = p.ring_origin[slot];
    int h = p.ring_len[slot];
    bool ok = o >= 0 && o < C && h >= 0 && (p.mode == 0 ? h <= L - 1 : h <= L);
    int a = T;
    if (p.mode == 1 && p.accepted) {
        a = p.accepted[b];
        ok = ok && a >= 1 && a <= T;
    }
    if (!ok) {
        reportError(p.error_slot, slot);
        return;
    }
    if (p.mode == 0) {
        if (h + 1 == L) {
            o = (o + h + 1) % C;
            h = 0;
        } else {
            h = h + 1;
        }
    } else {
        if (h + T > L) {
            o = (o + h) % C;
            h = 0;
        }
        h = h + a;
    }
    p.ring_origin[slot] = o;
    p.ring_len[slot] = h;
}

}  // namespace
}  // namespace rssm

extern "C" int rssm_replay_commit_launch(const ReplayCommitParams* p, cudaStream_t stream) {
    using rssm::setError;
    const char* op = "ReplayCommit";
    if (!p) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    if (p->batch < 0) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: batch must be >= 0; got %d", op, p->batch);
    if (p->num_slots < 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_slots must be >= 1; got %d", op, p->num_slots);
    if (p->mode != 0 && p->mode != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mode must be 0 (standard) or 1 (speculative); got %d", op,
                        p->mode);
    if (p->window < 1) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: window must be >= 1; got %d", op, p->window);
    if (p->num_tokens < 1 || (p->mode == 0 && p->num_tokens != 1))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_tokens must be %s; got %d", op,
                        p->mode == 0 ? "1 in standard mode" : ">= 1", p->num_tokens);
    const int needCap = p->mode == 0 ? p->window : p->window + p->num_tokens;
    if (p->ring_capacity < needCap)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_capacity must be >= %s = %d; got %d", op,
                        p->mode == 0 ? "window" : "window + num_tokens", needCap, p->ring_capacity);
    if (!p->ring_origin || !p->ring_len)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_origin and ring_len must not be NULL", op);
    if (p->batch == 0) return RSSM_OK;
    const int threads = 128;
    const int blocks = (p->batch + threads - 1) / threads;
    // Programmatic dependent launch (common/pdl.h; RSSM_PDL=0 turns it off): the commit's launch overlaps the tail
    // of the decode kernel before it, which at small batch is a visible share of the step (fourteenth session).
    ReplayCommitParams params = *p;
    void* args[] = {&params};
    cudaError_t e = rssm::launchMaybeDependent(reinterpret_cast<const void*>(&rssm::replayCommitKernel), dim3(blocks),
                                               dim3(threads), 0, stream, args, rssm::pdlEnabled());
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess)
        return setError(RSSM_ERR_CUDA, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}
