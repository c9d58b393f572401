"""Flush phases at admission: neutral records that move a new row's first flush earlier.

Every row flushes once per window, when its committed count h reaches the window (standard: ``h + 1 == L``,
speculative: ``h + T > L``). Rows that start together (a burst of admissions in one engine step) stay in phase for
their whole life: every L-th step all of them flush at once, and that step costs about 2.8x a non-flush step on the
H200 (docs/kernels-gdn.md, "Twenty-sixth session": 412 against 146 us for a q35-4b layer at B = 256), a latency spike
that the serving engine sees every L tokens. Rows admitted at different steps are staggered and pay the flush evenly.

A row can be given a phase d at admission: its ring starts with d **neutral records** (``h = d``), so its first flush
comes d steps earlier and every later flush keeps that offset. A neutral record changes nothing:

- Mamba-2 (dt, x, B) = (0, 0, 0): decay ``exp(dt A) = 1`` and contribution ``dt x B^T = 0``;
- GDN (g, u, k) = (0, 0, 1): decay ``exp(g) = 1`` and correction ``u = 0``, so neither the output terms
  ``(k_j . k_s) u_j`` nor the fold ``u_j k_j^T`` move; the key is all ones so that its norm is finite. In the
  two-precision records (beta, v) = (0, 0), so the flush's re-derived correction ``beta (v - alpha S k)`` is 0 too.

Outputs and checkpoints equal those of a row without them, up to the rounding of the earlier flush (checked in
float64 in tests/reference/test_ref_caches.py). The cost is at most one extra flush per request. This is a serving
policy, not part of the paper's algorithms: the caches' ``reset`` takes no phase unless asked, the models' decode path
(``models.SsmDecoder``, ``use_replay``, ``load_ssm_decoder``) asks for ``"spread"`` by default, and the benchmark's
"in phase" case does not use it.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

PhaseLike = Union[None, str, int, Sequence[int], torch.Tensor]

# fill values of a neutral record, per ring tensor name (tensors a cache does not have are skipped)
NEUTRAL_RECORD = {
    "mamba2": {"ring_dt": 0.0, "ring_x": 0.0, "ring_B": 0.0},
    "gdn": {"ring_g": 0.0, "ring_u": 0.0, "ring_k": 1.0, "ring_beta": 0.0, "ring_v": 0.0},
}


def admission_phases(op: str, phase: PhaseLike, n: int, window: int, start: int = 0) -> Optional[list]:
    """Per-slot neutral-record counts for ``n`` slots admitted together, or None (no phase: ``h = 0``).

    ``phase``: None (every row starts at h = 0), ``"spread"`` (entry i gets ``(start + i) % L``, where ``start`` is
    the number of entries the cache admitted before, padding entries included (so the device caches need not read
    their slots back): consecutive phases, so rows admitted together, in one call or in several calls of the same
    engine step, flush on different steps; consecutive rather than evenly spaced phases also stay
    apart when every row commits T > 1 tokens per step), an int (every row), or one int per slot. Each count must be
    in [0, L - 1]."""
    if phase is None:
        return None
    if isinstance(phase, str):
        if phase != "spread":
            raise ValueError(f"{op}: 'phase' must be None, 'spread', an int or one int per slot; got {phase!r}")
        return [(start + i) % window for i in range(n)]
    if isinstance(phase, bool):
        raise ValueError(f"{op}: 'phase' must be None, 'spread', an int or one int per slot; got {phase!r}")
    if isinstance(phase, int):
        counts = [phase] * n
    else:
        t = phase if isinstance(phase, torch.Tensor) else torch.as_tensor(list(phase))
        if t.dim() != 1 or t.shape[0] != n or t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ValueError(f"{op}: 'phase' given per slot must be {n} integers (one per slot); got "
                             f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}")
        counts = [int(v) for v in t.tolist()]
    bad = [c for c in counts if not 0 <= c <= window - 1]
    if bad:
        raise ValueError(f"{op}: each phase (neutral records at admission) must be in [0, L - 1 = {window - 1}]; "
                         f"got {bad[0]}")
    return counts


def write_neutral_records(family: str, cache, slots: Sequence[int], counts: Sequence[int], slot_dim: int) -> None:
    """Writes ``counts[i]`` neutral records at ring indices ``0 .. counts[i] - 1`` of ``slots[i]`` (negative slots
    skipped) into each ring tensor of ``cache`` named in ``NEUTRAL_RECORD[family]`` (attributes it lacks or holds as
    None are skipped; dim ``slot_dim`` is the slot, the next one the ring index): one indexed write per tensor. The
    caller sets the cursors to ``o = 0, h = counts[i]``."""
    pairs = [(int(s), int(c)) for s, c in zip(slots, counts) if s >= 0 and c > 0]
    if not pairs:
        return
    slot_idx = torch.tensor([s for s, c in pairs for _ in range(c)], dtype=torch.int64)
    ring_idx = torch.tensor([j for _, c in pairs for j in range(c)], dtype=torch.int64)
    for name, fill in NEUTRAL_RECORD[family].items():
        ten = getattr(cache, name, None)
        if ten is not None:
            ten[(slice(None),) * slot_dim + (slot_idx.to(ten.device), ring_idx.to(ten.device))] = fill
