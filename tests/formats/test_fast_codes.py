"""CPU mirror of the device codec's fast paths (cpp_plugins/kernels/dual_precision/dp_codec.cuh): fp16 / bf16
stochastic rounding by a shift of the fp32 bits, and e2m1 round-to-nearest by rint(|y| / spacing). Each formula
is evaluated here with the same integer / float32 steps as the CUDA code and compared code for code with the
reference rounding (replayssm_trtllm/formats/minifloat.round_to_codes) over every binade, the boundaries of the
fast range, ties, and random Philox-like words. The GPU parity tests (test_codec_cuda_parity.py) check the
kernels themselves."""
import random
from fractions import Fraction

import torch

from replayssm_trtllm.formats.minifloat import BF16, E2M1, FP16, round_to_codes


def _values(n=200_000, seed=0):
    """float32 values over every binade (random bit patterns), plus zeros, boundaries, inf and huge / tiny."""
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(0, 2**31 - 2**23, (n,), generator=g, dtype=torch.int64)  # every finite exponent
    sign = torch.randint(0, 2, (n,), generator=g, dtype=torch.int64) << 31
    x = (bits | sign).to(torch.int32).view(torch.float32)
    edges = [0.0, -0.0, 2.0**-14, 2.0**-14 * (1 - 2**-11), 2.0**-24, 2.0**-25, 65504.0, 65519.0, 65520.0,
             65536.0, 3.3895314e38, float("inf"), -float("inf"), 1e-45, 1.17549435e-38, 1.0, -1.0]
    return torch.cat([x, torch.tensor(edges, dtype=torch.float32)])


