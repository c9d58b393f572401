// C API over the plugin core for Python (ctypes) tests and tools. Every function returns a status
// (0 ok, -1 error) or a size, never throws; rssm_core_last_error() holds the message of the last
// failure on this thread. Tensors are passed as (dtype code, rank, 8 dims) and are contiguous.
#include "rssm_kernel_params.h"
#include "rssm_plugin_core.h"

#include <cstring>
#include <sstream>
#include <string>

using namespace rssm::core;

namespace {
thread_local std::string gError;

template <typename F> int guard(F&& f) {
    try {
        gError.clear();
        return f();
    } catch (std::exception const& e) {
        gError = e.what();
    } catch (...) {
        gError = "unknown error";
    }
    return -1;
}
int copyOut(std::string const& s, char* buf, int cap) {
    if (buf && cap > 0) {
        size_t n = std::min(s.size(), static_cast<size_t>(cap - 1));
        std::memcpy(buf, s.data(), n);
        buf[n] = 0;
    }
    return static_cast<int>(s.size());
}
Config& cfgOf(void* h) {
    if (!h) throw Error("replayssm core: null config handle");
    return *static_cast<Config*>(h);
}
PluginKind kindOf(int k) {
    if (k < 0 || k >= kNUM_PLUGIN_KINDS) throw Error("replayssm core: unknown plugin kind " + std::to_string(k));
    return static_cast<PluginKind>(k);
}
std::vector<TensorDesc> descs(int n, int32_t const* dtypes, int32_t const* ranks, int64_t const* dims,
                              uint64_t const* ptrs) {
    std::vector<TensorDesc> r;
    for (int i = 0; i < n; ++i) {
        std::vector<int64_t> d(dims + kMAX_DIMS * i, dims + kMAX_DIMS * i + ranks[i]);
        r.push_back(contiguous(static_cast<DType>(dtypes[i]), d,
                               ptrs ? reinterpret_cast<void const*>(static_cast<uintptr_t>(ptrs[i])) : nullptr));
    }
    return r;
}
std::string jsonEscape(std::string const& s) {
    std::string o;
    for (char c : s) { if (c == '"' || c == '\\') o += '\\'; o += c; }
    return o;
}
}  // namespace

