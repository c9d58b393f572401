"""``torch.ops.replayssm.replay_import``: copy prefill states into the ReplaySSM checkpoint pool.

The context-phase bridge of docs/engine-integration.md: after a request's prefill, its final state
sits in the serving engine's state pool (TensorRT-LLM engine path: ``rnn_state_ptr_{i}``, Mamba-2
layout ``[S, H, N, P]``). One launch per layer copies it for a list of (source slot, destination
slot) pairs into the checkpoint ``[S, H, R, Q]`` (Mamba-2 ``[H, P, N]``, GDN ``[HV, V, K]``),
transposing the last two dims when ``transposed`` (source ``[S_src, H, Q, R]``), casting with round
to nearest even, and with ``ring_origin``/``ring_len`` given, resetting the slot's cursors (empty
ring). Stream-ordered, no host sync, CUDA-graph safe. Destination slots < 0 are skipped; pairs out
of range, and rows whose destination slot an earlier row already names (the first is imported), are
skipped and the destination slot is recorded in ``error_slot[0]`` (if still -1).

Dual-precision checkpoints: import the recurrence copy with this op, then run the dual-precision
flush with an empty ring to write the read copy.
"""
from __future__ import annotations

import ctypes
from typing import Optional

import torch

from ._lib import c_launcher, launch_on_current_stream

__all__ = ["ReplayImportParams", "replay_import", "validate_import_args", "import_reference"]

_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


class ReplayImportParams(ctypes.Structure):
    """ctypes mirror of ``ReplayImportParams`` (cpp_plugins/kernels/replay_import/replay_import.h)."""
    _fields_ = ([(n, ctypes.c_int32) for n in ("num_rows", "num_heads", "dim_r", "dim_q", "src_num_slots",
                                                "dst_num_slots", "src_dtype", "dst_dtype", "src_transposed",
                                                "reset_cursors")]
                + [(n, ctypes.c_int64) for n in ("src_stride_slot", "src_stride_head", "src_stride_a", "src_stride_b",
                                                 "dst_stride_slot", "dst_stride_head", "dst_stride_r")]
                + [(n, ctypes.c_void_p) for n in ("src_slots", "dst_slots", "src", "dst", "ring_origin", "ring_len",
                                                  "error_slot")])


def _get_launcher():  # an older library without it raises KernelLibraryError naming the launcher
    return c_launcher("rssm_replay_import_launch", ReplayImportParams)


def _desc(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(type(t).__name__)
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)} on {t.device}"


def validate_import_args(src, src_slots, dst, dst_slots, ring_origin, ring_len, error_slot, transposed: bool) -> None:
    """Host-side checks (no device sync); raises ValueError naming the argument, what was expected
    and what was got."""
    op = "replay_import"
    if not isinstance(dst, torch.Tensor) or dst.dim() != 4 or dst.dtype not in _DTYPE or dst.stride(-1) != 1:
        raise ValueError(f"{op}: 'dst' must be a fp32/fp16/bf16 checkpoint [S, H, R, Q] with a contiguous last dim; "
                         f"got {_desc(dst)}")
    S, H, R, Q = dst.shape
    dev = dst.device
    want = (H, Q, R) if transposed else (H, R, Q)
    if not isinstance(src, torch.Tensor) or src.dim() != 4 or src.dtype not in _DTYPE or tuple(src.shape[1:]) != want \
            or src.device != dev:
        lay = "[S_src, H, Q, R]" if transposed else "[S_src, H, R, Q]"
        raise ValueError(f"{op}: 'src' must be a fp32/fp16/bf16 {lay} = [S_src, {', '.join(map(str, want))}] tensor "
                         f"on {dev} (transposed={transposed}); got {_desc(src)}")

    def vec(name, t, length, length_name):
        if t is None:
            return
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int32 or t.dim() != 1 or not t.is_contiguous() \
                or t.device != dev or (length is not None and t.shape[0] != length):
            n = f"[{length_name}] = [{length}]" if length is not None else f"[{length_name}]"
            raise ValueError(f"{op}: '{name}' must be a contiguous int32 {n} on {dev}; got {_desc(t)}")

    if dst_slots is None:
        raise ValueError(f"{op}: 'dst_slots' is required")
    vec("dst_slots", dst_slots, None, "n")
    vec("src_slots", src_slots, dst_slots.shape[0], "n")
    vec("ring_origin", ring_origin, S, "S")
    vec("ring_len", ring_len, S, "S")
    vec("error_slot", error_slot, 1, "1")
    if (ring_origin is None) != (ring_len is None):
        raise ValueError(f"{op}: give both 'ring_origin' and 'ring_len' (cursor reset) or neither")


