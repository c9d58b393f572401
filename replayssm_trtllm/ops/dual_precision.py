"""Dual-precision checkpoints (paper Section 6, Algorithms 3 and 6; docs/precision.md) over the CUDA
launchers of ``cpp_plugins/kernels/dual_precision/`` (called through ctypes on the current stream).

Per layer and step: ``dp_mamba2_decode`` / ``dp_gdn_decode`` (records appended, outputs from the read
copy on non-flush rows and from the recurrence copy on flush rows, no checkpoint written), then
``dual_precision_flush`` (flushing rows fold their records in fp32 from the recurrence copy and cast
the result independently into both copies), then, once per model step, ``replay_commit``.
Standard steps may defer the flushing rows (``defer_flush_rows=True`` on the decode, the step's inputs and
outputs on the flush; kernel ABI 7): the decode skips them and the flush folds their token straight from
the inputs and writes their outputs from the folded state, so the recurrence copy is read once, by the
flush. The caches' ``step`` does this by default in standard mode (``cache.defer_flush_rows``).

Torch ops (namespace ``replayssm``; every op mutates its outputs and returns nothing)::

    dp_mamba2_decode(ckpt_hp?, ckpt_hp_scale?, ckpt_lp, ckpt_lp_scale?, ckpt_lp_gscale?, ring_dt, ring_x,
                     ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D?, dt_bias?, z?,
                     state_batch_indices, y, window, mode, recurrence_fmt, read_fmt, defer_flush_rows=False)
    dp_gdn_decode(ckpt_hp?, ckpt_hp_scale?, ckpt_lp, ckpt_lp_scale?, ckpt_lp_gscale?, ring_g, ring_u,
                  ring_k, ring_beta?, ring_v?, ring_origin, ring_len, q, k, v, a, b, A_log, dt_bias,
                  state_batch_indices, o, window, mode, recurrence_fmt, read_fmt, scale, defer_flush_rows=False)
    dual_precision_flush(family, ckpt_hp?, ckpt_hp_scale?, ckpt_lp, ckpt_lp_scale?, ckpt_lp_gscale?,
                         state_batch_indices, ring_origin, ring_len, flush_index?, A?, ring_dt?, ring_x?,
                         ring_B?, ring_g?, ring_k?, ring_beta?, ring_v?, flushed, window, mode, num_tokens,
                         recurrence_fmt, read_fmt, rounding, layer_index, seed, x?, dt_raw?, B?, C?, z?, D?,
                         dt_bias?, y?, q?, k?, v?, a?, b?, A_log?, gdn_dt_bias?, o?, scale)
                         (x ... y / q ... scale: deferred Mamba-2 / GDN flushing rows, see the op)

``ckpt_hp = None`` selects the shared low-precision checkpoint (one copy, ``ckpt_lp``, read on every
step, written with ``rounding``); with ``window = 1`` (standard) that is the conventional per-step
quantized state. Formats: 'fp32', 'fp16', 'bf16', 'fp8_e4m3', 'nvfp4' (docs/formats.md); the
payload of a copy is ``StateCopy.data`` (fp32 / fp16 / bf16 tensors, uint8 for fp8 ``[.., N]`` and nvfp4
``[.., N/2]``), ``scale`` (fp8: fp32 ``[.., N/128]``; nvfp4: uint8 ``[.., N/16]``), ``gscale`` (nvfp4: fp32
``[S, H]``). Supported: N = K = 128, head dim P / V a multiple of 8 up to 128, T <= 8, L <= 64.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Optional

import torch

from ..config import ring_capacity_for
from ..state.phase import admission_phases, write_neutral_records
from ._lib import DTYPE_CODE_BY_NAME, c_launcher, host_function, launch_on_current_stream

__all__ = [
    "FORMATS", "FMT_CODE", "StateCopy", "state_encode", "state_decode", "dp_mamba2_decode", "dp_gdn_decode",
    "dual_precision_flush", "DualPrecisionFlushParams", "DualPrecisionDecodeParams", "DualPrecisionCodecParams",
    "Mamba2DualPrecisionCache", "GdnDualPrecisionCache", "ROW_N", "MAX_TOKENS", "MAX_WINDOW", "decode_path",
    "split_min_batch_heads", "decode_workspace_bytes",
]

FORMATS = ("fp32", "fp16", "bf16", "fp8_e4m3", "nvfp4")
FMT_CODE = {**DTYPE_CODE_BY_NAME, "fp8_e4m3": 3, "nvfp4": 4}
RECURRENCE_FORMATS = ("fp32", "fp16", "bf16", "fp8_e4m3")
ROUNDING_CODE = {"rtn": 0, "sr": 1}
FAMILY_CODE = {"mamba2": 0, "gdn": 1}
ROW_N = 128
MAX_TOKENS = 8
MAX_WINDOW = 64
_ACT_CODE = {torch.float16: 1, torch.bfloat16: 2}
_I32, _U32, _I64, _F32, _P = ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p


class DualPrecisionFlushParams(ctypes.Structure):
    """ctypes mirror of ``DualPrecisionFlushParams`` (dual_precision_flush.h)."""
    _fields_ = (
        [(n, _I32) for n in ("family", "batch", "num_tokens", "num_slots", "window", "ring_capacity", "mode", "nheads",
                             "headdim", "dstate", "ngroups", "act_dtype", "recurrence_dtype", "read_dtype", "rounding",
                             "layer_index")]
        + [("seed_lo", _U32), ("seed_hi", _U32)]
        + [(n, _I64) for n in ("stride_hp_slot", "stride_hp_head", "stride_hp_row", "stride_lp_slot", "stride_lp_head",
                               "stride_lp_row")]
        + [(n, _P) for n in ("state_batch_indices", "ring_origin", "ring_len", "flush_index", "ckpt_hp", "ckpt_hp_scale",
                             "ckpt_lp", "ckpt_lp_scale", "ckpt_lp_gscale", "A", "ring_dt", "ring_x", "ring_B", "ring_g",
                             "ring_k", "ring_beta", "ring_v", "flushed")]
        # ABI 7: deferred flushing rows of a standard step (Mamba-2: x, GDN: q = NULL: off)
        + [(n, _P) for n in ("x", "dt_raw", "Bm", "Cm", "z", "D", "dt_bias", "y",
                             "q", "k", "v", "a", "b", "A_log", "gdn_dt_bias", "o")]
        + [("dt_dtype", _I32), ("scale", _F32)]
    )


class DualPrecisionDecodeParams(ctypes.Structure):
    """ctypes mirror of ``DualPrecisionDecodeParams`` (dual_precision.h)."""
    _fields_ = (
        [(n, _I32) for n in ("family", "batch", "num_tokens", "num_slots", "window", "ring_capacity", "mode", "nheads",
                             "headdim", "dstate", "ngroups", "act_dtype", "recurrence_dtype", "read_dtype", "dt_dtype")]
        + [("scale", _F32)]
        + [(n, _I64) for n in ("stride_hp_slot", "stride_hp_head", "stride_hp_row", "stride_lp_slot", "stride_lp_head",
                               "stride_lp_row")]
        + [(n, _P) for n in ("state_batch_indices", "ring_origin", "ring_len", "ckpt_hp", "ckpt_hp_scale", "ckpt_lp",
                             "ckpt_lp_scale", "ckpt_lp_gscale",
                             "x", "dt_raw", "Bm", "Cm", "z", "A", "D", "dt_bias", "ring_dt", "ring_x", "ring_B", "y",
                             "q", "k", "v", "a", "b", "A_log", "gdn_dt_bias", "ring_g", "ring_u", "ring_k", "ring_beta",
                             "ring_v", "o")]
        + [("workspace", _P), ("workspace_bytes", _I64)]
        + [("defer_flush_rows", _I32), ("pad_abi7", _I32)]  # ABI 7
    )


class DualPrecisionCodecParams(ctypes.Structure):
    """ctypes mirror of ``DualPrecisionCodecParams`` (dual_precision.h)."""
    _fields_ = (
        [(n, _I32) for n in ("direction", "num_states", "nheads", "headdim", "dstate", "fmt", "rounding", "layer_index")]
        + [("seed_lo", _U32), ("seed_hi", _U32)]
        + [(n, _P) for n in ("slot_ids", "flush_index", "x", "data", "scale", "gscale")]
    )


_launcher = c_launcher  # the name the GPU tests use


def decode_workspace_bytes(p: "DualPrecisionDecodeParams") -> int:
    """Bytes of the split path's workspace for these sizes (0: the path cannot run them); host-only."""
    fn = host_function("rssm_dual_precision_decode_workspace_bytes", [ctypes.POINTER(DualPrecisionDecodeParams)],
                       ctypes.c_int64)
    return int(fn(ctypes.byref(p)))


