"""The SSM decoder on the real models' layer shapes with random weights: ReplaySSM (float64 reference on
the CPU, the CUDA kernels on a GPU) against conventional float64 decoding of the same mixers."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.models import (ConventionalReference, ReplayKernels, ReplayReference, SsmDecoder,
                                     decode_side_by_side, make_mixer, parse_hf_config)

sys.path.insert(0, os.path.dirname(__file__))
from random_weights import random_mixer_weights  # noqa: E402

HIDDEN = 512   # the projections' input width does not reach the recurrence; keep the matmuls cheap


def _spec(name: str, layers: int = 2):
    if name.startswith("nemotron"):
        heads, head_dim = (96, 80) if name == "nemotron-3-nano-4b" else (128, 64)
        cfg = {"model_type": "nemotron_h", "hidden_size": HIDDEN, "hybrid_override_pattern": "M" * layers,
               "mamba_num_heads": heads, "mamba_head_dim": head_dim, "ssm_state_size": 128, "n_groups": 8}
    elif name == "tiny-mamba2":       # kernel-valid small shapes (P 32, N 64; 4 heads per group)
        cfg = {"model_type": "nemotron_h", "hidden_size": HIDDEN, "hybrid_override_pattern": "M" * layers,
               "mamba_num_heads": 8, "mamba_head_dim": 32, "ssm_state_size": 64, "n_groups": 2}
    elif name == "tiny-gdn":
        cfg = {"model_type": "qwen3_5_text", "hidden_size": HIDDEN, "num_hidden_layers": layers,
               "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
               "linear_value_head_dim": 64, "layer_types": ["linear_attention"] * layers}
    elif name == "qwen3.5-4b":
        cfg = {"model_type": "qwen3_5_text", "hidden_size": HIDDEN, "num_hidden_layers": layers,
               "linear_num_key_heads": 16, "linear_num_value_heads": 32, "layer_types": ["linear_attention"] * layers}
    elif name == "qwen3.5-122b":
        cfg = {"model_type": "qwen3_5_text", "hidden_size": HIDDEN, "num_hidden_layers": layers,
               "linear_num_key_heads": 16, "linear_num_value_heads": 64, "layer_types": ["linear_attention"] * layers}
    else:
        raise ValueError(name)
    return parse_hf_config(cfg)


def _decoders(spec, backends, seed, dtype_device, admission_phase="spread"):
    gen = torch.Generator().manual_seed(seed)
    weights = {i: random_mixer_weights(spec, gen) for i in spec.ssm_layers}
    out = []
    for be, (dtype, device) in zip(backends, dtype_device):
        mixers = {i: make_mixer(spec, w, dtype, device) for i, w in weights.items()}
        out.append(SsmDecoder(spec, mixers, be, admission_phase))
    return out


@pytest.mark.parametrize("name", ["nemotron-3-nano-4b", "qwen3.5-4b"])
@pytest.mark.parametrize("mode", ["standard", "speculative"])
def test_replay_reference_on_real_layer_shapes(name, mode):
    """Float64: replay and conventional agree to rounding over flushes, with a padding row."""
    spec = _spec(name, layers=1)
    T = 1 if mode == "standard" else 3
    conv = ConventionalReference(spec, 3, max_verify=T)
    rep = ReplayReference(spec, 3, window=4, max_verify=T, mode=mode)
    decs = _decoders(spec, [conv, rep], 5, [(torch.float64, "cpu")] * 2)
    err = decode_side_by_side(decs, torch.tensor([2, -1, 0]), 7 if mode == "standard" else 4, T,
                              generator=torch.Generator().manual_seed(6))
    assert err < 1e-10, err


GPU_SHAPES = ["nemotron-3-nano-4b", "nemotron-3-super-120b", "qwen3.5-4b", "qwen3.5-122b"]


def _kernels_vs_conventional(name, mode, T, device, admission_phase="spread"):
    """The kernels backend (bf16 activations, fp32 state, float32 mixers) against float64 conventional
    decoding of the same mixers: 2 layers, an 11-token prompt prefilled (the kernels backend prefills on the
    device with the conventional kernels), then 5 rows at scattered slots (one
    padding), window 8, 20 steps (flushes and, speculative, random acceptance with early flushes). The rows are
    admitted with ``admission_phase`` (the decoder's default "spread": neutral records ahead of the prompt)."""
    spec = _spec(name, layers=2)
    S = 9
    conv = ConventionalReference(spec, S, max_verify=T)
    ker = ReplayKernels(spec, S, window=8, max_verify=T, mode=mode, device=device)
    decs = _decoders(spec, [conv, ker], 7, [(torch.float64, "cpu"), (torch.float32, device)], admission_phase)
    # an 11-token prompt: non-zero checkpoints and conv histories
    err = decode_side_by_side(decs, torch.tensor([8, 0, -1, 5, 3]), 20, T, prompt=11,
                              generator=torch.Generator().manual_seed(8))
    if device == "cuda":
        torch.cuda.synchronize()
    ker.cache.check_errors()
    assert err < 3e-2, err


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_SHAPES)
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
@pytest.mark.parametrize("admission_phase", ["spread", None])
def test_replay_kernels_match_conventional_reference(name, mode, T, admission_phase):
    _kernels_vs_conventional(name, mode, T, "cuda", admission_phase)


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-gdn"])
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_replay_kernels_path_under_cpu_emulation(name, mode, T):
    """The same Python path (ReplayKernels, the device caches, the torch ops' argument handling, the device
    commit) with the ops emulated on the CPU by the float64 reference (ops/emulation.py), on small shapes the
    kernels also take: what CI can run of the GPU test above."""
    from replayssm_trtllm.ops.emulation import cpu_emulation
    with cpu_emulation():
        _kernels_vs_conventional(name, mode, T, "cpu")


