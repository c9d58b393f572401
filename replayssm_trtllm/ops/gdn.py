"""Gated DeltaNet decode ops (namespace ``replayssm``) over the CUDA launchers of
``cpp_plugins/kernels/gdn/gdn.h``, called through ctypes on ``torch.cuda.current_stream()``.

Ops (all mutate their outputs in place and return nothing; the Python wrappers below allocate)::

    torch.ops.replayssm.gdn_decode(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias,
                                   o, scale, snapshot, variant=0)
        conventional decode. snapshot=False: state_indices [B] (or [B, 1]); T tokens applied in place.
        snapshot=True (per-draft snapshots, vLLM-style verify): state_indices [B, >= T]; the state
        is read from column num_accepted[b]-1 (column 0 when num_accepted is None) and the state
        after draft s is written to column s.
    torch.ops.replayssm.gdn_replay(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u,
                                   ring_k, q, k, v, a, b, A_log, dt_bias, o, window, mode, scale, variant=0)
        ReplaySSM standard decode (mode 0, Algorithm 4) or speculative verify (mode 1, Algorithm 5).
        Reads the cursors, appends this step's records at (origin + h + s) % C, flushes rows whose
        cursors say so (design.md 3.1). Never writes cursors: call ``replay_commit`` once per model
        step after all layers.
    ``variant`` (both ops): kernel design, same results (``VARIANTS``; docs/kernels-gdn.md "Variants");
    the replay op also takes ``VARIANT_AUTO`` (-1, the wrappers' default: the library picks, the split kernels
    at large batches, with a workspace the op allocates).

Shapes: q, k [B, T, H, K]; v [B, T, HV, V]; a, b [B, T, HV] (bf16 or fp16, one dtype for all,
last dim contiguous, q/k 8-byte aligned); A_log, dt_bias [HV] fp32; state [S, HV, V, K] fp32 (or
fp16/bf16); o [B, T, HV, V] act dtype; ring_g [S, C, HV] fp32; ring_u [S, C, HV, V] fp16 (bf16
only for accuracy studies); ring_k [S, C, H, K] act dtype. K in {64, 128, 256}, HV % H == 0,
T <= 8, window <= 64. Negative slots are padding rows: nothing of theirs is read or written.
"""
from __future__ import annotations

import ctypes
from typing import Optional

import torch

from ._lib import DTYPE_CODE_BY_NAME, c_launcher, host_function, launch_on_current_stream

__all__ = [
    "GdnDecodeParams", "GdnReplayParams", "gdn_decode", "gdn_replay", "GdnReplayStateCache",
    "MODE_STANDARD", "MODE_SPECULATIVE", "MAX_TOKENS", "MAX_WINDOW", "VARIANTS", "DECODE_VARIANTS",
    "VARIANT_SPLIT", "VARIANT_AUTO", "REPLAY_VARIANTS", "default_replay_variant", "default_decode_variant",
    "replay_workspace_bytes",
    "replay_auto_variant", "replay_split_min_batch_heads",
]

MODE_STANDARD = 0
MODE_SPECULATIVE = 1
MAX_TOKENS = 8
MAX_WINDOW = 64
# Kernel designs behind both ops (``variant`` argument; same results, different speed):
# 0 = register kernels (verified first), 1 = shared-memory tile kernels with the tile picked per
# batch size (small-batch route included), 2 = tile kernels with the other tile choice (conventional:
# 32-row tiles at K = 128; replay: one whole head per CTA), 3, 4, 5 = stream kernels (rows in
# registers, column-per-lane layout; 8 warps x 16 rows, 4 x 16, 4 x 8 per CTA at K = 128; head_k 128
# or 256 only, K = 64 is refused with an error), 6 = split kernels, replay only (a prep kernel writes
# per-(row, value head) coefficients to a workspace the op allocates, a readout kernel streams the
# checkpoint; head_k 128 / 256, head_v % 8 == 0, at most 32 records per step); in the conventional decode
# 6 = the warp-item kernel (one warp per 8 value rows, no shared memory or CTA barrier; one token in place,
# head_k 128 / 256, head_v % 8 == 0; anything else runs variant 5). docs/kernels-gdn.md, "Variants".
VARIANTS = (0, 1, 2, 3, 4, 5, 6)
DECODE_VARIANTS = (0, 1, 2, 3, 4, 5, 6)
VARIANT_SPLIT = 6
_HEAD_K = (64, 128, 256)


