// ReplayDecode TensorRT plugin (IPluginV3), a thin adapter: see README.md in this folder.
#pragma once

#include "rssmPluginBase.h"

namespace rssm {
namespace plugin {

class ReplayDecodePlugin final : public RssmPluginBase {
public:
    ReplayDecodePlugin(core::Config cfg, std::string const& ns) : RssmPluginBase(std::move(cfg), ns) {}

protected:
    int32_t launch(core::TensorDesc const* in, int32_t nbInputs, core::TensorDesc const* out, int32_t nbOutputs,
                   void* workspace, cudaStream_t stream) override;
    size_t kernelWorkspaceSize(core::TensorDesc const* in, int32_t nbInputs) const override;
    RssmPluginBase* cloneImpl() const override { return new ReplayDecodePlugin(config(), pluginNamespaceString()); }
};

class ReplayDecodePluginCreator final : public RssmPluginCreatorBase {
public:
    ReplayDecodePluginCreator() : RssmPluginCreatorBase(core::PluginKind::kReplayDecode) {}

protected:
    RssmPluginBase* make(core::Config cfg, std::string const& ns) const override { return new ReplayDecodePlugin(std::move(cfg), ns); }
};

}  // namespace plugin
}  // namespace rssm
