"""GPU tests of the Mamba-2 kernels against the float64 reference (replayssm_trtllm.reference).

Outputs are poisoned with NaN before every launch so every element must be written (and padding
rows must stay NaN). Replay tests start from staggered random cursors with random ring contents
(origins anywhere, so wrap-around happens from the first step) and run several windows with random
acceptance; outputs, checkpoints, live ring records and cursors are compared after every step.
"""
from __future__ import annotations

import zlib

import pytest
import torch

from replayssm_trtllm.reference import Mamba2ReplayCacheRef, cast_quantizer, mamba2_decode_naive
from replayssm_trtllm.reference.testing import random_mamba2_inputs, random_mamba2_layer, random_state
from kernel_profile import cuda_kernel_names, instances, skip_under_sanitizer

pytestmark = pytest.mark.gpu

# Kernel designs (mamba2.h RSSM_MAMBA2_VARIANT_*): every test below runs every variant of its kernel
# (conventional decode: 0-2 and 4 (warp items); replay: 0-4, variant 3 = the stream kernel and variant 4 = the split
# kernels, both dstate 128/256 only).
VARIANTS = (0, 1, 2)  # the designs both kernels have (replay tests below that take rows_per_cta)
CONV_VARIANTS = (0, 1, 2, 4)  # conventional decode; 4: the warp-item kernel (runs 2 for dstate 64 / unaligned rows)
REPLAY_VARIANTS = (0, 1, 2, 3, 4)
N128_ONLY = {3: "stream kernel", 4: "split kernels"}
REFUSED = -1  # _run_replay: the variant refused the shape as documented (checked, nothing written)

NANO = dict(H=96, P=80, N=128, G=8)
SUPER = dict(H=128, P=64, N=128, G=8)
SMALL = dict(H=8, P=64, N=128, G=2)

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
_DN = {F32: "fp32", F16: "fp16", BF16: "bf16"}

# (rtol, atol as a fraction of the reference RMS) per (output act dtype, state dtype)
Y_TOL = {
    (BF16, F32): (1.6e-2, 1.0e-2), (F16, F32): (2.5e-3, 2.0e-3),
    (BF16, F16): (2.0e-2, 1.5e-2), (F16, F16): (6.0e-3, 5.0e-3),
    (BF16, BF16): (4.0e-2, 3.0e-2), (F16, BF16): (3.0e-2, 2.5e-2),
}
# checkpoint / snapshot tolerance per state dtype
S_TOL = {F32: (2e-5, 2e-5), F16: (2e-3, 2e-3), BF16: (1.6e-2, 1.6e-2)}

_stats = []


def _compare(name, got, ref, rtol, atol_frac, mask=None):
    got = got.detach().to("cpu", torch.float64)
    ref = ref.detach().to("cpu", torch.float64)
    if mask is not None:
        got, ref = got[mask], ref[mask]
    if ref.numel() == 0:
        return 0.0
    assert not torch.isnan(got).any(), f"{name}: {int(torch.isnan(got).sum())} NaN (unwritten) elements"
    rms = float(ref.pow(2).mean().sqrt()) or 1.0
    err = (got - ref).abs()
    bound = rtol * ref.abs() + atol_frac * rms
    bad = err > bound
    rel_rms = float(err.pow(2).mean().sqrt()) / rms
    _stats.append((name, float(err.max()), rel_rms))
    if bool(bad.any()):
        i = int(torch.nonzero(bad.reshape(-1))[0, 0])
        raise AssertionError(f"{name}: {int(bad.sum())}/{bad.numel()} elements out of tolerance; max abs err "
                             f"{float(err.max()):.3e}, rel RMS {rel_rms:.3e}, first bad flat index {i}: got "
                             f"{float(got.reshape(-1)[i]):.6e} ref {float(ref.reshape(-1)[i]):.6e}")
    return rel_rms


def _inputs(B, T, shape, act, g, with_z=True, strided=False, dt_f32=False, bc_offset=8, c_offset=None):
    H, P, N, G = shape["H"], shape["P"], shape["N"], shape["G"]
    inp = random_mamba2_inputs(B, T, H, P, N, G, generator=g, dtype=torch.float64, with_z=with_z)
    dev = {}
    for k, v in inp.items():
        if v is None:
            dev[k] = None
            continue
        dt = F32 if (k == "dt_raw" and dt_f32) else act
        t = v.to(dt)
        if strided and k in ("x", "Bm", "Cm", "z", "dt_raw"):
            # a view with padded row strides (as a slice of a fused projection output)
            # (bc_offset: B and C start that many elements into the padded rows, c_offset C only when given; 2 puts
            # them 4 bytes off an 8-byte boundary)
            off = (c_offset if c_offset is not None and k == "Cm" else bc_offset) if k in ("Bm", "Cm") else 8
            big = torch.zeros(*t.shape[:-1], t.shape[-1] + 24, dtype=dt)
            big[..., off:off + t.shape[-1]] = t
            dev[k] = big.cuda()[..., off:off + t.shape[-1]]
        else:
            dev[k] = t.cuda()
    ref = {k: (v.to(F32 if (k == "dt_raw" and dt_f32) else act).to(torch.float64) if v is not None else None)
           for k, v in inp.items()}
    return dev, ref


def _layer(H, g):
    lay = random_mamba2_layer(H, generator=g, dtype=F32)
    return {k: v.cuda() for k, v in lay.items()}, {k: v.double() for k, v in lay.items()}


# ------------------------------------------------------------------------------ conventional decode
CONV_CASES = [
    # (B, T, shape, state, act, snapshots, z, strided)
    (1, 1, SUPER, F32, BF16, False, True, False),
    (3, 1, NANO, F32, BF16, False, True, True),
    (64, 1, SUPER, F32, BF16, False, False, False),
    (256, 1, SUPER, F32, BF16, False, True, False),
    (3, 4, NANO, F32, BF16, True, True, False),
    (64, 4, SUPER, F32, BF16, True, True, False),
    (3, 8, SUPER, F32, F16, True, False, True),
    (3, 3, dict(H=8, P=32, N=64, G=4), F16, F16, True, True, False),
    (3, 2, dict(H=4, P=128, N=256, G=1), BF16, BF16, True, True, False),
    (5, 1, dict(H=8, P=80, N=256, G=2), F16, BF16, False, True, True),
    (5, 5, dict(H=8, P=80, N=64, G=8), BF16, F16, True, False, False),
]


def _cid(c):
    B, T, sh, st, act, snap, z, strided = c
    return (f"B{B}-T{T}-H{sh['H']}-P{sh['P']}-N{sh['N']}-G{sh['G']}-{_DN[st]}state-{_DN[act]}"
            f"{'-snap' if snap else ''}{'-z' if z else ''}{'-strided' if strided else ''}")


@pytest.mark.parametrize("variant", CONV_VARIANTS, ids=[f"v{v}" for v in CONV_VARIANTS])
@pytest.mark.parametrize("case", CONV_CASES, ids=[_cid(c) for c in CONV_CASES])
def test_conventional_decode(case, variant):
    _run_conventional(case, variant)


@pytest.mark.sanitize
@pytest.mark.parametrize("variant", CONV_VARIANTS, ids=[f"v{v}" for v in CONV_VARIANTS])
def test_conventional_decode_sanitize(variant):
    """Small cases for compute-sanitizer (memcheck / racecheck): in place and with snapshots."""
    _run_conventional((3, 1, SMALL, F32, BF16, False, True, False), variant)
    _run_conventional((3, 3, dict(H=4, P=32, N=64, G=2), F32, F16, True, True, False), variant)


@pytest.mark.parametrize("variant", [1, 2])
@pytest.mark.parametrize("rows", [8, 24, 40])
def test_conventional_persistent_rows(variant, rows):
    """Persistent variants: item tiles that do not divide P (80 = 24 + 24 + 24 + 8)."""
    _run_conventional((5, 2, dict(H=8, P=80, N=128, G=2), F32, BF16, True, True, False), variant, rows)
    _run_conventional((5, 1, dict(H=8, P=80, N=128, G=2), F32, BF16, False, True, True), variant, rows)


@pytest.mark.parametrize("variant", CONV_VARIANTS, ids=[f"v{v}" for v in CONV_VARIANTS])
def test_conventional_padded_state_and_misaligned_x(variant):
    """State rows with a padded stride (per-row bulk copies) and x not 16-byte aligned (variants 1/2
    fall back to variant 0): same results."""
    _run_conventional((4, 1, SMALL, F32, BF16, False, True, False), variant, state_pad=4)
    _run_conventional((4, 2, SMALL, F32, BF16, True, True, False), variant, state_pad=4, misalign_x=True)


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("case", [pytest.param((3, 1, SMALL, F32, BF16, False, True, False),
                                               marks=pytest.mark.sanitize),
                                  (3, 1, NANO, F32, BF16, False, True, True),
                                  (256, 1, SUPER, F32, BF16, False, True, False),
                                  (64, 1, SUPER, F32, BF16, False, False, False)],
                         ids=["B3-small", "B3-nano-strided", "B256-super", "B64-super-noz"])
