"""``torch.ops.replayssm.replay_admit``: rows admitted into the replay caches with a flush phase, on the device.

A row admitted with phase d gets d neutral records at ring indices 0 .. d - 1 and cursors ``o = 0, h = d``
(state/phase.py says why and what a neutral record is; design.md 3.3). One launch covers every ring tensor of the
caller (each ``[layers, S, C, ...]``) and the cursors, for a list of slots, without a host sync: what
``start_requests`` / ``reset`` run on CUDA tensors (the Python form, ``state.phase.write_neutral_records`` plus the
cursor writes, stays for CPU tensors and for the float64 reference). C ABI: ``cpp_plugins/kernels/replay_commit/
replay_admit.h``.

Phase modes: ``PHASE_NONE`` (d = 0), ``PHASE_CONSTANT`` (d = ``phase``), ``PHASE_SPREAD`` (row i: d = (``phase`` +
i) % L), ``PHASE_PER_ROW`` (d = ``phases[i]``; a value outside [0, L - 1] is reported in ``error_slot`` and its row
left untouched, checked on the device). Slots < 0 are skipped; a slot >= S, and a slot an earlier entry already names
(the first entry is admitted, the later one left out), are reported in ``error_slot`` too.
"""
from __future__ import annotations

import ctypes
import functools
from typing import List, Optional, Sequence

import torch

from ..state.phase import NEUTRAL_RECORD, admission_phases, write_neutral_records
from ._lib import c_launcher, launch_on_current_stream

__all__ = ["replay_admit", "ring_fill_pattern", "admit_rows", "PHASE_NONE", "PHASE_CONSTANT", "PHASE_SPREAD",
           "PHASE_PER_ROW", "MAX_RINGS"]

PHASE_NONE, PHASE_CONSTANT, PHASE_SPREAD, PHASE_PER_ROW = 0, 1, 2, 3
MAX_RINGS = 8


class ReplayAdmitRing(ctypes.Structure):
    """ctypes mirror of ``ReplayAdmitRing`` (replay_admit.h)."""
    _fields_ = [
        ("base", ctypes.c_void_p),
        ("layer_stride", ctypes.c_int64),
        ("slot_stride", ctypes.c_int64),
        ("record_bytes", ctypes.c_int32),
        ("num_layers", ctypes.c_int32),
        ("fill", ctypes.c_uint32),
    ]


class ReplayAdmitParams(ctypes.Structure):
    """ctypes mirror of ``ReplayAdmitParams`` (replay_admit.h)."""
    _fields_ = [
        ("num_rows", ctypes.c_int32),
        ("num_slots", ctypes.c_int32),
        ("window", ctypes.c_int32),
        ("ring_capacity", ctypes.c_int32),
        ("phase_mode", ctypes.c_int32),
        ("phase", ctypes.c_int32),
        ("num_rings", ctypes.c_int32),
        ("slots", ctypes.c_void_p),
        ("phases", ctypes.c_void_p),
        ("ring_origin", ctypes.c_void_p),
        ("ring_len", ctypes.c_void_p),
        ("error_slot", ctypes.c_void_p),
        ("rings", ReplayAdmitRing * MAX_RINGS),
    ]


def _get_launcher():
    """``rssm_replay_admit_launch`` with its ctypes signature (bound once)."""
    return c_launcher("rssm_replay_admit_launch", ReplayAdmitParams)


def _desc(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(type(t).__name__)
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)} on {t.device}"


def _check_fill_dtype(op: str, name: str, dtype: torch.dtype) -> None:
    """The admission writes a ring's neutral record as repeated 32-bit words: 2- and 4-byte dtypes only."""
    if dtype.itemsize not in (2, 4):
        raise ValueError(f"{op}: ring '{name}' has dtype {str(dtype).replace('torch.', '')}; the admission fills 2- or "
                         f"4-byte records only")


def ring_fill_pattern(op: str, name: str, dtype: torch.dtype, value: float) -> int:
    """The 32-bit pattern of ``value`` in ``dtype`` repeated (4-byte dtypes: the value's bits; 2-byte: two copies)."""
    _check_fill_dtype(op, name, dtype)
    return _fill_bits(dtype, float(value))


