"""Decoders side by side on the same inputs: the one comparison loop of the checkpoint CLI, the example and the
tests."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

from .backends import SsmDecoder


def _placed(d: SsmDecoder, t: torch.Tensor) -> torch.Tensor:
    m = next(iter(d.mixers.values()))
    return t.to(device=m.device, dtype=m.dtype)


def decode_side_by_side(decoders: Sequence[SsmDecoder], slots: torch.Tensor, steps: int, num_tokens: int = 1,
                        prompt: int = 0, generator: Optional[torch.Generator] = None,
                        progress: Optional[Callable[[int, float], None]] = None) -> float:
    """Drive every decoder through the same random inputs and return the largest relative output difference
    of ``decoders[1:]`` against ``decoders[0]``, over the rows with a slot.

    The decoders share a spec. Each is reset on the rows' slots, prefilled with the same ``prompt`` random
    tokens (0: none), then stepped ``steps`` times with ``num_tokens`` tokens per row; with ``num_tokens`` > 1
    each step commits a random accepted count per row (the same for every decoder). Inputs are float64 and
    cast to each decoder's mixer device and dtype. ``progress(step, worst)`` is called after each step.
    """
    spec = decoders[0].spec
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    slots = torch.as_tensor(slots).reshape(-1)
    live = slots >= 0
    Bsz, T = int(slots.shape[0]), int(num_tokens)
    for d in decoders:
        d.reset(slots[live].tolist())
    if prompt > 0:
        ph = torch.randn(int(live.sum()), prompt, spec.hidden_size, generator=gen, dtype=torch.float64)
        for d in decoders:
            for layer in spec.ssm_layers:
                d.prefill(layer, _placed(d, ph), slots[live])
    worst = 0.0
    for step in range(steps):
        hidden = torch.randn(Bsz, T, spec.hidden_size, generator=gen, dtype=torch.float64)
        acc = torch.randint(1, T + 1, (Bsz,), generator=gen) if T > 1 else None
        outs = []
        for d in decoders:
            outs.append([d.step(layer, _placed(d, hidden), slots).double().cpu() for layer in spec.ssm_layers])
            d.commit(acc)
        for other in outs[1:]:
            for a, b in zip(outs[0], other):
                ref = a[live].abs().max().clamp_min(1e-300)
                worst = max(worst, float((b[live] - a[live]).abs().max() / ref))
        if progress is not None:
            progress(step + 1, worst)
    return worst
