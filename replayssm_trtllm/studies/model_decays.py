"""Per-head decay centres of a real model, for the error study (``error-study --decays-from``).

The study draws each head's per-step decay alpha_t around a centre. By default the centres are log-spaced over
the family's range (``studies/error_study.py``); this module takes them from a checkpoint instead: every SSM
head of every SSM layer gets its decay at a neutral input (the projected dt / a equal to 0), i.e.

    Mamba-2:  alpha = exp(-exp(A_log) * softplus(dt_bias))
    GDN:      alpha = exp(-exp(A_log) * softplus(dt_bias))      (g = -exp(A_log) softplus(a + dt_bias), a = 0)

and ``heads`` centres are picked at evenly spaced quantiles of -log(1 - alpha) over all of them, so the study's
heads span the model's spectrum from its fastest to its slowest-forgetting head. The real per-step decays also
move with the input (dt, a); the study's jitter stands in for that.
"""
from __future__ import annotations

import math
from typing import Dict, List, Tuple

import torch

from ..models import HfCheckpoint, load_hf_config, load_mixer_weights


def model_decays(path) -> Tuple[str, torch.Tensor, Dict[str, object]]:
    """(family, neutral-input alpha of every SSM head of every SSM layer [n] float64, summary)."""
    spec = load_hf_config(path)
    ckpt = HfCheckpoint(path)
    alphas: List[torch.Tensor] = []
    for layer in spec.ssm_layers:
        w = load_mixer_weights(ckpt, spec, layer, projections=False)
        A = torch.exp(w["A_log"].double())
        dt = torch.nn.functional.softplus(w["dt_bias"].double())
        alphas.append(torch.exp(-A * dt))
    a = torch.cat(alphas)
    summary = {"model_type": spec.model_type, "ssm_layers": len(spec.ssm_layers), "heads": int(a.numel()),
               "alpha_min": float(a.min()), "alpha_median": float(a.median()), "alpha_max": float(a.max())}
    return spec.family, a, summary


def pick_centres(alphas: torch.Tensor, heads: int) -> List[float]:
    """``heads`` values of ``alphas`` at evenly spaced quantiles of -log(1 - alpha) (fastest to slowest), kept
    strictly inside (0, 1)."""
    if heads < 1:
        raise ValueError(f"pick_centres: heads must be >= 1; got {heads}")
    eps = 1e-12
    a = alphas.double().clamp(eps, 1 - 1e-9)
    key = -torch.log1p(-a)
    order = torch.argsort(key)
    n = a.numel()
    if heads == 1:
        idx = [order[n // 2]]
    else:
        idx = [order[round(i * (n - 1) / (heads - 1))] for i in range(heads)]
    return [float(a[i]) for i in idx]


def centres_from_checkpoint(path, heads: int) -> Tuple[str, List[float], str]:
    """(family, ``heads`` alpha centres, a one-line description of where they came from)."""
    family, a, s = model_decays(path)
    c = pick_centres(a, heads)
    desc = (f"{s['model_type']} checkpoint {path} ({s['ssm_layers']} SSM layers, {s['heads']} heads; neutral-input "
            f"alpha min {s['alpha_min']:.4g}, median {s['alpha_median']:.4g}, max {s['alpha_max']:.4g})")
    if not all(0.0 < x < 1.0 for x in c) or any(math.isnan(x) for x in c):
        raise ValueError(f"centres_from_checkpoint: decays outside (0, 1) in {path}: {c}")
    return family, c, desc
