"""What the drop-ins share: the caller's per-layer state pools as checkpoints, one step of every layer per model
step, the auto commit, the request lifecycle and ``materialize``."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..ops.commit import MODE_SPECULATIVE, MODE_STANDARD, mode_code
from ..ops.ring_fold import fold_committed
from ..ops.state_cache import ReplayCursorCache

PER_DRAFT_STATE_ARGS = ("disable_state_update", "intermediate_states_buffer", "cache_steps", "intermediate_state_indices",
                    "retrieve_parent_token", "num_accepted_tokens")


def refuse_per_draft_state_args(op: str, kwargs: dict) -> None:
    spec = [k for k in PER_DRAFT_STATE_ARGS if kwargs.get(k) is not None and kwargs.get(k) is not False]
    if spec:
        raise ValueError(f"{op}: {spec}: the drop-in keeps no per-draft states. For speculative verification, build it "
                         f"with mode='speculative', pass the T drafts as [B, T, ...] inputs, and call commit(accepted) "
                         f"instead of copying intermediate states")


class PoolReplay(ReplayCursorCache):
    """Registers the pools (one ``[S, ...]`` tensor per layer, rows = checkpoints) and tracks one model step.

    Subclasses call :meth:`_layer` at the start of a call (which layer's pool is this) and :meth:`_stepped`
    after launching, and implement :meth:`_fold` for :meth:`materialize`.
    """
    op = "PoolReplay"
    family = ""   # the ring's record kind (state/phase.py NEUTRAL_RECORD): "mamba2" / "gdn"

    def __init__(self, states: Sequence[torch.Tensor], window: int, auto_commit: Optional[bool], max_verify: int = 1,
                 mode="standard"):
        op = self.op
        if not states:
            raise ValueError(f"{op}: 'states' must list at least one state pool")
        ref = states[0]
        for i, s in enumerate(states):
            if not isinstance(s, torch.Tensor) or s.dim() != 4 or s.shape != ref.shape or s.dtype != ref.dtype \
                    or s.device != ref.device:
                got = f"{s.dtype} {list(s.shape)} on {s.device}" if isinstance(s, torch.Tensor) else type(s).__name__
                raise ValueError(f"{op}: states[{i}] must be {ref.dtype} {list(ref.shape)} on {ref.device} like "
                                 f"states[0]; got {got}")
        m = mode_code(mode, op)
        if auto_commit and m == MODE_SPECULATIVE:
            raise ValueError(f"{op}: auto_commit needs standard mode; a speculative step commits with the accepted "
                             f"counts (commit(accepted)) once they are known")
        super().__init__(int(ref.shape[0]), window, max_verify, m, ref.device)
        self.states = list(states)
        self.auto_commit = (m == MODE_STANDARD) if auto_commit is None else bool(auto_commit)
        self._T: Optional[int] = None
        self._layer_of = {s.data_ptr(): i for i, s in enumerate(self.states)}
        if len(self._layer_of) != len(self.states):
            raise ValueError(f"{op}: two entries of 'states' share a data pointer; pass one pool per layer")
        self._called: set = set()
        self._rows: Optional[torch.Tensor] = None

    def _layer(self, state) -> int:
        layer = self._layer_of.get(state.data_ptr()) if isinstance(state, torch.Tensor) else None
        if layer is None or state.shape != self.states[layer].shape:
            raise ValueError(f"{self.op}: the state tensor is not one of the {len(self.states)} registered pools "
                             f"(matched by data pointer and shape)")
        if layer in self._called:
            raise ValueError(f"{self.op}: layer {layer} called twice in one step; every registered layer is called "
                             f"once per step" + ("" if self.auto_commit else " before commit()"))
        return layer

    def _rows_of(self, indices: Optional[torch.Tensor], Bsz: int, device, pad_slot_id: Optional[int]) -> torch.Tensor:
        if indices is None:
            rows = torch.arange(Bsz, dtype=torch.int32, device=device)
        else:
            rows = indices.reshape(-1).to(torch.int32)
            if rows.shape[0] != Bsz:
                raise ValueError(f"{self.op}: the state indices must have one entry per row ({Bsz}); got "
                                 f"{rows.shape[0]}")
            if pad_slot_id is not None and pad_slot_id >= 0:
                rows = torch.where(rows == pad_slot_id, torch.full_like(rows, -1), rows)
            rows = rows.contiguous()
        if self._rows is not None and rows.shape != self._rows.shape:
            raise ValueError(f"{self.op}: {rows.shape[0]} rows, this step's earlier layers {self._rows.shape[0]}")
        return rows

    @staticmethod
    def _fp32(t: torch.Tensor) -> torch.Tensor:
        """``t`` as contiguous fp32: itself when it is already, else a copy made on this call. Not cached: a cache
        keyed by the tensor's address would hand back stale values when the allocator reuses the address for a
        tensor computed anew each step. Pass fp32 per-head parameters (or broadcast views of them) to avoid it."""
        return t.to(torch.float32).contiguous()

    def _tokens(self, T: int) -> int:
        """Checks this call's tokens per row against the mode and the step's earlier layers."""
        if self.mode == MODE_STANDARD and T != 1:
            raise ValueError(f"{self.op}: standard mode takes one token per row; got T={T} (build the drop-in with "
                             f"mode='speculative' and max_verify >= T for verify steps)")
        if not 1 <= T <= self.max_verify:
            raise ValueError(f"{self.op}: T={T} tokens per row; this drop-in verifies at most max_verify="
                             f"{self.max_verify}")
        if self._T is not None and T != self._T:
            raise ValueError(f"{self.op}: T={T}, this step's earlier layers T={self._T}")
        return T

    def _stepped(self, layer: int, rows: torch.Tensor, T: int = 1) -> None:
        self._called.add(layer)
        self._rows = rows
        self._T = T
        if self.auto_commit and len(self._called) == len(self.states):
            self.commit()

    # ---- public --------------------------------------------------------------------------------------
    def commit(self, accepted=None, state_batch_indices: Optional[torch.Tensor] = None, num_tokens=None) -> None:
        """Advance the cursors of this step's rows (once per step after every layer, unless auto_commit).

        ``accepted``: standard mode None; speculative mode an int32 ``[B]`` tensor on the pools' device, 1..T
        drafts kept per row (the accepted count plus the bonus token's position, as the caller counts them;
        None: all T). The device commit runs it without a host sync; a count outside 1..T is recorded in
        ``error_slot`` (:meth:`check_errors`). ``state_batch_indices`` defaults to this step's rows."""
        if len(self._called) != len(self.states):
            missing = sorted(set(range(len(self.states))) - self._called)
            raise ValueError(f"{self.op}.commit: layers {missing} did not step; the cursors are shared, so every "
                             f"registered layer steps once per step before the commit")
        if accepted is not None and self.mode == MODE_STANDARD:
            raise ValueError(f"{self.op}.commit: standard decode accepts every token; 'accepted' must be None")
        if accepted is not None:
            accepted = accepted.reshape(-1).to(device=self.device, dtype=torch.int32).contiguous()
        super().commit(accepted, self._rows if state_batch_indices is None else state_batch_indices,
                       self._T if num_tokens is None else num_tokens)
        self._called = set()
        self._rows = None
        self._T = None

    def start_requests(self, slots, phase="spread") -> None:
        """The pool rows of ``slots`` hold new states (a prefill wrote them): their rings start over, holding
        ``phase`` neutral records (state/phase.py; they change no output and move the slot's flushes earlier).
        ``"spread"`` (the default) gives the slots consecutive phases, continuing from the slots started before,
        so that requests started together do not all flush on the same step; an int or one int per slot (each in
        [0, L - 1]) is taken as given; None empties the rings (the paper's ``h = 0``). At most one extra flush per
        request. On CUDA it is one kernel launch and reads nothing back (no host sync; ``slots`` may be a device
        tensor, and so may per-slot phases, range-checked by the kernel into ``error_slot``: :meth:`check_errors`)."""
        if self._called:
            raise ValueError(f"{self.op}.start_requests: a step is half done; commit it first")
        self._admit(f"{self.op}.start_requests", self.family, slots, phase)

    @torch.no_grad()
    def materialize(self, slots=None) -> None:
        """Fold each slot's ring into its pool row in every layer (then the row is the slot's current state and
        its ring is empty). ``slots``: a list / tensor of slots (default all). Runs as torch ops on the pools'
        device in fp32 (a few small kernels per record; not for CUDA graph capture)."""
        if self._called:
            raise ValueError(f"{self.op}.materialize: a step is half done; commit it first")
        idx = self._slots_tensor(range(self.num_slots) if slots is None else slots)
        idx = idx[idx >= 0]
        if idx.numel() == 0:
            return
        h = self.ring_len[idx].to(torch.int64)
        o = self.ring_origin[idx].to(torch.int64)
        if int(h.max()):
            for layer, pool in enumerate(self.states):
                S = fold_committed(pool[idx].to(torch.float32), o, h, self.capacity,
                                   lambda ridx, S, layer=layer: self._fold(layer, idx, ridx, S))
                pool[idx] = S.to(pool.dtype)
        self.ring_origin[idx] = ((o + h) % self.capacity).to(torch.int32)
        self.ring_len[idx] = 0

    def _fold(self, layer: int, idx: torch.Tensor, ridx: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError
