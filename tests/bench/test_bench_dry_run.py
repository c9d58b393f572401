"""Both benchmarks' bookkeeping end to end on the CPU (thirty-seventh session): the kernels, the graph timing and the
copy bandwidth stubbed (every graph replay "takes" 1 ms), a small layer shape on the official batch and window, so a
change to the Python around the timings (bytes, ratios, targets, the JSON) is exercised before it costs device time.
What the stubs cannot show: any real time, and that the kernels run (the GPU tests and the device runs do that)."""
import json

import pytest

torch = pytest.importorskip("torch")

from replayssm_trtllm.bench import gdn as bg  # noqa: E402
from replayssm_trtllm.bench import mamba2 as bm  # noqa: E402
from replayssm_trtllm.bench.step_traffic import replay_cycle_traffic  # noqa: E402
from replayssm_trtllm.ops._lib import KernelUnsupportedError  # noqa: E402

GRAPH_SECONDS = 1e-3
COPY_BPS = 4e12


class _FakeSettler:
    """BandwidthSettler without a GPU: records where the bench asks to settle (``SETTLED``)."""

    def __init__(self, max_seconds=3.0, *a, **k):
        self.max_seconds = max_seconds

    def settle(self, what):
        SETTLED.append(what)

    def summary(self):
        return dict(max_seconds=self.max_seconds, waits=len(SETTLED), reported=[])

    def close(self):
        pass


SETTLED = []


def _fake_cuda(monkeypatch):
    SETTLED.clear()
    monkeypatch.setattr(bg, "BandwidthSettler", _FakeSettler)
    monkeypatch.setattr(bm, "BandwidthSettler", _FakeSettler)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU dry run")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.Tensor, "cuda", lambda self, *a, **k: self)


def _stubbed(base, *kernels):
    """The benchmark's layer buffers built on the CPU, with the kernel-launching methods doing nothing."""
    class Stub(base):
        def __init__(self, *a, **k):
            k["device"] = "cpu"
            super().__init__(*a, **k)
    for name in kernels:
        setattr(Stub, name, lambda self, *a, **k: None)
    return Stub


def _graph(calls):
    def time_graph(fn, repeats, inner=1):
        fn()  # the cycle's Python runs (cursor setup, stubbed kernels); its "time" is fixed
        calls.append(repeats)
        return GRAPH_SECONDS
    return time_graph


def _stub_mamba2(monkeypatch, layerset, calls, check=lambda *a, **k: (0.0, True)):
    """bench mamba2 on the CPU: the given layer buffers, the check, the graph timing and the bandwidths stubbed, a
    small Super-like shape."""
    import replayssm_trtllm.ops.mamba2 as om
    monkeypatch.setattr(bm, "_Layerset", layerset)
    monkeypatch.setattr(bm, "_check", check)
    monkeypatch.setattr(bm, "_time_graph", _graph(calls))
    monkeypatch.setattr(bm, "copy_bandwidth", lambda *a, **k: COPY_BPS)
    monkeypatch.setattr(bm, "inplace_bandwidth", lambda *a, **k: COPY_BPS)
    monkeypatch.setattr(om, "row_chunk", lambda st, n: 8)
    monkeypatch.setattr(bm, "SHAPES", {"super": dict(H=4, P=8, N=16, G=2)})


def _stub_gdn(monkeypatch, layers, calls, check=lambda *a, **k: {"stub": 0.0}, shape=None):
    """bench gdn on the CPU, as _stub_mamba2: a small q35-4b-like shape (or ``shape``), no fla."""
    monkeypatch.setattr(bg, "_DEVICE", "cpu")
    monkeypatch.setattr(bg, "_Layers", layers)
    monkeypatch.setattr(bg, "_check", check)
    monkeypatch.setattr(bg, "_time_graph", _graph(calls))
    monkeypatch.setattr(bg, "copy_bandwidth", lambda *a, **k: COPY_BPS)
    monkeypatch.setattr(bg, "_fla", lambda: None)
    monkeypatch.setattr(bg, "SHAPES", {"q35-4b": shape or dict(H=2, HV=4, K=16, V=16)})


