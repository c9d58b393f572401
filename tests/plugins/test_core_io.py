"""Plugin core: I/O maps, dtype table, shape rules, input checks, workspace, params translation."""
import pytest

from replayssm_trtllm.trt.core import CoreError

B, T, H, P, N, G, S = 3, 2, 8, 64, 128, 2, 5
L, TMAX = 6, 2
C = L + TMAX


def mamba2_inputs(T=T, act="bf16", state_t="fp32", dt="fp32", z=True, C=C, P=P, **over):
    state = state_t
    t = {
        "x": (act, [B, T, H, P]), "dt": (dt, [B, T, H]), "B": (act, [B, T, G, N]), "C": (act, [B, T, G, N]),
        "A": ("fp32", [H]), "D": ("fp32", [H]), "dt_bias": ("fp32", [H]), "state_batch_indices": ("int32", [B]),
        "state": (state, [S, H, P, N]), "ring_dt": ("fp32", [S, C, H]), "ring_x": (act, [S, C, H, P]),
        "ring_B": (act, [S, C, G, N]), "ring_origin": ("int32", [S]), "ring_len": ("int32", [S]),
    }
    if z:
        t["z"] = (act, [B, T, H, P])
    t.update(over)
    return list(t.values())


@pytest.fixture
def mamba_spec(core):
    return core.config("ReplayDecode", window=L, max_verify=TMAX, mode="speculative", has_z=1)


def test_io_map_mamba2(core, mamba_spec):
    ins, outs = mamba_spec.io_names()
    assert ins == ["x", "dt", "B", "C", "A", "D", "dt_bias", "state_batch_indices", "state", "ring_dt", "ring_x",
                   "ring_B", "ring_origin", "ring_len", "z"]
    assert outs == ["y"]
    assert core.config("ReplayDecode").io_names()[0][-1] == "ring_len"  # z only with has_z


def test_io_map_gdn_and_others(core):
    gdn = ["q", "k", "v", "a", "b", "A_log", "dt_bias", "state_batch_indices", "state", "ring_g", "ring_u", "ring_k",
           "ring_origin", "ring_len"]
    assert core.config("ReplayDecode", family="gdn").io_names() == (gdn, ["o"])
    assert core.config("GdnVerify").io_names() == (gdn, ["o"])
    assert core.config("ReplayCommit").io_names() == (
        ["after", "state_batch_indices", "ring_origin", "ring_len"], ["error_slot"])
    assert core.config("ReplayCommit", mode="speculative", max_verify=2, has_accepted=1).io_names()[0][-1] == "accepted"
    f = core.config("DualPrecisionFlush", recurrence_dtype="fp32", read_dtype="nvfp4")
    assert f.io_names() == (["after", "state_batch_indices", "ring_origin", "ring_len", "flush_index", "ckpt_hp",
                             "ckpt_lp", "A", "ring_dt", "ring_x", "ring_B", "ckpt_lp_scale", "ckpt_lp_gscale"],
                            ["flushed"])
    g = core.config("DualPrecisionFlush", family="gdn", recurrence_dtype="fp8_e4m3", read_dtype="nvfp4", rounding="sr")
    assert g.io_names()[0][7:] == ["ring_g", "ring_k", "ring_beta", "ring_v", "ckpt_hp_scale", "ckpt_lp_scale",
                                   "ckpt_lp_gscale"]


def test_supports_exact_dtypes(core, mamba_spec):
    types = [t for t, _ in mamba2_inputs()] + ["bf16"]
    n_in = len(types) - 1
    for pos in range(len(types)):
        assert mamba_spec.supports(pos, types, n_in, 1), pos
    bad = list(types)
    bad[8] = "fp16"  # state must be the configured fp32
    assert not mamba_spec.supports(8, bad, n_in, 1)
    bad = list(types)
    bad[0] = "fp16"  # act is bf16
    assert not mamba_spec.supports(0, bad, n_in, 1)
    assert not mamba_spec.supports(0, types[:-2] + ["bf16"], n_in - 1, 1)  # wrong input count


