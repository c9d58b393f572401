"""ReplaySelectiveStateUpdate: ReplaySSM behind FlashInfer's selective_state_update calling convention.

CPU: the argument checks (everything refused before a kernel would launch) and ``materialize`` (pure torch)
against the float64 reference fold. GPU: against our conventional kernel (always) and FlashInfer's own
``selective_state_update`` (when its wheel is installed), eager and in a CUDA graph.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.integrations import ReplaySelectiveStateUpdate
from replayssm_trtllm.reference import replay

sys.path.insert(0, os.path.dirname(__file__))
from _lifecycle import (materialize_and_compare, rel_err, start_fresh_request,  # noqa: E402
                        under_cpu_emulation)

H, P, N, G, S = 16, 64, 128, 2, 6


def _pools(n=2, device="cpu", dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(0.1 * torch.randn(S, H, P, N, generator=g)).to(device=device, dtype=dtype) for _ in range(n)]


def _inputs(Bsz, device="cpu", seed=1, tie="view", layer=0, T=None):
    """FlashInfer-style arguments (tie_hdim broadcast views, or materialized copies with tie='copy'): the step's
    inputs from ``seed``, the layer's parameters (A, D, dt_bias: fixed for a layer, as in a model) from ``layer``."""
    w = torch.Generator().manual_seed(1000 + layer)
    A = -torch.exp(torch.log(0.5 + 7.5 * torch.rand(H, generator=w))).to(device)
    D = torch.randn(H, generator=w).to(device)
    dt_bias = (0.3 * torch.randn(H, generator=w) - 2.0).to(device)
    g = torch.Generator().manual_seed(seed)
    lead = (Bsz,) if T is None else (Bsz, T)          # T: speculative [B, T, ...] inputs
    x = torch.randn(lead + (H, P), generator=g).to(device, torch.bfloat16)
    dt = (0.5 * torch.randn(lead + (H,), generator=g) - 1.0).to(device)
    B = torch.randn(lead + (G, N), generator=g).to(device, torch.bfloat16)
    C = torch.randn(lead + (G, N), generator=g).to(device, torch.bfloat16)
    z = torch.randn(lead + (H, P), generator=g).to(device, torch.bfloat16)
    kw = dict(x=x, dt=dt.unsqueeze(-1).expand(lead + (H, P)), A=A.view(H, 1, 1).expand(H, P, N), B=B, C=C,
              D=D.view(H, 1).expand(H, P), z=z, dt_bias=dt_bias.view(H, 1).expand(H, P), dt_softplus=True)
    if tie == "copy":
        kw = {k: (v.contiguous() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    per_head = dict(dt=dt, A=A, D=D, dt_bias=dt_bias)
    return kw, per_head


# ---- CPU: refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("change, match", [
    (dict(disable_state_update=True), r"\['disable_state_update'\]: the drop-in keeps no per-draft states"),
    (dict(intermediate_states_buffer=torch.zeros(1)), "keeps no per-draft states"),
    (dict(rand_seed=torch.zeros(1)), r"stochastic rounding of the state \(rand_seed\)"),
    (dict(weird=1), r"unsupported arguments \['weird'\]"),
    (dict(dt_softplus=False), "dt_softplus must be True"),
    (dict(state="other"), "the state tensor is not one of the 2 registered pools"),
    (dict(x=torch.zeros(3, H, P + 1, dtype=torch.bfloat16)), r"'x' must be \[B, H=16, P=64\]"),
    (dict(x=torch.zeros(3, H, P, dtype=torch.float16)), "'x' must be torch.bfloat16"),
    (dict(dt=torch.zeros(3, H + 1)), r"'dt' must be \[3, 16\] or with a trailing P"),
    (dict(A=torch.zeros(H + 1)), r"'A' must be \[H=16\]"),
    (dict(B=torch.zeros(3, 1, N, dtype=torch.bfloat16)),
     r"'B' must be \[3, 2, 128\] \(ngroups=2\); got \[3, 1, 128\] \(with tensor parallelism .* ngroups=1"),
    (dict(C=torch.zeros(3, G, N // 2, dtype=torch.bfloat16)), r"'C' must be \[3, 2, 128\] \(ngroups=2\); got \[3, 2, 64\]$"),
])
def test_bad_calls_are_refused_before_any_launch(change, match):
    pools = _pools()
    op = ReplaySelectiveStateUpdate(pools, G, window=4)
    kw, _ = _inputs(3)
    kw.update(change)
    state = torch.zeros(S, H, P, N) if kw.get("state") == "other" else pools[0]
    kw.pop("state", None)
    with pytest.raises(ValueError, match=match):
        op(state, **kw)
    assert op._called == set()


def test_a_copy_that_varies_along_p_is_refused():
    pools = _pools()
    op = ReplaySelectiveStateUpdate(pools, G, window=4)
    kw, _ = _inputs(3, tie="copy")
    D = kw["D"].clone()
    D[3, 5] += 1.0
    kw["D"] = D
    with pytest.raises(ValueError, match=r"'D' \[16, 64\] varies along its trailing dims"):
        op(pools[0], **kw)


def test_construction_checks():
    with pytest.raises(ValueError, match="at least one"):
        ReplaySelectiveStateUpdate([], G)
    with pytest.raises(ValueError, match=r"states\[1\] must be torch.float32 \[6, 16, 64, 128\]"):
        ReplaySelectiveStateUpdate([torch.zeros(S, H, P, N), torch.zeros(S, H, P, 64)], G)
    with pytest.raises(ValueError, match="H=16 must be a multiple of ngroups=3"):
        ReplaySelectiveStateUpdate(_pools(), 3)
    p = torch.zeros(S, H, P, N)
    with pytest.raises(ValueError, match="share a data pointer"):
        ReplaySelectiveStateUpdate([p, p], G)
    op = ReplaySelectiveStateUpdate(_pools(), G, window=16)
    assert op.capacity == 16   # standard mode: L ring rows
    assert op.ring_bytes_per_slot_layer() == 16 * (4 * H + 2 * H * P + 2 * G * N)


# ---- CPU: materialize against the float64 fold ---------------------------------------------------------
def test_materialize_folds_each_slot_ring_into_its_pool_row():
    g = torch.Generator().manual_seed(4)
    pools = _pools(dtype=torch.float32, seed=5)
    before = [p.clone() for p in pools]
    op = ReplaySelectiveStateUpdate(pools, G, window=6)
    C = op.capacity
    op.ring_dt.copy_(0.2 * torch.rand(op.ring_dt.shape, generator=g))
    op.ring_x.copy_(torch.randn(op.ring_x.shape, generator=g).to(torch.bfloat16))
    op.ring_B.copy_(torch.randn(op.ring_B.shape, generator=g).to(torch.bfloat16))
    origin = torch.tensor([0, 3, 6, 5, 1, 2], dtype=torch.int32)     # wrapping rings (C = 7)
    length = torch.tensor([6, 0, 4, 6, 2, 1], dtype=torch.int32)
    op.ring_origin.copy_(origin)
    op.ring_len.copy_(length)
    op.A = [-torch.linspace(0.5, 8, H), -torch.linspace(1, 3, H)]
    op.materialize([0, 2, 3, 5, -1])
    rep = H // G
    for layer in range(2):
        for s in range(S):
            if s in (1, 4):       # not asked for (slot 4 keeps its 2 records)
                assert torch.equal(pools[layer][s], before[layer][s])
                continue
            ridx = (int(origin[s]) + torch.arange(int(length[s]))) % C
            dts = op.ring_dt[layer, s, ridx].double()                                  # [h, H]
            alphas = torch.exp(dts * op.A[layer].double()).T                           # [H, h]
            vs = (dts[..., None] * op.ring_x[layer, s, ridx].double()).permute(1, 0, 2)   # [H, h, P]
            ks = op.ring_B[layer, s, ridx].double().repeat_interleave(rep, dim=1).permute(1, 0, 2)   # [H, h, N]
            want = replay(before[layer][s].double(), alphas, vs, ks)
            torch.testing.assert_close(pools[layer][s].double(), want, rtol=1e-5, atol=1e-5)
    assert op.ring_len.tolist() == [0, 0, 0, 0, 2, 0]
    assert op.ring_origin.tolist() == [6 % C, 3, (6 + 4) % C, (5 + 6) % C, 1, (2 + 1) % C]


def test_start_requests_sets_rings_and_refuses_mid_step():
    """phase=None empties the rings; the default "spread" gives consecutive phases continuing across calls (rows
    started before count), with neutral records (dt, x, B) = 0 at ring indices 0 .. d - 1 in every layer and
    nothing else touched; per-slot phases are taken as given; bad phases are refused before anything changes."""
    op = ReplaySelectiveStateUpdate(_pools(), G, window=4)
    op.ring_len.fill_(3)
    for t in (op.ring_dt, op.ring_x, op.ring_B):
        t.fill_(7)
    op.start_requests([1, 4], phase=None)
    assert op.ring_len.tolist() == [3, 0, 3, 3, 0, 3]
    op.start_requests([5, -1, 2, 0])   # two rows started before: phases (2 + i) % 4 by position, -1's skipped
    assert op.ring_len.tolist() == [1, 0, 0, 3, 0, 2]
    assert op.ring_origin[[0, 2, 5]].tolist() == [0, 0, 0]
    for t in (op.ring_dt, op.ring_x, op.ring_B):
        assert float(t[:, 5, :2].abs().max()) == 0 and float(t[:, 5, 2:].min()) == 7   # slot 5: two records
        assert float(t[:, 0, :1].abs().max()) == 0 and float(t[:, 0, 1:].min()) == 7   # slot 0: one
        assert float(t[:, 2].min()) == 7 and float(t[:, 3].min()) == 7                 # phase 0 / untouched
    op.start_requests([3], phase=[1])
    assert int(op.ring_len[3]) == 1
    with pytest.raises(ValueError, match=r"start_requests: each phase .* must be in \[0, L - 1 = 3\]; got 4"):
        op.start_requests([1], phase=4)
    with pytest.raises(ValueError, match=r"'phase' must be None, 'spread'"):
        op.start_requests([1], phase="even")
    assert int(op.ring_len[1]) == 0
    op._called.add(0)
    with pytest.raises(ValueError, match="a step is half done"):
        op.start_requests([2])
    with pytest.raises(ValueError, match="a step is half done"):
        op.materialize()
    with pytest.raises(ValueError, match=r"layers \[1\] did not step"):
        op.commit()


# ---- GPU -----------------------------------------------------------------------------------------------
def _conventional_step(pools_ref, kw, per_head, rows):
    out = []
    for layer, pool in enumerate(pools_ref):
        y = torch.ops.replayssm.mamba2_decode(pool, kw[layer]["x"], per_head[layer]["dt"], kw[layer]["B"],
                                              kw[layer]["C"], per_head[layer]["A"], per_head[layer]["D"],
                                              per_head[layer]["dt_bias"], kw[layer]["z"], rows, None)
        out.append(y)
    return out


def _vs_conventional(tie, dev):
    """2 layers, 6 slots, rows [5, -1, 0, 3] (a padding row), window 4, 22 steps (5 flushes per row), a new
    request in slot 3 at step 9 (both pools get the same fresh row; start_requests empties its ring).
    Outputs each step against our conventional kernel on a copy of the pools; after the run, materialize
    makes the pools equal the conventional states."""
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    pools = _pools(device=dev)
    ref = [p.clone() for p in pools]
    op = ReplaySelectiveStateUpdate(pools, G, window=4)
    rows = torch.tensor([5, -1, 0, 3], dtype=torch.int32, device=dev)
    valid = (rows >= 0).cpu()
    for step in range(22):
        if step == 9:
            start_fresh_request(op, pools, ref, 3, (H, P, N), dev)
        kws, heads = zip(*[_inputs(4, dev, seed=100 * step + layer, tie=tie, layer=layer) for layer in range(2)])
        want = _conventional_step(ref, kws, heads, rows)
        for layer in range(2):
            y = op(pools[layer], state_batch_indices=rows, pad_slot_id=-1, **kws[layer])
            err = rel_err(y, want[layer], valid)
            assert err < 2e-2, (step, layer, err)
        assert op._called == set()          # auto commit after the last layer
    materialize_and_compare(op, pools, ref, (5, 0, 3), dev, 2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("tie", ["view", "copy"])
def test_drop_in_matches_the_conventional_kernel(tie):
    _vs_conventional(tie, "cuda")


@pytest.mark.parametrize("tie", ["view", "copy"])
def test_drop_in_path_under_cpu_emulation(tie):
    """The same with the ops emulated on the CPU by the float64 reference (ops/emulation.py): the drop-in's
    argument handling, rings, auto commit, start_requests and materialize, without a GPU."""
    under_cpu_emulation(_vs_conventional, tie)


@pytest.mark.gpu
def test_drop_in_in_a_cuda_graph():
    """Two layers' calls and the auto commit captured once and replayed 12 times (window 4): outputs
    equal the eager conventional kernel's, as in the eager test."""
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    dev = "cuda"
    pools = _pools(device=dev)
    ref = [p.clone() for p in pools]
    op = ReplaySelectiveStateUpdate(pools, G, window=4)
    rows = torch.tensor([2, 4, 0], dtype=torch.int32, device=dev)
    kws, heads = zip(*[_inputs(3, dev, seed=7 + layer, layer=layer) for layer in range(2)])
    static = [{k: (v.clone() if isinstance(v, torch.Tensor) and k in ("x", "B", "C", "z") else v)
               for k, v in kw.items()} for kw in kws]
    outs = [torch.empty_like(s["x"]) for s in static]
    # warm up on a side stream (allocations, one-time checks), then reset the state it advanced
    snap = [p.clone() for p in pools]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for layer in range(2):
            op(pools[layer], state_batch_indices=rows, out=outs[layer], **static[layer])
    torch.cuda.current_stream().wait_stream(s)
    for p, q in zip(pools, snap):
        p.copy_(q)
    op.start_requests([0, 2, 4])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for layer in range(2):
            op(pools[layer], state_batch_indices=rows, out=outs[layer], **static[layer])
    for step in range(12):
        new, _ = zip(*[_inputs(3, dev, seed=1000 + 10 * step + layer, layer=layer) for layer in range(2)])
        for layer in range(2):
            for k in ("x", "B", "C", "z"):
                static[layer][k].copy_(new[layer][k])
        # dt / A / D / dt_bias stay those of the capture (the conventional step uses the same ones)
        heads_now = [dict(heads[layer]) for layer in range(2)]
        inputs_now = [dict(static[layer]) for layer in range(2)]
        want = _conventional_step(ref, inputs_now, heads_now, rows)
        graph.replay()
        for layer in range(2):
            err = (outs[layer].float() - want[layer].float()).abs().max() / want[layer].float().abs().max()
            assert err < 2e-2, (step, layer, float(err))
    torch.cuda.synchronize()
    op.check_errors()


@pytest.mark.gpu
def test_drop_in_matches_flashinfer():
    """Against FlashInfer's own selective_state_update, same arguments (tie_hdim views, fp32 dt, int32 rows
    with pad_slot_id -1), 20 steps through window 8; then materialize equals FlashInfer's pools."""
    from replayssm_trtllm.bench.peers import flashinfer_available
    ok, why = flashinfer_available()
    if not ok:
        pytest.skip(f"FlashInfer not available: {why}")
    from flashinfer.mamba import selective_state_update
    dev = "cuda"
    pools = _pools(device=dev)
    ref = [p.clone() for p in pools]
    op = ReplaySelectiveStateUpdate(pools, G, window=8)
    rows = torch.tensor([1, -1, 4, 0], dtype=torch.int32, device=dev)
    valid = (rows >= 0).cpu()
    for step in range(20):
        for layer in range(2):
            kw, _ = _inputs(4, dev, seed=50 * step + layer, layer=layer)
            want = torch.empty_like(kw["x"])
            selective_state_update(ref[layer], kw["x"], kw["dt"], kw["A"], kw["B"], kw["C"], kw["D"], z=kw["z"],
                                   dt_bias=kw["dt_bias"], dt_softplus=True, state_batch_indices=rows,
                                   pad_slot_id=-1, out=want)
            y = op(pools[layer], state_batch_indices=rows, pad_slot_id=-1, **kw)
            err = rel_err(y, want, valid)
            assert err < 2e-2, (step, layer, err)
    materialize_and_compare(op, pools, ref, (1, 4, 0), dev, 2e-3)


def _speculative_vs_sequential(dev, T=3):
    """mode='speculative': 2 layers, rows [4, -1, 1], window 6, T drafts per row and step with random acceptance
    (committed on the device), 14 steps (early flushes, wrap-around). Every draft's output against float64
    sequential decoding of the drafts from the row's committed state, which then advances by the accepted count;
    after the run materialize makes the pools equal it."""
    from replayssm_trtllm.reference import mamba2_decode_naive
    pools = _pools(device=dev)
    truth = [p.detach().to("cpu", torch.float64).clone() for p in pools]
    op = ReplaySelectiveStateUpdate(pools, G, window=6, max_verify=T, mode="speculative")
    assert not op.auto_commit and op.capacity == 6 + T
    rows = torch.tensor([4, -1, 1], dtype=torch.int32, device=dev)
    gen = torch.Generator().manual_seed(9)
    for step in range(14):
        acc = torch.randint(1, T + 1, (3,), generator=gen, dtype=torch.int32)
        for layer in range(2):
            kw, hd = _inputs(3, dev, seed=10 * step + layer, layer=layer, T=T)
            y = op(pools[layer], state_batch_indices=rows, **kw)
            for b, s in ((0, 4), (2, 1)):
                c = {k: kw[k][b:b + 1].cpu() for k in ("x", "B", "C", "z")}
                yr, states = mamba2_decode_naive(truth[layer][s:s + 1], c["x"], hd["dt"][b:b + 1].cpu(), c["B"], c["C"],
                                                 hd["A"].cpu(), hd["D"].cpu(), hd["dt_bias"].cpu(), c["z"])
                err = float((y[b].double().cpu() - yr[0]).abs().max() / yr.abs().max())
                assert err < 2e-2, (step, layer, b, err)
                truth[layer][s] = states[0, int(acc[b]) - 1]
        with pytest.raises(ValueError, match="layer 0 called twice"):
            op(pools[0], state_batch_indices=rows, **_inputs(3, dev, layer=0, T=T)[0])
        op.commit(acc.to(dev))
    materialize_and_compare(op, pools, [t.to(dev, pools[0].dtype) for t in truth], (4, 1), dev, 2e-3)


@pytest.mark.gpu
def test_speculative_drop_in_matches_sequential_decoding():
    _speculative_vs_sequential("cuda")


def test_speculative_drop_in_under_cpu_emulation():
    under_cpu_emulation(_speculative_vs_sequential)


def test_speculative_mode_checks():
    pools = _pools()
    with pytest.raises(ValueError, match="auto_commit needs standard mode"):
        ReplaySelectiveStateUpdate(pools, G, window=6, max_verify=2, mode="speculative", auto_commit=True)
    op = ReplaySelectiveStateUpdate(pools, G, window=6, max_verify=2, mode="speculative")
    with pytest.raises(ValueError, match="T=3 tokens per row; this drop-in verifies at most max_verify=2"):
        op(pools[0], **_inputs(2, T=3)[0])
    std = ReplaySelectiveStateUpdate(pools, G, window=6)
    with pytest.raises(ValueError, match="standard mode takes one token per row; got T=2"):
        std(pools[0], **_inputs(2, T=2)[0])