VARIANT_AUTO = -1  # replay only: the C library's automatic choice (GDN_VARIANT_AUTO in gdn.h)
REPLAY_VARIANTS = (VARIANT_AUTO,) + VARIANTS


def default_replay_variant(head_k: int) -> int:
    """The kernel design ``VARIANT_AUTO`` falls back to for ``head_k`` when neither the split kernels nor the
    warp-item kernel take a step (no workspace, a small batch): stream kernel 4 for head_k 128/256, tile kernel 1
    for head_k 64 (the stream kernels need head_k % 128 == 0). The torch ops default to ``VARIANT_AUTO``: the
    C library picks the split kernels (6, with a workspace the op allocates) where they run the sizes and
    B x HV reaches ``replay_split_min_batch_heads(T, state_dtype)`` (measured per token count: fp32 checkpoints
    768 at T = 1, 4096 at T = 2, 1024 at T = 3, 512 at T = 4-7, 256 at T = 8; 16-bit checkpoints 2048 at T = 1-2;
    docs/kernels-gdn.md "Fifty-second session", "Fifty-third session", "Fifty-seventh session"), variant 5 for the
    standard steps its warp-item kernel runs (head_k 128, B x HV <= 128: ``replay_uses_warp_items``), else this.
    The TensorRT plugins ask for ``VARIANT_AUTO`` too."""
    return 4 if int(head_k) in (128, 256) else 1


def default_decode_variant(head_k: int) -> int:
    """The conventional decode's kernel design when ``gdn_decode(variant=None)``: the warp-item kernel 6 for
    head_k 128/256 (fastest measured at B = 256 and B = 1, seventh session; it runs variant 5 itself for per-draft
    snapshots or T > 1), the register kernel 0 for head_k 64."""
    return 6 if int(head_k) in (128, 256) else 0


_DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_I32, _I64, _F32, _P = ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_void_p


class GdnDecodeParams(ctypes.Structure):
    """ctypes mirror of ``GdnDecodeParams`` (cpp_plugins/kernels/gdn/gdn.h)."""
    _fields_ = (
        [(n, _I32) for n in ("batch", "num_tokens", "num_heads", "num_v_heads", "head_k", "head_v", "num_slots",
                             "snapshot", "indices_cols", "state_dtype", "act_dtype", "rows_per_cta")]
        + [("scale", _F32), ("variant", _I32)]
        + [(n, _I64) for n in ("state_stride_slot", "state_stride_head", "state_stride_v", "indices_stride_b",
                               "q_stride_b", "q_stride_t", "q_stride_h", "k_stride_b", "k_stride_t", "k_stride_h",
                               "v_stride_b", "v_stride_t", "v_stride_h", "a_stride_b", "a_stride_t",
                               "b_stride_b", "b_stride_t", "o_stride_b", "o_stride_t", "o_stride_h")]
        + [(n, _P) for n in ("state", "state_indices", "num_accepted", "q", "k", "v", "a", "b", "A_log", "dt_bias",
                             "o")]
    )


class GdnReplayParams(ctypes.Structure):
    """ctypes mirror of ``GdnReplayParams`` (cpp_plugins/kernels/gdn/gdn.h)."""
    _fields_ = (
        [(n, _I32) for n in ("batch", "num_tokens", "num_heads", "num_v_heads", "head_k", "head_v", "num_slots",
                             "window", "ring_capacity", "mode", "state_dtype", "act_dtype", "u_dtype",
                             "rows_per_cta")]
        + [("scale", _F32), ("variant", _I32)]
        + [(n, _I64) for n in ("state_stride_slot", "state_stride_head", "state_stride_v",
                               "q_stride_b", "q_stride_t", "q_stride_h", "k_stride_b", "k_stride_t", "k_stride_h",
                               "v_stride_b", "v_stride_t", "v_stride_h", "a_stride_b", "a_stride_t",
                               "b_stride_b", "b_stride_t", "o_stride_b", "o_stride_t", "o_stride_h",
                               "ring_g_stride_slot", "ring_g_stride_rec",
                               "ring_u_stride_slot", "ring_u_stride_rec", "ring_u_stride_head",
                               "ring_k_stride_slot", "ring_k_stride_rec", "ring_k_stride_head")]
        + [(n, _P) for n in ("state", "state_batch_indices", "ring_origin", "ring_len", "ring_g", "ring_u", "ring_k",
                             "q", "k", "v", "a", "b", "A_log", "dt_bias", "o")]
        + [("skip_flush_rows", _I32), ("pad_dp", _I32), ("ring_beta", _P), ("ring_v", _P)]
        + [("workspace", _P), ("workspace_bytes", _I64)]
    )


