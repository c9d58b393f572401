"""Tiny Hugging Face hybrid checkpoints with random weights, written by transformers itself.

The SSM parameters are redrawn from realistic ranges (the library's inits are trivial: A_log = log(1..H),
D = 1, dt_bias = 1, norm weights 1) and the projections are scaled so the mixers are far from linear.
"""
from __future__ import annotations

import math

import torch

# Shapes the CUDA kernels also take (Mamba-2 P in {32, 64, 80, 128}, N in {64, 128, 256}; GDN K in {64, 128, 256}).
NEMOTRON = dict(vocab_size=64, hidden_size=96, hybrid_override_pattern="M*M-M", num_attention_heads=2,
                num_key_value_heads=1, head_dim=48, intermediate_size=128, mamba_num_heads=8, mamba_head_dim=32,
                ssm_state_size=64, n_groups=2, chunk_size=8, conv_kernel=4, layer_norm_epsilon=1e-5)
QWEN35 = dict(vocab_size=64, hidden_size=96, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
              num_key_value_heads=1, head_dim=48, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4,
              layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])
QWEN3_NEXT = dict(QWEN35, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32,
                  shared_expert_intermediate_size=32, decoder_sparse_step=1)


@torch.no_grad()
def randomize_mixer(mixer: torch.nn.Module, gen: torch.Generator) -> None:
    """Realistic SSM parameters and O(1)-gain projections for one HF mixer module."""
    H = mixer.A_log.shape[0]
    for name, p in mixer.named_parameters():
        if name == "A_log":        # decay rates exp(A_log) in [0.5, 8]: per-token decays from ~0.4 to ~0.999
            p.copy_(torch.log(0.5 + 7.5 * torch.rand(H, generator=gen)))
        elif name == "dt_bias":    # softplus(dt_bias) around 0.01..0.4 (inverse softplus of a log-uniform dt)
            dt = torch.exp(math.log(0.01) + (math.log(0.4) - math.log(0.01)) * torch.rand(H, generator=gen))
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif name == "D":
            p.copy_(torch.randn(H, generator=gen))
        elif name.startswith("norm"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
        elif name.endswith("bias"):
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        elif name == "conv1d.weight":
            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
        else:                      # projections: unit gain
            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))


def build(kind: str, seed: int = 0):
    """(model, [(layer index, mixer module)]) for kind in nemotron_h / qwen3_5 / qwen3_5_vl / qwen3_next."""
    import transformers as tf
    torch.manual_seed(seed)
    if kind == "nemotron_h":
        model = tf.NemotronHForCausalLM(tf.NemotronHConfig(**NEMOTRON))
        mixers = [(i, l.mixer) for i, l in enumerate(model.model.layers) if type(l.mixer).__name__.endswith("Mixer")]
    elif kind == "qwen3_5":
        model = tf.Qwen3_5ForCausalLM(tf.Qwen3_5TextConfig(**QWEN35))
        mixers = [(i, l.linear_attn) for i, l in enumerate(model.model.layers) if hasattr(l, "linear_attn")]
    elif kind == "qwen3_5_vl":    # Qwen3.5 as released: the multimodal model (text fields under text_config)
        vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=QWEN35["hidden_size"],
                      patch_size=4, temporal_patch_size=2, spatial_merge_size=2)
        model = tf.Qwen3_5ForConditionalGeneration(tf.Qwen3_5Config(text_config=dict(QWEN35), vision_config=vision))
        mixers = [(i, l.linear_attn) for i, l in enumerate(model.model.language_model.layers)
                  if hasattr(l, "linear_attn")]
    elif kind == "qwen3_next":
        model = tf.Qwen3NextForCausalLM(tf.Qwen3NextConfig(**QWEN3_NEXT))
        mixers = [(i, l.linear_attn) for i, l in enumerate(model.model.layers) if hasattr(l, "linear_attn")]
    else:
        raise ValueError(kind)
    gen = torch.Generator().manual_seed(seed + 1)
    for _, m in mixers:
        randomize_mixer(m, gen)
    return model.eval(), mixers


def save(kind: str, directory, seed: int = 0, **save_kw):
    """Build the tiny model of ``kind``, write it to ``directory`` with ``save_pretrained`` (``save_kw``, e.g.
    ``max_shard_size``) and return its ``{layer index: mixer module}``."""
    model, mixers = build(kind, seed)
    model.save_pretrained(directory, **save_kw)
    return dict(mixers)
