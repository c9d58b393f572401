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
}  // namespace mamba2
}  // namespace rssm