def replay_auto_variant(p: "GdnReplayParams", has_workspace: bool = True) -> int:
    """The kernel design ``VARIANT_AUTO`` resolves to for ``p`` (the C library's rule, host-only)."""
    fn = host_function("rssm_gdn_replay_auto_variant", [ctypes.POINTER(GdnReplayParams), ctypes.c_int], ctypes.c_int)
    return int(fn(ctypes.byref(p), int(bool(has_workspace))))


def replay_split_min_batch_heads(num_tokens: int, state_dtype: str = "fp32") -> int:
    """The smallest batch x num_v_heads at which ``VARIANT_AUTO`` takes the split kernels for a step of
    ``num_tokens`` tokens with ``state_dtype`` checkpoints ("fp32", "fp16", "bf16": the C library's tables, measured
    per token count and for fp32 / 16-bit checkpoints, or ``RSSM_GDN_SPLIT_MIN_BH`` where set: docs/switches.md; 0
    outside 1..MAX_TOKENS)."""
    if state_dtype not in DTYPE_CODE_BY_NAME:
        raise ValueError(f"replay_split_min_batch_heads: state_dtype must be one of {sorted(DTYPE_CODE_BY_NAME)}; "
                         f"got {state_dtype!r}")
    fn = host_function("rssm_gdn_replay_split_min_batch_heads_for", [ctypes.c_int, ctypes.c_int], ctypes.c_int)
    return int(fn(int(num_tokens), DTYPE_CODE_BY_NAME[state_dtype]))


def replay_uses_warp_items(p: "GdnReplayParams") -> bool:
    """Whether variant 5 runs the standard step of ``p`` on the warp-item kernel (the C library's rule, host-only;
    reads ``RSSM_GDN_WIR`` as the launcher does)."""
    fn = host_function("rssm_gdn_replay_uses_warp_items", [ctypes.POINTER(GdnReplayParams)], ctypes.c_int)
    return bool(fn(ctypes.byref(p)))


def replay_workspace_bytes(p: "GdnReplayParams") -> int:
    """Workspace bytes the replay launch of ``p`` needs (> 0 for the split variant 6, else 0)."""
    fn = host_function("rssm_gdn_replay_workspace_bytes", [ctypes.POINTER(GdnReplayParams)], ctypes.c_int64)
    return int(fn(ctypes.byref(p)))


_launcher = c_launcher  # the name the GPU tests use


# ------------------------------------------------------------------------------------------------
# validation (host side, no device sync)
# ------------------------------------------------------------------------------------------------
def _desc(t) -> str:
    if not isinstance(t, torch.Tensor):
        return type(t).__name__
    return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)} on {t.device}"


def _dims(dims, sizes) -> str:
    return "[" + ", ".join(f"{d}={sizes[d]}" if isinstance(d, str) and d in sizes else str(d) for d in dims) + "]"


def _expect(op: str, name: str, t, dims, sizes: dict, dtypes, device=None, last_contig: bool = True):
    """Shape/dtype/device check; binds new symbols in ``sizes``. Raises ValueError otherwise."""
    dnames = "/".join(str(d).replace("torch.", "") for d in dtypes)
    ok = isinstance(t, torch.Tensor) and t.dim() == len(dims) and t.dtype in dtypes
    if ok:
        for d, n in zip(dims, t.shape):
            if isinstance(d, int):
                ok = ok and n == d
            elif d in sizes:
                ok = ok and n == sizes[d]
    if not ok:
        raise ValueError(f"{op}: '{name}' must be {dnames} {_dims(dims, sizes)}; got {_desc(t)}")
    for d, n in zip(dims, t.shape):
        if isinstance(d, str) and d not in sizes:
            sizes[d] = int(n)
    if device is not None and t.device != device:
        raise ValueError(f"{op}: '{name}' must be on {device} (with the other tensors); got {t.device}")
    if last_contig and t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(f"{op}: '{name}' needs a contiguous last dim (stride 1); got strides {list(t.stride())}")
    return t


