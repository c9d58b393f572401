"""Host-side tests of the dual-precision ops and benchmark (no GPU): ABI mirrors, copy layouts, argument
validation, benchmark bookkeeping."""
import argparse
import re
from pathlib import Path

import pytest
import torch

from replayssm_trtllm.bench import precision as bp
from replayssm_trtllm.ops import dual_precision as dp

KDIR = Path(__file__).resolve().parents[2] / "cpp_plugins" / "kernels" / "dual_precision"


def _c_fields(header: str, struct: str):
    text = (KDIR / header).read_text()
    body = re.search(r"typedef struct " + struct + r" \{(.*?)\} " + struct + ";", text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    names = []
    for decl in body.split(";"):
        decl = decl.strip()
        if not decl:
            continue
        decl = re.sub(r"^(const\s+)?\w+\s*\**", "", decl)
        names += [n.strip().lstrip("*") for n in decl.split(",")]
    return names


@pytest.mark.parametrize("header,struct,mirror", [
    ("dual_precision_flush.h", "DualPrecisionFlushParams", dp.DualPrecisionFlushParams),
    ("dual_precision.h", "DualPrecisionDecodeParams", dp.DualPrecisionDecodeParams),
    ("dual_precision.h", "DualPrecisionCodecParams", dp.DualPrecisionCodecParams),
])
def test_ctypes_mirror_matches_header(header, struct, mirror):
    assert [f[0] for f in mirror._fields_] == _c_fields(header, struct)


def test_abi_sizes():
    # checked against g++ sizeof / offsetof of the headers (x86-64)
    import ctypes
    assert ctypes.sizeof(dp.DualPrecisionFlushParams) == 400  # ABI 7: + deferred-row step inputs
    assert dp.DualPrecisionFlushParams.x.offset == 264 and dp.DualPrecisionFlushParams.dt_dtype.offset == 392
    assert ctypes.sizeof(dp.DualPrecisionDecodeParams) == 400  # ABI 6: + workspace, workspace_bytes; 7: + defer
    assert dp.DualPrecisionDecodeParams.workspace.offset == 376
    assert dp.DualPrecisionDecodeParams.defer_flush_rows.offset == 392
    assert ctypes.sizeof(dp.DualPrecisionCodecParams) == 88


@pytest.mark.parametrize("fmt", dp.FORMATS)
def test_state_copy_layout(fmt):
    c = dp.StateCopy.empty(fmt, 2, 4, 64, 128, "cpu")
    assert c.shape == (2, 4, 64, 128)
    assert c.nbytes_per_state() == bp.state_bytes(fmt, 4, 64)
    c.check("t", "c", 2, 4, 64, 128, torch.device("cpu"))
    with pytest.raises(ValueError, match="'c'"):
        c.check("t", "c", 2, 4, 32, 128, torch.device("cpu"))


def test_state_copy_rejects_unknown_format():
    with pytest.raises(ValueError, match="fmt must be one of"):
        dp.StateCopy.empty("int8", 1, 1, 8, 128, "cpu")


def _mamba_args(P=64, N=128, T=1, fmt="fp16"):
    S, B, H, G, C = 2, 2, 4, 2, 5
    lp = dp.StateCopy.empty(fmt, S, H, P, N, "cpu")
    f16 = torch.float16
    return dict(ckpt_hp=torch.zeros(S, H, P, N), ckpt_hp_scale=None, ckpt_lp=lp.data, ckpt_lp_scale=lp.scale,
                ckpt_lp_gscale=lp.gscale, ring_dt=torch.zeros(S, C, H), ring_x=torch.zeros(S, C, H, P, dtype=f16),
                ring_B=torch.zeros(S, C, G, N, dtype=f16), ring_origin=torch.zeros(S, dtype=torch.int32),
                ring_len=torch.zeros(S, dtype=torch.int32), x=torch.zeros(B, T, H, P, dtype=f16),
                dt_raw=torch.zeros(B, T, H, dtype=f16), B=torch.zeros(B, T, G, N, dtype=f16),
                C=torch.zeros(B, T, G, N, dtype=f16), A=-torch.ones(H), D=None, dt_bias=None, z=None,
                state_batch_indices=torch.zeros(B, dtype=torch.int32), y=torch.zeros(B, T, H, P, dtype=f16),
                window=4, mode=0, recurrence_fmt="fp32", read_fmt=fmt)


def test_mamba2_decode_validation():
    with pytest.raises(ValueError, match="dp_mamba2_decode: need N = 128"):
        dp.dp_mamba2_decode(**_mamba_args(P=12))
    a = _mamba_args()
    a["mode"] = 0
    a["x"] = torch.zeros(2, 2, 4, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="T must be 1 in standard mode"):
        dp.dp_mamba2_decode(**a)
    a = _mamba_args()
    a["ring_B"] = a["ring_B"].float()
    with pytest.raises(ValueError, match="'ring_B' must be contiguous float16"):
        dp.dp_mamba2_decode(**a)
    a = _mamba_args(fmt="nvfp4")
    a["ckpt_lp_gscale"] = None
    with pytest.raises(ValueError, match="ckpt_lp.gscale"):
        dp.dp_mamba2_decode(**a)
    a = _mamba_args()
    a["window"] = 5  # capacity 5 >= 5 ok; 6 is too big
    a["window"] = 6
    with pytest.raises(ValueError, match="ring capacity"):
        dp.dp_mamba2_decode(**a)


def test_flush_validation():
    with pytest.raises(ValueError, match="family must be"):
        dp.dual_precision_flush("rwkv", None, None, torch.zeros(1), None, None, torch.zeros(1, dtype=torch.int32),
                                torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), None, None, None,
                                None, None, None, None, None, None, torch.zeros(1, dtype=torch.int32), 4, 0, 1,
                                "fp32", "fp16", "sr", 0, 0, None, None, None, None, None, None, None, None,
                                None, None, None, None, None, None, None, None, 0.0)


