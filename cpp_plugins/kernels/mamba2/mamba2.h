// C ABI of the Mamba-2 decode kernels (docs/design.md sections 2, 3; docs/kernels-mamba2.md).
//
// Two families, one params struct and one launcher each:
//   Mamba2Decode  conventional decode: read the state, update it, write it, output. With T > 1 and
//                 a snapshot buffer it is the conventional speculative verify that writes one state
//                 snapshot per draft token (the per-draft baseline).
//   Mamba2Replay  ReplaySSM decode over checkpoint + ring of input records: standard mode
//                 (Algorithm 1, T = 1) and speculative mode (Algorithm 2, 1 <= T <= 8). The flush is
//                 decided per row on the device from the cursors; cursors are never written here
//                 (rssm_replay_commit_launch does that once per model step).
//
// Shapes (B rows, T tokens, H heads, P head dim, N state size, G groups, S slots, C ring capacity):
//   x, z, y   [B, T, H, P]  act (fp16/bf16), last dim contiguous, any int64 element strides above it
//   dt_raw    [B, T, H]     act or fp32 (dt_dtype), any strides
//   Bm, Cm    [B, T, G, N]  act, last dim contiguous
//   A, D, dt_bias [H]       fp32 (D and dt_bias optional: NULL = 0)
//   state     [S, H, P, N]  fp32/fp16/bf16, last dim contiguous, rows 16-byte aligned
//   ring_dt   [S, C, H] fp32, ring_x [S, C, H, P] act, ring_B [S, C, G, N] act; contiguous
//   ring_origin, ring_len [S] int32; state_batch_indices [B] int32 (< 0: padding row, skipped)
// Supported: P in {32, 64, 80, 128}, N in {64, 128, 256}, H % G == 0, 1 <= T <= 8, 1 <= L <= 64.
#pragma once
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RSSM_MAMBA2_MAX_TOKENS 8
#define RSSM_MAMBA2_MAX_WINDOW 64

// Kernel designs (params field `variant`; a performance choice, every variant computes the same
// function; docs/kernels-mamba2.md has the table):
//   0  one CTA per (P tile, head, row), cp.async tile, 128 threads (the first verified design)
//   1  persistent grid (CTAs/SM x SMs), 1 producer warp + 8 consumer warps per CTA; the producer
//      prefetches slot/cursors 32 items ahead and streams each (row, head, P-tile) item with
//      cp.async.bulk (TMA) into a 2-stage mbarrier pipeline; consumers reduce T dots at once
//   2  as 1 with 4 consumer warps (more, smaller CTAs per SM)
// Variants 1 and 2 need 16-byte aligned x/z/Bm/Cm/y rows (base pointers 16-byte aligned, element
// strides above the last dim multiples of 8) and two pipeline stages within the shared-memory limit;
// when a launch does not meet that, the launcher runs variant 0 instead (same results).
#define RSSM_MAMBA2_VARIANT_TILE 0
#define RSSM_MAMBA2_VARIANT_PERSISTENT 1
#define RSSM_MAMBA2_VARIANT_PERSISTENT_SMALL 2
// 3  replay only (Mamba2Replay): one CTA per (head, row), the checkpoint rows in registers
//    (column-per-lane layout of common/stream_rows.cuh), N in {128, 256}; rows_per_cta must be 0.
//    Mamba2Decode refuses it.
#define RSSM_MAMBA2_VARIANT_STREAM 3
// 4  replay only ("split", fourth session): two kernels per step. A prep kernel per (row, group,
//    <= 16 heads) appends the records and writes per-(row, head) output coefficients and ring parts
//    to a workspace; a readout kernel streams the checkpoint rows (persistent warps, 8 rows per item,
//    grid-strided) and folds the records on flush steps. Needs `workspace` of
//    rssm_mamba2_replay_workspace_bytes() bytes, N in {128, 256}, 8-byte aligned Cm rows and
//    16-byte aligned ring_x / ring_B; rows_per_cta must be 0.
#define RSSM_MAMBA2_VARIANT_SPLIT 4
// 4  in Mamba2Decode (seventh session): the warp-item kernel, the split readout's row layout as one
//    conventional kernel: persistent warps over items of 8 state rows of one (row, head), grid-strided,
//    rows in registers, 16-byte streaming loads / stores, no shared memory. N in {128, 256}, 16-byte
//    aligned x / z / Bm / Cm rows; rows_per_cta 0 or 8. Otherwise the launcher runs variant 2.
#define RSSM_MAMBA2_VARIANT_WARP_ITEMS 4
#define RSSM_MAMBA2_NUM_VARIANTS 5
// -1: the launcher picks the fastest verified design (rssm_mamba2_*_auto_variant): replay 3 when
//     dstate is 128/256 and batch x nheads <= 128 (one wave of CTAs or less), else 2; with a workspace
//     of rssm_mamba2_replay_workspace_bytes() bytes (which is > 0 exactly then) variant 4 where the
//     rule says 2 and the split kernels run the sizes (dstate 128/256, <= 32 records per step);
//     conventional: 4 (the warp-item kernel) for one token and dstate 128 / 256, else 2.
//     Variant 2 itself falls back to 0 when the token tensors are not 16-byte aligned.
#define RSSM_MAMBA2_VARIANT_AUTO (-1)

