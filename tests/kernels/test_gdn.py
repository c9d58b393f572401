"""GDN decode kernels (conventional, per-draft snapshots, ReplaySSM standard/speculative) against the
float64 reference (replayssm_trtllm.reference). GPU tests carry the ``gpu`` marker; the
validation tests at the end run anywhere.

Error metric: relative RMS, ``||x - ref||_2 / ||ref||_2`` over the compared rows, per step.
Large batches run on the GPU in full; the float64 reference follows a sample of rows (rows are
independent: distinct slots), every other row is checked for NaN/untouched where it is padding.
"""
from __future__ import annotations

import math
import os

import pytest
import torch

from replayssm_trtllm.reference.caches import GdnReplayCacheRef
from replayssm_trtllm.reference.gdn import gdn_decode_naive
from replayssm_trtllm.reference.testing import cast_quantizer, random_gdn_inputs, random_gdn_layer
from kernel_profile import cuda_kernel_names, instances, skip_under_sanitizer

SHAPES = {"q35-4b": (16, 32, 128, 128), "q35-122b": (16, 64, 128, 128)}
# Shapes _Seq also takes, outside the model-shape parametrizations: three value heads per key head (not a power of
# two: the launchers' shift-based instances must fall back)
TEST_SHAPES = {**SHAPES, "odd-group": (2, 6, 128, 128)}
# Relative RMS tolerances. "out" is the 2e-3 target for outputs stored in fp16; bf16 outputs carry
# their own storage rounding (2^-9 per element, about 1.1e-3 relative RMS on its own), so bf16-act
# outputs are held to "out_bf16". FP32 checkpoints are held to 2e-3 regardless of the act dtype.
TOL = {"out": 2e-3, "out_bf16": 4e-3, "ckpt": 2e-3, "u": 2e-3}


def _tol_out(act):
    return TOL["out_bf16"] if act == torch.bfloat16 else TOL["out"]
MAX_REF_ROWS = 6
DEV = "cuda"
# Kernel designs (ops/gdn.py VARIANTS): every GPU test runs on each, correctness is proven per variant.
VARIANTS = [0, 1, 2, 3, 4, 5]
VARIANT_IDS = [f"v{v}" for v in VARIANTS]
# Replay tests also run the split kernels (variant 6, replay only).
REPLAY_VARIANTS = VARIANTS + [6]
CONV_VARIANTS = VARIANTS + [6]  # conventional decode: 6 = the warp-item kernel (one token in place; else variant 5)
CONV_VARIANT_IDS = [f"v{v}" for v in CONV_VARIANTS]
REPLAY_VARIANT_IDS = [f"v{v}" for v in REPLAY_VARIANTS]
SPLIT_MAX_RECORDS = 32  # variant 6: h + T <= 32 (standard window <= 32, speculative window + T <= 32)


def _split_refuses(variant, mode, L, T):
    return variant == 6 and (L if mode == 0 else L + T) > SPLIT_MAX_RECORDS
_REPORT = os.environ.get("RSSM_GDN_REPORT")  # file to append accuracy lines to


def _report(line: str) -> None:
    print(line)
    if _REPORT:
        with open(_REPORT, "a") as f:
            f.write(line + "\n")


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double().cpu(), ref.double().cpu()
    den = torch.linalg.vector_norm(ref).item()
    return torch.linalg.vector_norm(x - ref).item() / max(den, 1e-30)


def _inputs(B, T, H, HV, K, V, gen, act):
    d = random_gdn_inputs(B, T, H, HV, K, V, gen, dtype=torch.float32)
    return {n: t.to(act) for n, t in d.items()}


def _cuda(d):
    return {n: t.to(DEV) for n, t in d.items()}


def _sample_rows(valid_rows, gen, n=MAX_REF_ROWS):
    if len(valid_rows) <= n:
        return list(valid_rows)
    perm = torch.randperm(len(valid_rows), generator=gen)[:n].tolist()
    return sorted(valid_rows[i] for i in perm)


def _conventional_reference(before, slots, inp, layer, gen):
    """The float64 reference of one conventional step for a sample of the valid rows (slot >= 0):
    (valid rows, sampled rows, their slots, reference outputs, reference states after each token)."""
    valid = [r for r in range(slots.shape[0]) if slots[r] >= 0]
    rows = _sample_rows(valid, gen)
    sl = slots[rows].long()
    ref_o, ref_states = gdn_decode_naive(before[sl].cpu(), *(inp[n][rows] for n in ("q", "k", "v", "a", "b")),
                                         layer["A_log"].cpu(), layer["dt_bias"].cpu())
    return valid, rows, sl, ref_o, ref_states


def _ops():
    from replayssm_trtllm.ops import commit  # noqa: F401  (registers torch.ops.replayssm.replay_commit)
    from replayssm_trtllm.ops import gdn as G
    return G


# =================================================================================================
# conventional decode
# =================================================================================================
@pytest.mark.gpu
@pytest.mark.parametrize("state_dtype,act,K,T", [
    (torch.float32, torch.bfloat16, 128, 1), (torch.float32, torch.bfloat16, 128, 3),
    (torch.float32, torch.float16, 128, 1), (torch.bfloat16, torch.bfloat16, 128, 1),
    (torch.float16, torch.bfloat16, 128, 1), (torch.float32, torch.bfloat16, 64, 1),
    (torch.float32, torch.bfloat16, 256, 2)],
    ids=lambda x: str(x).replace("torch.", ""))
@pytest.mark.parametrize("B", [1, 3, 64, 256])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("variant", CONV_VARIANTS, ids=CONV_VARIANT_IDS)
def test_conventional_decode(shape, B, state_dtype, act, K, T, variant):
    if (state_dtype, act, K, T) != (torch.float32, torch.bfloat16, 128, 1) and B not in (3, 64):
        pytest.skip("dtype/K/T variants run at B in {3, 64}")
    G = _ops()
    H, HV, _, V = SHAPES[shape]
    gen = torch.Generator().manual_seed(1000 * B + K + T)
    S = B + 5
    layer = _cuda(random_gdn_layer(HV, gen))
    slots = torch.randperm(S, generator=gen)[:B].to(torch.int32)
    if B >= 3:
        slots[1::4] = -1
    inp = _inputs(B, T, H, HV, K, V, gen, act)
    state = (0.5 * torch.randn(S, HV, V, K, generator=gen)).to(state_dtype).to(DEV)
    before = state.clone()
    o = torch.full((B, T, HV, V), float("nan"), dtype=act, device=DEV)
    if variant >= 3 and K == 64:  # the stream kernel's layout needs K % 128 == 0: refused, nothing written
        with pytest.raises(Exception, match=r"(variants 3-5|variant 6 \(warp items\)) .*head_k 128 or 256; got 64"):
            G.gdn_decode(state, slots.to(DEV), **_cuda(inp), **layer, out=o, variant=variant)
        torch.cuda.synchronize()
        assert torch.equal(state, before) and torch.isnan(o.float()).all()
        return
    G.gdn_decode(state, slots.to(DEV), **_cuda(inp), **layer, out=o, variant=variant)
    torch.cuda.synchronize()
    valid, rows, sl, ref_o, ref_states = _conventional_reference(before, slots, inp, layer, gen)
    e_o = rel(o[rows], ref_o)
    e_s = rel(state[sl], ref_states[:, -1])
    tol_s = 2e-3 if state_dtype == torch.float32 else 1e-2
    assert e_o < _tol_out(act) * (1 if state_dtype == torch.float32 else 4), f"output rel err {e_o:.3e}"
    assert e_s < tol_s, f"state rel err {e_s:.3e}"
    pad = [r for r in range(B) if slots[r] < 0]
    if pad:
        assert torch.isnan(o[pad]).all(), "padding rows' outputs were written"
    untouched = sorted(set(range(S)) - set(slots[valid].tolist()))
    assert torch.equal(state[untouched], before[untouched]), "slots of no valid row changed"
    assert not torch.isnan(o[valid]).any()


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [0, 1, 2, 3, 4, 5, 6, 8, 9])
@pytest.mark.parametrize("B,shape,V", [pytest.param(3, "q35-4b", 128, marks=pytest.mark.sanitize),
                                       (64, "q35-122b", 128),
                                       pytest.param(5, "q35-4b", 88, marks=pytest.mark.sanitize)],
                         ids=["B3-q35-4b", "B64-q35-122b", "B5-V88"])
def test_conventional_warp_launch_shapes(cfg, B, shape, V, monkeypatch):
    """Every launch shape of the warp-item conventional decode (RSSM_GDN_WARP_CFG: rows per warp, threads, register
    bound; gdn_warp_decode.cu) against the float64 reference, padding rows untouched. V = 88 is not a multiple of the
    16-row shapes: those fall back to the default shape and must still be right. 8 / 9 (PIPE, seventy-first session)
    run a persistent grid with the next items' rows in flight: at B = 64 (q35-122b) a warp walks several items, so
    the stages rotate and the padding row's empty groups sit between real ones."""
    monkeypatch.setenv("RSSM_GDN_WARP_CFG", str(cfg))
    G = _ops()
    H, HV, K, _ = SHAPES[shape]
    gen = torch.Generator().manual_seed(4100 + 10 * cfg + B)
    S = B + 4
    layer = _cuda(random_gdn_layer(HV, gen))
    slots = torch.randperm(S, generator=gen)[:B].to(torch.int32)
    slots[1] = -1
    inp = _inputs(B, 1, H, HV, K, V, gen, torch.bfloat16)
    state = (0.5 * torch.randn(S, HV, V, K, generator=gen)).to(DEV)
    before = state.clone()
    o = torch.full((B, 1, HV, V), float("nan"), dtype=torch.bfloat16, device=DEV)
    G.gdn_decode(state, slots.to(DEV), **_cuda(inp), **layer, out=o, variant=6)
    torch.cuda.synchronize()
    valid, rows, sl, ref_o, ref_states = _conventional_reference(before, slots, inp, layer, gen)
    assert rel(o[rows], ref_o) < _tol_out(torch.bfloat16)
    assert rel(state[sl], ref_states[:, -1]) < 2e-3
    assert torch.isnan(o[1]).all(), "padding row's output was written"
    assert not torch.isnan(o[valid]).any()
    untouched = sorted(set(range(S)) - set(slots[valid].tolist()))
    assert torch.equal(state[untouched], before[untouched]), "slots of no valid row changed"


@pytest.mark.gpu
@pytest.mark.parametrize("T", list(range(1, 9)))
@pytest.mark.parametrize("B,shape", [(3, "q35-4b"), (64, "q35-122b")])
@pytest.mark.parametrize("variant", CONV_VARIANTS, ids=CONV_VARIANT_IDS)
def test_conventional_snapshots(B, shape, T, variant):
    """Per-draft snapshots: read column num_accepted-1, write the state after draft s to column s."""
    G = _ops()
    H, HV, K, V = SHAPES[shape]
    gen = torch.Generator().manual_seed(77 + T + B)
    cols = T + 1
    S = B * cols + 3
    layer = _cuda(random_gdn_layer(HV, gen))
    idx = torch.randperm(S, generator=gen)[:B * cols].to(torch.int32).reshape(B, cols)
    if B >= 3:
        idx[1] = -1  # padding row
    acc = torch.randint(1, T + 1, (B,), generator=gen, dtype=torch.int32)
    inp = _inputs(B, T, H, HV, K, V, gen, torch.bfloat16)
    state = (0.5 * torch.randn(S, HV, V, K, generator=gen)).to(DEV)
    before = state.clone()
    o = torch.full((B, T, HV, V), float("nan"), dtype=torch.bfloat16, device=DEV)
    G.gdn_decode(state, idx.to(DEV), **_cuda(inp), **layer, num_accepted=acc.to(DEV), snapshot=True, out=o,
                 variant=variant)
    torch.cuda.synchronize()
    valid = [r for r in range(B) if idx[r, 0] >= 0]
    rows = _sample_rows(valid, gen)
    src = torch.stack([idx[r, acc[r] - 1] for r in rows]).long()
    ref_o, ref_states = gdn_decode_naive(before[src].cpu(), *(inp[n][rows] for n in ("q", "k", "v", "a", "b")),
                                         layer["A_log"].cpu(), layer["dt_bias"].cpu())
    assert rel(o[rows], ref_o) < _tol_out(torch.bfloat16)
    for t in range(T):
        dst = idx[rows, t].long()
        assert rel(state[dst], ref_states[:, t]) < TOL["ckpt"], f"snapshot {t}"
    if B >= 3:
        assert torch.isnan(o[1]).all()
    written = set(idx[valid, :T].reshape(-1).tolist())
    untouched = sorted(set(range(S)) - written)
    assert torch.equal(state[untouched], before[untouched])


# =================================================================================================
# ReplaySSM: sequences against GdnReplayCacheRef
# =================================================================================================
class _Seq:
    """Runs the GPU replay kernels and the float64 reference side by side over many steps."""

    def __init__(self, shape, B, L, mode, T, *, act=torch.bfloat16, u_dtype=torch.float16, seed=0,
                 u_round="match", K=None, V=None, state_dtype=torch.float32, S_extra=3, variant=0,
                 ring_capacity=None):
        from replayssm_trtllm.state.cursors import ReplayCursors
        self.G = _ops()
        H, HV, K0, V0 = TEST_SHAPES[shape]
        K = K or K0
        V = V or V0
        self.H, self.HV, self.K, self.V = H, HV, K, V
        self.B, self.L, self.mode, self.T, self.act = B, L, mode, T, act
        self.variant = variant
        self.gen = torch.Generator().manual_seed(seed)
        S = B + S_extra
        self.S = S
        self.layer = random_gdn_layer(HV, self.gen)
        self.layer_c = _cuda(self.layer)
        self.slots = torch.randperm(S, generator=self.gen)[:B].to(torch.int32)
        T_max = T if mode == 1 else 1
        # ring_capacity: None = L + T_max (in standard mode one row more than the caches' L since the sixty-eighth
        # session, so that the writes wrap the ring end; test_replay_standard_ring_of_window_rows runs C = L); any
        # other C >= L (the launcher's minimum) on both sides
        if ring_capacity is None:
            ring_capacity = L + T_max
        self.cursors = ReplayCursors(S, L, T_max, mode, ring_capacity=ring_capacity, device="cpu")  # drives the GPU
        self.C = self.cursors.capacity
        ur = cast_quantizer(u_dtype) if u_round == "match" else None
        self.ref = GdnReplayCacheRef(S, H, HV, K, V, L, T_max, mode, u_round=ur,
                                     cursors=ReplayCursors(S, L, T_max, mode, ring_capacity=ring_capacity))
        init = (0.5 * torch.randn(S, HV, V, K, generator=self.gen)).to(state_dtype)
        self.ref.reset(list(range(S)), init.double())
        self.ckpt = init.to(DEV)
        self.ring_g = torch.zeros(S, self.C, HV, device=DEV)
        self.ring_u = torch.zeros(S, self.C, HV, V, dtype=u_dtype, device=DEV)
        self.ring_k = torch.zeros(S, self.C, H, K, dtype=act, device=DEV)
        self.origin = torch.zeros(S, dtype=torch.int32, device=DEV)
        self.length = torch.zeros(S, dtype=torch.int32, device=DEV)
        self.ref_rows = _sample_rows(list(range(B)), self.gen)
        self.max_err = {"out": 0.0}
        self.tol_out = _tol_out(act)
        self.flushes = 0
        self.input_view = None
        self.use_device_commit = True
        try:
            from replayssm_trtllm.ops import commit as _c  # noqa: F401
        except Exception:
            self.use_device_commit = False

    def step(self, active: torch.Tensor, accepted=None):
        """active [B] bool (False = padding this step); accepted [B] int (speculative) or None."""
        B, T = self.B, self.T
        sbi = torch.where(active, self.slots, torch.full_like(self.slots, -1))
        inp = _inputs(B, T, self.H, self.HV, self.K, self.V, self.gen, self.act)
        o = torch.full((B, T, self.HV, self.V), float("nan"), dtype=self.act, device=DEV)
        plan = self.cursors.plan(sbi, T)
        self.flushes += int(plan.flush[plan.valid].sum())
        ck_before = self.ckpt.clone()
        x = _cuda(inp)
        if self.input_view is not None:  # the kernels see views (strided q / k / v), the reference the values
            x = self.input_view(x)
        self.G.gdn_replay(self.ckpt, sbi.to(DEV), self.origin, self.length, self.ring_g, self.ring_u, self.ring_k,
                          **x, **self.layer_c, window=self.L, mode=self.mode, out=o, variant=self.variant)
        self.last_out = o  # the step's outputs (bit-identity tests)
        rows = [r for r in self.ref_rows if active[r]]
        if rows:
            ref_o = self.ref.step(sbi[rows], *(inp[n][rows] for n in ("q", "k", "v", "a", "b")),
                                  self.layer["A_log"], self.layer["dt_bias"])
            e = rel(o[rows], ref_o)
            self.max_err["out"] = max(self.max_err["out"], e)
            assert e < self.tol_out, f"step output rel err {e:.3e} (rows {rows})"
        pad = [r for r in range(B) if not active[r]]
        if pad:
            assert torch.isnan(o[pad]).all(), "padding rows' outputs were written"
        act_rows = [r for r in range(B) if active[r]]
        assert not torch.isnan(o[act_rows]).any()
        # checkpoint written only on flush rows
        untouched = sorted(set(range(self.S)) - set(int(self.slots[r]) for r in act_rows if plan.flush[r]))
        assert torch.equal(self.ckpt[untouched], ck_before[untouched]), "checkpoint written on a non-flush row"
        # commit: device kernel (when present) vs the reference cursors
        acc_t = None if accepted is None else torch.as_tensor(accepted, dtype=torch.int32)
        if self.use_device_commit:
            torch.ops.replayssm.replay_commit(sbi.to(DEV), None if acc_t is None else acc_t.to(DEV), self.origin,
                                              self.length, None, self.L, self.C, T, self.mode)
        self.cursors.commit(sbi, acc_t)
        if not self.use_device_commit:
            self.origin.copy_(self.cursors.ring_origin)
            self.length.copy_(self.cursors.ring_len)
        if rows:
            self.ref.commit(sbi[rows], None if acc_t is None else acc_t[rows])
        assert torch.equal(self.origin.cpu(), self.cursors.ring_origin)
        assert torch.equal(self.length.cpu(), self.cursors.ring_len)

    def compare_buffers(self):
        torch.cuda.synchronize()
        sl = self.slots[self.ref_rows].long()
        e_ck = rel(self.ckpt[sl], self.ref.ckpt[sl])
        assert e_ck < TOL["ckpt"], f"checkpoint rel err {e_ck:.3e}"
        live = self.ref.cursors.live_mask(0)[sl]                                  # [n, C]
        if live.any():
            g_k = self.ring_g[sl].cpu()[live]
            g_r = self.ref.ring_g[sl][live]
            assert rel(g_k, g_r) < 1e-5, "ring_g"
            u_k = self.ring_u[sl].cpu()[live]
            u_r = self.ref.ring_u[sl][live]
            assert rel(u_k, u_r) < TOL["u"], f"ring_u rel err {rel(u_k, u_r):.3e}"
            k_k = self.ring_k[sl].cpu()[live]
            k_r = self.ref.ring_k[sl][live]
            assert torch.equal(k_k.double(), k_r), "ring_k must be a bit copy of k"
        return e_ck


