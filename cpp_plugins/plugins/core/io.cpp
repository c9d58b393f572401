// I/O maps, dtype and shape rules, input checks and workspace formulas of every plugin.
#include "rssm_plugin_core.h"
#include "io_spec.h"

#include <map>
#include <sstream>

namespace rssm {
namespace core {

char const* dtypeName(DType t) {
    switch (t) {
    case DType::kFP32: return "float32";
    case DType::kFP16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kFP8: return "fp8";
    case DType::kFP4: return "fp4";
    case DType::kINT32: return "int32";
    case DType::kINT64: return "int64";
    case DType::kINT8: return "int8";
    case DType::kUINT8: return "uint8";
    case DType::kBOOL: return "bool";
    default: return "other";
    }
}

size_t dtypeBytes(DType t) {
    switch (t) {
    case DType::kFP32: case DType::kINT32: return 4;
    case DType::kFP16: case DType::kBF16: return 2;
    case DType::kINT64: return 8;
    case DType::kFP8: case DType::kINT8: case DType::kUINT8: case DType::kBOOL: return 1;
    default: return 0;
    }
}

TensorDesc contiguous(DType dtype, std::vector<int64_t> const& dims, void const* data) {
    TensorDesc d;
    d.dtype = dtype;
    d.nbDims = static_cast<int32_t>(dims.size());
    if (d.nbDims > kMAX_DIMS) throw Error("replayssm core: tensor rank " + std::to_string(d.nbDims) + " > 8");
    int64_t s = 1;
    for (int32_t i = d.nbDims - 1; i >= 0; --i) {
        d.dims[i] = dims[i];
        d.strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
    d.data = data;
    return d;
}

namespace {
DType enumToDType(std::string const& v, DType actType) {
    if (v == "fp32") return DType::kFP32;
    if (v == "fp16") return DType::kFP16;
    if (v == "bf16") return DType::kBF16;
    if (v == "act") return actType;
    if (v == "fp8_e4m3" || v == "nvfp4") return DType::kUINT8;  // raw bytes (docs/formats.md)
    throw Error("replayssm core: unknown dtype name '" + v + "'");
}
std::vector<DType> const kANY_ORDER_TYPES = {DType::kFP32, DType::kFP16, DType::kBF16, DType::kINT32};

// True when a ReplayDecode config selects the dual-precision decode (a read copy).
bool hasReadCopy(Config const& cfg) {
    return cfg.kind == PluginKind::kReplayDecode && cfg.e("read_dtype") != "none";
}

// Optional inputs of the dual-precision decode, after the family's own inputs (and z), in this
// order: ckpt_lp, [GDN: ring_beta, ring_v], [ckpt_hp_scale], [ckpt_lp_scale], [ckpt_lp_gscale].
// `h, p, n` are the state dims' symbols ([S, h, p, n]); `act` the act dtype.
void addReadCopyInputs(Config const& cfg, std::vector<IoSpec>& in, char const* h, char const* p, char const* n,
                       DType act, bool gdn) {
    std::string const sd = cfg.e("state_dtype"), rd = cfg.e("read_dtype");
    std::string const N(n);
    in.push_back({"ckpt_lp", {enumToDType(rd, act)}, {"S", h, p, rd == "nvfp4" ? N + "/2" : N}});
    if (gdn) {
        in.push_back({"ring_beta", {DType::kFP32}, {"S", "C", h}});
        in.push_back({"ring_v", {act}, {"S", "C", h, p}});
    }
    if (sd == "fp8_e4m3") in.push_back({"ckpt_hp_scale", {DType::kFP32}, {"S", h, p, N + "/128"}});
    if (rd == "fp8_e4m3") in.push_back({"ckpt_lp_scale", {DType::kFP32}, {"S", h, p, N + "/128"}});
    if (rd == "nvfp4") {
        in.push_back({"ckpt_lp_scale", {DType::kUINT8}, {"S", h, p, N + "/16"}});
        in.push_back({"ckpt_lp_gscale", {DType::kFP32}, {"S", h}});
    }
}

void addGdnInputs(Config const& cfg, std::vector<IoSpec>& in) {
    DType act = enumToDType(cfg.e("act_dtype"), DType::kOTHER);
    DType sd = enumToDType(cfg.e("state_dtype"), act);
    DType ud = enumToDType(cfg.e("u_dtype"), act);
    bool const dual = hasReadCopy(cfg);
    in = {
        {"q", {act}, {"B", "T", "H", "K"}},
        {"k", {act}, {"B", "T", "H", "K"}},
        {"v", {act}, {"B", "T", "HV", "V"}},
        {"a", {act}, {"B", "T", "HV"}},
        {"b", {act}, {"B", "T", "HV"}},
        {"A_log", {DType::kFP32}, {"HV"}},
        {"dt_bias", {DType::kFP32}, {"HV"}},
        {"state_batch_indices", {DType::kINT32}, {"B"}},
        {dual ? "ckpt_hp" : "state", {sd}, {"S", "HV", "V", "K"}},
        {"ring_g", {DType::kFP32}, {"S", "C", "HV"}},
        {"ring_u", {ud}, {"S", "C", "HV", "V"}},
        {"ring_k", {act}, {"S", "C", "H", "K"}},
        {"ring_origin", {DType::kINT32}, {"S"}},
        {"ring_len", {DType::kINT32}, {"S"}},
    };
}
}  // namespace

PluginIo pluginIo(Config const& cfg) {
    PluginIo io;
    switch (cfg.kind) {
    case PluginKind::kReplayDecode:
        if (cfg.e("family") == "mamba2") {
            DType act = enumToDType(cfg.e("act_dtype"), DType::kOTHER);
            DType sd = enumToDType(cfg.e("state_dtype"), act);
            DType dtt = enumToDType(cfg.e("dt_dtype"), act);
            io.inputs = {
                {"x", {act}, {"B", "T", "H", "P"}},
                {"dt", {dtt}, {"B", "T", "H"}},
                {"B", {act}, {"B", "T", "G", "N"}},
                {"C", {act}, {"B", "T", "G", "N"}},
                {"A", {DType::kFP32}, {"H"}},
                {"D", {DType::kFP32}, {"H"}},
                {"dt_bias", {DType::kFP32}, {"H"}},
                {"state_batch_indices", {DType::kINT32}, {"B"}},
                {hasReadCopy(cfg) ? "ckpt_hp" : "state", {sd}, {"S", "H", "P", "N"}},
                {"ring_dt", {DType::kFP32}, {"S", "C", "H"}},
                {"ring_x", {act}, {"S", "C", "H", "P"}},
                {"ring_B", {act}, {"S", "C", "G", "N"}},
                {"ring_origin", {DType::kINT32}, {"S"}},
                {"ring_len", {DType::kINT32}, {"S"}},
            };
            if (cfg.i("has_z")) io.inputs.push_back({"z", {act}, {"B", "T", "H", "P"}});
            if (hasReadCopy(cfg)) addReadCopyInputs(cfg, io.inputs, "H", "P", "N", act, false);
            io.outputs = {{"y", {act}, {"B", "T", "H", "P"}}};
            io.outputCopiesInput = {decode_mamba2::kIN_X};
        } else {
            addGdnInputs(cfg, io.inputs);
            DType act = enumToDType(cfg.e("act_dtype"), DType::kOTHER);
            if (hasReadCopy(cfg)) addReadCopyInputs(cfg, io.inputs, "HV", "V", "K", act, true);
            io.outputs = {{"o", {act}, {"B", "T", "HV", "V"}}};
            io.outputCopiesInput = {gdn_io::kIN_V};
        }
        break;
    case PluginKind::kGdnVerify:
        addGdnInputs(cfg, io.inputs);
        io.outputs = {{"o", {enumToDType(cfg.e("act_dtype"), DType::kOTHER)}, {"B", "T", "HV", "V"}}};
        io.outputCopiesInput = {gdn_io::kIN_V};
        break;
    case PluginKind::kDualPrecisionFlush: {
        DType act = enumToDType(cfg.e("act_dtype"), DType::kOTHER);
        std::string const rec = cfg.e("recurrence_dtype"), rd = cfg.e("read_dtype");
        io.inputs = {
            {"after", kANY_ORDER_TYPES, {"B", "T", "..."}},
            {"state_batch_indices", {DType::kINT32}, {"B"}},
            {"ring_origin", {DType::kINT32}, {"S"}},
            {"ring_len", {DType::kINT32}, {"S"}},
            {"flush_index", {DType::kINT32}, {"B"}},
            {"ckpt_hp", {enumToDType(rec, act)}, {"S", "H", "P", "N"}},
            {"ckpt_lp", {enumToDType(rd, act)}, {"S", "H", "P", rd == "nvfp4" ? "N/2" : "N"}},
        };
        if (cfg.e("family") == "mamba2") {
            io.inputs.push_back({"A", {DType::kFP32}, {"H"}});
            io.inputs.push_back({"ring_dt", {DType::kFP32}, {"S", "C", "H"}});
            io.inputs.push_back({"ring_x", {act}, {"S", "C", "H", "P"}});
            io.inputs.push_back({"ring_B", {act}, {"S", "C", "G", "N"}});
        } else {
            io.inputs.push_back({"ring_g", {DType::kFP32}, {"S", "C", "H"}});
            io.inputs.push_back({"ring_k", {act}, {"S", "C", "G", "N"}});
            io.inputs.push_back({"ring_beta", {DType::kFP32}, {"S", "C", "H"}});
            io.inputs.push_back({"ring_v", {act}, {"S", "C", "H", "P"}});
        }
        if (rec == "fp8_e4m3") io.inputs.push_back({"ckpt_hp_scale", {DType::kFP32}, {"S", "H", "P", "N/128"}});
        if (rd == "fp8_e4m3") io.inputs.push_back({"ckpt_lp_scale", {DType::kFP32}, {"S", "H", "P", "N/128"}});
        if (rd == "nvfp4") {
            io.inputs.push_back({"ckpt_lp_scale", {DType::kUINT8}, {"S", "H", "P", "N/16"}});
            io.inputs.push_back({"ckpt_lp_gscale", {DType::kFP32}, {"S", "H"}});
        }
        io.outputs = {{"flushed", {DType::kINT32}, {"B"}}};
        io.outputCopiesInput = {flush_io::kIN_SLOTS};
        break;
    }
    case PluginKind::kReplayCommit:
        io.inputs = {
            {"after", kANY_ORDER_TYPES, {"B", "T", "..."}},
            {"state_batch_indices", {DType::kINT32}, {"B"}},
            {"ring_origin", {DType::kINT32}, {"S"}},
            {"ring_len", {DType::kINT32}, {"S"}},
        };
        if (cfg.i("has_accepted")) io.inputs.push_back({"accepted", {DType::kINT32}, {"B"}});
        io.outputs = {{"error_slot", {DType::kINT32}, {"1"}}};
        io.outputCopiesInput = {-1};
        break;
    }
    return io;
}

IoMap ioMap(Config const& cfg) {
    PluginIo io = pluginIo(cfg);
    IoMap m;
    for (auto const& s : io.inputs) m.inputs.push_back(s.name);
    for (auto const& s : io.outputs) m.outputs.push_back(s.name);
    return m;
}
int32_t numInputs(Config const& cfg) { return static_cast<int32_t>(pluginIo(cfg).inputs.size()); }
int32_t numOutputs(Config const& cfg) { return static_cast<int32_t>(pluginIo(cfg).outputs.size()); }
int32_t inputIndex(Config const& cfg, std::string const& name) {
    PluginIo io = pluginIo(cfg);
    for (size_t i = 0; i < io.inputs.size(); ++i)
        if (io.inputs[i].name == name) return static_cast<int32_t>(i);
    return -1;
}

bool supportsType(Config const& cfg, int32_t pos, DType const* io, int32_t nbInputs, int32_t nbOutputs) {
    PluginIo spec = pluginIo(cfg);
    if (nbInputs != static_cast<int32_t>(spec.inputs.size()) || nbOutputs != static_cast<int32_t>(spec.outputs.size()))
        return false;
    if (pos < 0 || pos >= nbInputs + nbOutputs) return false;
    IoSpec const& s = pos < nbInputs ? spec.inputs[pos] : spec.outputs[pos - nbInputs];
    for (DType t : s.types)
        if (io[pos] == t) return true;
    return false;
}

std::vector<DType> outputTypes(Config const& cfg, std::vector<DType> const&) {
    std::vector<DType> r;
    for (auto const& s : pluginIo(cfg).outputs) r.push_back(s.types.at(0));
    return r;
}

std::vector<ShapeRule> outputShapeRules(Config const& cfg) {
    PluginIo io = pluginIo(cfg);
    std::vector<ShapeRule> r;
    for (size_t o = 0; o < io.outputs.size(); ++o) {
        ShapeRule rule;
        rule.copyFromInput = io.outputCopiesInput.at(o);
        if (rule.copyFromInput < 0) rule.constant = {1};
        r.push_back(rule);
    }
    return r;
}

std::vector<std::vector<int64_t>> outputShapes(Config const& cfg, std::vector<std::vector<int64_t>> const& inputDims) {
    std::vector<std::vector<int64_t>> r;
    for (auto const& rule : outputShapeRules(cfg)) {
        if (rule.copyFromInput >= 0) {
            if (rule.copyFromInput >= static_cast<int32_t>(inputDims.size()))
                throw Error(std::string(opName(cfg.kind)) + ": output shape needs input " +
                            std::to_string(rule.copyFromInput) + "; got " + std::to_string(inputDims.size()) + " inputs");
            r.push_back(inputDims[rule.copyFromInput]);
        } else {
            r.push_back(rule.constant);
        }
    }
    return r;
}

namespace {
std::string dimsStr(TensorDesc const& d) {
    std::ostringstream os;
    os << "[";
    for (int32_t i = 0; i < d.nbDims; ++i) os << (i ? ", " : "") << d.dims[i];
    os << "]";
    return os.str();
}

struct Binder {
    char const* op;
    std::map<std::string, int64_t> sym;

    std::string expected(IoSpec const& s, TensorDesc const* d = nullptr) const {
        std::ostringstream os;
        for (size_t i = 0; i < s.types.size(); ++i) os << (i ? "|" : "") << dtypeName(s.types[i]);
        os << " [";
        for (size_t i = 0; i < s.dims.size(); ++i) os << (i ? ", " : "") << s.dims[i];
        os << "]";
        bool any = false;
        std::ostringstream vals;
        for (size_t i = 0; i < s.dims.size(); ++i) {
            int64_t v = value(s.dims[i]);
            // A symbol first seen in this tensor takes the tensor's own value (dims not checked yet).
            if (v == -1 && d && static_cast<int32_t>(i) < d->nbDims && s.dims[i].find('/') == std::string::npos &&
                d->dims[i] >= 0)
                v = d->dims[i];
            vals << (i ? ", " : "") << (v >= 0 ? std::to_string(v) : std::string("*"));
            any |= v >= 0;
        }
        if (any && s.dims.back() != "...") os << " = [" << vals.str() << "]";
        return os.str();
    }
    // Value of a symbol expression ("N", "N/16", "1"), -1 when not bound yet.
    int64_t value(std::string const& e) const {
        if (e == "...") return -1;
        if (!e.empty() && e[0] >= '0' && e[0] <= '9') return std::stoll(e);
        auto slash = e.find('/');
        std::string base = slash == std::string::npos ? e : e.substr(0, slash);
        auto it = sym.find(base);
        if (it == sym.end()) return -1;
        if (slash == std::string::npos) return it->second;
        int64_t div = std::stoll(e.substr(slash + 1));
        return it->second % div == 0 ? it->second / div : -2;
    }
    void bind(int32_t idx, IoSpec const& s, TensorDesc const& d) {
        auto fail = [&](char const* hint = nullptr) {
            std::ostringstream os;
            os << op << ": input " << idx << " '" << s.name << "' must be " << expected(s, &d) << "; got "
               << dtypeName(d.dtype) << " " << dimsStr(d);
            if (hint) os << " " << hint;
            throw Error(os.str());
        };
        bool typeOk = false;
        for (DType t : s.types) typeOk |= (t == d.dtype);
        if (!typeOk) fail();
        bool const variadic = !s.dims.empty() && s.dims.back() == "...";
        size_t const fixed = variadic ? s.dims.size() - 1 : s.dims.size();
        if (variadic ? d.nbDims < static_cast<int32_t>(fixed) : d.nbDims != static_cast<int32_t>(fixed)) fail();
        for (size_t i = 0; i < fixed; ++i) {
            int64_t actual = d.dims[i];
            if (actual < 0) continue;  // unknown at build time
            std::string const& e = s.dims[i];
            int64_t v = value(e);
            if (v == -2) fail();
            if (v >= 0) {
                // The ring capacity is the config's, not the tensor's: say where it comes from (a pool allocated with
                // the rule of another version, e.g. L + 1 rows in standard mode before the sixty-eighth session).
                if (v != actual)
                    fail(e == "C" ? "(C is the ring capacity: window in mode 'standard', window + max_verify in mode "
                                    "'speculative'; allocate the ring pools with that many records per slot)"
                                  : nullptr);
            } else if (e.find('/') == std::string::npos) {
                sym[e] = actual;
            } else {
                // "N/16" seen before N: bind N from it.
                int64_t div = std::stoll(e.substr(e.find('/') + 1));
                sym[e.substr(0, e.find('/'))] = actual * div;
            }
        }
    }
};

bool isContiguous(TensorDesc const& d) {
    int64_t s = 1;
    for (int32_t i = d.nbDims - 1; i >= 0; --i) {
        if (d.dims[i] != 1 && d.strides[i] != s) return false;
        s *= d.dims[i];
    }
    return true;
}
}  // namespace

Symbols checkInputsSymbols(Config const& cfg, TensorDesc const* in, int32_t nbInputs) {
    char const* op = opName(cfg.kind);
    PluginIo io = pluginIo(cfg);
    if (nbInputs != static_cast<int32_t>(io.inputs.size()))
        throw Error(std::string(op) + ": expected " + std::to_string(io.inputs.size()) + " inputs for this configuration; got " +
                    std::to_string(nbInputs));
    Binder b{op, {}};
    if (fieldIndex(cfg.kind, "window") >= 0) b.sym["C"] = ringCapacity(cfg);
    for (int32_t i = 0; i < nbInputs; ++i) {
        b.bind(i, io.inputs[i], in[i]);
        bool const allKnown = [&] { for (int32_t k = 0; k < in[i].nbDims; ++k) if (in[i].dims[k] < 0) return false; return true; }();
        if (allKnown && io.inputs[i].name != "after" && !isContiguous(in[i]))
            throw Error(std::string(op) + ": input " + std::to_string(i) + " '" + io.inputs[i].name +
                        "' must be contiguous (row-major); got dims " + dimsStr(in[i]) + " with other strides");
    }
    auto sym = [&](char const* s) { auto it = b.sym.find(s); return it == b.sym.end() ? int64_t(-1) : it->second; };
    auto fail = [&](std::string const& m) { throw Error(std::string(op) + ": " + m); };
    int64_t const T = sym("T");
    if (T >= 0 && fieldIndex(cfg.kind, "max_verify") >= 0) {
        int64_t maxT = cfg.i("max_verify");
        if (T < 1 || T > maxT)
            fail("token count T (dim 1 of input 0) must be in [1, " + std::to_string(maxT) + "] (max_verify); got " + std::to_string(T));
        bool standard = fieldIndex(cfg.kind, "mode") >= 0 && cfg.e("mode") == "standard";
        if (standard && T != 1) fail("token count T must be 1 in mode 'standard'; got " + std::to_string(T));
    }
    bool const mamba = (cfg.kind == PluginKind::kReplayDecode && cfg.e("family") == "mamba2") ||
                       (cfg.kind == PluginKind::kDualPrecisionFlush && cfg.e("family") == "mamba2");
    bool const gdn = cfg.kind == PluginKind::kGdnVerify || (cfg.kind == PluginKind::kReplayDecode && cfg.e("family") == "gdn");
    bool const dual = hasReadCopy(cfg);
    if (dual) {
        // Dual-precision decode kernels (dual_precision.h): N = K = 128, P / V a multiple of 8 in [8, 128].
        char const* n = mamba ? "state size N" : "key dim K";
        char const* p = mamba ? "head dim P" : "value dim V";
        int64_t const N = sym(mamba ? "N" : "K"), P = sym(mamba ? "P" : "V");
        if (N >= 0 && N != 128)
            fail(std::string(n) + " must be 128 with a read copy (dual-precision kernel, read_dtype '" +
                 cfg.e("read_dtype") + "'); got " + std::to_string(N));
        if (P >= 0 && (P < 8 || P > 128 || P % 8))
            fail(std::string(p) + " must be a multiple of 8 in [8, 128] with a read copy (dual-precision kernel); got " +
                 std::to_string(P));
    }
    if (mamba) {
        int64_t H = sym("H"), G = sym("G"), P = sym("P"), N = sym("N");
        if (H > 0 && G > 0 && H % G) fail("nheads H = " + std::to_string(H) + " must be a multiple of ngroups G = " + std::to_string(G));
        if (cfg.kind == PluginKind::kReplayDecode && !dual) {
            if (P >= 0 && P != 32 && P != 64 && P != 80 && P != 128)
                fail("head dim P must be one of [32, 64, 80, 128] (kernel instances); got " + std::to_string(P));
            if (N >= 0 && N != 64 && N != 128 && N != 256)
                fail("state size N must be one of [64, 128, 256] (kernel instances); got " + std::to_string(N));
        }
    }
    if (gdn) {
        int64_t H = sym("H"), HV = sym("HV"), K = sym("K");
        if (H > 0 && HV > 0 && HV % H) fail("value heads HV = " + std::to_string(HV) + " must be a multiple of key heads H = " + std::to_string(H));
        if (!dual && K >= 0 && K != 64 && K != 128 && K != 256) fail("key dim K must be one of [64, 128, 256] (kernel instances); got " + std::to_string(K));
    }
    if (cfg.kind == PluginKind::kDualPrecisionFlush) {
        int64_t N = sym("N"), P = sym("P");
        // Flush kernel (dual_precision_flush.h): N / K = 128, P / V in [1, 128].
        if (N >= 0 && N != 128)
            fail("state last dim (Mamba-2 N / GDN K) must be 128 (dual-precision flush kernel); got " + std::to_string(N));
        if (P >= 0 && (P < 1 || P > 128))
            fail("state rows (Mamba-2 P / GDN V) must be in [1, 128] (dual-precision flush kernel); got " + std::to_string(P));
        std::string rec = cfg.e("recurrence_dtype"), rd = cfg.e("read_dtype");
        if (N > 0 && (rec == "fp8_e4m3" || rd == "fp8_e4m3") && N % 128)
            fail("state last dim must be a multiple of 128 for fp8_e4m3 (one scale per 128); got " + std::to_string(N));
        if (N > 0 && rd == "nvfp4" && N % 16) fail("state last dim must be a multiple of 16 for nvfp4; got " + std::to_string(N));
    }
    return b.sym;
}

void checkInputs(Config const& cfg, TensorDesc const* in, int32_t nbInputs) { (void) checkInputsSymbols(cfg, in, nbInputs); }

size_t workspaceSize(Config const& cfg, TensorDesc const*, int32_t) {
    // Mamba2Replay and GdnReplay stage records and the T x T solve on chip; the commit and the
    // flush use registers only. Nothing goes through the workspace (formula: 0 bytes).
    (void) cfg;
    return 0;
}

}  // namespace core
}  // namespace rssm
