"""Conventional float64 recurrences (mamba2_decode_naive, gdn_decode_naive) and their gates."""
import math

import pytest
import torch

from replayssm_trtllm.reference import (gdn_decode_naive, gdn_gates, l2norm, mamba2_decode_naive, mamba2_gates,
                                        softplus)
from replayssm_trtllm.reference.testing import (random_gdn_inputs, random_gdn_layer, random_mamba2_inputs,
                                                random_mamba2_layer, random_state)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---- gates --------------------------------------------------------------------------------------

def test_softplus_threshold():
    x = torch.tensor([-30.0, -1.0, 0.0, 1.0, 20.0, 20.5, 50.0], dtype=torch.float64)
    y = softplus(x)
    for xi, yi in zip(x.tolist(), y.tolist()):
        want = xi if xi > 20 else math.log1p(math.exp(xi))
        assert yi == want
    assert y.dtype == torch.float64


def test_mamba2_gates_values():
    g = gen(1)
    layer = random_mamba2_layer(6, g)
    dt_raw = torch.randn(3, 2, 6, generator=g)
    dt, alpha = mamba2_gates(dt_raw, layer["dt_bias"], layer["A"])
    assert dt.shape == alpha.shape == (3, 2, 6) and dt.dtype == torch.float64
    for idx in [(0, 0, 0), (2, 1, 5), (1, 0, 3)]:
        xv = float(dt_raw[idx]) + float(layer["dt_bias"][idx[-1]])
        want_dt = math.log1p(math.exp(xv))
        assert dt[idx].item() == pytest.approx(want_dt, rel=1e-15)
        assert alpha[idx].item() == pytest.approx(math.exp(want_dt * float(layer["A"][idx[-1]])), rel=1e-15)


def test_realistic_decay_ranges():
    g = gen(2)
    lay = random_mamba2_layer(64, g)
    inp = random_mamba2_inputs(8, 8, 64, 1, 1, 1, g)
    _, alpha = mamba2_gates(inp["dt_raw"], lay["dt_bias"], lay["A"])
    assert 0.5 < float(alpha.min()) and float(alpha.max()) < 0.9999
    glay = random_gdn_layer(64, g)
    ginp = random_gdn_inputs(8, 8, 64, 64, 1, 1, g)
    _, galpha, beta = gdn_gates(ginp["a"], ginp["b"], glay["A_log"], glay["dt_bias"])
    assert 0.5 < float(galpha.min()) and float(galpha.max()) < 0.9999
    assert 0 < float(beta.min()) and float(beta.max()) < 1


def test_gdn_gates_and_l2norm():
    a = torch.tensor([[0.3, -0.2]], dtype=torch.float32)
    b = torch.tensor([[1.0, -2.0]], dtype=torch.float32)
    A_log = torch.tensor([0.1, 1.2])
    dt_bias = torch.tensor([-3.0, -4.0])
    g, alpha, beta = gdn_gates(a, b, A_log, dt_bias)
    for i in range(2):
        sp = math.log1p(math.exp(float(a[0, i]) + float(dt_bias[i])))
        assert g[0, i].item() == pytest.approx(-math.exp(float(A_log[i])) * sp, rel=1e-15)
        assert alpha[0, i].item() == pytest.approx(math.exp(g[0, i].item()), rel=1e-15)
        assert beta[0, i].item() == pytest.approx(1 / (1 + math.exp(-float(b[0, i]))), rel=1e-15)
    x = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert torch.allclose(l2norm(x), x / math.sqrt(25 + 1e-6), rtol=0, atol=1e-16)


# ---- Mamba-2 naive ------------------------------------------------------------------------------

def mamba2_scalar_loop(state, x, dt_raw, Bm, Cm, A, D, dt_bias, z):
    """Independent per-element Python loop of docs/design.md section 2 (tiny sizes only)."""
    Bsz, T, H, P = x.shape
    G, N = Bm.shape[2], Bm.shape[3]
    S = state.double().tolist()
    y = torch.zeros(Bsz, T, H, P, dtype=torch.float64)
    for b in range(Bsz):
        for t in range(T):
            for h in range(H):
                g = h // (H // G)
                xv = float(dt_raw[b, t, h]) + float(dt_bias[h])
                dt = xv if xv > 20 else math.log1p(math.exp(xv))
                al = math.exp(dt * float(A[h]))
                for p in range(P):
                    acc = 0.0
                    for n in range(N):
                        S[b][h][p][n] = al * S[b][h][p][n] + dt * float(x[b, t, h, p]) * float(Bm[b, t, g, n])
                        acc += S[b][h][p][n] * float(Cm[b, t, g, n])
                    out = acc + float(D[h]) * float(x[b, t, h, p])
                    if z is not None:
                        zz = float(z[b, t, h, p])
                        out *= zz / (1 + math.exp(-zz))
                    y[b, t, h, p] = out
    return y, torch.tensor(S, dtype=torch.float64)


