// Flush fold of a warp item on tensor cores (sm_80+): the 8 fp32 state rows of one item (N = 128 columns, the
// XOR-permuted register layout of stream::loadWarpRows: slot r holds row r ^ rl, lane l the quad l) become
//
//     S <- gfold S + sum_{j < nf} W[:, j] B_j^T,      W[row][j] = fw_j x_j[row],
//
// with B_j the bf16 key / B row of record j (a ring row in global memory) and lane j holding x_j (8 packed bf16,
// natural row order) and fw_j (0 for j >= nf). The CUDA-core fold (stream::foldStagedRecords) costs ~45
// instructions per record and lane; here a 16-record chunk is 8 x 3 mma.sync.m16n8k16 (bf16 in, fp32 accumulate)
// with M = state columns (16 per tile), N = the 8 rows, K = records:
//   A (columns x records) = B_j^T, from the staged rows with ldmatrix.trans (records are smem rows);
//   B (records x rows)    = W, split into three bf16 terms W = hi + mid + lo (24 significant bits: the fold keeps
//                           fp32 accuracy; B_j is bf16 already, so A is exact);
//   C / D (columns x rows) = gfold S, in and out of the accumulators through a shared-memory transpose.
// Records past nf are zero rows of A and zero columns of B. Shared memory per warp: kFoldMmaWarpBytes (16-byte
// aligned; the transpose buffer shares the staged rows' space, so the staging's latency is not hidden behind the
// transpose: a version with separate buffers (9 KB per warp) shrank the L1 carve-out and ran the T = 1 readout 20%
// slower). Internal header; callers check N = 128 and bf16 activations.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>
#include "common/cp_async.cuh"