_DECODE_PATHS = {0: "tile", 1: "stream", 2: "split"}


def decode_path(p: "DualPrecisionDecodeParams") -> Optional[str]:
    """The read path the decode launch of ``p`` takes for its non-flush rows: "tile", "stream" (16-bit read copies on
    the replay stream kernel) or "split" (the split kernels; needs ``p.workspace`` of ``decode_workspace_bytes(p)``
    bytes, and for GDN slot indices); None where the launch would refuse the choice (an unknown
    ``RSSM_DP_DECODE_PATH``, a forced split path without its workspace). The C library's rule, host-only; reads
    ``RSSM_DP_DECODE_PATH`` as the launch does (docs/switches.md)."""
    fn = host_function("rssm_dual_precision_decode_path", [ctypes.POINTER(DualPrecisionDecodeParams)], ctypes.c_int)
    return _DECODE_PATHS.get(int(fn(ctypes.byref(p))))


def split_min_batch_heads(family: str, read_fmt: str, num_tokens: int, headdim: int = 64) -> int:
    """The smallest batch x heads (GDN: value heads) at which the automatic rule runs the decode's non-flush rows on
    the split kernels, for ``family`` ("mamba2" / "gdn"), read copies in ``read_fmt`` and ``num_tokens`` tokens per
    step (the C library's table, measured per family, format and token count: docs/precision.md "Fifty-third
    session"; ``headdim`` matters for Mamba-2 FP8 verify steps only); 0 outside 1..MAX_TOKENS. The split path also
    needs its workspace (and for GDN slot indices)."""
    if family not in ("mamba2", "gdn"):
        raise ValueError(f"split_min_batch_heads: family must be 'mamba2' or 'gdn'; got {family!r}")
    if read_fmt not in FMT_CODE:
        raise ValueError(f"split_min_batch_heads: read_fmt must be one of {FORMATS}; got {read_fmt!r}")
    fn = host_function("rssm_dual_precision_split_min_batch_heads", [ctypes.c_int] * 4, ctypes.c_int)
    return int(fn(0 if family == "mamba2" else 1, FMT_CODE[read_fmt], int(num_tokens), int(headdim)))


def _call_decode(p, dev, op):
    """Decode launch with the split path's workspace (allocated here on the current stream; the caching
    allocator keeps it valid for the queued work, and CUDA-graph capture takes it from the graph pool)."""
    ws_bytes = decode_workspace_bytes(p)
    workspace = None
    if ws_bytes > 0:
        workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=dev)
        p.workspace, p.workspace_bytes = workspace.data_ptr(), ws_bytes
    _call("rssm_dual_precision_decode_launch", DualPrecisionDecodeParams, p, dev, op)
    del workspace


def _call(name, struct, p, dev, op):
    launch_on_current_stream(_launcher(name, struct), p, dev, op)


def _desc(t) -> str:
    if not isinstance(t, torch.Tensor):
        return type(t).__name__
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}"


def _ptr(t) -> Optional[int]:
    return None if t is None else t.data_ptr()