def test_mamba2_bench_dry_run(monkeypatch, tmp_path):
    _fake_cuda(monkeypatch)
    calls = []
    _stub_mamba2(monkeypatch, _stubbed(bm._Layerset, "conv_step", "replay_step", "commit"), calls)
    sh = bm.SHAPES["super"]
    out = tmp_path / "m2.json"
    rc = bm.main(["--shapes", "super", "--batch", "256", "--tokens", "1,4", "--variants", "4", "--no-sweep-rows",
                  "--no-flashinfer", "--repeats", "2", "--l2-bytes", "1", "--out", str(out)])
    assert rc == 0 and calls
    res = json.loads(out.read_text())
    B, L, T, nl = 256, 16, 4, 2
    s_row, rec, io = bm._state_bytes(sh, 1, 4), bm._record_bytes(sh, 2), bm._io_bytes(sh, 2)
    t_conv = GRAPH_SECONDS / nl
    for accept in ("all", "one"):
        tgt = res["targets"][f"spec_T4_ratio_super_B256_{accept}"]
        accs = [torch.full((B,), T if accept == "all" else 1)] * (2 * L)
        tr = replay_cycle_traffic(torch.arange(B) % (L + 1), accs, mode=1, num_tokens=T, window=L,
                                  state_row_bytes=s_row, record_bytes=rec, io_row_bytes=io, passes=4, timed_passes=2,
                                  reset_each_pass=False)
        t = GRAPH_SECONDS / (2 * L * nl)
        assert tgt["value"] == pytest.approx(t / t_conv)
        assert tgt["copy_frac"] == pytest.approx(tr.total_bytes / t / COPY_BPS)
        assert tgt["flush_fraction"] == pytest.approx(tr.flush_fraction)
        conv_bytes = B * (2 * s_row + io)
        assert tgt["ratio_at_equal_efficiency"] == pytest.approx(tr.total_bytes / conv_bytes)
        assert tgt["ratio_at_copy_bandwidth"] == pytest.approx(tr.total_bytes / COPY_BPS / t_conv)
        pd = res["targets"][f"spec_T4_vs_perdraft_super_B256_{accept}"]
        assert pd["value_at_equal_efficiency"] == pytest.approx(B * (5 * s_row + 4 * io) / tr.total_bytes)
        row = [r for r in res["rows"] if r["kernel"].startswith(f"replay verify {accept}-accepted")][0]
        assert row["copy_frac"] == pytest.approx(tgt["copy_frac"]) and row["gbps"] > 0
    assert res["targets"]["spec_T4_ratio_super_B256_all"]["flush_fraction"] == pytest.approx(0.25)


