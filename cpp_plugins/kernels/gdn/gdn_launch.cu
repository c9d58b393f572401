// Host launchers of the GDN kernels: validation (messages name the field, the expected and the
// actual value), configuration, dispatch on the state dtype. Never syncs, allocates or throws.
#include <stdlib.h>

#include <cuda_runtime.h>

#include "common/rssm_common.h"
#include "gdn/gdn.h"
#include "gdn/gdn_dispatch.cuh"
#include "common/read_rows.cuh"
#include "gdn/gdn_split.h"
#include "gdn/gdn_warp_decode.h"
#include "gdn/gdn_warp_replay.h"

namespace rssm {
namespace gdn {
RSSM_GDN_EXTERN(float)
RSSM_GDN_EXTERN(__half)
RSSM_GDN_EXTERN(__nv_bfloat16)
}  // namespace gdn
}  // namespace rssm

namespace {

using rssm::setError;

bool headKOk(int K) { return K == 64 || K == 128 || K == 256; }
bool aligned8(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 7u) == 0; }
bool stridesMul4(int64_t a, int64_t b, int64_t c) { return a % 4 == 0 && b % 4 == 0 && c % 4 == 0; }

int smCount() {
    int dev = 0, n = 132;
    if (cudaGetDevice(&dev) != cudaSuccess) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) n = 132;
    return n;
}

int smemOptin() {
    int dev = 0, n = 48 * 1024;
    if (cudaGetDevice(&dev) != cudaSuccess) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) n = 48 * 1024;
    return n;
}

// Tile kernels (variants >= 1): rows per pass of the 128-thread CTA.
int tileRowsPass(int K) { return rssm::gdn::kTileThreads / (K / 32); }
int roundUp(int x, int m) { return (x + m - 1) / m * m; }
// Rows per CTA that make the state tile about 32 KB (a multiple of the rows per pass, at most
// the head); one pass per CTA when the grid would be under two waves of 132-ish CTAs (small batch).
int tileRowsAuto(int K, int stBytes, int V, long long headsTotal) {
    const int pass = tileRowsPass(K);
    int tile = roundUp(32768 / (K * stBytes) > pass ? 32768 / (K * stBytes) : pass, pass);
    tile = tile < roundUp(V, pass) ? tile : roundUp(V, pass);
    const long long ctas = headsTotal * ((V + tile - 1) / tile);
    if (ctas < 2LL * smCount()) tile = pass;
    return tile;
}

// Common checks of the shared size fields. Returns RSSM_OK or an error (message set).
int checkShapes(const char* op, int B, int T, int H, int HV, int K, int V, int S, int state_dtype,
                int act_dtype) {
    if (B < 0) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: batch must be >= 0; got %d", op, B);
    if (T < 1 || T > GDN_MAX_TOKENS)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_tokens must be in [1, %d]; got %d", op,
                        GDN_MAX_TOKENS, T);
    if (H < 1 || HV < 1 || HV % H != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: num_v_heads (%d) must be a positive multiple of num_heads (%d)", op, HV, H);
    if (!headKOk(K))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: head_k must be one of {64, 128, 256}; got %d", op, K);
    if (V < 1) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: head_v must be >= 1; got %d", op, V);
    if (S < 1) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_slots must be >= 1; got %d", op, S);
    if (state_dtype != RSSM_DTYPE_FP32 && state_dtype != RSSM_DTYPE_FP16 && state_dtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED,
                        "%s: state_dtype must be FP32 (0), FP16 (1) or BF16 (2); got %d", op, state_dtype);
    if (act_dtype != RSSM_DTYPE_FP16 && act_dtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: act_dtype must be FP16 (1) or BF16 (2); got %d", op,
                        act_dtype);
    return RSSM_OK;
}

int checkStateStrides(const char* op, const void* state, int64_t ss, int64_t sh, int64_t sv, int state_dtype) {
    const int64_t esz = state_dtype == RSSM_DTYPE_FP32 ? 4 : 2;
    const int64_t need = 4;  // quads of 4 elements: 16 B (fp32) / 8 B (16-bit) accesses
    if ((reinterpret_cast<uintptr_t>(state) & (uintptr_t)(esz * 4 - 1)) != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: 'state' must be %d-byte aligned; got %p", op,
                        (int)(esz * 4), state);
    if (ss % need || sh % need || sv % need)
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: 'state' strides must be multiples of 4 elements (last dim contiguous); "
                        "got (slot %lld, head %lld, v %lld)",
                        op, (long long)ss, (long long)sh, (long long)sv);
    return RSSM_OK;
}

