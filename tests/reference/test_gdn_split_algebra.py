"""The GDN split kernels' algebra (head records + readout combination + fold, reference/gdn_split.py)
against the conventional float64 recurrence: every cursor position of a window, both modes, flush steps
included. CPU only; proves the decomposition variant 6 implements independently of CUDA."""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.reference.gdn import gdn_decode_naive, gdn_gates, l2norm
from replayssm_trtllm.reference.gdn_split import gdn_split_step


def _layer(HV, gen):
    return dict(A_log=torch.log(0.5 + 3.5 * torch.rand(HV, generator=gen, dtype=torch.float64)),
                dt_bias=torch.log(torch.expm1(0.002 + 0.06 * torch.rand(HV, generator=gen, dtype=torch.float64))))


def _committed(S0, q, k, v, a, b, lay, n):
    """The first n tokens' ring records (g, u, raw k) from the conventional recurrence."""
    HV, H = S0.shape[0], k.shape[1]
    rep = HV // H
    g, alpha, beta = gdn_gates(a[:n], b[:n], lay["A_log"], lay["dt_bias"])
    kn = torch.repeat_interleave(l2norm(k[:n]), rep, dim=1)
    S, us = S0.clone(), []
    for j in range(n):
        u = beta[j][:, None] * (v[j] - alpha[j][:, None] * torch.einsum("hvk,hk->hv", S, kn[j]))
        S = alpha[j][:, None, None] * S + u[..., None] * kn[j][:, None, :]
        us.append(u)
    u = torch.stack(us) if us else torch.zeros(0, HV, v.shape[-1], dtype=torch.float64)
    return g, u, k[:n].clone()


@pytest.mark.parametrize("mode,T,L,readout", [(0, 1, 4, "substitution"), (1, 3, 5, "substitution"),
                                               (1, 1, 3, "substitution"), (1, 4, 4, "substitution"),
                                               (1, 3, 5, "matrix"), (1, 2, 3, "matrix"), (1, 8, 9, "matrix")])
@pytest.mark.parametrize("H,HV", [(2, 4), (1, 3)])
def test_split_algebra_matches_recurrence(mode, T, L, H, HV, readout):
    K, V = 16, 8
    gen = torch.Generator().manual_seed(mode * 100 + T * 10 + L + HV)
    lay = _layer(HV, gen)
    S0 = 0.5 * torch.randn(HV, V, K, generator=gen, dtype=torch.float64)
    hmax = L - 1 if mode == 0 else L
    n = hmax + T
    q = torch.randn(n, H, K, generator=gen, dtype=torch.float64)
    k = torch.randn(n, H, K, generator=gen, dtype=torch.float64)
    v = torch.randn(n, HV, V, generator=gen, dtype=torch.float64)
    a = torch.clamp(0.3 * torch.randn(n, HV, generator=gen, dtype=torch.float64), -1, 1)
    b = torch.randn(n, HV, generator=gen, dtype=torch.float64)
    flushes = 0
    for h in range(hmax + 1):
        rg, ru, rk = _committed(S0, q, k, v, a, b, lay, h)
        sl = slice(h, h + T)
        o, u, S_new = gdn_split_step(S0, rg, ru, rk, q[sl], k[sl], v[sl], a[sl], b[sl], lay["A_log"],
                                     lay["dt_bias"], L, mode, readout=readout)
        o_ref, states = gdn_decode_naive(S0[None], q[None, :h + T], k[None, :h + T], v[None, :h + T],
                                         a[None, :h + T], b[None, :h + T], lay["A_log"], lay["dt_bias"])
        torch.testing.assert_close(o, o_ref[0, h:h + T], rtol=1e-10, atol=1e-10)
        _, u_ref, _ = _committed(S0, q, k, v, a, b, lay, h + T)
        torch.testing.assert_close(u, u_ref[h:h + T], rtol=1e-10, atol=1e-10)
        flush = (h + 1 == L) if mode == 0 else (h + T > L)
        assert (S_new is not None) == flush
        if flush:
            flushes += 1
            nf = h + 1 if mode == 0 else h
            want = S0 if nf == 0 else states[0, nf - 1]
            torch.testing.assert_close(S_new, want, rtol=1e-10, atol=1e-10)
    assert flushes > 0


def test_split_algebra_refuses_bad_cursors():
    HV, H, K, V = 2, 1, 8, 4
    z = lambda *s: torch.zeros(*s, dtype=torch.float64)  # noqa: E731
    args = (z(HV, V, K), z(3, HV), z(3, HV, V), z(3, H, K), z(1, H, K), z(1, H, K), z(1, HV, V), z(1, HV), z(1, HV),
            z(HV), z(HV))
    with pytest.raises(ValueError, match="standard mode needs T == 1 and h <= L - 1; got T=1, h=3, L=3"):
        gdn_split_step(*args, 3, 0)
    with pytest.raises(ValueError, match="speculative mode needs h <= L; got h=3, L=2"):
        gdn_split_step(*args, 2, 1)
    with pytest.raises(ValueError, match="mode must be 0 \\(standard\\) or 1 \\(speculative\\); got 2"):
        gdn_split_step(*args, 4, 2)
    with pytest.raises(ValueError, match="HV=3 must be a multiple of H=2"):
        gdn_split_step(z(3, V, K), z(3, 3), z(3, 3, V), z(3, 2, K), z(1, 2, K), z(1, 2, K), z(1, 3, V), z(1, 3),
                       z(1, 3), z(3), z(3), 4, 1)