def test_conventional_warp_items_pipe(case, stages, monkeypatch):
    """PIPE (RSSM_MAMBA2_WARP_PIPE = 2 / 3, seventy-first session): variant 4's one-token fp32 N = 128 step on a
    persistent grid with the next items' rows in flight through shared memory, against the float64 reference with a
    padding row (untouched); at B = 64 / 256 a warp walks several items, so the stages rotate."""
    monkeypatch.setenv("RSSM_MAMBA2_WARP_PIPE", str(stages))
    _run_conventional(case, 4)


def _assert_conventional_refused(variant, rows_per_cta, match, seed):
    """The conventional launcher refuses (variant, rows_per_cta) with an error matching `match` and writes nothing."""
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    g = torch.Generator().manual_seed(seed)
    B, T, sh = 3, 1, SMALL
    state = random_state((B, sh["H"], sh["P"], sh["N"]), g).to(F32).cuda()
    before = state.clone()
    dev, _ = _inputs(B, T, sh, BF16, g, with_z=True, strided=False)
    lay, _ = _layer(sh["H"], g)
    y = torch.full((B, T, sh["H"], sh["P"]), float("nan"), dtype=BF16, device="cuda")
    with pytest.raises(Exception, match=match):
        torch.ops.replayssm.mamba2_decode_out(state, dev["x"], dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], lay["D"],
                                              lay["dt_bias"], dev["z"], torch.arange(B, dtype=torch.int32,
                                                                                     device="cuda"), None, y,
                                              rows_per_cta, variant)
    torch.cuda.synchronize()
    assert torch.equal(state, before) and torch.isnan(y.float()).all()


def test_conventional_warp_items_rows_refused():
    """Variant 4 of the conventional decode runs 8-row warp items: any other rows_per_cta is refused by name
    and nothing is written."""
    _assert_conventional_refused(4, 16, r"variant 4 \(warp items of 8 rows\) takes rows_per_cta 0 or 8; got 16", 6)


def test_conventional_decode_refuses_v3():
    """Variant 3 is a replay design: the conventional launcher refuses it and writes nothing."""
    _assert_conventional_refused(3, 0, r"variant 3 \(stream kernel\) exists for Mamba2Replay only", 5)


def _run_conventional(case, variant, rows_per_cta=0, state_pad=0, misalign_x=False):
    import replayssm_trtllm.ops.mamba2  # noqa: F401  (registers the ops)
    B, T, sh, st, act, snap, with_z, strided = case
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    g = torch.Generator().manual_seed(1000 + B * 7 + T)
    S = B + 3
    slots = torch.randperm(S, generator=g)[:B].to(torch.int32)
    if B >= 3:
        slots[1] = -1  # padding row
    state0 = random_state((S, H, P, N), g).to(st)
    if state_pad:
        big = torch.zeros(S, H, P, N + state_pad, dtype=st, device="cuda")
        state = big[..., :N]
        state.copy_(state0)
    else:
        state = state0.cuda()
    dev, ref = _inputs(B, T, sh, act, g, with_z=with_z, strided=strided, dt_f32=(T == 5))
    if misalign_x:
        xb = torch.zeros(dev["x"].numel() + 1, dtype=act, device="cuda")
        xm = xb[1:].view(dev["x"].shape)
        xm.copy_(dev["x"])
        dev["x"] = xm
    lay, layr = _layer(H, g)
    snaps = torch.full((S, T, H, P, N), float("nan"), dtype=st, device="cuda") if snap else None
    sbi = slots.cuda()
    y = torch.full((B, T, H, P), float("nan"), dtype=act, device="cuda")  # poison: every element must be written
    torch.ops.replayssm.mamba2_decode_out(state, dev["x"], dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], lay["D"],
                                          lay["dt_bias"], dev["z"], sbi, snaps, y, rows_per_cta, variant)
    torch.cuda.synchronize()
    assert torch.isnan(y.cpu()[~(slots >= 0)]).all(), "padding rows must not be written"
    valid = slots >= 0
    vs = slots[valid].long()
    y_ref, states_ref = mamba2_decode_naive(state0[vs].double(), ref["x"][valid], ref["dt_raw"][valid],
                                            ref["Bm"][valid], ref["Cm"][valid], layr["A"], layr["D"],
                                            layr["dt_bias"], ref["z"][valid] if with_z else None)
    rt, at = Y_TOL[(act, st)]
    tag = f"{_cid(case)}-v{variant}" + (f"-rows{rows_per_cta}" if rows_per_cta else "")
    _compare(f"{tag} y", y.cpu()[valid], y_ref, rt, at)
    srt, sat = S_TOL[st]
    if snap:
        _compare(f"{tag} snapshots", snaps.cpu()[vs], states_ref, srt, sat)
        assert torch.equal(state.cpu(), state0), "state must be read-only when snapshots are given"
    else:
        _compare(f"{tag} state", state.cpu()[vs], states_ref[:, -1], srt, sat)
        untouched = torch.ones(S, dtype=torch.bool)
        untouched[vs] = False
        assert torch.equal(state.cpu()[untouched], state0[untouched]), "slots of no row must be untouched"


# ---------------------------------------------------------------------------------- replay decode
def _set_random_cursors(ref, dev_cache, g, staggered):
    """Random (o, h) per slot and random ring contents, identical on both sides."""
    S, C, L = ref.num_slots, ref.capacity, ref.window
    hmax = L - 1 if ref.mode == 0 else L
    if staggered:
        o = torch.randint(0, C, (S,), generator=g)
        h = torch.randint(0, hmax + 1, (S,), generator=g)
        h[::2] = hmax  # even slots flush on their next step (every case exercises the flush path)
    else:
        o = torch.zeros(S, dtype=torch.int64)
        h = torch.zeros(S, dtype=torch.int64)
    ref.cursors.ring_origin.copy_(o.to(torch.int32))
    ref.cursors.ring_len.copy_(h.to(torch.int32))
    dev_cache["ring_origin"].copy_(o.to(torch.int32))
    dev_cache["ring_len"].copy_(h.to(torch.int32))
    act = dev_cache["ring_x"].dtype
    rdt = (0.002 + 0.06 * torch.rand(dev_cache["ring_dt"].shape, generator=g)).to(F32)
    rx = torch.randn(dev_cache["ring_x"].shape, generator=g, dtype=torch.float64).to(act)
    rB = torch.randn(dev_cache["ring_B"].shape, generator=g, dtype=torch.float64).to(act)
    dev_cache["ring_dt"].copy_(rdt)
    dev_cache["ring_x"].copy_(rx)
    dev_cache["ring_B"].copy_(rB)
    ref.ring_dt.copy_(rdt.double())
    ref.ring_x.copy_(rx.double())
    ref.ring_B.copy_(rB.double())


