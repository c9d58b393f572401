"""The row decoders of the split read-copy readouts (cpp_plugins/kernels/common/read_rows.cuh) in torch
integer arithmetic, for a CPU check of the scheme they rely on.

The readouts never form the decoded state. A lane holds 4 consecutive elements of a row as raw bits,
turns them into exact code values times a power of two by rebiasing their bits into fp16
(``RowQuad<Fp8Rows>::decode``: value * 2^-8; ``RowQuad<Nvfp4Rows>::decode``: value * 2^-14), and
multiplies a row's dot product by one factor (fp8: scale * 2^8; nvfp4: fl(value(bs) * g) * 2^14). The
identity this module lets a CPU test check, against replayssm_trtllm.formats bit for bit:

    fl(decode(quad)_i * factor) == formats.decode(x)_i        for every element

(power-of-two scalings are exact in fp32, so the one rounding is that of the reference decoder). The
CUDA code itself is checked on the GPU through the dual-precision tests (outputs against the float64
reference). Mirrors, not shares, the CUDA source: keep the two in step.
"""
from __future__ import annotations

import torch

__all__ = ["fp8_quad_decode", "fp8_row_factor", "nvfp4_quad_decode", "nvfp4_block_factor", "decode_rows"]


def _u32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int64) & 0xFFFFFFFF


def _halves_to_f32(h: torch.Tensor) -> torch.Tensor:
    """uint32 words (int64) -> [..., 2] float32 of their low / high fp16 halves."""
    lo = (h & 0xFFFF).to(torch.int32).to(torch.int16)
    hi = ((h >> 16) & 0xFFFF).to(torch.int32).to(torch.int16)
    return torch.stack([lo.view(torch.float16).float(), hi.view(torch.float16).float()], dim=-1)


def fp8_quad_decode(w: torch.Tensor) -> torch.Tensor:
    """4 e4m3 codes per word (byte k = element k) -> [..., 4] float32 value * 2^-8 (exact)."""
    w = _u32(w)
    lo = ((w & 0x007F007F) << 7) | ((w & 0x00800080) << 8)  # elements 0, 2
    hi = ((w & 0x7F007F00) >> 1) | (w & 0x80008000)         # elements 1, 3
    a, b = _halves_to_f32(lo), _halves_to_f32(hi)
    return torch.stack([a[..., 0], b[..., 0], a[..., 1], b[..., 1]], dim=-1)


def fp8_row_factor(scale: torch.Tensor) -> torch.Tensor:
    """Row scale (fp32) -> multiplier of fp8_quad_decode's values."""
    return scale.float() * 256.0


def nvfp4_quad_decode(w16: torch.Tensor) -> torch.Tensor:
    """4 e2m1 codes in bits 0-15 (nibble k = element k) -> [..., 4] float32 value * 2^-14 (exact)."""
    w16 = w16.to(torch.int64) & 0xFFFF
    x = (w16 & 0xFF) | ((w16 & 0xFF00) << 8)  # __byte_perm(w16, 0, 0x4140)
    y = x >> 4
    h0 = ((x & 0x00070007) << 9) | ((x & 0x00080008) << 12)  # elements 0, 2
    h1 = ((y & 0x00070007) << 9) | ((y & 0x00080008) << 12)  # elements 1, 3
    a, b = _halves_to_f32(h0), _halves_to_f32(h1)
    return torch.stack([a[..., 0], b[..., 0], a[..., 1], b[..., 1]], dim=-1)


def nvfp4_block_factor(bs: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """e4m3 block-scale code, fp32 state scale -> fl(value(bs) * g) * 2^14 (NaN for the NaN code)."""
    bs = bs.to(torch.int64) & 0xFF
    h = ((bs & 0x7F) << 7) | ((bs & 0x80) << 8)  # value * 2^-8 as fp16
    v = (h.to(torch.int32).to(torch.int16).view(torch.float16).float() * 256.0)
    v = torch.where((bs & 0x7F) == 0x7F, torch.full_like(v, float("nan")), v)
    d = (v.double() * g.double()).float()  # one fp32 rounding, as __fmul_rn
    return d * 16384.0


def decode_rows(enc) -> torch.Tensor:
    """Decoded state [..., K] of an fp8_e4m3 or nvfp4 EncodedState through the quad decoders and factors,
    one fp32 multiplication per element (the readouts apply the factor to a row's dot product instead)."""
    if enc.fmt == "fp8_e4m3":
        codes = enc.data.to(torch.int64)
        K = codes.shape[-1]
        q = codes.reshape(*codes.shape[:-1], K // 4, 4)
        w = q[..., 0] | (q[..., 1] << 8) | (q[..., 2] << 16) | (q[..., 3] << 24)
        vals = fp8_quad_decode(w).reshape(*codes.shape[:-1], K)
        f = fp8_row_factor(enc.scale).repeat_interleave(128, dim=-1)
        return vals * f
    if enc.fmt == "nvfp4":
        data = enc.data.to(torch.int64)  # [..., K / 2]
        K = data.shape[-1] * 2
        q = data.reshape(*data.shape[:-1], K // 4, 2)
        w16 = q[..., 0] | (q[..., 1] << 8)
        vals = nvfp4_quad_decode(w16).reshape(*data.shape[:-1], K)
        g = enc.global_scale.float()
        g = g.reshape(*g.shape, 1, 1).expand(*data.shape[:-1], K // 16)
        f = nvfp4_block_factor(enc.scale, g).repeat_interleave(16, dim=-1)
        return vals * f
    raise ValueError(f"decode_rows: format must be 'fp8_e4m3' or 'nvfp4'; got {enc.fmt!r}")