def test_cache_validation_and_rounding_defaults():
    c = dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 4, read_fmt="nvfp4", recurrence_fmt="fp16", device="cpu")
    assert c.rounding == "sr" and c.capacity == 4 and c.hp.fmt == "fp16"
    c = dp.GdnDualPrecisionCache(2, 1, 2, 16, 4, 2, "speculative", read_fmt="fp8_e4m3", recurrence_fmt="fp32",
                                 device="cpu")
    assert c.rounding == "rtn" and c.capacity == 6 and c.ring_v.shape == (2, 6, 2, 16)
    shared = dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 1, read_fmt="fp8_e4m3", recurrence_fmt=None, device="cpu")
    assert shared.hp is None and shared.rounding == "sr"
    with pytest.raises(ValueError, match="recurrence_fmt"):
        dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 4, read_fmt="fp16", recurrence_fmt="nvfp4", device="cpu")
    with pytest.raises(ValueError, match="rounding"):
        dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 4, rounding="up", device="cpu")


def test_bench_arguments_and_ratio():
    ap = argparse.ArgumentParser()
    bp.add_arguments(ap)
    a = ap.parse_args([])
    assert (a.batch, a.window) == (256, 16) and a.reads.split(",") == list(bp.READS)
    assert bp.nonflush_ratio([100.0, 80.0], 20.0) == pytest.approx(4.0)   # faster fp32 step is the denominator
    assert bp.nonflush_ratio([None, 80.0], 40.0) == pytest.approx(2.0)
    assert bp.nonflush_ratio([None], 10.0) is None
    assert set(bp.NONFLUSH_GOALS) == {(f, r) for f in ("mamba2", "gdn") for r in ("fp16", "fp8_e4m3", "nvfp4")}
    assert a.no_compare_paths is False and ap.parse_args(["--no-compare-paths"]).no_compare_paths


def test_bench_decode_path_switch(monkeypatch):
    """The A/B switch of the dual-precision decode path is set inside the block and restored after."""
    import os
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "stream-default")
    with bp.decode_path("tile"):
        assert os.environ["RSSM_DP_DECODE_PATH"] == "tile"
    assert os.environ["RSSM_DP_DECODE_PATH"] == "stream-default"
    monkeypatch.delenv("RSSM_DP_DECODE_PATH")
    with bp.decode_path("tile"):
        assert os.environ["RSSM_DP_DECODE_PATH"] == "tile"
    assert "RSSM_DP_DECODE_PATH" not in os.environ


def test_bench_byte_model():
    sh = bp.MAMBA2_SHAPE
    nf32 = bp.step_bytes("mamba2", sh, 256, "fp32", 8)
    nf4 = bp.step_bytes("mamba2", sh, 256, "nvfp4", 8)
    assert nf32 > 4 * (nf4 - 256 * 9 * bp.record_bytes("mamba2", sh)) > 0
    assert bp.state_bytes("nvfp4", 128, 64) == 128 * 64 * 128 * 9 // 16 + 4 * 128


