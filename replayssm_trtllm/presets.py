"""SSM layer shapes and layer counts of the models we target.

Each number names the Hugging Face ``config.json`` field it comes from. Where a value is not read
from a released config.json by us (we cannot download checkpoints here), ``uncertain`` says so and
where it came from instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple


@dataclass(frozen=True)
class ModelPreset:
    name: str
    hf_id: str
    family: str                 # "mamba2" or "gdn"
    num_ssm_layers: int
    num_attention_layers: int
    # Mamba-2: heads=mamba_num_heads, head_dim=mamba_head_dim (d_v), state_dim=ssm_state_size (d_k),
    #          key_heads=n_groups.
    # GDN:     heads=linear_num_value_heads, head_dim=linear_value_head_dim (d_v),
    #          state_dim=linear_key_head_dim (d_k), key_heads=linear_num_key_heads.
    heads: int
    head_dim: int
    state_dim: int
    key_heads: int
    sources: Dict[str, str] = field(default_factory=dict)
    uncertain: Tuple[str, ...] = ()

    @property
    def dv(self) -> int:
        return self.head_dim

    @property
    def dk(self) -> int:
        return self.state_dim

    def state_bytes(self, bytes_per_elem: int = 4) -> int:
        """One slot's state of one layer."""
        return self.heads * self.head_dim * self.state_dim * bytes_per_elem

    def record_bytes(self, act_bytes: int = 2, shared_keys: bool = True) -> int:
        """One ring record of one layer and slot, in the layout of docs/design.md section 3.

        Mamba-2: dt fp32 per head + x per head + B once per group.
        GDN: g fp32 per value head + u fp16 per value head + k once per key head.
        With shared_keys=False the key is counted per head (the paper's conservative count).
        """
        keys = self.key_heads if shared_keys else self.heads
        return self.heads * 4 + self.heads * self.head_dim * act_bytes + keys * self.state_dim * act_bytes


PRESETS: Dict[str, ModelPreset] = {
    "nemotron-3-nano-4b": ModelPreset(
        name="nemotron-3-nano-4b", hf_id="nvidia/NVIDIA-Nemotron-3-Nano-4B-BF16", family="mamba2",
        num_ssm_layers=21, num_attention_layers=4,
        heads=96, head_dim=80, state_dim=128, key_heads=8,
        sources={"heads": "mamba_num_heads", "head_dim": "mamba_head_dim", "state_dim": "ssm_state_size",
                 "key_heads": "n_groups", "num_ssm_layers": "count of 'M' in hybrid_override_pattern",
                 "num_attention_layers": "count of '*' in hybrid_override_pattern"},
        uncertain=("num_ssm_layers/num_attention_layers: 21 Mamba-2 + 4 attention of 42 layers, taken from "
                   "a third-party architecture summary, not read from config.json by us",),
    ),
    "nemotron-3-super-120b": ModelPreset(
        name="nemotron-3-super-120b", hf_id="nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4", family="mamba2",
        num_ssm_layers=40, num_attention_layers=8,
        heads=128, head_dim=64, state_dim=128, key_heads=8,
        sources={"heads": "mamba_num_heads", "head_dim": "mamba_head_dim", "state_dim": "ssm_state_size",
                 "key_heads": "n_groups", "num_ssm_layers": "count of 'M' in hybrid_override_pattern (paper App. C.2)",
                 "num_attention_layers": "count of '*' in hybrid_override_pattern (paper App. C.2)"},
        uncertain=("key_heads (n_groups=8) is taken from the project brief, not read from config.json by us",),
    ),
    "qwen3.5-4b": ModelPreset(
        name="qwen3.5-4b", hf_id="Qwen/Qwen3.5-4B", family="gdn",
        num_ssm_layers=24, num_attention_layers=8,
        heads=32, head_dim=128, state_dim=128, key_heads=16,
        sources={"heads": "linear_num_value_heads", "head_dim": "linear_value_head_dim",
                 "state_dim": "linear_key_head_dim", "key_heads": "linear_num_key_heads",
                 "num_ssm_layers": "count of 'linear_attention' in layer_types (num_hidden_layers=32)",
                 "num_attention_layers": "count of 'full_attention' in layer_types"},
        uncertain=("layer split 24 GDN + 8 attention assumes full_attention_interval=4 over 32 layers; "
                   "not read from config.json by us",),
    ),
    "qwen3.5-122b": ModelPreset(
        name="qwen3.5-122b", hf_id="nvidia/Qwen3.5-122B-A10B-NVFP4", family="gdn",
        num_ssm_layers=36, num_attention_layers=12,
        heads=64, head_dim=128, state_dim=128, key_heads=16,
        sources={"heads": "linear_num_value_heads", "head_dim": "linear_value_head_dim",
                 "state_dim": "linear_key_head_dim", "key_heads": "linear_num_key_heads",
                 "num_ssm_layers": "count of 'linear_attention' in layer_types (num_hidden_layers=48)",
                 "num_attention_layers": "count of 'full_attention' in layer_types"},
        uncertain=("layer split 36 GDN + 12 attention of 48 layers from third-party summaries; "
                   "not read from config.json by us",),
    ),
}


def get_preset(name: str) -> ModelPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown model preset {name!r}; allowed: {sorted(PRESETS)}") from None