def _run_replay(B, L, T, mode, sh, st, act, steps, seed, staggered=True, padding=True, accept="random",
                with_z=True, strided=False, rows_per_cta=0, use_D=True, variant=0, state_pad=0, bc_offset=8,
                c_offset=None, ring_capacity=None):
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    from replayssm_trtllm.reference import ReplayCursors
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    g = torch.Generator().manual_seed(seed)
    S = B + 2
    Tmax = 1 if mode == 0 else T
    # ring_capacity: None = L + Tmax (in standard mode one row more than the caches' L since the sixty-eighth session,
    # so that the writes wrap the ring end; test_replay_standard_ring_of_window_rows runs C = L); any other C >= L
    # (the launcher's minimum) on shared cursors
    cursors = ReplayCursors(S, L, Tmax, mode, ring_capacity=L + Tmax if ring_capacity is None else ring_capacity)
    ref = Mamba2ReplayCacheRef(S, H, P, N, G, L, Tmax, mode, quant_hp=cast_quantizer(st), cursors=cursors)
    C = ref.capacity
    d = "cuda"
    ckpt = (torch.zeros(S, H, P, N + state_pad, dtype=st, device=d)[..., :N] if state_pad
            else torch.zeros(S, H, P, N, dtype=st, device=d))
    cache = {
        "ckpt": ckpt,
        "ring_dt": torch.zeros(S, C, H, dtype=F32, device=d),
        "ring_x": torch.zeros(S, C, H, P, dtype=act, device=d),
        "ring_B": torch.zeros(S, C, G, N, dtype=act, device=d),
        "ring_origin": torch.zeros(S, dtype=torch.int32, device=d),
        "ring_len": torch.zeros(S, dtype=torch.int32, device=d),
    }
    err = torch.full((1,), -1, dtype=torch.int32, device=d)
    pre = random_state((S, H, P, N), g).to(st)
    ref.reset(torch.arange(S), pre.double())
    cache["ckpt"].copy_(pre)
    _set_random_cursors(ref, cache, g, staggered)
    lay, layr = _layer(H, g)
    D_dev = lay["D"] if use_D else None
    D_ref = layr["D"] if use_D else torch.zeros_like(layr["D"])
    rt, at = Y_TOL[(act, st)]
    srt, sat = S_TOL[st]
    too_many = variant == 4 and (L if mode == 0 else L + T) > 32  # split kernels: <= 32 records per step
    if (variant in N128_ONLY and N not in (128, 256)) or too_many:  # refused with a clear error, nothing written
        dev, _ = _inputs(B, T, sh, act, g, with_z=with_z, strided=strided)
        y = torch.full((B, T, H, P), float("nan"), dtype=act, device=d)
        before = cache["ckpt"].clone()
        msg = (rf"variant {variant} \({N128_ONLY[variant]}\) supports dstate 128 or 256; got 64"
               if N not in (128, 256) else r"at most 32 records per step")
        with pytest.raises(Exception, match=msg):
            torch.ops.replayssm.mamba2_replay_decode_out(
                cache["ckpt"], cache["ring_dt"], cache["ring_x"], cache["ring_B"], cache["ring_origin"],
                cache["ring_len"], dev["x"], dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], lay["D"], lay["dt_bias"],
                dev["z"], torch.arange(B, dtype=torch.int32, device=d), L, mode, y, rows_per_cta, variant)
        torch.cuda.synchronize()
        assert torch.equal(cache["ckpt"], before) and torch.isnan(y.float()).all()
        return REFUSED
    n_flush = 0
    for step in range(steps):
        perm = torch.randperm(S, generator=g)[:B].to(torch.int32)
        if padding and B >= 3:
            perm[int(torch.randint(0, B, (1,), generator=g))] = -1
        sbi = perm.cuda()
        dev, refin = _inputs(B, T, sh, act, g, with_z=with_z, strided=strided, bc_offset=bc_offset, c_offset=c_offset)
        y = torch.full((B, T, H, P), float("nan"), dtype=act, device=d)  # poison
        torch.ops.replayssm.mamba2_replay_decode_out(
            cache["ckpt"], cache["ring_dt"], cache["ring_x"], cache["ring_B"], cache["ring_origin"],
            cache["ring_len"], dev["x"], dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], D_dev, lay["dt_bias"],
            dev["z"], sbi, L, mode, y, rows_per_cta, variant)
        y_ref = ref.step(perm.long(), refin["x"], refin["dt_raw"], refin["Bm"], refin["Cm"], layr["A"], D_ref,
                         layr["dt_bias"], refin["z"] if with_z else None)
        plan = ref.last_plan
        n_flush += int(plan.flush.sum())
        valid = perm >= 0
        tag = f"B{B}-L{L}-T{T}-m{mode}-{_DN[st]}-{_DN[act]}-v{variant} step {step}"
        _compare(f"{tag} y", y.cpu()[valid], y_ref[valid], rt, at)
        assert torch.isnan(y.cpu()[~valid]).all(), f"{tag}: padding rows must not be written"
        if accept == "all" or mode == 0:
            acc = None
        elif accept == "one":
            acc = torch.ones(B, dtype=torch.int32)
        else:
            acc = torch.randint(1, T + 1, (B,), generator=g, dtype=torch.int32)
        live = ref.cursors.live_mask(T)  # committed + this step's records
        _compare(f"{tag} ring_dt", cache["ring_dt"].cpu(), ref.ring_dt, 1e-5, 1e-6, mask=live)
        assert torch.equal(cache["ring_x"].cpu().double()[live], ref.ring_x[live]), f"{tag}: ring_x differs"
        assert torch.equal(cache["ring_B"].cpu().double()[live], ref.ring_B[live]), f"{tag}: ring_B differs"
        torch.ops.replayssm.replay_commit(sbi, acc.cuda() if acc is not None else None, cache["ring_origin"],
                                          cache["ring_len"], err, L, C, T, mode)
        ref.commit(perm.long(), acc.long() if acc is not None else None)
        torch.cuda.synchronize()
        assert int(err.item()) == -1, f"{tag}: commit reported slot {int(err.item())}"
        assert torch.equal(cache["ring_origin"].cpu(), ref.cursors.ring_origin.cpu()), f"{tag}: origin differs"
        assert torch.equal(cache["ring_len"].cpu(), ref.cursors.ring_len.cpu()), f"{tag}: ring_len differs"
        _compare(f"{tag} ckpt", cache["ckpt"].cpu(), ref.ckpt, srt, sat)
    return n_flush


@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=[f"v{v}" for v in REPLAY_VARIANTS])
@pytest.mark.parametrize("B,L,sh,steps", [(1, 32, SUPER, 40), (3, 16, NANO, 24), (64, 8, SMALL, 12)],
                         ids=["B1-L32-super", "B3-L16-nano", "B64-L8-small"])
def test_replay_standard_ring_of_window_rows(B, L, sh, steps, variant):
    """The standard step on a ring of C = L rows (the launchers' minimum and the caches' standard-mode capacity): the float64
    reference shows L rows are enough (tests/reference, test_standard_mode_needs_only_window_ring_rows), and with
    C = L = 32 Mamba-2's one-launch small-batch step can take B = 1 (it needs C <= 32). Random origins in [0, L), so
    the writes wrap; outputs, ring records, cursors and checkpoints against the reference every step. Written in the
    sixty-seventh session; not yet run on a GPU."""
    n = _run_replay(B, L, 1, 0, sh, F32, BF16, steps, seed=zlib.crc32(f"capL-{B}-{L}-{variant}".encode()),
                    variant=variant, ring_capacity=L)
    assert n == REFUSED or n > 0


REPLAY_CASES = [
    # (B, L, T, mode, shape, state, act, steps)
    (1, 16, 1, 0, SUPER, F32, BF16, 20),
    (3, 4, 1, 0, NANO, F32, BF16, 14),
    (3, 8, 4, 1, NANO, F32, BF16, 12),
    (3, 8, 4, 1, SUPER, F32, BF16, 12),
    (3, 16, 8, 1, SUPER, F32, BF16, 8),
    (64, 8, 1, 0, SMALL, F32, BF16, 12),
    (64, 16, 4, 1, SMALL, F32, BF16, 8),
    (256, 4, 1, 0, dict(H=8, P=32, N=64, G=2), F32, BF16, 6),
    (256, 8, 3, 1, dict(H=8, P=32, N=64, G=2), F32, BF16, 5),
    (3, 32, 2, 1, SMALL, F32, BF16, 10),
    (3, 32, 1, 0, SMALL, F32, BF16, 40),
] + [(3, 8, T, 1, SMALL, F32, BF16, 8) for T in (1, 2, 3, 5, 6, 7, 8)] + [
    (3, 8, 4, 1, SMALL, F16, F16, 8),
    (3, 8, 4, 1, SMALL, BF16, BF16, 8),
    (3, 8, 1, 0, SMALL, F16, BF16, 12),
    (3, 8, 1, 0, SMALL, BF16, F16, 12),
    (3, 8, 4, 1, dict(H=4, P=128, N=256, G=1), F32, BF16, 8),
    (3, 8, 4, 1, dict(H=4, P=80, N=64, G=4), F32, F16, 8),
    (3, 8, 4, 1, dict(H=4, P=32, N=256, G=2), BF16, BF16, 8),
]


def _rid(c):
    B, L, T, mode, sh, st, act, steps = c
    return (f"B{B}-L{L}-T{T}-{'spec' if mode else 'std'}-H{sh['H']}-P{sh['P']}-N{sh['N']}-G{sh['G']}-"
            f"{_DN[st]}state-{_DN[act]}")


@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=[f"v{v}" for v in REPLAY_VARIANTS])
@pytest.mark.parametrize("case", REPLAY_CASES, ids=[_rid(c) for c in REPLAY_CASES])
def test_replay_decode(case, variant):
    B, L, T, mode, sh, st, act, steps = case
    n_flush = _run_replay(B, L, T, mode, sh, st, act, steps, seed=zlib.crc32(_rid(case).encode()) % 10000,
                          variant=variant)
    assert n_flush > 0 or n_flush == REFUSED, "case never flushed"


@pytest.mark.sanitize
@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=[f"v{v}" for v in REPLAY_VARIANTS])
def test_replay_decode_sanitize(variant):
    """Small cases for compute-sanitizer (memcheck / racecheck): standard and speculative, flushes."""
    assert _run_replay(3, 4, 1, 0, SMALL, F32, BF16, 6, seed=21, variant=variant) > 0
    n64 = dict(H=4, P=32, N=64 if variant not in N128_ONLY else 128, G=2)  # variants 3/4: dstate 128/256 only
    assert _run_replay(3, 4, 3, 1, n64, F32, F16, 5, seed=22, variant=variant) > 0


@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=[f"v{v}" for v in REPLAY_VARIANTS])
@pytest.mark.parametrize("accept", ["all", "one", "random"])
def test_replay_speculative_acceptance(accept, variant):
    _run_replay(3, 8, 4, 1, SUPER, F32, BF16, 10, seed=7, accept=accept, variant=variant)


@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=[f"v{v}" for v in REPLAY_VARIANTS])
def test_replay_in_phase_no_padding_no_z_strided(variant):
    _run_replay(8, 4, 1, 0, SMALL, F32, BF16, 10, seed=11, staggered=False, padding=False, with_z=False,
                strided=True, use_D=False, variant=variant)
    _run_replay(8, 4, 2, 1, SMALL, F32, F16, 8, seed=12, staggered=False, padding=False, with_z=False,
                strided=True, variant=variant)


@pytest.mark.parametrize("variant", REPLAY_VARIANTS, ids=[f"v{v}" for v in REPLAY_VARIANTS])
def test_replay_padded_checkpoint_rows(variant):
    """Checkpoint rows with a padded stride (variants 1/2: per-row bulk copies)."""
    _run_replay(3, 8, 4, 1, SMALL, F32, BF16, 8, seed=14, variant=variant, state_pad=4)
    _run_replay(3, 4, 1, 0, SMALL, BF16, BF16, 8, seed=15, variant=variant, state_pad=8)


