// Per-family launch entry points of the dual-precision decode (one translation unit each, so the
// instantiations over the read format build in parallel). Internal header.
#pragma once
#include <cuda_runtime.h>

#include "common/pdl.h"
#include "dual_precision/dual_precision.h"

namespace rssm {
namespace dp {
// Row tile (state rows per CTA) the kernels use for a read format: one chunk of 16-byte vectors.
int decodeTileRows(int readDtype, int headdim);
// Return a status: RSSM_OK, or the replay launcher's error on the stream path (16-bit read copies).
int launchMamba2DpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s);
int launchGdnDpDecode(const DualPrecisionDecodeParams& p, int tileRows, cudaStream_t s);
// Split-path workspace bytes per family (0: the path cannot run these sizes).
int64_t mamba2DpSplitWorkspaceBytes(const DualPrecisionDecodeParams& p);
int64_t gdnDpSplitWorkspaceBytes(const DualPrecisionDecodeParams& p);

// Read path of the non-flush rows: RSSM_DP_DECODE_PATH = tile | stream | split forces one (stream: 16-bit
// read copies only, else tile; split: an error without a large enough workspace); otherwise split where
// a workspace is given and the family's rule picks it, stream for 16-bit read copies, else tile.
enum class DecodePath { kTile, kStream, kSplit };  // values = rssm_dual_precision_decode_path's codes 0 / 1 / 2
const char* forcedPathName();  // the RSSM_DP_DECODE_PATH value, or NULL
bool forcedPathKnown(const char* forced);  // tile, stream or split
// The path of both families: RSSM_DP_DECODE_PATH's where set (stream: `base`), else split where `ruleSplit` (a
// workspace is given and the family's batch rule holds), else `base` (stream or tile, the family's choice).
DecodePath pickPath(DecodePath base, bool ruleSplit);
// The launchers' choice (haveWs: `need` = the family's split workspace bytes > 0, at least that much is given, and
// for GDN slot indices) and its parts; the launch and rssm_dual_precision_decode_path share them.
bool mamba2DpHaveWorkspace(const DualPrecisionDecodeParams& p, int64_t need);
bool gdnDpHaveWorkspace(const DualPrecisionDecodeParams& p, int64_t need);
DecodePath chooseMamba2DpPath(const DualPrecisionDecodeParams& p, bool haveWs);
DecodePath chooseGdnDpPath(const DualPrecisionDecodeParams& p, bool haveWs);
int gdnDpSplitMinBatchHeads(int readDtype, int numTokens);     // 0 outside T = 1..8
int mamba2DpSplitMinBatchHeads(int readDtype, int numTokens, int headdim);  // 0 outside T = 1..8

// Launch of one decode kernel instance with `smem` bytes of dynamic shared memory (opted in above the
// 48 KB default when static + dynamic need it; the call is idempotent and capture-safe).
// dependent: launched as a programmatic dependent of the previous kernel (PDL, sm_90+; the flush-only instances,
// which wait for it before decoding a row).
template <typename Kernel>
void launchDpDecode(Kernel kernel, dim3 grid, int smem, cudaStream_t s, const DualPrecisionDecodeParams& p,
                    int tileRows, bool dependent = false) {
    if (smem > 16 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (!dependent) {
        kernel<<<grid, 128, smem, s>>>(p, tileRows);
        return;
    }
    void* args[] = {const_cast<DualPrecisionDecodeParams*>(&p), &tileRows};
    launchMaybeDependent(reinterpret_cast<const void*>(kernel), grid, dim3(128), smem, s, args, pdlEnabled());
}
}  // namespace dp
}  // namespace rssm
