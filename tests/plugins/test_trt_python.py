"""replayssm_trtllm.trt without TensorRT: lazy import errors, library lookup, field lists vs the core schema."""
import importlib
import sys
from types import SimpleNamespace

import pytest

import replayssm_trtllm.trt as rt
from replayssm_trtllm.config import ReplayConfig
from replayssm_trtllm.trt import plugins


def test_import_does_not_need_tensorrt():
    assert "tensorrt" not in sys.modules or sys.modules["tensorrt"] is not None
    importlib.reload(rt)


def test_lazy_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # import tensorrt -> ImportError
    with pytest.raises(rt.TensorRTUnavailableError, match=r"'tensorrt' Python package is not installed.*\[engine\]"):
        rt.import_tensorrt()
    with pytest.raises(rt.TensorRTUnavailableError):
        rt.add_replay_decode(object(), [], ReplayConfig(), "mamba2", "bf16")
    with pytest.raises(rt.TensorRTUnavailableError):
        rt.load_plugins()


def test_missing_library_message(monkeypatch, tmp_path):
    monkeypatch.delenv("RSSM_TRT_PLUGIN_LIB", raising=False)
    monkeypatch.setattr(plugins, "_candidates", lambda: iter([tmp_path / "nope.so"]))
    with pytest.raises(rt.PluginLibraryError, match=r"libreplayssm_trt_plugins.so not found .*TensorRT_INCLUDE_DIR"):
        rt.find_plugin_library()


def test_explicit_library_path_must_exist(monkeypatch, tmp_path):
    """RSSM_TRT_PLUGIN_LIB naming a missing file is an error, not a silent fall back to another build."""
    other = tmp_path / "other.so"
    other.write_bytes(b"")
    monkeypatch.setenv("RSSM_TRT_PLUGIN_LIB", str(tmp_path / "nope.so"))
    with pytest.raises(rt.PluginLibraryError, match=r"RSSM_TRT_PLUGIN_LIB=.*nope\.so: no such file"):
        rt.find_plugin_library()
    monkeypatch.setenv("RSSM_TRT_PLUGIN_LIB", str(other))
    assert rt.find_plugin_library() == other


def test_major_version_check():
    plugins.check_trt_major((10, 14, 1), "10.14.1.48", "lib.so")
    with pytest.raises(rt.PluginLibraryError, match=r"built against TensorRT 11.1.0 headers but the running tensorrt is 10.14"):
        plugins.check_trt_major((11, 1, 0), "10.14.1", "lib.so")


def _check_against_schema(core, plugin, fields):
    schema = {f["name"]: f for f in core.schema(plugin)}
    assert [n for n, _, _ in fields] == list(schema), "field order/names differ from the core schema"
    for name, kind, _ in fields:
        assert schema[name]["type"] == kind, name
    trt_codes = {"int32": 5, "int64": 10, "float32": 1, "enum": 6}
    cfg = core.config_from_fields(plugin, [(n, trt_codes[k], v) for n, k, v in fields])  # the createPlugin path
    return cfg.values()


def test_replay_decode_fields_match_core(core):
    cfg = ReplayConfig(window=16, max_verify=4)
    v = _check_against_schema(core, "ReplayDecode", rt.replay_decode_fields(cfg, "mamba2", "bf16", has_z=True))
    assert (v["window"], v["max_verify"], v["mode"], v["has_z"], v["state_dtype"]) == (16, 4, "speculative", 1, "fp32")
    v = _check_against_schema(core, "ReplayDecode", rt.replay_decode_fields(ReplayConfig(window=8), "gdn", "fp16"))
    assert (v["family"], v["mode"], v["max_verify"]) == ("gdn", "standard", 1)