@pytest.mark.parametrize("variant", VARIANTS, ids=[f"v{v}" for v in VARIANTS])
@pytest.mark.parametrize("rows", [16, 32, 64])
def test_replay_rows_per_cta(rows, variant):
    _run_replay(3, 8, 4, 1, SUPER, F32, BF16, 6, seed=13, rows_per_cta=rows, variant=variant)


@pytest.mark.parametrize("variant", [1, 2])
@pytest.mark.parametrize("rows", [8, 24, 40])
def test_replay_persistent_rows(rows, variant):
    """Persistent variants: item tiles that do not divide P (80 = 24 + 24 + 24 + 8), N = 256 and 64."""
    _run_replay(5, 8, 3, 1, dict(H=8, P=80, N=128, G=2), F32, BF16, 6, seed=16, rows_per_cta=rows, variant=variant)
    _run_replay(5, 8, 1, 0, dict(H=8, P=80, N=256, G=2), F32, BF16, 10, seed=17, rows_per_cta=rows, variant=variant)
    _run_replay(5, 8, 2, 1, dict(H=8, P=80, N=64, G=8), BF16, F16, 6, seed=18, rows_per_cta=rows, variant=variant)


@pytest.mark.parametrize("variant", VARIANTS + (4,), ids=[f"v{v}" for v in VARIANTS + (4,)])
def test_replay_invalid_cursors_poison_row(variant):
    """A slot whose cursors break the invariants: its y rows are NaN, nothing else of it is written."""
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    sh = SMALL
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    B, L, T = 3, 8, 2
    S, C = B, L + T
    g = torch.Generator().manual_seed(31)
    d = "cuda"
    ckpt = random_state((S, H, P, N), g).to(F32).cuda()
    ring_dt = torch.rand(S, C, H, generator=g).mul(0.05).cuda()
    ring_x = torch.randn(S, C, H, P, generator=g).to(BF16).cuda()
    ring_B = torch.randn(S, C, G, N, generator=g).to(BF16).cuda()
    origin = torch.tensor([0, 3, 1], dtype=torch.int32, device=d)
    length = torch.tensor([2, L + 5, 4], dtype=torch.int32, device=d)  # slot 1 invalid
    before = [t.clone() for t in (ckpt, ring_dt, ring_x, ring_B)]
    dev, _ = _inputs(B, T, sh, BF16, g)
    lay, _ = _layer(H, g)
    sbi = torch.arange(B, dtype=torch.int32, device=d)
    y = torch.zeros(B, T, H, P, dtype=BF16, device=d)
    torch.ops.replayssm.mamba2_replay_decode_out(ckpt, ring_dt, ring_x, ring_B, origin, length, dev["x"], dev["dt_raw"],
                                                 dev["Bm"], dev["Cm"], lay["A"], lay["D"], lay["dt_bias"], dev["z"], sbi,
                                                 L, 1, y, 0, variant)
    torch.cuda.synchronize()
    yc = y.float().cpu()
    assert torch.isnan(yc[1]).all(), "invalid row must be NaN"
    assert not torch.isnan(yc[[0, 2]]).any()
    for a, b in zip((ckpt, ring_dt, ring_x, ring_B), before):
        assert torch.equal(a[1].cpu(), b[1].cpu()), "nothing of the invalid slot may be written"


def test_replay_equals_conventional_state():
    """Defining property: checkpoint + ring replay equals the conventional recurrence."""
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    from replayssm_trtllm.ops.state_cache import ReplayStateCache
    sh = SUPER
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    g = torch.Generator().manual_seed(5)
    B, L, steps = 4, 8, 21
    cache = ReplayStateCache(1, B, H, P, N, G, L, 1, "standard")
    pre = random_state((B, H, P, N), g).to(F32)
    cache.reset(torch.arange(B), pre.cuda())
    conv = pre.clone().cuda()
    lay, _ = _layer(H, g)
    sbi = torch.arange(B, dtype=torch.int32, device="cuda")
    for _ in range(steps):
        dev, _ = _inputs(B, 1, sh, BF16, g)
        y1 = cache.step(0, sbi, dev["x"], dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], lay["D"], lay["dt_bias"],
                        dev["z"])
        cache.commit()
        y2 = torch.ops.replayssm.mamba2_decode(conv, dev["x"], dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"],
                                               lay["D"], lay["dt_bias"], dev["z"], sbi, None)
        _compare("replay vs conventional y", y1.cpu(), y2.cpu().double(), 1.6e-2, 1e-2)
    cache.check_errors()
    # after 21 steps with L = 8: h = 21 % 8 = 5 committed records; replay them on the host
    ref = Mamba2ReplayCacheRef(B, H, P, N, G, L, 1, "standard")
    ref.ckpt.copy_(cache.ckpt[0].cpu().double())
    ref.ring_dt.copy_(cache.ring_dt[0].cpu().double())
    ref.ring_x.copy_(cache.ring_x[0].cpu().double())
    ref.ring_B.copy_(cache.ring_B[0].cpu().double())
    ref.cursors.ring_origin.copy_(cache.ring_origin.cpu())
    ref.cursors.ring_len.copy_(cache.ring_len.cpu())
    assert int(cache.ring_len[0]) == steps % L
    S_replay = ref.committed_state(torch.arange(B), lay["A"].cpu().double())
    _compare("committed state vs conventional state", S_replay, conv.cpu().double(), 1e-4, 1e-4)


def test_report_error_stats():
    """Prints max abs / relative RMS errors collected above (for the PR log)."""
    if _stats:
        worst = sorted(_stats, key=lambda s: -s[2])[:8]
        for name, mx, rr in worst:
            print(f"[mamba2 err] {name}: max abs {mx:.3e}, rel RMS {rr:.3e}")


@pytest.mark.parametrize("B,sh,L", [(1, SUPER, 8), (64, SMALL, 8), (64, SMALL, 40)],
                         ids=["B1-super-split-std-stream-spec", "B64-small-split", "B64-small-L40-persistent"])
def test_replay_auto_variant(B, sh, L):
    """variant = -1 (the op default): the launcher's choice (standard steps: the split kernels with the op's
    workspace at any batch; speculative: the stream kernel for one wave of CTAs, the split kernels above it; the
    persistent kernel past 32 records per step) gives the same results as the reference."""
    assert _run_replay(B, L, 1, 0, sh, F32, BF16, 10, seed=41 + B, variant=-1) > 0
    assert _run_replay(B, L, 3, 1, sh, F32, BF16, 8, seed=43 + B, variant=-1) > 0


@pytest.mark.parametrize("sh", [NANO, dict(H=12, P=32, N=256, G=1)], ids=["nano", "H12-P32-N256-G1"])
def test_replay_split_many_heads_per_group(sh):
    """Variant 4: more than 16 heads per group (several prep CTAs per group; only the first appends
    ring_B), head counts not a multiple of 16, staggered flushes over many steps with wrap-around."""
    sh = dict(sh)
    if sh["G"] == 8:
        sh["G"] = 2  # Nano heads in 2 groups: 48 heads per group = 3 prep chunks
    assert _run_replay(5, 8, 1, 0, sh, F32, BF16, 20, seed=51, variant=4) > 0
    assert _run_replay(5, 8, 3, 1, sh, F32, F16, 12, seed=52, variant=4) > 0



