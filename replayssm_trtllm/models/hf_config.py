"""The SSM mixer shape of a Hugging Face hybrid-model ``config.json``.

Reads the configs of the models we serve and returns one :class:`SsmMixerSpec`: which model layers are
SSM mixers, their shapes, and the settings that change the mixer's arithmetic (conv kernel and bias,
projection bias, norm epsilon, dt clamp). Supported ``model_type`` values:

- ``nemotron_h``: Nemotron-H / Nemotron-3 (Mamba-2 hybrid). Layer kinds from ``layers_block_type``
  (``linear_attention`` = Mamba-2 mixer) or the older ``hybrid_override_pattern`` string (``M`` = Mamba-2),
  with the legacy field names ``mamba_n_groups``, ``mamba_d_conv``, ``mamba_conv_bias``, ``mamba_dt_limit``.
- ``qwen3_5``, ``qwen3_5_moe`` (the text model's fields under ``text_config``), ``qwen3_5_text``,
  ``qwen3_5_moe_text``: Qwen3.5 (Gated DeltaNet hybrid), separate ``in_proj_qkv / _z / _b / _a``.
- ``qwen3_next``: Qwen3-Next (Gated DeltaNet hybrid), packed ``in_proj_qkvz`` / ``in_proj_ba``.

Layer kinds of the Qwen models come from ``layer_types`` or, when absent, ``full_attention_interval``
(every n-th layer is attention, as the Hugging Face configs define it).

Everything here is plain JSON handling: no transformers, no torch.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from ..presets import ModelPreset

MAMBA2 = "mamba2"
GDN = "gdn"

# What the CUDA kernels accept (ops/mamba2.py, ops/gdn.py); the float64 reference takes any size.
KERNEL_MAMBA2_HEAD_DIMS = (32, 64, 80, 128)
KERNEL_MAMBA2_STATE_DIMS = (64, 128, 256)
KERNEL_GDN_KEY_DIMS = (64, 128, 256)

_NEMOTRON_PATTERN = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
_NEMOTRON_LEGACY = {"mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel", "mamba_conv_bias": "use_conv_bias",
                    "mamba_dt_limit": "time_step_limit"}
_QWEN35_TYPES = ("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
SUPPORTED_MODEL_TYPES = ("nemotron_h",) + _QWEN35_TYPES + ("qwen3_next",)


class HfConfigError(ValueError):
    """A config.json this module cannot turn into a mixer spec (the message names the field)."""


@dataclass(frozen=True)
class SsmMixerSpec:
    """Shape and arithmetic settings of the SSM mixers of one hybrid model.

    Families (names as in :class:`~replayssm_trtllm.presets.ModelPreset`):

    - Mamba-2: ``heads`` = H (``mamba_num_heads``), ``head_dim`` = P (``mamba_head_dim``), ``state_dim`` =
      N (``ssm_state_size``), ``key_heads`` = G (``n_groups``).
    - GDN: ``heads`` = HV (``linear_num_value_heads``), ``head_dim`` = V (``linear_value_head_dim``),
      ``state_dim`` = K (``linear_key_head_dim``), ``key_heads`` = H (``linear_num_key_heads``).

    ``layer_types`` holds every model layer's kind as the config names it; ``ssm_layers`` the indices of
    the SSM mixers among them (the position of a layer in that tuple is its index in a replay cache).
    """
    model_type: str
    family: str
    hidden_size: int
    heads: int
    head_dim: int
    state_dim: int
    key_heads: int
    conv_kernel: int
    conv_bias: bool
    proj_bias: bool
    norm_eps: float
    layer_types: Tuple[str, ...]
    ssm_layers: Tuple[int, ...]
    time_step_limit: Tuple[float, float] = (0.0, math.inf)
    packed_projections: bool = False        # qwen3_next: in_proj_qkvz / in_proj_ba
    torch_dtype: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)

    # ---- derived sizes ---------------------------------------------------------------------------
    @property
    def value_dim(self) -> int:
        """Mamba-2 d_inner = H * P; GDN HV * V."""
        return self.heads * self.head_dim

    @property
    def key_dim(self) -> int:
        """Mamba-2: G * N (B or C); GDN: H * K (q or k)."""
        return self.key_heads * self.state_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise causal conv: Mamba-2 x|B|C, GDN q|k|v."""
        return self.value_dim + 2 * self.key_dim

    @property
    def num_layers(self) -> int:
        return len(self.layer_types)

    def kernel_support_errors(self) -> Tuple[str, ...]:
        """Reasons the CUDA kernels cannot run this mixer (empty: they can)."""
        errs = []
        if self.family == MAMBA2:
            if self.head_dim not in KERNEL_MAMBA2_HEAD_DIMS:
                errs.append(f"mamba_head_dim={self.head_dim} (the kernels take {KERNEL_MAMBA2_HEAD_DIMS})")
            if self.state_dim not in KERNEL_MAMBA2_STATE_DIMS:
                errs.append(f"ssm_state_size={self.state_dim} (the kernels take {KERNEL_MAMBA2_STATE_DIMS})")
        else:
            if self.state_dim not in KERNEL_GDN_KEY_DIMS:
                errs.append(f"linear_key_head_dim={self.state_dim} (the kernels take {KERNEL_GDN_KEY_DIMS})")
        return tuple(errs)

    def to_preset(self, name: str = "from-config", hf_id: str = "") -> ModelPreset:
        """The same shape as a :class:`ModelPreset`, for the benchmarks and ``traffic``."""
        attention = sum(1 for t in self.layer_types if t in ("full_attention", "attention"))
        return ModelPreset(name=name, hf_id=hf_id, family=self.family, num_ssm_layers=len(self.ssm_layers),
                           num_attention_layers=attention, heads=self.heads, head_dim=self.head_dim,
                           state_dim=self.state_dim, key_heads=self.key_heads,
                           sources={"config": f"config.json, model_type {self.model_type}"})


