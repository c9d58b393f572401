// Internal: kernel pointers per state dtype (defined in the per-dtype .cu files).
#pragma once
#include <stddef.h>

#include <cuda_runtime.h>

#include "mamba2/mamba2.h"

namespace rssm {
namespace stream {
struct ReadCopyScales;  // common/read_rows.cuh
}
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
// occupancy (RSSM_MAMBA2_SPLIT_PREP, mamba2_launch.cu): 0 the default kernels (256 threads; eight tokens capped for 4
// CTAs per SM), one token: 1 256 threads with >= 8 CTAs per SM, 2 128 threads with >= 16 CTAs per SM; 3 the uncapped
// kernels for every token count. *threads gets the CTA size. xAligned: x and ring_x in 16-byte pieces (T > 1 then stages
// x in shared memory; see mamba2_split.cu).
// exactFour: exactly four speculative tokens, dstate 128 and 8-byte aligned B / C rows (the compile-time instance).
const void* splitPrepKernel(int mode, int numTokens, int occupancy, int* threads, bool xAligned, bool exactFour = false);
// The lean one-token prep (mamba2_split_prep_lean.cuh; standard mode, 16-byte aligned B / C / x rows): dstate 128 /
// 256 (the split kernels' dstates) and bf16 / fp16 activations, else NULL. 128 threads per CTA, same grid as splitPrepKernel.
const void* splitPrepLeanKernel(int dstate, int actDtype);
int splitPrepLeanThreads();
// The one-launch small-batch standard step (mamba2_split_fused.cuh, mamba2_split_fused.cu): fp32 / fp16 / bf16 rows,
// dstate 128 / 256, bf16 / fp16 activations, else NULL. One CTA of ceil(headdim / 8) warps per (row, head), grid (H, B);
// splitFusedSmemBytes: its dynamic shared memory. mmaFold: flushes fold on tensor cores from the B rows staged by the
// record dots (only where splitFusedMmaFoldRuns: dstate 128, bf16 activations; else the CUDA-core fold).
const void* splitFusedKernel(int stateDtype, int dstate, int actDtype, bool mmaFold);
size_t splitFusedSmemBytes(int dstate, int warps, bool mmaFold);
bool splitFusedMmaFoldRuns(int dstate, int actDtype);
// N 128 / 256, else NULL; pipe (N = 128, T = 1): 0 plain, 1 pipelined, 2 next item's cursors ahead; 3 (N = 128,
// fp32 / 16-bit rows, any T): plain with the tensor-core fold (RSSM_MAMBA2_SPLIT_PIPE, mamba2_launch.cu)
const void* splitReadoutKernel(int stateDtype, int dstate, int mode, int numTokens, int pipe);
// Variant 4 on a read-only dual-precision read copy in a scaled format: q.state_dtype FP8_E4M3 / NVFP4,
// q.state the payload (byte strides), rc its scale tensors, q.variant 4 and q.skip_flush_rows 1 (the
// flushing rows are decoded by the dual-precision kernel from the recurrence copy). Validates like
// rssm_mamba2_replay_launch; returns its status.
int replaySplitReadCopy(const Mamba2ReplayParams& q, const stream::ReadCopyScales& rc, cudaStream_t s);
// Read-copy readout (16 rows per item, read-only; skip_flush_rows, N = 128, headdim % 16 == 0): 16-bit,
// FP8_E4M3 and NVFP4 rows; NULL for other dtypes.
const void* splitReadCopyKernel(int stateDtype, int mode, int numTokens);
int splitReadRows();
// Read-copy readout on tensor cores (mamba2_read_mma.cu; standard mode, skip_flush_rows, dstate 128, headdim % 16
// == 0, window <= 32): FP16, FP8_E4M3 and NVFP4 rows, else NULL; *smem gets its dynamic shared memory per CTA.
// stages 0 = the format's default, 2 / 3 / 4 / 6 A/B builds (window <= 16); actDtype: the activations' format (the
// default instance is compiled for bf16 and fp16). The launcher also checks alignments.
const void* splitReadCopyMmaKernel(int stateDtype, int window, int stages, int actDtype, size_t* smem);
int readMmaThreads();
// The same readout staged per head (mamba2_read_head.cu; the default, RSSM_MAMBA2_READ_MMA_HEAD=0 off): NVFP4 rows,
// head dim 64 / 80, window <= 16, bf16 / fp16 activations, else NULL; the launcher applies the tile kernel's other rules.
const void* splitReadCopyHeadKernel(int stateDtype, int window, int headdim, int actDtype, size_t* smem);
int readHeadThreads();
size_t splitWorkspaceBytes(int batch, int numTokens, int nheads, int window);
size_t splitReadoutSmemBytes(int dstate);
size_t splitMmaFoldSmemBytes(int dstate);  // the readout with the tensor-core fold (pipe 3)
int splitMaxRecords();
// The split readout on tensor cores (mamba2_split_mma.cu): dstate 128 and fp32 / fp16 / bf16 rows, else NULL; the
// launcher also requires bf16 activations, 16-byte aligned checkpoint rows and, for 16-bit rows, a window <= 16. Its
// dynamic shared memory per CTA (splitReadoutThreads() threads).
// hoistC: RSSM_MAMBA2_MMA_CHOIST (default on); prefetchX: RSSM_MAMBA2_MMA_XPF (default on: the next item's x_j and
// this item's z loaded early; mamba2_split_mma_kernel.cuh; measured 0-0.5% faster at T = 4, 3% at T = 8)
// off32: the fp32 ZPF instance's L32 form (32-bit item offsets) where the caller checked splitMmaOffsetsFit32.
const void* splitMmaReadoutKernel(int stateDtype, int dstate, bool hoistC, bool prefetchX, bool zPairs,
                                  bool off32 = false);
size_t splitMmaReadoutSmemBytes(int stateDtype);
size_t splitPrepSmemBytes(int window, int numTokens, int dstate, int headdim, int headsPerGroup);
int splitHeadsPerPrep();
int splitReadoutThreads();
int splitRows();
// Variant 4 of the conventional decode (warp items, mamba2_warp_decode.cu): N 128 / 256 with `rows` = 8 state rows per
// item (warpDecodeRows()), else NULL.
const void* warpDecodeKernel(int stateDtype, int dstate, int numTokens, int rows);
// PIPE (RSSM_MAMBA2_WARP_PIPE, A/B): the one-token fp32 N = 128 warp-item decode on a persistent grid with
// `stages` - 1 items' rows in flight (2 or 3; else NULL), and its dynamic shared memory per CTA.
const void* warpDecodePipeKernel(int stages);
size_t warpDecodePipeSmem(int stages);
int warpDecodeThreads();
int warpDecodeRows();
}  // namespace mamba2
}  // namespace rssm
