"""Replay and output-only evaluation (paper Eq. 5, 6, 10, 11), generic over the family.

Generic recurrence (paper Eq. 1): ``S_t = alpha_t S_{t-1} + v_t k_t^T``, ``o_t = S_t q_t`` with
``S in R^{dv x dk}``. Mamba-2: ``v = dt x``, ``k = B``, ``q = C``. GDN: ``v`` is replaced by the
correction ``u`` and ``k, q`` are the normalized (and, for q, scaled) key and query.

All functions take optional leading batch dims ``...`` (e.g. heads) shared by every operand, and
compute in float64. Records are indexed 1-based in the formulas below (j = 1..h committed, then
the drafts h+1..h+T) and 0-based in the tensors. ``gamma_{i:j} = prod_{l=i}^{j} alpha_l`` (1 when
i > j) and ``gamma_h = gamma_{1:h}``.
"""
from __future__ import annotations

from typing import Dict, List

import torch

from ._validate import describe, expect_int, expect_tensor, f64


def _lead(op: str, S_ckpt) -> List:
    if not isinstance(S_ckpt, torch.Tensor) or S_ckpt.dim() < 2 or not S_ckpt.is_floating_point():
        raise ValueError(f"{op}: 'S_ckpt' must be a floating-point tensor of shape [..., dv, dk]; "
                         f"got {describe(S_ckpt)}")
    return list(S_ckpt.shape[:-2])


def decay_matrix(alphas: torch.Tensor) -> torch.Tensor:
    """Segment decays of n records: ``[..., n] -> [..., n, n]``.

    ``G[..., r, t] = prod_{l=r+1}^{t} alphas[..., l]`` for ``r <= t`` (0-based; 1 on the diagonal) and
    0 for ``r > t``. In the paper's 1-based notation ``G[j-1, t-1] = gamma_{j+1:t}``. Products are
    formed left to right with ``cumprod``, never as ratios of prefix products.
    """
    if not isinstance(alphas, torch.Tensor) or alphas.dim() < 1 or not alphas.is_floating_point():
        raise ValueError(f"decay_matrix: 'alphas' must be a floating-point tensor of shape [..., n]; "
                         f"got {describe(alphas)}")
    a = f64(alphas)
    n = a.shape[-1]
    idx = torch.arange(n)
    after = idx[None, :] > idx[:, None]                                   # [r, l]: l > r
    M = torch.where(after, a[..., None, :], torch.ones((), dtype=torch.float64))   # [..., r, l]
    G = torch.cumprod(M, dim=-1)
    return G * (idx[None, :] >= idx[:, None]).to(torch.float64)


def replay(S_ckpt: torch.Tensor, alphas: torch.Tensor, vs: torch.Tensor, ks: torch.Tensor) -> torch.Tensor:
    """Replay (paper Eq. 5): the state after h records, from the checkpoint before them.

    Args:
        S_ckpt: ``[..., dv, dk]``; alphas: ``[..., h]``; vs: ``[..., h, dv]``; ks: ``[..., h, dk]`` (h >= 0).
    Returns:
        float64 ``[..., dv, dk]``::

            Replay(S_ckpt, B_{1:h}) = gamma_h S_ckpt + sum_{j=1}^{h} gamma_{j+1:h} v_j k_j^T
    """
    op = "replay"
    lead = _lead(op, S_ckpt)
    sz: Dict[str, int] = {}
    expect_tensor(op, "S_ckpt", S_ckpt, lead + ["dv", "dk"], sz)
    expect_tensor(op, "alphas", alphas, lead + ["h"], sz)
    expect_tensor(op, "vs", vs, lead + ["h", "dv"], sz)
    expect_tensor(op, "ks", ks, lead + ["h", "dk"], sz)
    S = f64(S_ckpt)
    h = sz["h"]
    if h == 0:
        return S.clone()
    a = f64(alphas)
    gamma_h = torch.prod(a, dim=-1)                                         # [...]
    w = decay_matrix(a)[..., :, h - 1]                                      # gamma_{j+1:h}, [..., h]
    acc = torch.einsum("...j,...jv,...jk->...vk", w, f64(vs), f64(ks))
    return gamma_h[..., None, None] * S + acc


