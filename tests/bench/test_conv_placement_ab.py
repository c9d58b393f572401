"""scripts/conv_placement_ab.py on the CPU: argument errors, the no-GPU refusal, and a dry run with the kernels
stubbed (which sets are built and timed, in which order, and what is printed). Its GPU figures are not tested."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest
import torch

import replayssm_trtllm.bench.gdn as bg

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "conv_placement_ab.py"
_spec = importlib.util.spec_from_file_location("conv_placement_ab", _PATH)
cpa = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpa)


def test_argument_errors_and_no_gpu(monkeypatch, capsys):
    with pytest.raises(SystemExit, match="--windows 'x'"):
        cpa.main(["--windows", "x"])
    assert cpa.main(["--rounds", "0"]) == 2
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cpa.main(["--shape", "q35-4b"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert cpa.main(["--shape", "nope"]) == 2


def _recording_layers(built, timed):
    """bench gdn's layer buffers on the CPU, recording each set built (B, L, Tmax) and each conventional step."""
    class Layers(bg._Layers):
        def __init__(self, sh, B, L, Tmax, *a, **k):
            k["device"] = "cpu"
            built.append((B, L, Tmax))
            super().__init__(sh, B, L, Tmax, *a, **k)

        def conv_step(self, layer, T=1, variant=0):
            timed.append((self.B, self.L, variant))
    return Layers


def test_dry_run_builds_and_times_every_set(monkeypatch, capsys):
    built, timed = [], []
    Layers = _recording_layers(built, timed)

    def time_graph(fn, repeats):
        fn()
        return 1e-4

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU dry run")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(bg, "_Layers", Layers)
    monkeypatch.setattr(bg, "_time_graph", time_graph)
    monkeypatch.setattr(bg, "copy_bandwidth", lambda *a, **k: 4e12)
    monkeypatch.setattr(bg, "SHAPES", {"q35-4b": dict(H=2, HV=4, K=16, V=8)})
    assert cpa.main(["--shape", "q35-4b", "--batch", "4", "--windows", "8,16", "--variants", "5,6", "--rounds", "2",
                     "--l2-bytes", "1", "--trace-seconds", "0"]) == 0
    # part 1: both sets alive, then the larger block with its per-draft pools (T = 8), then the first set's sizes
    assert built == [(4, 8, 1), (4, 16, 1), (8, 16, 8), (4, 8, 1)]
    # round-robin: round 1 (L 8: v5, v6; L 16: v5, v6), round 2 the same; two layers per timing
    assert [t for t in timed[:16:2]] == [(4, 8, 5), (4, 8, 6), (4, 16, 5), (4, 16, 6)] * 2
    out = capsys.readouterr().out
    assert "part 1 B=4 set L=16 v6: median    50.00 us" in out  # 100 us per graph of two layers
    assert "part 2 B=8 (per-draft pools allocated) v5" in out
    assert "part 2 B=4 set L=8 after the larger block v6" in out


def test_dry_run_part3_traces_and_settles(monkeypatch, capsys):
    """Part 3 (seventieth session): the probe traced after the larger set's allocation and after its free, then the
    set of the batch's size timed after a settle. The probe is scripted: 50% of its best right after the free."""
    import replayssm_trtllm.bench.common as common
    built, timed = [], []
    Layers = _recording_layers(built, timed)

    class Settler:
        def __init__(self, max_seconds=3.0, **k):
            self.best, self.n, self.last_clocks = 100.0, 0, None

        def probe(self):
            self.n += 1
            low = len(built) == 6 and self.n % 2  # low readings after the free only
            self.last_clocks = dict(sm_mhz=1500 if low else 1980, mem_mhz=2619, power_w=650.0,
                                    reasons="0x4" if low else "0x0")
            return 50.0 if low else 100.0

        def settle(self, what):
            return common.SettleResult(0.04, 3, 0.5, 0.99, True)

        def close(self):
            pass

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "CPU dry run")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(common, "BandwidthSettler", Settler)
    monkeypatch.setattr(bg, "_Layers", Layers)
    monkeypatch.setattr(bg, "_time_graph", lambda fn, repeats: (fn(), 1e-4)[1])
    monkeypatch.setattr(bg, "copy_bandwidth", lambda *a, **k: 4e12)
    monkeypatch.setattr(bg, "SHAPES", {"q35-4b": dict(H=2, HV=4, K=16, V=8)})
    assert cpa.main(["--shape", "q35-4b", "--batch", "4", "--windows", "8,16", "--variants", "5", "--rounds", "2",
                     "--l2-bytes", "1", "--trace-seconds", "0.1"]) == 0
    # parts 1-2 as before, then part 3: the larger set, the batch's set after its free, the larger set again
    assert built[4:] == [(8, 16, 8), (4, 8, 1), (8, 16, 8)]
    out = capsys.readouterr().out
    assert "none below 97% of the best" in out.split("part 3 (a)")[0].split("part 3 (0)")[1]
    assert "part 3 (a) after allocating B=8 with per-draft pools" in out
    b_line = next(line for line in out.splitlines() if line.startswith("part 3 (b)"))
    assert "below 97% of the best" in b_line and "none" not in b_line
    assert "settle waited 0.04 s (50% -> 99%)" in out
    assert "50%: SM 1500 MHz, mem 2619 MHz, 650.0 W, reasons 0x4" in out  # NVML's readings beside the trace
    assert "part 3 (c) B=4 set L=8 after the settle v5: median    50.00 us" in out
    assert timed[-4:] == [(4, 8, 5)] * 4  # two rounds of two layers
