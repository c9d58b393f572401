"""Mamba-2 decode torch ops (namespace ``replayssm``) over the CUDA kernel library.

``torch.ops.replayssm.mamba2_decode``        conventional decode; with ``snapshots`` and T > 1 the
                                             conventional per-draft-snapshot speculative verify.
``torch.ops.replayssm.mamba2_replay_decode`` ReplaySSM decode over checkpoint + ring (design.md 3.1),
                                             ``mode`` 0 = standard (T = 1), 1 = speculative (T <= 8).

Shapes (design.md section 2): x, z, y ``[B, T, H, P]`` (or ``[B, H, P]`` for T = 1, and y then has
that shape too), dt_raw ``[B, T, H]``, Bm/Cm ``[B, T, G, N]``, A/D/dt_bias ``[H]`` fp32,
state ``[S, H, P, N]``, ring_dt ``[S, C, H]`` fp32, ring_x ``[S, C, H, P]``, ring_B ``[S, C, G, N]``,
ring_origin/ring_len ``[S]`` int32, state_batch_indices ``[B]`` int32 (negative = padding row).

Every argument is checked on the host before the launch (no device sync); errors name the op, the
argument, the expected dtype/shape and what was given. The impls fill a ctypes mirror of the
kernel params struct and call the ``extern "C"`` launcher on ``torch.cuda.current_stream()``, so
they are capturable in CUDA graphs; ``register_fake`` makes them traceable by torch.compile.
"""
from __future__ import annotations

import ctypes
from typing import Optional, Sequence

import torch

from ._lib import c_launcher, host_function, launch_on_current_stream
from .commit import mode_code

__all__ = [
    "Mamba2DecodeParams", "Mamba2ReplayParams", "mamba2_decode", "mamba2_decode_out", "mamba2_replay_decode",
    "mamba2_replay_decode_out", "row_chunk",
    "SUPPORTED_HEADDIM", "SUPPORTED_DSTATE", "MAX_TOKENS", "MAX_WINDOW", "VARIANTS",
]

SUPPORTED_HEADDIM = (32, 64, 80, 128)
SUPPORTED_DSTATE = (64, 128, 256)
MAX_TOKENS = 8
MAX_WINDOW = 64
# Kernel designs (``variant`` argument, mamba2.h RSSM_MAMBA2_VARIANT_*): 0 = one CTA per (P tile, head, row),
# 1 = persistent producer/consumer pipeline with 8 consumer warps, 2 = the same with 4. All compute the same
# function; variants 1/2 fall back to 0 when the token tensors are not 16-byte aligned (see the header).
# 3 = stream kernel (replay only: one CTA per (head, row), checkpoint rows in registers; dstate 128/256;
# the conventional decode refuses it with an error). 4 = split kernels (replay only: a prep kernel writes
# per-(row, head) coefficients and ring parts to a workspace the op allocates, a readout kernel streams the
# checkpoint; dstate 128/256); in the conventional decode 4 = the warp-item kernel (persistent warps over
# 8-row items, dstate 128/256, 16-byte aligned token rows; otherwise it runs variant 2).
VARIANTS = (0, 1, 2, 3, 4)
SPLIT_VARIANT = 4

DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
STATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACT_DTYPES = (torch.float16, torch.bfloat16)

_i32, _i64, _ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p


def _strides(prefix: str, names: Sequence[str]):
    return [(f"stride_{prefix}_{n}", _i64) for n in names]


class Mamba2DecodeParams(ctypes.Structure):
    """ctypes mirror of ``Mamba2DecodeParams`` (cpp_plugins/kernels/mamba2/mamba2.h)."""
    _fields_ = (
        [(n, _i32) for n in ("batch", "num_tokens", "nheads", "headdim", "dstate", "ngroups", "num_slots",
                             "state_dtype", "act_dtype", "dt_dtype", "rows_per_cta", "variant")]
        + _strides("state", ("slot", "head", "p"))
        + _strides("snap", ("slot", "tok", "head", "p"))
        + _strides("x", "bth") + _strides("dt", "bth") + _strides("B", "btg") + _strides("C", "btg")
        + _strides("z", "bth") + _strides("y", "bth")
        + [(n, _ptr) for n in ("state_batch_indices", "state", "snapshots", "x", "dt_raw", "Bm", "Cm", "z", "A",
                               "D", "dt_bias", "y")]
    )