def _active(B, step, join, gen, drop):
    act = torch.tensor([step >= join[r] for r in range(B)])
    if drop > 0:
        act &= torch.rand(B, generator=gen) >= drop
    return act


STD_CASES = [  # shape, B, L, staggered
    ("q35-4b", 1, 4, False), ("q35-4b", 3, 8, True), ("q35-4b", 64, 16, True), ("q35-4b", 256, 32, True),
    ("q35-122b", 3, 4, True), ("q35-122b", 64, 32, False), ("q35-122b", 256, 16, True), ("q35-122b", 1, 16, False),
]


def _run_standard(seq, B, join, drop, steps, every):
    """Standard steps with the given joins and padding-row rate, buffers compared every `every` steps and at the
    end; at least one flush must have happened."""
    for t in range(steps):
        seq.step(_active(B, t, join, seq.gen, drop))
        if t % every == every - 1:
            seq.compare_buffers()
    seq.compare_buffers()
    assert seq.flushes > 0


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,stag", STD_CASES, ids=[f"{s}-B{b}-L{l}-{'stag' if t else 'phase'}"
                                                           for s, b, l, t in STD_CASES])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_replay_standard(shape, B, L, stag, variant):
    seq = _Seq(shape, B, L, 0, 1, seed=B * 100 + L, variant=variant)
    join = [(r * 5) % L if stag else 0 for r in range(B)]
    steps = 2 * L + max(join) + 8 if L >= 32 else max(64, 3 * L)
    _run_standard(seq, B, join, 0.1 if stag else 0.0, steps, 17)
    _report(f"replay-standard v{variant} {shape} B={B} L={L} {'stag' if stag else 'phase'}: steps={steps} "
            f"max out rel err={seq.max_err['out']:.2e} flushes={seq.flushes}")


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L", [("q35-4b", 1, 16), ("q35-4b", 3, 32), ("q35-122b", 64, 8)],
                         ids=["q35-4b-B1-L16", "q35-4b-B3-L32", "q35-122b-B64-L8"])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS + [None], ids=REPLAY_VARIANT_IDS + ["auto"])
def test_replay_standard_ring_of_window_rows(shape, B, L, variant):
    """The standard step on a ring of C = L rows (the launchers' minimum and the caches' standard-mode capacity), every design and
    the automatic one, staggered rows that wrap the ring: the float64 reference shows L rows are enough
    (tests/reference, test_standard_mode_needs_only_window_ring_rows); with C = L the origin never moves, and at
    B = 1, L = 16 the warp-item step (WIR, ring <= 32) runs. Written in the sixty-seventh session; not yet run on a
    GPU."""
    seq = _Seq(shape, B, L, 0, 1, seed=B * 100 + L + 67, variant=variant, ring_capacity=L)
    assert seq.C == L
    join = [(r * 5) % L for r in range(B)]
    _run_standard(seq, B, join, 0.1, 2 * L + max(join) + 8, 7)


@pytest.mark.gpu
@pytest.mark.parametrize("minb", ["6", "8"])
@pytest.mark.parametrize("shape,B,L,stag", [pytest.param("q35-4b", 3, 8, True, marks=pytest.mark.sanitize),
                                             ("q35-122b", 256, 16, True)],
                         ids=["q35-4b-B3-L8-stag", "q35-122b-B256-L16-stag"])
def test_replay_standard_prep_register_bounds(minb, shape, B, L, stag, monkeypatch):
    """The one-token split prep at both register bounds (RSSM_GDN_PREP_MINB: 8 CTAs per SM, the default since the
    nineteenth session, and 6, the previous one) on the split kernels (variant 6), staggered rows with flushes."""
    monkeypatch.setenv("RSSM_GDN_PREP_MINB", minb)
    seq = _Seq(shape, B, L, 0, 1, seed=B * 100 + L + int(minb), variant=6)
    join = [(r * 5) % L for r in range(B)]
    steps = 3 * L + max(join)
    _run_standard(seq, B, join, 0.1, steps, 11)
    _report(f"replay-standard prep minb={minb} {shape} B={B} L={L}: steps={steps} "
            f"max out rel err={seq.max_err['out']:.2e} flushes={seq.flushes}")


# A/B switches of the serving standard step's kernels (fp32 rows, K = 128, bf16 activations, fp16 u), each run against
# the float64 reference: the u_j permute right after its load (RSSM_GDN_SPLIT_UPD=0, the alternative to the default
# since the twenty-third session); the key head by an integer division instead of the default multiply-high
# (RSSM_GDN_SPLIT_FDIV=0; the multiply-high is common/small_divisor.h, exhaustively checked on the CPU); and the
# multiply-high with 64-bit item offsets instead of the default 32-bit ones (RSSM_GDN_SPLIT_OFF32=0). Every other
# variant-6 standard-step test runs the default (UPD + FDIV + OFF32 since the twenty-fourth session, EARLY and the
# LEAN + MNORM prep since the twenty-fifth).
# The one-token prep: since the twenty-fifth session the default is the lean prep (LEAN) that takes the committed-key
# norms from the records' Gram tile on tensor cores (MNORM; L = 32 gives two record tiles); prep-lean-off runs MNORM
# alone (RSSM_GDN_PREP_LEAN=0), prep-mnorm-off the warp reductions (RSSM_GDN_PREP_MNORM=0). early-rows-off: the
# readout's first item's rows after the wait for the prep instead of before it (RSSM_GDN_SPLIT_EARLY=0). The default
# since the twenty-seventh session also issues a flush item's first two key chunks and fold weights' fw_j at the item's
# start (ESTAGE; L = 8 is one chunk, L = 16 two, L = 32 four, so the in-loop restaging of chunks 2 and 3 runs too; in
# phase every row flushes); estage-off runs the previous instance, a programmatic dependent of the prep
# (RSSM_GDN_SPLIT_ESTAGE=0). Since the thirtieth session the default keeps one key-chunk buffer per warp (KEY1: chunk 0
# staged at the item's start, chunk c + 1 after chunk c's fold); key1-off runs two (RSSM_GDN_SPLIT_KEY1=0).
STD_STEP_SWITCHES = {"estage-off": {"RSSM_GDN_SPLIT_ESTAGE": "0"},
                     "deferred-permute-off": {"RSSM_GDN_SPLIT_UPD": "0"},
                     "fdiv-off": {"RSSM_GDN_SPLIT_FDIV": "0"},
                     "off32-off": {"RSSM_GDN_SPLIT_OFF32": "0"},
                     "prep-mnorm-off": {"RSSM_GDN_PREP_MNORM": "0"},
                     "prep-lean-off": {"RSSM_GDN_PREP_LEAN": "0"},
                     "early-rows-off": {"RSSM_GDN_SPLIT_EARLY": "0"},
                     # two key-chunk buffers per warp instead of one (KEY1, the default since the thirtieth session)
                     "key1-off": {"RSSM_GDN_SPLIT_KEY1": "0"}}
STD_READOUT_ENV = ("RSSM_GDN_SPLIT_UPD", "RSSM_GDN_SPLIT_FDIV", "RSSM_GDN_SPLIT_OFF32", "RSSM_GDN_SPLIT_EARLY",
                   "RSSM_GDN_SPLIT_ESTAGE", "RSSM_GDN_SPLIT_KEY1", "RSSM_GDN_SPLIT_CARVEOUT")
STD_PREP_ENV = ("RSSM_GDN_PREP_MNORM", "RSSM_GDN_PREP_MINB", "RSSM_GDN_PREP_LEAN")


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,stag", [pytest.param("q35-4b", 3, 8, True, marks=pytest.mark.sanitize),
                                             pytest.param("q35-122b", 5, 32, False, marks=pytest.mark.sanitize),
                                             ("q35-122b", 64, 16, False), ("q35-4b", 256, 16, True),
                                             ("q35-122b", 256, 16, True), ("q35-4b", 64, 32, True)],
                         ids=["q35-4b-B3-L8-stag", "q35-122b-B5-L32-phase", "q35-122b-B64-L16-phase",
                              "q35-4b-B256-L16-stag", "q35-122b-B256-L16-stag", "q35-4b-B64-L32-stag"])
@pytest.mark.parametrize("switch", list(STD_STEP_SWITCHES))
def test_replay_standard_readout_switch(switch, shape, B, L, stag, monkeypatch):
    """One A/B switch of the serving standard step (STD_STEP_SWITCHES) on both shapes (2 and 4 value heads
    per key head): padding and staggered rows, flushes, wrap-around, against the float64 reference with the default
    tolerances."""
    for k in STD_READOUT_ENV + STD_PREP_ENV:
        monkeypatch.delenv(k, raising=False)
    for k, v in STD_STEP_SWITCHES[switch].items():
        monkeypatch.setenv(k, v)
    seq = _Seq(shape, B, L, 0, 1, seed=B * 100 + L + 13, variant=6)
    join = [(r * 5) % L if stag else 0 for r in range(B)]
    steps = 3 * L + max(join)
    _run_standard(seq, B, join, 0.1, steps, 11)
    _report(f"replay-standard readout {switch} {shape} B={B} L={L}: steps={steps} "
            f"max out rel err={seq.max_err['out']:.2e} flushes={seq.flushes}")


def _one_standard_step_kernels(monkeypatch, clear, env, seed):
    """Names of the CUDA kernels one q35-4b standard step (B = 8, L = 8, fp32 rows, variant 6) launches with the
    switches in `clear` unset and then `env` set (torch profiler)."""
    skip_under_sanitizer()
    for k in clear:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    seq = _Seq("q35-4b", 8, 8, 0, 1, seed=seed, variant=6)
    return cuda_kernel_names(lambda: seq.step(torch.ones(8, dtype=torch.bool)))[1]


@pytest.mark.gpu
@pytest.mark.parametrize("env,upd,fdiv,off32,early,estage,key1",
                         [({}, "1", True, True, True, True, True),
                          ({"RSSM_GDN_SPLIT_UPD": "0"}, "0", False, False, False, False, False),
                          ({"RSSM_GDN_SPLIT_FDIV": "0"}, "1", False, False, False, False, False),
                          ({"RSSM_GDN_SPLIT_OFF32": "0"}, "1", True, False, False, False, False),
                          ({"RSSM_GDN_SPLIT_EARLY": "0"}, "1", True, True, False, False, False),
                          ({"RSSM_GDN_SPLIT_ESTAGE": "0"}, "1", True, True, True, False, False),
                          ({"RSSM_GDN_SPLIT_KEY1": "0"}, "1", True, True, True, True, False)],
                         ids=["default-upd-fdiv-off32-early-estage-key1", "upd-off", "fdiv-off", "off32-off",
                              "early-off", "estage-off", "key1-off"])
def test_standard_readout_instance_runs(env, upd, fdiv, off32, early, estage, key1, monkeypatch):
    """The launcher's switches are silent when their conditions fail, so check which standard-step readout instance
    ran (torch profiler) at the serving dtypes: UPD + FDIV + OFF32 + EARLY + ESTAGE + KEY1 by default, the plain
    instance with RSSM_GDN_SPLIT_UPD=0 (the others sit on top of UPD) or RSSM_GDN_SPLIT_FDIV=0 (OFF32 needs FDIV), FDIV
    with 64-bit offsets with RSSM_GDN_SPLIT_OFF32=0 (EARLY needs OFF32), no EARLY with RSSM_GDN_SPLIT_EARLY=0, the
    no early key staging (ESTAGE, on top of EARLY; EARLY=0 turns it off too) with RSSM_GDN_SPLIT_ESTAGE=0 (KEY1 sits on
    top of ESTAGE), two key-chunk buffers with RSSM_GDN_SPLIT_KEY1=0."""
    names = _one_standard_step_kernels(monkeypatch, STD_READOUT_ENV, env, seed=5)
    ro = [a for a in instances(names, "gdnSplitReadoutKernel") if a[0] == "float"]
    assert ro, f"no fp32-row split readout ran: {sorted(names)}"
    # template arguments 6, 7, 8, 9, 10, 11: UPD, FDIV, OFF32, EARLY, ESTAGE, KEY1
    got = [(a[6], a[7] == "1", a[8] == "1", a[9] == "1", a[10] == "1", a[11] == "1") for a in ro]
    assert all(g == (upd, fdiv, off32, early, estage, key1) for g in got), got


@pytest.mark.gpu
@pytest.mark.parametrize("env,mnorm,lean", [({}, True, True), ({"RSSM_GDN_PREP_LEAN": "0"}, True, False),
                                            ({"RSSM_GDN_PREP_MNORM": "0"}, False, False),
                                            ({"RSSM_GDN_PREP_MINB": "6"}, False, False)],
                         ids=["default-mnorm-lean", "lean-off", "mnorm-off-no-lean", "minb6-has-neither"])
def test_prep_instance_runs(env, mnorm, lean, monkeypatch):
    """Which one-token prep instance ran (torch profiler): LEAN + MNORM by default, MNORM alone with
    RSSM_GDN_PREP_LEAN=0, neither with RSSM_GDN_PREP_MNORM=0 (LEAN sits on top of MNORM) or the RSSM_GDN_PREP_MINB=6
    bound."""
    names = _one_standard_step_kernels(monkeypatch, STD_PREP_ENV, env, seed=7)
    pr = [a for a in instances(names, "gdnSplitPrepKernel") if a[:2] == ["128", "1"]]
    assert pr, f"no one-token prep ran: {sorted(names)}"
    # template arguments 3, 4: MNORM, LEAN
    assert all((a[3] == "1", a[4] == "1") == (mnorm, lean) for a in pr), pr


