"""The SSM mixer weights of a Hugging Face safetensors checkpoint.

:class:`HfCheckpoint` opens a checkpoint directory (``model.safetensors``, or the shards listed by
``model.safetensors.index.json``, or every ``*.safetensors`` file) through the released ``safetensors``
package, and :func:`load_mixer_weights` returns one SSM layer's tensors under the mixer's own names,
shape-checked against the :class:`~replayssm_trtllm.models.hf_config.SsmMixerSpec`.

Where the layer lives in the file is found from the names, not assumed: the mixer of model layer ``i`` is
the tensor group ``<root>layers.<i>.mixer.`` (Nemotron-H; ``<root>`` is ``backbone.`` in released
checkpoints, ``model.`` in some conversions) or ``<root>layers.<i>.linear_attn.`` (Qwen3.5 / Qwen3-Next;
``model.`` or ``model.language_model.`` for the multimodal Qwen3.5 checkpoints). Roots of extra
prediction layers (``mtp.``) are ignored.

Qwen3-Next's packed projections are unpacked here into Qwen3.5's layout (rows permuted, nothing
computed), so the mixers see one layout per family.
"""
from __future__ import annotations

import glob
import json
import os
import re
from typing import Dict, List, Optional, Tuple, Union

import torch

from .hf_config import GDN, MAMBA2, SsmMixerSpec

_SSM_KEY = re.compile(r"^(?P<root>.*?)layers\.(?P<layer>\d+)\.(?P<mixer>mixer|linear_attn)\.A_log$")
_IGNORED_ROOTS = ("mtp.", "model.mtp.")
_QUANT_SUFFIXES = ("weight_scale", "weight_scale_2", "input_scale", "weight_scale_inv", "qweight", "scales")
_QUANT_DTYPES = ("U8", "I8", "F8_E4M3", "F8_E5M2", "F4", "U4")


class HfCheckpointError(ValueError):
    """A checkpoint whose SSM mixer weights are missing, misshaped or stored in a form we do not read."""


def _safe_open():
    try:
        from safetensors import safe_open
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("reading Hugging Face checkpoints needs the 'safetensors' package "
                          "(pip install safetensors, or pip install 'replayssm-trtllm[hf]')") from e
    return safe_open


