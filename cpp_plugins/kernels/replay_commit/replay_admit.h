// C ABI of the admission of new rows into the ReplaySSM caches with a flush phase (docs/design.md 3.3).
//
// A row admitted with phase d starts with d neutral records in its ring (ring indices 0 .. d - 1) and cursors
// o = 0, h = d, so its flushes come d steps earlier than at h = 0; a neutral record changes no output
// (Mamba-2 (dt, x, B) = 0; GDN (g, u, k) = (0, 0, 1)). Rows admitted together at consecutive phases do not all
// flush on the same step. d = 0 is the plain reset (o = h = 0, empty ring).
//
// One launch writes the records of every listed ring tensor (each may hold several layers) and the cursors, for a
// list of slots: stream-ordered, no host sync, CUDA-graph safe. The caller describes each ring tensor by its base,
// byte strides and the 32-bit pattern its neutral record is made of (the records of a slot are a contiguous span
// of d * record_bytes bytes). Rows whose slot is out of range or whose phase is outside [0, L - 1], and rows whose
// slot an earlier row already names (the first of them is admitted), are left untouched and reported in
// error_slot[0] (if it is still -1); slots < 0 are skipped.
#pragma once
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RSSM_ADMIT_MAX_RINGS 8

enum {
    RSSM_ADMIT_PHASE_NONE = 0,      // d = 0 for every row (the paper's h = 0)
    RSSM_ADMIT_PHASE_CONSTANT = 1,  // d = phase for every row
    RSSM_ADMIT_PHASE_SPREAD = 2,    // d = (phase + i) % window for row i (phase: the rows admitted before)
    RSSM_ADMIT_PHASE_PER_ROW = 3,   // d = phases[i] (checked on the device: out of range -> error_slot, row skipped)
};

typedef struct ReplayAdmitRing {
    void* base;              // the ring tensor: [num_layers, S, C, ...] (layer, slot, record index)
    int64_t layer_stride;    // bytes between layers (ignored when num_layers == 1)
    int64_t slot_stride;     // bytes between slots
    int32_t record_bytes;    // bytes of one record (contiguous; records of a slot are contiguous too); % 4 == 0
    int32_t num_layers;      // >= 1
    uint32_t fill;           // the 32-bit pattern a neutral record repeats (e.g. 0; bf16 1.0 pairs 0x3F803F80)
} ReplayAdmitRing;

typedef struct ReplayAdmitParams {
    int32_t num_rows;        // n admitted rows
    int32_t num_slots;       // S (cursor array length)
    int32_t window;          // L (phases in [0, L - 1])
    int32_t ring_capacity;   // C >= L (record spans d * record_bytes stay inside a slot's C records)
    int32_t phase_mode;      // RSSM_ADMIT_PHASE_*
    int32_t phase;           // CONSTANT: d; SPREAD: the start (>= 0)
    int32_t num_rings;       // 0 .. RSSM_ADMIT_MAX_RINGS (0: cursors only)
    const int32_t* slots;    // [n] slot per row, < 0 = skipped
    const int32_t* phases;   // [n] PER_ROW only
    int32_t* ring_origin;    // [S] out: 0 for every admitted row
    int32_t* ring_len;       // [S] out: d
    int32_t* error_slot;     // [1] or NULL: the first slot found out of range, named twice or with a bad phase
    ReplayAdmitRing rings[RSSM_ADMIT_MAX_RINGS];
} ReplayAdmitParams;

int rssm_replay_admit_launch(const ReplayAdmitParams* p, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
