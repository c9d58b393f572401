// Host side of the Mamba-2 families: field validation, tile-size choice, dispatch, launch.
// Never syncs, allocates or throws; on error returns a status and sets rssm_last_error().
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "common/read_mma.cuh"
#include "common/read_rows.cuh"
#include "mamba2/mamba2.h"
#include "mamba2/mamba2_decode_kernel.cuh"
#include "common/env_switch.h"
#include "common/offsets32.h"
#include "common/pdl.h"
#include "mamba2/mamba2_dispatch.h"
#include "mamba2/mamba2_persistent.cuh"
#include "mamba2/mamba2_replay_kernel.cuh"

namespace rssm {
namespace mamba2 {
namespace {

constexpr size_t kTileBytes = 40 * 1024;  // checkpoint bytes one CTA stages (auto tile choice)

const char* dtypeName(int d) {
    switch (d) {
        case RSSM_DTYPE_FP32: return "fp32";
        case RSSM_DTYPE_FP16: return "fp16";
        case RSSM_DTYPE_BF16: return "bf16";
        case RSSM_DTYPE_FP8_E4M3: return "fp8_e4m3";
        case RSSM_DTYPE_NVFP4: return "nvfp4";
        default: return "unknown";
    }
}

int stateBytes(int d) { return d == RSSM_DTYPE_FP32 ? 4 : 2; }

int rowChunk(int stateDtype, int N) {
    if (N != 64 && N != 128 && N != 256) return 0;
    if (stateDtype == RSSM_DTYPE_FP32) {
        return N == 64 ? Layout<float, 64>::kChunk : N == 128 ? Layout<float, 128>::kChunk : Layout<float, 256>::kChunk;
    }
    if (stateDtype == RSSM_DTYPE_FP16 || stateDtype == RSSM_DTYPE_BF16) {
        return N == 64 ? Layout<__half, 64>::kChunk : N == 128 ? Layout<__half, 128>::kChunk : Layout<__half, 256>::kChunk;
    }
    return 0;
}

int smCount() {
    static int cached[64] = {0};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
    if (cached[dev] == 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || v <= 0) v = 132;
        cached[dev] = v;
    }
    return cached[dev];
}

int optinSmem() {
    static int cached[64] = {0};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 48 * 1024;
    if (cached[dev] == 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess || v <= 0)
            v = 48 * 1024;
        cached[dev] = v;
    }
    return cached[dev];
}

// Raises the dynamic shared-memory limit of `func` (once per kernel) when a launch needs > 48 KB.
// Opts `func` in to `bytes` of dynamic shared memory. The 48 KB default covers static plus dynamic
// shared memory together, so the static part (the stream kernel has up to 14 KB) counts too.
bool allowSmem(const void* func, size_t bytes) {
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, func) != cudaSuccess) return false;
    if (bytes + attr.sharedSizeBytes <= 48 * 1024) return true;
    if (bytes + attr.sharedSizeBytes > (size_t)optinSmem()) return false;
    // static + dynamic may not exceed the opt-in limit: raise the dynamic limit to what is left
    const int dynMax = optinSmem() - (int)attr.sharedSizeBytes;
    static const void* raised[64] = {nullptr};
    for (int i = 0; i < 64; ++i) {
        if (raised[i] == func) return true;
        if (raised[i] == nullptr) {
            if (cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, dynMax) != cudaSuccess)
                return false;
            raised[i] = func;
            return true;
        }
    }
    return cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, dynMax) == cudaSuccess;
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Checks shared by both families. `op` prefixes every message.
int checkCommon(const char* op, int batch, int T, int H, int P, int N, int G, int S, int stateDtype,
                int actDtype, int dtDtype, int rowsPerCta, int variant) {
    if (variant < 0 || variant >= RSSM_MAMBA2_NUM_VARIANTS)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant must be in [0, %d]; got %d", op,
                        RSSM_MAMBA2_NUM_VARIANTS - 1, variant);
    if (batch < 0 || batch > 65535)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: batch must be in [0, 65535]; got %d", op, batch);
    if (T < 1 || T > RSSM_MAMBA2_MAX_TOKENS)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_tokens must be in [1, %d]; got %d", op,
                        RSSM_MAMBA2_MAX_TOKENS, T);
    if (P != 32 && P != 64 && P != 80 && P != 128)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: headdim must be one of {32, 64, 80, 128}; got %d", op, P);
    if (N != 64 && N != 128 && N != 256)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: dstate must be one of {64, 128, 256}; got %d", op, N);
    if (H < 1 || H > 65535 || G < 1 || H % G != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: nheads must be in [1, 65535] and a multiple of ngroups; got nheads=%d ngroups=%d",
                        op, H, G);
    if (S < 1) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_slots must be >= 1; got %d", op, S);
    if (stateDtype != RSSM_DTYPE_FP32 && stateDtype != RSSM_DTYPE_FP16 && stateDtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: state_dtype must be fp32, fp16 or bf16; got %s (%d)", op,
                        dtypeName(stateDtype), stateDtype);
    if (actDtype != RSSM_DTYPE_FP16 && actDtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: act_dtype must be fp16 or bf16; got %s (%d)", op,
                        dtypeName(actDtype), actDtype);
    if (dtDtype != RSSM_DTYPE_FP32 && dtDtype != actDtype)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: dt_dtype must be fp32 or act_dtype (%s); got %s (%d)", op,
                        dtypeName(actDtype), dtypeName(dtDtype), dtDtype);
    const int chunk = variant == RSSM_MAMBA2_VARIANT_TILE ? rowChunk(stateDtype, N) : 8;
    if (rowsPerCta != 0 && (rowsPerCta < chunk || rowsPerCta % chunk != 0))
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: rows_per_cta must be 0 (auto) or a positive multiple of %d (variant %d, state %s, N=%d); "
                        "got %d",
                        op, chunk, variant, dtypeName(stateDtype), N, rowsPerCta);
    if (rowsPerCta > 128)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rows_per_cta must be <= 128; got %d", op, rowsPerCta);
    return RSSM_OK;
}

int checkState(const char* op, const char* name, const void* ptr, int stateDtype, int64_t sSlot, int64_t sHead,
               int64_t sP) {
    if (!ptr) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: '%s' must not be NULL", op, name);
    const int64_t vecElems = 16 / stateBytes(stateDtype);
    if (!aligned16(ptr) || sSlot % vecElems || sHead % vecElems || sP % vecElems)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: '%s' must be 16-byte aligned with strides multiple of %lld elements; got ptr=%p "
                        "strides (slot %lld, head %lld, p %lld)",
                        op, name, (long long)vecElems, ptr, (long long)sSlot, (long long)sHead, (long long)sP);
    return RSSM_OK;
}

