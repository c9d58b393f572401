"""Philox4x32-10 counter-based RNG (Salmon et al., SC'11; Random123 / curand) in torch int64.

Every 32-bit word is held in an int64 tensor and masked to 32 bits after each operation, so the
arithmetic is exact on any torch backend. The 32x32 -> 64-bit products are split into 16-bit
halves of the multiplier so no intermediate exceeds 2^49 (signed int64 never overflows).

Stochastic-rounding words (docs/formats.md, section 5): element ``e`` of one state uses
``philox4x32_10(counter=(e >> 2, slot, layer, flush_index), key=(seed_lo, seed_hi))[e & 3]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

MASK32 = 0xFFFFFFFF
PHILOX_M0 = 0xD2511F53  # multiplier applied to counter word 0
PHILOX_M1 = 0xCD9E8D57  # multiplier applied to counter word 2
PHILOX_W0 = 0x9E3779B9  # key bump, word 0 (golden ratio)
PHILOX_W1 = 0xBB67AE85  # key bump, word 1 (sqrt(3) - 1)
PHILOX_ROUNDS = 10


def _mulhilo(m: int, b: torch.Tensor):
    """(hi, lo) 32-bit words of the 64-bit product m * b, m a 32-bit constant, b int64 in [0, 2^32)."""
    p_lo = b * (m & 0xFFFF)          # < 2^48
    p_hi = b * (m >> 16)             # < 2^48
    s = p_lo + ((p_hi & 0xFFFF) << 16)  # < 2^49
    return (p_hi >> 16) + (s >> 32), s & MASK32


def philox4x32_10(counter: torch.Tensor, key: torch.Tensor, rounds: int = PHILOX_ROUNDS) -> torch.Tensor:
    """Philox4x32 with ``rounds`` rounds (10 = Philox4x32-10, the curand / Random123 default).

    counter: int64 [..., 4] with words in [0, 2^32); key: int64 [..., 2] (broadcast against counter).
    Returns int64 [..., 4], the four 32-bit output words (Random123 order: x, y, z, w).
    """
    if not isinstance(counter, torch.Tensor) or counter.dtype != torch.int64 or counter.shape[-1:] != (4,):
        raise ValueError(f"philox4x32_10: 'counter' must be int64 [..., 4]; got {_describe(counter)}")
    if not isinstance(key, torch.Tensor) or key.dtype != torch.int64 or key.shape[-1:] != (2,):
        raise ValueError(f"philox4x32_10: 'key' must be int64 [..., 2]; got {_describe(key)}")
    for name, t in (("counter", counter), ("key", key)):
        if t.numel() and bool(((t < 0) | (t > MASK32)).any()):
            raise ValueError(f"philox4x32_10: '{name}' words must be in [0, 2^32); "
                             f"got range [{int(t.min())}, {int(t.max())}]")
    c0, c1, c2, c3 = counter.unbind(-1)
    k0, k1 = key.unbind(-1)
    for r in range(rounds):
        if r:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        hi0, lo0 = _mulhilo(PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return torch.stack(torch.broadcast_tensors(c0, c1, c2, c3), dim=-1)


@dataclass(frozen=True)
class PhiloxKey:
    """Identifies one stochastic-rounding cast of one state (one slot, one layer, one flush).

    seed: 64-bit unsigned (split into key = (seed & 0xFFFFFFFF, seed >> 32));
    slot, layer, flush_index: 32-bit unsigned counter words 1, 2, 3.
    ``flush_index`` must differ between casts of the same (slot, layer) that should get independent
    rounding (e.g. the slot's absolute token position at the flush, or a per-slot flush count).
    """

    seed: int
    slot: int = 0
    layer: int = 0
    flush_index: int = 0

    def __post_init__(self):
        if not (0 <= int(self.seed) < 2**64):
            raise ValueError(f"PhiloxKey: 'seed' must be in [0, 2^64); got {self.seed}")
        for name in ("slot", "layer", "flush_index"):
            v = int(getattr(self, name))
            if not (0 <= v <= MASK32):
                raise ValueError(f"PhiloxKey: '{name}' must be in [0, 2^32); got {v}")

    @property
    def key_words(self):
        s = int(self.seed)
        return (s & MASK32, s >> 32)


def sr_words(key: PhiloxKey, numel: int, device=None) -> torch.Tensor:
    """The 32-bit random word of each element index 0..numel-1 of one state: int64 [numel].

    Element e takes output word (e & 3) of Philox4x32-10 at counter (e >> 2, slot, layer, flush_index),
    key (seed_lo, seed_hi); one Philox call serves four consecutive elements.
    """
    if not isinstance(key, PhiloxKey):
        raise ValueError(f"sr_words: 'key' must be a PhiloxKey; got {type(key).__name__}")
    if numel > 4 * (MASK32 + 1):
        raise ValueError(f"sr_words: a state may hold at most 2^34 elements; got {numel}")
    groups = (numel + 3) // 4
    ctr = torch.empty(groups, 4, dtype=torch.int64, device=device)
    ctr[:, 0] = torch.arange(groups, dtype=torch.int64, device=device)
    ctr[:, 1] = int(key.slot)
    ctr[:, 2] = int(key.layer)
    ctr[:, 3] = int(key.flush_index)
    k = torch.tensor(key.key_words, dtype=torch.int64, device=device)
    return philox4x32_10(ctr, k).reshape(-1)[:numel]


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).replace('torch.', '')} {list(t.shape)}"
    return type(t).__name__