@pytest.mark.parametrize("prep", ["lb8", "w4"])
@pytest.mark.parametrize("sh", [SUPER, NANO, dict(H=12, P=32, N=256, G=1)], ids=["super", "nano", "H12-P32-N256-G1"])
def test_replay_split_prep_occupancy(sh, prep, monkeypatch):
    """Variant 4 with the bounded prep kernels forced (RSSM_MAMBA2_SPLIT_PREP, read per launch; "w4" is the automatic
    choice once the default prep needs more than one wave, i.e. large batches): 256 threads capped at
    32 registers, and 128-thread CTAs with 4 heads per warp. Standard mode, staggered rows with padding,
    flushes and ring wrap-around; the speculative step (other prep buckets) runs in the same process."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PREP", prep)
    assert _run_replay(5, 8, 1, 0, sh, F32, BF16, 20, seed=61, variant=4) > 0
    assert _run_replay(3, 4, 1, 0, sh, F16, F16, 10, seed=62, variant=4) > 0
    assert _run_replay(3, 8, 3, 1, sh, F32, BF16, 8, seed=63, variant=4) > 0


@pytest.mark.parametrize("sh,L,act,dt_f32", [(SUPER, 16, BF16, False), (NANO, 32, BF16, True), (SUPER, 16, F16, False),
                                          (dict(H=12, P=32, N=256, G=1), 8, BF16, False),
                                          (dict(H=8, P=128, N=128, G=2), 4, F16, True),
                                          (dict(H=10, P=64, N=128, G=2), 8, BF16, False)],
                         ids=["super-L16", "nano-L32-dtf32", "super-fp16", "H12-P32-N256-G1", "H8-P128-N128-G2-fp16",
                              "H10-G2-5-heads-per-group"])
def test_replay_split_prep_lean_vs_previous(sh, L, act, dt_f32, monkeypatch):
    """The lean one-token prep (the default for aligned standard steps; any heads per group) against the previous 128-thread prep
    (RSSM_MAMBA2_SPLIT_PREP=w4) on identical caches and inputs, staggered rows (half of them flushing), padding rows,
    two steps with a commit between (the second with x misaligned, which falls back to the previous prep): ring appends (dt, x, B) and the cursors bit-identical, checkpoints and outputs
    within the fp32 rounding of the record dots' summation order; and each matches the float64 reference (the
    reference comparison of every other standard-step test runs the lean prep too). L = 32: two dot passes."""
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    B, S = 48, 50
    g = torch.Generator().manual_seed(97 + L + N)
    ref = Mamba2ReplayCacheRef(S, H, P, N, G, L, 1, 0, quant_hp=cast_quantizer(F32))
    C = ref.capacity
    cache = {"ckpt": torch.zeros(S, H, P, N, dtype=F32, device="cuda"),
             "ring_dt": torch.zeros(S, C, H, dtype=F32, device="cuda"),
             "ring_x": torch.zeros(S, C, H, P, dtype=act, device="cuda"),
             "ring_B": torch.zeros(S, C, G, N, dtype=act, device="cuda"),
             "ring_origin": torch.zeros(S, dtype=torch.int32, device="cuda"),
             "ring_len": torch.zeros(S, dtype=torch.int32, device="cuda")}
    pre = random_state((S, H, P, N), g)
    cache["ckpt"].copy_(pre)
    _set_random_cursors(ref, cache, g, staggered=True)
    lay, _ = _layer(H, g)
    caches = {"lean": {k: v.clone() for k, v in cache.items()}, "w4": {k: v.clone() for k, v in cache.items()}}
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    for step in range(2):
        perm = torch.randperm(S, generator=g)[:B].to(torch.int32)
        perm[5] = -1
        sbi = perm.cuda()
        dev, _ = _inputs(B, 1, sh, act, g, dt_f32=dt_f32)
        if step == 1:  # x misaligned by one element: the launcher falls back to the previous prep for both
            big = torch.zeros(B, 1, H, P + 1, dtype=act, device="cuda")
            big[..., 1:] = dev["x"]
            dev["x"] = big[..., 1:]
        ys = {}
        for name, c in caches.items():
            if name == "w4":
                monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PREP", "w4")
            else:
                monkeypatch.delenv("RSSM_MAMBA2_SPLIT_PREP", raising=False)
            ys[name] = torch.full((B, 1, H, P), float("nan"), dtype=act, device="cuda")
            torch.ops.replayssm.mamba2_replay_decode_out(
                c["ckpt"], c["ring_dt"], c["ring_x"], c["ring_B"], c["ring_origin"], c["ring_len"], dev["x"],
                dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], lay["D"], lay["dt_bias"], dev["z"], sbi, L, 0,
                ys[name], 0, 4)
            torch.ops.replayssm.replay_commit(sbi, None, c["ring_origin"], c["ring_len"], err, L, C, 1, 0)
        torch.cuda.synchronize()
        assert int(err.item()) == -1
        a, b = caches["lean"], caches["w4"]
        for k in ("ring_dt", "ring_x", "ring_B", "ring_origin", "ring_len"):
            assert torch.equal(a[k], b[k]), f"step {step}: {k} differs between the lean and the previous prep"
        valid = (perm >= 0).cuda()
        _compare(f"step {step} y lean vs w4", ys["lean"][valid].float(), ys["w4"][valid].float(), 2e-2, 4e-3)
        assert torch.isnan(ys["lean"][~valid].float()).all(), "padding rows must not be written"
        _compare(f"step {step} ckpt lean vs w4", a["ckpt"], b["ckpt"], 2e-5, 2e-5)
        assert not torch.equal(a["ckpt"], pre.float().cuda()), "no row flushed"


@pytest.mark.sanitize
def test_replay_split_dynamic_schedule_sanitize(monkeypatch):
    """compute-sanitizer case of the dynamic readout schedule (forced on a small problem, where the launcher would pick
    the static one) and the lean prep: standard steps with flushes, padding and wrap-around; T = 2 verify steps."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_SCHED", "dynamic")
    assert _run_replay(5, 4, 1, 0, SMALL, F32, BF16, 6, seed=24, variant=4) > 0
    assert _run_replay(4, 4, 2, 1, SMALL, F32, BF16, 5, seed=25, variant=4) > 0


