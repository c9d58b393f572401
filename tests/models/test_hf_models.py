"""Hugging Face checkpoints -> SSM decode path, checked against the Hugging Face models themselves.

The checkpoints are written by transformers (``save_pretrained``) from tiny models with random weights
(tests/models/hf_tiny.py), so the names, layouts and config.json are the library's own. The reference
output is the Hugging Face mixer's forward over the whole sequence (its chunked PyTorch path, float32);
ours decodes the same tokens one step at a time through the loaded weights.
"""
from __future__ import annotations

import json
import math
import os
import sys

import pytest
import torch

from replayssm_trtllm.models import (HfCheckpoint, HfCheckpointError, load_hf_config, load_mixer_weights,
                                     load_ssm_decoder)

sys.path.insert(0, os.path.dirname(__file__))
import hf_tiny  # noqa: E402

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

KINDS = ("nemotron_h", "qwen3_5", "qwen3_next")
# float32 Hugging Face forward (chunked scan) against our float64 step-by-step decode
TOL = 1e-5


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


_BUILT = {}


def _checkpoint(kind, tmp_path_factory):
    """(kind, checkpoint dir, {layer: HF mixer module}), built once per session; sharded files for
    nemotron_h (index json), one file for the others."""
    if kind not in _BUILT:
        d = tmp_path_factory.mktemp(kind)
        mixers = hf_tiny.save(kind, d, seed=KINDS.index(kind),
                              max_shard_size="200KB" if kind == "nemotron_h" else "50MB")
        _BUILT[kind] = (kind, str(d), mixers)
    return _BUILT[kind]


