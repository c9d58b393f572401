// Per-state-dtype launch helpers (instantiated in gdn_fp32.cu / gdn_fp16.cu / gdn_bf16.cu so the
// builds run in parallel). The launcher in gdn_launch.cu validates and picks rows_per_cta.
#pragma once
#include "gdn/gdn_kernels.cuh"
#include "gdn/gdn_tile_kernels.cuh"
#include "gdn/gdn_stream_kernels.cuh"

namespace rssm {
namespace gdn {

// Kernel configurations (threads per CTA, rows per thread per batch).
constexpr int kDecodeThreads = 128, kDecodeRpt = 2;
constexpr int kReplayStdThreads = 128, kReplayStdRpt = 2;
constexpr int kReplaySpecThreads = 256, kReplaySpecRpt = 1;

// Rows of one batch (rows handled by one CTA per loop iteration).
inline int decodeBatchRows(int K) { return kDecodeThreads / (K / 32) * kDecodeRpt; }
inline int replayBatchRows(int K, int mode) {
    return mode == GDN_REPLAY_STANDARD ? kReplayStdThreads / (K / 32) * kReplayStdRpt
                                       : kReplaySpecThreads / (K / 32) * kReplaySpecRpt;
}

template <typename ST>
cudaError_t launchDecode(const GdnDecodeParams& p, cudaStream_t s);
template <typename ST>
cudaError_t launchReplay(const GdnReplayParams& p, cudaStream_t s);
// Tile kernels (variants >= 1): p.rows_per_cta set, `smem` dynamic shared bytes (the launcher
// computes them with decodeTileSmemBytes / replayTileSmemBytes).
template <typename ST>
cudaError_t launchDecodeTile(const GdnDecodeParams& p, int smem, cudaStream_t s);
template <typename ST>
cudaError_t launchReplayTile(const GdnReplayParams& p, int smem, int full_ring, cudaStream_t s);
// Stream kernels (variants 3-5): K in {128, 256}; rows per CTA fixed by K, T and the variant.
template <typename ST>
cudaError_t launchDecodeStream(const GdnDecodeParams& p, cudaStream_t s);
template <typename ST>
cudaError_t launchReplayStream(const GdnReplayParams& p, cudaStream_t s);

template <int K, typename ST>
cudaError_t launchDecodeTileK(const GdnDecodeParams& p, int smem, cudaStream_t s) {
    auto* kern = gdnDecodeTileKernel<K, ST>;
    cudaError_t e = setSmem(kern, smem);
    if (e != cudaSuccess) return e;
    dim3 grid((p.head_v + p.rows_per_cta - 1) / p.rows_per_cta, p.num_v_heads, p.batch);
    kern<<<grid, kTileThreads, smem, s>>>(p);
    return cudaGetLastError();
}

template <int K, typename ST, int MAXT>
cudaError_t launchReplayTileKT(const GdnReplayParams& p, int smem, int full_ring, cudaStream_t s) {
    auto* kern = gdnReplayTileKernel<K, ST, MAXT>;
    cudaError_t e = setSmem(kern, smem);
    if (e != cudaSuccess) return e;
    dim3 grid((p.head_v + p.rows_per_cta - 1) / p.rows_per_cta, p.num_v_heads, p.batch);
    kern<<<grid, kTileThreads, smem, s>>>(p, full_ring);
    return cudaGetLastError();
}

template <int K, typename ST>
cudaError_t launchReplayTileK(const GdnReplayParams& p, int smem, int full_ring, cudaStream_t s) {
    if (p.mode == GDN_REPLAY_STANDARD) return launchReplayTileKT<K, ST, 1>(p, smem, full_ring, s);
    if (p.num_tokens <= 2) return launchReplayTileKT<K, ST, 2>(p, smem, full_ring, s);
    if (p.num_tokens <= 4) return launchReplayTileKT<K, ST, 4>(p, smem, full_ring, s);
    return launchReplayTileKT<K, ST, 8>(p, smem, full_ring, s);
}

template <int K, typename ST>
cudaError_t launchDecodeK(const GdnDecodeParams& p, cudaStream_t s) {
    dim3 grid((p.head_v + p.rows_per_cta - 1) / p.rows_per_cta, p.num_v_heads, p.batch);
    gdnDecodeKernel<K, ST, kDecodeThreads, kDecodeRpt><<<grid, kDecodeThreads, 0, s>>>(p);
    return cudaGetLastError();
}

template <int K, typename ST, int MAXT>
cudaError_t launchReplayKT(const GdnReplayParams& p, cudaStream_t s) {
    dim3 grid((p.head_v + p.rows_per_cta - 1) / p.rows_per_cta, p.num_v_heads, p.batch);
    if constexpr (MAXT == 1) {
        gdnReplayKernel<K, ST, 1, kReplayStdThreads, kReplayStdRpt><<<grid, kReplayStdThreads, 0, s>>>(p);
    } else {
        gdnReplayKernel<K, ST, MAXT, kReplaySpecThreads, kReplaySpecRpt>
            <<<grid, kReplaySpecThreads, 0, s>>>(p);
    }
    return cudaGetLastError();
}

template <int K, typename ST>
cudaError_t launchReplayK(const GdnReplayParams& p, cudaStream_t s) {
    if (p.mode == GDN_REPLAY_STANDARD) return launchReplayKT<K, ST, 1>(p, s);
    if (p.num_tokens <= 2) return launchReplayKT<K, ST, 2>(p, s);
    if (p.num_tokens <= 4) return launchReplayKT<K, ST, 4>(p, s);
    return launchReplayKT<K, ST, 8>(p, s);
}

template <typename ST>
cudaError_t launchDecode(const GdnDecodeParams& p, cudaStream_t s) {
    switch (p.head_k) {
        case 64: return launchDecodeK<64, ST>(p, s);
        case 128: return launchDecodeK<128, ST>(p, s);
        case 256: return launchDecodeK<256, ST>(p, s);
        default: return cudaErrorInvalidValue;
    }
}
template <typename ST>
cudaError_t launchReplay(const GdnReplayParams& p, cudaStream_t s) {
    switch (p.head_k) {
        case 64: return launchReplayK<64, ST>(p, s);
        case 128: return launchReplayK<128, ST>(p, s);
        case 256: return launchReplayK<256, ST>(p, s);
        default: return cudaErrorInvalidValue;
    }
}

template <typename ST>
cudaError_t launchDecodeTile(const GdnDecodeParams& p, int smem, cudaStream_t s) {
    switch (p.head_k) {
        case 64: return launchDecodeTileK<64, ST>(p, smem, s);
        case 128: return launchDecodeTileK<128, ST>(p, smem, s);
        case 256: return launchDecodeTileK<256, ST>(p, smem, s);
        default: return cudaErrorInvalidValue;
    }
}
template <typename ST>
cudaError_t launchReplayTile(const GdnReplayParams& p, int smem, int full_ring, cudaStream_t s) {
    switch (p.head_k) {
        case 64: return launchReplayTileK<64, ST>(p, smem, full_ring, s);
        case 128: return launchReplayTileK<128, ST>(p, smem, full_ring, s);
        case 256: return launchReplayTileK<256, ST>(p, smem, full_ring, s);
        default: return cudaErrorInvalidValue;
    }
}

template <int K, typename ST, int VAR>
cudaError_t launchDecodeStreamKV(const GdnDecodeParams& p, cudaStream_t s) {
    constexpr int rows = streamRowsPerCta(K, 1, VAR);
    dim3 grid((p.head_v + rows - 1) / rows, p.num_v_heads, p.batch);
    void* args[] = {const_cast<GdnDecodeParams*>(&p)};
    const cudaError_t e = launchMaybeDependent(reinterpret_cast<const void*>(gdnDecodeStreamKernel<K, ST, VAR>), grid,
                                               dim3(streamWarps(VAR) * 32), 0, s, args, pdlChainEnabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}
// Full-ring mode (all C ring rows copied before the cursors are read) when the grid is below two
// waves of the SMs (small batches: latency-bound, the extra ring bytes are free) and the ring fits.
int streamFullRing(long long ctas, int ring_capacity, int maxT);
template <int K, typename ST, int MAXT, int VAR>
cudaError_t launchReplayStreamKTV(const GdnReplayParams& p, cudaStream_t s) {
    constexpr int rows = streamRowsPerCta(K, MAXT, VAR);
    auto* kern = gdnReplayStreamKernel<K, ST, MAXT, VAR>;
    dim3 grid((p.head_v + rows - 1) / rows, p.num_v_heads, p.batch);
    const int full_ring = streamFullRing((long long)grid.x * grid.y * grid.z, p.ring_capacity, MAXT);
    const int smem = replayStreamSmemBytes(K, rows, full_ring ? p.ring_capacity : p.window, p.num_tokens);
    cudaError_t e = setSmem(kern, smem);
    if (e != cudaSuccess) return e;
    int fullRing = full_ring;
    void* args[] = {const_cast<GdnReplayParams*>(&p), &fullRing};
    e = launchMaybeDependent(reinterpret_cast<const void*>(kern), grid, dim3(streamWarps(VAR) * 32), smem, s, args,
                             pdlChainEnabled());
    return e != cudaSuccess ? e : cudaGetLastError();
}
template <int K, typename ST, int VAR>
cudaError_t launchReplayStreamKV(const GdnReplayParams& p, cudaStream_t s) {
    if (p.mode == GDN_REPLAY_STANDARD) return launchReplayStreamKTV<K, ST, 1, VAR>(p, s);
    if (p.num_tokens <= 2) return launchReplayStreamKTV<K, ST, 2, VAR>(p, s);
    if (p.num_tokens <= 4) return launchReplayStreamKTV<K, ST, 4, VAR>(p, s);
    return launchReplayStreamKTV<K, ST, 8, VAR>(p, s);
}
template <int K, typename ST>
cudaError_t launchDecodeStreamK(const GdnDecodeParams& p, cudaStream_t s) {
    switch (p.variant) {
        case 3: return launchDecodeStreamKV<K, ST, 3>(p, s);
        case 4: return launchDecodeStreamKV<K, ST, 4>(p, s);
        default: return launchDecodeStreamKV<K, ST, 5>(p, s);
    }
}
template <int K, typename ST>
cudaError_t launchReplayStreamK(const GdnReplayParams& p, cudaStream_t s) {
    switch (p.variant) {
        case 3: return launchReplayStreamKV<K, ST, 3>(p, s);
        case 4: return launchReplayStreamKV<K, ST, 4>(p, s);
        default: return launchReplayStreamKV<K, ST, 5>(p, s);
    }
}
template <typename ST>
cudaError_t launchDecodeStream(const GdnDecodeParams& p, cudaStream_t s) {
    switch (p.head_k) {
        case 128: return launchDecodeStreamK<128, ST>(p, s);
        case 256: return launchDecodeStreamK<256, ST>(p, s);
        default: return cudaErrorInvalidValue;
    }
}
template <typename ST>
cudaError_t launchReplayStream(const GdnReplayParams& p, cudaStream_t s) {
    switch (p.head_k) {
        case 128: return launchReplayStreamK<128, ST>(p, s);
        case 256: return launchReplayStreamK<256, ST>(p, s);
        default: return cudaErrorInvalidValue;
    }
}

// Explicit instantiations live in gdn_<dtype>.cu; other translation units only reference them.
#define RSSM_GDN_EXTERN(ST)                                                                        \
    extern template cudaError_t launchDecode<ST>(const GdnDecodeParams&, cudaStream_t);            \
    extern template cudaError_t launchReplay<ST>(const GdnReplayParams&, cudaStream_t);            \
    extern template cudaError_t launchDecodeTile<ST>(const GdnDecodeParams&, int, cudaStream_t);   \
    extern template cudaError_t launchReplayTile<ST>(const GdnReplayParams&, int, int, cudaStream_t); \
    extern template cudaError_t launchDecodeStream<ST>(const GdnDecodeParams&, cudaStream_t);      \
    extern template cudaError_t launchReplayStream<ST>(const GdnReplayParams&, cudaStream_t);
#define RSSM_GDN_INSTANTIATE(ST)                                                            \
    template cudaError_t launchDecode<ST>(const GdnDecodeParams&, cudaStream_t);            \
    template cudaError_t launchReplay<ST>(const GdnReplayParams&, cudaStream_t);            \
    template cudaError_t launchDecodeTile<ST>(const GdnDecodeParams&, int, cudaStream_t);   \
    template cudaError_t launchReplayTile<ST>(const GdnReplayParams&, int, int, cudaStream_t); \
    template cudaError_t launchDecodeStream<ST>(const GdnDecodeParams&, cudaStream_t);      \
    template cudaError_t launchReplayStream<ST>(const GdnReplayParams&, cudaStream_t);

}  // namespace gdn
}  // namespace rssm