def _check_common(op, q, k, v, a, b, A_log, dt_bias, o, sizes, require_cuda: bool = True):
    _expect(op, "q", q, ["B", "T", "H", "K"], sizes, (torch.bfloat16, torch.float16))
    act = (q.dtype,)
    _expect(op, "k", k, ["B", "T", "H", "K"], sizes, act)
    _expect(op, "v", v, ["B", "T", "HV", "V"], sizes, act)
    _expect(op, "a", a, ["B", "T", "HV"], sizes, act)
    _expect(op, "b", b, ["B", "T", "HV"], sizes, act)
    _expect(op, "A_log", A_log, ["HV"], sizes, (torch.float32,))
    _expect(op, "dt_bias", dt_bias, ["HV"], sizes, (torch.float32,))
    _expect(op, "o", o, ["B", "T", "HV", "V"], sizes, act)
    dev = q.device
    if require_cuda and dev.type != "cuda":
        raise ValueError(f"{op}: tensors must be on a CUDA device; got 'q' on {dev}")
    for name, t in (("k", k), ("v", v), ("a", a), ("b", b), ("A_log", A_log), ("dt_bias", dt_bias), ("o", o)):
        if t.device != dev:
            raise ValueError(f"{op}: '{name}' must be on {dev} (with 'q'); got {t.device}")
    if sizes["K"] not in _HEAD_K:
        raise ValueError(f"{op}: key head dim K must be one of {_HEAD_K}; got K={sizes['K']} (from 'q' {list(q.shape)})")
    if sizes["HV"] % sizes["H"] != 0:
        raise ValueError(f"{op}: value heads HV={sizes['HV']} must be a multiple of key heads H={sizes['H']} "
                         f"(from 'v' {list(v.shape)} and 'q' {list(q.shape)})")
    if not 1 <= sizes["T"] <= MAX_TOKENS:
        raise ValueError(f"{op}: tokens per step T must be in [1, {MAX_TOKENS}]; got T={sizes['T']}")
    for name, t in (("q", q), ("k", k)):
        if t.data_ptr() % 8 or any(s % 4 for s in t.stride()[:-1]):
            raise ValueError(f"{op}: '{name}' needs an 8-byte aligned base and strides that are multiples of 4 "
                             f"elements; got strides {list(t.stride())}")
    return dev


def _check_state(op, state, sizes, dev):
    _expect(op, "state", state, ["S", "HV", "V", "K"], sizes, tuple(_DTYPE_CODE), dev)
    esz = state.element_size()
    if state.data_ptr() % (4 * esz) or any(s % 4 for s in state.stride()[:-1]):
        raise ValueError(f"{op}: 'state' needs a {4 * esz}-byte aligned base and strides that are multiples of 4 "
                         f"elements; got strides {list(state.stride())}")


def _fill_act(p, q, k, v, a, b, o):
    p.q_stride_b, p.q_stride_t, p.q_stride_h = q.stride()[:3]
    p.k_stride_b, p.k_stride_t, p.k_stride_h = k.stride()[:3]
    p.v_stride_b, p.v_stride_t, p.v_stride_h = v.stride()[:3]
    p.a_stride_b, p.a_stride_t = a.stride()[:2]
    p.b_stride_b, p.b_stride_t = b.stride()[:2]
    p.o_stride_b, p.o_stride_t, p.o_stride_h = o.stride()[:3]
    p.q, p.k, p.v, p.a, p.b, p.o = (t.data_ptr() for t in (q, k, v, a, b, o))


def _check_variant(op, variant, allowed=VARIANTS) -> int:
    if int(variant) not in allowed:
        raise ValueError(f"{op}: variant must be one of {allowed}; got {variant!r}")
    return int(variant)


def _call(name, struct, p, dev, op):
    launch_on_current_stream(_launcher(name, struct), p, dev, op)


