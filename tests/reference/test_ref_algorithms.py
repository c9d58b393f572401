"""Paper Algorithms 1-6 over one sequence against conventional decoding (float64)."""
import pytest
import torch

from replayssm_trtllm.reference import (ReplaySequence, alg1_mamba2_standard, alg2_mamba2_speculative,
                                        alg3_mamba2_two_precision, alg4_gdn_standard, alg5_gdn_speculative,
                                        alg6_gdn_two_precision, cast_quantizer, commit_accepted, expand_groups,
                                        l2norm, mamba2_decode_naive, mamba2_gates, silu)
from replayssm_trtllm.reference.testing import random_mamba2_inputs, random_mamba2_layer, random_state

TOL = 1e-10
LEAD = [3]          # three heads
DV, DK = 4, 5


class Stream:
    """Random tokens (alpha in [0.5, 0.999], never-zero v, k, q, beta in (0, 1)) for leading dims LEAD."""

    def __init__(self, seed, gdn=False):
        self.g = torch.Generator().manual_seed(seed)
        self.gdn = gdn

    def tokens(self, T):
        g = self.g
        alphas = 0.5 + 0.499 * torch.rand(*LEAD, T, generator=g, dtype=torch.float64)
        betas = torch.sigmoid(torch.randn(*LEAD, T, generator=g, dtype=torch.float64))
        vs = torch.randn(*LEAD, T, DV, generator=g, dtype=torch.float64)
        ks = torch.randn(*LEAD, T, DK, generator=g, dtype=torch.float64)
        qs = torch.randn(*LEAD, T, DK, generator=g, dtype=torch.float64)
        if self.gdn:
            ks, qs = l2norm(ks), l2norm(qs) * DK ** -0.5
        return alphas, betas, vs, ks, qs

    def accept(self, T):
        return int(torch.randint(1, T + 1, (1,), generator=self.g))

    def state(self):
        return 0.5 * torch.randn(*LEAD, DV, DK, generator=self.g, dtype=torch.float64)


def conv_run(S, alphas, betas, vs, ks, qs, gdn):
    """Conventional decoding of T tokens: outputs [..., T, dv] and snapshots [T][..., dv, dk]."""
    outs, snaps = [], []
    for s in range(alphas.shape[-1]):
        al = alphas[..., s, None, None]
        k = ks[..., s, :]
        v = vs[..., s, :]
        if gdn:
            v = betas[..., s, None] * (v - alphas[..., s, None] * torch.einsum("...vk,...k->...v", S, k))
        S = al * S + v[..., :, None] * k[..., None, :]
        outs.append(torch.einsum("...vk,...k->...v", S, qs[..., s, :]))
        snaps.append(S)
    return torch.stack(outs, dim=-2), snaps


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


# ---- standard (Alg. 1 and 4) --------------------------------------------------------------------

@pytest.mark.parametrize("L", [1, 4, 16], ids=lambda L: f"L{L}")
@pytest.mark.parametrize("gdn", [False, True], ids=["alg1-mamba2", "alg4-gdn"])
def test_standard_matches_conventional(gdn, L):
    steps = 240
    src = Stream(10 + L, gdn)
    S = src.state()
    seq = ReplaySequence(S, L)
    err = 0.0
    for t in range(steps):
        alphas, betas, vs, ks, qs = src.tokens(1)
        o_ref, snaps = conv_run(S, alphas, betas, vs, ks, qs, gdn)
        S = snaps[0]
        if gdn:
            o = alg4_gdn_standard(seq, alphas[..., 0], betas[..., 0], vs[..., 0, :], ks[..., 0, :], qs[..., 0, :])
        else:
            o = alg1_mamba2_standard(seq, alphas[..., 0], vs[..., 0, :], ks[..., 0, :], qs[..., 0, :])
        err = max(err, rel(o, o_ref[..., 0, :]))
        assert seq.h == (t + 1) % L
        if seq.h == 0:                        # flushed: the checkpoint is the conventional state
            assert rel(seq.ckpt, S) <= TOL
    assert err <= TOL
    assert seq.num_flushes == steps // L
    assert rel(seq.committed_state("u" if gdn else "v"), S) <= TOL


def test_alg1_is_mamba2():
    """Alg. 1 on Mamba-2 records (alpha = exp(dt A), v = dt x, k = B, q = C) plus D x and silu(z) = naive."""
    g = torch.Generator().manual_seed(3)
    H, P, N, G, L, steps = 4, 3, 5, 2, 6, 60
    lay = random_mamba2_layer(H, g)
    S = random_state((1, H, P, N), g)
    seq = ReplaySequence(S[0], L)
    for _ in range(steps):
        inp = random_mamba2_inputs(1, 1, H, P, N, G, g)
        y_ref, states = mamba2_decode_naive(S, **inp, **lay)
        S = states[:, 0]
        dt, alpha = mamba2_gates(inp["dt_raw"][0, 0], lay["dt_bias"], lay["A"])
        x = inp["x"][0, 0].double()
        o = alg1_mamba2_standard(seq, alpha, dt[:, None] * x, expand_groups(inp["Bm"][0, 0].double(), H, 0),
                                 expand_groups(inp["Cm"][0, 0].double(), H, 0))
        y = (o + lay["D"].double()[:, None] * x) * silu(inp["z"][0, 0])
        assert rel(y, y_ref[0, 0]) <= TOL


