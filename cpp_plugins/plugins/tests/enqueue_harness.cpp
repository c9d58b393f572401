// Direct-enqueue harness for the replayssm TensorRT plugins (needs a CUDA GPU; no libnvinfer).
//
// For each plugin it: finds the creator through getCreators() (the loadLibrary entry point),
// creates the plugin from a PluginFieldCollection (build phase), round-trips it through
// getFieldsToSerialize() -> createPlugin(runtime phase) and through the core's versioned blob,
// checks getOutputDataTypes / getOutputShapes / supportsFormatCombination on the real descriptors,
// then calls onShapeChange + enqueue with real device buffers and PluginTensorDescs, step after
// step with ReplayCommit in between, and compares every output with a float64 CPU recurrence
// (the defining property: checkpoint + ring replay == the full recurrence, across flushes).
// Dual-precision cases (ReplayDecode with read_dtype fp16, then DualPrecisionFlush, then
// ReplayCommit, Mamba-2 and GDN at N = K = 128, fp32 recurrence): outputs vs the float64 recurrence
// (the fp16 read copy is read on non-flush steps), the fp32 recurrence checkpoint vs the float64
// state after every flush, the read copy == RTN fp16 of the recurrence copy after a flush, and both
// copies untouched by non-flush steps.
// What it does not exercise: TensorRT's own engine machinery (builder, tactic selection,
// serialization of the engine, execution context, CUDA-graph capture by TensorRT).
//
// Build: cmake target rssm_enqueue_harness (when TensorRT headers are found). Run: no arguments;
// exit status 0 = all checks passed. Prints max abs error and relative RMS error per case.
#include <NvInferRuntime.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/rssm_common.h"
#include "rssmPluginBase.h"
#include "rssm_plugin_core.h"

using namespace nvinfer1;

extern "C" IPluginCreatorInterface* const* getCreators(int32_t& nbCreators);

namespace {
int gFailures = 0;
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            std::printf("FAIL %s:%d: ", __FILE__, __LINE__);                 \
            std::printf(__VA_ARGS__);                                        \
            std::printf("\n");                                               \
            ++gFailures;                                                     \
        }                                                                    \
    } while (0)
#define CUDA_OK(x) CHECK((x) == cudaSuccess, "%s -> %s", #x, cudaGetErrorString(cudaGetLastError()))

class QuietLogger : public ILogger {
public:
    void log(Severity s, char const* msg) noexcept override {
        if (s <= Severity::kWARNING) std::printf("  [plugin log] %s\n", msg);
    }
} gLogger;

IPluginCreatorV3One* findCreator(char const* name) {
    int32_t n = 0;
    IPluginCreatorInterface* const* list = getCreators(n);
    for (int32_t i = 0; i < n; ++i) {
        auto* c = static_cast<IPluginCreatorV3One*>(list[i]);
        if (std::string(c->getPluginName()) == name) return c;
    }
    return nullptr;
}

// Owns field storage for a PluginFieldCollection.
struct Fields {
    std::vector<PluginField> f;
    std::vector<std::unique_ptr<int32_t>> ints;
    std::vector<std::string> strs;
    PluginFieldCollection fc{};
    Fields() { strs.reserve(32); }
    Fields& i(char const* n, int32_t v) {
        ints.emplace_back(new int32_t(v));
        f.emplace_back(n, ints.back().get(), PluginFieldType::kINT32, 1);
        return *this;
    }
    Fields& s(char const* n, char const* v) {
        strs.emplace_back(v);
        f.emplace_back(n, strs.back().c_str(), PluginFieldType::kCHAR, static_cast<int32_t>(strs.back().size() + 1));
        return *this;
    }
    PluginFieldCollection const* get() {
        fc.nbFields = static_cast<int32_t>(f.size());
        fc.fields = f.data();
        return &fc;
    }
};

struct Dev {
    void* p = nullptr;
    size_t bytes = 0;
    explicit Dev(size_t b) : bytes(b) { CUDA_OK(cudaMalloc(&p, b)); CUDA_OK(cudaMemset(p, 0, b)); }
    ~Dev() { cudaFree(p); }
    template <typename T> void up(std::vector<T> const& h) { CUDA_OK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); }
    template <typename T> std::vector<T> down(size_t n) {
        std::vector<T> h(n);
        CUDA_OK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
};

PluginTensorDesc desc(DataType t, std::vector<int64_t> const& dims) {
    PluginTensorDesc d{};
    d.type = t;
    d.format = TensorFormat::kLINEAR;
    d.scale = 1.f;
    d.dims.nbDims = static_cast<int32_t>(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) d.dims.d[i] = dims[i];
    return d;
}
std::vector<__half> toHalf(std::vector<double> const& v) {
    std::vector<__half> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = __float2half(static_cast<float>(v[i]));
    return h;
}
std::vector<double> fromHalf(std::vector<__half> const& h) {
    std::vector<double> v(h.size());
    for (size_t i = 0; i < h.size(); ++i) v[i] = __half2float(h[i]);
    return v;
}
// Round through fp16, so the reference sees exactly what the kernel reads.
std::vector<double> roundHalf(std::vector<double> v) { return fromHalf(toHalf(v)); }

struct Runtime {
    IPluginV3* plugin = nullptr;
    IPluginV3OneRuntime* rt = nullptr;
    IPluginV3OneBuild* build = nullptr;
};