def _lib_or_skip():
    from replayssm_trtllm.ops._lib import KernelLibraryError, load_library
    try:
        return load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_launchers_refuse_misaligned_ring_records(family):
    """The decode and flush kernels stage ring records with 16-byte cp.async: the C launchers refuse a
    misaligned ring pointer by name before anything runs (host-only path, no GPU needed)."""
    import ctypes
    _lib_or_skip()
    from replayssm_trtllm.ops._lib import check_status
    good, bad = 0x10000, 0x10002  # never dereferenced: validation fails first
    mamba = family == "mamba2"
    d = dp.DualPrecisionDecodeParams(
        family=0 if mamba else 1, batch=1, num_tokens=1, num_slots=1, window=4, ring_capacity=4, mode=0, nheads=2,
        headdim=64, dstate=128, ngroups=1, act_dtype=1, recurrence_dtype=0, read_dtype=1, dt_dtype=0,
        stride_lp_slot=2 * 64 * 128, stride_lp_head=64 * 128, stride_lp_row=128)
    for n in ("ckpt_lp", "ring_origin", "ring_len", "x", "dt_raw", "Bm", "Cm", "A", "ring_dt", "ring_x", "ring_B", "y",
              "q", "k", "v", "a", "b", "A_log", "gdn_dt_bias", "ring_g", "ring_u", "ring_k", "o"):
        setattr(d, n, good)
    setattr(d, "ring_x" if mamba else "ring_u", bad)
    with pytest.raises(RuntimeError, match=r"ring records \(ring_x, ring_B\)" if mamba
                       else r"ring records \(ring_u, ring_k\)"):
        check_status(dp._launcher("rssm_dual_precision_decode_launch", dp.DualPrecisionDecodeParams)(
            ctypes.byref(d), None), "decode")
    f = dp.DualPrecisionFlushParams(
        family=0 if mamba else 1, batch=1, num_tokens=1, num_slots=1, window=4, ring_capacity=4, mode=0, nheads=2,
        headdim=64, dstate=128, ngroups=1, act_dtype=1, recurrence_dtype=0, read_dtype=1, rounding=0)
    for n in ("ckpt_hp", "ckpt_lp", "ring_origin", "ring_len", "A", "ring_dt", "ring_x", "ring_B", "ring_g", "ring_k",
              "ring_beta", "ring_v"):
        setattr(f, n, good)
    setattr(f, "ring_B" if mamba else "ring_v", bad)
    with pytest.raises(RuntimeError, match=r"ring records \(ring_x, ring_B\)" if mamba else r"ring records \(ring_v\)"):
        check_status(dp._launcher("rssm_dual_precision_flush_launch", dp.DualPrecisionFlushParams)(
            ctypes.byref(f), None), "flush")


def test_gdn_replay_launcher_skip_flush_rows_rule():
    """The dual-precision GDN stream path asks the replay launcher to skip flushing rows; only the stream
    variants (3-5) implement it, so a tile variant is refused by name (host-only check, no GPU needed)."""
    import ctypes
    _lib_or_skip()
    from replayssm_trtllm.ops import gdn as G
    from replayssm_trtllm.ops._lib import check_status
    good = 0x10000
    g = G.GdnReplayParams(batch=1, num_tokens=1, num_heads=1, num_v_heads=2, head_k=128, head_v=64, num_slots=1,
                          window=4, ring_capacity=4, mode=0, state_dtype=1, act_dtype=2, u_dtype=1, variant=1,
                          state_stride_slot=2 * 64 * 128, state_stride_head=64 * 128, state_stride_v=128,
                          q_stride_b=128, q_stride_t=128, q_stride_h=128, k_stride_b=128, k_stride_t=128,
                          k_stride_h=128, v_stride_b=128, v_stride_t=128, v_stride_h=64, a_stride_b=2, a_stride_t=2,
                          b_stride_b=2, b_stride_t=2, o_stride_b=128, o_stride_t=128, o_stride_h=64,
                          ring_g_stride_slot=8, ring_g_stride_rec=2, ring_u_stride_slot=512, ring_u_stride_rec=128,
                          ring_u_stride_head=64, ring_k_stride_slot=512, ring_k_stride_rec=128, ring_k_stride_head=128,
                          skip_flush_rows=1)
    for n in ("state", "state_batch_indices", "ring_origin", "ring_len", "ring_g", "ring_u", "ring_k", "q", "k", "v",
              "a", "b", "A_log", "dt_bias", "o"):
        setattr(g, n, good)
    with pytest.raises(RuntimeError, match="need a stream variant \\(3, 4 or 5\\) or the split kernels \\(6\\); "
                                           "got variant 1"):
        check_status(G._launcher("rssm_gdn_replay_launch", G.GdnReplayParams)(ctypes.byref(g), None), "gdn")
    g.skip_flush_rows = 2
    g.variant = 4
    with pytest.raises(RuntimeError, match="skip_flush_rows must be 0 or 1; got 2"):
        check_status(G._launcher("rssm_gdn_replay_launch", G.GdnReplayParams)(ctypes.byref(g), None), "gdn")



def test_mamba2_replay_launcher_skip_flush_rows_rules():
    """The dual-precision Mamba-2 stream path asks the replay launcher to skip flushing rows; only the
    persistent variants (1, 2) implement it, and a value other than 0 / 1 is refused by name (host-only
    checks, no GPU needed)."""
    import ctypes
    _lib_or_skip()
    from replayssm_trtllm.ops import mamba2 as M
    from replayssm_trtllm.ops._lib import check_status
    m = M.Mamba2ReplayParams(batch=1, num_tokens=1, nheads=2, headdim=64, dstate=128, ngroups=1, num_slots=1,
                             window=4, ring_capacity=4, mode=0, state_dtype=1, act_dtype=2, dt_dtype=0)
    run = lambda: check_status(M._fn("rssm_mamba2_replay_launch", M.Mamba2ReplayParams)(  # noqa: E731
        ctypes.byref(m), None), "mamba2")
    m.skip_flush_rows, m.variant = 2, 2
    with pytest.raises(RuntimeError, match="skip_flush_rows must be 0 or 1; got 2"):
        run()
    for v in (0, 3):
        m.skip_flush_rows, m.variant = 1, v
        with pytest.raises(RuntimeError, match=f"needs a persistent variant \\(1 or 2\\) or the split kernels "
                                               f"\\(4\\); got variant {v}"):
            run()


