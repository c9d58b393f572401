#include "rssmPluginBase.h"

#include "common/rssm_common.h"

#include <atomic>
#include <cstdio>
#include <cstring>

using namespace nvinfer1;

namespace rssm {
namespace plugin {

namespace {
std::atomic<ILogger*> gLogger{nullptr};
std::atomic<ILoggerFinder*> gLoggerFinder{nullptr};

ILogger* currentLogger() noexcept {
    if (ILogger* l = gLogger.load()) return l;
    if (ILoggerFinder* f = gLoggerFinder.load()) {
        try {
            return f->findLogger();
        } catch (...) {
            return nullptr;
        }
    }
    return nullptr;
}
void log(ILogger::Severity sev, std::string const& msg) noexcept {
    try {
        std::string const text = "[replayssm] " + msg;
        if (ILogger* l = currentLogger()) l->log(sev, text.c_str());
        else if (sev <= ILogger::Severity::kWARNING) std::fprintf(stderr, "%s\n", text.c_str());
    } catch (...) {
    }
}
}  // namespace

void setLogger(ILogger* logger) noexcept { gLogger.store(logger); }
void setLoggerFinder(ILoggerFinder* finder) noexcept { gLoggerFinder.store(finder); }
void logError(std::string const& msg) noexcept { log(ILogger::Severity::kERROR, msg); }
void logVerbose(std::string const& msg) noexcept { log(ILogger::Severity::kVERBOSE, msg); }

core::DType toCore(DataType t) noexcept {
    switch (t) {
    case DataType::kFLOAT: return core::DType::kFP32;
    case DataType::kHALF: return core::DType::kFP16;
    case DataType::kBF16: return core::DType::kBF16;
    case DataType::kINT32: return core::DType::kINT32;
    case DataType::kINT64: return core::DType::kINT64;
    case DataType::kINT8: return core::DType::kINT8;
    case DataType::kUINT8: return core::DType::kUINT8;
    case DataType::kBOOL: return core::DType::kBOOL;
    case DataType::kFP8: return core::DType::kFP8;
    case DataType::kFP4: return core::DType::kFP4;
    default: return core::DType::kOTHER;
    }
}

namespace {
DataType toTrt(core::DType t) {
    switch (t) {
    case core::DType::kFP32: return DataType::kFLOAT;
    case core::DType::kFP16: return DataType::kHALF;
    case core::DType::kBF16: return DataType::kBF16;
    case core::DType::kINT32: return DataType::kINT32;
    case core::DType::kINT64: return DataType::kINT64;
    case core::DType::kINT8: return DataType::kINT8;
    case core::DType::kUINT8: return DataType::kUINT8;
    case core::DType::kBOOL: return DataType::kBOOL;
    case core::DType::kFP8: return DataType::kFP8;
    case core::DType::kFP4: return DataType::kFP4;
    default: throw core::Error("replayssm: no TensorRT data type for core dtype " + std::to_string(static_cast<int>(t)));
    }
}
std::vector<core::TensorDesc> convert(PluginTensorDesc const* d, void const* const* data, int32_t n) {
    std::vector<core::TensorDesc> r(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) r[i] = toCore(d[i], data ? data[i] : nullptr);
    return r;
}
std::vector<core::TensorDesc> convert(DynamicPluginTensorDesc const* d, int32_t n) {
    std::vector<core::TensorDesc> r(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) r[i] = toCore(d[i].desc, nullptr);
    return r;
}
// The profile's maximum shapes (the workspace is sized for them).
std::vector<core::TensorDesc> convertMax(DynamicPluginTensorDesc const* d, int32_t n) {
    std::vector<core::TensorDesc> r(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
        PluginTensorDesc m = d[i].desc;
        m.dims = d[i].max;
        r[i] = toCore(m, nullptr);
    }
    return r;
}
}  // namespace

core::TensorDesc toCore(PluginTensorDesc const& d, void const* data) noexcept {
    core::TensorDesc t;
    t.dtype = toCore(d.type);
    t.nbDims = d.dims.nbDims < 0 ? 0 : (d.dims.nbDims > core::kMAX_DIMS ? core::kMAX_DIMS : d.dims.nbDims);
    int64_t s = 1;
    for (int32_t i = t.nbDims - 1; i >= 0; --i) {  // TensorRT linear tensors are dense row-major
        t.dims[i] = d.dims.d[i];
        t.strides[i] = s;
        s *= d.dims.d[i] > 0 ? d.dims.d[i] : 1;
    }
    t.data = data;
    return t;
}

// ------------------------------------------------------------------------------------------------
RssmPluginBase::RssmPluginBase(core::Config cfg, std::string pluginNamespace)
    : mConfig(std::move(cfg)), mNamespace(std::move(pluginNamespace)) {
    core::validate(mConfig);  // throws; creators call this inside try
    buildSerializedFields();
}

void RssmPluginBase::buildSerializedFields() {
    auto const& sc = core::schema(mConfig.kind);
    size_t const n = sc.size();
    mI32.assign(n, 0);
    mI64.assign(n, 0);
    mF32.assign(n, 0.f);
    mStr.assign(n, std::string());
    mFields.clear();
    for (size_t i = 0; i < n; ++i) {
        switch (sc[i].type) {
        case core::FieldType::kINT32:
            mI32[i] = static_cast<int32_t>(mConfig.ints[i]);
            mFields.emplace_back(sc[i].name, &mI32[i], PluginFieldType::kINT32, 1);
            break;
        case core::FieldType::kINT64:
            mI64[i] = mConfig.ints[i];
            mFields.emplace_back(sc[i].name, &mI64[i], PluginFieldType::kINT64, 1);
            break;
        case core::FieldType::kFLOAT32:
            mF32[i] = static_cast<float>(mConfig.floats[i]);
            mFields.emplace_back(sc[i].name, &mF32[i], PluginFieldType::kFLOAT32, 1);
            break;
        case core::FieldType::kENUM:
            mStr[i] = sc[i].choices.at(static_cast<size_t>(mConfig.ints[i]));
            mFields.emplace_back(sc[i].name, mStr[i].c_str(), PluginFieldType::kCHAR,
                                 static_cast<int32_t>(mStr[i].size() + 1));
            break;
        }
    }
    mFC.nbFields = static_cast<int32_t>(mFields.size());
    mFC.fields = mFields.data();
}

IPluginCapability* RssmPluginBase::getCapabilityInterface(PluginCapabilityType type) noexcept {
    try {
        switch (type) {
        case PluginCapabilityType::kCORE: return static_cast<IPluginV3OneCore*>(this);
        case PluginCapabilityType::kBUILD: return static_cast<IPluginV3OneBuild*>(this);
        case PluginCapabilityType::kRUNTIME: return static_cast<IPluginV3OneRuntime*>(this);
        }
    } catch (...) {
    }
    return nullptr;
}

IPluginV3* RssmPluginBase::clone() noexcept {
    try {
        return cloneImpl();
    } catch (std::exception const& e) {
        logError(std::string(core::opName(mConfig.kind)) + ": clone failed: " + e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": clone failed");
    }
    return nullptr;
}

char const* RssmPluginBase::getPluginName() const noexcept { return core::registeredName(mConfig.kind); }
char const* RssmPluginBase::getPluginVersion() const noexcept { return core::pluginVersion(mConfig.kind); }
char const* RssmPluginBase::getPluginNamespace() const noexcept { return mNamespace.c_str(); }

int32_t RssmPluginBase::configurePlugin(DynamicPluginTensorDesc const* in, int32_t nbInputs,
                                        DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept {
    try {
        auto d = convert(in, nbInputs);
        core::checkInputs(mConfig, d.data(), nbInputs);  // unknown (-1) dims are skipped
        if (nbOutputs != core::numOutputs(mConfig))
            throw core::Error(std::string(core::opName(mConfig.kind)) + ": expected " +
                              std::to_string(core::numOutputs(mConfig)) + " outputs; got " + std::to_string(nbOutputs));
        (void) out;
        return 0;
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": configurePlugin failed");
    }
    return -1;
}

int32_t RssmPluginBase::getOutputDataTypes(DataType* outputTypes, int32_t nbOutputs, DataType const* inputTypes,
                                           int32_t nbInputs) const noexcept {
    try {
        std::vector<core::DType> in(static_cast<size_t>(nbInputs));
        for (int32_t i = 0; i < nbInputs; ++i) in[i] = toCore(inputTypes[i]);
        auto o = core::outputTypes(mConfig, in);
        if (static_cast<int32_t>(o.size()) != nbOutputs)
            throw core::Error(std::string(core::opName(mConfig.kind)) + ": expected " + std::to_string(o.size()) +
                              " outputs; got " + std::to_string(nbOutputs));
        for (int32_t i = 0; i < nbOutputs; ++i) outputTypes[i] = toTrt(o[i]);
        return 0;
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": getOutputDataTypes failed");
    }
    return -1;
}

int32_t RssmPluginBase::getOutputShapes(DimsExprs const* inputs, int32_t nbInputs, DimsExprs const*, int32_t,
                                        DimsExprs* outputs, int32_t nbOutputs, IExprBuilder& exprBuilder) noexcept {
    try {
        auto rules = core::outputShapeRules(mConfig);
        if (static_cast<int32_t>(rules.size()) != nbOutputs || nbInputs != core::numInputs(mConfig))
            throw core::Error(std::string(core::opName(mConfig.kind)) + ": expected " +
                              std::to_string(core::numInputs(mConfig)) + " inputs and " + std::to_string(rules.size()) +
                              " outputs; got " + std::to_string(nbInputs) + " and " + std::to_string(nbOutputs));
        for (int32_t o = 0; o < nbOutputs; ++o) {
            if (rules[o].copyFromInput >= 0) {
                outputs[o] = inputs[rules[o].copyFromInput];
            } else {
                outputs[o].nbDims = static_cast<int32_t>(rules[o].constant.size());
                for (int32_t k = 0; k < outputs[o].nbDims; ++k) outputs[o].d[k] = exprBuilder.constant(rules[o].constant[k]);
            }
        }
        return 0;
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": getOutputShapes failed");
    }
    return -1;
}