// Launches func(params) or, with `extra`, func(params, *extra) (the stream kernel's int argument, the
// split readout's read-copy scales).
int launch(const char* op, const void* func, dim3 grid, int threads, size_t smem, void* params, cudaStream_t stream,
           void* extra = nullptr, bool dependent = false) {
    if (!func) return setError(RSSM_ERR_UNSUPPORTED, "%s: no kernel for this combination", op);
    if (!allowSmem(func, smem))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: needs %zu bytes of shared memory per CTA; the device allows %d "
                        "(lower rows_per_cta or the window)", op, smem, optinSmem());
    void* args[] = {params, extra};
    cudaError_t e = launchMaybeDependent(func, grid, dim3(threads), smem, stream, args, dependent);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess)
        return setError(RSSM_ERR_CUDA, "%s: kernel launch failed: %s (grid %u x %u x %u, smem %zu)", op,
                        cudaGetErrorString(e), grid.x, grid.y, grid.z, smem);
    return RSSM_OK;
}

const void* pick(bool replay, int stateDtype, int N) {
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return replay ? replayKernel_fp32(N) : decodeKernel_fp32(N);
        case RSSM_DTYPE_FP16: return replay ? replayKernel_fp16(N) : decodeKernel_fp16(N);
        case RSSM_DTYPE_BF16: return replay ? replayKernel_bf16(N) : decodeKernel_bf16(N);
        default: return nullptr;
    }
}

// Auto tile: one chunk per CTA when the grid is small (parallelism for small batches); otherwise the
// largest multiple of the chunk whose checkpoint tile fits kTileBytes, up to the whole head
// (amortizes the per-CTA prologue; the whole tile is in flight at once through cp.async).
int autoRows(int batch, int H, int P, int N, int stateBytesPerElem, int chunk) {
    const int full = (P + chunk - 1) / chunk * chunk;
    int big = (int)(kTileBytes / ((size_t)N * stateBytesPerElem)) / chunk * chunk;
    if (big < chunk) big = chunk;
    if (big > full) big = full;
    const long long ctas = (long long)batch * H * ((P + chunk - 1) / chunk);
    return ctas >= 4LL * smCount() * 8 ? big : chunk;
}


// ------------------------------------------------------------------ persistent variants (1, 2)
// The persistent kernels use sm_90 bulk copies and mbarriers: usable only when the device is sm_90+
// and the kernel was compiled from sm_90+ PTX (a library built for sm_80 only traps in them).
bool persistentUsable(const void* func) {
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, func) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return attr.ptxVersion >= 90 && attr.binaryVersion >= 90;
}

int consumerWarps(int variant) { return variant == RSSM_MAMBA2_VARIANT_PERSISTENT ? 8 : 4; }

const void* pickPersistent(bool replay, int stateDtype, int N, int nc) {
    switch (stateDtype) {
        case RSSM_DTYPE_FP32: return replay ? replayPersistentKernel_fp32(N, nc) : decodePersistentKernel_fp32(N, nc);
        case RSSM_DTYPE_FP16: return replay ? replayPersistentKernel_fp16(N, nc) : decodePersistentKernel_fp16(N, nc);
        case RSSM_DTYPE_BF16: return replay ? replayPersistentKernel_bf16(N, nc) : decodePersistentKernel_bf16(N, nc);
        default: return nullptr;
    }
}

// Token tensors the producer copies with cp.async.bulk: 16-byte aligned base, element strides above
// the (contiguous) last dim multiples of 8 16-bit elements.
bool bulkRows(const void* ptr, int64_t s0, int64_t s1, int64_t s2) {
    return ptr == nullptr || (aligned16(ptr) && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0);
}

constexpr size_t kSmPerSm = 228 * 1024;  // shared memory per SM (H100 / H200), 1 KB reserved per CTA

// Rows per work item for the persistent kernels when rows_per_cta = 0: the whole head, halved
// (rounded up to 8) while two CTAs per SM do not fit or there are fewer items than 2 x SMs.
template <typename PlanFn>
int autoRowsPersistent(long long batchHeads, int P, PlanFn planBytes) {
    int rows = (P + 7) / 8 * 8;
    for (;;) {
        const int next = ((rows + 1) / 2 + 7) / 8 * 8;
        if (next >= rows) break;
        const size_t bytes = planBytes(rows);
        const long long items = batchHeads * ((P + rows - 1) / rows);
        const bool smemTight = 2 * (bytes + 1024) > kSmPerSm;
        const bool fewItems = items < 2LL * smCount();
        if (!smemTight && !fewItems) break;
        rows = next;
    }
    return rows;
}

// Grid of a persistent launch: every resident CTA (occupancy x SMs), at most one per item.
// (A host query, no stream work; cached: rssm::occupancyPerSm.)
int persistentGrid(const void* func, int threads, size_t smem, long long items) {
    const long long g = (long long)occupancyPerSm(func, threads, smem) * smCount();
    return (int)(items < g ? items : g);
}

// Launches the persistent kernel (variants 1 / 2) of decode (replay = false) or replay when the inputs
// allow it (tokensAligned: 16-byte rows for the bulk copies; a kernel for this dtype / N; the plan fits
// the opt-in shared memory). Picks rows_per_cta when it is 0. Returns false when the caller must fall
// back to variant 0; otherwise *status is the launch result.
template <typename Params, typename PlanFn>
bool launchPersistent(const char* op, bool replay, bool tokensAligned, PlanFn planBytes, Params& q,
                      cudaStream_t stream, int* status) {
    if (q.rows_per_cta == 0) q.rows_per_cta = autoRowsPersistent((long long)q.batch * q.nheads, q.headdim, planBytes);
    const size_t smem = planBytes(q.rows_per_cta);
    const void* func = pickPersistent(replay, q.state_dtype, q.dstate, consumerWarps(q.variant));
    if (!(tokensAligned && func && persistentUsable(func) && smem <= (size_t)optinSmem())) return false;
    const int threads = (consumerWarps(q.variant) + 1) * 32;
    if (!allowSmem(func, smem)) {
        *status = setError(RSSM_ERR_CUDA, "%s: cannot raise the shared-memory limit to %zu bytes", op, smem);
        return true;
    }
    const long long items = (long long)q.batch * q.nheads * ((q.headdim + q.rows_per_cta - 1) / q.rows_per_cta);
    const dim3 grid(persistentGrid(func, threads, smem, items));
    *status = launch(op, func, grid, threads, smem, &q, stream);
    return true;
}

// Rules of the variants that lay out their own rows over N = 128-column quads (3: stream kernel,
// 4: split kernels): dstate 128 / 256 and rows_per_cta 0.
int checkOwnRowsVariant(const char* op, int variant, const char* name, int dstate, int rowsPerCta) {
    if (dstate != 128 && dstate != 256)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d (%s) supports dstate 128 or 256; got %d "
                        "(use variant 0, 1 or 2)", op, variant, name, dstate);
    if (rowsPerCta != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant %d picks its own rows; rows_per_cta must be 0; got %d",
                        op, variant, rowsPerCta);
    return RSSM_OK;
}

