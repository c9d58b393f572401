"""Locate / load the plugin library and add replayssm plugin layers to a TensorRT network.

``tensorrt`` is imported only inside these functions; without it they raise
TensorRTUnavailableError with what to install. The library is looked up in $RSSM_TRT_PLUGIN_LIB,
replayssm_trtllm/_lib/ and build/native/ (where ``pip install -e .`` puts it when TensorRT headers
were found at build time).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional, Sequence

from . import fields as F

LIB_NAME = "libreplayssm_trt_plugins.so"
_loaded: dict = {}


class TensorRTUnavailableError(ImportError):
    """The tensorrt Python package is not importable."""


class PluginLibraryError(RuntimeError):
    """The plugin library is missing, or was built for another TensorRT major version."""


def import_tensorrt():
    try:
        import tensorrt as trt  # noqa: WPS433 (lazy on purpose)
    except ImportError as e:
        raise TensorRTUnavailableError(
            "replayssm.trt: the 'tensorrt' Python package is not installed, so TensorRT layers cannot be built. "
            "Install the engine extra on a machine where TensorRT is available (pip install 'replayssm-trtllm[engine]', "
            "which pins tensorrt>=10.14,<11 as TensorRT-LLM 1.2 does). Field values are available without it: "
            "replayssm_trtllm.trt.replay_decode_fields(...)") from e
    return trt


def _candidates():
    env = os.environ.get("RSSM_TRT_PLUGIN_LIB")
    if env:  # an explicit path is the only candidate: never fall back to another (maybe stale) build
        if not Path(env).is_file():
            raise PluginLibraryError(f"RSSM_TRT_PLUGIN_LIB={env}: no such file (expected the path of {LIB_NAME}; "
                                     "unset it to use the library built into the package)")
        yield Path(env)
        return
    pkg = Path(__file__).resolve().parents[1]
    yield pkg / "_lib" / LIB_NAME
    root = pkg.parent
    yield root / "build" / "native" / "plugins" / LIB_NAME
    yield root / "build" / "native" / LIB_NAME


def find_plugin_library() -> Path:
    tried = []
    for p in _candidates():
        tried.append(str(p))
        if p.exists():
            return p
    raise PluginLibraryError(
        f"{LIB_NAME} not found (looked in: {', '.join(tried)}). Build it with TensorRT headers available: "
        "TensorRT_INCLUDE_DIR=<dir with NvInfer.h> pip install --no-build-isolation -e . "
        "(or scripts/trt_compile_check.sh <dir>), or set RSSM_TRT_PLUGIN_LIB to its path.")


def library_trt_version(path) -> tuple:
    """(major, minor, patch) of the TensorRT headers the plugin library was compiled against."""
    lib = ctypes.CDLL(str(path))
    fn = lib.replayssm_plugins_trt_version
    fn.restype = ctypes.c_int32
    v = fn()
    return v // 10000, (v // 100) % 100, v % 100


def check_trt_major(lib_version: tuple, trt_version: str, path) -> None:
    major = int(str(trt_version).split(".")[0])
    if lib_version[0] != major:
        raise PluginLibraryError(
            f"{path} was built against TensorRT {'.'.join(map(str, lib_version))} headers but the running tensorrt is "
            f"{trt_version}; rebuild the plugin library with TensorRT {major}.x headers "
            f"(TensorRT_INCLUDE_DIR=... pip install --no-build-isolation -e .)")


def load_plugins(path: Optional[str] = None):
    """Load the plugin library into TensorRT's plugin registry (idempotent); returns the registry."""
    trt = import_tensorrt()
    lib = Path(path) if path else find_plugin_library()
    if not lib.exists():
        raise PluginLibraryError(f"{lib} does not exist")
    key = str(lib.resolve())
    registry = trt.get_plugin_registry()
    if key in _loaded:
        return registry
    check_trt_major(library_trt_version(lib), trt.__version__, lib)
    handle = registry.load_library(key)
    if handle is None:
        raise PluginLibraryError(f"TensorRT refused to load {lib} (see the TensorRT log)")
    _loaded[key] = handle
    return registry