def test_output_types_and_shapes(core, mamba_spec):
    assert mamba_spec.output_types([t for t, _ in mamba2_inputs()]) == ["bf16"]
    assert mamba_spec.output_shape([d for _, d in mamba2_inputs()]) == [B, T, H, P]
    gdn = core.config("GdnVerify", act_dtype="fp16")
    dims = [[B, T, 2, 128], [B, T, 2, 128], [B, T, 4, 96]] + [[1]] * 11
    assert gdn.output_shape(dims) == [B, T, 4, 96] and gdn.output_types(["fp16"] * 14) == ["fp16"]
    commit = core.config("ReplayCommit")
    assert commit.output_shape([[B, 1, H, P], [B], [S], [S]]) == [1] and commit.output_types(["bf16"]) == ["int32"]
    flush = core.config("DualPrecisionFlush", read_dtype="fp16")
    assert flush.output_shape([[B, 1, H, P], [B]] + [[S]] * 9) == [B]


def test_check_inputs_ok(mamba_spec):
    mamba_spec.check_inputs(mamba2_inputs())
    mamba_spec.check_inputs(mamba2_inputs(T=1))


@pytest.mark.parametrize("over,msg", [
    (dict(state=("fp16", [S, H, P, N])),
     "ReplayDecode: input 8 'state' must be float32 [S, H, P, N] = [5, 8, 64, 128]; got float16 [5, 8, 64, 128]"),
    (dict(ring_x=("bf16", [S, C + 1, H, P])),
     "ReplayDecode: input 10 'ring_x' must be bfloat16 [S, C, H, P] = [5, 8, 8, 64]; got bfloat16 [5, 9, 8, 64] (C is the "
     "ring capacity: window in mode 'standard', window + max_verify in mode 'speculative'; allocate the ring pools "
     "with that many records per slot)"),
    (dict(A=("fp32", [H, 1])), "ReplayDecode: input 4 'A' must be float32 [H] = [8]; got float32 [8, 1]"),
    (dict(state_batch_indices=("int64", [B])), "input 7 'state_batch_indices' must be int32 [B] = [3]; got int64 [3]"),
])
def test_check_inputs_messages(mamba_spec, over, msg):
    with pytest.raises(CoreError) as e:
        mamba_spec.check_inputs(mamba2_inputs(**over))
    assert str(e.value).startswith("ReplayDecode: ") and str(e.value).endswith(msg.replace("ReplayDecode: ", ""))


def test_check_inputs_token_rules(core, mamba_spec):
    with pytest.raises(CoreError, match=r"token count T \(dim 1 of input 0\) must be in \[1, 2\] \(max_verify\); got 3"):
        mamba_spec.check_inputs(mamba2_inputs(T=3))
    std = core.config("ReplayDecode", window=L, has_z=1)
    with pytest.raises(CoreError, match=r"must be in \[1, 1\]"):
        std.check_inputs(mamba2_inputs(T=2, C=L))


def test_check_inputs_ring_capacity_hint(core):
    """A ring of the wrong capacity (here L + 1 rows in mode standard, the rule before the sixty-eighth session) names
    the rule in the error."""
    std = core.config("ReplayDecode", window=L, has_z=1)
    with pytest.raises(CoreError, match=r"input 9 'ring_dt' must be float32 \[S, C, H\] = \[.*\]; got float32 .* \(C is "
                                        r"the ring capacity: window in mode 'standard', window \+ max_verify in mode "
                                        r"'speculative'"):
        std.check_inputs(mamba2_inputs(T=1, C=L + 1))
    std.check_inputs(mamba2_inputs(T=1, C=L))


def test_check_inputs_kernel_limits(core):
    cfg = core.config("ReplayDecode", window=L, max_verify=TMAX, mode="speculative", has_z=0)
    ins = mamba2_inputs(z=False, P=48)
    with pytest.raises(CoreError, match=r"head dim P must be one of \[32, 64, 80, 128\]"):
        cfg.check_inputs(ins)


