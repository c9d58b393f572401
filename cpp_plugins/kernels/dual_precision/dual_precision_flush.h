// C ABI of the dual-precision flush (docs/design.md section 4; paper Algorithms 3 and 6; docs/precision.md).
//
// STATUS: implemented in dual_precision_flush.cu (defines rssm_dual_precision_flush_launch). The CMake
// build of the plugins defines RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL when that source exists.
// Supported: dstate (N / K) == 128, headdim (P / V) in [1, 128], window 1..64, T 1..8; anything else
// returns RSSM_ERR_UNSUPPORTED / RSSM_ERR_INVALID_ARGUMENT with a message (rssm_last_error()).
// Shared low-precision checkpoint (the paper's one-copy baseline; torch ops only, the plugin always
// passes both copies): ckpt_hp == NULL. The single copy is then ckpt_lp (read_dtype), read by the
// flush and written with `rounding` (SR for the baseline); recurrence_dtype is ignored. With
// window = 1 (standard mode) this is the conventional per-step quantized state.
// Invalid cursors (design.md 3.2 invariant broken) leave the row untouched and report flushed = 0.
//
// One launch per layer and step, after that layer's decode kernel (which has already appended this
// step's records to the ring and read the *read* copy on non-flush rows). Rows whose flush
// predicate (computed here from the pre-step cursors, design.md 3.1) is false exit at once:
//   standard    (mode 0, T = 1):  flush iff h + 1 == L; fold records 0..h (h + 1 records)
//   speculative (mode 1, T >= 1): flush iff h + T >  L; fold records 0..h-1 (h records)
// A flushing row loads the *recurrence* checkpoint, replays the records in fp32, and casts the
// result independently into both formats: recurrence (RTN for fp32/fp16/bf16 stored exactly as
// rounded; stochastic rounding when rounding = SR) and read copy (always RTN).
// GDN two-precision rings hold raw (beta, v) and the flush re-derives u from the recurrence
// checkpoint (design.md section 4); the Mamba-2 flush replays (dt, x, B) with alpha = exp(dt * A).
//
// Shapes (B rows, S slots, C ring capacity; Mamba-2: H heads, P head dim, N state size, G groups;
// GDN: HV value heads, V value dim, HK key heads, K key dim). "State" below is [S, H, P, N] for
// Mamba-2 and [S, HV, V, K] for GDN; the last dim ("K", 128-multiple for fp8, 16-multiple for
// nvfp4) is contiguous. Bit layouts of the encoded formats: docs/formats.md.
//   ckpt_hp        State, recurrence_dtype (fp32 / fp16 / bf16 / fp8_e4m3 bytes)
//   ckpt_hp_scale  [S, H, P, N/128] fp32, only for recurrence fp8_e4m3, else NULL
//   ckpt_lp        State, read_dtype (fp16; fp8_e4m3 bytes; nvfp4: [.., K/2] bytes, 2 e2m1 per byte)
//   ckpt_lp_scale  fp8_e4m3: [S, H, P, N/128] fp32; nvfp4: [S, H, P, N/16] e4m3 bytes; else NULL
//   ckpt_lp_gscale nvfp4 only: [S, H] fp32 per-state global scale; else NULL
// Stochastic rounding word of element e: Philox4x32-10(counter = (e >> 2, slot, layer_index,
// flush_index[b]), key = (seed_lo, seed_hi))[e & 3]  (replayssm_trtllm/formats/philox.py).
// Scale tensors are contiguous; rings are contiguous ([S, C, ...] in the design layout).
#pragma once
#include <stdint.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum RssmFamily {
    RSSM_FAMILY_MAMBA2 = 0,
    RSSM_FAMILY_GDN = 1,
};

enum RssmRounding {
    RSSM_ROUNDING_RTN = 0,  // nearest, ties to even
    RSSM_ROUNDING_SR = 1,   // stochastic (Philox4x32-10 words, see above)
};

