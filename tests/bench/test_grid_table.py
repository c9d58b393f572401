"""scripts/grid_table.py: the fastest variant per kernel kind, GDN's verify as the slower phase, ratios against the
(shape, B) conventional standard step, and both JSON layouts (CPU only)."""
from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "grid_table.py"
_spec = importlib.util.spec_from_file_location("grid_table", _PATH)
grid_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grid_table)


def _gdn_rows():
    rows = []
    for B, conv in ((256, 280.0), (1, 4.0)):
        rows += [dict(shape="q35-4b", B=B, L=16, T=1, kernel="conventional", variant=5, us=conv * 1.02),
                 dict(shape="q35-4b", B=B, L=16, T=1, kernel="conventional", variant=6, us=conv),
                 dict(shape="q35-4b", B=B, L=16, T=1, kernel="fla_fused_recurrent", us=conv * 1.3),
                 dict(shape="q35-4b", B=B, L=16, T=1, kernel="replay_standard", phase="inphase", variant=6,
                      us=conv / 1.7),
                 dict(shape="q35-4b", B=B, L=16, T=1, kernel="replay_standard", phase="inphase", variant=5,
                      us=conv / 1.2),
                 dict(shape="q35-4b", B=B, L=16, T=1, kernel="replay_standard", phase="staggered", variant=6,
                      us=conv / 1.75),
                 dict(shape="q35-4b", B=B, L=16, T=1, kernel="replay_standard_ring24", phase="staggered",
                      variant=6, us=conv / 9.0)]
    for L in (8, 16):
        rows += [dict(shape="q35-4b", B=256, L=L, T=4, kernel="conventional_perdraft", variant=6, us=280.0 * 2.6),
                 dict(shape="q35-4b", B=256, L=L, T=4, kernel="replay_speculative", phase="inphase", accept="all",
                      variant=6, us=280.0 * 0.90),
                 dict(shape="q35-4b", B=256, L=L, T=4, kernel="replay_speculative", phase="staggered",
                      accept="all", variant=6, us=280.0 * 0.92),
                 dict(shape="q35-4b", B=256, L=L, T=4, kernel="replay_speculative", phase="staggered",
                      accept="all", variant=5, us=280.0 * 1.8),
                 dict(shape="q35-4b", B=256, L=L, T=4, kernel="replay_speculative", phase="inphase", accept="one",
                      variant=6, us=280.0 * 0.76)]
    return rows


def test_gdn_fastest_variant_and_slower_phase():
    t = grid_table.fastest(_gdn_rows(), "gdn")
    k1 = t[("q35-4b", 256, 16, 1)]
    assert k1["conv"] == pytest.approx(280.0)  # v6, not v5 and not the fla peer
    assert k1["std_inphase"] == pytest.approx(280.0 / 1.7)  # v6 beats v5
    assert k1["std_staggered"] == pytest.approx(280.0 / 1.75)  # the ring-24 line is not a target case
    k4 = t[("q35-4b", 256, 16, 4)]
    assert k4["spec_all"] == pytest.approx(280.0 * 0.92)  # the slower phase, each the fastest variant
    assert k4["spec_one"] == pytest.approx(280.0 * 0.76)
    assert "spec_mixed" not in k4


def test_gdn_markdown_ratios_against_the_conventional_step():
    md = grid_table.markdown(grid_table.fastest(_gdn_rows(), "gdn"))
    lines = md.splitlines()
    assert lines[0].startswith("| shape | B | L | T |")
    # rows without a copy fraction show "-" in the last column
    assert "| q35-4b | 256 | 16 | 1 | 280.00 | - | 164.71 (1.700x) / 160.00 (1.750x) | -; - / - |" in lines
    # the L = 8 verify line takes the same (shape, B) conventional step, which only the L = 16 window timed
    assert "| q35-4b | 256 | 8 | 4 | 280.00 | 2.600 | 0.920 / 0.760 / - | -; - / - / - |" in lines
    assert "| q35-4b | 256 | 16 | 4 | 280.00 | 2.600 | 0.920 / 0.760 / - | -; - / - / - |" in lines
    assert "| q35-4b | 1 | 16 | 1 | 4.00 | - | 2.35 (1.700x) / 2.29 (1.750x) | -; - / - |" in lines