# ------------------------------------------------------------------------------------------------
# conventional decode
# ------------------------------------------------------------------------------------------------
def validate_decode_args(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias, o, snapshot,
                         require_cuda: bool = True):
    op = "gdn_decode"
    sizes: dict = {}
    dev = _check_common(op, q, k, v, a, b, A_log, dt_bias, o, sizes, require_cuda)
    _check_state(op, state, sizes, dev)
    if state_indices.dim() == 1:
        _expect(op, "state_indices", state_indices, ["B"], sizes, (torch.int32,), dev)
    else:
        _expect(op, "state_indices", state_indices, ["B", "cols"], sizes, (torch.int32,), dev)
    cols = state_indices.shape[1] if state_indices.dim() == 2 else 1
    if snapshot and cols < sizes["T"]:
        raise ValueError(f"gdn_decode: snapshot mode needs 'state_indices' [B, >= T={sizes['T']}]; "
                         f"got {_desc(state_indices)}")
    if not snapshot and cols != 1:
        raise ValueError(f"gdn_decode: 'state_indices' must be int32 [B] without snapshots; got {_desc(state_indices)}")
    if num_accepted is not None:
        if not snapshot:
            raise ValueError("gdn_decode: 'num_accepted' is only valid with snapshot=True")
        _expect(op, "num_accepted", num_accepted, ["B"], sizes, (torch.int32,), dev)
    return sizes, dev, cols


@torch.library.custom_op("replayssm::gdn_decode", mutates_args=("state", "o"))
def _gdn_decode_op(state: torch.Tensor, state_indices: torch.Tensor, num_accepted: Optional[torch.Tensor],
                   q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   A_log: torch.Tensor, dt_bias: torch.Tensor, o: torch.Tensor, scale: float,
                   snapshot: bool, variant: int = 0) -> None:
    sizes, dev, cols = validate_decode_args(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias, o,
                                            snapshot)
    p = GdnDecodeParams()
    p.batch, p.num_tokens, p.num_heads, p.num_v_heads = sizes["B"], sizes["T"], sizes["H"], sizes["HV"]
    p.head_k, p.head_v, p.num_slots = sizes["K"], sizes["V"], sizes["S"]
    p.snapshot, p.indices_cols = int(bool(snapshot)), cols
    p.state_dtype, p.act_dtype = _DTYPE_CODE[state.dtype], _DTYPE_CODE[q.dtype]
    p.rows_per_cta, p.scale, p.variant = 0, float(scale), _check_variant("gdn_decode", variant, DECODE_VARIANTS)
    p.state_stride_slot, p.state_stride_head, p.state_stride_v = state.stride()[:3]
    p.indices_stride_b = state_indices.stride(0) if state_indices.dim() == 2 else 1
    _fill_act(p, q, k, v, a, b, o)
    p.state, p.state_indices = state.data_ptr(), state_indices.data_ptr()
    p.num_accepted = num_accepted.data_ptr() if num_accepted is not None else None
    p.A_log, p.dt_bias = A_log.data_ptr(), dt_bias.data_ptr()
    _call("rssm_gdn_decode_launch", GdnDecodeParams, p, dev, "gdn_decode")


@_gdn_decode_op.register_fake
def _gdn_decode_fake(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias, o, scale, snapshot,
                     variant=0) -> None:
    return None


def gdn_decode(state, state_indices, q, k, v, a, b, A_log, dt_bias, scale: Optional[float] = None,
               num_accepted=None, snapshot: bool = False, out: Optional[torch.Tensor] = None,
               variant: Optional[int] = None) -> torch.Tensor:
    """Conventional GDN decode; returns ``o`` [B, T, HV, V] (``out`` if given). See the module doc;
    ``variant`` picks the kernel design (``DECODE_VARIANTS``); None: ``default_decode_variant(head_k)``."""
    if variant is None:
        variant = default_decode_variant(q.shape[-1])
    if out is None:
        out = torch.empty(v.shape, dtype=q.dtype, device=q.device)
    scale = float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
    torch.ops.replayssm.gdn_decode(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias, out, scale,
                                   bool(snapshot), int(variant))
    return out