// Variant 4 (split) input rules: those above, a large enough workspace, 8-byte aligned Cm rows (the
// readout loads 4 C values per lane), headdim % 8 == 0 and <= 32 records per step.
int checkSplit(const char* op, const Mamba2ReplayParams& p) {
    const int st = checkOwnRowsVariant(op, RSSM_MAMBA2_VARIANT_SPLIT, "split kernels", p.dstate, p.rows_per_cta);
    if (st) return st;
    const int64_t need = rssm_mamba2_replay_workspace_bytes(&p);
    if (p.batch > 0 && (!p.workspace || p.workspace_bytes < need))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant 4 needs a workspace of %lld bytes "
                        "(rssm_mamba2_replay_workspace_bytes); got ptr=%p bytes=%lld", op, (long long)need,
                        p.workspace, (long long)p.workspace_bytes);
    if ((reinterpret_cast<uintptr_t>(p.Cm) & 7u) || p.stride_C_b % 4 || p.stride_C_t % 4 || p.stride_C_g % 4)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant 4 needs Cm rows 8-byte aligned (pointer 8-byte "
                        "aligned, strides multiples of 4 elements); got ptr=%p strides (b %lld, t %lld, g %lld)",
                        op, p.Cm, (long long)p.stride_C_b, (long long)p.stride_C_t, (long long)p.stride_C_g);
    if (p.headdim % 8)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant 4 needs headdim %% 8 == 0; got %d", op, p.headdim);
    if ((long long)p.batch * p.nheads * ((p.headdim + splitRows() - 1) / splitRows()) >= (1LL << 31))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant 4 needs batch x nheads x headdim / %d < 2^31; got %d x %d x %d",
                        op, splitRows(), p.batch, p.nheads, p.headdim);
    const int records = p.mode == 0 ? p.window : p.window + p.num_tokens;
    if (records > splitMaxRecords())
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant 4 (split kernels) handles at most %d records per step "
                        "(standard: window <= %d; speculative: window + num_tokens <= %d); got %d (use variant 0, 1, "
                        "2 or 3)", op, splitMaxRecords(), splitMaxRecords(), splitMaxRecords(), records);
    return RSSM_OK;
}

// Speculative steps of at least this many tokens run the tensor-core readout by default. Measured side by side
// (ninth session, B = 256, L = 16, docs/kernels-mamba2.md): T = 2 10-25 us slower than the plain readout on Super /
// Nano, T = 4 22-69 us faster, T = 8 187-290 us faster; T = 3 not measured.
constexpr int kMmaReadoutMinTokens = 4;

int launchSplitReadout(const char* op, Mamba2ReplayParams& q, stream::ReadCopyScales rc, cudaStream_t stream,
                       const void* prep, dim3 prepGrid, int prepThreads, size_t prepSmem);

int launchSplit(const char* op, Mamba2ReplayParams& q, stream::ReadCopyScales rc, cudaStream_t stream) {
    const int hpg = q.nheads / q.ngroups;
    const dim3 prepGrid((hpg + splitHeadsPerPrep() - 1) / splitHeadsPerPrep(), q.ngroups, q.batch);
    const size_t prepSmem = splitPrepSmemBytes(q.window, q.num_tokens, q.dstate, q.headdim, hpg);
    // Prep occupancy. The default prep kernel (256 threads, 40 registers, 6 CTAs / SM) needs 2.6 waves at B = 256
    // (G = 8); the 128-thread one (4 heads per warp, 32 registers, 16 CTAs / SM) runs the same grid in one wave.
    // Measured side by side (eighth session, standard decode, docs/kernels-mamba2.md): B = 256 2-5 us faster per
    // step, B = 1 2.7 us slower. So the automatic choice takes the one-wave kernel when the default needs more
    // than one wave. RSSM_MAMBA2_SPLIT_PREP (read per launch, A/B timing) forces "default", "lb8" (256 threads
    // with >= 8 CTAs / SM) or "w4".
    const char* pp = getenv("RSSM_MAMBA2_SPLIT_PREP");
    // x in 16-byte pieces (the speculative prep's shared-memory x staging needs it; splitPrepKernel)
    const bool xAligned = q.x && q.headdim % 8 == 0 && bulkRows(q.x, q.stride_x_b, q.stride_x_t, q.stride_x_h) &&
                          bulkRows(q.ring_x, 0, 0, 0);
    // exactly four tokens at dstate 128 with 8-byte aligned B / C rows: the four-token prep with T and N at compile time.
    // Only B is checked here: replayValidate has already required 8-byte aligned C rows (checkSplit, variant 4's rule)
    // and a 16-byte aligned ring_B.
    const bool exactFour = q.mode == 1 && q.num_tokens == 4 && q.dstate == 128 && ((uintptr_t)q.Bm % 8) == 0 &&
                           q.stride_B_b % 4 == 0 && q.stride_B_g % 4 == 0 && q.stride_B_t % 4 == 0;
    int prepThreads = 0;
    int prepOcc = 0;
    // Standard steps take the lean one-token prep (thirteenth session) where its 16-byte pieces are aligned;
    // RSSM_MAMBA2_SPLIT_PREP=lb8|w4|default keeps the previous kernels (A/B timing). (A one-warp prep with lane =
    // head measured slower: 14.7 vs 11.7 us alone under ncu, and 496 vs 332 us per staggered step in the bench with
    // the readout unchanged under ncu: an interaction with the readout launched beside it (PDL), probably the
    // shared-memory carve-out of its 4.9 KB per 32-thread CTA; docs/kernels-mamba2.md, thirteenth session.)
    const void* lean = q.mode == 0 && q.num_tokens == 1 ? splitPrepLeanKernel(q.dstate, q.act_dtype) : nullptr;
    if (lean && !(pp && (strcmp(pp, "lb8") == 0 || strcmp(pp, "w4") == 0 || strcmp(pp, "default") == 0))) {
        auto a16 = [](const void* ptr) { return ((uintptr_t)ptr % 16) == 0; };
        const bool aligned = a16(q.Bm) && q.stride_B_b % 8 == 0 && q.stride_B_g % 8 == 0 && a16(q.Cm) &&
                             q.stride_C_b % 8 == 0 && q.stride_C_g % 8 == 0 && a16(q.x) && q.stride_x_b % 8 == 0 &&
                             q.stride_x_h % 8 == 0 && a16(q.ring_B) && a16(q.ring_x) && q.headdim <= 128 &&
                             (long long)q.ring_capacity * q.nheads * q.headdim < (1LL << 31) &&
                             (long long)q.ring_capacity * q.ngroups * q.dstate < (1LL << 31);
        if (aligned) {
            // The one-launch small-batch step (mamba2_split_fused.cuh; fourteenth session): one CTA per (row, head)
            // does the prep's work for its head and the readout of its rows, where the B x H CTAs fit one wave
            // (B = 1 at the model shapes), the checkpoint is writable (no skip_flush_rows) and the ring holds at most
            // 32 records (one ring row per lane: the kernel loads every ring row before the cursors arrive). RSSM_MAMBA2_FUSED=0
            // (read per launch; A/B timing) keeps the two kernels; =1 takes it at any batch (tests). Flushes fold on
            // tensor cores from the rows the record dots loaded (dstate 128, bf16 activations; fifteenth session)
            // unless RSSM_MAMBA2_FUSED_FOLD=cuda (read per launch; A/B timing and tests).
            const char* fe = getenv("RSSM_MAMBA2_FUSED");
            const char* ff = getenv("RSSM_MAMBA2_FUSED_FOLD");
            const bool fusedOff = fe && strcmp(fe, "0") == 0, fusedOn = fe && strcmp(fe, "1") == 0;
            const bool mmaFold = splitFusedMmaFoldRuns(q.dstate, q.act_dtype) && !(ff && strcmp(ff, "cuda") == 0);
            const void* fk = !fusedOff && !q.skip_flush_rows && q.batch <= 65535 && q.ring_capacity <= splitMaxRecords()
                                 ? splitFusedKernel(q.state_dtype, q.dstate, q.act_dtype, mmaFold)
                                 : nullptr;
            if (fk) {
                const int warps = (q.headdim + splitRows() - 1) / splitRows();
                const size_t smem = splitFusedSmemBytes(q.dstate, warps, mmaFold);
                const long long ctas = (long long)q.batch * q.nheads;
                if (allowSmem(fk, smem) && (fusedOn || ctas <= persistentGrid(fk, warps * 32, smem, ctas)))
                    return launch(op, fk, dim3(q.nheads, q.batch), warps * 32, smem, &q, stream, nullptr,
                                  rssm::pdlChainEnabled());
            }
            return launchSplitReadout(op, q, rc, stream, lean, prepGrid, splitPrepLeanThreads(), 0);
        }
    }
    if (pp && strcmp(pp, "lb8") == 0) {
        prepOcc = 1;
    } else if (pp && strcmp(pp, "w4") == 0) {
        prepOcc = 2;
    } else if (pp && strcmp(pp, "lb5") == 0) {
        prepOcc = 4;  // four tokens: capped for 5 CTAs per SM (A/B)
    } else if (pp && strcmp(pp, "default") == 0) {
        prepOcc = 3;  // the uncapped kernels (eight tokens included)
    } else {
        const void* dflt = splitPrepKernel(q.mode, q.num_tokens, 0, &prepThreads, xAligned, exactFour);
        const long long ctas = (long long)prepGrid.x * prepGrid.y * prepGrid.z;
        if (ctas > persistentGrid(dflt, prepThreads, prepSmem, ctas)) prepOcc = 2;  // more than one wave
    }
    const void* prep = splitPrepKernel(q.mode, q.num_tokens, prepOcc, &prepThreads, xAligned, exactFour);
    return launchSplitReadout(op, q, rc, stream, prep, prepGrid, prepThreads, prepSmem);
}