bool RssmPluginBase::supportsFormatCombination(int32_t pos, DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
                                               int32_t nbOutputs) noexcept {
    try {
        if (inOut[pos].desc.format != TensorFormat::kLINEAR) return false;
        std::vector<core::DType> io(static_cast<size_t>(nbInputs + nbOutputs));
        for (int32_t i = 0; i <= pos; ++i) io[i] = toCore(inOut[i].desc.type);
        return core::supportsType(mConfig, pos, io.data(), nbInputs, nbOutputs);
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": supportsFormatCombination failed");
    }
    return false;
}

int32_t RssmPluginBase::getNbOutputs() const noexcept {
    try {
        return core::numOutputs(mConfig);
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
    }
    return -1;
}

size_t RssmPluginBase::getWorkspaceSize(DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
                                        DynamicPluginTensorDesc const*, int32_t) const noexcept {
    try {
        auto d = convert(inputs, nbInputs);
        auto dMax = convertMax(inputs, nbInputs);
        return core::workspaceSize(mConfig, d.data(), nbInputs) + kernelWorkspaceSize(dMax.data(), nbInputs);
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
    }
    return 0;
}

int32_t RssmPluginBase::onShapeChange(PluginTensorDesc const* in, int32_t nbInputs, PluginTensorDesc const*,
                                      int32_t nbOutputs) noexcept {
    try {
        auto d = convert(in, nullptr, nbInputs);
        core::checkInputs(mConfig, d.data(), nbInputs);
        if (nbOutputs != core::numOutputs(mConfig))
            throw core::Error(std::string(core::opName(mConfig.kind)) + ": expected " +
                              std::to_string(core::numOutputs(mConfig)) + " outputs; got " + std::to_string(nbOutputs));
        return 0;
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": onShapeChange failed");
    }
    return -1;
}

