"""The replay caches' current_state (ops/ring_fold.py): a slot's state after its committed tokens, checkpoint plus
committed ring records, against float64 conventional decoding of the same inputs, after every commit: standard and
speculative steps with partial acceptance, flushes, ring wrap-around, rows admitted with neutral records ("spread"),
padding rows. And the round trip a serving framework makes on preemption or a move between slots:
``reset(s2, current_state([s1]))``, then s1 and s2 decoded on, each against its own float64 state.

On the CPU the ops are emulated by the float64 reference (ops/emulation.py); on a GPU the same code runs the kernels
(every design the automatic choice takes at these sizes)."""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.ops.emulation import cpu_emulation
from replayssm_trtllm.ops.gdn import GdnReplayStateCache
from replayssm_trtllm.ops.state_cache import ReplayStateCache
from replayssm_trtllm.reference import gdn_decode_naive, mamba2_decode_naive

S = 6


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().cpu() - b.double().cpu()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def _mamba2(mode, T, device, steps=13):
    """Steps a two-layer Mamba-2 cache (3 rows on slots 3, 0, 5, one padding row) and checks current_state of the
    live slots against float64 conventional states after every commit; then moves slot 3's state to slot 1 (reset
    with current_state) and decodes both on, each checked against its own float64 state. Returns the largest
    relative state error."""
    H, P, N, G, L = 8, 32, 64, 2, 5
    g = torch.Generator().manual_seed(3)
    nl = 2
    st = 0.1 * torch.randn(nl, S, H, P, N, generator=g, dtype=torch.float64)
    A = -4 * torch.rand(nl, H, generator=g)
    D, bias = torch.randn(nl, H, generator=g), 0.3 * torch.randn(nl, H, generator=g) - 1
    sbi = torch.tensor([3, -1, 0, 5], dtype=torch.int32)
    live = [(0, 3), (2, 0), (3, 5)]
    c = ReplayStateCache(nl, S, H, P, N, G, window=L, max_verify=T, mode=mode, device=device)
    c.reset(range(S), st.float().to(device), phase="spread")       # neutral records in the rings
    st = st.float().double()
    worst = 0.0

    def one_step(rows, live_rows, gen):
        x = torch.randn(len(rows), T, H, P, generator=gen).bfloat16()
        dt = torch.randn(len(rows), T, H, generator=gen)
        Bm, Cm = (torch.randn(len(rows), T, G, N, generator=gen).bfloat16() for _ in range(2))
        acc = torch.randint(1, T + 1, (len(rows),), generator=gen, dtype=torch.int32)
        for layer in range(nl):
            c.step(layer, rows.to(device), x.to(device), dt.to(device), Bm.to(device), Cm.to(device),
                   A[layer].to(device), D[layer].to(device), bias[layer].to(device), None)
            for b, s in live_rows:
                _, states = mamba2_decode_naive(st[layer, s:s + 1], x[b:b + 1], dt[b:b + 1], Bm[b:b + 1],
                                                Cm[b:b + 1], A[layer], D[layer], bias[layer], None)
                st[layer, s] = states[0, (int(acc[b]) if T > 1 else 1) - 1]
        c.commit(acc.to(device) if T > 1 else None)

    for _ in range(steps):
        one_step(sbi, live, g)
        slots = [s for _, s in live]
        worst = max(worst, _rel(c.current_state(slots, A.to(device)), st[:, slots]))
    # a move: slot 3's state into slot 1 (a fresh ring), then both decoded alike
    c.reset([1], c.current_state([3], A.to(device)))
    st[:, 1] = st[:, 3]
    both = torch.tensor([3, 1], dtype=torch.int32)
    for _ in range(6):
        one_step(both, [(0, 3), (1, 1)], g)
        worst = max(worst, _rel(c.current_state([3, 1], A.to(device)), st[:, [3, 1]]))
    if device == "cuda":
        c.check_errors()
    return worst


