"""ReplaySSM behind the ``fused_sigmoid_gating_delta_rule_update`` calling convention (Gated DeltaNet decode).

The fla-derived decode function that serving stacks call once per GDN layer and step,

    fused_sigmoid_gating_delta_rule_update(A_log, a, dt_bias, softplus_beta, softplus_threshold, q, k, v, b,
                                           initial_state_source, initial_state_indices, scale=None,
                                           use_qk_l2norm_in_kernel=True, cu_seqlens=None)

(the argument order of the Triton version in TensorRT-LLM's PyTorch backend and SGLang; callers by keyword
work too), can be replaced by a :class:`ReplayGatedDeltaRuleUpdate`. As with the Mamba-2 drop-in
(``selective_state_update.py``), the caller's state pool row of a slot becomes its replay checkpoint, a ring
of (g, u in fp16, raw k) records per layer and slot lives here, the cursors advance once per model step
(automatically after the last layer), :meth:`start_requests` begins a slot after its prefill (by default at a spread flush phase), and
:meth:`materialize` folds the rings into the pool before anything else reads a decoding slot's row.

What the drop-in takes: one token per sequence, either ``q`` ``[B, 1, H, K]`` or the packed
``[1, B, H, K]`` with ``cu_seqlens`` of B + 1 entries; ``v`` likewise ``[.., HV, V]``; ``a`` / ``b``
``[B, HV]``, ``[B, 1, HV]`` or ``[1, B, HV]``; pools ``[S, HV, V, K]`` (K innermost, the layout of
TensorRT-LLM's GDN pools; a ``[S, HV, K, V]`` pool cannot be told apart when K = V and must not be passed);
``use_qk_l2norm_in_kernel=True``; ``softplus_beta=1`` and ``softplus_threshold=20`` (the kernels' softplus).
Negative ``initial_state_indices`` are padding rows. Refused with an error naming the argument: anything
else, including the speculative arguments (``disable_state_update``, ``intermediate_states_buffer``, ...).
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ._pool_replay import PER_DRAFT_STATE_ARGS, PoolReplay, refuse_per_draft_state_args
from ..ops.ring_fold import gdn_fold_record

_HEAD_K = (64, 128, 256)
_IGNORED = ("is_kda", "lower_bound")


def _rows3(op: str, name: str, t: torch.Tensor, Bsz: int, HV: int, T: int = 1) -> torch.Tensor:
    """``[B, T, HV]``, or with T = 1 also ``[B, HV]`` or ``[1, B, HV]`` -> a ``[B, T, HV]`` view."""
    if t.dim() == 3 and tuple(t.shape) == (Bsz, T, HV):
        return t
    if T == 1 and t.dim() == 2 and tuple(t.shape) == (Bsz, HV):
        return t.unsqueeze(1)
    if T == 1 and t.dim() == 3 and tuple(t.shape) == (1, Bsz, HV):
        return t[0].unsqueeze(1)
    forms = f"[B={Bsz}, T={T}, HV={HV}]" + (", [B, HV] or [1, B, HV]" if T == 1 else "")
    raise ValueError(f"{op}: '{name}' must be {forms}; got {list(t.shape)}")


class ReplayGatedDeltaRuleUpdate(PoolReplay):
    """Drop-in for ``fused_sigmoid_gating_delta_rule_update`` over the given GDN state pools (module doc).

    Args:
        states: one ``[S, HV, V, K]`` pool per GDN layer (fp32, fp16 or bf16); rows become checkpoints.
        num_key_heads: H (q / k heads; ``HV % H == 0``).
        window: L, the flush period (1..64; 16 is the measured default).
        act_dtype: dtype of q / k / v / a / b (bf16 or fp16).
        auto_commit: advance the cursors right after the step's last layer call (any call order); default on in
            standard mode, off (and refused) in speculative mode.
        max_verify, mode: ``mode="speculative"`` takes T <= max_verify drafts per row as ``q`` ``[B, T, H, K]`` (no
            ``cu_seqlens``), verifies them with the triangular solve, output-only, and waits for :meth:`commit` with
            the accepted counts; the ring capacity is L + max_verify (L in standard mode).
    """
    op = "ReplayGatedDeltaRuleUpdate"
    family = "gdn"

    def __init__(self, states: Sequence[torch.Tensor], num_key_heads: int, window: int = 16,
                 act_dtype: torch.dtype = torch.bfloat16, auto_commit: Optional[bool] = None, max_verify: int = 1,
                 mode: str = "standard"):
        super().__init__(states, window, auto_commit, max_verify, mode)
        S, HV, V, K = self.states[0].shape
        if num_key_heads < 1 or HV % num_key_heads:
            raise ValueError(f"{self.op}: HV={HV} must be a multiple of num_key_heads={num_key_heads}")
        if K not in _HEAD_K:
            raise ValueError(f"{self.op}: the pools' key dim K={K} (last dim) must be one of {_HEAD_K}")
        self.H, self.HV, self.V, self.K = num_key_heads, HV, V, K
        self.act_dtype = act_dtype
        nl, C, d = len(states), self.capacity, self.device
        self.ring_g = torch.zeros(nl, S, C, HV, dtype=torch.float32, device=d)
        self.ring_u = torch.zeros(nl, S, C, HV, V, dtype=torch.float16, device=d)
        self.ring_k = torch.zeros(nl, S, C, num_key_heads, K, dtype=act_dtype, device=d)

    def __call__(self, A_log, a, dt_bias, softplus_beta, softplus_threshold, q, k, v, b, initial_state_source,
                 initial_state_indices, scale: Optional[float] = None, use_qk_l2norm_in_kernel: bool = False,
                 cu_seqlens: Optional[torch.Tensor] = None, output: Optional[torch.Tensor] = None, **kwargs):
        op = self.op
        refuse_per_draft_state_args(op, kwargs)
        if kwargs.get("is_kda"):
            raise ValueError(f"{op}: is_kda=True (Kimi delta attention gates) is not supported")
        unknown = sorted(k_ for k_ in kwargs if k_ not in PER_DRAFT_STATE_ARGS + _IGNORED)
        if unknown:
            raise ValueError(f"{op}: unsupported arguments {unknown}")
        if kwargs.get("lower_bound") is not None:
            raise ValueError(f"{op}: lower_bound (a clamped gate) is not supported")
        if not use_qk_l2norm_in_kernel:
            raise ValueError(f"{op}: use_qk_l2norm_in_kernel must be True (the replay kernels l2-normalize q and k)")
        if float(softplus_beta) != 1.0 or float(softplus_threshold) != 20.0:
            raise ValueError(f"{op}: softplus_beta / softplus_threshold must be 1 / 20 (the kernels' softplus); got "
                             f"{softplus_beta} / {softplus_threshold}")
        layer = self._layer(initial_state_source)
        H, HV, K, V = self.H, self.HV, self.K, self.V
        if q.dim() != 4 or tuple(q.shape[2:]) != (H, K):
            hint = ""
            if q.dim() == 4 and q.shape[3] == K and H % max(1, int(q.shape[2])) == 0:
                hint = (f" (with tensor parallelism each rank holds num_key_heads / tp_size key heads: build the "
                        f"drop-in with num_key_heads={int(q.shape[2])} if this rank's q has {int(q.shape[2])})")
            raise ValueError(f"{op}: 'q' must be [B, 1, H={H}, K={K}] or [1, B, H, K]; got {list(q.shape)}{hint}")
        if cu_seqlens is not None:
            Bsz = int(q.shape[1])
            if q.shape[0] != 1 or cu_seqlens.numel() != Bsz + 1:
                raise ValueError(f"{op}: with cu_seqlens the drop-in takes one token per sequence: 'q' [1, B, H, K] "
                                 f"and B + 1 offsets; got 'q' {list(q.shape)} and {cu_seqlens.numel()} offsets")
            q4, k4, v4 = (t[0].unsqueeze(1) for t in (q, k, v))
        else:
            Bsz = int(q.shape[0])
            q4, k4, v4 = q, k, v
        T = self._tokens(int(q4.shape[1]))
        if tuple(k4.shape) != (Bsz, T, H, K) or tuple(v4.shape) != (Bsz, T, HV, V):
            raise ValueError(f"{op}: 'k' / 'v' must match 'q' ({Bsz} rows, H={H}, K={K}; HV={HV}, V={V}); got "
                             f"{list(k.shape)} / {list(v.shape)}")
        if q.dtype != self.act_dtype:
            raise ValueError(f"{op}: 'q' must be {self.act_dtype} (the rings' act_dtype); got {q.dtype}")
        a3 = _rows3(op, "a", a, Bsz, HV, T).to(q.dtype)
        b3 = _rows3(op, "b", b, Bsz, HV, T).to(q.dtype)
        rows = self._rows_of(initial_state_indices, Bsz, q.device, None)
        out4 = None if output is None else (output[0].unsqueeze(1) if cu_seqlens is not None else output)
        from ..ops.gdn import gdn_replay
        o = gdn_replay(initial_state_source, rows, self.ring_origin, self.ring_len, self.ring_g[layer],
                       self.ring_u[layer], self.ring_k[layer], q4, k4, v4, a3, b3, self._fp32(A_log),
                       self._fp32(dt_bias), self.window, self.mode, scale, out4)
        self._stepped(layer, rows, T)
        if output is not None:
            return output
        return o[:, 0].unsqueeze(0) if cu_seqlens is not None else o

    def _fold(self, layer, idx, ridx, S):
        return gdn_fold_record(S, self.ring_g[layer, idx, ridx], self.ring_u[layer, idx, ridx],
                               self.ring_k[layer, idx, ridx])

    def ring_bytes_per_slot_layer(self) -> int:
        act = torch.tensor([], dtype=self.act_dtype).element_size()
        return self.capacity * (4 * self.HV + 2 * self.HV * self.V + act * self.H * self.K)