def test_conventional_reset_skips_padding_entries():
    spec = _spec("tiny-mamba2", layers=1)
    be = ConventionalReference(spec, 3)
    be.state.fill_(1.0)
    be.reset([-1, 1])
    assert float(be.state[0, 2].min()) == 1.0 and float(be.state[0, 1].abs().max()) == 0.0


def test_decoder_refuses_an_incomplete_or_repeated_step():
    """The cursors are shared by the layers: a commit after a step that skipped a layer, a layer stepped
    twice, or layers stepping different rows would corrupt state silently, so each is refused."""
    spec = _spec("qwen3.5-4b", layers=2)
    (dec,) = _decoders(spec, [ReplayReference(spec, 2, window=4)], 1, [(torch.float64, "cpu")])
    dec.reset(range(2))
    h = torch.randn(2, 1, spec.hidden_size, dtype=torch.float64)
    dec.step(0, h, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="layer 0 already stepped"):
        dec.step(0, h, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"got slots \[1, 0\], this step's earlier layers \[0, 1\]"):
        dec.step(1, h, torch.tensor([1, 0]))
    with pytest.raises(ValueError, match=r"SSM layers \[1\] did not step"):
        dec.commit()
    with pytest.raises(ValueError, match="T=2 differs from this step's T=1"):
        dec.step(1, torch.randn(2, 2, spec.hidden_size, dtype=torch.float64), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"'hidden' must be \[B=2, T, 512\]"):
        dec.step(1, h[..., :10], torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="layer 7 is not an SSM layer"):
        dec.step(7, h, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="a decode step is open"):
        dec.reset([0])
    dec.step(1, h, torch.tensor([0, 1]))
    dec.commit()
    with pytest.raises(ValueError, match="no step ran"):
        dec.commit()
    hist = dec.conv[0].history.clone()
    dec.reset([-1, 1])                               # a padding entry is skipped, slot 1 restarts
    assert torch.equal(dec.conv[0].history[0], hist[0]) and torch.count_nonzero(dec.conv[0].history[1]) == 0


def test_prefill_refusals():
    spec = _spec("nemotron-3-super-120b", layers=1)
    (dec,) = _decoders(spec, [ReplayReference(spec, 2, window=4)], 1, [(torch.float64, "cpu")])
    dec.reset(range(2))
    h = torch.randn(2, 3, spec.hidden_size, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"every row needs a slot \(>= 0\)"):
        dec.prefill(0, h, torch.tensor([0, -1]))
    with pytest.raises(ValueError, match="layer 1 is not an SSM layer"):
        dec.prefill(1, h, torch.tensor([0, 1]))
    dec.step(0, h[:, :1], torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="a decode step is open"):
        dec.prefill(0, h, torch.tensor([0, 1]))
    dec.commit()
    hist = dec.conv[0].history.clone()
    with pytest.raises(ValueError, match=r"slots \[0, 1\] decoded since their reset\(\)"):
        dec.prefill(0, h, torch.tensor([0, 1]))
    assert torch.equal(dec.conv[0].history, hist)      # refused before anything changed
    dec.reset([1])
    dec.prefill(0, h[1:], torch.tensor([1]))
    with pytest.raises(ValueError, match=r"slots \[1\] already prefilled layer 0"):
        dec.prefill(0, h[1:], torch.tensor([1]))
    with pytest.raises(ValueError, match=r"slots \[0\] have decoded since their reset"):   # the backend's own guard
        dec.backend.load_state(0, torch.tensor([0]), torch.zeros(1, 128, 64, 128))