// The L32 rule of the tensor-core readout (mamba2SplitReadoutMmaStagedKernel's L32): every element offset it forms
// in 32-bit arithmetic stays below 2^31 (reached at the last row / token / head / group / slot / ring row), with
// non-negative strides. The checkpoint and the ring's B rows keep 64-bit offsets.
bool splitMmaOffsetsFit32(const Mamba2ReplayParams& q) {
    const int64_t B1 = q.batch - 1, T1 = q.num_tokens - 1, H1 = q.nheads - 1, G1 = q.ngroups - 1;
    if (!stridesFit32({q.stride_y_b, q.stride_y_t, q.stride_y_h, q.stride_z_b, q.stride_z_t, q.stride_z_h, q.stride_C_b,
                       q.stride_C_t, q.stride_C_g}))
        return false;
    const int64_t yMax = B1 * q.stride_y_b + T1 * q.stride_y_t + H1 * q.stride_y_h + q.headdim;
    const int64_t zMax = q.z ? B1 * q.stride_z_b + T1 * q.stride_z_t + H1 * q.stride_z_h + q.headdim : 0;
    const int64_t cMax = B1 * q.stride_C_b + T1 * q.stride_C_t + G1 * q.stride_C_g + q.dstate;
    const int64_t xMax = (int64_t)q.num_slots * q.ring_capacity * q.nheads * q.headdim;
    const int64_t wsMax = (int64_t)(splitWorkspaceBytes(q.batch, q.num_tokens, q.nheads, q.window) / sizeof(float));
    return lastOffsetsFit32({yMax, zMax, cMax, xMax, wsMax});
}