# --------------------------------------------------------------------------------- stored copies
def copy_shapes(fmt: str, S: int, H: int, P: int, N: int):
    """(data dtype, data shape, scale dtype|None, scale shape|None, has gscale) of a copy [S, H, P, N]."""
    if fmt not in FORMATS:
        raise ValueError(f"StateCopy: fmt must be one of {FORMATS}; got {fmt!r}")
    if fmt in ("fp32", "fp16", "bf16"):
        dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[fmt]
        return dt, (S, H, P, N), None, None, False
    if fmt == "fp8_e4m3":
        return torch.uint8, (S, H, P, N), torch.float32, (S, H, P, N // 128), False
    return torch.uint8, (S, H, P, N // 2), torch.uint8, (S, H, P, N // 16), True


@dataclass
class StateCopy:
    """One stored checkpoint copy of ``[S, H, P, N]`` states (docs/formats.md)."""
    fmt: str
    data: torch.Tensor
    scale: Optional[torch.Tensor] = None
    gscale: Optional[torch.Tensor] = None

    @classmethod
    def empty(cls, fmt: str, S: int, H: int, P: int, N: int = ROW_N, device="cuda") -> "StateCopy":
        dt, shp, sdt, sshp, g = copy_shapes(fmt, S, H, P, N)
        return cls(fmt, torch.zeros(shp, dtype=dt, device=device),
                   None if sdt is None else torch.ones(sshp, dtype=sdt, device=device) if sdt == torch.float32
                   else torch.zeros(sshp, dtype=sdt, device=device),
                   torch.ones(S, H, dtype=torch.float32, device=device) if g else None)

    @property
    def shape(self):
        S, H, P, n = self.data.shape
        return (S, H, P, n * 2 if self.fmt == "nvfp4" else n)

    def nbytes_per_state(self) -> int:
        n = sum(t[0].numel() * t.element_size() for t in (self.data, self.scale, self.gscale) if t is not None)
        return n

    def check(self, op: str, name: str, S: int, H: int, P: int, N: int, device) -> None:
        dt, shp, sdt, sshp, g = copy_shapes(self.fmt, S, H, P, N)
        d = self.data
        if not isinstance(d, torch.Tensor) or d.dtype != dt or tuple(d.shape) != shp or d.device != device:
            raise ValueError(f"{op}: '{name}' ({self.fmt}) must be {str(dt).replace('torch.', '')} {list(shp)} on "
                             f"{device}; got {_desc(d)}")
        esz = d.element_size()
        if d.stride(-1) != 1 or d.data_ptr() % 16 or any((s * esz) % 16 for s in d.stride()[:-1]):
            raise ValueError(f"{op}: '{name}' needs a contiguous last dim, a 16-byte aligned base and 16-byte "
                             f"multiple strides; got strides {list(d.stride())}")
        for what, t, want_dt, want_shape in (("scale", self.scale, sdt, sshp),
                                             ("gscale", self.gscale, torch.float32 if g else None, (S, H) if g else None)):
            if want_dt is None:
                continue
            if not isinstance(t, torch.Tensor) or t.dtype != want_dt or tuple(t.shape) != want_shape \
                    or not t.is_contiguous() or t.device != device:
                raise ValueError(f"{op}: '{name}.{what}' ({self.fmt}) must be contiguous "
                                 f"{str(want_dt).replace('torch.', '')} {list(want_shape)}; got {_desc(t)}")


def _fmt_arg(op: str, name: str, fmt: str, allowed) -> int:
    if fmt not in allowed:
        raise ValueError(f"{op}: {name} must be one of {tuple(allowed)}; got {fmt!r}")
    return FMT_CODE[fmt]


def _mk_copy(fmt, data, scale, gscale) -> Optional[StateCopy]:
    return None if data is None else StateCopy(fmt, data, scale, gscale)


# ------------------------------------------------------------------------------------------ codec
def _seed_words(seed: int):
    seed = int(seed)
    if not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed must be in [0, 2^64); got {seed}")
    return seed & 0xFFFFFFFF, seed >> 32


def state_encode(x: torch.Tensor, fmt: str, rounding: str = "rtn", seed: int = 0, layer: int = 0,
                 slot_ids: Optional[torch.Tensor] = None, flush_index: Optional[torch.Tensor] = None) -> StateCopy:
    """Encode fp32 CUDA states ``x [S, H, P, 128]`` with the kernels' device codec (state s uses Philox
    counter words (slot_ids[s] or s, layer, flush_index[s] or 0)); equals formats.encode per state."""
    op = "state_encode"
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or x.dim() != 4 or x.shape[-1] != ROW_N \
            or not x.is_cuda or not x.is_contiguous():
        raise ValueError(f"{op}: 'x' must be a contiguous CUDA float32 [S, H, P, {ROW_N}]; got {_desc(x)}")
    if rounding not in ROUNDING_CODE:
        raise ValueError(f"{op}: rounding must be 'rtn' or 'sr'; got {rounding!r}")
    S, H, P, N = x.shape
    c = StateCopy.empty(_check_fmt(op, fmt), S, H, P, N, x.device)
    _codec(0, x, c, rounding, seed, layer, slot_ids, flush_index, op)
    return c


def state_decode(c: StateCopy) -> torch.Tensor:
    """fp32 ``[S, H, P, 128]`` decoded on the device (equals formats.decode per state)."""
    S, H, P, N = c.shape
    x = torch.empty(S, H, P, N, dtype=torch.float32, device=c.data.device)
    _codec(1, x, c, "rtn", 0, 0, None, None, "state_decode")
    return x


def _check_fmt(op, fmt):
    if fmt not in FORMATS:
        raise ValueError(f"{op}: fmt must be one of {FORMATS}; got {fmt!r}")
    return fmt


def _codec(direction, x, c, rounding, seed, layer, slot_ids, flush_index, op):
    S, H, P, N = x.shape
    c.check(op, "copy", S, H, P, N, x.device)
    for name, t in (("slot_ids", slot_ids), ("flush_index", flush_index)):
        if t is not None and (t.dtype != torch.int32 or tuple(t.shape) != (S,) or t.device != x.device):
            raise ValueError(f"{op}: '{name}' must be int32 [{S}] on {x.device}; got {_desc(t)}")
    p = DualPrecisionCodecParams()
    p.direction, p.num_states, p.nheads, p.headdim, p.dstate = direction, S, H, P, N
    p.fmt, p.rounding, p.layer_index = FMT_CODE[c.fmt], ROUNDING_CODE[rounding], int(layer)
    p.seed_lo, p.seed_hi = _seed_words(seed)
    p.slot_ids, p.flush_index = _ptr(slot_ids), _ptr(flush_index)
    p.x, p.data, p.scale, p.gscale = x.data_ptr(), c.data.data_ptr(), _ptr(c.scale), _ptr(c.gscale)
    _call("rssm_dual_precision_codec_launch", DualPrecisionCodecParams, p, x.device, op)


# ----------------------------------------------------------------------------------------- checks
def _expect(op, name, t, dtypes, shape, device, optional=False):
    if t is None:
        if optional:
            return
        raise ValueError(f"{op}: '{name}' is required")
    if not isinstance(dtypes, tuple):
        dtypes = (dtypes,)
    if not isinstance(t, torch.Tensor) or t.dtype not in dtypes or tuple(t.shape) != tuple(shape) \
            or t.device != device or not t.is_contiguous():
        want = "/".join(str(d).replace("torch.", "") for d in dtypes)
        raise ValueError(f"{op}: '{name}' must be contiguous {want} {list(shape)} on {device}; got {_desc(t)}"
                         + ("" if not isinstance(t, torch.Tensor) else f" on {t.device}"))


def _check_common(op, S, Bsz, T, Cap, window, mode, sbi, ring_origin, ring_len, dev):
    if mode not in (0, 1):
        raise ValueError(f"{op}: mode must be 0 (standard) or 1 (speculative); got {mode!r}")
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"{op}: window must be in [1, {MAX_WINDOW}]; got {window}")
    if not 1 <= T <= MAX_TOKENS or (mode == 0 and T != 1):
        raise ValueError(f"{op}: T must be 1 in standard mode and in [1, {MAX_TOKENS}] in speculative mode; got T={T}")
    need = window if mode == 0 else window + T
    if Cap < need:
        raise ValueError(f"{op}: ring capacity C must be >= {need}; got {Cap}")
    _expect(op, "state_batch_indices", sbi, torch.int32, (Bsz,), dev)
    _expect(op, "ring_origin", ring_origin, torch.int32, (S,), dev)
    _expect(op, "ring_len", ring_len, torch.int32, (S,), dev)


def _fill_copies(p, op, hp: Optional[StateCopy], lp: StateCopy, S, H, P, N, dev):
    lp.check(op, "ckpt_lp", S, H, P, N, dev)
    p.read_dtype = FMT_CODE[lp.fmt]
    p.ckpt_lp, p.ckpt_lp_scale, p.ckpt_lp_gscale = lp.data.data_ptr(), _ptr(lp.scale), _ptr(lp.gscale)
    p.stride_lp_slot, p.stride_lp_head, p.stride_lp_row = lp.data.stride()[:3]
    if hp is not None:
        if hp.fmt not in RECURRENCE_FORMATS:
            raise ValueError(f"{op}: recurrence_fmt must be one of {RECURRENCE_FORMATS}; got {hp.fmt!r}")
        hp.check(op, "ckpt_hp", S, H, P, N, dev)
        p.recurrence_dtype = FMT_CODE[hp.fmt]
        p.ckpt_hp, p.ckpt_hp_scale = hp.data.data_ptr(), _ptr(hp.scale)
        p.stride_hp_slot, p.stride_hp_head, p.stride_hp_row = hp.data.stride()[:3]
    else:
        p.recurrence_dtype = p.read_dtype


# ------------------------------------------------------------------------------ Mamba-2 decode op
@torch.library.custom_op("replayssm::dp_mamba2_decode", mutates_args=("ring_dt", "ring_x", "ring_B", "y"))
def dp_mamba2_decode(ckpt_hp: Optional[torch.Tensor], ckpt_hp_scale: Optional[torch.Tensor], ckpt_lp: torch.Tensor,
                     ckpt_lp_scale: Optional[torch.Tensor], ckpt_lp_gscale: Optional[torch.Tensor],
                     ring_dt: torch.Tensor, ring_x: torch.Tensor, ring_B: torch.Tensor, ring_origin: torch.Tensor,
                     ring_len: torch.Tensor, x: torch.Tensor, dt_raw: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                     A: torch.Tensor, D: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor],
                     z: Optional[torch.Tensor], state_batch_indices: torch.Tensor, y: torch.Tensor, window: int,
                     mode: int, recurrence_fmt: str, read_fmt: str, defer_flush_rows: bool = False) -> None:
    """Mamba-2 dual-precision decode step of one layer (module doc). x/z/y [B, T, H, P], dt_raw [B, T, H],
    B/C [B, T, G, N], A/D/dt_bias [H] fp32, rings [S, C, ...] (design.md 3), all contiguous.
    defer_flush_rows (standard mode): the flushing rows' outputs and records are left to ``dual_precision_flush``
    called with this step's inputs and y (it folds the token at once and writes their outputs)."""
    op = "dp_mamba2_decode"
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.dtype not in _ACT_CODE:
        raise ValueError(f"{op}: 'x' must be float16/bfloat16 [B, T, H, P]; got {_desc(x)}")
    Bsz, T, H, P = x.shape
    dev = x.device
    if not isinstance(B, torch.Tensor) or B.dim() != 4:
        raise ValueError(f"{op}: 'B' must be [B, T, G, N]; got {_desc(B)}")
    G, N = B.shape[2], B.shape[3]
    if N != ROW_N or P % 8 or not 8 <= P <= 128 or H % G:
        raise ValueError(f"{op}: need N = {ROW_N}, P a multiple of 8 in [8, 128], H % G == 0; got N={N}, P={P}, "
                         f"H={H}, G={G}")
    S, Cap = ckpt_lp.shape[0], ring_dt.shape[1] if ring_dt.dim() == 3 else -1
    _check_common(op, S, Bsz, T, Cap, window, mode, state_batch_indices, ring_origin, ring_len, dev)
    act = x.dtype
    _expect(op, "x", x, act, (Bsz, T, H, P), dev)
    _expect(op, "dt_raw", dt_raw, (act, torch.float32), (Bsz, T, H), dev)
    _expect(op, "B", B, act, (Bsz, T, G, N), dev)
    _expect(op, "C", C, act, (Bsz, T, G, N), dev)
    _expect(op, "z", z, act, (Bsz, T, H, P), dev, optional=True)
    _expect(op, "y", y, act, (Bsz, T, H, P), dev)
    _expect(op, "A", A, torch.float32, (H,), dev)
    _expect(op, "D", D, torch.float32, (H,), dev, optional=True)
    _expect(op, "dt_bias", dt_bias, torch.float32, (H,), dev, optional=True)
    _expect(op, "ring_dt", ring_dt, torch.float32, (S, Cap, H), dev)
    _expect(op, "ring_x", ring_x, act, (S, Cap, H, P), dev)
    _expect(op, "ring_B", ring_B, act, (S, Cap, G, N), dev)
    p = DualPrecisionDecodeParams()
    p.family, p.batch, p.num_tokens, p.num_slots, p.window, p.ring_capacity, p.mode = 0, Bsz, T, S, window, Cap, mode
    p.nheads, p.headdim, p.dstate, p.ngroups, p.act_dtype = H, P, N, G, _ACT_CODE[act]
    p.dt_dtype = 0 if dt_raw.dtype == torch.float32 else _ACT_CODE[act]
    _fill_copies(p, op, _mk_copy(recurrence_fmt, ckpt_hp, ckpt_hp_scale, None),
                 StateCopy(read_fmt, ckpt_lp, ckpt_lp_scale, ckpt_lp_gscale), S, H, P, N, dev)
    p.state_batch_indices, p.ring_origin, p.ring_len = (t.data_ptr() for t in (state_batch_indices, ring_origin, ring_len))
    p.x, p.dt_raw, p.Bm, p.Cm, p.z = x.data_ptr(), dt_raw.data_ptr(), B.data_ptr(), C.data_ptr(), _ptr(z)
    p.A, p.D, p.dt_bias = A.data_ptr(), _ptr(D), _ptr(dt_bias)
    p.ring_dt, p.ring_x, p.ring_B, p.y = ring_dt.data_ptr(), ring_x.data_ptr(), ring_B.data_ptr(), y.data_ptr()
    if defer_flush_rows and mode != 0:
        raise ValueError(f"{op}: defer_flush_rows is a standard-mode (mode 0) path; got mode {mode}")
    p.defer_flush_rows = 1 if defer_flush_rows else 0
    _call_decode(p, dev, op)