@torch.library.custom_op("replayssm::replay_import", mutates_args=("dst", "ring_origin", "ring_len", "error_slot"))
def replay_import(src: torch.Tensor, src_slots: Optional[torch.Tensor], dst: torch.Tensor, dst_slots: torch.Tensor,
                  ring_origin: Optional[torch.Tensor], ring_len: Optional[torch.Tensor],
                  error_slot: Optional[torch.Tensor], transposed: bool) -> None:
    """Copy ``src[src_slots[i]]`` (transposed if asked, cast) into ``dst[dst_slots[i]]``; reset cursors."""
    validate_import_args(src, src_slots, dst, dst_slots, ring_origin, ring_len, error_slot, transposed)
    if dst.device.type != "cuda":
        raise ValueError(f"replay_import: tensors must be on a CUDA device; got {dst.device}")
    p = ReplayImportParams()
    S, H, R, Q = dst.shape
    p.num_rows, p.num_heads, p.dim_r, p.dim_q = dst_slots.shape[0], H, R, Q
    p.src_num_slots, p.dst_num_slots = src.shape[0], S
    p.src_dtype, p.dst_dtype = _DTYPE[src.dtype], _DTYPE[dst.dtype]
    p.src_transposed, p.reset_cursors = int(bool(transposed)), int(ring_origin is not None)
    p.src_stride_slot, p.src_stride_head, p.src_stride_a, p.src_stride_b = src.stride()
    p.dst_stride_slot, p.dst_stride_head, p.dst_stride_r = dst.stride()[:3]
    p.src_slots = src_slots.data_ptr() if src_slots is not None else None
    p.dst_slots = dst_slots.data_ptr()
    p.src, p.dst = src.data_ptr(), dst.data_ptr()
    p.ring_origin = ring_origin.data_ptr() if ring_origin is not None else None
    p.ring_len = ring_len.data_ptr() if ring_len is not None else None
    p.error_slot = error_slot.data_ptr() if error_slot is not None else None
    launch_on_current_stream(_get_launcher(), p, dst.device, "replay_import")


@replay_import.register_fake
def _replay_import_fake(src, src_slots, dst, dst_slots, ring_origin, ring_len, error_slot, transposed) -> None:
    return None


def import_reference(src, src_slots, dst, dst_slots, ring_origin=None, ring_len=None, transposed=False):
    """Reference semantics on any device (float64 math, one cast at the end); returns the first
    out-of-range or repeated destination slot or -1. Mutates ``dst`` and the cursors like the kernel."""
    S, S_src = dst.shape[0], src.shape[0]
    err = -1
    named = set()
    for i, d in enumerate(dst_slots.tolist()):
        if d < 0:
            continue
        s = d if src_slots is None else int(src_slots[i])
        repeated = d in named
        named.add(d)
        if repeated or d >= S or s < 0 or s >= S_src:
            err = d if err < 0 else err
            continue
        x = src[s].double()
        dst[d] = (x.transpose(-1, -2) if transposed else x).to(dst.dtype)
        if ring_origin is not None:
            ring_origin[d] = 0
            ring_len[d] = 0
    return err
