// Gated DeltaNet decode kernels (Qwen3.5 / Qwen3-Next linear attention), C ABI.
//
// Math (docs/design.md section 2, GDN):
//   g = -exp(A_log) * softplus(a + dt_bias), alpha = exp(g), beta = sigmoid(b)
//   qn = l2norm(q) * scale, kn = l2norm(k)           (l2norm(x) = x / sqrt(sum x^2 + 1e-6), fp32)
//   u = beta (v - alpha S_{t-1} kn),  S_t = alpha S_{t-1} + u kn^T,  o = S_t qn
// State rows v are independent: per row, S[v,:].kn and S[v,:].qn from one pass over the row.
//
// Two families:
//   GdnDecode  : conventional (state read, updated, written every token). Standard decode
//                (T tokens applied in place, T = 1 normally) or per-draft snapshots (vLLM-style
//                speculative verify: state read from column num_accepted-1 of the index table,
//                the state after draft s written to column s).
//   GdnReplay  : ReplaySSM (Algorithm 4 standard / Algorithm 5 speculative): checkpoint + ring of
//                (g, u, k) records; the state is never materialized except on flush; the ring
//                record of every token is appended; cursors are read, never written (the commit
//                kernel in replay_commit/ advances them).
//
// Both launchers: return RSSM_OK or an error code, never sync, allocate or throw; CUDA-graph safe.
// All activation tensors need a contiguous last dimension (head dim) aligned to 8 bytes; all
// other dimensions are addressed through int64 element strides.
#pragma once
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum GdnReplayMode {
    GDN_REPLAY_STANDARD = 0,     // Algorithm 4, T = 1, flush iff h + 1 == L (folds h records + token)
    GDN_REPLAY_SPECULATIVE = 1,  // Algorithm 5, 1 <= T <= 8, flush iff h + T > L (folds h records)
};

#define GDN_MAX_TOKENS 8   // T (draft tokens per verify step) at most
#define GDN_MAX_WINDOW 64  // L (replay window) at most
#define GDN_NUM_VARIANTS 7 // variant field of both params structs: 0 .. GDN_NUM_VARIANTS - 1
#define GDN_VARIANT_SPLIT 6 // GdnReplay: prep + readout kernels with a workspace (gdn_split_kernels.cuh)
#define GDN_VARIANT_WARP_ITEMS 6 // GdnDecode (seventh session): the warp-item conventional kernel (gdn_warp_decode.cu):
                                 // one token in place, head_k 128 / 256, head_v % 8 == 0; otherwise variant 5 runs
#define GDN_VARIANT_AUTO (-1) // replay only: GDN_VARIANT_SPLIT where it can run the sizes, batch x num_v_heads >=
                              // rssm_gdn_replay_split_min_batch_heads(num_tokens) and a large enough workspace is
                              // given; 5 for the standard steps its warp-item kernel runs (gdn_warp_replay.h: head_k
                              // 128, batch x num_v_heads <= 128, ...); otherwise 4 (head_k 128 / 256) or 1 (head_k 64)

typedef struct GdnDecodeParams {
    // ---- sizes ----
    int32_t batch;          // B decode rows
    int32_t num_tokens;     // T tokens of the step, 1..GDN_MAX_TOKENS
    int32_t num_heads;      // H key heads
    int32_t num_v_heads;    // HV value heads (HV % H == 0; value head hv uses key head hv / (HV/H))
    int32_t head_k;         // K in {64, 128, 256}
    int32_t head_v;         // V >= 1
    int32_t num_slots;      // S: rows of the state pool (indices >= S are an error on the device:
                            //    such rows are skipped, never written)
    int32_t snapshot;       // 0: standard (T tokens in place at state[state_indices[b]]);
                            // 1: per-draft snapshots (read state[idx[b, num_accepted[b]-1]] or
                            //    column 0 when num_accepted == NULL; write draft s to idx[b, s])
    int32_t indices_cols;   // columns of state_indices (1 when snapshot == 0; >= T otherwise)
    int32_t state_dtype;    // RSSM_DTYPE_FP32 (default) | FP16 | BF16
    int32_t act_dtype;      // RSSM_DTYPE_BF16 | FP16: q, k, v, a, b and o
    int32_t rows_per_cta;   // 0 = automatic; else value rows per CTA (multiple of the row batch)
    float scale;            // query scale; <= 0 means K^-0.5
    int32_t variant;        // kernel design (same results): 0 = register kernel (verified first),
                            // 1 = shared-memory tile kernel, tile picked per batch size,
                            // 2 = tile kernel with 32-row tiles at K = 128 (docs/kernels-gdn.md)
                            // 3, 4, 5 = stream kernels: rows in registers, column-per-lane
                            //     layout (8 warps x 16 rows, 4 x 16, 4 x 8 at K = 128), K in
                            //     {128, 256} only; rows_per_cta must be 0
    // ---- int64 element strides (last dim of every tensor is contiguous) ----
    int64_t state_stride_slot, state_stride_head, state_stride_v;  // state [S, HV, V, K]
    int64_t indices_stride_b;                                       // state_indices [B, cols]
    int64_t q_stride_b, q_stride_t, q_stride_h;                     // q [B, T, H, K]
    int64_t k_stride_b, k_stride_t, k_stride_h;                     // k [B, T, H, K]
    int64_t v_stride_b, v_stride_t, v_stride_h;                     // v [B, T, HV, V]
    int64_t a_stride_b, a_stride_t;                                 // a [B, T, HV]
    int64_t b_stride_b, b_stride_t;                                 // b [B, T, HV]
    int64_t o_stride_b, o_stride_t, o_stride_h;                     // o [B, T, HV, V]
    // ---- pointers ----
    void* state;                    // [S, HV, V, K] state_dtype, in/out
    const int32_t* state_indices;   // [B, cols] int32; < 0 = padding row (col 0) / skip write
    const int32_t* num_accepted;    // [B] int32 in [1, cols] or NULL (snapshot mode only)
    const void* q;                  // act
    const void* k;                  // act
    const void* v;                  // act
    const void* a;                  // act (raw dt input of the gate)
    const void* b;                  // act (raw beta logit)
    const float* A_log;             // [HV] fp32
    const float* dt_bias;           // [HV] fp32
    void* o;                        // [B, T, HV, V] act, out
} GdnDecodeParams;