# ------------------------------------------------------------------------------------------------
# ReplaySSM decode / verify
# ------------------------------------------------------------------------------------------------
def validate_replay_args(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k, q, k, v, a, b,
                         A_log, dt_bias, o, window, mode, require_cuda: bool = True):
    op = "gdn_replay"
    sizes: dict = {}
    dev = _check_common(op, q, k, v, a, b, A_log, dt_bias, o, sizes, require_cuda)
    _check_state(op, state, sizes, dev)
    _expect(op, "state_batch_indices", state_batch_indices, ["B"], sizes, (torch.int32,), dev)
    _expect(op, "ring_origin", ring_origin, ["S"], sizes, (torch.int32,), dev)
    _expect(op, "ring_len", ring_len, ["S"], sizes, (torch.int32,), dev)
    _expect(op, "ring_g", ring_g, ["S", "C", "HV"], sizes, (torch.float32,), dev)
    _expect(op, "ring_u", ring_u, ["S", "C", "HV", "V"], sizes, (torch.float16, torch.bfloat16), dev)
    _expect(op, "ring_k", ring_k, ["S", "C", "H", "K"], sizes, (q.dtype,), dev)
    if ring_k.data_ptr() % 8 or any(s % 4 for s in ring_k.stride()[:-1]):
        raise ValueError(f"{op}: 'ring_k' needs an 8-byte aligned base and strides that are multiples of 4 elements; "
                         f"got strides {list(ring_k.stride())}")
    if mode not in (MODE_STANDARD, MODE_SPECULATIVE):
        raise ValueError(f"{op}: mode must be 0 (standard) or 1 (speculative); got {mode!r}")
    if mode == MODE_STANDARD and sizes["T"] != 1:
        raise ValueError(f"{op}: standard mode takes T = 1 token per row; got T={sizes['T']} (from 'q')")
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"{op}: window must be in [1, {MAX_WINDOW}]; got {window}")
    need = window if mode == MODE_STANDARD else window + sizes["T"]
    if sizes["C"] < need:
        raise ValueError(f"{op}: ring capacity C (dim 1 of 'ring_g') must be >= "
                         f"{'window' if mode == MODE_STANDARD else 'window + T'} = {need}; got C={sizes['C']}")
    return sizes, dev


@torch.library.custom_op("replayssm::gdn_replay", mutates_args=("state", "ring_g", "ring_u", "ring_k", "o"))
def _gdn_replay_op(state: torch.Tensor, state_batch_indices: torch.Tensor, ring_origin: torch.Tensor,
                   ring_len: torch.Tensor, ring_g: torch.Tensor, ring_u: torch.Tensor, ring_k: torch.Tensor,
                   q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                   A_log: torch.Tensor, dt_bias: torch.Tensor, o: torch.Tensor, window: int, mode: int,
                   scale: float, variant: int = 0) -> None:
    sizes, dev = validate_replay_args(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k,
                                      q, k, v, a, b, A_log, dt_bias, o, window, mode)
    p = GdnReplayParams()
    p.batch, p.num_tokens, p.num_heads, p.num_v_heads = sizes["B"], sizes["T"], sizes["H"], sizes["HV"]
    p.head_k, p.head_v, p.num_slots = sizes["K"], sizes["V"], sizes["S"]
    p.window, p.ring_capacity, p.mode = int(window), sizes["C"], int(mode)
    p.state_dtype, p.act_dtype, p.u_dtype = _DTYPE_CODE[state.dtype], _DTYPE_CODE[q.dtype], _DTYPE_CODE[ring_u.dtype]
    p.rows_per_cta, p.scale, p.variant = 0, float(scale), _check_variant("gdn_replay", variant, REPLAY_VARIANTS)
    p.state_stride_slot, p.state_stride_head, p.state_stride_v = state.stride()[:3]
    _fill_act(p, q, k, v, a, b, o)
    p.ring_g_stride_slot, p.ring_g_stride_rec = ring_g.stride()[:2]
    p.ring_u_stride_slot, p.ring_u_stride_rec, p.ring_u_stride_head = ring_u.stride()[:3]
    p.ring_k_stride_slot, p.ring_k_stride_rec, p.ring_k_stride_head = ring_k.stride()[:3]
    p.state, p.state_batch_indices = state.data_ptr(), state_batch_indices.data_ptr()
    p.ring_origin, p.ring_len = ring_origin.data_ptr(), ring_len.data_ptr()
    p.ring_g, p.ring_u, p.ring_k = ring_g.data_ptr(), ring_u.data_ptr(), ring_k.data_ptr()
    p.A_log, p.dt_bias = A_log.data_ptr(), dt_bias.data_ptr()
    ws_bytes = replay_workspace_bytes(p)
    workspace = None
    if ws_bytes > 0:  # split kernels: per-step scratch from the caching allocator (graph-capture safe)
        workspace = torch.empty(ws_bytes, dtype=torch.uint8, device=q.device)
        p.workspace, p.workspace_bytes = workspace.data_ptr(), ws_bytes
    _call("rssm_gdn_replay_launch", GdnReplayParams, p, dev, "gdn_replay")
    del workspace  # the caching allocator keeps it valid for the work queued on this stream