int checkQK(const char* op, const void* q, const void* k, int64_t qb, int64_t qt, int64_t qh, int64_t kb,
            int64_t kt, int64_t kh) {
    if (!aligned8(q) || !stridesMul4(qb, qt, qh))
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: 'q' needs an 8-byte aligned base and strides that are multiples of 4 "
                        "elements; got %p, strides (%lld, %lld, %lld)",
                        op, q, (long long)qb, (long long)qt, (long long)qh);
    if (!aligned8(k) || !stridesMul4(kb, kt, kh))
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: 'k' needs an 8-byte aligned base and strides that are multiples of 4 "
                        "elements; got %p, strides (%lld, %lld, %lld)",
                        op, k, (long long)kb, (long long)kt, (long long)kh);
    return RSSM_OK;
}

#define RSSM_REQUIRE_PTR(op, ptr, name) \
    if ((ptr) == nullptr) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: '%s' must not be NULL", op, name)

}  // namespace

namespace rssm {
namespace gdn {
int streamFullRing(long long ctas, int ring_capacity, int maxT) {
    return (ctas < 2LL * smCount() && ring_capacity <= GDN_MAX_WINDOW + maxT) ? 1 : 0;
}
}  // namespace gdn
}  // namespace rssm

namespace {
// Variants 3-5 (stream kernels): column-per-lane layout needs K a multiple of 128; fixed rows per CTA.
int checkStreamVariant(const char* op, int head_k, int rows_per_cta) {
    if (head_k != 128 && head_k != 256)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variants 3-5 (stream kernels) support head_k 128 or 256; got %d "
                        "(use variant 0, 1 or 2)", op, head_k);
    if (rows_per_cta != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variants 3-5 pick their own rows per CTA; rows_per_cta must be 0; "
                        "got %d", op, rows_per_cta);
    return RSSM_OK;
}

int finish(const char* op, cudaError_t e) {
    if (e != cudaSuccess)
        return setError(RSSM_ERR_CUDA, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}

using rssm::aligned16Rows;

// Variant 6 (split kernels) input rules: K 128 / 256, rows_per_cta 0, head_v % 8 == 0, at most 32 records
// per step, 16-byte ring_u / ring_k rows (8-element loads and copies), a large enough workspace.
int checkSplit(const char* op, const GdnReplayParams& p) {
    const int v = GDN_VARIANT_SPLIT;
    if (p.head_k != 128 && p.head_k != 256)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d (split kernels) supports head_k 128 or 256; got %d "
                        "(use variant 0, 1 or 2)", op, v, p.head_k);
    if (p.rows_per_cta != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant %d picks its own rows; rows_per_cta must be 0; got %d",
                        op, v, p.rows_per_cta);
    if (p.head_v % rssm::gdn::splitRows() != 0)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d needs head_v %% %d == 0; got %d (use variants 0-5)", op, v,
                        rssm::gdn::splitRows(), p.head_v);
    if ((long long)p.batch * p.num_v_heads * (p.head_v / rssm::gdn::splitRows()) >= (1LL << 31))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d needs batch x num_v_heads x head_v / %d < 2^31; got "
                        "%d x %d x %d", op, v, rssm::gdn::splitRows(), p.batch, p.num_v_heads, p.head_v);
    const int records = p.mode == GDN_REPLAY_STANDARD ? p.window : p.window + p.num_tokens;
    if (records > rssm::gdn::splitMaxRecords())
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d (split kernels) handles at most %d records per step "
                        "(standard: window <= %d; speculative: window + num_tokens <= %d); got %d (use variants 0-5)",
                        op, v, rssm::gdn::splitMaxRecords(), rssm::gdn::splitMaxRecords(), rssm::gdn::splitMaxRecords(),
                        records);
    if (!aligned16Rows(p.ring_u, p.ring_u_stride_slot, p.ring_u_stride_rec, p.ring_u_stride_head))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant %d needs 16-byte aligned 'ring_u' rows (base 16-byte "
                        "aligned, strides multiples of 8 elements); got %p, strides (%lld, %lld, %lld)", op, v, p.ring_u,
                        (long long)p.ring_u_stride_slot, (long long)p.ring_u_stride_rec,
                        (long long)p.ring_u_stride_head);
    if (!aligned16Rows(p.ring_k, p.ring_k_stride_slot, p.ring_k_stride_rec, p.ring_k_stride_head))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant %d needs 16-byte aligned 'ring_k' rows (base 16-byte "
                        "aligned, strides multiples of 8 elements); got %p, strides (%lld, %lld, %lld)", op, v, p.ring_k,
                        (long long)p.ring_k_stride_slot, (long long)p.ring_k_stride_rec,
                        (long long)p.ring_k_stride_head);
    const int64_t need = rssm_gdn_replay_workspace_bytes(&p);
    if (p.batch > 0 && (!p.workspace || p.workspace_bytes < need))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant %d needs a workspace of %lld bytes "
                        "(rssm_gdn_replay_workspace_bytes); got ptr=%p bytes=%lld", op, v, (long long)need, p.workspace,
                        (long long)p.workspace_bytes);
    return RSSM_OK;
}

}  // namespace