@dp_mamba2_decode.register_fake
def _dp_mamba2_decode_fake(*args, **kwargs) -> None:
    return None


# ---------------------------------------------------------------------------------- GDN decode op
@torch.library.custom_op("replayssm::dp_gdn_decode",
                         mutates_args=("ring_g", "ring_u", "ring_k", "ring_beta", "ring_v", "o"))
def dp_gdn_decode(ckpt_hp: Optional[torch.Tensor], ckpt_hp_scale: Optional[torch.Tensor], ckpt_lp: torch.Tensor,
                  ckpt_lp_scale: Optional[torch.Tensor], ckpt_lp_gscale: Optional[torch.Tensor], ring_g: torch.Tensor,
                  ring_u: torch.Tensor, ring_k: torch.Tensor, ring_beta: Optional[torch.Tensor],
                  ring_v: Optional[torch.Tensor], ring_origin: torch.Tensor, ring_len: torch.Tensor, q: torch.Tensor,
                  k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor,
                  dt_bias: torch.Tensor, state_batch_indices: torch.Tensor, o: torch.Tensor, window: int, mode: int,
                  recurrence_fmt: str, read_fmt: str, scale: float, defer_flush_rows: bool = False) -> None:
    """GDN dual-precision decode step of one layer (module doc). q/k [B, T, HK, K], v/o [B, T, HV, V],
    a/b [B, T, HV], A_log/dt_bias [HV] fp32; rings [S, C, ...]; ring_u fp16; all contiguous."""
    op = "dp_gdn_decode"
    if not isinstance(q, torch.Tensor) or q.dim() != 4 or q.dtype not in _ACT_CODE:
        raise ValueError(f"{op}: 'q' must be float16/bfloat16 [B, T, HK, K]; got {_desc(q)}")
    Bsz, T, HK, K = q.shape
    dev, act = q.device, q.dtype
    if not isinstance(v, torch.Tensor) or v.dim() != 4:
        raise ValueError(f"{op}: 'v' must be [B, T, HV, V]; got {_desc(v)}")
    HV, V = v.shape[2], v.shape[3]
    if K != ROW_N or V % 8 or not 8 <= V <= 128 or HV % HK:
        raise ValueError(f"{op}: need K = {ROW_N}, V a multiple of 8 in [8, 128], HV % HK == 0; got K={K}, V={V}, "
                         f"HV={HV}, HK={HK}")
    S, Cap = ckpt_lp.shape[0], ring_g.shape[1] if ring_g.dim() == 3 else -1
    _check_common(op, S, Bsz, T, Cap, window, mode, state_batch_indices, ring_origin, ring_len, dev)
    _expect(op, "k", k, act, (Bsz, T, HK, K), dev)
    _expect(op, "v", v, act, (Bsz, T, HV, V), dev)
    _expect(op, "a", a, act, (Bsz, T, HV), dev)
    _expect(op, "b", b, act, (Bsz, T, HV), dev)
    _expect(op, "o", o, act, (Bsz, T, HV, V), dev)
    _expect(op, "A_log", A_log, torch.float32, (HV,), dev)
    _expect(op, "dt_bias", dt_bias, torch.float32, (HV,), dev)
    _expect(op, "ring_g", ring_g, torch.float32, (S, Cap, HV), dev)
    _expect(op, "ring_u", ring_u, torch.float16, (S, Cap, HV, V), dev)
    _expect(op, "ring_k", ring_k, act, (S, Cap, HK, K), dev)
    _expect(op, "ring_beta", ring_beta, torch.float32, (S, Cap, HV), dev, optional=True)
    _expect(op, "ring_v", ring_v, act, (S, Cap, HV, V), dev, optional=True)
    if (ring_beta is None) != (ring_v is None):
        raise ValueError(f"{op}: pass both 'ring_beta' and 'ring_v' (two-precision records) or neither")
    p = DualPrecisionDecodeParams()
    p.family, p.batch, p.num_tokens, p.num_slots, p.window, p.ring_capacity, p.mode = 1, Bsz, T, S, window, Cap, mode
    p.nheads, p.headdim, p.dstate, p.ngroups, p.act_dtype = HV, V, K, HK, _ACT_CODE[act]
    p.scale = float(scale)
    _fill_copies(p, op, _mk_copy(recurrence_fmt, ckpt_hp, ckpt_hp_scale, None),
                 StateCopy(read_fmt, ckpt_lp, ckpt_lp_scale, ckpt_lp_gscale), S, HV, V, K, dev)
    p.state_batch_indices, p.ring_origin, p.ring_len = (t.data_ptr() for t in (state_batch_indices, ring_origin, ring_len))
    p.q, p.k, p.v, p.a, p.b, p.o = (t.data_ptr() for t in (q, k, v, a, b, o))
    p.A_log, p.gdn_dt_bias = A_log.data_ptr(), dt_bias.data_ptr()
    p.ring_g, p.ring_u, p.ring_k = ring_g.data_ptr(), ring_u.data_ptr(), ring_k.data_ptr()
    p.ring_beta, p.ring_v = _ptr(ring_beta), _ptr(ring_v)
    if defer_flush_rows and mode != 0:
        raise ValueError(f"{op}: defer_flush_rows is a standard-mode (mode 0) path; got mode {mode}")
    p.defer_flush_rows = 1 if defer_flush_rows else 0
    _call_decode(p, dev, op)


