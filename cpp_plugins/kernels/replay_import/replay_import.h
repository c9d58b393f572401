// C ABI of the checkpoint import (docs/engine-integration.md, "Context phase: reset of a slot").
//
// After a request's prefill, its final SSM state sits in the serving engine's state pool (on the
// TensorRT-LLM engine path: RnnStateManager's `rnn_state_ptr_{i}` pool, Mamba-2 layout [H, N, P]
// per slot). The import copies it, per layer, into the ReplaySSM checkpoint pool ([S, H, R, Q]:
// Mamba-2 [H, P, N], GDN [HV, V, K]) with an optional transpose of the last two dimensions and a
// dtype cast (round to nearest even), and optionally resets the slot's cursors (ring_origin =
// ring_len = 0: empty ring). One launch per layer for a list of (source slot, destination slot)
// pairs; stream-ordered, no host sync, CUDA-graph safe.
//
// Dual-precision checkpoints (recurrence + read copy, dual_precision.h) are not covered here:
// import into the recurrence checkpoint with this kernel, then run the dual-precision flush with
// h = 0 to write the read copy.
#pragma once
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ReplayImportParams {
    // ---- sizes
    int32_t num_rows;        // n (source, destination) pairs
    int32_t num_heads;       // H (Mamba-2 heads, GDN value heads)
    int32_t dim_r;           // R: checkpoint rows per head (Mamba-2 P, GDN V)
    int32_t dim_q;           // Q: checkpoint columns (Mamba-2 N, GDN K), contiguous in dst
    int32_t src_num_slots;   // slots of the source pool (src slots >= this are skipped and reported)
    int32_t dst_num_slots;   // S: slots of the checkpoint pool and the cursor arrays
    int32_t src_dtype;       // RSSM_DTYPE_FP32 | FP16 | BF16
    int32_t dst_dtype;       // RSSM_DTYPE_FP32 | FP16 | BF16 (the checkpoint dtype)
    int32_t src_transposed;  // 0: source element (r, q) at r * src_stride_a + q * src_stride_b;
                             // 1: at q * src_stride_a + r * src_stride_b (source [H, Q, R], e.g.
                             //    TensorRT-LLM's Mamba pool [H, N, P])
    int32_t reset_cursors;   // 1: ring_origin[dst] = ring_len[dst] = 0 for every imported row
    // ---- int64 element strides
    int64_t src_stride_slot, src_stride_head, src_stride_a, src_stride_b;  // source [S_src, H, A, B]
    int64_t dst_stride_slot, dst_stride_head, dst_stride_r;                // checkpoint [S, H, R, Q]
    // ---- pointers
    const int32_t* src_slots;  // [n] source slot per row; NULL = the destination slot
    const int32_t* dst_slots;  // [n] destination slot per row, < 0 = skip the row
    const void* src;
    void* dst;
    int32_t* ring_origin;      // [S] or NULL (needed when reset_cursors = 1)
    int32_t* ring_len;         // [S] or NULL (needed when reset_cursors = 1)
    int32_t* error_slot;       // [1] or NULL: the first destination slot whose pair was out of range or named twice
} ReplayImportParams;

int rssm_replay_import_launch(const ReplayImportParams* p, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
