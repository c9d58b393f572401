// Host interface of the GDN split replay kernels (variant 6, gdn_split.cu): sizes and the launch. The
// launcher in gdn_launch.cu validates the inputs first (checkSplit).
#pragma once
#include <cuda_runtime_api.h>
#include <stddef.h>

#include "gdn/gdn.h"

namespace rssm {
namespace stream {
struct ReadCopyScales;  // common/read_rows.cuh
}
namespace gdn {
// Workspace bytes of one step (a head record per (row, value head)).
size_t splitWorkspaceBytes(int batch, int numTokens, int numVHeads, int window);
// Records per step the kernels handle (one per lane): h + T <= this.
int splitMaxRecords();
// Value rows per readout item: head_v must be a multiple.
int splitRows();
// Prep kernel (grid (H, B)) then readout kernel (persistent grid of `smCount` x occupancy CTAs at most).
// p.state_dtype FP8_E4M3 / NVFP4: a read-only dual-precision read copy (skip_flush_rows; byte strides) with
// its scale tensors in rc; rc is unused for the other dtypes.
cudaError_t launchSplit(const GdnReplayParams& p, int smCount, cudaStream_t stream, const stream::ReadCopyScales& rc);
// Variant 6 on a read-only dual-precision read copy in a scaled format: q.state_dtype FP8_E4M3 / NVFP4,
// q.variant 6, q.skip_flush_rows 1. Validates like rssm_gdn_replay_launch; returns its status.
int replaySplitReadCopy(const GdnReplayParams& q, const stream::ReadCopyScales& rc, cudaStream_t stream);
// The speculative verify readout on tensor cores (gdn_split_mma.cu): its kernel for a checkpoint dtype (fp32 / fp16 /
// bf16; NULL otherwise) and token count (<= 8), its dynamic shared memory per CTA and its CTA size. prefetchU: the
// next item's u_j block loaded during the current item (default for T <= 4; RSSM_GDN_VERIFY_UPF=1/0 forces it).
// lean32: the LEAN32 instances (fp32 rows: T <= 4 with prefetchU, T > 4 without it; 32-bit item offsets, the key head
// by a shift) where the caller checked their rules; other combinations ignore it. mns (fp32 rows, T > 4, lean32 without
// prefetchU): the MNS form (RSSM_GDN_VERIFY_MNS); keyb (with mns): its KEYB form (RSSM_GDN_VERIFY_KEYB, the default). The
// caller must pass the same mns / keyb to verifyMmaSmemBytes, and only where the instance applies. hrpf: the HRPF
// form (RSSM_GDN_VERIFY_HRPF, the default; the next item's head-record lines prefetched into L1) of the T <= 4 LEAN32
// instance and of the KEYB instance; ignored elsewhere (same shared memory).
const void* verifyMmaKernel(int stateDtype, int numTokens, bool prefetchU, bool lean32 = false, bool mns = false,
                            bool keyb = false, bool hrpf = false);
size_t verifyMmaSmemBytes(int stateDtype, int numTokens, bool mns = false, bool keyb = false);
int verifyMmaThreads();
// The read-copy readout on tensor cores (gdn_read_mma.cu; standard steps, skip_flush_rows, K = 128): its kernel for
// an fp16 / fp8_e4m3 / nvfp4 read copy (NULL otherwise) and window (<= 32), *smem its dynamic shared memory per CTA;
// its CTA size.
const void* readCopyMmaKernel(int stateDtype, int window, int actDtype, int uDtype, size_t* smem);
int readCopyMmaThreads();
// The same readout staged per 64-row unit (gdn_read_head.cu; the default, RSSM_GDN_READ_MMA_HEAD=0 off): NVFP4 rows,
// head_v % 64 == 0, window <= 16, fp16 u with bf16 / fp16 activations, else NULL; the launcher applies the tile
// kernel's other rules.
const void* readCopyHeadKernel(int stateDtype, int window, int headV, int actDtype, int uDtype, size_t* smem);
int readCopyHeadThreads();
int readCopyHeadRows();
}  // namespace gdn
}  // namespace rssm