// Creates through the creator (build phase), checks field / blob round trips, returns a runtime-phase clone.
Runtime makePlugin(char const* name, Fields& fields) {
    Runtime r;
    IPluginCreatorV3One* c = findCreator(name);
    CHECK(c != nullptr, "creator %s not found through getCreators()", name);
    if (!c) return r;
    IPluginV3* built = c->createPlugin("harness", fields.get(), TensorRTPhase::kBUILD);
    CHECK(built != nullptr, "%s: createPlugin(kBUILD) failed", name);
    if (!built) return r;
    auto* core = static_cast<IPluginV3OneCore*>(built->getCapabilityInterface(PluginCapabilityType::kCORE));
    char const* wantVersion = std::string(name) == "ReplayDecode_RSSM" ? "2" : "1";  // ReplayDecode 2: read_dtype
    CHECK(std::string(core->getPluginVersion()) == wantVersion && std::string(c->getPluginVersion()) == wantVersion &&
              std::string(core->getPluginNamespace()) == "replayssm",
          "%s: version/namespace %s/%s (expected %s/replayssm)", name, core->getPluginVersion(),
          core->getPluginNamespace(), wantVersion);
    auto* brt = static_cast<IPluginV3OneRuntime*>(built->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    PluginFieldCollection const* ser = brt->getFieldsToSerialize();
    IPluginV3* runtime = c->createPlugin("harness", ser, TensorRTPhase::kRUNTIME);
    CHECK(runtime != nullptr, "%s: createPlugin(kRUNTIME) from getFieldsToSerialize() failed", name);
    auto* base = dynamic_cast<rssm::plugin::RssmPluginBase*>(built);
    auto* base2 = dynamic_cast<rssm::plugin::RssmPluginBase*>(runtime);
    if (base && base2) {
        CHECK(base->config().ints == base2->config().ints && base->config().floats == base2->config().floats,
              "%s: field round trip changed the config", name);
        auto blob = rssm::core::serialize(base->config());
        auto back = rssm::core::deserialize(base->config().kind, blob.data(), blob.size());
        CHECK(back.ints == base->config().ints, "%s: blob round trip changed the config", name);
        bool refused = false;
        try { rssm::core::deserialize(base->config().kind, blob.data(), blob.size() - 3); } catch (rssm::core::Error const&) { refused = true; }
        CHECK(refused, "%s: truncated blob was accepted", name);
    }
    delete built;
    if (!runtime) return r;
    r.plugin = runtime;
    r.rt = static_cast<IPluginV3OneRuntime*>(runtime->getCapabilityInterface(PluginCapabilityType::kRUNTIME));
    r.build = static_cast<IPluginV3OneBuild*>(runtime->getCapabilityInterface(PluginCapabilityType::kBUILD));
    return r;
}

// supportsFormatCombination must accept the exact descriptors we run with.
void checkFormats(char const* name, Runtime const& r, std::vector<PluginTensorDesc> const& in,
                  std::vector<PluginTensorDesc> const& out) {
    std::vector<DynamicPluginTensorDesc> io;
    for (auto const& d : in) { DynamicPluginTensorDesc x{}; x.desc = d; io.push_back(x); }
    for (auto const& d : out) { DynamicPluginTensorDesc x{}; x.desc = d; io.push_back(x); }
    int32_t nIn = static_cast<int32_t>(in.size()), nOut = static_cast<int32_t>(out.size());
    for (int32_t pos = 0; pos < nIn + nOut; ++pos)
        CHECK(r.build->supportsFormatCombination(pos, io.data(), nIn, nOut), "%s: rejects its own format at pos %d", name, pos);
    CHECK(r.build->getNbOutputs() == nOut, "%s: getNbOutputs", name);
}

void report(char const* what, std::vector<double> const& got, std::vector<double> const& ref, double tol) {
    double maxAbs = 0, num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        double d = got[i] - ref[i];
        maxAbs = std::max(maxAbs, std::fabs(d));
        num += d * d;
        den += ref[i] * ref[i];
    }
    double rel = std::sqrt(num / std::max(den, 1e-30));
    std::printf("  %-48s max_abs=%.3e rel_rms=%.3e\n", what, maxAbs, rel);
    CHECK(rel < tol && std::isfinite(maxAbs), "%s: rel_rms %.3e >= %.1e", what, rel, tol);
}

double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

