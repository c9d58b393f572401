// Translation of plain tensor descriptors into the kernel params structs (the only place the
// plugins touch the kernel ABI). Every function first runs checkInputs() on the runtime
// descriptors, then fills the zero-initialised struct; it throws core::Error and never launches.
#pragma once

#include <string>

#include "rssm_plugin_core.h"

#include "dual_precision/dual_precision.h"
#include "dual_precision/dual_precision_flush.h"
#include "gdn/gdn.h"
#include "mamba2/mamba2.h"
#include "replay_commit/replay_commit.h"

namespace rssm {
namespace core {

// ReplayDecode, family mamba2, read_dtype 'none' -> rssm_mamba2_replay_launch.
Mamba2ReplayParams toMamba2ReplayParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                        TensorDesc const* out, int32_t nbOutputs);
// ReplayDecode family gdn (mode standard, read_dtype 'none') and GdnVerify (mode speculative) -> rssm_gdn_replay_launch.
GdnReplayParams toGdnReplayParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                  TensorDesc const* out, int32_t nbOutputs);
// The size fields (and mode, dtypes, variant) of the two structs above from the input descriptors alone:
// strides, pointers and the workspace stay zero. For the adapters' workspace query at the maximum shapes
// (rssm_mamba2_replay_workspace_bytes / rssm_gdn_replay_workspace_bytes); checks the inputs, not the outputs.
Mamba2ReplayParams mamba2ReplaySizes(Config const& cfg, TensorDesc const* in, int32_t nbInputs);
GdnReplayParams gdnReplaySizes(Config const& cfg, TensorDesc const* in, int32_t nbInputs);
// ReplayCommit -> rssm_replay_commit_launch. error_slot points at output 0 (the adapter sets it to
// -1 with one cudaMemsetAsync before the launch; the kernel records the first violating slot).
ReplayCommitParams toReplayCommitParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                        TensorDesc const* out, int32_t nbOutputs);
// ReplayDecode with a read copy (read_dtype fp16 / fp8_e4m3 / nvfp4), both families ->
// rssm_dual_precision_decode_launch. Always passes both copies (ckpt_hp != NULL); GDN always
// passes the two-precision records ring_beta / ring_v (the GDN flush needs them).
DualPrecisionDecodeParams toDualPrecisionDecodeParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                                      TensorDesc const* out, int32_t nbOutputs);
// Its size, mode and dtype fields from the input descriptors alone (strides, pointers and the workspace
// zero): the adapter's workspace query at the maximum shapes (rssm_dual_precision_decode_workspace_bytes).
DualPrecisionDecodeParams dualPrecisionDecodeSizes(Config const& cfg, TensorDesc const* in, int32_t nbInputs);
// DualPrecisionFlush -> rssm_dual_precision_flush_launch.
DualPrecisionFlushParams toDualPrecisionFlushParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                                    TensorDesc const* out, int32_t nbOutputs);

// "name=value" lines of a filled params struct (for tests and debug logs; pointers as offsets
// from `base` when base != nullptr, so tests can check which buffer went where).
std::string describe(Mamba2ReplayParams const& p, void const* base = nullptr);
std::string describe(GdnReplayParams const& p, void const* base = nullptr);
std::string describe(ReplayCommitParams const& p, void const* base = nullptr);
std::string describe(DualPrecisionFlushParams const& p, void const* base = nullptr);
std::string describe(DualPrecisionDecodeParams const& p, void const* base = nullptr);

}  // namespace core
}  // namespace rssm
