"""ReplayCursors: plan / commit / reset against a scalar model, and every invariant violation."""
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from replayssm_trtllm.state import (SPECULATIVE, STANDARD, ReplayCursors, ReplayInvariantError, commit_update,
                                    flush_mask)


class ScalarModel:
    """docs/design.md 3.1 / 3.2 written per slot with Python ints."""

    def __init__(self, S, L, Tm, mode, C=None):
        # ring rows: L in standard mode, L + T_max in speculative mode (design 3), or a wider C
        self.L, self.Tm, self.mode = L, Tm, mode
        self.C = C if C is not None else (L if mode == STANDARD else L + Tm)
        self.o, self.h = [0] * S, [0] * S

    def plan(self, slot, T):
        o, h = self.o[slot], self.h[slot]
        flush = (h + 1 == self.L) if self.mode == STANDARD else (h + T > self.L)
        writes = [(o + h + s) % self.C for s in range(T)]
        folded = (h + 1 if self.mode == STANDARD else h) if flush else 0
        return flush, writes, folded

    def commit(self, slot, T, a):
        o, h = self.o[slot], self.h[slot]
        if self.mode == STANDARD:
            if h + 1 == self.L:
                self.o[slot], self.h[slot] = (o + h + 1) % self.C, 0
            else:
                self.h[slot] = h + 1
        else:
            if h + T > self.L:
                o, h = (o + h) % self.C, 0
            self.o[slot], self.h[slot] = o, h + a


@settings(max_examples=40, deadline=None)
@given(data=st.data(), S=st.integers(1, 5), L=st.integers(1, 9), mode=st.sampled_from([STANDARD, SPECULATIVE]),
       steps=st.integers(1, 40))
def test_plan_and_commit_match_scalar_model(data, S, L, mode, steps):
    Tm = 1 if mode == STANDARD else data.draw(st.integers(1, L))
    extra = data.draw(st.integers(0, 1))          # 0: the design capacity; 1: one ring row more (wraps in standard)
    cur = ReplayCursors(S, L, Tm, mode) if extra == 0 else \
        ReplayCursors(S, L, Tm, mode, ring_capacity=(L if mode == STANDARD else L + Tm) + extra)
    ref = ScalarModel(S, L, Tm, mode, cur.capacity)
    assert cur.capacity == (L if mode == STANDARD else L + Tm) + extra
    for _ in range(steps):
        active = data.draw(st.lists(st.integers(0, S - 1), unique=True, max_size=S))
        pad = data.draw(st.integers(0, 2))
        rows = active + [-1] * pad
        rows = data.draw(st.permutations(rows))
        T = 1 if mode == STANDARD else data.draw(st.integers(1, Tm))
        acc = [data.draw(st.integers(1, T)) if r >= 0 else data.draw(st.integers(-5, 5)) for r in rows]
        sbi = torch.tensor(rows, dtype=torch.int32)
        plan = cur.plan(sbi, T)
        for b, slot in enumerate(rows):
            if slot < 0:
                assert not plan.valid[b] and not plan.flush[b] and int(plan.slot[b]) == -1
                assert bool((plan.write_index[b] == -1).all()) and int(plan.num_folded[b]) == 0
                continue
            flush, writes, folded = ref.plan(slot, T)
            assert bool(plan.flush[b]) == flush
            assert plan.write_index[b].tolist() == writes
            assert int(plan.num_folded[b]) == folded
            assert int(plan.num_records[b]) == ref.h[slot] + T
            assert plan.record_index[b, :ref.h[slot] + T].tolist() == \
                [(ref.o[slot] + j) % ref.C for j in range(ref.h[slot] + T)]
            assert not set(writes) & {(ref.o[slot] + j) % ref.C for j in range(ref.h[slot])}
        before = cur.snapshot()
        cur.plan(sbi, T)                            # planning is pure
        assert torch.equal(cur.ring_origin, before[0]) and torch.equal(cur.ring_len, before[1])
        cur.commit(sbi, torch.tensor(acc, dtype=torch.int32) if mode == SPECULATIVE and acc else None)
        for b, slot in enumerate(rows):
            if slot >= 0:
                ref.commit(slot, T, acc[b] if mode == SPECULATIVE else 1)
        assert cur.ring_origin.tolist() == ref.o and cur.ring_len.tolist() == ref.h
        assert cur.ring_origin.dtype == cur.ring_len.dtype == torch.int32
        cur.check_invariants()


def test_speculative_flush_rule_and_wraparound():
    cur = ReplayCursors(1, 4, 2, "speculative")
    seen_wrap, hs = False, []
    for step in range(30):
        p = cur.plan([0], 2)
        h = int(p.length[0])
        assert bool(p.flush[0]) == (h + 2 > 4)
        seen_wrap |= int(p.origin[0]) + h + 2 > cur.capacity
        cur.commit([0], [1 + step % 2])
        hs.append(int(cur.ring_len[0]))
    assert seen_wrap and max(hs) <= 4


