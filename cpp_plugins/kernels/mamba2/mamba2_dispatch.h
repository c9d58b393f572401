// Internal: kernel pointers per state dtype (defined in the per-dtype .cu files).
#pragma once

namespace rssm {
namespace mamba2 {
const void* decodeKernel_fp32(int dstate);
const void* decodeKernel_fp16(int dstate);
const void* decodeKernel_bf16(int dstate);
const void* replayKernel_fp32(int dstate);
const void* replayKernel_fp16(int dstate);
const void* replayKernel_bf16(int dstate);
// Persistent variants (1: consumerWarps = 8, 2: consumerWarps = 4).
const void* decodePersistentKernel_fp32(int dstate, int consumerWarps);
const void* decodePersistentKernel_fp16(int dstate, int consumerWarps);
const void* decodePersistentKernel_bf16(int dstate, int consumerWarps);
const void* replayPersistentKernel_fp32(int dstate, int consumerWarps);
const void* replayPersistentKernel_fp16(int dstate, int consumerWarps);
const void* replayPersistentKernel_bf16(int dstate, int consumerWarps);
}  // namespace mamba2
}  // namespace rssm