@dp_gdn_decode.register_fake
def _dp_gdn_decode_fake(*args, **kwargs) -> None:
    return None


# --------------------------------------------------------------------------------------- flush op
@torch.library.custom_op("replayssm::dual_precision_flush",
                         mutates_args=("ckpt_hp", "ckpt_hp_scale", "ckpt_lp", "ckpt_lp_scale", "ckpt_lp_gscale",
                                       "flushed", "y", "o"))
def dual_precision_flush(family: str, ckpt_hp: Optional[torch.Tensor], ckpt_hp_scale: Optional[torch.Tensor],
                         ckpt_lp: torch.Tensor, ckpt_lp_scale: Optional[torch.Tensor],
                         ckpt_lp_gscale: Optional[torch.Tensor], state_batch_indices: torch.Tensor,
                         ring_origin: torch.Tensor, ring_len: torch.Tensor, flush_index: Optional[torch.Tensor],
                         A: Optional[torch.Tensor], ring_dt: Optional[torch.Tensor], ring_x: Optional[torch.Tensor],
                         ring_B: Optional[torch.Tensor], ring_g: Optional[torch.Tensor], ring_k: Optional[torch.Tensor],
                         ring_beta: Optional[torch.Tensor], ring_v: Optional[torch.Tensor], flushed: torch.Tensor,
                         window: int, mode: int, num_tokens: int, recurrence_fmt: str, read_fmt: str, rounding: str,
                         layer_index: int, seed: int, x: Optional[torch.Tensor], dt_raw: Optional[torch.Tensor],
                         B: Optional[torch.Tensor], C: Optional[torch.Tensor], z: Optional[torch.Tensor],
                         D: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor], y: Optional[torch.Tensor],
                         q: Optional[torch.Tensor], k: Optional[torch.Tensor], v: Optional[torch.Tensor],
                         a: Optional[torch.Tensor], b: Optional[torch.Tensor], A_log: Optional[torch.Tensor],
                         gdn_dt_bias: Optional[torch.Tensor], o: Optional[torch.Tensor], scale: float) -> None:
    """Flush of one layer (dual_precision_flush.h). flushed [B] int32 out: 1 flushed, 0 not, -1 padding.
    x, dt_raw, B, C (z, D, dt_bias optional) and y: this Mamba-2 standard step's inputs and outputs when its decode
    deferred the flushing rows (``dp_mamba2_decode(..., defer_flush_rows=True)``): the flush then folds the token
    from these inputs and writes the flushing rows' y. GDN likewise with q, k, v, a, b, A_log, gdn_dt_bias, o and
    the query scale (``dp_gdn_decode(..., defer_flush_rows=True)``). All None otherwise (passed positionally: a
    mutable argument with a default value breaks torch.library's version counting)."""
    op = "dual_precision_flush"
    if family not in FAMILY_CODE:
        raise ValueError(f"{op}: family must be 'mamba2' or 'gdn'; got {family!r}")
    if rounding not in ROUNDING_CODE:
        raise ValueError(f"{op}: rounding must be 'rtn' or 'sr'; got {rounding!r}")
    mamba = family == "mamba2"
    ring_x_or_v = ring_x if mamba else ring_v
    if not isinstance(ring_x_or_v, torch.Tensor) or ring_x_or_v.dim() != 4:
        raise ValueError(f"{op}: '{'ring_x' if mamba else 'ring_v'}' must be [S, C, H, P]; got {_desc(ring_x_or_v)}")
    S, Cap, H, P = ring_x_or_v.shape
    dev, act = ring_x_or_v.device, ring_x_or_v.dtype
    if act not in _ACT_CODE:
        raise ValueError(f"{op}: ring activations must be float16/bfloat16; got {_desc(ring_x_or_v)}")
    Bsz = state_batch_indices.shape[0] if isinstance(state_batch_indices, torch.Tensor) else -1
    _check_common(op, S, Bsz, num_tokens, Cap, window, mode, state_batch_indices, ring_origin, ring_len, dev)
    _expect(op, "flush_index", flush_index, torch.int32, (Bsz,), dev, optional=True)
    _expect(op, "flushed", flushed, torch.int32, (Bsz,), dev)
    shared_B = ring_B if mamba else ring_k
    if not isinstance(shared_B, torch.Tensor) or shared_B.dim() != 4:
        raise ValueError(f"{op}: '{'ring_B' if mamba else 'ring_k'}' must be [S, C, G, N]; got {_desc(shared_B)}")
    G, N = shared_B.shape[2], shared_B.shape[3]
    if N != ROW_N or H % G:
        raise ValueError(f"{op}: need N = {ROW_N} and heads % groups == 0; got N={N}, heads={H}, groups={G}")
    _expect(op, "ring_B" if mamba else "ring_k", shared_B, act, (S, Cap, G, N), dev)
    if mamba:
        _expect(op, "A", A, torch.float32, (H,), dev)
        _expect(op, "ring_dt", ring_dt, torch.float32, (S, Cap, H), dev)
    else:
        _expect(op, "ring_g", ring_g, torch.float32, (S, Cap, H), dev)
        _expect(op, "ring_beta", ring_beta, torch.float32, (S, Cap, H), dev)
    p = DualPrecisionFlushParams()
    p.family, p.batch, p.num_tokens, p.num_slots, p.window = FAMILY_CODE[family], Bsz, num_tokens, S, window
    p.ring_capacity, p.mode, p.nheads, p.headdim, p.dstate, p.ngroups = Cap, mode, H, P, N, G
    p.act_dtype, p.rounding, p.layer_index = _ACT_CODE[act], ROUNDING_CODE[rounding], int(layer_index)
    p.seed_lo, p.seed_hi = _seed_words(seed)
    _fill_copies(p, op, _mk_copy(recurrence_fmt, ckpt_hp, ckpt_hp_scale, None),
                 StateCopy(read_fmt, ckpt_lp, ckpt_lp_scale, ckpt_lp_gscale), S, H, P, N, dev)
    p.state_batch_indices, p.ring_origin, p.ring_len = (t.data_ptr() for t in (state_batch_indices, ring_origin, ring_len))
    p.flush_index, p.flushed = _ptr(flush_index), flushed.data_ptr()
    p.A, p.ring_dt, p.ring_x, p.ring_B = _ptr(A), _ptr(ring_dt), _ptr(ring_x), _ptr(ring_B)
    p.ring_g, p.ring_k, p.ring_beta, p.ring_v = _ptr(ring_g), _ptr(ring_k), _ptr(ring_beta), _ptr(ring_v)
    gdn_inputs = (q, k, v, a, b, A_log, gdn_dt_bias, o)
    if any(t is not None for t in gdn_inputs):
        if mamba or mode != 0 or num_tokens != 1:
            raise ValueError(f"{op}: GDN step inputs (deferred flushing rows) are a GDN standard-mode path; got "
                             f"family {family!r}, mode {mode}, num_tokens {num_tokens}")
        _expect(op, "q", q, act, (Bsz, 1, G, N), dev)
        _expect(op, "k", k, act, (Bsz, 1, G, N), dev)
        _expect(op, "v", v, act, (Bsz, 1, H, P), dev)
        _expect(op, "a", a, act, (Bsz, 1, H), dev)
        _expect(op, "b", b, act, (Bsz, 1, H), dev)
        _expect(op, "A_log", A_log, torch.float32, (H,), dev)
        _expect(op, "gdn_dt_bias", gdn_dt_bias, torch.float32, (H,), dev)
        _expect(op, "o", o, act, (Bsz, 1, H, P), dev)
        p.q, p.k, p.v, p.a, p.b, p.o = (t.data_ptr() for t in (q, k, v, a, b, o))
        p.A_log, p.gdn_dt_bias = A_log.data_ptr(), gdn_dt_bias.data_ptr()
        p.scale = float(scale)
    step_inputs = (x, dt_raw, B, C, z, D, dt_bias, y)
    if any(t is not None for t in step_inputs):
        if not mamba or mode != 0 or num_tokens != 1:
            raise ValueError(f"{op}: step inputs (deferred flushing rows) are a Mamba-2 standard-mode path; got family "
                             f"{family!r}, mode {mode}, num_tokens {num_tokens}")
        _expect(op, "x", x, act, (Bsz, 1, H, P), dev)
        _expect(op, "dt_raw", dt_raw, (act, torch.float32), (Bsz, 1, H), dev)
        _expect(op, "B", B, act, (Bsz, 1, G, N), dev)
        _expect(op, "C", C, act, (Bsz, 1, G, N), dev)
        _expect(op, "z", z, act, (Bsz, 1, H, P), dev, optional=True)
        _expect(op, "D", D, torch.float32, (H,), dev, optional=True)
        _expect(op, "dt_bias", dt_bias, torch.float32, (H,), dev, optional=True)
        _expect(op, "y", y, act, (Bsz, 1, H, P), dev)
        p.x, p.dt_raw, p.Bm, p.Cm, p.y = x.data_ptr(), dt_raw.data_ptr(), B.data_ptr(), C.data_ptr(), y.data_ptr()
        p.z, p.D, p.dt_bias = _ptr(z), _ptr(D), _ptr(dt_bias)
        p.dt_dtype = 0 if dt_raw.dtype == torch.float32 else _ACT_CODE[act]
    _call("rssm_dual_precision_flush_launch", DualPrecisionFlushParams, p, dev, op)