def test_standard_every_step_flushes_for_L1():
    cur = ReplayCursors(2, 1, 1, "standard")
    for _ in range(5):
        p = cur.plan([1, 0], 1)
        assert p.flush.tolist() == [True, True] and p.num_folded.tolist() == [1, 1]
        cur.commit([1, 0])
        assert cur.ring_len.tolist() == [0, 0]


def test_T_equals_L():
    cur = ReplayCursors(1, 3, 3, "speculative")
    p = cur.plan([0], 3)
    assert not bool(p.flush[0])                   # h = 0: 0 + 3 > 3 is false
    cur.commit([0], [3])
    p = cur.plan([0], 3)
    assert bool(p.flush[0]) and int(p.num_folded[0]) == 3
    assert p.write_index[0].tolist() == [3, 4, 5]
    cur.commit([0], [2])
    assert (int(cur.ring_origin[0]), int(cur.ring_len[0])) == (3, 2)


def test_reset_and_live_mask():
    cur = ReplayCursors(3, 4, 2, "speculative")
    cur.ring_origin[:] = torch.tensor([5, 1, 2], dtype=torch.int32)
    cur.ring_len[:] = torch.tensor([3, 0, 4], dtype=torch.int32)
    live = cur.live_mask()
    assert live[0].tolist() == [True, True, False, False, False, True]
    assert live[1].tolist() == [False] * 6
    assert live[2].tolist() == [False, False, True, True, True, True]
    assert cur.live_mask(2)[1].tolist() == [False, True, True, False, False, False]
    cur.reset(torch.tensor([2, -1, 0]))
    assert cur.ring_origin.tolist() == [0, 1, 0] and cur.ring_len.tolist() == [0, 0, 0]


def test_pure_rules():
    h = torch.tensor([0, 3, 4, 2])
    assert flush_mask(h, 1, 4, STANDARD).tolist() == [False, True, False, False]
    assert flush_mask(h, 2, 4, SPECULATIVE).tolist() == [False, True, True, False]
    o = torch.tensor([0, 5, 1, 2])
    no, nh = commit_update(o, h, torch.tensor([1, 2, 1, 2]), 2, 4, 6, SPECULATIVE)
    assert no.tolist() == [0, (5 + 3) % 6, (1 + 4) % 6, 2] and nh.tolist() == [1, 2, 1, 4]


def test_vectorized_large_batch():
    S = 8192
    cur = ReplayCursors(S, 16, 4, "speculative")
    rows = torch.randperm(S, generator=torch.Generator().manual_seed(0)).to(torch.int32)
    t0 = time.perf_counter()
    flushes = 0
    for i in range(20):
        p = cur.plan(rows, 4)
        flushes += int(p.flush.sum())
        cur.commit(rows, (torch.arange(S, dtype=torch.int32) + i) % 4 + 1)
    assert time.perf_counter() - t0 < 10.0        # no Python loop over 8192 rows x 20 steps
    assert flushes > 0
    cur.check_invariants()


# ---- invariant violations -----------------------------------------------------------------------

def corrupted(mode="speculative", L=4, Tm=2, slot=2, origin=0, h=0, **kw):
    cur = ReplayCursors(4, L, Tm, mode, **kw)
    cur.ring_origin[slot] = origin
    cur.ring_len[slot] = h
    return cur


@pytest.mark.parametrize("mode,origin,h,what", [
    ("speculative", 0, 5, r"invariant 0 <= h <= 4 violated for slot 2 \(row 1\): origin=0, h=5"),
    ("speculative", 0, -1, r"invariant 0 <= h <= 4 violated for slot 2 \(row 1\): origin=0, h=-1"),
    ("standard", 1, 4, r"invariant 0 <= h <= 3 violated for slot 2 \(row 1\): origin=1, h=4"),
    ("speculative", 6, 1, r"invariant 0 <= origin < C=6 violated for slot 2 \(row 1\): origin=6, h=1"),
    ("speculative", -2, 1, r"invariant 0 <= origin < C=6 violated for slot 2 \(row 1\): origin=-2, h=1"),
], ids=["h>L", "h<0", "std-h=L", "o>=C", "o<0"])
def test_cursor_violations_raise_with_slot_and_values(mode, origin, h, what):
    Tm = 1 if mode == "standard" else 2
    cur = corrupted(mode, Tm=Tm, origin=origin, h=h, ring_capacity=6)
    rows = torch.tensor([0, 2, -1])
    with pytest.raises(ReplayInvariantError, match=what):
        cur.plan(rows, 1)
    before = cur.snapshot()
    with pytest.raises(ReplayInvariantError, match=what):
        cur.commit(rows, None, num_tokens=1)
    assert torch.equal(cur.ring_origin, before[0]) and torch.equal(cur.ring_len, before[1])
    with pytest.raises(ReplayInvariantError, match="slot 2"):
        cur.check_invariants()
    cur.plan(torch.tensor([0, -1, 3]), 1)        # other slots are fine
    assert issubclass(ReplayInvariantError, RuntimeError)