def _words(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(0, 2**32, (n,), generator=g, dtype=torch.int64)
    w[:64] = torch.tensor([0, 2**32 - 1] * 32)  # extreme words
    return w


def _fast_fp16_sr(y, w):
    """fp16Code(y, sr=True, w) fast path; -1 where the device falls back to roundCode."""
    bits = y.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    mag = bits & 0x7FFFFFFF
    fast = (mag >= (113 << 23)) & (mag < (255 << 23))
    up = ((w >> 19) < (mag & 0x1FFF)).to(torch.int64)
    code = torch.clamp((mag >> 13) - (112 << 10) + up, max=0x7C00) | ((bits >> 16) & 0x8000)
    return torch.where(fast, code, torch.full_like(code, -1))


def _fast_fp16_sr_carry(y, w):
    """fp16ShiftSrCarry (the fixed-format flush instances' fp16 SR shift path) on fp16Code's fast range; -1
    elsewhere."""
    bits = y.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    mag = bits & 0x7FFFFFFF
    fast = (mag >= (113 << 23)) & (mag < (255 << 23))
    code = torch.clamp((mag + ((w >> 19) ^ 0x1FFF) - (112 << 23)) >> 13, max=0x7C00) | ((bits >> 16) & 0x8000)
    return torch.where(fast, code, torch.full_like(code, -1))


def _fast_bf16_sr(y, w):
    bits = y.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    mag = bits & 0x7FFFFFFF
    fast = mag < (255 << 23)
    up = ((w >> 16) < (mag & 0xFFFF)).to(torch.int64)
    code = torch.clamp((mag >> 16) + up, max=0x7F80) | ((bits >> 16) & 0x8000)
    return torch.where(fast, code, torch.full_like(code, -1))


def _fast_e2m1_rtn(y):
    a = y.abs().clamp(max=6.0)
    m = torch.where(a < 2, 2.0, torch.where(a < 4, 1.0, 0.5)).to(torch.float32)
    off = torch.where(a < 2, 0, torch.where(a < 4, 2, 4))
    q = torch.round(a * m).to(torch.int64)  # torch.round: half to even, as __float2int_rn
    return (q + off) | ((y.view(torch.int32).to(torch.int64) >> 28) & 8)


def _e2m1_rtn_bits(y):
    """e2m1MagnitudeRtnBits(y) | sign (the fixed-format flush instances): the same int32 / float32 steps."""
    bits = y.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    mag = bits & 0x7FFFFFFF
    a = mag.to(torch.int32).view(torch.float32)
    small = (a * 2.0 + 12582912.0).view(torch.int32).to(torch.int64) - 0x4B400000  # exact 2a; one rounding, as the FMA
    large = torch.clamp(((mag + 0x1FFFFF + ((mag >> 22) & 1)) >> 22) - 252, max=7)
    return torch.where(mag < 0x3F800000, small, large) | ((bits >> 28) & 8)


def test_fast_fp16_sr_matches_reference():
    y = _values()
    w = _words(y.numel())
    ref = round_to_codes(y, FP16, "sr", w)
    fast = _fast_fp16_sr(y, w)
    on = fast >= 0
    assert on.float().mean() > 0.05  # the fast range is exercised (and the fallback too)
    assert (~on).any()
    assert torch.equal(fast[on], ref[on])


def test_fast_fp16_sr_near_the_range_boundaries():
    # the smallest normal binade, the largest finite binade and its overflow, each with every low-bit pattern
    base = torch.tensor([113 << 23, 142 << 23, 143 << 23, 254 << 23], dtype=torch.int64)
    low = torch.arange(0, 1 << 14, dtype=torch.int64)
    bits = (base[:, None] + low[None, :] * 511).reshape(-1) & 0x7FFFFFFF
    y = torch.cat([bits, bits | (1 << 31)]).to(torch.int32).view(torch.float32)
    for seed in range(3):
        w = _words(y.numel(), seed)
        ref = round_to_codes(y, FP16, "sr", w)
        fast = _fast_fp16_sr(y, w)
        assert bool((fast >= 0).all())
        assert torch.equal(fast, ref)


def test_fast_bf16_sr_matches_reference():
    y = _values(seed=2)
    w = _words(y.numel(), 3)
    ref = round_to_codes(y, BF16, "sr", w)
    fast = _fast_bf16_sr(y, w)
    on = fast >= 0
    assert on.float().mean() > 0.99
    assert torch.equal(fast[on], ref[on])


def test_fast_e2m1_rtn_matches_reference():
    # every grid point, every midpoint (ties), their float32 neighbours, a dense sweep and random values
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    mids = (grid[1:] + grid[:-1]) / 2
    pts = torch.cat([grid, mids, torch.tensor([6.5, 100.0, float("inf"), 1e-40, 0.0])]).to(torch.float32)
    nb = torch.cat([pts, torch.nextafter(pts, torch.tensor(float("inf"))),
                    torch.nextafter(pts, torch.tensor(0.0))])
    sweep = torch.linspace(0, 7, 70001, dtype=torch.float32)
    rnd = _values(seed=4)
    rnd = rnd[~torch.isnan(rnd)]
    y = torch.cat([nb, -nb, sweep, -sweep, rnd])
    assert torch.equal(_fast_e2m1_rtn(y), round_to_codes(y, E2M1, "rtn"))


def test_e2m1_rtn_bits_matches_reference_exhaustively():
    """The integer e2m1 code against the reference on every positive float32 in [2^-3, 8) (the codes' thresholds,
    ties and the saturation all lie there; below 2^-3 every code is zero) and every 97th negative one, plus the
    values of the test above (every binade, inf, zeros of both signs, denormals)."""
    step = 1 << 23
    for lo in range(0x3E000000, 0x41000000, step):
        y = torch.arange(lo, lo + step, dtype=torch.int64).to(torch.int32).view(torch.float32)
        y = torch.cat([y, -y[::97]])
        assert torch.equal(_e2m1_rtn_bits(y), round_to_codes(y, E2M1, "rtn")), hex(lo)
    rnd = _values(seed=6)
    rnd = rnd[~torch.isnan(rnd)]
    y = torch.cat([rnd, torch.tensor([0.0, -0.0, 1e-45, -1e-45, 1e-40, float("inf"), -float("inf"), 6.0, 7.0, 8.0])])
    assert torch.equal(_e2m1_rtn_bits(y), round_to_codes(y, E2M1, "rtn"))


def test_fp16_sr_carry_form_matches_shift_path():
    """The one-addition form of the fp16 SR shift path equals fp16Code's fast path (and so the reference) on
    random values and words, every rem / word boundary pair (rem = 0, 1, 0x1FFF against word tops 0, rem - 1, rem,
    0x1FFF) and the overflow edge."""
    y = _values(seed=7)
    w = _words(y.numel(), seed=8)
    a, b = _fast_fp16_sr_carry(y, w), _fast_fp16_sr(y, w)
    assert torch.equal(a, b)
    rems = torch.tensor([0, 1, 2, 0x1000, 0x1FFE, 0x1FFF])
    tops = torch.tensor([0, 1, 0xFFF, 0x1000, 0x1FFE, 0x1FFF])
    base = torch.tensor([113 << 23, 127 << 23, (142 << 23) | 0x7FE000, 0x477FE000])  # 2^-14, 1, 65504's binade
    bits = (base[:, None, None] | rems[None, :, None]).expand(-1, -1, tops.numel()).reshape(-1)
    wt = (tops[None, None, :] << 19).expand(base.numel(), rems.numel(), -1).reshape(-1)
    wt = wt | torch.randint(0, 1 << 19, wt.shape, generator=torch.Generator().manual_seed(9))
    for sign in (0, 1 << 31):
        yy = (bits | sign).to(torch.int32).view(torch.float32)
        fast, ref = _fast_fp16_sr_carry(yy, wt), round_to_codes(yy, FP16, "sr", wt)
        assert (fast >= 0).all() and torch.equal(fast, ref)


def _quantum32(a: Fraction) -> int:
    """log2 of the float32 spacing at a > 0: e with 2^23 <= a / 2^e < 2^24, at least -149 (subnormals)."""
    e = a.numerator.bit_length() - a.denominator.bit_length() - 23
    while a / Fraction(2) ** e >= 2 ** 24:
        e += 1
    while a / Fraction(2) ** e < 2 ** 23:
        e -= 1
    return max(e, -149)


def _rn32(x: Fraction) -> Fraction:
    """x rounded to the nearest float32 (ties to even; subnormals; no overflow in the uses below), exactly."""
    if x == 0:
        return Fraction(0)
    a = abs(x)
    e = _quantum32(a)
    m = a / Fraction(2) ** e
    q, r = divmod(m.numerator, m.denominator)
    r = Fraction(r, m.denominator)
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and q % 2 == 1):
        q += 1
    return (1 if x > 0 else -1) * Fraction(q) * Fraction(2) ** e