// Launches the prep kernel, then the readout that fits the step (below).
int launchSplitReadout(const char* op, Mamba2ReplayParams& q, stream::ReadCopyScales rc, cudaStream_t stream,
                       const void* prep, dim3 prepGrid, int prepThreads, size_t prepSmem) {
    int st = launch(op, prep, prepGrid, prepThreads, prepSmem, &q, stream, nullptr, rssm::pdlChainEnabled());
    if (st) return st;
    // The unpipelined readout (3 CTAs / SM) measured faster than the pipelined one (2 CTAs / SM):
    // Super B = 256 339.9 vs 386.3 us (docs/benchmarks.md, fourth session). RSSM_MAMBA2_SPLIT_PIPE (read per
    // launch, A/B timing): 1 = pipelined, 2 = the next item's slot and cursors in flight, else plain.
    // 3 = the plain readout with the tensor-core fold (N = 128, fp32 / 16-bit rows; bf16 activations fold on tensor
    // cores, fp16 ones on CUDA cores in the same kernel). 4 = the readout on tensor cores (below). 0 = plain.
    // Unset: the tensor-core readout for speculative steps of T >= kMmaReadoutMinTokens tokens where it runs, else plain.
    int pipe = envDigit("RSSM_MAMBA2_SPLIT_PIPE", 4, -1);
    if (pipe < 0) pipe = q.mode == 1 && q.num_tokens >= kMmaReadoutMinTokens ? 4 : 0;
    if (pipe == 3 && !(q.dstate == 128 && (q.state_dtype == RSSM_DTYPE_FP32 || q.state_dtype == RSSM_DTYPE_FP16 ||
                                           q.state_dtype == RSSM_DTYPE_BF16)))
        pipe = 0;
    // Read-only rows (skip_flush_rows: no flush items) narrower than fp32 run on the 16-row read-copy readout
    // unless RSSM_MAMBA2_READ_ROWS=8 (A/B timing; read per launch).
    const char* rr = getenv("RSSM_MAMBA2_READ_ROWS");
    // Standard steps on fp16 / fp8 / nvfp4 read copies: the read-copy readout on tensor cores
    // (mamba2_read_mma_kernel.cuh) where it runs (sm_80+; 16-byte aligned rows, ring inputs, z and scale tensors;
    // a window <= 32); RSSM_MAMBA2_READ_MMA=0 (read per launch, A/B timing) keeps the CUDA-core one below, and
    // RSSM_MAMBA2_READ_MMA_DEPTH=2|3|4|6 picks the shared-memory slots per warp (A/B).
    const char* rm = getenv("RSSM_MAMBA2_READ_MMA");
    if (q.skip_flush_rows && q.mode == 0 && q.num_tokens == 1 && q.dstate == 128 && q.headdim % 16 == 0 &&
        q.window <= splitMaxRecords() && !(rr && strcmp(rr, "8") == 0) && !(rm && strcmp(rm, "0") == 0)) {
        const char* md = getenv("RSSM_MAMBA2_READ_MMA_DEPTH");
        size_t smem = 0;
        const void* mk = splitReadCopyMmaKernel(q.state_dtype, q.window, md ? atoi(md) : 0, q.act_dtype, &smem);
        const int unit = q.state_dtype == RSSM_DTYPE_FP16 ? 2 : 1;
        auto a16 = [](const void* ptr) { return ((uintptr_t)ptr % 16) == 0; };
        const bool aligned = a16(q.state) && (q.stride_state_p * unit) % 16 == 0 &&
                             (q.stride_state_head * unit) % 16 == 0 && (q.stride_state_slot * unit) % 16 == 0 &&
                             (q.state_dtype == RSSM_DTYPE_FP16 || a16(rc.scale)) && a16(q.ring_x) &&
                             a16(q.Cm) && (q.stride_C_b % 8) == 0 && (q.stride_C_g % 8) == 0 &&
                             (!q.z || (a16(q.z) && (q.stride_z_b % 8) == 0 && (q.stride_z_h % 8) == 0)) &&
                             ((uintptr_t)q.y % 4) == 0 && (q.stride_y_b % 2) == 0 && (q.stride_y_h % 2) == 0 &&
                             a16(q.workspace);
        // (the readout forms row offsets within a head in 32 bits: headdim rows of the state's row stride)
        const bool sizes = q.nheads < 65536 && (long long)q.ring_capacity * q.nheads * q.headdim < (1LL << 31) &&
                           (long long)q.batch * q.nheads * (q.headdim / 16) < (1LL << 31) &&
                           (long long)q.headdim * q.stride_state_p * unit < (1LL << 31);
        // The head-staged readout where it runs (nvfp4 rows, head dim 64 / 80, window <= 16;
        // mamba2_read_head_kernel.cuh), under the same rules; RSSM_MAMBA2_READ_MMA_HEAD=0 (read per launch) keeps the
        // 16-row tile kernel (A/B)
        const char* rh = getenv("RSSM_MAMBA2_READ_MMA_HEAD");
        if (!(rh && strcmp(rh, "0") == 0) && aligned && sizes && readmma::deviceSmVersion() >= 80) {
            size_t hsmem = 0;
            const void* hk = splitReadCopyHeadKernel(q.state_dtype, q.window, q.headdim, q.act_dtype, &hsmem);
            if (hk && allowSmem(hk, hsmem)) {
                const long long heads = (long long)q.batch * q.nheads;
                const int warps = readHeadThreads() / 32;
                const int g = readmma::cappedReadMmaGrid(
                    persistentGrid(hk, readHeadThreads(), hsmem, (heads + warps - 1) / warps));
                return launch(op, hk, dim3(g), readHeadThreads(), hsmem, &q, stream, &rc, pdlEnabled());
            }
        }
        if (mk && aligned && sizes && readmma::deviceSmVersion() >= 80 && allowSmem(mk, smem)) {
            const long long tiles = (long long)q.batch * q.nheads * (q.headdim / 16);
            const int warps = readMmaThreads() / 32;
            // RSSM_READ_MMA_CTAS caps the grid (tests)
            const int g = readmma::cappedReadMmaGrid(persistentGrid(mk, readMmaThreads(), smem, (tiles + warps - 1) / warps));
            return launch(op, mk, dim3(g), readMmaThreads(), smem, &q, stream, &rc, pdlEnabled());
        }
    }
    if (q.skip_flush_rows && q.dstate == 128 && q.headdim % splitReadRows() == 0 && !(rr && strcmp(rr, "8") == 0)) {
        const void* rk = splitReadCopyKernel(q.state_dtype, q.mode, q.num_tokens);
        if (rk) {
            const long long items16 = (long long)q.batch * q.nheads * (q.headdim / splitReadRows());
            const int warps = splitReadoutThreads() / 32;
            const long long ctas16 = (items16 + warps - 1) / warps;
            const int g = persistentGrid(rk, splitReadoutThreads(), 0, ctas16);
            return launch(op, rk, dim3(g), splitReadoutThreads(), 0, &q, stream, &rc, pdlEnabled());
        }
    }
    // 4 = the readout on tensor cores (all tokens of a step as one mma tile, the next item's rows in flight through a
    // shared-memory double buffer; dstate 128, bf16 activations, 16-byte aligned fp32 / 16-bit rows, 16-bit rows with
    // a window <= 16: one chunk of records to fold; mamba2_split_mma_kernel.cuh). Other inputs run the plain readout.
    if (pipe == 4) {
        const int es = q.state_dtype == RSSM_DTYPE_FP32 ? 4 : 2;
        const bool aligned = ((uintptr_t)q.state % 16) == 0 && (q.stride_state_p * es) % 16 == 0 &&
                             (q.stride_state_head * es) % 16 == 0 && (q.stride_state_slot * es) % 16 == 0;
        const bool chunks = q.state_dtype == RSSM_DTYPE_FP32 || q.window <= 16;
        // z read as 4-byte pairs (the rows an item's lane owns are 2q, 2q + 1 of 8; no gate counts as aligned)
        const bool zPairs = q.z == nullptr || (((uintptr_t)q.z % 4) == 0 && q.stride_z_b % 2 == 0 &&
                                               q.stride_z_t % 2 == 0 && q.stride_z_h % 2 == 0);
        // L32 (the default since the thirty-sixth session; RSSM_MAMBA2_MMA_L32=0, read per launch, for A/B): 32-bit
        // item offsets into y, z, C, ring x and the workspace where every one of them stays below 2^31 (non-negative
        // strides). Side by side on the H200 (docs/kernels-mamba2.md "Thirty-sixth session"): T = 4 verify steps
        // 4.0-6.0% faster, T = 8 one-accepted / mixed 1.8-5.6% (all-accepted within the spread).
        const bool off32 = envSwitch("RSSM_MAMBA2_MMA_L32", true) && splitMmaOffsetsFit32(q);
        const void* mk = q.act_dtype == RSSM_DTYPE_BF16 && aligned && chunks && !q.skip_flush_rows
                             ? splitMmaReadoutKernel(q.state_dtype, q.dstate, envSwitch("RSSM_MAMBA2_MMA_CHOIST", true),
                                                     envSwitch("RSSM_MAMBA2_MMA_XPF", true), zPairs, off32)
                             : nullptr;
        if (mk) {
            const long long items = (long long)q.batch * q.nheads * (q.headdim / splitRows());
            const int warps = splitReadoutThreads() / 32;
            const size_t smem = splitMmaReadoutSmemBytes(q.state_dtype);
            if (!allowSmem(mk, smem))
                return setError(RSSM_ERR_CUDA, "%s: cannot raise the shared-memory limit of the split mma readout", op);
            const int g = persistentGrid(mk, splitReadoutThreads(), smem, (items + warps - 1) / warps);
            // A programmatic dependent of the prep only above 4 tokens: side by side on the H200 (twenty-eighth
            // session, docs/kernels-mamba2.md) the plain launch was 0.4-2.2% faster in 5 of 6 T = 4 cases (Nano
            // all-accepted within 0.1%) and mixed at T = 8. RSSM_PDL_M2_VERIFY = "1" / "0" forces it on / off.
            return launch(op, mk, dim3(g), splitReadoutThreads(), smem, &q, stream, nullptr,
                          pdlEnabled("RSSM_PDL_M2_VERIFY", q.num_tokens > 4));
        }
        pipe = 0;
    }
    const void* readout = splitReadoutKernel(q.state_dtype, q.dstate, q.mode, q.num_tokens, pipe);
    const long long items = (long long)q.batch * q.nheads * ((q.headdim + splitRows() - 1) / splitRows());
    const int warpsPerCta = splitReadoutThreads() / 32;
    const long long ctasNeeded = (items + warpsPerCta - 1) / warpsPerCta;
    const size_t smem = pipe == 3 ? splitMmaFoldSmemBytes(q.dstate) : splitReadoutSmemBytes(q.dstate);
    if (readout && !allowSmem(readout, smem))
        return setError(RSSM_ERR_CUDA, "%s: cannot raise the shared-memory limit of the split readout kernel", op);
    const int grid = readout ? persistentGrid(readout, splitReadoutThreads(), smem, ctasNeeded) : 1;
    // The plain readout's item schedule (mamba2_split_kernel.cuh), carried to the kernel in rows_per_cta (variant 4
    // validated it == 0 from the caller): 0 = dynamic per CTA, 1 = static grid stride. Dynamic where warps take more
    // than kDynamicMinItemsPerWarp items (at B = 1 the counter is overhead: 6.47 vs 6.21 us, Super) and the kernel's
    // 32-bit blockIdx.x + gridDim.x * m (m < items) cannot overflow. RSSM_MAMBA2_SPLIT_SCHED=static|dynamic (read
    // per launch) forces one (A/B timing; sanitizer tests on small problems). Measured side by side (thirteenth
    // session, B = 256, L = 16, staggered / in phase): Super 311.3 / 316.7 vs 336.5 / 331.5 us static, Nano
    // 291.3 / 295.9 vs 304.1 / 301.5 us.
    constexpr long long kDynamicMinItemsPerWarp = 4;
    const char* sched = getenv("RSSM_MAMBA2_SPLIT_SCHED");
    const bool dynamic = sched && strcmp(sched, "static") == 0     ? false
                         : sched && strcmp(sched, "dynamic") == 0 ? true
                                                                  : items > kDynamicMinItemsPerWarp * grid * warpsPerCta;
    q.rows_per_cta = dynamic && (unsigned long long)items * (unsigned long long)grid < (1ULL << 32) ? 0 : 1;
    return launch(op, readout, dim3(grid), splitReadoutThreads(), smem, &q, stream, &rc, pdlEnabled());
}

}  // namespace
}  // namespace mamba2
}  // namespace rssm