# ---- speculative (Alg. 2 and 5) -----------------------------------------------------------------

def run_speculative(alg, src, L, T, steps, gdn, S0=None, seq_kwargs=None, accept=None, check=True, **kw):
    """Drive one sequence; returns (seq, list of outputs, list of hp checkpoints after each step)."""
    S = src.state() if S0 is None else S0
    seq = ReplaySequence(S, L, max_verify=T, **(seq_kwargs or {}))
    outs, ckpts, wrapped, err = [], [], False, 0.0
    for _ in range(steps):
        alphas, betas, vs, ks, qs = src.tokens(T)
        o_ref, snaps = conv_run(S, alphas, betas, vs, ks, qs, gdn)
        wrapped |= seq.origin + seq.h + T > seq.capacity
        if gdn:
            O = alg(seq, alphas, betas, vs, ks, qs, **kw)
        else:
            O = alg(seq, alphas, vs, ks, qs, **kw)
        err = max(err, rel(O, o_ref))
        a = src.accept(T) if accept is None else accept
        commit_accepted(seq, a)
        assert 0 <= seq.h <= L
        S = snaps[a - 1]
        outs.append(O)
        ckpts.append(seq.ckpt.clone())
    if check:
        assert err <= TOL, err
        assert rel(seq.committed_state("u" if gdn else "v"), S) <= TOL
        if steps * T > 2 * seq.capacity:
            assert wrapped, "ring never wrapped around"
    return seq, outs, ckpts


GRID = [(1, 1), (2, 2), (4, 4), (5, 2), (16, 4), (8, 3)]


@pytest.mark.parametrize("L,T", GRID, ids=[f"L{L}-T{T}" for L, T in GRID])
@pytest.mark.parametrize("gdn", [False, True], ids=["alg2-mamba2", "alg5-gdn"])
def test_speculative_random_acceptance(gdn, L, T):
    alg = alg5_gdn_speculative if gdn else alg2_mamba2_speculative
    seq, _, _ = run_speculative(alg, Stream(100 + 7 * L + T, gdn), L, T, 150, gdn)
    assert seq.num_flushes > 0


@pytest.mark.parametrize("gdn", [False, True], ids=["mamba2", "gdn"])
def test_speculative_all_accepted_equals_standard(gdn):
    """T drafts all accepted = T standard steps (outputs), for every step."""
    L, T, steps = 8, 3, 40
    src_a, src_b = Stream(5, gdn), Stream(5, gdn)
    S0 = src_a.state()
    src_b.state()
    spec = ReplaySequence(S0, L, max_verify=T)
    std = ReplaySequence(S0, L)
    for _ in range(steps):
        alphas, betas, vs, ks, qs = src_a.tokens(T)
        src_b.tokens(T)
        if gdn:
            O = alg5_gdn_speculative(spec, alphas, betas, vs, ks, qs)
        else:
            O = alg2_mamba2_speculative(spec, alphas, vs, ks, qs)
        commit_accepted(spec, T)
        for s in range(T):
            if gdn:
                o = alg4_gdn_standard(std, alphas[..., s], betas[..., s], vs[..., s, :], ks[..., s, :], qs[..., s, :])
            else:
                o = alg1_mamba2_standard(std, alphas[..., s], vs[..., s, :], ks[..., s, :], qs[..., s, :])
            assert torch.allclose(O[..., s, :], o, rtol=1e-12, atol=1e-13)
    f = "u" if gdn else "v"
    assert torch.allclose(spec.committed_state(f), std.committed_state(f), rtol=1e-12, atol=1e-13)


# ---- two precision (Alg. 3 and 6) ---------------------------------------------------------------

def coarse(S):
    """A very lossy read-copy format: round to multiples of 1/8."""
    return torch.round(S * 8) / 8


def test_alg3_identity_is_bit_identical_to_alg2():
    L, T, steps = 6, 3, 120
    _, out2, ck2 = run_speculative(alg2_mamba2_speculative, Stream(21), L, T, steps, False)
    _, out3, ck3 = run_speculative(alg3_mamba2_two_precision, Stream(21), L, T, steps, False)
    for a, b in zip(out2, out3):
        assert torch.equal(a, b)
    for a, b in zip(ck2, ck3):
        assert torch.equal(a, b)


@pytest.mark.parametrize("lp", [cast_quantizer(torch.bfloat16), coarse], ids=["bf16", "coarse"])
def test_alg3_read_copy_never_enters_recurrence(lp):
    L, T, steps = 6, 3, 120
    _, out_id, ck_id = run_speculative(alg3_mamba2_two_precision, Stream(22), L, T, steps, False)
    seq, out_lp, ck_lp = run_speculative(alg3_mamba2_two_precision, Stream(22), L, T, steps, False,
                                         seq_kwargs={"quant_lp": lp}, check=False)
    for a, b in zip(ck_id, ck_lp):
        assert torch.equal(a, b)                          # HP checkpoint bit-identical
    assert max(float((a - b).abs().max()) for a, b in zip(out_id, out_lp)) > 0   # the read copy was used
    assert torch.equal(seq.ckpt_lp, lp(seq.ckpt)) or seq.num_flushes == 0


def test_alg6_identity_is_bit_identical_to_no_read_copy_and_close_to_alg5():
    L, T, steps = 6, 3, 120
    _, out_nr, ck_nr = run_speculative(alg6_gdn_two_precision, Stream(31, True), L, T, steps, True,
                                       seq_kwargs={"read_copy": False})
    _, out_id, ck_id = run_speculative(alg6_gdn_two_precision, Stream(31, True), L, T, steps, True)
    _, out5, ck5 = run_speculative(alg5_gdn_speculative, Stream(31, True), L, T, steps, True)
    for a, b in zip(out_nr, out_id):
        assert torch.equal(a, b)
    for a, b in zip(ck_nr, ck_id):
        assert torch.equal(a, b)
    for a, b in zip(ck5, ck_id):          # cached vs re-derived corrections: same math, other rounding
        assert rel(a, b) <= 1e-12


@pytest.mark.parametrize("lp", [cast_quantizer(torch.bfloat16), coarse], ids=["bf16", "coarse"])
def test_alg6_read_copy_and_u_round_never_enter_recurrence(lp):
    L, T, steps = 6, 3, 120
    _, out_id, ck_id = run_speculative(alg6_gdn_two_precision, Stream(32, True), L, T, steps, True)
    _, out_lp, ck_lp = run_speculative(alg6_gdn_two_precision, Stream(32, True), L, T, steps, True,
                                       seq_kwargs={"quant_lp": lp}, check=False,
                                       u_round=cast_quantizer(torch.float16))
    for a, b in zip(ck_id, ck_lp):
        assert torch.equal(a, b)           # u re-derived from HP: neither LP nor fp16 u reaches the checkpoint
    assert max(float((a - b).abs().max()) for a, b in zip(out_id, out_lp)) > 0


def test_alg5_folding_rounded_u_does_reach_recurrence():
    """Negative control: Alg. 5 folds the cached (rounded) corrections, so its checkpoint changes."""
    L, T, steps = 6, 3, 40
    _, _, ck = run_speculative(alg5_gdn_speculative, Stream(33, True), L, T, steps, True)
    _, _, ck16 = run_speculative(alg5_gdn_speculative, Stream(33, True), L, T, steps, True, check=False,
                                 u_round=cast_quantizer(torch.float16))
    assert not torch.equal(ck[-1], ck16[-1])
    assert rel(ck16[-1], ck[-1]) < 1e-2


def test_alg4_u_round_fp16_stores_fp16_values():
    src = Stream(40, True)
    seq = ReplaySequence(src.state(), 8)
    f16 = cast_quantizer(torch.float16)
    for _ in range(7):
        alphas, betas, vs, ks, qs = src.tokens(1)
        alg4_gdn_standard(seq, alphas[..., 0], betas[..., 0], vs[..., 0, :], ks[..., 0, :], qs[..., 0, :], u_round=f16)
    for r in seq.records(0, seq.h):
        assert torch.equal(r["u"], f16(r["u"]))


def test_two_precision_hp_quantizer_applies_to_checkpoint():
    f32 = cast_quantizer(torch.float32)
    seq, _, _ = run_speculative(alg3_mamba2_two_precision, Stream(41), 4, 2, 30, False,
                                seq_kwargs={"quant_hp": f32}, check=False)
    assert torch.equal(seq.ckpt, f32(seq.ckpt))


# ---- misuse -------------------------------------------------------------------------------------

def test_sequence_misuse_raises():
    src = Stream(50)
    seq = ReplaySequence(src.state(), 4, max_verify=2)
    alphas, betas, vs, ks, qs = src.tokens(3)
    with pytest.raises(ValueError, match=r"T must be in \[1, min\(max_verify, window\)\] = \[1, 2\]; got 3"):
        alg2_mamba2_speculative(seq, alphas, vs, ks, qs)
    with pytest.raises(RuntimeError, match="no speculative step awaits"):
        commit_accepted(seq, 1)
    alphas, betas, vs, ks, qs = src.tokens(2)
    alg2_mamba2_speculative(seq, alphas, vs, ks, qs)
    with pytest.raises(RuntimeError, match="never committed"):
        alg2_mamba2_speculative(seq, alphas, vs, ks, qs)
    with pytest.raises(ValueError, match=r"'a' must be in \[1, 2\]; got 3"):
        commit_accepted(seq, 3)
    with pytest.raises(RuntimeError, match="awaits commit_accepted"):
        alg1_mamba2_standard(seq, alphas[..., 0], vs[..., 0, :], ks[..., 0, :], qs[..., 0, :])
    with pytest.raises(ValueError, match="alg2_mamba2_speculative: 'vs'"):
        commit_accepted(seq, 2)
        alg2_mamba2_speculative(seq, alphas, vs[..., :2], ks, qs)