@functools.lru_cache(maxsize=None)
def _fill_bits(dtype: torch.dtype, value: float) -> int:
    """Cached: ``start_requests`` admits every step, with the same few (dtype, value) pairs."""
    t = torch.tensor([value], dtype=dtype)
    if t.element_size() == 4:
        return int(t.view(torch.int32).item()) & 0xFFFFFFFF
    bits = int(t.view(torch.int16).item()) & 0xFFFF
    return bits | (bits << 16)


def validate_admit_args(slots, ring_origin, ring_len, error_slot, rings: Sequence[torch.Tensor], fills, window: int,
                        ring_capacity: int, phase_mode: int, phase: int, phases) -> None:
    """Host-side checks (no device sync); raises ValueError naming the argument."""
    op = "replay_admit"
    if not isinstance(ring_len, torch.Tensor):
        raise ValueError(f"{op}: 'ring_len' must be a tensor; got {_desc(ring_len)}")
    dev = ring_len.device
    S = ring_len.shape[0] if ring_len.dim() == 1 else -1
    for name, t, length in (("ring_len", ring_len, S), ("ring_origin", ring_origin, S), ("slots", slots, None),
                            ("error_slot", error_slot, 1)):
        if t is None and name == "error_slot":
            continue
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int32 or t.dim() != 1 or not t.is_contiguous() \
                or t.device != dev or (length is not None and t.shape[0] != length):
            want = f"[{length}]" if length is not None else "[n]"
            raise ValueError(f"{op}: '{name}' must be a contiguous int32 {want} on {dev}; got {_desc(t)}")
    if window < 1 or ring_capacity < window:
        raise ValueError(f"{op}: need window >= 1 and ring_capacity >= window; got window={window}, "
                         f"ring_capacity={ring_capacity}")
    if phase_mode not in (PHASE_NONE, PHASE_CONSTANT, PHASE_SPREAD, PHASE_PER_ROW):
        raise ValueError(f"{op}: phase_mode must be 0 (none), 1 (constant), 2 (spread) or 3 (per row); got "
                         f"{phase_mode}")
    if phase_mode == PHASE_CONSTANT and not 0 <= phase <= window - 1:
        raise ValueError(f"{op}: phase must be in [0, L - 1 = {window - 1}]; got {phase}")
    if phase_mode == PHASE_SPREAD and phase < 0:
        raise ValueError(f"{op}: the spread start (phase) must be >= 0; got {phase}")
    if phase_mode == PHASE_PER_ROW:
        n = slots.shape[0]
        if not isinstance(phases, torch.Tensor) or phases.dtype != torch.int32 or phases.dim() != 1 \
                or phases.shape[0] != n or not phases.is_contiguous() or phases.device != dev:
            raise ValueError(f"{op}: 'phases' must be a contiguous int32 [{n}] on {dev} with per-row phases; got "
                             f"{_desc(phases)}")
    if len(rings) > MAX_RINGS or len(fills) != len(rings):
        raise ValueError(f"{op}: at most {MAX_RINGS} rings with one fill value each; got {len(rings)} rings, "
                         f"{len(fills)} fills")
    for i, r in enumerate(rings):
        ok = isinstance(r, torch.Tensor) and r.dim() >= 4 and r.device == dev and r.is_contiguous() \
            and r.shape[1] == S and r.shape[2] == ring_capacity
        if not ok:
            raise ValueError(f"{op}: rings[{i}] must be a contiguous [layers, S={S}, C={ring_capacity}, ...] tensor "
                             f"on {dev}; got {_desc(r)}")
        rec = r[0, 0, 0].numel() * r.element_size()
        if rec % 4:
            raise ValueError(f"{op}: rings[{i}]: a record must be a multiple of 4 bytes; got {rec} ({_desc(r)})")
        _check_fill_dtype(op, f"rings[{i}]", r.dtype)


