// Library entry points. Nothing here runs at load time and nothing links against libnvinfer:
//   getCreators()          what IPluginRegistry::loadLibrary / trt.get_plugin_registry().load_library()
//                          looks up (with setLoggerFinder) to register the creators of this library;
//   initReplaySsmPlugins() TensorRT-LLM style: registers the creators under a namespace through the
//                          process's TensorRT (found with dlsym at call time, not at link time);
//   replayssm_plugins_trt_version() the TensorRT version the library was compiled against.
#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "DualPrecisionFlushPlugin.h"
#include "GdnVerifyPlugin.h"
#include "ReplayCommitPlugin.h"
#include "ReplayDecodePlugin.h"

using namespace nvinfer1;

namespace {
struct Creators {
    rssm::plugin::ReplayDecodePluginCreator decode;
    rssm::plugin::GdnVerifyPluginCreator verify;
    rssm::plugin::DualPrecisionFlushPluginCreator flush;
    rssm::plugin::ReplayCommitPluginCreator commit;
    IPluginCreatorInterface* list[4];
    rssm::plugin::RssmPluginCreatorBase* bases[4];
    Creators() : list{&decode, &verify, &flush, &commit}, bases{&decode, &verify, &flush, &commit} {}
};
// Constructed on first use (not at library load) so that loading never runs plugin code.
Creators& creators() {
    static Creators c;
    return c;
}
std::mutex gInitMutex;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) void setLoggerFinder(ILoggerFinder* finder) {
    rssm::plugin::setLoggerFinder(finder);
}

__attribute__((visibility("default"))) IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) {
    nbCreators = 4;
    return creators().list;
}

// Registers every creator under `ns` (nullptr or "" = "replayssm") with the plugin registry of the
// TensorRT already loaded in this process. `logger` is an nvinfer1::ILogger* (may be nullptr).
// Returns true on success; idempotent per namespace.
__attribute__((visibility("default"))) bool initReplaySsmPlugins(void* logger, char const* ns) {
    try {
        std::lock_guard<std::mutex> lock(gInitMutex);
        if (logger) rssm::plugin::setLogger(static_cast<ILogger*>(logger));
        std::string const space = (ns && *ns) ? ns : rssm::core::kDEFAULT_NAMESPACE;
        using GetRegistry = IPluginRegistry* (*) ();
        auto getRegistry = reinterpret_cast<GetRegistry>(dlsym(RTLD_DEFAULT, "getPluginRegistry"));
        if (getRegistry == nullptr) {
            rssm::plugin::logError(
                "initReplaySsmPlugins: TensorRT (libnvinfer) is not loaded in this process (symbol "
                "'getPluginRegistry' not found); load TensorRT first or use IPluginRegistry::loadLibrary()");
            return false;
        }
        IPluginRegistry* registry = getRegistry();
        if (registry == nullptr) return false;
        bool ok = true;
        for (auto* c : creators().bases) {
            if (registry->getCreator(c->getPluginName(), c->getPluginVersion(), space.c_str()) != nullptr) continue;
            c->setPluginNamespace(space.c_str());
            if (!registry->registerCreator(*c, space.c_str())) {
                rssm::plugin::logError(std::string("initReplaySsmPlugins: registering ") + c->getPluginName() +
                                       " in namespace '" + space + "' failed");
                ok = false;
            }
        }
        return ok;
    } catch (std::exception const& e) {
        rssm::plugin::logError(std::string("initReplaySsmPlugins: ") + e.what());
    } catch (...) {
        rssm::plugin::logError("initReplaySsmPlugins failed");
    }
    return false;
}

// Major * 10000 + minor * 100 + patch of the TensorRT headers this library was compiled against.
__attribute__((visibility("default"))) int32_t replayssm_plugins_trt_version(void) {
    return NV_TENSORRT_MAJOR * 10000 + NV_TENSORRT_MINOR * 100 + NV_TENSORRT_PATCH;
}

}  // extern "C"
