"""The tensor-core read-copy readout's operand layout (cpp_plugins/kernels/common/read_mma.cuh) in torch, for a CPU
check of the scheme it relies on. Mirrors, not shares, the CUDA source: keep the two in step.

A warp computes the dots of 16 staged state rows (128 columns, fp16 / fp8-e4m3 / nvfp4 read copy) with one vector C
on m16n8k16 mma. Lane (g, t) feeds the mma's rows g and g + 8 from the tile's rows 2g and 2g + 1 and only the 32
columns of its "thread set" t, in a fixed order (its "natural" order li = 0..31); B column 2t carries C at thread
set t's columns, so the lane's accumulator is its own partial dot. What this module reproduces:

* ``thread_set(fmt, t)``: the columns of thread set t in natural order (``setChunk``);
* ``kpairs(fmt, j)``: the natural indices of k-block j's two A / B pairs (``TileFragments`` / ``VectorFragments``);
* ``e2m1_words_to_e4m3``: the shift that widens 8 e2m1 codes of a word into e4m3 bytes (evens / odds);
* ``mma_partials``: the accumulators of every lane (one vector, or k and q for GDN), by the m16n8k16 fragment rules,
  in float64;
* ``staged_chunk_offset``: the shared-memory swizzle of the staged rows.
"""
from __future__ import annotations

import torch

__all__ = ["FORMATS", "ROW_BYTES", "thread_set", "kpairs", "e2m1_words_to_e4m3", "mma_partials",
           "staged_chunk_offset", "transposed_pair_sums", "fast_div_multiplier", "fast_div"]

FORMATS = ("fp16", "fp8_e4m3", "nvfp4")
ROW_BYTES = {"fp16": 256, "fp8_e4m3": 128, "nvfp4": 64}


def _set_chunk(fmt: str, i: int, t: int) -> int:
    if fmt == "fp16":
        return 32 * i + 8 * t
    if fmt == "fp8_e4m3":
        return 64 * (i >> 1) + 16 * t + 8 * (i & 1)
    return 32 * t + 8 * i


def thread_set(fmt: str, t: int) -> list:
    """Columns of thread set t in natural order (4 chunks of 8)."""
    return [_set_chunk(fmt, i, t) + k for i in range(4) for k in range(8)]


def kpairs(fmt: str, j: int):
    """Natural indices (a0 / b0 pair, a2 / b1 pair) of k16 block j (0..7)."""
    if fmt == "nvfp4":
        e = 8 * (j >> 1) + 4 * (j & 1)
        return (e, e + 2), (e + 1, e + 3)
    return (4 * j, 4 * j + 1), (4 * j + 2, 4 * j + 3)


def e2m1_words_to_e4m3(w: torch.Tensor):
    """uint32 words (int64) of 8 e2m1 codes (nibble q = code q) -> (evens, odds) words of 4 e4m3 bytes each, byte k =
    code 2k (evens) / 2k + 1 (odds), of value code value x 2^-6."""
    w = w & 0xFFFFFFFF
    ev = ((w << 2) & 0x1C1C1C1C) | ((w << 4) & 0x80808080)
    od = ((w >> 2) & 0x1C1C1C1C) | (w & 0x80808080)
    return ev & 0xFFFFFFFF, od & 0xFFFFFFFF


