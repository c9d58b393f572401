// TensorRT-free core of the replayssm plugins: field schemas, validation, I/O index maps, output
// shape / dtype rules, workspace formulas, versioned serialization, and the translation of plain
// tensor descriptors into the kernel params structs.
//
// Plain C++17. No TensorRT header here or in core/*.cpp: the IPluginV3 adapters
// (cpp_plugins/plugins/<Name>Plugin/) convert TensorRT descriptors into core::TensorDesc and call
// these functions; pytest exercises the same functions through the C API in rssm_plugin_core_c.h.
// The kernel headers are included for their params structs only (they need cuda_runtime.h for the
// cudaStream_t typedef, nothing else).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace rssm {
namespace core {

// ---------------------------------------------------------------------------------------------
// Plugins
// ---------------------------------------------------------------------------------------------
enum class PluginKind : int32_t {
    kReplayDecode = 0,
    kGdnVerify = 1,
    kDualPrecisionFlush = 2,
    kReplayCommit = 3,
};
constexpr int32_t kNUM_PLUGIN_KINDS = 4;

// Short op name used in messages ("ReplayDecode"), the registered name ("ReplayDecode_RSSM"), the
// version string ("1") and the default namespace ("replayssm").
char const* opName(PluginKind kind);
char const* registeredName(PluginKind kind);
char const* pluginVersion(PluginKind kind);
int32_t pluginVersionNumber(PluginKind kind);
constexpr char const* kDEFAULT_NAMESPACE = "replayssm";

// Every failed check throws Error with a message that names the op, the field or tensor, the
// expected and the actual value. Adapters catch it at their noexcept edges.
class Error : public std::runtime_error {
public:
    explicit Error(std::string const& msg) : std::runtime_error(msg) {}
};

// ---------------------------------------------------------------------------------------------
// Field schema. Declared once per plugin (schema.cpp); the creator's PluginFieldCollection, the
// serialized field list, the Python helpers and the README tables all come from it.
// ---------------------------------------------------------------------------------------------
enum class FieldType : int32_t {
    kINT32 = 0,    // PluginFieldType::kINT32, length 1
    kINT64 = 1,    // PluginFieldType::kINT64, length 1
    kFLOAT32 = 2,  // PluginFieldType::kFLOAT32, length 1
    kENUM = 3,     // PluginFieldType::kCHAR, one of `choices` (stored as its index)
};

struct FieldSpec {
    char const* name;
    FieldType type;
    double defaultValue;           // enum: index into choices
    double minValue;               // inclusive (int/float); ignored for enums
    double maxValue;               // inclusive
    std::vector<std::string> choices;  // enums only
    char const* doc;
};

std::vector<FieldSpec> const& schema(PluginKind kind);
int32_t fieldIndex(PluginKind kind, std::string const& name);  // -1 when unknown

// Field values of one plugin instance, in schema order. Integers and enum indices are held in
// `ints`, floats in `floats` (both always sized to the schema).
struct Config {
    PluginKind kind{PluginKind::kReplayDecode};
    std::vector<int64_t> ints;
    std::vector<double> floats;