// The split kernels can run these sizes (the rules of checkSplit that do not concern pointers or strides).
static bool splitSizesOk(const GdnReplayParams* p) {
    const int records = p->mode == GDN_REPLAY_STANDARD ? p->window : p->window + p->num_tokens;
    return (p->head_k == 128 || p->head_k == 256) && p->head_v > 0 && p->head_v % rssm::gdn::splitRows() == 0 &&
           records <= rssm::gdn::splitMaxRecords() && p->rows_per_cta == 0 &&
           (long long)p->batch * p->num_v_heads * (p->head_v / rssm::gdn::splitRows()) < (1LL << 31);
}
// The split kernels' batch rule by tokens per step (index 1..GDN_MAX_TOKENS): the smallest batch x num_v_heads from
// which they took less time than stream kernel 4 on both Qwen3.5 shapes (q35-4b 16 / 32 heads, q35-122b 16 / 64; B =
// 1-256, L = 16, all / one / mixed acceptance, rows in phase and staggered), measured side by side on an H100 in the
// fifty-second session (docs/kernels-gdn.md "Fifty-second session"), split / stream time:
//   T = 1: 0.95-0.99 at 1024, 0.96-1.04 at 384-768;       T = 2: 0.91-0.99 at 8192, 0.93-1.02 at 4096, 1.00-1.51 below;
//   T = 3: 0.89-0.91 (q35-122b) at 1024, 1.05-1.11 at 512; T = 4: 0.85-0.90 / 0.96-1.02 at 512, 1.02-1.29 at 256;
//   T = 5-6: 0.68-0.86 at 512, up to 1.12 (q35-122b) at 256; T = 8: 0.79-0.84 / 0.95-1.03 at 256, 1.09-1.51 at 128.
// T = 7 (not measured) takes T = 5-6's rule. To the fifty-first session one rule, 8192, for every T.
// T = 2 moved to 4096 in the fifty-sixth session, once the split kernels' T = 2 prep had the token count at compile
// time (EXACT): `scripts/gdn_split_rule_sweep.sh` on an H100, split / stream 0.918-1.000 (q35-4b B = 128) and
// 0.933-0.997 (q35-122b B = 64) at 4096, every case at or below 1 (staggered rows 0.94-0.95), 0.96-1.06 at
// 2048-3072 (docs/kernels-gdn.md "Fifty-sixth session").
// T = 1 moved to 768 in the fifty-seventh session: both H100 sweeps (fifty-second and fifty-sixth sessions) had the
// split kernels at or below stream kernel 4 at 768 (0.960-1.000, 0.967-0.995), and side by side against the old
// table (two processes per setting, H100) the moved steps took 0.960-0.982 (q35-4b B = 24 / 28), 0.981-0.992
// (q35-122b B = 14) and 1.002-1.004 (q35-122b B = 12, 28.0 -> 28.1 us) of their time, the unmoved ones 0.997-1.001.
static constexpr int kSplitMinBatchHeads[GDN_MAX_TOKENS + 1] = {0, 768, 4096, 1024, 512, 512, 512, 512, 256};
// The same rule for 16-bit (bf16 / fp16) checkpoints, measured side by side on an H100 in the fifty-third session
// (bf16 state, `bench gdn --variants 4,6 --tokens 1,2,4,8 --batch 4-128 --state-dtype bf16`; docs/kernels-gdn.md
// "Fifty-third session"): with half the bytes per row stream kernel 4's T = 2 advantage is gone (split / stream
// 0.86-0.92 at 2048, 0.95-1.07 at 1024), and at T = 1 the split kernels win only from 2048 (q35-4b up to 1.08 at
// 1024); T = 4: 0.73-0.92 at 512, 1.00-1.28 at 256; T = 8: 0.74-0.97 at 256, 1.05-1.14 at 128. T = 3 and T = 5-7 are
// not measured and keep the fp32 table's entries (1024, 512: what they ran before); fp16 checkpoints take bf16's (same
// bytes; not measured).
static constexpr int kSplitMinBatchHeads16[GDN_MAX_TOKENS + 1] = {0, 2048, 2048, 1024, 512, 512, 512, 512, 256};
// RSSM_GDN_SPLIT_MIN_BH replaces both tables (for another GPU, where the crossover may differ; measure it with
// scripts/gdn_split_rule_sweep.sh or scripts/auto_rule_sweeps.sh, docs/switches.md): one integer for every token
// count, or GDN_MAX_TOKENS comma-separated integers (T = 1, 2, ...), each in [1, 2^31 - 1] (1: whenever the sizes
// allow; a number above any batch x heads: never). Unset or empty: the table. Fills rule[1..GDN_MAX_TOKENS] with the
// rule in force and returns true; false when the variable is set but malformed (rule then holds the table; the
// launcher fails with splitRuleError's message). Read once per launch or query: one getenv and at most eight numbers.
static bool splitRule(int rule[GDN_MAX_TOKENS + 1], int stateDtype) {
    const bool wide = stateDtype == RSSM_DTYPE_FP16 || stateDtype == RSSM_DTYPE_BF16;
    for (int t = 0; t <= GDN_MAX_TOKENS; ++t) rule[t] = wide ? kSplitMinBatchHeads16[t] : kSplitMinBatchHeads[t];
    const char* e = getenv("RSSM_GDN_SPLIT_MIN_BH");
    if (!e || !*e) return true;
    long long v[GDN_MAX_TOKENS];
    int n = 0;
    const char* c = e;
    while (true) {
        if (*c < '0' || *c > '9' || n == GDN_MAX_TOKENS) return false;
        long long x = 0;
        while (*c >= '0' && *c <= '9') {
            x = x * 10 + (*c++ - '0');
            if (x > 2147483647LL) return false;
        }
        if (x < 1) return false;
        v[n++] = x;
        if (*c == '\0') break;
        if (*c++ != ',') return false;
    }
    if (n != 1 && n != GDN_MAX_TOKENS) return false;
    for (int t = 1; t <= GDN_MAX_TOKENS; ++t) rule[t] = (int)(n == 1 ? v[0] : v[t - 1]);
    return true;
}
static int splitRuleError(const char* op) {
    return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: RSSM_GDN_SPLIT_MIN_BH must be one integer or %d comma-separated "
                    "integers (tokens per step 1..%d), each in [1, 2147483647]; got '%s'", op, GDN_MAX_TOKENS,
                    GDN_MAX_TOKENS, getenv("RSSM_GDN_SPLIT_MIN_BH"));
}
extern "C" int rssm_gdn_replay_split_min_batch_heads_for(int num_tokens, int state_dtype) {
    if (num_tokens < 1 || num_tokens > GDN_MAX_TOKENS) return 0;
    int rule[GDN_MAX_TOKENS + 1];
    splitRule(rule, state_dtype);  // malformed: the table (the launcher refuses AUTO launches then)
    return rule[num_tokens];
}
extern "C" int rssm_gdn_replay_split_min_batch_heads(int num_tokens) {
    return rssm_gdn_replay_split_min_batch_heads_for(num_tokens, RSSM_DTYPE_FP32);
}
// Whether AUTO takes the split kernels for *p under `rule` (splitRule), given a large enough workspace.
static bool autoPicksSplit(const GdnReplayParams* p, const int rule[GDN_MAX_TOKENS + 1]) {
    return p->num_tokens >= 1 && p->num_tokens <= GDN_MAX_TOKENS && splitSizesOk(p) &&
           (long long)p->batch * p->num_v_heads >= rule[p->num_tokens];
}
// The split kernels' workspace for the sizes of *p (0 for empty sizes).
static int64_t splitWorkspace(const GdnReplayParams* p) {
    if (p->batch <= 0 || p->num_tokens <= 0 || p->num_v_heads <= 0 || p->window <= 0) return 0;
    return (int64_t)rssm::gdn::splitWorkspaceBytes(p->batch, p->num_tokens, p->num_v_heads, p->window);
}
extern "C" int64_t rssm_gdn_replay_workspace_bytes(const GdnReplayParams* p) {
    if (!p) return 0;
    if (p->variant == GDN_VARIANT_SPLIT) return splitWorkspace(p);
    if (p->variant != GDN_VARIANT_AUTO) return 0;
    int rule[GDN_MAX_TOKENS + 1];
    splitRule(rule, p->state_dtype);
    return autoPicksSplit(p, rule) ? splitWorkspace(p) : 0;
}
extern "C" int64_t rssm_gdn_replay_workspace_bound(const GdnReplayParams* p) {
    return rssm::splitWorkspaceBound(p, GDN_VARIANT_AUTO, GDN_VARIANT_SPLIT, rssm_gdn_replay_workspace_bytes);
}
extern "C" int rssm_gdn_replay_uses_warp_items(const GdnReplayParams* p) {
    return p && rssm::gdn::warpReplayWanted(*p) ? 1 : 0;
}
// GDN_VARIANT_AUTO's rule; `split`: autoPicksSplit holds and the workspace is large enough; `wir`:
// rssm::gdn::warpReplayWanted(*p). The launcher evaluates both once per launch.
static int autoVariant(const GdnReplayParams* p, bool split, bool wir) {
    if (split) return GDN_VARIANT_SPLIT;
    // small-batch standard steps: variant 5, which runs them on warp items (WIR, gdn_warp_replay.h: K = 128,
    // batch x num_v_heads <= 128; RSSM_GDN_WIR overrides the batch rule), measured faster than variant 4 there
    if (wir) return 5;
    return (p->head_k == 128 || p->head_k == 256) ? 4 : 1;
}
extern "C" int rssm_gdn_replay_auto_variant(const GdnReplayParams* p, int has_workspace) {
    if (!p) return 4;
    int rule[GDN_MAX_TOKENS + 1];
    splitRule(rule, p->state_dtype);
    return autoVariant(p, has_workspace != 0 && autoPicksSplit(p, rule), rssm::gdn::warpReplayWanted(*p));
}