def output_only(S_ckpt: torch.Tensor, alphas: torch.Tensor, vs: torch.Tensor, ks: torch.Tensor,
                qs: torch.Tensor, h: int) -> torch.Tensor:
    """OutputOnly (paper Eq. 6): outputs of T queries over h committed records and T drafts.

    Args:
        S_ckpt: ``[..., dv, dk]`` checkpoint before record 1.
        alphas: ``[..., h+T]``; vs: ``[..., h+T, dv]``; ks: ``[..., h+T, dk]`` (committed first, then drafts).
        qs: ``[..., T, dk]``; h: number of committed records (0 <= h).
    Returns:
        float64 ``[..., T, dv]``; row s-1 is the output of query s (1-based), which sees records
        ``1..h+s`` (committed history plus drafts up to its own position)::

            O = S_ckpt Q D + V (W ⊙ (K^T Q))            (V, K, Q hold records/queries as columns)
            D = diag(gamma_{h+1}, ..., gamma_{h+T})
            W_{js} = gamma_{j+1:h+s} if j <= h+s else 0

        Query s's output equals ``Replay(S_ckpt, B_{1:h+s}) q_s`` without materializing the state.
    """
    op = "output_only"
    lead = _lead(op, S_ckpt)
    sz: Dict[str, int] = {}
    expect_tensor(op, "S_ckpt", S_ckpt, lead + ["dv", "dk"], sz)
    expect_tensor(op, "alphas", alphas, lead + ["h+T"], sz)
    expect_tensor(op, "vs", vs, lead + ["h+T", "dv"], sz)
    expect_tensor(op, "ks", ks, lead + ["h+T", "dk"], sz)
    expect_tensor(op, "qs", qs, lead + ["T", "dk"], sz)
    n, T = sz["h+T"], sz["T"]
    h = expect_int(op, "h", h, 0, None)
    if h + T != n:
        raise ValueError(f"{op}: 'alphas'/'vs'/'ks' must hold h + T = {h} + {T} = {h + T} records; got {n}")
    a = f64(alphas)
    prefix = torch.cumprod(a, dim=-1)                                       # gamma_{1:t}, t = 1..n
    Dg = prefix[..., h:h + T]                                               # D_ss = gamma_{h+s}
    W = decay_matrix(a)[..., :, h:h + T]                                    # [..., n, T] masked
    Q = f64(qs)
    KQ = torch.einsum("...jk,...sk->...js", f64(ks), Q)                    # K^T Q
    SQ = torch.einsum("...vk,...sk->...vs", f64(S_ckpt), Q)                # S_ckpt Q
    O = SQ * Dg[..., None, :] + torch.einsum("...jv,...js->...vs", f64(vs), W * KQ)
    return O.transpose(-1, -2).contiguous()


def _corrections_args(op, S_ckpt, alphas, betas, us_committed, ks_committed, vs_draft, ks_draft, h):
    lead = _lead(op, S_ckpt)
    sz: Dict[str, int] = {}
    expect_tensor(op, "S_ckpt", S_ckpt, lead + ["dv", "dk"], sz)
    expect_tensor(op, "us_committed", us_committed, lead + ["h", "dv"], sz)
    expect_tensor(op, "ks_committed", ks_committed, lead + ["h", "dk"], sz)
    expect_tensor(op, "vs_draft", vs_draft, lead + ["T", "dv"], sz)
    expect_tensor(op, "ks_draft", ks_draft, lead + ["T", "dk"], sz)
    expect_tensor(op, "betas", betas, lead + ["T"], sz)
    expect_tensor(op, "alphas", alphas, lead + ["h+T"], sz)
    h = expect_int(op, "h", h, 0, None)
    if sz["h"] != h or sz["h+T"] != h + sz["T"]:
        raise ValueError(f"{op}: expected h = {h} committed records and h + T = {h + sz['T']} alphas; got "
                         f"'us_committed' with {sz['h']} records and 'alphas' with {sz['h+T']}")
    return h, sz["T"]


