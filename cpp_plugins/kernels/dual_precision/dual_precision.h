// C ABI of the dual-precision decode step and the state codec (docs/precision.md; paper Algorithms 3
// and 6). The flush has its own header (dual_precision_flush.h). Per layer and step:
//   1. rssm_dual_precision_decode_launch: per row, decides the flush from the pre-step cursors
//      (design.md 3.1), appends this step's records (GDN: also raw beta and v when ring_beta /
//      ring_v are given) and writes the outputs, output-only (Eq. 6 / 11), from the READ copy on
//      non-flush rows and from the RECURRENCE copy on flush rows (Alg. 3 line 3: pi = HP if flush).
//      No checkpoint is written.
//   2. rssm_dual_precision_flush_launch: flushing rows fold their records into both copies.
//   3. once per model step: rssm_replay_commit_launch (cursors).
// Standard mode, ABI 7: with defer_flush_rows = 1 step 1 skips the flushing rows (no outputs, no records) and
// step 2, given this step's inputs (DualPrecisionFlushParams.x ... / q ...), folds their token from the inputs
// and writes their outputs from the folded fp32 state: one read of the recurrence copy instead of two.
// Shared low-precision checkpoint (one copy): ckpt_hp == NULL; every row reads ckpt_lp.
//
// Shapes (B rows, T tokens, S slots, C ring capacity). Mamba-2: H heads, P head dim, N = 128 state
// size, G groups; GDN: HV value heads, V value dim, HK key heads, K = 128 key dim.
// All activations and rings are contiguous in the design layout:
//   Mamba-2: x, z, y [B, T, H, P] act; dt_raw [B, T, H] act or fp32; Bm, Cm [B, T, G, N] act;
//            A, D, dt_bias [H] fp32 (D, dt_bias optional); ring_dt [S, C, H] fp32,
//            ring_x [S, C, H, P] act, ring_B [S, C, G, N] act.
//   GDN:     q, k [B, T, HK, K] act; v, o [B, T, HV, V] act; a, b [B, T, HV] act; A_log, dt_bias [HV]
//            fp32; ring_g [S, C, HV] fp32, ring_u [S, C, HV, V] fp16, ring_k [S, C, HK, K] act,
//            ring_beta [S, C, HV] fp32 and ring_v [S, C, HV, V] act (two-precision records; NULL = off).
// Checkpoint copies: as in dual_precision_flush.h (payload strides in elements, bytes for fp8 /
// nvfp4; scale tensors contiguous). The read copy may also be FP32 / FP16 / BF16 (baselines).
// Supported: N = K = 128, P / V in [1, 128] (multiple of 8), T in [1, 8], L in [1, 64].
#pragma once
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RSSM_DP_MAX_TOKENS 8
#define RSSM_DP_MAX_WINDOW 64

typedef struct DualPrecisionDecodeParams {
    // ---- sizes
    int32_t family;            // RSSM_FAMILY_MAMBA2 (0) / RSSM_FAMILY_GDN (1)
    int32_t batch;             // B decode rows
    int32_t num_tokens;        // T (1 in standard mode)
    int32_t num_slots;         // S
    int32_t window;            // L, 1..64
    int32_t ring_capacity;     // C >= L (standard), >= L + T (speculative)
    int32_t mode;              // 0 = standard, 1 = speculative
    int32_t nheads;            // Mamba-2 H / GDN HV
    int32_t headdim;           // Mamba-2 P / GDN V
    int32_t dstate;            // Mamba-2 N / GDN K (128)
    int32_t ngroups;           // Mamba-2 G / GDN HK
    int32_t act_dtype;         // FP16 / BF16
    int32_t recurrence_dtype;  // ckpt_hp: FP32 / FP16 / BF16 / FP8_E4M3 (read on flush rows)
    int32_t read_dtype;        // ckpt_lp: FP32 / FP16 / BF16 / FP8_E4M3 / NVFP4 (read on non-flush rows)
    int32_t dt_dtype;          // Mamba-2 dt_raw: FP32 or act_dtype
    float scale;               // GDN query scale; <= 0 means K^-0.5
    // ---- int64 element strides of the checkpoint payloads (bytes for fp8 / nvfp4)
    int64_t stride_hp_slot, stride_hp_head, stride_hp_row;
    int64_t stride_lp_slot, stride_lp_head, stride_lp_row;
    // ---- pointers
    const int32_t* state_batch_indices;  // [B] slot per row, < 0 = padding (skipped)
    const int32_t* ring_origin;          // [S] read only
    const int32_t* ring_len;             // [S] read only
    const void* ckpt_hp;                 // recurrence copy (NULL = shared mode: ckpt_lp on every row)
    const float* ckpt_hp_scale;          // fp8 recurrence: [S, H, P, N/128] fp32
    const void* ckpt_lp;                 // read copy
    const void* ckpt_lp_scale;           // fp8: [S, H, P, N/128] fp32; nvfp4: [S, H, P, N/16] e4m3 bytes
    const float* ckpt_lp_gscale;         // nvfp4: [S, H] fp32
    // Mamba-2 (family 0)
    const void* x;
    const void* dt_raw;
    const void* Bm;
    const void* Cm;
    const void* z;                       // NULL = no gate
    const float* A;
    const float* D;                      // or NULL
    const float* dt_bias;                // or NULL
    float* ring_dt;                      // out: records (o + h + s) % C
    void* ring_x;
    void* ring_B;                        // written by the first head of each group
    void* y;                             // [B, T, H, P] act out
    // GDN (family 1)
    const void* q;
    const void* k;
    const void* v;
    const void* a;
    const void* b;
    const float* A_log;
    const float* gdn_dt_bias;
    float* ring_g;
    void* ring_u;                        // fp16
    void* ring_k;                        // written by the first value head of each key head
    float* ring_beta;                    // or NULL
    void* ring_v;                        // or NULL
    void* o;                             // [B, T, HV, V] act out
    // ---- split path (ABI 6): rssm_dual_precision_decode_workspace_bytes(p) bytes owned by the caller,
    //      reused every step, or NULL (the split path is then not taken; results are the same).
    void* workspace;
    int64_t workspace_bytes;
    // ---- ABI 7: 1 = the flushing rows are left to the flush (Mamba-2, standard mode): neither their outputs nor
    //      their records are written here; rssm_dual_precision_flush_launch then takes this step's inputs and y
    //      (DualPrecisionFlushParams.x ...). 0 = the decode handles every row (as before ABI 7).
    int32_t defer_flush_rows;
    int32_t pad_abi7;
} DualPrecisionDecodeParams;

