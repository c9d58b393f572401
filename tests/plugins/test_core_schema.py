"""Plugin core: field schema, validation messages, creator-field parsing."""
import pytest

from replayssm_trtllm.trt.core import KINDS, CoreError


@pytest.mark.parametrize("plugin", KINDS)
def test_names_and_version(core, plugin):
    op, registered, version = core.names(plugin)
    # ReplayDecode 2: field 'read_dtype' and the dual-precision inputs (README changelog).
    assert op == plugin and registered == plugin + "_RSSM" and version == ("2" if plugin == "ReplayDecode" else "1")


@pytest.mark.parametrize("plugin", KINDS)
def test_defaults_are_valid_and_in_range(core, plugin):
    cfg = core.config(plugin).validate()
    for f in core.schema(plugin):
        v = cfg.get(f["name"])
        assert v == f["default"], f["name"]
        if f["type"] == "enum":
            assert v in f["choices"]
        elif f["type"] != "int64":
            assert f["min"] <= v <= f["max"]


@pytest.mark.parametrize("field,value,msg", [
    ("window", 0, "ReplayDecode: field 'window' must be in [1, 64]; got 0"),
    ("window", 65, "ReplayDecode: field 'window' must be in [1, 64]; got 65"),
    ("max_verify", 9, "ReplayDecode: field 'max_verify' must be in [1, 8]; got 9"),
    ("has_z", 2, "ReplayDecode: field 'has_z' must be in [0, 1]; got 2"),
])
def test_range_messages(core, field, value, msg):
    with pytest.raises(CoreError) as e:
        core.config("ReplayDecode", **{field: value}).validate()
    assert str(e.value) == msg


def test_enum_message(core):
    with pytest.raises(CoreError, match=r"ReplayDecode: field 'family' must be one of \['mamba2', 'gdn'\]; got 'rwkv'"):
        core.config("ReplayDecode", family="rwkv")


def test_float_range(core):
    with pytest.raises(CoreError, match=r"field 'scale' must be a finite value in \[0, inf\]; got -1"):
        core.config("GdnVerify", scale=-1.0).validate()


@pytest.mark.parametrize("plugin,fields,msg", [
    ("ReplayDecode", dict(window=4, max_verify=8, mode="speculative"), "field 'max_verify' must be <= window (4)"),
    ("ReplayDecode", dict(max_verify=4), "field 'max_verify' must be 1 with mode 'standard'"),
    ("ReplayDecode", dict(family="gdn", mode="speculative", max_verify=2),
     "field 'mode' must be 'standard' with family 'gdn' (GDN speculative verification is the GdnVerify plugin)"),
    ("ReplayDecode", dict(family="gdn", has_z=1), "field 'has_z' must be 0 with family 'gdn'"),
    ("DualPrecisionFlush", dict(recurrence_dtype="fp16", read_dtype="fp16"), "duplicates the checkpoint"),
    ("DualPrecisionFlush", dict(recurrence_dtype="fp8_e4m3", read_dtype="fp16"),
     "field 'read_dtype' must not be more precise than recurrence_dtype 'fp8_e4m3' (8 bits); got 'fp16' (16 bits)"),
    ("DualPrecisionFlush", dict(rounding="sr"), "field 'rounding' 'sr' applies to a low-precision recurrence"),
    ("ReplayCommit", dict(has_accepted=1), "field 'has_accepted' must be 0 with mode 'standard'"),
])
def test_cross_field_rules(core, plugin, fields, msg):
    with pytest.raises(CoreError) as e:
        core.config(plugin, **fields).validate()
    assert str(e.value).startswith(plugin + ": ") and msg in str(e.value)


def test_from_fields_like_a_creator(core):
    cfg = core.config_from_fields("ReplayDecode", [
        ("family", 6, "gdn"), ("window", 5, 8), ("act_dtype", 6, "fp16"), ("scale", 1, 0.125)])
    assert cfg.get("family") == "gdn" and cfg.get("window") == 8 and cfg.get("scale") == 0.125
    assert cfg.get("mode") == "standard"  # default kept


@pytest.mark.parametrize("fields,msg", [
    ([("windw", 5, 8)], "ReplayDecode: unknown field 'windw'; expected one of [family, window,"),
    ([("window", 1, 8.0)], "ReplayDecode: field 'window' must be INT32 of length 1; got type 1"),
    ([("family", 5, 0)], "ReplayDecode: field 'family' must be CHAR (a string); got type 5"),
    ([("window", 5, 0)], "ReplayDecode: field 'window' must be in [1, 64]; got 0"),
])
def test_from_fields_errors(core, fields, msg):
    with pytest.raises(CoreError) as e:
        core.config_from_fields("ReplayDecode", fields)
    assert msg in str(e.value)


def test_seed_is_64_bit(core):
    cfg = core.config_from_fields("DualPrecisionFlush", [
        ("recurrence_dtype", 6, "fp16"), ("read_dtype", 6, "fp8_e4m3"), ("rounding", 6, "sr"), ("seed", 10, -2)])
    assert cfg.get("seed") == -2