def gdn_draft_corrections(S_ckpt: torch.Tensor, alphas: torch.Tensor, betas: torch.Tensor,
                          us_committed: torch.Tensor, ks_committed: torch.Tensor, vs_draft: torch.Tensor,
                          ks_draft: torch.Tensor, h: int) -> torch.Tensor:
    """GDN draft corrections by one T x T unit-upper-triangular solve (paper Eq. 10).

    Args:
        S_ckpt: ``[..., dv, dk]`` checkpoint before record 1.
        alphas: ``[..., h+T]`` decays of the committed records then the drafts.
        betas: ``[..., T]`` draft write strengths ``beta_{h+1..h+T}`` (drafts only).
        us_committed: ``[..., h, dv]`` cached corrections; ks_committed: ``[..., h, dk]`` (normalized keys).
        vs_draft: ``[..., T, dv]``; ks_draft: ``[..., T, dk]`` (normalized keys); h: committed count.
    Returns:
        float64 ``[..., T, dv]``: draft corrections ``u_{h+1..h+T}`` with
        ``u_t = beta_t (v_t - alpha_t S_{t-1} k_t)`` and ``S_{t-1}`` the state after record t-1::

            U_d (I + A B_d) = R B_d
            R      = V_d - S_ckpt K_d D - U_c (W_c ⊙ (K_c^T K_d))
            A_{js} = gamma_{h+j+1:h+s} k_{h+j}^T k_{h+s} for j < s, else 0
            B_d    = diag(beta_{h+1}, ..., beta_{h+T}),  D, W as in Eq. 6, W_c = first h rows of W

        ``I + A B_d`` is unit upper triangular; U_d (columns = corrections) comes from one solve.
    """
    op = "gdn_draft_corrections"
    h, T = _corrections_args(op, S_ckpt, alphas, betas, us_committed, ks_committed, vs_draft, ks_draft, h)
    a = f64(alphas)
    beta = f64(betas)
    Kd, Vd = f64(ks_draft), f64(vs_draft)
    Kc, Uc = f64(ks_committed), f64(us_committed)
    Dg = torch.cumprod(a, dim=-1)[..., h:h + T]                           # gamma_{h+s}
    G = decay_matrix(a)                                                   # [..., n, n]
    Wc = G[..., :h, h:h + T]                                              # gamma_{j+1:h+s}, j <= h
    SK = torch.einsum("...vk,...sk->...vs", f64(S_ckpt), Kd)             # S_ckpt K_d, [..., dv, T]
    R = Vd.transpose(-1, -2) - SK * Dg[..., None, :]
    if h > 0:
        R = R - torch.einsum("...jv,...js->...vs", Uc, Wc * torch.einsum("...jk,...sk->...js", Kc, Kd))
    strict = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    A = torch.where(strict, G[..., h:, h:] * torch.einsum("...jk,...sk->...js", Kd, Kd),
                    torch.zeros((), dtype=torch.float64))
    M = torch.eye(T, dtype=torch.float64) + A * beta[..., None, :]        # I + A B_d
    RB = R * beta[..., None, :]                                           # R B_d
    Ud = torch.linalg.solve_triangular(M, RB, upper=True, left=False, unitriangular=True)
    return Ud.transpose(-1, -2).contiguous()


def gdn_draft_corrections_sequential(S_ckpt: torch.Tensor, alphas: torch.Tensor, betas: torch.Tensor,
                                     us_committed: torch.Tensor, ks_committed: torch.Tensor,
                                     vs_draft: torch.Tensor, ks_draft: torch.Tensor, h: int) -> torch.Tensor:
    """Same result as :func:`gdn_draft_corrections`, by sequential evaluation (for testing).

    ``S = Replay(S_ckpt, (alpha, u, k)_{1:h})``; then for s = 1..T:
    ``u_s = beta_s (v_s - alpha_{h+s} S k_s)``, ``S = alpha_{h+s} S + u_s k_s^T``.
    """
    op = "gdn_draft_corrections_sequential"
    h, T = _corrections_args(op, S_ckpt, alphas, betas, us_committed, ks_committed, vs_draft, ks_draft, h)
    a = f64(alphas)
    S = replay(S_ckpt, a[..., :h], f64(us_committed), f64(ks_committed))
    us = []
    for s in range(T):
        al = a[..., h + s, None]
        k = f64(ks_draft)[..., s, :]
        u = f64(betas)[..., s, None] * (f64(vs_draft)[..., s, :] - al * torch.einsum("...vk,...k->...v", S, k))
        S = al[..., None] * S + u[..., :, None] * k[..., None, :]
        us.append(u)
    return torch.stack(us, dim=-2)