def test_unknown_dims_are_skipped_at_build_time(mamba_spec):
    ins = mamba2_inputs()
    ins[0] = ("bf16", [-1, -1, H, P])  # dynamic batch / tokens
    mamba_spec.check_inputs(ins)


@pytest.mark.parametrize("plugin", ["ReplayDecode", "GdnVerify", "ReplayCommit", "DualPrecisionFlush"])
def test_workspace_formula_is_zero(core, plugin):
    cfg = core.config(plugin, **({"read_dtype": "fp16"} if plugin == "DualPrecisionFlush" else {}))
    assert cfg.workspace_size([("fp32", [1])] * len(cfg.io_names()[0])) == 0


def test_translate_mamba2(core, mamba_spec):
    ins = mamba2_inputs()
    p = mamba_spec.translate(ins, [("bf16", [B, T, H, P])])
    assert p["variant"] == -1  # RSSM_MAMBA2_VARIANT_AUTO: the launcher picks the design
    assert (p["batch"], p["num_tokens"], p["nheads"], p["headdim"], p["dstate"], p["ngroups"]) == (B, T, H, P, N, G)
    assert (p["num_slots"], p["window"], p["ring_capacity"], p["mode"]) == (S, L, C, 1)
    assert (p["state_dtype"], p["act_dtype"], p["dt_dtype"]) == (0, 2, 0)
    assert (p["stride_state_slot"], p["stride_state_head"], p["stride_state_p"]) == (H * P * N, P * N, N)
    assert (p["stride_x_b"], p["stride_x_t"], p["stride_x_h"]) == (T * H * P, H * P, P)
    assert (p["stride_B_b"], p["stride_B_t"], p["stride_B_g"]) == (T * G * N, G * N, N)
    assert (p["stride_dt_b"], p["stride_dt_t"], p["stride_dt_h"]) == (T * H, H, 1)
    ptr = {name: 0x1000 * (i + 1) for i, name in enumerate(mamba_spec.io_names()[0])}
    assert p["x"] == ptr["x"] and p["state"] == ptr["state"] and p["ring_B"] == ptr["ring_B"] and p["z"] == ptr["z"]
    assert p["state_batch_indices"] == ptr["state_batch_indices"] and p["ring_len"] == ptr["ring_len"]
    assert p["y"] == 0x100000


def test_translate_mamba2_without_z(core):
    cfg = core.config("ReplayDecode", window=L)
    p = cfg.translate(mamba2_inputs(T=1, z=False, C=L), [("bf16", [B, 1, H, P])])
    assert p["z"] is None and p["mode"] == 0 and p["ring_capacity"] == L   # standard mode: L ring rows


def test_translate_gdn(core):
    HK, HV, K, V = 2, 4, 128, 96
    cfg = core.config("GdnVerify", window=L, max_verify=TMAX, act_dtype="fp16", u_dtype="fp16", scale=0.5)
    ins = [("fp16", [B, T, HK, K]), ("fp16", [B, T, HK, K]), ("fp16", [B, T, HV, V]), ("fp16", [B, T, HV]),
           ("fp16", [B, T, HV]), ("fp32", [HV]), ("fp32", [HV]), ("int32", [B]), ("fp32", [S, HV, V, K]),
           ("fp32", [S, C, HV]), ("fp16", [S, C, HV, V]), ("fp16", [S, C, HK, K]), ("int32", [S]), ("int32", [S])]
    p = cfg.translate(ins, [("fp16", [B, T, HV, V])])
    assert (p["num_heads"], p["num_v_heads"], p["head_k"], p["head_v"], p["mode"], p["scale"]) == (HK, HV, K, V, 1, 0.5)
    assert (p["ring_u_stride_slot"], p["ring_u_stride_rec"], p["ring_u_stride_head"]) == (C * HV * V, HV * V, V)
    assert (p["state_stride_slot"], p["state_stride_head"], p["state_stride_v"]) == (HV * V * K, V * K, K)
    assert p["o"] == 0x100000 and p["ring_k"] == 0x1000 * 12
    # kernel design: GDN_VARIANT_AUTO (-1), resolved by the launcher: the split kernels with a workspace at
    # large batches, else the stream kernel 4 at K = 128 / the tile kernel 1 at K = 64 (the rule is tested on
    # the kernel library in tests/kernels/test_gdn.py::test_auto_variant_rule)
    assert p["variant"] == -1
    k64 = [(t, [64 if (i in (0, 1, 11) and k == len(dims) - 1) or (i == 8 and k == 3) else d
                for k, d in enumerate(dims)]) for i, (t, dims) in enumerate(ins)]
    assert cfg.translate(k64, [("fp16", [B, T, HV, V])])["variant"] == -1
    with pytest.raises(CoreError, match=r"value heads HV = 4 must be a multiple of key heads H = 3"):
        bad = [(t, [3 if (i in (0, 1, 11) and k == 2) else d for k, d in enumerate(dims)]) for i, (t, dims) in enumerate(ins)]
        cfg.check_inputs(bad)