@dual_precision_flush.register_fake
def _dual_precision_flush_fake(*args, **kwargs) -> None:
    return None


# ------------------------------------------------------------------------------ one-layer caches
# one side stream per device for the concurrent flushes of every cache (layers step one after another and each step
# joins its flush back, so they never need more than one)
_FLUSH_STREAMS: dict = {}


def _flush_stream(device: torch.device):
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _FLUSH_STREAMS:
        _FLUSH_STREAMS[index] = torch.cuda.Stream(device=index)
    return _FLUSH_STREAMS[index]


# step inputs of deferred flushing rows, in the flush op's argument order (Mamba-2, then GDN; "scale" follows)
_STEP_INPUTS = ("x", "dt_raw", "B", "C", "z", "D", "dt_bias", "y", "q", "k", "v", "a", "b", "A_log", "gdn_dt_bias", "o")


def auto_concurrent_flush(family: str, read_fmt: str, defer: bool, device_type: str) -> bool:
    """Whether ``concurrent_flush=None`` (the default) runs the flush beside the decode: a deferred standard step on
    a CUDA device, except a Mamba-2 cache with an fp32 read copy, whose step measured 27% slower that way (476.4 / 490.9
    against 371.6 / 386.1 us serial, fp32 / fp16+SR recurrence, official precision run at fde8a60; every other read
    format 2-7% faster: docs/precision.md, thirty-ninth and fortieth sessions)."""
    if not defer or device_type != "cuda":
        return False
    return not (family == "mamba2" and read_fmt == "fp32")


