"""Input validation shared by the float64 reference (error text per docs/STYLE: op, tensor, expected, got)."""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import torch

F64 = torch.float64


def describe(t) -> str:
    """``float16 [2, 3, 4]`` for a tensor, the Python type name otherwise."""
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}"
    return type(t).__name__


def _fmt_dims(dims: Sequence, sizes: Dict[str, int]) -> str:
    parts = []
    for d in dims:
        if isinstance(d, int):
            parts.append(str(d))
        elif d in sizes:
            parts.append(f"{d}={sizes[d]}")
        else:
            parts.append(str(d))
    return "[" + ", ".join(parts) + "]"


def expect_tensor(op: str, name: str, t, dims: Sequence, sizes: Dict[str, int],
                  kind: str = "float") -> torch.Tensor:
    """Check that ``t`` is a tensor of shape ``dims`` and return it.

    ``dims`` holds ints (fixed sizes) or symbol names; a symbol seen for the first
    time is bound in ``sizes`` (shared across calls, so later tensors must agree).
    ``kind``: ``"float"`` (any floating dtype) or ``"int"`` (int32/int64).
    Raises ValueError naming the op, the tensor, the expected shape/dtype and what it got.
    """
    want_dtype = {"float": "a floating-point tensor", "int": "an int32/int64 tensor"}[kind]
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{op}: '{name}' must be {want_dtype} of shape {_fmt_dims(dims, sizes)}; "
                         f"got {describe(t)}")
    ok_dtype = t.is_floating_point() if kind == "float" else t.dtype in (torch.int32, torch.int64)
    shape_ok = t.dim() == len(dims)
    if shape_ok:
        trial = dict(sizes)
        for d, n in zip(dims, t.shape):
            if isinstance(d, int):
                if n != d:
                    shape_ok = False
                    break
            elif d in trial:
                if trial[d] != n:
                    shape_ok = False
                    break
            else:
                trial[d] = n
    if not ok_dtype or not shape_ok:
        raise ValueError(f"{op}: '{name}' must be {want_dtype} of shape {_fmt_dims(dims, sizes)}; "
                         f"got {describe(t)}")
    for d, n in zip(dims, t.shape):
        if not isinstance(d, int):
            sizes.setdefault(d, int(n))
    return t


def f64(t: torch.Tensor) -> torch.Tensor:
    """Float64 CPU copy-free view where possible (the reference always computes in float64 on CPU)."""
    return t.detach().to(device="cpu", dtype=F64)


def expect_int(op: str, name: str, v, lo: Optional[int] = None, hi: Optional[int] = None) -> int:
    """A Python int (or 0-d integer tensor) in [lo, hi]."""
    if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.is_floating_point():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{op}: '{name}' must be an int; got {type(v).__name__}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"{op}: '{name}' must be in {rng}; got {v}")
    return v


def apply_quant(op: str, name: str, fn: Optional[Callable], S: torch.Tensor) -> torch.Tensor:
    """Apply a storage quantizer (``None`` = identity) and check it returns a same-shape float tensor."""
    if fn is None:
        return S.clone()
    out = fn(S)
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.shape != S.shape:
        raise ValueError(f"{op}: quantizer '{name}' must map a float64 {list(S.shape)} state to a float tensor "
                         f"of the same shape; got {describe(out)}")
    return f64(out).clone()


def expect_trailing(op: str, name: str, t, tail: Sequence, sizes: Dict[str, int]) -> torch.Tensor:
    """Float tensor of shape ``[..., *tail]`` (any leading dims)."""
    if not isinstance(t, torch.Tensor) or t.dim() < len(tail) or not t.is_floating_point():
        raise ValueError(f"{op}: '{name}' must be a floating-point tensor of shape [..., "
                         f"{_fmt_dims(tail, sizes)[1:-1]}]; got {describe(t)}")
    return expect_tensor(op, name, t, list(t.shape[:t.dim() - len(tail)]) + list(tail), sizes)


def expect_step_shape(op: str, heads: int, heads_name: str, groups: int, groups_name: str, mode: int, T: int,
                      h: int, L: int) -> None:
    """The shape rules of one replay step of a row: ``heads % groups == 0``; standard mode (0) needs T == 1 and
    h <= L - 1 (a flush step folds the h records and the token), speculative mode (1) needs h <= L."""
    if groups < 1 or heads % groups:
        raise ValueError(f"{op}: {heads_name}={heads} must be a multiple of {groups_name}={groups}")
    if mode == 0 and (T != 1 or h > L - 1):
        raise ValueError(f"{op}: standard mode needs T == 1 and h <= L - 1; got T={T}, h={h}, L={L}")
    if mode == 1 and h > L:
        raise ValueError(f"{op}: speculative mode needs h <= L; got h={h}, L={L}")
    if mode not in (0, 1):
        raise ValueError(f"{op}: mode must be 0 (standard) or 1 (speculative); got {mode}")
