"""Plugin core, ReplayDecode version 2: the dual-precision decode (read copy) -- fields, validation,
serialization, I/O maps, dtype table, input checks and DualPrecisionDecodeParams translation; and the
matching Python helpers."""
import struct

import pytest

import replayssm_trtllm.trt as rt
from replayssm_trtllm.config import ReplayConfig
from replayssm_trtllm.trt.core import CoreError

B, T, H, P, N, G, S = 3, 2, 8, 64, 128, 2, 5
L, TMAX = 6, 2
C = L + TMAX
HK, HV, K, V = 2, 4, 128, 96

MAMBA_BASE = ["x", "dt", "B", "C", "A", "D", "dt_bias", "state_batch_indices", "ckpt_hp", "ring_dt", "ring_x", "ring_B",
              "ring_origin", "ring_len"]
GDN_BASE = ["q", "k", "v", "a", "b", "A_log", "dt_bias", "state_batch_indices", "ckpt_hp", "ring_g", "ring_u", "ring_k",
            "ring_origin", "ring_len"]
STORED = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8_e4m3": "uint8", "nvfp4": "uint8"}


def copies(state, read, h, p, n):
    """(ckpt_hp, ckpt_lp, scale tensors...) descriptors in plugin order."""
    hp = (STORED[state], [S, h, p, n])
    lp = (STORED[read], [S, h, p, n // 2 if read == "nvfp4" else n])
    extra = []
    if state == "fp8_e4m3":
        extra.append(("fp32", [S, h, p, n // 128]))
    if read == "fp8_e4m3":
        extra.append(("fp32", [S, h, p, n // 128]))
    if read == "nvfp4":
        extra += [("uint8", [S, h, p, n // 16]), ("fp32", [S, h])]
    return hp, lp, extra


def mamba2_dp_inputs(state="fp32", read="fp16", act="bf16", z=True, n=N, p=P, t=T):
    hp, lp, extra = copies(state, read, H, p, n)
    ins = [(act, [B, t, H, p]), ("fp32", [B, t, H]), (act, [B, t, G, n]), (act, [B, t, G, n]), ("fp32", [H]),
           ("fp32", [H]), ("fp32", [H]), ("int32", [B]), hp, ("fp32", [S, C, H]), (act, [S, C, H, p]),
           (act, [S, C, G, n]), ("int32", [S]), ("int32", [S])]
    if z:
        ins.append((act, [B, t, H, p]))
    return ins + [lp] + extra


def gdn_dp_inputs(state="fp32", read="fp16", act="fp16", k=K, v=V, c=L):  # standard mode: L ring rows
    hp, lp, extra = copies(state, read, HV, v, k)
    ins = [(act, [B, 1, HK, k]), (act, [B, 1, HK, k]), (act, [B, 1, HV, v]), (act, [B, 1, HV]), (act, [B, 1, HV]),
           ("fp32", [HV]), ("fp32", [HV]), ("int32", [B]), hp, ("fp32", [S, c, HV]), ("fp16", [S, c, HV, v]),
           (act, [S, c, HK, k]), ("int32", [S]), ("int32", [S])]
    return ins + [lp, ("fp32", [S, c, HV]), (act, [S, c, HV, v])] + extra


def mamba_cfg(core, **kw):
    base = dict(window=L, max_verify=TMAX, mode="speculative", has_z=1, act_dtype="bf16", read_dtype="fp16")
    base.update(kw)
    return core.config("ReplayDecode", **base)


def gdn_cfg(core, **kw):
    base = dict(family="gdn", window=L, act_dtype="fp16", read_dtype="fp16")
    base.update(kw)
    return core.config("ReplayDecode", **base)


# ------------------------------------------------------------------------------------------ schema
def test_read_dtype_field_is_last_with_default_none(core):
    sc = core.schema("ReplayDecode")
    assert [f["name"] for f in sc][-1] == "read_dtype"
    f = sc[-1]
    assert f["type"] == "enum" and f["default"] == "none" and f["choices"] == ["none", "fp16", "fp8_e4m3", "nvfp4"]
    state = next(x for x in sc if x["name"] == "state_dtype")
    assert state["choices"] == ["fp32", "fp16", "bf16", "fp8_e4m3"]  # fp8_e4m3 appended: v1 indices unchanged


VALID = [("fp32", "fp16"), ("fp32", "fp8_e4m3"), ("fp32", "nvfp4"), ("fp16", "fp8_e4m3"), ("fp16", "nvfp4"),
         ("bf16", "fp16"), ("bf16", "fp8_e4m3"), ("bf16", "nvfp4"), ("fp8_e4m3", "nvfp4")]


@pytest.mark.parametrize("state,read", VALID, ids=[f"{s}-{r}" for s, r in VALID])
def test_valid_copy_pairs(core, state, read):
    mamba_cfg(core, state_dtype=state, read_dtype=read).validate()
    gdn_cfg(core, state_dtype=state, read_dtype=read).validate()


@pytest.mark.parametrize("fields,msg", [
    (dict(state_dtype="fp8_e4m3"),
     "ReplayDecode: field 'state_dtype' 'fp8_e4m3' needs a read copy (read_dtype 'nvfp4'): the single-checkpoint "
     "replay kernels store fp32 / fp16 / bf16; got read_dtype 'none'"),
    (dict(state_dtype="fp16", read_dtype="fp16"),
     "ReplayDecode: field 'read_dtype' equal to state_dtype (the recurrence checkpoint) duplicates the checkpoint; "
     "got 'fp16'"),
    (dict(state_dtype="fp8_e4m3", read_dtype="fp16"),
     "ReplayDecode: field 'read_dtype' must not be more precise than state_dtype (the recurrence checkpoint) "
     "'fp8_e4m3' (8 bits); got 'fp16' (16 bits)"),
    (dict(state_dtype="fp8_e4m3", read_dtype="fp8_e4m3"), "duplicates the checkpoint; got 'fp8_e4m3'"),
    (dict(family="gdn", read_dtype="nvfp4", u_dtype="bf16"),
     "ReplayDecode: field 'u_dtype' must be 'fp16' with a read copy (the dual-precision GDN kernel keeps ring_u in "
     "fp16); got 'bf16'"),
])
def test_dual_precision_validation_messages(core, fields, msg):
    with pytest.raises(CoreError) as e:
        core.config("ReplayDecode", **fields).validate()
    assert msg in str(e.value)


def test_read_dtype_enum_message(core):
    with pytest.raises(CoreError, match=r"field 'read_dtype' must be one of \['none', 'fp16', 'fp8_e4m3', 'nvfp4'\]; "
                                        r"got 'bf16'"):
        core.config("ReplayDecode", read_dtype="bf16")


def test_creator_path_with_read_copy(core):
    cfg = core.config_from_fields("ReplayDecode", [
        ("family", 6, "gdn"), ("window", 5, 8), ("state_dtype", 6, "fp8_e4m3"), ("read_dtype", 6, "nvfp4")])
    assert (cfg.get("read_dtype"), cfg.get("state_dtype"), cfg.get("u_dtype")) == ("nvfp4", "fp8_e4m3", "fp16")
    with pytest.raises(CoreError, match="'u_dtype' must be 'fp16' with a read copy"):
        core.config_from_fields("ReplayDecode", [("family", 6, "gdn"), ("u_dtype", 6, "bf16"), ("read_dtype", 6, "fp16")])
    # A version-1 field list (no read_dtype) still creates a plugin: read_dtype defaults to 'none'.
    cfg = core.config_from_fields("ReplayDecode", [("family", 6, "mamba2"), ("window", 5, 8)])
    assert cfg.get("read_dtype") == "none"


# ----------------------------------------------------------------------------------- serialization
def test_round_trip_with_read_copy(core):
    cfg = mamba_cfg(core, state_dtype="fp8_e4m3", read_dtype="nvfp4")
    blob = cfg.serialize()
    assert struct.unpack_from("<iiii", blob, 4)[:3] == (0, 2, 11)  # kind, version 2, 11 fields
    back = core.deserialize("ReplayDecode", blob)
    assert back.values() == cfg.values() and back.get("read_dtype") == "nvfp4"


def _fnv1a(b: bytes) -> int:
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h


def _v1_blob():
    """A ReplayDecode version-1 blob exactly as the version-1 library wrote it (10 fields)."""
    fields = [("family", 3, 0, 0.0), ("window", 0, 16, 0.0), ("max_verify", 0, 1, 0.0), ("mode", 3, 0, 0.0),
              ("act_dtype", 3, 1, 0.0), ("state_dtype", 3, 0, 0.0), ("dt_dtype", 3, 0, 0.0), ("has_z", 0, 0, 0.0),
              ("u_dtype", 3, 0, 0.0), ("scale", 2, 0, 0.0)]
    payload = b"".join(struct.pack("<i", len(n)) + n.encode() + struct.pack("<iqd", t, i, f) for n, t, i, f in fields)
    head = b"RSSM" + struct.pack("<iiii", 0, 1, len(fields), len(payload)) + payload
    return head + struct.pack("<I", _fnv1a(head))


def test_version_1_blob_refused(core):
    with pytest.raises(CoreError, match=r"^ReplayDecode: serialized blob is plugin version 1; this library implements "
                                        r"version 2 \(rebuild the engine with this plugin library\)$"):
        core.deserialize("ReplayDecode", _v1_blob())
    # The same blob relabelled as version 2 has the wrong field count: refused too, with its own message.
    blob = bytearray(_v1_blob()[:-4])
    struct.pack_into("<i", blob, 8, 2)
    blob = bytes(blob) + struct.pack("<I", _fnv1a(bytes(blob)))
    with pytest.raises(CoreError, match="serialized blob has 10 fields; version 2 has 11"):
        core.deserialize("ReplayDecode", blob)


# ---------------------------------------------------------------------------------------- I/O maps
@pytest.mark.parametrize("state,read,z,tail", [
    ("fp32", "fp16", True, ["z", "ckpt_lp"]),
    ("fp32", "fp8_e4m3", False, ["ckpt_lp", "ckpt_lp_scale"]),
    ("fp8_e4m3", "nvfp4", True, ["z", "ckpt_lp", "ckpt_hp_scale", "ckpt_lp_scale", "ckpt_lp_gscale"]),
])
def test_io_map_mamba2_read_copy(core, state, read, z, tail):
    cfg = mamba_cfg(core, state_dtype=state, read_dtype=read, has_z=int(z))
    assert cfg.io_names() == (MAMBA_BASE + tail, ["y"])
    assert rt.replay_decode_input_names(ReplayConfig(window=L, max_verify=TMAX, recurrence_dtype=state, read_dtype=read,
                                                     rounding=None if state == "fp32" else "sr"),
                                        "mamba2", has_z=z) == MAMBA_BASE + tail


@pytest.mark.parametrize("state,read,tail", [
    ("fp32", "fp16", ["ckpt_lp", "ring_beta", "ring_v"]),
    ("fp16", "nvfp4", ["ckpt_lp", "ring_beta", "ring_v", "ckpt_lp_scale", "ckpt_lp_gscale"]),
    ("fp8_e4m3", "nvfp4", ["ckpt_lp", "ring_beta", "ring_v", "ckpt_hp_scale", "ckpt_lp_scale", "ckpt_lp_gscale"]),
])
def test_io_map_gdn_read_copy(core, state, read, tail):
    cfg = gdn_cfg(core, state_dtype=state, read_dtype=read)
    assert cfg.io_names() == (GDN_BASE + tail, ["o"])
    assert rt.replay_decode_input_names(ReplayConfig(window=L, recurrence_dtype=state, read_dtype=read,
                                                     rounding=None if state == "fp32" else "sr"), "gdn") == GDN_BASE + tail


def test_io_map_none_unchanged(core):
    """read_dtype 'none' keeps the version-1 I/O order (only the version number changed)."""
    assert core.config("ReplayDecode", has_z=1).io_names()[0][8] == "state"
    assert len(core.config("ReplayDecode", has_z=1).io_names()[0]) == 15
    assert len(core.config("ReplayDecode", family="gdn").io_names()[0]) == 14


def test_supports_exact_dtypes_read_copy(core):
    cfg = mamba_cfg(core, state_dtype="fp8_e4m3", read_dtype="nvfp4")
    types = [t for t, _ in mamba2_dp_inputs("fp8_e4m3", "nvfp4")] + ["bf16"]
    n_in = len(types) - 1
    assert n_in == 19
    for pos in range(len(types)):
        assert cfg.supports(pos, types, n_in, 1), pos
    bad = list(types)
    bad[8] = "fp32"  # ckpt_hp is fp8 bytes (uint8)
    assert not cfg.supports(8, bad, n_in, 1)
    bad = list(types)
    bad[15] = "fp16"  # ckpt_lp nvfp4 bytes
    assert not cfg.supports(15, bad, n_in, 1)
    bad = list(types)
    bad[17] = "fp32"  # nvfp4 block scales are e4m3 bytes
    assert not cfg.supports(17, bad, n_in, 1)
    assert not cfg.supports(0, types[:-2] + ["bf16"], n_in - 1, 1)  # optional count follows the fields
    g = gdn_cfg(core)
    gt = [t for t, _ in gdn_dp_inputs()] + ["fp16"]
    for pos in range(len(gt)):
        assert g.supports(pos, gt, len(gt) - 1, 1), pos


# ------------------------------------------------------------------------------------ input checks
def test_check_inputs_read_copy_ok(core):
    for state, read in VALID:
        mamba_cfg(core, state_dtype=state, read_dtype=read).check_inputs(mamba2_dp_inputs(state, read))
        gdn_cfg(core, state_dtype=state, read_dtype=read).check_inputs(gdn_dp_inputs(state, read))
    mamba_cfg(core).check_inputs(mamba2_dp_inputs(p=40))  # P = 40: not a replay-kernel instance, fine here


@pytest.mark.parametrize("which,kw,msg", [
    ("mamba2", dict(n=64), "state size N must be 128 with a read copy (dual-precision kernel, read_dtype 'fp16'); got 64"),
    ("mamba2", dict(p=12), "head dim P must be a multiple of 8 in [8, 128] with a read copy (dual-precision kernel); "
                           "got 12"),
    ("mamba2", dict(p=136), "head dim P must be a multiple of 8 in [8, 128]"),
    ("gdn", dict(k=64), "key dim K must be 128 with a read copy (dual-precision kernel, read_dtype 'fp16'); got 64"),
    ("gdn", dict(v=20), "value dim V must be a multiple of 8 in [8, 128] with a read copy"),
])
def test_check_inputs_kernel_limits_read_copy(core, which, kw, msg):
    cfg = mamba_cfg(core) if which == "mamba2" else gdn_cfg(core)
    ins = mamba2_dp_inputs(**kw) if which == "mamba2" else gdn_dp_inputs(**kw)
    with pytest.raises(CoreError) as e:
        cfg.check_inputs(ins)
    assert str(e.value).startswith("ReplayDecode: ") and msg in str(e.value)


def test_check_inputs_read_copy_messages(core):
    cfg = mamba_cfg(core, read_dtype="nvfp4")
    ins = mamba2_dp_inputs(read="nvfp4")
    bad = list(ins)
    bad[15] = ("uint8", [S, H, P, N])
    with pytest.raises(CoreError, match=r"ReplayDecode: input 15 'ckpt_lp' must be uint8 \[S, H, P, N/2\] = "
                                        r"\[5, 8, 64, 64\]; got uint8 \[5, 8, 64, 128\]"):
        cfg.check_inputs(bad)
    with pytest.raises(CoreError, match=r"expected 18 inputs for this configuration; got 17"):
        cfg.check_inputs(ins[:-1])
    g = gdn_cfg(core)
    bad = gdn_dp_inputs()
    bad[15] = ("fp16", [S, L, HV])
    with pytest.raises(CoreError, match=r"input 15 'ring_beta' must be float32 \[S, C, HV\]"):
        g.check_inputs(bad)


def test_flush_refuses_unsupported_state_size(core):
    """The flush kernel needs N = K = 128: the core refuses other sizes at build time (onShapeChange)."""
    cfg = core.config("DualPrecisionFlush", window=4, act_dtype="fp16", read_dtype="fp16")
    n, c = 64, 4   # standard mode, window 4: 4 ring rows
    ins = [("fp16", [2, 1, 2, 32]), ("int32", [2]), ("int32", [2]), ("int32", [2]), ("int32", [2]),
           ("fp32", [2, 2, 32, n]), ("fp16", [2, 2, 32, n]), ("fp32", [2]), ("fp32", [2, c, 2]),
           ("fp16", [2, c, 2, 32]), ("fp16", [2, c, 1, n])]
    with pytest.raises(CoreError, match=r"DualPrecisionFlush: state last dim \(Mamba-2 N / GDN K\) must be 128 "
                                        r"\(dual-precision flush kernel\); got 64"):
        cfg.check_inputs(ins)


# ------------------------------------------------------------------------------------ translation
def test_translate_mamba2_read_copy(core):
    cfg = mamba_cfg(core, state_dtype="fp8_e4m3", read_dtype="nvfp4", dt_dtype="act")
    ins = mamba2_dp_inputs("fp8_e4m3", "nvfp4")
    ins[1] = ("bf16", [B, T, H])
    p = cfg.translate(ins, [("bf16", [B, T, H, P])])
    assert (p["family"], p["batch"], p["num_tokens"], p["num_slots"], p["window"], p["ring_capacity"], p["mode"]) == \
        (0, B, T, S, L, C, 1)
    assert (p["nheads"], p["headdim"], p["dstate"], p["ngroups"]) == (H, P, N, G)
    assert (p["act_dtype"], p["recurrence_dtype"], p["read_dtype"], p["dt_dtype"], p["scale"]) == (2, 3, 4, 2, 0)
    assert (p["stride_hp_slot"], p["stride_hp_head"], p["stride_hp_row"]) == (H * P * N, P * N, N)  # bytes (fp8)
    assert (p["stride_lp_slot"], p["stride_lp_head"], p["stride_lp_row"]) == (H * P * N // 2, P * N // 2, N // 2)
    ptr = {name: 0x1000 * (i + 1) for i, name in enumerate(cfg.io_names()[0])}
    for k in ("x", "A", "D", "dt_bias", "ring_dt", "ring_x", "ring_B", "z", "ckpt_hp", "ckpt_lp", "ckpt_hp_scale",
              "ckpt_lp_scale", "ckpt_lp_gscale", "state_batch_indices", "ring_origin", "ring_len"):
        assert p[k] == ptr[k], k
    assert (p["dt_raw"], p["Bm"], p["Cm"], p["y"]) == (ptr["dt"], ptr["B"], ptr["C"], 0x100000)
    for k in ("q", "k", "v", "a", "b", "A_log", "gdn_dt_bias", "ring_g", "ring_u", "ring_k", "ring_beta", "ring_v", "o"):
        assert p[k] is None, k


def test_translate_mamba2_fp16_read_standard(core):
    cfg = core.config("ReplayDecode", window=L, act_dtype="fp16", read_dtype="fp16")
    ins = mamba2_dp_inputs(act="fp16", z=False, t=1)
    ins[9], ins[10], ins[11] = ("fp32", [S, L, H]), ("fp16", [S, L, H, P]), ("fp16", [S, L, G, N])
    p = cfg.translate(ins, [("fp16", [B, 1, H, P])])
    assert (p["mode"], p["ring_capacity"], p["recurrence_dtype"], p["read_dtype"], p["dt_dtype"]) == (0, L, 0, 1, 0)
    assert p["z"] is None and p["ckpt_hp_scale"] is None and p["ckpt_lp_scale"] is None and p["ckpt_lp_gscale"] is None
    assert p["ckpt_lp"] == 0x1000 * 15 and p["ckpt_hp"] == 0x1000 * 9
    assert (p["stride_lp_slot"], p["stride_lp_row"]) == (H * P * N, N)


def test_translate_gdn_read_copy(core):
    cfg = gdn_cfg(core, state_dtype="fp32", read_dtype="fp8_e4m3", scale=0.25)
    ins = gdn_dp_inputs("fp32", "fp8_e4m3")
    p = cfg.translate(ins, [("fp16", [B, 1, HV, V])])
    assert (p["family"], p["num_tokens"], p["mode"], p["ring_capacity"]) == (1, 1, 0, L)
    assert (p["nheads"], p["headdim"], p["dstate"], p["ngroups"]) == (HV, V, K, HK)
    assert (p["act_dtype"], p["recurrence_dtype"], p["read_dtype"], p["scale"]) == (1, 0, 3, 0.25)
    assert (p["stride_hp_slot"], p["stride_hp_head"], p["stride_hp_row"]) == (HV * V * K, V * K, K)
    ptr = {name: 0x1000 * (i + 1) for i, name in enumerate(cfg.io_names()[0])}
    for k in ("q", "k", "v", "a", "b", "A_log", "ring_g", "ring_u", "ring_k", "ring_beta", "ring_v", "ckpt_hp",
              "ckpt_lp", "ckpt_lp_scale"):
        assert p[k] == ptr[k], k
    assert p["gdn_dt_bias"] == ptr["dt_bias"] and p["o"] == 0x100000 and p["ckpt_lp_gscale"] is None
    for k in ("x", "dt_raw", "Bm", "Cm", "z", "A", "D", "dt_bias", "ring_dt", "ring_x", "ring_B", "y"):
        assert p[k] is None, k


def test_translate_refuses_wrong_output(core):
    cfg = mamba_cfg(core)
    with pytest.raises(CoreError, match=r"ReplayDecode: output 0 'y' must be bfloat16 \[B, T, H, P\]; got float16"):
        cfg.translate(mamba2_dp_inputs(), [("fp16", [B, T, H, P])])


# ----------------------------------------------------------------------------------- Python helpers
def _fields_cfg(core, fields):
    codes = {"int32": 5, "int64": 10, "float32": 1, "enum": 6}
    assert [n for n, _, _ in fields] == [f["name"] for f in core.schema("ReplayDecode")]
    return core.config_from_fields("ReplayDecode", [(n, codes[k], v) for n, k, v in fields]).values()


@pytest.mark.parametrize("rec,read", [("fp32", "fp16"), ("fp16", "fp8_e4m3"), ("fp8_e4m3", "nvfp4"), ("bf16", "nvfp4")])
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_python_fields_read_copy_match_core(core, family, rec, read):
    cfg = ReplayConfig(window=16, max_verify=4, recurrence_dtype=rec, read_dtype=read, key_dim=128,
                       rounding=None if rec == "fp32" else "sr")
    v = _fields_cfg(core, rt.replay_decode_fields(cfg, family, "bf16", has_z=family == "mamba2", state_size=128))
    assert (v["read_dtype"], v["state_dtype"], v["family"]) == (read, rec, family)
    assert v["mode"] == ("speculative" if family == "mamba2" else "standard")
    names = rt.replay_decode_input_names(cfg, family, has_z=family == "mamba2")
    assert names == core.config("ReplayDecode", **{k: v[k] for k in v}).io_names()[0]


def test_python_versions_match_core(core):
    for plugin, version in rt.PLUGIN_VERSIONS.items():
        assert core.names(plugin)[2] == version


def test_shared_checkpoint_mode_is_refused_by_replay_decode():
    # One SR-written low-precision checkpoint cannot be honoured by ReplayDecode's RTN flush: refuse.
    from replayssm_trtllm.config import ReplayConfig
    from replayssm_trtllm.trt.fields import replay_decode_fields
    cfg = ReplayConfig(window=16, recurrence_dtype="fp16", checkpoint_mode="shared", family="mamba2")
    with pytest.raises(ValueError, match="checkpoint_mode 'shared'"):
        replay_decode_fields(cfg, family="mamba2", act_dtype="bf16")