class _DualPrecisionCacheBase:
    """One layer's dual-precision replay cache with private cursors (tests, benchmarks).

    recurrence_fmt=None selects the shared low-precision checkpoint (one copy ``lp``, written with
    ``rounding``). ``flush_count`` [S] int32 (device) is the Philox flush index of each slot.
    """
    family = ""

    def _init(self, S, H, P, window, max_verify, mode, read_fmt, recurrence_fmt, rounding, seed, layer, device):
        from .commit import mode_code
        self.mode = mode_code(mode, type(self).__name__)
        self.window, self.max_verify = int(window), int(max_verify)
        self.capacity = ring_capacity_for(self.window, self.max_verify, self.mode == 1)
        self.read_fmt, self.recurrence_fmt = read_fmt, recurrence_fmt
        if rounding is None:  # paper E.4.1: SR for a low-precision recurrence copy and for a shared copy
            rounding = "rtn" if recurrence_fmt == "fp32" else "sr"
        if rounding not in ROUNDING_CODE:
            raise ValueError(f"{type(self).__name__}: rounding must be 'rtn' or 'sr'; got {rounding!r}")
        if read_fmt not in FORMATS:
            raise ValueError(f"{type(self).__name__}: read_fmt must be one of {FORMATS}; got {read_fmt!r}")
        if recurrence_fmt is not None and recurrence_fmt not in RECURRENCE_FORMATS:
            raise ValueError(f"{type(self).__name__}: recurrence_fmt must be one of {RECURRENCE_FORMATS} or None "
                             f"(shared copy); got {recurrence_fmt!r}")
        self.rounding = rounding
        self.seed, self.layer = int(seed), int(layer)
        self.device = torch.device(device)
        self.lp = StateCopy.empty(read_fmt, S, H, P, ROW_N, device)
        self.hp = None if recurrence_fmt is None else StateCopy.empty(recurrence_fmt, S, H, P, ROW_N, device)
        self.ring_origin = torch.zeros(S, dtype=torch.int32, device=device)
        self.ring_len = torch.zeros(S, dtype=torch.int32, device=device)
        self.flush_count = torch.zeros(S, dtype=torch.int32, device=device)
        self.num_slots = S
        self.state_shape = (S, H, P, ROW_N)
        self._state_dims = "H, P" if self.family == "mamba2" else "HV, V"
        # standard steps with deferred flushing rows: the flush on a side stream beside the decode (forked from and
        # joined back into the current stream; CUDA-graph capturable). The two touch disjoint rows: the decode reads
        # the read copy of the rows that do not flush and leaves the flushing rows alone (skip_flush_rows), the flush
        # reads and writes only the flushing rows' copies, committed records and outputs. None (default): wherever it
        # applies (a deferred standard step on a CUDA device), serial elsewhere; True: required (a step where it does
        # not apply is refused); False: serial. RSSM_DP_CONCURRENT_FLUSH=1 / 0 at construction sets True / False.
        # Measured 2-7% faster per window-amortized step, except a Mamba-2 fp32 read copy, which the default keeps
        # serial (auto_concurrent_flush; docs/precision.md, thirty-ninth and fortieth sessions).
        env = os.environ.get("RSSM_DP_CONCURRENT_FLUSH", "")
        self.concurrent_flush = {"1": True, "0": False}.get(env)

    def reset(self, prefill_state: torch.Tensor, phase=None) -> None:
        """Every slot's checkpoint := prefill_state [S, H, P, 128] (fp32), rings empty, or holding ``phase`` neutral
        records (``None``, ``"spread"``, an int or one per slot; state/phase.py: spreads the flushes of slots that
        start together). Both copies are cast from the fp32 state (hp: SR with flush index 0 when rounding='sr';
        lp: RTN, or shared: SR)."""
        op = f"{type(self).__name__}.reset"
        if tuple(prefill_state.shape) != self.state_shape:
            raise ValueError(f"{op}: 'prefill_state' must be [S, {self._state_dims}, {ROW_N}] = "
                             f"{list(self.state_shape)}; got {list(prefill_state.shape)}")
        counts = admission_phases(op, phase, self.num_slots, self.window)  # raises before anything changes
        x = prefill_state.to(device=self.device, dtype=torch.float32).contiguous()
        if self.hp is not None:
            hp = state_encode(x, self.hp.fmt, self.rounding if self.hp.fmt != "fp32" else "rtn", self.seed, self.layer)
            self._assign(self.hp, hp)
            lp = state_encode(x, self.lp.fmt, "rtn")
        else:
            lp = state_encode(x, self.lp.fmt, self.rounding, self.seed, self.layer)
        self._assign(self.lp, lp)
        self.ring_origin.zero_()
        self.ring_len.zero_()
        self.flush_count.zero_()
        if counts is not None:
            write_neutral_records(self.family, self, range(self.num_slots), counts, 0)
            self.ring_len.copy_(torch.tensor(counts, dtype=torch.int32))

    @staticmethod
    def _assign(dst: StateCopy, src: StateCopy) -> None:
        dst.data.copy_(src.data)
        for a, b in ((dst.scale, src.scale), (dst.gscale, src.gscale)):
            if a is not None:
                a.copy_(b)

    def _hp_args(self):
        if self.hp is None:
            return None, None
        return self.hp.data, self.hp.scale

    def _flush(self, sbi: torch.Tensor, T: int, extra: dict, flushed: Optional[torch.Tensor] = None,
               count: bool = True, step_inputs: Optional[dict] = None) -> torch.Tensor:
        """count=False: no flush counter (Philox flush index 0) and no extra launches (benchmarks).
        step_inputs: the deferred rows' step inputs and y (Mamba-2 standard mode; see dual_precision_flush)."""
        if flushed is None:
            flushed = torch.empty(sbi.shape[0], dtype=torch.int32, device=self.device)
        slot = sbi.clamp(min=0).long() if count else None
        flush_index = self.flush_count[slot].contiguous() if count else None
        hp, hps = self._hp_args()
        si = step_inputs or {}
        unknown = set(si) - set(_STEP_INPUTS) - {"scale"}
        if unknown:
            raise ValueError(f"{type(self).__name__}.flush: unknown step_inputs {sorted(unknown)}")
        torch.ops.replayssm.dual_precision_flush(
            self.family, hp, hps, self.lp.data, self.lp.scale, self.lp.gscale, sbi, self.ring_origin, self.ring_len,
            flush_index, extra.get("A"), extra.get("ring_dt"), extra.get("ring_x"), extra.get("ring_B"),
            extra.get("ring_g"), extra.get("ring_k"), extra.get("ring_beta"), extra.get("ring_v"), flushed,
            self.window, self.mode, T, self.recurrence_fmt or self.read_fmt, self.read_fmt, self.rounding,
            self.layer, self.seed, *(si.get(k) for k in _STEP_INPUTS), float(si.get("scale") or 0.0))
        if count:
            self.flush_count.index_add_(0, slot, (flushed > 0).to(torch.int32))
        return flushed

    def _decode_and_flush(self, defer: bool, decode, flush) -> None:
        """decode() then flush(), or with ``concurrent_flush`` the flush on a side stream beside the decode."""
        if self.concurrent_flush is False or (
                self.concurrent_flush is None
                and not auto_concurrent_flush(self.family, self.read_fmt, defer, self.device.type)):
            decode()
            flush()
            return
        op = f"{type(self).__name__}.step"
        if not defer:
            # without deferral the decode reads the flushing rows' recurrence copy, which the flush rewrites
            raise ValueError(f"{op}: concurrent_flush needs deferred flushing rows (standard mode with "
                             f"defer_flush_rows=True); got mode {'standard' if self.mode == 0 else 'speculative'}, "
                             f"defer_flush_rows={self.defer_flush_rows}")
        if self.device.type != "cuda":
            raise ValueError(f"{op}: concurrent_flush needs a CUDA device; the cache is on {self.device}")
        cur = torch.cuda.current_stream(self.device)
        side = _flush_stream(self.device)
        side.wait_stream(cur)  # the step's inputs and the cursors are ready
        with torch.cuda.stream(side):
            flush()
        decode()
        cur.wait_stream(side)  # the flushing rows' outputs and copies are written before anything after the step

    def commit(self, sbi: torch.Tensor, accepted: Optional[torch.Tensor] = None, T: int = 1) -> None:
        torch.ops.replayssm.replay_commit(sbi, accepted, self.ring_origin, self.ring_len, None, self.window,
                                          self.capacity, T, self.mode)

    def read_state(self, which: str = "hp") -> torch.Tensor:
        """Decoded fp32 checkpoint [S, H, P, 128] of the recurrence ('hp') or read ('lp') copy."""
        c = self.lp if which == "lp" or self.hp is None else self.hp
        return state_decode(c)


