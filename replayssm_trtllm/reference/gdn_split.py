"""The algebra of the GDN split replay kernels (variant 6, ``cpp_plugins/kernels/gdn/gdn_split_kernels.cuh``)
in float64, for one decode row: the prep kernel's head records and the readout's combination, written the
way the kernels compute them. Tests check it against :func:`gdn_decode_naive` (the conventional
recurrence), so the decomposition the kernels rely on is proven on the CPU, independently of CUDA.

With records j = 0 .. h-1 committed (log-decay g_j, correction u_j, raw key k_j from the ring) followed by
the step's drafts s = 0 .. T-1 at j = h + s, cum_j = sum_{i<=j} g_i, inv_j = 1 / sqrt(|k_j|^2 + 1e-6) and
kn_j = k_j inv_j:

* head record (prep): ``gk_s = exp(cum_{h+s}) inv_{h+s}``, ``gq_s = exp(cum_{h+s}) scale / |q_s|``,
  ``ck_{s,j} = exp(cum_{h+s} - cum_j) kn_j . kn_s`` (j < h + s), ``cq_{s,j}`` likewise with ``qn_s``
  (j <= h + s); on a flush ``fw_j = exp(cum_{nf-1} - cum_j) inv_j`` and ``gfold = exp(cum_{nf-1})``;
* readout: ``X_s = gk_s S k_s + sum_{j<h} ck_{s,j} u_j + sum_{i<s} ck_{s,h+i} u_{h+i}`` (raw k_s),
  ``u_{h+s} = beta_s (v_s - X_s)``, ``o_s = gq_s S q_s + sum_{j<=h+s} cq_{s,j} u_j`` (raw q_s);
* fold: ``S <- gfold S + sum_{j<nf} fw_j u_j k_j^T`` (raw keys), nf = h + 1 in standard mode (the current
  token included, with its unrounded u) and h in speculative mode.

``readout="matrix"`` computes the drafts the way the tensor-core verify readout does
(``gdn_split_mma_kernel.cuh``): X0 / Y0 are the state and committed-record parts of X / Y, the prep's head
record holds ``M = (I + diag(beta) Lk)^-1 diag(beta)`` (Lk[s][i] = ck_{s,h+i}, i < s; formed column by column by
forward substitution, as ``writeMmaBlock`` does) and ``N = Cq M`` (Cq[s][i] = cq_{s,h+i}, i <= s), and the
readout forms ``u = M w`` and ``o = Y0 + N w`` with ``w = v - X0``.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._validate import expect_step_shape, expect_tensor, f64
from .gdn import L2NORM_EPS, default_scale, gdn_gates


def gdn_split_step(state: torch.Tensor, ring_g: torch.Tensor, ring_u: torch.Tensor, ring_k: torch.Tensor,
                   q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   A_log: torch.Tensor, dt_bias: torch.Tensor, window: int, mode: int = 0,
                   scale: Optional[float] = None, readout: str = "substitution"
                   ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """One replay step of one row through the split kernels' algebra, float64.

    Args:
        state: ``[HV, V, K]`` checkpoint; ring_g ``[h, HV]``, ring_u ``[h, HV, V]``, ring_k ``[h, H, K]``: the h
            committed records (raw keys); q, k ``[T, H, K]``, v ``[T, HV, V]``, a, b ``[T, HV]``: the step's
            tokens; A_log, dt_bias ``[HV]``; window L; mode 0 (standard, T = 1, flush when h + 1 == L) or 1
            (speculative, flush when h + T > L, folding the h committed records); readout "substitution" (the
            CUDA-core readout) or "matrix" (the tensor-core verify readout's solve through M and N).
    Returns:
        ``(o, u, new_state)``: o and u ``[T, HV, V]`` (the step's outputs and corrections), new_state
        ``[HV, V, K]`` after the fold on a flush step, else None.
    """
    op = "gdn_split_step"
    sz: dict = {}
    expect_tensor(op, "state", state, ["HV", "V", "K"], sz)
    expect_tensor(op, "q", q, ["T", "H", "K"], sz)
    expect_tensor(op, "k", k, ["T", "H", "K"], sz)
    expect_tensor(op, "v", v, ["T", "HV", "V"], sz)
    expect_tensor(op, "a", a, ["T", "HV"], sz)
    expect_tensor(op, "b", b, ["T", "HV"], sz)
    expect_tensor(op, "ring_g", ring_g, ["h", "HV"], sz)
    expect_tensor(op, "ring_u", ring_u, ["h", "HV", "V"], sz)
    expect_tensor(op, "ring_k", ring_k, ["h", "H", "K"], sz)
    T, H, HV, h, L = sz["T"], sz["H"], sz["HV"], sz["h"], int(window)
    expect_step_shape(op, HV, "HV", H, "H", mode, T, h, L)
    scale = default_scale(sz["K"]) if scale is None else float(scale)
    rep = HV // H
    S = f64(state)
    g_d, _, beta = gdn_gates(a, b, A_log, dt_bias)                               # [T, HV]
    g = torch.cat([f64(ring_g), g_d], dim=0)                                      # [R, HV]
    cum = torch.cumsum(g, dim=0)                                                   # cum_j = P[j + 1]
    k_raw = torch.repeat_interleave(torch.cat([f64(ring_k), f64(k)], dim=0), rep, dim=1)  # [R, HV, K]
    inv = 1.0 / torch.sqrt((k_raw * k_raw).sum(-1) + L2NORM_EPS)                  # [R, HV]
    kn = k_raw * inv[..., None]
    q_raw = torch.repeat_interleave(f64(q), rep, dim=1)                           # [T, HV, K]
    qinv = scale / torch.sqrt((q_raw * q_raw).sum(-1) + L2NORM_EPS)               # [T, HV]
    qn = q_raw * qinv[..., None]
    us = [f64(ring_u)[j] for j in range(h)]                                        # [HV, V] each
    o = torch.zeros(T, HV, sz["V"], dtype=torch.float64)
    if readout not in ("substitution", "matrix"):
        raise ValueError(f"{op}: readout must be 'substitution' or 'matrix'; got {readout!r}")
    if readout == "matrix":
        ck = lambda s, j: torch.exp(cum[h + s] - cum[j]) * (kn[j] * kn[h + s]).sum(-1)  # noqa: E731  [HV]
        cq = lambda s, j: torch.exp(cum[h + s] - cum[j]) * (kn[j] * qn[s]).sum(-1)      # noqa: E731
        W, Y0 = [], []
        for s in range(T):
            t = h + s
            gam = torch.exp(cum[t])
            X0 = (gam * inv[t])[:, None] * torch.einsum("hvk,hk->hv", S, k_raw[t])
            Ys = (gam * qinv[s])[:, None] * torch.einsum("hvk,hk->hv", S, q_raw[s])
            for j in range(h):
                X0 = X0 + ck(s, j)[:, None] * us[j]
                Ys = Ys + cq(s, j)[:, None] * us[j]
            W.append(f64(v)[s] - X0)
            Y0.append(Ys)
        M = torch.zeros(HV, T, T, dtype=torch.float64)  # column c by forward substitution (writeMmaBlock)
        for c in range(T):
            for s in range(c, T):
                if s == c:
                    M[:, s, c] = beta[s]
                else:
                    acc = sum(ck(s, h + i) * M[:, i, c] for i in range(c, s))
                    M[:, s, c] = -beta[s] * acc
        N = torch.zeros(HV, T, T, dtype=torch.float64)
        for s in range(T):
            for c in range(s + 1):
                N[:, s, c] = sum(cq(s, h + i) * M[:, i, c] for i in range(c, s + 1))
        Wt = torch.stack(W, dim=1)                                                 # [HV, T, V]
        U = torch.einsum("hsi,hiv->hsv", M, Wt)
        O = torch.stack(Y0, dim=1) + torch.einsum("hsi,hiv->hsv", N, Wt)
        us.extend(U[:, s] for s in range(T))
        o = O.transpose(0, 1).contiguous()
    for s in range(T if readout == "substitution" else 0):
        t = h + s
        gam = torch.exp(cum[t])                                                     # [HV]
        gk, gq = gam * inv[t], gam * qinv[s]
        X = gk[:, None] * torch.einsum("hvk,hk->hv", S, k_raw[t])
        Y = gq[:, None] * torch.einsum("hvk,hk->hv", S, q_raw[s])
        for j in range(t):                                                          # committed, then drafts i < s
            ck = torch.exp(cum[t] - cum[j]) * (kn[j] * kn[t]).sum(-1)
            X = X + ck[:, None] * us[j]
        u_t = beta[s][:, None] * (f64(v)[s] - X)
        us.append(u_t)
        for j in range(t + 1):                                                      # j <= h + s (self included)
            cq = torch.exp(cum[t] - cum[j]) * (kn[j] * qn[s]).sum(-1)
            Y = Y + cq[:, None] * us[j]
        o[s] = Y
    flush = (h + 1 == L) if mode == 0 else (h + T > L)
    new_state = None
    if flush:
        nf = h + 1 if mode == 0 else h
        if nf == 0:
            new_state = S.clone()
        else:
            gfold = torch.exp(cum[nf - 1])
            new_state = gfold[:, None, None] * S
            for j in range(nf):
                fw = torch.exp(cum[nf - 1] - cum[j]) * inv[j]
                new_state = new_state + (fw[:, None] * us[j])[..., None] * k_raw[j][:, None, :]
    return o, torch.stack(us[h:], dim=0), new_state