extern "C" int rssm_gdn_decode_launch(const GdnDecodeParams* pp, cudaStream_t stream) {
    const char* op = "GdnDecode";
    if (pp == nullptr) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    GdnDecodeParams p = *pp;
    int st = checkShapes(op, p.batch, p.num_tokens, p.num_heads, p.num_v_heads, p.head_k, p.head_v,
                         p.num_slots, p.state_dtype, p.act_dtype);
    if (st != RSSM_OK) return st;
    if (p.variant == GDN_VARIANT_WARP_ITEMS && p.rows_per_cta != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant 6 (warp items) picks its own rows; rows_per_cta must "
                        "be 0; got %d", op, p.rows_per_cta);
    if (p.variant == GDN_VARIANT_WARP_ITEMS && p.head_k != 128 && p.head_k != 256)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant 6 (warp items) supports head_k 128 or 256; got %d (use "
                        "variant 0, 1 or 2)", op, p.head_k);
    if (p.snapshot != 0 && p.snapshot != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: snapshot must be 0 or 1; got %d", op, p.snapshot);
    if (p.snapshot ? p.indices_cols < p.num_tokens : p.indices_cols < 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: indices_cols must be >= %d; got %d", op,
                        p.snapshot ? p.num_tokens : 1, p.indices_cols);
    if (!p.snapshot && p.num_accepted != nullptr)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_accepted is only valid with snapshot = 1", op);
    if (p.batch == 0) return RSSM_OK;
    RSSM_REQUIRE_PTR(op, p.state, "state");
    RSSM_REQUIRE_PTR(op, p.state_indices, "state_indices");
    RSSM_REQUIRE_PTR(op, p.q, "q");
    RSSM_REQUIRE_PTR(op, p.k, "k");
    RSSM_REQUIRE_PTR(op, p.v, "v");
    RSSM_REQUIRE_PTR(op, p.a, "a");
    RSSM_REQUIRE_PTR(op, p.b, "b");
    RSSM_REQUIRE_PTR(op, p.A_log, "A_log");
    RSSM_REQUIRE_PTR(op, p.dt_bias, "dt_bias");
    RSSM_REQUIRE_PTR(op, p.o, "o");
    if ((st = checkStateStrides(op, p.state, p.state_stride_slot, p.state_stride_head, p.state_stride_v,
                                p.state_dtype)) != RSSM_OK)
        return st;
    if ((st = checkQK(op, p.q, p.k, p.q_stride_b, p.q_stride_t, p.q_stride_h, p.k_stride_b, p.k_stride_t,
                      p.k_stride_h)) != RSSM_OK)
        return st;
    if (p.variant < 0 || p.variant >= GDN_NUM_VARIANTS)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant must be in [0, %d]; got %d", op,
                        GDN_NUM_VARIANTS - 1, p.variant);
    if (p.variant == GDN_VARIANT_WARP_ITEMS) {
        // Warp-item kernel (gdn_warp_decode.cu) for one token in place; otherwise the documented fallback: variant 5.
        if (rssm::gdn::warpDecodeRuns(p)) {
            if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
            return finish(op, rssm::gdn::launchDecodeWarpItems(p, stream));
        }
        p.variant = 5;
    }
    if (p.variant >= 3) {
        if ((st = checkStreamVariant(op, p.head_k, p.rows_per_cta)) != RSSM_OK) return st;
        if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
        cudaError_t e;
        switch (p.state_dtype) {
            case RSSM_DTYPE_FP32: e = rssm::gdn::launchDecodeStream<float>(p, stream); break;
            case RSSM_DTYPE_FP16: e = rssm::gdn::launchDecodeStream<__half>(p, stream); break;
            default: e = rssm::gdn::launchDecodeStream<__nv_bfloat16>(p, stream); break;
        }
        return finish(op, e);
    }
    const int batchRows = p.variant == 0 ? rssm::gdn::decodeBatchRows(p.head_k) : tileRowsPass(p.head_k);
    if (p.rows_per_cta < 0 || p.rows_per_cta % batchRows != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rows_per_cta must be 0 or a multiple of %d; got %d",
                        op, batchRows, p.rows_per_cta);
    if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
    cudaError_t e;
    if (p.variant == 0) {
        if (p.rows_per_cta == 0) p.rows_per_cta = batchRows;
        switch (p.state_dtype) {
            case RSSM_DTYPE_FP32: e = rssm::gdn::launchDecode<float>(p, stream); break;
            case RSSM_DTYPE_FP16: e = rssm::gdn::launchDecode<__half>(p, stream); break;
            default: e = rssm::gdn::launchDecode<__nv_bfloat16>(p, stream); break;
        }
        return finish(op, e);
    }
    const int stBytes = p.state_dtype == RSSM_DTYPE_FP32 ? 4 : 2;
    if (p.rows_per_cta == 0)
        p.rows_per_cta = p.variant == 2 ? batchRows
                                        : tileRowsAuto(p.head_k, stBytes, p.head_v, (long long)p.batch * p.num_v_heads);
    const int smem = rssm::gdn::decodeTileSmemBytes(p.head_k, stBytes, p.rows_per_cta, p.num_tokens);
    if (smem > smemOptin())
        return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d needs %d bytes of shared memory per CTA (rows_per_cta %d); "
                        "the device allows %d", op, p.variant, smem, p.rows_per_cta, smemOptin());
    switch (p.state_dtype) {
        case RSSM_DTYPE_FP32: e = rssm::gdn::launchDecodeTile<float>(p, smem, stream); break;
        case RSSM_DTYPE_FP16: e = rssm::gdn::launchDecodeTile<__half>(p, smem, stream); break;
        default: e = rssm::gdn::launchDecodeTile<__nv_bfloat16>(p, smem, stream); break;
    }
    return finish(op, e);
}