int32_t RssmPluginBase::enqueue(PluginTensorDesc const* inputDesc, PluginTensorDesc const* outputDesc,
                                void const* const* inputs, void* const* outputs, void* workspace,
                                cudaStream_t stream) noexcept {
    try {
        int32_t const nIn = core::numInputs(mConfig);
        int32_t const nOut = core::numOutputs(mConfig);
        // Fixed-size arrays: no heap allocation on the enqueue path.
        core::TensorDesc in[core::kMAX_INPUTS];
        core::TensorDesc out[core::kMAX_OUTPUTS];
        if (nIn > core::kMAX_INPUTS || nOut > core::kMAX_OUTPUTS)
            throw core::Error(std::string(core::opName(mConfig.kind)) + ": " + std::to_string(nIn) + " inputs / " +
                              std::to_string(nOut) + " outputs exceed the adapter's fixed arrays (" +
                              std::to_string(core::kMAX_INPUTS) + " / " + std::to_string(core::kMAX_OUTPUTS) + ")");
        for (int32_t i = 0; i < nIn; ++i) in[i] = toCore(inputDesc[i], inputs[i]);
        for (int32_t i = 0; i < nOut; ++i) out[i] = toCore(outputDesc[i], outputs[i]);
        int32_t const status = launch(in, nIn, out, nOut, workspace, stream);
        if (status != 0) {
            char const* msg = rssm_last_error();
            logError(std::string(core::opName(mConfig.kind)) + ": kernel launcher returned status " +
                     std::to_string(status) + ": " + (msg && *msg ? msg : "(no message)"));
        }
        return status;
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
        logError(std::string(core::opName(mConfig.kind)) + ": enqueue failed");
    }
    return RSSM_ERR_INVALID_ARGUMENT;
}

