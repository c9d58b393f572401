"""Encode / decode of checkpoint states: fp32, fp16, bf16, fp8-e4m3 (block 128), NVFP4.

The bit layouts, scale formulas, operation order and special cases are specified in
docs/formats.md; the CUDA kernels reproduce this module bit for bit.

All fp32 arithmetic below (scale divisions, element divisions, decode products) is computed as
``(a.double() op b.double()).float()``. For one IEEE multiplication or division of two float32
operands this equals the correctly rounded float32 result (float64 has more than 2*24+2 bits), so it
matches CUDA's default ``/`` and ``*`` (IEEE round-to-nearest-even, denormals kept) exactly,
independent of how torch vectorizes float32 division. The codec runs on any torch device (CPU is the
reference; CUDA gives the same bits, since every step is exact integer or correctly rounded arithmetic).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .minifloat import BF16, E2M1, E4M3, FP16, round_to_codes, value_table
from .philox import PhiloxKey, sr_words

FORMATS = ("fp32", "fp16", "bf16", "fp8_e4m3", "nvfp4")
ROUNDINGS = ("rtn", "sr")
FP8_BLOCK = 128          # fp8_e4m3: one fp32 scale per 128 contiguous elements along the last dim
NVFP4_BLOCK = 16         # nvfp4: one e4m3 scale per 16 contiguous elements along the last dim
E4M3_MAX = 448.0
E2M1_MAX = 6.0
NVFP4_GLOBAL_DIV = 2688.0  # 6 * 448, exact in fp32
E4M3_NAN = 0x7F

_E4M3_TABLE = value_table(E4M3)   # float32 [256]
_E2M1_TABLE = value_table(E2M1)   # float32 [16]


@dataclass(frozen=True)
class EncodedState:
    """A state tensor in one storage format (the exact bytes a kernel reads and writes).

    fmt           one of FORMATS
    shape         logical shape of the decoded tensor
    data          fp32: float32 ``shape``; fp16 / bf16: float16 / bfloat16 ``shape`` (bit patterns);
                  fp8_e4m3: uint8 e4m3fn codes ``shape``;
                  nvfp4: uint8 ``[..., K // 2]``, element 2i in the low nibble, 2i+1 in the high nibble
    scale         fp8_e4m3: float32 ``[..., K // 128]``; nvfp4: uint8 e4m3fn codes ``[..., K // 16]``
    global_scale  nvfp4: float32 ``shape[:-2]`` (one per state = per [d_v, d_k] matrix)
    """

    fmt: str
    shape: Tuple[int, ...]
    data: torch.Tensor
    scale: Optional[torch.Tensor] = None
    global_scale: Optional[torch.Tensor] = None

    @property
    def nbytes(self) -> int:
        n = self.data.numel() * self.data.element_size()
        for t in (self.scale, self.global_scale):
            if t is not None:
                n += t.numel() * t.element_size()
        return n


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}"
    return type(t).__name__


def _div_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.to(torch.float64) / b.to(torch.float64)).to(torch.float32)


def _mul_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.to(torch.float64) * b.to(torch.float64)).to(torch.float32)


_TABLES_ON = {}


def _lookup(table: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """table[codes] (index_select is several times faster than advanced indexing on CPU)."""
    if codes.device != table.device:
        key = (id(table), str(codes.device))
        if key not in _TABLES_ON:
            _TABLES_ON[key] = table.to(codes.device)
        table = _TABLES_ON[key]
    return table.index_select(0, codes.reshape(-1).to(torch.int64)).reshape(codes.shape)


def _codes_to_storage16(code: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    code = torch.where(code >= 0x8000, code - 0x10000, code)
    return code.to(torch.int16).view(dtype)


def _check_x(op: str, x, fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"{op}: fmt must be one of {FORMATS}; got {fmt!r}")
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise ValueError(f"{op}: tensor 'x' must be float32; got {_describe(x)}")
    if fmt == "fp8_e4m3":
        if x.dim() < 1 or x.shape[-1] % FP8_BLOCK != 0 or x.shape[-1] == 0:
            raise ValueError(f"{op}: tensor 'x' must have a last dim K that is a positive multiple of "
                             f"{FP8_BLOCK} for fp8_e4m3; got {_describe(x)}")
    if fmt == "nvfp4":
        if x.dim() < 2 or x.shape[-1] % NVFP4_BLOCK != 0 or x.shape[-1] == 0 or x.shape[-2] == 0:
            raise ValueError(f"{op}: tensor 'x' must be [..., d_v, K] with d_v >= 1 and K a positive "
                             f"multiple of {NVFP4_BLOCK} for nvfp4; got {_describe(x)}")


def _sr_words(op: str, x: torch.Tensor, rounding: str, key, words) -> Optional[torch.Tensor]:
    if rounding not in ROUNDINGS:
        raise ValueError(f"{op}: rounding must be one of {ROUNDINGS}; got {rounding!r}")
    if rounding == "rtn":
        if key is not None or words is not None:
            raise ValueError(f"{op}: 'key' / 'words' are only used with rounding='sr'; got rounding='rtn'")
        return None
    if (key is None) == (words is None):
        raise ValueError(f"{op}: rounding='sr' needs exactly one of 'key' (PhiloxKey) or 'words'; "
                         f"got key={key!r}, words={_describe(words) if words is not None else None}")
    if key is not None:
        if not isinstance(key, PhiloxKey):
            raise ValueError(f"{op}: 'key' must be a PhiloxKey; got {type(key).__name__}")
        return sr_words(key, x.numel(), device=x.device).reshape(x.shape)
    if not isinstance(words, torch.Tensor) or words.dtype != torch.int64 or words.shape != x.shape:
        raise ValueError(f"{op}: tensor 'words' must be int64 {list(x.shape)} (32-bit random words); "
                         f"got {_describe(words)}")
    return words


def encode(x: torch.Tensor, fmt: str, rounding: str = "rtn", key: Optional[PhiloxKey] = None,
           words: Optional[torch.Tensor] = None) -> EncodedState:
    """Cast the float32 state ``x`` into ``fmt``.

    rounding: 'rtn' (round to nearest, ties to even) or 'sr' (stochastic). SR draws one 32-bit word
    per element: from Philox4x32-10 via ``key`` (the bit-exact kernel contract), or from ``words``
    (int64, x's shape, values in [0, 2^32); any RNG, e.g. for fast simulations). Element index =
    row-major flat index into ``x``, so pass one (slot, layer) state ``[H, d_v, d_k]`` per call.
    'fp32' stores x unchanged (rounding is ignored).
    """
    _check_x("encode", x, fmt)
    w = _sr_words("encode", x, rounding, key, words)
    shape = tuple(x.shape)
    x = x.contiguous()
    if fmt == "fp32":
        return EncodedState(fmt, shape, x.clone())
    if fmt in ("fp16", "bf16"):
        spec, dtype = (FP16, torch.float16) if fmt == "fp16" else (BF16, torch.bfloat16)
        return EncodedState(fmt, shape, _codes_to_storage16(round_to_codes(x, spec, rounding, w), dtype))
    if fmt == "fp8_e4m3":
        return _encode_fp8(x, rounding, w)
    return _encode_nvfp4(x, rounding, w)


def _encode_fp8(x: torch.Tensor, rounding: str, w: Optional[torch.Tensor]) -> EncodedState:
    shape = tuple(x.shape)
    nb = shape[-1] // FP8_BLOCK
    xb = x.reshape(*shape[:-1], nb, FP8_BLOCK)
    amax = xb.abs().amax(dim=-1)                       # NaN-propagating
    finite = torch.isfinite(amax)
    scale = _div_f32(amax, torch.full_like(amax, E4M3_MAX))
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    scale = torch.where(finite, scale, torch.full_like(scale, float("nan")))
    safe = torch.where(finite, scale, torch.ones_like(scale))
    y = _div_f32(xb, safe.unsqueeze(-1))
    wb = None if w is None else w.reshape(xb.shape)
    code = round_to_codes(y, E4M3, rounding, wb)
    code = torch.where(finite.unsqueeze(-1), code, torch.full_like(code, E4M3_NAN))
    return EncodedState("fp8_e4m3", shape, code.to(torch.uint8).reshape(shape), scale=scale)


def _encode_nvfp4(x: torch.Tensor, rounding: str, w: Optional[torch.Tensor]) -> EncodedState:
    shape = tuple(x.shape)
    lead, nb = shape[:-2], shape[-1] // NVFP4_BLOCK
    amax_state = x.abs().amax(dim=(-2, -1))            # [*lead], NaN-propagating
    finite = torch.isfinite(amax_state)
    g = _div_f32(amax_state, torch.full_like(amax_state, NVFP4_GLOBAL_DIV))
    g = torch.where(g == 0, torch.ones_like(g), g)
    g = torch.where(finite, g, torch.ones_like(g))     # NaN written below
    xb = x.reshape(*shape[:-1], nb, NVFP4_BLOCK)
    amax_blk = xb.abs().amax(dim=-1)                   # [*lead, dv, nb]
    g_b = g.reshape(*lead, 1, 1)
    six_g = _mul_f32(torch.full_like(g_b, E2M1_MAX), g_b)
    r = _div_f32(amax_blk, six_g.expand_as(amax_blk))
    r = torch.where(torch.isfinite(r), r, torch.zeros_like(r))  # only in non-finite states (overwritten)
    bs_code = round_to_codes(r, E4M3, "rtn")            # r >= 0: codes 0x00..0x7E (saturating)
    bs_val = _lookup(_E4M3_TABLE, bs_code)
    d = _mul_f32(bs_val, g_b.expand_as(bs_val))          # per-block decode multiplier
    zero_blk = d == 0
    d_safe = torch.where(zero_blk, torch.ones_like(d), d)
    y = _div_f32(xb, d_safe.unsqueeze(-1))
    y = torch.where(torch.isnan(y), torch.zeros_like(y), y)   # only in non-finite states (overwritten)
    wb = None if w is None else w.reshape(xb.shape)
    code = round_to_codes(y, E2M1, rounding, wb)
    bad = (~finite).reshape(*lead, 1, 1)
    code = torch.where(zero_blk.unsqueeze(-1) | bad.unsqueeze(-1), torch.zeros_like(code), code)
    bs_code = torch.where(bad, torch.full_like(bs_code, E4M3_NAN), bs_code)
    g = torch.where(finite, g, torch.full_like(g, float("nan")))
    code = code.reshape(*shape[:-1], shape[-1] // 2, 2)
    packed = (code[..., 0] | (code[..., 1] << 4)).to(torch.uint8)
    return EncodedState("nvfp4", shape, packed, scale=bs_code.to(torch.uint8), global_scale=g)


def decode(enc: EncodedState) -> torch.Tensor:
    """float32 tensor of ``enc.shape``: the value every kernel reads from the stored bytes."""
    if not isinstance(enc, EncodedState):
        raise ValueError(f"decode: 'enc' must be an EncodedState; got {type(enc).__name__}")
    fmt, shape = enc.fmt, enc.shape
    if fmt == "fp32":
        return enc.data.clone()
    if fmt in ("fp16", "bf16"):
        return enc.data.to(torch.float32)
    if fmt == "fp8_e4m3":
        nb = shape[-1] // FP8_BLOCK
        v = _lookup(_E4M3_TABLE, enc.data).reshape(*shape[:-1], nb, FP8_BLOCK)
        return _mul_f32(v, enc.scale.unsqueeze(-1).expand_as(v)).reshape(shape)
    if fmt == "nvfp4":
        lead, nb = shape[:-2], shape[-1] // NVFP4_BLOCK
        b = enc.data.to(torch.int64)
        code = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(*shape[:-1], nb, NVFP4_BLOCK)
        bs_val = _lookup(_E4M3_TABLE, enc.scale)
        d = _mul_f32(bs_val, enc.global_scale.reshape(*lead, 1, 1).expand_as(bs_val))
        v = _lookup(_E2M1_TABLE, code)
        return _mul_f32(v, d.unsqueeze(-1).expand_as(v)).reshape(shape)
    raise ValueError(f"decode: fmt must be one of {FORMATS}; got {fmt!r}")


def quantize_dequantize(x: torch.Tensor, fmt: str, rounding: str = "rtn", key: Optional[PhiloxKey] = None,
                        words: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``decode(encode(x, fmt, rounding, key, words))``: float32, x's shape."""
    return decode(encode(x, fmt, rounding, key=key, words=words))


def e4m3_values() -> torch.Tensor:
    """float32 [256]: value of each e4m3fn code (0x7F / 0xFF are NaN)."""
    return _E4M3_TABLE.clone()


def e2m1_values() -> torch.Tensor:
    """float32 [16]: value of each e2m1 code (bit 3 = sign)."""
    return _E2M1_TABLE.clone()
