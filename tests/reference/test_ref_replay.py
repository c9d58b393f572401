"""Generic replay math: decay matrix, Replay (Eq. 5), OutputOnly (Eq. 6), GDN draft corrections (Eq. 10)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm_trtllm.reference import (decay_matrix, gdn_draft_corrections, gdn_draft_corrections_sequential,
                                        l2norm, output_only, replay)

SETTINGS = settings(max_examples=25, deadline=None)


def rand_records(seed, lead, n, dv, dk, normalize_k=False):
    g = torch.Generator().manual_seed(seed)
    S = torch.randn(*lead, dv, dk, generator=g, dtype=torch.float64)
    alphas = 0.5 + 0.499 * torch.rand(*lead, n, generator=g, dtype=torch.float64)
    vs = torch.randn(*lead, n, dv, generator=g, dtype=torch.float64)
    ks = torch.randn(*lead, n, dk, generator=g, dtype=torch.float64)
    if normalize_k:
        ks = l2norm(ks)
    return S, alphas, vs, ks, g


def sequential(S, alphas, vs, ks):
    """S_t = alpha_t S_{t-1} + v_t k_t^T, all intermediate states [..., n, dv, dk]."""
    out = []
    for t in range(alphas.shape[-1]):
        S = alphas[..., t, None, None] * S + vs[..., t, :, None] * ks[..., t, None, :]
        out.append(S)
    return torch.stack(out, dim=-3) if out else None


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def test_decay_matrix_literal():
    a = torch.tensor([0.9, 0.8, 0.7, 0.6], dtype=torch.float64)
    G = decay_matrix(a)
    for r in range(4):
        for t in range(4):
            want = 0.0
            if r <= t:
                want = 1.0
                for l in range(r + 1, t + 1):
                    want *= float(a[l])
            assert G[r, t].item() == pytest.approx(want, rel=1e-15, abs=0)
    assert decay_matrix(torch.rand(2, 3, 5, dtype=torch.float64)).shape == (2, 3, 5, 5)


@SETTINGS
@given(h=st.integers(0, 20), dv=st.integers(1, 5), dk=st.integers(1, 5), heads=st.integers(0, 2),
       seed=st.integers(0, 2 ** 16))
def test_replay_equals_sequential(h, dv, dk, heads, seed):
    lead = [3] * heads
    S, alphas, vs, ks, _ = rand_records(seed, lead, h, dv, dk)
    got = replay(S, alphas, vs, ks)
    if h == 0:
        assert torch.equal(got, S)
        return
    want = sequential(S, alphas, vs, ks)[..., -1, :, :]
    assert rel(got, want) <= 1e-13


@SETTINGS
@given(h=st.integers(0, 16), T=st.integers(1, 6), dv=st.integers(1, 4), dk=st.integers(1, 5),
       heads=st.integers(0, 2), seed=st.integers(0, 2 ** 16))
def test_output_only_equals_replay_then_query(h, T, dv, dk, heads, seed):
    lead = [2] * heads
    S, alphas, vs, ks, g = rand_records(seed, lead, h + T, dv, dk)
    qs = torch.randn(*lead, T, dk, generator=g, dtype=torch.float64)
    O = output_only(S, alphas, vs, ks, qs, h)
    assert O.shape == tuple(lead) + (T, dv)
    for s in range(T):   # query s (0-based) sees records 0..h+s
        Ss = replay(S, alphas[..., :h + s + 1], vs[..., :h + s + 1, :], ks[..., :h + s + 1, :])
        want = torch.einsum("...vk,...k->...v", Ss, qs[..., s, :])
        assert torch.allclose(O[..., s, :], want, rtol=1e-12, atol=1e-13)


def test_output_only_matrix_form_literal():
    """Eq. 6 built by hand: D_ss = gamma_{h+s}, W_js = gamma_{j+1:h+s} (j <= h+s), columns of V, K, Q."""
    h, T, dv, dk = 3, 3, 2, 4
    S, alphas, vs, ks, g = rand_records(11, [], h + T, dv, dk)
    qs = torch.randn(T, dk, generator=g, dtype=torch.float64)
    n = h + T

    def gamma(i, j):  # 1-based inclusive product
        p = 1.0
        for l in range(i, j + 1):
            p *= float(alphas[l - 1])
        return p
    Dm = torch.diag(torch.tensor([gamma(1, h + s) for s in range(1, T + 1)], dtype=torch.float64))
    W = torch.zeros(n, T, dtype=torch.float64)
    for j in range(1, n + 1):
        for s in range(1, T + 1):
            if j <= h + s:
                W[j - 1, s - 1] = gamma(j + 1, h + s)
    V, K, Q = vs.T, ks.T, qs.T
    O_lit = S @ Q @ Dm + V @ (W * (K.T @ Q))
    assert torch.allclose(output_only(S, alphas, vs, ks, qs, h), O_lit.T, rtol=1e-13, atol=1e-14)


@SETTINGS
@given(h=st.integers(0, 16), T=st.integers(1, 6), dv=st.integers(1, 4), dk=st.integers(1, 6),
       heads=st.integers(0, 2), seed=st.integers(0, 2 ** 16))
def test_triangular_solve_equals_sequential(h, T, dv, dk, heads, seed):
    lead = [2] * heads
    S, alphas, us, ks, g = rand_records(seed, lead, h + T, dv, dk, normalize_k=True)
    betas = torch.sigmoid(torch.randn(*lead, T, generator=g, dtype=torch.float64))
    vs_d = torch.randn(*lead, T, dv, generator=g, dtype=torch.float64)
    args = (S, alphas, betas, us[..., :h, :], ks[..., :h, :], vs_d, ks[..., h:, :], h)
    U = gdn_draft_corrections(*args)
    U_seq = gdn_draft_corrections_sequential(*args)
    assert U.shape == tuple(lead) + (T, dv)
    assert torch.allclose(U, U_seq, rtol=1e-11, atol=1e-12)


def test_triangular_solve_matches_gdn_recurrence():
    """Corrections from the solve equal u_t = beta (v - alpha S_{t-1} k) of a conventional GDN run."""
    g = torch.Generator().manual_seed(5)
    dv, dk, n, h = 4, 6, 9, 5
    S0 = torch.randn(dv, dk, generator=g, dtype=torch.float64)
    alphas = 0.5 + 0.49 * torch.rand(n, generator=g, dtype=torch.float64)
    betas = torch.sigmoid(torch.randn(n, generator=g, dtype=torch.float64))
    vs = torch.randn(n, dv, generator=g, dtype=torch.float64)
    ks = l2norm(torch.randn(n, dk, generator=g, dtype=torch.float64))
    S, us = S0, []
    for t in range(n):
        u = betas[t] * (vs[t] - alphas[t] * S @ ks[t])
        S = alphas[t] * S + torch.outer(u, ks[t])
        us.append(u)
    us = torch.stack(us)
    Ud = gdn_draft_corrections(S0, alphas, betas[h:], us[:h], ks[:h], vs[h:], ks[h:], h)
    assert torch.allclose(Ud, us[h:], rtol=1e-12, atol=1e-13)
    # Eq. 11: outputs with U in place of V equal the conventional outputs
    qs = torch.randn(n - h, dk, generator=g, dtype=torch.float64)
    O = output_only(S0, alphas, torch.cat([us[:h], Ud]), ks, qs, h)
    S = replay(S0, alphas[:h], us[:h], ks[:h])
    for s in range(n - h):
        S = alphas[h + s] * S + torch.outer(us[h + s], ks[h + s])
        assert torch.allclose(O[s], S @ qs[s], rtol=1e-12, atol=1e-13)


def test_replay_validation_messages():
    S, alphas, vs, ks, g = rand_records(0, [2], 4, 3, 5)
    with pytest.raises(ValueError, match=r"replay: 'vs' must be .*got float64 \[2, 4, 2\]"):
        replay(S, alphas, vs[..., :2], ks)
    with pytest.raises(ValueError, match=r"replay: 'alphas'"):
        replay(S, alphas[None], vs, ks)
    with pytest.raises(ValueError, match="'S_ckpt'"):
        replay(torch.zeros(3), alphas, vs, ks)
    qs = torch.randn(2, 2, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"output_only: 'alphas'/'vs'/'ks' must hold h \+ T = 1 \+ 2 = 3 records; got 4"):
        output_only(S, alphas, vs, ks, qs, 1)
    with pytest.raises(ValueError, match="'h' must be in"):
        output_only(S, alphas, vs, ks, qs, -1)
    with pytest.raises(ValueError, match="gdn_draft_corrections: expected h = 1"):
        gdn_draft_corrections(S, alphas, torch.rand(2, 2, dtype=torch.float64), vs[:, :2], ks[:, :2],
                              vs[:, 2:], ks[:, 2:], 1)
    with pytest.raises(ValueError, match="'betas'"):
        gdn_draft_corrections(S, alphas, torch.rand(2, 4, dtype=torch.float64), vs[:, :2], ks[:, :2],
                              vs[:, 2:], ks[:, 2:], 2)