@pytest.mark.parametrize("with_z", [True, False], ids=["z", "noz"])
def test_mamba2_naive_matches_scalar_loop(with_z):
    g = gen(3)
    Bsz, T, H, P, N, G = 2, 3, 4, 2, 3, 2
    lay = random_mamba2_layer(H, g)
    inp = random_mamba2_inputs(Bsz, T, H, P, N, G, g, with_z=with_z)
    st = random_state((Bsz, H, P, N), g)
    y, states = mamba2_decode_naive(st, **inp, **lay)
    y_ref, S_ref = mamba2_scalar_loop(st, **inp, **lay)
    assert torch.allclose(y, y_ref, rtol=1e-13, atol=1e-14)
    assert torch.allclose(states[:, -1], S_ref, rtol=1e-13, atol=1e-14)


def _assert_chain_equal(piece, whole):
    """Decoding in pieces equals decoding at once up to float64 rounding of the same operations (a few ulps: torch
    may pick another vectorized kernel, hence another rounding of a fused multiply-add, for another shape)."""
    assert piece.dtype == torch.float64 and whole.dtype == torch.float64
    torch.testing.assert_close(piece, whole, rtol=4 * torch.finfo(torch.float64).eps, atol=1e-15)


def test_mamba2_naive_snapshots_chain():
    """states[:, t] is the state after token t: decoding in pieces gives the same snapshots."""
    g = gen(4)
    Bsz, T, H, P, N, G = 2, 5, 4, 3, 4, 1
    lay = random_mamba2_layer(H, g)
    inp = random_mamba2_inputs(Bsz, T, H, P, N, G, g)
    st = random_state((Bsz, H, P, N), g)
    y, states = mamba2_decode_naive(st, **inp, **lay)
    S = st
    for t in range(T):
        piece = {k: v[:, t:t + 1] for k, v in inp.items()}
        y1, s1 = mamba2_decode_naive(S, **piece, **lay)
        _assert_chain_equal(y1[:, 0], y[:, t])
        _assert_chain_equal(s1[:, 0], states[:, t])
        S = s1[:, 0]


def test_mamba2_naive_dtypes_and_no_mutation():
    g = gen(5)
    lay = random_mamba2_layer(4, g)
    inp = random_mamba2_inputs(1, 2, 4, 2, 3, 2, g, dtype=torch.bfloat16)
    st = random_state((1, 4, 2, 3), g).to(torch.float32)
    st0 = st.clone()
    y, states = mamba2_decode_naive(st, **inp, **lay)
    assert y.dtype == states.dtype == torch.float64
    assert torch.equal(st, st0)
    y64, _ = mamba2_decode_naive(st.double(), **{k: v.double() for k, v in inp.items()},
                                 **{k: v.double() for k, v in lay.items()})
    assert torch.equal(y, y64)     # float64 math on the exact input values


def test_mamba2_naive_validation():
    g = gen(6)
    lay = random_mamba2_layer(4, g)
    inp = random_mamba2_inputs(2, 1, 4, 2, 3, 2, g)
    st = random_state((2, 4, 2, 3), g)
    bad = dict(inp, x=inp["x"][:, :, :3])
    with pytest.raises(ValueError, match=r"mamba2_decode_naive: 'x' must be .*\[B=2, T, H=4, P=2\]; got float32 "
                                         r"\[2, 1, 3, 2\]"):
        mamba2_decode_naive(st, **bad, **lay)
    with pytest.raises(ValueError, match="'dt_bias'"):
        mamba2_decode_naive(st, **inp, **dict(lay, dt_bias=lay["dt_bias"][:3]))
    with pytest.raises(ValueError, match="'state'"):
        mamba2_decode_naive(st.to(torch.int64), **inp, **lay)
    with pytest.raises(ValueError, match="multiple of the number of groups"):
        odd = random_mamba2_inputs(2, 1, 4, 2, 3, 3, g)
        mamba2_decode_naive(st, **odd, **lay)
    with pytest.raises(ValueError, match="'dt_raw'"):
        mamba2_gates("nope", lay["dt_bias"], lay["A"])