using namespace rssm::mamba2;
using rssm::setError;

extern "C" int rssm_mamba2_row_chunk(int32_t state_dtype, int32_t dstate) { return rowChunk(state_dtype, dstate); }

extern "C" int rssm_mamba2_replay_auto_variant(int32_t batch, int32_t nheads, int32_t dstate) {
    if ((dstate == 128 || dstate == 256) && (long long)batch * nheads <= 128) return RSSM_MAMBA2_VARIANT_STREAM;
    return RSSM_MAMBA2_VARIANT_PERSISTENT_SMALL;
}
// Variant 4 can run these sizes (dstate 128 / 256, <= 32 records per step, headdim % 8 == 0).
static bool splitSizesOk(const Mamba2ReplayParams* p) {
    const int records = p->mode == 0 ? p->window : p->window + p->num_tokens;
    return (p->dstate == 128 || p->dstate == 256) && records <= splitMaxRecords() && p->headdim % 8 == 0 &&
           p->rows_per_cta == 0 &&
           (long long)p->batch * p->nheads * ((p->headdim + splitRows() - 1) / splitRows()) < (1LL << 31);
}
// The automatic choice with a workspace: variant 4 where the split kernels can run the sizes and either the
// step is a standard one (one token: at B = 1 the split kernels with PDL measured 7.0 vs 8.1 us (Super) and 6.9 vs
// 8.2 us (Nano) against the stream kernel, eighth session) or the rule picks the persistent kernel (2). Small
// speculative batches keep the stream kernel (3), within 0.5 us of variant 4 at B = 1, T = 4.
static bool autoPicksSplit(const Mamba2ReplayParams* p) {
    return splitSizesOk(p) &&
           (p->mode == 0 ||
            rssm_mamba2_replay_auto_variant(p->batch, p->nheads, p->dstate) == RSSM_MAMBA2_VARIANT_PERSISTENT_SMALL);
}
extern "C" int64_t rssm_mamba2_replay_workspace_bytes(const Mamba2ReplayParams* p) {
    if (!p) return 0;
    const bool split = p->variant == RSSM_MAMBA2_VARIANT_SPLIT || (p->variant == RSSM_MAMBA2_VARIANT_AUTO && autoPicksSplit(p));
    if (!split || p->batch <= 0 || p->num_tokens <= 0 || p->nheads <= 0 || p->window <= 0) return 0;
    return (int64_t)splitWorkspaceBytes(p->batch, p->num_tokens, p->nheads, p->window);
}
extern "C" int64_t rssm_mamba2_replay_workspace_bound(const Mamba2ReplayParams* p) {
    return rssm::splitWorkspaceBound(p, RSSM_MAMBA2_VARIANT_AUTO, RSSM_MAMBA2_VARIANT_SPLIT,
                                     rssm_mamba2_replay_workspace_bytes);
}
// Conventional decode of one token: the warp-item kernel (4) for dstate 128 / 256 (measured fastest at B = 256 and
// B = 1, seventh session; the launcher runs 2 when the token rows are not 16-byte aligned), else 2. The launcher
// resolves the automatic choice with more tokens (per-draft snapshots) to 2.
extern "C" int rssm_mamba2_decode_auto_variant(int32_t, int32_t, int32_t dstate) {
    return (dstate == 128 || dstate == 256) ? RSSM_MAMBA2_VARIANT_WARP_ITEMS : RSSM_MAMBA2_VARIANT_PERSISTENT_SMALL;
}

