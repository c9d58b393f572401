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

PLUGIN_NAMESPACE = "replayssm"
PLUGIN_VERSION = "1"
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


def replay_decode_fields(cfg, family: str, act_dtype: str, *, has_z: bool = False, dt_dtype: str = "fp32",
                         scale: float = 0.0, mode: Optional[str] = None) -> List[Field]:
    """Fields of ReplayDecode. The checkpoint it reads and flushes is cfg.recurrence_dtype (fp32 /
    fp16 / bf16). Configs with a separate read copy (read_dtype != 'none') are refused: the decode
    kernels have no 'no flush' switch yet, so they cannot leave the flush to DualPrecisionFlush."""
    op = "ReplayDecode"
    _choice(op, "family", family, ("mamba2", "gdn"))
    _choice(op, "act_dtype", act_dtype, _ACT)
    _choice(op, "dt_dtype", dt_dtype, ("fp32", "act"))
    rec = _attr(cfg, "recurrence_dtype")
    _choice(op, "state_dtype (from recurrence_dtype)", rec, ("fp32", "fp16", "bf16"))
    if _attr(cfg, "read_dtype", "none", required=False) not in (None, "none"):
        raise ValueError(f"{op}: read_dtype {cfg.read_dtype!r} needs the decode kernel to skip its flush, which the "
                         f"kernel ABI does not offer yet (docs/engine-integration.md, 'Open items'); use read_dtype='none'")
    mode = mode or ("standard" if family == "gdn" else _mode(cfg))
    return [
        ("family", "enum", family),
        ("window", "int32", int(_attr(cfg, "window"))),
        ("max_verify", "int32", 1 if family == "gdn" else int(_attr(cfg, "max_verify"))),
        ("mode", "enum", mode),
        ("act_dtype", "enum", act_dtype),
        ("state_dtype", "enum", rec),
        ("dt_dtype", "enum", dt_dtype),
        ("has_z", "int32", int(bool(has_z))),
        ("u_dtype", "enum", _attr(cfg, "u_dtype", "fp16", required=False)),
        ("scale", "float32", float(scale)),
    ]


def gdn_verify_fields(cfg, act_dtype: str, *, scale: float = 0.0) -> List[Field]:
    op = "GdnVerify"
    _choice(op, "act_dtype", act_dtype, _ACT)
    rec = _attr(cfg, "recurrence_dtype")
    _choice(op, "state_dtype (from recurrence_dtype)", rec, ("fp32", "fp16", "bf16"))
    return [
        ("window", "int32", int(_attr(cfg, "window"))),
        ("max_verify", "int32", int(_attr(cfg, "max_verify"))),
        ("act_dtype", "enum", act_dtype),
        ("state_dtype", "enum", rec),
        ("u_dtype", "enum", _attr(cfg, "u_dtype", "fp16", required=False)),
        ("scale", "float32", float(scale)),
    ]


def dual_precision_flush_fields(cfg, family: str, act_dtype: str, *, layer_index: int = 0) -> List[Field]:
    op = "DualPrecisionFlush"
    _choice(op, "family", family, ("mamba2", "gdn"))
    _choice(op, "act_dtype", act_dtype, _ACT)
    read = _attr(cfg, "read_dtype")
    if read in (None, "none"):
        raise ValueError(f"{op}: needs a read copy; got read_dtype {read!r} (use ReplayDecode alone)")
    rec = _attr(cfg, "recurrence_dtype")
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
