// Admission of rows with a flush phase (replay_admit.h): one CTA per (row, ring tensor, layer) writes that row's d
// neutral records of one layer of one ring tensor; the (ring 0, layer 0) CTA of each row also writes its cursors.
#include "replay_commit/replay_admit.h"

namespace rssm {
namespace {

constexpr int kAdmitThreads = 256;

__device__ __forceinline__ int admitPhase(const ReplayAdmitParams& p, int row) {
    switch (p.phase_mode) {
        case RSSM_ADMIT_PHASE_CONSTANT: return p.phase;
        case RSSM_ADMIT_PHASE_SPREAD: return (int)(((int64_t)p.phase + row) % p.window);
        case RSSM_ADMIT_PHASE_PER_ROW: return p.phases[row];
        default: return 0;
    }
}

__global__ void __launch_bounds__(kAdmitThreads) replayAdmitKernel(const ReplayAdmitParams p) {
    const int row = blockIdx.x;
    const int slot = p.slots[row];
    if (slot < 0) return;  // skipped entry
    // A slot named by an earlier entry: the later entry is skipped and reported (two entries would write one slot's
    // cursors and records in an undefined order). One coalesced scan of the earlier entries per CTA.
    int earlier = 0;
    for (int i = threadIdx.x; i < row; i += kAdmitThreads) earlier |= p.slots[i] == slot;
    const bool duplicate = __syncthreads_or(earlier) != 0;
    const int d = admitPhase(p, row);
    const bool ok = !duplicate && slot < p.num_slots && d >= 0 && d < p.window;
    const int r = blockIdx.y, layer = blockIdx.z;
    if (r == 0 && layer == 0 && threadIdx.x == 0) {
        if (!ok) {
            if (p.error_slot) atomicCAS(p.error_slot, -1, slot);
        } else {
            p.ring_origin[slot] = 0;
            p.ring_len[slot] = d;
        }
    }
    if (!ok || d == 0 || r >= p.num_rings) return;
    const ReplayAdmitRing ring = p.rings[r];
    if (layer >= ring.num_layers) return;
    char* span = static_cast<char*>(ring.base) + layer * ring.layer_stride + (int64_t)slot * ring.slot_stride;
    const int64_t bytes = (int64_t)d * ring.record_bytes;
    if ((reinterpret_cast<uintptr_t>(span) & 15) == 0 && (bytes & 15) == 0) {
        const uint4 v = make_uint4(ring.fill, ring.fill, ring.fill, ring.fill);
        uint4* dst = reinterpret_cast<uint4*>(span);
        for (int64_t i = threadIdx.x; i < bytes / 16; i += kAdmitThreads) dst[i] = v;
    } else {  // 4-byte aligned (record_bytes % 4 == 0 and the strides are checked by the launcher)
        uint32_t* dst = reinterpret_cast<uint32_t*>(span);
        for (int64_t i = threadIdx.x; i < bytes / 4; i += kAdmitThreads) dst[i] = ring.fill;
    }
}

}  // namespace
}  // namespace rssm

extern "C" int rssm_replay_admit_launch(const ReplayAdmitParams* p, cudaStream_t stream) {
    using rssm::setError;
    const char* op = "ReplayAdmit";
    if (!p) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    if (p->num_rows < 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_rows must be >= 0; got %d", op, p->num_rows);
    if (p->num_slots < 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_slots must be >= 1; got %d", op, p->num_slots);
    if (p->window < 1) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: window must be >= 1; got %d", op, p->window);
    if (p->ring_capacity < p->window)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_capacity must be >= window = %d; got %d", op, p->window,
                        p->ring_capacity);
    switch (p->phase_mode) {
        case RSSM_ADMIT_PHASE_NONE: break;
        case RSSM_ADMIT_PHASE_CONSTANT:
            if (p->phase < 0 || p->phase >= p->window)
                return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: phase must be in [0, L - 1 = %d]; got %d", op,
                                p->window - 1, p->phase);
            break;
        case RSSM_ADMIT_PHASE_SPREAD:
            if (p->phase < 0)
                return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: the spread start (phase) must be >= 0; got %d", op,
                                p->phase);
            break;
        case RSSM_ADMIT_PHASE_PER_ROW:
            if (!p->phases && p->num_rows > 0)
                return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: phases must not be NULL with per-row phases", op);
            break;
        default:
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: phase_mode must be 0 (none), 1 (constant), 2 (spread) "
                            "or 3 (per row); got %d", op, p->phase_mode);
    }
    if (p->num_rings < 0 || p->num_rings > RSSM_ADMIT_MAX_RINGS)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_rings must be in [0, %d]; got %d", op,
                        RSSM_ADMIT_MAX_RINGS, p->num_rings);
    int maxLayers = 1;
    for (int r = 0; r < p->num_rings; ++r) {
        const ReplayAdmitRing& g = p->rings[r];
        if (!g.base) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rings[%d].base must not be NULL", op, r);
        if (g.num_layers < 1 || g.num_layers > 65535)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rings[%d].num_layers must be in [1, 65535]; got %d", op, r,
                            g.num_layers);
        if (g.record_bytes < 4 || g.record_bytes % 4 != 0)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rings[%d].record_bytes must be a positive multiple of 4; "
                            "got %d", op, r, g.record_bytes);
        if ((reinterpret_cast<uintptr_t>(g.base) & 3) || (g.slot_stride & 3) || (g.layer_stride & 3) ||
            g.slot_stride < (int64_t)p->ring_capacity * g.record_bytes || g.layer_stride < 0)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rings[%d]: base and strides must be 4-byte aligned and a "
                            "slot must span ring_capacity * record_bytes = %lld bytes; got slot_stride %lld, "
                            "layer_stride %lld", op, r, (long long)p->ring_capacity * g.record_bytes,
                            (long long)g.slot_stride, (long long)g.layer_stride);
        if (g.num_layers > maxLayers) maxLayers = g.num_layers;
    }
    if (p->num_rows == 0) return RSSM_OK;
    if (!p->slots || !p->ring_origin || !p->ring_len)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: slots, ring_origin and ring_len must not be NULL", op);
    const dim3 grid(p->num_rows, p->num_rings > 0 ? p->num_rings : 1, maxLayers);
    rssm::replayAdmitKernel<<<grid, rssm::kAdmitThreads, 0, stream>>>(*p);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return setError(RSSM_ERR_CUDA, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}