def test_translate_commit(core):
    cfg = core.config("ReplayCommit", window=L, max_verify=TMAX, mode="speculative", has_accepted=1)
    ins = [("bf16", [B, T, H, P]), ("int32", [B]), ("int32", [S]), ("int32", [S]), ("int32", [B])]
    p = cfg.translate(ins, [("int32", [1])])
    assert p == {"batch": B, "num_slots": S, "window": L, "ring_capacity": C, "num_tokens": T, "mode": 1,
                 "state_batch_indices": 0x2000, "accepted": 0x5000, "ring_origin": 0x3000, "ring_len": 0x4000,
                 "error_slot": 0x100000}
    std_ins = [("bf16", [B, 1, H, P])] + ins[1:4]
    p = core.config("ReplayCommit", window=L).translate(std_ins, [("int32", [1])])
    assert p["accepted"] is None and p["mode"] == 0 and p["num_tokens"] == 1 and p["ring_capacity"] == L   # standard mode: L ring rows
    with pytest.raises(CoreError, match="must be in \\[1, 1\\]"):  # standard commit after a T = 2 step
        core.config("ReplayCommit", window=L).check_inputs(ins[:4])


def test_translate_flush(core):
    cfg = core.config("DualPrecisionFlush", window=L, max_verify=TMAX, mode="speculative", act_dtype="bf16",
                      recurrence_dtype="fp16", read_dtype="nvfp4", rounding="sr", seed=(1 << 40) + 7, layer_index=3)
    ins = [("bf16", [B, T, H, P]), ("int32", [B]), ("int32", [S]), ("int32", [S]), ("int32", [B]),
           ("fp16", [S, H, P, N]), ("uint8", [S, H, P, N // 2]), ("fp32", [H]), ("fp32", [S, C, H]),
           ("bf16", [S, C, H, P]), ("bf16", [S, C, G, N]), ("uint8", [S, H, P, N // 16]), ("fp32", [S, H])]
    p = cfg.translate(ins, [("int32", [B])])
    assert (p["family"], p["dstate"], p["recurrence_dtype"], p["read_dtype"], p["rounding"]) == (0, N, 1, 4, 1)
    assert (p["seed_lo"], p["seed_hi"], p["layer_index"]) == (7, 1 << 8, 3)
    assert (p["stride_lp_slot"], p["stride_lp_row"]) == (H * P * N // 2, N // 2)
    assert p["ckpt_hp_scale"] is None and p["ckpt_lp_scale"] == 0x1000 * 12 and p["ckpt_lp_gscale"] == 0x1000 * 13
    assert p["ring_g"] is None and p["ring_B"] == 0x1000 * 11 and p["flushed"] == 0x100000
    bad = list(ins)
    bad[6] = ("uint8", [S, H, P, N])
    with pytest.raises(CoreError, match=r"input 6 'ckpt_lp' must be uint8 \[S, H, P, N/2\] = \[5, 8, 64, 64\]"):
        cfg.check_inputs(bad)
