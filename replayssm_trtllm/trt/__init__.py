"""TensorRT plugin helpers for replayssm (tensorrt is imported lazily, only when needed).

    from replayssm_trtllm.trt import load_plugins, add_replay_decode
    load_plugins()                                   # finds and registers libreplayssm_trt_plugins.so
    layer = add_replay_decode(network, inputs, cfg, family="mamba2", act_dtype="bf16", has_z=True)

Field values are computed without TensorRT (``replay_decode_fields`` and friends), so they are
testable on any machine; ``core`` exposes the TensorRT-free plugin core through ctypes.
"""
from .fields import (PLUGIN_NAMES, PLUGIN_NAMESPACE, PLUGIN_VERSIONS, dual_precision_flush_fields,
                     gdn_verify_fields, replay_commit_fields, replay_decode_fields, replay_decode_input_names)
from .plugins import (PluginLibraryError, TensorRTUnavailableError, add_dual_precision_flush, add_gdn_verify,
                      add_replay_commit, add_replay_decode, find_plugin_library, import_tensorrt, load_plugins,
                      plugin_field_collection)

__all__ = [
    "PLUGIN_NAMES", "PLUGIN_NAMESPACE", "PLUGIN_VERSIONS",
    "replay_decode_fields", "replay_decode_input_names", "gdn_verify_fields", "dual_precision_flush_fields", "replay_commit_fields",
    "PluginLibraryError", "TensorRTUnavailableError", "import_tensorrt", "find_plugin_library", "load_plugins",
    "plugin_field_collection", "add_replay_decode", "add_gdn_verify", "add_dual_precision_flush",
    "add_replay_commit",
]
