// Field schemas and their validation: the one place each plugin field is declared.
#include "rssm_plugin_core.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace rssm {
namespace core {

namespace {
constexpr double kINF = 1e30;

std::vector<FieldSpec> makeDecodeSchema() {
    return {
        {"family", FieldType::kENUM, 0, 0, 0, {"mamba2", "gdn"}, "model family of the layer"},
        {"window", FieldType::kINT32, 16, 1, 64, {}, "replay window L (committed records before a flush)"},
        {"max_verify", FieldType::kINT32, 1, 1, 8, {}, "largest T per step; ring capacity C = window (standard) or window + max_verify (speculative)"},
        {"mode", FieldType::kENUM, 0, 0, 0, {"standard", "speculative"}, "Algorithm 1/4 (T = 1) or 2/5 (T >= 1)"},
        {"act_dtype", FieldType::kENUM, 1, 0, 0, {"fp16", "bf16"}, "activations and act-typed ring records"},
        {"state_dtype", FieldType::kENUM, 0, 0, 0, {"fp32", "fp16", "bf16", "fp8_e4m3"},
         "checkpoint dtype; with a read copy, the recurrence checkpoint (fp8_e4m3 only with a read copy)"},
        {"dt_dtype", FieldType::kENUM, 0, 0, 0, {"fp32", "act"}, "Mamba-2 dt_raw dtype (fp32 or act_dtype)"},
        {"has_z", FieldType::kINT32, 0, 0, 1, {}, "Mamba-2: 1 = gate input z present (y *= silu(z))"},
        {"u_dtype", FieldType::kENUM, 0, 0, 0, {"fp16", "bf16"}, "GDN: ring_u record dtype"},
        {"scale", FieldType::kFLOAT32, 0.0, 0.0, kINF, {}, "GDN: query scale; 0 = K^-0.5"},
        // Version 2.
        {"read_dtype", FieldType::kENUM, 0, 0, 0, {"none", "fp16", "fp8_e4m3", "nvfp4"},
         "read copy read on non-flush rows ('none' = single checkpoint, flushed by this layer; else the "
         "dual-precision decode: no checkpoint written, the flush is the DualPrecisionFlush layer)"},
    };
}

std::vector<FieldSpec> makeGdnVerifySchema() {
    return {
        {"window", FieldType::kINT32, 16, 1, 64, {}, "replay window L"},
        {"max_verify", FieldType::kINT32, 4, 1, 8, {}, "largest T per step; ring capacity C = window + max_verify"},
        {"act_dtype", FieldType::kENUM, 1, 0, 0, {"fp16", "bf16"}, "q, k, v, a, b, o and ring_k"},
        {"state_dtype", FieldType::kENUM, 0, 0, 0, {"fp32", "fp16", "bf16"}, "checkpoint dtype"},
        {"u_dtype", FieldType::kENUM, 0, 0, 0, {"fp16", "bf16"}, "ring_u record dtype"},
        {"scale", FieldType::kFLOAT32, 0.0, 0.0, kINF, {}, "query scale; 0 = K^-0.5"},
    };
}

std::vector<FieldSpec> makeFlushSchema() {
    return {
        {"family", FieldType::kENUM, 0, 0, 0, {"mamba2", "gdn"}, "model family of the layer"},
        {"window", FieldType::kINT32, 16, 1, 64, {}, "replay window L"},
        {"max_verify", FieldType::kINT32, 1, 1, 8, {}, "largest T per step; C = window (standard) or window + max_verify (speculative)"},
        {"mode", FieldType::kENUM, 0, 0, 0, {"standard", "speculative"}, "flush rule h + 1 == L or h + T > L"},
        {"act_dtype", FieldType::kENUM, 1, 0, 0, {"fp16", "bf16"}, "act-typed ring records"},
        {"recurrence_dtype", FieldType::kENUM, 0, 0, 0, {"fp32", "fp16", "bf16", "fp8_e4m3"},
         "recurrence checkpoint format (read on flush steps)"},
        {"read_dtype", FieldType::kENUM, 0, 0, 0, {"fp16", "fp8_e4m3", "nvfp4"},
         "read copy format (read on non-flush steps, written with RTN)"},
        {"rounding", FieldType::kENUM, 0, 0, 0, {"rtn", "sr"}, "rounding of the recurrence cast"},
        {"seed", FieldType::kINT64, 0, -9.2e18, 9.2e18, {}, "Philox key (64 bits) of stochastic rounding"},
        {"layer_index", FieldType::kINT32, 0, 0, 2147483647.0, {}, "Philox counter word 2"},
    };
}

std::vector<FieldSpec> makeCommitSchema() {
    return {
        {"window", FieldType::kINT32, 16, 1, 64, {}, "replay window L"},
        {"max_verify", FieldType::kINT32, 1, 1, 8, {}, "largest T per step; C = window (standard) or window + max_verify (speculative)"},
        {"mode", FieldType::kENUM, 0, 0, 0, {"standard", "speculative"}, "commit rule of design.md 3.2"},
        {"has_accepted", FieldType::kINT32, 0, 0, 1, {}, "speculative: 1 = input 'accepted' [B] present (else all T)"},
    };
}

int precisionBits(std::string const& f) {
    if (f == "fp32") return 32;
    if (f == "fp16" || f == "bf16") return 16;
    if (f == "fp8_e4m3") return 8;
    if (f == "nvfp4") return 4;
    return 0;
}

std::string fmtNumber(double v, FieldType t) {
    std::ostringstream os;
    if (t == FieldType::kFLOAT32) os << v; else os << static_cast<long long>(v);
    return os.str();
}
}  // namespace

char const* opName(PluginKind kind) {
    switch (kind) {
    case PluginKind::kReplayDecode: return "ReplayDecode";
    case PluginKind::kGdnVerify: return "GdnVerify";
    case PluginKind::kDualPrecisionFlush: return "DualPrecisionFlush";
    case PluginKind::kReplayCommit: return "ReplayCommit";
    }
    return "Unknown";
}
char const* registeredName(PluginKind kind) {
    switch (kind) {
    case PluginKind::kReplayDecode: return "ReplayDecode_RSSM";
    case PluginKind::kGdnVerify: return "GdnVerify_RSSM";
    case PluginKind::kDualPrecisionFlush: return "DualPrecisionFlush_RSSM";
    case PluginKind::kReplayCommit: return "ReplayCommit_RSSM";
    }
    return "Unknown_RSSM";
}
// Bump (and add a README changelog line) when fields, I/O order or workspace layout change.
//   ReplayDecode 2: field 'read_dtype', state_dtype 'fp8_e4m3', dual-precision optional inputs.
int32_t pluginVersionNumber(PluginKind kind) { return kind == PluginKind::kReplayDecode ? 2 : 1; }
char const* pluginVersion(PluginKind kind) { return kind == PluginKind::kReplayDecode ? "2" : "1"; }

std::vector<FieldSpec> const& schema(PluginKind kind) {
    static std::vector<FieldSpec> const s[kNUM_PLUGIN_KINDS] = {
        makeDecodeSchema(), makeGdnVerifySchema(), makeFlushSchema(), makeCommitSchema()};
    int32_t k = static_cast<int32_t>(kind);
    if (k < 0 || k >= kNUM_PLUGIN_KINDS) throw Error("replayssm core: unknown plugin kind " + std::to_string(k));
    return s[k];
}

int32_t fieldIndex(PluginKind kind, std::string const& name) {
    auto const& sc = schema(kind);
    for (size_t i = 0; i < sc.size(); ++i)
        if (name == sc[i].name) return static_cast<int32_t>(i);
    return -1;
}

namespace {
int32_t requireField(PluginKind kind, char const* name) {
    int32_t idx = fieldIndex(kind, name);
    if (idx < 0) throw Error(std::string(opName(kind)) + ": no field '" + name + "'");
    return idx;
}
}  // namespace

int64_t Config::i(char const* name) const { return ints.at(requireField(kind, name)); }
double Config::f(char const* name) const { return floats.at(requireField(kind, name)); }
std::string Config::e(char const* name) const {
    int32_t idx = requireField(kind, name);
    auto const& spec = schema(kind)[idx];
    int64_t v = ints.at(idx);
    if (v < 0 || v >= static_cast<int64_t>(spec.choices.size())) return "<invalid>";
    return spec.choices[v];
}
void Config::setInt(char const* name, int64_t v) { ints.at(requireField(kind, name)) = v; }
void Config::setFloat(char const* name, double v) { floats.at(requireField(kind, name)) = v; }
void Config::setEnum(char const* name, std::string const& v) {
    int32_t idx = requireField(kind, name);
    auto const& spec = schema(kind)[idx];
    for (size_t c = 0; c < spec.choices.size(); ++c)
        if (spec.choices[c] == v) { ints[idx] = static_cast<int64_t>(c); return; }
    std::ostringstream os;
    os << opName(kind) << ": field '" << name << "' must be one of [";
    for (size_t c = 0; c < spec.choices.size(); ++c) os << (c ? ", " : "") << "'" << spec.choices[c] << "'";
    os << "]; got '" << v << "'";
    throw Error(os.str());
}

Config defaults(PluginKind kind) {
    Config c;
    c.kind = kind;
    auto const& sc = schema(kind);
    c.ints.assign(sc.size(), 0);
    c.floats.assign(sc.size(), 0.0);
    for (size_t i = 0; i < sc.size(); ++i) {
        if (sc[i].type == FieldType::kFLOAT32) c.floats[i] = sc[i].defaultValue;
        else c.ints[i] = static_cast<int64_t>(sc[i].defaultValue);
    }
    return c;
}

void validate(Config const& cfg) {
    auto const& sc = schema(cfg.kind);
    char const* op = opName(cfg.kind);
    if (cfg.ints.size() != sc.size() || cfg.floats.size() != sc.size())
        throw Error(std::string(op) + ": config has " + std::to_string(cfg.ints.size()) + " fields; expected " +
                    std::to_string(sc.size()));
    for (size_t i = 0; i < sc.size(); ++i) {
        auto const& s = sc[i];
        std::ostringstream os;
        if (s.type == FieldType::kENUM) {
            int64_t v = cfg.ints[i];
            if (v < 0 || v >= static_cast<int64_t>(s.choices.size())) {
                os << op << ": field '" << s.name << "' must be one of [";
                for (size_t c = 0; c < s.choices.size(); ++c) os << (c ? ", " : "") << "'" << s.choices[c] << "'";
                os << "]; got index " << v;
                throw Error(os.str());
            }
        } else if (s.type == FieldType::kFLOAT32) {
            double v = cfg.floats[i];
            if (!std::isfinite(v) || v < s.minValue || v > s.maxValue) {
                os << op << ": field '" << s.name << "' must be a finite value in [" << fmtNumber(s.minValue, s.type)
                   << ", " << (s.maxValue >= kINF ? std::string("inf") : fmtNumber(s.maxValue, s.type)) << "]; got " << v;
                throw Error(os.str());
            }
        } else if (s.type == FieldType::kINT32) {
            int64_t v = cfg.ints[i];
            if (static_cast<double>(v) < s.minValue || static_cast<double>(v) > s.maxValue) {
                os << op << ": field '" << s.name << "' must be in [" << fmtNumber(s.minValue, s.type) << ", "
                   << fmtNumber(s.maxValue, s.type) << "]; got " << v;
                throw Error(os.str());
            }
        }  // kINT64 (seed): every bit pattern is valid
    }

    // Cross-field rules.
    auto fail = [&](std::string const& msg) { throw Error(std::string(op) + ": " + msg); };
    int64_t const window = cfg.i("window");
    int64_t const maxVerify = cfg.i("max_verify");
    if (maxVerify > window)
        fail("field 'max_verify' must be <= window (" + std::to_string(window) +
             ") so the drafts fit behind the committed records; got " + std::to_string(maxVerify));
    bool const hasMode = fieldIndex(cfg.kind, "mode") >= 0;
    if (hasMode && cfg.e("mode") == "standard" && maxVerify != 1)
        fail("field 'max_verify' must be 1 with mode 'standard' (T = 1; use mode 'speculative' for T > 1); got " +
             std::to_string(maxVerify));

    // Read copy vs recurrence checkpoint: the same rule in ReplayDecode (state_dtype) and
    // DualPrecisionFlush (recurrence_dtype), so the two layers of one model always agree.
    auto checkCopies = [&](char const* recField, std::string const& rec, std::string const& rd) {
        if (precisionBits(rd) > precisionBits(rec))
            fail("field 'read_dtype' must not be more precise than " + std::string(recField) + " '" + rec + "' (" +
                 std::to_string(precisionBits(rec)) + " bits); got '" + rd + "' (" + std::to_string(precisionBits(rd)) +
                 " bits)");
        if (rd == rec)
            fail("field 'read_dtype' equal to " + std::string(recField) + " duplicates the checkpoint; got '" + rd + "'");
    };

    switch (cfg.kind) {
    case PluginKind::kReplayDecode: {
        std::string const rd = cfg.e("read_dtype"), sd = cfg.e("state_dtype");
        if (cfg.e("family") == "gdn") {
            if (cfg.e("mode") != "standard")
                fail("field 'mode' must be 'standard' with family 'gdn' (GDN speculative verification is the "
                     "GdnVerify plugin); got '" + cfg.e("mode") + "'");
            if (cfg.i("has_z") != 0) fail("field 'has_z' must be 0 with family 'gdn'; got " + std::to_string(cfg.i("has_z")));
        }
        if (rd == "none") {
            if (sd == "fp8_e4m3")
                fail("field 'state_dtype' 'fp8_e4m3' needs a read copy (read_dtype 'nvfp4'): the single-checkpoint "
                     "replay kernels store fp32 / fp16 / bf16; got read_dtype 'none'");
        } else {
            checkCopies("state_dtype (the recurrence checkpoint)", sd, rd);
            if (cfg.e("family") == "gdn" && cfg.e("u_dtype") != "fp16")
                fail("field 'u_dtype' must be 'fp16' with a read copy (the dual-precision GDN kernel keeps ring_u in "
                     "fp16); got '" + cfg.e("u_dtype") + "'");
        }
        break;
    }
    case PluginKind::kDualPrecisionFlush: {
        std::string const rec = cfg.e("recurrence_dtype"), rd = cfg.e("read_dtype");
        checkCopies("recurrence_dtype", rec, rd);
        if (cfg.e("rounding") == "sr" && rec == "fp32")
            fail("field 'rounding' 'sr' applies to a low-precision recurrence checkpoint; got recurrence_dtype 'fp32' "
                 "(use 'rtn')");
        break;
    }
    case PluginKind::kReplayCommit:
        if (cfg.e("mode") == "standard" && cfg.i("has_accepted") != 0)
            fail("field 'has_accepted' must be 0 with mode 'standard' (every token is committed); got " +
                 std::to_string(cfg.i("has_accepted")));
        break;
    default: break;
    }
}

Config configFromFields(PluginKind kind, RawField const* fields, int32_t nbFields) {
    Config cfg = defaults(kind);
    char const* op = opName(kind);
    auto const& sc = schema(kind);
    if (nbFields > 0 && fields == nullptr) throw Error(std::string(op) + ": field list is null");
    for (int32_t k = 0; k < nbFields; ++k) {
        RawField const& rf = fields[k];
        std::string const name = rf.name ? rf.name : "";
        int32_t idx = fieldIndex(kind, name);
        if (idx < 0) {
            std::ostringstream os;
            os << op << ": unknown field '" << name << "'; expected one of [";
            for (size_t i = 0; i < sc.size(); ++i) os << (i ? ", " : "") << sc[i].name;
            os << "]";
            throw Error(os.str());
        }
        auto const& s = sc[idx];
        if (rf.data == nullptr || rf.length < 1)
            throw Error(std::string(op) + ": field '" + name + "' has no data (length " + std::to_string(rf.length) + ")");
        switch (s.type) {
        case FieldType::kINT32:
            if (rf.trtType != kPF_INT32 || rf.length != 1)
                throw Error(std::string(op) + ": field '" + name + "' must be INT32 of length 1; got type " +
                            std::to_string(rf.trtType) + " length " + std::to_string(rf.length));
            cfg.ints[idx] = *static_cast<int32_t const*>(rf.data);
            break;
        case FieldType::kINT64:
            if (rf.trtType == kPF_INT64 && rf.length == 1) cfg.ints[idx] = *static_cast<int64_t const*>(rf.data);
            else if (rf.trtType == kPF_INT32 && rf.length == 1) cfg.ints[idx] = *static_cast<int32_t const*>(rf.data);
            else
                throw Error(std::string(op) + ": field '" + name + "' must be INT64 of length 1; got type " +
                            std::to_string(rf.trtType) + " length " + std::to_string(rf.length));
            break;
        case FieldType::kFLOAT32:
            if (rf.trtType != kPF_FLOAT32 || rf.length != 1)
                throw Error(std::string(op) + ": field '" + name + "' must be FLOAT32 of length 1; got type " +
                            std::to_string(rf.trtType) + " length " + std::to_string(rf.length));
            cfg.floats[idx] = *static_cast<float const*>(rf.data);
            break;
        case FieldType::kENUM: {
            if (rf.trtType != kPF_CHAR)
                throw Error(std::string(op) + ": field '" + name + "' must be CHAR (a string); got type " +
                            std::to_string(rf.trtType));
            char const* str = static_cast<char const*>(rf.data);
            size_t len = strnlen(str, static_cast<size_t>(rf.length));  // length may or may not count the NUL
            cfg.setEnum(s.name, std::string(str, len));
            break;
        }
        }
    }
    validate(cfg);
    return cfg;
}

int32_t ringCapacity(Config const& cfg) {
    // Standard mode (max_verify 1): L rows hold every window (the flush step at h = L - 1 folds L - 1 ring records
    // and its own token). Speculative mode and kinds without a mode (GdnVerify): L committed + T drafts.
    bool const standard = fieldIndex(cfg.kind, "mode") >= 0 && cfg.e("mode") == "standard";
    return static_cast<int32_t>(cfg.i("window") + (standard ? 0 : cfg.i("max_verify")));
}

}  // namespace core
}  // namespace rssm
