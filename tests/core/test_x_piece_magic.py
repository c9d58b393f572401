"""rssm::mamba2::xPieceMagic (cpp_plugins/kernels/mamba2/mamba2_split_kernel.cuh): the Mamba-2 speculative prep
splits its 16-byte x pieces into (token, piece) with `s = (i * magic) >> 16`, magic = ceil(2^16 / ppr), computed on the
device as `__float2int_ru(__frcp_ru((float)ppr) * 65536.f)` (the fp32 reciprocal rounded up, scaled by 2^16 exactly,
rounded up to an integer). Emulated here in exact arithmetic (float32 rounding upward of 1 / ppr), for every ppr the
launchers allow (ppr = headdim / 8 <= 16): the reciprocal's magic equals the integer ceil(2^16 / ppr) that the previous
run-time division computed, and the shift gives i // ppr for every piece index the kernels form (i < 16 ppr)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest


def _f32_round_up(x: Fraction) -> Fraction:
    """x rounded to float32 toward +infinity (x > 0, in the normal range), exactly."""
    f = np.float32(float(x))
    if Fraction(float(f)) < x:
        f = np.nextafter(f, np.float32(np.inf), dtype=np.float32)
    assert Fraction(float(f)) >= x
    return Fraction(float(f))


def _magic_device(ppr: int) -> int:
    rcp = _f32_round_up(Fraction(1, ppr))  # __frcp_ru
    scaled = rcp * 65536  # a power-of-two scale: exact in float32
    assert Fraction(float(np.float32(float(scaled)))) == scaled
    return math.ceil(scaled)  # __float2int_ru


@pytest.mark.parametrize("ppr", range(1, 17))
def test_reciprocal_magic_equals_the_integer_ceiling(ppr):
    assert _magic_device(ppr) == -(-65536 // ppr)


@pytest.mark.parametrize("ppr", range(1, 17))
def test_shift_divides_every_piece_index(ppr):
    magic = _magic_device(ppr)
    for i in range(16 * ppr):
        assert (i * magic) >> 16 == i // ppr, (ppr, i)


def test_the_range_is_a_real_limit():
    """Far past the kernels' range the shift stops dividing (ppr = 10: magic 6554 is 0.4 above 2^16 / 10), so the
    range above is what makes the identity hold, not luck."""
    magic = _magic_device(10)
    assert any((i * magic) >> 16 != i // 10 for i in range(16 * 10, 1 << 16))