# Readout switches that only move or re-derive values (never change them): (the reference setting, the alternative
# settings). The same standard-step sequence (fp32 rows, padding and staggered rows, flushes) must give bit-identical outputs,
# checkpoints and ring u under every setting. UPD only moves an instruction; FDIV computes the same key head another
# way (the standard-step readout); OFF32 the same offsets in 32 bits.
NO_VALUE_CHANGE_CASES = {
    "deferred-permute": ({"RSSM_GDN_SPLIT_UPD": "0"}, [{"RSSM_GDN_SPLIT_UPD": "1"}]),
    "fdiv-off32-standard": ({"RSSM_GDN_SPLIT_FDIV": "0"}, [{"RSSM_GDN_SPLIT_OFF32": "0"}, {}]),
    # the readout's first rows before the wait (default) or after it; the lean prep (default) computes the same
    # records as MNORM alone with fewer instructions
    "early-rows-lean-prep": ({}, [{"RSSM_GDN_SPLIT_EARLY": "0"}, {"RSSM_GDN_PREP_LEAN": "0"},
                                  {"RSSM_GDN_SPLIT_EARLY": "0", "RSSM_GDN_PREP_LEAN": "0"}]),
    # a flush item's keys and fw_j issued at the item's start: the same copies, weights and FMAs in the same order;
    # L = 32 (four key chunks: the in-loop restaging too) as well as L = 8
    "estage": ({}, [{"RSSM_GDN_SPLIT_ESTAGE": "0"}]),
    "estage-L32": ({}, [{"RSSM_GDN_SPLIT_ESTAGE": "0"}], 32),
    # one key-chunk buffer (KEY1, default) or two: the same copies, weights and FMAs in the same order; L = 8 (one
    # chunk), 16, 32
    "key1": ({}, [{"RSSM_GDN_SPLIT_KEY1": "0"}]),
    "key1-L16": ({}, [{"RSSM_GDN_SPLIT_KEY1": "0"}], 16),
    "key1-L32": ({}, [{"RSSM_GDN_SPLIT_KEY1": "0"}], 32),
    # the readout's shared-memory carve-out (how much of the SM is L1): the smallest that keeps the CTAs per SM
    # (default), the driver's choice, the largest (L1 as small as it goes), the default again. Only where the bytes are
    # cached changes.
    "carveout": ({}, [{"RSSM_GDN_SPLIT_CARVEOUT": "driver"}, {"RSSM_GDN_SPLIT_CARVEOUT": "100"}, {}], 16),
}


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(NO_VALUE_CHANGE_CASES))
def test_readout_switch_changes_no_value(case, monkeypatch):
    ref_env, alt_envs, *rest = NO_VALUE_CHANGE_CASES[case]
    L = rest[0] if rest else 8  # the window (an optional third element of the case)
    res = []
    for env in [ref_env] + alt_envs:
        for k in STD_READOUT_ENV + STD_PREP_ENV:
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        seq = _Seq("q35-122b", 7, L, 0, 1, seed=96, variant=6)
        outs = []
        for t in range(3 * L):
            seq.step(_active(7, t, [0, 3, 5, 0, 2, 7, 1], seq.gen, 0.15))
            outs.append(seq.last_out.clone())
        torch.cuda.synchronize()
        assert seq.flushes > 0
        res.append((outs, seq.ckpt.clone(), seq.ring_u.clone()))
    for env, alt in zip(alt_envs, res[1:]):
        for a, b in zip(res[0][0], alt[0]):
            assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)), f"{env} changed an output"
        assert torch.equal(res[0][1], alt[1]), f"{env} changed a checkpoint"
        assert torch.equal(res[0][2], alt[2]), f"{env} changed ring u"


def _staggered_run(shape, L, mode, T, seed, variant, steps):
    """A sequence of 7 rows with staggered joins, 10% padding and (speculative) random acceptance, every step checked
    against the float64 reference by _Seq: (outputs per step, checkpoint, ring u) for bit-identity comparisons."""
    seq = _Seq(shape, 7, L, mode, T, seed=seed, variant=variant)
    join = [(r * 3) % 5 for r in range(7)]
    outs = []
    for t in range(steps):
        seq.step(_active(7, t, join, seq.gen, 0.1), _spec_accept("random", 7, T, seq.gen) if mode else None)
        outs.append(seq.last_out.clone())
    seq.compare_buffers()
    assert seq.flushes > 0
    return outs, seq.ckpt.clone(), seq.ring_u.clone()


def _assert_same_run(ref, alt, what):
    """Outputs (NaN padding rows compared as NaN), checkpoints and ring u of two _staggered_run results are equal."""
    for a, b in zip(ref[0], alt[0]):
        assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)), f"{what} changed an output"
    assert torch.equal(ref[1], alt[1]), f"{what} changed a checkpoint"
    assert torch.equal(ref[2], alt[2]), f"{what} changed ring u"


@pytest.mark.gpu
@pytest.mark.parametrize("T", [4, 8])
def test_verify_pdl_switch_changes_no_value(T, monkeypatch):
    """The tensor-core verify readout launched plainly (the default up to 4 tokens since the twenty-eighth session) or
    as a programmatic dependent of its prep (the default above 4): the same kernels in another launch order, so a
    speculative sequence (staggered joins, padding rows, random acceptance, flushes) gives bit-identical outputs,
    checkpoints and ring u under RSSM_PDL_GDN_VERIFY unset, "1" and "0"; each run is also checked against the float64
    reference by _Seq."""
    res = []
    for env in ({}, {"RSSM_PDL_GDN_VERIFY": "1"}, {"RSSM_PDL_GDN_VERIFY": "0"}):
        monkeypatch.delenv("RSSM_PDL_GDN_VERIFY", raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        seq = _Seq("q35-4b", 7, 16, 1, T, seed=280 + T, variant=6)
        join = [(r * 3) % 5 for r in range(7)]
        outs = []
        for t in range(24):
            seq.step(_active(7, t, join, seq.gen, 0.1), _spec_accept("random", 7, T, seq.gen))
            outs.append(seq.last_out.clone())
        torch.cuda.synchronize()
        assert seq.flushes > 0
        res.append((env, outs, seq.ckpt.clone(), seq.ring_u.clone()))
    for env, outs, ck, ru in res[1:]:
        for a, b in zip(res[0][1], outs):
            assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)), f"{env} changed an output"
        assert torch.equal(res[0][2], ck), f"{env} changed a checkpoint"
        assert torch.equal(res[0][3], ru), f"{env} changed ring u"


# RSSM_PDL_CHAIN (common/pdl.h): the first kernel of every step (the split prep, the stream replay kernel, the
# conventional warp-item decode) launched as a programmatic dependent of the kernel before it (the previous step's
# commit / decode), waiting before its first load. The same kernels in the same order: bit-identical results.
PDL_CHAIN_CASES = [  # id: (variant, mode, T, L)
    ("split-standard", 6, 0, 1, 8), ("stream-standard", 5, 0, 1, 8), ("split-verify-T4", 6, 1, 4, 16),
    ("stream-verify-T3", 5, 1, 3, 8),
]


@pytest.mark.gpu
@pytest.mark.parametrize("variant,mode,T,L", [c[1:] for c in PDL_CHAIN_CASES], ids=[c[0] for c in PDL_CHAIN_CASES])
def test_pdl_chain_changes_no_value(variant, mode, T, L, monkeypatch):
    """Replay steps + device commits with the step's first kernel a programmatic dependent of the commit before it
    (RSSM_PDL_CHAIN=1) against plain launches (=0): staggered joins, padding rows, random acceptance, flushes;
    bit-identical outputs, checkpoints and ring u, every run also checked against the float64 reference by _Seq."""
    res = []
    for chain in ("0", "1"):
        monkeypatch.setenv("RSSM_PDL_CHAIN", chain)
        res.append(_staggered_run("q35-4b", L, mode, T, 410 + variant + T, variant, 3 * L))
    _assert_same_run(res[0], res[1], "RSSM_PDL_CHAIN=1")


@pytest.mark.gpu
def test_pdl_chain_conventional_changes_no_value(monkeypatch):
    """The conventional warp-item decode (variant 6) as a programmatic dependent of the step before it: ten in-place
    steps with padding rows give the same state and outputs as plain launches, and step 1 matches the float64
    reference."""
    G = _ops()
    H, HV, K, V = SHAPES["q35-122b"]
    B = 9
    gen = torch.Generator().manual_seed(77)
    layer = _cuda(random_gdn_layer(HV, gen))
    init = (0.5 * torch.randn(B + 2, HV, V, K, generator=gen)).to(DEV)
    sbi = torch.randperm(B + 2, generator=gen)[:B].to(torch.int32)
    sbi[4] = -1
    inputs = [_inputs(B, 1, H, HV, K, V, gen, torch.bfloat16) for _ in range(10)]
    res = []
    for chain in ("0", "1"):
        monkeypatch.setenv("RSSM_PDL_CHAIN", chain)
        state = init.clone()
        outs = []
        for i, x in enumerate(inputs):
            o = torch.full((B, 1, HV, V), float("nan"), dtype=torch.bfloat16, device=DEV)
            G.gdn_decode(state, sbi.to(DEV), **_cuda(x), **layer, out=o, variant=6)
            outs.append(o)
            if i == 0 and chain == "1":
                torch.cuda.synchronize()
                _, rows, sl, ref_o, ref_states = _conventional_reference(init, sbi, x, layer, gen)
                assert rel(o[rows], ref_o) < _tol_out(torch.bfloat16), "step 0 output"
                assert rel(state[sl], ref_states[:, -1]) < 2e-3, "step 0 state"
        torch.cuda.synchronize()
        res.append((outs, state))
    for a, b in zip(res[0][0], res[1][0]):
        assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)), "RSSM_PDL_CHAIN=1 changed an output"
    assert torch.equal(res[0][1], res[1][1]), "RSSM_PDL_CHAIN=1 changed the state"
    assert torch.isnan(res[1][0][0][4]).all(), "a padding row's output was written"


def _verify_instance_args(monkeypatch, var, envs, arg, shape="q35-4b"):
    """{(setting of `var`, T): the values of template argument `arg` of every gdnSplitVerifyMmaKernel launched} for
    T = 4 and 8 (torch profiler; one speculative step after a warm-up step)."""
    got = {}
    for env in envs:
        for T in (4, 8):
            monkeypatch.delenv(var, raising=False)
            if env is not None:
                monkeypatch.setenv(var, env)
            seq = _Seq(shape, 3, 16, 1, T, seed=9, variant=6)
            seq.step(_active(3, 0, [0, 0, 0], seq.gen, 0.0), [T, 1, 2])  # warm-up (loads the ops)
            torch.cuda.synchronize()
            names = cuda_kernel_names(lambda: seq.step(_active(3, 1, [0, 0, 0], seq.gen, 0.0), [T, 1, 2]))[1]
            got[(env, T)] = sorted({a[arg] for a in instances(names, "gdnSplitVerifyMmaKernel")})
    return got


