"""Random layers and inputs with realistic decays, and storage-format quantizers, for tests.

Decays: ``A = -U[0.5, 4]`` (Mamba-2) / ``exp(A_log) = U[0.5, 4]`` (GDN), a base step
``dt0 = U[0.002, 0.06]`` folded into ``dt_bias = softplus^-1(dt0)``, and per-token
``dt_raw`` / ``a`` = ``clamp(0.3 N(0, 1), -1, 1)``, which keeps ``alpha`` in about [0.52, 0.9996].
Every other input is ``N(0, 1)`` (never zero); ``beta = sigmoid(N(0, 1))``.
All generators take a ``torch.Generator`` so runs are reproducible.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import torch


def _gen(generator: Optional[torch.Generator], seed: int = 0) -> torch.Generator:
    if generator is None:
        generator = torch.Generator().manual_seed(seed)
    return generator


def _uniform(shape, lo, hi, g):
    return lo + (hi - lo) * torch.rand(shape, generator=g, dtype=torch.float64)


def _normal(shape, g):
    return torch.randn(shape, generator=g, dtype=torch.float64)


def _inv_softplus(y: torch.Tensor) -> torch.Tensor:
    return torch.log(torch.expm1(y))


def random_mamba2_layer(H: int, generator: Optional[torch.Generator] = None, dtype=torch.float32
                        ) -> Dict[str, torch.Tensor]:
    """``{"A", "D", "dt_bias"}``, each ``[H]`` in ``dtype`` (fp32 as on the device)."""
    g = _gen(generator)
    A = -_uniform((H,), 0.5, 4.0, g)
    D = _uniform((H,), 0.5, 1.5, g)
    dt_bias = _inv_softplus(_uniform((H,), 0.002, 0.06, g))
    return {"A": A.to(dtype), "D": D.to(dtype), "dt_bias": dt_bias.to(dtype)}


def random_mamba2_inputs(B: int, T: int, H: int, P: int, N: int, G: int,
                         generator: Optional[torch.Generator] = None, dtype=torch.float32, with_z: bool = True
                         ) -> Dict[str, torch.Tensor]:
    """``{"x" [B,T,H,P], "dt_raw" [B,T,H], "Bm" [B,T,G,N], "Cm" [B,T,G,N], "z" [B,T,H,P] or None}``."""
    g = _gen(generator)
    out = {
        "x": _normal((B, T, H, P), g).to(dtype),
        "dt_raw": torch.clamp(0.3 * _normal((B, T, H), g), -1.0, 1.0).to(dtype),
        "Bm": _normal((B, T, G, N), g).to(dtype),
        "Cm": _normal((B, T, G, N), g).to(dtype),
        "z": _normal((B, T, H, P), g).to(dtype) if with_z else None,
    }
    return out


def random_gdn_layer(HV: int, generator: Optional[torch.Generator] = None, dtype=torch.float32
                     ) -> Dict[str, torch.Tensor]:
    """``{"A_log", "dt_bias"}``, each ``[HV]``."""
    g = _gen(generator)
    A_log = torch.log(_uniform((HV,), 0.5, 4.0, g))
    dt_bias = _inv_softplus(_uniform((HV,), 0.002, 0.06, g))
    return {"A_log": A_log.to(dtype), "dt_bias": dt_bias.to(dtype)}


def random_gdn_inputs(B: int, T: int, H: int, HV: int, K: int, V: int,
                      generator: Optional[torch.Generator] = None, dtype=torch.float32) -> Dict[str, torch.Tensor]:
    """``{"q" [B,T,H,K], "k" [B,T,H,K], "v" [B,T,HV,V], "a" [B,T,HV], "b" [B,T,HV]}``."""
    g = _gen(generator)
    return {
        "q": _normal((B, T, H, K), g).to(dtype),
        "k": _normal((B, T, H, K), g).to(dtype),
        "v": _normal((B, T, HV, V), g).to(dtype),
        "a": torch.clamp(0.3 * _normal((B, T, HV), g), -1.0, 1.0).to(dtype),
        "b": _normal((B, T, HV), g).to(dtype),
    }


def random_state(shape, generator: Optional[torch.Generator] = None, scale: float = 0.5) -> torch.Tensor:
    """A float64 prefill state ``scale * N(0, 1)``."""
    return scale * _normal(tuple(shape), _gen(generator))


def cast_quantizer(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """Round-to-nearest through ``dtype`` and back to float64 (e.g. fp16 read copy, fp16 ``ring_u``)."""
    def quant(S: torch.Tensor) -> torch.Tensor:
        return S.to(dtype).to(torch.float64)
    quant.__name__ = f"cast_{str(dtype).replace('torch.', '')}"
    return quant
