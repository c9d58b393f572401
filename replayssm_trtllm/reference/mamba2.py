"""Mamba-2 decode, conventional recurrence (float64 spec; docs/design.md section 2).

Per decode row b, token t and head h (head h reads group ``h // (H / G)``)::

    dt    = softplus(dt_raw + dt_bias)          softplus(x) = log1p(exp(x)), = x for x > 20
    alpha = exp(dt * A)                         A < 0, so alpha in (0, 1)
    S_t   = alpha S_{t-1} + (dt x_t) B_t^T      S in R^{P x N}
    y_t   = S_t C_t + D x_t
    y_t   = y_t * silu(z_t)                     only when z is given; silu(z) = z sigmoid(z)

In the generic notation of the paper (Eq. 1): v = dt x (d_v = P), k = B, q = C (d_k = N).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ._validate import expect_tensor, expect_trailing, f64

SOFTPLUS_THRESHOLD = 20.0


def softplus(x: torch.Tensor) -> torch.Tensor:
    """``log1p(exp(x))``, and ``x`` itself for ``x > 20`` (the convention of the kernels)."""
    x = f64(x)
    return torch.where(x > SOFTPLUS_THRESHOLD, x, torch.log1p(torch.exp(torch.clamp(x, max=SOFTPLUS_THRESHOLD))))


def silu(z: torch.Tensor) -> torch.Tensor:
    """``z * sigmoid(z)`` in float64."""
    z = f64(z)
    return z * torch.sigmoid(z)


def mamba2_gates(dt_raw: torch.Tensor, dt_bias: torch.Tensor, A: torch.Tensor
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2 step size and decay.

    Args:
        dt_raw: ``[..., H]`` any float dtype.
        dt_bias: ``[H]``.
        A: ``[H]`` (negative).
    Returns:
        ``(dt, alpha)``, both float64 ``[..., H]``:
        ``dt = softplus(dt_raw + dt_bias)``, ``alpha = exp(dt * A)``.
    """
    op = "mamba2_gates"
    sizes: dict = {}
    expect_trailing(op, "dt_raw", dt_raw, ["H"], sizes)
    expect_tensor(op, "dt_bias", dt_bias, ["H"], sizes)
    expect_tensor(op, "A", A, ["H"], sizes)
    dt = softplus(f64(dt_raw) + f64(dt_bias))
    alpha = torch.exp(dt * f64(A))
    return dt, alpha


def expand_groups(t: torch.Tensor, H: int, dim: int) -> torch.Tensor:
    """Expand a per-group tensor (size G along ``dim``) to per-head: head h takes group ``h // (H / G)``."""
    G = t.shape[dim]
    return torch.repeat_interleave(t, H // G, dim=dim)


def mamba2_decode_naive(state: torch.Tensor, x: torch.Tensor, dt_raw: torch.Tensor, Bm: torch.Tensor,
                        Cm: torch.Tensor, A: torch.Tensor, D: torch.Tensor, dt_bias: torch.Tensor,
                        z: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Conventional Mamba-2 decoding of T tokens per row, in float64 (the spec).

    Args:
        state: ``[B, H, P, N]`` state before the first token (not modified).
        x: ``[B, T, H, P]``; dt_raw: ``[B, T, H]``; Bm, Cm: ``[B, T, G, N]`` with ``H % G == 0``;
        A, D, dt_bias: ``[H]``; z: optional ``[B, T, H, P]``. Any float dtype.
    Returns:
        ``(y, states)``: ``y`` float64 ``[B, T, H, P]`` and ``states`` float64 ``[B, T, H, P, N]`` where
        ``states[:, t]`` is the state after token t (per-draft snapshots for speculative decoding:
        accepting ``a`` drafts leaves ``states[:, a - 1]``).

    Math (per head h, group g = h // (H / G))::

        dt, alpha = mamba2_gates(dt_raw, dt_bias, A)
        S_t = alpha_t S_{t-1} + (dt_t x_t) B_t^T
        y_t = S_t C_t + D x_t ;  y_t *= silu(z_t) if z is given
    """
    op = "mamba2_decode_naive"
    sz: dict = {}
    expect_tensor(op, "state", state, ["B", "H", "P", "N"], sz)
    expect_tensor(op, "x", x, ["B", "T", "H", "P"], sz)
    expect_tensor(op, "dt_raw", dt_raw, ["B", "T", "H"], sz)
    expect_tensor(op, "Bm", Bm, ["B", "T", "G", "N"], sz)
    expect_tensor(op, "Cm", Cm, ["B", "T", "G", "N"], sz)
    expect_tensor(op, "A", A, ["H"], sz)
    expect_tensor(op, "D", D, ["H"], sz)
    expect_tensor(op, "dt_bias", dt_bias, ["H"], sz)
    if z is not None:
        expect_tensor(op, "z", z, ["B", "T", "H", "P"], sz)
    H, G = sz["H"], sz["G"]
    if G < 1 or H % G != 0:
        raise ValueError(f"{op}: number of heads H={H} must be a multiple of the number of groups G={G} "
                         f"(from 'Bm' {list(Bm.shape)})")
    Bsz, T = sz["B"], sz["T"]
    dt, alpha = mamba2_gates(dt_raw, dt_bias, A)          # [B, T, H]
    xs = f64(x)
    Bh = expand_groups(f64(Bm), H, dim=2)                 # [B, T, H, N]
    Ch = expand_groups(f64(Cm), H, dim=2)
    Dv = f64(D)
    S = f64(state).clone()
    ys = torch.zeros(Bsz, T, H, sz["P"], dtype=torch.float64)
    states = torch.zeros(Bsz, T, H, sz["P"], sz["N"], dtype=torch.float64)
    for t in range(T):
        v = dt[:, t, :, None] * xs[:, t]                                  # [B, H, P]
        S = alpha[:, t, :, None, None] * S + v[..., :, None] * Bh[:, t, :, None, :]
        y = torch.einsum("bhpn,bhn->bhp", S, Ch[:, t]) + Dv[None, :, None] * xs[:, t]
        if z is not None:
            y = y * silu(z[:, t])
        ys[:, t] = y
        states[:, t] = S
    return ys, states
