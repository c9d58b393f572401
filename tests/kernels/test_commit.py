"""GPU tests of the device cursor commit (design.md 3.2 / 6) against the reference state machine."""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.state.cursors import ReplayCursors

pytestmark = pytest.mark.gpu


# (mode, L, T, extra ring rows beyond the design capacity: L in standard mode, L + T in speculative mode). A
# standard ring of L rows never wraps (a flush moves the origin by L = C); the wider ones (L + 1, the caches' standard
# capacity before the sixty-eighth session) do.
@pytest.mark.parametrize("mode,L,T,extra", [(0, 4, 1, 0), (0, 16, 1, 0), (0, 4, 1, 1), (0, 16, 1, 1), (1, 4, 4, 0),
                                            (1, 16, 4, 0), (1, 16, 8, 0), (1, 32, 3, 0), (1, 8, 1, 0)])
def test_commit_matches_reference(mode, L, T, extra):
    import replayssm_trtllm.ops.commit  # noqa: F401
    g = torch.Generator().manual_seed(L * 10 + T + mode + 1000 * extra)
    S, B = 300, 256
    Tm = 1 if mode == 0 else T
    ref = ReplayCursors(S, L, Tm, mode, ring_capacity=(L if mode == 0 else L + Tm) + extra)
    C = ref.capacity
    o = torch.zeros(S, dtype=torch.int32, device="cuda")
    h = torch.zeros(S, dtype=torch.int32, device="cuda")
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    for _ in range(3 * C):
        sbi = torch.randperm(S, generator=g)[:B].to(torch.int32)
        sbi[::17] = -1
        acc = torch.randint(1, T + 1, (B,), generator=g, dtype=torch.int32) if mode == 1 else None
        torch.ops.replayssm.replay_commit(sbi.cuda(), acc.cuda() if acc is not None else None, o, h, err, L, C, T, mode)
        ref.commit(sbi.long(), acc.long() if acc is not None else None, num_tokens=T)
    torch.cuda.synchronize()
    assert int(err.item()) == -1
    assert torch.equal(o.cpu(), ref.ring_origin) and torch.equal(h.cpu(), ref.ring_len)


def test_commit_accepted_none_means_all():
    import replayssm_trtllm.ops.commit  # noqa: F401
    o = torch.zeros(4, dtype=torch.int32, device="cuda")
    h = torch.tensor([0, 2, 5, 6], dtype=torch.int32, device="cuda")
    sbi = torch.arange(4, dtype=torch.int32, device="cuda")
    torch.ops.replayssm.replay_commit(sbi, None, o, h, None, 8, 12, 4, 1)
    # h + 4 > 8 flushes rows 2 and 3: o += h, h = 4; rows 0, 1: h += 4
    assert o.cpu().tolist() == [0, 0, 5, 6] and h.cpu().tolist() == [4, 6, 4, 4]


@pytest.mark.parametrize("what", ["a_zero", "a_big", "h_big", "o_big", "slot_big"])
def test_commit_records_violations(what):
    import replayssm_trtllm.ops.commit  # noqa: F401
    S, L, T = 6, 8, 4
    C = L + T
    o = torch.zeros(S, dtype=torch.int32, device="cuda")
    h = torch.ones(S, dtype=torch.int32, device="cuda")
    acc = torch.full((3,), 2, dtype=torch.int32, device="cuda")
    sbi = torch.tensor([0, 3, 5], dtype=torch.int32, device="cuda")
    bad_slot = 3
    if what == "a_zero":
        acc[1] = 0
    elif what == "a_big":
        acc[1] = T + 1
    elif what == "h_big":
        h[3] = L + 1
    elif what == "o_big":
        o[3] = C
    else:
        sbi[1] = S
        bad_slot = S
    o0, h0 = o.clone(), h.clone()
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    torch.ops.replayssm.replay_commit(sbi, acc, o, h, err, L, C, T, 1)
    torch.cuda.synchronize()
    assert int(err.item()) == bad_slot
    if bad_slot < S:  # offending row untouched (nothing clamped)
        assert int(o[bad_slot]) == int(o0[bad_slot]) and int(h[bad_slot]) == int(h0[bad_slot])
    assert int(h[0]) == 3 and int(h[5]) == 3  # good rows committed
