"""Batched replay caches (design.md section 3 layout) against conventional decoding.

Every step: dead ring records are poisoned with NaN (the step must never read them), rows are
permuted with padding rows among them, slots join at staggered positions and one slot restarts
mid-run. Checks: outputs vs the naive recurrence (<= 1e-10 relative), padding rows zero, cursors
unchanged by the step, the ring layout (records at (o + h + s) % C hold the step's inputs),
checkpoints untouched on non-flush rows and equal to the conventional state on flush rows, and
the committed state after each commit.
"""
import zlib

import pytest
import torch

from replayssm_trtllm.reference import (GdnReplayCacheRef, Mamba2ReplayCacheRef, ReplayCursors,
                                        ReplayInvariantError, cast_quantizer, gdn_decode_naive, gdn_gates, l2norm,
                                        mamba2_decode_naive, mamba2_gates)
from replayssm_trtllm.reference.testing import (random_gdn_inputs, random_gdn_layer, random_mamba2_inputs,
                                                random_mamba2_layer, random_state)

TOL = 1e-10
MDIMS = dict(H=4, P=3, N=5, G=2)
GDIMS = dict(H=2, HV=4, K=5, V=3)


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def make_cache(family, S, L, Tm, mode, **kw):
    if family == "mamba2":
        return Mamba2ReplayCacheRef(S, MDIMS["H"], MDIMS["P"], MDIMS["N"], MDIMS["G"], L, Tm, mode, **kw)
    return GdnReplayCacheRef(S, GDIMS["H"], GDIMS["HV"], GDIMS["K"], GDIMS["V"], L, Tm, mode, **kw)


def ring_tensors(cache):
    names = ["ring_dt", "ring_x", "ring_B"] if cache.family == "mamba2" else \
        ["ring_g", "ring_u", "ring_k", "ring_beta", "ring_v"]
    return {n: getattr(cache, n) for n in names if getattr(cache, n) is not None}


