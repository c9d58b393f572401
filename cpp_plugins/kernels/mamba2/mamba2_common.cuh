// Device helpers shared by the Mamba-2 kernels: thread layout, 16-byte state vectors, dtype
// conversion, softplus. Internal header (not part of the C ABI).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/cp_async.cuh"
#include "mamba2/mamba2.h"

namespace rssm {
namespace mamba2 {

constexpr int kThreads = 128;  // 4 warps per CTA
constexpr int kMinBlocks = 8;  // resident CTAs per SM the register budget must allow (1024 threads)

// Thread layout over one chunk of P rows x N state columns. kLanes consecutive lanes cover one row
// with 16-byte vectors (kNV vectors each); kRPP rows are covered per pass, kRPT passes per chunk,
// so each thread has kRPT * kNV independent 16-byte loads in flight.
template <typename StateT, int N>
struct Layout {
    static constexpr int kVec = 16 / (int)sizeof(StateT);   // elements per 16-byte vector
    static constexpr int kNVecRow = N / kVec;                 // vectors per row
    static constexpr int kLanes = kNVecRow < 32 ? kNVecRow : 32;
    static constexpr int kNV = kNVecRow / kLanes;             // vectors per thread per row
    static constexpr int kRPP = kThreads / kLanes;            // rows per pass
    // 16 state elements per thread per chunk (4 x 16 B for fp32, 2 x 16 B for 16-bit states)
    static constexpr int kRPT = (16 / (kVec * kNV)) > 0 ? (16 / (kVec * kNV)) : 1;  // passes per chunk
    static constexpr int kChunk = kRPP * kRPT;                // rows per chunk
    static constexpr int kElems = kNV * kVec;                 // state elements per thread per row
    static_assert(kNVecRow % kLanes == 0, "bad layout");
};

template <typename StateT>
struct StateIO;

template <>
struct StateIO<float> {
    __device__ __forceinline__ static void load(const float* p, float* v) {
        float4 t = __ldcs(reinterpret_cast<const float4*>(p));
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    }
    __device__ __forceinline__ static void store(float* p, const float* v) {
        __stcs(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
    }
};

template <>
struct StateIO<__half> {
    __device__ __forceinline__ static void load(const __half* p, float* v) {
        uint4 t = __ldcs(reinterpret_cast<const uint4*>(p));
        const __half2* h = reinterpret_cast<const __half2*>(&t);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float2 f = __half22float2(h[i]);
            v[2 * i] = f.x; v[2 * i + 1] = f.y;
        }
    }
    __device__ __forceinline__ static void store(__half* p, const float* v) {
        uint4 t;
        __half2* h = reinterpret_cast<__half2*>(&t);
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        __stcs(reinterpret_cast<uint4*>(p), t);
    }
};

template <>
struct StateIO<__nv_bfloat16> {
    __device__ __forceinline__ static void load(const __nv_bfloat16* p, float* v) {
        uint4 t = __ldcs(reinterpret_cast<const uint4*>(p));
        const uint32_t* w = reinterpret_cast<const uint32_t*>(&t);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    __device__ __forceinline__ static void store(__nv_bfloat16* p, const float* v) {
        uint4 t;
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&t);
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        __stcs(reinterpret_cast<uint4*>(p), t);
    }
};

// 16-bit activation bits <-> float (bf16 or fp16 chosen at run time; uniform branch).
__device__ __forceinline__ float actToFloat(uint16_t bits, bool isBf16) {
    return isBf16 ? __uint_as_float(uint32_t(bits) << 16) : __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ uint16_t floatToAct(float v, bool isBf16) {
    return isBf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
}

__device__ __forceinline__ float softplusF(float v) { return v > 20.f ? v : log1pf(__expf(v)); }
__device__ __forceinline__ float siluF(float v) { return v / (1.f + __expf(-v)); }

// dt = softplus(dt_raw + dt_bias) for token (b, t) and head h.
__device__ __forceinline__ float loadDt(const void* dtRaw, bool dtIsF32, bool actBf16, int64_t off,
                                        const float* dtBias, int head) {
    float raw = dtIsF32 ? reinterpret_cast<const float*>(dtRaw)[off]
                        : actToFloat(reinterpret_cast<const uint16_t*>(dtRaw)[off], actBf16);
    if (dtBias) raw += dtBias[head];
    return softplusF(raw);
}

// 16-byte asynchronous global -> shared copies (sm_80+): the whole state tile of a CTA is put in
// flight at the start without holding registers, so the prologue overlaps the state stream.
// (common/cp_async.cuh)
__device__ __forceinline__ void cpAsync16(void* smemPtr, const void* gmemPtr) { async::copy16(smemPtr, gmemPtr); }
__device__ __forceinline__ void cpAsync4(void* smemPtr, const void* gmemPtr) { async::copy4(smemPtr, gmemPtr); }
__device__ __forceinline__ void cpAsyncCommit() { async::commit(); }
__device__ __forceinline__ void cpAsyncWaitAll() { async::waitAll(); }

// Issue cp.async for rows [0, nRows) of a [rows, N] tile (row stride strideRow elements) into a dense
// shared [rows][N] buffer; 16-bit or 32-bit elements.
template <typename ElemT, int N>
__device__ __forceinline__ void tileToShared(ElemT* sDst, const ElemT* gSrc, int64_t strideRow, int nRows, int tid) {
    constexpr int kV = 16 / (int)sizeof(ElemT);
    constexpr int kPerRow = N / kV;
    for (int i = tid; i < nRows * kPerRow; i += kThreads) {
        const int r = i / kPerRow, v = i - r * kPerRow;
        cpAsync16(sDst + r * N + v * kV, gSrc + r * strideRow + v * kV);
    }
}

// Loads DK consecutive 16-bit activation values (bf16 or fp16; DK in {2, 4, 8}) with one vector load
// (global or shared memory) and converts them to float.
template <int DK>
__device__ __forceinline__ void loadAct(const uint16_t* ptr, bool bf16, float* out) {
    if constexpr (DK == 2) {
        const uint32_t w = *reinterpret_cast<const uint32_t*>(ptr);
        out[0] = actToFloat(uint16_t(w & 0xffffu), bf16);
        out[1] = actToFloat(uint16_t(w >> 16), bf16);
    } else if constexpr (DK == 4) {
        const uint2 w = *reinterpret_cast<const uint2*>(ptr);
        out[0] = actToFloat(uint16_t(w.x & 0xffffu), bf16); out[1] = actToFloat(uint16_t(w.x >> 16), bf16);
        out[2] = actToFloat(uint16_t(w.y & 0xffffu), bf16); out[3] = actToFloat(uint16_t(w.y >> 16), bf16);
    } else {
        static_assert(DK == 8, "DK");
        const uint4 w = *reinterpret_cast<const uint4*>(ptr);
        const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            out[2 * i] = actToFloat(uint16_t(ws[i] & 0xffffu), bf16);
            out[2 * i + 1] = actToFloat(uint16_t(ws[i] >> 16), bf16);
        }
    }
}

// Sum over the kLanes consecutive lanes that share one row.
template <int kLanes>
__device__ __forceinline__ float rowReduce(float v) {
#pragma unroll
    for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename StateT, int N>
struct StateChunk {
    using Lay = Layout<StateT, N>;
    float v[Lay::kRPT][Lay::kElems];

    // Rows rowBase + rg + r*kRPP (tile-local) of a dense shared [rows][N] tile; rows >= rowEnd -> 0.
    __device__ __forceinline__ void loadShared(const StateT* sTile, int rowBase, int rowEnd, int rg, int laneN) {
#pragma unroll
        for (int r = 0; r < Lay::kRPT; ++r) {
            const int row = rowBase + rg + r * Lay::kRPP;
#pragma unroll
            for (int k = 0; k < Lay::kNV; ++k) {
                if (row < rowEnd) {
                    sharedLoad(sTile + row * N + (laneN + k * Lay::kLanes) * Lay::kVec, &v[r][k * Lay::kVec]);
                } else {
#pragma unroll
                    for (int e = 0; e < Lay::kVec; ++e) v[r][k * Lay::kVec + e] = 0.f;
                }
            }
        }
    }
    __device__ __forceinline__ static void sharedLoad(const float* p, float* o) {
        const float4 t = *reinterpret_cast<const float4*>(p);
        o[0] = t.x; o[1] = t.y; o[2] = t.z; o[3] = t.w;
    }
    __device__ __forceinline__ static void sharedLoad(const __half* p, float* o) {
        const uint4 t = *reinterpret_cast<const uint4*>(p);
        const __half2* h = reinterpret_cast<const __half2*>(&t);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 f = __half22float2(h[i]);
            o[2 * i] = f.x; o[2 * i + 1] = f.y;
        }
    }
    __device__ __forceinline__ static void sharedLoad(const __nv_bfloat16* p, float* o) {
        const uint4 t = *reinterpret_cast<const uint4*>(p);
        const uint32_t* w = reinterpret_cast<const uint32_t*>(&t);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            o[2 * i] = __uint_as_float(w[i] << 16);
            o[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }

    // Rows rowBase + rg + r*kRPP for r < kRPT; rows >= rowEnd are zero-filled and skipped.
    __device__ __forceinline__ void load(const StateT* base, int64_t strideP, int rowBase, int rowEnd,
                                         int rg, int laneN) {
#pragma unroll
        for (int r = 0; r < Lay::kRPT; ++r) {
            const int row = rowBase + rg + r * Lay::kRPP;
#pragma unroll
            for (int k = 0; k < Lay::kNV; ++k) {
                if (row < rowEnd) {
                    StateIO<StateT>::load(base + row * strideP + (laneN + k * Lay::kLanes) * Lay::kVec,
                                          &v[r][k * Lay::kVec]);
                } else {
#pragma unroll
                    for (int e = 0; e < Lay::kVec; ++e) v[r][k * Lay::kVec + e] = 0.f;
                }
            }
        }
    }
    __device__ __forceinline__ void store(StateT* base, int64_t strideP, int rowBase, int rowEnd, int rg,
                                          int laneN) const {
#pragma unroll
        for (int r = 0; r < Lay::kRPT; ++r) {
            const int row = rowBase + rg + r * Lay::kRPP;
            if (row < rowEnd) {
#pragma unroll
                for (int k = 0; k < Lay::kNV; ++k)
                    StateIO<StateT>::store(base + row * strideP + (laneN + k * Lay::kLanes) * Lay::kVec,
                                           &v[r][k * Lay::kVec]);
            }
        }
    }
};

// n index of element e of this thread's row slice.
template <typename StateT, int N>
__device__ __forceinline__ int elemN(int laneN, int e) {
    using Lay = Layout<StateT, N>;
    return (laneN + (e / Lay::kVec) * Lay::kLanes) * Lay::kVec + (e % Lay::kVec);
}

}  // namespace mamba2
}  // namespace rssm
