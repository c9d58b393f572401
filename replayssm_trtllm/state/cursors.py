"""Replay cursors: the vectorized state machine of docs/design.md section 3 (ring, flush, commit).

Per slot: ``ring_origin[S]`` (int32, ring index of committed record 0) and ``ring_len[S]``
(int32, committed count h). Global: window L, ring capacity C (default ``L + T_max``), mode.
Record j of a slot (0-based: committed first, then the step's drafts) lives at ring index
``(origin + j) % C``. All per-row logic below is elementwise tensor code (no Python loop over
rows), the same logic the device commit kernel runs; Python only formats error messages.

Step (decided from the cursors before the step; the step never changes cursors)::

    standard    (T = 1):        write (o + h) % C;          flush iff h + 1 == L; folds h + 1 records
    speculative (1 <= T <= Tm): write (o + h + s) % C;      flush iff h + T >  L; folds h records

Commit (once per model step, after all layers)::

    standard:    if h + 1 == L: o = (o + h + 1) % C; h = 0   else: h = h + 1
    speculative: if h + T >  L: o = (o + h) % C;     h = 0;   then h = h + a     (1 <= a <= T)

Invariants at the start of every step: ``0 <= h <= L`` (standard: ``h <= L - 1``), ``0 <= o < C``,
``1 <= T <= T_max`` (standard: T = 1), ``1 <= a <= T``, and no write index of the step hits a
committed record (records 0..h-1, which a flush reads in the same step). Violations raise
:class:`ReplayInvariantError` naming the slot and the cursor values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import torch

from ..config import ring_capacity_for

STANDARD = 0
SPECULATIVE = 1
_MODE_NAMES = {STANDARD: "standard", SPECULATIVE: "speculative"}

IndexLike = Union[torch.Tensor, Sequence[int]]


class ReplayInvariantError(RuntimeError):
    """A replay cursor invariant is violated (a bug upstream: the state machine never clamps)."""


def parse_mode(mode: Union[str, int]) -> int:
    """``"standard"``/0 -> 0 (Alg. 1/4), ``"speculative"``/1 -> 1 (Alg. 2/5)."""
    if isinstance(mode, str) and mode.lower() in ("standard", "speculative"):
        return STANDARD if mode.lower() == "standard" else SPECULATIVE
    if isinstance(mode, int) and not isinstance(mode, bool) and mode in (STANDARD, SPECULATIVE):
        return mode
    raise ValueError(f"ReplayCursors: 'mode' must be 'standard' (0) or 'speculative' (1); got {mode!r}")


def mode_name(mode: int) -> str:
    return _MODE_NAMES[mode]


def checked_reset_lengths(op: str, lengths: Optional[Sequence[int]], n: int, window: int) -> Optional[torch.Tensor]:
    """``lengths`` of a cursor reset (one committed count per slot, each in [0, L - 1]) as an int32 tensor, or None;
    raises before the caller changes anything."""
    if lengths is None:
        return None
    h = torch.as_tensor(list(lengths), dtype=torch.int32)
    if h.shape[0] != n or bool(((h < 0) | (h > window - 1)).any()):
        raise ValueError(f"{op}: 'lengths' must be one value per slot ({n} slots), each in [0, L - 1 = "
                         f"{window - 1}]; got {h.tolist()}")
    return h


# ---- pure elementwise rules (shared with the device commit) -----------------------------------

def check_slot_rows(op: str, sbi: torch.Tensor, num_slots: int,
                    duplicate_reason: Callable[[int], str] = lambda s: "each slot may be named by one row per call"
                    ) -> None:
    """Raises ReplayInvariantError when a row of ``sbi`` (int64 [n], negative = skipped) names a slot outside
    [0, num_slots) or a slot that another row names too (``duplicate_reason(slot)`` ends that message). Reads the
    values: for host tensors (on a device it syncs)."""
    valid = sbi >= 0
    bad = valid & (sbi >= num_slots)
    if bool(bad.any()):
        r = int(torch.nonzero(bad)[0, 0])
        raise ReplayInvariantError(f"{op}: row {r} maps to slot {int(sbi[r])}, outside [0, num_slots={num_slots})")
    slots = torch.where(valid, sbi, torch.full_like(sbi, -1))
    sorted_slots, _ = torch.sort(slots, stable=True)
    dup = (sorted_slots[1:] == sorted_slots[:-1]) & (sorted_slots[1:] >= 0)
    if bool(dup.any()):
        i = int(torch.nonzero(dup)[0, 0])
        s = int(sorted_slots[i + 1])
        rows = torch.nonzero(slots == s)[:, 0].tolist()
        raise ReplayInvariantError(f"{op}: slot {s} appears in more than one row ({rows}); {duplicate_reason(s)}")


def flush_mask(length: torch.Tensor, num_tokens: int, window: int, mode: int) -> torch.Tensor:
    """Per-row flush decision from the pre-step committed length h: standard ``h + 1 == L``,
    speculative ``h + T > L``."""
    if mode == STANDARD:
        return length + 1 == window
    return length + num_tokens > window


def num_folded(length: torch.Tensor, flush: torch.Tensor, mode: int) -> torch.Tensor:
    """Records folded into the checkpoint: standard ``h + 1`` (ring + current token), speculative
    ``h`` (committed only); 0 on non-flush rows."""
    n = length + 1 if mode == STANDARD else length
    return torch.where(flush, n, torch.zeros_like(n))


def commit_update(origin: torch.Tensor, length: torch.Tensor, accepted: torch.Tensor, num_tokens: int,
                  window: int, capacity: int, mode: int):
    """New ``(origin, length)`` after a step (design 3.2), elementwise, int64 in and out, no checks."""
    flush = flush_mask(length, num_tokens, window, mode)
    if mode == STANDARD:
        new_o = torch.where(flush, (origin + length + 1) % capacity, origin)
        new_h = torch.where(flush, torch.zeros_like(length), length + 1)
    else:
        new_o = torch.where(flush, (origin + length) % capacity, origin)
        new_h = torch.where(flush, torch.zeros_like(length), length) + accepted
    return new_o, new_h


@dataclass(frozen=True)
class ReplayPlan:
    """Per-row plan of one step (all tensors int64/bool on the cursors' device; padding rows inert).

    Attributes:
        state_batch_indices: ``[B]`` int64 as given (negative = padding).
        valid: ``[B]`` bool, False on padding rows.
        slot: ``[B]`` slot of each row (-1 on padding).
        origin, length: ``[B]`` pre-step cursors o and h (0 on padding).
        num_tokens: T.
        flush: ``[B]`` bool (False on padding).
        write_index: ``[B, T]`` ring index of this step's record s, ``(o + h + s) % C`` (-1 on padding).
        num_folded: ``[B]`` records folded into the checkpoint on flush rows (0 elsewhere).
        num_records: ``[B]`` records the step reads: committed plus this step's, ``h + T`` (0 on padding).
        record_index: ``[B, C]`` ring index of record j, ``(o + j) % C`` (-1 on padding); only
            ``j < num_records`` are live.
    """
    state_batch_indices: torch.Tensor
    valid: torch.Tensor
    slot: torch.Tensor
    origin: torch.Tensor
    length: torch.Tensor
    num_tokens: int
    flush: torch.Tensor
    write_index: torch.Tensor
    num_folded: torch.Tensor
    num_records: torch.Tensor
    record_index: torch.Tensor


class ReplayCursors:
    """Per-slot ring cursors shared by all layers of a model (docs/design.md 3, 3.2, 3.3).

    Args:
        num_slots: S.
        window: L >= 1.
        max_verify: T_max >= 1 (speculative: T_max <= L, so the committed length stays <= L).
        mode: ``"standard"``/0 or ``"speculative"``/1.
        ring_capacity: C; default ``L`` in standard mode and ``L + T_max`` in speculative mode (the design values,
            :func:`replayssm_trtllm.config.ring_capacity_for`). A smaller C (>= L) is accepted
            so the overwrite check can be exercised; :meth:`plan` then rejects steps whose writes
            would hit a committed record.
        device: where the cursor tensors live.
    Attributes:
        ring_origin, ring_len: ``[S]`` int32 tensors (the device layout).
        num_slots, window, max_verify, capacity, mode (int), last_num_tokens (T of the last plan).
    """

    def __init__(self, num_slots: int, window: int, max_verify: int = 1, mode: Union[str, int] = "standard",
                 ring_capacity: Optional[int] = None, device: Union[str, torch.device] = "cpu"):
        op = "ReplayCursors"
        for name, v, lo in (("num_slots", num_slots, 1), ("window", window, 1), ("max_verify", max_verify, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{op}: '{name}' must be an int >= {lo}; got {v!r}")
        self.mode = parse_mode(mode)
        if self.mode == SPECULATIVE and max_verify > window:
            raise ValueError(f"{op}: speculative mode needs max_verify <= window (the committed length "
                             f"a <= T must fit the window); got max_verify={max_verify}, window={window}")
        cap = ring_capacity_for(window, max_verify, self.mode == SPECULATIVE) if ring_capacity is None else ring_capacity
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < window or cap >= 2 ** 31:
            raise ValueError(f"{op}: 'ring_capacity' must be an int in [window={window}, 2^31); got {cap!r}")
        self.num_slots, self.window, self.max_verify, self.capacity = num_slots, window, max_verify, cap
        self.device = torch.device(device)
        self.ring_origin = torch.zeros(num_slots, dtype=torch.int32, device=self.device)
        self.ring_len = torch.zeros(num_slots, dtype=torch.int32, device=self.device)
        self.last_num_tokens: Optional[int] = None

    # ---- helpers ------------------------------------------------------------------------------
    def _describe(self) -> str:
        return (f"mode={mode_name(self.mode)}, L={self.window}, C={self.capacity}, T_max={self.max_verify}")

    def _rows(self, op: str, state_batch_indices: IndexLike) -> torch.Tensor:
        sbi = state_batch_indices
        if not isinstance(sbi, torch.Tensor):
            try:
                sbi = torch.as_tensor(list(sbi), dtype=torch.int64)
            except (TypeError, ValueError):
                raise ValueError(f"{op}: 'state_batch_indices' must be an int32/int64 tensor of shape [B]; "
                                 f"got {type(state_batch_indices).__name__}") from None
            if sbi.numel() == 0:
                sbi = sbi.reshape(0)
        if sbi.dim() != 1 or sbi.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{op}: 'state_batch_indices' must be an int32/int64 tensor of shape [B]; "
                             f"got {str(sbi.dtype).replace('torch.', '')} {list(sbi.shape)}")
        sbi = sbi.to(device=self.device, dtype=torch.int64)
        # duplicate slots: two rows of one step would write the same ring records
        check_slot_rows(op, sbi, self.num_slots,
                        lambda s: f"each slot may be decoded by one row per step (origin={int(self.ring_origin[s])}, "
                                  f"h={int(self.ring_len[s])})")
        return sbi

    def _raise_row(self, op: str, what: str, mask: torch.Tensor, slot: torch.Tensor, origin: torch.Tensor,
                   length: torch.Tensor, extra=None) -> None:
        """Raise for the first row in ``mask`` (``extra(r)`` adds row-specific values)."""
        if bool(mask.any()):
            r = int(torch.nonzero(mask)[0, 0])
            raise ReplayInvariantError(
                f"{op}: {what} for slot {int(slot[r])} (row {r}): origin={int(origin[r])}, h={int(length[r])}"
                f"{extra(r) if extra is not None else ''}; {self._describe()}")

    def _check_T(self, op: str, T) -> int:
        if isinstance(T, torch.Tensor) and T.dim() == 0 and not T.is_floating_point():
            T = int(T)
        if isinstance(T, bool) or not isinstance(T, int):
            raise ValueError(f"{op}: 'num_tokens' must be an int; got {type(T).__name__}")
        hi = 1 if self.mode == STANDARD else self.max_verify
        if not 1 <= T <= hi:
            why = "standard mode decodes one token" if self.mode == STANDARD else "T <= T_max"
            raise ReplayInvariantError(f"{op}: number of tokens T={T} must be in [1, {hi}] ({why}); "
                                       f"{self._describe()}")
        return T

    def _check_cursors(self, op: str, valid, slot, origin, length) -> None:
        hmax = self.window - 1 if self.mode == STANDARD else self.window
        self._raise_row(op, f"invariant 0 <= h <= {hmax} violated", valid & ((length < 0) | (length > hmax)),
                        slot, origin, length)
        self._raise_row(op, f"invariant 0 <= origin < C={self.capacity} violated",
                        valid & ((origin < 0) | (origin >= self.capacity)), slot, origin, length)

    def _gather(self, sbi: torch.Tensor):
        valid = sbi >= 0
        idx = torch.where(valid, sbi, torch.zeros_like(sbi))
        zero = torch.zeros_like(sbi)
        origin = torch.where(valid, self.ring_origin.to(torch.int64)[idx], zero)
        length = torch.where(valid, self.ring_len.to(torch.int64)[idx], zero)
        slot = torch.where(valid, sbi, torch.full_like(sbi, -1))
        return valid, slot, origin, length

    # ---- public API ---------------------------------------------------------------------------
    def check_invariants(self, slots: Optional[IndexLike] = None) -> None:
        """Check ``0 <= h <= L`` (standard ``<= L - 1``) and ``0 <= o < C`` for ``slots`` (default all)."""
        op = "ReplayCursors.check_invariants"
        sbi = torch.arange(self.num_slots, device=self.device) if slots is None else self._rows(op, slots)
        self._check_cursors(op, *self._gather(sbi))

    def plan(self, state_batch_indices: IndexLike, num_tokens: int) -> ReplayPlan:
        """Per-row plan of a step of T = ``num_tokens`` tokens (does not change the cursors).

        Raises ReplayInvariantError on a slot out of range, a slot used by two rows, T out of
        range, a cursor invariant violation, or a write index that hits a committed record.
        """
        op = "ReplayCursors.plan"
        T = self._check_T(op, num_tokens)
        sbi = self._rows(op, state_batch_indices)
        valid, slot, origin, length = self._gather(sbi)
        self._check_cursors(op, valid, slot, origin, length)
        C = self.capacity
        s = torch.arange(T, device=self.device, dtype=torch.int64)
        write = (origin[:, None] + length[:, None] + s[None, :]) % C                       # [B, T]
        # records a write may not touch: committed 0..h-1 (read by the step, folded on a flush)
        rel = (write - origin[:, None]) % C
        hits = valid[:, None] & (rel < length[:, None])
        self._raise_row(op, "a write would overwrite a committed record", hits.any(dim=1), slot, origin, length,
                        extra=lambda r: f", T={T}, write indices {write[r].tolist()} hit committed ring "
                                        f"index {int(write[r][hits[r]][0])}")
        flush = valid & flush_mask(length, T, self.window, self.mode)
        folded = num_folded(length, flush, self.mode)
        j = torch.arange(C, device=self.device, dtype=torch.int64)
        record_index = (origin[:, None] + j[None, :]) % C
        neg = torch.full_like(write, -1)
        self.last_num_tokens = T
        return ReplayPlan(
            state_batch_indices=sbi, valid=valid, slot=slot, origin=origin, length=length, num_tokens=T,
            flush=flush, write_index=torch.where(valid[:, None], write, neg), num_folded=folded,
            num_records=torch.where(valid, length + T, torch.zeros_like(length)),
            record_index=torch.where(valid[:, None], record_index, torch.full_like(record_index, -1)))

    def commit(self, state_batch_indices: IndexLike, accepted: Optional[IndexLike] = None,
               num_tokens: Optional[int] = None) -> None:
        """Advance the cursors after a step (design 3.2). One call per model step, after all layers.

        Args:
            state_batch_indices: ``[B]`` int32/int64, negative = padding (skipped).
            accepted: ``[B]`` int, 1 <= a <= T on valid rows (speculative); None = all T accepted.
                In standard mode it must be None or all ones.
            num_tokens: T of the step that just ran; default the T of the last :meth:`plan`
                (standard mode: 1).
        """
        op = "ReplayCursors.commit"
        if num_tokens is None:
            num_tokens = 1 if self.mode == STANDARD else self.last_num_tokens
            if num_tokens is None:
                raise ValueError(f"{op}: 'num_tokens' is required when no step was planned")
        T = self._check_T(op, num_tokens)
        sbi = self._rows(op, state_batch_indices)
        valid, slot, origin, length = self._gather(sbi)
        self._check_cursors(op, valid, slot, origin, length)
        if accepted is None:
            acc = torch.full_like(sbi, T)
        else:
            acc = accepted
            if not isinstance(acc, torch.Tensor):
                acc = torch.as_tensor(list(acc), dtype=torch.int64)
            if acc.dim() != 1 or acc.dtype not in (torch.int32, torch.int64) or acc.shape[0] != sbi.shape[0]:
                raise ValueError(f"{op}: 'accepted' must be an int32/int64 tensor of shape [B={sbi.shape[0]}]; "
                                 f"got {str(acc.dtype).replace('torch.', '')} {list(acc.shape)}")
            acc = acc.to(device=self.device, dtype=torch.int64)
            self._raise_row(op, f"accepted count a must be in [1, T={T}]", valid & ((acc < 1) | (acc > T)),
                            slot, origin, length, extra=lambda r: f", a={int(acc[r])}")
        new_o, new_h = commit_update(origin, length, acc, T, self.window, self.capacity, self.mode)
        hmax = self.window - 1 if self.mode == STANDARD else self.window
        self._raise_row(op, f"commit would leave h outside [0, {hmax}]", valid & ((new_h < 0) | (new_h > hmax)),
                        slot, origin, length)
        idx = sbi[valid]
        self.ring_origin[idx] = new_o[valid].to(torch.int32)
        self.ring_len[idx] = new_h[valid].to(torch.int32)

    def reset(self, slots: IndexLike, lengths: Optional[Sequence[int]] = None) -> None:
        """Context phase / new request: ``o = 0, h = 0`` for ``slots`` (negative entries skipped); with
        ``lengths`` (one per slot, each in [0, L - 1]), ``h = lengths[i]``: the ring already holds that many
        (neutral) records (state/phase.py)."""
        sbi = self._rows("ReplayCursors.reset", slots)
        keep = sbi >= 0
        idx = sbi[keep]
        h = checked_reset_lengths("ReplayCursors.reset", lengths, int(sbi.shape[0]), self.window)
        self.ring_origin[idx] = 0
        self.ring_len[idx] = 0 if h is None else h[keep.cpu()].to(self.ring_len.device)

    def live_mask(self, num_drafts: int = 0) -> torch.Tensor:
        """``[S, C]`` bool: ring entries holding committed records (and, with ``num_drafts = T``, the
        records of a step that ran but is not committed yet). Other entries are dead: no step reads
        them, so buffer comparisons should mask them out."""
        j = torch.arange(self.capacity, device=self.device, dtype=torch.int64)
        o = self.ring_origin.to(torch.int64)[:, None]
        n = self.ring_len.to(torch.int64)[:, None] + int(num_drafts)
        rel = (j[None, :] - o) % self.capacity
        return rel < n

    def snapshot(self):
        """``(ring_origin.clone(), ring_len.clone())``."""
        return self.ring_origin.clone(), self.ring_len.clone()