// ---- Mamba-2: ReplayDecode (standard, T = 1, or speculative T > 1 with all drafts accepted) + ReplayCommit
void runMamba2(bool speculative) {
    int const B = 3, S = 4, H = 4, P = 32, N = 64, G = 2, L = 3, T = speculative ? 2 : 1, Tmax = T,
              C = speculative ? L + Tmax : L;  // ring rows: L + T_max, or L in standard mode
    int const steps = 7;
    char label[64];
    std::snprintf(label, sizeof(label), "ReplayDecode mamba2 %s B%d H%d P%d N%d L%d T%d", speculative ? "spec" : "std", B, H, P, N, L, T);
    std::printf("%s\n", label);
    Fields f;
    f.s("family", "mamba2").i("window", L).i("max_verify", Tmax).s("mode", speculative ? "speculative" : "standard")
        .s("act_dtype", "fp16").s("state_dtype", "fp32").s("dt_dtype", "fp32").i("has_z", 1);
    Runtime dec = makePlugin("ReplayDecode_RSSM", f);
    Fields fc;
    fc.i("window", L).i("max_verify", Tmax).s("mode", speculative ? "speculative" : "standard").i("has_accepted", speculative ? 1 : 0);
    Runtime com = makePlugin("ReplayCommit_RSSM", fc);
    if (!dec.rt || !com.rt) return;

    std::mt19937 rng(1234);
    std::uniform_real_distribution<double> U(-1, 1);
    auto rnd = [&](size_t n, double s) { std::vector<double> v(n); for (auto& x : v) x = s * U(rng); return v; };
    std::vector<double> A(H), D = rnd(H, 1), dtb = rnd(H, 0.5);
    for (auto& a : A) a = -0.5 - std::fabs(U(rng));
    std::vector<int32_t> slots = {2, -1, 0};  // row 1 is padding
    std::vector<double> state0 = rnd(size_t(S) * H * P * N, 0.5);
    std::vector<double> ref = state0;  // float64 full recurrence per slot

    Dev dState(state0.size() * 4), dRingDt(size_t(S) * C * H * 4), dRingX(size_t(S) * C * H * P * 2),
        dRingB(size_t(S) * C * G * N * 2), dOrigin(S * 4), dLen(S * 4), dSlots(B * 4), dA(H * 4), dD(H * 4), dDtb(H * 4),
        dX(size_t(B) * T * H * P * 2), dDt(size_t(B) * T * H * 4), dB(size_t(B) * T * G * N * 2), dC(size_t(B) * T * G * N * 2),
        dZ(size_t(B) * T * H * P * 2), dY(size_t(B) * T * H * P * 2), dErr(4), dAcc(B * 4);
    std::vector<float> s32(state0.begin(), state0.end());
    dState.up(s32);
    auto f32 = [](std::vector<double> const& v) { return std::vector<float>(v.begin(), v.end()); };
    dA.up(f32(A)); dD.up(f32(D)); dDtb.up(f32(dtb)); dSlots.up(slots);
    dAcc.up(std::vector<int32_t>(B, T));

    std::vector<PluginTensorDesc> in = {
        desc(DataType::kHALF, {B, T, H, P}), desc(DataType::kFLOAT, {B, T, H}), desc(DataType::kHALF, {B, T, G, N}),
        desc(DataType::kHALF, {B, T, G, N}), desc(DataType::kFLOAT, {H}), desc(DataType::kFLOAT, {H}),
        desc(DataType::kFLOAT, {H}), desc(DataType::kINT32, {B}), desc(DataType::kFLOAT, {S, H, P, N}),
        desc(DataType::kFLOAT, {S, C, H}), desc(DataType::kHALF, {S, C, H, P}), desc(DataType::kHALF, {S, C, G, N}),
        desc(DataType::kINT32, {S}), desc(DataType::kINT32, {S}), desc(DataType::kHALF, {B, T, H, P})};
    std::vector<PluginTensorDesc> out = {desc(DataType::kHALF, {B, T, H, P})};
    checkFormats("ReplayDecode", dec, in, out);
    CHECK(dec.rt->onShapeChange(in.data(), 15, out.data(), 1) == 0, "ReplayDecode onShapeChange");
    std::vector<PluginTensorDesc> cin = {out[0], desc(DataType::kINT32, {B}), desc(DataType::kINT32, {S}), desc(DataType::kINT32, {S})};
    if (speculative) cin.push_back(desc(DataType::kINT32, {B}));
    std::vector<PluginTensorDesc> cout = {desc(DataType::kINT32, {1})};
    checkFormats("ReplayCommit", com, cin, cout);
    CHECK(com.rt->onShapeChange(cin.data(), static_cast<int32_t>(cin.size()), cout.data(), 1) == 0, "ReplayCommit onShapeChange");

    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    int const hpg = H / G;
    for (int step = 0; step < steps; ++step) {
        auto x = roundHalf(rnd(size_t(B) * T * H * P, 1)), Bm = roundHalf(rnd(size_t(B) * T * G * N, 1)),
             Cm = roundHalf(rnd(size_t(B) * T * G * N, 1)), z = roundHalf(rnd(size_t(B) * T * H * P, 1)),
             dt = rnd(size_t(B) * T * H, 1);
        dX.up(toHalf(x)); dB.up(toHalf(Bm)); dC.up(toHalf(Cm)); dZ.up(toHalf(z)); dDt.up(f32(dt));
        void const* ins[15] = {dX.p, dDt.p, dB.p, dC.p, dA.p, dD.p, dDtb.p, dSlots.p, dState.p, dRingDt.p, dRingX.p,
                               dRingB.p, dOrigin.p, dLen.p, dZ.p};
        void* outs[1] = {dY.p};
        CHECK(dec.rt->enqueue(in.data(), out.data(), ins, outs, nullptr, st) == 0, "ReplayDecode enqueue step %d", step);
        void const* cins[5] = {dY.p, dSlots.p, dOrigin.p, dLen.p, dAcc.p};
        void* couts[1] = {dErr.p};
        CHECK(com.rt->enqueue(cin.data(), cout.data(), cins, couts, nullptr, st) == 0, "ReplayCommit enqueue step %d", step);
        CUDA_OK(cudaStreamSynchronize(st));
        auto y = fromHalf(dY.down<__half>(size_t(B) * T * H * P));
        CHECK(dErr.down<int32_t>(1)[0] == -1, "error_slot set at step %d", step);
        // float64 reference: the full recurrence, every token committed.
        std::vector<double> yr(y.size(), 0.0), yg, yrg;
        for (int b = 0; b < B; ++b) {
            if (slots[b] < 0) continue;
            double* Sb = &ref[size_t(slots[b]) * H * P * N];
            for (int t = 0; t < T; ++t)
                for (int h = 0; h < H; ++h) {
                    size_t bt = size_t(b) * T + t;
                    double d = softplus(dt[bt * H + h] + dtb[h]), a = std::exp(d * A[h]);
                    int g = h / hpg;
                    for (int p = 0; p < P; ++p) {
                        double xv = x[(bt * H + h) * P + p], acc = 0;
                        for (int n = 0; n < N; ++n) {
                            double& s = Sb[(size_t(h) * P + p) * N + n];
                            s = a * s + d * xv * Bm[(bt * G + g) * N + n];
                            acc += s * Cm[(bt * G + g) * N + n];
                        }
                        double zz = z[(bt * H + h) * P + p];
                        yr[(bt * H + h) * P + p] = (acc + D[h] * xv) * zz / (1 + std::exp(-zz));
                    }
                }
            yg.insert(yg.end(), y.begin() + size_t(b) * T * H * P, y.begin() + size_t(b + 1) * T * H * P);
            yrg.insert(yrg.end(), yr.begin() + size_t(b) * T * H * P, yr.begin() + size_t(b + 1) * T * H * P);
        }
        char what[96];
        std::snprintf(what, sizeof(what), "step %d y vs float64 recurrence", step);
        report(what, yg, yrg, 2e-2);
        auto ypad = fromHalf(dY.down<__half>(size_t(B) * T * H * P));
        (void) ypad;  // padding row outputs are unspecified (not written); nothing to check
    }
    cudaStreamDestroy(st);
    delete dec.plugin;
    delete com.plugin;
}