def test_copy_fraction_column_follows_the_rows_shown():
    """The last column is the copy fraction of exactly the row each figure came from: the fastest variant, and for
    GDN's verify the slower phase."""
    rows = [dict(shape="q35-4b", B=256, L=16, T=1, kernel="conventional", variant=5, us=290.0, copy_frac=0.87),
            dict(shape="q35-4b", B=256, L=16, T=1, kernel="conventional", variant=6, us=280.0, copy_frac=0.903),
            dict(shape="q35-4b", B=256, L=16, T=1, kernel="replay_standard", phase="inphase", variant=6, us=165.0,
                 copy_frac=0.857),
            dict(shape="q35-4b", B=256, L=16, T=1, kernel="replay_standard", phase="staggered", variant=6,
                 us=160.0, copy_frac=0.882),
            dict(shape="q35-4b", B=256, L=16, T=4, kernel="conventional_perdraft", variant=6, us=740.0,
                 copy_frac=0.858),
            # the in-phase verify is faster (higher fraction); the staggered one is the slower phase, shown
            dict(shape="q35-4b", B=256, L=16, T=4, kernel="replay_speculative", phase="inphase", accept="all",
                 variant=6, us=250.0, copy_frac=0.70),
            dict(shape="q35-4b", B=256, L=16, T=4, kernel="replay_speculative", phase="staggered", accept="all",
                 variant=6, us=258.0, copy_frac=0.669),
            dict(shape="q35-4b", B=256, L=16, T=4, kernel="replay_speculative", phase="staggered", accept="all",
                 variant=5, us=500.0, copy_frac=0.30)]
    t = grid_table.fastest(rows, "gdn")
    assert t[("q35-4b", 256, 16, 1)]["conv" + grid_table.COPY] == pytest.approx(0.903)
    assert t[("q35-4b", 256, 16, 4)]["spec_all" + grid_table.COPY] == pytest.approx(0.669)
    lines = grid_table.markdown(t).splitlines()
    assert "| q35-4b | 256 | 16 | 1 | 280.00 | - | 165.00 (1.697x) / 160.00 (1.750x) | 90.3; 85.7 / 88.2 |" in lines
    assert "| q35-4b | 256 | 16 | 4 | 280.00 | 2.643 | 0.921 / - / - | 85.8; 66.9 / - / - |" in lines


def test_mamba2_kinds_and_flashinfer_left_out():
    rows = [dict(shape="super", B=256, L=16, T=1, kernel="conventional v2 rows=auto", us_per_step=610.0),
            dict(shape="super", B=256, L=16, T=1, kernel="conventional v4 rows=auto", us_per_step=560.0),
            dict(shape="super", B=256, L=16, T=1, kernel="flashinfer selective_state_update", us_per_step=500.0),
            dict(shape="super", B=256, L=16, T=1, kernel="replay standard in-phase v4 rows=auto", us_per_step=311.0),
            dict(shape="super", B=256, L=16, T=1, kernel="replay standard in-phase v4 (ring 24, not a target)",
                 us_per_step=100.0),
            dict(shape="super", B=256, L=16, T=1, kernel="replay standard staggered v4 rows=auto",
                 us_per_step=308.0),
            dict(shape="super", B=256, L=16, T=4, kernel="conventional per-draft snapshots v2 rows=auto",
                 us_per_step=1456.0),
            dict(shape="super", B=256, L=16, T=4, kernel="replay verify mixed-accepted v4 rows=auto",
                 us_per_step=392.0),
            dict(shape="super", B=256, L=16, T=4, kernel="flashinfer checkpointing_ssu T4_mixed", us_per_step=10.0)]
    t = grid_table.fastest(rows, "mamba2")
    assert t[("super", 256, 16, 1)] == {"conv": 560.0, "std_inphase": 311.0, "std_staggered": 308.0}
    assert t[("super", 256, 16, 4)] == {"perdraft": 1456.0, "spec_mixed": 392.0}
    md = grid_table.markdown(t)
    assert "| super | 256 | 16 | 4 | 560.00 | 2.600 | - / - / 0.700 | -; - / - / - |" in md.splitlines()


