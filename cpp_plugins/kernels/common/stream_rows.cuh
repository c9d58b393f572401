// Row-streaming building blocks shared by the "stream" decode kernels (GDN variants 3-5,
// gdn/gdn_stream_kernels.cuh; Mamba-2 variant 3, mamba2/mamba2_stream_kernel.cuh): a warp holds RW
// state rows in registers in a column-per-lane layout (lane l owns the 4-element quads l + 32 i of
// every row), row dot products are reduced with a select-free reduce-scatter over XOR-permuted
// register slots. Pure CUDA.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

namespace rssm {
namespace stream {

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float4 u2ToF4(uint2 r, bool bf16) {
    float4 f;
    if (bf16) {
        const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.x));
        const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r.y));
        f = make_float4(lo.x, lo.y, hi.x, hi.y);
    } else {
        const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&r.x));
        const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&r.y));
        f = make_float4(lo.x, lo.y, hi.x, hi.y);
    }
    return f;
}

// 4 consecutive state elements (16-byte fp32 / 8-byte 16-bit) <-> float4, streaming cache hints.
template <typename ST>
struct StateRow4;
template <>
struct StateRow4<float> {
    static __device__ __forceinline__ float4 ld(const float* p) {
        return __ldcs(reinterpret_cast<const float4*>(p));
    }
    static __device__ __forceinline__ void st(float* p, float4 v) {
        __stcs(reinterpret_cast<float4*>(p), v);
    }
};
template <>
struct StateRow4<__half> {
    static __device__ __forceinline__ float4 ld(const __half* p) {
        return u2ToF4(__ldcs(reinterpret_cast<const uint2*>(p)), false);
    }
    static __device__ __forceinline__ void st(__half* p, float4 v) {
        __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
        uint2 r;
        r.x = *reinterpret_cast<uint32_t*>(&lo);
        r.y = *reinterpret_cast<uint32_t*>(&hi);
        __stcs(reinterpret_cast<uint2*>(p), r);
    }
};
template <>
struct StateRow4<__nv_bfloat16> {
    static __device__ __forceinline__ float4 ld(const __nv_bfloat16* p) {
        return u2ToF4(__ldcs(reinterpret_cast<const uint2*>(p)), true);
    }
    static __device__ __forceinline__ void st(__nv_bfloat16* p, float4 v) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
        uint2 r;
        r.x = *reinterpret_cast<uint32_t*>(&lo);
        r.y = *reinterpret_cast<uint32_t*>(&hi);
        __stcs(reinterpret_cast<uint2*>(p), r);
    }
};

