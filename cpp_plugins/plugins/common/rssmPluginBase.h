// Shared IPluginV3 adapter over the plugin core. Each plugin (ReplayDecode, GdnVerify,
// DualPrecisionFlush, ReplayCommit) derives from RssmPluginBase and implements launch() only:
// descriptor translation through the core, then its kernel launcher. Everything else (fields,
// shapes, dtypes, workspace, serialization) comes from the core schema of its PluginKind.
//
// Rules kept here: every noexcept method catches and reports; enqueue never syncs or allocates;
// supportsFormatCombination accepts exactly the core's dtype table in linear format.
#pragma once

#include <NvInferRuntime.h>

#include <memory>
#include <string>
#include <vector>

#include "rssm_plugin_core.h"

namespace rssm {
namespace plugin {

// Logging: the ILogger handed to initReplaySsmPlugins() or found through setLoggerFinder();
// stderr when neither was given.
void setLogger(nvinfer1::ILogger* logger) noexcept;
void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;
void logError(std::string const& msg) noexcept;
void logVerbose(std::string const& msg) noexcept;

core::DType toCore(nvinfer1::DataType t) noexcept;
core::TensorDesc toCore(nvinfer1::PluginTensorDesc const& d, void const* data) noexcept;

class RssmPluginBase : public nvinfer1::IPluginV3,
                       public nvinfer1::IPluginV3OneCore,
                       public nvinfer1::IPluginV3OneBuild,
                       public nvinfer1::IPluginV3OneRuntime {
public:
    RssmPluginBase(core::Config cfg, std::string pluginNamespace);
    ~RssmPluginBase() override = default;

    core::Config const& config() const noexcept { return mConfig; }

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept override;
    nvinfer1::IPluginV3* clone() noexcept override;

    // IPluginV3OneCore
    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;

    // IPluginV3OneBuild
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
                            nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
                               int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
                            int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
                            nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
                                   int32_t nbOutputs) noexcept override;
    int32_t getNbOutputs() const noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
                            nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
                          int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
                    void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* context) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept override;

protected:
    // Translate `in`/`out` through the core and call the kernel launcher. Returns the launcher's
    // RssmStatus (0 = ok); throws core::Error on a descriptor problem. No sync, no allocation.
    virtual int32_t launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out, int32_t nbOutputs,
                           void* workspace, cudaStream_t stream) = 0;
    // Scratch bytes the kernel launcher can use at the input shapes `in` (getWorkspaceSize passes the
    // profile's maximum shapes): the split replay kernels' head records. 0 by default.
    virtual size_t kernelWorkspaceSize(core::TensorDesc const* in, int32_t nbInputs) const {
        (void) in;
        (void) nbInputs;
        return 0;
    }
    virtual RssmPluginBase* cloneImpl() const = 0;

    std::string const& pluginNamespaceString() const noexcept { return mNamespace; }

private:
    void buildSerializedFields();

    core::Config mConfig;
    std::string mNamespace;
    // Storage behind getFieldsToSerialize(): one slot per schema field, same names and types as the creator.
    std::vector<int32_t> mI32;
    std::vector<int64_t> mI64;
    std::vector<float> mF32;
    std::vector<std::string> mStr;
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mFC{};
};

// Shared creator: fields from the core schema, createPlugin via core::configFromFields.
class RssmPluginCreatorBase : public nvinfer1::IPluginCreatorV3One {
public:
    explicit RssmPluginCreatorBase(core::PluginKind kind);
    ~RssmPluginCreatorBase() override = default;

    nvinfer1::IPluginV3* createPlugin(char const* name, nvinfer1::PluginFieldCollection const* fc,
                                      nvinfer1::TensorRTPhase phase) noexcept override;
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override;
    char const* getPluginName() const noexcept override;
    char const* getPluginVersion() const noexcept override;
    char const* getPluginNamespace() const noexcept override;

    void setPluginNamespace(char const* ns) noexcept { mNamespace = ns ? ns : ""; }

protected:
    virtual RssmPluginBase* make(core::Config cfg, std::string const& ns) const = 0;

private:
    core::PluginKind mKind;
    std::string mNamespace{core::kDEFAULT_NAMESPACE};
    std::vector<nvinfer1::PluginField> mFieldNames;
    nvinfer1::PluginFieldCollection mFC{};
};

}  // namespace plugin
}  // namespace rssm
