"""Exact encode / decode of the checkpoint formats (docs/formats.md).

RTN is checked against a brute-force nearest search over the full e4m3fn / e2m1 grids and random fp16 /
bf16 values (ties to even); SR for unbiasedness within 5 sigma, reproducibility and key dependence.
"""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm_trtllm.formats import (BF16, E2M1, E4M3, FORMATS, FP16, PhiloxKey, decode, e2m1_values,
                                      e4m3_values, encode, quantize_dequantize, round_to_codes, sr_words,
                                      value_table)

SPECS = {"fp16": FP16, "bf16": BF16, "e4m3": E4M3, "e2m1": E2M1}


def grid(spec):
    """float64 magnitudes of the finite codes 0..max_code (ascending)."""
    return value_table(spec)[: spec.max_code + 1].double()


def brute_rtn(x: torch.Tensor, spec) -> torch.Tensor:
    """Nearest finite grid magnitude code (ties to the even code), sign bit added; saturating search."""
    g = grid(spec)
    codes = torch.arange(len(g))
    out = []
    for chunk in x.split(256):
        a = chunk.abs().double()
        d = (a[:, None] - g[None, :]).abs()
        cand = d == d.min(dim=1, keepdim=True).values
        even = cand & (codes % 2 == 0)[None, :]
        pick = torch.where(even.any(1), even.int().argmax(1), cand.int().argmax(1))
        out.append(pick | (torch.signbit(chunk).long() << spec.sign_bit))
    return torch.cat(out)


def probe_values(spec, n_random=4000, seed=0):
    """Grid points, midpoints (ties), midpoints +- 1 fp32 ulp, and log-uniform randoms, both signs."""
    g = grid(spec).float()
    mids = ((g[1:].double() + g[:-1].double()) / 2).float()
    inf = torch.tensor(float("inf"))
    near = torch.cat([torch.nextafter(mids, inf), torch.nextafter(mids, -inf)])
    gen = torch.Generator().manual_seed(seed)
    lo, hi = math.log2(float(g[1])) - 3, math.log2(float(g[-1])) + 0.9
    rnd = torch.exp2(torch.rand(n_random, generator=gen, dtype=torch.float64) * (hi - lo) + lo).float()
    v = torch.cat([g, mids, near, rnd])
    return torch.cat([v, -v])


# ---------------------------------------------------------------- RTN: brute force over the grids
@pytest.mark.parametrize("name", ["e4m3", "e2m1"])
def test_rtn_full_grid_brute_force(name):
    spec = SPECS[name]
    x = probe_values(spec)
    if spec is E2M1:   # no NaN code: only magnitudes within range are a grid question; saturation below
        x = x[x.abs() <= 6.0 * 1.2]
    assert torch.equal(round_to_codes(x, spec, "rtn"), brute_rtn(x, spec))


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_rtn_random_brute_force(name):
    spec = SPECS[name]
    gen = torch.Generator().manual_seed(1)
    g = grid(spec)
    idx = torch.randint(1, len(g) - 1, (600,), generator=gen)
    mids = ((g[idx] + g[idx + 1]) / 2).float()          # exact ties (fp32 has room)
    emin, emax = spec.emin - spec.mant_bits - 1, math.log2(spec.max_value)
    rnd = torch.exp2(torch.rand(1200, generator=gen, dtype=torch.float64) * (emax - emin) + emin).float()
    x = torch.cat([mids, rnd, -rnd[:300]])
    x = x[x.abs() <= spec.max_value]
    assert torch.equal(round_to_codes(x, spec, "rtn"), brute_rtn(x, spec))


def test_e2m1_ties_to_even_examples():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0, 7.0, 100.0])
    vals = e2m1_values()[round_to_codes(x, E2M1, "rtn")]
    assert vals.tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -0.0, -4.0, 6.0, 6.0]
    assert torch.signbit(vals[7])