__device__ __forceinline__ float dot4(float4 a, float4 b) {
    return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
__device__ __forceinline__ float4 scale4(float4 a, float s) {
    return make_float4(a.x * s, a.y * s, a.z * s, a.w * s);
}
__device__ __forceinline__ float4 fma4s(float4 acc, float w, float4 k) {
    acc.x = fmaf(w, k.x, acc.x);
    acc.y = fmaf(w, k.y, acc.y);
    acc.z = fmaf(w, k.z, acc.z);
    acc.w = fmaf(w, k.w, acc.w);
    return acc;
}

// Reduce-scatter of RW per-row partial sums over a warp. Register slot r of a lane holds row
// r ^ rowOf(lane) (XOR-permuted slots, see RowScatter): level (W, M) adds the partner's (lane ^ M)
// slot i + W into slot i, which is the same row on both sides, so no selects are needed; after
// log2(RW) levels slot 0 holds the sum over the 32 / RW lanes of one group for row rowOf(lane),
// the final xor levels complete it.
template <int RW, int W, int M>
__device__ __forceinline__ void rsLevel(float (&a)[RW]) {
    if constexpr (W >= 1) {
#pragma unroll
        for (int i = 0; i < W; ++i) a[i] += __shfl_xor_sync(kFull, a[i + W], M);
        rsLevel<RW, W / 2, M / 2>(a);
    }
}
template <int RW>
struct RowScatter {
    static constexpr int LPR = 32 / RW;  // lanes per row after the reduction
    // Row whose full sum `reduce` leaves in `lane`.
    static __device__ __forceinline__ int rowOf(int lane) {
        int r = 0;
#pragma unroll
        for (int w = RW / 2, m = 16; w >= 1; w >>= 1, m >>= 1)
            if (lane & m) r += w;
        return r;
    }
    // Lowest lane holding row r.
    static __device__ __forceinline__ int laneOf(int r) {
        int l = 0;
#pragma unroll
        for (int w = RW / 2, m = 16; w >= 1; w >>= 1, m >>= 1)
            if (r & w) l |= m;
        return l;
    }
    // Slot r of a lane holds row slotRow(r, rowOf(lane)).
    static __device__ __forceinline__ int slotRow(int r, int rl) { return r ^ rl; }
    // a[r] = partial sum of row slotRow(r, rowOf(lane)); returns the full sum of row rowOf(lane).
    static __device__ __forceinline__ float reduce(float (&a)[RW], int lane) {
        rsLevel<RW, RW / 2, 16>(a);
        float x = a[0];
#pragma unroll
        for (int m = LPR / 2; m >= 1; m >>= 1) x += __shfl_xor_sync(kFull, x, m);
        return x;
    }
    // Sum over the LPR lanes of a row (all lanes call it).
    static __device__ __forceinline__ float rowLanesSum(float x) {
#pragma unroll
        for (int m = LPR / 2; m >= 1; m >>= 1) x += __shfl_xor_sync(kFull, x, m);
        return x;
    }
};

// Row dot products S[row] . w of the warp's RW rows (w: this lane's quads of the vector), reduce-scattered: the
// full dot of row rowOf(lane) (RowScatter<RW>::reduce).
template <int RW, int QPL>
__device__ __forceinline__ float warpRowDot(const float4 (&S)[RW][QPL], const float4 (&w)[QPL], int lane) {
    float part[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        part[r] = dot4(S[r][0], w[0]);
#pragma unroll
        for (int i = 1; i < QPL; ++i) part[r] += dot4(S[r][i], w[i]);
    }
    return RowScatter<RW>::reduce(part, lane);
}

// The warp's RW rows (row vw + (r ^ rl) into slot r; rows >= nv are zero) and their stores.
// An fp32 state quad with the L2 prefetch-size hint: the L2 fetches the aligned 256 bytes around it from DRAM
// (ld.global.cs.L2::256B). The warp's rows are read in 64-byte pieces of eight rows per instruction (XOR-permuted
// slots), so the hint asks DRAM for whole 256-byte blocks up front. PF = 1 in loadWarpRows selects it (fp32 state
// only; other states ignore PF).
__device__ __forceinline__ float4 ldStreamPf256(const float* p) {
    float4 v;
    asm("ld.global.cs.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p));
    return v;
}
template <int PF, typename ST>
__device__ __forceinline__ float4 ldStateQuad(const ST* p) {
    if constexpr (PF == 1 && std::is_same<ST, float>::value) return ldStreamPf256(p);
    else return StateRow4<ST>::ld(p);
}

template <int RW, int QPL, typename ST, int PF = 0>
__device__ __forceinline__ void loadWarpRows(float4 (&S)[RW][QPL], const ST* base, int64_t stride_v, int vw, int nv,
                                             int rl, int lane) {
    const ST* rp = base + (int64_t)vw * stride_v + lane * 4;
    if (vw + RW <= nv) {
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const ST* q = rp + (int64_t)(r ^ rl) * stride_v;
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = ldStateQuad<PF>(q + 128 * i);
        }
    } else {
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const ST* q = rp + (int64_t)(r ^ rl) * stride_v;
#pragma unroll
            for (int i = 0; i < QPL; ++i)
                S[r][i] = vw + (r ^ rl) < nv ? ldStateQuad<PF>(q + 128 * i) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
}
template <int RW, int QPL, typename ST>
__device__ __forceinline__ void storeWarpRows(const float4 (&S)[RW][QPL], ST* base, int64_t stride_v, int vw, int nv,
                                              int rl, int lane) {
    ST* rp = base + (int64_t)vw * stride_v + lane * 4;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        if (vw + (r ^ rl) < nv) {
            ST* q = rp + (int64_t)(r ^ rl) * stride_v;
#pragma unroll
            for (int i = 0; i < QPL; ++i) StateRow4<ST>::st(q + 128 * i, S[r][i]);
        }
    }
}

// 8 packed 16-bit values (element k in word k / 2, half k % 2) -> element r of the result is element
// r ^ rl of q (the XOR-permuted register slots of stream::RowScatter<8>).
__device__ __forceinline__ uint4 xorPermute8(uint4 q, int rl) {
    const unsigned sel = (rl & 1) ? 0x1032u : 0x3210u;
    q.x = __byte_perm(q.x, 0u, sel);
    q.y = __byte_perm(q.y, 0u, sel);
    q.z = __byte_perm(q.z, 0u, sel);
    q.w = __byte_perm(q.w, 0u, sel);
    if (rl & 2) {
        const unsigned t0 = q.x, t1 = q.z;
        q.x = q.y; q.y = t0;
        q.z = q.w; q.w = t1;
    }
    if (rl & 4) {
        const unsigned t0 = q.x, t1 = q.y;
        q.x = q.z; q.y = q.w;
        q.z = t0; q.w = t1;
    }
    return q;
}
__device__ __forceinline__ void unpack8(uint4 q, bool bf16, float (&f)[8]) {
    const float4 a = stream::u2ToF4(make_uint2(q.x, q.y), bf16), c = stream::u2ToF4(make_uint2(q.z, q.w), bf16);
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
    f[4] = c.x; f[5] = c.y; f[6] = c.z; f[7] = c.w;
}

// Fold of n records staged in shared memory into the warp's rows (the split readouts' flush): record j is a
// 16-bit row of `stride` elements at buf + j * stride (this lane's quads lane + 32 i), w[j * RW + row] its
// weight for each of the warp's rows; S[r] += w[j][row of slot r] * record j.
template <int RW, int QPL>
__device__ __forceinline__ void foldStagedRecords(float4 (&S)[RW][QPL], const uint16_t* buf, int stride, const float* w,
                                                  int n, int rl, int lane, bool bf16) {
#pragma unroll 1
    for (int jj = 0; jj < n; ++jj) {
        float4 vq[QPL];
#pragma unroll
        for (int i = 0; i < QPL; ++i)
            vq[i] = u2ToF4(*reinterpret_cast<const uint2*>(buf + jj * stride + lane * 4 + 128 * i), bf16);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const float wr = w[jj * RW + (r ^ rl)];
#pragma unroll
            for (int i = 0; i < QPL; ++i) S[r][i] = fma4s(S[r][i], wr, vq[i]);
        }
    }
}