IPluginV3* RssmPluginBase::attachToContext(IPluginResourceContext*) noexcept { return clone(); }

PluginFieldCollection const* RssmPluginBase::getFieldsToSerialize() noexcept {
    try {
        buildSerializedFields();
        return &mFC;
    } catch (std::exception const& e) {
        logError(e.what());
    } catch (...) {
    }
    return nullptr;
}

// ------------------------------------------------------------------------------------------------
RssmPluginCreatorBase::RssmPluginCreatorBase(core::PluginKind kind) : mKind(kind) {
    for (auto const& s : core::schema(kind)) {
        PluginFieldType t = s.type == core::FieldType::kINT32   ? PluginFieldType::kINT32
                          : s.type == core::FieldType::kINT64   ? PluginFieldType::kINT64
                          : s.type == core::FieldType::kFLOAT32 ? PluginFieldType::kFLOAT32
                                                                : PluginFieldType::kCHAR;
        mFieldNames.emplace_back(s.name, nullptr, t, 1);
    }
    mFC.nbFields = static_cast<int32_t>(mFieldNames.size());
    mFC.fields = mFieldNames.data();
}

IPluginV3* RssmPluginCreatorBase::createPlugin(char const* name, PluginFieldCollection const* fc,
                                               TensorRTPhase phase) noexcept {
    try {
        std::vector<core::RawField> raw;
        if (fc != nullptr)
            for (int32_t i = 0; i < fc->nbFields; ++i)
                raw.push_back({fc->fields[i].name, static_cast<int32_t>(fc->fields[i].type), fc->fields[i].data,
                               fc->fields[i].length});
        core::Config cfg = core::configFromFields(mKind, raw.data(), static_cast<int32_t>(raw.size()));
        (void) phase;  // build and runtime phase take the same fields
        (void) name;
        return make(std::move(cfg), mNamespace);
    } catch (std::exception const& e) {
        logError(std::string(e.what()) + " (while creating layer '" + (name ? name : "") + "')");
    } catch (...) {
        logError(std::string(core::opName(mKind)) + ": createPlugin failed");
    }
    return nullptr;
}

PluginFieldCollection const* RssmPluginCreatorBase::getFieldNames() noexcept { return &mFC; }
char const* RssmPluginCreatorBase::getPluginName() const noexcept { return core::registeredName(mKind); }
char const* RssmPluginCreatorBase::getPluginVersion() const noexcept { return core::pluginVersion(mKind); }
char const* RssmPluginCreatorBase::getPluginNamespace() const noexcept { return mNamespace.c_str(); }

}  // namespace plugin
}  // namespace rssm