namespace rssm {
namespace foldmma {

constexpr int kN = 128;               // state columns
constexpr int kRows = 8;              // state rows per item
constexpr int kChunk = 16;            // records per mma K step
constexpr int kBStride = kN + 8;      // staged B row stride (bf16): rows 16 bytes apart in the banks (ldmatrix)
constexpr int kDStride = kN + 4;      // transpose buffer row stride (fp32): conflict-free column writes
constexpr int kBBytes = kChunk * kBStride * 2;
constexpr int kDBytes = kRows * kDStride * 4;
constexpr int kWBytes = kChunk * kRows * 4;
static_assert(kDBytes <= kBBytes, "the transpose buffer aliases the staged B rows");
constexpr int kFoldMmaWarpBytes = kBBytes + kWBytes;  // sB / sD (aliased: never live together), sW

__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
    const __nv_bfloat162 v = __halves2bfloat162(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
    return *reinterpret_cast<const uint32_t*>(&v);
}
// w = t0 + t1 + t2 with each term a bf16 value (round to nearest at each step).
__device__ __forceinline__ void split3(float w, float& t0, float& t1, float& t2) {
    t0 = __bfloat162float(__float2bfloat16_rn(w));
    const float r1 = w - t0;
    t1 = __bfloat162float(__float2bfloat16_rn(r1));
    t2 = r1 - t1;  // rounded to bf16 by packBf16
}
// Four 8 x 8 b16 matrices from shared memory (each lane gives one row address); TRANS: each transposed.
template <bool TRANS>
__device__ __forceinline__ void ldmatrixX4Of(uint32_t (&a)[4], const void* rowAddr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                     : "r"(async::smemAddr(rowAddr)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                     : "r"(async::smemAddr(rowAddr)));
#endif
}
__device__ __forceinline__ void ldmatrixX4Trans(uint32_t (&a)[4], const void* rowAddr) {
    ldmatrixX4Of<true>(a, rowAddr);
}
__device__ __forceinline__ void ldmatrixX4(uint32_t (&a)[4], const void* rowAddr) { ldmatrixX4Of<false>(a, rowAddr); }
__device__ __forceinline__ void mmaBf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
// d += a . b, m16n8k16 with bf16 (bf16 = true: mmaBf16) or fp16 inputs, fp32 accumulation.
__device__ __forceinline__ void mma16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (bf16) {
        mmaBf16(d, a, b0, b1);
        return;
    }
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// B rows of records c0 .. c0 + 15 into 16 staged rows of kBStride elements (cp.async, one commit group); rows from
// record nf on are zeroed (their fold weight is zero, and 0 x stale bits could be NaN). ringB: B_j of record j is at
// ringB + ((o + j) mod cap) * rowStride (bf16 elements, 16-byte aligned rows). Also used by the tensor-core readout
// (mamba2/mamba2_split_mma_kernel.cuh).
__device__ __forceinline__ void stageBRows(uint16_t* sB, const uint16_t* ringB, int c0, int nf, int o, int cap,
                                           int64_t rowStride, int lane) {
    constexpr int kVec = kN / 8;  // 16-byte pieces per B row
    const int n = min(kChunk, nf - c0);
#pragma unroll 4
    for (int i = lane; i < kChunk * kVec; i += 32) {
        const int jj = i / kVec, v = i - jj * kVec;
        uint16_t* dst = sB + jj * kBStride + v * 8;
        if (jj < n) {
            int rr = o + c0 + jj;
            rr = rr >= cap ? rr - cap : rr;
            async::copy16(dst, ringB + (int64_t)rr * rowStride + v * 8);
        } else {
            *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
        }
    }
    async::commit();
}

constexpr int kFwBytes = kChunk * 4;  // a chunk's fold weights (fp32)

// One 16-record fold chunk into a warp's shared memory, one cp.async group: the B rows of records c0 .. c0 + 15
// (B_j for Mamba-2, the raw keys k_j for GDN; sB, kBStride apart; zero rows from record nf on: their weight is zero,
// and 0 x stale bits could be NaN) and their fold weights fw_j (sFw[16], from fwp[c0 ..]; zero from nf on). The row
// of record j is at ringB + ((o + j) mod cap) x rowStride (bf16 elements, 16-byte aligned; rowStride x 2 x cap <
// 2^32, the launchers' rule). Used by the tensor-core verify readouts of both families. Lane
// (v = lane % 16, j0 = lane / 16) copies piece v of records c0 + j0 + 2m, m < 8: the warp's copy m is two whole rows
// (coalesced), and a lane's source is one 32-bit multiply-add per copy (no division, no 64-bit product: ~8 warp
// instructions per copy in the SASS where stageBRows's loop took ~23 in the source counters; thirty-fifth session).
// The weights come in the same group, so the fold reads them from shared memory after the wait that covers the rows;
// loaded from the head record after the output instead, their L2 round trip was the largest stall of a Mamba-2 flush
// item (14% of the all-flush readout's stall samples, thirty-fourth session's source counters).
__device__ __forceinline__ void stageFoldChunk(uint16_t* sB, float* sFw, const uint16_t* ringB, const float* fwp, int c0,
                                               int nf, int o, int cap, int rowStride, int lane) {
    constexpr int kVec = kN / 8;  // 16-byte pieces per B row
    static_assert(kVec * 2 == 32 && kChunk % 2 == 0, "two B rows per warp copy");
    const int v = lane & (kVec - 1), j0 = lane >> 4;
    const int n = nf - c0;  // records of this chunk (may exceed kChunk)
    const unsigned char* src = reinterpret_cast<const unsigned char*>(ringB + v * 8);
    uint16_t* dst = sB + j0 * kBStride + v * 8;
    const int r0 = o + c0 + j0;  // < 2 cap for every copied record
    const unsigned rowBytes = 2u * (unsigned)rowStride;
#pragma unroll
    for (int m = 0; m < kChunk / 2; ++m) {
        const int rr = r0 + 2 * m;
        const unsigned rw = (unsigned)(rr >= cap ? rr - cap : rr);
        async::copy16ZeroIf(dst + 2 * m * kBStride, src + rw * rowBytes, j0 + 2 * m >= n);
    }
    if (lane < kChunk) async::copy4ZeroIf(true, sFw + lane, fwp + c0 + lane, lane >= n);
    async::commit();
}

// The fold weights of one lane's four records of a chunk staged by stageFoldChunk: records 2q, 2q + 1, 8 + 2q, 9 + 2q
// (the A-fragment order of mmarows::foldWeightTerms; zero from nf on). Call after the wait that covers the chunk.
__device__ __forceinline__ void stagedChunkWeights(float (&fw)[4], const float* sFw, int q) {
    const float2 w0 = *reinterpret_cast<const float2*>(sFw + 2 * q);
    const float2 w1 = *reinterpret_cast<const float2*>(sFw + 8 + 2 * q);
    fw[0] = w0.x;
    fw[1] = w0.y;
    fw[2] = w1.x;
    fw[3] = w1.y;
}

// W = fw_j x_j of records c0 .. c0 + 15 into sW [16 records][8 rows] (0 past nf); lane j holds record j's x block
// (8 packed bf16, natural row order) and fw_j.
__device__ __forceinline__ void stageW(float* sW, uint4 xq, float fw, int c0, int nf, int lane) {
    const int n = min(kChunk, nf - c0);
    const int jj = lane - c0;
    if (jj >= 0 && jj < kChunk) {
        const float f = jj < n ? fw : 0.f;
        const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&xq);
        float4* w4 = reinterpret_cast<float4*>(sW + jj * kRows);
        const float2 x01 = __bfloat1622float2(xp[0]), x23 = __bfloat1622float2(xp[1]);
        const float2 x45 = __bfloat1622float2(xp[2]), x67 = __bfloat1622float2(xp[3]);
        w4[0] = make_float4(f * x01.x, f * x01.y, f * x23.x, f * x23.y);
        w4[1] = make_float4(f * x45.x, f * x45.y, f * x67.x, f * x67.y);
    }
}

// gfold S -> sD (rows natural, columns), then the accumulators in the mma C layout:
// tile t: d0 = (column 16t + g, row 2q), d1 = (16t + g, 2q + 1), d2 = (16t + g + 8, 2q), d3 = (16t + g + 8, 2q + 1)
__device__ __forceinline__ void accumulatorsIn(float (&d)[kN / 16][4], const float4 (&S)[kRows][1], float gfold,
                                               float* sD, int rl, int lane) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
        const float4 v = S[r][0];
        *reinterpret_cast<float4*>(sD + (r ^ rl) * kDStride + 4 * lane) =
            make_float4(gfold * v.x, gfold * v.y, gfold * v.z, gfold * v.w);
    }
    __syncwarp();