def mma_partials(fmt: str, S: torch.Tensor, c: torch.Tensor, c2: torch.Tensor = None) -> torch.Tensor:
    """Accumulators of the 32 lanes for a [16, 128] tile S and vector c (float64): [32, 2 rows, 2 accumulators] where
    row 0 / 1 = tile rows 2g / 2g + 1 and accumulator 1 holds k blocks 4-7 for nvfp4 (its second scale block; zero
    otherwise), built by the m16n8k16 fragment rules from the lane-held operands. With a second vector c2 (the GDN
    readout: c = k, c2 = q) lanes g = 2t + 1 carry it in column 2t + 1 and the result is [32, 2 rows, 2 accumulators,
    2 vectors] (the lane's c0 / c1 and c2 / c3)."""
    two = c2 is not None
    acc = torch.zeros(2, 16, 8, dtype=torch.float64)  # [accumulator][mma row][column]
    for j in range(8):
        A = torch.zeros(16, 16, dtype=torch.float64)
        B = torch.zeros(16, 8, dtype=torch.float64)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            cols = thread_set(fmt, t)
            p0, p1 = kpairs(fmt, j)
            # A: a0 (row g, k 2t..), a1 (row g + 8, k 2t..), a2 (row g, k 8 + 2t..), a3 (row g + 8, k 8 + 2t..)
            for mrow, srow in ((g, 2 * g), (g + 8, 2 * g + 1)):
                A[mrow, 2 * t:2 * t + 2] = S[srow, [cols[p0[0]], cols[p0[1]]]]
                A[mrow, 8 + 2 * t:8 + 2 * t + 2] = S[srow, [cols[p1[0]], cols[p1[1]]]]
            # B column g: lanes g = 2t carry thread set t's c; b0 = k rows 2t, 2t + 1, b1 = k rows 8 + 2t, 9 + 2t
            if (g >> 1) == t if two else g == 2 * t:
                vec = c2 if (two and g & 1) else c
                B[2 * t:2 * t + 2, g] = vec[[cols[p0[0]], cols[p0[1]]]]
                B[8 + 2 * t:8 + 2 * t + 2, g] = vec[[cols[p1[0]], cols[p1[1]]]]
        acc[1 if (fmt == "nvfp4" and j >= 4) else 0] += A @ B
    out = torch.zeros(32, 2, 2, 2, dtype=torch.float64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for a in range(2):
            for v in range(2):
                out[lane, 0, a, v] = acc[a, g, 2 * t + v]      # c0 / c1: row g, columns 2t / 2t + 1
                out[lane, 1, a, v] = acc[a, g + 8, 2 * t + v]  # c2 / c3: row g + 8
    return out if two else out[..., 0]


def staged_chunk_offset(fmt: str, r: int, c: int) -> int:
    """Byte offset of 16-byte chunk c of tile row r in the staged tile (``stagedChunkOffset``)."""
    if fmt == "nvfp4":
        return (r ^ ((r >> 1) & 1)) * 64 + 16 * c
    return r * ROW_BYTES[fmt] + 16 * (c ^ (((r >> 1) & 1) << 2))


def transposed_pair_sums(pg, pg1) -> list:
    """Per-lane values after the readouts' transposed row-pair reduction (mamba2_read_mma_kernel.cuh,
    gdn_read_mma_kernel.cuh): pg / pg1 are the 32 lanes' partials of rows 2g / 2g + 1 (lane = 4g + t). Step 1 (xor 1):
    even-t lanes keep pg and add the odd neighbour's pg, odd-t lanes keep pg1 and add the even neighbour's pg1; step 2
    (xor 2) adds the lane two away. Lane (g, t) ends with the full sum of row 2g + (t & 1) over the group's four lanes."""
    odd = [lane & 1 for lane in range(32)]
    v = [pg1[lane] if odd[lane] else pg[lane] for lane in range(32)]
    send = [pg[lane] if odd[lane] else pg1[lane] for lane in range(32)]
    v = [v[lane] + send[lane ^ 1] for lane in range(32)]
    return [v[lane] + v[lane ^ 2] for lane in range(32)]


def fast_div_multiplier(d: int) -> int:
    """``fastDivMultiplier`` (common/read_mma_walk.cuh): ceil(2^32 / d), 0 for d <= 1."""
    return 0 if d <= 1 else (2 ** 32 + d - 1) // d


def fast_div(n: int, d: int, m: int) -> int:
    """``fastDiv``: n / d as the high 32 bits of n * m (exact for n * d < 2^32)."""
    return n if d == 1 else (n * m) >> 32