def _decode_params(family, batch, nheads, headdim, window, mode=0, num_tokens=1, read_dtype=1):
    return dp.DualPrecisionDecodeParams(
        family=family, batch=batch, num_tokens=num_tokens, num_slots=batch, window=window,
        ring_capacity=window + (num_tokens if mode else 0), mode=mode, nheads=nheads, headdim=headdim, dstate=128,
        ngroups=8 if family == 0 else 16, act_dtype=2, recurrence_dtype=0, read_dtype=read_dtype, dt_dtype=0,
        stride_lp_slot=nheads * headdim * 128, stride_lp_head=headdim * 128, stride_lp_row=128)


def test_decode_split_workspace_rules():
    """Split-path workspace (ABI 6): Mamba-2 head records of the split kernels (B x H x record words x 4 bytes,
    record words = 16 + (T + 1)(L + T) rounded to 4), monotone in batch and tokens; 0 where the split kernels
    cannot run the sizes (more than 32 records per step, dstate != 128); GDN: the variant-6 head records
    (32 + (2T + 1)(L + T) words)."""
    _lib_or_skip()
    ws = dp.decode_workspace_bytes
    words = lambda L, T: (16 + (T + 1) * (L + T) + 3) // 4 * 4  # noqa: E731
    assert ws(_decode_params(0, 256, 128, 64, 16)) == 256 * 128 * words(16, 1) * 4
    assert ws(_decode_params(0, 3, 96, 80, 8, mode=1, num_tokens=4)) == 3 * 96 * words(8, 4) * 4
    assert ws(_decode_params(0, 256, 128, 64, 16)) > ws(_decode_params(0, 64, 128, 64, 16)) > 0
    assert ws(_decode_params(0, 8, 128, 64, 30, mode=1, num_tokens=2)) > 0            # 32 records
    assert ws(_decode_params(0, 8, 128, 64, 30, mode=1, num_tokens=3)) == 0           # 33 records
    assert ws(_decode_params(0, 8, 128, 64, 33)) == 0
    p = _decode_params(0, 8, 128, 64, 16)
    p.dstate = 64
    assert ws(p) == 0
    assert ws(_decode_params(0, 256, 128, 24, 16)) == 0                                 # not a replay head dim
    gwords = lambda L, T: ((32 + (2 * T + 1) * (L + T) + 3) // 4 * 4  # noqa: E731  (GDN head record,
                           + (2 * T * ((L + 7) // 8 * 8) + 128 if T >= 2 else 0))  # + the verify block, T >= 2)
    assert ws(_decode_params(1, 256, 32, 128, 16)) == 256 * 32 * gwords(16, 1) * 4
    assert ws(_decode_params(1, 4, 64, 128, 12, mode=1, num_tokens=4)) == 4 * 64 * gwords(12, 4) * 4
    assert ws(_decode_params(1, 4, 64, 128, 30, mode=1, num_tokens=3)) == 0           # 33 records


def test_decode_path_switch_rules(monkeypatch):
    """RSSM_DP_DECODE_PATH: an unknown value and a forced split path without its workspace are refused by
    name before anything runs (host-only, no GPU needed)."""
    import ctypes
    _lib_or_skip()
    from replayssm_trtllm.ops._lib import check_status
    good = 0x10000
    d = _decode_params(0, 4, 128, 64, 16)
    for n in ("ckpt_lp", "ring_origin", "ring_len", "x", "dt_raw", "Bm", "Cm", "A", "ring_dt", "ring_x", "ring_B",
              "y"):
        setattr(d, n, good)
    run = lambda: check_status(dp._launcher("rssm_dual_precision_decode_launch", dp.DualPrecisionDecodeParams)(  # noqa
        ctypes.byref(d), None), "decode")
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "fast")
    with pytest.raises(RuntimeError, match="RSSM_DP_DECODE_PATH must be tile, stream or split; got 'fast'"):
        run()
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    need = dp.decode_workspace_bytes(d)
    with pytest.raises(RuntimeError, match=f"RSSM_DP_DECODE_PATH=split needs a workspace of {need} bytes"):
        run()
    d.workspace, d.workspace_bytes = good, need - 16
    with pytest.raises(RuntimeError, match=f"needs a workspace of {need} bytes"):
        run()
    d.workspace, d.workspace_bytes = good + 8, need
    with pytest.raises(RuntimeError, match="workspace must be 16-byte aligned"):
        run()


def _flush_params(family, mode=0, num_tokens=1):
    """Flush params with every pointer set to an aligned dummy (validation fails before any dereference)."""
    good = 0x10000
    f = dp.DualPrecisionFlushParams(
        family=family, batch=1, num_tokens=num_tokens, num_slots=1, window=4, ring_capacity=4 + (num_tokens if mode
                                                                                                    else 0),
        mode=mode, nheads=2, headdim=64, dstate=128, ngroups=1, act_dtype=1, recurrence_dtype=0, read_dtype=1,
        rounding=0)
    for n in ("ckpt_hp", "ckpt_lp", "ring_origin", "ring_len", "A", "ring_dt", "ring_x", "ring_B", "ring_g", "ring_k",
              "ring_beta", "ring_v"):
        setattr(f, n, good)
    return f


def _flush_launch(f):
    import ctypes
    from replayssm_trtllm.ops._lib import check_status
    check_status(dp._launcher("rssm_dual_precision_flush_launch", dp.DualPrecisionFlushParams)(ctypes.byref(f), None),
                 "flush")


def test_flush_launcher_deferred_rows_rules():
    """ABI 7, deferred flushing rows: the flush launcher refuses by name (host-only path, no GPU needed) Mamba-2
    inputs on a GDN flush or in speculative mode, GDN inputs on a Mamba-2 flush, missing companions, a bad dt_dtype
    and misaligned inputs."""
    _lib_or_skip()
    good, odd = 0x10000, 0x10002
    f = _flush_params(1)
    f.x = good
    with pytest.raises(RuntimeError, match="Mamba-2 standard-mode path; got family 1, mode 0"):
        _flush_launch(f)
    f = _flush_params(0, mode=1, num_tokens=2)
    f.x = good
    with pytest.raises(RuntimeError, match="Mamba-2 standard-mode path; got family 0, mode 1"):
        _flush_launch(f)
    f = _flush_params(0)
    f.x = good
    with pytest.raises(RuntimeError, match="need x, dt_raw, Bm, Cm and y"):
        _flush_launch(f)
    f.dt_raw = f.Bm = f.Cm = f.y = good
    f.dt_dtype = 2  # bf16 with fp16 activations
    with pytest.raises(RuntimeError, match="dt_dtype must be FP32 \\(0\\) or act_dtype \\(1\\); got 2"):
        _flush_launch(f)
    f.dt_dtype = 0
    f.Bm = odd
    with pytest.raises(RuntimeError, match="x, Bm and Cm must be 16-byte aligned"):
        _flush_launch(f)
    f = _flush_params(0)
    f.q = good
    with pytest.raises(RuntimeError, match="deferred GDN flushing rows \\(q != NULL\\) need family 1"):
        _flush_launch(f)
    f = _flush_params(1)
    f.q = good
    with pytest.raises(RuntimeError, match="need q, k, v, a, b, A_log, gdn_dt_bias and o"):
        _flush_launch(f)
    f.k = f.v = f.a = f.b = f.A_log = f.gdn_dt_bias = f.o = good
    f.v = odd
    with pytest.raises(RuntimeError, match="q, k and v must be 16-byte aligned"):
        _flush_launch(f)


def test_decode_launcher_defer_rules():
    """defer_flush_rows is 0 or 1 and a standard-mode path (host-only checks)."""
    import ctypes
    _lib_or_skip()
    from replayssm_trtllm.ops._lib import check_status
    good = 0x10000
    for mode, T, val, msg in ((0, 1, 2, "defer_flush_rows must be 0 or 1; got 2"),
                              (1, 2, 1, "defer_flush_rows .* is a standard-mode path; got mode 1")):
        d = _decode_params(0, 1, 8, 64, 4, mode=mode, num_tokens=T)
        for n in ("ckpt_lp", "ring_origin", "ring_len", "x", "dt_raw", "Bm", "Cm", "A", "ring_dt", "ring_x", "ring_B",
                  "y"):
            setattr(d, n, good)
        d.defer_flush_rows = val
        with pytest.raises(RuntimeError, match=msg):
            check_status(dp._launcher("rssm_dual_precision_decode_launch", dp.DualPrecisionDecodeParams)(
                ctypes.byref(d), None), "decode")


def test_ops_declare_every_written_tensor_mutable():
    """torch.compile / CUDA-graph capture rely on the schemas: every tensor a launcher writes is declared mutable,
    including the deferred flushing rows' outputs (y, o) that the flush writes (ABI 7)."""
    import torch
    want = {"dual_precision_flush": {"ckpt_hp", "ckpt_hp_scale", "ckpt_lp", "ckpt_lp_scale", "ckpt_lp_gscale",
                                     "flushed", "y", "o"},
            "dp_mamba2_decode": {"ring_dt", "ring_x", "ring_B", "y"},
            "dp_gdn_decode": {"ring_g", "ring_u", "ring_k", "ring_beta", "ring_v", "o"}}
    for op, names in want.items():
        schema = getattr(torch.ops.replayssm, op).default._schema
        mutable = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
        assert mutable == names, f"{op}: mutable {sorted(mutable)}, want {sorted(names)}"


def _cpu_state_encode(x, fmt, rounding="rtn", seed=0, layer=0, slot_ids=None, flush_index=None):
    """Stands in for the device codec on this CPU test (the casts are tested on the GPU): an empty copy."""
    S, H, P, N = x.shape
    return dp.StateCopy.empty(fmt, S, H, P, N, x.device)


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_cache_reset_admission_phase_rings_and_errors(family, monkeypatch):
    """reset(prefill_state, phase=...): ring_len = the phases, neutral records (state/phase.py NEUTRAL_RECORD)
    at ring indices 0 .. d - 1 of each slot and nothing else touched; a bad phase or a wrong prefill shape raises
    before anything changes."""
    from replayssm_trtllm.state.phase import NEUTRAL_RECORD
    monkeypatch.setattr(dp, "state_encode", _cpu_state_encode)
    S, L, T = 5, 8, 3
    if family == "mamba2":
        c = dp.Mamba2DualPrecisionCache(S, 4, 16, 2, L, T, "speculative", read_fmt="nvfp4", recurrence_fmt="fp16",
                                        device="cpu")
        shape = (S, 4, 16, 128)
    else:
        c = dp.GdnDualPrecisionCache(S, 1, 2, 16, L, T, "speculative", read_fmt="fp8_e4m3", recurrence_fmt="fp32",
                                     device="cpu")
        shape = (S, 2, 16, 128)
    names = [n for n in NEUTRAL_RECORD[family] if getattr(c, n, None) is not None]
    assert len(names) == len(NEUTRAL_RECORD[family])  # every ring tensor of the family (GDN: raw beta, v too)
    for n in names:
        getattr(c, n).fill_(7.0)  # poison: the previous occupants' records
    c.ring_origin.fill_(3)
    c.reset(torch.zeros(shape), phase="spread")
    assert c.ring_len.tolist() == [0, 1, 2, 3, 4] and c.ring_origin.tolist() == [0] * S
    for n in names:
        t, fill = getattr(c, n), NEUTRAL_RECORD[family][n]
        for s in range(S):
            assert bool((t[s, :s] == fill).all()), f"{n} slot {s}: the neutral records"
            assert bool((t[s, s:] == 7.0).all()), f"{n} slot {s}: records past the phase must be untouched"
    before = {n: getattr(c, n).clone() for n in names}
    with pytest.raises(ValueError, match=r"reset: each phase .* \[0, L - 1 = 7\]; got 8"):
        c.reset(torch.zeros(shape), phase=[0, 1, 8, 2, 3])
    with pytest.raises(ValueError, match=r"reset: 'prefill_state' must be \[S, .*got \[4, "):
        c.reset(torch.zeros((S - 1,) + shape[1:]), phase=1)
    assert c.ring_len.tolist() == [0, 1, 2, 3, 4]
    assert all(torch.equal(before[n], getattr(c, n)) for n in names)
    c.reset(torch.zeros(shape))  # no phase: empty rings
    assert c.ring_len.tolist() == [0] * S


def test_concurrent_flush_refusals(monkeypatch):
    """concurrent_flush: None (default, wherever it applies), True / False from RSSM_DP_CONCURRENT_FLUSH=1 / 0 at
    construction. Required (True), it refuses before any launch the steps where the decode reads what the flush
    writes (no deferral: speculative mode or defer_flush_rows=False) and a cache that is not on a CUDA device."""
    monkeypatch.delenv("RSSM_DP_CONCURRENT_FLUSH", raising=False)
    assert dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 4, device="cpu").concurrent_flush is None
    monkeypatch.setenv("RSSM_DP_CONCURRENT_FLUSH", "0")
    assert dp.GdnDualPrecisionCache(2, 1, 2, 16, 4, device="cpu").concurrent_flush is False
    monkeypatch.setenv("RSSM_DP_CONCURRENT_FLUSH", "1")
    m = dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 4, read_fmt="nvfp4", recurrence_fmt="fp16", device="cpu")
    assert m.concurrent_flush is True
    x = torch.randn(2, 1, 4, 16)
    dtr, Bm, Cm = torch.randn(2, 1, 4), torch.randn(2, 1, 2, 128), torch.randn(2, 1, 2, 128)
    sbi = torch.arange(2, dtype=torch.int32)
    with pytest.raises(ValueError, match="concurrent_flush needs a CUDA device"):
        m.step(sbi, x, dtr, Bm, Cm, -torch.ones(4))
    m.defer_flush_rows = False
    with pytest.raises(ValueError, match="concurrent_flush needs deferred flushing rows.*defer_flush_rows=False"):
        m.step(sbi, x, dtr, Bm, Cm, -torch.ones(4))
    gs = dp.GdnDualPrecisionCache(2, 1, 2, 16, 4, 2, "speculative", device="cpu")
    q = torch.randn(2, 2, 1, 128)
    v, a = torch.randn(2, 2, 2, 16), torch.randn(2, 2, 2)
    with pytest.raises(ValueError, match="concurrent_flush needs deferred flushing rows.*speculative"):
        gs.step(sbi, q, q, v, a, a, torch.zeros(2), torch.zeros(2))


