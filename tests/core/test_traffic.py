import math

import pytest

from replayssm_trtllm.presets import PRESETS, get_preset
from replayssm_trtllm.traffic import (model_traffic, optimal_window, record_bytes_per_head,
                                      traffic_per_token, window_traffic)


def test_super_ratio_matches_paper_appendix_c3():
    p = get_preset("nemotron-3-super-120b")
    r = record_bytes_per_head(p.dv, p.dk)
    assert r == 2 * 64 + 2 * 128 + 4
    m_conv, m_rep = window_traffic(p.dv, p.dk, 16, r)
    assert m_conv == 8 * 16 * 64 * 128
    assert abs(m_rep / m_conv - 0.58) < 0.01


def test_eq15_reduces_to_eq13_for_standard_decoding():
    for L in (1, 4, 16, 33):
        r = record_bytes_per_head(80, 128)
        _, m_rep = window_traffic(80, 128, L, r)
        assert math.isclose(traffic_per_token(80, 128, L, r, T=1, a=1.0), m_rep / L, rel_tol=1e-12)


def test_optimal_window_is_argmin_of_eq15_and_matches_paper():
    p = get_preset("nemotron-3-super-120b")
    r = record_bytes_per_head(p.dv, p.dk)
    assert round(4 * p.dv * p.dk / r) == 84
    assert round(optimal_window(p.dv, p.dk, r)) == 13
    assert round(optimal_window(p.dv, p.dk, r, T=4, a=3.5)) == 24
    for T, a in ((1, 1.0), (4, 3.5), (8, 2.0)):
        lstar = optimal_window(p.dv, p.dk, r, T, a)
        f = lambda L: traffic_per_token(p.dv, p.dk, L, r, T, a)
        assert f(lstar) <= f(lstar * 0.9) and f(lstar) <= f(lstar * 1.1)


def test_super_model_totals_match_appendix_c2():
    p = get_preset("nemotron-3-super-120b")
    rows, _, _ = model_traffic(p, [16])
    # 40 layers x 4 MiB state x (load + store) = 320 MiB per sequence per step.
    assert rows[0].conv_bytes_per_token == 320 * 2**20


def test_presets_are_consistent():
    for name, p in PRESETS.items():
        assert p.heads % p.key_heads == 0, name
        assert p.family in ("mamba2", "gdn")
        assert set(p.sources) >= {"heads", "head_dim", "state_dim", "key_heads"}
    assert get_preset("nemotron-3-nano-4b").head_dim == 80
    assert get_preset("qwen3.5-122b").heads == 64
    with pytest.raises(ValueError, match="unknown model preset 'gpt'"):
        get_preset("gpt")


def test_ring_memory_fraction_super():
    # design.md ring layout at L=16, T=4: ring + cursors per slot per layer vs the FP32 state.
    p = get_preset("nemotron-3-super-120b")
    ring = 20 * p.record_bytes(shared_keys=True) + 8  # two int32 cursors (shared by layers; counted once)
    assert ring / p.state_bytes() < 0.12