# ---- GDN naive ----------------------------------------------------------------------------------

def gdn_delta_rule(state, q, k, v, a, b, A_log, dt_bias, scale=None):
    """Independent delta-rule form (paper Eq. 2): S = alpha S (I - beta k k^T) + beta v k^T, per head."""
    Bsz, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    scale = K ** -0.5 if scale is None else scale
    S = state.double().clone()
    o = torch.zeros(Bsz, T, HV, V, dtype=torch.float64)
    eye = torch.eye(K, dtype=torch.float64)
    for bb in range(Bsz):
        for t in range(T):
            for hv in range(HV):
                h = hv // (HV // H)
                kk = k[bb, t, h].double()
                kk = kk / torch.sqrt((kk * kk).sum() + 1e-6)
                qq = q[bb, t, h].double()
                qq = qq / torch.sqrt((qq * qq).sum() + 1e-6) * scale
                sp = math.log1p(math.exp(float(a[bb, t, hv]) + float(dt_bias[hv])))
                al = math.exp(-math.exp(float(A_log[hv])) * sp)
                be = 1 / (1 + math.exp(-float(b[bb, t, hv])))
                S[bb, hv] = al * S[bb, hv] @ (eye - be * torch.outer(kk, kk)) + be * torch.outer(v[bb, t, hv].double(), kk)
                o[bb, t, hv] = S[bb, hv] @ qq
    return o, S


@pytest.mark.parametrize("scale", [None, 0.37])
def test_gdn_naive_matches_delta_rule(scale):
    g = gen(7)
    Bsz, T, H, HV, K, V = 2, 4, 2, 4, 5, 3
    lay = random_gdn_layer(HV, g)
    inp = random_gdn_inputs(Bsz, T, H, HV, K, V, g)
    st = random_state((Bsz, HV, V, K), g)
    o, states = gdn_decode_naive(st, **inp, **lay, scale=scale)
    o_ref, S_ref = gdn_delta_rule(st, **inp, **lay, scale=scale)
    assert torch.allclose(o, o_ref, rtol=1e-12, atol=1e-14)
    assert torch.allclose(states[:, -1], S_ref, rtol=1e-12, atol=1e-14)


def test_gdn_naive_snapshots_chain():
    g = gen(8)
    Bsz, T, H, HV, K, V = 2, 4, 1, 2, 4, 4
    lay = random_gdn_layer(HV, g)
    inp = random_gdn_inputs(Bsz, T, H, HV, K, V, g)
    st = random_state((Bsz, HV, V, K), g)
    o, states = gdn_decode_naive(st, **inp, **lay)
    S = st
    for t in range(T):
        o1, s1 = gdn_decode_naive(S, **{kk: vv[:, t:t + 1] for kk, vv in inp.items()}, **lay)
        # Same float64 operations, but torch's CPU kernels may round a broadcast multiply-add differently for
        # another tensor shape (seen on an AVX-512 / AMX host: one ulp, 1.4e-17, in the state after token 3).
        _assert_chain_equal(o1[:, 0], o[:, t])
        _assert_chain_equal(s1[:, 0], states[:, t])
        S = s1[:, 0]


def test_gdn_naive_validation():
    g = gen(9)
    lay = random_gdn_layer(4, g)
    inp = random_gdn_inputs(1, 2, 2, 4, 3, 5, g)
    st = random_state((1, 4, 5, 3), g)
    with pytest.raises(ValueError, match=r"gdn_decode_naive: 'v' must be .*got float32 \[1, 2, 4, 4\]"):
        gdn_decode_naive(st, **dict(inp, v=inp["v"][..., :4]), **lay)
    with pytest.raises(ValueError, match="'A_log'"):
        gdn_decode_naive(st, **inp, **dict(lay, A_log=lay["A_log"][:2]))
    with pytest.raises(ValueError, match="multiple of key heads"):
        bad = random_gdn_inputs(1, 2, 3, 4, 3, 5, g)
        gdn_decode_naive(st, **bad, **lay)
    with pytest.raises(ValueError, match="'b'"):
        gdn_gates(inp["a"], inp["b"][..., :2], lay["A_log"], lay["dt_bias"])
