"""Plugin field values from a ReplayConfig-like object (no TensorRT needed).

Any object with the attributes ``window``, ``max_verify``, ``recurrence_dtype``, ``read_dtype``,
``rounding`` (and optionally ``u_dtype``, ``seed``) is accepted, e.g. ``replayssm_trtllm.config.ReplayConfig``.
Each function returns an ordered list of ``(name, type, value)`` with type one of
'int32' | 'int64' | 'float32' | 'enum' (enums go to TensorRT as CHAR strings). The names, types and
ranges are declared once, in the C++ core schema (cpp_plugins/plugins/core/schema.cpp); the tests
check these lists against it.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

# the caches' ReplayPerformanceWarning at network build time: steps that replay more than 32 records run on the
# slower designs (docs/design.md section 8, "The 32-record limit")
from ..config import warn_past_split_kernels

PLUGIN_NAMESPACE = "replayssm"
# Versions as the core declares them (core::pluginVersion); engines bake them in. ReplayDecode 2 added
# the field 'read_dtype' and the dual-precision inputs (cpp_plugins/plugins/ReplayDecodePlugin/README.md).
PLUGIN_VERSIONS = {
    "ReplayDecode": "2",
    "GdnVerify": "1",
    "DualPrecisionFlush": "1",
    "ReplayCommit": "1",
}
PLUGIN_NAMES = {
    "ReplayDecode": "ReplayDecode_RSSM",
    "GdnVerify": "GdnVerify_RSSM",
    "DualPrecisionFlush": "DualPrecisionFlush_RSSM",
    "ReplayCommit": "ReplayCommit_RSSM",
}
Field = Tuple[str, str, object]
_ACT = ("fp16", "bf16")


def _attr(cfg, name, default=None, required=True):
    if hasattr(cfg, name):
        return getattr(cfg, name)
    if required:
        raise ValueError(f"replayssm.trt: config object {type(cfg).__name__} has no attribute '{name}' "
                         f"(expected a ReplayConfig-like object)")
    return default


def _choice(op: str, field: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"{op}: field '{field}' must be one of {list(allowed)}; got {value!r}")
    return value


def _mode(cfg) -> str:
    return "speculative" if int(_attr(cfg, "max_verify")) > 1 else "standard"


# What the dual-precision kernels (cpp_plugins/kernels/dual_precision/) implement.
DUAL_PRECISION_READ_DTYPES = ("fp16", "fp8_e4m3", "nvfp4")
DUAL_PRECISION_RECURRENCE_DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3")
DUAL_PRECISION_STATE_SIZE = 128  # Mamba-2 N / GDN K


def _check_dual_precision_dims(op: str, cfg, state_size: Optional[int]) -> None:
    """The dual-precision kernels need N = K = 128; check it when the config (key_dim) or the caller knows it."""
    for what, n in (("state_size", state_size), ("key_dim", _attr(cfg, "key_dim", None, required=False))):
        if n is not None and int(n) != DUAL_PRECISION_STATE_SIZE:
            raise ValueError(f"{op}: {what} (Mamba-2 N / GDN K) must be {DUAL_PRECISION_STATE_SIZE} with a read copy "
                             f"(the dual-precision kernels support only that); got {n}")


def replay_decode_fields(cfg, family: str, act_dtype: str, *, has_z: bool = False, dt_dtype: str = "fp32",
                         scale: float = 0.0, mode: Optional[str] = None,
                         state_size: Optional[int] = None) -> List[Field]:
    """Fields of ReplayDecode (version 2).

    read_dtype 'none': one checkpoint of cfg.recurrence_dtype (fp32 / fp16 / bf16), read and flushed
    by this layer. read_dtype fp16 / fp8_e4m3 / nvfp4: the dual-precision decode; the checkpoint input
    ('ckpt_hp') is the recurrence copy (fp32 / fp16 / bf16 / fp8_e4m3), the read copy and its scales
    are extra inputs, and the flush is a DualPrecisionFlush layer after this one. The dual-precision
    kernels need N = K = 128 (checked against cfg.key_dim and ``state_size`` when given) and, for GDN,
    u_dtype 'fp16'.
    """
    op = "ReplayDecode"
    _choice(op, "family", family, ("mamba2", "gdn"))
    _choice(op, "act_dtype", act_dtype, _ACT)
    _choice(op, "dt_dtype", dt_dtype, ("fp32", "act"))
    rec = _attr(cfg, "recurrence_dtype")
    read = _attr(cfg, "read_dtype", "none", required=False)
    read = "none" if read is None else read
    u_dtype = _attr(cfg, "u_dtype", "fp16", required=False)
    if read == "none":
        _choice(op, "state_dtype (from recurrence_dtype)", rec, ("fp32", "fp16", "bf16"))
        if _attr(cfg, "checkpoint_mode", "separate", required=False) == "shared":
            raise ValueError(f"{op}: checkpoint_mode 'shared' (one low-precision checkpoint written with "
                             f"stochastic rounding) is not available through ReplayDecode: its flush rounds to "
                             f"nearest; use the torch ops (replayssm_trtllm.ops.dual_precision) for the shared mode")
    else:
        _choice(op, "read_dtype", read, DUAL_PRECISION_READ_DTYPES)
        _choice(op, "state_dtype (from recurrence_dtype, with a read copy)", rec, DUAL_PRECISION_RECURRENCE_DTYPES)
        _check_dual_precision_dims(op, cfg, state_size)
        if family == "gdn" and u_dtype != "fp16":
            raise ValueError(f"{op}: u_dtype must be 'fp16' with a read copy (the dual-precision GDN kernel keeps "
                             f"ring_u in fp16); got {u_dtype!r}")
    mode = mode or ("standard" if family == "gdn" else _mode(cfg))
    warn_past_split_kernels(op, int(_attr(cfg, "window")), 1 if family == "gdn" else int(_attr(cfg, "max_verify")),
                            0 if mode == "standard" else 1)
    return [
        ("family", "enum", family),
        ("window", "int32", int(_attr(cfg, "window"))),
        ("max_verify", "int32", 1 if family == "gdn" else int(_attr(cfg, "max_verify"))),
        ("mode", "enum", mode),
        ("act_dtype", "enum", act_dtype),
        ("state_dtype", "enum", rec),
        ("dt_dtype", "enum", dt_dtype),
        ("has_z", "int32", int(bool(has_z))),
        ("u_dtype", "enum", u_dtype),
        ("scale", "float32", float(scale)),
        ("read_dtype", "enum", read),
    ]


def replay_decode_input_names(cfg, family: str, *, has_z: bool = False) -> List[str]:
    """Input names of ReplayDecode in plugin order (README.md of the plugin; same as the core's I/O map)."""
    if family == "mamba2":
        names = ["x", "dt", "B", "C", "A", "D", "dt_bias", "state_batch_indices", "state", "ring_dt", "ring_x",
                 "ring_B", "ring_origin", "ring_len"]
    else:
        names = ["q", "k", "v", "a", "b", "A_log", "dt_bias", "state_batch_indices", "state", "ring_g", "ring_u",
                 "ring_k", "ring_origin", "ring_len"]
    if family == "mamba2" and has_z:
        names.append("z")
    read = _attr(cfg, "read_dtype", "none", required=False) or "none"
    if read != "none":
        names[8] = "ckpt_hp"
        names.append("ckpt_lp")
        if family == "gdn":
            names += ["ring_beta", "ring_v"]
        if _attr(cfg, "recurrence_dtype") == "fp8_e4m3":
            names.append("ckpt_hp_scale")
        if read in ("fp8_e4m3", "nvfp4"):
            names.append("ckpt_lp_scale")
        if read == "nvfp4":
            names.append("ckpt_lp_gscale")
    return names


def gdn_verify_fields(cfg, act_dtype: str, *, scale: float = 0.0) -> List[Field]:
    op = "GdnVerify"
    _choice(op, "act_dtype", act_dtype, _ACT)
    rec = _attr(cfg, "recurrence_dtype")
    _choice(op, "state_dtype (from recurrence_dtype)", rec, ("fp32", "fp16", "bf16"))
    warn_past_split_kernels(op, int(_attr(cfg, "window")), int(_attr(cfg, "max_verify")), 1)
    return [
        ("window", "int32", int(_attr(cfg, "window"))),
        ("max_verify", "int32", int(_attr(cfg, "max_verify"))),
        ("act_dtype", "enum", act_dtype),
        ("state_dtype", "enum", rec),
        ("u_dtype", "enum", _attr(cfg, "u_dtype", "fp16", required=False)),
        ("scale", "float32", float(scale)),
    ]


def dual_precision_flush_fields(cfg, family: str, act_dtype: str, *, layer_index: int = 0,
                                state_size: Optional[int] = None) -> List[Field]:
    """Fields of DualPrecisionFlush; N = K = 128 is checked against cfg.key_dim and ``state_size`` when given."""
    op = "DualPrecisionFlush"
    _choice(op, "family", family, ("mamba2", "gdn"))
    _choice(op, "act_dtype", act_dtype, _ACT)
    read = _attr(cfg, "read_dtype")
    if read in (None, "none"):
        raise ValueError(f"{op}: needs a read copy; got read_dtype {read!r} (use ReplayDecode alone)")
    rec = _attr(cfg, "recurrence_dtype")
    _check_dual_precision_dims(op, cfg, state_size)
    rounding = _attr(cfg, "rounding", None, required=False)
    if rounding is None:
        rounding = "rtn" if rec == "fp32" else "sr"
    seed = int(_attr(cfg, "seed", 0, required=False))
    if seed >= 2 ** 63:
        seed -= 2 ** 64  # the int64 field carries the 64 key bits
    return [
        ("family", "enum", family),
        ("window", "int32", int(_attr(cfg, "window"))),
        ("max_verify", "int32", int(_attr(cfg, "max_verify"))),
        ("mode", "enum", _mode(cfg)),
        ("act_dtype", "enum", act_dtype),
        ("recurrence_dtype", "enum", rec),
        ("read_dtype", "enum", read),
        ("rounding", "enum", rounding),
        ("seed", "int64", seed),
        ("layer_index", "int32", int(layer_index)),
    ]


def replay_commit_fields(cfg, *, has_accepted: Optional[bool] = None) -> List[Field]:
    mode = _mode(cfg)
    if has_accepted is None:
        has_accepted = mode == "speculative"
    return [
        ("window", "int32", int(_attr(cfg, "window"))),
        ("max_verify", "int32", int(_attr(cfg, "max_verify"))),
        ("mode", "enum", mode),
        ("has_accepted", "int32", int(bool(has_accepted))),
    ]