def test_concurrent_flush_auto_is_serial_where_it_does_not_apply(monkeypatch):
    """The default (None) runs decode then flush, in that order on the current stream, where the flush cannot run
    beside the decode (here: a CPU cache; likewise speculative steps and defer_flush_rows=False)."""
    monkeypatch.delenv("RSSM_DP_CONCURRENT_FLUSH", raising=False)
    for c in (dp.Mamba2DualPrecisionCache(2, 4, 16, 2, 4, device="cpu"),
              dp.GdnDualPrecisionCache(2, 1, 2, 16, 4, 2, "speculative", device="cpu")):
        calls = []
        c._decode_and_flush(c.mode == 0, lambda: calls.append("decode"), lambda: calls.append("flush"))
        assert calls == ["decode", "flush"] and not dp._FLUSH_STREAMS


def test_concurrent_flush_auto_choice():
    """Where the default (None) forks the flush: deferred standard steps on CUDA, except a Mamba-2 fp32 read copy
    (measured slower beside the decode); never without deferral or off CUDA. True still forces it (refusals above)."""
    auto = dp.auto_concurrent_flush
    for fmt in ("fp16", "bf16", "fp8_e4m3", "nvfp4"):
        assert auto("mamba2", fmt, True, "cuda") and auto("gdn", fmt, True, "cuda")
    assert auto("gdn", "fp32", True, "cuda")
    assert not auto("mamba2", "fp32", True, "cuda")
    for fam in ("mamba2", "gdn"):
        assert not auto(fam, "nvfp4", False, "cuda") and not auto(fam, "nvfp4", True, "cpu")


