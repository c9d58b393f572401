"""The recurrent state of a slot from its checkpoint and committed ring records, in torch ops (fp32).

A replay cache never holds a slot's current state: it holds the checkpoint and the ``h`` records committed since
(design.md 3). Folding those records into the checkpoint gives the state a conventional decoder would hold. That
is what a serving framework needs whenever it takes a request's state out of the cache: preemption and swap-out to
host memory, a prefix-cache snapshot, migration to another slot, or a check against conventional decoding.

Two users: the drop-ins' ``materialize`` (integrations/_pool_replay.py: the fold written back, rings emptied) and
the caches' ``current_state`` (ops/state_cache.py, ops/gdn.py: returned, nothing changed). Both run a few small
torch ops per record on the cache's device (not inside a captured CUDA graph, not on the decode's hot path).

Records (design.md 3): Mamba-2 ``(dt_j, x_j, B_j)`` with dt after bias and softplus, so
``S <- exp(dt_j A) S + dt_j x_j B_j^T`` per head (B shared by the heads of a group); GDN ``(g_j, u_j, k_j)`` with
the log-decay g, the correction u and the raw key k, so ``S <- exp(g_j) S + u_j kn_j^T`` with kn the l2-normalized
key (the kernels' normalization, eps 1e-6; k shared by the value heads of a key head). Neutral records
(state/phase.py) leave S unchanged in both.
"""
from __future__ import annotations

from typing import Callable

import torch

GDN_KEY_NORM_EPS = 1e-6   # the kernels' l2 normalization of keys: k / sqrt(|k|^2 + eps)


def mamba2_fold_record(S: torch.Tensor, dt: torch.Tensor, x: torch.Tensor, B: torch.Tensor,
                       A: torch.Tensor) -> torch.Tensor:
    """One Mamba-2 record folded into ``S`` ``[n, H, P, N]`` fp32: dt ``[n, H]`` fp32, x ``[n, H, P]``,
    B ``[n, G, N]`` (any float dtype), A ``[H]`` fp32 (``-exp(A_log)``)."""
    H, G = S.shape[1], B.shape[1]
    Bh = B.to(torch.float32).repeat_interleave(H // G, dim=1)                                    # [n, H, N]
    decay = torch.exp(dt * A.to(torch.float32))                                                  # [n, H]
    return decay[..., None, None] * S + (dt[..., None] * x.to(torch.float32))[..., None] * Bh[:, :, None, :]


def gdn_fold_record(S: torch.Tensor, g: torch.Tensor, u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """One Gated DeltaNet record folded into ``S`` ``[n, HV, V, K]`` fp32: g ``[n, HV]`` fp32, u ``[n, HV, V]``,
    k ``[n, H, K]`` raw (any float dtype)."""
    HV, H = S.shape[1], k.shape[1]
    kr = k.to(torch.float32)
    kn = (kr / torch.sqrt((kr * kr).sum(-1, keepdim=True) + GDN_KEY_NORM_EPS)).repeat_interleave(HV // H, dim=1)
    return torch.exp(g)[..., None, None] * S + u.to(torch.float32)[..., :, None] * kn[:, :, None, :]


@torch.no_grad()
def fold_committed(S: torch.Tensor, ring_origin: torch.Tensor, ring_len: torch.Tensor, capacity: int,
                   fold_at: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``S`` ``[n, ...]`` (the slots' checkpoints, fp32) with each slot's ``ring_len`` committed records folded in,
    oldest first from ``ring_origin`` (``[n]`` each). ``fold_at(ridx, S)`` folds record ``ridx`` ``[n]`` (ring
    positions) into S. Returns a new tensor."""
    h = ring_len.to(torch.int64)
    o = ring_origin.to(torch.int64)
    hmax = int(h.max()) if h.numel() else 0
    for j in range(hmax):
        ridx = (o + j) % capacity
        live = (j < h).view(-1, *([1] * (S.dim() - 1)))
        S = torch.where(live, fold_at(ridx, S), S)
    return S
