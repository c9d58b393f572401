"""The bytes behind the replay steps' achieved bandwidth (CPU): replay_cycle_traffic against closed forms, against the
reference state machine (ReplayCursors.plan / commit) step by step, and the traffic bounds of the speculative targets."""
import pytest
import torch

from replayssm_trtllm.bench import gdn as bg
from replayssm_trtllm.bench import mamba2 as bm
from replayssm_trtllm.bench.step_traffic import (conventional_step_bytes, perdraft_step_bytes, replay_cycle_traffic,
                                                 traffic_bounds)
from replayssm_trtllm.state import ReplayCursors
from replayssm_trtllm.state.cursors import SPECULATIVE, STANDARD

S_ROW, REC, IO = 1000.0, 7.0, 3.0  # small, distinct per-row sizes so each term of a sum is identifiable


def _spec(h0, accs, T, L, **kw):
    return replay_cycle_traffic(h0, accs, mode=SPECULATIVE, num_tokens=T, window=L, state_row_bytes=S_ROW,
                                record_bytes=REC, io_row_bytes=IO, **kw)


@pytest.mark.parametrize("phase", ["in-phase", "staggered"])
@pytest.mark.parametrize("L", [1, 4, 16])
def test_standard_cycle_matches_the_benchmarks_closed_form(phase, L):
    """Over a full window every row reads the checkpoint L times, writes it once, reads 0 + 1 + ... + (L - 1) records
    and writes L: the formula bench mamba2 has used since the twenty-ninth session, whatever the rows' phases."""
    B = 37
    h0 = torch.zeros(B, dtype=torch.int32) if phase == "in-phase" else torch.arange(B, dtype=torch.int32) % L
    tr = replay_cycle_traffic(h0, L, mode=STANDARD, num_tokens=1, window=L, state_row_bytes=S_ROW, record_bytes=REC,
                              io_row_bytes=IO)
    closed = B * (L * S_ROW + S_ROW + (L * (L - 1) / 2) * REC + L * REC) / L
    assert tr.state_bytes == pytest.approx(closed, rel=1e-12)
    assert tr.io_bytes == pytest.approx(B * IO)
    assert tr.flush_fraction == pytest.approx(1 / L)
    assert tr.records_read == pytest.approx((L - 1) / 2)
    assert tr.steps == L and tr.total_bytes == pytest.approx(closed + B * IO)


@pytest.mark.parametrize("T,hs", [(4, (4, 8, 12, 16)), (8, (8, 16)), (2, tuple(range(2, 17, 2)))])
def test_all_accepted_steady_state(T, hs):
    """All T accepted at L = 16: a row cycles through h = T, 2T, ..., 16 and flushes at h = 16 (h + T > L), so a
    fraction T / 16 of the rows flush in a step and a row reads mean(hs) committed records."""
    L, B = 16, 51
    h0 = torch.arange(B, dtype=torch.int32) % (L + 1)
    accs = [torch.full((B,), T, dtype=torch.int32)] * (2 * L)
    tr = _spec(h0, accs, T, L, passes=3, timed_passes=2, reset_each_pass=False)
    f = 1 / len(hs)
    assert tr.flush_fraction == pytest.approx(f)
    assert tr.records_read == pytest.approx(sum(hs) / len(hs))
    assert tr.state_bytes == pytest.approx(B * (S_ROW * (1 + f) + (sum(hs) / len(hs) + T) * REC))
    assert tr.io_bytes == pytest.approx(B * T * IO)
    assert tr.steps == 2 * (2 * L)