class Mamba2ReplayParams(ctypes.Structure):
    """ctypes mirror of ``Mamba2ReplayParams`` (cpp_plugins/kernels/mamba2/mamba2.h)."""
    _fields_ = (
        [(n, _i32) for n in ("batch", "num_tokens", "nheads", "headdim", "dstate", "ngroups", "num_slots",
                             "window", "ring_capacity", "mode", "state_dtype", "act_dtype", "dt_dtype",
                             "rows_per_cta", "variant", "skip_flush_rows")]
        + _strides("state", ("slot", "head", "p"))
        + _strides("x", "bth") + _strides("dt", "bth") + _strides("B", "btg") + _strides("C", "btg")
        + _strides("z", "bth") + _strides("y", "bth")
        + [(n, _ptr) for n in ("state_batch_indices", "ring_origin", "ring_len", "state", "ring_dt", "ring_x",
                               "ring_B", "x", "dt_raw", "Bm", "Cm", "z", "A", "D", "dt_bias", "y")]
        + [("workspace", _ptr), ("workspace_bytes", _i64)]
    )


def _fn(name, struct):
    """A C launcher (``struct``: its params struct), or for ``struct`` None the host query ``(int32, int32) -> int``."""
    if struct is None:
        return host_function(name, [ctypes.c_int32, ctypes.c_int32], ctypes.c_int)
    return c_launcher(name, struct)


def replay_workspace_bytes(p: "Mamba2ReplayParams") -> int:
    """Scratch bytes the replay launch of ``p`` needs (> 0 only for the split kernels, variant 4)."""
    fn = host_function("rssm_mamba2_replay_workspace_bytes", [ctypes.POINTER(Mamba2ReplayParams)], ctypes.c_int64)
    return int(fn(ctypes.byref(p)))


def row_chunk(state_dtype: torch.dtype, dstate: int) -> int:
    """P rows per chunk of the kernels (the granularity of ``rows_per_cta``); needs the library."""
    return int(_fn("rssm_mamba2_row_chunk", None)(DTYPE_CODE[state_dtype], dstate))


# ----------------------------------------------------------------------------------------- checks
def _dname(dt) -> str:
    return str(dt).replace("torch.", "")


def _desc(t: torch.Tensor) -> str:
    return f"{_dname(t.dtype)} {list(t.shape)}"


def _expect(op: str, name: str, t, dtypes, dim_names: str, shape: Sequence[int], device=None,
            last_contig: bool = False, contiguous: bool = False, optional: bool = False) -> None:
    """Raise ValueError unless ``t`` has one of ``dtypes`` and exactly ``shape``."""
    if t is None:
        if optional:
            return
        raise ValueError(f"{op}: '{name}' is required")
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{op}: '{name}' must be a tensor; got {type(t).__name__}")
    if not isinstance(dtypes, (tuple, list)):
        dtypes = (dtypes,)
    want_dt = " or ".join(_dname(d) for d in dtypes)
    if t.dtype not in dtypes or tuple(t.shape) != tuple(shape):
        raise ValueError(f"{op}: '{name}' must be {want_dt} [{dim_names}] = {list(shape)}; got {_desc(t)}")
    if device is not None and t.device != device:
        raise ValueError(f"{op}: '{name}' must be on {device}; got {t.device}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{op}: '{name}' must be contiguous; got strides {list(t.stride())}")
    if last_contig and t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{op}: '{name}' must have a contiguous last dim (stride 1); got strides {list(t.stride())}")


def _check_state_layout(op: str, name: str, t: torch.Tensor) -> None:
    vec = 16 // t.element_size()
    bad = [s for s in t.stride()[:-1] if s % vec != 0]
    if t.stride(-1) != 1 or bad or t.data_ptr() % 16 != 0:
        raise ValueError(f"{op}: '{name}' must have a contiguous last dim, 16-byte aligned rows and strides "
                         f"that are multiples of {vec} elements; got strides {list(t.stride())}, "
                         f"data_ptr % 16 = {t.data_ptr() % 16}")


def _as_4d(x, dt_raw, Bm, Cm, z):
    """Accept the T = 1 shorthand ([B, H, P] etc.); returns views with a T dim and a flag."""
    if x is not None and x.dim() == 3:
        return (x.unsqueeze(1), dt_raw.unsqueeze(1) if dt_raw is not None and dt_raw.dim() == 2 else dt_raw,
                Bm.unsqueeze(1) if Bm is not None and Bm.dim() == 3 else Bm,
                Cm.unsqueeze(1) if Cm is not None and Cm.dim() == 3 else Cm,
                z.unsqueeze(1) if z is not None and z.dim() == 3 else z, True)
    return x, dt_raw, Bm, Cm, z, False


