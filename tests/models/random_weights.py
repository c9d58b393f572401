"""Random mixer weights of any spec (no checkpoint), with the realistic SSM parameters of hf_tiny."""
from __future__ import annotations

import math

import torch

from replayssm_trtllm.models import mixer_weight_shapes


def random_mixer_weights(spec, gen: torch.Generator):
    w = {}
    for name, shape in mixer_weight_shapes(spec).items():
        if name == "A_log":
            w[name] = torch.log(0.5 + 7.5 * torch.rand(shape, generator=gen))
        elif name == "dt_bias":
            dt = torch.exp(math.log(0.01) + (math.log(0.4) - math.log(0.01)) * torch.rand(shape, generator=gen))
            w[name] = dt + torch.log(-torch.expm1(-dt))
        elif name == "norm.weight":
            w[name] = 1.0 + 0.2 * torch.randn(shape, generator=gen)
        elif name.endswith("bias") or name == "D":
            w[name] = 0.1 * torch.randn(shape, generator=gen) if name != "D" else torch.randn(shape, generator=gen)
        else:
            w[name] = torch.randn(shape, generator=gen) / math.sqrt(shape[-1])
    if "in_proj_qkvz.weight" in w:     # packed (Qwen3-Next): give the mixers the unpacked layout
        from replayssm_trtllm.models.checkpoint import unpack_qwen3_next_projections
        unpack_qwen3_next_projections(spec, w)
    return w
