"""ReplaySSM behind FlashInfer's ``selective_state_update`` calling convention (Mamba-2 standard decode).

Serving code that decodes a Mamba-2 layer with one call per layer and step,

    flashinfer.mamba.selective_state_update(state, x, dt, A, B, C, D, z=z, dt_bias=dt_bias,
                                            dt_softplus=True, state_batch_indices=idx, pad_slot_id=-1, out=out)

can call a :class:`ReplaySelectiveStateUpdate` with the same arguments instead. TensorRT-LLM's PyTorch
backend keeps that function in ``Mamba2Mixer.selective_state_update_func`` (docs/pytorch-backend.md).

What changes underneath:

- The caller's state pool row of a slot becomes the slot's replay **checkpoint**. A non-flush step reads it
  and the slot's ring of cached inputs and writes nothing to it; a flush step (every L-th step of a slot)
  folds the ring into it. The ring (dt after bias + softplus, x, B; capacity L) and the per-slot cursors
  live in this object, one ring per registered layer, cursors shared by the layers.
- So between flushes the pool row is *not* the slot's current state. Anything else that reads the pool of a
  decoding slot (a prefill continuing from it, a state transfer, prefix caching) must first call
  :meth:`materialize` for those slots. A slot whose pool row was just written by a prefill starts with
  :meth:`start_requests` (rings start over, by default at spread flush phases: ``start_requests(slots, phase=...)``).
- The cursors advance once per model step, after every registered layer has stepped: automatically after
  the last layer's call (``auto_commit``, the default; the commit kernel is then part of the same CUDA graph
  as the layers), or by calling :meth:`commit`.

Accepted argument forms: ``A`` ``[H]`` or FlashInfer's ``tie_hdim`` views ``[H, P, N]``; ``D`` /
``dt_bias`` ``[H]`` or ``[H, P]``; ``dt`` ``[B, H]`` or ``[B, H, P]``. Of the expanded forms the
``[..., 0]`` slice is taken: a broadcast view is tied by construction; a materialized copy of A / D /
dt_bias is checked once (outside graph capture; it syncs) to be constant along P / N; dt, new every step,
is not checked (Mamba-2's dt is per head). ``dt_softplus`` must be True (the replay kernels apply
``softplus(dt + dt_bias)``). Rows whose index equals ``pad_slot_id`` (or is negative) are skipped and their
``out`` rows left unwritten. With ``mode="speculative"`` the drafts come as ``[B, T, ...]`` inputs and the
step ends with ``commit(accepted)``. Refused with a clear error: FlashInfer's per-draft-state arguments
(``disable_state_update``, ``intermediate_states_buffer``, ``cache_steps``, ...), stochastic rounding
(``rand_seed``), and a ``state`` that is not one of the registered pools.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import torch

from ._pool_replay import PER_DRAFT_STATE_ARGS, PoolReplay, refuse_per_draft_state_args
from ..ops.ring_fold import mamba2_fold_record


def _per_head(op: str, name: str, t: torch.Tensor, H: int, checked: Dict[tuple, bool]) -> torch.Tensor:
    """``t`` [H], or [H, P(, N)] constant along the trailing dims, as an [H] view (the caller makes the
    contiguous fp32 copy once per parameter)."""
    if t.dim() == 1:
        if t.shape[0] != H:
            raise ValueError(f"{op}: '{name}' must be [H={H}] or [H, P(, N)]; got {list(t.shape)}")
        return t
    if t.shape[0] != H:
        raise ValueError(f"{op}: '{name}' must be [H={H}, ...]; got {list(t.shape)}")
    head = t[(slice(None),) + (0,) * (t.dim() - 1)]
    _check_tied(op, name, t, head, checked)
    return head


def _check_tied(op: str, name: str, t: torch.Tensor, head: torch.Tensor, checked: Dict[tuple, bool]) -> None:
    """A broadcast view (stride 0 along the trailing dims) is tied by construction; a copy is compared with
    its first element once, outside CUDA graph capture (the comparison syncs)."""
    if all(s == 0 for s in t.stride()[1:]):
        return
    key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()))
    if key in checked or (t.is_cuda and torch.cuda.is_current_stream_capturing()):
        return
    full = head.reshape(head.shape + (1,) * (t.dim() - head.dim())).expand_as(t)
    if not torch.equal(t, full):
        raise ValueError(f"{op}: '{name}' {list(t.shape)} varies along its trailing dims; ReplaySSM takes one value "
                         f"per head (Mamba-2's A, D, dt_bias and dt are per head)")
    checked[key] = True


class ReplaySelectiveStateUpdate(PoolReplay):
    """Drop-in for ``flashinfer.mamba.selective_state_update`` over the given state pools (see module doc).

    Args:
        states: the pools the caller passes as ``state``, one per Mamba-2 layer: ``[S, H, P, N]`` (fp32, fp16
            or bf16) each; their rows become checkpoints.
        ngroups: G (B / C groups; ``H % G == 0``).
        window: L, the flush period (1..64; 16 is the measured default).
        act_dtype: dtype of x / B / C / z (bf16 or fp16).
        auto_commit: advance the cursors right after the step's last layer call (any call order); default on in
            standard mode, off (and refused) in speculative mode.
        max_verify, mode: ``mode="speculative"`` takes T <= max_verify drafts per row as ``[B, T, ...]`` inputs
            (x, dt, B, C, z, out), verifies them output-only, and waits for :meth:`commit` with the accepted
            counts; the ring capacity is L + max_verify (L in standard mode).
    """
    op = "ReplaySelectiveStateUpdate"
    family = "mamba2"

    def __init__(self, states: Sequence[torch.Tensor], ngroups: int, window: int = 16,
                 act_dtype: torch.dtype = torch.bfloat16, auto_commit: Optional[bool] = None, max_verify: int = 1,
                 mode: str = "standard"):
        super().__init__(states, window, auto_commit, max_verify, mode)
        S, H, P, N = self.states[0].shape
        if ngroups < 1 or H % ngroups:
            raise ValueError(f"{self.op}: H={H} must be a multiple of ngroups={ngroups}")
        self.H, self.P, self.N, self.G = H, P, N, ngroups
        self.act_dtype = act_dtype
        nl, C, d = len(states), self.capacity, self.device
        self.ring_dt = torch.zeros(nl, S, C, H, dtype=torch.float32, device=d)
        self.ring_x = torch.zeros(nl, S, C, H, P, dtype=act_dtype, device=d)
        self.ring_B = torch.zeros(nl, S, C, ngroups, N, dtype=act_dtype, device=d)
        self.A = [None] * nl            # per-head fp32 A of each layer, from its last call (materialize needs it)
        self._tied: Dict[tuple, bool] = {}

    def __call__(self, state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                 state_batch_indices=None, pad_slot_id=-1, out=None, **kwargs):
        op = self.op
        refuse_per_draft_state_args(op, kwargs)
        if kwargs.get("rand_seed") is not None:
            raise ValueError(f"{op}: stochastic rounding of the state (rand_seed) is not supported: the checkpoint is "
                             f"written at flushes only, in the pool's dtype")
        unknown = sorted(k for k in kwargs if k not in PER_DRAFT_STATE_ARGS + ("rand_seed", "philox_rounds"))
        if unknown:
            raise ValueError(f"{op}: unsupported arguments {unknown}")
        if not dt_softplus:
            raise ValueError(f"{op}: dt_softplus must be True (the replay kernels apply softplus(dt + dt_bias))")
        layer = self._layer(state)
        if x.dim() not in (3, 4) or tuple(x.shape[-2:]) != (self.H, self.P):
            raise ValueError(f"{op}: 'x' must be [B, H={self.H}, P={self.P}] (one token per row) or [B, T, H, P] "
                             f"(speculative); got {list(x.shape)}")
        if x.dtype != self.act_dtype:
            raise ValueError(f"{op}: 'x' must be {self.act_dtype} (the rings' act_dtype); got {x.dtype}")
        Bsz = x.shape[0]
        T = self._tokens(1 if x.dim() == 3 else int(x.shape[1]))
        lead = tuple(x.shape[:-2])                      # (B,) or (B, T)
        if dt.dim() == x.dim():
            dt_raw = dt[..., 0]     # per head by construction; a per-step copy is not compared (it would sync)
        else:
            dt_raw = dt
        if tuple(dt_raw.shape) != lead + (self.H,):
            raise ValueError(f"{op}: 'dt' must be {list(lead) + [self.H]} or with a trailing P; got {list(dt.shape)}")
        for name, t in (("B", B), ("C", C)):
            if tuple(t.shape) != lead + (self.G, self.N):
                hint = ""
                if t.dim() == len(lead) + 2 and t.shape[-1] == self.N and self.G % max(1, int(t.shape[-2])) == 0:
                    hint = (f" (with tensor parallelism each rank holds n_groups / tp_size groups: build the drop-in "
                            f"with ngroups={int(t.shape[-2])} if this rank's B has {int(t.shape[-2])})")
                raise ValueError(f"{op}: '{name}' must be {list(lead) + [self.G, self.N]} (ngroups={self.G}); got "
                                 f"{list(t.shape)}{hint}")
        # per-head fp32 parameters: views of broadcast or [H] fp32 inputs, a small copy of materialized ones
        A_h = self._fp32(_per_head(op, "A", A, self.H, self._tied))
        D_h = None if D is None else self._fp32(_per_head(op, "D", D, self.H, self._tied))
        bias_h = None if dt_bias is None else self._fp32(_per_head(op, "dt_bias", dt_bias, self.H, self._tied))
        if dt_raw.dtype not in (torch.float32, x.dtype):
            dt_raw = dt_raw.to(torch.float32)
        rows = self._rows_of(state_batch_indices, Bsz, x.device, pad_slot_id)
        if out is None:
            out = torch.empty_like(x)
        torch.ops.replayssm.mamba2_replay_decode_out(
            state, self.ring_dt[layer], self.ring_x[layer], self.ring_B[layer], self.ring_origin, self.ring_len,
            x, dt_raw.contiguous(), B, C, A_h, D_h, bias_h, z, rows, self.window, self.mode, out)
        self.A[layer] = A_h
        self._stepped(layer, rows, T)
        return out

    def _fold(self, layer, idx, ridx, S):
        A = self.A[layer]
        if A is None:
            raise ValueError(f"{self.op}.materialize: layer {layer} holds records but never stepped through this "
                             f"object (its A is unknown)")
        return mamba2_fold_record(S, self.ring_dt[layer, idx, ridx], self.ring_x[layer, idx, ridx],
                                  self.ring_B[layer, idx, ridx], A)

    def ring_bytes_per_slot_layer(self) -> int:
        act = torch.tensor([], dtype=self.act_dtype).element_size()
        return self.capacity * (4 * self.H + act * self.H * self.P + act * self.G * self.N)