// ---- GDN: ReplayDecode (family gdn, T = 1) or GdnVerify (T > 1, all drafts accepted) + ReplayCommit
// The plugin core asks for the automatic design (GDN_VARIANT_AUTO): at B = 2, K = 64 runs the tile kernel
// (variant 1); K = 128 runs the warp-item kernel (variant 5's WIR, B x HV = 8 <= 128) for ReplayDecode's standard
// steps and the stream kernel (variant 4) for GdnVerify. `large` (B = 256, HV = 32: B x HV = 8192) queries
// getWorkspaceSize, expects the split kernels' workspace (> 0), hands it to enqueue, so the automatic choice
// runs the split kernels (variant 6) inside the plugin.
void runGdn(bool verify, int const K, bool large = false) {
    int const B = large ? 256 : 2, S = B + 1, H = large ? 16 : 2, HV = large ? 32 : 4, V = 32, L = 3, T = verify ? 3 : 1,
              Tmax = T, C = verify ? L + Tmax : L, steps = 6;  // ring rows: L in standard mode
    std::printf("%s gdn B%d H%d HV%d K%d V%d L%d T%d%s\n", verify ? "GdnVerify" : "ReplayDecode", B, H, HV, K, V, L, T,
                large ? " (workspace)" : "");
    Fields f;
    if (verify) f.i("window", L).i("max_verify", Tmax).s("act_dtype", "fp16").s("state_dtype", "fp32").s("u_dtype", "fp16");
    else f.s("family", "gdn").i("window", L).i("max_verify", 1).s("mode", "standard").s("act_dtype", "fp16").s("state_dtype", "fp32").s("u_dtype", "fp16");
    Runtime dec = makePlugin(verify ? "GdnVerify_RSSM" : "ReplayDecode_RSSM", f);
    Fields fc;
    fc.i("window", L).i("max_verify", Tmax).s("mode", verify ? "speculative" : "standard").i("has_accepted", 0);
    Runtime com = makePlugin("ReplayCommit_RSSM", fc);
    if (!dec.rt || !com.rt) return;
    std::mt19937 rng(99);
    std::uniform_real_distribution<double> U(-1, 1);
    auto rnd = [&](size_t n, double s) { std::vector<double> v(n); for (auto& x : v) x = s * U(rng); return v; };
    auto f32 = [](std::vector<double> const& v) { return std::vector<float>(v.begin(), v.end()); };
    std::vector<double> Alog = rnd(HV, 0.5), dtb = rnd(HV, 0.5);
    std::vector<int32_t> slots(B);
    for (int b = 0; b < B; ++b) slots[b] = b + 1;
    std::vector<double> ref = rnd(size_t(S) * HV * V * K, 0.2);
    Dev dState(ref.size() * 4), dG(size_t(S) * C * HV * 4), dU(size_t(S) * C * HV * V * 2), dRK(size_t(S) * C * H * K * 2),
        dOrigin(S * 4), dLen(S * 4), dSlots(B * 4), dAlog(HV * 4), dDtb(HV * 4), dQ(size_t(B) * T * H * K * 2),
        dK(size_t(B) * T * H * K * 2), dV(size_t(B) * T * HV * V * 2), dAa(size_t(B) * T * HV * 2), dBb(size_t(B) * T * HV * 2),
        dO(size_t(B) * T * HV * V * 2), dErr(4);
    dState.up(f32(ref)); dAlog.up(f32(Alog)); dDtb.up(f32(dtb)); dSlots.up(slots);
    std::vector<PluginTensorDesc> in = {
        desc(DataType::kHALF, {B, T, H, K}), desc(DataType::kHALF, {B, T, H, K}), desc(DataType::kHALF, {B, T, HV, V}),
        desc(DataType::kHALF, {B, T, HV}), desc(DataType::kHALF, {B, T, HV}), desc(DataType::kFLOAT, {HV}),
        desc(DataType::kFLOAT, {HV}), desc(DataType::kINT32, {B}), desc(DataType::kFLOAT, {S, HV, V, K}),
        desc(DataType::kFLOAT, {S, C, HV}), desc(DataType::kHALF, {S, C, HV, V}), desc(DataType::kHALF, {S, C, H, K}),
        desc(DataType::kINT32, {S}), desc(DataType::kINT32, {S})};
    std::vector<PluginTensorDesc> out = {desc(DataType::kHALF, {B, T, HV, V})};
    checkFormats("GDN decode/verify", dec, in, out);
    CHECK(dec.rt->onShapeChange(in.data(), 14, out.data(), 1) == 0, "gdn onShapeChange");
    // Workspace as TensorRT sizes it: getWorkspaceSize at the (here static) maximum shapes.
    std::vector<DynamicPluginTensorDesc> dynIn, dynOut;
    for (auto const& d : in) { DynamicPluginTensorDesc x{}; x.desc = d; x.min = x.opt = x.max = d.dims; dynIn.push_back(x); }
    for (auto const& d : out) { DynamicPluginTensorDesc x{}; x.desc = d; x.min = x.opt = x.max = d.dims; dynOut.push_back(x); }
    size_t const wsBytes = dec.build->getWorkspaceSize(dynIn.data(), 14, dynOut.data(), 1);
    std::printf("  getWorkspaceSize: %zu bytes\n", wsBytes);
    CHECK(large ? wsBytes > 0 : wsBytes == 0, "gdn getWorkspaceSize %zu bytes (expected %s)", wsBytes, large ? "> 0" : "0");
    Dev dWs(wsBytes > 0 ? wsBytes : 16);
    std::vector<PluginTensorDesc> cin = {out[0], desc(DataType::kINT32, {B}), desc(DataType::kINT32, {S}), desc(DataType::kINT32, {S})};
    std::vector<PluginTensorDesc> cout = {desc(DataType::kINT32, {1})};
    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    double const scale = 1.0 / std::sqrt(double(K));
    for (int step = 0; step < steps; ++step) {
        auto q = roundHalf(rnd(size_t(B) * T * H * K, 1)), k = roundHalf(rnd(size_t(B) * T * H * K, 1)),
             v = roundHalf(rnd(size_t(B) * T * HV * V, 1)), a = roundHalf(rnd(size_t(B) * T * HV, 1)),
             bb = roundHalf(rnd(size_t(B) * T * HV, 2));
        dQ.up(toHalf(q)); dK.up(toHalf(k)); dV.up(toHalf(v)); dAa.up(toHalf(a)); dBb.up(toHalf(bb));
        void const* ins[14] = {dQ.p, dK.p, dV.p, dAa.p, dBb.p, dAlog.p, dDtb.p, dSlots.p, dState.p, dG.p, dU.p, dRK.p, dOrigin.p, dLen.p};
        void* outs[1] = {dO.p};
        CHECK(dec.rt->enqueue(in.data(), out.data(), ins, outs, wsBytes > 0 ? dWs.p : nullptr, st) == 0,
              "gdn enqueue step %d", step);
        void const* cins[4] = {dO.p, dSlots.p, dOrigin.p, dLen.p};
        void* couts[1] = {dErr.p};
        CHECK(com.rt->enqueue(cin.data(), cout.data(), cins, couts, nullptr, st) == 0, "commit enqueue step %d", step);
        CUDA_OK(cudaStreamSynchronize(st));
        auto o = fromHalf(dO.down<__half>(size_t(B) * T * HV * V));
        std::vector<double> orf(o.size());
        for (int b = 0; b < B; ++b) {
            double* Sb = &ref[size_t(slots[b]) * HV * V * K];
            for (int t = 0; t < T; ++t)
                for (int hv = 0; hv < HV; ++hv) {
                    size_t bt = size_t(b) * T + t;
                    int hk = hv / (HV / H);
                    double const* qq = &q[(bt * H + hk) * K];
                    double const* kk = &k[(bt * H + hk) * K];
                    double nq = 0, nk = 0;
                    for (int i = 0; i < K; ++i) { nq += qq[i] * qq[i]; nk += kk[i] * kk[i]; }
                    nq = 1 / std::sqrt(nq + 1e-6); nk = 1 / std::sqrt(nk + 1e-6);
                    double g = -std::exp(Alog[hv]) * softplus(a[bt * HV + hv] + dtb[hv]), al = std::exp(g);
                    double beta = 1 / (1 + std::exp(-bb[bt * HV + hv]));
                    for (int r = 0; r < V; ++r) {
                        double* row = &Sb[(size_t(hv) * V + r) * K];
                        double sk = 0;
                        for (int i = 0; i < K; ++i) sk += row[i] * kk[i] * nk;
                        double u = beta * (v[(bt * HV + hv) * V + r] - al * sk);
                        double acc = 0;
                        for (int i = 0; i < K; ++i) { row[i] = al * row[i] + u * kk[i] * nk; acc += row[i] * qq[i] * nq * scale; }
                        orf[(bt * HV + hv) * V + r] = acc;
                    }
                }
        }
        char what[96];
        std::snprintf(what, sizeof(what), "step %d o vs float64 recurrence", step);
        report(what, o, orf, 2e-2);
    }
    cudaStreamDestroy(st);
    delete dec.plugin;
    delete com.plugin;
}

