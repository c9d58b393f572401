"""config.json -> SsmMixerSpec (no transformers needed), the conv history, and the mixers' own checks."""
from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from replayssm_trtllm.models import (CausalConvState, HfConfigError, Mamba2Mixer, load_hf_config,
                                     parse_hf_config)
from replayssm_trtllm.presets import PRESETS


def _nemotron(pattern, heads, head_dim, state, groups, **kw):
    cfg = {"model_type": "nemotron_h", "hidden_size": 3136, "hybrid_override_pattern": pattern,
           "mamba_num_heads": heads, "mamba_head_dim": head_dim, "ssm_state_size": state, "n_groups": groups,
           "conv_kernel": 4, "use_conv_bias": True, "layer_norm_epsilon": 1e-5, "time_step_limit": [0.0, math.inf]}
    cfg.update(kw)
    return cfg


def _qwen35(layers, kh, vh, nested=True, **kw):
    text = {"model_type": "qwen3_5_text", "hidden_size": 2560, "num_hidden_layers": layers,
            "linear_num_key_heads": kh, "linear_num_value_heads": vh, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4}
    text.update(kw)
    return {"model_type": "qwen3_5", "text_config": text, "vision_config": {}} if nested else text


# Layer patterns with the presets' counts (the order within the pattern is not the released one).
REAL = {
    "nemotron-3-nano-4b": _nemotron("M-M*" * 4 + "M-" * 13, 96, 80, 128, 8),
    "nemotron-3-super-120b": _nemotron("MEMEM*" * 8 + "ME" * 16, 128, 64, 128, 8),
    "qwen3.5-4b": _qwen35(32, 16, 32),
    "qwen3.5-122b": _qwen35(48, 16, 64),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_model_shapes_give_the_presets(name):
    spec = parse_hf_config(REAL[name])
    p, got = PRESETS[name], spec.to_preset(name)
    assert (got.family, got.heads, got.head_dim, got.state_dim, got.key_heads) == \
        (p.family, p.heads, p.head_dim, p.state_dim, p.key_heads)
    assert (got.num_ssm_layers, got.num_attention_layers) == (p.num_ssm_layers, p.num_attention_layers)
    assert spec.kernel_support_errors() == ()


def test_nemotron_fields():
    spec = parse_hf_config(_nemotron("M*M-", 8, 32, 64, 2, use_bias=True))
    assert spec.ssm_layers == (0, 2) and spec.layer_types[1] == "full_attention"
    assert spec.conv_dim == 8 * 32 + 2 * 2 * 64 and spec.proj_bias and spec.conv_bias
    # legacy names and the transformers-5 encoding of infinity
    legacy = {"model_type": "nemotron_h", "hidden_size": 64, "layers_block_type": ["mamba", "attention", "mamba"],
              "mamba_num_heads": 4, "mamba_head_dim": 32, "ssm_state_size": 64, "mamba_n_groups": 1,
              "mamba_d_conv": 3, "mamba_conv_bias": False, "time_step_limit": [0.0, {"__float__": "Infinity"}]}
    spec = parse_hf_config(legacy)
    assert spec.ssm_layers == (0, 2) and spec.key_heads == 1 and spec.conv_kernel == 3 and not spec.conv_bias
    assert spec.time_step_limit == (0.0, math.inf)


def test_json_file_with_infinity_literal(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(_nemotron("MM", 8, 64, 128, 8)))   # writes Infinity
    assert "Infinity" in (tmp_path / "config.json").read_text()
    assert load_hf_config(tmp_path).time_step_limit == (0.0, math.inf)
    assert load_hf_config(tmp_path / "config.json").heads == 8


def test_qwen_layer_types_and_packing():
    spec = parse_hf_config(_qwen35(8, 2, 4))
    assert spec.ssm_layers == (0, 1, 2, 4, 5, 6) and not spec.packed_projections
    explicit = _qwen35(3, 2, 4, nested=False, layer_types=["full_attention", "linear_attention", "linear_attention"])
    assert parse_hf_config(explicit).ssm_layers == (1, 2)
    nxt = dict(_qwen35(4, 2, 4, nested=False), model_type="qwen3_next")
    assert parse_hf_config(nxt).packed_projections


@pytest.mark.parametrize("cfg, match", [
    ({"model_type": "llama"}, "model_type 'llama' is not supported"),
    (_nemotron("MX", 8, 32, 64, 2), r"unknown layer codes \['X'\]"),
    (_nemotron("M*", 12, 32, 64, 8), "mamba_num_heads=12 must be a multiple of n_groups=8"),
    (_nemotron("M*", 8, 32, 64, 2, mamba_hidden_act="gelu"), "mamba_hidden_act='gelu' is not supported"),
    (_nemotron("M*", 8, 32, 64, 2, time_step_limit=[1.0]), r"'time_step_limit' must be \[min, max\]"),
    (_nemotron("**", 8, 32, 64, 2), "no SSM layer"),
    ({"model_type": "qwen3_5"}, "missing 'text_config'"),
    (_qwen35(4, 3, 4), "linear_num_value_heads=4 must be a multiple of linear_num_key_heads=3"),
    (_qwen35(4, 2, 4, layer_types=["linear_attention"]), "'layer_types' must list num_hidden_layers=4"),
    ({k: v for k, v in _nemotron("M", 8, 32, 64, 2).items() if k != "mamba_head_dim"},
     "missing field 'mamba_head_dim'"),
])
def test_bad_configs_name_the_field(cfg, match):
    with pytest.raises(HfConfigError, match=match):
        parse_hf_config(cfg)


def test_kernel_support_errors_name_the_field():
    assert "mamba_head_dim=48" in parse_hf_config(_nemotron("M", 8, 48, 64, 2)).kernel_support_errors()[0]
    assert "linear_key_head_dim=96" in parse_hf_config(
        _qwen35(4, 2, 4, linear_key_head_dim=96)).kernel_support_errors()[0]


def test_mamba2_mixer_refuses_a_dt_clamp():
    spec = parse_hf_config(_nemotron("M", 8, 32, 64, 2, time_step_limit=[0.0, 0.1]))
    with pytest.raises(ValueError, match=r"time_step_limit=\(0.0, 0.1\) is not supported"):
        Mamba2Mixer(spec, {})


def test_conv_history_matches_a_full_causal_conv():
    """Steps of 1-3 tokens with partial acceptance: each step's accepted outputs equal the causal
    conv over the accepted sequence so far (F.conv1d with left padding)."""
    gen = torch.Generator().manual_seed(3)
    Ch, K, S = 5, 4, 3
    w = torch.randn(Ch, 1, K, generator=gen, dtype=torch.float64)
    bias = torch.randn(Ch, generator=gen, dtype=torch.float64)
    conv = CausalConvState(S, Ch, K)
    conv.reset(range(S))
    slots = torch.tensor([2, -1, 0])
    seqs = [[], [], []]
    for _ in range(12):
        T = int(torch.randint(1, 4, (1,), generator=gen))
        x = torch.randn(3, T, Ch, generator=gen, dtype=torch.float64)
        out = conv.apply(slots, x, w, bias)
        acc = torch.randint(1, T + 1, (3,), generator=gen)
        for r in (0, 2):
            seq = torch.stack(seqs[r] + [x[r, t] for t in range(T)], 0) if seqs[r] else x[r]
            full = F.conv1d(F.pad(seq.T[None], (K - 1, 0)), w, bias, groups=Ch)[0].T   # [len, Ch]
            torch.testing.assert_close(out[r], full[-T:], rtol=1e-12, atol=1e-12)
            seqs[r] += [x[r, t] for t in range(int(acc[r]))]
        conv.commit(acc)
    assert torch.count_nonzero(conv.history[1]) == 0     # slot 1 was never stepped
    with pytest.raises(ValueError, match="no apply"):
        conv.commit()
    conv.apply(slots, torch.randn(3, 2, Ch, dtype=torch.float64), w, bias)
    with pytest.raises(ValueError, match=r"'accepted' must be \[B=3\] in \[1, 2\]"):
        conv.commit(torch.tensor([3, 1, 1]))


def test_traffic_cli_reads_a_config(tmp_path, capsys):
    """`traffic --config` on a Qwen3.5-122B-shaped config.json prints what `--model qwen3.5-122b` prints
    (same shape and layer counts), apart from the model line."""
    from replayssm_trtllm.cli import main
    (tmp_path / "config.json").write_text(json.dumps(REAL["qwen3.5-122b"]))
    assert main(["traffic", "--config", str(tmp_path), "-T", "4"]) == 0
    from_config = capsys.readouterr().out.splitlines()
    assert main(["traffic", "--model", "qwen3.5-122b", "-T", "4"]) == 0
    from_preset = [l for l in capsys.readouterr().out.splitlines() if not l.startswith("  note:")]
    assert from_config[0].startswith(f"model config {tmp_path}: gdn, 36 SSM layers x 64 heads")
    assert from_config[1:] == from_preset[1:]
    with pytest.raises(SystemExit, match="model_type 'llama' is not supported"):
        (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
        main(["traffic", "--config", str(tmp_path)])


def test_kernels_cli_reads_a_config(tmp_path, capsys):
    """`kernels --config` on a Qwen3.5-122B-shaped config.json lists the same kernels and workspaces as `--model
    qwen3.5-122b` (host queries of the kernel library; skipped when it is not built)."""
    from replayssm_trtllm.cli import main
    from replayssm_trtllm.ops._lib import KernelLibraryError, load_library
    try:
        load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")
    (tmp_path / "config.json").write_text(json.dumps(REAL["qwen3.5-122b"]))
    assert main(["kernels", "--config", str(tmp_path), "-B", "1,8,128", "-T", "1,4"]) == 0
    from_config = capsys.readouterr().out.splitlines()
    assert main(["kernels", "--model", "qwen3.5-122b", "-B", "1,8,128", "-T", "1,4"]) == 0
    from_preset = capsys.readouterr().out.splitlines()
    rows = [l for l in from_config if l.strip()[:1].isdigit()]
    assert len(rows) == 6 and rows == [l for l in from_preset if l.strip()[:1].isdigit()]
    assert from_config[0].startswith(f"model config {tmp_path}: gdn, 64 heads")


def test_checkpoint_cli_names_the_matching_preset(tmp_path, capsys):
    """A config with Nemotron-3-Nano-4B's mixer shape is reported as that benchmarked preset's shape (the CLI
    stops at the tensors: there are no weights here)."""
    pytest.importorskip("safetensors")
    from safetensors.torch import save_file
    from replayssm_trtllm.cli import main
    (tmp_path / "config.json").write_text(json.dumps(REAL["nemotron-3-nano-4b"]))
    save_file({"backbone.embeddings.weight": torch.zeros(2, 2)}, str(tmp_path / "model.safetensors"))
    assert main(["checkpoint", str(tmp_path)]) == 1           # no mixer tensors in this file
    out = capsys.readouterr().out
    assert "layer shape of the benchmarked preset nemotron-3-nano-4b" in out
    assert "no SSM mixer found" in out