# LEAN32 (thirty-sixth session; the default, RSSM_GDN_VERIFY_LEAN32=0 turns it off): the fp32-row tensor-core
# verify readout with 32-bit item offsets, the key head by a shift and the ring key address formed on flush items
# only. Same loads and values: bit-identical to the instances without it ("0"), and against the float64 reference
# (_Seq) on both shapes (2 and 4 value heads per key head), window 16 and 24 (two fold chunks), T = 2, 3, 4, 6, 8.
LEAN32_CASES = [("q35-4b", 16, 4), ("q35-122b", 16, 3), ("q35-4b", 24, 2), ("q35-122b", 24, 4), ("q35-4b", 16, 8),
                ("q35-122b", 24, 6)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,L,T", LEAN32_CASES, ids=[f"{s}-L{l}-T{t}" for s, l, t in LEAN32_CASES])
def test_verify_lean32_changes_no_value(shape, L, T, monkeypatch):
    res = []
    for lean in ("0", "1"):
        monkeypatch.setenv("RSSM_GDN_VERIFY_LEAN32", lean)
        monkeypatch.delenv("RSSM_GDN_VERIFY_MMA", raising=False)
        monkeypatch.delenv("RSSM_GDN_VERIFY_UPF", raising=False)
        res.append(_staggered_run(shape, L, 1, T, 520 + L + T, 6, 2 * L // T + 6))
    _assert_same_run(res[0], res[1], "LEAN32")


@pytest.mark.gpu
def test_verify_lean32_instance_runs(monkeypatch):
    """Which verify instance runs (torch profiler; template argument 5 is LEAN32): unset (the default) and "1"
    LEAN32 at T = 4 and T = 8, "0" at neither (fp32 rows; q35-4b's head group is a power of two)."""
    skip_under_sanitizer()
    got = _verify_instance_args(monkeypatch, "RSSM_GDN_VERIFY_LEAN32", (None, "1", "0"), 5)
    assert got == {(None, 4): ["1"], (None, 8): ["1"], ("1", 4): ["1"], ("1", 8): ["1"], ("0", 4): ["0"],
                   ("0", 8): ["0"]}, got


@pytest.mark.gpu
@pytest.mark.parametrize("T", [4, 8])
def test_verify_lean32_falls_back_for_a_non_power_of_two_head_group(T, monkeypatch):
    """Three value heads per key head (2 key heads, 6 value heads): LEAN32 takes the key head by a shift, so the
    launcher must run the instance without it. The default then gives bit-identical outputs, checkpoints and ring u to
    RSSM_GDN_VERIFY_LEAN32=0 (staggered joins, padding rows, random acceptance, flushes; each run against the float64
    reference by _Seq), and the profiler sees LEAN32 = 0 launched under every setting (thirty-seventh session; NOT yet
    run on a GPU)."""
    res = []
    for lean in (None, "0"):
        monkeypatch.delenv("RSSM_GDN_VERIFY_LEAN32", raising=False)
        if lean is not None:
            monkeypatch.setenv("RSSM_GDN_VERIFY_LEAN32", lean)
        res.append(_staggered_run("odd-group", 16, 1, T, 610 + T, 6, 40 // T + 6))
    _assert_same_run(res[0], res[1], "the default on a head group of 3")
    if T == 4:
        skip_under_sanitizer()
        got = _verify_instance_args(monkeypatch, "RSSM_GDN_VERIFY_LEAN32", (None, "1", "0"), 5, shape="odd-group")
        assert all(v == ["0"] for v in got.values()), got


@pytest.mark.gpu
@pytest.mark.sanitize
def test_sanitize_replay_verify_lean32(monkeypatch):
    """The sanitizers' case of LEAN32: B = 3 with a padding row, L = 4 (flushes, wrap-around) at T = 3, L = 8 at
    T = 6 (the eight-token instance)."""
    _sanitize_verify_switch(monkeypatch, "RSSM_GDN_VERIFY_LEAN32", ((3, 4), (6, 8)), 44, 10, lambda T, gen: [T, 1, 2])


def _verify_switch_changes_no_value(monkeypatch, var, shape, L, T, seed, steps):
    """A verify-readout A/B switch on top of the defaults (the other verify switches unset): `var`=0 and =1 give
    bit-identical outputs, checkpoints and ring u over a _staggered_run, each run also against the float64 reference."""
    for k in ("RSSM_GDN_VERIFY_MMA", "RSSM_GDN_VERIFY_UPF", "RSSM_GDN_VERIFY_LEAN32", "RSSM_GDN_VERIFY_MNS"):
        monkeypatch.delenv(k, raising=False)
    res = []
    for value in ("0", "1"):
        monkeypatch.setenv(var, value)
        res.append(_staggered_run(shape, L, 1, T, seed, 6, steps))
    _assert_same_run(res[0], res[1], var)


def _sanitize_verify_switch(monkeypatch, var, cases, seed, steps, accepted):
    """A verify-readout switch's sanitizer case: `var`=1, q35-4b, B = 3 with a padding row, (T, L) per case, `steps`
    speculative steps with accepted(T, gen) counts, buffers against the float64 reference, at least one flush."""
    monkeypatch.setenv(var, "1")
    for T, L in cases:
        seq = _Seq("q35-4b", 3, L, 1, T, seed=seed + T, variant=6)
        for t in range(steps):
            seq.step(_active(3, t, [0, 1, 2], seq.gen, 0.0), accepted(T, seq.gen))
        seq.compare_buffers()
        assert seq.flushes > 0


# MNS (thirty-seventh session; the default since the thirty-ninth, RSSM_GDN_VERIFY_MNS=0 turns it off): on top of the T > 4
# LEAN32 instance, a non-flush item's solve matrices M and N staged in shared memory by the item before. Same values:
# bit-identical to LEAN32 alone (staggered joins, padding rows, random acceptance, flushes between non-flush items)
# and against the float64 reference; T = 5 (rows s >= T of the staged block unused) and T = 8, windows 16 and 24.
MNS_CASES = [("q35-4b", 16, 8), ("q35-122b", 16, 6), ("q35-4b", 24, 5)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,L,T", MNS_CASES, ids=[f"{s}-L{l}-T{t}" for s, l, t in MNS_CASES])
def test_verify_mns_changes_no_value(shape, L, T, monkeypatch):
    _verify_switch_changes_no_value(monkeypatch, "RSSM_GDN_VERIFY_MNS", shape, L, T, 630 + L + T, 2 * L // T + 8)


@pytest.mark.gpu
def test_verify_mns_instance_runs(monkeypatch):
    """The MNS instance (template argument 6) runs by default (unset) and with RSSM_GDN_VERIFY_MNS=1 at T = 8, never
    at T = 4 (the T <= 4 instances have none), and nowhere with RSSM_GDN_VERIFY_MNS=0 (torch profiler)."""
    _assert_t8_default_instance(monkeypatch, "RSSM_GDN_VERIFY_MNS", 6)


def _assert_t8_default_instance(monkeypatch, var, arg):
    """Template argument `arg` of the verify instances launched is 1 at T = 8 by default (unset) and with `var`=1, and
    0 at T = 4 under every setting and at T = 8 with `var`=0."""
    skip_under_sanitizer()
    got = _verify_instance_args(monkeypatch, var, (None, "1", "0"), arg)
    assert got == {(None, 4): ["0"], (None, 8): ["1"], ("1", 4): ["0"], ("1", 8): ["1"], ("0", 4): ["0"],
                   ("0", 8): ["0"]}, got


@pytest.mark.gpu
@pytest.mark.sanitize
def test_sanitize_replay_verify_mns(monkeypatch):
    """The sanitizers' MNS case (racecheck: the staged block is rewritten for the next item after the solve's reads):
    B = 3 with a padding row, L = 8 at T = 6 and L = 16 at T = 8, random acceptance (flush and non-flush items
    alternate within a warp)."""
    _sanitize_verify_switch(monkeypatch, "RSSM_GDN_VERIFY_MNS", ((6, 8), (8, 16)), 48, 12,
                            lambda T, gen: _spec_accept("random", 3, T, gen))


# KEYB (forty-fourth session; the default, RSSM_GDN_VERIFY_KEYB=0 turns it off): on top of the MNS instance, a flush
# item stages its key chunk in a third buffer and issues the next item's rows before its fold. Same arithmetic: bit-identical to the
# default (MNS) and against the float64 reference; T = 8 / 6 at window 16 (one fold chunk) and T = 5 at window 24 (two
# chunks), with the grid capped at 2 CTAs (RSSM_READ_MMA_CTAS) so that every warp walks many items, flush and
# non-flush in turn.
KEYB_CASES = [("q35-4b", 16, 8), ("q35-122b", 16, 6), ("q35-4b", 24, 5)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,L,T", KEYB_CASES, ids=[f"{s}-L{l}-T{t}" for s, l, t in KEYB_CASES])
def test_verify_keyb_changes_no_value(shape, L, T, monkeypatch):
    _capped_grid_switch_changes_no_value(monkeypatch, "RSSM_GDN_VERIFY_KEYB", shape, L, T, 660)


def _capped_grid_switch_changes_no_value(monkeypatch, var, shape, L, T, seed):
    """_verify_switch_changes_no_value with the verify readout's grid capped at 2 CTAs (RSSM_READ_MMA_CTAS), so that
    every warp walks many items, flush and non-flush in turn; 2 L / T + 8 steps."""
    monkeypatch.setenv("RSSM_READ_MMA_CTAS", "2")
    _verify_switch_changes_no_value(monkeypatch, var, shape, L, T, seed + L + T, 2 * L // T + 8)


@pytest.mark.gpu
def test_verify_keyb_instance_runs(monkeypatch):
    """The KEYB instance (template argument 7) runs by default (unset) and with RSSM_GDN_VERIFY_KEYB=1 at T = 8 only,
    never with "0" (torch profiler)."""
    _assert_t8_default_instance(monkeypatch, "RSSM_GDN_VERIFY_KEYB", 7)


@pytest.mark.gpu
@pytest.mark.sanitize
def test_sanitize_replay_verify_keyb(monkeypatch):
    """The sanitizers' KEYB case (racecheck: the key buffer is shared with the next item's staged solve matrices, and
    the next item's rows land while a flush item folds): two CTAs (16 warps walk ~100 items each per step), B = 3 with
    a padding row, L = 16 at T = 8 and L = 24 at T = 5 (two fold chunks), all drafts accepted (a flush every other
    step at T = 8, from the fifth step at T = 5). Short: racecheck did not finish a 38-step form in 120 s."""
    monkeypatch.setenv("RSSM_READ_MMA_CTAS", "2")
    _sanitize_verify_switch(monkeypatch, "RSSM_GDN_VERIFY_KEYB", ((8, 16),), 52, 5, lambda T, gen: [T] * 3)
    _sanitize_verify_switch(monkeypatch, "RSSM_GDN_VERIFY_KEYB", ((5, 24),), 53, 6, lambda T, gen: [T] * 3)


# HRPF (forty-fifth session; the default, RSSM_GDN_VERIFY_HRPF=0 turns it off): the T <= 4 LEAN32 instance and the
# KEYB instance prefetch the next item's head-record lines into L1 after their products. A hint only: "0" and "1"
# bit-identical and against the float64 reference; T = 4 / 3 (the four-token instance) and 8 / 5 (KEYB, windows 16
# and 24), the grid capped at 2 CTAs so that every warp walks many items (the walk's last item prefetches nothing).
HRPF_CASES = [("q35-4b", 16, 4), ("q35-122b", 16, 3), ("q35-4b", 16, 8), ("q35-122b", 24, 5)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,L,T", HRPF_CASES, ids=[f"{s}-L{l}-T{t}" for s, l, t in HRPF_CASES])
def test_verify_hrpf_changes_no_value(shape, L, T, monkeypatch):
    _capped_grid_switch_changes_no_value(monkeypatch, "RSSM_GDN_VERIFY_HRPF", shape, L, T, 690)


@pytest.mark.gpu
def test_verify_hrpf_instance_runs(monkeypatch):
    """The HRPF instances (template argument 8) run at T = 4 and T = 8 by default (unset) and with
    RSSM_GDN_VERIFY_HRPF=1, never with "0" (torch profiler)."""
    skip_under_sanitizer()
    got = _verify_instance_args(monkeypatch, "RSSM_GDN_VERIFY_HRPF", (None, "1", "0"), 8)
    assert got == {(None, 4): ["1"], (None, 8): ["1"], ("1", 4): ["1"], ("1", 8): ["1"], ("0", 4): ["0"],
                   ("0", 8): ["0"]}, got


@pytest.mark.gpu
@pytest.mark.sanitize
def test_sanitize_replay_verify_hrpf(monkeypatch):
    """The sanitizers' HRPF case (memcheck: every prefetched line lies inside the workspace, including the walk's
    items next to the last record): two CTAs, B = 3 with a padding row, L = 8 at T = 4 and L = 16 at T = 8, random
    acceptance (flush and non-flush items alternate within a warp)."""
    monkeypatch.setenv("RSSM_READ_MMA_CTAS", "2")
    _sanitize_verify_switch(monkeypatch, "RSSM_GDN_VERIFY_HRPF", ((4, 8), (8, 16)), 56, 8,
                            lambda T, gen: _spec_accept("random", 3, T, gen))


def _spec_accept(accept, B, T, gen):
    if accept == "all":
        return [T] * B
    if accept == "one":
        return [1] * B
    return torch.randint(1, T + 1, (B,), generator=gen).tolist()


def _run_speculative(seq, B, T, accept, steps=40):
    """Speculative steps with staggered joins and 10% padding, buffers compared every 13 steps and at the end."""
    join = [(r * 3) % 5 for r in range(B)]
    for t in range(steps):
        seq.step(_active(B, t, join, seq.gen, 0.1), _spec_accept(accept, B, T, seq.gen))
        if t % 13 == 12:
            seq.compare_buffers()
    seq.compare_buffers()
    assert seq.flushes > 0


SPEC_CASES = [  # shape, B, L, T, acceptance
    ("q35-4b", 3, 4, 1, "random"), ("q35-4b", 3, 8, 2, "random"), ("q35-4b", 64, 16, 4, "random"),
    ("q35-4b", 3, 16, 3, "all"), ("q35-4b", 3, 32, 8, "one"), ("q35-4b", 1, 8, 8, "all"),
    ("q35-122b", 3, 16, 4, "all"), ("q35-122b", 3, 16, 5, "random"), ("q35-122b", 64, 32, 8, "random"),
    ("q35-122b", 256, 16, 4, "random"), ("q35-122b", 3, 8, 6, "one"), ("q35-4b", 3, 16, 7, "random"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,T,accept", SPEC_CASES,
                         ids=[f"{s}-B{b}-L{l}-T{t}-{a}" for s, b, l, t, a in SPEC_CASES])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_replay_speculative(shape, B, L, T, accept, variant):
    seq = _Seq(shape, B, L, 1, T, seed=B * 1000 + L * 10 + T, variant=variant)
    if _split_refuses(variant, 1, L, T):  # more than 32 records per step: refused, checkpoint untouched
        before = seq.ckpt.clone()
        with pytest.raises(Exception, match="variant 6 .*at most 32 records per step"):
            seq.step(torch.ones(B, dtype=torch.bool), [T] * B)
        torch.cuda.synchronize()
        assert torch.equal(seq.ckpt, before)
        return
    _run_speculative(seq, B, T, accept)
    _report(f"replay-speculative v{variant} {shape} B={B} L={L} T={T} {accept}: max out rel err={seq.max_err['out']:.2e} "
            f"flushes={seq.flushes}")


# The speculative preps with the committed keys' norms from the records' Gram tile on tensor cores
# (RSSM_GDN_PREP_MNORM_SPEC=1; =2 also lays out the warp's shared memory in 32-bit arithmetic, L32; unset, the
# default since the twenty-sixth session, takes 2 at T <= 4 and 1 at T = 8; =0 the previous prep), on both verify
# readouts: L + T = 32 (two record tiles), wrap-around, every acceptance pattern.
MNORM_SPEC_CASES = [("q35-4b", 3, 8, 2, "random"), ("q35-4b", 64, 16, 4, "random"), ("q35-122b", 3, 16, 4, "all"),
                    ("q35-4b", 3, 24, 8, "one"), ("q35-122b", 64, 24, 8, "random"), ("q35-4b", 3, 16, 3, "random")]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,T,accept", MNORM_SPEC_CASES,
                         ids=[f"{s}-B{b}-L{l}-T{t}-{a}" for s, b, l, t, a in MNORM_SPEC_CASES])
@pytest.mark.parametrize("pipe", ["1", "0"], ids=["mma", "cudacore"])
@pytest.mark.parametrize("mode", ["1", "2", "0"], ids=["mnorm", "mnorm-l32", "plain"])
def test_replay_speculative_prep_mnorm(shape, B, L, T, accept, pipe, mode, monkeypatch):
    monkeypatch.setenv("RSSM_GDN_PREP_MNORM_SPEC", mode)
    _run_verify_case(monkeypatch, pipe, shape, B, L, T, accept, seed_offset=5, label=f"prep-mnorm-spec={mode} {pipe}")


@pytest.mark.gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("mode", ["1", "2"], ids=["mnorm", "mnorm-l32"])
def test_replay_speculative_prep_mnorm_sanitize(mode, monkeypatch):
    """The sanitizers' case of the speculative MNORM preps: T = 4 and T = 8 at B = 3 with wrap-around."""
    monkeypatch.setenv("RSSM_GDN_PREP_MNORM_SPEC", mode)
    for T, L in ((4, 16), (8, 24)):
        seq = _Seq("q35-4b", 3, L, 1, T, seed=31 + T, variant=6)
        _run_speculative(seq, 3, T, "random", steps=2 * L // T + 3)


@pytest.mark.gpu
def test_prep_mnorm_spec_instance_runs(monkeypatch):
    """RSSM_GDN_PREP_MNORM_SPEC=1 runs the speculative prep's MNORM instance, =2 MNORM with the 32-bit layout (L32),
    =0 the plain one; unset (the default) MNORM + L32 at T = 4 and MNORM alone at T = 8 (torch profiler)."""
    skip_under_sanitizer()
    got = {}
    for env in ("0", "1", "2", None):
        for T in (4, 8):
            if env is None:
                monkeypatch.delenv("RSSM_GDN_PREP_MNORM_SPEC", raising=False)
            else:
                monkeypatch.setenv("RSSM_GDN_PREP_MNORM_SPEC", env)
            seq = _Seq("q35-4b", 8, 16, 1, T, seed=9, variant=6)
            names = cuda_kernel_names(lambda: seq.step(torch.ones(8, dtype=torch.bool), [T] * 8))[1]
            pr = [a for a in instances(names, "gdnSplitPrepKernel") if a[:2] == ["128", str(T)]]
            assert pr, f"no T = {T} prep ran: {sorted(names)}"
            got[(env, T)] = {(a[3], a[5]) for a in pr}  # template arguments 3, 5: MNORM, L32
    want = {(e, T): v for T in (4, 8) for e, v in (("0", {("0", "0")}), ("1", {("1", "0")}), ("2", {("1", "1")}))}
    want[(None, 4)], want[(None, 8)] = {("1", "1")}, {("1", "0")}
    assert got == want, got


# EXACT (fifty-fifth session): the default speculative prep (MNORM + L32 at T <= 4, MNORM at T > 4) with the token
# count at compile time. RSSM_GDN_PREP_EXACT=1 (mode "1"; the fifty-sixth session's default) takes it for steps of
# exactly 2, 4 or 8 tokens; unset / =2 (mode "2"; the default since the fifty-seventh session, measured on an H100)
# also at T = 3 (under the four-token readout) and T = 5-7 (under the eight-token one), the prep's MAXT being the
# step's T. The same arithmetic on the same values: bit-identical outputs, checkpoints and ring u to the run-time-T
# prep (RSSM_GDN_PREP_EXACT=0), both verify readouts, both shapes, L + T up to 32 (two record tiles), wrap-around and
# flushes; each run also checked against the float64 reference by _Seq. Under mode "1" T = 3 keeps the run-time
# instance (test_prep_exact_instance_runs).
EXACT_CASES = [("q35-4b", 16, 4, "1", "1"), ("q35-122b", 16, 4, "0", "1"), ("q35-4b", 28, 4, "1", "1"),
               ("q35-122b", 8, 2, "1", "1"), ("q35-4b", 30, 2, "0", "1"), ("q35-4b", 16, 3, "1", "1"),
               ("q35-4b", 24, 8, "1", "1"), ("q35-122b", 16, 8, "0", "1"),
               ("q35-4b", 16, 3, "1", "2"), ("q35-122b", 13, 3, "0", "2"), ("q35-4b", 24, 5, "1", "2"),
               ("q35-122b", 16, 6, "1", "2"), ("q35-4b", 25, 7, "0", "2"), ("q35-122b", 12, 7, "1", "2")]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,L,T,pipe,mode", EXACT_CASES,
                         ids=[f"{s}-L{l}-T{t}-{'mma' if p == '1' else 'cudacore'}{'-odd' if m == '2' else ''}"
                              for s, l, t, p, m in EXACT_CASES])
def test_prep_exact_changes_no_value(shape, L, T, pipe, mode, monkeypatch):
    res = []
    for exact in ("0", mode):
        monkeypatch.setenv("RSSM_GDN_PREP_EXACT", exact)
        monkeypatch.delenv("RSSM_GDN_PREP_MNORM_SPEC", raising=False)
        _set_verify_pipe(monkeypatch, pipe)
        res.append(_staggered_run(shape, L, 1, T, (640 if mode == "1" else 660) + L + T, 6, 2 * L // T + 6))
    _assert_same_run(res[0], res[1], f"RSSM_GDN_PREP_EXACT={mode}")


@pytest.mark.gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("exact", ["1", "0", "2"], ids=["exact", "runtime-T", "exact-odd-T"])
def test_prep_exact_sanitize(exact, monkeypatch):
    """The sanitizers' case of the EXACT preps (the default) at T = 2, 4 and 8 and at T = 3, 5 and 7 (the odd-T
    instances: =2, the default since the fifty-seventh session), and of the run-time-T instances they replace
    (RSSM_GDN_PREP_EXACT=0): B = 3 with wrap-around and random acceptance."""
    monkeypatch.setenv("RSSM_GDN_PREP_EXACT", exact)
    for T, L in (((3, 13), (5, 16), (7, 25)) if exact == "2" else ((2, 8), (4, 16), (8, 24))):
        seq = _Seq("q35-4b", 3, L, 1, T, seed=61 + T, variant=6)
        _run_speculative(seq, 3, T, "random", steps=2 * L // T + 3)


@pytest.mark.gpu
def test_prep_exact_instance_runs(monkeypatch):
    """Which speculative prep runs per RSSM_GDN_PREP_EXACT and T (torch profiler; template arguments 1 = MAXT and
    6 = EXACT): unset (the default since the fifty-seventh session) and =2 the EXACT prep with MAXT = T at every T;
    =1 (the fifty-sixth session's default) the EXACT prep at T = 2, 4 and 8 and the readout's run-time instance at
    T = 3 (MAXT 4) and 5-7 (MAXT 8); =0 the run-time instances everywhere."""
    skip_under_sanitizer()
    tokens = (2, 3, 4, 5, 6, 7, 8)
    got = {}
    for env in ("1", None, "0", "2"):
        for T in tokens:
            if env is None:
                monkeypatch.delenv("RSSM_GDN_PREP_EXACT", raising=False)
            else:
                monkeypatch.setenv("RSSM_GDN_PREP_EXACT", env)
            monkeypatch.delenv("RSSM_GDN_PREP_MNORM_SPEC", raising=False)
            seq = _Seq("q35-4b", 8, 16, 1, T, seed=9, variant=6)
            names = cuda_kernel_names(lambda: seq.step(torch.ones(8, dtype=torch.bool), [T] * 8))[1]
            pr = [a for a in instances(names, "gdnSplitPrepKernel") if a[0] == "128" and a[1] != "1"]
            assert pr, f"no T = {T} prep ran: {sorted(names)}"
            got[(env, T)] = {(a[1], a[6] if len(a) > 6 else "0") for a in pr}
    bucket = {2: "2", 3: "4", 4: "4", 5: "8", 6: "8", 7: "8", 8: "8"}
    want = {}
    for T in tokens:
        want[("1", T)] = {(str(T), "1")} if T in (2, 4, 8) else {(bucket[T], "0")}
        want[("0", T)] = {(bucket[T], "0")}
        for env in ("2", None):
            want[(env, T)] = {(str(T), "1")}
    assert got == want, got


# Variant 6's speculative verify on tensor cores (gdn_split_mma_kernel.cuh) against its CUDA-core readout: both
# forced per test (RSSM_GDN_VERIFY_MMA, read per launch; unset, speculative steps of T >= 2 with bf16 activations,
# fp16 u and K = 128 take the tensor-core readout). L = 24 folds two chunks of records; T = 1 runs only when forced.
MMA_SPEC_CASES = [c for c in SPEC_CASES if c[2] + c[3] <= SPLIT_MAX_RECORDS] + [
    ("q35-4b", 256, 16, 8, "random"), ("q35-122b", 64, 24, 8, "all"), ("q35-4b", 3, 24, 4, "one"),
    ("q35-4b", 3, 16, 1, "random"), ("q35-122b", 3, 4, 2, "all"),
]
# mma: the default (the next item's u_j prefetched at T <= 4); mma-upf / mma-noupf: the prefetch forced on / off
# (RSSM_GDN_VERIFY_UPF=1 / 0) so that every kernel instance runs.
VERIFY_PIPES = ["1", "1u", "1n", "0"]
VERIFY_PIPE_IDS = ["mma", "mma-upf", "mma-noupf", "cudacore"]


def _run_verify_case(monkeypatch, pipe, shape, B, L, T, accept, seed_offset, label):
    """Variant-6 speculative steps on verify readout `pipe` (_set_verify_pipe) against the float64 reference
    (_run_speculative), seeded B 1000 + L 10 + T + seed_offset, reported under `label`."""
    _set_verify_pipe(monkeypatch, pipe)
    seq = _Seq(shape, B, L, 1, T, seed=B * 1000 + L * 10 + T + seed_offset, variant=6)
    _run_speculative(seq, B, T, accept)
    _report(f"{label} {shape} B={B} L={L} T={T} {accept}: max out rel err={seq.max_err['out']:.2e} "
            f"flushes={seq.flushes}")


def _set_verify_pipe(monkeypatch, pipe):
    monkeypatch.setenv("RSSM_GDN_VERIFY_MMA", pipe[0])
    if pipe[1:] in ("u", "n"):
        monkeypatch.setenv("RSSM_GDN_VERIFY_UPF", "1" if pipe.endswith("u") else "0")
    else:
        monkeypatch.delenv("RSSM_GDN_VERIFY_UPF", raising=False)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,T,accept", MMA_SPEC_CASES,
                         ids=[f"{s}-B{b}-L{l}-T{t}-{a}" for s, b, l, t, a in MMA_SPEC_CASES])
@pytest.mark.parametrize("pipe", VERIFY_PIPES, ids=VERIFY_PIPE_IDS)
def test_replay_split_verify_mma(shape, B, L, T, accept, pipe, monkeypatch):
    _run_verify_case(monkeypatch, pipe, shape, B, L, T, accept, seed_offset=7,
                     label=f"verify-{VERIFY_PIPE_IDS[VERIFY_PIPES.index(pipe)]}")


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 4], ids=["packed", "offset4"])
@pytest.mark.parametrize("pipe", VERIFY_PIPES, ids=VERIFY_PIPE_IDS)
def test_replay_split_verify_mma_strided(offset, pipe, monkeypatch):
    """q / k / v as views into one packed projection (what the models pass), 16-byte aligned or only 8-byte aligned
    (the op's rule for q / k)."""
    _set_verify_pipe(monkeypatch, pipe)
    B, L, T = 5, 16, 4
    seq = _Seq("q35-4b", B, L, 1, T, seed=77 + offset, variant=6)
    H, HV, K, V = seq.H, seq.HV, seq.K, seq.V

    def views(x):
        width = offset + 2 * H * K + HV * V
        packed = torch.zeros(B, T, width + 8, dtype=x["q"].dtype, device=DEV)
        q = packed[..., offset:offset + H * K].view(B, T, H, K)
        k = packed[..., offset + H * K:offset + 2 * H * K].view(B, T, H, K)
        v = packed[..., offset + 2 * H * K:offset + 2 * H * K + HV * V].view(B, T, HV, V)
        q.copy_(x["q"])
        k.copy_(x["k"])
        v.copy_(x["v"])
        return dict(x, q=q, k=k, v=v)

    seq.input_view = views
    for t in range(30):
        seq.step(torch.ones(B, dtype=torch.bool), _spec_accept("random", B, T, seq.gen))
    seq.compare_buffers()
    assert seq.flushes > 0


@pytest.mark.gpu
@pytest.mark.parametrize("L", [16, 24], ids=["L16", "L24-fallback"])
@pytest.mark.parametrize("state_dtype", [torch.float16, torch.bfloat16], ids=["fp16ckpt", "bf16ckpt"])
def test_replay_split_verify_mma_ckpt16(state_dtype, L, monkeypatch):
    """16-bit checkpoints: the tensor-core readout (L = 16; L = 24 falls back: two chunks to fold) and the CUDA-core
    readout run the same sequence; both are held to the reference within the checkpoint format's error and to each
    other."""
    res = {}
    for pipe in VERIFY_PIPES:
        _set_verify_pipe(monkeypatch, pipe)
        seq = _Seq("q35-4b", 6, L, 1, 4, seed=91, state_dtype=state_dtype, variant=6)
        seq.tol_out = 2e-2
        for t in range(30):
            seq.step(torch.ones(6, dtype=torch.bool), _spec_accept("random", 6, 4, seq.gen))
        torch.cuda.synchronize()
        assert seq.flushes > 0
        res[pipe] = seq.ckpt.float().clone()
    e = rel(res["1"], res["0"])
    _report(f"verify ckpt16 {str(state_dtype).replace('torch.', '')} L={L}: mma vs cuda-core checkpoint rel {e:.2e}")
    assert e < 1e-2
    assert torch.equal(res["1u"], res["1n"]), "the u_j prefetch changed the tensor-core readout's results"


@pytest.mark.gpu
@pytest.mark.parametrize("K,V", [(64, 64), (256, 256), (128, 96)])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3)])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_replay_head_dims(K, V, mode, T, variant):
    seq = _Seq("q35-4b", 3, 8, mode, T, K=K, V=V, seed=K + V + T, variant=variant)
    if variant >= 3 and K == 64:  # refused by the launcher, checkpoint untouched
        before = seq.ckpt.clone()
        with pytest.raises(Exception, match=r"(variants 3-5|variant 6) .*head_k 128 or 256; got 64"):
            seq.step(torch.ones(3, dtype=torch.bool), None if mode == 0 else [T, 1, 2 if T > 1 else 1])
        torch.cuda.synchronize()
        assert torch.equal(seq.ckpt, before)
        return
    for t in range(30):
        seq.step(torch.ones(3, dtype=torch.bool), None if mode == 0 else [T, 1, 2 if T > 1 else 1])
    seq.compare_buffers()


# WIR (fiftieth session): variant 5's standard step on warp items (cpp_plugins/kernels/gdn/gdn_warp_replay.cu), the
# default where it can run it (K = 128, head_v % 8 == 0, window <= 32, ring capacity <= 32, no dual-precision fields) and
# batch x value heads <= 128; RSSM_GDN_WIR=1 runs it at any batch, =0 never. Its arithmetic order differs from every
# other variant's, so it is checked against the float64 reference (_Seq: outputs every step, checkpoints, ring g / u / k),
# not bit for bit: one row, staggered rows with 10% padding, in-phase flushes, ring wrap-around (capacity L + 1), both
# model shapes, three value heads per key head, window 1 (every step flushes), and the other dtypes. (The B = 1 cases of
# test_replay_standard run it too, by default.) Windows 17-32 run its second instance (sixty-eighth session: one lane
# per record's gate, two passes of record dots), which needs a ring of at most 32 rows: C = L (the standard-mode
# capacity) or, for the wrap-around, L + 1 <= 32; by default since the sixty-ninth session (kWarpReplayLongByDefault;
# RSSM_GDN_WIR_LONG=0 keeps those windows on the stream kernel). Last element: the ring capacity (None: _Seq's default
# L + 1).
WIR_CASES = [pytest.param("q35-4b", 1, 16, False, None, id="q35-4b-B1-L16-phase"),
             pytest.param("q35-4b", 3, 8, True, None, id="q35-4b-B3-L8-stag", marks=pytest.mark.sanitize),
             pytest.param("q35-122b", 1, 4, False, None, id="q35-122b-B1-L4-phase"),
             pytest.param("q35-122b", 5, 16, True, None, id="q35-122b-B5-L16-stag", marks=pytest.mark.sanitize),
             pytest.param("q35-4b", 64, 16, True, None, id="q35-4b-B64-L16-stag"),
             pytest.param("odd-group", 3, 16, True, None, id="odd-group-B3-L16-stag"),
             pytest.param("q35-122b", 1, 1, False, None, id="q35-122b-B1-L1"),
             pytest.param("q35-4b", 1, 32, False, 32, id="q35-4b-B1-L32-C32-phase"),
             pytest.param("q35-122b", 3, 32, True, 32, id="q35-122b-B3-L32-C32-stag", marks=pytest.mark.sanitize),
             pytest.param("q35-4b", 5, 17, True, 18, id="q35-4b-B5-L17-C18-stag"),
             pytest.param("odd-group", 3, 31, True, 32, id="odd-group-B3-L31-C32-stag"),
             pytest.param("q35-4b", 64, 24, True, 24, id="q35-4b-B64-L24-C24-stag")]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,stag,C", WIR_CASES)
def test_replay_standard_wir(shape, B, L, stag, C, monkeypatch):
    monkeypatch.setenv("RSSM_GDN_WIR", "1")
    monkeypatch.setenv("RSSM_GDN_WIR_LONG", "1")
    kw = {} if C is None else {"ring_capacity": C}
    seq = _Seq(shape, B, L, 0, 1, seed=B * 100 + L + 50, variant=5, **kw)
    assert _wir_runs_for(seq), "the case must be one WIR can run (ring capacity <= 32)"
    join = [(r * 5) % L if stag else 0 for r in range(B)]
    steps = max(3 * L + max(join), 12)
    _run_standard(seq, B, join, 0.1 if stag else 0.0, steps, 7)
    _report(f"replay-standard WIR {shape} B={B} L={L} {'stag' if stag else 'phase'}: steps={steps} "
            f"max out rel err={seq.max_err['out']:.2e} flushes={seq.flushes}")


WIR_DTYPE_CASES = {"fp16-ckpt": dict(state_dtype=torch.float16), "bf16-ckpt": dict(state_dtype=torch.bfloat16),
                   "fp16-act": dict(act=torch.float16), "bf16-u": dict(u_dtype=torch.bfloat16, u_round="match"),
                   "V40": dict(V=40)}  # V = 40: a CTA of 32 rows and one of 8 (three warps without rows)


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(WIR_DTYPE_CASES))
def test_replay_standard_wir_dtypes(case, monkeypatch):
    """The WIR instances of the other checkpoint / activation / u formats and a head_v that leaves warps without rows,
    against the float64 reference (16-bit checkpoints with that format's tolerance)."""
    monkeypatch.setenv("RSSM_GDN_WIR", "1")
    kw = WIR_DTYPE_CASES[case]
    seq = _Seq("q35-4b", 3, 8, 0, 1, seed=77, variant=5, **kw)
    join = [0, 3, 5]
    if "state_dtype" in kw:  # the checkpoint format's own rounding: outputs to its tolerance, every step
        seq.tol_out = 2e-2
        for t in range(30):
            seq.step(_active(3, t, join, seq.gen, 0.1))
    else:
        _run_standard(seq, 3, join, 0.1, 30, 10)
    assert seq.flushes > 0


def _wir_runs_for(seq) -> bool:
    """warpReplayRuns' size rules for a _Seq's standard step (K = 128, head_v % 8 == 0, window and ring <= 32)."""
    return seq.K == 128 and seq.V % 8 == 0 and seq.L <= 32 and seq.C <= 32


def _wir_kernel_names(monkeypatch, env, B, L, mode=0, T=1, variant=5, ring_capacity=None, long=None):
    skip_under_sanitizer()
    monkeypatch.delenv("RSSM_GDN_WIR", raising=False)
    monkeypatch.delenv("RSSM_GDN_WIR_LONG", raising=False)
    if env is not None:
        monkeypatch.setenv("RSSM_GDN_WIR", env)
    if long is not None:
        monkeypatch.setenv("RSSM_GDN_WIR_LONG", long)
    kw = {} if ring_capacity is None else {"ring_capacity": ring_capacity}
    seq = _Seq("q35-4b", B, L, mode, T, seed=3, variant=variant, **kw)
    acc = None if mode == 0 else [T] + [1] * (B - 1)
    seq.step(torch.ones(B, dtype=torch.bool), acc)  # warm-up (loads the ops)
    torch.cuda.synchronize()
    names = cuda_kernel_names(lambda: seq.step(torch.ones(B, dtype=torch.bool), acc))[1]
    return {"wir": any("gdnReplayWarpStdKernel" in n for n in names),
            "stream": any("gdnReplayStreamKernel" in n for n in names)}


@pytest.mark.gpu
def test_wir_instance_runs(monkeypatch):
    """Which kernel variant 5 launches (torch profiler; q35-4b, 32 value heads): WIR by default up to batch x value
    heads 128 (B = 1, 4), the stream kernel above (B = 5); RSSM_GDN_WIR=1 WIR at B = 5 too, =0 the stream kernel at
    B = 1; at window 32 WIR by default (its second instance) on a ring of 32 rows (the standard-mode capacity), the
    stream kernel with RSSM_GDN_WIR_LONG=0 and on a ring of 33; the stream kernel for a window above 32 and for
    speculative steps whatever the switches. The automatic design
    (variant=None, the ops' default) launches WIR where variant 5 would, else stream kernel 4."""
    wir = {"wir": True, "stream": False}
    stream = {"wir": False, "stream": True}
    assert _wir_kernel_names(monkeypatch, None, 1, 16) == wir
    assert _wir_kernel_names(monkeypatch, None, 4, 16) == wir
    assert _wir_kernel_names(monkeypatch, None, 5, 16) == stream
    assert _wir_kernel_names(monkeypatch, "1", 5, 16) == wir
    assert _wir_kernel_names(monkeypatch, None, 4, 16, variant=None) == wir
    assert _wir_kernel_names(monkeypatch, None, 5, 16, variant=None) == stream
    assert _wir_kernel_names(monkeypatch, "0", 1, 16, variant=None) == stream
    assert _wir_kernel_names(monkeypatch, "0", 1, 16) == stream
    assert _wir_kernel_names(monkeypatch, None, 1, 32, ring_capacity=32) == wir  # the long instance, by default
    assert _wir_kernel_names(monkeypatch, None, 1, 32, ring_capacity=32, variant=None) == wir
    assert _wir_kernel_names(monkeypatch, None, 1, 32, ring_capacity=32, long="0") == stream
    assert _wir_kernel_names(monkeypatch, None, 1, 32, ring_capacity=32, variant=None, long="0") == stream
    assert _wir_kernel_names(monkeypatch, "1", 1, 32, long="1") == stream  # ring of 33 rows > 32
    assert _wir_kernel_names(monkeypatch, "1", 1, 33, ring_capacity=33, long="1") == stream  # window > 32
    assert _wir_kernel_names(monkeypatch, "1", 1, 16, mode=1, T=2) == stream  # speculative


@pytest.mark.gpu
@pytest.mark.parametrize("state_dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_replay_low_precision_ckpt_runs(state_dtype, variant):
    """fp16/bf16 checkpoints are accepted (accuracy bounded by the checkpoint format)."""
    seq = _Seq("q35-4b", 3, 8, 0, 1, seed=5, state_dtype=state_dtype, variant=variant)
    seq.tol_out = 2e-2
    for t in range(20):
        seq.step(torch.ones(3, dtype=torch.bool))


@pytest.mark.gpu
@pytest.mark.parametrize("T", [2, 4, 8])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_speculative_all_accepted_matches_standard(T, variant):
    """T drafts per step, all accepted == T standard steps == the conventional float64 recurrence."""
    G = _ops()
    H, HV, K, V = SHAPES["q35-4b"]
    B, L, steps = 3, 16, 12
    gen = torch.Generator().manual_seed(T)
    layer = random_gdn_layer(HV, gen)
    lc = _cuda(layer)
    init = (0.5 * torch.randn(B, HV, V, K, generator=gen))
    inp = _inputs(B, T * steps, H, HV, K, V, gen, torch.bfloat16)
    ref_o, _ = gdn_decode_naive(init.double(), *(inp[n] for n in ("q", "k", "v", "a", "b")),
                                layer["A_log"], layer["dt_bias"])
    sbi = torch.arange(B, dtype=torch.int32, device=DEV)
    outs = {}
    for mode in (0, 1):
        Tm = T if mode == 1 else 1
        C = L + Tm
        ckpt = init.clone().to(DEV)
        rg = torch.zeros(B, C, HV, device=DEV)
        ru = torch.zeros(B, C, HV, V, dtype=torch.float16, device=DEV)
        rk = torch.zeros(B, C, H, K, dtype=torch.bfloat16, device=DEV)
        org = torch.zeros(B, dtype=torch.int32, device=DEV)
        ln = torch.zeros(B, dtype=torch.int32, device=DEV)
        seq_o = []
        n_tok = T if mode == 1 else 1
        for s in range(T * steps // n_tok):
            sl = slice(s * n_tok, (s + 1) * n_tok)
            x = {n: t[:, sl].contiguous().to(DEV) for n, t in inp.items()}
            seq_o.append(G.gdn_replay(ckpt, sbi, org, ln, rg, ru, rk, **x, **lc, window=L, mode=mode,
                                      variant=variant))
            torch.ops.replayssm.replay_commit(sbi, None, org, ln, None, L, C, n_tok, mode)
        outs[mode] = torch.cat(seq_o, dim=1)
    e_std, e_spec = rel(outs[0], ref_o), rel(outs[1], ref_o)
    e_x = rel(outs[1], outs[0].double())
    _report(f"all-accepted v{variant} T={T}: standard vs f64 {e_std:.2e}, speculative vs f64 {e_spec:.2e}, "
            f"speculative vs standard {e_x:.2e}")
    tol = _tol_out(torch.bfloat16)
    assert e_std < tol and e_spec < tol and e_x < tol


@pytest.mark.gpu
@pytest.mark.parametrize("act", [torch.bfloat16, torch.float16], ids=["bf16act", "fp16act"])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_accuracy_u_fp16_vs_bf16(act, variant):
    """Accuracy over 96 steps (L=16: 6 flushes per row) against the exact float64 recurrence (no
    rounding of u in the reference): FP16-u (the contract) and BF16-u, FP32 checkpoint."""
    res = {}
    for u_dtype in (torch.float16, torch.bfloat16):
        seq = _Seq("q35-4b", 4, 16, 0, 1, act=act, u_dtype=u_dtype, seed=11, u_round=None, variant=variant)
        seq.tol_out = 1.0 if u_dtype == torch.bfloat16 else _tol_out(act)
        for t in range(96):
            seq.step(torch.ones(4, dtype=torch.bool))
        torch.cuda.synchronize()
        sl = seq.slots[seq.ref_rows].long()
        res[u_dtype] = (seq.max_err["out"], rel(seq.ckpt[sl], seq.ref.ckpt[sl]))
    f, b = res[torch.float16], res[torch.bfloat16]
    _report(f"accuracy v{variant} {str(act).replace('torch.', '')} act, 96 steps L=16 fp32 ckpt: "
            f"FP16-u max out rel err {f[0]:.2e}, ckpt rel err {f[1]:.2e} | "
            f"BF16-u max out rel err {b[0]:.2e}, ckpt rel err {b[1]:.2e}")
    assert f[0] < _tol_out(act) and f[1] < TOL["ckpt"]
    assert f[1] <= b[1]
    # BF16-u is read back through its own conversion (the flush folds are templated on the u format since the
    # sixteenth session): a wrong format would show as a large checkpoint error (recorded: 1.5e-3)
    assert b[1] < 4e-3, f"BF16-u checkpoint rel err {b[1]:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("pipe", VERIFY_PIPES, ids=VERIFY_PIPE_IDS)
def test_accuracy_speculative_verify(pipe, monkeypatch):
    """Accuracy of the speculative verify over 96 steps (L = 16, T = 4, random acceptance: a flush every few steps)
    against the exact float64 recurrence (no rounding of u in the reference), FP32 checkpoint, fp16 u, bf16
    activations: the tensor-core readout (TF32 state operand; its error reaches u and, through the flush, the
    checkpoint) and the CUDA-core readout."""
    _set_verify_pipe(monkeypatch, pipe)
    seq = _Seq("q35-4b", 4, 16, 1, 4, seed=13, u_round=None, variant=6)
    for t in range(96):
        seq.step(torch.ones(4, dtype=torch.bool), _spec_accept("random", 4, 4, seq.gen))
    torch.cuda.synchronize()
    sl = seq.slots[seq.ref_rows].long()
    e_ck = rel(seq.ckpt[sl], seq.ref.ckpt[sl])
    _report(f"accuracy verify-{VERIFY_PIPE_IDS[VERIFY_PIPES.index(pipe)]} q35-4b B=4 L=16 T=4 random, 96 steps, fp32 ckpt, "
            f"fp16 u, bf16 act: max out rel err {seq.max_err['out']:.2e}, ckpt rel err {e_ck:.2e}, "
            f"flushes {seq.flushes}")
    assert seq.flushes >= 8
    assert seq.max_err["out"] < _tol_out(torch.bfloat16) and e_ck < TOL["ckpt"]


@pytest.mark.gpu
@pytest.mark.parametrize("chain", ["0", "1"], ids=["plain", "pdl-chain"])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_replay_cuda_graph(variant, chain, monkeypatch):
    """One captured graph (speculative step + commit) replayed over whole flush cycles equals eager; also with the
    step's first kernel a programmatic dependent of the commit before it (RSSM_PDL_CHAIN=1: programmatic edges in
    the graph, and between consecutive replays)."""
    monkeypatch.setenv("RSSM_PDL_CHAIN", chain)
    G = _ops()
    H, HV, K, V = SHAPES["q35-4b"]
    B, L, T = 8, 8, 4
    C = L + T
    gen = torch.Generator().manual_seed(3)
    lc = _cuda(random_gdn_layer(HV, gen))
    init = (0.5 * torch.randn(B, HV, V, K, generator=gen)).to(DEV)
    sbi = torch.arange(B, dtype=torch.int32, device=DEV)
    sbi[5] = -1
    inputs = [_cuda(_inputs(B, T, H, HV, K, V, gen, torch.bfloat16)) for _ in range(10)]
    accs = [torch.randint(1, T + 1, (B,), generator=gen, dtype=torch.int32).to(DEV) for _ in range(10)]

    def make():
        return dict(ckpt=init.clone(), rg=torch.zeros(B, C, HV, device=DEV),
                    ru=torch.zeros(B, C, HV, V, dtype=torch.float16, device=DEV),
                    rk=torch.zeros(B, C, H, K, dtype=torch.bfloat16, device=DEV),
                    org=torch.zeros(B, dtype=torch.int32, device=DEV),
                    ln=torch.zeros(B, dtype=torch.int32, device=DEV))

    def run_step(st, x, acc, o):
        G.gdn_replay(st["ckpt"], sbi, st["org"], st["ln"], st["rg"], st["ru"], st["rk"], **x, **lc, window=L, mode=1,
                     out=o, variant=variant)
        torch.ops.replayssm.replay_commit(sbi, acc, st["org"], st["ln"], None, L, C, T, 1)

    eager = make()
    outs_e = []
    for i in range(10):
        o = torch.zeros(B, T, HV, V, dtype=torch.bfloat16, device=DEV)
        run_step(eager, inputs[i], accs[i], o)
        outs_e.append(o)
    gs = make()
    x_static = {n: t.clone() for n, t in inputs[0].items()}
    acc_static = accs[0].clone()
    o_static = torch.zeros(B, T, HV, V, dtype=torch.bfloat16, device=DEV)
    warm = make()  # warm-up on scratch buffers (capture needs the ops loaded)
    run_step(warm, x_static, acc_static, o_static)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_step(gs, x_static, acc_static, o_static)
    for i in range(10):
        for n in x_static:
            x_static[n].copy_(inputs[i][n])
        acc_static.copy_(accs[i])
        graph.replay()
        assert torch.equal(o_static, outs_e[i]), f"graph step {i} differs from eager"
    assert torch.equal(gs["ckpt"], eager["ckpt"]) and torch.equal(gs["org"], eager["org"])


# =================================================================================================
# small cases for compute-sanitizer (memcheck, racecheck): scripts/gpu_run.sh --sanitize
# =================================================================================================
@pytest.mark.gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("snapshot", [False, True], ids=["inplace", "snapshots"])
@pytest.mark.parametrize("variant", CONV_VARIANTS, ids=CONV_VARIANT_IDS)
def test_sanitize_conventional(variant, snapshot):
    """Conventional decode, tiny batch with a padding row; V = 96 leaves a partial tile."""
    G = _ops()
    H, HV, K, V, B, T = 2, 4, 128, 96, 3, (3 if snapshot else 1)
    gen = torch.Generator().manual_seed(21 + variant)
    S = B * (T + 1) + 2
    layer = _cuda(random_gdn_layer(HV, gen))
    inp = _inputs(B, T, H, HV, K, V, gen, torch.bfloat16)
    state = (0.5 * torch.randn(S, HV, V, K, generator=gen)).to(DEV)
    before = state.clone()
    o = torch.full((B, T, HV, V), float("nan"), dtype=torch.bfloat16, device=DEV)
    if snapshot:
        idx = torch.arange(B * (T + 1), dtype=torch.int32).reshape(B, T + 1)
        idx[1] = -1
        acc = torch.tensor([T, 1, 2], dtype=torch.int32)
        G.gdn_decode(state, idx.to(DEV), **_cuda(inp), **layer, num_accepted=acc.to(DEV), snapshot=True, out=o,
                     variant=variant)
        src = torch.stack([idx[r, acc[r] - 1] for r in (0, 2)]).long()
    else:
        slots = torch.tensor([4, -1, 0], dtype=torch.int32)
        G.gdn_decode(state, slots.to(DEV), **_cuda(inp), **layer, out=o, variant=variant)
        src = slots[[0, 2]].long()
    torch.cuda.synchronize()
    ref_o, _ = gdn_decode_naive(before[src].cpu(), *(inp[n][[0, 2]] for n in ("q", "k", "v", "a", "b")),
                                layer["A_log"].cpu(), layer["dt_bias"].cpu())
    assert rel(o[[0, 2]], ref_o) < _tol_out(torch.bfloat16)
    assert torch.isnan(o[1]).all()


@pytest.mark.gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3), (1, 6)], ids=["standard", "speculative-T3", "speculative-T6"])
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=REPLAY_VARIANT_IDS)
def test_sanitize_replay(variant, mode, T):
    """Replay step, tiny batch, L = 4 (8 at T = 6: drafts past the stream kernels' warp count): flushes,
    wrap-around and padding rows within 10 steps."""
    seq = _Seq("q35-4b", 3, 4 if T <= 4 else 8, mode, T, seed=31 + T, variant=variant)
    for t in range(10):
        seq.step(_active(3, t, [0, 1, 2], seq.gen, 0.0), None if mode == 0 else [T, 1, 2])
    seq.compare_buffers()
    assert seq.flushes > 0


@pytest.mark.gpu
@pytest.mark.sanitize
@pytest.mark.parametrize("T", [3, 6])
@pytest.mark.parametrize("pipe", ["1u", "1n"], ids=["mma-upf", "mma-noupf"])
def test_sanitize_replay_verify_mma(T, pipe, monkeypatch):
    """The tensor-core verify readout (forced): tiny batch with a padding row, L = 4 / 8 (flushes, wrap-around)."""
    _set_verify_pipe(monkeypatch, pipe)
    seq = _Seq("q35-4b", 3, 4 if T <= 4 else 8, 1, T, seed=41 + T, variant=6)
    for t in range(10):
        seq.step(_active(3, t, [0, 1, 2], seq.gen, 0.0), [T, 1, 2])
    seq.compare_buffers()
    assert seq.flushes > 0


# =================================================================================================
# host-side validation (no GPU needed)
# =================================================================================================
def _cpu_args(B=2, T=1, H=2, HV=4, K=128, V=16, act=torch.bfloat16):
    return dict(q=torch.zeros(B, T, H, K, dtype=act), k=torch.zeros(B, T, H, K, dtype=act),
                v=torch.zeros(B, T, HV, V, dtype=act), a=torch.zeros(B, T, HV, dtype=act),
                b=torch.zeros(B, T, HV, dtype=act), A_log=torch.zeros(HV), dt_bias=torch.zeros(HV))


def test_validation_messages():
    from replayssm_trtllm.ops.gdn import validate_decode_args, validate_replay_args, _check_common
    x = _cpu_args()
    o = torch.zeros(2, 1, 4, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA device"):
        _check_common("gdn_decode", x["q"], x["k"], x["v"], x["a"], x["b"], x["A_log"], x["dt_bias"], o, {})
    bad = dict(x)
    bad["k"] = torch.zeros(2, 1, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"'k' must be bfloat16 \[B=2, T=1, H=2, K=128\]; got bfloat16 \[2, 1, 2, 64\]"):
        _check_common("gdn_decode", bad["q"], bad["k"], bad["v"], bad["a"], bad["b"], bad["A_log"], bad["dt_bias"],
                      o, {})
    bad = _cpu_args(K=96)
    with pytest.raises(ValueError):
        _check_common("gdn_decode", bad["q"], bad["k"], bad["v"], bad["a"], bad["b"], bad["A_log"], bad["dt_bias"],
                      o, {})
    del validate_decode_args, validate_replay_args


def test_ctypes_struct_sizes():
    """The ctypes mirrors match gdn.h (variant sits where _pad0 was: no layout change)."""
    import ctypes
    from replayssm_trtllm.ops import gdn as G
    assert ctypes.sizeof(G.GdnDecodeParams) == 304 and G.GdnDecodeParams.o.offset == 296
    assert ctypes.sizeof(G.GdnReplayParams) == 440 and G.GdnReplayParams.o.offset == 392
    assert G.GdnReplayParams.skip_flush_rows.offset == 400 and G.GdnReplayParams.ring_v.offset == 416
    assert G.GdnReplayParams.workspace.offset == 424 and G.GdnReplayParams.workspace_bytes.offset == 432
    assert G.GdnDecodeParams.variant.offset == 52 and G.GdnReplayParams.variant.offset == 60


def test_variant_validation():
    from replayssm_trtllm.ops import gdn as G
    assert G._check_variant("gdn_replay", 2) == 2 and G._check_variant("gdn_replay", 6) == 6
    with pytest.raises(ValueError, match=r"variant must be one of \(0, 1, 2, 3, 4, 5, 6\); got 7"):
        G._check_variant("gdn_replay", 7)
    assert G._check_variant("gdn_decode", 6, G.DECODE_VARIANTS) == 6  # the warp-item conventional kernel
    with pytest.raises(ValueError, match=r"gdn_decode: variant must be one of \(0, 1, 2, 3, 4, 5, 6\); got 7"):
        G._check_variant("gdn_decode", 7, G.DECODE_VARIANTS)
    assert G.default_decode_variant(128) == 6 and G.default_decode_variant(256) == 6  # warp items
    assert G.default_decode_variant(64) == 0
    assert G.default_replay_variant(128) == 4 and G.default_replay_variant(256) == 4
    assert G.default_replay_variant(64) == 1
    assert G._check_variant("gdn_replay", -1, G.REPLAY_VARIANTS) == -1


def test_validation_heads_and_dtype():
    from replayssm_trtllm.ops import gdn as G
    x = _cpu_args(HV=6, H=4)
    o = torch.zeros(2, 1, 6, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError):
        G._check_common("gdn_replay", x["q"], x["k"], x["v"], x["a"], x["b"], x["A_log"], x["dt_bias"], o, {})
    x = _cpu_args(act=torch.float32)
    with pytest.raises(ValueError, match="'q' must be bfloat16/float16"):
        G._check_common("gdn_replay", x["q"], x["k"], x["v"], x["a"], x["b"], x["A_log"], x["dt_bias"],
                        torch.zeros(2, 1, 4, 16), {})


@pytest.mark.gpu
def test_validation_gpu_messages():
    G = _ops()
    H, HV, K, V = 16, 32, 128, 128
    x = _cuda(_inputs(2, 1, H, HV, K, V, torch.Generator().manual_seed(0), torch.bfloat16))
    lc = _cuda(random_gdn_layer(HV))
    st = torch.zeros(4, HV, V, K, device=DEV)
    with pytest.raises(ValueError, match="'state' must be float32/float16/bfloat16"):
        G.gdn_decode(torch.zeros(4, HV, V, 64, device=DEV), torch.zeros(2, dtype=torch.int32, device=DEV),
                     **x, **lc)
    with pytest.raises(ValueError, match="ring capacity C"):
        G.gdn_replay(st, torch.zeros(2, dtype=torch.int32, device=DEV),
                     torch.zeros(4, dtype=torch.int32, device=DEV), torch.zeros(4, dtype=torch.int32, device=DEV),
                     torch.zeros(4, 8, HV, device=DEV), torch.zeros(4, 8, HV, V, dtype=torch.float16, device=DEV),
                     torch.zeros(4, 8, H, K, dtype=torch.bfloat16, device=DEV), **x, **lc, window=16, mode=0)
    math.isfinite(0.0)


@pytest.mark.gpu
def test_gdn_replay_state_cache():
    """GdnReplayStateCache (cursors/commit from ReplayCursorCache) matches the op on its own buffers."""
    from replayssm_trtllm.ops.gdn import GdnReplayStateCache
    G = _ops()
    H, HV, K, V = SHAPES["q35-4b"]
    B, L, T = 3, 8, 2
    gen = torch.Generator().manual_seed(9)
    lc = _cuda(random_gdn_layer(HV, gen))
    cache = GdnReplayStateCache(2, 5, H, HV, K, V, L, T, "speculative")
    init = 0.5 * torch.randn(2, 3, HV, V, K, generator=gen)
    cache.reset(torch.tensor([4, 0, 2]), init)
    ckpt = init[1].clone().to(DEV)
    sbi = torch.tensor([4, 0, 2], dtype=torch.int32, device=DEV)
    for step in range(12):
        x = _cuda(_inputs(B, T, H, HV, K, V, gen, torch.bfloat16))
        o1 = cache.step(1, sbi, **x, **lc)
        o0 = G.gdn_replay(cache.ckpt[1][sbi.long()].clone(), torch.arange(B, dtype=torch.int32, device=DEV),
                          cache.ring_origin[sbi.long()].clone(), cache.ring_len[sbi.long()].clone(),
                          torch.zeros(B, cache.capacity, HV, device=DEV), cache.ring_u[1][sbi.long()].clone(),
                          cache.ring_k[1][sbi.long()].clone(), **x, **lc, window=L, mode=1) if step == 0 else None
        if o0 is not None:
            assert rel(o1, o0) < 1e-6
        cache.commit(torch.tensor([2, 1, 2], dtype=torch.int32, device=DEV))
    cache.check_errors()
    assert not torch.isnan(o1.float()).any()
    del ckpt


def test_split_variant_workspace_rules():
    """Variant 6 (split kernels): the workspace size query and the launcher's refusals (no workspace, too small
    or misaligned a workspace, K = 64, head_v % 8 != 0, more than 32 records, misaligned ring_u rows, the
    conventional decode), all on the host before anything is launched. Host-only functions of the kernel
    library (skipped when it is not built)."""
    import ctypes
    from replayssm_trtllm.ops import gdn as G
    from replayssm_trtllm.ops._lib import KernelLibraryError, check_status, load_library
    try:
        load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")
    B, T, H, HV, K, V, L = 2, 1, 2, 4, 128, 16, 8
    p = G.GdnReplayParams(batch=B, num_tokens=T, num_heads=H, num_v_heads=HV, head_k=K, head_v=V, num_slots=2,
                          window=L, ring_capacity=L, mode=0, state_dtype=0, act_dtype=2, u_dtype=1, variant=6)
    words = (32 + (2 * T + 1) * (L + T) + 3) // 4 * 4  # head record: 32 + (2T + 1)(L + T) words, 16-byte rounded
    words += 2 * T * ((L + 7) // 8 * 8) + 128 if T >= 2 else 0  # T >= 2: the tensor-core verify readout's block
    need = B * HV * words * 4
    assert G.replay_workspace_bytes(p) == need
    p.variant = 4
    assert G.replay_workspace_bytes(p) == 0
    p.variant = 6
    fake = 1 << 20  # never dereferenced: every case below is refused on the host
    for name in ("state", "state_batch_indices", "ring_origin", "ring_len", "ring_g", "ring_u", "ring_k", "q", "k",
                 "v", "a", "b", "A_log", "dt_bias", "o"):
        setattr(p, name, fake)
    p.state_stride_slot, p.state_stride_head, p.state_stride_v = HV * V * K, V * K, K
    p.q_stride_b, p.q_stride_t, p.q_stride_h = H * K, H * K, K
    p.k_stride_b, p.k_stride_t, p.k_stride_h = H * K, H * K, K
    p.ring_u_stride_slot, p.ring_u_stride_rec, p.ring_u_stride_head = L * HV * V, HV * V, V
    p.ring_k_stride_slot, p.ring_k_stride_rec, p.ring_k_stride_head = L * H * K, H * K, K

    def run():
        check_status(G._launcher("rssm_gdn_replay_launch", G.GdnReplayParams)(ctypes.byref(p), None), "gdn_replay")

    with pytest.raises(RuntimeError, match=f"variant 6 needs a workspace of {need} bytes"):
        run()
    p.workspace, p.workspace_bytes = fake, need - 4
    with pytest.raises(RuntimeError, match=f"variant 6 needs a workspace of {need} bytes"):
        run()
    p.workspace = fake + 8
    with pytest.raises(RuntimeError, match="workspace must be 16-byte aligned"):
        run()
    p.workspace, p.workspace_bytes = fake, need
    p.ring_u_stride_head = 12
    with pytest.raises(RuntimeError, match="variant 6 needs 16-byte aligned 'ring_u' rows"):
        run()
    p.ring_u_stride_head = V
    p.head_v = 12
    with pytest.raises(RuntimeError, match=r"variant 6 needs head_v % 8 == 0; got 12"):
        run()
    p.head_v = V
    p.window = p.ring_capacity = 40
    with pytest.raises(RuntimeError, match=r"variant 6 \(split kernels\) handles at most 32 records per step"):
        run()
    p.window = p.ring_capacity = L
    p.mode, p.num_tokens, p.ring_capacity = 1, 8, 40
    p.window = 32  # speculative: window + T = 40 records
    with pytest.raises(RuntimeError, match="at most 32 records per step"):
        run()
    p.mode, p.num_tokens, p.window, p.ring_capacity = 0, 1, L, L
    p.head_k = 64
    p.state_stride_slot, p.state_stride_head, p.state_stride_v = HV * V * 64, V * 64, 64
    with pytest.raises(RuntimeError, match=r"variant 6 \(split kernels\) supports head_k 128 or 256; got 64"):
        run()
    d = G.GdnDecodeParams(batch=B, num_tokens=1, num_heads=H, num_v_heads=HV, head_k=K, head_v=V, num_slots=2,
                          snapshot=0, indices_cols=1, state_dtype=0, act_dtype=2, variant=6)
    # In GdnDecode variant 6 is the warp-item conventional kernel: it takes no rows_per_cta (refused by name), and
    # with rows_per_cta 0 the launch gets past the variant checks (here: to the NULL state pointer).
    d.rows_per_cta = 16
    with pytest.raises(RuntimeError, match=r"variant 6 \(warp items\) picks its own rows; rows_per_cta must be 0; got 16"):
        check_status(G._launcher("rssm_gdn_decode_launch", G.GdnDecodeParams)(ctypes.byref(d), None), "gdn_decode")
    d.rows_per_cta = 0
    with pytest.raises(RuntimeError, match=r"GdnDecode: 'state' must not be NULL"):
        check_status(G._launcher("rssm_gdn_decode_launch", G.GdnDecodeParams)(ctypes.byref(d), None), "gdn_decode")
    d64 = G.GdnDecodeParams(batch=B, num_tokens=1, num_heads=H, num_v_heads=HV, head_k=64, head_v=V, num_slots=2,
                            snapshot=0, indices_cols=1, state_dtype=0, act_dtype=2, variant=6)
    with pytest.raises(RuntimeError, match=r"variant 6 \(warp items\) supports head_k 128 or 256; got 64"):
        check_status(G._launcher("rssm_gdn_decode_launch", G.GdnDecodeParams)(ctypes.byref(d64), None), "gdn_decode")


def _host_library_or_skip():
    """The kernel library's loader once the library loads (host-only tests run on the CPU too); skips otherwise."""
    from replayssm_trtllm.ops._lib import KernelLibraryError, load_library
    try:
        load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")
    return load_library


def test_wir_route_rule(monkeypatch):
    """Variant 5's standard-step route (host-only, the launcher's rule through rssm_gdn_replay_uses_warp_items): the
    warp-item kernel (WIR) where it can run and batch x value heads <= 128, the stream kernel otherwise; RSSM_GDN_WIR=1
    lifts the batch rule only, =0 turns it off. Skipped when the kernel library is not built."""
    from replayssm_trtllm.ops import gdn as G
    _host_library_or_skip()

    def params(**kw):
        d = dict(batch=1, num_tokens=1, num_heads=16, num_v_heads=32, head_k=128, head_v=128, num_slots=8,
                 window=16, ring_capacity=17, mode=0, state_dtype=0, act_dtype=2, u_dtype=1, variant=5,
                 ring_k_stride_slot=17 * 16 * 128, ring_k_stride_rec=16 * 128, ring_k_stride_head=128,
                 ring_u_stride_slot=17 * 32 * 128, ring_u_stride_rec=32 * 128, ring_u_stride_head=128)
        d.update(kw)
        return G.GdnReplayParams(**d)

    monkeypatch.delenv("RSSM_GDN_WIR", raising=False)
    monkeypatch.delenv("RSSM_GDN_WIR_LONG", raising=False)
    uses = G.replay_uses_warp_items
    assert uses(params())                                        # q35-4b B = 1 (32 value heads)
    assert uses(params(batch=4))                                 # 128 (batch x value heads)
    assert not uses(params(batch=5))                             # 160
    assert uses(params(num_v_heads=64)) and uses(params(num_v_heads=64, batch=2))  # q35-122b B = 1, 2
    assert not uses(params(num_v_heads=64, batch=3))
    assert uses(params(window=1, ring_capacity=2)) and uses(params(window=16, ring_capacity=32))
    # windows 17-32: the second instance (sixty-eighth session), on rings of at most 32 rows, by default since the
    # sixty-ninth session; RSSM_GDN_WIR_LONG=0 keeps them on the stream kernel
    assert uses(params(window=17, ring_capacity=17)) and uses(params(window=32, ring_capacity=32))
    monkeypatch.setenv("RSSM_GDN_WIR_LONG", "0")
    assert not uses(params(window=17, ring_capacity=17)) and not uses(params(window=32, ring_capacity=32))
    monkeypatch.setenv("RSSM_GDN_WIR_LONG", "1")
    assert uses(params(window=17, ring_capacity=17)) and uses(params(window=32, ring_capacity=32))
    for other in (params(window=32, ring_capacity=33), params(window=33, ring_capacity=33), params(ring_capacity=33),
                  params(head_k=256),
                  params(head_v=12), params(mode=1, num_tokens=2, ring_capacity=18),
                  params(skip_flush_rows=1), params(ring_k_stride_head=132), params(ring_u_stride_rec=32 * 128 + 4),
                  params(ring_u_stride_head=100)):
        assert not uses(other)
    monkeypatch.setenv("RSSM_GDN_WIR", "1")
    assert uses(params(batch=256)) and uses(params(window=32, ring_capacity=32))
    assert not uses(params(window=32, ring_capacity=33)) and not uses(params(window=33, ring_capacity=33))
    monkeypatch.setenv("RSSM_GDN_WIR", "0")
    assert not uses(params())


def test_auto_variant_rule():
    """GDN_VARIANT_AUTO (-1, the torch ops' default): the split kernels (6) where they run the sizes, a workspace is
    given and B x HV reaches the table for the step's token count (768 at T = 1 (fifty-seventh session; 1024 before),
    4096 at T = 2 (fifty-sixth session; 8192 before), 1024 at T = 3, 512 at T = 4-7, 256 at T = 8; fifty-second
    session); 5 (its warp-item kernel, WIR) for the standard steps WIR runs at B x HV <= 128; else 4 (K 128 / 256)
    or 1 (K 64); the workspace query is > 0 exactly when auto would pick 6;
    the plugins' bound at maximum shapes covers every smaller step. Host-only functions of the kernel library
    (skipped when it is not built)."""
    import ctypes
    from replayssm_trtllm.ops import gdn as G
    load_library = _host_library_or_skip()

    def params(**kw):
        d = dict(batch=256, num_tokens=1, num_heads=16, num_v_heads=32, head_k=128, head_v=128, num_slots=300,
                 window=16, ring_capacity=16, mode=0, state_dtype=0, act_dtype=2, u_dtype=1, variant=-1)
        d.update(kw)
        return G.GdnReplayParams(**d)

    table = {1: 768, 2: 4096, 3: 1024, 4: 512, 5: 512, 6: 512, 7: 512, 8: 256}
    assert {t: G.replay_split_min_batch_heads(t) for t in table} == table
    assert G.replay_split_min_batch_heads(0) == 0 and G.replay_split_min_batch_heads(9) == 0

    def spec(T, **kw):
        return params(mode=1, num_tokens=T, window=16, ring_capacity=16 + T, **kw)

    # the threshold itself, one batch below it, on both head counts (q35-4b 32, q35-122b 64 value heads)
    for T, min_bh in table.items():
        for hv in (32, 64):
            at, below = -(-min_bh // hv), -(-min_bh // hv) - 1
            p_at = params(batch=at, num_v_heads=hv) if T == 1 else spec(T, batch=at, num_v_heads=hv)
            p_below = params(batch=below, num_v_heads=hv) if T == 1 else spec(T, batch=below, num_v_heads=hv)
            assert G.replay_auto_variant(p_at) == 6 and G.replay_workspace_bytes(p_at) > 0, (T, hv, at)
            assert G.replay_auto_variant(p_at, has_workspace=False) == 4
            assert G.replay_auto_variant(p_below) in (4, 5) and G.replay_workspace_bytes(p_below) == 0, (T, hv)
    big = params()
    assert G.replay_auto_variant(big) == 6 and G.replay_workspace_bytes(big) > 0
    assert G.replay_auto_variant(params(head_k=256)) == 6
    assert G.replay_auto_variant(params(batch=128, num_v_heads=64)) == 6   # q35-122b heads, B = 128
    assert G.replay_auto_variant(params(batch=24)) == 6                   # q35-4b B = 24: 768
    assert G.replay_auto_variant(spec(2, batch=64)) == 4                  # T = 2: 2048 < 4096
    assert G.replay_auto_variant(spec(2, batch=128)) == 6                 # T = 2: 4096
    assert G.replay_auto_variant(spec(4, batch=16)) == 6                  # T = 4: 512
    assert G.replay_auto_variant(spec(8, batch=8)) == 6                   # T = 8: 256
    for small in (params(batch=5), params(batch=23), params(batch=1, window=40, ring_capacity=40),
                  params(batch=1, head_v=12), params(batch=1, mode=1, num_tokens=4, window=12, ring_capacity=16),
                  params(batch=1, head_k=256), params(batch=1, ring_capacity=33),
                  params(mode=1, num_tokens=4, window=30, ring_capacity=34)):
        assert G.replay_auto_variant(small) == 4 and G.replay_workspace_bytes(small) == 0
    # the small-batch standard steps WIR runs (B x HV <= 128): variant 5, no workspace
    for wir in (params(batch=1), params(batch=4), params(batch=2, num_v_heads=64), params(batch=1, ring_capacity=24)):
        assert G.replay_uses_warp_items(wir)
        assert G.replay_auto_variant(wir) == 5 and G.replay_auto_variant(wir, has_workspace=False) == 5
        assert G.replay_workspace_bytes(wir) == 0
    assert G.replay_auto_variant(params(batch=3, num_v_heads=64)) == 4     # B x HV = 192 > 128
    assert G.replay_auto_variant(params(mode=1, num_tokens=4, window=28, ring_capacity=32)) == 6
    assert G.replay_auto_variant(params(head_k=64)) == 1
    assert G.replay_workspace_bytes(params(variant=4)) == 0
    # the bound a TensorRT plugin requests at a profile's maximum shapes covers every smaller step
    bound = load_library().rssm_gdn_replay_workspace_bound
    bound.argtypes, bound.restype = [ctypes.POINTER(G.GdnReplayParams)], ctypes.c_int64
    spec_max = params(mode=1, num_tokens=8, window=24, ring_capacity=32)            # 32 records at T = 8
    b = bound(ctypes.byref(spec_max))
    words = (32 + (2 * 8 + 1) * (24 + 8) + 3) // 4 * 4 + 2 * 8 * 24 + 128  # + the verify block (T >= 2)
    assert b == 256 * 32 * words * 4
    for B_, T_ in ((256, 1), (256, 4), (256, 8), (1, 8), (8, 8), (8, 4), (16, 4), (64, 2), (255, 2)):
        need = G.replay_workspace_bytes(params(mode=1, num_tokens=T_, window=24, ring_capacity=32, batch=B_))
        assert need <= b and (need > 0) == (B_ * 32 >= table[T_]), (B_, T_)
    assert bound(ctypes.byref(params(mode=1, num_tokens=8, window=32, ring_capacity=40))) == 0  # L + 1 > 32
    assert bound(ctypes.byref(params(batch=23))) == 0                             # never large enough
    assert bound(ctypes.byref(params(mode=1, num_tokens=8, window=30, ring_capacity=38))) > 0  # T <= 2 can
    # the maximum batch reaches the rule only at T >= 4 (B x HV = 512): the bound still covers those steps
    mid = params(mode=1, num_tokens=8, window=16, ring_capacity=24, batch=16)
    assert G.replay_workspace_bytes(params(mode=1, num_tokens=2, window=16, ring_capacity=24, batch=16)) == 0
    need8 = G.replay_workspace_bytes(mid)
    assert need8 > 0 and bound(ctypes.byref(mid)) == need8
    assert bound(ctypes.byref(params(mode=1, num_tokens=3, window=16, ring_capacity=24, batch=16))) == 0
    assert bound(ctypes.byref(params(mode=1, num_tokens=8, window=16, ring_capacity=24, batch=7))) == 0


def test_auto_variant_rule_16bit_state(monkeypatch):
    """The split rule for 16-bit (bf16 / fp16) checkpoints (fifty-third session, measured on bf16 on an H100): 2048 at
    T = 1-2, 1024 at T = 3 (not measured: the fp32 entry), 512 at T = 4-7, 256 at T = 8; the automatic choice, the workspace query and the plugins' bound follow the
    params' state dtype (the T = 2 step at B x HV 2048-8191 now on the split kernels for 16-bit checkpoints, on stream
    kernel 4 for fp32); RSSM_GDN_SPLIT_MIN_BH replaces both tables."""
    import ctypes
    from replayssm_trtllm.ops import gdn as G
    load_library = _host_library_or_skip()
    monkeypatch.delenv("RSSM_GDN_SPLIT_MIN_BH", raising=False)
    t16 = [2048, 2048, 1024, 512, 512, 512, 512, 256]
    t32 = [768, 4096, 1024, 512, 512, 512, 512, 256]
    for sd in ("bf16", "fp16"):
        assert [G.replay_split_min_batch_heads(t, sd) for t in range(1, 9)] == t16
    assert [G.replay_split_min_batch_heads(t, "fp32") for t in range(1, 9)] == t32
    assert [G.replay_split_min_batch_heads(t) for t in range(1, 9)] == t32
    with pytest.raises(ValueError, match="state_dtype must be one of"):
        G.replay_split_min_batch_heads(1, "fp8")

    def p(B, T, sd, hv=32):
        return G.GdnReplayParams(batch=B, num_tokens=T, num_heads=16, num_v_heads=hv, head_k=128, head_v=128,
                                 num_slots=B + 1, window=16, ring_capacity=16 + (T if T > 1 else 0),
                                 mode=0 if T == 1 else 1, state_dtype=sd, act_dtype=2, u_dtype=1, variant=-1)
    for sd in (1, 2):
        for T, thr in zip(range(1, 9), t16):
            for hv in (32, 64):
                at = -(-thr // hv)
                assert G.replay_auto_variant(p(at, T, sd, hv)) == 6 and G.replay_workspace_bytes(p(at, T, sd, hv)) > 0
                assert G.replay_auto_variant(p(at - 1, T, sd, hv)) in (4, 5), (sd, T, hv)
                assert G.replay_workspace_bytes(p(at - 1, T, sd, hv)) == 0
    assert G.replay_auto_variant(p(64, 2, 2)) == 6 and G.replay_auto_variant(p(64, 2, 0)) == 4   # q35-4b B = 64 T = 2
    assert G.replay_auto_variant(p(32, 1, 2)) == 4 and G.replay_auto_variant(p(32, 1, 0)) == 6   # 1024: fp32 only
    bound = load_library().rssm_gdn_replay_workspace_bound
    bound.argtypes, bound.restype = [ctypes.POINTER(G.GdnReplayParams)], ctypes.c_int64
    assert bound(ctypes.byref(p(64, 2, 2))) == G.replay_workspace_bytes(p(64, 2, 2)) > 0
    assert bound(ctypes.byref(p(32, 1, 0))) > 0        # fp32: 1024 reaches T = 1's entry
    assert bound(ctypes.byref(p(32, 1, 2))) == 0       # bf16: 1024 < 2048
    monkeypatch.setenv("RSSM_GDN_SPLIT_MIN_BH", "4096")
    assert G.replay_split_min_batch_heads(2, "bf16") == 4096 == G.replay_split_min_batch_heads(2)
    assert G.replay_auto_variant(p(64, 2, 2)) == 4


def test_split_rule_env_override(monkeypatch):
    """RSSM_GDN_SPLIT_MIN_BH replaces the split rule's table: one integer for every token count or eight (T = 1..8);
    the automatic choice, the workspace query and the plugins' bound follow it; a malformed value leaves the queries
    on the table and makes every AUTO launch fail with a message naming the variable (before any CUDA call, so this
    runs without a GPU); explicit variants ignore it. Host-only functions of the kernel library."""
    import ctypes
    from replayssm_trtllm.ops import gdn as G
    load_library = _host_library_or_skip()
    lib = load_library()
    bound = lib.rssm_gdn_replay_workspace_bound
    bound.argtypes, bound.restype = [ctypes.POINTER(G.GdnReplayParams)], ctypes.c_int64
    launch = lib.rssm_gdn_replay_launch
    launch.argtypes, launch.restype = [ctypes.POINTER(G.GdnReplayParams), ctypes.c_void_p], ctypes.c_int
    lib.rssm_last_error.restype = ctypes.c_char_p

    def params(**kw):
        d = dict(batch=8, num_tokens=1, num_heads=16, num_v_heads=32, head_k=128, head_v=128, num_slots=300,
                 window=16, ring_capacity=16, mode=0, state_dtype=0, act_dtype=2, u_dtype=1, variant=-1)
        d.update(kw)
        return G.GdnReplayParams(**d)

    table = [G.replay_split_min_batch_heads(t) for t in range(1, 9)]
    assert table == [768, 4096, 1024, 512, 512, 512, 512, 256]
    monkeypatch.setenv("RSSM_GDN_SPLIT_MIN_BH", "256")
    assert [G.replay_split_min_batch_heads(t) for t in range(1, 9)] == [256] * 8
    assert G.replay_auto_variant(params()) == 6 and G.replay_workspace_bytes(params()) > 0    # 8 x 32 = 256
    assert G.replay_auto_variant(params(batch=7)) == 4
    assert bound(ctypes.byref(params())) > 0
    monkeypatch.setenv("RSSM_GDN_SPLIT_MIN_BH", "1,2,3,4,5,6,7,2147483647")
    assert [G.replay_split_min_batch_heads(t) for t in range(1, 9)] == [1, 2, 3, 4, 5, 6, 7, 2147483647]
    assert G.replay_auto_variant(params(batch=1)) == 6          # 1 at T = 1: the split kernels even at B = 1
    spec8 = params(mode=1, num_tokens=8, ring_capacity=24, batch=256)
    assert G.replay_auto_variant(spec8) == 4 and G.replay_workspace_bytes(spec8) == 0   # T = 8: never
    assert bound(ctypes.byref(spec8)) > 0                       # smaller T at this batch take the split kernels
    monkeypatch.setenv("RSSM_GDN_SPLIT_MIN_BH", "")
    assert [G.replay_split_min_batch_heads(t) for t in range(1, 9)] == table
    for bad in ("abc", "0", "1,2", "1,2,3,4,5,6,7,8,9", "1,,2", " 256", "256 ", "-5", "2147483648", "1,2,3,4,5,6,7,"):
        monkeypatch.setenv("RSSM_GDN_SPLIT_MIN_BH", bad)
        assert [G.replay_split_min_batch_heads(t) for t in range(1, 9)] == table, bad
        st = launch(ctypes.byref(params()), None)
        msg = lib.rssm_last_error().decode()
        assert st != 0 and "RSSM_GDN_SPLIT_MIN_BH" in msg and repr(bad)[1:-1] in msg, (bad, msg)
    # an explicit variant does not read it (the launch then fails later, on its null pointers, for another reason)
    monkeypatch.setenv("RSSM_GDN_SPLIT_MIN_BH", "abc")
    st = launch(ctypes.byref(params(variant=4)), None)
    assert st != 0 and "RSSM_GDN_SPLIT_MIN_BH" not in lib.rssm_last_error().decode()


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,L,mode,T", [("q35-4b", 256, 16, 0, 1), ("q35-122b", 128, 16, 1, 3),
                                              ("q35-4b", 3, 8, 0, 1), ("q35-122b", 1, 16, 0, 1),
                                              ("q35-4b", 2, 16, 0, 1), ("q35-4b", 8, 8, 0, 1),
                                              ("q35-4b", 32, 16, 0, 1), ("q35-4b", 16, 16, 1, 4),
                                              ("q35-4b", 8, 16, 1, 8), ("q35-122b", 32, 8, 1, 2),
                                              ("q35-4b", 24, 16, 0, 1), ("q35-4b", 23, 16, 0, 1)],
                         ids=["q35-4b-B256-std", "q35-122b-B128-T3", "q35-4b-B3-std", "q35-122b-B1-std",
                              "q35-4b-B2-std", "q35-4b-B8-std", "q35-4b-B32-std", "q35-4b-B16-T4", "q35-4b-B8-T8",
                              "q35-122b-B32-T2", "q35-4b-B24-std", "q35-4b-B23-std"])
def test_replay_auto_variant(shape, B, L, mode, T):
    """variant=None (GDN_VARIANT_AUTO): the split kernels where B x HV reaches the rule for the step's token count
    (q35-4b B = 24 and 32 standard: 768 (the T = 1 entry since the fifty-seventh session) and 1024; B = 16 at T = 4:
    512; B = 8 at T = 8: 256), the warp-item kernel (variant 5's WIR) for the standard steps at B x HV <= 128 (q35-4b
    B = 2, 3; q35-122b B = 1), variant 4 at other small batches (q35-4b B = 8 and 23 standard: 256, 736 < 768;
    q35-122b B = 32 at T = 2: 2048 < 4096); same results as the float64 reference over flushes."""
    from replayssm_trtllm.ops import gdn as G
    HV = {"q35-4b": 32, "q35-122b": 64}[shape]
    expect_split = B * HV >= G.replay_split_min_batch_heads(T)
    if not os.environ.get("RSSM_GDN_SPLIT_MIN_BH"):   # the table (with the override set, its rule: e.g. 1 = all split)
        assert expect_split == ((shape, B, T) in (("q35-4b", 256, 1), ("q35-122b", 128, 3), ("q35-4b", 32, 1),
                                                  ("q35-4b", 16, 4), ("q35-4b", 8, 8), ("q35-4b", 24, 1)))
    seq = _Seq(shape, B, L, mode, T, seed=B + L + T, variant=None)
    join = [(r * 5) % L for r in range(B)]
    for t in range(L + 12):
        seq.step(_active(B, t, join, seq.gen, 0.1), None if mode == 0 else
                 torch.randint(1, T + 1, (B,), generator=seq.gen).tolist())
    seq.compare_buffers()
    assert seq.flushes > 0


@pytest.mark.gpu
@pytest.mark.parametrize("shape,B,T,expect_split", [("q35-4b", 64, 2, True), ("q35-122b", 32, 2, True),
                                                    ("q35-4b", 32, 1, False), ("q35-4b", 63, 2, False)],
                         ids=["q35-4b-B64-T2", "q35-122b-B32-T2", "q35-4b-B32-std", "q35-4b-B63-T2"])
def test_replay_auto_variant_bf16_state(shape, B, T, expect_split):
    """variant=None with bf16 checkpoints (fifty-third session's 16-bit table: 2048 at T = 1-2): q35-4b B = 64 and
    q35-122b B = 32 T = 2 steps on the split kernels (the fp32 table keeps them on stream kernel 4 to 4096), q35-4b
    B = 32 standard and B = 63 T = 2 on stream kernel 4; the same results as the float64 reference over flushes
    (written in the fifty-third session, not yet run on a GPU)."""
    from replayssm_trtllm.ops import gdn as G
    HV = {"q35-4b": 32, "q35-122b": 64}[shape]
    if not os.environ.get("RSSM_GDN_SPLIT_MIN_BH"):
        assert (B * HV >= G.replay_split_min_batch_heads(T, "bf16")) == expect_split
    L, mode = 16, int(T > 1)
    seq = _Seq(shape, B, L, mode, T, seed=B + T + 7, variant=None, state_dtype=torch.bfloat16)
    seq.tol_out = 2e-2  # the checkpoint format's own rounding (as test_replay_standard_wir_dtypes): outputs every step
    join = [(r * 5) % L for r in range(B)]
    for t in range(L + 6):
        seq.step(_active(B, t, join, seq.gen, 0.1), None if mode == 0 else
                 torch.randint(1, T + 1, (B,), generator=seq.gen).tolist())
    assert seq.flushes > 0
