"""Device replay caches: checkpoints, rings and cursors for all layers of a model (design.md 3).

:class:`ReplayCursorCache` owns what every family shares: the per-slot cursors ``ring_origin[S]``,
``ring_len[S]`` (int32, shared by all layers), the ``error_slot[1]`` flag of the device commit, the
window/capacity/mode, and the commit (one ``replay_commit`` launch per model step). A family cache
subclasses it and adds its per-layer tensors and ``step``: :class:`ReplayStateCache` (Mamba-2)
here; the GDN cache (ops/gdn.py) reuses the base the same way.

Nothing here syncs the device except :meth:`ReplayCursorCache.check_errors`, so ``step`` and
``commit`` can be captured in one CUDA graph per batch size.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

# the split kernels' 32-record limit (docs/design.md section 8): defined where torch is not needed, so the TensorRT
# field builders share the note
from ..config import (SPLIT_KERNEL_MAX_RECORDS, ReplayPerformanceWarning, ring_capacity_for, split_kernel_note,
                      warn_past_split_kernels)
from ..state.cursors import check_slot_rows, checked_reset_lengths
from .admit import admit_rows
from .commit import MODE_SPECULATIVE, MODE_STANDARD, mode_code, replay_commit
from .ring_fold import fold_committed, mamba2_fold_record
from . import mamba2 as _mamba2_ops  # noqa: F401  (registers torch.ops.replayssm.mamba2_replay_decode, used by step)

__all__ = ["ReplayCursorCache", "ReplayStateCache", "Mamba2ReplayStateCache", "ReplayPerformanceWarning",
           "SPLIT_KERNEL_MAX_RECORDS", "split_kernel_note"]


class ReplayCursorCache:
    """Cursors + commit shared by the Mamba-2 and GDN replay caches.

    Args:
        num_slots: S.
        window: L (1..64 for the Mamba-2 kernels).
        max_verify: T_max; the ring capacity is ``C = L + T_max`` in speculative mode and ``C = L`` in standard
            mode, where max_verify is 1 (design 3, :func:`replayssm_trtllm.config.ring_capacity_for`).
        mode: ``"standard"``/0 (Alg. 1) or ``"speculative"``/1 (Alg. 2).
        device: CUDA device of the buffers.
    """

    def __init__(self, num_slots: int, window: int, max_verify: int = 1, mode: Union[str, int] = "standard",
                 device: Union[str, torch.device] = "cuda"):
        if num_slots < 1 or window < 1 or max_verify < 1:
            raise ValueError(f"{type(self).__name__}: num_slots, window and max_verify must be >= 1; got "
                             f"{num_slots}, {window}, {max_verify}")
        self.mode = mode_code(mode)
        if self.mode == MODE_STANDARD and max_verify != 1:
            raise ValueError(f"{type(self).__name__}: standard mode verifies one token (max_verify=1); "
                             f"got {max_verify}")
        if self.mode == MODE_SPECULATIVE and max_verify > window:
            raise ValueError(f"{type(self).__name__}: speculative mode needs max_verify <= window; got "
                             f"max_verify={max_verify}, window={window}")
        self.num_slots, self.window, self.max_verify = int(num_slots), int(window), int(max_verify)
        self.capacity = ring_capacity_for(self.window, self.max_verify, self.mode == MODE_SPECULATIVE)
        warn_past_split_kernels(type(self).__name__, self.window, self.max_verify, self.mode)
        self.device = torch.device(device)
        self.ring_origin = torch.zeros(num_slots, dtype=torch.int32, device=self.device)
        self.ring_len = torch.zeros(num_slots, dtype=torch.int32, device=self.device)
        self.error_slot = torch.full((1,), -1, dtype=torch.int32, device=self.device)
        self._admitted = 0  # rows admitted through reset (the start of the next "spread" phases)
        self._last_rows: Optional[torch.Tensor] = None
        self._last_T: Optional[int] = None
        self._step_open = False   # a step ran since the last commit (current_state refuses then)

    # ---- cursors -----------------------------------------------------------------------------
    def _slots_tensor(self, slots) -> torch.Tensor:
        if not isinstance(slots, torch.Tensor):
            slots = torch.as_tensor(list(slots), dtype=torch.int64)
        return slots.to(device=self.device, dtype=torch.int64).reshape(-1)

    def reset_cursors(self, slots, lengths=None) -> None:
        """Empty the rings of ``slots`` (negative entries skipped): ``o = 0, h = 0``; with ``lengths`` (one per
        slot, from :func:`~replayssm_trtllm.state.phase.admission_phases`), ``h = lengths[i]``."""
        idx = self._slots_tensor(slots)
        keep = idx >= 0
        h = checked_reset_lengths(f"{type(self).__name__}.reset_cursors", lengths, int(idx.shape[0]), self.window)
        self.ring_origin[idx[keep]] = 0
        self.ring_len[idx[keep]] = 0 if h is None else h[keep.cpu()].to(self.device)

    def _admit(self, op: str, family: str, slots, phase):
        """Admit ``slots`` with ``phase`` (state/phase.py): neutral records in this cache's [layers, S, C, ...] ring
        tensors and cursors ``o = 0, h = d``. On CUDA one ``replay_admit`` launch without a host sync (ops/admit.py),
        on the CPU the Python form. Returns the per-slot counts when known on the host (None without a phase). The
        "spread" start advances by the number of entries (padding included), so no device value is read. Slots given
        on the host (a list, a CPU tensor) are checked for duplicates and range first (a duplicate would leave which
        row's phase and checkpoint won to chance); slots in a device tensor are not read back: a slot >= S, and a slot an
        earlier entry already names (the first entry is admitted), land in ``error_slot`` (:meth:`check_errors`)."""
        if not isinstance(slots, torch.Tensor):
            slots = torch.as_tensor(list(slots), dtype=torch.int64)
        if slots.device.type != "cuda":   # host slots: range and duplicates checked here (state/cursors.py)
            check_slot_rows(op, slots.reshape(-1).to(torch.int64), self.num_slots)
        idx = self._slots_tensor(slots)
        counts = admit_rows(op, self, family, idx, phase, self._admitted)
        self._admitted += int(idx.shape[0])  # entries admitted so far (the "spread" phases' start)
        return counts

    def _store_checkpoints(self, idx: torch.Tensor, pre: torch.Tensor) -> None:
        """``pre`` ``[num_layers, n, ...]`` becomes ``self.ckpt[:, idx]`` (negative entries skipped). CUDA: cast to
        the state dtype, then one ``replay_import`` launch per layer (ops/import_state.py), reading nothing back (a
        slot >= S is reported in ``error_slot``); CPU: indexed assignment."""
        if self.device.type != "cuda":
            keep = idx >= 0
            self.ckpt[:, idx[keep]] = pre[:, keep.to(pre.device)].to(device=self.device, dtype=self.state_dtype)
            return
        n = int(idx.shape[0])
        if n == 0:
            return
        from . import import_state as _import  # noqa: F401  (registers torch.ops.replayssm.replay_import)
        src = pre.to(device=self.device, dtype=self.state_dtype).contiguous()
        src_slots = torch.arange(n, dtype=torch.int32, device=self.device)
        dst_slots = idx.to(device=self.device, dtype=torch.int32).contiguous()
        for layer in range(self.ckpt.shape[0]):
            torch.ops.replayssm.replay_import(src[layer], src_slots, self.ckpt[layer], dst_slots, None, None,
                                              self.error_slot, False)

    def _note_step(self, state_batch_indices: torch.Tensor, T: int) -> None:
        self._last_rows, self._last_T = state_batch_indices, T
        self._step_open = True

    @torch.no_grad()
    def _current_state(self, op: str, slots, fold_record) -> torch.Tensor:
        """``[num_layers, n, ...]`` fp32: each slot's checkpoint with its committed records folded in
        (ops/ring_fold.py); ``fold_record(layer, idx, ridx, S)`` folds one record per row."""
        if self._step_open:
            raise ValueError(f"{op}: a step ran and is not committed; commit() it first (a flush step has already "
                             f"rewritten its flushing rows' checkpoints, and only the commit moves their cursors)")
        idx = self._slots_tensor(slots)
        bad = idx[(idx < 0) | (idx >= self.num_slots)]
        if bad.numel():
            raise ValueError(f"{op}: slots must be in [0, {self.num_slots}); got {bad.tolist()}")
        o, h = self.ring_origin[idx], self.ring_len[idx]
        return torch.stack([fold_committed(self.ckpt[layer, idx].to(torch.float32), o, h, self.capacity,
                                           lambda ridx, S, layer=layer: fold_record(layer, idx, ridx, S))
                            for layer in range(self.num_layers)])

    def commit(self, accepted: Optional[torch.Tensor] = None, state_batch_indices: Optional[torch.Tensor] = None,
               num_tokens: Optional[int] = None) -> None:
        """Advance the cursors once per model step (after all layers) on the device.

        ``accepted``: ``[B]`` int32 in [1, T] (speculative), None = all T. ``state_batch_indices`` and
        ``num_tokens`` default to those of the last :meth:`step` call.
        """
        rows = self._last_rows if state_batch_indices is None else state_batch_indices
        T = self._last_T if num_tokens is None else num_tokens
        if rows is None or T is None:
            raise ValueError(f"{type(self).__name__}.commit: no step ran; pass state_batch_indices and num_tokens")
        if accepted is not None and self.mode == MODE_STANDARD:
            raise ValueError(f"{type(self).__name__}.commit: 'accepted' must be None in standard mode")
        replay_commit(rows, accepted, self.ring_origin, self.ring_len, self.error_slot, self.window, self.capacity,
                      T, self.mode)
        self._step_open = False

    def check_errors(self) -> None:
        """Sync and raise if the device commit recorded an invariant violation, or an admission a slot out of range
        or a per-slot phase outside [0, L - 1] given as a device tensor (that row was left untouched)."""
        s = int(self.error_slot.item())
        if s != -1:
            o = int(self.ring_origin[s]) if 0 <= s < self.num_slots else None
            h = int(self.ring_len[s]) if 0 <= s < self.num_slots else None
            raise RuntimeError(f"replay commit / admission: invariant violated for slot {s} (origin={o}, h={h}, "
                               f"L={self.window}, C={self.capacity}, mode={self.mode})")

    def cursor_bytes_per_slot(self) -> int:
        return 2 * 4  # ring_origin + ring_len (shared by all layers)


class ReplayStateCache(ReplayCursorCache):
    """Mamba-2 replay cache for ``num_layers`` layers x ``num_slots`` slots (cursors shared by layers).

    Tensors (design.md 3): ``ckpt[layer] [S, H, P, N]`` (state_dtype), ``ring_dt[layer] [S, C, H]``
    fp32, ``ring_x[layer] [S, C, H, P]`` and ``ring_B[layer] [S, C, G, N]`` (act_dtype), each allocated
    as one tensor with a leading layer dim.
    """

    def __init__(self, num_layers: int, num_slots: int, H: int, P: int, N: int, G: int, window: int,
                 max_verify: int = 1, mode: Union[str, int] = "standard", state_dtype: torch.dtype = torch.float32,
                 act_dtype: torch.dtype = torch.bfloat16, device: Union[str, torch.device] = "cuda"):
        super().__init__(num_slots, window, max_verify, mode, device)
        if H % G != 0:
            raise ValueError(f"ReplayStateCache: H={H} must be a multiple of G={G}")
        self.num_layers, self.H, self.P, self.N, self.G = num_layers, H, P, N, G
        self.state_dtype, self.act_dtype = state_dtype, act_dtype
        S, C, d = num_slots, self.capacity, self.device
        self.ckpt = torch.zeros(num_layers, S, H, P, N, dtype=state_dtype, device=d)
        self.ring_dt = torch.zeros(num_layers, S, C, H, dtype=torch.float32, device=d)
        self.ring_x = torch.zeros(num_layers, S, C, H, P, dtype=act_dtype, device=d)
        self.ring_B = torch.zeros(num_layers, S, C, G, N, dtype=act_dtype, device=d)

    def reset(self, slots, prefill_state: torch.Tensor, phase=None) -> Optional[list]:
        """Context phase: ``prefill_state`` ``[num_layers, n, H, P, N]`` (or ``[n, H, P, N]`` with one
        layer) becomes the checkpoint of ``slots`` ``[n]`` (negative skipped); rings become empty, or hold
        ``phase`` neutral records (``None``, ``"spread"``, an int or one per slot; state/phase.py: spreads the
        flushes of rows admitted together). Returns the per-slot neutral-record counts (the rows' ``h``), or None
        without a phase."""
        idx = self._slots_tensor(slots)
        pre = prefill_state if prefill_state.dim() == 5 else prefill_state.unsqueeze(0)
        want = (self.num_layers, idx.shape[0], self.H, self.P, self.N)
        if tuple(pre.shape) != want:
            raise ValueError(f"ReplayStateCache.reset: 'prefill_state' must be [num_layers, n, H, P, N] = "
                             f"{list(want)}; got {list(prefill_state.shape)}")
        counts = self._admit("ReplayStateCache.reset", "mamba2", idx, phase)   # checks the phase first
        self._store_checkpoints(idx, pre)
        return counts

    def step(self, layer: int, state_batch_indices: torch.Tensor, x: torch.Tensor, dt_raw: torch.Tensor,
             B: torch.Tensor, C: torch.Tensor, A: torch.Tensor, D: Optional[torch.Tensor] = None,
             dt_bias: Optional[torch.Tensor] = None, z: Optional[torch.Tensor] = None,
             rows_per_cta: int = 0) -> torch.Tensor:
        """One decode step of ``layer`` (x ``[B, T, H, P]``, or ``[B, H, P]`` for T = 1); returns y."""
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"ReplayStateCache.step: layer must be in [0, {self.num_layers}); got {layer}")
        T = 1 if x.dim() == 3 else int(x.shape[1])
        if T > self.max_verify:
            raise ValueError(f"ReplayStateCache.step: T={T} > max_verify={self.max_verify}")
        y = torch.ops.replayssm.mamba2_replay_decode(
            self.ckpt[layer], self.ring_dt[layer], self.ring_x[layer], self.ring_B[layer], self.ring_origin,
            self.ring_len, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, self.window, self.mode,
            rows_per_cta)
        self._note_step(state_batch_indices, T)
        return y

    def current_state(self, slots, A: torch.Tensor) -> torch.Tensor:
        """The recurrent state of ``slots`` after their committed tokens, as conventional decoding holds it:
        ``[num_layers, n, H, P, N]`` fp32, the checkpoints with the committed ring records folded in
        (ops/ring_fold.py), nothing in the cache changed. ``A`` ``[num_layers, H]`` (or ``[H]`` with one layer):
        each layer's ``-exp(A_log)`` as passed to :meth:`step` (the records do not hold it). For preemption or
        swap-out, prefix snapshots and moves between slots: ``reset(slots2, cache.current_state(slots, A))``
        resumes from it. Call between steps (after commit); a few torch ops per record, not for graph capture."""
        op = "ReplayStateCache.current_state"
        A = A if A.dim() == 2 else A.reshape(1, -1)
        if tuple(A.shape) != (self.num_layers, self.H):
            raise ValueError(f"{op}: 'A' must be [num_layers, H] = [{self.num_layers}, {self.H}]; got {list(A.shape)}")
        A = A.to(device=self.device, dtype=torch.float32)
        return self._current_state(op, slots, lambda layer, idx, ridx, S: mamba2_fold_record(
            S, self.ring_dt[layer, idx, ridx], self.ring_x[layer, idx, ridx], self.ring_B[layer, idx, ridx],
            A[layer]))

    # ---- sizes -------------------------------------------------------------------------------
    def ring_bytes_per_slot_layer(self) -> int:
        act = torch.tensor([], dtype=self.act_dtype).element_size()
        C = self.capacity
        return C * (4 * self.H + act * self.H * self.P + act * self.G * self.N)

    def state_bytes_per_slot_layer(self) -> int:
        return torch.tensor([], dtype=self.state_dtype).element_size() * self.H * self.P * self.N


Mamba2ReplayStateCache = ReplayStateCache


def replay_overhead_bytes(H: int, P: int, N: int, G: int, window: int, max_verify: int, act_bytes: int = 2,
                          num_layers: int = 1) -> dict:
    """Ring bytes per slot per layer, cursor bytes per slot (shared by layers) and the ratio to the
    fp32 state (the ring + cursors <= 12% target is for L=16, T=4 on Super). max_verify 1 is a standard-mode
    cache (L ring rows), larger a speculative one (L + max_verify)."""
    C = ring_capacity_for(window, max_verify, speculative=max_verify > 1)
    ring = C * (4 * H + act_bytes * H * P + act_bytes * G * N)
    cursors = 8
    state = 4 * H * P * N
    per_layer = ring + cursors / num_layers
    return {"ring_bytes": ring, "cursor_bytes_per_slot": cursors, "state_bytes_fp32": state,
            "ratio": per_layer / state, "ratio_with_cursors_unshared": (ring + cursors) / state}
