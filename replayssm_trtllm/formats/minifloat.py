"""Exact rounding of float32 values onto small floating-point grids (fp16, bf16, e4m3fn, e2m1).

One routine serves all four element formats. For a magnitude ``a`` (a float32 value, handled in
float64 where every step below is exact):

    e    = max(floor(log2 a), emin)          (e = emin for a == 0)
    s    = a * 2^(m - e)                     the magnitude in units of the grid spacing q = 2^(e - m)
    k    = floor(s),  f = s - k              lower neighbour k*q (toward zero), f in [0, 1)
    code = (e - emin) * 2^m + k  (+1 to round away from zero)

(The implementation evaluates the same rule with int32 operations on the fp32 bit pattern.)
The magnitude code of a value is monotone in the value and adding one always yields the next
representable magnitude, including across binades (k = 2^(m+1) - 1 -> next binade) and from
subnormals to normals. Round-away decisions (docs/formats.md, section 4):

    RTN: f > 1/2, or f == 1/2 and k odd (ties to even)
    SR:  r24 < f * 2^24 with r24 = word >> 8   (P(away) = ceil(f * 2^24) / 2^24)

The sign bit is copied from the input (so -0.0 and negatives that round to zero keep it).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import torch


@dataclass(frozen=True)
class MiniFloat:
    name: str
    mant_bits: int       # m: stored mantissa bits
    emin: int            # exponent of the smallest normal binade (subnormal spacing 2^(emin - m))
    max_code: int        # magnitude code of the largest finite value
    ieee_overflow: bool  # True: beyond max rounds toward the inf code (max_code + 1); False: saturate
    sign_bit: int        # bit position of the sign
    nan_code: Optional[int]  # canonical NaN written for NaN inputs (None: format has no NaN)

    @property
    def max_value(self) -> float:
        return decode_magnitude(self.max_code, self)


FP16 = MiniFloat("fp16", 10, -14, 0x7BFF, True, 15, 0x7FFF)
BF16 = MiniFloat("bf16", 7, -126, 0x7F7F, True, 15, 0x7FFF)
E4M3 = MiniFloat("e4m3fn", 3, -6, 0x7E, False, 7, 0x7F)
E2M1 = MiniFloat("e2m1", 1, 0, 0x7, False, 3, None)


def decode_magnitude(code: int, spec: MiniFloat) -> float:
    """Value of a finite magnitude code (no sign bit)."""
    m = spec.mant_bits
    E, mant = code >> m, code & ((1 << m) - 1)
    if E == 0:
        return mant * 2.0 ** (spec.emin - m)
    return ((1 << m) + mant) * 2.0 ** (E - 1 + spec.emin - m)


def value_table(spec: MiniFloat) -> torch.Tensor:
    """float32 value of every code 0 .. 2^(sign_bit+1)-1 (NaN / inf codes included)."""
    return _value_table(spec).clone()


@lru_cache(maxsize=None)
def _value_table(spec: MiniFloat) -> torch.Tensor:
    n = 1 << (spec.sign_bit + 1)
    half = n >> 1
    vals = []
    for c in range(half):
        if c <= spec.max_code:
            vals.append(decode_magnitude(c, spec))
        elif spec.ieee_overflow and c == spec.max_code + 1:
            vals.append(float("inf"))
        else:
            vals.append(float("nan"))
    t = torch.tensor(vals, dtype=torch.float64)
    return torch.cat([t, -t]).to(torch.float32)


def round_to_codes(y: torch.Tensor, spec: MiniFloat, rounding: str,
                   words: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Codes (int64, sign bit included) of float32 ``y`` on the grid of ``spec``.

    rounding: 'rtn' (nearest, ties to even) or 'sr' (``words``: int64 32-bit words, y's shape).
    Beyond the largest finite value: saturate (e4m3fn, e2m1) or IEEE overflow toward inf (fp16,
    bf16; RTN gives inf from max + q/2 on, SR rounds to inf with probability f). Infinite inputs:
    max code (saturating formats) or inf. NaN inputs: ``nan_code`` (callers of formats without NaN
    handle NaN before calling).

    Integer evaluation of the rule in the module docstring, on the fp32 bit pattern of |y|
    (E = biased exponent, sig = significand with the implicit bit, value = sig * 2^(max(E,1) - 150)):
        e = max(E - 127, emin),  sh = e - m - max(E, 1) + 150  (>= 23 - m),
        k = sig >> sh,  rem = sig mod 2^sh,  f = rem / 2^sh.
    """
    if y.dtype != torch.float32:
        raise ValueError(f"round_to_codes: 'y' must be float32; got {y.dtype}")
    if rounding not in ("rtn", "sr"):
        raise ValueError(f"round_to_codes: rounding must be 'rtn' or 'sr'; got {rounding!r}")
    m, emin = spec.mant_bits, spec.emin
    i32 = torch.int32
    a = y.abs()
    if not spec.ieee_overflow:
        a = a.clamp(max=spec.max_value)              # inf -> max; NaN passes through
    bits = a.view(i32)                               # sign bit clear (NaN payloads aside)
    E = bits >> 23
    finite = E < 255
    sig = bits & 0x7FFFFF
    sig = torch.where(E > 0, sig | 0x800000, sig)
    e = (E - 127).clamp(min=emin)
    sh = e - E.clamp(min=1) + (150 - m)
    c = sh.clamp(max=30)                             # sig < 2^24, so shifts >= 25 all give k = 0
    one = torch.ones_like(c)
    k = sig >> c
    rem = sig & (torch.bitwise_left_shift(one, c) - 1)
    if rounding == "rtn":
        half = torch.bitwise_left_shift(one, c - 1)
        up = (rem > half) | ((rem == half) & ((k & 1) == 1))
    else:
        if words is None or words.shape != y.shape:
            raise ValueError(f"round_to_codes: 'words' must be int64 {list(y.shape)} for 'sr'; "
                             f"got {None if words is None else list(words.shape)}")
        r24 = (words >> 8).to(i32)
        # up iff r24 < f * 2^24 = rem * 2^(24 - sh): the threshold ceil(rem * 2^(24 - sh)) as an integer
        t = (sh - 24).clamp(min=0, max=30)
        thr_hi = (rem + torch.bitwise_left_shift(one, t) - 1) >> t
        thr_lo = torch.bitwise_left_shift(rem, (24 - sh).clamp(min=0))
        up = r24 < torch.where(sh >= 24, thr_hi, thr_lo)
    mag = (e - emin) * (1 << m) + k + up.to(i32)
    if spec.ieee_overflow:
        mag = torch.where(finite, mag.clamp(max=spec.max_code + 1), spec.max_code + 1)
    else:
        mag = torch.where(finite, mag, spec.max_code)
    code = mag | (torch.signbit(y).to(i32) << spec.sign_bit)
    if spec.nan_code is not None:
        code = torch.where(torch.isnan(y), spec.nan_code, code)
    return code.to(torch.int64)