def test_write_over_committed_record_raises():
    # C = 5 < L + T_max = 6: with h = 4 and T = 2 the second draft lands on committed record 0
    cur = corrupted("speculative", L=4, Tm=2, origin=3, h=4, ring_capacity=5)
    with pytest.raises(ReplayInvariantError, match=r"a write would overwrite a committed record for slot 2 "
                                                   r"\(row 0\): origin=3, h=4, T=2, write indices \[2, 3\] hit "
                                                   r"committed ring index 3"):
        cur.plan([2], 2)
    cur.plan([2], 1)                               # T = 1 fits


@pytest.mark.parametrize("mode,T", [("speculative", 3), ("speculative", 0), ("standard", 2)])
def test_num_tokens_out_of_range(mode, T):
    cur = ReplayCursors(2, 4, 2 if mode == "speculative" else 1, mode)
    with pytest.raises(ReplayInvariantError, match=f"number of tokens T={T} must be in"):
        cur.plan([0], T)
    with pytest.raises(ReplayInvariantError, match=f"T={T}"):
        cur.commit([0], None, num_tokens=T)


@pytest.mark.parametrize("acc", [0, 3, -1])
def test_accepted_out_of_range(acc):
    cur = corrupted("speculative", origin=1, h=2)
    cur.plan([0, 2], 2)
    with pytest.raises(ReplayInvariantError, match=rf"accepted count a must be in \[1, T=2\] for slot 2 \(row 1\): "
                                                   rf"origin=1, h=2, a={acc}"):
        cur.commit(torch.tensor([0, 2]), torch.tensor([1, acc]))
    assert int(cur.ring_len[0]) == 0 and int(cur.ring_len[2]) == 2     # nothing committed
    cur.commit(torch.tensor([-1, 2]), torch.tensor([acc, 1]))        # padding rows' a is ignored


def test_slot_errors():
    cur = ReplayCursors(3, 4, 2, "speculative")
    with pytest.raises(ReplayInvariantError, match=r"row 1 maps to slot 3, outside \[0, num_slots=3\)"):
        cur.plan([0, 3], 1)
    with pytest.raises(ReplayInvariantError, match=r"slot 1 appears in more than one row \(\[0, 2\]\)"):
        cur.plan([1, -1, 1], 1)
    with pytest.raises(ReplayInvariantError, match="slot 1 appears in more than one row"):
        cur.commit([1, 1], [1, 1], num_tokens=1)
    with pytest.raises(ValueError, match=r"'state_batch_indices' must be an int32/int64 tensor of shape \[B\]; "
                                         r"got float32 \[2\]"):
        cur.plan(torch.tensor([0.0, 1.0]), 1)
    with pytest.raises(ValueError, match=r"'accepted' must be an int32/int64 tensor of shape \[B=2\]"):
        cur.commit([0, 1], torch.tensor([1]), num_tokens=1)


def test_constructor_and_commit_arguments():
    with pytest.raises(ValueError, match="max_verify <= window"):
        ReplayCursors(2, 2, 3, "speculative")
    with pytest.raises(ValueError, match="'mode' must be 'standard'"):
        ReplayCursors(2, 2, 1, "greedy")
    with pytest.raises(ValueError, match="'ring_capacity' must be an int in"):
        ReplayCursors(2, 4, 1, "standard", ring_capacity=3)
    with pytest.raises(ValueError, match="'window' must be an int >= 1"):
        ReplayCursors(2, 0)
    cur = ReplayCursors(2, 4, 2, "speculative")
    with pytest.raises(ValueError, match="'num_tokens' is required"):
        cur.commit([0], [1])
    cur.plan([0], 2)
    cur.commit([0], None)                          # all T = 2 accepted, T from the last plan
    assert int(cur.ring_len[0]) == 2


def test_reset_with_lengths():
    """reset(slots, lengths): o = 0, h = lengths[i] (neutral records at admission, state/phase.py); padding slots
    skipped; lengths outside [0, L - 1] or of the wrong count refused before anything changes."""
    c = ReplayCursors(6, 8, 2, "speculative")
    c.ring_origin[:] = 3
    c.ring_len[:] = 2
    c.reset(torch.tensor([4, -1, 1]), [7, 5, 0])
    assert c.ring_origin.tolist() == [3, 0, 3, 3, 0, 3] and c.ring_len.tolist() == [2, 0, 2, 2, 7, 2]
    c.ring_origin[4] = 5
    before = c.snapshot()
    for bad in ([8, 0, 0], [0, -1, 0], [0, 0]):
        with pytest.raises(ValueError, match=r"ReplayCursors.reset: 'lengths' must be one value per slot "
                                             r"\(3 slots\), each in \[0, L - 1 = 7\]"):
            c.reset(torch.tensor([4, -1, 1]), bad)
    assert all(torch.equal(a, b) for a, b in zip(before, c.snapshot()))