@_gdn_replay_op.register_fake
def _gdn_replay_fake(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k, q, k, v, a, b,
                     A_log, dt_bias, o, window, mode, scale, variant=0) -> None:
    return None


def gdn_replay(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k, q, k, v, a, b, A_log,
               dt_bias, window: int, mode: int = MODE_STANDARD, scale: Optional[float] = None,
               out: Optional[torch.Tensor] = None, variant: Optional[int] = None) -> torch.Tensor:
    """ReplaySSM GDN step (standard or speculative); returns ``o`` [B, T, HV, V]. See the module doc;
    ``variant`` picks the kernel design (``REPLAY_VARIANTS``; None = ``VARIANT_AUTO``, the library's choice for
    this step's sizes)."""
    if variant is None:
        variant = VARIANT_AUTO
    if out is None:
        out = torch.empty(v.shape, dtype=q.dtype, device=q.device)
    scale = float(q.shape[-1]) ** -0.5 if scale is None else float(scale)
    torch.ops.replayssm.gdn_replay(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k, q, k, v,
                                   a, b, A_log, dt_bias, out, int(window), int(mode), scale, int(variant))
    return out


# ------------------------------------------------------------------------------------------------
# cache
# ------------------------------------------------------------------------------------------------
def _cursor_base():
    from .state_cache import ReplayCursorCache
    return ReplayCursorCache