@pytest.mark.parametrize("sched", ["static", "dynamic"])
def test_replay_split_readout_schedules(sched, monkeypatch):
    """The plain readout's item schedules (RSSM_MAMBA2_SPLIT_SCHED, read per launch): dynamic per CTA (the default:
    warps take the CTA's next item from a shared counter) and the previous static grid stride. Both model shapes,
    staggered rows with padding, flushes and wrap-around over many steps, so every item is written exactly once
    (outputs poisoned first) whichever warp takes it; the tensor-core fold readout (same loop) once too."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_SCHED", sched)
    assert _run_replay(3, 8, 2, 1, SUPER, F32, BF16, 8, seed=84, variant=4) > 0  # T = 2: the plain readout too
    assert _run_replay(37, 8, 1, 0, SUPER, F32, BF16, 12, seed=81, variant=4) > 0
    assert _run_replay(29, 4, 1, 0, NANO, F32, BF16, 9, seed=82, variant=4) > 0
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PIPE", "3")
    assert _run_replay(17, 8, 1, 0, SUPER, F32, BF16, 10, seed=83, variant=4) > 0


FUSED_CASES = [
    # (B, L, shape, state, act, steps): B = 1 at the model shapes is what the launcher picks it for; B = 3 / 5 with
    # padding rows and odd shapes (heads per group 5, headdim 32 / 80 / 128, dstate 256, one group) forced on
    (1, 16, SUPER, F32, BF16, 40), (1, 16, NANO, F32, BF16, 40), (1, 4, SUPER, BF16, BF16, 11),
    (1, 32, NANO, F16, F16, 70), (3, 8, SUPER, F32, F16, 20), (5, 8, dict(H=10, P=64, N=128, G=2), F32, BF16, 19),
    (3, 4, dict(H=12, P=32, N=256, G=1), BF16, BF16, 13), (4, 16, dict(H=8, P=128, N=128, G=2), F32, BF16, 35),
]


@pytest.mark.parametrize("fold", ["auto", "cuda"])
@pytest.mark.parametrize("B,L,sh,st,act,steps", FUSED_CASES,
                         ids=[f"B{c[0]}-L{c[1]}-H{c[2]['H']}-P{c[2]['P']}-N{c[2]['N']}-{_DN[c[3]]}-{_DN[c[4]]}"
                              for c in FUSED_CASES])
def test_replay_split_fused_vs_reference(B, L, sh, st, act, steps, fold, monkeypatch):
    """The one-launch small-batch standard step (RSSM_MAMBA2_FUSED=1 forces it; the launcher takes it by itself at
    B = 1 at the model shapes) against the float64 reference over more than two windows: staggered rows, flushes
    (the fold reads the newest record's B from the input), ring wrap-around, padding rows (B >= 3), fp32 / 16-bit
    checkpoints, bf16 / fp16 activations, dstate 256, headdim 32 .. 128 (4 .. 16 warps per CTA)."""
    monkeypatch.setenv("RSSM_MAMBA2_FUSED", "1")
    # fold "auto": dstate 128 with bf16 activations folds on tensor cores from the rows the record dots staged in
    # shared memory (fifteenth session); "cuda" forces the CUDA-core fold (RSSM_MAMBA2_FUSED_FOLD=cuda)
    if fold == "cuda":
        monkeypatch.setenv("RSSM_MAMBA2_FUSED_FOLD", "cuda")
    assert _run_replay(B, L, 1, 0, sh, st, act, steps, seed=140 + B + L, variant=4) > 0


@pytest.mark.parametrize("sh,act", [(SUPER, BF16), (NANO, F16), (dict(H=10, P=64, N=256, G=2), BF16)],
                         ids=["super", "nano-fp16", "H10-N256-G2"])
def test_replay_split_fused_vs_split(sh, act, monkeypatch):
    """The fused step against the two-kernel split step (RSSM_MAMBA2_FUSED=0) on identical caches and inputs, staggered
    rows (some flushing), padding rows, three steps with commits between: ring appends (dt, x, B) and cursors
    bit-identical (same dots, same appends), outputs and checkpoints equal up to fp32 contraction differences."""
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    B, S, L = 6, 9, 8
    g = torch.Generator().manual_seed(151 + N)
    ref = Mamba2ReplayCacheRef(S, H, P, N, G, L, 1, 0, quant_hp=cast_quantizer(F32))
    C = ref.capacity
    cache = {"ckpt": torch.zeros(S, H, P, N, dtype=F32, device="cuda"),
             "ring_dt": torch.zeros(S, C, H, dtype=F32, device="cuda"),
             "ring_x": torch.zeros(S, C, H, P, dtype=act, device="cuda"),
             "ring_B": torch.zeros(S, C, G, N, dtype=act, device="cuda"),
             "ring_origin": torch.zeros(S, dtype=torch.int32, device="cuda"),
             "ring_len": torch.zeros(S, dtype=torch.int32, device="cuda")}
    pre = random_state((S, H, P, N), g)
    cache["ckpt"].copy_(pre)
    _set_random_cursors(ref, cache, g, staggered=True)
    lay, _ = _layer(H, g)
    caches = {"fused": {k: v.clone() for k, v in cache.items()}, "split": {k: v.clone() for k, v in cache.items()}}
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    flushed = 0
    for step in range(3):
        perm = torch.randperm(S, generator=g)[:B].to(torch.int32)
        perm[2] = -1
        sbi = perm.cuda()
        flushed += int((caches["split"]["ring_len"][perm[perm >= 0].long()] == L - 1).sum())
        dev, _ = _inputs(B, 1, sh, act, g)
        ys = {}
        for name, c in caches.items():
            monkeypatch.setenv("RSSM_MAMBA2_FUSED", "1" if name == "fused" else "0")
            ys[name] = torch.full((B, 1, H, P), float("nan"), dtype=act, device="cuda")
            torch.ops.replayssm.mamba2_replay_decode_out(
                c["ckpt"], c["ring_dt"], c["ring_x"], c["ring_B"], c["ring_origin"], c["ring_len"], dev["x"],
                dev["dt_raw"], dev["Bm"], dev["Cm"], lay["A"], lay["D"], lay["dt_bias"], dev["z"], sbi, L, 0,
                ys[name], 0, 4)
            torch.ops.replayssm.replay_commit(sbi, None, c["ring_origin"], c["ring_len"], err, L, C, 1, 0)
        torch.cuda.synchronize()
        assert int(err.item()) == -1
        a, b = caches["fused"], caches["split"]
        for k in ("ring_dt", "ring_x", "ring_B", "ring_origin", "ring_len"):
            assert torch.equal(a[k], b[k]), f"step {step}: {k} differs between the fused and the split step"
        valid = (perm >= 0).cuda()
        _compare(f"step {step} y fused vs split", ys["fused"][valid].float(), ys["split"][valid].float(), 1e-2, 2e-3)
        assert torch.isnan(ys["fused"][~valid].float()).all(), "padding rows must not be written"
        _compare(f"step {step} ckpt fused vs split", a["ckpt"], b["ckpt"], 1e-5, 1e-5)
    assert flushed > 0, "no row flushed"


def test_replay_split_fused_invalid_cursors_poison_row(monkeypatch):
    """Standard mode on the fused step: a slot whose cursors break the invariants gets NaN outputs and nothing of it
    is written (ring, checkpoint); the other rows (one of them flushing) are finite."""
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    monkeypatch.setenv("RSSM_MAMBA2_FUSED", "1")
    sh = SMALL
    H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
    B, L = 3, 8
    S, C = B, L
    g = torch.Generator().manual_seed(37)
    d = "cuda"
    ckpt = random_state((S, H, P, N), g).to(F32).cuda()
    ring_dt = torch.rand(S, C, H, generator=g).mul(0.05).cuda()
    ring_x = torch.randn(S, C, H, P, generator=g).to(BF16).cuda()
    ring_B = torch.randn(S, C, G, N, generator=g).to(BF16).cuda()
    origin = torch.tensor([0, 3, 1], dtype=torch.int32, device=d)
    length = torch.tensor([L - 1, L + 5, 4], dtype=torch.int32, device=d)  # slot 0 flushes, slot 1 invalid
    before = [t.clone() for t in (ckpt, ring_dt, ring_x, ring_B)]
    dev, _ = _inputs(B, 1, sh, BF16, g)
    lay, _ = _layer(H, g)
    sbi = torch.arange(B, dtype=torch.int32, device=d)
    y = torch.zeros(B, 1, H, P, dtype=BF16, device=d)
    torch.ops.replayssm.mamba2_replay_decode_out(ckpt, ring_dt, ring_x, ring_B, origin, length, dev["x"], dev["dt_raw"],
                                                 dev["Bm"], dev["Cm"], lay["A"], lay["D"], lay["dt_bias"], dev["z"], sbi,
                                                 L, 0, y, 0, 4)
    torch.cuda.synchronize()
    yc = y.float().cpu()
    assert torch.isnan(yc[1]).all(), "invalid row must be NaN"
    assert not torch.isnan(yc[[0, 2]]).any()
    for a, b in zip((ckpt, ring_dt, ring_x, ring_B), before):
        assert torch.equal(a[1].cpu(), b[1].cpu()), "nothing of the invalid slot may be written"
    assert not torch.equal(ckpt[0].cpu(), before[0][0].cpu()), "slot 0 should have flushed"


@pytest.mark.sanitize
def test_replay_split_fused_sanitize(monkeypatch):
    """compute-sanitizer case of the fused small-batch step (forced on a small problem): flushes, padding rows,
    wrap-around; the commit after it is a programmatic dependent launch."""
    monkeypatch.setenv("RSSM_MAMBA2_FUSED", "1")
    assert _run_replay(4, 4, 1, 0, SMALL, F32, BF16, 7, seed=26, variant=4) > 0  # tensor-core fold (staged rows)
    assert _run_replay(3, 20, 1, 0, SMALL, BF16, BF16, 45, seed=28, variant=4) > 0  # two 16-record chunks, padding
    assert _run_replay(3, 4, 1, 0, dict(H=4, P=80, N=256, G=2), F16, F16, 6, seed=27, variant=4) > 0
    monkeypatch.setenv("RSSM_MAMBA2_FUSED_FOLD", "cuda")
    assert _run_replay(4, 4, 1, 0, SMALL, F32, BF16, 7, seed=26, variant=4) > 0


def test_replay_split_prep_one_wave_automatic(monkeypatch):
    """A batch large enough that the default prep kernel needs more than one wave (B x G = 1024 CTAs > 6 per SM on
    an H200), so the automatic choice runs the 128-thread one-wave prep; then the default forced, same inputs."""
    sh = dict(H=16, P=32, N=128, G=8)
    assert _run_replay(128, 4, 1, 0, sh, F32, BF16, 10, seed=91, variant=4) > 0
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PREP", "default")
    assert _run_replay(128, 4, 1, 0, sh, F32, BF16, 10, seed=91, variant=4) > 0


MMA_FOLD_CASES = [c for c in REPLAY_CASES if c[4]["N"] == 128]


@pytest.mark.parametrize("case", MMA_FOLD_CASES, ids=[_rid(c) for c in MMA_FOLD_CASES])
def test_replay_split_mma_fold(case, monkeypatch):
    """Variant 4 with the tensor-core fold (RSSM_MAMBA2_SPLIT_PIPE=3, read per launch): flush items with bf16
    activations fold on mma.sync (W split into three bf16 terms); fp16 activations fold on CUDA cores in the same
    kernel. Every N = 128 case of the replay table (both model shapes, T 1..8, fp32 / fp16 / bf16 checkpoints,
    padding and staggered rows, L up to 32: two 16-record chunks), checkpoints compared after every flush."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PIPE", "3")
    B, L, T, mode, sh, st, act, steps = case
    n_flush = _run_replay(B, L, T, mode, sh, st, act, steps, seed=zlib.crc32(_rid(case).encode()) % 10000 + 7,
                          variant=4)
    assert n_flush > 0 or n_flush == REFUSED, "case never flushed"


@pytest.mark.parametrize("accept", ["all", "one", "random"])
def test_replay_split_mma_fold_acceptance_and_strides(accept, monkeypatch):
    """Tensor-core fold with every acceptance pattern, padded checkpoint rows, strided inputs without z / D,
    in-phase rows (every item of a step flushes), and a window of 32 (two record chunks per fold)."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PIPE", "3")
    assert _run_replay(3, 8, 4, 1, SUPER, F32, BF16, 10, seed=71, accept=accept, variant=4) > 0
    assert _run_replay(3, 8, 4, 1, SMALL, F32, BF16, 8, seed=72, accept=accept, variant=4, state_pad=4) > 0
    assert _run_replay(8, 4, 2, 1, SMALL, F32, BF16, 8, seed=74, staggered=False, padding=False, with_z=False,
                       strided=True, use_D=False, accept=accept, variant=4) > 0
    assert _run_replay(3, 32, 1, 0, NANO, F32, BF16, 40, seed=75, variant=4) > 0


@pytest.mark.sanitize
def test_replay_split_mma_fold_sanitize(monkeypatch):
    """Small tensor-core-fold cases for compute-sanitizer: standard and speculative with flushes, padded rows."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PIPE", "3")
    assert _run_replay(3, 4, 1, 0, SMALL, F32, BF16, 6, seed=81, variant=4) > 0
    assert _run_replay(3, 4, 3, 1, SMALL, F32, BF16, 5, seed=82, variant=4, state_pad=4) > 0