// Encode (direction 0: x fp32 -> data/scale/gscale) or decode (direction 1: -> x fp32) of
// num_states contiguous states [num_states, nheads, headdim, dstate] in one format, with the kernels'
// own device codec (GPU parity tests against replayssm_trtllm/formats). SR word of element e of
// state s: Philox(counter = (e >> 2, slot_ids[s], layer_index, flush_index[s]), key = seed)[e & 3].
typedef struct DualPrecisionCodecParams {
    int32_t direction;       // 0 = encode, 1 = decode
    int32_t num_states;      // S
    int32_t nheads;          // H
    int32_t headdim;         // P in [1, 128]
    int32_t dstate;          // 128
    int32_t fmt;             // RSSM_DTYPE_*
    int32_t rounding;        // RssmRounding (encode)
    int32_t layer_index;     // Philox counter word 2
    uint32_t seed_lo, seed_hi;
    const int32_t* slot_ids;     // [S] counter word 1 or NULL (= s)
    const int32_t* flush_index;  // [S] counter word 3 or NULL (= 0)
    float* x;                // [S, H, P, N] fp32, contiguous
    void* data;              // payload, contiguous ([.., N/2] bytes for nvfp4)
    void* scale;             // fp8: [S, H, P, N/128] fp32; nvfp4: [S, H, P, N/16] bytes
    float* gscale;           // nvfp4: [S, H] fp32
} DualPrecisionCodecParams;

int rssm_dual_precision_decode_launch(const DualPrecisionDecodeParams* p, cudaStream_t stream);
// Workspace of the split path for these sizes (family, batch, num_tokens, nheads, headdim, window, mode;
// the path runs the non-flush rows of a large batch on the replay split kernels: Mamba-2 variant 4,
// docs/precision.md), 0 where that path cannot run them. Monotone in batch and num_tokens, so the value
// at the largest sizes bounds every smaller launch. Host-only.
int64_t rssm_dual_precision_decode_workspace_bytes(const DualPrecisionDecodeParams* p);
// The read path the decode launch of p takes for its non-flush rows (host-only; reads RSSM_DP_DECODE_PATH as the
// launch does): 0 = tile kernel, 1 = replay stream kernel (16-bit read copies), 2 = split kernels (needs the
// workspace above, and for GDN slot indices); -1 where the launch would refuse the choice (an unknown
// RSSM_DP_DECODE_PATH, a forced split path without its workspace) or p is NULL / of no family. Other argument
// checks are the launch's.
int rssm_dual_precision_decode_path(const DualPrecisionDecodeParams* p);
// The smallest batch x nheads at which the automatic rule takes the split path (with its workspace; GDN also needs
// slot indices), per family (RSSM_FAMILY_*), read format (RSSM_DTYPE_*), tokens per step and head dim (Mamba-2 FP8
// only; GDN ignores it) (measured, docs/precision.md "Fifty-third session"); 0 outside num_tokens 1..8 or for no
// family. Host-only.
int rssm_dual_precision_split_min_batch_heads(int family, int read_dtype, int num_tokens, int headdim);
int rssm_dual_precision_codec_launch(const DualPrecisionCodecParams* p, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