def plugin_field_collection(field_list: Sequence[tuple]):
    """[(name, type, value)] -> trt.PluginFieldCollection (enums as NUL-terminated CHAR)."""
    trt = import_tensorrt()
    import numpy as np
    out = []
    for name, kind, value in field_list:
        if kind == "int32":
            out.append(trt.PluginField(name, np.array([value], dtype=np.int32), trt.PluginFieldType.INT32))
        elif kind == "int64":
            out.append(trt.PluginField(name, np.array([value], dtype=np.int64), trt.PluginFieldType.INT64))
        elif kind == "float32":
            out.append(trt.PluginField(name, np.array([value], dtype=np.float32), trt.PluginFieldType.FLOAT32))
        elif kind == "enum":
            raw = np.frombuffer(str(value).encode() + b"\0", dtype=np.int8)
            out.append(trt.PluginField(name, raw, trt.PluginFieldType.CHAR))
        else:
            raise ValueError(f"replayssm.trt: unknown field type {kind!r} for '{name}'")
    return trt.PluginFieldCollection(out)


def _add(network, op: str, inputs, field_list, layer_name: Optional[str]):
    trt = import_tensorrt()
    registry = load_plugins()
    creator = registry.get_creator(F.PLUGIN_NAMES[op], F.PLUGIN_VERSIONS[op], F.PLUGIN_NAMESPACE)
    if creator is None:
        raise PluginLibraryError(f"{op}: creator {F.PLUGIN_NAMES[op]} v{F.PLUGIN_VERSIONS[op]} in namespace "
                                 f"'{F.PLUGIN_NAMESPACE}' is not registered (load_plugins() did not register it)")
    plugin = creator.create_plugin(layer_name or op, plugin_field_collection(field_list), trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise ValueError(f"{op}: the plugin rejected its fields (the TensorRT log has the message)")
    layer = network.add_plugin_v3(list(inputs), [], plugin)
    if layer_name:
        layer.name = layer_name
    return layer


def _static_dim(inputs: Sequence, idx: int, axis: int) -> Optional[int]:
    """inputs[idx].shape[axis] when it is known at network-build time (> 0), else None."""
    try:
        d = int(inputs[idx].shape[axis])
    except Exception:  # not a tensor, no such dim: the plugin's own checks will report it
        return None
    return d if d > 0 else None


def add_replay_decode(network, inputs: Sequence, config, family: str, act_dtype: str, *, has_z: bool = False,
                      dt_dtype: str = "fp32", scale: float = 0.0, name: Optional[str] = None):
    """Adds ReplayDecode. ``inputs`` in the order of cpp_plugins/plugins/ReplayDecodePlugin/README.md
    (``replay_decode_input_names(config, family, has_z=...)`` lists them)."""
    import_tensorrt()
    want = F.replay_decode_input_names(config, family, has_z=has_z)
    if len(inputs) != len(want):
        raise ValueError(f"ReplayDecode: expected {len(want)} inputs {want}; got {len(inputs)}")
    fields = F.replay_decode_fields(config, family, act_dtype, has_z=has_z, dt_dtype=dt_dtype, scale=scale,
                                    state_size=_static_dim(inputs, 2 if family == "mamba2" else 0, 3))
    return _add(network, "ReplayDecode", inputs, fields, name)


def add_gdn_verify(network, inputs: Sequence, config, act_dtype: str, *, scale: float = 0.0, name: Optional[str] = None):
    return _add(network, "GdnVerify", inputs, F.gdn_verify_fields(config, act_dtype, scale=scale), name)


def add_dual_precision_flush(network, inputs: Sequence, config, family: str, act_dtype: str, *, layer_index: int = 0,
                             name: Optional[str] = None):
    fields = F.dual_precision_flush_fields(config, family, act_dtype, layer_index=layer_index,
                                           state_size=_static_dim(inputs, 5, 3))  # ckpt_hp [S, H, P, N]
    return _add(network, "DualPrecisionFlush", inputs, fields, name)


def add_replay_commit(network, inputs: Sequence, config, *, has_accepted: Optional[bool] = None,
                      name: Optional[str] = None):
    """Adds ReplayCommit; mark its output 'error_slot' as a network output so TensorRT keeps the layer."""
    return _add(network, "ReplayCommit", inputs, F.replay_commit_fields(config, has_accepted=has_accepted), name)