// ---- Dual precision: ReplayDecode (read_dtype fp16: reads the fp16 read copy on non-flush rows, the
// fp32 recurrence copy on flush rows, writes no checkpoint) -> DualPrecisionFlush (flush rows fold
// their records into both copies) -> ReplayCommit, standard mode (T = 1), over steps crossing flushes.
void runDualPrecision(bool gdn) {
    // Mamba-2: H heads, P head dim, N = 128, G groups. GDN: HV value heads (H), V (P), K = 128 (N), HK key heads (G).
    int const B = 3, S = gdn ? 3 : 4, H = 4, P = 32, N = 128, G = 2, L = 3, C = L, steps = 8;  // standard mode: L ring rows
    std::printf("dual precision %s: ReplayDecode(read fp16) + DualPrecisionFlush + ReplayCommit B%d %s%d %s%d %s%d "
                "%s%d L%d, fp32 recurrence\n", gdn ? "gdn" : "mamba2", B, gdn ? "HV" : "H", H, gdn ? "V" : "P", P,
                gdn ? "K" : "N", N, gdn ? "HK" : "G", G, L);
    Fields f;
    f.s("family", gdn ? "gdn" : "mamba2").i("window", L).i("max_verify", 1).s("mode", "standard").s("act_dtype", "fp16")
        .s("state_dtype", "fp32").s("dt_dtype", "fp32").i("has_z", gdn ? 0 : 1).s("u_dtype", "fp16")
        .s("read_dtype", "fp16");
    Runtime dec = makePlugin("ReplayDecode_RSSM", f);
    Fields ff;
    ff.s("family", gdn ? "gdn" : "mamba2").i("window", L).i("max_verify", 1).s("mode", "standard").s("act_dtype", "fp16")
        .s("recurrence_dtype", "fp32").s("read_dtype", "fp16").s("rounding", "rtn").i("layer_index", 0);
    Runtime fl = makePlugin("DualPrecisionFlush_RSSM", ff);
    Fields fc;
    fc.i("window", L).i("max_verify", 1).s("mode", "standard").i("has_accepted", 0);
    Runtime com = makePlugin("ReplayCommit_RSSM", fc);
    if (!dec.rt || !fl.rt || !com.rt) return;

    std::mt19937 rng(gdn ? 4242 : 2024);
    std::uniform_real_distribution<double> U(-1, 1);
    auto rnd = [&](size_t n, double s) { std::vector<double> v(n); for (auto& x : v) x = s * U(rng); return v; };
    auto f32 = [](std::vector<double> const& v) { return std::vector<float>(v.begin(), v.end()); };
    std::vector<int32_t> slots = gdn ? std::vector<int32_t>{1, -1, 2} : std::vector<int32_t>{2, -1, 0};  // row 1 pads
    size_t const stateElems = size_t(H) * P * N;  // per slot
    // Checkpoint copies start from one fp32 state; the float64 reference starts from the same values.
    std::vector<float> hp0 = f32(rnd(size_t(S) * stateElems, gdn ? 0.2 : 0.5));
    std::vector<double> ref(hp0.begin(), hp0.end());
    std::vector<__half> lp0(hp0.size());
    for (size_t i = 0; i < hp0.size(); ++i) lp0[i] = __float2half_rn(hp0[i]);

    // Per-head parameters: Mamba-2 A (< 0), D, dt_bias; GDN A_log, dt_bias.
    std::vector<double> A(H), D = rnd(H, 1), dtb = rnd(H, 0.5), Alog = rnd(H, 0.5);
    for (auto& a : A) a = -0.5 - std::fabs(U(rng));
    Dev dHp(hp0.size() * 4), dLp(hp0.size() * 2), dOrigin(S * 4), dLen(S * 4), dSlots(B * 4), dFlushIdx(B * 4),
        dFlushed(B * 4), dErr(4), dP0(H * 4), dP1(H * 4), dP2(H * 4),
        // rings: Mamba-2 ring_dt / ring_x / ring_B; GDN ring_g / ring_u / ring_k / ring_beta / ring_v
        dR0(size_t(S) * C * H * 4), dR1(size_t(S) * C * H * P * 2), dR2(size_t(S) * C * G * N * 2),
        dR3(size_t(S) * C * H * 4), dR4(size_t(S) * C * H * P * 2),
        // activations: Mamba-2 x, dt, B, C, z; GDN q, k, v, a, b
        dA0(size_t(B) * (gdn ? G * N : H * P) * 2), dA1(size_t(B) * (gdn ? G * N * 4 : H * 4)),
        dA2(size_t(B) * (gdn ? H * P : G * N) * 2), dA3(size_t(B) * (gdn ? H : G * N) * 2),
        dA4(size_t(B) * (gdn ? H : H * P) * 2), dOut(size_t(B) * H * P * 2);
    dHp.up(hp0); dLp.up(lp0); dSlots.up(slots); dFlushIdx.up(std::vector<int32_t>(B, 0));
    if (gdn) { dP0.up(f32(Alog)); dP1.up(f32(dtb)); }
    else { dP0.up(f32(A)); dP1.up(f32(D)); dP2.up(f32(dtb)); }

    auto H16 = DataType::kHALF;
    auto F32 = DataType::kFLOAT;
    auto I32 = DataType::kINT32;
    std::vector<PluginTensorDesc> in, fin;
    std::vector<void const*> ins, fins;
    PluginTensorDesc const outDesc = desc(H16, {B, 1, H, P});
    if (!gdn) {
        in = {desc(H16, {B, 1, H, P}), desc(F32, {B, 1, H}), desc(H16, {B, 1, G, N}), desc(H16, {B, 1, G, N}),
              desc(F32, {H}), desc(F32, {H}), desc(F32, {H}), desc(I32, {B}), desc(F32, {S, H, P, N}),
              desc(F32, {S, C, H}), desc(H16, {S, C, H, P}), desc(H16, {S, C, G, N}), desc(I32, {S}), desc(I32, {S}),
              desc(H16, {B, 1, H, P}), desc(H16, {S, H, P, N})};
        ins = {dA0.p, dA1.p, dA2.p, dA3.p, dP0.p, dP1.p, dP2.p, dSlots.p, dHp.p, dR0.p, dR1.p, dR2.p, dOrigin.p, dLen.p,
               dA4.p, dLp.p};
        fin = {outDesc, desc(I32, {B}), desc(I32, {S}), desc(I32, {S}), desc(I32, {B}), desc(F32, {S, H, P, N}),
               desc(H16, {S, H, P, N}), desc(F32, {H}), desc(F32, {S, C, H}), desc(H16, {S, C, H, P}),
               desc(H16, {S, C, G, N})};
        fins = {dOut.p, dSlots.p, dOrigin.p, dLen.p, dFlushIdx.p, dHp.p, dLp.p, dP0.p, dR0.p, dR1.p, dR2.p};
    } else {
        in = {desc(H16, {B, 1, G, N}), desc(H16, {B, 1, G, N}), desc(H16, {B, 1, H, P}), desc(H16, {B, 1, H}),
              desc(H16, {B, 1, H}), desc(F32, {H}), desc(F32, {H}), desc(I32, {B}), desc(F32, {S, H, P, N}),
              desc(F32, {S, C, H}), desc(H16, {S, C, H, P}), desc(H16, {S, C, G, N}), desc(I32, {S}), desc(I32, {S}),
              desc(H16, {S, H, P, N}), desc(F32, {S, C, H}), desc(H16, {S, C, H, P})};
        // q and k share one buffer (dA1 holds both, k at offset B*HK*K halves)
        ins = {dA1.p, static_cast<char*>(dA1.p) + size_t(B) * G * N * 2, dA2.p, dA3.p, dA4.p, dP0.p, dP1.p, dSlots.p,
               dHp.p, dR0.p, dR1.p, dR2.p, dOrigin.p, dLen.p, dLp.p, dR3.p, dR4.p};
        fin = {outDesc, desc(I32, {B}), desc(I32, {S}), desc(I32, {S}), desc(I32, {B}), desc(F32, {S, H, P, N}),
               desc(H16, {S, H, P, N}), desc(F32, {S, C, H}), desc(H16, {S, C, G, N}), desc(F32, {S, C, H}),
               desc(H16, {S, C, H, P})};
        fins = {dOut.p, dSlots.p, dOrigin.p, dLen.p, dFlushIdx.p, dHp.p, dLp.p, dR0.p, dR2.p, dR3.p, dR4.p};
    }
    std::vector<PluginTensorDesc> out = {outDesc}, fout = {desc(I32, {B})};
    int32_t const nIn = static_cast<int32_t>(in.size()), nFin = static_cast<int32_t>(fin.size());
    CHECK(nIn == (gdn ? 17 : 16), "dual-precision ReplayDecode input count %d", nIn);
    checkFormats("ReplayDecode (read copy)", dec, in, out);
    CHECK(dec.rt->onShapeChange(in.data(), nIn, out.data(), 1) == 0, "ReplayDecode (read copy) onShapeChange");
    // Workspace as TensorRT sizes it (getWorkspaceSize at the maximum shapes): the dual-precision decode's
    // split path (kernel ABI 6) declares its head records; handed to every enqueue (at B = 3 the launcher's
    // rule keeps the stream path, so this checks the declaration and the hand-over, not the split kernels).
    std::vector<DynamicPluginTensorDesc> dynIn, dynOut;
    for (auto const& d : in) { DynamicPluginTensorDesc x{}; x.desc = d; x.min = x.opt = x.max = d.dims; dynIn.push_back(x); }
    for (auto const& d : out) { DynamicPluginTensorDesc x{}; x.desc = d; x.min = x.opt = x.max = d.dims; dynOut.push_back(x); }
    size_t const wsBytes = dec.build->getWorkspaceSize(dynIn.data(), nIn, dynOut.data(), 1);
    std::printf("  ReplayDecode (read copy) getWorkspaceSize: %zu bytes\n", wsBytes);
    CHECK(wsBytes > 0, "dual-precision ReplayDecode getWorkspaceSize %zu bytes (expected > 0)", wsBytes);
    Dev dWs(wsBytes > 0 ? wsBytes : 16);
    checkFormats("DualPrecisionFlush", fl, fin, fout);
    CHECK(fl.rt->onShapeChange(fin.data(), nFin, fout.data(), 1) == 0, "DualPrecisionFlush onShapeChange");
    std::vector<PluginTensorDesc> cin = {outDesc, desc(I32, {B}), desc(I32, {S}), desc(I32, {S})};
    std::vector<PluginTensorDesc> cout = {desc(I32, {1})};
    CHECK(com.rt->onShapeChange(cin.data(), 4, cout.data(), 1) == 0, "ReplayCommit onShapeChange");

    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    std::vector<float> hpPrev = hp0;
    std::vector<__half> lpPrev = lp0;
    int const hpg = H / G;
    double const scale = 1.0 / std::sqrt(double(N));
    for (int step = 0; step < steps; ++step) {
        bool const flushStep = step % L == L - 1;  // every slot starts empty and steps once per step: h = step % L
        std::vector<double> yr(size_t(B) * H * P, 0.0), y;
        if (!gdn) {
            auto x = roundHalf(rnd(size_t(B) * H * P, 1)), Bm = roundHalf(rnd(size_t(B) * G * N, 1)),
                 Cm = roundHalf(rnd(size_t(B) * G * N, 1)), z = roundHalf(rnd(size_t(B) * H * P, 1)),
                 dt = rnd(size_t(B) * H, 1);
            dA0.up(toHalf(x)); dA1.up(f32(dt)); dA2.up(toHalf(Bm)); dA3.up(toHalf(Cm)); dA4.up(toHalf(z));
            for (int b = 0; b < B; ++b) {
                if (slots[b] < 0) continue;
                double* Sb = &ref[size_t(slots[b]) * stateElems];
                for (int h = 0; h < H; ++h) {
                    double d = softplus(dt[size_t(b) * H + h] + dtb[h]), a = std::exp(d * A[h]);
                    int g = h / hpg;
                    for (int p = 0; p < P; ++p) {
                        double xv = x[(size_t(b) * H + h) * P + p], acc = 0;
                        for (int n = 0; n < N; ++n) {
                            double& s = Sb[(size_t(h) * P + p) * N + n];
                            s = a * s + d * xv * Bm[(size_t(b) * G + g) * N + n];
                            acc += s * Cm[(size_t(b) * G + g) * N + n];
                        }
                        double zz = z[(size_t(b) * H + h) * P + p];
                        yr[(size_t(b) * H + h) * P + p] = (acc + D[h] * xv) * zz / (1 + std::exp(-zz));
                    }
                }
            }
        } else {
            auto q = roundHalf(rnd(size_t(B) * G * N, 1)), k = roundHalf(rnd(size_t(B) * G * N, 1)),
                 v = roundHalf(rnd(size_t(B) * H * P, 1)), a = roundHalf(rnd(size_t(B) * H, 1)),
                 bb = roundHalf(rnd(size_t(B) * H, 2));
            std::vector<double> qk(q);
            qk.insert(qk.end(), k.begin(), k.end());
            dA1.up(toHalf(qk)); dA2.up(toHalf(v)); dA3.up(toHalf(a)); dA4.up(toHalf(bb));
            for (int b = 0; b < B; ++b) {
                if (slots[b] < 0) continue;
                double* Sb = &ref[size_t(slots[b]) * stateElems];
                for (int hv = 0; hv < H; ++hv) {
                    int hk = hv / hpg;
                    double const* qq = &q[(size_t(b) * G + hk) * N];
                    double const* kk = &k[(size_t(b) * G + hk) * N];
                    double nq = 0, nk = 0;
                    for (int i = 0; i < N; ++i) { nq += qq[i] * qq[i]; nk += kk[i] * kk[i]; }
                    nq = 1 / std::sqrt(nq + 1e-6); nk = 1 / std::sqrt(nk + 1e-6);
                    double g = -std::exp(Alog[hv]) * softplus(a[size_t(b) * H + hv] + dtb[hv]), al = std::exp(g);
                    double beta = 1 / (1 + std::exp(-bb[size_t(b) * H + hv]));
                    for (int r = 0; r < P; ++r) {
                        double* row = &Sb[(size_t(hv) * P + r) * N];
                        double sk = 0;
                        for (int i = 0; i < N; ++i) sk += row[i] * kk[i] * nk;
                        double u = beta * (v[(size_t(b) * H + hv) * P + r] - al * sk);
                        double acc = 0;
                        for (int i = 0; i < N; ++i) { row[i] = al * row[i] + u * kk[i] * nk; acc += row[i] * qq[i] * nq * scale; }
                        yr[(size_t(b) * H + hv) * P + r] = acc;
                    }
                }
            }
        }
        void* outs[1] = {dOut.p};
        CHECK(dec.rt->enqueue(in.data(), out.data(), ins.data(), outs, dWs.p, st) == 0,
              "ReplayDecode (read copy) enqueue step %d", step);
        void* fouts[1] = {dFlushed.p};
        CHECK(fl.rt->enqueue(fin.data(), fout.data(), fins.data(), fouts, nullptr, st) == 0,
              "DualPrecisionFlush enqueue step %d", step);
        void const* cins[4] = {dOut.p, dSlots.p, dOrigin.p, dLen.p};
        void* couts[1] = {dErr.p};
        CHECK(com.rt->enqueue(cin.data(), cout.data(), cins, couts, nullptr, st) == 0, "ReplayCommit enqueue step %d", step);
        CUDA_OK(cudaStreamSynchronize(st));
        CHECK(dErr.down<int32_t>(1)[0] == -1, "error_slot set at step %d", step);

        // Outputs of the real rows vs the float64 recurrence (read copy on non-flush steps, fp32 copy on flush steps).
        auto yAll = fromHalf(dOut.down<__half>(size_t(B) * H * P));
        std::vector<double> yg, yrg;
        for (int b = 0; b < B; ++b) {
            if (slots[b] < 0) continue;
            yg.insert(yg.end(), yAll.begin() + size_t(b) * H * P, yAll.begin() + size_t(b + 1) * H * P);
            yrg.insert(yrg.end(), yr.begin() + size_t(b) * H * P, yr.begin() + size_t(b + 1) * H * P);
        }
        char what[128];
        std::snprintf(what, sizeof(what), "step %d%s out vs float64 recurrence", step, flushStep ? " (flush)" : "");
        report(what, yg, yrg, 2e-2);

        // Flush flags: 1 on flush steps, 0 otherwise, -1 for the padding row.
        auto flushed = dFlushed.down<int32_t>(B);
        for (int b = 0; b < B; ++b) {
            int32_t want = slots[b] < 0 ? -1 : (flushStep ? 1 : 0);
            CHECK(flushed[b] == want, "step %d row %d: flushed = %d; expected %d", step, b, flushed[b], want);
        }

        // Checkpoint copies: a flush step writes both (recurrence == float64 state to fp32 accuracy, read copy ==
        // RTN fp16 of the recurrence copy); every other step and every unused slot leaves both untouched.
        auto hp = dHp.down<float>(hp0.size());
        auto lp = dLp.down<__half>(hp0.size());
        for (int sl = 0; sl < S; ++sl) {
            bool const used = std::find(slots.begin(), slots.end(), sl) != slots.end();
            size_t const o = size_t(sl) * stateElems;
            size_t changedHp = 0, changedLp = 0, notRtn = 0;
            for (size_t i = o; i < o + stateElems; ++i) {
                changedHp += std::memcmp(&hp[i], &hpPrev[i], 4) != 0;
                changedLp += std::memcmp(&lp[i], &lpPrev[i], 2) != 0;
                __half r = __float2half_rn(hp[i]);
                notRtn += std::memcmp(&r, &lp[i], 2) != 0;
            }
            if (used && flushStep) {
                std::vector<double> got(hp.begin() + o, hp.begin() + o + stateElems),
                    want(ref.begin() + o, ref.begin() + o + stateElems);
                std::snprintf(what, sizeof(what), "step %d slot %d fp32 recurrence ckpt vs float64", step, sl);
                report(what, got, want, 2e-5);
                CHECK(notRtn == 0, "step %d slot %d: %zu read-copy elements differ from RTN fp16 of the recurrence copy",
                      step, sl, notRtn);
            } else {
                CHECK(changedHp == 0 && changedLp == 0,
                      "step %d slot %d (%s): checkpoint copies changed without a flush (%zu fp32, %zu fp16 elements)",
                      step, sl, used ? "non-flush step" : "unused slot", changedHp, changedLp);
            }
        }
        hpPrev = hp;
        lpPrev = lp;
    }
    cudaStreamDestroy(st);
    delete dec.plugin;
    delete fl.plugin;
    delete com.plugin;
}

