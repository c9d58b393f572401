"""Recurrence backends of the decode-time mixers, and the decoder that drives a model's SSM layers.

A backend owns the recurrent state of every SSM layer of a model for ``num_slots`` request slots:

- :class:`ConventionalReference`: the float64 state itself, advanced by the conventional recurrence
  (``mamba2_decode_naive`` / ``gdn_decode_naive``), with per-draft snapshots for speculative steps.
- :class:`ReplayReference`: the float64 ReplaySSM caches (checkpoint + ring, cursors shared by layers;
  ``reference/caches.py``), Algorithms 1/2 (Mamba-2) and 4/5 (GDN).
- :class:`ReplayKernels`: the CUDA kernels through the torch ops and the device caches
  (``ReplayStateCache`` / ``GdnReplayStateCache``); the commit runs on the device.

The replay backends take the caches' flush phase at admission (``reset(slots, phase=...)``, state/phase.py): a new
row may start with neutral records, which change no output and move its flushes earlier, so that rows admitted
together do not all flush on the same step. :class:`SsmDecoder` passes ``"spread"`` by default.

:class:`SsmDecoder` puts mixers, conv histories and one backend together: ``step(layer, hidden, slots)``
for each SSM layer of a model step, then ``commit(accepted)`` once. Padding rows (slot < 0) produce zeros
and change nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import torch

from .hf_config import MAMBA2, SsmMixerSpec
from .mixers import GatedDeltaNetMixer, Mamba2Mixer

F64 = torch.float64


def _slots_i64(slots) -> torch.Tensor:
    return torch.as_tensor(slots).to(device="cpu", dtype=torch.int64).reshape(-1)


def _require_fresh_rings(op: str, ring_len: torch.Tensor, idx: torch.Tensor, admitted_len: torch.Tensor) -> None:
    """A prefill state is loaded right after reset(): each slot's ring holds no record but the neutral records its
    admission phase wrote (``admitted_len``; they change nothing, so the prompt's state may go under them)."""
    busy = [int(i) for i in idx.tolist() if int(ring_len[i]) != int(admitted_len[i])]
    if busy:
        raise ValueError(f"{op}.load_state: slots {busy} have decoded since their reset (ring length h = "
                         f"{[int(ring_len[i]) for i in busy]}, their admission's neutral records "
                         f"{[int(admitted_len[i]) for i in busy]}); a prefill state is loaded right after reset(), "
                         f"before any decode step")


def _admission_counts(idx: torch.Tensor, counts: Optional[list], admitted_len: torch.Tensor) -> None:
    """Record each reset slot's neutral-record count (0 without a phase) for :func:`_require_fresh_rings`."""
    for r, slot in enumerate(idx.tolist()):
        if slot >= 0:
            admitted_len[slot] = 0 if counts is None else int(counts[r])


BACKENDS = ("replay-reference", "conventional-reference", "replay-kernels")

# Prefill runs the float64 conventional recurrence in chunks of tokens whose per-token snapshots stay under this size.
PREFILL_SNAPSHOT_BYTES = 1 << 28
# The kernels backend prefills with the conventional kernels, one token per launch: their in-place multi-token
# forms (T > 1 without snapshots) are not all covered by the GPU tests, the one-token form is.
PREFILL_TOKENS_PER_LAUNCH = 1
# The activation inputs the kernels read, per family.
_M2_ACTS = ("x", "B", "C", "z")
_GDN_ACTS = ("q", "k", "v", "a", "b")


def _naive(spec: SsmMixerSpec, mixer, S0: torch.Tensor, inputs: Mapping[str, torch.Tensor]):
    """The float64 conventional recurrence of ``inputs`` (the mixer's, on the CPU) from states ``S0``:
    ``(y, states after each token)``."""
    from ..reference import gdn_decode_naive, mamba2_decode_naive
    i = inputs
    if spec.family == MAMBA2:
        return mamba2_decode_naive(S0, i["x"], i["dt_raw"], i["B"], i["C"], mixer.A.cpu(), mixer.D.cpu(),
                                   mixer.dt_bias.cpu(), i["z"])
    return gdn_decode_naive(S0, i["q"], i["k"], i["v"], i["a"], i["b"], mixer.A_log.cpu(), mixer.dt_bias.cpu())


class _Float64Backend:
    """What the float64 backends share: the prompt's recurrence in float64 on the CPU, loaded as the state."""

    def prefill_recurrence(self, pos: int, slots: torch.Tensor, mixer, inputs: Mapping[str, torch.Tensor]
                           ) -> torch.Tensor:
        """The conventional recurrence over the prompt from a zero state, in chunks whose per-token snapshots
        stay under ``PREFILL_SNAPSHOT_BYTES``; the final states become layer ``pos``'s state of ``slots``
        (:meth:`load_state`). Returns the outputs ``[n, P, ...]``."""
        s = self.spec
        n, P = next(iter(inputs.values())).shape[:2]
        state = torch.zeros(n, s.heads, s.head_dim, s.state_dim, dtype=F64)
        chunk = max(1, PREFILL_SNAPSHOT_BYTES // (8 * n * s.heads * s.head_dim * s.state_dim))
        cpu = {k: v.to("cpu", F64) for k, v in inputs.items()}
        ys = []
        for t0 in range(0, P, chunk):
            y, states = _naive(s, mixer, state, {k: v[:, t0:t0 + chunk] for k, v in cpu.items()})
            state = states[:, -1]
            ys.append(y)
        self.load_state(pos, slots, state)
        return torch.cat(ys, 1)


class ConventionalReference(_Float64Backend):
    """Float64 conventional decoding of every SSM layer (the ground truth for the replay backends)."""
    name = "conventional-reference"

    def __init__(self, spec: SsmMixerSpec, num_slots: int, max_verify: int = 1):
        self.spec, self.num_slots, self.max_verify = spec, int(num_slots), int(max_verify)
        s = spec
        dims = (s.heads, s.head_dim, s.state_dim)
        self.state = torch.zeros(len(s.ssm_layers), num_slots, *dims, dtype=F64)
        self._pending: Dict[int, tuple] = {}

    def reset(self, slots: Sequence[int], prefill_state: Optional[torch.Tensor] = None, phase=None) -> None:
        """``prefill_state`` ``[num_ssm_layers, n, ...]`` in the family's state layout, or None (zeros).
        ``phase`` (the replay backends' flush phase at admission) has no meaning without a ring and is ignored."""
        idx = _slots_i64(slots)
        keep = idx >= 0                                  # negative entries: padding, skipped
        self.state[:, idx[keep]] = 0 if prefill_state is None else prefill_state.to(F64)[:, keep]

    def load_state(self, pos: int, slots: torch.Tensor, state: torch.Tensor) -> None:
        """Layer ``pos``'s state of ``slots`` (>= 0) after a prefill."""
        self.state[pos, _slots_i64(slots)] = state.to(F64)

    def current_state(self, slots: Sequence[int], mixers: Sequence) -> torch.Tensor:
        """Every layer's state of ``slots`` after their committed tokens: ``[num_ssm_layers, n, ...]`` float64."""
        return self.state[:, _slots_i64(slots)].clone()

    def step(self, pos: int, slots: torch.Tensor, mixer, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        idx = _slots_i64(slots)
        keep = idx >= 0
        rows = torch.nonzero(keep)[:, 0]
        first = next(iter(inputs.values()))
        Bsz, T = first.shape[:2]
        if T > self.max_verify:
            raise ValueError(f"{self.name}: T={T} > max_verify={self.max_verify}")
        pick = {k: v.to("cpu")[rows] for k, v in inputs.items()}
        y, states = _naive(self.spec, mixer, self.state[pos, idx[keep]], pick)
        out = torch.zeros((Bsz,) + tuple(y.shape[1:]), dtype=F64)
        out[rows] = y
        self._pending[pos] = (idx[keep], states)
        return out

    def commit(self, slots: torch.Tensor, num_tokens: int, accepted: Optional[torch.Tensor] = None) -> None:
        idx = _slots_i64(slots)
        keep = idx >= 0
        acc = torch.full((idx.shape[0],), num_tokens, dtype=torch.long) if accepted is None else \
            torch.as_tensor(accepted).to("cpu", torch.long).reshape(-1)
        acc = acc[keep]
        for pos, (rows, states) in self._pending.items():
            self.state[pos, rows] = states[torch.arange(rows.shape[0]), acc - 1]
        self._pending.clear()


class ReplayReference(_Float64Backend):
    """Float64 ReplaySSM caches of every SSM layer, cursors shared by the layers (one commit per step)."""
    name = "replay-reference"

    def __init__(self, spec: SsmMixerSpec, num_slots: int, window: int, max_verify: int = 1,
                 mode: Union[str, int] = "standard"):
        from ..reference import GdnReplayCacheRef, Mamba2ReplayCacheRef, ReplayCursors
        self.spec, self.num_slots = spec, int(num_slots)
        self.cursors = ReplayCursors(num_slots, window, max_verify, mode)
        s = spec
        if s.family == MAMBA2:
            self.caches = [Mamba2ReplayCacheRef(num_slots, s.heads, s.head_dim, s.state_dim, s.key_heads, window,
                                                max_verify, mode, cursors=self.cursors) for _ in s.ssm_layers]
        else:
            self.caches = [GdnReplayCacheRef(num_slots, s.key_heads, s.heads, s.state_dim, s.head_dim, window,
                                             max_verify, mode, cursors=self.cursors) for _ in s.ssm_layers]
        self._admitted_len = torch.zeros(num_slots, dtype=torch.int64)

    def reset(self, slots: Sequence[int], prefill_state: Optional[torch.Tensor] = None, phase=None) -> None:
        """``prefill_state`` as in :meth:`ConventionalReference.reset`; ``phase``: the rows' neutral records at
        admission (``None``, ``"spread"``, an int or one per slot; state/phase.py), the same in every layer."""
        idx = _slots_i64(slots)
        counts = None
        for pos, cache in enumerate(self.caches):
            pre = torch.zeros((idx.shape[0],) + tuple(cache.ckpt.shape[1:]), dtype=F64) if prefill_state is None \
                else prefill_state[pos]
            counts = cache.reset(idx, pre, phase)   # every layer's cache counts the same admissions
        _admission_counts(idx, counts, self._admitted_len)

    def load_state(self, pos: int, slots: torch.Tensor, state: torch.Tensor) -> None:
        """Layer ``pos``'s checkpoint of ``slots`` (>= 0; right after :meth:`reset`: the rings hold only the
        admission's neutral records)."""
        idx = _slots_i64(slots)
        _require_fresh_rings(self.name, self.cursors.ring_len, idx, self._admitted_len)
        for r, slot in enumerate(idx.tolist()):
            self.caches[pos]._store(f"{self.name}.load_state", slot, state[r].to(F64))

    def current_state(self, slots: Sequence[int], mixers: Sequence) -> torch.Tensor:
        """As :meth:`ConventionalReference.current_state`: each layer's checkpoint with its committed records
        folded in (the reference caches' ``committed_state``; ``mixers`` in layer order give Mamba-2's A)."""
        idx = _slots_i64(slots)
        if self.spec.family == MAMBA2:
            return torch.stack([c.committed_state(idx, m.A.cpu().to(F64)) for c, m in zip(self.caches, mixers)])
        return torch.stack([c.committed_state(idx) for c in self.caches])

    def step(self, pos: int, slots: torch.Tensor, mixer, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        sbi = _slots_i64(slots)
        i = {k: v.to("cpu") for k, v in inputs.items()}
        if self.spec.family == MAMBA2:
            return self.caches[pos].step(sbi, i["x"], i["dt_raw"], i["B"], i["C"], mixer.A.cpu(), mixer.D.cpu(),
                                         mixer.dt_bias.cpu(), i["z"])
        return self.caches[pos].step(sbi, i["q"], i["k"], i["v"], i["a"], i["b"], mixer.A_log.cpu(),
                                     mixer.dt_bias.cpu())

    def commit(self, slots: torch.Tensor, num_tokens: int, accepted: Optional[torch.Tensor] = None) -> None:
        self.cursors.commit(_slots_i64(slots), None if accepted is None else _slots_i64(accepted), num_tokens)


class ReplayKernels:
    """The ReplaySSM CUDA kernels (torch ops) over device caches for every SSM layer.

    Inputs are cast to ``act_dtype`` (bf16 by default, as served); the recurrence parameters stay fp32.
    Raises with the reasons when the kernels do not cover the spec's shape.
    """
    name = "replay-kernels"

    def __init__(self, spec: SsmMixerSpec, num_slots: int, window: int, max_verify: int = 1,
                 mode: Union[str, int] = "standard", state_dtype: torch.dtype = torch.float32,
                 act_dtype: torch.dtype = torch.bfloat16, device="cuda"):
        errs = spec.kernel_support_errors()
        if errs:
            raise ValueError(f"ReplayKernels: the CUDA kernels do not cover this {spec.model_type} mixer: "
                             + "; ".join(errs))
        self.spec, self.num_slots = spec, int(num_slots)
        self.act_dtype, self.device = act_dtype, torch.device(device)
        s, nl = spec, len(spec.ssm_layers)
        if s.family == MAMBA2:
            from ..ops.state_cache import ReplayStateCache
            self.cache = ReplayStateCache(nl, num_slots, s.heads, s.head_dim, s.state_dim, s.key_heads, window,
                                          max_verify, mode, state_dtype, act_dtype, device)
        else:
            from ..ops.gdn import GdnReplayStateCache
            self.cache = GdnReplayStateCache(nl, num_slots, s.key_heads, s.heads, s.state_dim, s.head_dim, window,
                                             max_verify, mode, state_dtype, act_dtype, torch.float16, device)
        self._admitted_len = torch.zeros(num_slots, dtype=torch.int64)

    def reset(self, slots: Sequence[int], prefill_state: Optional[torch.Tensor] = None, phase=None) -> None:
        """As :meth:`ReplayReference.reset` (``phase``: neutral records at admission, written on the device)."""
        idx = _slots_i64(slots)
        c = self.cache
        if prefill_state is None:
            prefill_state = torch.zeros((c.ckpt.shape[0], idx.shape[0]) + tuple(c.ckpt.shape[2:]),
                                        dtype=c.state_dtype, device=self.device)
        _admission_counts(idx, c.reset(idx, prefill_state, phase), self._admitted_len)

    def load_state(self, pos: int, slots: torch.Tensor, state: torch.Tensor) -> None:
        """Layer ``pos``'s checkpoint of fresh ``slots`` (>= 0; right after :meth:`reset`), cast to the cache's
        state dtype on the device."""
        idx = _slots_i64(slots)
        _require_fresh_rings(self.name, self.cache.ring_len.cpu(), idx, self._admitted_len)
        c = self.cache
        c.ckpt[pos, idx.to(self.device)] = state.to(device=self.device, dtype=c.state_dtype)

    def prefill_recurrence(self, pos: int, slots: torch.Tensor, mixer, inputs: Mapping[str, torch.Tensor]
                           ) -> torch.Tensor:
        """The prompt's recurrence for fresh ``slots`` (rings empty but for their admission's neutral records), on
        the device: the conventional kernels
        (``mamba2_decode`` / ``gdn_decode``) applied in place to the layer's checkpoint rows,
        ``PREFILL_TOKENS_PER_LAUNCH`` tokens per launch. Returns the outputs ``[n, P, ...]`` (Mamba-2: gated, with
        the D skip)."""
        idx = _slots_i64(slots)
        _require_fresh_rings(self.name, self.cache.ring_len.cpu(), idx, self._admitted_len)
        sbi = idx.to(device=self.device, dtype=torch.int32)
        ckpt = self.cache.ckpt[pos]
        first = next(iter(inputs.values()))
        P = int(first.shape[1])
        i = self._acts(inputs)
        if self.spec.family == MAMBA2:
            dt_raw = inputs["dt_raw"].to(device=self.device, dtype=torch.float32)
            A, D, bias = (t.to(self.device) for t in (mixer.A, mixer.D, mixer.dt_bias))
        else:
            A_log, bias = mixer.A_log.to(self.device), mixer.dt_bias.to(self.device)
        ys = []
        for t0 in range(0, P, PREFILL_TOKENS_PER_LAUNCH):
            sl = slice(t0, t0 + PREFILL_TOKENS_PER_LAUNCH)
            if self.spec.family == MAMBA2:
                ys.append(torch.ops.replayssm.mamba2_decode(
                    ckpt, i["x"][:, sl].contiguous(), dt_raw[:, sl].contiguous(), i["B"][:, sl].contiguous(),
                    i["C"][:, sl].contiguous(), A, D, bias, i["z"][:, sl].contiguous(), sbi, None))
            else:
                from ..ops.gdn import gdn_decode
                ys.append(gdn_decode(ckpt, sbi, *(i[k][:, sl].contiguous() for k in ("q", "k", "v", "a", "b")),
                                     A_log, bias))
        return torch.cat(ys, 1)

    def _acts(self, inputs: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """The family's activation inputs in act_dtype on the device (dt_raw stays fp32; GDN's gate z is the
        mixer's, not the kernels')."""
        return {k: inputs[k].to(device=self.device, dtype=self.act_dtype).contiguous()
                for k in (_M2_ACTS if self.spec.family == MAMBA2 else _GDN_ACTS)}

    def step(self, pos: int, slots: torch.Tensor, mixer, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        sbi = torch.as_tensor(slots).to(device=self.device, dtype=torch.int32).contiguous()
        i = self._acts(inputs)
        if self.spec.family == MAMBA2:
            dt_raw = inputs["dt_raw"].to(device=self.device, dtype=torch.float32).contiguous()
            return self.cache.step(pos, sbi, i["x"], dt_raw, i["B"], i["C"], mixer.A.to(self.device),
                                   mixer.D.to(self.device), mixer.dt_bias.to(self.device), i["z"])
        return self.cache.step(pos, sbi, i["q"], i["k"], i["v"], i["a"], i["b"], mixer.A_log.to(self.device),
                               mixer.dt_bias.to(self.device))

    def current_state(self, slots: Sequence[int], mixers: Sequence) -> torch.Tensor:
        """As :meth:`ConventionalReference.current_state`, fp32 on the device (the caches' ``current_state``:
        checkpoints with the committed records folded in, ops/ring_fold.py)."""
        idx = _slots_i64(slots)
        if self.spec.family == MAMBA2:
            return self.cache.current_state(idx, torch.stack([m.A.to(self.device) for m in mixers]))
        return self.cache.current_state(idx)

    def commit(self, slots: torch.Tensor, num_tokens: int, accepted: Optional[torch.Tensor] = None) -> None:
        sbi = torch.as_tensor(slots).to(device=self.device, dtype=torch.int32).contiguous()
        acc = None if accepted is None else \
            torch.as_tensor(accepted).to(device=self.device, dtype=torch.int32).contiguous()
        self.cache.commit(acc, sbi, num_tokens)


def make_backend(name: str, spec: SsmMixerSpec, num_slots: int, window: int = 16, max_verify: int = 1,
                 act_dtype: torch.dtype = torch.bfloat16, device=None):
    """A backend by name (``BACKENDS``); speculative mode when ``max_verify`` > 1. ``device`` and
    ``act_dtype`` apply to the kernels backend (default CUDA)."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {name!r}")
    mode = "standard" if max_verify == 1 else "speculative"
    if name == "conventional-reference":
        return ConventionalReference(spec, num_slots, max_verify)
    if name == "replay-reference":
        return ReplayReference(spec, num_slots, window, max_verify, mode)
    return ReplayKernels(spec, num_slots, window, max_verify, mode, act_dtype=act_dtype,
                         device="cuda" if device is None else device)


def check_admission_phase(op: str, phase):
    """``phase`` for :class:`SsmDecoder`: None, ``"spread"`` or an int >= 0 (its upper bound, L - 1, is the replay
    cache's check at reset); returned unchanged."""
    if phase is None or (isinstance(phase, str) and phase == "spread"):
        return phase
    if isinstance(phase, int) and not isinstance(phase, bool) and phase >= 0:
        return phase
    raise ValueError(f"{op}: 'admission_phase' must be None, 'spread' or an int >= 0 (neutral records per admitted "
                     f"row); got {phase!r}")


def mixer_placement(backend: str, device=None, dtype: Optional[torch.dtype] = None):
    """Where and in what the mixers' arithmetic runs: given, or CPU float64 for the references and CUDA
    float32 for the kernels."""
    kernels = backend == "replay-kernels"
    return (torch.device(device if device is not None else ("cuda" if kernels else "cpu")),
            dtype if dtype is not None else (torch.float32 if kernels else torch.float64))


class SsmDecoder:
    """The SSM mixers of one model over one recurrence backend, with a conv history per layer.

    Args:
        mixers: ``{model layer index: mixer}`` for every SSM layer of ``spec`` (``models.make_mixer``).
        backend: :class:`ConventionalReference`, :class:`ReplayReference` or :class:`ReplayKernels`
            built for the same spec (its ``num_slots`` is the decoder's).
        admission_phase: the replay caches' flush phase for the rows of each :meth:`reset` (state/phase.py):
            ``"spread"`` (the default) starts rows admitted together, in one call or one call at a time, at
            consecutive phases, so that they do not all flush on the same step (a batch admitted at once would
            otherwise pay an all-rows flush step, ~2.8x a non-flush step's layer time at B = 256, every L steps);
            an int starts every row with that many neutral records (0 <= d < L); None is the paper's ``h = 0``.
            Outputs are the same up to the rounding of the earlier flush; it costs at most one extra flush per
            request. Ignored by the conventional backend.

    Per model step: :meth:`step` for each SSM layer in model order (the other layers are the caller's),
    then :meth:`commit` once with the accepted counts (speculative) or None.
    """

    def __init__(self, spec: SsmMixerSpec, mixers: Mapping[int, Union[Mamba2Mixer, GatedDeltaNetMixer]], backend,
                 admission_phase: Union[None, str, int] = "spread"):
        self.admission_phase = check_admission_phase("SsmDecoder", admission_phase)
        missing = [i for i in spec.ssm_layers if i not in mixers]
        if missing:
            raise ValueError(f"SsmDecoder: no mixer for the SSM layers {missing}")
        if backend.spec.ssm_layers != spec.ssm_layers or backend.spec.family != spec.family:
            raise ValueError(f"SsmDecoder: the backend was built for {backend.spec.family} layers "
                             f"{list(backend.spec.ssm_layers)}, the mixers are {spec.family} layers "
                             f"{list(spec.ssm_layers)}")
        num_slots = backend.num_slots
        self.spec, self.backend, self.num_slots = spec, backend, num_slots
        self.pos = {layer: p for p, layer in enumerate(spec.ssm_layers)}
        self.mixers = dict(mixers)
        self.conv = {layer: m.new_conv_state(num_slots) for layer, m in self.mixers.items()}
        self._step_slots: Optional[torch.Tensor] = None
        self._step_T: Optional[int] = None
        self._stepped: set = set()
        self._fresh: set = set()          # slots reset and not yet decoded (a prompt may be prefilled)
        self._prefilled: set = set()      # (layer, slot) prefilled since the slot's reset

    def reset(self, slots: Sequence[int]) -> None:
        """Start new requests in ``slots`` (negative entries skipped): zero state, zero conv history, the rows'
        admission phase (``admission_phase``); then :meth:`prefill` a prompt, or decode from nothing."""
        if self._step_slots is not None:
            raise ValueError("SsmDecoder.reset: a decode step is open; commit() it first")
        slots = [int(i) for i in slots]
        for c in self.conv.values():
            c.reset(slots)
        self.backend.reset(slots, phase=self.admission_phase)
        idx = [int(i) for i in slots if int(i) >= 0]
        self._fresh.update(idx)
        self._prefilled = {(l, s) for (l, s) in self._prefilled if s not in idx}

    def prefill(self, layer: int, hidden: torch.Tensor, slots) -> torch.Tensor:
        """Run a prompt through model layer ``layer`` for new requests and load the resulting state.

        ``hidden`` ``[n, P, hidden_size]`` (the layer's normalized input over the whole prompt), ``slots``
        ``[n]`` (>= 0, reset and not yet decoded). Returns the mixer output ``[n, P, hidden_size]``. Call it for
        every SSM layer in model order (each layer's input depends on the layers before), then decode.

        With the float64 backends the recurrence runs in float64 on the CPU, token by token (the conventional
        reference); with the kernels backend it runs on the device through the conventional kernels, in place on
        the checkpoint rows. Either is a correct prefill for tests, examples and checks, not a fast one: serving
        frameworks prefill with their chunked kernels and hand the state over (``replay_import``,
        docs/engine-integration.md).
        """
        if layer not in self.pos:
            raise ValueError(f"SsmDecoder.prefill: layer {layer} is not an SSM layer; SSM layers: "
                             f"{list(self.spec.ssm_layers)}")
        slots_t = torch.as_tensor(slots).reshape(-1)
        if bool((slots_t < 0).any()):
            raise ValueError(f"SsmDecoder.prefill: every row needs a slot (>= 0); got {slots_t.tolist()}")
        if hidden.dim() != 3 or hidden.shape[0] != slots_t.shape[0] or hidden.shape[2] != self.spec.hidden_size:
            raise ValueError(f"SsmDecoder.prefill: 'hidden' must be [n={slots_t.shape[0]}, prompt length, "
                             f"{self.spec.hidden_size}]; got {list(hidden.shape)}")
        if self._step_slots is not None:
            raise ValueError("SsmDecoder.prefill: a decode step is open; commit() it first")
        stale = [int(i) for i in slots_t.tolist() if int(i) not in self._fresh]
        again = [int(i) for i in slots_t.tolist() if (layer, int(i)) in self._prefilled]
        if stale or again:
            raise ValueError(f"SsmDecoder.prefill: slots {stale or again} "
                             + ("decoded since their reset()" if stale else f"already prefilled layer {layer}")
                             + "; a prompt is prefilled once per layer, right after reset()")
        mixer, conv = self.mixers[layer], self.conv[layer]
        inputs = mixer.inputs(hidden, slots_t, conv)
        conv.commit()                                      # history = the prompt's last kernel - 1 inputs
        y = self.backend.prefill_recurrence(self.pos[layer], slots_t, mixer, inputs)
        self._prefilled.update((layer, int(i)) for i in slots_t.tolist())
        return self._output(mixer, y, inputs)

    def step(self, layer: int, hidden: torch.Tensor, slots) -> torch.Tensor:
        """Mixer output ``[B, T, hidden_size]`` of model layer ``layer`` for ``hidden`` ``[B, T, hidden_size]``
        (the layer's normalized input), rows in ``slots`` ``[B]`` (negative = padding)."""
        if layer not in self.pos:
            raise ValueError(f"SsmDecoder.step: layer {layer} is not an SSM layer; SSM layers: "
                             f"{list(self.spec.ssm_layers)}")
        slots_t = torch.as_tensor(slots).reshape(-1)
        if hidden.dim() != 3 or hidden.shape[0] != slots_t.shape[0] or hidden.shape[2] != self.spec.hidden_size:
            raise ValueError(f"SsmDecoder.step: 'hidden' must be [B={slots_t.shape[0]}, T, "
                             f"{self.spec.hidden_size}]; got {list(hidden.shape)}")
        if self._step_T is not None and self._step_T != hidden.shape[1]:
            raise ValueError(f"SsmDecoder.step: T={hidden.shape[1]} differs from this step's T={self._step_T}")
        if self._step_slots is not None and not torch.equal(self._step_slots, slots_t):
            raise ValueError(f"SsmDecoder.step: layer {layer} got slots {slots_t.tolist()}, this step's earlier "
                             f"layers {self._step_slots.tolist()}")
        if layer in self._stepped:
            raise ValueError(f"SsmDecoder.step: layer {layer} already stepped in this model step; call commit() "
                             f"first")
        mixer = self.mixers[layer]
        inputs = mixer.inputs(hidden, slots_t, self.conv[layer])
        out = self._output(mixer, self.backend.step(self.pos[layer], slots_t, mixer, inputs), inputs)
        pad = (slots_t < 0).to(out.device)
        self._step_slots, self._step_T = slots_t, int(hidden.shape[1])
        self._stepped.add(layer)
        self._fresh.difference_update(int(i) for i in slots_t.tolist())
        return out.masked_fill(pad[:, None, None], 0.0)

    def export_requests(self, slots: Sequence[int]) -> "RequestStates":
        """What the requests in ``slots`` need to resume elsewhere: every SSM layer's recurrent state after the
        committed tokens (the replay backends fold their committed ring records into the checkpoint) and its causal
        conv history. Nothing here changes. For preemption (swap out, :meth:`import_requests` later), moving a
        request to another slot or decoder, or a prefix snapshot. Between steps only (after :meth:`commit`)."""
        if self._step_slots is not None:
            raise ValueError("SsmDecoder.export_requests: a decode step is open; commit() it first")
        idx = [int(i) for i in slots]
        bad = [i for i in idx if not 0 <= i < self.num_slots]
        if bad:
            raise ValueError(f"SsmDecoder.export_requests: slots must be in [0, {self.num_slots}); got {bad}")
        layers = list(self.spec.ssm_layers)
        ssm = self.backend.current_state(idx, [self.mixers[l] for l in layers])
        conv = {l: self.conv[l].history[torch.as_tensor(idx, dtype=torch.long, device=self.conv[l].history.device)]
                .clone() for l in layers}
        return RequestStates(self.spec.family, tuple(layers), ssm, conv)

    def import_requests(self, slots: Sequence[int], states: "RequestStates") -> None:
        """Start the requests of :meth:`export_requests` (from this decoder or another of the same model and
        backend kind) in ``slots``: a :meth:`reset` (admission phase included), then their states as checkpoints
        and their conv histories; decode on with :meth:`step`. No :meth:`prefill` afterwards."""
        idx = [int(i) for i in slots]
        if states.family != self.spec.family or states.layers != tuple(self.spec.ssm_layers):
            raise ValueError(f"SsmDecoder.import_requests: the states are of {states.family} layers "
                             f"{list(states.layers)}; this decoder has {self.spec.family} layers "
                             f"{list(self.spec.ssm_layers)}")
        if int(states.ssm.shape[1]) != len(idx) or any(i < 0 for i in idx):
            raise ValueError(f"SsmDecoder.import_requests: one slot (>= 0) per exported request "
                             f"({int(states.ssm.shape[1])}); got {idx}")
        self.reset(idx)
        slots_t = torch.as_tensor(idx, dtype=torch.long)
        for layer, pos in self.pos.items():
            self.backend.load_state(pos, slots_t, states.ssm[pos])
            self.conv[layer].reset(idx, states.conv[layer])
        self._fresh.difference_update(idx)          # resumed, not new: no prompt to prefill

    def _output(self, mixer, y: torch.Tensor, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The mixer's output from the recurrence output (Mamba-2's is gated already; GDN gates with z here)."""
        y = y.to(mixer.device)
        return mixer.output(y) if self.spec.family == MAMBA2 else mixer.output(y, inputs["z"])

    def commit(self, accepted: Optional[torch.Tensor] = None) -> None:
        """Advance every layer's conv history and recurrent state by ``accepted`` ``[B]`` tokens per row
        (None: all T). Call once per model step, after every SSM layer stepped."""
        if self._step_slots is None:
            raise ValueError("SsmDecoder.commit: no step ran since the last commit")
        missing = [i for i in self.spec.ssm_layers if i not in self._stepped]
        if missing:
            # the cursors are shared: committing would advance them over records these layers never wrote
            raise ValueError(f"SsmDecoder.commit: SSM layers {missing} did not step in this model step; every SSM "
                             f"layer steps once per model step")
        for c in self.conv.values():
            c.commit(accepted)
        self.backend.commit(self._step_slots, self._step_T, accepted)
        self._step_slots, self._step_T = None, None
        self._stepped = set()


@dataclass
class RequestStates:
    """Requests taken out of a decoder (:meth:`SsmDecoder.export_requests`): ``ssm`` ``[num_ssm_layers, n, ...]``
    (the family's state layout, after the committed tokens), ``conv`` ``{model layer: [n, channels, kernel - 1]}``
    (the causal conv history, oldest first)."""
    family: str
    layers: Tuple[int, ...]
    ssm: torch.Tensor
    conv: Dict[int, torch.Tensor]

    def to(self, device) -> "RequestStates":
        """A copy on ``device`` (e.g. "cpu" to swap requests out of GPU memory)."""
        return RequestStates(self.family, self.layers, self.ssm.to(device),
                             {k: v.to(device) for k, v in self.conv.items()})