# ---- helpers ---------------------------------------------------------------------------------------
def _field(cfg: Dict[str, Any], name: str, model_type: str, default: Any = None, required: bool = True) -> Any:
    if name in cfg and cfg[name] is not None:
        return cfg[name]
    if required and default is None:
        raise HfConfigError(f"config.json (model_type {model_type!r}): missing field {name!r}")
    return default


def _positive_int(cfg: Dict[str, Any], name: str, model_type: str, default: Optional[int] = None) -> int:
    v = _field(cfg, name, model_type, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise HfConfigError(f"config.json (model_type {model_type!r}): {name!r} must be a positive int; got {v!r}")
    return v


def _json_float(x: Any) -> float:
    """A number of config.json: plain, a string (``"Infinity"``) or transformers 5's ``{"__float__": "Infinity"}``."""
    if isinstance(x, dict) and set(x) == {"__float__"}:
        x = x["__float__"]
    if isinstance(x, bool):
        raise TypeError(x)
    return float(x)


def _dt_limit(v: Any, model_type: str) -> Tuple[float, float]:
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise HfConfigError(f"config.json (model_type {model_type!r}): 'time_step_limit' must be [min, max]; "
                            f"got {v!r}")
    try:
        lo, hi = (_json_float(x) for x in v)
    except (TypeError, ValueError):
        raise HfConfigError(f"config.json (model_type {model_type!r}): 'time_step_limit' must hold two numbers; "
                            f"got {v!r}") from None
    if not lo < hi:
        raise HfConfigError(f"config.json (model_type {model_type!r}): 'time_step_limit' must have min < max; "
                            f"got {v!r}")
    return lo, hi


def _nemotron_layer_types(cfg: Dict[str, Any]) -> Tuple[str, ...]:
    types = cfg.get("layers_block_type") or cfg.get("layer_types")
    if types is None:
        pattern = cfg.get("hybrid_override_pattern")
        if not isinstance(pattern, str) or not pattern:
            raise HfConfigError("config.json (model_type 'nemotron_h'): needs 'layers_block_type' or "
                                "'hybrid_override_pattern'")
        bad = sorted(set(pattern) - set(_NEMOTRON_PATTERN))
        if bad:
            raise HfConfigError(f"config.json (model_type 'nemotron_h'): 'hybrid_override_pattern' has unknown "
                                f"layer codes {bad}; known {sorted(_NEMOTRON_PATTERN)}")
        return tuple(_NEMOTRON_PATTERN[c] for c in pattern)
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise HfConfigError(f"config.json (model_type 'nemotron_h'): 'layers_block_type' must be a list of "
                            f"strings; got {types!r}")
    legacy = {"mamba": "linear_attention", "attention": "full_attention"}
    return tuple(legacy.get(t, t) for t in types)


def _qwen_layer_types(cfg: Dict[str, Any], model_type: str) -> Tuple[str, ...]:
    n = _positive_int(cfg, "num_hidden_layers", model_type)
    types = cfg.get("layer_types")
    if types is None:
        interval = _positive_int(cfg, "full_attention_interval", model_type, 4)
        return tuple("linear_attention" if (i + 1) % interval else "full_attention" for i in range(n))
    if not isinstance(types, list) or len(types) != n:
        raise HfConfigError(f"config.json (model_type {model_type!r}): 'layer_types' must list "
                            f"num_hidden_layers={n} entries; got {types!r}")
    return tuple(types)


def _ssm_layers(types: Sequence[str], model_type: str) -> Tuple[int, ...]:
    idx = tuple(i for i, t in enumerate(types) if t == "linear_attention")
    if not idx:
        raise HfConfigError(f"config.json (model_type {model_type!r}): no SSM layer ('linear_attention') among "
                            f"the layer types {sorted(set(types))}")
    return idx


# ---- parsers ---------------------------------------------------------------------------------------
def _parse_nemotron_h(cfg: Dict[str, Any]) -> SsmMixerSpec:
    mt = "nemotron_h"
    cfg = dict(cfg)
    for old, new in _NEMOTRON_LEGACY.items():
        if old in cfg and new not in cfg:
            cfg[new] = cfg[old]
    act = cfg.get("mamba_hidden_act", "silu")
    if act != "silu":
        raise HfConfigError(f"config.json (model_type 'nemotron_h'): mamba_hidden_act={act!r} is not supported "
                            f"(the kernels apply silu to the conv output)")
    types = _nemotron_layer_types(cfg)
    heads = _positive_int(cfg, "mamba_num_heads", mt)
    groups = _positive_int(cfg, "n_groups", mt, 8)
    if heads % groups:
        raise HfConfigError(f"config.json (model_type 'nemotron_h'): mamba_num_heads={heads} must be a multiple "
                            f"of n_groups={groups}")
    # Hugging Face's NemotronH mixer takes the projection bias from 'use_bias' (mamba_proj_bias is unused there)
    return SsmMixerSpec(
        model_type=mt, family=MAMBA2, hidden_size=_positive_int(cfg, "hidden_size", mt),
        heads=heads, head_dim=_positive_int(cfg, "mamba_head_dim", mt),
        state_dim=_positive_int(cfg, "ssm_state_size", mt, 128), key_heads=groups,
        conv_kernel=_positive_int(cfg, "conv_kernel", mt, 4), conv_bias=bool(cfg.get("use_conv_bias", True)),
        proj_bias=bool(cfg.get("use_bias", False)), norm_eps=float(cfg.get("layer_norm_epsilon", 1e-5)),
        layer_types=types, ssm_layers=_ssm_layers(types, mt),
        time_step_limit=_dt_limit(cfg.get("time_step_limit", (0.0, math.inf)), mt),
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
        extra={"mamba_ssm_cache_dtype": cfg.get("mamba_ssm_cache_dtype")})


def _parse_qwen_gdn(cfg: Dict[str, Any], model_type: str) -> SsmMixerSpec:
    text = cfg
    if model_type in ("qwen3_5", "qwen3_5_moe"):
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise HfConfigError(f"config.json (model_type {model_type!r}): missing 'text_config' (the language "
                                f"model's fields)")
    mt = model_type
    types = _qwen_layer_types(text, mt)
    kh = _positive_int(text, "linear_num_key_heads", mt, 16)
    vh = _positive_int(text, "linear_num_value_heads", mt, 32)
    if vh % kh:
        raise HfConfigError(f"config.json (model_type {mt!r}): linear_num_value_heads={vh} must be a multiple of "
                            f"linear_num_key_heads={kh}")
    return SsmMixerSpec(
        model_type=mt, family=GDN, hidden_size=_positive_int(text, "hidden_size", mt),
        heads=vh, head_dim=_positive_int(text, "linear_value_head_dim", mt, 128),
        state_dim=_positive_int(text, "linear_key_head_dim", mt, 128), key_heads=kh,
        conv_kernel=_positive_int(text, "linear_conv_kernel_dim", mt, 4), conv_bias=False, proj_bias=False,
        norm_eps=float(text.get("rms_norm_eps", 1e-6)), layer_types=types, ssm_layers=_ssm_layers(types, mt),
        packed_projections=(mt == "qwen3_next"),
        torch_dtype=text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype"))


def parse_hf_config(cfg: Dict[str, Any]) -> SsmMixerSpec:
    """The mixer spec of a parsed ``config.json`` dict (see the module doc for the supported types)."""
    if not isinstance(cfg, dict):
        raise HfConfigError(f"config.json must hold a JSON object; got {type(cfg).__name__}")
    mt = cfg.get("model_type")
    if mt == "nemotron_h":
        return _parse_nemotron_h(cfg)
    if mt in _QWEN35_TYPES or mt == "qwen3_next":
        return _parse_qwen_gdn(cfg, mt)
    raise HfConfigError(f"config.json: model_type {mt!r} is not supported; supported: {list(SUPPORTED_MODEL_TYPES)}")


def load_hf_config(path: Union[str, os.PathLike]) -> SsmMixerSpec:
    """Read ``config.json`` (``path`` is the file or the checkpoint directory) and parse it."""
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "config.json")
    if not os.path.isfile(p):
        raise FileNotFoundError(f"no config.json at {p}")
    with open(p, encoding="utf-8") as f:
        try:
            cfg = json.load(f)
        except json.JSONDecodeError as e:
            raise HfConfigError(f"{p}: not valid JSON ({e})") from None
    return parse_hf_config(cfg)
