"""SsmDecoder.export_requests / import_requests: requests taken out of a decoder (their SSM states after the
committed tokens and their conv histories) and resumed in other slots, or in another decoder of the same model, decode
exactly as if they had never left: float64 on the CPU for the conventional and ReplaySSM references, the kernels
backend under CPU emulation in CI and on the GPU; standard and speculative steps, after flushes, rows admitted with
neutral records."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.models import (ConventionalReference, ReplayKernels, ReplayReference, SsmDecoder, make_mixer)

sys.path.insert(0, os.path.dirname(__file__))
from random_weights import random_mixer_weights  # noqa: E402
from test_decoder_shapes import _spec  # noqa: E402

SLOTS = 6


def _decoder(spec, weights, backend, dtype, device):
    return SsmDecoder(spec, {i: make_mixer(spec, w, dtype, device) for i, w in weights.items()}, backend)


def _run(name, backend_of, T, dtype=torch.float64, device="cpu"):
    """Decode rows on slots [0, 2, 4] (prompt, then 7 steps: flushes at window 4), export slots 2 and 4, import
    them into slots 1 and 5 of the same decoder and into slots 3 and 0 of a fresh one, then decode 6 more steps
    feeding each resumed copy the same inputs as its original. Returns the largest relative output difference
    between originals and copies."""
    spec = _spec(name, layers=2)
    weights = {i: random_mixer_weights(spec, torch.Generator().manual_seed(30 + i)) for i in spec.ssm_layers}
    a = _decoder(spec, weights, backend_of(spec), dtype, device)
    b = _decoder(spec, weights, backend_of(spec), dtype, device)
    g = torch.Generator().manual_seed(31)
    H = spec.hidden_size
    put = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
    rows = torch.tensor([0, 2, 4])
    a.reset(rows.tolist())
    prompt = torch.randn(3, 5, H, generator=g, dtype=torch.float64)
    for layer in spec.ssm_layers:
        a.prefill(layer, put(prompt), rows)

    def step(dec, slots, hidden, acc):
        outs = [dec.step(layer, put(hidden), torch.as_tensor(slots)).double().cpu() for layer in spec.ssm_layers]
        dec.commit(acc)
        return outs

    for _ in range(7):
        acc = torch.randint(1, T + 1, (3,), generator=g) if T > 1 else None
        step(a, rows, torch.randn(3, T, H, generator=g, dtype=torch.float64), acc)
    moved = a.export_requests([2, 4])
    a.import_requests([1, 5], moved)
    b.import_requests([3, 0], moved.to("cpu"))
    worst = 0.0
    for _ in range(6):
        hid = torch.randn(2, T, H, generator=g, dtype=torch.float64)
        acc = torch.randint(1, T + 1, (2,), generator=g) if T > 1 else None
        ya = step(a, [2, 4, 1, 5], torch.cat([hid, hid]), None if acc is None else torch.cat([acc, acc]))
        yb = step(b, [3, 0], hid, acc)
        for la, lb in zip(ya, yb):
            ref = la[:2].abs().max()
            worst = max(worst, float((la[2:] - la[:2]).abs().max() / ref), float((lb - la[:2]).abs().max() / ref))
    return worst


@pytest.mark.parametrize("name", ["nemotron-3-nano-4b", "qwen3.5-4b"])
@pytest.mark.parametrize("T", [1, 3])
@pytest.mark.parametrize("kind", ["conventional", "replay"])
def test_resumed_requests_decode_like_the_originals(name, T, kind):
    mode = "standard" if T == 1 else "speculative"
    backend_of = (lambda s: ConventionalReference(s, SLOTS, max_verify=T)) if kind == "conventional" else \
        (lambda s: ReplayReference(s, SLOTS, window=4, max_verify=T, mode=mode))
    assert _run(name, backend_of, T) < 1e-12


def _kernels(name, T, device):
    mode = "standard" if T == 1 else "speculative"
    return _run(name, lambda s: ReplayKernels(s, SLOTS, window=4, max_verify=T, mode=mode, device=device), T,
                torch.float32, device)


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-gdn"])
@pytest.mark.parametrize("T", [1, 3])
def test_resumed_requests_on_the_kernels_path_under_cpu_emulation(name, T):
    """The kernels backend's path (device caches' current_state, checkpoint loading) with the ops emulated: a resumed
    copy's checkpoint is the fold of the original's ring, so the two agree to the rounding of fp32 folds and of the
    records (Mamba-2: bf16 x / B are the inputs' own values; GDN: fp16 u)."""
    from replayssm_trtllm.ops.emulation import cpu_emulation
    with cpu_emulation():
        assert _kernels(name, T, "cpu") < (1e-4 if name == "tiny-mamba2" else 5e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["nemotron-3-super-120b", "qwen3.5-122b"])
@pytest.mark.parametrize("T", [1, 4])
def test_resumed_requests_on_the_kernels(name, T):
    """bf16 outputs of two kernel paths (the original's checkpoint + ring, the copy's folded checkpoint): the
    tolerance of the decoder's other kernel tests (test_decoder_shapes.py); an unfolded ring is off by ~0.4."""
    assert _kernels(name, T, "cuda") < 3e-2


def test_export_and_import_refusals():
    spec = _spec("tiny-gdn", layers=1)
    w = {i: random_mixer_weights(spec, torch.Generator().manual_seed(0)) for i in spec.ssm_layers}
    d = _decoder(spec, w, ReplayReference(spec, SLOTS, window=4), torch.float64, "cpu")
    d.reset([0])
    h = torch.randn(1, 1, spec.hidden_size, dtype=torch.float64)
    d.step(spec.ssm_layers[0], h, torch.tensor([0]))
    with pytest.raises(ValueError, match="a decode step is open"):
        d.export_requests([0])
    d.commit()
    with pytest.raises(ValueError, match=r"slots must be in \[0, 6\); got \[6\]"):
        d.export_requests([0, 6])
    st = d.export_requests([0])
    with pytest.raises(ValueError, match=r"one slot \(>= 0\) per exported request \(1\); got \[1, 2\]"):
        d.import_requests([1, 2], st)
    other = _spec("tiny-mamba2", layers=1)
    wm = {i: random_mixer_weights(other, torch.Generator().manual_seed(0)) for i in other.ssm_layers}
    dm = _decoder(other, wm, ReplayReference(other, SLOTS, window=4), torch.float64, "cpu")
    with pytest.raises(ValueError, match="the states are of gdn layers"):
        dm.import_requests([1], st)
    d.import_requests([3], st)
    with pytest.raises(ValueError, match="decoded since their reset"):
        d.prefill(spec.ssm_layers[0], torch.randn(1, 2, spec.hidden_size, dtype=torch.float64), torch.tensor([3]))
