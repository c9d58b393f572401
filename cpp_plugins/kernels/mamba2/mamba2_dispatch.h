// Internal: kernel pointers per state dtype (defined in the per-dtype .cu files).
#pragma once
#include <stddef.h>

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
// Variant 3 (stream kernel, replay only; mamba2_stream.cu): N in {128, 256}, else NULL.
const void* replayStreamKernel(int stateDtype, int dstate, int mode, int numTokens);
int replayStreamRowsPerWarp(int dstate, int mode, int numTokens);
size_t replayStreamSmemBytes(int window, int numTokens, int headdim, int dstate);
}  // namespace mamba2
}  // namespace rssm
