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
// Variant 4 (split: prep kernel + readout kernel, replay only; mamba2_split.cu).
const void* splitPrepKernel(int mode, int numTokens);
// N 128 / 256, else NULL; pipe: the pipelined readout for N = 128, T = 1 (RSSM_MAMBA2_SPLIT_PIPE=1; off by default)
const void* splitReadoutKernel(int stateDtype, int dstate, int mode, int numTokens, bool pipe);
size_t splitWorkspaceBytes(int batch, int numTokens, int nheads, int window);
size_t splitReadoutSmemBytes(int dstate);
int splitMaxRecords();
size_t splitPrepSmemBytes(int window, int numTokens, int dstate);
int splitHeadsPerPrep();
int splitPrepThreads();
int splitReadoutThreads();
int splitRows();
}  // namespace mamba2
}  // namespace rssm