def test_mamba2_bench_writes_after_every_block(monkeypatch, tmp_path):
    """A run killed by a time limit (here: the second (shape, B, L) block raises) leaves the first block's rows and
    targets in the JSON, marked complete false; a finished run says complete true. The ring-overhead target stays
    last either way."""
    _fake_cuda(monkeypatch)
    import replayssm_trtllm.ops.mamba2 as om

    Layers = _stubbed(bm._Layerset, "conv_step", "replay_step", "commit")
    monkeypatch.setattr(bm, "_check", lambda *a, **k: (0.0, True))
    monkeypatch.setattr(bm, "copy_bandwidth", lambda *a, **k: COPY_BPS)
    monkeypatch.setattr(bm, "inplace_bandwidth", lambda *a, **k: COPY_BPS)
    monkeypatch.setattr(om, "row_chunk", lambda st, n: 8)
    monkeypatch.setattr(bm, "SHAPES", {"super": dict(H=4, P=8, N=16, G=2)})
    args = ["--shapes", "super", "--batch", "64", "--window", "8,16", "--tokens", "1,2", "--variants", "4",
            "--no-sweep-rows", "--no-flashinfer", "--repeats", "2", "--l2-bytes", "1"]

    class Killed(Exception):
        pass

    def layers_until_second_block(*a, **k):
        if a[2] == 16:  # (shape, B, L, ...): the L = 16 block
            raise Killed
        return Layers(*a, **k)

    monkeypatch.setattr(bm, "_Layerset", layers_until_second_block)
    monkeypatch.setattr(bm, "_time_graph", _graph([]))
    out = tmp_path / "partial.json"
    with pytest.raises(Killed):
        bm.main([*args, "--out", str(out)])
    res = json.loads(out.read_text())
    assert res["complete"] is False
    assert {r["L"] for r in res["rows"]} == {8} and {r["T"] for r in res["rows"]} == {1, 2}
    assert list(res["targets"])[-1] == "ring_overhead_super_L16_T4"

    monkeypatch.setattr(bm, "_Layerset", Layers)
    out = tmp_path / "full.json"
    assert bm.main([*args, "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["complete"] is True and {r["L"] for r in res["rows"]} == {8, 16}
    assert list(res["targets"])[-1] == "ring_overhead_super_L16_T4"
    assert res["copy_bandwidth_end_Bps"] == COPY_BPS


def test_mamba2_bench_reports_a_refused_design_and_goes_on(monkeypatch, tmp_path):
    """The split kernels (variant 4) handle at most 32 records per step, so the grid's L = 32, T >= 2 cases are
    refused by the launcher: the sixty-seventh session's grid stopped there. Now the refusal is printed, variant 4
    is left out of those cases (check and timing alike), variant 2 is timed, and the run finishes. Any other error
    still stops the run."""
    _fake_cuda(monkeypatch)

    def refuse(ls, layer, T, mode, rows=0, variant=0):
        if variant == 4 and ls.L + (T if mode == 1 else 0) > 32:
            raise KernelUnsupportedError(f"mamba2_replay_decode: unsupported: Mamba2Replay: variant 4 (split kernels) "
                                         f"handles at most 32 records per step; got {ls.L + T}")

    Layers = _stubbed(bm._Layerset, "conv_step", "commit")
    Layers.replay_step = refuse
    checked = []

    def check(ls, T, v):
        checked.append((ls.L, T, v))
        refuse(ls, 0, T, 0 if T == 1 else 1, 0, v)
        return 0.0, True
    _stub_mamba2(monkeypatch, Layers, [], check=check)
    out = tmp_path / "grid.json"
    args = ["--shapes", "super", "--batch", "64", "--window", "32", "--tokens", "1,2", "--variants", "2,4",
            "--no-sweep-rows", "--no-flashinfer", "--repeats", "2", "--l2-bytes", "1", "--out", str(out)]
    assert bm.main(args) == 0
    res = json.loads(out.read_text())
    assert res["complete"] is True
    spec = [r for r in res["rows"] if r["T"] == 2 and r["kernel"].startswith("replay verify")]
    assert spec and {r["variant"] for r in spec} == {2}
    std = [r for r in res["rows"] if r["T"] == 1 and r["kernel"].startswith("replay standard")]
    assert {r["variant"] for r in std} == {2, 4}  # 32 records: the split kernels run the standard step
    assert (32, 2, 4) in checked
    assert not any(k.startswith("correct_") for k in res["targets"])

    def broken(ls, T, v):
        raise RuntimeError("mamba2_replay_decode: cuda error: an illegal memory access was encountered")
    monkeypatch.setattr(bm, "_check", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        bm.main(args)


def test_gdn_bench_dry_run(monkeypatch, tmp_path):
    _fake_cuda(monkeypatch)

    calls = []
    sh = dict(H=2, HV=4, K=16, V=16)
    _stub_gdn(monkeypatch, _stubbed(bg._Layers, "conv_step", "snap_step", "replay_step", "commit"), calls, shape=sh)
    out = tmp_path / "gdn.json"
    rc = bg.main(["--shapes", "q35-4b", "--batch", "256", "--window", "16", "--tokens", "1,4", "--variants", "6",
                  "--repeats", "2", "--l2-bytes", "1", "--max-layers", "2", "--out", str(out)])
    assert rc == 0 and calls
    res = json.loads(out.read_text())
    B, L, T, nl = 256, 16, 4, 2
    s_row = sh["HV"] * sh["V"] * sh["K"] * 4
    rec = bg._record_bytes(sh, 2)
    io = bg._io_bytes(sh, 2)
    t_conv = GRAPH_SECONDS / nl
    std = [r for r in res["results"] if r["kernel"] == "replay_standard"]
    assert {r["phase"] for r in std} == {"inphase", "staggered"}
    t_std = GRAPH_SECONDS / (L * nl)
    for r in std:
        closed = B * (L * s_row + s_row + (L * (L - 1) / 2) * rec + L * rec) / L + B * io
        assert r["copy_frac"] == pytest.approx(closed / t_std / COPY_BPS)
    pdr = [r for r in res["results"] if r["kernel"] == "conventional_perdraft"][0]
    assert pdr["copy_frac"] == pytest.approx(B * (5 * s_row + 4 * io) / t_conv / COPY_BPS)
    ver = [r for r in res["results"] if r["kernel"] == "replay_speculative"]
    assert {(r["accept"], r["phase"]) for r in ver} == {(a, p) for a in ("all", "one", "mixed")
                                                        for p in ("inphase", "staggered")}
    t_s = GRAPH_SECONDS / (2 * L * nl)
    for r in ver:
        if r["accept"] == "mixed":
            continue
        h0 = torch.zeros(B) if r["phase"] == "inphase" else torch.arange(B) % (L + 1)
        tr = replay_cycle_traffic(h0, [torch.full((B,), T if r["accept"] == "all" else 1)] * (2 * L), mode=1,
                                  num_tokens=T, window=L, state_row_bytes=s_row, record_bytes=rec, io_row_bytes=io)
        assert r["copy_frac"] == pytest.approx(tr.total_bytes / t_s / COPY_BPS)
    tgt = res["targets"]["q35-4b.verify_T4_vs_std_B256"]
    for key in ("copy_frac", "flush_fraction", "ratio_at_equal_efficiency", "ratio_at_copy_bandwidth"):
        assert key in tgt and tgt[key] > 0
    assert "value_at_equal_efficiency" in res["targets"]["q35-4b.perdraft_over_replay_T4_B256"]


def test_gdn_conventional_variants_never_empty():
    decode = (0, 1, 2, 3, 4, 5, 6)
    assert bg.conventional_variants([-1, 6], decode, 6) == [6]
    assert bg.conventional_variants([5, -1, 0], decode, 6) == [5, 0]
    assert bg.conventional_variants([-1], decode, 6) == [6]       # the automatic replay choice alone
    assert bg.conventional_variants([6], (0, 1, 2), 0) == [0]     # a build whose decode does not take 6
    assert bg.conventional_variants([-1], decode, [6, 5]) == [6, 5]  # a list of fallback designs
    assert bg.baseline_designs(128) == [6, 5] and bg.baseline_designs(256) == [6, 5]
    assert bg.baseline_designs(64) == [0]                            # stream kernel 5 takes head_k 128 / 256 only


def test_gdn_bench_dry_run_automatic_variant_only(monkeypatch, tmp_path):
    """--variants=-1 (the automatic replay choice alone) used to stop in a TypeError after the copy-bandwidth line
    (fifty-fifth session, on the H100): no conventional variant was timed, so there was no baseline. The baseline
    now runs on the decode op's default design and stream kernel 5 (the sixty-seventh session: design 6 alone was
    a weak baseline in most blocks of an H100 grid), correctness-checked like the others."""
    _fake_cuda(monkeypatch)
    Layers = _stubbed(bg._Layers, "conv_step", "snap_step", "replay_step", "commit")
    calls, checked = [], []

    def check(ls, T, variants=(0,), replay=True):
        checked.append((T, tuple(variants), replay))
        return {"stub": 0.0}
    _stub_gdn(monkeypatch, Layers, calls, check=check, shape=dict(H=2, HV=4, K=128, V=16))
    out = tmp_path / "gdn.json"
    rc = bg.main(["--shapes", "q35-4b", "--batch", "1", "--window", "16", "--tokens", "1,4", "--variants=-1",
                  "--repeats", "2", "--l2-bytes", "1", "--max-layers", "2", "--out", str(out)])
    assert rc == 0
    res = json.loads(out.read_text())
    conv = [r for r in res["results"] if r["kernel"] == "conventional"]
    # default_decode_variant(128) and stream kernel 5 (baseline_designs): the faster is the baseline
    assert [r["variant"] for r in conv] == [6, 5]
    assert [r["variant"] for r in res["results"] if r["kernel"] == "conventional_perdraft"] == [6, 5]
    assert {r["variant"] for r in res["results"] if r["kernel"].startswith("replay")} == {-1}
    # the baseline's design is checked at every T, its conventional and per-draft kernels only: its number (6) also
    # names the split replay design, which the launcher refuses past 32 records per step (the sixty-seventh
    # session's grid stopped at L = 32, T = 2 on that); the automatic replay design is checked on its own
    assert (1, (6,), False) in checked and (4, (6,), False) in checked
    assert (1, (5,), False) in checked and (4, (5,), False) in checked
    assert (1, (-1,), True) in checked and (4, (-1,), True) in checked
    assert res["targets"]["q35-4b.standard_speedup_B1"]["value"] > 0


class _CheckLayers:
    """Just enough of bench.gdn._Layers for _check on the CPU: the conventional step writes a fixed output, the
    replay step must not run when replay=False."""

    def __init__(self):
        import torch
        self.ckpt = [torch.ones(2, 3)]
        self.conv = [torch.zeros(2, 3)]
        self.length = torch.zeros(2, dtype=torch.int32)
        self.inputs = {1: {"o": torch.zeros(4)}}
        self.replayed = []

    def conv_step(self, layer, T, var):
        import torch
        self.inputs[T]["o"].copy_(torch.arange(1.0, 5.0))

    def replay_step(self, layer, T, mode, var):
        self.replayed.append(var)
        raise RuntimeError("gdn_replay: unsupported: GdnReplay: variant 6 (split kernels) handles at most 32 records")

    def set_cursors(self, c):
        pass


def test_gdn_check_of_the_baseline_design_runs_no_replay(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    ls = _CheckLayers()
    errs = bg._check(ls, 1, (6,), replay=False)
    assert ls.replayed == [] and errs == {"conv_v6_vs_conv": 0.0}
    with pytest.raises(RuntimeError, match="at most 32 records"):  # replay=True still reaches the launcher
        bg._check(ls, 1, (6,))
    assert ls.replayed == [6]


def test_rank_shapes_run_without_targets(monkeypatch, tmp_path):
    """BASE-tpN shapes (one rank of N-way tensor parallelism): the heads and key heads divided, timed like the
    others, and left out of the targets (the issues' goals are for the unsplit layers); a tp that does not divide
    the heads, or an unknown base, exits 2 naming it."""
    from replayssm_trtllm.bench.common import drop_rank_shape_targets, resolve_shape
    assert resolve_shape({"super": dict(H=128, P=64, N=128, G=8)}, "super-tp8", ("H", "G")) == dict(H=16, P=64, N=128,
                                                                                                     G=1)
    with pytest.raises(ValueError, match="tp 3 does not divide H=128, G=8"):
        resolve_shape({"super": dict(H=128, P=64, N=128, G=8)}, "super-tp3", ("H", "G"))
    with pytest.raises(ValueError, match="unknown shape 'mega-tp2'"):
        resolve_shape({"super": dict(H=128, P=64, N=128, G=8)}, "mega-tp2", ("H", "G"))
    kept = drop_rank_shape_targets({"std_speedup_super_B256_x": 1, "std_speedup_super-tp2_B256_x": 2,
                                    "correct_super-tp2_B1_L16_T1_v4": 3}, ["super", "super-tp2"])
    assert kept == {"std_speedup_super_B256_x": 1, "correct_super-tp2_B1_L16_T1_v4": 3}

    _fake_cuda(monkeypatch)
    _stub_mamba2(monkeypatch, _stubbed(bm._Layerset, "conv_step", "replay_step", "commit"), [])
    out = tmp_path / "m2.json"
    assert bm.main(["--shapes", "super,super-tp2", "--batch", "256", "--tokens", "1,4", "--variants", "4",
                    "--no-sweep-rows", "--no-flashinfer", "--repeats", "2", "--l2-bytes", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    conv = {r["shape"]: r for r in res["rows"] if r["kernel"].startswith("conventional")}
    assert set(conv) == {"super", "super-tp2"}
    assert "std_speedup_super_B256_in-phase" in res["targets"]
    assert not any("super-tp2" in k for k in res["targets"])
    assert bm.main(["--shapes", "super-tp3", "--no-flashinfer", "--out", str(out)]) == 2

    _stub_gdn(monkeypatch, _stubbed(bg._Layers, "conv_step", "snap_step", "replay_step", "commit"), [])
    out = tmp_path / "gdn.json"
    assert bg.main(["--shapes", "q35-4b,q35-4b-tp2", "--batch", "256", "--window", "16", "--tokens", "1,4",
                    "--variants", "6", "--repeats", "2", "--l2-bytes", "1", "--max-layers", "2", "--out",
                    str(out)]) == 0
    res = json.loads(out.read_text())
    assert {r["shape"] for r in res["results"]} == {"q35-4b", "q35-4b-tp2"}
    assert any(k.startswith("q35-4b.") for k in res["targets"])
    assert not any("tp2" in k or "tp2" in v["case"] for k, v in res["targets"].items())
    assert bg.main(["--shapes", "q35-4b-tp4", "--out", str(out)]) == 2


def _ordered(base, log, *kernels):
    """_stubbed, with each named kernel method appending its name to ``log`` (beside the settles)."""
    Stub = _stubbed(base)
    for name in kernels:
        setattr(Stub, name, lambda self, *a, _n=name, **k: log.append(_n))
    return Stub


def _settle_log(monkeypatch, log):
    class Settler(_FakeSettler):
        def settle(self, what):
            SETTLED.append(what)
            log.append(("settle", what))
    monkeypatch.setattr(bg, "BandwidthSettler", Settler)
    monkeypatch.setattr(bm, "BandwidthSettler", Settler)


def test_gdn_bench_settles_before_its_timed_groups(monkeypatch, tmp_path):
    """Seventieth session: right after large allocations / frees the copy bandwidth is transiently lower, so the
    bench waits for a copy probe (BandwidthSettler) before the block's first timing and before the per-draft /
    verify timings that follow the per-draft pools' allocation. The order is checked on the stubbed run."""
    _fake_cuda(monkeypatch)
    log = []
    _settle_log(monkeypatch, log)
    _stub_gdn(monkeypatch, _ordered(bg._Layers, log, "conv_step", "snap_step", "replay_step", "commit"), [])
    out = tmp_path / "gdn.json"
    assert bg.main(["--shapes", "q35-4b", "--batch", "256", "--window", "16", "--tokens", "1,4", "--variants", "6",
                    "--repeats", "2", "--l2-bytes", "1", "--max-layers", "2", "--out", str(out)]) == 0
    settles = [i for i, e in enumerate(log) if isinstance(e, tuple)]
    assert settles and settles[0] == 0 and "conventional" in log[0][1]  # before the block's first kernel
    first_snap = log.index("snap_step")
    pools = [i for i in settles if "per-draft" in log[i][1]]
    assert pools and pools[0] < first_snap
    assert not [e for e in log[pools[0] + 1:first_snap] if isinstance(e, tuple)]  # nothing between them
    # the verify timings follow the per-draft ones with no allocation between: the same settle covers them
    first_verify = next(i for i, e in enumerate(log) if e == "replay_step" and i > first_snap)
    assert not [e for e in log[first_snap:first_verify] if isinstance(e, tuple)]
    # one per block, one after each T's checks (T = 1, 4), one after the pools
    assert json.loads(out.read_text())["settle"]["waits"] == len(settles) == 4


def test_mamba2_bench_settles_before_its_timed_groups(monkeypatch, tmp_path):
    """As the GDN case: the block's timings (after its buffers and the checks) and the replay timings wait for the
    probe first; the FlashInfer cases take the settle as an argument (exercised on the GPU only)."""
    _fake_cuda(monkeypatch)
    log = []
    _settle_log(monkeypatch, log)
    _stub_mamba2(monkeypatch, _ordered(bm._Layerset, log, "conv_step", "replay_step", "commit"), [])
    out = tmp_path / "m2.json"
    assert bm.main(["--shapes", "super", "--batch", "256", "--tokens", "1,4", "--variants", "4", "--no-sweep-rows",
                    "--no-flashinfer", "--repeats", "2", "--l2-bytes", "1", "--out", str(out)]) == 0
    assert isinstance(log[0], tuple) and "block" in log[0][1]
    replay_settle = next(i for i, e in enumerate(log) if isinstance(e, tuple) and "replay" in e[1])
    assert log.index("conv_step") < replay_settle < log.index("replay_step")
    assert json.loads(out.read_text())["settle"]["waits"] == 2


class _FakeDualCache:
    """A dual-precision cache for the precision bench's CPU dry run: the buffers the bench fills (read copy,
    recurrence copy, ring), with ``decode`` / ``step`` appending to ``LOG``; construction is logged as an allocation."""
    LOG = []

    class _Copy:
        def __init__(self, fmt, shape):
            self.data = torch.zeros(shape, dtype=torch.uint8 if fmt in ("fp8_e4m3", "nvfp4") else torch.float32)
            self.scale = torch.zeros(shape[:-1]) if fmt in ("fp8_e4m3", "nvfp4") else None
            self.gscale = torch.zeros(shape[0]) if fmt == "nvfp4" else None

    def __init__(self, family, B, h_key, h_val, width, L, rf, rec, act):
        self.LOG.append(("alloc", rf, rec))
        self.lp = self._Copy(rf, (B, h_val, width, 8))
        self.hp = None if rec == "fp32" and rf == "fp32" else self._Copy(rec, (B, h_val, width, 8))
        self.ring_len = torch.zeros(B, dtype=torch.int32)
        self.defer_flush_rows, self.concurrent_flush = True, None
        if family == "mamba2":
            self.ring_dt, self.ring_x = torch.zeros(B, L, h_val), torch.zeros(B, L, h_val, width, dtype=act)
            self.ring_B = torch.zeros(B, L, h_key, 128, dtype=act)
        else:
            self.ring_g, self.ring_u = torch.zeros(B, L, h_val), torch.zeros(B, L, h_val, width, dtype=torch.half)
            self.ring_k, self.ring_beta = torch.zeros(B, L, h_key, 128, dtype=act), torch.zeros(B, L, h_val)
            self.ring_v = torch.zeros(B, L, h_val, width, dtype=act)

    def decode(self, *a):
        self.LOG.append("decode")

    def step(self, *a):
        self.LOG.append("step")


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_precision_bench_settles_after_each_allocation(monkeypatch, family):
    """bench precision (seventieth session's review): it waits for the copy probe where its buffers were just
    allocated: before the conventional step, before the fp32 replay step, and before each (recurrence, read format)
    block's timings, after that block's caches were built. Run on the CPU with the kernels, the caches and the graph
    timing stubbed; what it cannot show is any real time."""
    from replayssm_trtllm.bench import precision as bp
    from replayssm_trtllm.ops import dual_precision as dp
    from replayssm_trtllm.ops import gdn as gd
    from replayssm_trtllm.ops import mamba2 as m2
    _fake_cuda(monkeypatch)
    log = _FakeDualCache.LOG
    log.clear()
    monkeypatch.setattr(bp, "_DEVICE", "cpu")
    monkeypatch.setattr(bp, "MAMBA2_SHAPE", {"H": 4, "P": 8, "G": 2})
    monkeypatch.setattr(bp, "GDN_SHAPE", {"HK": 2, "HV": 4, "V": 8})
    for mod, name, tag in ((m2, "mamba2_decode_out", "conv"), (m2, "mamba2_replay_decode_out", "replay"),
                           (gd, "gdn_decode", "conv"), (gd, "gdn_replay", "replay")):
        monkeypatch.setattr(mod, name, lambda *a, _t=tag, **k: log.append(_t))
    monkeypatch.setattr(dp, "Mamba2DualPrecisionCache",
                        lambda B, H, P, G, L, *a, act_dtype: _FakeDualCache("mamba2", B, G, H, P, L, a[2], a[3],
                                                                            act_dtype))
    monkeypatch.setattr(dp, "GdnDualPrecisionCache",
                        lambda B, HK, HV, V, L, *a, act_dtype: _FakeDualCache("gdn", B, HK, HV, V, L, a[2], a[3],
                                                                             act_dtype))

    def time_graph(fns, reps):
        for fn in fns:
            fn()
        return {"median_us": 10.0}

    ap = __import__("argparse").ArgumentParser()
    bp.add_arguments(ap)
    args = ap.parse_args(["--batch", "6", "--window", "4", "--layers", "2", "--reads", "fp32,fp16,nvfp4"])
    rows, res = bp._family_cases(family, args, torch, time_graph, settle=lambda what: log.append(("settle", what)))
    settles = [i for i, e in enumerate(log) if isinstance(e, tuple) and e[0] == "settle"]
    assert len(settles) == 2 + len(bp.RECS) * 3
    # the conventional and the fp32 replay timings each come right after their own settle
    assert log[settles[0]][1].endswith("conventional fp32") and log[settles[0] + 1] == "conv"
    assert log[settles[1]][1].endswith("replay fp32") and log[settles[1] + 1] == "replay"
    assert "replay" not in log[:settles[1]] and "conv" not in log[settles[1]:]
    # every (recurrence, read) block: its caches (one per layer) built, then the settle, then its timings, with no
    # allocation between the settle and the next block's caches
    blocks = settles[2:]
    for n, i in enumerate(blocks):
        allocs = [e for e in log[settles[1]:i] if isinstance(e, tuple) and e[0] == "alloc"]
        assert allocs, f"settle {log[i][1]!r} before its block's caches were built"
        rf, rec = allocs[-1][1], allocs[-1][2]
        assert log[i][1] == f"precision {family}: read {rf}, recurrence {rec}"
        assert [e for e in log[i - 2:i]] == [("alloc", rf, rec)] * 2  # the layers' caches right before it
        end = blocks[n + 1] - 2 if n + 1 < len(blocks) else len(log)
        timed = log[i + 1:end]
        assert timed and set(timed) <= {"decode", "step"}
    assert [log[i][1].split(": ")[1] for i in blocks] == [f"read {rf}, recurrence {rec}" for rec in bp.RECS
                                                          for rf in ("fp32", "fp16", "nvfp4")]
    assert res["conv"] == 10.0 and any(r["case"] == "window-amortized step" for r in rows)


def test_settle_wait_logic():
    """settle_wait on scripted probe readings and a fake clock: waits while a reading is below the fraction of the
    best seen, stops at the first reading at or above it, and gives up after max_seconds."""
    from replayssm_trtllm.bench.common import settle_wait

    def scripted(readings):
        it = iter(readings)
        now = [0.0]
        return (lambda: next(it)), (lambda: now[0]), (lambda dt: now.__setitem__(0, now[0] + dt))

    probe, clock, sleep = scripted([83.0, 84.0, 90.0, 99.0, 50.0])
    res, best = settle_wait(probe, 100.0, fraction=0.97, max_seconds=3.0, interval_s=0.1, clock=clock, sleep=sleep)
    assert res.settled and res.probes == 4 and best == 100.0
    assert res.first_frac == pytest.approx(0.83) and res.last_frac == pytest.approx(0.99)
    assert res.waited_s == pytest.approx(0.3)
    # a new best raises the bar: 100 then 120 (best 120), then 117 >= 0.97 * 120 = 116.4
    probe, clock, sleep = scripted([100.0, 120.0, 117.0])
    res, best = settle_wait(probe, 90.0, fraction=0.97, max_seconds=3.0, interval_s=0.1, clock=clock, sleep=sleep)
    assert res.settled and res.probes == 1 and best == 100.0  # 100 >= 0.97 * 100 at once
    # never back: gives up after max_seconds and says so
    probe, clock, sleep = scripted([80.0] * 100)
    res, best = settle_wait(probe, 100.0, fraction=0.97, max_seconds=1.0, interval_s=0.25, clock=clock, sleep=sleep)
    assert not res.settled and res.waited_s == pytest.approx(1.0) and res.probes == 5
    for bad in (0.0, -1.0, float("nan")):
        probe, clock, sleep = scripted([bad])
        with pytest.raises(RuntimeError, match="positive bandwidth"):
            settle_wait(probe, 100.0, clock=clock, sleep=sleep)
    with pytest.raises(ValueError, match="fraction"):
        settle_wait(lambda: 1.0, 1.0, fraction=1.5)


def test_bandwidth_settler_reports_only_real_waits():
    """BandwidthSettler with a scripted reading instead of the GPU probe: calibration takes the best of eight
    readings; a settle that passes at once is counted but not reported; one that waits is printed and listed with
    its fractions; one that never comes back says "timed anyway"; max_seconds = 0 turns it off."""
    from replayssm_trtllm.bench.common import BandwidthSettler
    readings = iter([90.0, 100.0] + [99.0] * 6      # calibration: best 100
                    + [98.0]                          # settle 1: at once
                    + [80.0, 85.0, 99.5]              # settle 2: two low readings, then back
                    + [50.0] * 1000)                  # settle 3: never back
    lines = []
    s = BandwidthSettler(max_seconds=0.1, report_s=0.01, log=lines.append, reading=lambda: next(readings),
                         calibrate_s=0)
    assert s.enabled and s.best == 100.0
    assert s.settle("one").settled and lines == []
    r = s.settle("two")
    assert r.settled and r.probes == 3 and r.first_frac == pytest.approx(0.80)
    assert len(lines) == 1 and "before two" in lines[0] and "80.0%" in lines[0] and "back to 99.5%" in lines[0]
    r = s.settle("three")
    assert not r.settled and "timed anyway" in lines[-1]
    summ = s.summary()
    assert summ["waits"] == 3 and [e["what"] for e in summ["reported"]] == ["two", "three"]
    assert summ["reported"][0]["first_frac"] == 0.8 and summ["reported"][1]["settled"] is False
    s.close()
    assert not s.enabled and s.settle("after close") is None
    off = BandwidthSettler(max_seconds=0, reading=lambda: 1 / 0)  # never probes
    assert not off.enabled and off.settle("x") is None and off.summary()["waits"] == 0
    with pytest.raises(ValueError, match="fraction"):
        BandwidthSettler(fraction=0, reading=lambda: 1.0)


def test_gpu_clock_reader_with_and_without_nvml():
    """GpuClockReader on a fake NVML module: the readings and the reasons bitmask (the older API name as the
    fallback); None, not an exception, when NVML is missing or a call fails."""
    from replayssm_trtllm.bench.common import GpuClockReader

    class FakeNvml:
        NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
        fail = False

        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByIndex(self, i):
            return ("gpu", i)

        def nvmlDeviceGetClockInfo(self, h, which):
            if self.fail:
                raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
            return {1: 1755, 2: 2619}[which]

        def nvmlDeviceGetPowerUsage(self, h):
            return 612345  # mW

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):  # older nvidia-ml-py
            return 0x4

    nv = FakeNvml()
    r = GpuClockReader(index=0, nvml=nv)
    assert r.available
    got = r.read()
    assert got == dict(sm_mhz=1755, mem_mhz=2619, power_w=612.3, reasons="0x4")
    assert GpuClockReader.text(got) == "SM 1755 MHz, mem 2619 MHz, 612.3 W, reasons 0x4"
    nv.fail = True
    assert r.read() is None
    class Broken(FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("NVML_ERROR_LIBRARY_NOT_FOUND")
    b = GpuClockReader(index=0, nvml=Broken())
    assert not b.available and b.read() is None and GpuClockReader.text(None) == ""


def test_bandwidth_settler_calibrates_past_a_transient():
    """The settler is built right after the copy-bandwidth measurement frees its buffers, so its first readings may
    be low: calibration keeps reading for calibrate_s (at least 8 readings) and takes the best it saw, here one that
    comes after 16 low readings."""
    from replayssm_trtllm.bench.common import BandwidthSettler
    n = [0]

    def reading():
        n[0] += 1
        return 80.0 if n[0] <= 16 else 100.0
    s = BandwidthSettler(max_seconds=3.0, reading=reading, calibrate_s=1.0)
    assert s.best == 100.0 and n[0] > 16
    s8 = BandwidthSettler(max_seconds=3.0, reading=lambda: 80.0, calibrate_s=0)
    assert s8.best == 80.0