class HfCheckpoint:
    """Tensor names -> files of a safetensors checkpoint directory; tensors are read on demand.

    Args:
        path: the checkpoint directory.
    """

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise FileNotFoundError(f"HfCheckpoint: {self.path} is not a directory")
        self._safe_open = _safe_open()
        index = os.path.join(self.path, "model.safetensors.index.json")
        self._where: Dict[str, str] = {}
        self._meta: Dict[str, Tuple[Tuple[int, ...], str]] = {}
        self._roots: Optional[Dict[str, List[int]]] = None
        if os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f).get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise HfCheckpointError(f"{index}: no 'weight_map'")
            for name, fname in weight_map.items():
                full = os.path.join(self.path, fname)
                if not os.path.isfile(full):
                    raise HfCheckpointError(f"{index}: shard {fname!r} (holding {name!r}) is missing")
                self._where[name] = full
        else:
            files = sorted(glob.glob(os.path.join(self.path, "*.safetensors")))
            if not files:
                raise HfCheckpointError(f"HfCheckpoint: no *.safetensors file and no index in {self.path}")
            for full in files:
                with self._safe_open(full, framework="pt") as f:
                    for name in f.keys():
                        self._where[name] = full

    def keys(self) -> List[str]:
        return sorted(self._where)

    def __contains__(self, name: str) -> bool:
        return name in self._where

    def _need(self, name: str) -> str:
        try:
            return self._where[name]
        except KeyError:
            raise HfCheckpointError(f"{self.path}: tensor {name!r} is not in the checkpoint") from None

    def _header(self, name: str) -> Tuple[Tuple[int, ...], str]:
        """(shape, safetensors dtype) from the file's header, read once per file."""
        if name not in self._meta:
            path = self._need(name)
            with self._safe_open(path, framework="pt") as f:
                for key in f.keys():
                    sl = f.get_slice(key)
                    self._meta[key] = (tuple(sl.get_shape()), str(sl.get_dtype()))
        return self._meta[name]

    def shape(self, name: str) -> Tuple[int, ...]:
        return self._header(name)[0]

    def dtype_name(self, name: str) -> str:
        """The safetensors dtype string (``F32``, ``BF16``, ``U8``, ``F8_E4M3``, ...)."""
        return self._header(name)[1]

    def quantization(self, name: str) -> Optional[str]:
        """How ``name`` is stored quantized (``"dtype U8, with <...>.weight_scale"``), or None when it is not:
        an integer / float8 / fp4 dtype, or scale tensors beside a ``.weight`` (ModelOpt FP8 / NVFP4 layouts)."""
        stem = name[:-len("weight")] if name.endswith("weight") else None
        scales = [stem + s for s in _QUANT_SUFFIXES if stem is not None and (stem + s) in self]
        dtype = self.dtype_name(name)
        if not scales and dtype not in _QUANT_DTYPES:
            return None
        return f"dtype {dtype}" + (f", with {', '.join(scales)}" if scales else "")

    def tensor(self, name: str) -> torch.Tensor:
        with self._safe_open(self._need(name), framework="pt") as f:
            return f.get_tensor(name)

    # ---- SSM layers ------------------------------------------------------------------------------
    def ssm_roots(self) -> Dict[str, List[int]]:
        """``{root: [layer indices]}`` of every tensor group that holds a mixer's ``A_log`` (found once)."""
        if self._roots is None:
            roots: Dict[str, List[int]] = {}
            for name in self._where:
                m = _SSM_KEY.match(name)
                if m and not m.group("root").startswith(_IGNORED_ROOTS):
                    key = m.group("root") + "layers.{}." + m.group("mixer") + "."
                    roots.setdefault(key, []).append(int(m.group("layer")))
            self._roots = {k: sorted(v) for k, v in roots.items()}
        return self._roots

    def mixer_prefix(self, spec: SsmMixerSpec, layer: int) -> str:
        """The name prefix of model layer ``layer``'s SSM mixer (e.g. ``backbone.layers.3.mixer.``)."""
        if layer not in spec.ssm_layers:
            raise HfCheckpointError(f"layer {layer} is not an SSM layer of this model; SSM layers: "
                                    f"{list(spec.ssm_layers)}")
        roots = self.ssm_roots()
        if not roots:
            raise HfCheckpointError(f"{self.path}: no SSM mixer found (no tensor named "
                                    f"'...layers.<i>.mixer.A_log' or '...layers.<i>.linear_attn.A_log')")
        want = set(spec.ssm_layers)
        full = [r for r, layers in roots.items() if want <= set(layers)]
        if len(full) != 1:
            found = {r.format("<i>"): layers for r, layers in roots.items()}
            raise HfCheckpointError(f"{self.path}: expected one tensor group holding the SSM layers "
                                    f"{sorted(want)} of config.json; found {found}")
        return full[0].format(layer)


def mixer_weight_shapes(spec: SsmMixerSpec) -> Dict[str, Tuple[int, ...]]:
    """Checkpoint tensor name (after the layer prefix) -> shape, for one SSM mixer of ``spec``."""
    D, Kc = spec.hidden_size, spec.conv_kernel
    if spec.family == MAMBA2:
        H, dinner = spec.heads, spec.value_dim
        shapes = {"in_proj.weight": (2 * dinner + 2 * spec.key_dim + H, D),
                  "conv1d.weight": (spec.conv_dim, 1, Kc), "dt_bias": (H,), "A_log": (H,), "D": (H,),
                  "norm.weight": (dinner,), "out_proj.weight": (D, dinner)}
        if spec.conv_bias:
            shapes["conv1d.bias"] = (spec.conv_dim,)
        if spec.proj_bias:
            shapes["in_proj.bias"] = (2 * dinner + 2 * spec.key_dim + H,)
            shapes["out_proj.bias"] = (D,)
        return shapes
    HV, vdim, kdim = spec.heads, spec.value_dim, spec.key_dim
    shapes = {"conv1d.weight": (spec.conv_dim, 1, Kc), "dt_bias": (HV,), "A_log": (HV,),
              "norm.weight": (spec.head_dim,), "out_proj.weight": (D, vdim)}
    if spec.packed_projections:
        shapes["in_proj_qkvz.weight"] = (2 * kdim + 2 * vdim, D)
        shapes["in_proj_ba.weight"] = (2 * HV, D)
    else:
        shapes.update({"in_proj_qkv.weight": (2 * kdim + vdim, D), "in_proj_z.weight": (vdim, D),
                       "in_proj_b.weight": (HV, D), "in_proj_a.weight": (HV, D)})
    return shapes


_PARAMS = ("dt_bias", "A_log", "D", "conv1d.weight", "conv1d.bias", "norm.weight")