MMA_READOUT_CASES = [c for c in REPLAY_CASES if c[4]["N"] == 128]
# 4: the tensor-core readout (default: the next item's x_j and z loaded one item ahead, fp32 rows); 4z: without the
# z prefetch (RSSM_MAMBA2_MMA_ZPF=0, the default before the twenty-second session); 4n: without either prefetch
# (RSSM_MAMBA2_MMA_XPF=0); 0: the CUDA-core readout. (The twenty-second session's HSM instance, head records by bulk
# copy, was 3-5% slower on the H200 and was removed in the twenty-third; the thirty-fourth session's RFI, flush items
# refilling their row buffer during the fold, 4-6% slower at T = 4, and LEAN, a per-item index diet, 3-6% slower, were
# removed in the same session; HRC, the head records through shared memory one item ahead, measured neutral (0.99-1.01)
# in the thirty-fifth and was removed; REFILL, 5-12% slower, and GSH, neutral, in the thirty-ninth, were removed in the
# fortieth.)
MMA_PIPES = ["4", "4z", "4n", "0"]
MMA_PIPE_IDS = ["mma", "mma-nozpf", "mma-noxpf", "plain"]


@pytest.mark.parametrize("T", [4, 8], ids=["T4", "T8"])
def test_mma_readout_zpf_instance_runs(T):
    """The launcher's ZPF rule (fp32 rows, 4-byte aligned z pairs, C / x loads on) is silent when it fails, so check
    which readout instance ran (torch profiler) at the bench's Super shape (fp32 rows, bf16 activations, z, L = 16):
    the ZPF instance, at T = 4 and T = 8."""
    skip_under_sanitizer()
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    from replayssm_trtllm.bench import mamba2 as bm2
    B, L = 8, 16
    ls = bm2._Layerset(bm2.SHAPES["super"], B, L, T, F32, BF16, 1, 0, need_conv=False, token_list=[T])
    ls.set_cursors(torch.full((B,), 4, dtype=torch.int32, device="cuda"))  # h = 4: no row flushes
    _, names = cuda_kernel_names(lambda: ls.replay_step(0, T, 1, variant=4))
    readouts = [a for a in instances(names, "mamba2SplitReadoutMmaStagedKernel") if a[0] == "float"]
    assert readouts, f"no tensor-core readout ran: {sorted(names)}"
    assert all(a[3] == "1" for a in readouts), readouts  # template argument 3: ZPF


def _mma_readout_instance_args(monkeypatch, var, envs, arg, shape="super"):
    """{setting of `var`: the values of template argument `arg` of the fp32 tensor-core readouts launched} for one
    T = 4 verify step of the bench's layer set of `shape` (h = 4: no row flushes; torch profiler)."""
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    from replayssm_trtllm.bench import mamba2 as bm2
    got = {}
    for env in envs:
        monkeypatch.delenv(var, raising=False)
        if env:
            monkeypatch.setenv(var, env)
        ls = bm2._Layerset(bm2.SHAPES[shape], 8, 16, 4, F32, BF16, 1, 0, need_conv=False, token_list=[4])
        ls.set_cursors(torch.full((8,), 4, dtype=torch.int32, device="cuda"))
        _, names = cuda_kernel_names(lambda: ls.replay_step(0, 4, 1, variant=4))
        got[env] = sorted({a[arg] for a in instances(names, "mamba2SplitReadoutMmaStagedKernel") if a[0] == "float"})
    return got


# L32 (thirty-sixth session; the default, RSSM_MAMBA2_MMA_L32=0 turns it off): the fp32 ZPF readout with 32-bit item
# offsets and the ring B
# address on flush items only. Against the float64 reference: both shapes (16 and 12 heads per group), T = 2, 4, 8,
# window 16 and 24 (two fold chunks at T = 8), padding and staggered rows, random acceptance, with and without z.
L32_CASES = [(5, 16, 4, SUPER, True), (4, 16, 2, NANO, True), (3, 24, 8, SUPER, True), (5, 16, 8, NANO, False)]


@pytest.mark.parametrize("B,L,T,sh,z", L32_CASES, ids=[f"B{c[0]}-L{c[1]}-T{c[2]}-H{c[3]['H']}-z{int(c[4])}"
                                                      for c in L32_CASES])
