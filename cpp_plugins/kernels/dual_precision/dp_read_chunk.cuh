// Read path of the dual-precision decode kernels: a CTA of 128 threads streams a tile of state rows in
// one stored format with 16-byte loads and forms NV row dot products sDot[s][row] = S[row, :] . vec_s
// (vec_s in shared memory, fp32 [NV][128]). Block scales are applied once per block:
// sum_blocks (value scale) * sum_i raw_i vec_i, where raw_i = value_i * 2^-8 (e4m3) or 2^-14 (e2m1)
// is the exact code value produced by the bit-rebias decoders of dp_codec.cuh. Internal header.
#pragma once
#include "dual_precision/dp_state_io.cuh"

namespace rssm {
namespace dp {

constexpr int kDecodeThreads = 128;  // launchDpDecode (dp_decode_dispatch.h) launches 128 threads

template <int F>
struct ReadFmt {
    static constexpr int kElems = F == RSSM_DTYPE_FP32 ? 4 : (F == RSSM_DTYPE_FP16 || F == RSSM_DTYPE_BF16) ? 8
                                  : F == RSSM_DTYPE_FP8_E4M3 ? 16 : 32;
    static constexpr int kEltBytes = F == RSSM_DTYPE_FP32 ? 4 : (F == RSSM_DTYPE_FP16 || F == RSSM_DTYPE_BF16) ? 2 : 1;
    static constexpr int kLPR = kRowN / kElems;                // lanes per row (16-byte vectors per row)
    static constexpr int kRPP = kDecodeThreads / kLPR;         // rows per pass
    static constexpr int kVPT = kElems >= 16 ? 4 : 8;         // vectors per thread in flight
    static constexpr int kRows = kRPP * kVPT;                  // rows per chunk
};

__device__ __forceinline__ uint4 ldStream16(const void* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }

template <int F>
struct ReadChunk {
    using R = ReadFmt<F>;
    uint4 raw[R::kVPT];
    uint32_t sc[R::kVPT];  // fp8: fp32 row-scale bits; nvfp4: the vector's two e4m3 block scales
    float g;

    __device__ __forceinline__ static int laneInRow() { return threadIdx.x % R::kLPR; }
    __device__ __forceinline__ static int rowGroup() { return threadIdx.x / R::kLPR; }
    __device__ __forceinline__ static int warpFirstRow() { return (threadIdx.x >> 5) * (32 / R::kLPR); }

    __device__ __forceinline__ void load(const CopyRef& c, int slot, int head, int H, int P, int row0, int rowEnd) {
        const int ln = laneInRow(), rg = rowGroup();
        const char* base = static_cast<const char*>(c.data) +
                           ((int64_t)slot * c.sSlot + (int64_t)head * c.sHead) * R::kEltBytes;
#pragma unroll
        for (int k = 0; k < R::kVPT; ++k) {
            const int row = row0 + rg + k * R::kRPP;
            raw[k] = make_uint4(0, 0, 0, 0);
            sc[k] = 0;
            if (row < rowEnd) {
                raw[k] = ldStream16(base + (int64_t)row * c.sRow * R::kEltBytes + ln * 16);
                if (F == RSSM_DTYPE_FP8_E4M3)
                    sc[k] = __float_as_uint(static_cast<const float*>(c.scale)[rowScaleIndex(slot, head, row, H, P, 1, 0)]);
                if (F == RSSM_DTYPE_NVFP4)
                    sc[k] = *reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(c.scale) +
                                                               rowScaleIndex(slot, head, row, H, P, kRowN / 16, 2 * ln));
            }
        }
        g = F == RSSM_DTYPE_NVFP4 ? c.gscale[(int64_t)slot * H + head] : 1.f;
    }