def unpack_qwen3_next_projections(spec: SsmMixerSpec, w: Dict[str, torch.Tensor]) -> None:
    """in_proj_qkvz / in_proj_ba (grouped per key head) -> in_proj_qkv, _z, _b, _a (Qwen3.5 order)."""
    H, K, V, r = spec.key_heads, spec.state_dim, spec.head_dim, spec.heads // spec.key_heads
    qkvz = w.pop("in_proj_qkvz.weight")
    per = qkvz.reshape(H, 2 * K + 2 * r * V, -1)
    q, k, v, z = torch.split(per, [K, K, r * V, r * V], dim=1)
    flat = lambda t: t.reshape(-1, t.shape[-1])  # noqa: E731  (rows in key-head-major order)
    w["in_proj_qkv.weight"] = torch.cat([flat(q), flat(k), flat(v)], dim=0)
    w["in_proj_z.weight"] = flat(z)
    ba = w.pop("in_proj_ba.weight").reshape(H, 2 * r, -1)
    b, a = torch.split(ba, [r, r], dim=1)
    w["in_proj_b.weight"], w["in_proj_a.weight"] = flat(b), flat(a)


def mixer_tensor_problems(ckpt: HfCheckpoint, spec: SsmMixerSpec, layer: int, projections: bool = True
                          ) -> List[Tuple[str, str, str]]:
    """What stands in the way of loading model layer ``layer``'s mixer, from the headers only:
    ``(kind, tensor name, detail)`` with kind ``"missing"`` (detail: the expected shape), ``"quantized"``
    (detail: how it is stored) or ``"shape"`` (detail: found and expected shapes). Empty: it loads."""
    prefix = ckpt.mixer_prefix(spec, layer)
    out = []
    for name, want in mixer_weight_shapes(spec).items():
        if not projections and name not in _PARAMS:
            continue
        full = prefix + name
        if full not in ckpt:
            out.append(("missing", full, f"expected shape {list(want)}"))
        elif ckpt.quantization(full):
            out.append(("quantized", full, ckpt.quantization(full)))
        elif ckpt.shape(full) != want:
            out.append(("shape", full, f"shape {list(ckpt.shape(full))}, expected {list(want)}"))
    return out


def load_mixer_weights(ckpt: HfCheckpoint, spec: SsmMixerSpec, layer: int,
                       projections: bool = True) -> Dict[str, torch.Tensor]:
    """Model layer ``layer``'s SSM mixer tensors, shape-checked, under the mixer's names.

    Names: Mamba-2 ``in_proj.weight``, ``conv1d.weight`` / ``.bias``, ``dt_bias``, ``A_log``, ``D``,
    ``norm.weight``, ``out_proj.weight`` (+ biases with ``use_bias``); GDN ``in_proj_qkv.weight``,
    ``in_proj_z.weight``, ``in_proj_b.weight``, ``in_proj_a.weight``, ``conv1d.weight``, ``dt_bias``,
    ``A_log``, ``norm.weight``, ``out_proj.weight`` (Qwen3-Next's packed projections are unpacked into these).
    With ``projections=False`` only the SSM parameters (dt_bias, A_log, D, conv1d, norm) are read: that is
    what the decode kernels need when a serving framework runs the projections.

    Quantized projections (ModelOpt FP8 / NVFP4: an integer or float8 weight with ``weight_scale``) are
    refused with a clear error rather than misread.
    """
    problems = mixer_tensor_problems(ckpt, spec, layer, projections)
    if problems:
        kind, full, detail = problems[0]
        where = f"{ckpt.path}: layer {layer}: {full!r}"
        if kind == "missing":
            raise HfCheckpointError(f"{where} is missing ({detail} for model_type {spec.model_type!r})")
        if kind == "quantized":
            raise HfCheckpointError(f"{where} is stored quantized ({detail}); the plain-PyTorch mixer reads "
                                    f"unquantized projections only. Load with projections=False to take the SSM "
                                    f"parameters, and run the projections in the serving framework")
        raise HfCheckpointError(f"{where} has {detail.replace(', expected', '; config.json implies')} "
                                f"(model_type {spec.model_type!r})")
    prefix = ckpt.mixer_prefix(spec, layer)
    out = {name: ckpt.tensor(prefix + name) for name in mixer_weight_shapes(spec)
           if projections or name in _PARAMS}
    if spec.family == GDN and spec.packed_projections and projections:
        unpack_qwen3_next_projections(spec, out)
    return out