class Mamba2DualPrecisionCache(_DualPrecisionCacheBase):
    family = "mamba2"

    def __init__(self, num_slots, H, P, G, window, max_verify=1, mode="standard", read_fmt="fp16",
                 recurrence_fmt: Optional[str] = "fp32", rounding: Optional[str] = None, act_dtype=torch.float16,
                 seed: int = 0, layer: int = 0, device="cuda"):
        self._init(num_slots, H, P, window, max_verify, mode, read_fmt, recurrence_fmt, rounding, seed, layer, device)
        self.H, self.P, self.G, self.act_dtype = H, P, G, act_dtype
        S, C = num_slots, self.capacity
        self.ring_dt = torch.zeros(S, C, H, dtype=torch.float32, device=device)
        self.ring_x = torch.zeros(S, C, H, P, dtype=act_dtype, device=device)
        self.ring_B = torch.zeros(S, C, G, ROW_N, dtype=act_dtype, device=device)
        # standard steps: the flushing rows are decoded by the flush (their token folded at once, outputs from the
        # folded state) instead of by a decode kernel that re-reads the recurrence copy; False: the decode does it
        self.defer_flush_rows = self.mode == 0

    def decode(self, sbi, x, dt_raw, B, C, A, D=None, dt_bias=None, z=None, y=None,
               defer_flush_rows: bool = False) -> torch.Tensor:
        """defer_flush_rows: leave the flushing rows (outputs, records) to flush(..., step_inputs=...)."""
        y = torch.empty_like(x) if y is None else y
        hp, hps = self._hp_args()
        torch.ops.replayssm.dp_mamba2_decode(hp, hps, self.lp.data, self.lp.scale, self.lp.gscale, self.ring_dt,
                                             self.ring_x, self.ring_B, self.ring_origin, self.ring_len, x, dt_raw, B, C,
                                             A, D, dt_bias, z, sbi, y, self.window, self.mode,
                                             self.recurrence_fmt or self.read_fmt, self.read_fmt, defer_flush_rows)
        return y

    def flush(self, sbi, A, T: int = 1, flushed=None, count: bool = True,
              step_inputs: Optional[dict] = None) -> torch.Tensor:
        """step_inputs (after decode(..., defer_flush_rows=True)): dict of this step's x, dt_raw, B, C, y and
        optionally z, D, dt_bias; the flushing rows' y is written here."""
        return self._flush(sbi, T, {"A": A, "ring_dt": self.ring_dt, "ring_x": self.ring_x, "ring_B": self.ring_B},
                           flushed, count, step_inputs)

    def step(self, sbi, x, dt_raw, B, C, A, D=None, dt_bias=None, z=None, flushed=None, count: bool = True,
             y=None):
        """decode + flush (cursors unchanged; call commit after). Standard mode with defer_flush_rows (default):
        the flushing rows are decoded by the flush."""
        defer = self.defer_flush_rows and self.mode == 0
        y = torch.empty_like(x) if y is None else y  # before a fork: the flush writes the flushing rows' y
        inputs = {"x": x, "dt_raw": dt_raw, "B": B, "C": C, "z": z, "D": D, "dt_bias": dt_bias, "y": y} if defer else None
        self._decode_and_flush(defer,
                               lambda: self.decode(sbi, x, dt_raw, B, C, A, D, dt_bias, z, y, defer_flush_rows=defer),
                               lambda: self.flush(sbi, A, x.shape[1], flushed, count, inputs))
        return y


class GdnDualPrecisionCache(_DualPrecisionCacheBase):
    family = "gdn"

    def __init__(self, num_slots, H, HV, V, window, max_verify=1, mode="standard", read_fmt="fp16",
                 recurrence_fmt: Optional[str] = "fp32", rounding: Optional[str] = None, act_dtype=torch.float16,
                 seed: int = 0, layer: int = 0, device="cuda"):
        self._init(num_slots, HV, V, window, max_verify, mode, read_fmt, recurrence_fmt, rounding, seed, layer, device)
        self.H, self.HV, self.V, self.act_dtype = H, HV, V, act_dtype
        S, C = num_slots, self.capacity
        self.ring_g = torch.zeros(S, C, HV, dtype=torch.float32, device=device)
        self.ring_u = torch.zeros(S, C, HV, V, dtype=torch.float16, device=device)
        self.ring_k = torch.zeros(S, C, H, ROW_N, dtype=act_dtype, device=device)
        self.ring_beta = torch.zeros(S, C, HV, dtype=torch.float32, device=device)
        self.ring_v = torch.zeros(S, C, HV, V, dtype=act_dtype, device=device)
        # standard steps: the flushing rows are decoded by the flush (see Mamba2DualPrecisionCache)
        self.defer_flush_rows = self.mode == 0

    def decode(self, sbi, q, k, v, a, b, A_log, dt_bias, scale: Optional[float] = None, o=None,
               defer_flush_rows: bool = False) -> torch.Tensor:
        """defer_flush_rows: leave the flushing rows (outputs, records) to flush(..., step_inputs=...)."""
        o = torch.empty_like(v) if o is None else o
        scale = ROW_N ** -0.5 if scale is None else float(scale)
        hp, hps = self._hp_args()
        torch.ops.replayssm.dp_gdn_decode(hp, hps, self.lp.data, self.lp.scale, self.lp.gscale, self.ring_g,
                                          self.ring_u, self.ring_k, self.ring_beta, self.ring_v, self.ring_origin,
                                          self.ring_len, q, k, v, a, b, A_log, dt_bias, sbi, o, self.window, self.mode,
                                          self.recurrence_fmt or self.read_fmt, self.read_fmt, scale, defer_flush_rows)
        return o

    def flush(self, sbi, T: int = 1, flushed=None, count: bool = True,
              step_inputs: Optional[dict] = None) -> torch.Tensor:
        """step_inputs (after decode(..., defer_flush_rows=True)): dict of this step's q, k, v, a, b, A_log,
        gdn_dt_bias, o and scale; the flushing rows' o is written here."""
        return self._flush(sbi, T, {"ring_g": self.ring_g, "ring_k": self.ring_k, "ring_beta": self.ring_beta,
                                    "ring_v": self.ring_v}, flushed, count, step_inputs)

    def step(self, sbi, q, k, v, a, b, A_log, dt_bias, scale=None, flushed=None, count: bool = True, o=None):
        """decode + flush (cursors unchanged; call commit after). Standard mode with defer_flush_rows (default):
        the flushing rows are decoded by the flush."""
        defer = self.defer_flush_rows and self.mode == 0
        o = torch.empty_like(v) if o is None else o  # before a fork: the flush writes the flushing rows' o
        inputs = None
        if defer:
            inputs = {"q": q, "k": k, "v": v, "a": a, "b": b, "A_log": A_log, "gdn_dt_bias": dt_bias, "o": o,
                      "scale": ROW_N ** -0.5 if scale is None else float(scale)}
        self._decode_and_flush(defer,
                               lambda: self.decode(sbi, q, k, v, a, b, A_log, dt_bias, scale, o, defer_flush_rows=defer),
                               lambda: self.flush(sbi, q.shape[1], flushed, count, inputs))
        return o