typedef struct GdnReplayParams {
    // ---- sizes ----
    int32_t batch;          // B decode rows
    int32_t num_tokens;     // T: 1 in standard mode, 1..GDN_MAX_TOKENS in speculative mode
    int32_t num_heads;      // H
    int32_t num_v_heads;    // HV
    int32_t head_k;         // K in {64, 128, 256}
    int32_t head_v;         // V >= 1
    int32_t num_slots;      // S (cursor arrays and checkpoint pool)
    int32_t window;         // L in [1, GDN_MAX_WINDOW]
    int32_t ring_capacity;  // C: >= L (standard), >= L + T (speculative)
    int32_t mode;           // GdnReplayMode
    int32_t state_dtype;    // checkpoint: RSSM_DTYPE_FP32 (default) | FP16 | BF16
    int32_t act_dtype;      // RSSM_DTYPE_BF16 | FP16: q, k, v, a, b, o and ring_k
    int32_t u_dtype;        // ring_u: RSSM_DTYPE_FP16 (the contract) | BF16 (accuracy study only)
    int32_t rows_per_cta;   // 0 = automatic
    float scale;            // <= 0 means K^-0.5
    int32_t variant;        // kernel design (same results): GDN_VARIANT_AUTO (-1) = automatic,
                            // 0 = register kernel (verified first),
                            // 1 = shared-memory tile kernel, tile picked per batch size,
                            // 2 = tile kernel, one whole head per CTA (docs/kernels-gdn.md)
                            // 3, 4, 5 = stream kernels: rows in registers, column-per-lane
                            //     layout (8 warps x 16 rows, 4 x 16, 4 x 8 at K = 128), K in
                            //     {128, 256} only; rows_per_cta must be 0
                            // 6 = split kernels (prep + readout, docs/kernels-gdn.md "Variant 6"): K in
                            //     {128, 256}, head_v % 8 == 0, h + T <= 32 records per step (standard
                            //     window <= 32, speculative window + T <= 32), 16-byte aligned ring_u /
                            //     ring_k rows, a workspace of rssm_gdn_replay_workspace_bytes() bytes
    // ---- int64 element strides ----
    int64_t state_stride_slot, state_stride_head, state_stride_v;  // ckpt [S, HV, V, K]
    int64_t q_stride_b, q_stride_t, q_stride_h;                     // q [B, T, H, K]
    int64_t k_stride_b, k_stride_t, k_stride_h;                     // k [B, T, H, K]
    int64_t v_stride_b, v_stride_t, v_stride_h;                     // v [B, T, HV, V]
    int64_t a_stride_b, a_stride_t;                                 // a [B, T, HV]
    int64_t b_stride_b, b_stride_t;                                 // b [B, T, HV]
    int64_t o_stride_b, o_stride_t, o_stride_h;                     // o [B, T, HV, V]
    int64_t ring_g_stride_slot, ring_g_stride_rec;                  // ring_g [S, C, HV] fp32
    int64_t ring_u_stride_slot, ring_u_stride_rec, ring_u_stride_head;  // ring_u [S, C, HV, V]
    int64_t ring_k_stride_slot, ring_k_stride_rec, ring_k_stride_head;  // ring_k [S, C, H, K] act
    // ---- pointers ----
    void* state;                        // checkpoint, in/out (written on flush rows only)
    const int32_t* state_batch_indices; // [B] slot per row, < 0 = padding (skipped, untouched)
    const int32_t* ring_origin;         // [S] int32, read only
    const int32_t* ring_len;            // [S] int32 (h), read only
    float* ring_g;                      // out: records (o + h + s) % C
    void* ring_u;                       // out
    void* ring_k;                       // out (raw k bit copy, written by one CTA per key head)
    const void* q;
    const void* k;
    const void* v;
    const void* a;
    const void* b;
    const float* A_log;                 // [HV]
    const float* dt_bias;               // [HV]
    void* o;                            // [B, T, HV, V] act, out
    // ---- dual-precision use (docs/precision.md; zero = the plain replay kernel) ----
    int32_t skip_flush_rows;            // 1: rows whose flush predicate holds are left untouched (no
                                        //    output, no append): the dual-precision decode handles
                                        //    them from the recurrence copy. Stream variants 3-5 and
                                        //    the split kernels (6; 16-row read-copy items for 16-bit rows).
    int32_t pad_dp;
    float* ring_beta;                   // NULL or [S, C, HV] fp32, ring_g's layout: beta_s appended
    void* ring_v;                       // NULL or [S, C, HV, V] act, ring_u's layout: raw v_s appended
    // ---- variant 6 (kernel ABI 5) ----
    void* workspace;                    // 16-byte aligned device scratch of workspace_bytes, or NULL
    int64_t workspace_bytes;            // >= rssm_gdn_replay_workspace_bytes(p) for variant 6
} GdnReplayParams;