    int64_t i(char const* name) const;
    double f(char const* name) const;
    std::string e(char const* name) const;  // enum value as its name
    void setInt(char const* name, int64_t v);
    void setFloat(char const* name, double v);
    void setEnum(char const* name, std::string const& v);  // throws on an unknown choice
};

Config defaults(PluginKind kind);
// Throws Error on the first invalid field: "ReplayDecode: field 'window' must be in [1, 64]; got 0".
void validate(Config const& cfg);

// Raw field as TensorRT hands it over (name, PluginFieldType code, data, length); used by creators.
struct RawField {
    char const* name;
    int32_t trtType;  // nvinfer1::PluginFieldType value
    void const* data;
    int32_t length;
};
// PluginFieldType codes the core understands (same values as nvinfer1::PluginFieldType).
enum : int32_t { kPF_FLOAT32 = 1, kPF_INT32 = 5, kPF_CHAR = 6, kPF_INT64 = 10 };
// Starts from defaults, applies every field (unknown names, wrong types or lengths throw), validates.
Config configFromFields(PluginKind kind, RawField const* fields, int32_t nbFields);

// ---------------------------------------------------------------------------------------------
// Versioned serialization of a Config (magic "RSSM", plugin kind, plugin version, payload size,
// payload, FNV-1a checksum). deserialize() refuses a blob of another plugin, another version, a
// truncated or corrupted blob with a clear message.
// ---------------------------------------------------------------------------------------------
std::vector<uint8_t> serialize(Config const& cfg);
Config deserialize(PluginKind kind, void const* data, size_t size);

// ---------------------------------------------------------------------------------------------
// Tensors: a plain descriptor (what the adapters build from PluginTensorDesc + pointer).
// ---------------------------------------------------------------------------------------------
enum class DType : int32_t {
    kFP32 = 0, kFP16 = 1, kBF16 = 2, kFP8 = 3, kFP4 = 4,  // same values as RssmDtype
    kINT32 = 10, kINT64 = 11, kINT8 = 12, kUINT8 = 13, kBOOL = 14,
    kOTHER = 99,
};
char const* dtypeName(DType t);
size_t dtypeBytes(DType t);  // 0 for sub-byte / unknown

constexpr int32_t kMAX_DIMS = 8;
struct TensorDesc {
    DType dtype{DType::kOTHER};
    int32_t nbDims{0};
    int64_t dims[kMAX_DIMS]{};
    int64_t strides[kMAX_DIMS]{};  // element strides; contiguous row-major when built by contiguous()
    void const* data{nullptr};
};
TensorDesc contiguous(DType dtype, std::vector<int64_t> const& dims, void const* data = nullptr);

// ---------------------------------------------------------------------------------------------
// I/O maps. Index constants per plugin; optional inputs go last and their presence follows from
// the config (numInputs). Names are used in messages, READMEs and the Python helpers.
// ---------------------------------------------------------------------------------------------
// ReplayDecode with a read copy (read_dtype != 'none', version 2): input kIN_STATE is the recurrence
// checkpoint 'ckpt_hp' (read on flush rows, never written by the decode), and after the family's
// inputs (and z) come, in this order (positions through inputIndex()):
//   ckpt_lp (read copy), [GDN: ring_beta, ring_v], [ckpt_hp_scale: state_dtype fp8_e4m3],
//   [ckpt_lp_scale: read fp8_e4m3 / nvfp4], [ckpt_lp_gscale: read nvfp4].
namespace decode_mamba2 {  // ReplayDecode, family mamba2
enum : int32_t {
    kIN_X = 0, kIN_DT = 1, kIN_B = 2, kIN_C = 3, kIN_A = 4, kIN_D = 5, kIN_DT_BIAS = 6,
    kIN_SLOTS = 7, kIN_STATE = 8, kIN_RING_DT = 9, kIN_RING_X = 10, kIN_RING_B = 11,
    kIN_RING_ORIGIN = 12, kIN_RING_LEN = 13,
    kIN_Z = 14,  // optional: has_z = 1
    kIN_CKPT_HP = kIN_STATE,  // name 'ckpt_hp' with a read copy
    kOUT_Y = 0,
};
}
namespace gdn_io {  // ReplayDecode family gdn, and GdnVerify
enum : int32_t {
    kIN_Q = 0, kIN_K = 1, kIN_V = 2, kIN_GATE_A = 3, kIN_GATE_B = 4, kIN_A_LOG = 5, kIN_DT_BIAS = 6,
    kIN_SLOTS = 7, kIN_STATE = 8, kIN_RING_G = 9, kIN_RING_U = 10, kIN_RING_K = 11,
    kIN_RING_ORIGIN = 12, kIN_RING_LEN = 13,
    kIN_CKPT_HP = kIN_STATE,  // ReplayDecode with a read copy: name 'ckpt_hp'
    kOUT_O = 0,
};
}
// Largest input count of any configuration (ReplayDecode mamba2 + z + read copy nvfp4 + fp8
// recurrence: 14 + 1 + 1 + 3 = 19); the adapters size their fixed enqueue arrays from it.
constexpr int32_t kMAX_INPUTS = 24;
constexpr int32_t kMAX_OUTPUTS = 4;
namespace flush_io {  // DualPrecisionFlush; inputs after kIN_CKPT_LP depend on family and formats
enum : int32_t {
    kIN_AFTER = 0,  // the decode output of this layer [B, T, ...]: gives T, orders the flush after it
    kIN_SLOTS = 1, kIN_RING_ORIGIN = 2, kIN_RING_LEN = 3, kIN_FLUSH_INDEX = 4,
    kIN_CKPT_HP = 5, kIN_CKPT_LP = 6,
    // then, in this order: family records (mamba2: A, ring_dt, ring_x, ring_B;
    // gdn: ring_g, ring_k, ring_beta, ring_v), then ckpt_hp_scale (recurrence fp8),
    // ckpt_lp_scale (read fp8 / nvfp4), ckpt_lp_gscale (read nvfp4)
    kOUT_FLUSHED = 0,
};
}
namespace commit_io {  // ReplayCommit
enum : int32_t {
    kIN_AFTER = 0,  // the decode output of the last replay layer [B, T, ...]: gives T, orders commit
    kIN_SLOTS = 1, kIN_RING_ORIGIN = 2, kIN_RING_LEN = 3,
    kIN_ACCEPTED = 4,  // optional: has_accepted = 1
    kOUT_ERROR_SLOT = 0,
};
}

struct IoMap {
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
};
IoMap ioMap(Config const& cfg);
int32_t numInputs(Config const& cfg);
int32_t numOutputs(Config const& cfg);
// Index of a named input (e.g. "ckpt_lp_scale") or -1 when this config has no such input.
int32_t inputIndex(Config const& cfg, std::string const& name);

// Data types the kernels accept at position `pos` (inputs first, then outputs), as TensorRT's
// supportsFormatCombination asks. `io` holds the types chosen so far for positions < pos (only
// those are read). Formats are always linear (row-major, contiguous).
bool supportsType(Config const& cfg, int32_t pos, DType const* io, int32_t nbInputs, int32_t nbOutputs);

// Output dtypes from input dtypes.
std::vector<DType> outputTypes(Config const& cfg, std::vector<DType> const& inputTypes);

// Output shapes as a function of input dims. Returned as "which input dims to copy"; every output
// of these plugins is either a copy of an input's dims or a constant shape.
struct ShapeRule {
    int32_t copyFromInput{-1};    // >= 0: the output has the dims of this input
    std::vector<int64_t> constant;  // used when copyFromInput < 0
};
std::vector<ShapeRule> outputShapeRules(Config const& cfg);
std::vector<std::vector<int64_t>> outputShapes(Config const& cfg, std::vector<std::vector<int64_t>> const& inputDims);

// Full check of the input descriptors (ranks, dims consistency, dtypes, contiguity). Throws Error:
// "ReplayDecode: input 8 'state' must be float32 [S, H, P, N] = [*, 24, 64, 128]; got float16 [4, 24, 64, 64]".
void checkInputs(Config const& cfg, TensorDesc const* in, int32_t nbInputs);

// Workspace bytes. All current kernels keep their scratch on chip, so every formula is 0; the
// function exists so that a kernel needing scratch changes exactly one place.
size_t workspaceSize(Config const& cfg, TensorDesc const* in, int32_t nbInputs);

// Ring capacity: C = window in standard mode, window + max_verify in speculative mode and for kinds without a
// mode field (design.md section 3; replayssm_trtllm.config.ring_capacity_for is the same rule).
int32_t ringCapacity(Config const& cfg);

}  // namespace core
}  // namespace rssm
