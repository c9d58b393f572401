"""CPU tests for replayssm_trtllm.bench.peers: availability reporting and the cursor rule."""
import pytest

torch = pytest.importorskip("torch")

from replayssm_trtllm.bench import peers  # noqa: E402


def test_availability_never_raises():
    for fn in (peers.flashinfer_available, peers.fla_available):
        ok, reason = fn()
        assert isinstance(ok, bool) and isinstance(reason, str) and reason
        if not torch.cuda.is_available():
            assert ok is False


def test_wrappers_report_unavailable_cleanly():
    if peers.flashinfer_available()[0] or peers.fla_available()[0]:
        pytest.skip("a peer is available here")
    with pytest.raises(RuntimeError, match="peer unavailable"):
        peers.flashinfer_ssu_decode(None, None, None, None, None, None, None)
    with pytest.raises(RuntimeError, match="peer unavailable"):
        peers.fla_gdn_decode(None, None, None, None, None, None, None, None, None)


def _advance_loop(rs, pnat, sbi, accepted, T, L, R):
    rs, pnat = list(rs), list(pnat)
    for b, s in enumerate(sbi):
        if s < 0:
            continue
        a = T if accepted is None else accepted[b]
        if pnat[s] + T > L:
            rs[s] = (rs[s] + pnat[s]) % R
            pnat[s] = a
        else:
            pnat[s] += a
    return rs, pnat


@pytest.mark.parametrize("T,L", [(1, 16), (1, 1), (4, 16), (3, 5), (8, 8)],
                         ids=["T1-L16", "T1-L1", "T4-L16", "T3-L5", "T8-L8"])
def test_advance_cursors_matches_rule(T, L):
    g = torch.Generator().manual_seed(T * 100 + L)
    S, B, R = 9, 6, L + T
    rs_buf = torch.zeros(S + 1, dtype=torch.int32)
    p_buf = torch.zeros(S + 1, dtype=torch.int32)
    ref_rs, ref_p = [0] * S, [0] * S
    for step in range(40):
        perm = torch.randperm(S, generator=g)[:B]
        sbi = perm.clone()
        sbi[torch.rand(B, generator=g) < 0.2] = -1                       # padding rows
        acc = torch.randint(1, T + 1, (B,), generator=g, dtype=torch.int32)
        use_acc = None if (T == 1 or step % 3 == 0) else acc
        slots = torch.where(sbi < 0, torch.full_like(sbi, S), sbi).to(torch.int64)
        peers.advance_checkpointing_cursors(rs_buf, p_buf, slots, use_acc, T, L, R)
        ref_rs, ref_p = _advance_loop(ref_rs, ref_p, sbi.tolist(),
                                      None if use_acc is None else use_acc.tolist(), T, L, R)
        assert rs_buf[:S].tolist() == ref_rs and p_buf[:S].tolist() == ref_p
        assert all(0 <= p <= L for p in ref_p) and all(0 <= r < R for r in ref_rs)


def test_standard_mode_flushes_every_window_plus_one_tokens():
    L, T = 4, 1
    rs = torch.zeros(2, dtype=torch.int32)
    p = torch.zeros(2, dtype=torch.int32)
    slots = torch.zeros(1, dtype=torch.int64)
    seen = []
    for _ in range(12):
        seen.append((int(rs[0]), int(p[0])))
        peers.advance_checkpointing_cursors(rs, p, slots, None, T, L, L + T)
    # pnat climbs 0..L, the step at pnat == L flushes L records and leaves the new one live
    assert [s[1] for s in seen] == [0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3]
    assert [s[0] for s in seen][:7] == [0, 0, 0, 0, 0, 4, 4]


def test_gdn_gates_match_design():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    A_log, dt_bias = torch.randn(4), torch.randn(4)
    g, beta = peers.gdn_gates(a, b, A_log, dt_bias)
    sp = torch.log1p(torch.exp(a.double() + dt_bias.double()))
    assert torch.allclose(g.double(), -torch.exp(A_log.double()) * sp, rtol=1e-5, atol=1e-6)
    assert torch.allclose(beta.double(), 1 / (1 + torch.exp(-b.double())), rtol=1e-5, atol=1e-6)
