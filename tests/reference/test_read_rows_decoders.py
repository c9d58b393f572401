"""CPU check of the split read-copy readouts' row decoders (reference/read_rows.py mirrors
common/read_rows.cuh): rebiased code values times one factor per row / block reproduce
replayssm_trtllm.formats.decode bit for bit, for every code and for random states."""
import pytest
import torch

from replayssm_trtllm.formats import decode, encode
from replayssm_trtllm.formats.codec import e2m1_values, e4m3_values
from replayssm_trtllm.reference.read_rows import (decode_rows, fp8_quad_decode, nvfp4_block_factor,
                                                   nvfp4_quad_decode)


def _bits(t):
    return t.contiguous().view(torch.int32)


def test_fp8_quad_decode_every_code():
    codes = torch.arange(256, dtype=torch.int64)
    # word with the code in byte k, the other bytes different codes, for every position k
    for k in range(4):
        w = codes << (8 * k) | ((codes + 1) % 256) << (8 * ((k + 1) % 4))
        vals = fp8_quad_decode(w)[:, k]
        want = e4m3_values().float()[codes] * (2.0 ** -8)
        finite = (codes & 0x7F) != 0x7F  # the NaN code rebiases to a finite value; its scale is NaN
        assert torch.equal(vals[finite], want[finite])


def test_nvfp4_quad_decode_every_code():
    codes = torch.arange(16, dtype=torch.int64)
    for k in range(4):
        w16 = codes << (4 * k) | ((15 - codes) << (4 * ((k + 2) % 4)))
        vals = nvfp4_quad_decode(w16)[:, k]
        want = e2m1_values().float()[codes] * (2.0 ** -14)
        assert torch.equal(vals, want), f"nibble {k}"


def test_nvfp4_block_factor_every_scale_code():
    bs = torch.arange(256, dtype=torch.int64)
    g = torch.full((256,), 0.37, dtype=torch.float32)
    f = nvfp4_block_factor(bs, g)
    want = (e4m3_values().double()[bs] * g.double()).float() * 16384.0
    nan = (bs & 0x7F) == 0x7F
    assert torch.isnan(f[nan]).all() and torch.equal(f[~nan], want[~nan])


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_decode_rows_matches_formats(fmt, seed):
    g = torch.Generator().manual_seed(seed)
    # states [S, H, P, N] with rows spanning many binades, a zero block and an all-zero state
    x = torch.randn(3, 2, 24, 128, generator=g) * torch.exp2(torch.randint(-12, 12, (3, 2, 24, 1), generator=g).float())
    x[0, 1, 3, :16] = 0.0
    x[2, 0] = 0.0
    enc = encode(x, fmt, "rtn")
    assert torch.equal(_bits(decode_rows(enc)), _bits(decode(enc)))
    enc_sr = encode(x, fmt, "sr", words=torch.randint(0, 2 ** 31, x.shape, generator=g, dtype=torch.int64))
    assert torch.equal(_bits(decode_rows(enc_sr)), _bits(decode(enc_sr)))


def test_decode_rows_rejects_other_formats():
    with pytest.raises(ValueError, match="format must be 'fp8_e4m3' or 'nvfp4'; got 'fp16'"):
        decode_rows(encode(torch.randn(2, 128), "fp16"))