class Driver:
    """Runs a cache next to the naive recurrence with staggered slots, padding rows and a reset."""

    def __init__(self, cache, seed, stagger=3, reset_step=None, poison=True, reset_phase=None):
        self.cache = cache
        self.g = torch.Generator().manual_seed(seed)
        fam = cache.family
        self.layer = random_mamba2_layer(MDIMS["H"], self.g) if fam == "mamba2" else random_gdn_layer(GDIMS["HV"], self.g)
        self.state_shape = ((MDIMS["H"], MDIMS["P"], MDIMS["N"]) if fam == "mamba2"
                            else (GDIMS["HV"], GDIMS["V"], GDIMS["K"]))
        S = cache.num_slots
        self.conv = torch.zeros((S,) + self.state_shape, dtype=torch.float64)
        self.active = torch.zeros(S, dtype=torch.bool)
        self.join = [i * stagger for i in range(S)]
        self.reset_step = reset_step
        self.poison = poison
        self.reset_phase = reset_phase  # new slots -> the reset's phase argument (state/phase.py)
        self.step_no = 0
        self.max_err = 0.0
        self.flushes = 0
        self.wrapped = False
        self.outputs, self.ckpts = [], []

    def inputs(self, B, T):
        if self.cache.family == "mamba2":
            return random_mamba2_inputs(B, T, MDIMS["H"], MDIMS["P"], MDIMS["N"], MDIMS["G"], self.g)
        return random_gdn_inputs(B, T, GDIMS["H"], GDIMS["HV"], GDIMS["K"], GDIMS["V"], self.g)

    def naive(self, states, inp):
        if self.cache.family == "mamba2":
            return mamba2_decode_naive(states, **inp, **self.layer)
        return gdn_decode_naive(states, **inp, **self.layer)

    def committed(self, slots):
        if self.cache.family == "mamba2":
            return self.cache.committed_state(slots, self.layer["A"])
        return self.cache.committed_state(slots)

    def check_layout(self, plan, rows, inp, prev_states, snaps):
        c = self.cache
        for b in torch.nonzero(plan.valid)[:, 0].tolist():
            slot, w = int(plan.slot[b]), plan.write_index[b]
            assert torch.equal(w, (plan.origin[b] + plan.length[b] + torch.arange(plan.num_tokens)) % c.capacity)
            if c.family == "mamba2":
                dt, _ = mamba2_gates(inp["dt_raw"][b], self.layer["dt_bias"], self.layer["A"])
                assert torch.equal(c.ring_dt[slot, w], dt)
                assert torch.equal(c.ring_x[slot, w], inp["x"][b].double())
                assert torch.equal(c.ring_B[slot, w], inp["Bm"][b].double())
            else:
                g, alpha, beta = gdn_gates(inp["a"][b], inp["b"][b], self.layer["A_log"], self.layer["dt_bias"])
                assert torch.equal(c.ring_g[slot, w], g)
                assert torch.equal(c.ring_k[slot, w], inp["k"][b].double())
                if c.two_precision:
                    assert torch.equal(c.ring_beta[slot, w], beta)
                    assert torch.equal(c.ring_v[slot, w], inp["v"][b].double())
                if c.u_round is None and c.ckpt_lp is None:
                    # u_s = beta (v - alpha S_{s-1} kn) along the conventional path
                    kn = torch.repeat_interleave(l2norm(inp["k"][b]), GDIMS["HV"] // GDIMS["H"], dim=1)
                    r = int((rows[:b + 1] >= 0).sum()) - 1
                    Sp = prev_states[r]
                    for s in range(plan.num_tokens):
                        u = beta[s][:, None] * (inp["v"][b, s].double()
                                                - alpha[s][:, None] * torch.einsum("hvk,hk->hv", Sp, kn[s]))
                        assert torch.allclose(c.ring_u[slot, w[s]], u, rtol=1e-10, atol=1e-12)
                        Sp = snaps[r, s]

    def step(self, T, accept=None, check_layout=True):
        c, g, t = self.cache, self.g, self.step_no
        S = c.num_slots
        new = [s for s in range(S) if self.join[s] == t or (s == 0 and self.reset_step == t)]
        if new:
            pre = random_state((len(new),) + self.state_shape, g)
            if self.reset_phase is None:
                c.reset(torch.tensor(new, dtype=torch.int32), pre)
            else:
                c.reset(torch.tensor(new, dtype=torch.int32), pre, phase=self.reset_phase(new))
            self.conv[new] = pre
            self.active[new] = True
        slots = torch.nonzero(self.active)[:, 0]
        rows = torch.cat([slots, torch.tensor([-1, -3])])
        rows = rows[torch.randperm(len(rows), generator=g)].to(torch.int32)
        inp = self.inputs(len(rows), T)
        if self.poison:
            dead = ~c.cursors.live_mask(0)
            for ten in ring_tensors(c).values():
                ten[dead] = float("nan")
        ck_before = c.ckpt.clone()
        lp_before = None if c.ckpt_lp is None else c.ckpt_lp.clone()
        cur_before = c.cursors.snapshot()
        out = c.step(rows, **inp, **self.layer)
        plan = c.last_plan
        # cursors unchanged, padding rows untouched
        assert torch.equal(c.cursors.ring_origin, cur_before[0]) and torch.equal(c.cursors.ring_len, cur_before[1])
        valid = rows >= 0
        assert torch.equal(plan.valid, valid)
        assert bool((out[~valid] == 0).all())
        self.wrapped |= bool(((plan.origin + plan.length + T > c.capacity) & valid).any())
        vs = rows[valid].long()
        prev = self.conv[vs].clone()
        ref, snaps = self.naive(prev, {k: (v[valid] if v is not None else None) for k, v in inp.items()})
        assert not torch.isnan(out).any()
        err = rel(out[valid], ref)
        self.max_err = max(self.max_err, err)
        # checkpoints: untouched unless flushed; on flush = the conventional state it folds to
        flushed = plan.slot[plan.flush]
        keep = torch.ones(S, dtype=torch.bool)
        keep[flushed] = False
        assert torch.equal(c.ckpt[keep], ck_before[keep])
        if lp_before is not None:
            assert torch.equal(c.ckpt_lp[keep], lp_before[keep])
        self.flushes += len(flushed)
        for b in torch.nonzero(plan.flush)[:, 0].tolist():
            r = int((rows[:b + 1] >= 0).sum()) - 1
            want = snaps[r, 0] if c.mode == 0 else prev[r]
            exact_fold = c.family == "mamba2" or c.two_precision or c.u_round is None
            if c.quant_hp is None and exact_fold:
                assert rel(c.ckpt[int(plan.slot[b])], want) <= TOL
        if check_layout:
            self.check_layout(plan, rows, inp, prev, snaps)
        # commit
        o_before = c.cursors.ring_origin.clone()
        if c.mode == 0:
            c.commit(rows)
            self.conv[vs] = snaps[:, 0]
        else:
            acc = torch.randint(1, T + 1, (len(rows),), generator=g, dtype=torch.int32) if accept is None \
                else torch.full((len(rows),), accept, dtype=torch.int32)
            acc[~valid] = 0                                  # padding rows' a is ignored
            c.commit(rows, acc)
            self.conv[vs] = snaps[torch.arange(len(vs)), acc[valid].long() - 1]
        self.wrapped |= bool((c.cursors.ring_origin[vs] < o_before[vs]).any())   # origin wrapped mod C
        if t % 5 == 4 and (c.family == "mamba2" or c.two_precision or c.u_round is None):
            assert rel(self.committed(vs), self.conv[vs]) <= TOL
        self.outputs.append(out)
        self.ckpts.append(c.ckpt.clone())
        self.step_no += 1
        return out


# (mode, L, T, ring capacity; None = the design value: L in standard mode, L + T_max in speculative mode). The
# standard-mode ring of L rows never wraps (a flush moves the origin by L = C rows); the wider standard rings (C = L + 1,
# what the caches allocated before the sixty-eighth session, and still accepted) keep the wrap-around covered.
CONFIGS = [("standard", 1, 1, None), ("standard", 3, 1, None), ("standard", 16, 1, None),
           ("standard", 3, 1, 4), ("standard", 16, 1, 17),
           ("speculative", 1, 1, None), ("speculative", 3, 3, None), ("speculative", 5, 2, None),
           ("speculative", 16, 4, None)]
CONFIG_IDS = [f"{m[:4]}-L{L}-T{T}" + ("" if C is None else f"-C{C}") for m, L, T, C in CONFIGS]


def make_config_cache(family, S, L, T, mode, C):
    """make_cache with the design ring (C None) or private cursors of ring capacity C."""
    if C is None:
        return make_cache(family, S, L, T, mode)
    return make_cache(family, S, L, T, mode, cursors=ReplayCursors(S, L, T, mode, ring_capacity=C))


@pytest.mark.parametrize("mode,L,T,C", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_cache_matches_conventional(family, mode, L, T, C):
    steps = 64
    cache = make_config_cache(family, 3, L, T, mode, C)
    assert cache.capacity == (C if C is not None else L if mode == "standard" else L + T)
    seed = zlib.crc32(f"{family}-{mode}-{L}-{T}".encode() + (b"" if C is None else f"-C{C}".encode()))
    d = Driver(cache, seed=seed, reset_step=steps // 2)
    for _ in range(steps):
        d.step(T)
    assert d.max_err <= TOL, d.max_err
    assert d.flushes > 0
    assert d.wrapped == (cache.capacity > L)   # rings wider than L wrap; a standard ring of L rows never does


@pytest.mark.parametrize("mode,L,T,C", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_cache_admission_phase_matches_conventional(family, mode, L, T, C):
    """Rows reset with neutral records ahead of their own (state/phase.py; per slot d = (3 s + 1) % L, so 0 and
    L - 1 both occur for L > 1, and a reset mid-run): outputs, flushed checkpoints and committed states equal the
    conventional recurrence in float64, with the same checks as without a phase (padding rows, wrap-around)."""
    steps = 64
    cache = make_config_cache(family, 3, L, T, mode, C)
    seed = zlib.crc32(f"phase-{family}-{mode}-{L}-{T}".encode() + (b"" if C is None else f"-C{C}".encode()))
    d = Driver(cache, seed=seed, reset_step=steps // 2, reset_phase=lambda new: [(3 * s + 1) % L for s in new])
    for _ in range(steps):
        d.step(T)
    assert d.max_err <= TOL, d.max_err
    assert d.flushes > 0
    assert d.wrapped == (cache.capacity > L)


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("mode,T", [("standard", 1), ("speculative", 2)])
def test_admission_phase_spreads_in_phase_flushes(family, mode, T):
    """Eight rows admitted in one reset with phase="spread" (L = 8): after the first window one row flushes per
    step (two at T = 2 all-accepted), where the same rows without a phase all flush together; neutral records change
    no output beyond float64 rounding (both runs against the conventional recurrence)."""
    L, S, steps = 8, 8, 40
    per_step = {}
    for phase in (None, "spread"):
        cache = make_cache(family, S, L, T, mode)
        drv = Driver(cache, seed=5, stagger=0, poison=False,
                     reset_phase=None if phase is None else (lambda new: "spread"))
        counts = []
        for _ in range(steps):
            drv.step(T, accept=T if mode == "speculative" else None, check_layout=False)
            counts.append(int(cache.last_plan.flush.sum()))
        assert drv.max_err <= TOL, drv.max_err
        per_step[phase] = counts
    assert max(per_step[None]) == S
    # all-accepted: a row commits T records per step, so its flush period is about L / T steps and the best spread
    # puts ceil(S T / L) rows on one step
    assert max(per_step["spread"][L:]) == -(-S * T // L) and sum(per_step["spread"]) >= sum(per_step[None])


def test_admission_phases_values_and_errors():
    from replayssm_trtllm.state.phase import admission_phases
    assert admission_phases("op", None, 4, 16) is None
    assert admission_phases("op", "spread", 4, 16) == [0, 1, 2, 3]
    assert admission_phases("op", "spread", 1, 16, start=5) == [5]
    assert admission_phases("op", "spread", 20, 16, start=3) == [(3 + i) % 16 for i in range(20)]
    assert admission_phases("op", 3, 2, 16) == [3, 3]
    assert admission_phases("op", torch.tensor([0, 15]), 2, 16) == [0, 15]
    with pytest.raises(ValueError, match=r"op: each phase .* must be in \[0, L - 1 = 15\]; got 16"):
        admission_phases("op", [1, 16], 2, 16)
    with pytest.raises(ValueError, match=r"op: 'phase' given per slot must be 3 integers"):
        admission_phases("op", [1, 2], 3, 16)
    with pytest.raises(ValueError, match=r"op: 'phase' must be None, 'spread'"):
        admission_phases("op", "even", 3, 16)
    with pytest.raises(ValueError, match=r"'phase' given per slot"):
        admission_phases("op", torch.tensor([0.5, 1.0]), 2, 16)


def test_spread_phase_continues_across_resets():
    """Rows admitted one call at a time in the same engine step (how a serving loop may admit a burst) still get
    consecutive phases: "spread" continues from the rows the cache admitted before."""
    cache = make_cache("gdn", 6, 4, 1, "standard")
    shape = tuple(cache.ckpt.shape[1:])
    for s in range(6):
        cache.reset([s], torch.randn((1,) + shape, dtype=torch.float64), phase="spread")
    assert cache.cursors.ring_len.tolist() == [0, 1, 2, 3, 0, 1]


def test_reset_phase_writes_neutral_records():
    """The ring rows a phase writes hold the neutral values, the cursors h = d, o = 0; padding slots untouched."""
    for family in ("mamba2", "gdn"):
        cache = make_cache(family, 4, 8, 2, "speculative", two_precision=True)
        shape = tuple(cache.ckpt.shape[1:])
        for ten in ring_tensors(cache).values():
            ten.fill_(7.0)
        cache.reset(torch.tensor([2, -1, 0]), torch.randn((3,) + shape, dtype=torch.float64), phase=[5, 4, 0])
        assert cache.cursors.ring_len.tolist()[:3] == [0, 0, 5] and int(cache.cursors.ring_origin[2]) == 0
        for name, ten in ring_tensors(cache).items():
            want = 1.0 if name == "ring_k" else 0.0
            assert bool((ten[2, :5] == want).all()) and bool((ten[2, 5:] == 7.0).all()), name
            assert bool((ten[0] == 7.0).all()) and bool((ten[1] == 7.0).all()) and bool((ten[3] == 7.0).all()), name


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_cache_long_run(family):
    """Hundreds of steps at the paper's setting L = 16, T = 4."""
    cache = make_cache(family, 2, 16, 4, "speculative")
    d = Driver(cache, seed=7, poison=False)
    for _ in range(250):
        d.step(4, check_layout=False)
    assert d.max_err <= TOL


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_cache_all_accepted_matches_standard(family):
    """Speculative, all T accepted, equals T standard steps on the same tokens."""
    L, T, steps = 6, 3, 20
    spec = make_cache(family, 1, L, T, "speculative")
    std = make_cache(family, 1, L, 1, "standard")
    g = torch.Generator().manual_seed(3)
    layer = random_mamba2_layer(MDIMS["H"], g) if family == "mamba2" else random_gdn_layer(GDIMS["HV"], g)
    shape = (1, MDIMS["H"], MDIMS["P"], MDIMS["N"]) if family == "mamba2" else (1, GDIMS["HV"], GDIMS["V"], GDIMS["K"])
    pre = random_state(shape, g)
    spec.reset([0], pre)
    std.reset([0], pre)
    for _ in range(steps):
        inp = (random_mamba2_inputs(1, T, MDIMS["H"], MDIMS["P"], MDIMS["N"], MDIMS["G"], g) if family == "mamba2"
               else random_gdn_inputs(1, T, GDIMS["H"], GDIMS["HV"], GDIMS["K"], GDIMS["V"], g))
        O = spec.step([0], **inp, **layer)
        spec.commit([0], torch.tensor([T]))
        for s in range(T):
            o = std.step([0], **{k: (v[:, s:s + 1] if v is not None else None) for k, v in inp.items()}, **layer)
            std.commit([0])
            assert torch.allclose(O[:, s], o[:, 0], rtol=1e-12, atol=1e-13)


# ---- two precision -----------------------------------------------------------------------------

def run_pair(family, mode, L, T, kw_a, kw_b, steps=40, seed=11):
    da = Driver(make_cache(family, 3, L, T, mode, **kw_a), seed=seed)
    db = Driver(make_cache(family, 3, L, T, mode, **kw_b), seed=seed)
    for _ in range(steps):
        da.step(T, check_layout=False)
        db.step(T, check_layout=False)
    return da, db


TP_CONFIGS = [("standard", 4, 1), ("speculative", 5, 2)]


@pytest.mark.parametrize("mode,L,T", TP_CONFIGS, ids=["std-L4", "spec-L5-T2"])
def test_mamba2_two_precision_identity_bit_identical(mode, L, T):
    da, db = run_pair("mamba2", mode, L, T, {}, {"two_precision": True})
    for a, b in zip(da.outputs, db.outputs):
        assert torch.equal(a, b)
    for a, b in zip(da.ckpts, db.ckpts):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode,L,T", TP_CONFIGS, ids=["std-L4", "spec-L5-T2"])
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_two_precision_lossy_read_copy_never_enters_recurrence(family, mode, L, T):
    lossy = {"two_precision": True, "quant_lp": cast_quantizer(torch.bfloat16)}
    if family == "gdn":
        lossy["u_round"] = cast_quantizer(torch.float16)
    da, db = run_pair(family, mode, L, T, {"two_precision": True}, lossy)
    assert da.max_err <= TOL
    for a, b in zip(da.ckpts, db.ckpts):
        assert torch.equal(a, b)
    assert max(float((a - b).abs().max()) for a, b in zip(da.outputs, db.outputs)) > 0
    assert torch.equal(db.cache.ckpt_lp, torch.stack([cast_quantizer(torch.bfloat16)(s) for s in db.cache.ckpt]))


@pytest.mark.parametrize("mode,L,T", TP_CONFIGS, ids=["std-L4", "spec-L5-T2"])
def test_gdn_two_precision_identity_close_to_single(mode, L, T):
    da, db = run_pair("gdn", mode, L, T, {}, {"two_precision": True})
    assert da.max_err <= TOL and db.max_err <= TOL
    for a, b in zip(da.ckpts, db.ckpts):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-13)


def test_gdn_u_round_fp16_ring():
    f16 = cast_quantizer(torch.float16)
    d = Driver(make_cache("gdn", 2, 4, 2, "speculative", u_round=f16), seed=5, poison=False)
    for _ in range(20):
        d.step(2, check_layout=False)
    live = d.cache.cursors.live_mask(0)
    u = d.cache.ring_u[live]
    assert torch.equal(u, f16(u))
    assert d.max_err < 1e-2


# ---- sharing, layout, validation ---------------------------------------------------------------

def test_shared_cursors_two_layers():
    cur = ReplayCursors(3, 4, 2, "speculative")
    m = make_cache("mamba2", 3, 4, 2, "speculative", cursors=cur)
    gd = make_cache("gdn", 3, 4, 2, "speculative", cursors=cur)
    assert m.cursors is gd.cursors is cur
    dm, dg = Driver(m, seed=1, stagger=0, poison=False), Driver(gd, seed=2, stagger=0, poison=False)
    g = torch.Generator().manual_seed(0)
    for d in (dm, dg):
        pre = random_state((3,) + d.state_shape, g)
        d.cache.reset([0, 1, 2], pre)
        d.conv[:] = pre
    rows = torch.tensor([2, -1, 0, 1])
    for _ in range(25):
        outs = []
        for d in (dm, dg):
            inp = d.inputs(4, 2)
            outs.append((d, d.cache.step(rows, **inp, **d.layer), inp))
        acc = torch.randint(1, 3, (4,), generator=g)
        cur.commit(rows, acc)                      # once per model step
        for d, out, inp in outs:
            v = rows >= 0
            ref, snaps = d.naive(d.conv[rows[v]], {k: (x[v] if x is not None else None) for k, x in inp.items()})
            assert rel(out[v], ref) <= TOL
            d.conv[rows[v]] = snaps[torch.arange(3), acc[v] - 1]
    with pytest.raises(ValueError, match="shared 'cursors'"):
        make_cache("gdn", 3, 5, 2, "speculative", cursors=cur)


def test_cache_layout_matches_design():
    S, L, Tm = 3, 5, 2
    C = L + Tm
    m = make_cache("mamba2", S, L, Tm, "speculative", two_precision=True)
    H, P, N, G = MDIMS["H"], MDIMS["P"], MDIMS["N"], MDIMS["G"]
    assert m.capacity == C
    for name, shape in (("ckpt", (S, H, P, N)), ("ckpt_lp", (S, H, P, N)), ("ring_dt", (S, C, H)),
                        ("ring_x", (S, C, H, P)), ("ring_B", (S, C, G, N))):
        t = getattr(m, name)
        assert tuple(t.shape) == shape and t.dtype == torch.float64 and t.is_contiguous(), name
    gd = make_cache("gdn", S, L, Tm, "speculative", two_precision=True)
    H, HV, K, V = GDIMS["H"], GDIMS["HV"], GDIMS["K"], GDIMS["V"]
    for name, shape in (("ckpt", (S, HV, V, K)), ("ckpt_lp", (S, HV, V, K)), ("ring_g", (S, C, HV)),
                        ("ring_u", (S, C, HV, V)), ("ring_k", (S, C, H, K)), ("ring_beta", (S, C, HV)),
                        ("ring_v", (S, C, HV, V))):
        t = getattr(gd, name)
        assert tuple(t.shape) == shape and t.dtype == torch.float64 and t.is_contiguous(), name
    single = make_cache("gdn", S, L, 1, "standard")
    assert single.ring_beta is None and single.ring_v is None and single.ckpt_lp is None
    assert single.capacity == L   # standard mode: L ring rows (ring_capacity_for)
    for c in (m, gd):
        assert c.cursors.ring_origin.dtype == torch.int32 and c.cursors.ring_len.dtype == torch.int32


def test_cache_validation():
    m = make_cache("mamba2", 2, 4, 1, "standard")
    g = torch.Generator().manual_seed(0)
    lay = random_mamba2_layer(MDIMS["H"], g)
    inp = random_mamba2_inputs(2, 1, MDIMS["H"], MDIMS["P"], MDIMS["N"], MDIMS["G"], g)
    with pytest.raises(ValueError, match=r"Mamba2ReplayCacheRef.step: 'x' must be .*got float32 \[2, 1, 4, 2\]"):
        m.step([0, 1], **dict(inp, x=inp["x"][..., :2]), **lay)
    with pytest.raises(ValueError, match="'state_batch_indices'"):
        m.step(torch.tensor([0.0, 1.0]), **inp, **lay)
    with pytest.raises(ValueError, match=r"Mamba2ReplayCacheRef.step: 'x' must be .*\[B=3, T, H=4, P=3\]"):
        m.step([0, 1, 1], **inp, **lay)
    inp2 = random_mamba2_inputs(2, 2, MDIMS["H"], MDIMS["P"], MDIMS["N"], MDIMS["G"], g)
    with pytest.raises(ReplayInvariantError, match=r"T=2 must be in \[1, 1\]"):
        m.step([0, 1], **inp2, **lay)
    with pytest.raises(ReplayInvariantError, match="slot 1 appears in more than one row"):
        m.step([1, 1], **inp, **lay)
    with pytest.raises(ValueError, match=r"Mamba2ReplayCacheRef.reset: 'prefill_state'"):
        m.reset([0], torch.zeros(1, 4, 3, 4))
    with pytest.raises(ValueError, match="H=4 must be a multiple of G=3"):
        Mamba2ReplayCacheRef(2, 4, 3, 5, 3, 4)
    with pytest.raises(ValueError, match="HV=3 must be a multiple of H=2"):
        GdnReplayCacheRef(2, 2, 3, 4, 4, 4)
    with pytest.raises(ValueError, match="quantizer 'quant_hp'"):
        make_cache("mamba2", 1, 2, 1, "standard", quant_hp=lambda S: S[0]).reset([0], torch.zeros(1, 4, 3, 5))
    gd = make_cache("gdn", 2, 4, 1, "standard")
    with pytest.raises(ValueError, match="GdnReplayCacheRef.step: 'q'"):
        gd.step([0], **random_gdn_inputs(1, 1, 1, 4, 5, 3, g), **random_gdn_layer(4, g))
    with pytest.raises(ValueError, match="'slots' must hold slots >= 0"):
        gd.committed_state([-1])


@pytest.mark.parametrize("L", [1, 3, 16])
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_standard_mode_needs_only_window_ring_rows(family, L):
    """Standard mode reads and writes at most L records per slot (the flush step folds the h = L - 1 ring records
    and its own token), so a ring of C = L rows is enough: the caches' standard-mode capacity since the sixty-eighth session
    (L + 1 before, the speculative formula with T_max = 1). Run with C = L (dead records poisoned, the cursors' overwrite check on every plan, staggered
    slots and a reset): outputs, flushed checkpoints and committed states equal the conventional recurrence. (The
    launchers' minimum standard capacity is `window` too. Why it matters: Mamba-2's one-launch small-batch step
    needs C <= 32, so L = 32 with C = L + 1 = 33 leaves it; docs/kernels-mamba2.md "Sixty-seventh session".)"""
    steps = 64
    cur = ReplayCursors(3, L, 1, "standard", ring_capacity=L)
    cache = make_cache(family, 3, L, 1, "standard", cursors=cur)
    assert cache.capacity == L
    d = Driver(cache, seed=zlib.crc32(f"capL-{family}-{L}".encode()), reset_step=steps // 2)
    for _ in range(steps):
        d.step(1)
    assert d.max_err <= TOL, d.max_err
    assert d.flushes > 0
    # with C = L a flush moves the origin by h + 1 = L = C rows, i.e. not at all: every window fills the same L rows
    # from the slot's origin, and no write wraps around the ring end
    assert not d.wrapped