def _gdn(mode, T, device, steps=13):
    Hk, HV, K, V, L = 2, 4, 64, 64, 6
    g = torch.Generator().manual_seed(4)
    nl = 2
    st = 0.1 * torch.randn(nl, S, HV, V, K, generator=g, dtype=torch.float64)
    A_log = torch.log(0.5 + 7.5 * torch.rand(nl, HV, generator=g))
    dt_bias = 0.3 * torch.randn(nl, HV, generator=g) - 2
    sbi = torch.tensor([1, 4, -1, 2], dtype=torch.int32)
    live = [(0, 1), (1, 4), (3, 2)]
    c = GdnReplayStateCache(nl, S, Hk, HV, K, V, window=L, max_verify=T, mode=mode, device=device)
    c.reset(range(S), st.float().to(device), phase="spread")
    st = st.float().double()
    worst = 0.0

    def one_step(rows, live_rows, gen):
        n = len(rows)
        q, k = (torch.randn(n, T, Hk, K, generator=gen).bfloat16() for _ in range(2))
        v = torch.randn(n, T, HV, V, generator=gen).bfloat16()
        a, b = (torch.randn(n, T, HV, generator=gen).bfloat16() for _ in range(2))
        acc = torch.randint(1, T + 1, (n,), generator=gen, dtype=torch.int32)
        for layer in range(nl):
            c.step(layer, rows.to(device), q.to(device), k.to(device), v.to(device), a.to(device), b.to(device),
                   A_log[layer].to(device), dt_bias[layer].to(device))
            for r, s in live_rows:
                _, states = gdn_decode_naive(st[layer, s:s + 1], q[r:r + 1], k[r:r + 1], v[r:r + 1], a[r:r + 1],
                                             b[r:r + 1], A_log[layer], dt_bias[layer])
                st[layer, s] = states[0, (int(acc[r]) if T > 1 else 1) - 1]
        c.commit(acc.to(device) if T > 1 else None)

    for _ in range(steps):
        one_step(sbi, live, g)
        slots = [s for _, s in live]
        worst = max(worst, _rel(c.current_state(slots), st[:, slots]))
    c.reset([0], c.current_state([4]))
    st[:, 0] = st[:, 4]
    both = torch.tensor([4, 0], dtype=torch.int32)
    for _ in range(6):
        one_step(both, [(0, 4), (1, 0)], g)
        worst = max(worst, _rel(c.current_state([4, 0]), st[:, [4, 0]]))
    if device == "cuda":
        c.check_errors()
    return worst


# float32 checkpoints and records; Mamba-2's records hold bf16 x / B (the inputs' own values), GDN's fp16 u
M2_TOL, GDN_TOL = 1e-4, 3e-3


@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 3)])
def test_mamba2_current_state_under_cpu_emulation(mode, T):
    with cpu_emulation():
        assert _mamba2(mode, T, "cpu") < M2_TOL


@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_gdn_current_state_under_cpu_emulation(mode, T):
    with cpu_emulation():
        assert _gdn(mode, T, "cpu") < GDN_TOL


@pytest.mark.gpu
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 3)])
def test_mamba2_current_state_on_the_kernels(mode, T):
    assert _mamba2(mode, T, "cuda") < M2_TOL


@pytest.mark.gpu
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_gdn_current_state_on_the_kernels(mode, T):
    assert _gdn(mode, T, "cuda") < GDN_TOL


def test_current_state_refusals():
    with cpu_emulation():
        c = ReplayStateCache(1, S, 8, 32, 64, 2, window=4, device="cpu")
        A = -torch.rand(8)
        with pytest.raises(ValueError, match=r"'A' must be \[num_layers, H\] = \[1, 8\]; got \[1, 7\]"):
            c.current_state([0], A[:7])
        with pytest.raises(ValueError, match=r"slots must be in \[0, 6\); got \[6, -1\]"):
            c.current_state([0, 6, -1], A)
        rows = torch.tensor([0], dtype=torch.int32)
        c.step(0, rows, torch.randn(1, 1, 8, 32).bfloat16(), torch.randn(1, 1, 8),
               torch.randn(1, 1, 2, 64).bfloat16(), torch.randn(1, 1, 2, 64).bfloat16(), A)
        with pytest.raises(ValueError, match="a step ran and is not committed"):
            c.current_state([0], A)
        c.commit()
        assert c.current_state([0], A).shape == (1, 1, 8, 32, 64)
        cg = GdnReplayStateCache(1, S, 2, 4, 64, 64, window=4, device="cpu")
        assert cg.current_state([]).shape == (1, 0, 4, 64, 64)
