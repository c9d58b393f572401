"""scripts/dp_rule_suggest.py: the dual-precision decode's split rule suggested from scripts/dp_path_timing.py
outputs (CPU; synthetic logs in that script's format)."""
from __future__ import annotations

import importlib.util
import math
import pathlib

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "dp_rule_suggest.py"
_spec = importlib.util.spec_from_file_location("dp_rule_suggest", _PATH)
drs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drs)


def _log(header, rows):
    """dp_path_timing.py output: `header`, then one line per (B, T, read, heads, auto, other, split)."""
    out = [header, f"{'B':>4} {'T':>2} {'read':>9} {'B x H':>7} | {'auto':>8} {'other':>8} {'split':>8} | split/other"]
    for B, T, read, H, auto, other, split in rows:
        out.append(f"{B:>4} {T:>2} {read:>9} {B * H:>7} | {auto:8.2f} {other:8.2f} {split:8.2f} | "
                   f"{split / other:.3f} (tile)")
    return out


GDN64 = "GDN HK 16 HV 64 V 128 K 128 L 16, bf16 activations, non-flush decode launch, us per layer"
GDN32 = "GDN HK 16 HV 32 V 128 K 128 L 16, bf16 activations, non-flush decode launch, us per layer"
NANO = "Mamba-2 nano H 96 P 80 G 8 N 128 L 16, bf16 activations, non-flush decode launch, us per layer"


def test_parse_reads_both_families_and_skips_nan():
    lines = _log(GDN64, [(1, 2, "fp8_e4m3", 64, 3.0, 3.0, 4.0)]) + ["   (split = split: cannot run)"] + \
        _log(NANO, [(4, 4, "fp8_e4m3", 96, 18.4, 28.0, 18.4)]) + \
        ["   8  4  fp8_e4m3     768 |      nan      nan      nan | nan (tile)"]
    rows = drs.parse(lines)
    assert rows[:2] == [("gdn", "HV64", 128, 1, 2, "fp8_e4m3", 64, 3.0, 3.0, 4.0),
                        ("mamba2", "nano", 80, 4, 4, "fp8_e4m3", 384, 18.4, 28.0, 18.4)]
    assert len(rows) == 3 and rows[2][:7] == ("mamba2", "nano", 80, 8, 4, "fp8_e4m3", 768)
    assert all(math.isnan(x) for x in rows[2][7:])   # a path that could not run: kept, left out of the rule
    assert "| mamba2 | fp8_e4m3 | 4 | 384 0.657 |" in "\n".join(drs.report(rows, library=lambda *a: None))


def test_suggest_is_the_smallest_point_from_which_every_larger_one_wins():
    pts = [(64, 1.3), (128, 1.1), (256, 0.99), (512, 1.05), (1024, 0.9), (2048, 0.8)]
    assert drs.suggest(pts, 0.02) == 1024          # 512 loses by 5%: the suggestion stays above it
    assert drs.suggest(pts, 0.06) == 256
    assert drs.suggest([(64, 0.8), (128, 0.9)], 0.0) == 64
    assert drs.suggest([(64, 0.8), (128, 1.1)], 0.02) is None   # the largest point loses: never


def test_report_per_shape_library_and_auto_misses():
    lines = _log(GDN64, [(1, 2, "nvfp4", 64, 4.0, 4.0, 4.4), (4, 2, "nvfp4", 64, 5.0, 5.0, 4.0),
                         (8, 2, "nvfp4", 64, 9.0, 9.0, 6.0)]) + \
        _log(GDN32, [(2, 2, "nvfp4", 32, 4.0, 4.0, 3.8), (8, 2, "nvfp4", 32, 5.8, 5.8, 4.5)])
    seen = []

    def lib(fam, read, T, hd):
        seen.append((fam, read, T, hd))
        return 256
    out = drs.report(drs.parse(lines), 0.02, library=lib)
    row = [ln for ln in out if ln.startswith("| gdn | nvfp4 | 2 |")][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4] == "256"                        # HV64 loses at 64 (1.10): both shapes win from 256
    assert cells[5] == "HV32: 64; HV64: 256"
    assert cells[6] == "256" and ("gdn", "nvfp4", 2, 128) in seen
    # the automatic choice took the slower path at B = 4 (HV64: 5.0 against 4.0) and B = 8 (9.0 against 6.0)
    assert "automatic choice more than 2% above the faster path: 4 of 5 cases" in out
    assert any("B=4 T=2 nvfp4: auto 5.00 us" in ln for ln in out)


def test_main_refuses_logs_without_rows(tmp_path, capsys):
    p = tmp_path / "empty.txt"
    p.write_text("nothing here\n")
    assert drs.main([str(p)]) == 2
    assert "no dp_path_timing.py rows" in capsys.readouterr().err