// readFmt: 0, or FP8_E4M3 / NVFP4 for a read-only dual-precision read copy (rc its scales; the shared
// checks run with the fp16 row rules, the caller checked the payload's byte strides).
static int replayLaunchImpl(const char* op, GdnReplayParams p, int readFmt, const rssm::stream::ReadCopyScales& rc,
                            cudaStream_t stream) {
    const int userRows = p.rows_per_cta;  // as given (the tile variants halve their own choice only)
    if (readFmt) p.state_dtype = RSSM_DTYPE_FP16;
    // variant 5's standard step on warp items (WIR): decided once per launch, for AUTO and variant 5 alike
    const bool wir = (p.variant == GDN_VARIANT_AUTO || p.variant == 5) && rssm::gdn::warpReplayWanted(p);
    if (p.variant == GDN_VARIANT_AUTO) {  // the split rule read once, the workspace sized once
        int rule[GDN_MAX_TOKENS + 1];
        if (!splitRule(rule, p.state_dtype)) return splitRuleError(op);
        const int64_t need = autoPicksSplit(&p, rule) ? splitWorkspace(&p) : 0;
        p.variant = autoVariant(&p, need > 0 && p.workspace && p.workspace_bytes >= need, wir);
    }
    int st = checkShapes(op, p.batch, p.num_tokens, p.num_heads, p.num_v_heads, p.head_k, p.head_v,
                         p.num_slots, p.state_dtype, p.act_dtype);
    if (st != RSSM_OK) return st;
    if (p.mode != GDN_REPLAY_STANDARD && p.mode != GDN_REPLAY_SPECULATIVE)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: mode must be 0 (standard) or 1 (speculative); got %d",
                        op, p.mode);
    if (p.mode == GDN_REPLAY_STANDARD && p.num_tokens != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: standard mode needs num_tokens == 1; got %d", op,
                        p.num_tokens);
    if (p.window < 1 || p.window > GDN_MAX_WINDOW)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: window must be in [1, %d]; got %d", op, GDN_MAX_WINDOW,
                        p.window);
    const int minCap = p.mode == GDN_REPLAY_STANDARD ? p.window : p.window + p.num_tokens;
    if (p.ring_capacity < minCap)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: ring_capacity must be >= %s = %d; got %d", op,
                        p.mode == GDN_REPLAY_STANDARD ? "window" : "window + num_tokens", minCap,
                        p.ring_capacity);
    if (p.u_dtype != RSSM_DTYPE_FP16 && p.u_dtype != RSSM_DTYPE_BF16)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: u_dtype must be FP16 (1) or BF16 (2); got %d", op, p.u_dtype);
    if (p.batch == 0) return RSSM_OK;
    RSSM_REQUIRE_PTR(op, p.state, "state");
    RSSM_REQUIRE_PTR(op, p.state_batch_indices, "state_batch_indices");
    RSSM_REQUIRE_PTR(op, p.ring_origin, "ring_origin");
    RSSM_REQUIRE_PTR(op, p.ring_len, "ring_len");
    RSSM_REQUIRE_PTR(op, p.ring_g, "ring_g");
    RSSM_REQUIRE_PTR(op, p.ring_u, "ring_u");
    RSSM_REQUIRE_PTR(op, p.ring_k, "ring_k");
    RSSM_REQUIRE_PTR(op, p.q, "q");
    RSSM_REQUIRE_PTR(op, p.k, "k");
    RSSM_REQUIRE_PTR(op, p.v, "v");
    RSSM_REQUIRE_PTR(op, p.a, "a");
    RSSM_REQUIRE_PTR(op, p.b, "b");
    RSSM_REQUIRE_PTR(op, p.A_log, "A_log");
    RSSM_REQUIRE_PTR(op, p.dt_bias, "dt_bias");
    RSSM_REQUIRE_PTR(op, p.o, "o");
    if ((st = checkStateStrides(op, p.state, p.state_stride_slot, p.state_stride_head, p.state_stride_v,
                                p.state_dtype)) != RSSM_OK)
        return st;
    if ((st = checkQK(op, p.q, p.k, p.q_stride_b, p.q_stride_t, p.q_stride_h, p.k_stride_b, p.k_stride_t,
                      p.k_stride_h)) != RSSM_OK)
        return st;
    if (!aligned8(p.ring_k) || !stridesMul4(p.ring_k_stride_slot, p.ring_k_stride_rec, p.ring_k_stride_head))
        return setError(RSSM_ERR_INVALID_ARGUMENT,
                        "%s: 'ring_k' needs an 8-byte aligned base and strides that are multiples of 4 "
                        "elements; got %p, strides (%lld, %lld, %lld)",
                        op, p.ring_k, (long long)p.ring_k_stride_slot, (long long)p.ring_k_stride_rec,
                        (long long)p.ring_k_stride_head);
    if (p.variant < 0 || p.variant >= GDN_NUM_VARIANTS)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: variant must be in [0, %d]; got %d", op,
                        GDN_NUM_VARIANTS - 1, p.variant);
    if (p.skip_flush_rows != 0 && p.skip_flush_rows != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: skip_flush_rows must be 0 or 1; got %d", op, p.skip_flush_rows);
    if ((p.skip_flush_rows || p.ring_beta || p.ring_v) && p.variant < 3)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: skip_flush_rows / ring_beta / ring_v (dual-precision decode) "
                        "need a stream variant (3, 4 or 5) or the split kernels (6); got variant %d", op, p.variant);
    if (readFmt && (p.variant != GDN_VARIANT_SPLIT || !p.skip_flush_rows))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: a read-only copy runs on the split kernels (variant 6) with "
                        "skip_flush_rows = 1; got variant %d, skip_flush_rows %d", op, p.variant, p.skip_flush_rows);
    if (p.workspace_bytes < 0 || (reinterpret_cast<uintptr_t>(p.workspace) & 15u) != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: workspace must be 16-byte aligned with workspace_bytes >= 0; "
                        "got ptr=%p bytes=%lld", op, p.workspace, (long long)p.workspace_bytes);
    if (p.variant == GDN_VARIANT_SPLIT) {
        if ((st = checkSplit(op, p)) != RSSM_OK) return st;
        if (p.batch == 0) return RSSM_OK;
        if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
        if (readFmt) p.state_dtype = readFmt;
        return finish(op, rssm::gdn::launchSplit(p, smCount(), stream, rc));
    }
    if (p.variant >= 3) {
        if ((st = checkStreamVariant(op, p.head_k, p.rows_per_cta)) != RSSM_OK) return st;
        if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
        // variant 5's standard step at small batches on warp items (gdn_warp_replay.cu; RSSM_GDN_WIR for A/B)
        if (p.variant == 5 && wir) return finish(op, rssm::gdn::launchReplayWarpItems(p, stream));
        cudaError_t e;
        switch (p.state_dtype) {
            case RSSM_DTYPE_FP32: e = rssm::gdn::launchReplayStream<float>(p, stream); break;
            case RSSM_DTYPE_FP16: e = rssm::gdn::launchReplayStream<__half>(p, stream); break;
            default: e = rssm::gdn::launchReplayStream<__nv_bfloat16>(p, stream); break;
        }
        return finish(op, e);
    }
    const int batchRows = p.variant == 0 ? rssm::gdn::replayBatchRows(p.head_k, p.mode) : tileRowsPass(p.head_k);
    if (p.rows_per_cta < 0 || p.rows_per_cta % batchRows != 0)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: rows_per_cta must be 0 or a multiple of %d; got %d",
                        op, batchRows, p.rows_per_cta);
    if (p.variant != 0) {
        if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
        const int stBytes = p.state_dtype == RSSM_DTYPE_FP32 ? 4 : 2;
        const long long heads = (long long)p.batch * p.num_v_heads;
        const int limit = smemOptin();
        int full_ring = 0;
        if (p.rows_per_cta == 0) {
            if (p.variant == 2) {
                p.rows_per_cta = roundUp(p.head_v, batchRows);  // one whole head per CTA
            } else {
                p.rows_per_cta = tileRowsAuto(p.head_k, stBytes, p.head_v, heads);
                // small-batch route: one pass per CTA, and the whole ring copied without waiting
                // for the cursors (one dependent round trip fewer)
                if (p.rows_per_cta == batchRows && p.ring_capacity <= GDN_MAX_WINDOW + GDN_MAX_TOKENS) full_ring = 1;
            }
        }
        auto smemOf = [&](int tile) {
            return rssm::gdn::replayTileSmemBytes(p.head_k, stBytes, tile, full_ring ? p.ring_capacity : p.window,
                                                  p.num_tokens);
        };
        while (smemOf(p.rows_per_cta) > limit && p.rows_per_cta > batchRows && userRows == 0)
            p.rows_per_cta = roundUp(p.rows_per_cta / 2, batchRows);
        const int smem = smemOf(p.rows_per_cta);
        if (smem > limit)
            return setError(RSSM_ERR_UNSUPPORTED, "%s: variant %d needs %d bytes of shared memory per CTA "
                            "(rows_per_cta %d); the device allows %d", op, p.variant, smem, p.rows_per_cta, limit);
        cudaError_t e;
        switch (p.state_dtype) {
            case RSSM_DTYPE_FP32: e = rssm::gdn::launchReplayTile<float>(p, smem, full_ring, stream); break;
            case RSSM_DTYPE_FP16: e = rssm::gdn::launchReplayTile<__half>(p, smem, full_ring, stream); break;
            default: e = rssm::gdn::launchReplayTile<__nv_bfloat16>(p, smem, full_ring, stream); break;
        }
        return finish(op, e);
    }
    if (p.rows_per_cta == 0) {
        if (p.mode == GDN_REPLAY_STANDARD) {
            p.rows_per_cta = batchRows;
        } else {
            // Speculative: one CTA per head amortizes the per-head preamble (T x (h + T) dots) unless
            // that leaves the GPU under-filled.
            const int whole = (p.head_v + batchRows - 1) / batchRows * batchRows;
            const long long ctasWhole = (long long)p.batch * p.num_v_heads;
            p.rows_per_cta = ctasWhole >= 4LL * smCount() ? whole : batchRows;
        }
    }
    if (!(p.scale > 0.f)) p.scale = 1.0f / sqrtf((float)p.head_k);
    cudaError_t e;
    switch (p.state_dtype) {
        case RSSM_DTYPE_FP32: e = rssm::gdn::launchReplay<float>(p, stream); break;
        case RSSM_DTYPE_FP16: e = rssm::gdn::launchReplay<__half>(p, stream); break;
        default: e = rssm::gdn::launchReplay<__nv_bfloat16>(p, stream); break;
    }
    return finish(op, e);
}

extern "C" int rssm_gdn_replay_launch(const GdnReplayParams* pp, cudaStream_t stream) {
    const char* op = "GdnReplay";
    if (pp == nullptr) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    return replayLaunchImpl(op, *pp, 0, rssm::stream::ReadCopyScales{}, stream);
}

int rssm::gdn::replaySplitReadCopy(const GdnReplayParams& q, const rssm::stream::ReadCopyScales& rc,
                                   cudaStream_t stream) {
    const char* op = "GdnReplay (read copy)";
    const int st = rssm::stream::checkReadCopy(op, q.state_dtype, "head_k", q.head_k, rc, q.num_v_heads, q.head_v);
    return st != RSSM_OK ? st : replayLaunchImpl(op, q, q.state_dtype, rc, stream);
}
