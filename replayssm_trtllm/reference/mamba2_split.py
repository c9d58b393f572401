"""The algebra of the Mamba-2 split replay kernels (variant 4, ``cpp_plugins/kernels/mamba2/mamba2_split_kernel.cuh``)
in float64, for one decode row: the prep kernel's head records and the readout's combination, written the
way the kernels compute them. Tests check it against :func:`mamba2_decode_naive` (the conventional
recurrence), so the decomposition the kernels rely on is proven on the CPU, independently of CUDA.

With records j = 0 .. h-1 committed (dt_j after bias + softplus, x_j, B_j from the ring) followed by the
step's drafts s = 0 .. T-1 at j = h + s, la_j = dt_j A and cum_j = sum_{i<=j} la_i:

* head record (prep): ``gamma_s = exp(cum_{h+s})``, ``coef_{s,j} = exp(cum_{h+s} - cum_j) dt_j (B_j . C_s)``
  for j <= h + s, plus D at j = h + s; on a flush ``fw_j = exp(cum_{nf-1} - cum_j) dt_j`` and
  ``gfold = exp(cum_{nf-1})``;
* readout: ``y_s = (gamma_s S C_s + sum_{j<=h+s} coef_{s,j} x_j) silu(z_s)``;
* fold: ``S <- gfold S + sum_{j<nf} fw_j x_j B_j^T``, nf = h + 1 in standard mode (the current token
  included) and h in speculative mode.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._validate import expect_step_shape, expect_tensor, f64
from .mamba2 import expand_groups, mamba2_gates, silu


def mamba2_split_step(state: torch.Tensor, ring_dt: torch.Tensor, ring_x: torch.Tensor, ring_B: torch.Tensor,
                      x: torch.Tensor, dt_raw: torch.Tensor, Bm: torch.Tensor, Cm: torch.Tensor, A: torch.Tensor,
                      D: torch.Tensor, dt_bias: torch.Tensor, window: int, mode: int = 0,
                      z: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """One replay step of one row through the split kernels' algebra, float64.

    Args:
        state: ``[H, P, N]`` checkpoint; ring_dt ``[h, H]`` (after bias + softplus), ring_x ``[h, H, P]``,
            ring_B ``[h, G, N]``: the h committed records; x ``[T, H, P]``, dt_raw ``[T, H]``, Bm, Cm
            ``[T, G, N]``, z ``[T, H, P]`` or None: the step's tokens; A, D, dt_bias ``[H]``; window L; mode 0
            (standard, T = 1, flush when h + 1 == L) or 1 (speculative, flush when h + T > L, folding the h
            committed records).
    Returns:
        ``(y, new_state)``: y ``[T, H, P]``, new_state ``[H, P, N]`` after the fold on a flush step, else None.
    """
    op = "mamba2_split_step"
    sz: dict = {}
    expect_tensor(op, "state", state, ["H", "P", "N"], sz)
    expect_tensor(op, "x", x, ["T", "H", "P"], sz)
    expect_tensor(op, "dt_raw", dt_raw, ["T", "H"], sz)
    expect_tensor(op, "Bm", Bm, ["T", "G", "N"], sz)
    expect_tensor(op, "Cm", Cm, ["T", "G", "N"], sz)
    expect_tensor(op, "ring_dt", ring_dt, ["h", "H"], sz)
    expect_tensor(op, "ring_x", ring_x, ["h", "H", "P"], sz)
    expect_tensor(op, "ring_B", ring_B, ["h", "G", "N"], sz)
    if z is not None:
        expect_tensor(op, "z", z, ["T", "H", "P"], sz)
    T, H, G, h, L = sz["T"], sz["H"], sz["G"], sz["h"], int(window)
    expect_step_shape(op, H, "H", G, "G", mode, T, h, L)
    S = f64(state)
    dt_d, _ = mamba2_gates(dt_raw, dt_bias, A)                                   # [T, H]
    dt = torch.cat([f64(ring_dt), dt_d], dim=0)                                   # [R, H]
    cum = torch.cumsum(dt * f64(A), dim=0)
    xs = torch.cat([f64(ring_x), f64(x)], dim=0)                                  # [R, H, P]
    Bs = expand_groups(torch.cat([f64(ring_B), f64(Bm)], dim=0), H, dim=1)        # [R, H, N]
    Cs = expand_groups(f64(Cm), H, dim=1)                                         # [T, H, N]
    y = torch.zeros(T, H, sz["P"], dtype=torch.float64)
    for s in range(T):
        t = h + s
        acc = torch.exp(cum[t])[:, None] * torch.einsum("hpn,hn->hp", S, Cs[s])
        for j in range(t + 1):
            coef = torch.exp(cum[t] - cum[j]) * dt[j] * (Bs[j] * Cs[s]).sum(-1)
            if j == t:
                coef = coef + f64(D)
            acc = acc + coef[:, None] * xs[j]
        y[s] = acc * silu(f64(z)[s]) if z is not None else acc
    flush = (h + 1 == L) if mode == 0 else (h + T > L)
    if not flush:
        return y, None
    nf = h + 1 if mode == 0 else h
    if nf == 0:
        return y, S.clone()
    new_state = torch.exp(cum[nf - 1])[:, None, None] * S
    for j in range(nf):
        fw = torch.exp(cum[nf - 1] - cum[j]) * dt[j]
        new_state = new_state + (fw[:, None] * xs[j])[..., None] * Bs[j][:, None, :]
    return y, new_state
