"""``torch.ops.replayssm.replay_commit``: the device cursor commit of design.md section 3.2 / 6.

One launch per model step, after all layers (cursors are per slot and shared by all layers)::

    standard:    if h + 1 == L: o = (o + h + 1) % C; h = 0   else: h = h + 1
    speculative: if h + T >  L: o = (o + h) % C;     h = 0;   then h = h + a

Rows with broken invariants are left untouched and their slot is recorded in ``error_slot[0]``
(if still -1); read it whenever convenient (reading it syncs).
"""
from __future__ import annotations

import ctypes
from typing import Optional

import torch

from ._lib import c_launcher, launch_on_current_stream

__all__ = ["ReplayCommitParams", "replay_commit", "MODE_STANDARD", "MODE_SPECULATIVE", "mode_code"]

MODE_STANDARD = 0
MODE_SPECULATIVE = 1


def mode_code(mode, op: str = "replay") -> int:
    """Accepts 0/1, 'standard'/'speculative' (also 'std'/'spec')."""
    if isinstance(mode, str):
        m = mode.lower()
        if m in ("standard", "std"):
            return MODE_STANDARD
        if m in ("speculative", "spec"):
            return MODE_SPECULATIVE
    elif isinstance(mode, int) and not isinstance(mode, bool) and mode in (0, 1):
        return int(mode)
    raise ValueError(f"{op}: mode must be 0 (standard) or 1 (speculative); got {mode!r}")


class ReplayCommitParams(ctypes.Structure):
    """ctypes mirror of ``ReplayCommitParams`` (cpp_plugins/kernels/replay_commit/replay_commit.h)."""
    _fields_ = [
        ("batch", ctypes.c_int32),
        ("num_slots", ctypes.c_int32),
        ("window", ctypes.c_int32),
        ("ring_capacity", ctypes.c_int32),
        ("num_tokens", ctypes.c_int32),
        ("mode", ctypes.c_int32),
        ("state_batch_indices", ctypes.c_void_p),
        ("accepted", ctypes.c_void_p),
        ("ring_origin", ctypes.c_void_p),
        ("ring_len", ctypes.c_void_p),
        ("error_slot", ctypes.c_void_p),
    ]


def _get_launcher():
    return c_launcher("rssm_replay_commit_launch", ReplayCommitParams)


def _desc(t: torch.Tensor) -> str:
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)} on {t.device}"


def _check_int32_vector(op: str, name: str, t, length_name: str, length: Optional[int], device) -> None:
    if t is None:
        return
    if t.dtype != torch.int32 or t.dim() != 1 or (length is not None and t.shape[0] != length) \
            or not t.is_contiguous() or t.device != device:
        want = f"[{length_name}] = [{length}]" if length is not None else f"[{length_name}]"
        raise ValueError(f"{op}: '{name}' must be a contiguous int32 {want} on {device}; got {_desc(t)}")


def validate_commit_args(state_batch_indices, accepted, ring_origin, ring_len, error_slot, window: int,
                         ring_capacity: int, num_tokens: int, mode: int) -> None:
    """Host-side checks (no device sync); raises ValueError naming the argument."""
    op = "replay_commit"
    if not isinstance(ring_origin, torch.Tensor):
        raise ValueError(f"{op}: 'ring_origin' must be a tensor")
    dev = ring_origin.device
    _check_int32_vector(op, "ring_origin", ring_origin, "S", None, dev)
    S = ring_origin.shape[0]
    _check_int32_vector(op, "ring_len", ring_len, "S", S, dev)
    _check_int32_vector(op, "state_batch_indices", state_batch_indices, "B", None, dev)
    B = state_batch_indices.shape[0]
    _check_int32_vector(op, "accepted", accepted, "B", B, dev)
    _check_int32_vector(op, "error_slot", error_slot, "1", 1, dev)
    mode = mode_code(mode, op)
    if window < 1:
        raise ValueError(f"{op}: window must be >= 1; got {window}")
    if num_tokens < 1 or (mode == MODE_STANDARD and num_tokens != 1):
        raise ValueError(f"{op}: num_tokens must be {'1 in standard mode' if mode == 0 else '>= 1'}; got {num_tokens}")
    need = window if mode == MODE_STANDARD else window + num_tokens
    if ring_capacity < need:
        raise ValueError(f"{op}: ring_capacity must be >= {need}; got {ring_capacity}")
    if mode == MODE_STANDARD and accepted is not None:
        raise ValueError(f"{op}: 'accepted' must be None in standard mode")


@torch.library.custom_op("replayssm::replay_commit", mutates_args=("ring_origin", "ring_len", "error_slot"))
def replay_commit(state_batch_indices: torch.Tensor, accepted: Optional[torch.Tensor], ring_origin: torch.Tensor,
                  ring_len: torch.Tensor, error_slot: Optional[torch.Tensor], window: int, ring_capacity: int,
                  num_tokens: int, mode: int) -> None:
    """Advance the per-slot ring cursors after one model step (all layers)."""
    validate_commit_args(state_batch_indices, accepted, ring_origin, ring_len, error_slot, window, ring_capacity,
                         num_tokens, mode)
    if ring_origin.device.type != "cuda":
        raise ValueError(f"replay_commit: tensors must be on a CUDA device; got {ring_origin.device}")
    p = ReplayCommitParams()
    p.batch = state_batch_indices.shape[0]
    p.num_slots = ring_origin.shape[0]
    p.window = window
    p.ring_capacity = ring_capacity
    p.num_tokens = num_tokens
    p.mode = mode_code(mode)
    p.state_batch_indices = state_batch_indices.data_ptr()
    p.accepted = accepted.data_ptr() if accepted is not None else None
    p.ring_origin = ring_origin.data_ptr()
    p.ring_len = ring_len.data_ptr()
    p.error_slot = error_slot.data_ptr() if error_slot is not None else None
    launch_on_current_stream(_get_launcher(), p, ring_origin.device, "replay_commit")


@replay_commit.register_fake
def _replay_commit_fake(state_batch_indices, accepted, ring_origin, ring_len, error_slot, window, ring_capacity,
                        num_tokens, mode) -> None:
    return None
