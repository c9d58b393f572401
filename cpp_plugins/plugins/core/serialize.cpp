// Versioned binary serialization of a plugin Config.
//
// Layout (little-endian):
//   0  char[4]  magic "RSSM"
//   4  int32    plugin kind (PluginKind)
//   8  int32    plugin version
//  12  int32    number of fields n
//  16  int32    payload bytes
//  20  payload: n x { int32 name_len, char name[name_len], int32 type, int64 int_value, double float_value }
//  ..  uint32   FNV-1a of bytes [0, 20 + payload)
#include "rssm_plugin_core.h"

#include <cstring>

namespace rssm {
namespace core {

namespace {
constexpr char kMAGIC[4] = {'R', 'S', 'S', 'M'};
constexpr size_t kHEADER = 20;

uint32_t fnv1a(uint8_t const* p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; ++i) { h ^= p[i]; h *= 16777619u; }
    return h;
}
template <typename T> void put(std::vector<uint8_t>& b, T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
}
struct Reader {
    uint8_t const* p;
    size_t size;
    size_t off;
    char const* op;
    template <typename T> T get(char const* what) {
        if (off + sizeof(T) > size)
            throw Error(std::string(op) + ": serialized blob is truncated: need " + std::to_string(off + sizeof(T)) +
                        " bytes to read " + what + "; got " + std::to_string(size));
        T v;
        std::memcpy(&v, p + off, sizeof(T));
        off += sizeof(T);
        return v;
    }
};
}  // namespace

std::vector<uint8_t> serialize(Config const& cfg) {
    validate(cfg);
    auto const& sc = schema(cfg.kind);
    std::vector<uint8_t> payload;
    for (size_t i = 0; i < sc.size(); ++i) {
        int32_t len = static_cast<int32_t>(std::strlen(sc[i].name));
        put<int32_t>(payload, len);
        payload.insert(payload.end(), sc[i].name, sc[i].name + len);
        put<int32_t>(payload, static_cast<int32_t>(sc[i].type));
        put<int64_t>(payload, cfg.ints[i]);
        put<double>(payload, cfg.floats[i]);
    }
    std::vector<uint8_t> b(kMAGIC, kMAGIC + 4);
    put<int32_t>(b, static_cast<int32_t>(cfg.kind));
    put<int32_t>(b, pluginVersionNumber(cfg.kind));
    put<int32_t>(b, static_cast<int32_t>(sc.size()));
    put<int32_t>(b, static_cast<int32_t>(payload.size()));
    b.insert(b.end(), payload.begin(), payload.end());
    put<uint32_t>(b, fnv1a(b.data(), b.size()));
    return b;
}

Config deserialize(PluginKind kind, void const* data, size_t size) {
    char const* op = opName(kind);
    if (data == nullptr) throw Error(std::string(op) + ": serialized blob is null");
    uint8_t const* p = static_cast<uint8_t const*>(data);
    if (size < kHEADER + 4)
        throw Error(std::string(op) + ": serialized blob is truncated: " + std::to_string(size) +
                    " bytes, the header alone needs " + std::to_string(kHEADER + 4));
    if (std::memcmp(p, kMAGIC, 4) != 0)
        throw Error(std::string(op) + ": serialized blob does not start with magic 'RSSM' (not a replayssm plugin blob)");
    Reader r{p, size, 4, op};
    int32_t const blobKind = r.get<int32_t>("plugin kind");
    int32_t const blobVersion = r.get<int32_t>("plugin version");
    int32_t const nFields = r.get<int32_t>("field count");
    int32_t const payloadBytes = r.get<int32_t>("payload size");
    if (blobKind != static_cast<int32_t>(kind)) {
        std::string other = (blobKind >= 0 && blobKind < kNUM_PLUGIN_KINDS) ? opName(static_cast<PluginKind>(blobKind))
                                                                           : ("kind " + std::to_string(blobKind));
        throw Error(std::string(op) + ": serialized blob belongs to plugin " + other + ", not " + op);
    }
    if (blobVersion != pluginVersionNumber(kind))
        throw Error(std::string(op) + ": serialized blob is plugin version " + std::to_string(blobVersion) +
                    "; this library implements version " + std::to_string(pluginVersionNumber(kind)) +
                    " (rebuild the engine with this plugin library)");
    if (payloadBytes < 0 || kHEADER + static_cast<size_t>(payloadBytes) + 4 != size)
        throw Error(std::string(op) + ": serialized blob is truncated or padded: header announces " +
                    std::to_string(kHEADER + static_cast<size_t>(payloadBytes) + 4) + " bytes; got " +
                    std::to_string(size));
    uint32_t stored;
    std::memcpy(&stored, p + kHEADER + payloadBytes, 4);
    if (stored != fnv1a(p, kHEADER + payloadBytes))
        throw Error(std::string(op) + ": serialized blob checksum mismatch (corrupted blob)");

    Config cfg = defaults(kind);
    auto const& sc = schema(kind);
    if (nFields != static_cast<int32_t>(sc.size()))
        throw Error(std::string(op) + ": serialized blob has " + std::to_string(nFields) + " fields; version " +
                    std::to_string(blobVersion) + " has " + std::to_string(sc.size()));
    Reader pr{p, kHEADER + static_cast<size_t>(payloadBytes), kHEADER, op};
    for (int32_t i = 0; i < nFields; ++i) {
        int32_t len = pr.get<int32_t>("field name length");
        if (len < 0 || pr.off + static_cast<size_t>(len) > pr.size)
            throw Error(std::string(op) + ": serialized blob is truncated inside field " + std::to_string(i));
        std::string name(reinterpret_cast<char const*>(p + pr.off), static_cast<size_t>(len));
        pr.off += len;
        int32_t type = pr.get<int32_t>("field type");
        int64_t iv = pr.get<int64_t>("field value");
        double fv = pr.get<double>("field value");
        if (name != sc[i].name || type != static_cast<int32_t>(sc[i].type))
            throw Error(std::string(op) + ": serialized field " + std::to_string(i) + " is '" + name +
                        "'; this version expects '" + sc[i].name + "'");
        cfg.ints[i] = iv;
        cfg.floats[i] = fv;
    }
    validate(cfg);
    return cfg;
}

}  // namespace core
}  // namespace rssm
