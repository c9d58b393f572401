"""Tensor parallelism of the SSM mixers (replayssm_trtllm.models.tensor_parallel): the ranks' slices partition
each mixer's tensors, and the ranks' decoders summed (the all-reduce after out_proj) decode like the unsplit
mixer, in float64, standard and speculative, over flushes, on the real models' layer shapes and on Hugging Face
checkpoints written by transformers."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.models import (ConventionalReference, HfConfigError, ReplayReference, SsmDecoder,
                                     TensorParallelDecoder, decode_side_by_side, gather_mixer_weights,
                                     load_ssm_decoder, make_mixer, mixer_weight_shapes, rank_spec,
                                     shard_mixer_weights, tensor_parallel_problems)

sys.path.insert(0, os.path.dirname(__file__))
from random_weights import random_mixer_weights  # noqa: E402
from test_decoder_shapes import _spec  # noqa: E402

def _spec_with_bias(name):
    """Mamba-2 with use_bias (in_proj / out_proj biases): out_proj's bias must be added once, not per rank."""
    from dataclasses import replace
    s = _spec(name, layers=1)
    return replace(s, proj_bias=True, conv_bias=True)


@pytest.mark.parametrize("name, tp", [("nemotron-3-nano-4b", 2), ("nemotron-3-nano-4b", 8),
                                      ("nemotron-3-super-120b", 4), ("qwen3.5-4b", 4), ("qwen3.5-4b", 16),
                                      ("qwen3.5-122b", 8)])
