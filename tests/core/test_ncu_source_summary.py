"""CPU check of scripts/ncu_source_summary.py on a synthetic Nsight Compute source export (two launches of one kernel,
lines in two files)."""
import csv
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "ncu_source_summary", Path(__file__).resolve().parents[2] / "scripts" / "ncu_source_summary.py")
nss = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nss)

HDR = ["Line No", "Source", "Address", "Source", "Warp Stall Sampling (All Samples)",
       "Warp Stall Sampling (Not-issued Samples)", "stall_wait", "stall_barrier", "stall_wait (Not Issued)"]


def _write(path):
    rows = []
    for launch_scale in (1, 3):  # the second launch has three times the samples
        rows += [["File Path", "/src/kern.cuh"], ["Function Name", "void myReplayKernel<1>(P)"], HDR,
                 ["10", "a = load();", "-", "-", str(5 * launch_scale), "0", str(4 * launch_scale), "1", "9"],
                 ["20", "__syncthreads();", "-", "-", str(7 * launch_scale), "0", "0", str(7 * launch_scale), "0"],
                 ["File Path", "/src/other.cuh"], ["Function Name", "void myReplayKernel<1>(P)"], HDR,
                 ["3", "dot();", "-", "-", str(2 * launch_scale), "0", str(2 * launch_scale), "0", "0"],
                 ["File Path", "/src/kern.cuh"], ["Function Name", "void otherKernel(P)"], HDR,
                 ["10", "x", "-", "-", "50", "0", "50", "0", "0"]]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def test_parse_split_and_phases(tmp_path, capsys):
    p = tmp_path / "src.csv"
    _write(p)
    rows = nss.parse(str(p), "Replay")
    assert {r[0] for r in rows} == {"void myReplayKernel<1>(P)"}  # other kernels filtered out
    launches = nss.split_launches(rows)
    assert [sum(r[4] for r in L) for L in launches] == [14, 42]
    assert launches[0][0][5] == {"stall_wait": 4, "stall_barrier": 1}  # "(Not Issued)" columns are not counted
    out = nss.summarize(launches[1], top=2, file_sub="kern.cuh", phases=nss.parse_phases("15:load,30:sync"))
    assert out[0].endswith("42 samples")
    assert "barrier 22" in out[1] and "wait 18" in out[1]
    assert "kern.cuh:20" in out[2] and "50.0%" in out[2]  # the top line first
    assert out[-1] == "  phases: load 15, sync 21, other files 6"
    assert nss.main([str(p), "--kernel", "Replay", "--top", "1"]) == 0
    assert "launch of void myReplayKernel" in capsys.readouterr().out
    assert nss.main([str(p), "--kernel", "NoSuchKernel"]) == 1