def test_main_reads_both_layouts_and_refuses_others(tmp_path, capsys):
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"gpu": "X", "git_commit": "abc", "command": "c", "complete": False,
                             "results": _gdn_rows()}))
    assert grid_table.main([str(p)]) == 0
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "| q35-4b | 256 | 16 | 1 |" in out
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"targets": {}}))
    assert grid_table.main([str(bad)]) == 2
    assert "neither 'results'" in capsys.readouterr().err


def test_verify_ratio_against_the_same_blocks_conventional_step():
    """Each (shape, B, L) block times the conventional kernel again; a verify line is divided by its own block's
    figure, not by another window's (the sixty-seventh session's H100 grid had 371 us in the L = 16 block and 428 us
    in the L = 8 block for the same kernel, which would have flattered the L = 16 verify ratios by 15%)."""
    rows = []
    for L, conv in ((8, 428.0), (16, 371.0)):
        rows += [dict(shape="q35-4b", B=256, L=L, T=1, kernel="conventional", variant=6, us=conv),
                 dict(shape="q35-4b", B=256, L=L, T=4, kernel="replay_speculative", phase="staggered", accept="all",
                      variant=-1, us=300.0)]
    rows.append(dict(shape="q35-4b", B=256, L=32, T=4, kernel="replay_speculative", phase="staggered", accept="all",
                     variant=-1, us=300.0))  # a block without its own T = 1 line: the first window's figure
    t = grid_table.fastest(rows, "gdn")
    assert grid_table.conventional_step(t, "q35-4b", 256, 16) == pytest.approx(371.0)
    assert grid_table.conventional_step(t, "q35-4b", 256, 32) == pytest.approx(428.0)
    assert grid_table.conventional_step(t, "q35-4b", 256) == pytest.approx(428.0)
    lines = grid_table.markdown(t).splitlines()
    assert "| q35-4b | 256 | 16 | 4 | 371.00 | - | 0.809 / - / - | -; - / - / - |" in lines
    assert "| q35-4b | 256 | 8 | 4 | 428.00 | - | 0.701 / - / - | -; - / - / - |" in lines
    assert "| q35-4b | 256 | 32 | 4 | 428.00 | - | 0.701 / - / - | -; - / - / - |" in lines


def test_baseline_spread_names_the_slow_blocks(tmp_path, capsys):
    """A conventional step that differs by more than 5% between the L blocks of one (shape, B) is named with its
    blocks, below the table; a spread within 5% is not."""
    rows = []
    for L, conv in ((8, 428.5), (16, 371.18), (32, 426.88)):
        rows.append(dict(shape="q35-4b", B=256, L=L, T=1, kernel="conventional", variant=6, us=conv))
    for L, conv in ((8, 95.0), (16, 97.0)):
        rows.append(dict(shape="q35-4b", B=64, L=L, T=1, kernel="conventional", variant=6, us=conv))
    t = grid_table.fastest(rows, "gdn")
    lines = grid_table.baseline_spread(t)
    assert lines == ["q35-4b B = 256: the conventional step took 371.18 us in its fastest block but 428.50 us (+15%) "
                     "at L = 8, 426.88 us (+15%) at L = 32; those blocks' ratios are taken against a slower baseline"]
    p = tmp_path / "g.json"
    p.write_text(json.dumps({"gpu": "X", "git_commit": "abc", "command": "c", "results": rows}))
    assert grid_table.main([str(p)]) == 0
    out = capsys.readouterr().out
    assert "differed between blocks by more than 5%" in out and "- q35-4b B = 256:" in out and "B = 64:" not in out