// Conventional decode / per-draft-snapshot verify.
typedef struct Mamba2DecodeParams {
    // ---- sizes
    int32_t batch;        // B decode rows
    int32_t num_tokens;   // T tokens per row, 1..8 (T = 1: standard decode)
    int32_t nheads;       // H
    int32_t headdim;      // P in {32, 64, 80, 128}
    int32_t dstate;       // N in {64, 128, 256}
    int32_t ngroups;      // G, H % G == 0
    int32_t num_slots;    // S: state slots; rows whose slot >= S are skipped
    int32_t state_dtype;  // RSSM_DTYPE_FP32 / FP16 / BF16 (state and snapshots)
    int32_t act_dtype;    // RSSM_DTYPE_FP16 / BF16 (x, Bm, Cm, z, y)
    int32_t dt_dtype;     // RSSM_DTYPE_FP32 or act_dtype (dt_raw)
    int32_t rows_per_cta; // P rows per CTA (variant 0) or per work item (1, 2): 0 = auto, else a
                          // multiple of rssm_mamba2_row_chunk (variant 0) or of 8 (variants 1, 2)
    int32_t variant;      // kernel design, RSSM_MAMBA2_VARIANT_* (0 = the per-tile kernel); offset 44
    // ---- int64 element strides
    int64_t stride_state_slot, stride_state_head, stride_state_p;  // state [S, H, P, N]
    int64_t stride_snap_slot, stride_snap_tok, stride_snap_head, stride_snap_p;  // snapshots
    int64_t stride_x_b, stride_x_t, stride_x_h;      // x [B, T, H, P]
    int64_t stride_dt_b, stride_dt_t, stride_dt_h;   // dt_raw [B, T, H]
    int64_t stride_B_b, stride_B_t, stride_B_g;      // Bm [B, T, G, N]
    int64_t stride_C_b, stride_C_t, stride_C_g;      // Cm [B, T, G, N]
    int64_t stride_z_b, stride_z_t, stride_z_h;      // z [B, T, H, P] (if z)
    int64_t stride_y_b, stride_y_t, stride_y_h;      // y [B, T, H, P]
    // ---- pointers
    const int32_t* state_batch_indices;  // [B] slot per row, < 0 = padding; NULL = row b uses slot b
    void* state;            // [S, H, P, N] in/out; written in place when snapshots == NULL
    void* snapshots;        // [S, T, H, P, N] or NULL: state after each token s goes to [slot, s];
                            // the state tensor is then only read (rollback = pick snapshot a-1)
    const void* x;
    const void* dt_raw;
    const void* Bm;
    const void* Cm;
    const void* z;          // NULL = no gate; else y *= silu(z)
    const float* A;         // [H] fp32 (< 0)
    const float* D;         // [H] fp32 or NULL
    const float* dt_bias;   // [H] fp32 or NULL
    void* y;                // [B, T, H, P] act out
} Mamba2DecodeParams;