@torch.library.custom_op("replayssm::replay_admit", mutates_args=("ring_origin", "ring_len", "error_slot", "rings"))
def replay_admit(slots: torch.Tensor, ring_origin: torch.Tensor, ring_len: torch.Tensor,
                 error_slot: Optional[torch.Tensor], rings: List[torch.Tensor], fills: List[float], window: int,
                 ring_capacity: int, phase_mode: int, phase: int, phases: Optional[torch.Tensor]) -> None:
    """Admit ``slots`` (int32 [n], < 0 skipped) with a flush phase: neutral records in each of ``rings`` (fill value
    per ring) and cursors ``o = 0, h = d`` (module doc)."""
    validate_admit_args(slots, ring_origin, ring_len, error_slot, rings, fills, window, ring_capacity, phase_mode,
                        phase, phases)
    if ring_len.device.type != "cuda":
        raise ValueError(f"replay_admit: tensors must be on a CUDA device; got {ring_len.device}")
    p = ReplayAdmitParams()
    p.num_rows = slots.shape[0]
    p.num_slots = ring_len.shape[0]
    p.window = window
    p.ring_capacity = ring_capacity
    p.phase_mode = phase_mode
    p.phase = phase
    p.num_rings = len(rings)
    p.slots = slots.data_ptr()
    p.phases = phases.data_ptr() if phases is not None else None
    p.ring_origin = ring_origin.data_ptr()
    p.ring_len = ring_len.data_ptr()
    p.error_slot = error_slot.data_ptr() if error_slot is not None else None
    for i, (r, v) in enumerate(zip(rings, fills)):
        es = r.element_size()
        g = p.rings[i]
        g.base = r.data_ptr()
        g.layer_stride = r.stride(0) * es
        g.slot_stride = r.stride(1) * es
        g.record_bytes = r[0, 0, 0].numel() * es
        g.num_layers = r.shape[0]
        g.fill = ring_fill_pattern("replay_admit", f"rings[{i}]", r.dtype, v)
    launch_on_current_stream(_get_launcher(), p, ring_len.device, "replay_admit")


@replay_admit.register_fake
def _replay_admit_fake(slots, ring_origin, ring_len, error_slot, rings, fills, window, ring_capacity, phase_mode,
                       phase, phases) -> None:
    return None


def admit_rows(op: str, cache, family: str, slots: torch.Tensor, phase, start: int) -> Optional[list]:
    """What a cache's ``reset`` / a drop-in's ``start_requests`` does for ``slots`` (int64 on the cache's device)
    and ``phase`` (state/phase.py: None, "spread" from ``start``, an int, one int per slot as a list or a tensor):
    neutral records into the cache's rings named in ``state.phase.NEUTRAL_RECORD[family]`` (layer-leading
    ``[layers, S, C, ...]`` tensors) and the cursors. CUDA: one ``replay_admit`` launch, no host sync (a per-slot
    tensor on the device is range-checked by the kernel into ``cache.error_slot``). CPU: the Python form. Returns
    the per-slot counts when they are known on the host (None without a phase, or for a device tensor of phases)."""
    n = int(slots.shape[0])
    device_phases = isinstance(phase, torch.Tensor) and phase.device.type == "cuda"
    if device_phases:
        if phase.dim() != 1 or phase.shape[0] != n or phase.dtype.is_floating_point or phase.dtype == torch.bool:
            raise ValueError(f"{op}: 'phase' given per slot must be {n} integers (one per slot); got {_desc(phase)}")
        counts = None
    else:
        counts = admission_phases(op, phase, n, cache.window, start)   # host values: checked here
    if cache.ring_len.device.type != "cuda":
        if device_phases:
            raise ValueError(f"{op}: 'phase' on {phase.device}, the cache on {cache.ring_len.device}")
        if counts is not None:
            write_neutral_records(family, cache, slots.tolist(), counts, 1)
        cache.reset_cursors(slots, counts)
        return counts
    rings, fills = [], []
    for name, fill in NEUTRAL_RECORD[family].items():
        t = getattr(cache, name, None)
        if t is not None:
            rings.append(t)
            fills.append(float(fill))
    s32 = slots.to(device=cache.ring_len.device, dtype=torch.int32).contiguous()
    mode, ph, arr = PHASE_NONE, 0, None
    if device_phases:
        mode, arr = PHASE_PER_ROW, phase.to(device=cache.ring_len.device, dtype=torch.int32).contiguous()
    elif isinstance(phase, str):
        mode, ph = PHASE_SPREAD, int(start) % cache.window   # (start + i) % L: the same phases, no int32 overflow
    elif isinstance(phase, int):
        mode, ph = PHASE_CONSTANT, int(phase)
    elif counts is not None:
        mode = PHASE_PER_ROW
        arr = torch.tensor(counts, dtype=torch.int32).to(cache.ring_len.device, non_blocking=False)
    torch.ops.replayssm.replay_admit(s32, cache.ring_origin, cache.ring_len, cache.error_slot, rings, fills,
                                     cache.window, cache.capacity, mode, ph, arr)
    return counts