    // cr: the thread's kElems vector entries (registers), or for NVFP4 a shared-memory pointer to them.
    __device__ __forceinline__ float dotVec(int k, const float* cr) const {
        const uint32_t w[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
        float acc = 0.f;
        if (F == RSSM_DTYPE_FP32) {
#pragma unroll
            for (int i = 0; i < 4; ++i) acc = fmaf(__uint_as_float(w[i]), cr[i], acc);
        } else if (F == RSSM_DTYPE_FP16) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
                acc = fmaf(f.x, cr[2 * i], fmaf(f.y, cr[2 * i + 1], acc));
            }
        } else if (F == RSSM_DTYPE_BF16) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
                acc = fmaf(__uint_as_float(w[i] << 16), cr[2 * i], fmaf(__uint_as_float(w[i] & 0xffff0000u), cr[2 * i + 1], acc));
        } else if (F == RSSM_DTYPE_FP8_E4M3) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float2 lo = e4m3PairLo(w[i]), hi = e4m3PairHi(w[i]);
                acc = fmaf(lo.x, cr[4 * i], acc);
                acc = fmaf(hi.x, cr[4 * i + 1], acc);
                acc = fmaf(lo.y, cr[4 * i + 2], acc);
                acc = fmaf(hi.y, cr[4 * i + 3], acc);
            }
            acc *= __uint_as_float(sc[k]) * 256.f;
        } else {  // NVFP4: words 0-1 block 0, words 2-3 block 1; nibble n of word i = element 8i + n
            float blk0 = 0.f, blk1 = 0.f;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float a = 0.f;
                const float4 c0 = *reinterpret_cast<const float4*>(cr + 8 * i);
                const float4 c1 = *reinterpret_cast<const float4*>(cr + 8 * i + 4);
                const float2 p0 = e2m1Pair<0>(w[i]), p1 = e2m1Pair<1>(w[i]), p2 = e2m1Pair<2>(w[i]), p3 = e2m1Pair<3>(w[i]);
                a = fmaf(p0.x, c0.x, a); a = fmaf(p0.y, c1.x, a);
                a = fmaf(p1.x, c0.y, a); a = fmaf(p1.y, c1.y, a);
                a = fmaf(p2.x, c0.z, a); a = fmaf(p2.y, c1.z, a);
                a = fmaf(p3.x, c0.w, a); a = fmaf(p3.y, c1.w, a);
                if (i < 2) blk0 += a; else blk1 += a;
            }
            const float d0 = __fmul_rn(e4m3Value(sc[k] & 0xff), g), d1 = __fmul_rn(e4m3Value(sc[k] >> 8), g);
            acc = blk0 * (d0 * 16384.f) + blk1 * (d1 * 16384.f);
        }
        return acc;
    }

    // sDot[s * tileRows + (row - tile0)] = S[row, :] . sVec[s, :] for s < NV, rows [row0, rowEnd).
    __device__ __forceinline__ void dots(const float* sVec, int NV, float* sDot, int tileRows, int tile0, int row0,
                                         int rowEnd) const {
        const int ln = laneInRow(), rg = rowGroup(), wr = warpFirstRow();
        for (int s = 0; s < NV; ++s) {
            constexpr bool kSmemVec = F == RSSM_DTYPE_NVFP4;  // 32 entries: read them from shared memory
            float cr[kSmemVec ? 4 : R::kElems];
#pragma unroll
            for (int e = 0; e < (kSmemVec ? 0 : R::kElems); e += 4) {
                const float4 c4 = *reinterpret_cast<const float4*>(sVec + s * kRowN + ln * R::kElems + e);
                cr[e] = c4.x; cr[e + 1] = c4.y; cr[e + 2] = c4.z; cr[e + 3] = c4.w;
            }
#pragma unroll
            for (int k = 0; k < R::kVPT; ++k) {
                if (row0 + wr + k * R::kRPP >= rowEnd) break;  // warp-uniform
                const int row = row0 + rg + k * R::kRPP;
                float part = dotVec(k, kSmemVec ? sVec + s * kRowN + ln * R::kElems : cr);
#pragma unroll
                for (int off = R::kLPR / 2; off > 0; off >>= 1) part += __shfl_xor_sync(kFullMask, part, off);
                if (ln == 0 && row < rowEnd) sDot[s * tileRows + row - tile0] = part;
            }
        }
    }
};

// Flush-row path (one row in L per step): warp per row, exact decode of any stored format, same sDot
// layout. A warp puts kExactBatch rows in flight before it reduces them (one round trip per batch).
constexpr int kExactBatch = 4;
__device__ __forceinline__ void exactDots(const CopyRef& c, int slot, int head, int H, int P, const float* sVec, int NV,
                                          float* sDot, int tileRows, int tile0, int rowEnd) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = kDecodeThreads / 32;
    for (int row0 = tile0 + warp; row0 < rowEnd; row0 += kExactBatch * nw) {
        float4 v[kExactBatch];
#pragma unroll
        for (int r = 0; r < kExactBatch; ++r) {
            const int row = row0 + r * nw;
            v[r] = row < rowEnd ? loadRowExact(c, slot, head, row, H, P, lane) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        for (int s = 0; s < NV; ++s) {
            const float4 q = *reinterpret_cast<const float4*>(sVec + s * kRowN + 4 * lane);
#pragma unroll
            for (int r = 0; r < kExactBatch; ++r) {
                float d = v[r].x * q.x + v[r].y * q.y + v[r].z * q.z + v[r].w * q.w;
#pragma unroll
                for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(kFullMask, d, off);
                const int row = row0 + r * nw;
                if (lane == 0 && row < rowEnd) sDot[s * tileRows + row - tile0] = d;
            }
        }
    }
}

}  // namespace dp
}  // namespace rssm