def _check_inputs(op: str, x, dt_raw, Bm, Cm, A, D, dt_bias, z, state_batch_indices):
    """Checks the per-token inputs and weights; returns (B, T, H, P, G, N)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        got = _desc(x) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{op}: 'x' must be float16 or bfloat16 [B, T, H, P] (or [B, H, P]); got {got}")
    Bsz, T, H, P = x.shape
    dev = x.device
    _expect(op, "x", x, ACT_DTYPES, "B, T, H, P", (Bsz, T, H, P), dev, last_contig=True)
    if not isinstance(Bm, torch.Tensor) or Bm.dim() != 4:
        got = _desc(Bm) if isinstance(Bm, torch.Tensor) else type(Bm).__name__
        raise ValueError(f"{op}: 'B' must be {_dname(x.dtype)} [B, T, G, N]; got {got}")
    G, N = Bm.shape[2], Bm.shape[3]
    _expect(op, "B", Bm, x.dtype, "B, T, G, N", (Bsz, T, G, N), dev, last_contig=True)
    _expect(op, "C", Cm, x.dtype, "B, T, G, N", (Bsz, T, G, N), dev, last_contig=True)
    _expect(op, "dt_raw", dt_raw, (x.dtype, torch.float32), "B, T, H", (Bsz, T, H), dev)
    _expect(op, "z", z, x.dtype, "B, T, H, P", (Bsz, T, H, P), dev, last_contig=True, optional=True)
    _expect(op, "A", A, torch.float32, "H", (H,), dev, contiguous=True)
    _expect(op, "D", D, torch.float32, "H", (H,), dev, contiguous=True, optional=True)
    _expect(op, "dt_bias", dt_bias, torch.float32, "H", (H,), dev, contiguous=True, optional=True)
    _expect(op, "state_batch_indices", state_batch_indices, torch.int32, "B", (Bsz,), dev, contiguous=True,
            optional=True)
    if P not in SUPPORTED_HEADDIM:
        raise ValueError(f"{op}: head dim P must be one of {SUPPORTED_HEADDIM}; got {P}")
    if N not in SUPPORTED_DSTATE:
        raise ValueError(f"{op}: state size N must be one of {SUPPORTED_DSTATE}; got {N}")
    if G < 1 or H % G != 0:
        raise ValueError(f"{op}: H ({H}) must be a multiple of G ({G})")
    if not 1 <= T <= MAX_TOKENS:
        raise ValueError(f"{op}: T must be in [1, {MAX_TOKENS}]; got {T}")
    return Bsz, T, H, P, G, N


def _fill_token_strides(p, x, dt_raw, Bm, Cm, z, y):
    p.stride_x_b, p.stride_x_t, p.stride_x_h = x.stride(0), x.stride(1), x.stride(2)
    p.stride_dt_b, p.stride_dt_t, p.stride_dt_h = dt_raw.stride(0), dt_raw.stride(1), dt_raw.stride(2)
    p.stride_B_b, p.stride_B_t, p.stride_B_g = Bm.stride(0), Bm.stride(1), Bm.stride(2)
    p.stride_C_b, p.stride_C_t, p.stride_C_g = Cm.stride(0), Cm.stride(1), Cm.stride(2)
    if z is not None:
        p.stride_z_b, p.stride_z_t, p.stride_z_h = z.stride(0), z.stride(1), z.stride(2)
    p.stride_y_b, p.stride_y_t, p.stride_y_h = y.stride(0), y.stride(1), y.stride(2)
    p.x, p.dt_raw, p.Bm, p.Cm = x.data_ptr(), dt_raw.data_ptr(), Bm.data_ptr(), Cm.data_ptr()
    p.z = z.data_ptr() if z is not None else None
    p.y = y.data_ptr()


def _opt_ptr(t):
    return t.data_ptr() if t is not None else None


AUTO = -1  # the launcher picks the fastest verified design (mamba2.h RSSM_MAMBA2_VARIANT_AUTO)


def _check_variant(op: str, variant: int) -> int:
    if not isinstance(variant, int) or (variant not in VARIANTS and variant != AUTO):
        raise ValueError(f"{op}: variant must be one of {VARIANTS} or {AUTO} (auto); got {variant!r}")
    return variant


def _check_out(op: str, y, x) -> None:
    if not isinstance(y, torch.Tensor) or y.dtype != x.dtype or tuple(y.shape) != tuple(x.shape) \
            or y.device != x.device or (y.shape[-1] > 1 and y.stride(-1) != 1):
        got = f"{_desc(y)} on {y.device}" if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"{op}: 'y' must be {_dname(x.dtype)} {list(x.shape)} on {x.device} with a contiguous "
                         f"last dim; got {got}")


def _require_cuda(op: str, t: torch.Tensor) -> None:
    if t.device.type != "cuda":
        raise ValueError(f"{op}: tensors must be on a CUDA device; got {t.device}")


# ----------------------------------------------------------------------------- conventional decode
def validate_decode_args(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots):
    op = "mamba2_decode"
    x4, dt4, B4, C4, z4, squeezed = _as_4d(x, dt_raw, B, C, z)
    Bsz, T, H, P, G, N = _check_inputs(op, x4, dt4, B4, C4, A, D, dt_bias, z4, state_batch_indices)
    if not isinstance(state, torch.Tensor) or state.dim() != 4:
        got = _desc(state) if isinstance(state, torch.Tensor) else type(state).__name__
        raise ValueError(f"{op}: 'state' must be float32, float16 or bfloat16 [S, H, P, N]; got {got}")
    S = state.shape[0]
    _expect(op, "state", state, STATE_DTYPES, "S, H, P, N", (S, H, P, N), x.device)
    _check_state_layout(op, "state", state)
    if state_batch_indices is None and Bsz > S:
        raise ValueError(f"{op}: without state_batch_indices row b uses slot b, so B ({Bsz}) must be <= S ({S})")
    if snapshots is not None:
        _expect(op, "snapshots", snapshots, state.dtype, "S, T, H, P, N", (S, T, H, P, N), x.device)
        _check_state_layout(op, "snapshots", snapshots)
    return (x4, dt4, B4, C4, z4, squeezed), (Bsz, T, H, P, G, N, S)


def _decode_launch(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, rows_per_cta, y,
                   variant=AUTO):
    (x4, dt4, B4, C4, z4, squeezed), (Bsz, T, H, P, G, N, S) = validate_decode_args(
        state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots)
    _check_out("mamba2_decode", y, x)
    _require_cuda("mamba2_decode", x)
    y4 = y.unsqueeze(1) if squeezed else y
    p = Mamba2DecodeParams()
    p.batch, p.num_tokens, p.nheads, p.headdim, p.dstate, p.ngroups, p.num_slots = Bsz, T, H, P, N, G, S
    p.state_dtype, p.act_dtype = DTYPE_CODE[state.dtype], DTYPE_CODE[x.dtype]
    p.dt_dtype = DTYPE_CODE[dt4.dtype]
    p.rows_per_cta = rows_per_cta
    p.variant = _check_variant("mamba2_decode", variant)
    p.stride_state_slot, p.stride_state_head, p.stride_state_p = state.stride(0), state.stride(1), state.stride(2)
    if snapshots is not None:
        (p.stride_snap_slot, p.stride_snap_tok, p.stride_snap_head, p.stride_snap_p) = snapshots.stride()[:4]
    _fill_token_strides(p, x4, dt4, B4, C4, z4, y4)
    p.state_batch_indices = _opt_ptr(state_batch_indices)
    p.state = state.data_ptr()
    p.snapshots = _opt_ptr(snapshots)
    p.A, p.D, p.dt_bias = A.data_ptr(), _opt_ptr(D), _opt_ptr(dt_bias)
    launch_on_current_stream(_fn("rssm_mamba2_decode_launch", Mamba2DecodeParams), p, x.device, "mamba2_decode")


@torch.library.custom_op("replayssm::mamba2_decode", mutates_args=("state", "snapshots"))
def mamba2_decode(state: torch.Tensor, x: torch.Tensor, dt_raw: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                  A: torch.Tensor, D: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor],
                  z: Optional[torch.Tensor], state_batch_indices: Optional[torch.Tensor],
                  snapshots: Optional[torch.Tensor], rows_per_cta: int = 0, variant: int = AUTO) -> torch.Tensor:
    """Conventional decode of T tokens per row; returns y like x.

    ``snapshots is None``: the state of each row's slot is updated in place (T = 1: one standard step).
    Otherwise ``snapshots[S, T, H, P, N]`` receives the state after every token (per-draft verify) and
    ``state`` is only read. Padding rows (slot < 0) are skipped: their y rows are not written.
    """
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _decode_launch(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, rows_per_cta, y, variant)
    return y


@mamba2_decode.register_fake
def _mamba2_decode_fake(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots,
                        rows_per_cta=0, variant=AUTO):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("replayssm::mamba2_decode_out", mutates_args=("state", "snapshots", "y"))
def mamba2_decode_out(state: torch.Tensor, x: torch.Tensor, dt_raw: torch.Tensor, B: torch.Tensor,
                      C: torch.Tensor, A: torch.Tensor, D: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor],
                      z: Optional[torch.Tensor], state_batch_indices: Optional[torch.Tensor],
                      snapshots: Optional[torch.Tensor], y: torch.Tensor, rows_per_cta: int = 0,
                      variant: int = AUTO) -> None:
    """:func:`mamba2_decode` writing into a preallocated ``y`` (shape/dtype of x, last dim contiguous)."""
    _decode_launch(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, rows_per_cta, y, variant)


@mamba2_decode_out.register_fake
def _mamba2_decode_out_fake(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, y,
                            rows_per_cta=0, variant=AUTO):
    return None


# ---------------------------------------------------------------------------------- replay decode
def validate_replay_args(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias,
                         z, state_batch_indices, window, mode):
    op = "mamba2_replay_decode"
    x4, dt4, B4, C4, z4, squeezed = _as_4d(x, dt_raw, B, C, z)
    Bsz, T, H, P, G, N = _check_inputs(op, x4, dt4, B4, C4, A, D, dt_bias, z4, state_batch_indices)
    mode = mode_code(mode, op)
    if not isinstance(state, torch.Tensor) or state.dim() != 4:
        got = _desc(state) if isinstance(state, torch.Tensor) else type(state).__name__
        raise ValueError(f"{op}: 'state' (checkpoint) must be float32, float16 or bfloat16 [S, H, P, N]; got {got}")
    S = state.shape[0]
    dev = x.device
    _expect(op, "state", state, STATE_DTYPES, "S, H, P, N", (S, H, P, N), dev)
    _check_state_layout(op, "state", state)
    if not isinstance(ring_dt, torch.Tensor) or ring_dt.dim() != 3:
        got = _desc(ring_dt) if isinstance(ring_dt, torch.Tensor) else type(ring_dt).__name__
        raise ValueError(f"{op}: 'ring_dt' must be float32 [S, C, H]; got {got}")
    Cap = ring_dt.shape[1]
    _expect(op, "ring_dt", ring_dt, torch.float32, "S, C, H", (S, Cap, H), dev, contiguous=True)
    _expect(op, "ring_x", ring_x, x.dtype, "S, C, H, P", (S, Cap, H, P), dev, contiguous=True)
    _expect(op, "ring_B", ring_B, x.dtype, "S, C, G, N", (S, Cap, G, N), dev, contiguous=True)
    _expect(op, "ring_origin", ring_origin, torch.int32, "S", (S,), dev, contiguous=True)
    _expect(op, "ring_len", ring_len, torch.int32, "S", (S,), dev, contiguous=True)
    if state_batch_indices is None and Bsz > S:
        raise ValueError(f"{op}: without state_batch_indices row b uses slot b, so B ({Bsz}) must be <= S ({S})")
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"{op}: window L must be in [1, {MAX_WINDOW}]; got {window}")
    if mode == 0 and T != 1:
        raise ValueError(f"{op}: standard mode (0) takes T = 1 token per row; got T = {T}")
    need = window if mode == 0 else window + T
    if Cap < need:
        raise ValueError(f"{op}: ring capacity C = {Cap} too small: need >= "
                         f"{'L' if mode == 0 else 'L + T'} = {need}")
    return (x4, dt4, B4, C4, z4, squeezed), (Bsz, T, H, P, G, N, S, Cap, mode)


def _replay_launch(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
                   state_batch_indices, window, mode, rows_per_cta, y, variant=AUTO):
    (x4, dt4, B4, C4, z4, squeezed), (Bsz, T, H, P, G, N, S, Cap, mode_i) = validate_replay_args(
        state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
        state_batch_indices, window, mode)
    _check_out("mamba2_replay_decode", y, x)
    _require_cuda("mamba2_replay_decode", x)
    y4 = y.unsqueeze(1) if squeezed else y
    p = Mamba2ReplayParams()
    p.batch, p.num_tokens, p.nheads, p.headdim, p.dstate, p.ngroups, p.num_slots = Bsz, T, H, P, N, G, S
    p.window, p.ring_capacity, p.mode = window, Cap, mode_i
    p.state_dtype, p.act_dtype, p.dt_dtype = DTYPE_CODE[state.dtype], DTYPE_CODE[x.dtype], DTYPE_CODE[dt4.dtype]
    p.rows_per_cta = rows_per_cta
    p.variant = _check_variant("mamba2_replay_decode", variant)
    p.stride_state_slot, p.stride_state_head, p.stride_state_p = state.stride(0), state.stride(1), state.stride(2)
    _fill_token_strides(p, x4, dt4, B4, C4, z4, y4)
    p.state_batch_indices = _opt_ptr(state_batch_indices)
    p.ring_origin, p.ring_len = ring_origin.data_ptr(), ring_len.data_ptr()
    p.state, p.ring_dt, p.ring_x, p.ring_B = state.data_ptr(), ring_dt.data_ptr(), ring_x.data_ptr(), ring_B.data_ptr()
    p.A, p.D, p.dt_bias = A.data_ptr(), _opt_ptr(D), _opt_ptr(dt_bias)
    ws_bytes = replay_workspace_bytes(p)
    workspace = None
    if ws_bytes > 0:  # variant 4 (or auto picking it): per-step scratch from the caching allocator (graph-capture safe)
        workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=x.device)
        p.workspace, p.workspace_bytes = workspace.data_ptr(), ws_bytes
    launch_on_current_stream(_fn("rssm_mamba2_replay_launch", Mamba2ReplayParams), p, x.device,
                             "mamba2_replay_decode")


@torch.library.custom_op("replayssm::mamba2_replay_decode",
                         mutates_args=("state", "ring_dt", "ring_x", "ring_B"))
def mamba2_replay_decode(state: torch.Tensor, ring_dt: torch.Tensor, ring_x: torch.Tensor, ring_B: torch.Tensor,
                         ring_origin: torch.Tensor, ring_len: torch.Tensor, x: torch.Tensor, dt_raw: torch.Tensor,
                         B: torch.Tensor, C: torch.Tensor, A: torch.Tensor, D: Optional[torch.Tensor],
                         dt_bias: Optional[torch.Tensor], z: Optional[torch.Tensor],
                         state_batch_indices: Optional[torch.Tensor], window: int, mode: int,
                         rows_per_cta: int = 0, variant: int = AUTO) -> torch.Tensor:
    """ReplaySSM decode step of one layer; returns y like x. Cursors are read, never written: run
    ``replay_commit`` once after all layers of the model step. Padding rows: y rows not written."""
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _replay_launch(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
                   state_batch_indices, window, mode, rows_per_cta, y, variant)
    return y


@mamba2_replay_decode.register_fake
def _mamba2_replay_decode_fake(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D,
                               dt_bias, z, state_batch_indices, window, mode, rows_per_cta=0, variant=AUTO):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("replayssm::mamba2_replay_decode_out",
                         mutates_args=("state", "ring_dt", "ring_x", "ring_B", "y"))
def mamba2_replay_decode_out(state: torch.Tensor, ring_dt: torch.Tensor, ring_x: torch.Tensor,
                             ring_B: torch.Tensor, ring_origin: torch.Tensor, ring_len: torch.Tensor,
                             x: torch.Tensor, dt_raw: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                             A: torch.Tensor, D: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor],
                             z: Optional[torch.Tensor], state_batch_indices: Optional[torch.Tensor], window: int,
                             mode: int, y: torch.Tensor, rows_per_cta: int = 0, variant: int = AUTO) -> None:
    """:func:`mamba2_replay_decode` writing into a preallocated ``y``."""
    _replay_launch(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
                   state_batch_indices, window, mode, rows_per_cta, y, variant)


@mamba2_replay_decode_out.register_fake
def _mamba2_replay_decode_out_fake(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D,
                                   dt_bias, z, state_batch_indices, window, mode, y, rows_per_cta=0, variant=AUTO):
    return None