def _ulp32(x: Fraction) -> Fraction:
    return Fraction(2) ** _quantum32(abs(x))


def _fma32(a, b, c):
    return _rn32(a * b + c)


def _newton_quotient(y, d, r0):
    """rcpNewton / divNewton of dp_codec.cuh (the div.rn fast path's FMAs) with MUFU.RCP's result r0."""
    r1 = _fma32(r0, _fma32(-d, r0, Fraction(1)), r0)
    q0 = _fma32(y, r1, Fraction(0))
    return _fma32(r1, _fma32(-d, q0, y), q0)


def test_shared_reciprocal_division_matches_division():
    """The fixed-format flush's nvfp4 division (one reciprocal shared by a block's elements, refined once, then
    quotient, residual and correction: the hardware division's fast path with the reciprocal hoisted) in exact
    float32 arithmetic, with MUFU.RCP modelled as the correctly rounded reciprocal +- 2 ulps (rcp.approx's bound is
    stated as about 1 ulp; the hardware itself is not modelled), over divisors log-uniform in the range the kernel
    takes this path for, [2^-90, 2^90], and dividends up to 7 divisors, at the e2m1 code thresholds +- 3 ulps, and
    tiny: the quotient equals the correctly rounded quotient bit for bit whenever |dividend| >= 2^-100, and its e2m1
    code always does. Below that (subnormal dividends, or just above the normal range, where the residual underflows;
    offline runs saw such differences up to |dividend| ~ 2^-122) the quotient is tiny, codes to 0, and may differ in
    its last bits, as the hardware's FCHK would send such a division to the slow path."""
    rnd = random.Random(11)
    thresholds = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 2.0, 4.0, 6.0]
    grid = [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]

    def code(q):  # e2m1 magnitude code, ties to even
        a = abs(q)
        if a >= 6:
            return 7
        return min(range(8), key=lambda i: (abs(a - grid[i]), i % 2))

    tiny_mismatches = 0
    for it in range(1200):
        d = _rn32(Fraction(2.0 ** rnd.uniform(-90, 90)))
        kind = it % 3
        if kind == 0:
            t = Fraction(rnd.uniform(-7, 7))
        elif kind == 1:
            t = Fraction(rnd.choice(thresholds) * rnd.choice((1, -1)))
        else:
            t = Fraction(rnd.choice((1, -1)) * 2.0 ** rnd.uniform(-40, -1))
        y = _rn32(d * _rn32(t))
        if kind == 1 and y != 0:
            y += rnd.randint(-3, 3) * _ulp32(y)
        exact = _rn32(y / d)
        r0 = _rn32(1 / d)
        for k in (-2, -1, 0, 1, 2):
            q = _newton_quotient(y, d, r0 + k * _ulp32(r0))
            assert code(q) == code(exact), (float(y), float(d), k)
            if abs(y) >= Fraction(2) ** -100:
                assert q == exact, (float(y), float(d), k)
            elif q != exact:
                tiny_mismatches += 1
    assert tiny_mismatches < 60  # a few, all with tiny dividends (checked above)
