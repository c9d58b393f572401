// Internal: per-position I/O specification shared by io.cpp and kernel_params.cpp.
#pragma once
#include "rssm_plugin_core.h"

#include <map>
#include <string>
#include <vector>

namespace rssm {
namespace core {

struct IoSpec {
    std::string name;
    std::vector<DType> types;       // allowed dtypes (one, except the 'after' ordering input)
    std::vector<std::string> dims;  // symbols: "B", "N/16", "1"; a final "..." allows more dims
};

struct PluginIo {
    std::vector<IoSpec> inputs;
    std::vector<IoSpec> outputs;
    std::vector<int32_t> outputCopiesInput;  // per output: input whose dims it copies, -1 = [1]
};

PluginIo pluginIo(Config const& cfg);

using Symbols = std::map<std::string, int64_t>;
// checkInputs, returning the bound dimension symbols (B, T, H, P, N, G, S, C, HV, V, K).
Symbols checkInputsSymbols(Config const& cfg, TensorDesc const* in, int32_t nbInputs);

}  // namespace core
}  // namespace rssm
