// Checkpoint import (replay_import.h): one CTA per (32 x 32 tile, head, row); the transposed case
// goes through a shared-memory tile so both the reads and the writes are coalesced.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "replay_import/replay_import.h"

namespace rssm {
namespace {

constexpr int kTile = 32;     // tile edge
constexpr int kRowsPer = 8;   // thread rows (block 32 x 8)

__device__ __forceinline__ float loadAs(const void* base, int64_t off, int dtype) {
    if (dtype == RSSM_DTYPE_FP32) return static_cast<const float*>(base)[off];
    const uint16_t r = static_cast<const uint16_t*>(base)[off];
    return dtype == RSSM_DTYPE_FP16 ? __half2float(__ushort_as_half(r)) : __bfloat162float(__ushort_as_bfloat16(r));
}
__device__ __forceinline__ void storeAs(void* base, int64_t off, float x, int dtype) {
    if (dtype == RSSM_DTYPE_FP32) {
        static_cast<float*>(base)[off] = x;
    } else if (dtype == RSSM_DTYPE_FP16) {
        static_cast<uint16_t*>(base)[off] = __half_as_ushort(__float2half_rn(x));
    } else {
        static_cast<uint16_t*>(base)[off] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    }
}

// grid (tilesQ * tilesR, H, n); block (32, 8)
__global__ void replayImportKernel(const ReplayImportParams p) {
    const int row = blockIdx.z, head = blockIdx.y;
    const int dst = p.dst_slots[row];
    if (dst < 0) return;
    const int src = p.src_slots ? p.src_slots[row] : dst;
    const bool lead = blockIdx.x == 0 && head == 0 && threadIdx.x == 0 && threadIdx.y == 0;
    // A destination slot named by an earlier row: two rows would write one checkpoint in an undefined interleaving, so
    // the later row is skipped and reported (the first one is imported). One coalesced scan of the earlier rows per CTA.
    int earlier = 0;
    for (int i = threadIdx.y * kTile + threadIdx.x; i < row; i += kTile * kRowsPer) earlier |= p.dst_slots[i] == dst;
    const bool duplicate = __syncthreads_or(earlier) != 0;
    if (duplicate || dst >= p.dst_num_slots || src < 0 || src >= p.src_num_slots) {
        if (lead && p.error_slot) atomicCAS(p.error_slot, -1, dst);
        return;  // nothing of this row is written
    }
    const int tilesQ = (p.dim_q + kTile - 1) / kTile;
    const int r0 = (blockIdx.x / tilesQ) * kTile, q0 = (blockIdx.x % tilesQ) * kTile;
    const int64_t sBase = (int64_t)src * p.src_stride_slot + (int64_t)head * p.src_stride_head;
    const int64_t dBase = (int64_t)dst * p.dst_stride_slot + (int64_t)head * p.dst_stride_head;
    __shared__ float tile[kTile][kTile + 1];
    if (p.src_transposed) {
        // read along r (the source's contiguous dim), write along q
        for (int qq = threadIdx.y; qq < kTile; qq += kRowsPer) {
            const int q = q0 + qq, r = r0 + threadIdx.x;
            if (q < p.dim_q && r < p.dim_r)
                tile[qq][threadIdx.x] = loadAs(p.src, sBase + (int64_t)q * p.src_stride_a + (int64_t)r * p.src_stride_b,
                                               p.src_dtype);
        }
        __syncthreads();
        for (int rr = threadIdx.y; rr < kTile; rr += kRowsPer) {
            const int r = r0 + rr, q = q0 + threadIdx.x;
            if (r < p.dim_r && q < p.dim_q)
                storeAs(p.dst, dBase + (int64_t)r * p.dst_stride_r + q, tile[threadIdx.x][rr], p.dst_dtype);
        }
    } else {
        for (int rr = threadIdx.y; rr < kTile; rr += kRowsPer) {
            const int r = r0 + rr, q = q0 + threadIdx.x;
            if (r < p.dim_r && q < p.dim_q)
                storeAs(p.dst, dBase + (int64_t)r * p.dst_stride_r + q,
                        loadAs(p.src, sBase + (int64_t)r * p.src_stride_a + (int64_t)q * p.src_stride_b, p.src_dtype),
                        p.dst_dtype);
        }
    }
    if (lead && p.reset_cursors) {
        p.ring_origin[dst] = 0;
        p.ring_len[dst] = 0;
    }
}

bool isStateDtype(int d) { return d == RSSM_DTYPE_FP32 || d == RSSM_DTYPE_FP16 || d == RSSM_DTYPE_BF16; }

}  // namespace
}  // namespace rssm

extern "C" int rssm_replay_import_launch(const ReplayImportParams* p, cudaStream_t stream) {
    using rssm::setError;
    const char* op = "ReplayImport";
    if (!p) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: params must not be NULL", op);
    if (p->num_rows < 0) return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_rows must be >= 0; got %d", op, p->num_rows);
    if (p->num_heads < 1 || p->dim_r < 1 || p->dim_q < 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: num_heads, dim_r and dim_q must be >= 1; got %d, %d, %d", op,
                        p->num_heads, p->dim_r, p->dim_q);
    if (p->src_num_slots < 1 || p->dst_num_slots < 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: src_num_slots and dst_num_slots must be >= 1; got %d, %d", op,
                        p->src_num_slots, p->dst_num_slots);
    if (!rssm::isStateDtype(p->src_dtype) || !rssm::isStateDtype(p->dst_dtype))
        return setError(RSSM_ERR_UNSUPPORTED, "%s: src_dtype and dst_dtype must be fp32 (0), fp16 (1) or bf16 (2); "
                        "got %d, %d (dual-precision checkpoints: import the recurrence copy, then flush)", op,
                        p->src_dtype, p->dst_dtype);
    if (p->src_transposed != 0 && p->src_transposed != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: src_transposed must be 0 or 1; got %d", op, p->src_transposed);
    if (p->reset_cursors != 0 && p->reset_cursors != 1)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: reset_cursors must be 0 or 1; got %d", op, p->reset_cursors);
    if (p->num_rows == 0) return RSSM_OK;
    if (!p->dst_slots || !p->src || !p->dst)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: dst_slots, src and dst must not be NULL", op);
    if (p->reset_cursors && (!p->ring_origin || !p->ring_len))
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: reset_cursors = 1 needs ring_origin and ring_len", op);
    if (p->dst_stride_r < p->dim_q)
        return setError(RSSM_ERR_INVALID_ARGUMENT, "%s: dst_stride_r must be >= dim_q = %d (contiguous rows); got %lld",
                        op, p->dim_q, (long long)p->dst_stride_r);
    const int tiles = ((p->dim_r + 31) / 32) * ((p->dim_q + 31) / 32);
    if (p->num_heads > 65535 || p->num_rows > 65535)
        return setError(RSSM_ERR_UNSUPPORTED, "%s: num_heads and num_rows must be <= 65535; got %d, %d", op,
                        p->num_heads, p->num_rows);
    dim3 grid(tiles, p->num_heads, p->num_rows), block(32, 8);
    rssm::replayImportKernel<<<grid, block, 0, stream>>>(*p);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return setError(RSSM_ERR_CUDA, "%s: kernel launch failed: %s", op, cudaGetErrorString(e));
    return RSSM_OK;
}
