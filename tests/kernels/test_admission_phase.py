"""Flush phases at admission (replayssm_trtllm/state/phase.py) through the torch-op caches on the GPU: rows reset
with phase="spread" carry neutral records ahead of their own, so their first flush comes earlier; outputs must equal
those of the same rows without a phase up to fp32 rounding (the flushes happen at other steps), at the model shapes,
with the library's automatic kernel choice (the split kernels at B = 64). The float64 proof that neutral records
change nothing is tests/reference/test_ref_caches.py (test_cache_admission_phase_matches_conventional)."""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.reference.testing import (random_gdn_inputs, random_gdn_layer, random_mamba2_inputs,
                                                random_mamba2_layer, random_state)

pytestmark = pytest.mark.gpu

BF16 = torch.bfloat16


def _rel(a, b):
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def _flush_rows(cache, rows, T):
    h = cache.ring_len[rows.long()]
    return int((h + 1 == cache.window).sum()) if T == 1 else int((h + T > cache.window).sum())


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("mode,T", [("standard", 1), ("speculative", 4)])
def test_spread_phase_same_outputs_fewer_rows_per_flush_step(family, mode, T):
    """B = 64 rows admitted together, L = 16: with phase="spread" they hold 0, 1, ... 15, 0, 1, ... neutral records;
    every step's outputs within 2e-2 (relative to the largest) of the same rows without a phase (bf16 outputs, fp32
    state, flushes at different steps); in standard mode 4 rows flush per step instead of all 64 at once."""
    from replayssm_trtllm.ops.gdn import GdnReplayStateCache
    from replayssm_trtllm.ops.state_cache import ReplayStateCache
    g = torch.Generator().manual_seed(17 + T)
    B, L, steps = 64, 16, 40
    if family == "mamba2":
        H, P, N, G = 128, 64, 128, 8  # Nemotron-3-Super-120B
        layer = {k: v.cuda() for k, v in random_mamba2_layer(H, g).items()}
        pre = random_state((1, B, H, P, N), g).float()
        make = lambda: ReplayStateCache(1, B, H, P, N, G, L, T, mode)  # noqa: E731
    else:
        H, HV, K, V = 16, 32, 128, 128  # Qwen3.5-4B
        layer = {k: v.cuda() for k, v in random_gdn_layer(HV, g).items()}
        pre = (0.5 * torch.randn((1, B, HV, V, K), generator=g)).float()
        make = lambda: GdnReplayStateCache(1, B, H, HV, K, V, L, T, mode)  # noqa: E731
    caches = {}
    for phase in (None, "spread"):
        c = make()
        c.reset(torch.arange(B), pre, phase=phase)
        caches[phase] = c
    assert caches["spread"].ring_len.tolist() == [i % L for i in range(B)]
    rows = torch.arange(B, dtype=torch.int32, device="cuda")
    flush_counts = {None: [], "spread": []}
    for t in range(steps):
        if family == "mamba2":
            inp = {k: (v.cuda().to(BF16) if v is not None else None)
                   for k, v in random_mamba2_inputs(B, T, H, P, N, G, g).items()}
            args = dict(x=inp["x"], dt_raw=inp["dt_raw"], B=inp["Bm"], C=inp["Cm"], z=inp["z"], **layer)
        else:
            inp = {k: v.cuda().to(BF16) for k, v in random_gdn_inputs(B, T, H, HV, K, V, g).items()}
            args = dict(**inp, **layer)
        acc = torch.randint(1, T + 1, (B,), generator=g, dtype=torch.int32).cuda() if T > 1 else None
        outs = {}
        for phase, c in caches.items():
            flush_counts[phase].append(_flush_rows(c, rows, T))
            outs[phase] = c.step(0, rows, **args)
            c.commit(acc)
        assert not torch.isnan(outs["spread"]).any()
        e = _rel(outs["spread"], outs[None])
        assert e < 2e-2, f"step {t}: phase changed the outputs by {e:.3e} (relative to the max)"
    torch.cuda.synchronize()
    if T == 1:  # in phase without a phase: all B rows flush on one step; spread: B / L per step after a window
        assert max(flush_counts[None]) == B
        assert max(flush_counts["spread"][L:]) == B // L
    assert sum(flush_counts["spread"]) > 0
