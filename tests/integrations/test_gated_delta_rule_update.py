"""ReplayGatedDeltaRuleUpdate: ReplaySSM behind the fused_sigmoid_gating_delta_rule_update convention.

CPU: the refusals (before any launch) and ``materialize`` against the float64 fold of the reference. GPU:
against our conventional GDN kernel on copies of the pools, in both input layouts ([B, 1, ...] and the packed
[1, B, ...] with cu_seqlens), with a padding row and a request started mid-run.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.integrations import ReplayGatedDeltaRuleUpdate
from replayssm_trtllm.reference import l2norm, replay

sys.path.insert(0, os.path.dirname(__file__))
from _lifecycle import (materialize_and_compare, rel_err, start_fresh_request,  # noqa: E402
                        under_cpu_emulation)

H, HV, K, V, S = 2, 4, 64, 64, 6


def _pools(n=2, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(0.1 * torch.randn(S, HV, V, K, generator=g)).to(device) for _ in range(n)]


def _args(Bsz, device="cpu", seed=1, packed=False, layer=0, T=1):
    """Keyword arguments of one call (inputs from ``seed``; A_log / dt_bias fixed per ``layer``, as in a model);
    packed: [1, B, ...] tensors with cu_seqlens."""
    w = torch.Generator().manual_seed(1000 + layer)
    A_log = torch.log(0.5 + 7.5 * torch.rand(HV, generator=w)).to(device)
    dt_bias = (0.3 * torch.randn(HV, generator=w) - 2.0).to(device)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(Bsz, T, H, K, generator=g).to(device, torch.bfloat16)
    k = torch.randn(Bsz, T, H, K, generator=g).to(device, torch.bfloat16)
    v = torch.randn(Bsz, T, HV, V, generator=g).to(device, torch.bfloat16)
    a = torch.randn((Bsz, HV) if T == 1 else (Bsz, T, HV), generator=g).to(device, torch.bfloat16)
    b = torch.randn((Bsz, HV) if T == 1 else (Bsz, T, HV), generator=g).to(device, torch.bfloat16)
    kw = dict(A_log=A_log, a=a, dt_bias=dt_bias, softplus_beta=1.0, softplus_threshold=20.0, q=q, k=k, v=v, b=b,
              use_qk_l2norm_in_kernel=True)
    if packed:
        kw.update(q=q.transpose(0, 1), k=k.transpose(0, 1), v=v.transpose(0, 1), a=a.unsqueeze(0),
                  b=b.unsqueeze(0), cu_seqlens=torch.arange(Bsz + 1, dtype=torch.int32, device=device))
    return kw


@pytest.mark.parametrize("change, match", [
    (dict(disable_state_update=True), r"\['disable_state_update'\]: the drop-in keeps no per-draft states"),
    (dict(is_kda=True), "is_kda=True"),
    (dict(lower_bound=-5.0), "lower_bound"),
    (dict(other=1), r"unsupported arguments \['other'\]"),
    (dict(use_qk_l2norm_in_kernel=False), "use_qk_l2norm_in_kernel must be True"),
    (dict(softplus_threshold=10.0), "softplus_beta / softplus_threshold must be 1 / 20"),
    (dict(pool="other"), "the state tensor is not one of the 2 registered pools"),
    (dict(q=torch.zeros(3, 2, H, K, dtype=torch.bfloat16)), "standard mode takes one token per row; got T=2"),
    (dict(q=torch.zeros(3, 1, H + 1, K, dtype=torch.bfloat16)), r"'q' must be \[B, 1, H=2, K=64\]"),
    (dict(q=torch.zeros(3, 1, H // 2, K, dtype=torch.bfloat16)),
     r"got \[3, 1, 1, 64\] \(with tensor parallelism .* num_key_heads=1 if this rank's q has 1\)"),
    (dict(v=torch.zeros(3, 1, HV, V + 1, dtype=torch.bfloat16)), "'k' / 'v' must match 'q'"),
    (dict(a=torch.zeros(3, HV + 1, dtype=torch.bfloat16)), r"'a' must be \[B=3, T=1, HV=4\], \[B, HV\]"),
    (dict(cu_seqlens=torch.arange(3, dtype=torch.int32)), "one token per sequence"),
])
def test_bad_calls_are_refused_before_any_launch(change, match):
    pools = _pools()
    op = ReplayGatedDeltaRuleUpdate(pools, H, window=4)
    kw = _args(3)
    pool = torch.zeros(S, HV, V, K) if change.get("pool") == "other" else pools[0]
    kw.update({k_: v_ for k_, v_ in change.items() if k_ != "pool"})
    with pytest.raises(ValueError, match=match):
        op(initial_state_source=pool, initial_state_indices=torch.arange(3, dtype=torch.int32), **kw)
    assert op._called == set()


def test_construction_checks():
    with pytest.raises(ValueError, match="HV=4 must be a multiple of num_key_heads=3"):
        ReplayGatedDeltaRuleUpdate(_pools(), 3)
    with pytest.raises(ValueError, match=r"key dim K=48 \(last dim\) must be one of"):
        ReplayGatedDeltaRuleUpdate([torch.zeros(S, HV, V, 48)], H)
    op = ReplayGatedDeltaRuleUpdate(_pools(), H, window=16)
    assert op.capacity == 16 and op.ring_u.dtype == torch.float16   # standard mode: L ring rows
    assert op.ring_bytes_per_slot_layer() == 16 * (4 * HV + 2 * HV * V + 2 * H * K)


def test_materialize_folds_each_slot_ring_into_its_pool_row():
    g = torch.Generator().manual_seed(4)
    pools = _pools(seed=5)
    before = [p.clone() for p in pools]
    op = ReplayGatedDeltaRuleUpdate(pools, H, window=6)
    C = op.capacity
    op.ring_g.copy_(-0.3 * torch.rand(op.ring_g.shape, generator=g))
    op.ring_u.copy_(torch.randn(op.ring_u.shape, generator=g).to(torch.float16))
    op.ring_k.copy_(torch.randn(op.ring_k.shape, generator=g).to(torch.bfloat16))
    origin = torch.tensor([0, 3, 6, 5, 1, 2], dtype=torch.int32)
    length = torch.tensor([6, 0, 4, 6, 2, 1], dtype=torch.int32)
    op.ring_origin.copy_(origin)
    op.ring_len.copy_(length)
    op.materialize(torch.tensor([0, 2, 3, 5]))
    for layer in range(2):
        for s in range(S):
            if s in (1, 4):
                assert torch.equal(pools[layer][s], before[layer][s])
                continue
            ridx = (int(origin[s]) + torch.arange(int(length[s]))) % C
            alphas = torch.exp(op.ring_g[layer, s, ridx].double()).T                        # [HV, h]
            us = op.ring_u[layer, s, ridx].double().permute(1, 0, 2)                        # [HV, h, V]
            ks = l2norm(op.ring_k[layer, s, ridx]).repeat_interleave(HV // H, dim=1).permute(1, 0, 2)
            want = replay(before[layer][s].double(), alphas, us, ks)
            torch.testing.assert_close(pools[layer][s].double(), want, rtol=1e-5, atol=1e-5)
    assert op.ring_len.tolist() == [0, 0, 0, 0, 2, 0]


def test_start_requests_spread_writes_neutral_records_that_materialize_leaves_alone():
    """The default "spread" phase: slot i of the started ones holds i % L neutral records (g, u, k) = (0, 0, 1) in
    every layer; materialize folds them and leaves the pool rows as the prefill wrote them (to fp32 rounding)."""
    pools = _pools(seed=6)
    before = [p.clone() for p in pools]
    op = ReplayGatedDeltaRuleUpdate(pools, H, window=4)
    for t in (op.ring_g, op.ring_u, op.ring_k):
        t.fill_(3)
    op.start_requests([4, 1, 3, 0, 5])
    assert op.ring_len.tolist() == [3, 1, 0, 2, 0, 0]
    for slot, d in ((4, 0), (1, 1), (3, 2), (0, 3), (5, 0)):
        assert bool((op.ring_g[:, slot, :d] == 0).all()) and bool((op.ring_u[:, slot, :d] == 0).all())
        assert bool((op.ring_k[:, slot, :d] == 1).all())
        assert float(op.ring_g[:, slot, d:].min()) == 3
    op.materialize()
    assert op.ring_len.tolist() == [0] * S
    for layer in range(2):
        torch.testing.assert_close(pools[layer], before[layer], rtol=1e-6, atol=1e-6)


def _vs_conventional(packed, dev):
    """2 layers, rows [5, -1, 0, 3], window 4, 22 steps (5 flushes per row), a new request in slot 3 at step 9;
    outputs against our conventional GDN kernel on copies of the pools; after the run, materialize makes the
    pools equal the conventional states."""
    from replayssm_trtllm.ops.gdn import gdn_decode
    pools = _pools(device=dev)
    ref = [p.clone() for p in pools]
    op = ReplayGatedDeltaRuleUpdate(pools, H, window=4)
    rows = torch.tensor([5, -1, 0, 3], dtype=torch.int32, device=dev)
    valid = (rows >= 0).cpu()
    for step in range(22):
        if step == 9:
            start_fresh_request(op, pools, ref, 3, (HV, V, K), dev)
        for layer in range(2):
            plain = _args(4, dev, seed=100 * step + layer, layer=layer)
            want = gdn_decode(ref[layer], rows, plain["q"], plain["k"], plain["v"], plain["a"].unsqueeze(1),
                              plain["b"].unsqueeze(1), plain["A_log"], plain["dt_bias"])
            kw = _args(4, dev, seed=100 * step + layer, packed=packed, layer=layer)
            o = op(initial_state_source=pools[layer], initial_state_indices=rows, **kw)
            got = o[0] if packed else o[:, 0]
            w = want[:, 0]
            err = rel_err(got, w, valid)
            assert err < 2e-2, (step, layer, err)
        assert op._called == set()
    materialize_and_compare(op, pools, ref, (5, 0, 3), dev, 5e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("packed", [False, True])
def test_drop_in_matches_the_conventional_kernel(packed):
    _vs_conventional(packed, "cuda")


@pytest.mark.parametrize("packed", [False, True])
def test_drop_in_path_under_cpu_emulation(packed):
    """The same with the ops emulated on the CPU by the float64 reference (ops/emulation.py)."""
    under_cpu_emulation(_vs_conventional, packed)


def _speculative_vs_sequential(dev, T=4):
    """mode='speculative': 2 layers, rows [4, -1, 1], window 6, T drafts per row and step (the triangular-solve
    verify) with random acceptance committed on the device, 14 steps. Every draft's output against float64
    sequential decoding from the row's committed state, which then advances by the accepted count; after the run
    materialize makes the pools equal it."""
    from replayssm_trtllm.reference import gdn_decode_naive
    pools = _pools(device=dev)
    truth = [p.detach().to("cpu", torch.float64).clone() for p in pools]
    op = ReplayGatedDeltaRuleUpdate(pools, H, window=6, max_verify=T, mode="speculative")
    rows = torch.tensor([4, -1, 1], dtype=torch.int32, device=dev)
    gen = torch.Generator().manual_seed(9)
    for step in range(14):
        acc = torch.randint(1, T + 1, (3,), generator=gen, dtype=torch.int32)
        for layer in range(2):
            kw = _args(3, dev, seed=10 * step + layer, layer=layer, T=T)
            o = op(initial_state_source=pools[layer], initial_state_indices=rows, **kw)
            for r, s in ((0, 4), (2, 1)):
                c = {n: kw[n][r:r + 1].cpu() for n in ("q", "k", "v", "a", "b")}
                orf, states = gdn_decode_naive(truth[layer][s:s + 1], c["q"], c["k"], c["v"], c["a"], c["b"],
                                               kw["A_log"].cpu(), kw["dt_bias"].cpu())
                err = float((o[r].double().cpu() - orf[0]).abs().max() / orf.abs().max())
                assert err < 2e-2, (step, layer, r, err)
                truth[layer][s] = states[0, int(acc[r]) - 1]
        op.commit(acc.to(dev))
    materialize_and_compare(op, pools, [t.to(dev, pools[0].dtype) for t in truth], (4, 1), dev, 5e-3)


@pytest.mark.gpu
def test_speculative_drop_in_matches_sequential_decoding():
    _speculative_vs_sequential("cuda")


def test_speculative_drop_in_under_cpu_emulation():
    under_cpu_emulation(_speculative_vs_sequential)


def test_speculative_refuses_packed_drafts():
    pools = _pools()
    op = ReplayGatedDeltaRuleUpdate(pools, H, window=6, max_verify=4, mode="speculative")
    kw = _args(2, T=3)
    kw.update(q=kw["q"].reshape(1, 6, H, K), k=kw["k"].reshape(1, 6, H, K), v=kw["v"].reshape(1, 6, HV, V),
              cu_seqlens=torch.tensor([0, 3, 6], dtype=torch.int32))
    with pytest.raises(ValueError, match="with cu_seqlens the drop-in takes one token per sequence"):
        op(initial_state_source=pools[0], initial_state_indices=torch.arange(2, dtype=torch.int32), **kw)