extern "C" int rssm_mamba2_decode_launch(const Mamba2DecodeParams* pIn, cudaStream_t stream) {
    const char* op = "Mamba2Decode";
    if (!pIn) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    Mamba2DecodeParams resolved = *pIn;
    if (resolved.variant == RSSM_MAMBA2_VARIANT_AUTO)  // per-draft snapshots (T > 1): the persistent kernel, measured
        resolved.variant = resolved.num_tokens == 1  // faster there (Super T = 4: 1504 vs 1793 us; seventh session)
                               ? rssm_mamba2_decode_auto_variant(resolved.batch, resolved.nheads, resolved.dstate)
                               : RSSM_MAMBA2_VARIANT_PERSISTENT_SMALL;
    const Mamba2DecodeParams* p = &resolved;
    int st = checkCommon(op, p->batch, p->num_tokens, p->nheads, p->headdim, p->dstate, p->ngroups, p->num_slots,
                         p->state_dtype, p->act_dtype, p->dt_dtype, p->rows_per_cta, p->variant);
    if (st) return st;
    if (p->variant == RSSM_MAMBA2_VARIANT_STREAM)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d (stream kernel) exists for Mamba2Replay only; "
                        "conventional decode supports variants 0, 1, 2 and 4", op, p->variant);
    if (p->variant == RSSM_MAMBA2_VARIANT_WARP_ITEMS && p->rows_per_cta != 0 && p->rows_per_cta != warpDecodeRows())
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant 4 (warp items of %d rows) takes rows_per_cta 0 or %d; "
                        "got %d", op, warpDecodeRows(), warpDecodeRows(), p->rows_per_cta);
    if (!p->x || !p->dt_raw || !p->Bm || !p->Cm || !p->A || !p->y)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: x, dt_raw, Bm, Cm, A and y must not be NULL", op);
    st = checkState(op, "state", p->state, p->state_dtype, p->stride_state_slot, p->stride_state_head,
                    p->stride_state_p);
    if (st) return st;
    if (p->snapshots) {
        st = checkState(op, "snapshots", p->snapshots, p->state_dtype, p->stride_snap_slot, p->stride_snap_head,
                        p->stride_snap_p);
        if (st) return st;
        const int64_t vec = 16 / stateBytes(p->state_dtype);
        if (p->stride_snap_tok % vec)
            return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: stride_snap_tok must be a multiple of %lld; got %lld",
                            op, (long long)vec, (long long)p->stride_snap_tok);
    }
    if (p->batch == 0) return RSSM_OK;
    Mamba2DecodeParams q = *p;
    const int sb = stateBytes(q.state_dtype);
    if (q.variant == RSSM_MAMBA2_VARIANT_WARP_ITEMS) {
        // Warp-item kernel: 16-byte x / z rows and B / C rows (as the persistent kernels), headdim % 8 == 0,
        // 32-bit item arithmetic. Otherwise the documented fallback: variant 2 (same results).
        const int rows = warpDecodeRows();
        const void* k = warpDecodeKernel(q.state_dtype, q.dstate, q.num_tokens, rows);
        const long long items = (long long)q.batch * q.nheads * (q.headdim / rows);
        const bool ok = k && q.headdim % rows == 0 && items < (1LL << 31) &&
                        bulkRows(q.x, q.stride_x_b, q.stride_x_t, q.stride_x_h) &&
                        bulkRows(q.z, q.stride_z_b, q.stride_z_t, q.stride_z_h) &&
                        bulkRows(q.Bm, q.stride_B_b, q.stride_B_t, q.stride_B_g) &&
                        bulkRows(q.Cm, q.stride_C_b, q.stride_C_t, q.stride_C_g);
        if (ok) {
            const int threads = warpDecodeThreads();  // 4-warp CTAs measured the same (seventh session)
            const int warps = threads / 32;
            // PIPE (A/B, off): RSSM_MAMBA2_WARP_PIPE = 2 / 3 runs the one-token fp32 N = 128 step on a persistent
            // grid with the next 1 / 2 items' rows in flight (mamba2_warp_decode_kernel.cuh)
            if (q.state_dtype == RSSM_DTYPE_FP32 && q.dstate == 128 && q.num_tokens == 1 && !q.snapshots) {
                const char* e = getenv("RSSM_MAMBA2_WARP_PIPE");
                const int stages = e ? atoi(e) : 0;
                const void* pk = warpDecodePipeKernel(stages);
                const size_t smem = warpDecodePipeSmem(stages);
                if (pk && allowSmem(pk, smem)) {
                    const int grid = persistentGrid(pk, threads, smem, (items + warps - 1) / warps);
                    return launch(op, pk, dim3((unsigned)grid), threads, smem, &q, stream, nullptr,
                                  rssm::pdlChainEnabled());
                }
            }
            // One item per warp (full grid): 87.6% of copy vs 79.7% persistent (Super, B = 256; seventh session).
            const long long ctas = (items + warps - 1) / warps;
            return launch(op, k, dim3((unsigned)ctas), threads, 0, &q, stream, nullptr, rssm::pdlChainEnabled());
        }
        q.variant = RSSM_MAMBA2_VARIANT_PERSISTENT_SMALL;
        q.rows_per_cta = 0;
    }
    if (q.variant != RSSM_MAMBA2_VARIANT_TILE) {
        const bool ok = bulkRows(q.x, q.stride_x_b, q.stride_x_t, q.stride_x_h) &&
                        bulkRows(q.z, q.stride_z_b, q.stride_z_t, q.stride_z_h) &&
                        bulkRows(q.Bm, q.stride_B_b, q.stride_B_t, q.stride_B_g) &&
                        bulkRows(q.Cm, q.stride_C_b, q.stride_C_t, q.stride_C_g) &&
                        (reinterpret_cast<uintptr_t>(q.dt_raw) & 3u) == 0;
        const int T = q.num_tokens, N = q.dstate;
        auto planBytes = [T, N, sb](int rows) { return decodePersistentPlan(T, N, rows, sb).total; };
        int st = RSSM_OK;
        if (launchPersistent(op, false, ok, planBytes, q, stream, &st)) return st;
        q.variant = RSSM_MAMBA2_VARIANT_TILE;  // documented fallback: same results, variant 0 kernel
        q.rows_per_cta = 0;
    }
    const int chunk = rowChunk(q.state_dtype, q.dstate);
    if (q.rows_per_cta == 0) q.rows_per_cta = autoRows(q.batch, q.nheads, q.headdim, q.dstate, sb, chunk);
    const size_t smem = decodeSmemBytes(q.num_tokens, q.dstate, q.rows_per_cta, sb);
    const dim3 grid((q.headdim + q.rows_per_cta - 1) / q.rows_per_cta, q.nheads, q.batch);
    return launch(op, pick(false, q.state_dtype, q.dstate), grid, kThreads, smem, &q, stream);
}