#pragma unroll
    for (int t = 0; t < kN / 16; ++t) {
        d[t][0] = sD[(2 * q) * kDStride + 16 * t + g];
        d[t][1] = sD[(2 * q + 1) * kDStride + 16 * t + g];
        d[t][2] = sD[(2 * q) * kDStride + 16 * t + g + 8];
        d[t][3] = sD[(2 * q + 1) * kDStride + 16 * t + g + 8];
    }
}

// One 16-record chunk: d += B^T W over the chunk's staged rows (aRow: this lane's ldmatrix row address in them) and
// sW (stageW), W split into three bf16 terms.
__device__ __forceinline__ void chunkMma(float (&d)[kN / 16][4], const uint16_t* aRow, const float* sW, int lane) {
    const int g = lane >> 2, q = lane & 3;
    // B fragment: W[row g][records 2q, 2q + 1] and [2q + 8, 2q + 9], three bf16 terms each
    float w0[3], w1[3], w2[3], w3[3];
    split3(sW[(2 * q) * kRows + g], w0[0], w0[1], w0[2]);
    split3(sW[(2 * q + 1) * kRows + g], w1[0], w1[1], w1[2]);
    split3(sW[(2 * q + 8) * kRows + g], w2[0], w2[1], w2[2]);
    split3(sW[(2 * q + 9) * kRows + g], w3[0], w3[1], w3[2]);
    uint32_t b01[3], b23[3];
#pragma unroll
    for (int s = 0; s < 3; ++s) {
        b01[s] = packBf16(w0[s], w1[s]);
        b23[s] = packBf16(w2[s], w3[s]);
    }
#pragma unroll
    for (int t = 0; t < kN / 16; ++t) {
        uint32_t a[4];
        ldmatrixX4Trans(a, aRow + 16 * t);
#pragma unroll
        for (int s = 2; s >= 0; --s) mmaBf16(d[t], a, b01[s], b23[s]);  // small terms first
    }
}