// ---- Refusals: shapes the dual-precision kernels do not support (N = 64) fail loudly at onShapeChange
// (build time) and at enqueue, for DualPrecisionFlush and for ReplayDecode with a read copy.
void runDualPrecisionRefusals() {
    std::printf("dual precision refusals (N = 64: onShapeChange and enqueue must fail with a message)\n");
    Fields f;
    f.s("family", "mamba2").i("window", 4).i("max_verify", 1).s("mode", "standard").s("act_dtype", "fp16")
        .s("recurrence_dtype", "fp32").s("read_dtype", "fp16").s("rounding", "rtn");
    Runtime r = makePlugin("DualPrecisionFlush_RSSM", f);
    Fields fd;
    fd.s("family", "mamba2").i("window", 4).i("max_verify", 1).s("mode", "standard").s("act_dtype", "fp16")
        .s("state_dtype", "fp32").s("read_dtype", "fp16");
    Runtime d = makePlugin("ReplayDecode_RSSM", fd);
    if (!r.rt || !d.rt) return;
    int const B = 2, S = 2, H = 2, P = 32, N = 64, G = 1, C = 4;  // standard mode, window 4
    std::vector<PluginTensorDesc> in = {
        desc(DataType::kHALF, {B, 1, H, P}), desc(DataType::kINT32, {B}), desc(DataType::kINT32, {S}),
        desc(DataType::kINT32, {S}), desc(DataType::kINT32, {B}), desc(DataType::kFLOAT, {S, H, P, N}),
        desc(DataType::kHALF, {S, H, P, N}), desc(DataType::kFLOAT, {H}), desc(DataType::kFLOAT, {S, C, H}),
        desc(DataType::kHALF, {S, C, H, P}), desc(DataType::kHALF, {S, C, G, N})};
    std::vector<PluginTensorDesc> out = {desc(DataType::kINT32, {B})};
    checkFormats("DualPrecisionFlush", r, in, out);
    Dev buf(1 << 20);
    std::vector<void const*> ins(in.size(), buf.p);
    void* outs[1] = {buf.p};
    CHECK(r.rt->onShapeChange(in.data(), static_cast<int32_t>(in.size()), out.data(), 1) != 0,
          "DualPrecisionFlush onShapeChange accepted N = 64");
    int32_t status = r.rt->enqueue(in.data(), out.data(), ins.data(), outs, nullptr, nullptr);
    CHECK(status != 0, "DualPrecisionFlush enqueue with N = 64 returned 0; expected a failure");

    auto H16 = DataType::kHALF;
    auto F32 = DataType::kFLOAT;
    auto I32 = DataType::kINT32;
    std::vector<PluginTensorDesc> din = {
        desc(H16, {B, 1, H, P}), desc(F32, {B, 1, H}), desc(H16, {B, 1, G, N}), desc(H16, {B, 1, G, N}), desc(F32, {H}),
        desc(F32, {H}), desc(F32, {H}), desc(I32, {B}), desc(F32, {S, H, P, N}), desc(F32, {S, C, H}),
        desc(H16, {S, C, H, P}), desc(H16, {S, C, G, N}), desc(I32, {S}), desc(I32, {S}), desc(H16, {S, H, P, N})};
    std::vector<PluginTensorDesc> dout = {desc(H16, {B, 1, H, P})};
    checkFormats("ReplayDecode (read copy)", d, din, dout);
    CHECK(d.rt->onShapeChange(din.data(), static_cast<int32_t>(din.size()), dout.data(), 1) != 0,
          "ReplayDecode (read copy) onShapeChange accepted N = 64");
    std::vector<void const*> dins(din.size(), buf.p);
    status = d.rt->enqueue(din.data(), dout.data(), dins.data(), outs, nullptr, nullptr);
    CHECK(status != 0, "ReplayDecode (read copy) enqueue with N = 64 returned 0; expected a failure");
    delete r.plugin;
    delete d.plugin;
}
}  // namespace

int main() {
    rssm::plugin::setLogger(&gLogger);
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev == 0) {
        std::printf("SKIP: no CUDA device\n");
        return 77;
    }
    runMamba2(false);
    runMamba2(true);
    runGdn(false, 64);
    runGdn(true, 64);
    runGdn(false, 128);
    runGdn(true, 128);
    runGdn(false, 128, true);
    runGdn(true, 128, true);
#ifdef RSSM_HAVE_DUAL_PRECISION_FLUSH_KERNEL
    runDualPrecision(false);
    runDualPrecision(true);
#else
    std::printf("dual precision: kernels absent from this build; ReplayDecode(read copy) / DualPrecisionFlush cases "
                "skipped (enqueue fails with RSSM_ERR_UNSUPPORTED)\n");
#endif
    runDualPrecisionRefusals();
    std::printf(gFailures ? "FAILED: %d check(s)\n" : "PASSED\n", gFailures);
    return gFailures ? 1 : 0;
}
