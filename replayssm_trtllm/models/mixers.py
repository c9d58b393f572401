"""Decode-time SSM mixers of the Hugging Face hybrid models, in plain PyTorch around a state backend.

One mixer = the layer's arithmetic outside the recurrence, exactly as the Hugging Face model computes it,
with the recurrence handed to a backend (``models/backends.py``: conventional float64, ReplaySSM float64,
or the ReplaySSM CUDA kernels):

- :class:`Mamba2Mixer` (Nemotron-H / Nemotron-3): ``in_proj`` -> ``[z | x B C | dt]``; depthwise causal
  conv + silu over ``x B C``; recurrence with D skip and the ``silu(z)`` gate; grouped RMSNorm (groups of
  ``d_inner / n_groups``, gate applied before the norm); ``out_proj``.
- :class:`GatedDeltaNetMixer` (Qwen3.5 / Qwen3-Next): ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``,
  ``in_proj_a``; causal conv + silu over ``q k v``; recurrence (q, k l2-normalized, ``beta = sigmoid(b)``,
  ``g = -exp(A_log) softplus(a + dt_bias)``); per-head RMSNorm times ``weight``, then ``silu(z)``;
  ``out_proj``.

Each decode call takes ``T`` tokens per row (T = 1 standard, T > 1 the drafts of a speculative step).
The causal-conv history is kept per slot by :class:`CausalConvState` and, like the SSM state, only
advances on :meth:`commit` by the accepted count, so rejected drafts leave nothing behind.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence

import torch
import torch.nn.functional as F

from .hf_config import GDN, MAMBA2, SsmMixerSpec


class CausalConvState:
    """The last ``kernel - 1`` conv inputs of every slot of one layer (oldest first).

    Args:
        num_slots: S. channels: conv channels. kernel: conv width. dtype/device: of the history.
    """

    def __init__(self, num_slots: int, channels: int, kernel: int, dtype: torch.dtype = torch.float64,
                 device="cpu"):
        if kernel < 1:
            raise ValueError(f"CausalConvState: kernel must be >= 1; got {kernel}")
        self.kernel = int(kernel)
        self.history = torch.zeros(num_slots, channels, self.kernel - 1, dtype=dtype, device=device)
        self._pending: Optional[tuple] = None

    def reset(self, slots: Sequence[int], history: Optional[torch.Tensor] = None) -> None:
        """New requests in ``slots``: zero history (no prompt) or ``history`` ``[n, channels, kernel - 1]``
        (the last prompt inputs, oldest first, as a prefill leaves them)."""
        idx = torch.as_tensor(list(slots), dtype=torch.long, device=self.history.device)
        keep = idx >= 0                                  # negative entries: padding, skipped
        if history is None:
            self.history[idx[keep]] = 0
            return
        want = (len(idx),) + tuple(self.history.shape[1:])
        if tuple(history.shape) != want:
            raise ValueError(f"CausalConvState.reset: 'history' must be [n, channels, kernel - 1] = {list(want)}; "
                             f"got {list(history.shape)}")
        self.history[idx[keep]] = history.to(self.history)[keep]

    def apply(self, slots: torch.Tensor, inputs: torch.Tensor, weight: torch.Tensor,
              bias: Optional[torch.Tensor]) -> torch.Tensor:
        """Conv outputs (before the activation) of ``inputs`` ``[B, T, channels]`` after each row's history.

        ``weight`` ``[channels, 1, kernel]`` (the checkpoint's layout). Padding rows (slot < 0) get zero
        history. The history is not changed until :meth:`commit`.
        """
        Bsz, T, Ch = inputs.shape
        idx = slots.to(device=self.history.device, dtype=torch.long)
        hist = torch.zeros(Bsz, Ch, self.kernel - 1, dtype=self.history.dtype, device=self.history.device)
        keep = idx >= 0
        hist[keep] = self.history[idx[keep]]
        window = torch.cat([hist, inputs.to(hist.dtype).transpose(1, 2)], dim=2)    # [B, Ch, K-1+T]
        w = weight.to(hist).reshape(Ch, self.kernel)
        out = window.unfold(2, self.kernel, 1)                                      # [B, Ch, T, K]
        out = torch.einsum("bctk,ck->btc", out, w)
        if bias is not None:
            out = out + bias.to(out)
        self._pending = (idx, window)
        return out

    def commit(self, accepted: Optional[torch.Tensor] = None) -> None:
        """Advance each row of the last :meth:`apply` by ``accepted`` ``[B]`` tokens (None: all T)."""
        if self._pending is None:
            raise ValueError("CausalConvState.commit: no apply() ran since the last commit")
        idx, window = self._pending
        T = window.shape[2] - (self.kernel - 1)
        acc = torch.full((idx.shape[0],), T, dtype=torch.long) if accepted is None else \
            torch.as_tensor(accepted).to(torch.long).cpu().reshape(-1)
        valid = idx.cpu() >= 0
        if acc.shape[0] != idx.shape[0] or bool(((acc[valid] < 1) | (acc[valid] > T)).any()):
            raise ValueError(f"CausalConvState.commit: 'accepted' must be [B={idx.shape[0]}] in [1, {T}] on the "
                             f"rows with a slot; got {acc.tolist()}")
        for b, s in enumerate(idx.tolist()):
            if s >= 0 and self.kernel > 1:
                n = int(acc[b])
                self.history[s] = window[b, :, n:n + self.kernel - 1]
        self._pending = None


def _linear(x: torch.Tensor, w: Dict[str, torch.Tensor], name: str) -> torch.Tensor:
    return F.linear(x, w[name + ".weight"], w.get(name + ".bias"))


class _MixerBase:
    family = ""

    def __init__(self, spec: SsmMixerSpec, weights: Dict[str, torch.Tensor], dtype: torch.dtype, device):
        if spec.family != self.family:
            raise ValueError(f"{type(self).__name__}: the spec is a {spec.family!r} model, not {self.family!r}")
        self.spec = spec
        self.dtype = dtype
        self.device = torch.device(device)
        self.w = {k: v.to(device=self.device, dtype=dtype) for k, v in weights.items()}
        for name in self._required:
            if name not in self.w:
                raise ValueError(f"{type(self).__name__}: weight {name!r} missing (got {sorted(self.w)})")

    def new_conv_state(self, num_slots: int) -> CausalConvState:
        return CausalConvState(num_slots, self.spec.conv_dim, self.spec.conv_kernel, self.dtype, self.device)

    def _conv(self, conv: CausalConvState, slots: torch.Tensor, xbc: torch.Tensor) -> torch.Tensor:
        return F.silu(conv.apply(slots, xbc, self.w["conv1d.weight"], self.w.get("conv1d.bias")))


class Mamba2Mixer(_MixerBase):
    """Nemotron-H Mamba-2 mixer (see the module doc). ``weights`` from :func:`load_mixer_weights`."""
    family = MAMBA2
    _required = ("in_proj.weight", "conv1d.weight", "dt_bias", "A_log", "D", "norm.weight", "out_proj.weight")

    def __init__(self, spec: SsmMixerSpec, weights: Dict[str, torch.Tensor], dtype: torch.dtype = torch.float64,
                 device="cpu"):
        lo, hi = spec.time_step_limit
        if lo > 0.0 or math.isfinite(hi):
            raise ValueError(f"Mamba2Mixer: time_step_limit={spec.time_step_limit} is not supported: the kernels "
                             f"and the reference apply softplus(dt + dt_bias) without a clamp; only (0, inf) is")
        super().__init__(spec, weights, dtype, device)
        # The recurrence's parameters in float32, as the kernels take them (A = -exp(A_log)).
        self.A = -torch.exp(weights["A_log"].to(torch.float32)).to(self.device)
        self.D = weights["D"].to(device=self.device, dtype=torch.float32)
        self.dt_bias = weights["dt_bias"].to(device=self.device, dtype=torch.float32)

    def inputs(self, hidden: torch.Tensor, slots: torch.Tensor, conv: CausalConvState) -> Dict[str, torch.Tensor]:
        """Recurrence inputs of ``hidden`` ``[B, T, hidden_size]``: x ``[B,T,H,P]``, dt_raw ``[B,T,H]``,
        B / C ``[B,T,G,N]``, z ``[B,T,H,P]`` (in the mixer's dtype)."""
        s = self.spec
        Bsz, T, _ = hidden.shape
        proj = _linear(hidden.to(self.w["in_proj.weight"]), self.w, "in_proj")
        z, xbc, dt_raw = torch.split(proj, [s.value_dim, s.conv_dim, s.heads], dim=-1)
        xbc = self._conv(conv, slots, xbc)
        x, Bm, Cm = torch.split(xbc, [s.value_dim, s.key_dim, s.key_dim], dim=-1)
        return {"x": x.reshape(Bsz, T, s.heads, s.head_dim), "dt_raw": dt_raw,
                "B": Bm.reshape(Bsz, T, s.key_heads, s.state_dim), "C": Cm.reshape(Bsz, T, s.key_heads, s.state_dim),
                "z": z.reshape(Bsz, T, s.heads, s.head_dim)}

    def output(self, y: torch.Tensor) -> torch.Tensor:
        """``out_proj(grouped_rmsnorm(y))`` of the gated recurrence output y ``[B, T, H, P]``
        (``(S C + D x) * silu(z)``, which is what the backends return)."""
        s = self.spec
        Bsz, T = y.shape[:2]
        g = y.to(self.dtype).reshape(Bsz, T, s.key_heads, s.value_dim // s.key_heads)
        g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + s.norm_eps)
        return _linear(self.w["norm.weight"] * g.reshape(Bsz, T, s.value_dim), self.w, "out_proj")


class GatedDeltaNetMixer(_MixerBase):
    """Qwen3.5 / Qwen3-Next Gated DeltaNet mixer (see the module doc)."""
    family = GDN
    _required = ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight",
                 "conv1d.weight", "dt_bias", "A_log", "norm.weight", "out_proj.weight")

    def __init__(self, spec: SsmMixerSpec, weights: Dict[str, torch.Tensor], dtype: torch.dtype = torch.float64,
                 device="cpu"):
        super().__init__(spec, weights, dtype, device)
        self.A_log = weights["A_log"].to(device=self.device, dtype=torch.float32)
        self.dt_bias = weights["dt_bias"].to(device=self.device, dtype=torch.float32)

    def inputs(self, hidden: torch.Tensor, slots: torch.Tensor, conv: CausalConvState) -> Dict[str, torch.Tensor]:
        """Recurrence inputs of ``hidden`` ``[B, T, hidden_size]``: raw q / k ``[B,T,H,K]`` (the backends
        l2-normalize them), v ``[B,T,HV,V]``, a / b ``[B,T,HV]``, and the gate z ``[B,T,HV,V]``."""
        s = self.spec
        Bsz, T, _ = hidden.shape
        h = hidden.to(self.w["in_proj_qkv.weight"])
        qkv = self._conv(conv, slots, _linear(h, self.w, "in_proj_qkv"))
        q, k, v = torch.split(qkv, [s.key_dim, s.key_dim, s.value_dim], dim=-1)
        return {"q": q.reshape(Bsz, T, s.key_heads, s.state_dim), "k": k.reshape(Bsz, T, s.key_heads, s.state_dim),
                "v": v.reshape(Bsz, T, s.heads, s.head_dim), "a": _linear(h, self.w, "in_proj_a"),
                "b": _linear(h, self.w, "in_proj_b"),
                "z": _linear(h, self.w, "in_proj_z").reshape(Bsz, T, s.heads, s.head_dim)}

    def output(self, o: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``out_proj(rmsnorm(o) * weight * silu(z))`` per value head; o, z ``[B, T, HV, V]``."""
        s = self.spec
        Bsz, T = o.shape[:2]
        o = o.to(self.dtype)
        n = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + s.norm_eps)
        n = self.w["norm.weight"] * n * F.silu(z.to(self.dtype))
        return _linear(n.reshape(Bsz, T, s.value_dim), self.w, "out_proj")


def make_mixer(spec: SsmMixerSpec, weights: Dict[str, torch.Tensor], dtype: torch.dtype = torch.float64,
               device="cpu"):
    """The mixer class of ``spec.family`` over ``weights``."""
    cls = Mamba2Mixer if spec.family == MAMBA2 else GatedDeltaNetMixer
    return cls(spec, weights, dtype, device)
