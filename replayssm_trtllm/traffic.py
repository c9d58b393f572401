"""Memory-traffic model of the paper's Appendix C (Eq. 13, 15, 16), per head, per layer and per model.

All byte counts assume an FP32 state (4 bytes/element), bf16 values and keys, and a 4-byte decay,
as the paper does; only state and replay-buffer traffic is counted (inputs/outputs of a step are
identical for both methods and omitted).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .presets import ModelPreset


def record_bytes_per_head(dv: int, dk: int, heads_per_key: int = 1, act_bytes: int = 2) -> float:
    """r = 2 d_v + 2 d_k + 4 (Eq. 13); with heads_per_key > 1 the key is shared by that many heads."""
    return act_bytes * dv + act_bytes * dk / heads_per_key + 4


def window_traffic(dv: int, dk: int, L: int, r: float, state_bytes: int = 4):
    """(M_conv, M_replay) per head over one window of L standard-decoding steps (Eq. 13)."""
    s = state_bytes * dv * dk
    m_conv = 2 * L * s
    m_replay = (L + 1) * s + (L - 1) * (L + 2) / 2 * r
    return m_conv, m_replay


def traffic_per_token(dv: int, dk: int, L: int, r: float, T: int = 1, a: float = 1.0,
                      state_bytes: int = 4) -> float:
    """f(L), replay traffic per committed token (Eq. 15); equals M_replay / L for a = T = 1."""
    ms = state_bytes * dv * dk
    return ms / a + ms / L + r * L / (2 * a) - r / 2 + r * T / a - r * T / L


def optimal_window(dv: int, dk: int, r: float, T: int = 1, a: float = 1.0, state_bytes: int = 4) -> float:
    """L* = sqrt(2 a (M_S / r - T)) (Eq. 16)."""
    ms = state_bytes * dv * dk
    return math.sqrt(2 * a * (ms / r - T))


@dataclass
class TrafficRow:
    window: int
    conv_bytes_per_token: float
    replay_bytes_per_token: float

    @property
    def ratio(self) -> float:
        return self.replay_bytes_per_token / self.conv_bytes_per_token


def model_traffic(p: ModelPreset, windows, T: int = 1, a: float = 1.0, shared_keys: bool = False,
                  batch: int = 1):
    """Rows of per-token traffic for the whole model (all SSM layers, all heads, `batch` sequences).

    The conventional baseline per committed token is one state load + one store per step for
    standard decoding; with speculation (T > 1) it is one load + T snapshot stores per step, i.e.
    (1 + T) M_S / a per committed token.
    """
    hpk = p.heads // p.key_heads if shared_keys else 1
    r = record_bytes_per_head(p.dv, p.dk, hpk)
    ms = 4 * p.dv * p.dk
    scale = p.heads * p.num_ssm_layers * batch
    conv = (2 * ms if T == 1 else (1 + T) * ms / a) * scale
    rows = []
    for L in windows:
        if T == 1 and a == 1.0:
            _, m_rep = window_traffic(p.dv, p.dk, L, r)
            rep = m_rep / L
        else:
            rep = traffic_per_token(p.dv, p.dk, L, r, T, a)
        rows.append(TrafficRow(L, conv, rep * scale))
    return rows, r, optimal_window(p.dv, p.dk, r, T, a)