@pytest.mark.parametrize("fmt,torch_dtype", [("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_rtn_matches_torch_cast(fmt, torch_dtype):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(100_000, generator=gen) * torch.exp2(torch.randn(100_000, generator=gen) * 12)
    x = torch.cat([x, torch.tensor([0.0, -0.0, 65504.0, 65519.99, 65520.0, -1e6, float("inf"), 1e-9, 6e-8])])
    enc = encode(x, fmt)
    assert torch.equal(enc.data.view(torch.int16), x.to(torch_dtype).view(torch.int16))


@settings(max_examples=300, deadline=None)
@given(st.floats(width=32, allow_nan=False))
def test_rtn_fp16_property(v):
    x = torch.tensor([v], dtype=torch.float32)
    assert encode(x, "fp16").data.view(torch.int16).item() == x.half().view(torch.int16).item()


def test_rtn_e4m3_matches_torch_float8():
    gen = torch.Generator().manual_seed(3)
    x = (torch.rand(50_000, generator=gen) * 2 - 1) * torch.exp2(torch.randint(-12, 10, (50_000,), generator=gen))
    ours = round_to_codes(x.float(), E4M3, "rtn")
    assert torch.equal(ours, x.float().to(torch.float8_e4m3fn).view(torch.uint8).long())


# ---------------------------------------------------------------- exact round trip
def _fp8_representable(gen, rows=6):
    """Blocks whose amax is 448 * 2^k (so scale = 2^k exactly) filled with e4m3 grid values * 2^k."""
    tab = e4m3_values()
    finite = torch.cat([torch.arange(0, 0x7F), torch.arange(0x80, 0xFF)])
    codes = finite[torch.randint(0, len(finite), (rows, 256), generator=gen)]
    v = tab[codes].reshape(rows, 2, 128)
    v[..., 0] = 448.0
    k = torch.randint(-20, 20, (rows, 2, 1), generator=gen).float()
    return (v * torch.exp2(k)).reshape(rows, 256)


def _nvfp4_representable(gen, states=3, dv=4, K=64):
    """Global scale 2^j, block scales from the e4m3 grid, elements from the e2m1 grid."""
    e2 = e2m1_values()
    e4 = e4m3_values()[1:0x7F]                         # positive finite non-zero scales
    el = e2[torch.randint(0, 16, (states, dv, K // 16, 16), generator=gen)]
    el[..., 0] = 6.0                                    # block amax = 6 * bs * g
    bs = e4[torch.randint(0, len(e4), (states, dv, K // 16, 1), generator=gen)]
    bs[:, 0, 0, 0] = 448.0                              # state amax = 2688 * g
    j = torch.randint(-10, 10, (states, 1, 1, 1), generator=gen).float()
    return (el * bs * torch.exp2(j)).reshape(states, dv, K)


@pytest.mark.parametrize("rounding", ["rtn", "sr"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_exact(fmt, rounding):
    gen = torch.Generator().manual_seed(4)
    if fmt in ("fp16", "bf16"):
        spec = SPECS[fmt]
        codes = torch.randint(0, 1 << 16, (5000,), generator=gen)
        x = value_table(spec)[codes]
        x = x[torch.isfinite(x)]
    elif fmt == "fp8_e4m3":
        x = _fp8_representable(gen)
    elif fmt == "nvfp4":
        x = _nvfp4_representable(gen)
    else:
        x = torch.randn(3, 128, generator=gen)
    key = PhiloxKey(seed=9) if rounding == "sr" else None
    y = quantize_dequantize(x, fmt, rounding, key=key)
    assert torch.equal(y, x)
    assert torch.equal(torch.signbit(y), torch.signbit(x))


# ---------------------------------------------------------------- stochastic rounding
def _neighbours(a: torch.Tensor, spec):
    g = grid(spec)
    i = torch.searchsorted(g, a.double(), right=True) - 1
    return g[i], g[(i + 1).clamp(max=len(g) - 1)]


def _check_unbiased(x_vals, decoded, spec_for_gap, scale=1.0):
    """decoded: [V, n] draws for values x_vals [V]; mean error within 5 sigma (+ 2^-24 gap of bias)."""
    a = x_vals.double() / scale
    lo, hi = _neighbours(a, spec_for_gap)
    lo, hi, a = lo * scale, hi * scale, a * scale
    gap = hi - lo
    d = decoded.double()
    assert bool(((d == lo[:, None]) | (d == hi[:, None])).all()), "SR must pick one of the two neighbours"
    n = d.shape[1]
    p = (a - lo) / gap
    sigma = torch.sqrt(p * (1 - p)) * gap / math.sqrt(n)
    err = (d.mean(1) - a).abs()
    assert bool((err <= 5 * sigma + gap * 2.0**-24).all()), (err / sigma).max()


@pytest.mark.parametrize("name", ["fp16", "bf16", "e4m3", "e2m1"])
def test_sr_element_unbiased(name):
    spec = SPECS[name]
    gen = torch.Generator().manual_seed(5)
    g = grid(spec)
    idx = torch.randint(0, len(g) - 1, (48,), generator=gen)
    t = torch.rand(48, generator=gen, dtype=torch.float64)
    x = (g[idx] + t * (g[idx + 1] - g[idx])).float()   # strictly inside random gaps (incl. subnormals)
    n = 4096
    y = x[:, None].expand(48, n).contiguous()
    w = sr_words(PhiloxKey(seed=11, flush_index=len(name)), y.numel()).reshape(y.shape)
    dec = value_table(spec)[round_to_codes(y, spec, "sr", w)]
    _check_unbiased(x, dec, spec)


def test_sr_fp8_encode_unbiased():
    gen = torch.Generator().manual_seed(6)
    vals = (torch.rand(16, generator=gen) * 440 + 0.01).float() * 2.0**-5   # scale = 2^-5 exactly
    x = vals.repeat_interleave(32)[:, None].expand(512, 128).contiguous()
    x[:, 0] = 448.0 * 2.0**-5
    dec = quantize_dequantize(x, "fp8_e4m3", "sr", key=PhiloxKey(seed=3, slot=1))
    draws = dec[:, 1:].reshape(16, 32 * 127)
    _check_unbiased(vals, draws, E4M3, scale=2.0**-5)


def test_sr_nvfp4_encode_unbiased():
    gen = torch.Generator().manual_seed(7)
    vals = (torch.rand(16, generator=gen) * 2600 + 1).float()          # g = 1, bs = 448 -> d = 448
    x = vals.repeat_interleave(16)[:, None].expand(256, 256).contiguous()
    x[:, ::16] = 2688.0
    dec = quantize_dequantize(x.reshape(4, 64, 256), "nvfp4", "sr", key=PhiloxKey(seed=3, layer=2))
    keep = torch.ones(256, dtype=torch.bool)
    keep[::16] = False
    draws = dec.reshape(256, 256)[:, keep].reshape(16, 16 * 240)
    _check_unbiased(vals, draws, E2M1, scale=448.0)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3", "nvfp4"])
def test_sr_reproducible_and_key_dependent(fmt):
    x = torch.randn(2, 16, 128, generator=torch.Generator().manual_seed(8))
    base = PhiloxKey(seed=123, slot=4, layer=5, flush_index=6)
    a = encode(x, fmt, "sr", key=base)
    b = encode(x, fmt, "sr", key=base)
    assert torch.equal(a.data.view(torch.uint8), b.data.view(torch.uint8))
    for other in (PhiloxKey(124, 4, 5, 6), PhiloxKey(123 + 2**32, 4, 5, 6), PhiloxKey(123, 3, 5, 6),
                  PhiloxKey(123, 4, 6, 6), PhiloxKey(123, 4, 5, 7)):
        c = encode(x, fmt, "sr", key=other)
        assert not torch.equal(a.data.view(torch.uint8), c.data.view(torch.uint8)), other


def test_sr_words_argument_matches_key():
    x = torch.randn(2, 8, 128, generator=torch.Generator().manual_seed(9))
    key = PhiloxKey(seed=5, slot=1, layer=2, flush_index=3)
    w = sr_words(key, x.numel()).reshape(x.shape)
    for fmt in ("fp16", "fp8_e4m3", "nvfp4"):
        a, b = encode(x, fmt, "sr", key=key), encode(x, fmt, "sr", words=w)
        assert torch.equal(a.data.view(torch.uint8), b.data.view(torch.uint8))


def test_sr_probability_is_exact_fraction():
    # x = 1 + f * 2^-10 in fp16: round up iff r24 < f * 2^24 (f = 1/4 -> words with r24 < 2^22).
    x = torch.full((4,), 1.0 + 0.25 * 2.0**-10)
    w = torch.tensor([(2**22 - 1) << 8, 2**22 << 8, 0, 0xFFFFFFFF], dtype=torch.int64)
    dec = decode(encode(x, "fp16", "sr", words=w))
    assert dec.tolist() == [1.0 + 2.0**-10, 1.0, 1.0 + 2.0**-10, 1.0]


# ---------------------------------------------------------------- scales and special cases
def test_fp8_scale_formula_and_zero_block():
    x = torch.zeros(2, 256)
    x[0, :128] = torch.linspace(-3.0, 1.7, 128)
    x[1, 128:] = -0.0
    enc = encode(x, "fp8_e4m3")
    want = (torch.tensor(3.0, dtype=torch.float64) / 448).float()
    assert enc.scale.tolist() == [[want.item(), 1.0], [1.0, 1.0]]
    assert enc.data[0, 128:].eq(0).all() and enc.data[1, 128:].eq(0x80).all()
    assert enc.data[0, 0] == 0xFE                      # -amax -> -448
    assert torch.equal(decode(enc)[1], x[1]) and torch.signbit(decode(enc)[1, 128:]).all()


def test_fp8_saturates_when_division_rounds_up():
    # amax / (amax / 448) can round to just above 448 in fp32; the element saturates to 448 (0x7E).
    a = torch.linspace(1.0, 2.0, 20001)
    s = (a.double() / 448).float()
    q = (a.double() / s.double()).float()
    over = a[q > 448.0]
    assert over.numel() > 0
    x = torch.zeros(1, 128)
    x[0, 0] = over[0]
    enc = encode(x, "fp8_e4m3")
    assert enc.data[0, 0] == 0x7E


def test_fp8_underflowing_scale_becomes_one():
    x = torch.zeros(1, 128)
    x[0, 3] = 1e-44                                    # amax / 448 rounds to 0 in fp32
    enc = encode(x, "fp8_e4m3")
    assert enc.scale.item() == 1.0 and enc.data[0, 3] == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_fp8_non_finite_block(bad):
    x = torch.randn(2, 256, generator=torch.Generator().manual_seed(10))
    x[1, 130] = bad
    enc = encode(x, "fp8_e4m3")
    assert math.isnan(enc.scale[1, 1].item()) and enc.data[1, 128:].eq(0x7F).all()
    y = decode(enc)
    assert y[1, 128:].isnan().all()
    assert torch.equal(y[:, :128], quantize_dequantize(x[:, :128].contiguous(), "fp8_e4m3"))
    assert torch.equal(y[0], quantize_dequantize(x[:1], "fp8_e4m3")[0])


def test_nvfp4_layout_and_scales():
    x = torch.zeros(1, 1, 32)
    x[0, 0, :16] = torch.tensor([6.0, 0.5, 1.0, -1.5, 2.0, 3.0, 4.0, -6.0, 0, 0, 0, 0, 0, 0, 0, 0.25])
    x[0, 0, 16:] = 0.0
    enc = encode(x, "nvfp4")
    g = enc.global_scale.item()
    assert g == (torch.tensor(6.0, dtype=torch.float64) / 2688).float().item()
    # block 0: amax 6 -> r = 6 / (6 * g) rounds to 448 (saturated if above); block 1: all zero -> scale 0
    assert enc.scale[0, 0].tolist() == [0x7E, 0x00]
    assert enc.data.shape == (1, 1, 16)
    lo, hi = enc.data[0, 0, 0] & 0xF, enc.data[0, 0, 0] >> 4
    assert (lo.item(), hi.item()) == (0x7, 0x1)        # element 0 (6.0) low nibble, element 1 (0.5) high
    assert enc.data[0, 0, 1].item() == (0x2 | (0xB << 4))  # 1.0 low, -1.5 high (sign bit 3)
    assert enc.data[0, 0, 8:].eq(0).all()
    y = decode(enc)
    assert y[0, 0, 16:].eq(0).all()


def test_nvfp4_zero_state_and_non_finite_state():
    x = torch.zeros(3, 4, 32)
    x[1] = torch.randn(4, 32, generator=torch.Generator().manual_seed(11))
    x[2, 1, 5] = float("nan")
    enc = encode(x, "nvfp4")
    assert enc.global_scale[0].item() == 1.0 and enc.scale[0].eq(0).all() and enc.data[0].eq(0).all()
    assert math.isnan(enc.global_scale[2].item()) and enc.scale[2].eq(0x7F).all() and enc.data[2].eq(0).all()
    y = decode(enc)
    assert y[0].eq(0).all() and y[2].isnan().all()
    assert torch.equal(y[1], quantize_dequantize(x[1:2].contiguous(), "nvfp4")[0])


def test_nvfp4_decode_is_e2m1_times_block_multiplier():
    x = torch.randn(2, 8, 64, generator=torch.Generator().manual_seed(12)) * 1e-3
    enc = encode(x, "nvfp4")
    b = enc.data.long()
    code = torch.stack([b & 0xF, b >> 4], -1).reshape(2, 8, 4, 16)
    d = (e4m3_values()[enc.scale.long()].double() * enc.global_scale.double()[:, None, None]).float()
    want = (e2m1_values()[code].double() * d.double()[..., None]).float().reshape(2, 8, 64)
    assert torch.equal(decode(enc), want)
    rel = ((decode(enc) - x).norm() / x.norm()).item()
    assert rel < 0.12


def test_fp16_special_values():
    x = torch.tensor([65519.0, 65520.0, 1e6, float("inf"), -float("inf"), float("nan"), -0.0, 2.0**-25,
                      2.0**-25 * 1.5])
    enc = encode(x, "fp16")
    bits = (enc.data.view(torch.int16).long() & 0xFFFF).tolist()
    assert bits == [0x7BFF, 0x7C00, 0x7C00, 0x7C00, 0xFC00, 0x7FFF, 0x8000, 0x0000, 0x0001]
    w = torch.full((9,), 0, dtype=torch.int64)              # r24 = 0: round away whenever f > 0
    sr = (encode(x, "fp16", "sr", words=w).data.view(torch.int16).long() & 0xFFFF).tolist()
    assert sr[:2] == [0x7C00, 0x7C00] and sr[5] == 0x7FFF and sr[7:] == [0x0001, 0x0001]


# ---------------------------------------------------------------- input validation
def test_bad_inputs_name_tensor_expected_and_got():
    with pytest.raises(ValueError, match=r"encode: tensor 'x' must be float32; got float64 \[2, 128\]"):
        encode(torch.zeros(2, 128, dtype=torch.float64), "fp16")
    with pytest.raises(ValueError, match=r"multiple of 128 for fp8_e4m3; got float32 \[2, 100\]"):
        encode(torch.zeros(2, 100), "fp8_e4m3")
    with pytest.raises(ValueError, match=r"multiple of 16 for nvfp4; got float32 \[4, 24\]"):
        encode(torch.zeros(4, 24), "nvfp4")
    with pytest.raises(ValueError, match=r"\[..., d_v, K\].*got float32 \[32\]"):
        encode(torch.zeros(32), "nvfp4")
    with pytest.raises(ValueError, match="fmt must be one of"):
        encode(torch.zeros(4, 16), "fp4")
    with pytest.raises(ValueError, match="rounding='sr' needs exactly one of 'key'"):
        encode(torch.zeros(4, 16), "fp16", "sr")
    with pytest.raises(ValueError, match="only used with rounding='sr'"):
        encode(torch.zeros(4, 16), "fp16", "rtn", key=PhiloxKey(0))
    with pytest.raises(ValueError, match=r"tensor 'words' must be int64 \[4, 16\].*got int64 \[4\]"):
        encode(torch.zeros(4, 16), "fp16", "sr", words=torch.zeros(4, dtype=torch.int64))
    with pytest.raises(ValueError, match="rounding must be one of"):
        encode(torch.zeros(4, 16), "fp16", "nearest")