// Conventional decode / per-draft-snapshot verify.
int rssm_gdn_decode_launch(const GdnDecodeParams* p, cudaStream_t stream);
// ReplaySSM standard decode / speculative verify.
int rssm_gdn_replay_launch(const GdnReplayParams* p, cudaStream_t stream);
// Workspace bytes the replay step of *p needs: > 0 for variant 6 (split kernels) and for GDN_VARIANT_AUTO
// when it would pick variant 6 given a workspace; 0 otherwise.
int64_t rssm_gdn_replay_workspace_bytes(const GdnReplayParams* p);
// Workspace bytes that cover every step up to the sizes of *p (batch and num_tokens are maxima, e.g. a
// TensorRT profile's): the automatic choice picks the split kernels only where the batch is large and the
// records per step fit, both monotone in the sizes, so the predicate is taken at the maximum batch with one
// token and the size at the maximum tokens. rssm_gdn_replay_workspace_bytes() of any step with smaller or
// equal sizes is at most this; 0 when no such step can use a workspace. Host-only.
int64_t rssm_gdn_replay_workspace_bound(const GdnReplayParams* p);
// The variant GDN_VARIANT_AUTO resolves to for *p (host-only, no CUDA call); `has_workspace`: whether a
// workspace of rssm_gdn_replay_workspace_bytes(p) bytes is given.
int rssm_gdn_replay_auto_variant(const GdnReplayParams* p, int has_workspace);
// 1 when variant 5 runs the standard step of *p on the warp-item kernel (gdn_warp_replay.cu, fiftieth session), 0 when
// on the stream kernel (host-only, no CUDA call; reads RSSM_GDN_WIR as the launcher does). GDN_VARIANT_AUTO resolves
// to 5 where it is 1 (unless the split kernels take the step). Meaningful for variant 5 and AUTO (the launcher's rule: K = 128, head_v % 8 == 0, window <= 16, ring_capacity <= 32, no dual-precision
// fields, 16-byte aligned ring_k / ring_u rows, batch x num_v_heads <= 128 unless RSSM_GDN_WIR forces it).
int rssm_gdn_replay_uses_warp_items(const GdnReplayParams* p);
// GDN_VARIANT_AUTO's batch rule for the split kernels: the smallest batch x num_v_heads at which AUTO takes them for a
// step of `num_tokens` tokens (1 = the standard step; verify steps by their draft count), where they measured faster
// than stream kernel 4 or even with it (H100, fifty-second session; docs/kernels-gdn.md): 1024 at T = 1, 8192 at
// T = 2, 1024 at T = 3, 512 at T = 4-7, 256 at T = 8, or RSSM_GDN_SPLIT_MIN_BH's values where set (docs/switches.md;
// malformed: the table here, and AUTO launches fail naming it). 0 for num_tokens outside 1..GDN_MAX_TOKENS. Host-only.
// This is the rule for fp32 checkpoints; _for(num_tokens, state_dtype) gives the rule for a checkpoint dtype
// (RSSM_DTYPE_*): 16-bit checkpoints 2048 at T = 1-2, 1024 at T = 3, 512 at T = 4-7, 256 at T = 8 (fifty-third session).
int rssm_gdn_replay_split_min_batch_heads(int num_tokens);
int rssm_gdn_replay_split_min_batch_heads_for(int num_tokens, int state_dtype);

#ifdef __cplusplus
}  // extern "C"
#endif