@pytest.mark.parametrize("T", [1, 3, 4, 8])
@pytest.mark.parametrize("reset", [True, False])
def test_matches_the_reference_state_machine_step_by_step(T, reset):
    """Random acceptance, odd batch, staggered start: the bytes equal those counted from ReplayCursors.plan (flush
    rows, num_records - T committed reads) over the same steps, commit by commit."""
    L, B, K = 16, 29, 11
    g = torch.Generator().manual_seed(7 + T)
    h0 = torch.randint(0, L + 1, (B,), generator=g, dtype=torch.int32)
    accs = [torch.randint(1, T + 1, (B,), generator=g, dtype=torch.int32) for _ in range(K)]
    passes, timed = 3, 2
    tr = _spec(h0, accs, T, L, passes=passes, timed_passes=timed, reset_each_pass=reset)

    cur = ReplayCursors(B, L, max_verify=T, mode="speculative")
    sbi = torch.arange(B, dtype=torch.int32)
    state = io = 0.0
    n = 0
    for p in range(passes):
        if reset or p == 0:
            cur.ring_origin.zero_()
            cur.ring_len.copy_(h0)
        for a in accs:
            plan = cur.plan(sbi, T)
            if p >= passes - timed:
                committed = int((plan.num_records - T).sum())
                state += B * S_ROW + int(plan.flush.sum()) * S_ROW + (committed + B * T) * REC
                io += B * T * IO
                n += 1
            cur.commit(sbi, a, T)
    assert tr.steps == n
    assert tr.state_bytes == pytest.approx(state / n, rel=1e-12)
    assert tr.io_bytes == pytest.approx(io / n, rel=1e-12)


def test_reset_each_pass_repeats_the_first_pass():
    L, T, B = 16, 4, 19
    g = torch.Generator().manual_seed(3)
    h0 = torch.randint(0, L + 1, (B,), generator=g, dtype=torch.int32)
    accs = [torch.randint(1, T + 1, (B,), generator=g, dtype=torch.int32) for _ in range(5)]
    one = _spec(h0, accs, T, L)
    many = _spec(h0, accs, T, L, passes=4, timed_passes=2, reset_each_pass=True)
    assert many.state_bytes == pytest.approx(one.state_bytes) and many.steps == 2 * one.steps
    # carried over, the second pass starts elsewhere: here it moves different bytes
    carried = _spec(h0, accs, T, L, passes=2, timed_passes=1, reset_each_pass=False)
    assert carried.state_bytes != pytest.approx(one.state_bytes)


def test_bad_arguments_are_refused_with_the_value():
    B, L, T = 4, 16, 4
    h0 = torch.zeros(B, dtype=torch.int32)
    ok = [torch.full((B,), T)]
    with pytest.raises(ValueError, match=r"accepted\[0\] must hold 4 counts in \[1, T = 4\]"):
        _spec(h0, [torch.full((B,), T + 1)], T, L)
    with pytest.raises(ValueError, match=r"accepted\[1\] must hold 4 counts.*\(3 values\)"):
        _spec(h0, ok + [torch.ones(3)], T, L)
    with pytest.raises(ValueError, match=r"every h0 must be in \[0, 16\] \(speculative mode"):
        _spec(torch.tensor([0, 17, 0, 0]), ok, T, L)
    with pytest.raises(ValueError, match=r"every h0 must be in \[0, 15\] \(standard mode"):
        replay_cycle_traffic(torch.tensor([16]), 4, mode=STANDARD, num_tokens=1, window=L, state_row_bytes=1,
                             record_bytes=1, io_row_bytes=1)
    with pytest.raises(ValueError, match="1 in standard mode"):
        replay_cycle_traffic(h0, 4, mode=STANDARD, num_tokens=2, window=L, state_row_bytes=1, record_bytes=1,
                             io_row_bytes=1)
    with pytest.raises(ValueError, match="cycle's step count"):
        replay_cycle_traffic(h0, ok, mode=STANDARD, num_tokens=1, window=L, state_row_bytes=1, record_bytes=1,
                             io_row_bytes=1)
    with pytest.raises(ValueError, match="one 'accepted' tensor per step"):
        _spec(h0, [], T, L)
    with pytest.raises(ValueError, match="'mode' must be 0"):
        replay_cycle_traffic(h0, ok, mode=2, num_tokens=T, window=L, state_row_bytes=1, record_bytes=1,
                             io_row_bytes=1)
    with pytest.raises(ValueError, match="timed_passes <= passes"):
        _spec(h0, ok, T, L, passes=2, timed_passes=3)
    with pytest.raises(ValueError, match="one committed length per row"):
        _spec(torch.zeros(0), ok, T, L)
    with pytest.raises(ValueError, match="must be positive"):
        traffic_bounds(1.0, 0.0, 1.0, 1.0)