def test_shards_partition_the_mixer(name, tp):
    """Each rank's slice has the rank spec's shapes, and the slices gather back to the full tensors exactly."""
    spec = _spec(name, layers=1)
    w = random_mixer_weights(spec, torch.Generator().manual_seed(tp))
    rs = rank_spec(spec, tp)
    assert (rs.heads, rs.key_heads) == (spec.heads // tp, spec.key_heads // tp)
    assert (rs.head_dim, rs.state_dim, rs.hidden_size) == (spec.head_dim, spec.state_dim, spec.hidden_size)
    shards = [shard_mixer_weights(spec, w, tp, r) for r in range(tp)]
    want = mixer_weight_shapes(rs)
    for r, s in enumerate(shards):
        assert {k: tuple(v.shape) for k, v in s.items()} == want, r
    back = gather_mixer_weights(spec, shards)
    assert sorted(back) == sorted(w)
    for k in w:
        assert torch.equal(back[k], w[k]), k
    # disjoint: every element of a sliced tensor appears in exactly one rank (the rows of rank 0 and rank 1 differ)
    assert not torch.equal(shards[0]["out_proj.weight"], shards[1]["out_proj.weight"])


def test_mamba2_rank_takes_its_heads_groups_and_segments():
    """Rank r's in_proj rows are z, x of its heads, B, C of its groups and dt of its heads, in that order."""
    spec = _spec("tiny-mamba2", layers=1)        # 8 heads x P 32, 2 groups x N 64
    H, P, G, N = spec.heads, spec.head_dim, spec.key_heads, spec.state_dim
    w = random_mixer_weights(spec, torch.Generator().manual_seed(1))
    rows = torch.arange(w["in_proj.weight"].shape[0], dtype=torch.float64)[:, None].expand_as(w["in_proj.weight"])
    w["in_proj.weight"] = rows.clone()
    s1 = shard_mixer_weights(spec, w, 2, 1)
    got = s1["in_proj.weight"][:, 0].long().tolist()
    vd, kd = H * P, G * N
    z = list(range(vd // 2, vd))
    x = list(range(vd + vd // 2, 2 * vd))
    b = list(range(2 * vd + kd // 2, 2 * vd + kd))
    c = list(range(2 * vd + kd + kd // 2, 2 * vd + 2 * kd))
    dt = list(range(2 * vd + 2 * kd + H // 2, 2 * vd + 2 * kd + H))
    assert got == z + x + b + c + dt


def test_gdn_rank_takes_its_key_and_value_heads():
    """Rank r's in_proj_qkv rows are q, k of its key heads and v of its value heads (the value heads of its key
    heads, hv // (HV / H)); the per-head RMSNorm weight is replicated."""
    spec = _spec("tiny-gdn", layers=1)           # 2 key heads x K 64, 4 value heads x V 64
    H, K, HV, V = spec.key_heads, spec.state_dim, spec.heads, spec.head_dim
    w = random_mixer_weights(spec, torch.Generator().manual_seed(2))
    n = w["in_proj_qkv.weight"].shape[0]
    w["in_proj_qkv.weight"] = torch.arange(n, dtype=torch.float64)[:, None].expand(n, spec.hidden_size).clone()
    s0 = shard_mixer_weights(spec, w, 2, 0)
    got = s0["in_proj_qkv.weight"][:, 0].long().tolist()
    assert got == list(range(0, K)) + list(range(H * K, H * K + K)) + list(range(2 * H * K, 2 * H * K + 2 * V))
    assert torch.equal(s0["norm.weight"], w["norm.weight"])
    assert torch.equal(s0["A_log"], w["A_log"][:HV // 2])


def _split_decoders(spec, tp, backend, seed, dtype=torch.float64):
    """The full decoder and a TensorParallelDecoder of tp ranks over the same random weights."""
    gen = torch.Generator().manual_seed(seed)
    weights = {i: random_mixer_weights(spec, gen) for i in spec.ssm_layers}
    full = SsmDecoder(spec, {i: make_mixer(spec, w, dtype) for i, w in weights.items()}, backend(spec))
    return full, TensorParallelDecoder.from_weights(spec, weights, tp, backend, dtype)


@pytest.mark.parametrize("name, tp", [("nemotron-3-nano-4b", 8), ("nemotron-3-super-120b", 2), ("qwen3.5-4b", 4),
                                      ("qwen3.5-122b", 16)])
@pytest.mark.parametrize("mode", ["standard", "speculative"])
def test_split_replay_decode_equals_unsplit(name, tp, mode):
    """Float64 ReplaySSM: the sum of the ranks' outputs equals the unsplit mixer's, over flushes (window 4,
    a prompt, a padding row; speculative: 3 tokens per step and random acceptance)."""
    spec = _spec(name, layers=1)
    T = 1 if mode == "standard" else 3
    full, split = _split_decoders(spec, tp, lambda s: ReplayReference(s, 4, window=4, max_verify=T, mode=mode),
                                  seed=11)
    err = decode_side_by_side([full, split], torch.tensor([3, -1, 0]), 6 if mode == "standard" else 4, T, prompt=5,
                              generator=torch.Generator().manual_seed(12))
    assert err < 1e-12, err


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-gdn"])
def test_split_conventional_decode_with_biases_equals_unsplit(name):
    """Conventional float64 decoding, with conv / projection biases where the family has them: out_proj's bias is
    added once (rank 0), not tp times."""
    spec = _spec_with_bias(name) if name == "tiny-mamba2" else _spec(name, layers=2)
    full, split = _split_decoders(spec, 2, lambda s: ConventionalReference(s, 3, max_verify=2), seed=13)
    if name == "tiny-mamba2":
        assert "out_proj.bias" in split.ranks[1].mixers[spec.ssm_layers[0]].w
        assert float(split.ranks[1].mixers[spec.ssm_layers[0]].w["out_proj.bias"].abs().max()) == 0.0
    err = decode_side_by_side([full, split], torch.tensor([1, 2]), 4, 2, prompt=3,
                              generator=torch.Generator().manual_seed(14))
    assert err < 1e-12, err


@pytest.mark.parametrize("name, tp, field", [("nemotron-3-super-120b", 3, "mamba_num_heads"),
                                             ("nemotron-3-super-120b", 16, "n_groups"),
                                             ("qwen3.5-4b", 32, "linear_num_key_heads"),
                                             ("qwen3.5-122b", 3, "linear_num_value_heads")])
def test_indivisible_tp_is_refused_naming_the_field(name, tp, field):
    spec = _spec(name, layers=1)
    assert any(field in e for e in tensor_parallel_problems(spec, tp))
    with pytest.raises(HfConfigError, match=field):
        rank_spec(spec, tp)
    w = random_mixer_weights(spec, torch.Generator().manual_seed(0))
    with pytest.raises(HfConfigError, match=field):
        shard_mixer_weights(spec, w, tp, 0)


def test_bad_rank_and_tensors_are_refused():
    spec = _spec("tiny-gdn", layers=1)
    w = random_mixer_weights(spec, torch.Generator().manual_seed(0))
    for bad in (0, -1, 2.0, True):
        assert tensor_parallel_problems(spec, bad)
    with pytest.raises(ValueError, match="tp_rank must be an integer in \\[0, 2\\)"):
        shard_mixer_weights(spec, w, 2, 2)
    wrong = dict(w, **{"in_proj_z.weight": w["in_proj_z.weight"][:-1]})
    with pytest.raises(ValueError, match="'in_proj_z.weight' has shape"):
        shard_mixer_weights(spec, wrong, 2, 0)
    with pytest.raises(ValueError, match="not a gdn mixer tensor"):
        shard_mixer_weights(spec, dict(w, bogus=torch.zeros(1)), 2, 0)
    rs = rank_spec(spec, 2)
    ranks = [SsmDecoder(rs, {i: make_mixer(rs, shard_mixer_weights(spec, w, 2, r)) for i in spec.ssm_layers},
                        ReplayReference(rs, 2, window=4)) for r in range(2)]
    with pytest.raises(ValueError, match="a rank of 1 needs heads=4, key_heads=2"):
        TensorParallelDecoder(spec, ranks[:1])
    with pytest.raises(HfConfigError, match="linear_num_key_heads=2 is not divisible by tp_size=4"):
        TensorParallelDecoder(spec, ranks + ranks)


# ---- Hugging Face checkpoints written by transformers: load_ssm_decoder(tp_size, tp_rank) -------------------------

@pytest.mark.parametrize("kind", ["nemotron_h", "qwen3_5", "qwen3_next"])
@pytest.mark.parametrize("mode", ["standard", "speculative"])
def test_checkpoint_ranks_decode_like_the_whole_checkpoint(kind, mode, tmp_path):
    """load_ssm_decoder(..., tp_size=2, tp_rank=r) on a checkpoint written by transformers (Qwen3-Next: packed
    projections, unpacked then split): the two ranks summed decode like tp_size=1."""
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    import hf_tiny
    hf_tiny.save(kind, tmp_path, seed=3)
    T = 1 if mode == "standard" else 3
    kw = dict(num_slots=3, window=4, max_verify=T)
    full = load_ssm_decoder(tmp_path, "replay-reference", **kw)
    ranks = [load_ssm_decoder(tmp_path, "replay-reference", tp_size=2, tp_rank=r, **kw) for r in range(2)]
    assert ranks[0].spec.heads * 2 == full.spec.heads
    split = TensorParallelDecoder(full.spec, ranks)
    err = decode_side_by_side([full, split], torch.tensor([2, 0]), 5 if mode == "standard" else 3, T, prompt=4,
                              generator=torch.Generator().manual_seed(4))
    assert err < 1e-12, err
    with pytest.raises(HfConfigError, match="not divisible by tp_size=3"):
        load_ssm_decoder(tmp_path, "replay-reference", tp_size=3)
    with pytest.raises(ValueError, match="tp_rank must be an integer"):
        load_ssm_decoder(tmp_path, "replay-reference", tp_size=2, tp_rank=5)


# ---- the kernels backend on each rank (GPU; CPU emulation in CI) ---------------------------------------------------
def _rank_kernels_vs_whole_conventional(name, tp, mode, T, device):
    """Every rank on the kernels backend (bf16 activations, fp32 state, float32 mixers) over its slices, outputs
    summed, against float64 conventional decoding of the unsplit mixers: 2 layers, a prompt, 4 rows (one padding),
    window 8, 14 steps (flushes; speculative: random acceptance and early flushes). The ranks' shapes are the
    kernels' edge cases: one group per rank (Nemotron-3 at TP 8), one key head per rank (Qwen3.5 at TP 16)."""
    from replayssm_trtllm.models import ReplayKernels
    spec = _spec(name, layers=2)
    S = 6
    gen = torch.Generator().manual_seed(21)
    weights = {i: random_mixer_weights(spec, gen) for i in spec.ssm_layers}
    whole = SsmDecoder(spec, {i: make_mixer(spec, w) for i, w in weights.items()},
                       ConventionalReference(spec, S, max_verify=T))
    split = TensorParallelDecoder.from_weights(
        spec, weights, tp, lambda rs: ReplayKernels(rs, S, window=8, max_verify=T, mode=mode, device=device),
        torch.float32, device)
    err = decode_side_by_side([whole, split], torch.tensor([4, -1, 0, 2]), 14, T,
                              prompt=9, generator=torch.Generator().manual_seed(22))
    if device == "cuda":
        torch.cuda.synchronize()
    for d in split.ranks:
        d.backend.cache.check_errors()
    assert err < 3e-2, err


@pytest.mark.gpu
@pytest.mark.parametrize("name, tp", [("nemotron-3-nano-4b", 8), ("nemotron-3-super-120b", 8), ("qwen3.5-4b", 16),
                                      ("qwen3.5-122b", 8)])
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_rank_kernels_sum_to_the_whole_model(name, tp, mode, T):
    _rank_kernels_vs_whole_conventional(name, tp, mode, T, "cuda")


@pytest.mark.parametrize("name", ["tiny-mamba2", "tiny-gdn"])
@pytest.mark.parametrize("mode, T", [("standard", 1), ("speculative", 4)])
def test_rank_kernels_path_under_cpu_emulation(name, mode, T):
    """The same path with the ops emulated on the CPU (ops/emulation.py), TP 2 (one group / key head per rank)."""
    from replayssm_trtllm.ops.emulation import cpu_emulation
    with cpu_emulation():
        _rank_kernels_vs_whole_conventional(name, 2, mode, T, "cpu")


def test_split_requests_move_between_slots():
    """TensorParallelDecoder.export_requests / import_requests: every rank moves its own part of a request; the
    moved request then decodes like the unsplit decoder's copy of it (float64, speculative, after flushes)."""
    spec = _spec("nemotron-3-nano-4b", layers=1)
    full, split = _split_decoders(spec, 4, lambda s: ReplayReference(s, 4, window=4, max_verify=2,
                                                                     mode="speculative"), seed=15)
    g = torch.Generator().manual_seed(16)
    layer = spec.ssm_layers[0]
    for d in (full, split):
        d.reset([0, 1])
    for _ in range(5):
        h = torch.randn(2, 2, spec.hidden_size, generator=g, dtype=torch.float64)
        acc = torch.randint(1, 3, (2,), generator=g)
        for d in (full, split):
            d.step(layer, h, torch.tensor([0, 1]))
            d.commit(acc)
    full.import_requests([3], full.export_requests([1]))
    parts = split.export_requests([1])
    assert len(parts) == 4 and parts[0].ssm.shape[2] == spec.heads // 4
    split.import_requests([2], parts)
    worst = 0.0
    for _ in range(4):
        h = torch.randn(1, 2, spec.hidden_size, generator=g, dtype=torch.float64)
        acc = torch.randint(1, 3, (1,), generator=g)
        a = full.step(layer, h, torch.tensor([3]))
        b = split.step(layer, h, torch.tensor([2]))
        full.commit(acc)
        split.commit(acc)
        worst = max(worst, float((a - b).abs().max() / a.abs().max()))
    assert worst < 1e-12, worst
    with pytest.raises(ValueError, match=r"one RequestStates per rank \(4\); got 3"):
        split.import_requests([2], parts[:3])


# ---- any shape the split takes (hypothesis) -----------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _split_cases(draw):
    """(spec, tp): a Mamba-2 or GDN layer with small random dims and a tp that divides its heads and key heads."""
    from replayssm_trtllm.models import parse_hf_config
    family = draw(st.sampled_from(["mamba2", "gdn"]))
    tp = draw(st.sampled_from([1, 2, 3, 4]))
    key_heads = tp * draw(st.integers(1, 2))
    heads = key_heads * draw(st.integers(1, 3))
    head_dim, state_dim = draw(st.sampled_from([4, 8])), draw(st.sampled_from([4, 8]))
    hidden = draw(st.sampled_from([8, 24]))
    if family == "mamba2":
        cfg = {"model_type": "nemotron_h", "hidden_size": hidden, "hybrid_override_pattern": "M",
               "mamba_num_heads": heads, "mamba_head_dim": head_dim, "ssm_state_size": state_dim,
               "n_groups": key_heads, "use_bias": draw(st.booleans()), "use_conv_bias": draw(st.booleans())}
    else:
        cfg = {"model_type": "qwen3_5_text", "hidden_size": hidden, "num_hidden_layers": 1,
               "linear_num_key_heads": key_heads, "linear_num_value_heads": heads, "linear_key_head_dim": state_dim,
               "linear_value_head_dim": head_dim, "layer_types": ["linear_attention"]}
    return parse_hf_config(cfg), tp, draw(st.integers(0, 2**16))


@settings(max_examples=30, deadline=None)
@given(_split_cases())
def test_any_split_partitions_and_decodes_like_the_whole(case):
    """Random small layers of both families (biases on or off) at every tp dividing them: the slices gather back
    exactly, and the ranks' ReplaySSM decoders summed match the whole over 5 speculative steps with flushes."""
    spec, tp, seed = case
    w = random_mixer_weights(spec, torch.Generator().manual_seed(seed))
    back = gather_mixer_weights(spec, [shard_mixer_weights(spec, w, tp, r) for r in range(tp)])
    assert all(torch.equal(back[k], w[k]) for k in w)
    full, split = _split_decoders(spec, tp, lambda s: ReplayReference(s, 2, window=3, max_verify=2,
                                                                      mode="speculative"), seed=seed)
    err = decode_side_by_side([full, split], torch.tensor([1, 0]), 5, 2, prompt=2,
                              generator=torch.Generator().manual_seed(seed + 1))
    assert err < 1e-11, err
