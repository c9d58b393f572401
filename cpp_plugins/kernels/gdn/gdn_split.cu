// Instantiations and launch of the GDN split replay kernels (variant 6): prep kernel per K (128 / 256) x
// token bucket (MAXT = 1 standard, 2, 4, 8), readout kernel per state dtype (fp32 / fp16 / bf16) x K x
// token bucket, and per read-only dual-precision read format (fp8_e4m3 / nvfp4, K = 128) x token bucket.
#include "gdn/gdn_split.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "common/env_switch.h"
#include "common/offsets32.h"
#include "common/pdl.h"
#include "common/read_mma.cuh"
#include "gdn/gdn_split_kernels.cuh"

namespace rssm {
namespace gdn {
namespace {

template <typename F>
cudaError_t allowDynamicSmem(F* kernel, size_t smem) {
    if (smem <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
}

// Resident CTAs per SM of the readout (a cached host query, no stream work: rssm::occupancyPerSm).
template <typename F>
int readoutOccupancy(F* kernel, int threads, size_t smem) {
    return occupancyPerSm(reinterpret_cast<const void*>(kernel), threads, smem);
}

// Persistent grid of a warp-item readout: one warp per item up to the CTAs that fit on the device at once.
template <typename F>
int persistentGrid(F* kernel, int threads, size_t smem, long long items, int smCount) {
    const long long ctasNeeded = (items + threads / 32 - 1) / (threads / 32);
    const long long resident = (long long)readoutOccupancy(kernel, threads, smem) * smCount;
    return (int)(ctasNeeded < resident ? ctasNeeded : resident);
}

// Readout configuration (threads per CTA x CTAs per SM of the register budget): RSSM_GDN_SPLIT_CFG (read
// once) = "256x3" (80 registers, spills), "256x2" (128 registers) or "128x5" (96 registers); default 128x5
// at K = 128 with one token (measured fastest: docs/kernels-gdn.md "Variant 6"), 256x2 otherwise.
int readoutConfig() {
    static const int cfg = [] {
        const char* e = getenv("RSSM_GDN_SPLIT_CFG");
        if (!e) return 0;
        if (!strcmp(e, "256x2")) return 2;
        if (!strcmp(e, "256x3")) return 3;
        return 0;
    }();
    return cfg;
}

// OFF32 rule: every element offset the standard-step readout forms in 32-bit arithmetic stays below 2^31 (the largest
// is reached at the last row / head / token / record), with non-negative strides. The checkpoint is not included:
// the OFF32 instance keeps its 64-bit offsets.
static bool readoutOffsetsFit32(const GdnReplayParams& p) {
    const int64_t B1 = p.batch - 1, T1 = p.num_tokens - 1, H1 = p.num_heads - 1, HV1 = p.num_v_heads - 1;
    if (!stridesFit32({p.k_stride_b, p.k_stride_t, p.k_stride_h, p.q_stride_b, p.q_stride_t, p.q_stride_h, p.v_stride_b,
                       p.v_stride_t, p.v_stride_h, p.o_stride_b, p.o_stride_t, p.o_stride_h, p.ring_u_stride_slot,
                       p.ring_u_stride_rec, p.ring_u_stride_head}))
        return false;
    const int64_t kMax = B1 * p.k_stride_b + T1 * p.k_stride_t + H1 * p.k_stride_h + p.head_k;
    const int64_t qMax = B1 * p.q_stride_b + T1 * p.q_stride_t + H1 * p.q_stride_h + p.head_k;
    const int64_t vMax = B1 * p.v_stride_b + T1 * p.v_stride_t + HV1 * p.v_stride_h + p.head_v;
    const int64_t oMax = B1 * p.o_stride_b + T1 * p.o_stride_t + HV1 * p.o_stride_h + p.head_v;
    const int64_t uMax = (int64_t)(p.num_slots - 1) * p.ring_u_stride_slot +
                         (int64_t)(p.ring_capacity - 1) * p.ring_u_stride_rec + HV1 * p.ring_u_stride_head + p.head_v;
    const int64_t wsMax = (int64_t)p.batch * p.num_v_heads * splitRecordWordsGdn(p.window, p.num_tokens);
    return lastOffsetsFit32({kMax, qMax, vMax, oMax, uMax, wsMax});
}

// FDIV (default since the twenty-fourth session; RSSM_GDN_SPLIT_FDIV=0 for A/B, read per launch): the standard-step
// readout takes the key head by a multiply-high, exact while the value heads stay below 2^16 (common/small_divisor.h)
static bool fastDivWanted(const GdnReplayParams& p) {
    return envSwitch("RSSM_GDN_SPLIT_FDIV", true) && (unsigned)p.num_v_heads < SmallDivisor::kMaxOperand;
}

template <typename ST, int K, int MAXT, int NT, int MINB>
cudaError_t launchReadout(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    const bool serving = p.act_dtype == RSSM_DTYPE_BF16 && p.u_dtype == RSSM_DTYPE_FP16;
    auto* readout = serving ? gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U>
                            : gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtRuntime>;
    bool dependent = pdlEnabled();  // launched as a programmatic dependent of the prep (RSSM_PDL=0: never)
    size_t smem = splitReadoutSmemBytesGdn(K, NT);
    // The serving fp32-row K = 128 standard step in its default configuration permutes u_j after token 0's loads
    // (gdnSplitReadoutKernel's UPD; default since the twenty-third session: 0.4-1.7% faster per step on the H200,
    // docs/kernels-gdn.md). RSSM_GDN_SPLIT_UPD=0 (A/B, read per launch) runs the permute right after the u_j load.
    if constexpr (std::is_same<ST, float>::value && K == 128 && MAXT == 1 && NT == 128 && MINB == 5) {
        if (serving && envSwitch("RSSM_GDN_SPLIT_UPD", true)) {
            readout = gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U, 1>;
            // FDIV + OFF32 (the default since the twenty-fourth session: 2.3-4.0% faster per standard step on the
            // H200, FDIV alone 0.5-1.1%; docs/kernels-gdn.md "Twenty-fourth session"): the key head by a
            // multiply-high instead of an integer division per item, and the item's workspace / k / q / v / o /
            // ring-u offsets in 32-bit arithmetic where they all fit (else FDIV alone, with 64-bit offsets).
            // RSSM_GDN_SPLIT_FDIV=0 / RSSM_GDN_SPLIT_OFF32=0 (A/B, read per launch) turn them off; OFF32 needs FDIV.
            if (fastDivWanted(p)) {
                readout = gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U, 1, true>;
                if (envSwitch("RSSM_GDN_SPLIT_OFF32", true) && readoutOffsetsFit32(p)) {
                    readout = gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U, 1, true, true>;
                    // EARLY (the default since the twenty-fifth session: with the lean prep, the standard step
                    // 0.5-0.7% faster on q35-4b, within 0.3% on q35-122b): the first item's state rows loaded before
                    // the wait for the prep grid. RSSM_GDN_SPLIT_EARLY=0 (A/B, read per launch) turns it off.
                    if (envSwitch("RSSM_GDN_SPLIT_EARLY", true)) {
                        readout = gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U, 1, true, true, true>;
                        // ESTAGE (the default since the twenty-seventh session; RSSM_GDN_SPLIT_ESTAGE=0, read per
                        // launch, for A/B): a flush item's first two key chunks and fw_j issued at the item's start,
                        // and the readout launched after the prep grid, not as its programmatic dependent. Side by
                        // side on the H200 (docs/kernels-gdn.md "Twenty-seventh session") this is 0.5-1.7% faster per
                        // standard step than the previous default (that instance as a programmatic dependent); the
                        // same instance as a programmatic dependent was 0.8-1.6% slower than the previous default.
                        if (envSwitch("RSSM_GDN_SPLIT_ESTAGE", true)) {
                            readout = gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U, 1, true, true,
                                                            true, true>;
                            dependent = false;
                            // KEY1 (the default since the thirtieth session; RSSM_GDN_SPLIT_KEY1=0, read per launch,
                            // for A/B): one key-chunk buffer per warp, 10 instead of 18 KB of shared memory per CTA, so
                            // the SM keeps more L1 (side by side on the H200: 0.1-0.7% faster per standard step, in 4 of
                            // 4 cases; a 100% shared-memory carve-out made the step 22-32% slower; docs/kernels-gdn.md
                            // "Thirtieth session")
                            if (envSwitch("RSSM_GDN_SPLIT_KEY1", true)) {
                                readout = gdnSplitReadoutKernel<ST, K, MAXT, NT, MINB, kDtBf16ActFp16U, 1, true, true,
                                                                true, true, true>;
                                smem = splitReadoutSmemBytesGdn(K, NT, 1);
                            }
                        }
                    }
                }
            }
        }
    }
    cudaError_t e = allowDynamicSmem(readout, smem);
    if (e != cudaSuccess) return e;
    // The smallest shared-memory carve-out that keeps the readout's CTAs per SM (the default since the thirty-first
    // session; rssm::applyCarveout): the rest of the SM stays L1, 65.5 instead of the driver's 135.2 KB of shared
    // memory for the standard step's 5 x 10.2 KB. The readout depends on its L1 (a 100% carve-out made the standard
    // step 22-32% slower, thirtieth session); side by side the minimal carve-out was 0.3-0.6% faster than the driver's
    // choice (docs/kernels-gdn.md "Thirty-first session"). RSSM_GDN_SPLIT_CARVEOUT (read per launch; A/B, tests):
    // "driver" leaves the driver's choice, a number 0-100 sets that percentage.
    e = (cudaError_t)applyCarveout(reinterpret_cast<const void*>(readout), NT, smem,
                                   envCarveout("RSSM_GDN_SPLIT_CARVEOUT", kCarveoutMinimal));
    if (e != cudaSuccess) return e;
    const int grid = persistentGrid(readout, NT, smem, (long long)p.batch * p.num_v_heads * (p.head_v / kSplitRows),
                                    smCount);
    void* args[] = {const_cast<GdnReplayParams*>(&p), const_cast<stream::ReadCopyScales*>(&rc)};
    e = launchMaybeDependent(reinterpret_cast<const void*>(readout), dim3(grid), dim3(NT), smem, s, args, dependent);
    return e != cudaSuccess ? e : cudaGetLastError();
}

// Read-only rows narrower than fp32 with K = 128 and head_v % 16 == 0 run on the 16-row read-copy readout
// (skip_flush_rows) unless RSSM_GDN_READ_ROWS=8 (A/B timing; read per launch). Configuration as the 8-row
// readout's default where the registers allow (see launchSplitKT).
template <typename ST, int MAXT, int NT, int MINB>
cudaError_t launchReadCopy(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    const bool serving = p.act_dtype == RSSM_DTYPE_BF16 && p.u_dtype == RSSM_DTYPE_FP16;
    auto* readout = serving ? gdnSplitReadCopyKernel<ST, MAXT, NT, MINB, kDtBf16ActFp16U>
                            : gdnSplitReadCopyKernel<ST, MAXT, NT, MINB, kDtRuntime>;
    const int grid = persistentGrid(readout, NT, 0, (long long)p.batch * p.num_v_heads * (p.head_v / kReadRows), smCount);
    void* args[] = {const_cast<GdnReplayParams*>(&p), const_cast<stream::ReadCopyScales*>(&rc)};
    const cudaError_t e = launchMaybeDependent(reinterpret_cast<const void*>(readout), dim3(grid), dim3(NT), 0, s, args,
                                               pdlEnabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}
template <typename ST>
bool useReadCopy(const GdnReplayParams& p) {
    if constexpr (std::is_same<ST, float>::value) {
        return false;
    } else {
        const char* e = getenv("RSSM_GDN_READ_ROWS");
        return p.skip_flush_rows && p.head_k == 128 && p.head_v % kReadRows == 0 && !(e && strcmp(e, "8") == 0);
    }
}

// The speculative verify readout on tensor cores (gdn_split_mma_kernel.cuh) for speculative steps of at least
// kVerifyMmaMinTokens tokens where it runs: K = 128, bf16 activations with fp16 u, fp32 / fp16 / bf16 checkpoints
// with 16-byte aligned rows (16-bit rows: window <= 16, one chunk of records to fold), q / k in 8-byte aligned
// quads, v in 4-byte pairs, no skip_flush_rows, at least two tokens (the head record's block for this readout
// exists from T = 2 on). Measured against the CUDA-core readout (tenth session, q35-4b B = 256 L = 16): T = 2
// 0.77-0.86x vs 0.89-0.99x a conventional step. RSSM_GDN_VERIFY_MMA (read per launch): "1" takes it for every
// speculative step it runs, "0" never (A/B timing, tests).
constexpr int kVerifyMmaMinTokens = 2;
bool useVerifyMma(const GdnReplayParams& p) {
    if (p.mode != GDN_REPLAY_SPECULATIVE || p.num_tokens < 2) return false;
    const char* e = getenv("RSSM_GDN_VERIFY_MMA");
    if (e && strcmp(e, "0") == 0) return false;
    if (!(e && strcmp(e, "1") == 0) && p.num_tokens < kVerifyMmaMinTokens) return false;
    if (p.head_k != 128 || p.act_dtype != RSSM_DTYPE_BF16 || p.u_dtype != RSSM_DTYPE_FP16 || p.skip_flush_rows)
        return false;
    if (p.state_dtype != RSSM_DTYPE_FP32 && p.state_dtype != RSSM_DTYPE_FP16 && p.state_dtype != RSSM_DTYPE_BF16)
        return false;
    const int es = p.state_dtype == RSSM_DTYPE_FP32 ? 4 : 2;
    const bool rowsAligned = ((uintptr_t)p.state % 16) == 0 && (p.state_stride_v * es) % 16 == 0 &&
                             (p.state_stride_head * es) % 16 == 0 && (p.state_stride_slot * es) % 16 == 0;
    const bool pairs = ((uintptr_t)p.k % 8) == 0 && ((uintptr_t)p.q % 8) == 0 && p.k_stride_b % 4 == 0 &&
                       p.k_stride_t % 4 == 0 && p.k_stride_h % 4 == 0 && p.q_stride_b % 4 == 0 &&
                       p.q_stride_t % 4 == 0 && p.q_stride_h % 4 == 0 && ((uintptr_t)p.v % 4) == 0 &&
                       p.v_stride_b % 2 == 0 && p.v_stride_t % 2 == 0 && p.v_stride_h % 2 == 0;
    // the fold's key staging forms a record's offset in 32 bits (foldmma::stageFoldChunk)
    const bool ringOffsets32 = (uint64_t)p.ring_k_stride_rec * 2u * (uint64_t)p.ring_capacity < (1ull << 32);
    return rowsAligned && pairs && ringOffsets32 && (es == 4 || p.window <= 16);
}
cudaError_t launchVerifyMma(const GdnReplayParams& p, int smCount, cudaStream_t s) {
    // The u_j prefetch: default for T <= 4 (3 CTAs per SM: 1.5-2% faster), not for T > 4 (2 CTAs per SM, 128
    // registers: 1.5-2% slower); eighteenth session, docs/kernels-gdn.md. RSSM_GDN_VERIFY_UPF = "1" / "0" forces it
    // on / off (A/B timing, tests).
    const bool prefetchU = envSwitch("RSSM_GDN_VERIFY_UPF", p.num_tokens <= 4);
    // LEAN32 (thirty-sixth session): the fp32-row instances with 32-bit item offsets (the standard readout's OFF32
    // rule) and the key head by a shift (value heads per key head a power of two), the ring key address formed on
    // flush items only. Bit-identical results. Side by side on the H200 (docs/kernels-gdn.md "Thirty-sixth session")
    // the T = 4 steps were 1.2-2.2% faster with staggered / mixed flushes and unchanged in phase, the T = 8 steps
    // 0.9-3.9% faster; never slower. The default; RSSM_GDN_VERIFY_LEAN32=0 (read per launch) turns it off (A/B).
    const int group = p.num_v_heads / p.num_heads;
    const bool lean32 =
        envSwitch("RSSM_GDN_VERIFY_LEAN32", true) && (group & (group - 1)) == 0 && readoutOffsetsFit32(p);
    // MNS (prepared in the thirty-seventh session; the default since the thirty-ninth, RSSM_GDN_VERIFY_MNS=0 turns it
    // off, read per launch): the LEAN32 fp32 instance at T > 4 (no u_j prefetch) with a non-flush item's
    // solve matrices staged in shared memory by the item before. Side by side on the H200 (docs/kernels-gdn.md
    // "Thirty-ninth session"): T = 8 steps 0.2-5.4% faster in all 12 cases, bit-identical results.
    const bool mns = envSwitch("RSSM_GDN_VERIFY_MNS", true) && p.state_dtype == RSSM_DTYPE_FP32 && p.num_tokens > 4 &&
                     lean32 && !prefetchU;
    // KEYB (forty-fourth session; the default, RSSM_GDN_VERIFY_KEYB=0 turns it off, read per launch): the MNS instance
    // with the fold's key chunk in a third buffer per warp, so that a flush item issues the next item's rows before
    // its fold (gdn_split_mma_kernel.cuh). The Nsight Compute profile of that session put the all-flush T = 8 launch at
    // 59% of DRAM against 72% without flushes. Side by side on an H100 (docs/kernels-gdn.md "Forty-fourth session"):
    // T = 8 all-accepted steps 1.2-1.7% faster on both shapes, one-accepted / mixed within 0.3%; bit-identical results.
    const bool keyb = mns && envSwitch("RSSM_GDN_VERIFY_KEYB", true);
    // HRPF (forty-fifth session; the default, RSSM_GDN_VERIFY_HRPF=0 turns it off, read per launch): the T <= 4 LEAN32
    // instance and the KEYB instance prefetch the next item's head-record lines into L1 after their products
    // (gdn_split_mma_kernel.cuh). Side by side on the H200 (docs/kernels-gdn.md "Forty-fifth session"): T = 4 steps
    // 1.4-3.4% faster in all 12 cases, T = 8 0.1-1.5%; bit-identical results.
    const bool hrpf = envSwitch("RSSM_GDN_VERIFY_HRPF", true);
    const void* kernel = verifyMmaKernel(p.state_dtype, p.num_tokens, prefetchU, lean32, mns, keyb, hrpf);
    const int threads = verifyMmaThreads();
    const size_t smem = verifyMmaSmemBytes(p.state_dtype, p.num_tokens, mns, keyb);
    cudaError_t e = allowDynamicSmem(kernel, smem);
    if (e != cudaSuccess) return e;
    // (RSSM_READ_MMA_CTAS caps the grid for tests: long item walks per warp)
    const int grid = readmma::cappedReadMmaGrid(
        persistentGrid(kernel, threads, smem, (long long)p.batch * p.num_v_heads * (p.head_v / kSplitRows), smCount));
    void* args[] = {const_cast<GdnReplayParams*>(&p)};
    // A programmatic dependent of the prep only above 4 tokens: side by side on the H200 (twenty-eighth session,
    // docs/kernels-gdn.md) the plain launch was faster in 11 of 12 T = 4 cases (0.5-1.8%; q35-4b all-accepted
    // staggered 0.6% slower) and mixed at T = 8. RSSM_PDL_GDN_VERIFY = "1" / "0" forces it on / off.
    e = launchMaybeDependent(kernel, dim3(grid), dim3(threads), smem, s, args,
                             pdlEnabled("RSSM_PDL_GDN_VERIFY", p.num_tokens > 4));
    return e != cudaSuccess ? e : cudaGetLastError();
}

// Standard steps on fp16 / fp8 / nvfp4 read copies (skip_flush_rows, K = 128, head_v % 16 == 0, window <= 32): the
// read-copy readout on tensor cores (gdn_read_mma_kernel.cuh) where its alignments hold (16-byte rows, ring_u, k, q,
// v and scale tensors; o in 4-byte pairs) on sm_80+. RSSM_GDN_READ_MMA=0 (read per launch, A/B timing) keeps the
// CUDA-core read-copy readout.
bool useReadCopyMma(const GdnReplayParams& p, const stream::ReadCopyScales& rc) {
    const char* e = getenv("RSSM_GDN_READ_MMA");
    if (e && strcmp(e, "0") == 0) return false;
    if (p.mode != GDN_REPLAY_STANDARD || p.num_tokens != 1 || !p.skip_flush_rows || p.head_k != 128 ||
        p.head_v % 16 != 0 || p.window > kSplitMaxRecords)
        return false;
    const int unit = p.state_dtype == RSSM_DTYPE_FP16 ? 2 : 1;
    auto a16 = [](const void* ptr) { return ((uintptr_t)ptr % 16) == 0; };
    const bool aligned =
        a16(p.state) && (p.state_stride_v * unit) % 16 == 0 && (p.state_stride_head * unit) % 16 == 0 &&
        (p.state_stride_slot * unit) % 16 == 0 && (p.state_dtype == RSSM_DTYPE_FP16 || a16(rc.scale)) &&
        a16(p.ring_u) && p.ring_u_stride_slot % 8 == 0 && p.ring_u_stride_rec % 8 == 0 && p.ring_u_stride_head % 8 == 0 &&
        a16(p.k) && p.k_stride_b % 8 == 0 && p.k_stride_h % 8 == 0 && a16(p.q) && p.q_stride_b % 8 == 0 &&
        p.q_stride_h % 8 == 0 && a16(p.v) && p.v_stride_b % 8 == 0 && p.v_stride_h % 8 == 0 &&
        ((uintptr_t)p.o % 4) == 0 && p.o_stride_b % 2 == 0 && p.o_stride_h % 2 == 0 && a16(p.workspace);
    // (the readout forms row offsets within a head in 32 bits: head_v rows of the state's row stride)
    const bool sizes = p.num_v_heads < 65536 && (long long)p.batch * p.num_v_heads * (p.head_v / 16) < (1LL << 31) &&
                       (long long)p.head_v * p.state_stride_v * unit < (1LL << 31);
    return aligned && sizes && readmma::deviceSmVersion() >= 80;
}
cudaError_t launchReadCopyMma(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    // The unit-staged readout where it runs (nvfp4 rows, head_v % 64 == 0, window <= 16, fp16 u;
    // gdn_read_head_kernel.cuh), under the same rules (useReadCopyMma); RSSM_GDN_READ_MMA_HEAD=0 (read per launch)
    // keeps the 16-row tile kernel (A/B)
    const char* rh = getenv("RSSM_GDN_READ_MMA_HEAD");
    if (!(rh && strcmp(rh, "0") == 0)) {
        size_t hsmem = 0;
        const void* hk = readCopyHeadKernel(p.state_dtype, p.window, p.head_v, p.act_dtype, p.u_dtype, &hsmem);
        if (hk) {
            const int threads = readCopyHeadThreads();
            const long long units = (long long)p.batch * p.num_v_heads * (p.head_v / readCopyHeadRows());
            const int grid = readmma::cappedReadMmaGrid(
                persistentGrid(hk, threads, hsmem, units, smCount));  // one warp per unit at most
            void* args[] = {const_cast<GdnReplayParams*>(&p), const_cast<stream::ReadCopyScales*>(&rc)};
            const cudaError_t e = launchMaybeDependent(hk, dim3(grid), dim3(threads), hsmem, s, args, pdlEnabled());
            return e != cudaSuccess ? e : cudaGetLastError();
        }
    }
    size_t smem = 0;
    const void* kernel = readCopyMmaKernel(p.state_dtype, p.window, p.act_dtype, p.u_dtype, &smem);
    if (!kernel) return cudaErrorInvalidValue;
    cudaError_t e = smem <= 48 * 1024 ? cudaSuccess
                                      : cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    const int threads = readCopyMmaThreads();
    const long long tiles = (long long)p.batch * p.num_v_heads * (p.head_v / 16);
    // one warp per tile at most; RSSM_READ_MMA_CTAS caps it (tests)
    const int grid = readmma::cappedReadMmaGrid(persistentGrid(kernel, threads, smem, tiles, smCount));
    void* args[] = {const_cast<GdnReplayParams*>(&p), const_cast<stream::ReadCopyScales*>(&rc)};
    e = launchMaybeDependent(kernel, dim3(grid), dim3(threads), smem, s, args, pdlEnabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}

// The EXACT speculative prep for steps of exactly T tokens: the default prep of T's readout (MNORM, + L32 under the
// four-token readout) with T at compile time (gdnSplitPrepKernel's EXACT).
template <int T>
constexpr auto exactPrep() {
    return gdnSplitPrepKernel<128, T, kSplitPrepMinBlocks, true, false, (T <= 4), true>;
}

template <typename ST, int K, int MAXT>
cudaError_t launchSplitKT(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    auto* prep = gdnSplitPrepKernel<K, MAXT>;
    if constexpr (K == 128 && MAXT == 1) {
        // The one-token prep with its registers capped for 8 CTAs per SM (64 registers, no spills): B x H = 4096
        // warps at B = 256 fit one wave (1.29 waves at 6). Side by side (nineteenth session, call 3): in-phase
        // standard steps 3.7-4.1% faster (q35-4b 181.2 -> 174.0 us, q35-122b 347.6 -> 335.4), staggered 0.3-0.8%
        // slower, the dual-precision non-flush steps 2.4% (fp8 / nvfp4 reads) and 5.7% (fp32 read) faster.
        // RSSM_GDN_PREP_MINB=6 (read per launch) keeps the previous bound for A/B.
        // MNORM (the default since the twenty-fifth session): the committed keys' norms from the records' Gram tile
        // on tensor cores. Side by side (twenty-fifth session, call 1): the prep 14.46 -> 12.54 us (ncu), the
        // standard step 1.0-1.3% faster staggered, 0.2-0.4% in phase. RSSM_GDN_PREP_MNORM=0 (read per launch) runs
        // the previous instance.
        // LEAN on top of MNORM (the default since the twenty-fifth session, value-head groups of at most 32: one lane
        // per value head for the gates): compile-time T, all value heads' gates in one pass. Side by side
        // (twenty-fifth session, call 2): the prep 12.54 -> 11.84 us (ncu; 26% fewer instructions), the standard step
        // 0.7-1.0% faster. RSSM_GDN_PREP_LEAN=0 (read per launch) runs MNORM alone.
        prep = gdnSplitPrepKernel<128, 1, 8, true>;
        const char* e = getenv("RSSM_GDN_PREP_MINB");
        if (e && e[0] == '6' && e[1] == 0) prep = gdnSplitPrepKernel<128, 1, 6>;
        else if (!envSwitch("RSSM_GDN_PREP_MNORM", true)) prep = gdnSplitPrepKernel<128, 1, 8>;
        else if (envSwitch("RSSM_GDN_PREP_LEAN", true) && p.num_v_heads / p.num_heads <= 32)
            prep = gdnSplitPrepKernel<128, 1, 8, true, true>;
    } else if constexpr (K == 128) {
        // The speculative preps take the committed keys' norms from the records' Gram tile on tensor cores too
        // (MNORM; the default since the twenty-sixth session), at T <= 4 with the warp's shared-memory layout in
        // 32-bit arithmetic (L32). Side by side (twenty-sixth session, call 1, two processes per setting): T = 4
        // verify steps 0.9-2.0% faster with MNORM + L32 in 10 of 12 cases (0.1-1.4% with MNORM alone); T = 8
        // 0.4-0.6% faster with MNORM alone, L32 within -0.1..+0.4%, hence the split. RSSM_GDN_PREP_MNORM_SPEC
        // (read per launch): 0 the previous prep, 1 MNORM at every T, 2 MNORM + L32 at every T; unset or anything
        // else: the default.
        const int mnormDefault = MAXT <= 4 ? 2 : 1;
        const int mnormSpec = envDigit("RSSM_GDN_PREP_MNORM_SPEC", 2, mnormDefault);
        if (mnormSpec == 1) prep = gdnSplitPrepKernel<128, MAXT, kSplitPrepMinBlocks, true>;
        else if (mnormSpec == 2) prep = gdnSplitPrepKernel<128, MAXT, kSplitPrepMinBlocks, true, false, true>;
        // EXACT (the prep's kernel comment in gdn_split_kernels.cuh has the why and the measurements): the default
        // prep with the token count at compile time; its records are bit-identical (their layout follows the run-time
        // T). At T = 3 and 5-7 the prep's MAXT is the step's T while the readout keeps its instance (MAXT 4 / 8).
        // RSSM_GDN_PREP_EXACT (read per launch): 0 the run-time-T instances everywhere, 1 EXACT at T = 2, 4 and 8
        // only, unset / 2 EXACT at every T (the default since the fifty-seventh session); anything else: the
        // default. Only on the default prep (another RSSM_GDN_PREP_MNORM_SPEC keeps its instance).
        const int exact = envDigit("RSSM_GDN_PREP_EXACT", 2, 2), t = p.num_tokens;
        if (exact > 0 && mnormSpec == mnormDefault) {
            if (t == MAXT) {
                prep = exactPrep<MAXT>();
            } else if (exact == 2) {
                if constexpr (MAXT == 4) {
                    if (t == 3) prep = exactPrep<3>();
                } else if constexpr (MAXT == 8) {
                    if (t == 5) prep = exactPrep<5>();
                    else if (t == 6) prep = exactPrep<6>();
                    else if (t == 7) prep = exactPrep<7>();
                }
            }
        }
    }
    // Warps (one (row, key head) pair each) per prep CTA: 4, fewer when their shared memory would pass 64 KB.
    const size_t warpSmem = splitPrepWarpSmemBytesGdn(p.window, p.num_tokens, K);
    int warps = kSplitPrepMaxThreads / 32;
    while (warps > 1 && warps * warpSmem > 64 * 1024) --warps;
    const size_t prepSmem = warps * warpSmem;
    cudaError_t e = allowDynamicSmem(prep, prepSmem);
    if (e != cudaSuccess) return e;
    const long long pairs = (long long)p.batch * p.num_heads;
    const bool mma = K == 128 && MAXT > 1 && !stream::RowQuad<ST>::kScaled && useVerifyMma(p);
    int mmaBlock = mma ? 1 : 0;
    void* prepArgs[] = {const_cast<GdnReplayParams*>(&p), &mmaBlock};
    e = launchMaybeDependent(reinterpret_cast<const void*>(prep), dim3((unsigned)((pairs + warps - 1) / warps)),
                             dim3(warps * 32), prepSmem, s, prepArgs, pdlChainEnabled());
    if (e != cudaSuccess || (e = cudaGetLastError()) != cudaSuccess) return e;
    if constexpr (K == 128 && !std::is_same<ST, float>::value) {
        if constexpr (MAXT == 1 && (std::is_same<ST, __half>::value || stream::RawQuad<ST>::kScaled)) {
            if (useReadCopy<ST>(p) && useReadCopyMma(p, rc)) return launchReadCopyMma(p, smCount, s, rc);
        }
        if (useReadCopy<ST>(p)) {
            // 16-bit rows with one token fit 96 registers (128 x 5); fp8 / nvfp4 rows (their scale words) and
            // more tokens take 128 (256 x 2) without spills
            if constexpr (MAXT == 1 && !stream::RawQuad<ST>::kScaled) return launchReadCopy<ST, MAXT, 128, 5>(p, smCount, s, rc);
            else return launchReadCopy<ST, MAXT, 256, 2>(p, smCount, s, rc);
        }
    }
    if (mma) return launchVerifyMma(p, smCount, s);
    if constexpr (K == 128 && MAXT == 1) {
        switch (readoutConfig()) {
            case 2: return launchReadout<ST, K, MAXT, 256, 2>(p, smCount, s, rc);
            case 3: return launchReadout<ST, K, MAXT, 256, 3>(p, smCount, s, rc);
            default: break;
        }
        return launchReadout<ST, K, MAXT, 128, 5>(p, smCount, s, rc);
    }
    return launchReadout<ST, K, MAXT, 256, 2>(p, smCount, s, rc);
}
template <typename ST, int K>
cudaError_t launchSplitK(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    if (p.mode == GDN_REPLAY_STANDARD) return launchSplitKT<ST, K, 1>(p, smCount, s, rc);
    if (p.num_tokens <= 2) return launchSplitKT<ST, K, 2>(p, smCount, s, rc);
    if (p.num_tokens <= 4) return launchSplitKT<ST, K, 4>(p, smCount, s, rc);
    return launchSplitKT<ST, K, 8>(p, smCount, s, rc);
}
template <typename ST>
cudaError_t launchSplitST(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    if constexpr (stream::RowQuad<ST>::kScaled) return launchSplitK<ST, 128>(p, smCount, s, rc);  // K = 128 only
    else return p.head_k == 128 ? launchSplitK<ST, 128>(p, smCount, s, rc) : launchSplitK<ST, 256>(p, smCount, s, rc);
}
}  // namespace

size_t splitWorkspaceBytes(int batch, int numTokens, int numVHeads, int window) {
    return splitWorkspaceBytesGdn(batch, numTokens, numVHeads, window);
}
int splitMaxRecords() { return kSplitMaxRecords; }
int splitRows() { return kSplitRows; }

cudaError_t launchSplit(const GdnReplayParams& p, int smCount, cudaStream_t s, const stream::ReadCopyScales& rc) {
    switch (p.state_dtype) {
        case RSSM_DTYPE_FP32: return launchSplitST<float>(p, smCount, s, rc);
        case RSSM_DTYPE_FP16: return launchSplitST<__half>(p, smCount, s, rc);
        case RSSM_DTYPE_FP8_E4M3: return launchSplitST<stream::Fp8Rows>(p, smCount, s, rc);
        case RSSM_DTYPE_NVFP4: return launchSplitST<stream::Nvfp4Rows>(p, smCount, s, rc);
        default: return launchSplitST<__nv_bfloat16>(p, smCount, s, rc);
    }
}

}  // namespace gdn
}  // namespace rssm
