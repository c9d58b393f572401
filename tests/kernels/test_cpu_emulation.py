"""The CPU emulation of the CUDA ops (replayssm_trtllm/ops/emulation.py) that lets CI run the Python around them.

It must (1) leave the ops refusing CPU tensors outside its context, and (2) through the device caches'
Python (ReplayStateCache / GdnReplayStateCache, device commit included), reproduce conventional float64
decoding: standard and speculative, ring wrap-around, padding rows, partial acceptance. The commit's error
reporting is checked against the device rules.
"""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.ops.emulation import cpu_emulation
from replayssm_trtllm.ops.gdn import GdnReplayStateCache
from replayssm_trtllm.ops.state_cache import ReplayStateCache
from replayssm_trtllm.reference import gdn_decode_naive, mamba2_decode_naive

H, P, N, G, S = 8, 32, 64, 2, 5


def test_outside_the_context_cpu_tensors_are_refused_as_always():
    c = ReplayStateCache(1, S, H, P, N, G, window=4, device="cpu")
    args = (0, torch.tensor([2, -1, 0], dtype=torch.int32), torch.randn(3, 1, H, P).bfloat16(), torch.randn(3, 1, H),
            torch.randn(3, 1, G, N).bfloat16(), torch.randn(3, 1, G, N).bfloat16(), -torch.rand(H), torch.randn(H),
            torch.randn(H), None)
    with pytest.raises(ValueError, match="CUDA device"):
        c.step(*args)
    with cpu_emulation():
        y = c.step(*args)
    assert y.shape == (3, 1, H, P)
    with pytest.raises(ValueError, match="CUDA device"):
        c.step(*args)


@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 3)])
def test_mamba2_cache_reproduces_conventional_decoding(mode, T):
    g = torch.Generator().manual_seed(1)
    st = 0.1 * torch.randn(S, H, P, N, generator=g, dtype=torch.float64)
    A, D, bias = -4 * torch.rand(H, generator=g), torch.randn(H, generator=g), 0.3 * torch.randn(H, generator=g) - 1
    sbi = torch.tensor([3, -1, 0, 4], dtype=torch.int32)
    live = [(0, 3), (2, 0), (3, 4)]
    worst = 0.0
    with cpu_emulation():
        c = ReplayStateCache(1, S, H, P, N, G, window=5, max_verify=T, mode=mode, device="cpu")
        c.reset(range(S), st.unsqueeze(0).float())
        st = st.float().double()
        for _ in range(14):
            x = torch.randn(4, T, H, P, generator=g).bfloat16()
            dt = torch.randn(4, T, H, generator=g)
            Bm, Cm = (torch.randn(4, T, G, N, generator=g).bfloat16() for _ in range(2))
            z = torch.randn(4, T, H, P, generator=g).bfloat16()
            acc = torch.randint(1, T + 1, (4,), generator=g, dtype=torch.int32)
            y = c.step(0, sbi, x, dt, Bm, Cm, A, D, bias, z)
            for b, s in live:
                yr, states = mamba2_decode_naive(st[s:s + 1], x[b:b + 1], dt[b:b + 1], Bm[b:b + 1], Cm[b:b + 1], A, D,
                                                 bias, z[b:b + 1])
                n = int(acc[b]) if T > 1 else 1
                st[s] = states[0, n - 1]
                worst = max(worst, float((y[b, :n].double() - yr[0, :n]).abs().max() / yr.abs().max()))
            c.commit(acc if T > 1 else None)
        c.check_errors()
    assert worst < 1e-2, worst          # bf16 outputs
    assert int(c.ring_len[1]) == 0 and int(c.ring_len[2]) == 0     # never-stepped slots


@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_gdn_cache_reproduces_conventional_decoding(mode, T):
    Hk, HV, K, V = 2, 4, 64, 64
    g = torch.Generator().manual_seed(2)
    st = 0.1 * torch.randn(S, HV, V, K, generator=g, dtype=torch.float64)
    A_log = torch.log(0.5 + 7.5 * torch.rand(HV, generator=g))
    dt_bias = 0.3 * torch.randn(HV, generator=g) - 2
    sbi = torch.tensor([1, 4, -1], dtype=torch.int32)
    live = [(0, 1), (1, 4)]
    worst = 0.0
    with cpu_emulation():
        c = GdnReplayStateCache(1, S, Hk, HV, K, V, window=6, max_verify=T, mode=mode, device="cpu")
        c.reset(range(S), st.unsqueeze(0).float())
        st = st.float().double()
        for _ in range(13):
            q, k = (torch.randn(3, T, Hk, K, generator=g).bfloat16() for _ in range(2))
            v = torch.randn(3, T, HV, V, generator=g).bfloat16()
            a, b = (torch.randn(3, T, HV, generator=g).bfloat16() for _ in range(2))
            acc = torch.randint(1, T + 1, (3,), generator=g, dtype=torch.int32)
            o = c.step(0, sbi, q, k, v, a, b, A_log, dt_bias)
            for r, s in live:
                orf, states = gdn_decode_naive(st[s:s + 1], q[r:r + 1], k[r:r + 1], v[r:r + 1], a[r:r + 1],
                                               b[r:r + 1], A_log, dt_bias)
                n = int(acc[r]) if T > 1 else 1
                st[s] = states[0, n - 1]
                worst = max(worst, float((o[r, :n].double() - orf[0, :n]).abs().max() / orf.abs().max()))
            c.commit(acc if T > 1 else None)
        c.check_errors()
    assert worst < 1e-2, worst


def test_commit_reports_the_first_bad_slot_like_the_device():
    with cpu_emulation():
        c = ReplayStateCache(1, S, H, P, N, G, window=4, max_verify=2, mode="speculative", device="cpu")
        c.ring_len[3] = 9                              # h > L: corrupt cursors
        rows = torch.tensor([0, 3, 1], dtype=torch.int32)
        c.commit(torch.tensor([1, 1, 3], dtype=torch.int32), rows, 2)    # slot 3 bad, then accepted 3 > T on slot 1
        assert int(c.error_slot[0]) == 3
        assert c.ring_len.tolist() == [1, 0, 0, 9, 0]   # only slot 0 advanced
        with pytest.raises(RuntimeError, match="invariant violated for slot 3"):
            c.check_errors()
