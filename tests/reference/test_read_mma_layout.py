"""CPU check of the tensor-core read-copy readout's operand layout (reference/read_mma.py mirrors
common/read_mma.cuh): each lane's accumulator is the dot of its own thread set's columns, the four thread sets of a
row cover its 128 columns once, nvfp4's accumulators separate a lane's two 16-element scale blocks, the e2m1 -> e4m3
widening is exact for every code, and the staged rows' swizzle is a bijection without bank conflicts for the
quarter-warp reads. The CUDA kernel itself is checked on the GPU (tests/kernels/test_dual_precision.py)."""
import pytest
import torch

from replayssm_trtllm.formats.codec import e2m1_values, e4m3_values
from replayssm_trtllm.reference.read_mma import (FORMATS, ROW_BYTES, e2m1_words_to_e4m3, fast_div, fast_div_multiplier,
                                                 kpairs, mma_partials, staged_chunk_offset, thread_set,
                                                 transposed_pair_sums)


@pytest.mark.parametrize("fmt", FORMATS)
def test_thread_sets_partition_the_row(fmt):
    cols = sorted(c for t in range(4) for c in thread_set(fmt, t))
    assert cols == list(range(128))
    # each k16 block takes four distinct natural indices, and the 8 blocks take all 32
    used = sorted(i for j in range(8) for pair in kpairs(fmt, j) for i in pair)
    assert used == list(range(32))


@pytest.mark.parametrize("fmt", FORMATS)
def test_lane_partials_are_thread_set_dots(fmt):
    g = torch.Generator().manual_seed(7)
    S = torch.randn(16, 128, generator=g, dtype=torch.float64)
    c = torch.randn(128, generator=g, dtype=torch.float64)
    part = mma_partials(fmt, S, c)
    for lane in range(32):
        gg, t = lane >> 2, lane & 3
        cols = torch.tensor(thread_set(fmt, t))
        for k, row in enumerate((2 * gg, 2 * gg + 1)):
            if fmt == "nvfp4":  # accumulator 0: the lane's first scale block (columns 32t .. 32t + 15)
                lo, hi = cols[:16], cols[16:]
                assert torch.allclose(part[lane, k, 0], (S[row, lo] * c[lo]).sum(), rtol=1e-12, atol=1e-12)
                assert torch.allclose(part[lane, k, 1], (S[row, hi] * c[hi]).sum(), rtol=1e-12, atol=1e-12)
                assert int(lo[0]) // 16 == 2 * t and int(hi[0]) // 16 == 2 * t + 1
                assert len(set(int(x) // 16 for x in lo)) == 1 and len(set(int(x) // 16 for x in hi)) == 1
            else:
                assert torch.allclose(part[lane, k, 0], (S[row, cols] * c[cols]).sum(), rtol=1e-12, atol=1e-12)
                assert part[lane, k, 1] == 0
    # a row's dot = the sum over its four lanes
    rows = part.sum(dim=2).view(8, 4, 2).sum(dim=1)  # [g][row 2g / 2g + 1]
    assert torch.allclose(rows.reshape(16), S @ c, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fmt", FORMATS)
def test_two_vector_partials(fmt):
    """The GDN readout's B operand: k in column 2t and q in column 2t + 1 of thread set t; a lane's accumulators are
    its partial dots with both, and the single-vector columns (odd ones) stay zero in the one-vector form."""
    g = torch.Generator().manual_seed(11)
    S = torch.randn(16, 128, generator=g, dtype=torch.float64)
    k, q = (torch.randn(128, generator=g, dtype=torch.float64) for _ in range(2))
    part = mma_partials(fmt, S, k, q)  # [lane, row, accumulator, vector]
    rows = part.sum(dim=2).view(8, 4, 2, 2).sum(dim=1)  # [g][row][vector]
    assert torch.allclose(rows[..., 0].reshape(16), S @ k, rtol=1e-12, atol=1e-12)
    assert torch.allclose(rows[..., 1].reshape(16), S @ q, rtol=1e-12, atol=1e-12)
    one = mma_partials(fmt, S, k)
    assert torch.allclose(one, part[..., 0], rtol=1e-12, atol=1e-12)


def test_e2m1_to_e4m3_widening_every_code_every_nibble():
    e2m1, e4m3 = e2m1_values().double(), e4m3_values().double()
    codes = torch.arange(16, dtype=torch.int64)
    for q in range(8):
        other = (15 - codes) if q % 2 else (codes * 5 + 3) % 16
        w = (codes << (4 * q)) | (other << (4 * ((q + 3) % 8)))
        ev, od = e2m1_words_to_e4m3(w)
        word, byte = (ev, q // 2) if q % 2 == 0 else (od, q // 2)
        b = (word >> (8 * byte)) & 0xFF
        assert torch.equal(e4m3[b] * 64.0, e2m1[codes]), f"nibble {q}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_staged_swizzle_bijective_and_conflict_free(fmt):
    rb = ROW_BYTES[fmt]
    offs = {staged_chunk_offset(fmt, r, c) for r in range(16) for c in range(rb // 16)}
    assert offs == set(range(0, 16 * rb, 16))
    # quarter warp p (lanes 8p .. 8p + 7 = g in {2p, 2p + 1}, t 0..3) reads chunk (4 i + t) (nvfp4: chunk t) of row
    # 2g (or 2g + 1): eight 16-byte reads in eight different 16-byte bank groups
    for p in range(4):
        for odd in (0, 1):
            for i in range(rb // 64):
                groups = set()
                for gg in (2 * p, 2 * p + 1):
                    for t in range(4):
                        ch = t if fmt == "nvfp4" else 4 * i + t
                        groups.add((staged_chunk_offset(fmt, 2 * gg + odd, ch) // 16) % 8)
                assert len(groups) == 8, (fmt, p, odd, i, groups)


def test_transposed_pair_reduction_gives_each_row_to_its_lanes():
    """After the two xor steps, lanes t = 0 / 2 of group g hold row 2g's full sum and t = 1 / 3 row 2g + 1's (the
    epilogue stores row 2g + t from lane t < 2)."""
    g = torch.Generator().manual_seed(11)
    pg = torch.randn(32, generator=g, dtype=torch.float64).tolist()
    pg1 = torch.randn(32, generator=g, dtype=torch.float64).tolist()
    out = transposed_pair_sums(pg, pg1)
    for lane in range(32):
        grp, t = lane >> 2, lane & 3
        src = pg1 if t & 1 else pg
        want = sum(src[4 * grp + k] for k in range(4))
        assert abs(out[lane] - want) < 1e-12, (lane, out[lane], want)


def test_fast_division_is_exact_below_two_to_the_sixteen():
    """fastDiv(n, d, fastDivMultiplier(d)) == n // d for every divisor d < 2^16 at the quotient boundaries
    (n = k d - 1, k d) and at n = 2^16 - 1: the readouts divide a head index by the heads per group with it."""
    for d in range(1, 1 << 16):
        m = fast_div_multiplier(d)
        ks = torch.arange(1, (0xFFFF // d) + 2, dtype=torch.int64)
        ns = torch.cat([ks * d - 1, ks * d, torch.tensor([0xFFFF])])
        ns = ns[(ns >= 0) & (ns < (1 << 16))]
        if d == 1:
            assert all(fast_div(int(n), 1, m) == int(n) for n in ns[:8])
            continue
        got = (ns * m) >> 32
        assert torch.equal(got, ns // d), d
