"""Gated DeltaNet decode, conventional recurrence (float64 spec; docs/design.md section 2).

Per decode row b, token t and value head hv (value head hv reads key head ``hv // (HV / H)``)::

    g     = -exp(A_log) * softplus(a + dt_bias)      log-decay
    alpha = exp(g),  beta = sigmoid(b)
    qn    = l2norm(q) * scale,  kn = l2norm(k)       l2norm(x) = x / sqrt(sum(x * x) + 1e-6)
    u_t   = beta (v_t - alpha S_{t-1} kn_t)           correction (paper Eq. 3)
    S_t   = alpha S_{t-1} + u_t kn_t^T                S in R^{V x K}
    o_t   = S_t qn_t

This outer-product form equals the delta rule ``S_t = alpha S_{t-1} (I - beta kn kn^T) + beta v kn^T``
(paper Eq. 2 and Eq. 7).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._validate import expect_tensor, expect_trailing, f64
from .mamba2 import softplus

L2NORM_EPS = 1e-6


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """``x / sqrt(sum(x * x, -1) + 1e-6)`` in float64, over the last dim."""
    expect_trailing("l2norm", "x", x, ["K"], {})
    x = f64(x)
    return x / torch.sqrt(torch.sum(x * x, dim=-1, keepdim=True) + L2NORM_EPS)


def gdn_gates(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GDN gates.

    Args:
        a, b: ``[..., HV]`` (same shape), any float dtype.
        A_log, dt_bias: ``[HV]``.
    Returns:
        ``(g, alpha, beta)`` float64 ``[..., HV]``: ``g = -exp(A_log) * softplus(a + dt_bias)``,
        ``alpha = exp(g)``, ``beta = sigmoid(b)``.
    """
    op = "gdn_gates"
    sizes: dict = {}
    expect_trailing(op, "a", a, ["HV"], sizes)
    expect_tensor(op, "b", b, list(a.shape[:-1]) + ["HV"], sizes)
    expect_tensor(op, "A_log", A_log, ["HV"], sizes)
    expect_tensor(op, "dt_bias", dt_bias, ["HV"], sizes)
    g = -torch.exp(f64(A_log)) * softplus(f64(a) + f64(dt_bias))
    return g, torch.exp(g), torch.sigmoid(f64(b))


def default_scale(K: int) -> float:
    """Query scale used when ``scale`` is None: ``K ** -0.5``."""
    return float(K) ** -0.5


def gdn_decode_naive(state: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor,
                     scale: Optional[float] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Conventional GDN decoding of T tokens per row, in float64 (the spec).

    Args:
        state: ``[B, HV, V, K]`` state before the first token (not modified).
        q, k: ``[B, T, H, K]``; v: ``[B, T, HV, V]``; a, b: ``[B, T, HV]``; A_log, dt_bias: ``[HV]``;
        ``HV % H == 0``; scale: float or None (``K ** -0.5``). Any float dtype.
    Returns:
        ``(o, states)``: ``o`` float64 ``[B, T, HV, V]`` and ``states`` float64 ``[B, T, HV, V, K]``,
        ``states[:, t]`` = state after token t (per-draft snapshots).

    Math: see the module docstring (u = beta (v - alpha S kn); S = alpha S + u kn^T; o = S qn).
    """
    op = "gdn_decode_naive"
    sz: dict = {}
    expect_tensor(op, "state", state, ["B", "HV", "V", "K"], sz)
    expect_tensor(op, "q", q, ["B", "T", "H", "K"], sz)
    expect_tensor(op, "k", k, ["B", "T", "H", "K"], sz)
    expect_tensor(op, "v", v, ["B", "T", "HV", "V"], sz)
    expect_tensor(op, "a", a, ["B", "T", "HV"], sz)
    expect_tensor(op, "b", b, ["B", "T", "HV"], sz)
    expect_tensor(op, "A_log", A_log, ["HV"], sz)
    expect_tensor(op, "dt_bias", dt_bias, ["HV"], sz)
    H, HV = sz["H"], sz["HV"]
    if H < 1 or HV % H != 0:
        raise ValueError(f"{op}: value heads HV={HV} must be a multiple of key heads H={H} "
                         f"(from 'v' {list(v.shape)} and 'k' {list(k.shape)})")
    if scale is None:
        scale = default_scale(sz["K"])
    rep = HV // H
    _, alpha, beta = gdn_gates(a, b, A_log, dt_bias)                           # [B, T, HV]
    qn = torch.repeat_interleave(l2norm(q) * float(scale), rep, dim=2)        # [B, T, HV, K]
    kn = torch.repeat_interleave(l2norm(k), rep, dim=2)
    vs = f64(v)
    S = f64(state).clone()
    Bsz, T = sz["B"], sz["T"]
    outs = torch.zeros(Bsz, T, HV, sz["V"], dtype=torch.float64)
    states = torch.zeros(Bsz, T, HV, sz["V"], sz["K"], dtype=torch.float64)
    for t in range(T):
        al = alpha[:, t, :, None]                                           # [B, HV, 1]
        Sk = torch.einsum("bhvk,bhk->bhv", S, kn[:, t])
        u = beta[:, t, :, None] * (vs[:, t] - al * Sk)                      # [B, HV, V]
        S = al[..., None] * S + u[..., :, None] * kn[:, t, :, None, :]
        outs[:, t] = torch.einsum("bhvk,bhk->bhv", S, qn[:, t])
        states[:, t] = S
    return outs, states