// Warp-granular items it = (b H + head) nrb + blk (row b, head, row block) walked grid-strided without a
// division in the loop: the warp's first item and the grid stride are split into (b, head, blk) once, then
// items advance by carries. 32-bit: the launchers keep B x H x nrb below 2^31. Split readouts of both
// families.
struct ItemCursor {
    int b, head, blk;
};
struct ItemWalker {
    int H, nrb, stepB, stepHead, stepBlk;
    __device__ __forceinline__ ItemWalker(int heads, int blocks, unsigned stride) : H(heads), nrb(blocks) {
        const unsigned rowItems = (unsigned)heads * blocks;
        stepB = (int)(stride / rowItems);
        const unsigned rem = stride - (unsigned)stepB * rowItems;
        stepHead = (int)(rem / (unsigned)blocks);
        stepBlk = (int)(rem - (unsigned)stepHead * blocks);
    }
    __device__ __forceinline__ ItemCursor at(unsigned it) const {
        const unsigned rowItems = (unsigned)H * nrb;
        ItemCursor c;
        c.b = (int)(it / rowItems);
        const unsigned rem = it - (unsigned)c.b * rowItems;
        c.head = (int)(rem / (unsigned)nrb);
        c.blk = (int)(rem - (unsigned)c.head * nrb);
        return c;
    }
    __device__ __forceinline__ ItemCursor next(ItemCursor c) const {
        c.blk += stepBlk;
        c.head += stepHead;
        if (c.blk >= nrb) { c.blk -= nrb; ++c.head; }
        c.b += stepB;
        if (c.head >= H) { c.head -= H; ++c.b; }
        return c;
    }
};

// Cursor words of a split kernel's head record (Mamba-2 variant 4 and GDN variant 6 share the layout): [8] the
// fold's checkpoint decay, [9] nf (int bits; -1 marks invalid cursors), [10] o, [11] h (int bits). The readout
// reads them as one int4 at rec + 8. One lane calls it.
__device__ __forceinline__ void putSplitRecordCursors(float* rec, float gfold, int nf, int o, int h) {
    rec[8] = gfold;
    rec[9] = __int_as_float(nf);
    rec[10] = __int_as_float(o);
    rec[11] = __int_as_float(h);
}

}  // namespace stream
}  // namespace rssm
