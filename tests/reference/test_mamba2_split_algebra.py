"""The Mamba-2 split kernels' algebra (head records + readout combination + fold, reference/mamba2_split.py)
against the conventional float64 recurrence: every cursor position of a window, both modes, flush steps
included. CPU only; proves the decomposition variant 4 implements independently of CUDA."""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.reference.mamba2 import mamba2_decode_naive, mamba2_gates
from replayssm_trtllm.reference.mamba2_split import mamba2_split_step


@pytest.mark.parametrize("mode,T,L", [(0, 1, 4), (1, 3, 5), (1, 1, 3), (1, 4, 4)])
@pytest.mark.parametrize("H,G,gate", [(4, 2, True), (3, 1, False)])
def test_split_algebra_matches_recurrence(mode, T, L, H, G, gate):
    P, N = 6, 8
    gen = torch.Generator().manual_seed(mode * 100 + T * 10 + L + H)
    r = lambda *s, sc=1.0: sc * torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    A = -torch.exp(r(H, sc=0.5))
    D, dt_bias = r(H), r(H, sc=0.5)
    S0 = r(H, P, N, sc=0.5)
    hmax = L - 1 if mode == 0 else L
    n = hmax + T
    x, dt_raw, Bm, Cm = r(n, H, P), r(n, H), r(n, G, N), r(n, G, N)
    z = r(n, H, P) if gate else None
    dt_all, _ = mamba2_gates(dt_raw, dt_bias, A)
    flushes = 0
    for h in range(hmax + 1):
        sl = slice(h, h + T)
        y, S_new = mamba2_split_step(S0, dt_all[:h], x[:h], Bm[:h], x[sl], dt_raw[sl], Bm[sl], Cm[sl], A, D,
                                     dt_bias, L, mode, None if z is None else z[sl])
        y_ref, states = mamba2_decode_naive(S0[None], x[None, :h + T], dt_raw[None, :h + T], Bm[None, :h + T],
                                            Cm[None, :h + T], A, D, dt_bias, None if z is None else z[None, :h + T])
        torch.testing.assert_close(y, y_ref[0, h:h + T], rtol=1e-10, atol=1e-10)
        flush = (h + 1 == L) if mode == 0 else (h + T > L)
        assert (S_new is not None) == flush
        if flush:
            flushes += 1
            nf = h + 1 if mode == 0 else h
            torch.testing.assert_close(S_new, S0 if nf == 0 else states[0, nf - 1], rtol=1e-10, atol=1e-10)
    assert flushes > 0


def test_split_algebra_refuses_bad_cursors():
    H, G, P, N = 2, 1, 4, 8
    z = lambda *s: torch.zeros(*s, dtype=torch.float64)  # noqa: E731
    args = (z(H, P, N), z(3, H), z(3, H, P), z(3, G, N), z(1, H, P), z(1, H), z(1, G, N), z(1, G, N), z(H), z(H), z(H))
    with pytest.raises(ValueError, match="standard mode needs T == 1 and h <= L - 1; got T=1, h=3, L=3"):
        mamba2_split_step(*args, 3, 0)
    with pytest.raises(ValueError, match="speculative mode needs h <= L; got h=3, L=2"):
        mamba2_split_step(*args, 2, 1)