@pytest.mark.parametrize("family", [0, 1])
def test_flush_launcher_headdim_rule(family):
    """The flush launcher takes the decode launcher's head dims (multiples of 8 in [8, 128]) and refuses others by name
    (a Mamba-2 head dim that is not a multiple of 4 would misalign the item's shared-memory state tile)."""
    _lib_or_skip()
    for bad in (4, 30, 7, 136):
        f = _flush_params(family)
        f.headdim = bad
        with pytest.raises(RuntimeError, match=rf"headdim \(P / V\) must be a multiple of 8 in \[8, 128\]; got {bad}"):
            _flush_launch(f)


def test_gdn_split_rule_table():
    """The GDN dual-precision decode's split rule per read format and tokens per step (fifty-third session,
    measured on an H100 by scripts/dp_path_timing.py; docs/precision.md): 16-bit reads 1024 at T <= 3 and 512 from
    T = 4; FP8 512 at T = 1 and 1024 after; NVFP4 always at T = 1 and 256 after; FP32 reads 8192; 0 outside 1..8."""
    _lib_or_skip()
    expect = {"fp16": [1024] * 3 + [512] * 5, "bf16": [1024] * 3 + [512] * 5, "fp8_e4m3": [512] + [1024] * 7,
              "nvfp4": [1] + [256] * 7, "fp32": [8192] * 8}
    for fmt, row in expect.items():
        assert [dp.split_min_batch_heads("gdn", fmt, t) for t in range(1, 9)] == row, fmt
        assert dp.split_min_batch_heads("gdn", fmt, 0) == 0 and dp.split_min_batch_heads("gdn", fmt, 9) == 0
    with pytest.raises(ValueError, match="read_fmt must be one of"):
        dp.split_min_batch_heads("gdn", "fp4", 1)