class GdnReplayStateCache(_cursor_base()):
    """GDN replay cache for ``num_layers`` layers x ``num_slots`` slots; the cursors, commit and
    cursor reset come from :class:`ReplayCursorCache` (ops/state_cache.py), shared by all layers.

    Tensors (design.md 3), each one allocation with a leading layer dim:
    ``ckpt [nl, S, HV, V, K]`` (state_dtype), ``ring_g [nl, S, C, HV]`` fp32,
    ``ring_u [nl, S, C, HV, V]`` fp16 (``u_dtype``; bf16 only for accuracy studies),
    ``ring_k [nl, S, C, H, K]`` act dtype. ``variant`` None is ``VARIANT_AUTO``: the library picks the
    kernel design for each step's sizes (the split kernels at large batches).
    """

    def __init__(self, num_layers: int, num_slots: int, H: int, HV: int, K: int, V: int, window: int,
                 max_verify: int = 1, mode="standard", state_dtype: torch.dtype = torch.float32,
                 act_dtype: torch.dtype = torch.bfloat16, u_dtype: torch.dtype = torch.float16, device="cuda",
                 variant: Optional[int] = None):
        super().__init__(num_slots, window, max_verify, mode, device)
        op = "GdnReplayStateCache"
        if K not in _HEAD_K:
            raise ValueError(f"{op}: K must be one of {_HEAD_K}; got {K}")
        if H < 1 or HV % H:
            raise ValueError(f"{op}: HV={HV} must be a positive multiple of H={H}")
        if window > MAX_WINDOW or max_verify > MAX_TOKENS:
            raise ValueError(f"{op}: window <= {MAX_WINDOW} and max_verify <= {MAX_TOKENS} required; got "
                             f"window={window}, max_verify={max_verify}")
        if state_dtype not in _DTYPE_CODE or act_dtype not in (torch.float16, torch.bfloat16) \
                or u_dtype not in (torch.float16, torch.bfloat16):
            raise ValueError(f"{op}: unsupported dtypes state={state_dtype}, act={act_dtype}, u={u_dtype}")
        self.num_layers, self.H, self.HV, self.K, self.V = num_layers, H, HV, K, V
        self.state_dtype, self.act_dtype, self.u_dtype = state_dtype, act_dtype, u_dtype
        # None: the library's automatic choice for each step's sizes (the split kernels at large batches)
        self.variant = VARIANT_AUTO if variant is None else _check_variant(op, variant, REPLAY_VARIANTS)
        S, C, d = num_slots, self.capacity, self.device
        self.ckpt = torch.zeros(num_layers, S, HV, V, K, dtype=state_dtype, device=d)
        self.ring_g = torch.zeros(num_layers, S, C, HV, dtype=torch.float32, device=d)
        self.ring_u = torch.zeros(num_layers, S, C, HV, V, dtype=u_dtype, device=d)
        self.ring_k = torch.zeros(num_layers, S, C, H, K, dtype=act_dtype, device=d)

    def reset(self, slots, prefill_state: torch.Tensor, phase=None) -> Optional[list]:
        """Context phase: ``prefill_state`` ``[num_layers, n, HV, V, K]`` (or ``[n, HV, V, K]`` with one
        layer) becomes the checkpoint of ``slots`` (negative skipped); their rings become empty, or hold ``phase``
        neutral records (as in :meth:`ReplayStateCache.reset`, which says what it returns)."""
        idx = self._slots_tensor(slots)
        pre = prefill_state if prefill_state.dim() == 5 else prefill_state.unsqueeze(0)
        want = (self.num_layers, idx.shape[0], self.HV, self.V, self.K)
        if tuple(pre.shape) != want:
            raise ValueError(f"GdnReplayStateCache.reset: 'prefill_state' must be [num_layers, n, HV, V, K] = "
                             f"{list(want)}; got {list(prefill_state.shape)}")
        counts = self._admit("GdnReplayStateCache.reset", "gdn", idx, phase)   # checks the phase first
        self._store_checkpoints(idx, pre)
        return counts

    def step(self, layer: int, state_batch_indices: torch.Tensor, q, k, v, a, b, A_log, dt_bias,
             scale: Optional[float] = None, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One decode step of ``layer`` (q/k ``[B, T, H, K]``, T <= max_verify); returns o ``[B, T, HV, V]``."""
        if not 0 <= layer < self.num_layers:
            raise ValueError(f"GdnReplayStateCache.step: layer must be in [0, {self.num_layers}); got {layer}")
        T = int(q.shape[1])
        if T > self.max_verify:
            raise ValueError(f"GdnReplayStateCache.step: T={T} > max_verify={self.max_verify}")
        o = gdn_replay(self.ckpt[layer], state_batch_indices, self.ring_origin, self.ring_len, self.ring_g[layer],
                       self.ring_u[layer], self.ring_k[layer], q, k, v, a, b, A_log, dt_bias, self.window,
                       self.mode, scale, out, self.variant)
        self._note_step(state_batch_indices, T)
        return o

    def current_state(self, slots) -> torch.Tensor:
        """The recurrent state of ``slots`` after their committed tokens, as conventional decoding holds it:
        ``[num_layers, n, HV, V, K]`` fp32, the checkpoints with the committed ring records folded in
        (ops/ring_fold.py), nothing in the cache changed (as :meth:`ReplayStateCache.current_state`, which says what
        it is for; ``reset(slots2, cache.current_state(slots))`` resumes from it)."""
        from .ring_fold import gdn_fold_record
        return self._current_state("GdnReplayStateCache.current_state", slots, lambda layer, idx, ridx, S:
                                   gdn_fold_record(S, self.ring_g[layer, idx, ridx], self.ring_u[layer, idx, ridx],
                                                   self.ring_k[layer, idx, ridx]))

    def ring_bytes_per_slot_layer(self) -> int:
        act = torch.tensor([], dtype=self.act_dtype).element_size()
        u = torch.tensor([], dtype=self.u_dtype).element_size()
        return self.capacity * (4 * self.HV + u * self.HV * self.V + act * self.H * self.K)

    def state_bytes_per_slot_layer(self) -> int:
        return torch.tensor([], dtype=self.state_dtype).element_size() * self.HV * self.V * self.K