// accumulators -> sD -> the register layout (the caller has synchronised the warp since sD was last read)
__device__ __forceinline__ void accumulatorsOut(float4 (&S)[kRows][1], const float (&d)[kN / 16][4], float* sD,
                                                int rl, int lane) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int t = 0; t < kN / 16; ++t) {
        sD[(2 * q) * kDStride + 16 * t + g] = d[t][0];
        sD[(2 * q + 1) * kDStride + 16 * t + g] = d[t][1];
        sD[(2 * q) * kDStride + 16 * t + g + 8] = d[t][2];
        sD[(2 * q + 1) * kDStride + 16 * t + g + 8] = d[t][3];
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < kRows; ++r) S[r][0] = *reinterpret_cast<const float4*>(sD + (r ^ rl) * kDStride + 4 * lane);
    __syncwarp();  // the caller may reuse the buffers
}

// This lane's ldmatrix row address in 16 staged rows (matrix mi = lane >> 3: rows K0 .. K0 + 7 = records, columns
// M0 .. M0 + 7).
__device__ __forceinline__ const uint16_t* ldmatrixRow(const uint16_t* sB, int lane) {
    const int mi = lane >> 3;
    return sB + ((mi >> 1) * 8 + (lane & 7)) * kBStride + (mi & 1) * 8;
}

// ringB: B_j of record j is at ringB + ((o + j) mod cap) * rowStride (bf16 elements, 16-byte aligned rows).
// xq / fw: this lane's record (lane = record index). smem: this warp's kFoldMmaWarpBytes.
__device__ __forceinline__ void foldRowsMma(float4 (&S)[kRows][1], float gfold, int nf, const uint16_t* ringB,
                                            int o, int cap, int64_t rowStride, uint4 xq, float fw,
                                            unsigned char* smem, int rl, int lane) {
    uint16_t* sB = reinterpret_cast<uint16_t*>(smem);
    float* sD = reinterpret_cast<float*>(smem);  // aliases sB: used before the first staging and after the last mma
    float* sW = reinterpret_cast<float*>(smem + kBBytes);
    float d[kN / 16][4];
    accumulatorsIn(d, S, gfold, sD, rl, lane);
    __syncwarp();  // sD is read: the B rows may overwrite it
    const uint16_t* aRow = ldmatrixRow(sB, lane);
    for (int c0 = 0; c0 < nf; c0 += kChunk) {
        if (c0 > 0) __syncwarp();  // every lane is done with the previous chunk's sB / sW
        stageBRows(sB, ringB, c0, nf, o, cap, rowStride, lane);  // B rows of records c0 .. c0 + 15 (zero past nf)
        stageW(sW, xq, fw, c0, nf, lane);
        async::waitAll();
        __syncwarp();
        chunkMma(d, aRow, sW, lane);
    }
    __syncwarp();
    accumulatorsOut(S, d, sD, rl, lane);
}

// The same fold with every record's B row already in shared memory, staged by the caller's CTA: sBAll row j =
// B_j for j < nf, zero rows from nf up to the next multiple of 16, stride kBStride (read-only here, shared by the
// CTA's warps). smem: this warp's kFoldMmaStagedWarpBytes (sD and sW, not aliased). No global loads: the one-launch
// small-batch step (mamba2_split_fused.cuh) has the rows in registers from its record dots.
constexpr int kFoldMmaStagedWarpBytes = kDBytes + kWBytes;
__device__ __forceinline__ void foldRowsMmaStaged(float4 (&S)[kRows][1], float gfold, int nf, const uint16_t* sBAll,
                                                  uint4 xq, float fw, unsigned char* smem, int rl, int lane) {
    float* sD = reinterpret_cast<float*>(smem);
    float* sW = reinterpret_cast<float*>(smem + kDBytes);
    float d[kN / 16][4];
    accumulatorsIn(d, S, gfold, sD, rl, lane);
    for (int c0 = 0; c0 < nf; c0 += kChunk) {
        if (c0 > 0) __syncwarp();  // every lane is done with the previous chunk's sW
        stageW(sW, xq, fw, c0, nf, lane);
        __syncwarp();
        chunkMma(d, ldmatrixRow(sBAll + c0 * kBStride, lane), sW, lane);
    }
    __syncwarp();
    accumulatorsOut(S, d, sD, rl, lane);
}

}  // namespace foldmma
}  // namespace rssm
