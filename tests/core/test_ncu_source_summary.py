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


def test_instructions_ranking_and_xz(tmp_path, capsys):
    """--instructions ranks by the "Instructions Executed" column (commas and "-" read as numbers / none), and an
    xz-compressed export (docs/logs/ncu/*.csv.xz) is read directly."""
    import lzma
    hdr = HDR + ["Instructions Executed"]
    rows = [["File Path", "/src/prep.cuh"], ["Function Name", "void prepKernel<4>(P)"], hdr,
            ["10", "load();", "-", "-", "9", "0", "9", "0", "0", "1,000"],
            ["20", "rec[s] = expf(cs);", "-", "-", "1", "0", "1", "0", "0", "3,000"],
            ["30", "// no code", "-", "-", "0", "0", "0", "0", "0", "-"]]
    p = tmp_path / "src.csv.xz"
    text = "".join(",".join(f'"{c}"' for c in r) + "\n" for r in rows)
    with lzma.open(p, "wt") as f:
        f.write(text)
    rows_parsed = nss.parse(str(p), "prep")
    assert [r[6] for r in rows_parsed] == [1000, 3000, 0]
    (launch,) = nss.split_launches(rows_parsed)
    out = nss.summarize(launch, top=3, file_sub="prep.cuh", phases=nss.parse_phases("15:loads,40:records"),
                        instructions=True)
    assert out[0].endswith("4000 warp instructions")
    assert "prep.cuh:20" in out[2] and "75.0%" in out[2]  # the most instructions first, though fewer samples
    assert len(out) == 5  # the line without instructions is not listed
    assert out[-1] == "  phases: loads 1000, records 3000"
    by_samples = nss.summarize(launch, top=1, file_sub="", phases=[])
    assert by_samples[0].endswith("10 samples") and "prep.cuh:10" in by_samples[2]
    assert nss.main([str(p), "--kernel", "prep", "--instructions", "--top", "1"]) == 0
    assert "4000 warp instructions" in capsys.readouterr().out
