"""Plugin core: versioned serialization round trip and refusals."""
import struct

import pytest

from replayssm_trtllm.trt.core import KINDS, CoreError


def _blob(core, plugin="ReplayDecode"):
    cfg = core.config(plugin)
    if plugin == "ReplayDecode":
        cfg.set("window", 24).set("max_verify", 4).set("mode", "speculative").set("has_z", 1)
    return cfg, cfg.serialize()


@pytest.mark.parametrize("plugin", KINDS)
def test_round_trip(core, plugin):
    cfg, blob = _blob(core, plugin)
    assert blob[:4] == b"RSSM"
    back = core.deserialize(plugin, blob)
    assert back.values() == cfg.values()


def test_round_trip_keeps_values(core):
    _, blob = _blob(core)
    v = core.deserialize("ReplayDecode", blob).values()
    assert (v["window"], v["max_verify"], v["mode"], v["has_z"]) == (24, 4, "speculative", 1)


@pytest.mark.parametrize("keep", [0, 3, 19, 23, 40, -5, -1])
def test_truncated_refused(core, keep):
    _, blob = _blob(core)
    with pytest.raises(CoreError, match="ReplayDecode: serialized blob is truncated"):
        core.deserialize("ReplayDecode", blob[:keep] if keep >= 0 else blob[:len(blob) + keep])


def test_other_version_refused(core):
    _, blob = _blob(core)
    bad = blob[:8] + struct.pack("<i", 3) + blob[12:]
    with pytest.raises(CoreError, match=r"ReplayDecode: serialized blob is plugin version 3; this library implements "
                                        r"version 2 \(rebuild the engine with this plugin library\)"):
        core.deserialize("ReplayDecode", bad)
    _, blob = _blob(core, "ReplayCommit")
    with pytest.raises(CoreError, match=r"ReplayCommit: serialized blob is plugin version 2; this library implements "
                                        r"version 1"):
        core.deserialize("ReplayCommit", blob[:8] + struct.pack("<i", 2) + blob[12:])


def test_other_plugin_refused(core):
    _, blob = _blob(core, "ReplayCommit")
    with pytest.raises(CoreError, match="ReplayDecode: serialized blob belongs to plugin ReplayCommit, not ReplayDecode"):
        core.deserialize("ReplayDecode", blob)


def test_corrupted_refused(core):
    _, blob = _blob(core)
    bad = bytearray(blob)
    bad[30] ^= 0x40
    with pytest.raises(CoreError, match="checksum mismatch"):
        core.deserialize("ReplayDecode", bytes(bad))


def test_not_a_blob(core):
    with pytest.raises(CoreError, match="does not start with magic 'RSSM'"):
        core.deserialize("ReplayDecode", b"X" * 64)


def test_padded_refused(core):
    _, blob = _blob(core)
    with pytest.raises(CoreError, match="truncated or padded"):
        core.deserialize("ReplayDecode", blob + b"\0")
