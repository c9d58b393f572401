"""The decoder's flush phase at admission (SsmDecoder(admission_phase=...), the default "spread"): rows reset together
start with neutral records (state/phase.py), so after their first window they no longer all flush on the same step,
and every output stays that of conventional decoding (float64: to rounding). Also the prompt's state loaded under
the neutral records, the refusals, and the kernels backend's Python path under CPU emulation."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.models import ConventionalReference, ReplayKernels, ReplayReference, SsmDecoder, make_mixer
from replayssm_trtllm.models.backends import check_admission_phase

sys.path.insert(0, os.path.dirname(__file__))
from random_weights import random_mixer_weights  # noqa: E402
from test_decoder_shapes import _spec  # noqa: E402

F64 = torch.float64


def _mixers(spec, seed, dtype=F64, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return {i: make_mixer(spec, random_mixer_weights(spec, gen), dtype, device) for i in spec.ssm_layers}


def _run(decs, ring_len_of, slots, steps, T, prompt, seed):
    """Reset, prefill ``prompt`` random tokens, step ``steps`` times (random acceptance when T > 1). Returns the
    per-decoder outputs [step][layer] and, per decoder with a ring, the number of rows whose ring shrank at each
    commit (the rows that flushed)."""
    spec = decs[0].spec
    gen = torch.Generator().manual_seed(seed)
    slots = torch.as_tensor(slots)
    for d in decs:
        d.reset(slots.tolist())
    if prompt:
        ph = torch.randn(len(slots), prompt, spec.hidden_size, generator=gen, dtype=F64)
        for d in decs:
            for layer in spec.ssm_layers:
                d.prefill(layer, ph.to(next(iter(d.mixers.values())).dtype), slots)
    outs = [[] for _ in decs]
    flushes = [[] for _ in decs]
    for _ in range(steps):
        hidden = torch.randn(len(slots), T, spec.hidden_size, generator=gen, dtype=F64)
        acc = torch.randint(1, T + 1, (len(slots),), generator=gen) if T > 1 else None
        for k, d in enumerate(decs):
            m = next(iter(d.mixers.values()))
            outs[k].append([d.step(layer, hidden.to(m.device, m.dtype), slots).double().cpu()
                            for layer in spec.ssm_layers])
            before = ring_len_of[k]().clone() if ring_len_of[k] else None
            d.commit(acc)
            if before is not None:
                after = ring_len_of[k]()
                flushes[k].append(int((after[slots] < before[slots]).sum()))
    return outs, flushes


def _worst(a, b):
    return max(float((y - x).abs().max() / x.abs().max()) for sa, sb in zip(a, b) for x, y in zip(sa, sb))


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-gdn"])
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 3)])
def test_spread_admission_keeps_outputs_and_spreads_flushes(name, mode, T):
    """16 rows reset together, window 8, a 5-token prompt, 24 steps: the replay decoder with "spread" and with None
    against conventional float64 decoding (to rounding); right after reset the rows hold 0..7, 0..7 neutral
    records; without a phase every row flushes on the same steps, with "spread" after the first window at most
    ceil(16 T / 8) rows per step (one-token: 2)."""
    spec = _spec(name, layers=2)
    S, L = 16, 8
    mixers = _mixers(spec, 3)
    conv = SsmDecoder(spec, mixers, ConventionalReference(spec, S, max_verify=T))
    reps = {ph: ReplayReference(spec, S, window=L, max_verify=T, mode=mode) for ph in (None, "spread")}
    decs = [conv] + [SsmDecoder(spec, mixers, reps[ph], admission_phase=ph) for ph in (None, "spread")]
    assert SsmDecoder(spec, mixers, ReplayReference(spec, S, window=L)).admission_phase == "spread"  # the default
    slots = list(range(S))
    decs[2].reset(slots)
    assert reps["spread"].cursors.ring_len.tolist() == [i % L for i in range(S)]
    ring = [None] + [(lambda r=reps[ph]: r.cursors.ring_len) for ph in (None, "spread")]
    outs, flushes = _run(decs, ring, slots, 24, T, 5, 4)
    assert _worst(outs[0], outs[1]) < 1e-10
    assert _worst(outs[0], outs[2]) < 1e-10
    none, spread = flushes[1], flushes[2]
    assert sum(none) > 0 and sum(spread) >= sum(none)
    if T == 1:
        assert set(none) == {0, S}                     # in phase: all rows or none
        assert max(spread[L:]) == S // L and min(spread[L:]) == S // L
    else:
        assert max(spread[L:]) < max(none)


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-gdn"])
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_kernels_path_spread_admission_under_cpu_emulation(name, mode, T):
    """The kernels backend's Python path (device caches, neutral records written by indexed stores, the device
    commit) with the torch ops emulated on the CPU: "spread" against None and against conventional float64
    decoding, with a 7-token prompt prefilled under the neutral records."""
    from replayssm_trtllm.ops.emulation import cpu_emulation
    spec = _spec(name, layers=2)
    S, L = 12, 8
    with cpu_emulation():
        mixers64, mixers32 = _mixers(spec, 5), _mixers(spec, 5, torch.float32)
        conv = SsmDecoder(spec, mixers64, ConventionalReference(spec, S, max_verify=T))
        kers = {ph: ReplayKernels(spec, S, window=L, max_verify=T, mode=mode, device="cpu") for ph in (None, "spread")}
        decs = [conv] + [SsmDecoder(spec, mixers32, kers[ph], admission_phase=ph) for ph in (None, "spread")]
        ring = [None] + [(lambda k=kers[ph]: k.cache.ring_len.long()) for ph in (None, "spread")]
        slots = [3, 0, 7, 11, 5, 9, 1, 2, 10]
        outs, flushes = _run(decs, ring, slots, 18, T, 7, 6)
        for k in kers.values():
            k.cache.check_errors()
    assert _worst(outs[0], outs[1]) < 3e-2 and _worst(outs[0], outs[2]) < 3e-2
    assert _worst(outs[1], outs[2]) < 3e-2
    assert sum(flushes[2]) > 0
    if T == 1:
        assert max(flushes[1]) == len(slots) and max(flushes[2][L:]) < len(slots)


def test_admission_phase_int_and_refusals():
    """An int phase starts every row with that many neutral records (checked by the cache: at most L - 1); bad
    values are refused at construction; the conventional backend ignores the phase; a prompt may not be loaded once
    a slot has decoded past its admission records."""
    spec = _spec("tiny-gdn", layers=1)
    mixers = _mixers(spec, 7)
    rep = ReplayReference(spec, 4, window=6)
    dec = SsmDecoder(spec, mixers, rep, admission_phase=3)
    dec.reset([0, 2])
    assert rep.cursors.ring_len.tolist() == [3, 0, 3, 0]
    with pytest.raises(ValueError, match=r"must be in \[0, L - 1 = 5\]; got 6"):
        SsmDecoder(spec, mixers, ReplayReference(spec, 4, window=6), admission_phase=6).reset([1])
    for bad in ("even", -1, True, 1.5, [0, 1]):
        with pytest.raises(ValueError, match="'admission_phase' must be None, 'spread' or an int >= 0"):
            SsmDecoder(spec, mixers, rep, admission_phase=bad)
    with pytest.raises(ValueError, match="'admission_phase' must be None"):
        check_admission_phase("op", torch.tensor([1]))
    conv = ConventionalReference(spec, 2)
    SsmDecoder(spec, mixers, conv, admission_phase="spread").reset([0, 1])   # no ring: nothing to do
    # the prompt goes under the neutral records; after a decode step the slot is no longer fresh
    h = torch.randn(2, 3, spec.hidden_size, dtype=F64)
    dec.prefill(spec.ssm_layers[0], h, [0, 2])
    dec.step(spec.ssm_layers[0], h[:, :1], [0, 2])
    dec.commit()
    with pytest.raises(ValueError, match=r"slots \[0\] have decoded since their reset \(ring length h = \[4\], "
                                         r"their admission's neutral records \[3\]\)"):
        rep.load_state(0, torch.tensor([0]), torch.zeros((1,) + tuple(rep.caches[0].ckpt.shape[1:]), dtype=F64))