extern "C" {

char const* rssm_core_last_error(void) { return gError.c_str(); }
int rssm_core_num_kinds(void) { return kNUM_PLUGIN_KINDS; }
int rssm_core_names(int kind, char* op, char* registered, char* version, int cap) {
    return guard([&] {
        PluginKind k = kindOf(kind);
        copyOut(opName(k), op, cap);
        copyOut(registeredName(k), registered, cap);
        copyOut(pluginVersion(k), version, cap);
        return 0;
    });
}

// JSON list of the fields: [{"name":..,"type":"int32|int64|float32|enum","default":..,"min":..,"max":..,"choices":[..]}]
int rssm_core_schema_json(int kind, char* buf, int cap) {
    return guard([&] {
        std::ostringstream os;
        os.precision(17);
        os << "[";
        auto const& sc = schema(kindOf(kind));
        for (size_t i = 0; i < sc.size(); ++i) {
            auto const& s = sc[i];
            char const* t = s.type == FieldType::kINT32 ? "int32" : s.type == FieldType::kINT64 ? "int64"
                          : s.type == FieldType::kFLOAT32 ? "float32" : "enum";
            os << (i ? "," : "") << "{\"name\":\"" << s.name << "\",\"type\":\"" << t << "\",";
            if (s.type == FieldType::kENUM) os << "\"default\":\"" << s.choices.at(static_cast<size_t>(s.defaultValue)) << "\",";
            else os << "\"default\":" << s.defaultValue << ",";
            os << "\"min\":" << s.minValue << ",\"max\":" << s.maxValue << ",\"choices\":[";
            for (size_t c = 0; c < s.choices.size(); ++c) os << (c ? "," : "") << "\"" << s.choices[c] << "\"";
            os << "],\"doc\":\"" << jsonEscape(s.doc) << "\"}";
        }
        os << "]";
        return copyOut(os.str(), buf, cap);
    });
}

void* rssm_core_config_new(int kind) {
    void* r = nullptr;
    guard([&] { r = new Config(defaults(kindOf(kind))); return 0; });
    return r;
}
void rssm_core_config_free(void* h) { delete static_cast<Config*>(h); }
int rssm_core_config_kind(void* h) { return guard([&] { return static_cast<int>(cfgOf(h).kind); }); }
int rssm_core_config_set_int(void* h, char const* n, int64_t v) { return guard([&] { cfgOf(h).setInt(n, v); return 0; }); }
int rssm_core_config_set_float(void* h, char const* n, double v) { return guard([&] { cfgOf(h).setFloat(n, v); return 0; }); }
int rssm_core_config_set_enum(void* h, char const* n, char const* v) { return guard([&] { cfgOf(h).setEnum(n, v); return 0; }); }
int rssm_core_config_get_int(void* h, char const* n, int64_t* out) { return guard([&] { *out = cfgOf(h).i(n); return 0; }); }
int rssm_core_config_get_float(void* h, char const* n, double* out) { return guard([&] { *out = cfgOf(h).f(n); return 0; }); }
int rssm_core_config_get_enum(void* h, char const* n, char* buf, int cap) {
    return guard([&] { return copyOut(cfgOf(h).e(n), buf, cap); });
}
int rssm_core_validate(void* h) { return guard([&] { validate(cfgOf(h)); return 0; }); }

// Same path as a creator's createPlugin: raw PluginField-like arrays -> validated config.
void* rssm_core_config_from_fields(int kind, int n, char const** names, int32_t const* types, void const** datas,
                                   int32_t const* lengths) {
    void* r = nullptr;
    guard([&] {
        std::vector<RawField> f;
        for (int i = 0; i < n; ++i) f.push_back({names[i], types[i], datas[i], lengths[i]});
        r = new Config(configFromFields(kindOf(kind), f.data(), n));
        return 0;
    });
    return r;
}

int rssm_core_serialize(void* h, uint8_t* buf, int cap) {
    return guard([&] {
        auto b = serialize(cfgOf(h));
        if (buf && cap >= static_cast<int>(b.size())) std::memcpy(buf, b.data(), b.size());
        return static_cast<int>(b.size());
    });
}
void* rssm_core_deserialize(int kind, uint8_t const* data, size_t size) {
    void* r = nullptr;
    guard([&] { r = new Config(deserialize(kindOf(kind), data, size)); return 0; });
    return r;
}

int rssm_core_num_inputs(void* h) { return guard([&] { return numInputs(cfgOf(h)); }); }
int rssm_core_num_outputs(void* h) { return guard([&] { return numOutputs(cfgOf(h)); }); }
int rssm_core_io_name(void* h, int isOutput, int idx, char* buf, int cap) {
    return guard([&] {
        IoMap m = ioMap(cfgOf(h));
        auto const& v = isOutput ? m.outputs : m.inputs;
        if (idx < 0 || idx >= static_cast<int>(v.size())) throw Error("io index " + std::to_string(idx) + " out of range");
        return copyOut(v[idx], buf, cap);
    });
}
int rssm_core_supports_type(void* h, int pos, int32_t const* ioTypes, int nIn, int nOut) {
    return guard([&] {
        std::vector<DType> io(nIn + nOut);
        for (int i = 0; i < nIn + nOut; ++i) io[i] = static_cast<DType>(ioTypes[i]);
        return supportsType(cfgOf(h), pos, io.data(), nIn, nOut) ? 1 : 0;
    });
}
int rssm_core_output_types(void* h, int nIn, int32_t const* inTypes, int32_t* outTypes) {
    return guard([&] {
        std::vector<DType> in(nIn);
        for (int i = 0; i < nIn; ++i) in[i] = static_cast<DType>(inTypes[i]);
        auto o = outputTypes(cfgOf(h), in);
        for (size_t i = 0; i < o.size(); ++i) outTypes[i] = static_cast<int32_t>(o[i]);
        return static_cast<int>(o.size());
    });
}
int rssm_core_output_shape(void* h, int nIn, int32_t const* ranks, int64_t const* dims, int outIdx, int64_t* outDims) {
    return guard([&] {
        std::vector<std::vector<int64_t>> in;
        for (int i = 0; i < nIn; ++i) in.emplace_back(dims + kMAX_DIMS * i, dims + kMAX_DIMS * i + ranks[i]);
        auto o = outputShapes(cfgOf(h), in);
        if (outIdx < 0 || outIdx >= static_cast<int>(o.size())) throw Error("output index out of range");
        for (size_t k = 0; k < o[outIdx].size(); ++k) outDims[k] = o[outIdx][k];
        return static_cast<int>(o[outIdx].size());
    });
}
int rssm_core_check_inputs(void* h, int nIn, int32_t const* dtypes, int32_t const* ranks, int64_t const* dims) {
    return guard([&] {
        auto d = descs(nIn, dtypes, ranks, dims, nullptr);
        checkInputs(cfgOf(h), d.data(), nIn);
        return 0;
    });
}
int64_t rssm_core_workspace_size(void* h, int nIn, int32_t const* dtypes, int32_t const* ranks, int64_t const* dims) {
    int64_t r = -1;
    guard([&] {
        auto d = descs(nIn, dtypes, ranks, dims, nullptr);
        r = static_cast<int64_t>(workspaceSize(cfgOf(h), d.data(), nIn));
        return 0;
    });
    return r;
}
// Fills the kernel params struct of this plugin from contiguous descriptors and fake pointers and
// returns describe() of it ("name=value" lines).
int rssm_core_translate(void* h, int nIn, int32_t const* dtypes, int32_t const* ranks, int64_t const* dims,
                        uint64_t const* ptrs, int nOut, int32_t const* oDtypes, int32_t const* oRanks,
                        int64_t const* oDims, uint64_t const* oPtrs, char* buf, int cap) {
    return guard([&] {
        Config const& c = cfgOf(h);
        auto in = descs(nIn, dtypes, ranks, dims, ptrs);
        auto out = descs(nOut, oDtypes, oRanks, oDims, oPtrs);
        std::string s;
        switch (c.kind) {
        case PluginKind::kReplayDecode:
            if (c.e("read_dtype") != "none")
                s = describe(toDualPrecisionDecodeParams(c, in.data(), nIn, out.data(), nOut));
            else
                s = c.e("family") == "mamba2" ? describe(toMamba2ReplayParams(c, in.data(), nIn, out.data(), nOut))
                                              : describe(toGdnReplayParams(c, in.data(), nIn, out.data(), nOut));
            break;
        case PluginKind::kGdnVerify: s = describe(toGdnReplayParams(c, in.data(), nIn, out.data(), nOut)); break;
        case PluginKind::kReplayCommit: s = describe(toReplayCommitParams(c, in.data(), nIn, out.data(), nOut)); break;
        case PluginKind::kDualPrecisionFlush:
            s = describe(toDualPrecisionFlushParams(c, in.data(), nIn, out.data(), nOut));
            break;
        }
        return copyOut(s, buf, cap);
    });
}

}  // extern "C"