def test_replay_split_mma_readout_l32(B, L, T, sh, z, monkeypatch):
    monkeypatch.delenv("RSSM_MAMBA2_SPLIT_PIPE", raising=False)
    monkeypatch.setenv("RSSM_MAMBA2_MMA_L32", "1")
    assert _run_replay(B, L, T, 1, sh, F32, BF16, 2 * L // T + 8, seed=300 + B + L + T, with_z=z, variant=4) > 0


def test_mma_readout_l32_instance_runs(monkeypatch):
    """Unset (the default) and RSSM_MAMBA2_MMA_L32=1 run the L32 instance (template argument 4) at the bench's Super
    shape, T = 4; "0" the one without it (torch profiler)."""
    skip_under_sanitizer()
    got = _mma_readout_instance_args(monkeypatch, "RSSM_MAMBA2_MMA_L32", (None, "1", "0"), 4)
    assert got == {None: ["1"], "1": ["1"], "0": ["0"]}, got


@pytest.mark.sanitize
def test_replay_split_mma_readout_l32_sanitize(monkeypatch):
    """The sanitizers' L32 case: speculative with flushes, padded rows, two record chunks."""
    _sanitize_mma_switch(monkeypatch, "RSSM_MAMBA2_MMA_L32", 186)


def _sanitize_mma_switch(monkeypatch, var, seed):
    """A tensor-core readout switch's sanitizer case (`var`=1, SMALL: 4 heads per group): T = 3 at L = 4 (flushes,
    wrap-around, padded rows) and T = 8 at L = 24 (two record chunks), against the float64 reference."""
    monkeypatch.delenv("RSSM_MAMBA2_SPLIT_PIPE", raising=False)
    monkeypatch.setenv(var, "1")
    assert _run_replay(3, 4, 3, 1, SMALL, F32, BF16, 5, seed=seed, variant=4) > 0
    assert _run_replay(2, 24, 8, 1, SMALL, F32, BF16, 6, seed=seed + 1, variant=4) > 0


def _set_mma_pipe(monkeypatch, pipe):
    """pipe: the readout (RSSM_MAMBA2_SPLIT_PIPE) and a suffix: "n" turns the x_j (and z) prefetch off, "z" only the
    z prefetch (RSSM_MAMBA2_MMA_ZPF=0)."""
    monkeypatch.setenv("RSSM_MAMBA2_SPLIT_PIPE", pipe[0])
    if pipe.endswith("n"):
        monkeypatch.setenv("RSSM_MAMBA2_MMA_XPF", "0")
    else:
        monkeypatch.delenv("RSSM_MAMBA2_MMA_XPF", raising=False)
    if pipe.endswith("z"):
        monkeypatch.setenv("RSSM_MAMBA2_MMA_ZPF", "0")
    else:
        monkeypatch.delenv("RSSM_MAMBA2_MMA_ZPF", raising=False)


@pytest.mark.parametrize("pipe", MMA_PIPES, ids=MMA_PIPE_IDS)
@pytest.mark.parametrize("case", MMA_READOUT_CASES, ids=[_rid(c) for c in MMA_READOUT_CASES])
def test_replay_split_mma_readout(case, pipe, monkeypatch):
    """Variant 4 with the readout forced (RSSM_MAMBA2_SPLIT_PIPE, read per launch; unset, speculative steps of T >= 4
    take the tensor-core readout): 4 = on tensor cores, every token of a step in one mma tile (state and coefficients
    rounded to TF32, fold weights as three bf16 terms), rows staged through a shared-memory double buffer, for bf16
    activations (fp16 ones fall back to the CUDA-core readout); 0 = the CUDA-core readout at every T. Every N = 128
    case of the replay table (both model shapes, T 1..8, fp32 / fp16 / bf16 checkpoints, padding and staggered rows,
    L up to 32: two record chunks), outputs and checkpoints compared with the float64 reference."""
    _set_mma_pipe(monkeypatch, pipe)
    B, L, T, mode, sh, st, act, steps = case
    n_flush = _run_replay(B, L, T, mode, sh, st, act, steps, seed=zlib.crc32(_rid(case).encode()) % 10000 + 11,
                          variant=4)
    assert n_flush > 0 or n_flush == REFUSED, "case never flushed"


@pytest.mark.parametrize("pdl", ["0", "1", None], ids=["pdl-off", "pdl-on", "pdl-default"])
@pytest.mark.parametrize("T", [4, 8])
def test_replay_split_mma_readout_pdl_switch(T, pdl, monkeypatch):
    """The tensor-core verify readout launched plainly (the default up to 4 tokens since the twenty-eighth session)
    or as a programmatic dependent of its prep (the default above 4), forced either way by RSSM_PDL_M2_VERIFY: random
    acceptance, staggered and padding rows, flushes, against the float64 reference."""
    monkeypatch.delenv("RSSM_MAMBA2_SPLIT_PIPE", raising=False)
    if pdl is None:
        monkeypatch.delenv("RSSM_PDL_M2_VERIFY", raising=False)
    else:
        monkeypatch.setenv("RSSM_PDL_M2_VERIFY", pdl)
    assert _run_replay(5, 16, T, 1, SUPER, F32, BF16, 24, seed=283 + T, accept="random", variant=4) > 0


# RSSM_PDL_CHAIN (common/pdl.h): each step's first kernel (the split prep, the fused small-batch step, the
# conventional warp-item decode) launched as a programmatic dependent of the kernel before it (the previous step's
# commit or decode), waiting before its first load.
PDL_CHAIN_M2 = [  # id: (B, L, T, mode, env)
    ("split-standard", 5, 8, 1, 0, {"RSSM_MAMBA2_FUSED": "0"}), ("fused-standard", 2, 8, 1, 0, {"RSSM_MAMBA2_FUSED": "1"}),
    ("verify-T4", 5, 16, 4, 1, {}), ("verify-T8", 3, 16, 8, 1, {}),
]


@pytest.mark.parametrize("B,L,T,mode,env", [c[1:] for c in PDL_CHAIN_M2], ids=[c[0] for c in PDL_CHAIN_M2])
def test_replay_pdl_chain(B, L, T, mode, env, monkeypatch):
    """Replay steps + device commits with RSSM_PDL_CHAIN=1 against the float64 reference (staggered and padding rows,
    random acceptance, flushes)."""
    monkeypatch.setenv("RSSM_PDL_CHAIN", "1")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _run_replay(B, L, T, mode, SUPER, F32, BF16, 3 * L, seed=290 + B + T, variant=4) > 0


def test_conventional_pdl_chain(monkeypatch):
    """The conventional warp-item decode (variant 4) launched as a programmatic dependent (RSSM_PDL_CHAIN=1) against
    the float64 reference, one token and per-draft snapshots."""
    monkeypatch.setenv("RSSM_PDL_CHAIN", "1")
    _run_conventional((5, 1, SUPER, F32, BF16, False, True, False), 4)
    _run_conventional((3, 3, NANO, F32, BF16, True, True, False), 4)


@pytest.mark.parametrize("pipe", MMA_PIPES, ids=MMA_PIPE_IDS)
@pytest.mark.parametrize("accept", ["all", "one", "random"])
def test_replay_split_mma_readout_acceptance_and_strides(accept, pipe, monkeypatch):
    """Tensor-core readout with every acceptance pattern, padded checkpoint rows, strided inputs without z / D,
    in-phase rows (every item of a step flushes), T = 8 with a window of 24 (32 records: both record chunks of the
    readout and of the fold), and a standard window of 32."""
    _set_mma_pipe(monkeypatch, pipe)
    assert _run_replay(3, 8, 4, 1, SUPER, F32, BF16, 10, seed=171, accept=accept, variant=4) > 0
    assert _run_replay(3, 8, 4, 1, SMALL, F32, BF16, 8, seed=172, accept=accept, variant=4, state_pad=4) > 0
    assert _run_replay(8, 4, 2, 1, SMALL, F32, BF16, 8, seed=174, staggered=False, padding=False, with_z=False,
                       strided=True, use_D=False, accept=accept, variant=4) > 0
    assert _run_replay(3, 24, 8, 1, NANO, F32, BF16, 12, seed=176, accept=accept, variant=4) > 0
    assert _run_replay(3, 32, 1, 0, NANO, F32, BF16, 40, seed=175, variant=4) > 0
    # 16-bit rows with more than 16 records to fold: the launcher runs the CUDA-core readout (same results)
    assert _run_replay(3, 24, 1, 0, SMALL, BF16, BF16, 30, seed=177, variant=4) > 0


PREP_MODES = ["xsm", "xsm6", "xsm256", "xsmrt", "mma", "1", "0"]
PREP_MODE_IDS = ["x-staged", "x-staged-6ctas", "x-staged-256threads", "x-staged-runtime-T", "mma-dots", "loads-first",
                 "token-loop"]


@pytest.mark.parametrize("lf", PREP_MODES, ids=PREP_MODE_IDS)
@pytest.mark.parametrize("T", [2, 3, 4, 8])
def test_replay_split_prep_loads_first(T, lf, monkeypatch):
    """The speculative prep's versions: x rows staged in shared memory with more CTAs per SM (default; "xsm6": T = 8
    capped for 6 CTAs per SM instead of 8; T <= 4 in 128-thread CTAs by default, "xsm256": in 256-thread CTAs,
    RSSM_MAMBA2_PREP_SPEC_W4=0; by default exactly four tokens at dstate 128 with
    8-byte aligned B / C take the instance with T and N at compile time, "xsmrt": not, RSSM_MAMBA2_PREP_EXACT=0), this
    step's B / C loaded before their stores with the record dots on tensor cores
    (RSSM_MAMBA2_PREP_XSM=0), the same with the dots on CUDA cores (RSSM_MAMBA2_PREP_MMA_DOTS=0), and the earlier one
    load round trip per token (RSSM_MAMBA2_PREP_LF=0). All against the float64 reference: both model shapes,
    wrap-around (L = 8 with T drafts), padding and staggered rows, random acceptance, a GQA group of 16 heads (Super),
    fp16 activations, dstate 256 (the tensor-core dots need dstate <= 128: the CUDA-core ones run), 32 records (two
    record tiles) and strided inputs."""
    monkeypatch.setenv("RSSM_MAMBA2_PREP_LF", "0" if lf == "0" else "1")
    monkeypatch.setenv("RSSM_MAMBA2_PREP_MMA_DOTS", "1" if lf in ("xsm", "xsm6", "xsm256", "xsmrt", "mma") else "0")
    monkeypatch.setenv("RSSM_MAMBA2_PREP_XSM", {"xsm": "1", "xsm6": "6", "xsm256": "1", "xsmrt": "1"}.get(lf, "0"))
    monkeypatch.setenv("RSSM_MAMBA2_PREP_EXACT", "0" if lf == "xsmrt" else "1")
    monkeypatch.setenv("RSSM_MAMBA2_PREP_SPEC_W4", "0" if lf == "xsm256" else "1")
    assert _run_replay(5, 8, T, 1, SUPER, F32, BF16, 10, seed=300 + T, variant=4) > 0
    assert _run_replay(3, 16, T, 1, NANO, F32, BF16, 12, seed=310 + T, accept="all", variant=4) > 0
    assert _run_replay(3, 8, T, 1, SMALL, F32, F16, 10, seed=320 + T, variant=4) > 0
    assert _run_replay(2, 8, T, 1, dict(SMALL, N=256), F32, BF16, 8, seed=330 + T, variant=4) > 0
    assert _run_replay(3, 32 - T, T, 1, SMALL, F32, BF16, 24, seed=340 + T, variant=4) > 0
    assert _run_replay(4, 8, T, 1, NANO, F32, BF16, 10, seed=350 + T, strided=True, variant=4) > 0


@pytest.mark.sanitize
@pytest.mark.parametrize("pipe", MMA_PIPES, ids=MMA_PIPE_IDS)
def test_replay_split_mma_readout_sanitize(pipe, monkeypatch):
    """Small tensor-core-readout cases for compute-sanitizer: standard and speculative with flushes, padded rows,
    two record chunks."""
    _set_mma_pipe(monkeypatch, pipe)
    assert _run_replay(3, 4, 1, 0, SMALL, F32, BF16, 6, seed=181, variant=4) > 0
    assert _run_replay(3, 4, 3, 1, SMALL, F32, BF16, 5, seed=182, variant=4, state_pad=4) > 0
    assert _run_replay(2, 24, 8, 1, SMALL, F32, BF16, 6, seed=183, variant=4) > 0


@pytest.mark.parametrize("T", [3, 4])
def test_replay_split_prep_misaligned_bc(T, monkeypatch):
    """B views 4 bytes off an 8-byte boundary (a slice at an odd element pair of a fused projection) with C aligned:
    the launcher must not take the four-token prep's compile-time instance (8-byte B / C pieces) and the run-time one
    gives the float64 reference's outputs. T = 3 (run-time instance anyway) beside T = 4. C misaligned the same way is
    refused by variant 4's own input rule (the readouts load C in 4-element pieces), by name, before any launch."""
    monkeypatch.delenv("RSSM_MAMBA2_PREP_SPEC_W4", raising=False)
    monkeypatch.delenv("RSSM_MAMBA2_PREP_EXACT", raising=False)
    assert _run_replay(3, 8, T, 1, SUPER, F32, BF16, 6, seed=210 + T, variant=4, strided=True, bc_offset=2,
                       c_offset=8) > 0
    assert _run_replay(2, 16, T, 1, NANO, F32, BF16, 6, seed=215 + T, variant=4, strided=True, bc_offset=2,
                       c_offset=8) > 0
    with pytest.raises(RuntimeError, match="variant 4 needs Cm rows 8-byte aligned"):
        _run_replay(2, 8, T, 1, SUPER, F32, BF16, 2, seed=220 + T, variant=4, strided=True, bc_offset=8, c_offset=2)


@pytest.mark.sanitize
@pytest.mark.parametrize("T", [3, 4])
def test_replay_split_prep_w4_sanitize(T, monkeypatch):
    """The 128-thread x-staged speculative prep (the default up to four tokens; T = 3 the run-time instance, T = 4 the
    compile-time one) for compute-sanitizer: Super's group of 16 heads (4 per warp), Nano's 12 (a partial last warp's
    heads), flushes, padding rows, against the float64 reference."""
    monkeypatch.setenv("RSSM_MAMBA2_PREP_SPEC_W4", "1")
    monkeypatch.delenv("RSSM_MAMBA2_PREP_EXACT", raising=False)
    assert _run_replay(3, 8, T, 1, SUPER, F32, BF16, 5, seed=190 + T, variant=4) > 0
    assert _run_replay(2, 16, T, 1, NANO, F32, BF16, 5, seed=195 + T, variant=4) > 0