@pytest.fixture(scope="module", params=KINDS)
def tiny(request, tmp_path_factory):
    return _checkpoint(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def nemotron(tmp_path_factory):
    return _checkpoint("nemotron_h", tmp_path_factory)


@pytest.fixture(scope="module")
def qwen35(tmp_path_factory):
    return _checkpoint("qwen3_5", tmp_path_factory)


def _decode(dec, hidden, slots, start=0):
    """One token per step from position ``start`` of ``hidden`` through every SSM layer of ``dec``, a commit
    after each step; returns ``{layer: outputs [B, steps, hidden]}``."""
    slots = torch.as_tensor(slots)
    outs = {i: [] for i in dec.spec.ssm_layers}
    for t in range(start, hidden.shape[1]):
        for i in dec.spec.ssm_layers:
            outs[i].append(dec.step(i, hidden[:, t:t + 1].double(), slots))
        dec.commit()
    return {i: torch.cat(o, 1) for i, o in outs.items()}


def _hf_outputs(mixers, hidden):
    with torch.no_grad():
        return {i: m(hidden) for i, m in mixers.items()}


def test_checkpoint_layout_is_found(tiny):
    kind, d, mixers = tiny
    spec = load_hf_config(d)
    assert spec.ssm_layers == tuple(sorted(mixers))
    ckpt = HfCheckpoint(d)
    if kind == "nemotron_h":
        assert os.path.isfile(os.path.join(d, "model.safetensors.index.json"))
        assert ckpt.mixer_prefix(spec, 2) == "backbone.layers.2.mixer."
    else:
        assert ckpt.mixer_prefix(spec, 1) == "model.layers.1.linear_attn."
    w = load_mixer_weights(ckpt, spec, spec.ssm_layers[0])
    # the loaded tensors are the HF module's parameters (Qwen3-Next's packed ones unpacked, checked below)
    hf = dict(mixers[spec.ssm_layers[0]].named_parameters())
    for name in ("A_log", "dt_bias", "conv1d.weight", "norm.weight", "out_proj.weight"):
        assert torch.equal(w[name], hf[name].detach()), name


@pytest.mark.parametrize("backend", ["conventional-reference", "replay-reference"])
def test_standard_decode_matches_hugging_face(tiny, backend):
    """Every SSM layer, 3 rows at odd slots, 23 tokens through a window of 4 (5 flushes per row)."""
    kind, d, mixers = tiny
    spec = load_hf_config(d)
    Bsz, N = 3, 23
    hidden = torch.randn(Bsz, N, spec.hidden_size, generator=torch.Generator().manual_seed(11))
    ref = _hf_outputs(mixers, hidden)
    dec = load_ssm_decoder(d, backend, num_slots=5, window=4)
    dec.reset(range(5))
    outs = _decode(dec, hidden, [3, 0, 4])
    for i in spec.ssm_layers:
        err = _rel(outs[i], ref[i])
        assert err < TOL, (kind, backend, i, err)


@pytest.mark.parametrize("backend", ["conventional-reference", "replay-reference"])
def test_speculative_decode_rejects_drafts_cleanly(tiny, backend):
    """T = 3 drafts per step: the accepted ones are the true next tokens, the rejected ones random
    inputs. Accepted outputs must equal the Hugging Face outputs at those positions, so nothing of a
    rejected draft (conv history or recurrent state) may survive the commit. Window 5 with T_max 3
    exercises the early flush rule; a padding row rides along."""
    kind, d, mixers = tiny
    spec = load_hf_config(d)
    gen = torch.Generator().manual_seed(12)
    Bsz, N, T = 2, 26, 3
    hidden = torch.randn(Bsz, N + T, spec.hidden_size, generator=gen)
    ref = _hf_outputs(mixers, hidden)
    dec = load_ssm_decoder(d, backend, num_slots=4, window=5, max_verify=T)
    dec.reset(range(4))
    slots = torch.tensor([1, -1, 2])
    pos = [0, 0]
    checked = 0
    while min(pos) < N:
        acc = torch.randint(1, T + 1, (Bsz,), generator=gen)
        done = [p >= N for p in pos]             # a finished row keeps stepping on random inputs, unchecked
        x = torch.randn(Bsz + 1, T, spec.hidden_size, generator=gen, dtype=torch.float64)
        for r in range(Bsz):
            if not done[r]:
                x[2 * r, :acc[r]] = hidden[r, pos[r]:pos[r] + int(acc[r])].double()
        for i in spec.ssm_layers:
            out = dec.step(i, x, slots)
            assert torch.count_nonzero(out[1]) == 0   # padding row
            for r in range(Bsz):
                if done[r]:
                    continue
                n = int(acc[r])
                err = _rel(out[2 * r, :n], ref[i][r, pos[r]:pos[r] + n])
                assert err < 10 * TOL, (kind, backend, i, pos[r], err)
                checked += n
        dec.commit(torch.tensor([int(acc[0]), 1, int(acc[1])]))
        pos = [pos[r] + int(acc[r]) for r in range(Bsz)]
    assert checked >= len(spec.ssm_layers) * Bsz * N


@pytest.mark.parametrize("backend", ["conventional-reference", "replay-reference"])
def test_prefill_then_decode_matches_hugging_face(tiny, backend):
    """A 9-token prompt through prefill (conv history and state loaded into the backend), then 15 decode
    steps (window 4): prompt outputs and decode outputs both equal the Hugging Face forward over all 24."""
    kind, d, mixers = tiny
    spec = load_hf_config(d)
    P, N = 9, 24
    hidden = torch.randn(2, N, spec.hidden_size, generator=torch.Generator().manual_seed(15))
    ref = _hf_outputs(mixers, hidden)
    dec = load_ssm_decoder(d, backend, num_slots=3, window=4)
    slots = torch.tensor([2, 0])
    dec.reset(slots.tolist())
    prompt = {i: dec.prefill(i, hidden[:, :P].double(), slots) for i in spec.ssm_layers}
    outs = _decode(dec, hidden, slots, start=P)
    for i in spec.ssm_layers:
        err = _rel(torch.cat([prompt[i], outs[i]], 1), ref[i])
        assert err < TOL, (kind, backend, i, err)


def test_hugging_face_comparison_is_sensitive(tiny):
    """The tolerance above separates right from wrong: a decoder whose first SSM layer has another
    layer's dt_bias (a plausible loading mistake) misses it by orders of magnitude."""
    kind, d, mixers = tiny
    spec = load_hf_config(d)
    hidden = torch.randn(2, 12, spec.hidden_size, generator=torch.Generator().manual_seed(13))
    i0, i1 = spec.ssm_layers[:2]
    ref = _hf_outputs({i0: mixers[i0]}, hidden)[i0]
    dec = load_ssm_decoder(d, "replay-reference", num_slots=2, window=4, layers=[i0])
    dec.mixers[i0].dt_bias = load_mixer_weights(HfCheckpoint(d), spec, i1)["dt_bias"].float()
    dec.reset(range(2))
    assert _rel(_decode(dec, hidden, [0, 1])[i0], ref) > 100 * TOL


def test_multimodal_qwen35_checkpoint(tmp_path):
    """Qwen3.5 as released: transformers' Qwen3_5ForConditionalGeneration saved with save_pretrained
    (model_type qwen3_5, text fields under text_config, tensors under model.language_model., a vision tower to
    ignore). The loader finds the mixers; a layer decodes to the module's own forward; the CLI check passes."""
    from replayssm_trtllm.cli import main
    mixers = hf_tiny.save("qwen3_5_vl", tmp_path, seed=7)
    spec = load_hf_config(tmp_path)
    assert spec.model_type == "qwen3_5" and spec.ssm_layers == (0, 1, 2)
    assert HfCheckpoint(tmp_path).mixer_prefix(spec, 2) == "model.language_model.layers.2.linear_attn."
    hidden = torch.randn(1, 9, spec.hidden_size, generator=torch.Generator().manual_seed(14))
    ref = _hf_outputs({2: mixers[2]}, hidden)[2]
    dec = load_ssm_decoder(tmp_path, "replay-reference", num_slots=1, window=4, layers=[2])
    dec.reset([0])
    assert _rel(_decode(dec, hidden, [0])[2], ref) < TOL
    assert main(["checkpoint", str(tmp_path), "-L", "4", "--decode-check", "6"]) == 0


# ---- bad checkpoints: clear errors ------------------------------------------------------------------
def _copy_without(d, tmp_path, drop=None, replace=None):
    from safetensors.torch import load_file, save_file
    src = {}
    for f in os.listdir(d):
        if f.endswith(".safetensors"):
            src.update(load_file(os.path.join(d, f)))
    if drop:
        src.pop(drop)
    for k, v in (replace or {}).items():
        src[k] = v
    save_file(src, str(tmp_path / "model.safetensors"))
    with open(os.path.join(d, "config.json")) as f, open(tmp_path / "config.json", "w") as g:
        g.write(f.read())
    return str(tmp_path)


def test_missing_tensor_is_named(nemotron, tmp_path):
    _, d, _ = nemotron
    p = _copy_without(d, tmp_path, drop="backbone.layers.2.mixer.D")
    spec = load_hf_config(p)
    with pytest.raises(HfCheckpointError, match=r"'backbone.layers.2.mixer.D' is missing \(expected shape \[8\]"):
        load_mixer_weights(HfCheckpoint(p), spec, 2)


def test_wrong_shape_is_named(qwen35, tmp_path):
    _, d, _ = qwen35
    p = _copy_without(d, tmp_path, replace={"model.layers.1.linear_attn.in_proj_z.weight": torch.zeros(200, 96)})
    spec = load_hf_config(p)
    with pytest.raises(HfCheckpointError, match=r"in_proj_z.weight' has shape \[200, 96\]; .* implies \[256, 96\]"):
        load_mixer_weights(HfCheckpoint(p), spec, 1)


def test_quantized_projection_is_refused_but_ssm_parameters_load(nemotron, tmp_path):
    _, d, _ = nemotron
    name = "backbone.layers.0.mixer.in_proj.weight"
    p = _copy_without(d, tmp_path, replace={name: torch.zeros(296, 48, dtype=torch.uint8),
                                            name + "_scale": torch.ones(296, 6, dtype=torch.float8_e4m3fn)})
    spec = load_hf_config(p)
    ck = HfCheckpoint(p)
    with pytest.raises(HfCheckpointError, match=r"in_proj.weight' is stored quantized \(dtype U8, with .*weight_scale"):
        load_mixer_weights(ck, spec, 0)
    w = load_mixer_weights(ck, spec, 0, projections=False)
    assert sorted(w) == ["A_log", "D", "conv1d.bias", "conv1d.weight", "dt_bias", "norm.weight"]


def test_layer_that_is_not_ssm_is_refused(tiny):
    kind, d, _ = tiny
    spec = load_hf_config(d)
    attn = next(i for i, t in enumerate(spec.layer_types) if t != "linear_attention")
    with pytest.raises(HfCheckpointError, match=f"layer {attn} is not an SSM layer"):
        load_mixer_weights(HfCheckpoint(d), spec, attn)
    with pytest.raises(ValueError, match="not SSM layers"):
        load_ssm_decoder(d, layers=[attn])


def test_config_spec_matches_the_hugging_face_module(tiny):
    kind, d, mixers = tiny
    spec = load_hf_config(d)
    m = mixers[spec.ssm_layers[0]]
    assert m.conv1d.weight.shape[0] == spec.conv_dim
    assert m.conv1d.weight.shape[-1] == spec.conv_kernel
    assert (m.conv1d.bias is not None) == spec.conv_bias
    assert m.A_log.shape[0] == spec.heads
    assert math.isclose(m.norm.variance_epsilon, spec.norm_eps)