def test_other_fields_match_core(core):
    cfg = ReplayConfig(window=16, max_verify=4, recurrence_dtype="fp16", read_dtype="fp8_e4m3", seed=2 ** 64 - 1)
    v = _check_against_schema(core, "DualPrecisionFlush", rt.dual_precision_flush_fields(cfg, "gdn", "bf16", layer_index=5))
    assert (v["rounding"], v["seed"], v["layer_index"], v["mode"]) == ("sr", -1, 5, "speculative")
    _check_against_schema(core, "GdnVerify", rt.gdn_verify_fields(ReplayConfig(window=16, max_verify=4), "bf16"))
    v = _check_against_schema(core, "ReplayCommit", rt.replay_commit_fields(ReplayConfig(window=16, max_verify=4)))
    assert (v["mode"], v["has_accepted"]) == ("speculative", 1)


def test_duck_typed_config():
    cfg = SimpleNamespace(window=8, max_verify=1, recurrence_dtype="bf16", read_dtype="none", rounding=None)
    f = dict((n, v) for n, _, v in rt.replay_decode_fields(cfg, "mamba2", "bf16"))
    assert f["state_dtype"] == "bf16" and f["u_dtype"] == "fp16"
    with pytest.raises(ValueError, match="has no attribute 'window'"):
        rt.replay_commit_fields(SimpleNamespace(max_verify=1))


def test_fields_refuse_unsupported_configs():
    with pytest.raises(ValueError, match=r"key_dim \(Mamba-2 N / GDN K\) must be 128 with a read copy"):
        rt.replay_decode_fields(ReplayConfig(read_dtype="fp16", key_dim=256), "mamba2", "bf16")
    with pytest.raises(ValueError, match=r"state_size \(Mamba-2 N / GDN K\) must be 128 with a read copy"):
        rt.replay_decode_fields(ReplayConfig(read_dtype="fp16"), "mamba2", "bf16", state_size=64)
    with pytest.raises(ValueError, match=r"key_dim .* must be 128"):
        rt.dual_precision_flush_fields(ReplayConfig(read_dtype="fp16", key_dim=256), "gdn", "bf16")
    with pytest.raises(ValueError, match=r"u_dtype must be 'fp16' with a read copy"):
        rt.replay_decode_fields(ReplayConfig(read_dtype="fp16", u_dtype="bf16"), "gdn", "bf16")
    with pytest.raises(ValueError, match=r"field 'state_dtype \(from recurrence_dtype\)' must be one of"):
        rt.replay_decode_fields(ReplayConfig(recurrence_dtype="fp8_e4m3", rounding="sr"), "mamba2", "bf16")
    with pytest.raises(ValueError, match="needs a read copy"):
        rt.dual_precision_flush_fields(ReplayConfig(), "mamba2", "bf16")


def test_fields_warn_past_the_split_kernels_record_limit():
    """At network build time, as the caches do at construction: a ReplayDecode or GdnVerify configuration whose
    steps replay more than 32 records (speculative window + max_verify, standard window) gets a
    ReplayPerformanceWarning naming the window that keeps them on the split kernels; L = 16 with T <= 8 is silent.
    The fields are the same either way."""
    import warnings
    from replayssm_trtllm.config import ReplayPerformanceWarning
    with pytest.warns(ReplayPerformanceWarning, match=r"ReplayDecode: window \+ max_verify = 32 \+ 4 = 36 > 32: "
                                                      r".*window <= 28 keeps every step on them"):
        f = rt.replay_decode_fields(ReplayConfig(window=32, max_verify=4), "mamba2", "bf16")
    assert dict((n, v) for n, _, v in f)["window"] == 32
    with pytest.warns(ReplayPerformanceWarning, match=r"GdnVerify: window \+ max_verify = 30 \+ 8 = 38"):
        rt.gdn_verify_fields(ReplayConfig(window=30, max_verify=8), "bf16")
    with pytest.warns(ReplayPerformanceWarning, match=r"ReplayDecode: window=40 > 32: every replay step"):
        rt.replay_decode_fields(ReplayConfig(window=40), "gdn", "bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt.replay_decode_fields(ReplayConfig(window=16, max_verify=8), "mamba2", "bf16")
        rt.replay_decode_fields(ReplayConfig(window=32), "gdn", "bf16")      # standard: 32 records
        rt.gdn_verify_fields(ReplayConfig(window=24, max_verify=8), "bf16")  # exactly 32