@pytest.mark.parametrize("read_fmt", ["fp16", "bf16", "fp8_e4m3", "nvfp4", "fp32"])
@pytest.mark.parametrize("T", [1, 2, 3, 4, 8])
def test_decode_path_rule(read_fmt, T, monkeypatch):
    """rssm_dual_precision_decode_path, the launch's choice (host-only): GDN takes the split path from the table's
    B x HV with a workspace and slot indices, one batch row below it the stream kernel (16-bit reads with slot
    indices) or the tile kernel; without a workspace or without slot indices never the split path;
    RSSM_DP_DECODE_PATH forces a path, and a forced split path without its workspace or an unknown value is refused
    (None)."""
    _lib_or_skip()
    monkeypatch.delenv("RSSM_DP_DECODE_PATH", raising=False)
    code = dp.FMT_CODE[read_fmt]
    wide = read_fmt in ("fp16", "bf16")
    good = 0x10000
    for HV in (32, 64):
        thr = dp.split_min_batch_heads("gdn", read_fmt, T)
        B_at = max(1, -(-thr // HV))  # smallest batch with B x HV >= thr
        for B, split in ((B_at, True), (B_at - 1, False)):
            if B < 1:
                continue
            d = _decode_params(1, B, HV, 128, 16, mode=int(T > 1), num_tokens=T, read_dtype=code)
            need = dp.decode_workspace_bytes(d)
            assert need > 0
            other = "stream" if wide else "tile"
            assert dp.decode_path(d) == "tile"  # no slot indices: neither stream nor split
            d.state_batch_indices = good
            assert dp.decode_path(d) == other  # no workspace
            d.workspace, d.workspace_bytes = good, need
            assert dp.decode_path(d) == ("split" if split else other), (HV, B)
            d.workspace_bytes = need - 16
            assert dp.decode_path(d) == other
            d.workspace_bytes = need
            monkeypatch.setenv("RSSM_DP_DECODE_PATH", "tile")
            assert dp.decode_path(d) == "tile"
            monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
            assert dp.decode_path(d) == "split"
            d.workspace = None
            assert dp.decode_path(d) is None
            monkeypatch.setenv("RSSM_DP_DECODE_PATH", "fast")
            assert dp.decode_path(d) is None
            monkeypatch.delenv("RSSM_DP_DECODE_PATH")


def test_mamba2_split_rule_table():
    """Mamba-2's dual-precision split rule per read format and tokens per step (fifty-third session, H100,
    scripts/dp_path_timing.py --family mamba2; docs/precision.md): 16-bit reads always at T <= 2, 768 at T = 3-4,
    1536 from T = 5; FP8 always at T = 1, 768 after (384 at a head dim that is not a multiple of 64: Nano's 80); NVFP4 always at T <= 4, 129 after; FP32 reads the replay rule
    (B x H > 128); 0 outside 1..8 and for no family."""
    _lib_or_skip()
    expect = {"fp16": [1, 1, 768, 768, 1536, 1536, 1536, 1536], "bf16": [1, 1, 768, 768, 1536, 1536, 1536, 1536],
              "fp8_e4m3": [1] + [768] * 7, "nvfp4": [1] * 4 + [129] * 4, "fp32": [129] * 8}
    for fmt, row in expect.items():
        assert [dp.split_min_batch_heads("mamba2", fmt, t) for t in range(1, 9)] == row, fmt
        assert dp.split_min_batch_heads("mamba2", fmt, 0) == 0 == dp.split_min_batch_heads("mamba2", fmt, 9)
    assert [dp.split_min_batch_heads("mamba2", "fp8_e4m3", t, headdim=80) for t in range(1, 9)] == [1] + [384] * 7
    assert dp.split_min_batch_heads("mamba2", "fp8_e4m3", 2, headdim=128) == 768
    assert dp.split_min_batch_heads("mamba2", "fp16", 4, headdim=80) == 768
    assert [dp.split_min_batch_heads("gdn", "fp8_e4m3", t) for t in range(1, 9)] == \
        [dp.split_min_batch_heads("gdn", "fp8_e4m3", t) for t in range(1, 9)]
    with pytest.raises(ValueError, match="family must be 'mamba2' or 'gdn'"):
        dp.split_min_batch_heads("rwkv", "fp16", 1)


@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4", "fp32"])
@pytest.mark.parametrize("T", [1, 2, 4, 8])
def test_decode_path_rule_mamba2(read_fmt, T, monkeypatch):
    """Mamba-2's choice: the split path from the table's B x H with a workspace, one batch row below it the stream
    kernel (16-bit reads at replay head dims) or the tile kernel; never without a workspace; head dim 24 (no replay
    kernel) never the stream path; forced paths as for GDN."""
    _lib_or_skip()
    monkeypatch.delenv("RSSM_DP_DECODE_PATH", raising=False)
    good = 0x10000
    other = "stream" if read_fmt == "fp16" else "tile"
    for H, P in ((128, 64), (96, 80)):  # Nemotron-3 Super / Nano heads
        thr = dp.split_min_batch_heads("mamba2", read_fmt, T, P)
        B_at = max(1, -(-thr // H))
        for B, split in ((B_at, True), (B_at - 1, False)):
            if B < 1:
                continue
            d = _decode_params(0, B, H, P, 16, mode=int(T > 1), num_tokens=T, read_dtype=dp.FMT_CODE[read_fmt])
            need = dp.decode_workspace_bytes(d)
            assert need > 0
            assert dp.decode_path(d) == other
            d.workspace, d.workspace_bytes = good, need
            assert dp.decode_path(d) == ("split" if split else other), (H, B)
            monkeypatch.setenv("RSSM_DP_DECODE_PATH", "tile")
            assert dp.decode_path(d) == "tile"
            d.workspace = None
            monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
            assert dp.decode_path(d) is None
            monkeypatch.delenv("RSSM_DP_DECODE_PATH")
    assert dp.decode_path(_decode_params(0, 4, 96, 24, 16)) == "tile"  # head dim 24: no replay kernel