// ReplaySSM decode, standard (mode 0) or speculative (mode 1).
typedef struct Mamba2ReplayParams {
    // ---- sizes
    int32_t batch;          // B
    int32_t num_tokens;     // T: 1 in standard mode, 1..8 in speculative mode
    int32_t nheads;         // H
    int32_t headdim;        // P in {32, 64, 80, 128}
    int32_t dstate;         // N in {64, 128, 256}
    int32_t ngroups;        // G
    int32_t num_slots;      // S
    int32_t window;         // L, 1..64
    int32_t ring_capacity;  // C: >= L (standard), >= L + T (speculative)
    int32_t mode;           // 0 = standard (Alg. 1), 1 = speculative (Alg. 2)
    int32_t state_dtype;    // checkpoint dtype: FP32 / FP16 / BF16
    int32_t act_dtype;      // FP16 / BF16 (x, Bm, Cm, z, y, ring_x, ring_B)
    int32_t dt_dtype;       // FP32 or act_dtype (dt_raw)
    int32_t rows_per_cta;   // 0 = auto (see Mamba2DecodeParams.rows_per_cta)
    int32_t variant;        // RSSM_MAMBA2_VARIANT_*; offset 56
    int32_t skip_flush_rows;  // offset 60 (was pad0): 1 = rows whose flush predicate holds are left
                              // untouched (no output, no append; the dual-precision decode handles
                              // them from the recurrence copy). Persistent variants 1 / 2 and the split
                              // kernels (4; read-only rows narrower than fp32 then use 16-row items).
    // ---- int64 element strides (first at offset 64)
    int64_t stride_state_slot, stride_state_head, stride_state_p;  // checkpoint [S, H, P, N]
    int64_t stride_x_b, stride_x_t, stride_x_h;
    int64_t stride_dt_b, stride_dt_t, stride_dt_h;
    int64_t stride_B_b, stride_B_t, stride_B_g;
    int64_t stride_C_b, stride_C_t, stride_C_g;
    int64_t stride_z_b, stride_z_t, stride_z_h;
    int64_t stride_y_b, stride_y_t, stride_y_h;
    // ---- pointers
    const int32_t* state_batch_indices;  // [B] slot per row (< 0 padding); NULL = slot b
    const int32_t* ring_origin;          // [S] o (read only)
    const int32_t* ring_len;             // [S] h (read only)
    void* state;            // checkpoint [S, H, P, N]; written only by flush rows (in place)
    float* ring_dt;         // [S, C, H] fp32 dt after bias + softplus
    void* ring_x;           // [S, C, H, P] act, bit copy of x
    void* ring_B;           // [S, C, G, N] act, bit copy of Bm (written once per group)
    const void* x;
    const void* dt_raw;
    const void* Bm;
    const void* Cm;
    const void* z;          // or NULL
    const float* A;
    const float* D;         // or NULL
    const float* dt_bias;   // or NULL
    void* y;                // [B, T, H, P] act out; rows with invalid cursors get NaN
    // ---- scratch (variant 4 only; NULL / 0 otherwise): 16-byte aligned device memory of at least
    //      rssm_mamba2_replay_workspace_bytes(p) bytes, owned by the caller, reused every step
    void* workspace;
    int64_t workspace_bytes;
} Mamba2ReplayParams;

int rssm_mamba2_decode_launch(const Mamba2DecodeParams* p, cudaStream_t stream);
// The variant RSSM_MAMBA2_VARIANT_AUTO resolves to (host-only, no CUDA call).
int rssm_mamba2_replay_auto_variant(int32_t batch, int32_t nheads, int32_t dstate);
int rssm_mamba2_decode_auto_variant(int32_t batch, int32_t nheads, int32_t dstate);
int rssm_mamba2_replay_launch(const Mamba2ReplayParams* p, cudaStream_t stream);
// Workspace bytes the launch of *p needs: > 0 for variant 4, and for the auto variant when it would
// pick variant 4 given that workspace; 0 otherwise. Host-only; reads only size / mode / variant fields.
int64_t rssm_mamba2_replay_workspace_bytes(const Mamba2ReplayParams* p);
// Workspace bytes that cover every launch up to the sizes of *p (batch and num_tokens are maxima, e.g. a
// TensorRT profile's): the automatic choice picks variant 4 only where the batch is large and the records
// per step fit, both monotone in the sizes, so the predicate is taken at the maximum batch with one token
// and the size at the maximum tokens. rssm_mamba2_replay_workspace_bytes() of any launch with smaller or
// equal sizes is at most this; 0 when no such launch can use a workspace. Host-only.
int64_t rssm_mamba2_replay_workspace_bound(const Mamba2ReplayParams* p);

// P rows one CTA handles per chunk for a state dtype and N (the granularity of rows_per_cta);
// 0 for an unsupported combination. Exposed for benchmarks that sweep rows_per_cta.
int rssm_mamba2_row_chunk(int32_t state_dtype, int32_t dstate);

#ifdef __cplusplus
}  // extern "C"
#endif
