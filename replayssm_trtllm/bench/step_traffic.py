"""Bytes a replay step moves, from the same cursor rules the device commit applies (CPU, no GPU needed).

The benchmarks time cycles of steps whose rows sit at different committed lengths ``h``; which rows flush and how many
ring records each reads follow from the cursors alone (``state.cursors.flush_mask`` / ``commit_update``, the rules of
docs/design.md 3.1-3.2). This module replays those rules over the benchmark's exact cycle (start cursors, per-step
acceptances, how many times the captured graph runs it) and counts, per layer-step and for all rows:

- the checkpoint read once per row;
- the checkpoint written once per flushing row;
- the committed records a row reads (``h`` of them: the fold of a flush row and the outputs of every row read the
  same records, counted once);
- the records the step writes (one per token: the standard step's token, the speculative step's T drafts);
- the step's inputs and outputs (``io_row_bytes`` per row and token), kept apart so a caller can report both.

This is the algorithm's traffic, what a kernel must move at least; a kernel's own extra traffic (a prep's
workspace, re-reads) is not counted, so "% of copy" computed from it is the useful bandwidth. Dividing a step's bytes
by the conventional step's bytes gives the ratio that step would have if it moved its bytes as efficiently as the
conventional kernel does (``ratio_at_equal_efficiency``), which is what the speculative targets are measured against;
dividing by the copy bandwidth gives the ratio's floor at 100% of copy (``ratio_at_copy_bandwidth``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from replayssm_trtllm.state.cursors import SPECULATIVE, STANDARD, commit_update, flush_mask


@dataclass(frozen=True)
class StepTraffic:
    """Mean bytes of one layer-step over the timed steps of a cycle (all rows of the batch).

    Attributes:
        state_bytes: checkpoint reads and writes plus ring record reads and writes.
        io_bytes: the step's inputs and outputs.
        flush_fraction: mean fraction of rows that flush in a step.
        records_read: mean committed records a row reads in a step.
        steps: how many steps were averaged.
    """
    state_bytes: float
    io_bytes: float
    flush_fraction: float
    records_read: float
    steps: int

    @property
    def total_bytes(self) -> float:
        return self.state_bytes + self.io_bytes


def _as_lengths(h0) -> "torch.Tensor":  # noqa: F821
    import torch
    h = torch.as_tensor(h0).to("cpu", torch.int64).reshape(-1)
    if h.numel() == 0:
        raise ValueError("step traffic: 'h0' must hold one committed length per row; got none")
    return h


def replay_cycle_traffic(h0, accepted: Optional[Sequence], *, mode: int, num_tokens: int, window: int,
                         state_row_bytes: float, record_bytes: float, io_row_bytes: float,
                         passes: int = 1, timed_passes: Optional[int] = None,
                         reset_each_pass: bool = True) -> StepTraffic:
    """Mean traffic of one layer-step of a benchmark cycle.

    Args:
        h0: ``[B]`` committed lengths the cycle starts from (``set_cursors``).
        accepted: speculative mode: one ``[B]`` tensor (or sequence) of accepted counts per step of the cycle; the
            cycle has ``len(accepted)`` steps. Standard mode: an int, the number of steps of the cycle.
        mode: ``STANDARD`` (0) or ``SPECULATIVE`` (1).
        num_tokens: T (1 in standard mode).
        window: L.
        state_row_bytes: one row's checkpoint (one layer).
        record_bytes: one ring record of one row (one layer, every head).
        io_row_bytes: one token's inputs and outputs of one row.
        passes: how many times the cycle runs in all (warm-up and untimed replays included).
        timed_passes: how many of the last passes are timed (default: all).
        reset_each_pass: the cycle sets the cursors back to ``h0`` itself (the GDN benchmark's speculative graph) or
            they carry over from one pass to the next (the Mamba-2 benchmark's).
    """
    import torch
    if mode not in (STANDARD, SPECULATIVE):
        raise ValueError(f"step traffic: 'mode' must be {STANDARD} (standard) or {SPECULATIVE} (speculative); "
                         f"got {mode!r}")
    if window < 1 or num_tokens < 1 or (mode == STANDARD and num_tokens != 1):
        raise ValueError(f"step traffic: need window >= 1 and num_tokens >= 1 (1 in standard mode); got window="
                         f"{window}, num_tokens={num_tokens}, mode={mode}")
    h_start = _as_lengths(h0)
    B = h_start.numel()
    if mode == STANDARD:
        if not isinstance(accepted, int) or accepted < 1:
            raise ValueError(f"step traffic: in standard mode 'accepted' is the cycle's step count (int >= 1); got "
                             f"{accepted!r}")
        accs = [None] * accepted
    else:
        if accepted is None or len(accepted) == 0:
            raise ValueError("step traffic: speculative mode needs one 'accepted' tensor per step of the cycle")
        accs = []
        for k, a in enumerate(accepted):
            a = torch.as_tensor(a).to("cpu", torch.int64).reshape(-1)
            if a.numel() != B or bool(((a < 1) | (a > num_tokens)).any()):
                raise ValueError(f"step traffic: accepted[{k}] must hold {B} counts in [1, T = {num_tokens}]; got "
                                 f"{a.tolist()[:8]}{'...' if a.numel() > 8 else ''} ({a.numel()} values)")
            accs.append(a)
    limit = window - 1 if mode == STANDARD else window
    if bool(((h_start < 0) | (h_start > limit)).any()):
        mname = "standard" if mode == STANDARD else "speculative"
        raise ValueError(f"step traffic: every h0 must be in [0, {limit}] ({mname} mode, L = {window}); got "
                         f"{h_start.tolist()[:8]}")
    timed = passes if timed_passes is None else timed_passes
    if passes < 1 or not 1 <= timed <= passes:
        raise ValueError(f"step traffic: need passes >= 1 and 1 <= timed_passes <= passes; got passes={passes}, "
                         f"timed_passes={timed_passes}")
    T = num_tokens
    cap = window + T
    origin = torch.zeros(B, dtype=torch.int64)
    h = h_start.clone()
    state = io = flushes = reads = 0.0
    n = 0
    for p in range(passes):
        if reset_each_pass and p > 0:
            h = h_start.clone()
            origin.zero_()
        count = p >= passes - timed
        for a in accs:
            fl = flush_mask(h, T, window, mode)
            if count:
                nf = int(fl.sum())
                hr = int(h.sum())
                state += B * state_row_bytes + nf * state_row_bytes + (hr + B * T) * record_bytes
                io += B * T * io_row_bytes
                flushes += nf / B
                reads += hr / B
                n += 1
            acc = torch.ones_like(h) if a is None else a
            origin, h = commit_update(origin, h, acc, T, window, cap, mode)
    return StepTraffic(state / n, io / n, flushes / n, reads / n, n)


def conventional_step_bytes(batch: int, state_row_bytes: float, io_row_bytes: float) -> tuple:
    """(state, io) bytes of a conventional standard step: every row's state read and written, one token's io."""
    return 2 * batch * state_row_bytes, batch * io_row_bytes


def perdraft_step_bytes(batch: int, state_row_bytes: float, io_row_bytes: float, num_tokens: int) -> tuple:
    """(state, io) bytes of a conventional verify step with per-draft snapshots: the state read once and T
    snapshots written, T tokens' io."""
    return (1 + num_tokens) * batch * state_row_bytes, num_tokens * batch * io_row_bytes


def traffic_bounds(step_bytes: float, conventional_bytes: float, conventional_seconds: float,
                   copy_bytes_per_second: float) -> dict:
    """The ratio (step time / conventional step time) a step would have:

    - ``ratio_at_equal_efficiency``: moving its bytes at the conventional kernel's achieved bandwidth;
    - ``ratio_at_copy_bandwidth``: moving them at the measured copy bandwidth (the floor of the ratio).
    """
    if conventional_bytes <= 0 or conventional_seconds <= 0 or copy_bytes_per_second <= 0:
        raise ValueError("traffic bounds: conventional bytes, time and the copy bandwidth must be positive; got "
                         f"{conventional_bytes}, {conventional_seconds}, {copy_bytes_per_second}")
    return dict(ratio_at_equal_efficiency=step_bytes / conventional_bytes,
                ratio_at_copy_bandwidth=step_bytes / copy_bytes_per_second / conventional_seconds)
