// C ABI of the ReplaySSM cursor commit (docs/design.md section 3.2 and 6). One launch per model
// step, after all layers: cursors are per slot and shared by every layer of the model.
//   standard:    if h + 1 == L: o = (o + h + 1) % C; h = 0   else: h = h + 1
//   speculative: if h + T >  L: o = (o + h) % C;     h = 0;   then h = h + a
// Rows whose cursors (or accepted count) violate the invariants are left untouched and the
// offending slot is recorded in error_slot[0] (if it is still -1); nothing is clamped.
#pragma once
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ReplayCommitParams {
    int32_t batch;          // decode rows B
    int32_t num_slots;      // S (cursor array length; slots >= S are an error)
    int32_t window;         // L
    int32_t ring_capacity;  // C >= L: L (standard mode) or L + T_max (speculative) as the caches allocate
    int32_t num_tokens;     // T of the step that just ran (1 in standard mode)
    int32_t mode;           // 0 = standard (Alg. 1/4), 1 = speculative (Alg. 2/5)
    const int32_t* state_batch_indices;  // [B] slot per row, < 0 = padding (skipped)
    const int32_t* accepted;             // [B] speculative: accepted count a in [1, T]; NULL = all T
    int32_t* ring_origin;                // [S] in/out
    int32_t* ring_len;                   // [S] in/out (h)
    int32_t* error_slot;                 // [1] or NULL: set to the first slot whose cursors or a
                                         // violate the invariants of section 3.2 (never cleared here)
} ReplayCommitParams;

int rssm_replay_commit_launch(const ReplayCommitParams* p, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