// Checks of a replay launch (variant resolved in place); RSSM_OK when `resolved` can be dispatched.
static int replayValidate(const char* op, Mamba2ReplayParams& resolved) {
    if (resolved.skip_flush_rows != 0 && resolved.skip_flush_rows != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: skip_flush_rows must be 0 or 1; got %d", op,
                        resolved.skip_flush_rows);
    if (resolved.variant == RSSM_MAMBA2_VARIANT_AUTO) {  // skip_flush_rows exists in the persistent kernels
        const int64_t need = rssm_mamba2_replay_workspace_bytes(&resolved);  // > 0: auto would pick variant 4
        if (need > 0 && resolved.workspace && resolved.workspace_bytes >= need)
            resolved.variant = RSSM_MAMBA2_VARIANT_SPLIT;
        else
            resolved.variant = resolved.skip_flush_rows ? 2
                                                        : rssm_mamba2_replay_auto_variant(resolved.batch, resolved.nheads,
                                                                                          resolved.dstate);
    }
    if (resolved.skip_flush_rows && resolved.variant != 1 && resolved.variant != 2 &&
        resolved.variant != RSSM_MAMBA2_VARIANT_SPLIT)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: skip_flush_rows (dual-precision decode) needs a persistent "
                        "variant (1 or 2) or the split kernels (4); got variant %d", op, resolved.variant);
    const Mamba2ReplayParams* p = &resolved;
    int st = checkCommon(op, p->batch, p->num_tokens, p->nheads, p->headdim, p->dstate, p->ngroups, p->num_slots,
                         p->state_dtype, p->act_dtype, p->dt_dtype, p->rows_per_cta, p->variant);
    if (st) return st;
    if (p->mode != 0 && p->mode != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mode must be 0 (standard) or 1 (speculative); got %d", op,
                        p->mode);
    if (p->mode == 0 && p->num_tokens != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: standard mode needs num_tokens == 1; got %d", op,
                        p->num_tokens);
    if (p->window < 1 || p->window > RSSM_MAMBA2_MAX_WINDOW)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: window must be in [1, %d]; got %d", op, RSSM_MAMBA2_MAX_WINDOW,
                        p->window);
    const int needCap = p->mode == 0 ? p->window : p->window + p->num_tokens;
    if (p->ring_capacity < needCap)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: ring_capacity must be >= %s = %d; got %d", op,
                        p->mode == 0 ? "window" : "window + num_tokens", needCap, p->ring_capacity);
    if (!p->x || !p->dt_raw || !p->Bm || !p->Cm || !p->A || !p->y || !p->ring_origin || !p->ring_len ||
        !p->ring_dt)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: x, dt_raw, Bm, Cm, A, y, ring_origin, ring_len and ring_dt must not be NULL", op);
    if (!p->ring_x || !aligned16(p->ring_x) || !p->ring_B || !aligned16(p->ring_B))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_x and ring_B must be non-NULL and 16-byte aligned", op);
    st = checkState(op, "state", p->state, p->state_dtype, p->stride_state_slot, p->stride_state_head,
                    p->stride_state_p);
    if (st) return st;
    if (p->workspace_bytes < 0 || (p->workspace && !aligned16(p->workspace)))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: workspace must be 16-byte aligned with workspace_bytes >= 0; "
                        "got ptr=%p bytes=%lld", op, p->workspace, (long long)p->workspace_bytes);
    if (p->variant == RSSM_MAMBA2_VARIANT_SPLIT) {
        st = checkSplit(op, *p);
        if (st) return st;
    }
    return RSSM_OK;
}

extern "C" int rssm_mamba2_replay_launch(const Mamba2ReplayParams* pIn, cudaStream_t stream) {
    const char* op = "Mamba2Replay";
    if (!pIn) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    Mamba2ReplayParams q = *pIn;
    int st = replayValidate(op, q);
    if (st) return st;
    if (q.batch == 0) return RSSM_OK;
    const int sb = stateBytes(q.state_dtype);
    if (q.variant == RSSM_MAMBA2_VARIANT_SPLIT) return launchSplit(op, q, rssm::stream::ReadCopyScales{}, stream);
    if (q.variant == RSSM_MAMBA2_VARIANT_STREAM) {
        st = checkOwnRowsVariant(op, RSSM_MAMBA2_VARIANT_STREAM, "stream kernel", q.dstate, q.rows_per_cta);
        if (st) return st;
        const int rw = replayStreamRowsPerWarp(q.dstate, q.mode, q.num_tokens);
        const int threads = (q.headdim + rw - 1) / rw * 32;
        const dim3 grid(1, q.nheads, q.batch);
        // full-ring mode (every ring row copied before the cursors are read) below two waves of CTAs
        const int maxT = q.mode == 0 ? 1 : (q.num_tokens <= 2 ? 2 : q.num_tokens <= 4 ? 4 : 8);
        int fullRing = ((long long)q.nheads * q.batch < 2LL * smCount() &&
                        q.ring_capacity <= RSSM_MAMBA2_MAX_WINDOW + maxT) ? 1 : 0;
        const size_t smem = replayStreamSmemBytes(fullRing ? q.ring_capacity : q.window, q.num_tokens, q.headdim,
                                                  q.dstate);
        return launch(op, replayStreamKernel(q.state_dtype, q.dstate, q.mode, q.num_tokens), grid, threads, smem, &q,
                      stream, &fullRing);
    }
    if (q.variant != RSSM_MAMBA2_VARIANT_TILE) {
        const bool ok = bulkRows(q.x, q.stride_x_b, q.stride_x_t, q.stride_x_h) &&
                        bulkRows(q.z, q.stride_z_b, q.stride_z_t, q.stride_z_h) &&
                        bulkRows(q.Bm, q.stride_B_b, q.stride_B_t, q.stride_B_g) &&
                        bulkRows(q.Cm, q.stride_C_b, q.stride_C_t, q.stride_C_g) &&
                        (reinterpret_cast<uintptr_t>(q.dt_raw) & 3u) == 0 &&
                        (reinterpret_cast<uintptr_t>(q.ring_dt) & 3u) == 0;
        const int T = q.num_tokens, L = q.window, N = q.dstate;
        auto planBytes = [T, L, N, sb](int rows) { return replayPersistentPlan(T, L, N, rows, sb).total; };
        int st = RSSM_OK;
        if (launchPersistent(op, true, ok, planBytes, q, stream, &st)) return st;
        if (q.skip_flush_rows)
            return setError(RSSM_ERR_UNSUPPORTED, "%s: skip_flush_rows needs the persistent kernel, which these "
                            "inputs cannot use (unaligned rows, or too little shared memory)", op);
        q.variant = RSSM_MAMBA2_VARIANT_TILE;  // documented fallback: same results, variant 0 kernel
        q.rows_per_cta = 0;
    }
    const int chunk = rowChunk(q.state_dtype, q.dstate);
    if (q.rows_per_cta == 0) q.rows_per_cta = autoRows(q.batch, q.nheads, q.headdim, q.dstate, sb, chunk);
    const size_t smem = replaySmemPlan(q.num_tokens, q.window, q.dstate, q.rows_per_cta, sb).bytes;
    const dim3 grid((q.headdim + q.rows_per_cta - 1) / q.rows_per_cta, q.nheads, q.batch);
    return launch(op, pick(true, q.state_dtype, q.dstate), grid, kThreads, smem, &q, stream);
}

// Variant 4 on a read-only dual-precision read copy in a scaled format (mamba2_dispatch.h).
int rssm::mamba2::replaySplitReadCopy(const Mamba2ReplayParams& in, const rssm::stream::ReadCopyScales& rc,
                                      cudaStream_t stream) {
    const char* op = "Mamba2Replay (read copy)";
    const int fmt = in.state_dtype;
    const int chk = rssm::stream::checkReadCopy(op, fmt, "dstate", in.dstate, rc, in.nheads, in.headdim);
    if (chk != RSSM_OK) return chk;
    if (in.variant != RSSM_MAMBA2_VARIANT_SPLIT || in.skip_flush_rows != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: a read-only copy runs on the split kernels (variant 4) with "
                        "skip_flush_rows = 1 (flushing rows are never written here); got variant %d, skip_flush_rows %d",
                        op, in.variant, in.skip_flush_rows);
    Mamba2ReplayParams q = in;
    q.state_dtype = RSSM_DTYPE_FP16;  // the shared checks (the caller checked the payload's byte strides)
    const int st = replayValidate(op, q);
    if (st) return st;
    if (q.batch == 0) return RSSM_OK;
    q.state_dtype = fmt;
    return launchSplit(op, q, rc, stream);
}