def test_conventional_and_perdraft_bytes():
    assert conventional_step_bytes(256, S_ROW, IO) == (2 * 256 * S_ROW, 256 * IO)
    assert perdraft_step_bytes(256, S_ROW, IO, 4) == (5 * 256 * S_ROW, 4 * 256 * IO)
    b = traffic_bounds(600.0, 1000.0, 2e-6, 1000.0 / 1e-6)
    assert b["ratio_at_equal_efficiency"] == pytest.approx(0.6)
    assert b["ratio_at_copy_bandwidth"] == pytest.approx(0.3)  # the conventional step runs at half of copy


def _shape_bytes(family, name):
    if family == "mamba2":
        sh = bm.SHAPES[name]
        return bm._state_bytes(sh, 1, 4), bm._record_bytes(sh, 2), bm._io_bytes(sh, 2)
    sh = bg.SHAPES[name]
    return sh["HV"] * sh["V"] * sh["K"] * 4, bg._record_bytes(sh, 2), bg._io_bytes(sh, 2)


@pytest.mark.parametrize("family,name", [("mamba2", "super"), ("mamba2", "nano"), ("gdn", "q35-4b"),
                                         ("gdn", "q35-122b")])
def test_all_accepted_t4_goals_against_the_equal_efficiency_bound(family, name):
    """At B = 256, L = 16, fp32 state and bf16 activations, an all-accepted T = 4 verify step moves 1.25 checkpoints
    per row (a read, and a write on one step in four) plus ~14 records, against the conventional step's 2: at the
    conventional kernel's efficiency its ratio would be 0.678 on both Mamba-2 shapes, above their 0.65 goal (the goal
    needs ~4% more efficiency than the conventional kernel's), and 0.676-0.686 on the GDN shapes, 2-3.5% under their
    0.70 goal. The per-draft kernel's 5 checkpoints per row against it give 3.66-3.71x at equal efficiency, below the
    4x goal of both families."""
    s_row, rec, io = _shape_bytes(family, name)
    B, L, T = 256, 16, 4
    h0 = torch.arange(B, dtype=torch.int32) % (L + 1)
    tr = replay_cycle_traffic(h0, [torch.full((B,), T)] * (2 * L), mode=SPECULATIVE, num_tokens=T, window=L,
                              state_row_bytes=s_row, record_bytes=rec, io_row_bytes=io, passes=5, timed_passes=3,
                              reset_each_pass=False)
    conv = sum(conventional_step_bytes(B, s_row, io))
    ratio = tr.total_bytes / conv
    if family == "mamba2":
        assert 0.677 < ratio < 0.679 and ratio > 0.65, ratio
    else:
        assert 0.675 < ratio < 0.687 and ratio < 0.70, ratio
    pd = sum(perdraft_step_bytes(B, s_row, io, T)) / tr.total_bytes
    assert 3.65 < pd < 3.72 and pd < 4.0, pd


def test_bounds_script_on_the_recorded_fd4af0f_results():
    """scripts/traffic_bounds_from_results.py on the committed official JSONs (fd4af0f): the Mamba-2 Super T = 4
    all-accepted step at 424.7 us moved its bytes at 81.5% of copy, its ratio at the conventional kernel's efficiency
    is 0.678; the GDN q35-4b T = 8 all-accepted staggered step at ~53% of copy (docs/benchmarks.md)."""
    import importlib.util
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("tbr", root / "scripts" / "traffic_bounds_from_results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m2 = json.loads((root / "bench/results/2026-12-04-h200-mamba2-fd4af0f.json").read_text())
    gdn = json.loads((root / "bench/results/2026-12-04-h200-gdn-fd4af0f.json").read_text())
    line = {(r["shape"], r["T"], r["accept"]): r for r in mod.mamba2_lines(m2)}[("super", 4, "all")]
    assert line["us"] == pytest.approx(424.7, abs=0.05)
    assert line["copy_frac"] == pytest.approx(0.815, abs=0.001)
    assert line["bound_equal"] == pytest.approx(0.678, abs=0.001) and line["flush"] == pytest.approx(0.25)
    g = {(r["shape"], r["T"], r["accept"], r["phase"]): r for r in mod.gdn_lines(gdn)}
    assert g[("q35-4b", 8, "all", "staggered")]["copy_frac"] == pytest.approx(0.531, abs=0.002)
    assert g[("q35-4b", 4, "all", "staggered")]["ratio"] == pytest.approx(0.955, abs=0.001)