typedef struct DualPrecisionFlushParams {
    // ---- sizes
    int32_t family;            // RSSM_FAMILY_MAMBA2 / RSSM_FAMILY_GDN
    int32_t batch;             // B decode rows
    int32_t num_tokens;        // T of the step (1 in standard mode)
    int32_t num_slots;         // S
    int32_t window;            // L, 1..64
    int32_t ring_capacity;     // C >= L: L (standard mode) or L + T_max (speculative) as the caches allocate
    int32_t mode;              // 0 = standard (Alg. 1/4 + 3), 1 = speculative (Alg. 2/5 + 6)
    int32_t nheads;            // Mamba-2 H / GDN HV (state heads)
    int32_t headdim;           // Mamba-2 P / GDN V   (state rows)
    int32_t dstate;            // Mamba-2 N / GDN K   (state cols, contiguous)
    int32_t ngroups;           // Mamba-2 G / GDN HK  (heads of the shared B / k records)
    int32_t act_dtype;         // FP16 / BF16: ring_x, ring_B (Mamba-2); ring_k, ring_v (GDN)
    int32_t recurrence_dtype;  // FP32 / FP16 / BF16 / FP8_E4M3
    int32_t read_dtype;        // FP16 / FP8_E4M3 / NVFP4
    int32_t rounding;          // RssmRounding of the recurrence cast (the read copy is always RTN)
    int32_t layer_index;       // Philox counter word 2
    uint32_t seed_lo, seed_hi; // Philox key
    // ---- int64 element strides (elements of the stored type; bytes for fp8 / nvfp4 payloads)
    int64_t stride_hp_slot, stride_hp_head, stride_hp_row;  // ckpt_hp
    int64_t stride_lp_slot, stride_lp_head, stride_lp_row;  // ckpt_lp
    // ---- pointers
    const int32_t* state_batch_indices;  // [B] slot per row, < 0 = padding (skipped)
    const int32_t* ring_origin;          // [S] o, read only (commit writes cursors)
    const int32_t* ring_len;             // [S] h, read only
    const int32_t* flush_index;          // [B] Philox counter word 3 (e.g. absolute position); NULL = 0
    void* ckpt_hp;                       // recurrence checkpoint, in/out
    float* ckpt_hp_scale;                // see above
    void* ckpt_lp;                       // read copy, out (flush rows only)
    void* ckpt_lp_scale;                 // see above
    float* ckpt_lp_gscale;               // see above
    // Mamba-2 records (family 0)
    const float* A;                      // [H] fp32 (< 0)
    const float* ring_dt;                // [S, C, H] fp32
    const void* ring_x;                  // [S, C, H, P] act
    const void* ring_B;                  // [S, C, G, N] act
    // GDN two-precision records (family 1)
    const float* ring_g;                 // [S, C, HV] fp32 log-decay
    const void* ring_k;                  // [S, C, HK, K] act, raw k (normalized on use)
    const float* ring_beta;              // [S, C, HV] fp32
    const void* ring_v;                  // [S, C, HV, V] act, raw v
    // ---- outputs
    int32_t* flushed;                    // [B] 1 = row flushed, 0 = row exited, -1 = padding row
    // ---- ABI 7, optional (Mamba-2: x == NULL, GDN: q == NULL: off). Standard steps whose decode deferred the
    //      flushing rows (DualPrecisionDecodeParams.defer_flush_rows = 1): the flush folds the h committed ring
    //      records plus this step's token, read from the step inputs below (the ring does not receive it: it is
    //      folded at once, and the commit after a flush restarts the ring), and writes the flushing rows' outputs
    //      from the folded fp32 state S_t: Mamba-2 y = (C_t . S_t + D x_t) * silu(z_t); GDN o = S_t qn_t * scale
    //      (the decode's gates, normalizations and scale). Contiguous, as the decode's.
    const void* x;                       // [B, 1, H, P] act
    const void* dt_raw;                  // [B, 1, H] act or fp32 (dt_dtype); dt = softplus(dt_raw + dt_bias)
    const void* Bm;                      // [B, 1, G, N] act
    const void* Cm;                      // [B, 1, G, N] act
    const void* z;                       // [B, 1, H, P] act, or NULL (no gate)
    const float* D;                      // [H] fp32, or NULL
    const float* dt_bias;                // [H] fp32, or NULL
    void* y;                             // [B, 1, H, P] act out (flushing rows only)
    const void* q;                       // GDN [B, 1, HK, K] act
    const void* k;                       // GDN [B, 1, HK, K] act (raw; normalized as the decode does)
    const void* v;                       // GDN [B, 1, HV, V] act
    const void* a;                       // GDN [B, 1, HV] act: g = -exp(A_log) softplus(a + gdn_dt_bias)
    const void* b;                       // GDN [B, 1, HV] act: beta = sigmoid(b)
    const float* A_log;                  // GDN [HV] fp32
    const float* gdn_dt_bias;            // GDN [HV] fp32
    void* o;                             // GDN [B, 1, HV, V] act out (flushing rows only)
    int32_t dt_dtype;                    // Mamba-2: FP32, or act_dtype
    float scale;                         // GDN query scale; <= 0 means K^-0.5
} DualPrecisionFlushParams;

int rssm_dual_precision_flush_launch(const DualPrecisionFlushParams* p, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
