"""scripts/ab_summary.py: the side-by-side table of scripts/ab_bench.sh output (CPU)."""
from __future__ import annotations

import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ab_summary.py"
_spec = importlib.util.spec_from_file_location("ab_summary", _PATH)
ab_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab_summary)

LOG = """\
stray line 1.0 us before any header
== mamba2 [-] bench --shapes super --tokens 4
device-to-device copy: 4.255 TB/s (read + write)
super B=256 L=16 T=1 conventional v4 rows=auto 562.93 us/step 3815 GB/s (89.9% copy)
super B=256 L=16 T=4 replay verify all-accepted v4 rows=auto 489.18 us/step speedup 3.659x x0.869 conv
== mamba2 [RSSM_X=1 RSSM_Y=0] bench --shapes super --tokens 4
super B=256 L=16 T=1 conventional v4 rows=auto 560.00 us/step 3815 GB/s (90.0% copy)
super B=256 L=16 T=4 replay verify all-accepted v4 rows=auto 440.26 us/step speedup 3.9x x0.786 conv
== gdn [-] bench --variants 6
q35-4b B=256 L=16 T=1 conventional v6: 277.46 us 3870 GB/s (90.3% of copy)
q35-4b B=256 L=16 T=1 conventional best: v6 277.46 us (90.3% of copy)
q35-4b B=256 L=16 T=1 replay v6 inphase : 175.73 us speedup 1.579x
"""


def test_parse_columns_and_cases():
    cols = ab_summary.parse(LOG.splitlines())
    assert [label for label, _ in cols] == ["mamba2 [-]", "mamba2 [RSSM_X=1 RSSM_Y=0]", "gdn [-]"]
    assert cols[0][1] == {"super B=256 L=16 T=1 conventional v4 rows=auto": 562.93,
                          "super B=256 L=16 T=4 replay verify all-accepted v4 rows=auto": 489.18}
    # "best" summary lines are skipped; the gdn "case: value us" form is read
    assert cols[2][1] == {"q35-4b B=256 L=16 T=1 conventional v6": 277.46,
                          "q35-4b B=256 L=16 T=1 replay v6 inphase": 175.73}


def test_table_ratio_of_second_to_first_process():
    rows = ab_summary.table(ab_summary.parse(LOG.splitlines()))
    verify = [r for r in rows if "verify all-accepted" in r]
    assert verify == ["| super B=256 L=16 T=4 replay verify all-accepted v4 rows=auto | 489.2 | 440.3 | 0.900 |"]
    assert any(r.startswith("# gdn") for r in rows)
    gdn_row = [r for r in rows if r.startswith("| q35-4b B=256 L=16 T=1 replay v6 inphase")]
    assert gdn_row == ["| q35-4b B=256 L=16 T=1 replay v6 inphase | 175.7 |  |"]  # one process: no ratio


def test_main_reports_missing_timings(tmp_path, capsys):
    empty = tmp_path / "empty.log"
    empty.write_text("== mamba2 [-] bench x\nnothing timed\n")
    assert ab_summary.main(["ab_summary.py", str(empty)]) == 0
    assert "no timing lines found" in capsys.readouterr().out
    assert ab_summary.main(["ab_summary.py"]) == 2


def test_clock_line_and_row():
    samples = ["1980, 0", "1755, 100", "1740, 97", "1770, 100", "bad line", "1900, 10", "1760, 100"]
    line = ab_summary.clock_line(samples)
    # busy samples only (utilization >= 50): 1740 1755 1760 1770 -> median 1757.5 (printed rounded)
    assert line == "sm clock (busy): 1758 MHz median, 1740-1770 MHz, 4 samples"
    assert ab_summary.clock_line(["1980, 0"]) == "sm clock (busy): no busy samples"
    log = "== gdn [-] bench x\nq35-4b T=1 replay v6 inphase : 165.40 us\n" + ab_summary.clock_line(samples) + "\n"
    log += "== gdn [RSSM_X=1] bench x\nq35-4b T=1 replay v6 inphase : 165.00 us\nsm clock (busy): 1900 MHz median\n"
    rows = ab_summary.table(ab_summary.parse(log.splitlines()))
    assert f"| {ab_summary.CLOCK_CASE} | 1758.0 | 1900.0 | 1.081 |" in rows
    # "no busy samples" adds no row
    cols = ab_summary.parse(["== gdn [-] bench x", "sm clock (busy): no busy samples"])
    assert cols == [("gdn [-]", {})]


def test_main_clock(tmp_path, capsys):
    f = tmp_path / "clk.csv"
    f.write_text("1800, 100\n1820, 100\n1990, 0\n")
    assert ab_summary.main(["ab_summary.py", "--clock", str(f)]) == 0
    assert capsys.readouterr().out.strip() == "sm clock (busy): 1810 MHz median, 1800-1820 MHz, 2 samples"


def _process(setting, conv, rep, pd, ver, ring24=None, clock=False):
    """One bench gdn process of an A/B log: q35-4b conventional / replay / per-draft / verify, q35-122b replay 8 us."""
    lines = [f"== gdn [{setting}] bench --variants=-1,6 --tokens 1,4 --batch 2",
             f"q35-4b B=2 L=16 T=1 conventional v6: {conv:.2f} us 100 GB/s (10.0% of copy)",
             f"q35-4b B=2 L=16 T=1 replay v-1 inphase : {rep:.2f} us speedup 1.25x",
             "q35-122b B=2 L=16 T=1 replay v-1 staggered : 8.00 us speedup 1.1x",
             f"q35-4b B=2 L=16 T=4 per-draft conventional v6: {pd:.2f} us",
             f"q35-4b B=2 L=16 T=4 replay verify v6 all inphase : {ver:.2f} us"]
    if ring24 is not None:
        lines.append(f"q35-4b B=2 L=16 T=1 replay v-1 inphase on the ring of capacity 24 (not a target) : {ring24:.2f} us")
    if clock:
        lines.append("sm clock (busy): 1980 MHz median, 1980-1980 MHz, 20 samples")
    return "\n".join(lines) + "\n"


AB_LOG = (_process("-", 5, 4, 10, 6, ring24=4, clock=True) + _process("RSSM_PDL_CHAIN=1", 6, 3, 10, 6.6, ring24=3)
          + _process("-", 5, 4, 10, 6) + _process("RSSM_PDL_CHAIN=1", 4, 3, 12, 6.6))


def test_case_kind():
    assert ab_summary.case_kind("q35-4b B=2 L=16 T=1 conventional v6") == ("conventional", 1, 2)
    assert ab_summary.case_kind("super B=64 L=16 T=4 conventional per-draft snapshots v4 rows=auto") == ("per-draft", 4, 64)
    assert ab_summary.case_kind("q35-4b B=16 L=16 T=8 replay verify v-1 one staggered") == ("replay v-1 verify", 8, 16)
    assert ab_summary.case_kind("nano B=4 L=16 T=1 replay standard in-phase v4 rows=auto") == ("replay v4 standard", 1, 4)
    assert ab_summary.case_kind("q35-4b B=2 L=16 T=1 replay v-1 inphase on the ring of capacity 24 (not a target)") is None
    assert ab_summary.case_kind(ab_summary.CLOCK_CASE) is None


def test_by_kind_pools_cases_over_alternating_processes():
    rows = ab_summary.by_kind(ab_summary.parse(AB_LOG.splitlines()))
    assert rows[0].startswith("# gdn [RSSM_PDL_CHAIN=1] / gdn [-]")
    body = {tuple(c.strip() for c in r.strip("|").split("|"))[:3]: r for r in rows[3:]}
    # conventional: (6 + 4) / (5 + 5) = 1.000 (one case); per-draft (10 + 12) / 20 = 1.100
    assert body[("conventional", "1", "2")] == "| conventional | 1 | 2 | 1 | 1.000 | 1.000 | 1.000 |"
    assert body[("per-draft", "4", "2")] == "| per-draft | 4 | 2 | 1 | 1.100 | 1.100 | 1.100 |"
    # two shapes pooled into one group: 6 / 8 = 0.750 and 16 / 16 = 1.000, median of two = their mean
    assert body[("replay v-1 standard", "1", "2")] == "| replay v-1 standard | 1 | 2 | 2 | 0.750 | 0.875 | 1.000 |"
    assert body[("replay v6 verify", "4", "2")] == "| replay v6 verify | 4 | 2 | 1 | 1.100 | 1.100 | 1.100 |"
    assert len(body) == 4  # the ring-24 extra and the clock row are no group


def test_by_kind_three_settings_and_broken_cycles(tmp_path, capsys):
    # A B C A B C: one table per later setting, each against the first
    blocks = AB_LOG.split("== ")[1:]  # the four processes: [-], [CHAIN], [-], [CHAIN]
    c_block = blocks[0].replace("gdn [-]", "gdn [C=1]", 1)  # C times what the first setting timed
    six = "".join("== " + x for x in (blocks[0], blocks[1], c_block, blocks[2], blocks[3], c_block))
    rows = ab_summary.by_kind(ab_summary.parse(six.splitlines()))
    heads = [r for r in rows if r.startswith("# ")]
    assert heads[0].startswith("# gdn [RSSM_PDL_CHAIN=1] / gdn [-]") and heads[1].startswith("# gdn [C=1] / gdn [-]")
    c_rows = rows[rows.index(heads[1]) + 3:]
    assert len(c_rows) == 4 and all(r.endswith("| 1.000 | 1.000 | 1.000 |") for r in c_rows)
    # a process out of the cycle (A B C A B A): no table
    broken = AB_LOG.replace("== gdn [RSSM_PDL_CHAIN=1] bench --variants=-1,6 --tokens 1,4 --batch 2\nq35-4b B=2 L=16 T=1 "
                            "conventional v6: 4.00", "== gdn [RSSM_OTHER=1] bench x\nq35-4b B=2 L=16 T=1 conventional v6: 4.00")
    assert ab_summary.by_kind(ab_summary.parse(broken.splitlines())) == []
    single = AB_LOG.split("== gdn [RSSM_PDL_CHAIN=1]")[0]
    assert ab_summary.by_kind(ab_summary.parse(single.splitlines())) == []
    p = tmp_path / "ab.log"
    p.write_text(broken)
    assert ab_summary.main(["ab_summary.py", "--by-kind", str(p)]) == 1
    assert "cycling through two or more settings" in capsys.readouterr().out


def test_by_kind_says_when_no_case_was_timed():
    # a process that stopped before its first timing line (a bench error) leaves no case timed by every process
    log = AB_LOG.replace("q35-4b B=2 L=16 T=1 conventional v6: 5.00 us", "TypeError: boom", 1)
    log = "\n".join(x for x in log.splitlines() if not x.startswith(("q35-4b B=2 L=16 T=1 replay", "q35-122b",
                                                                   "q35-4b B=2 L=16 T=4"))) + "\n"
    rows = ab_summary.by_kind(ab_summary.parse(log.splitlines()))
    assert rows[3].startswith("| (no step case was timed by every process")


def test_silent_processes_are_named(tmp_path, capsys):
    log = LOG + "== gdn [RSSM_X=1] bench --variants 6\nTypeError: cannot unpack\nsm clock (busy): 1980 MHz median\n"
    cols = ab_summary.parse(log.splitlines())
    assert ab_summary.silent_processes(cols) == ["WARNING: process 4 [RSSM_X=1] printed no timing line"]
    p = tmp_path / "ab.log"
    p.write_text(log)
    assert ab_summary.main(["ab_summary.py", str(p)]) == 0
    assert "WARNING: process 4" in capsys.readouterr().out


def test_main_help_and_unknown_option(capsys):
    """--help prints the usage (it was read as a log path and stopped in FileNotFoundError, fifty-sixth session); an
    unknown option is refused with exit status 2 rather than opened as a file."""
    assert ab_summary.main(["ab_summary.py", "--help"]) == 0
    assert "--by-kind AB_OUTPUT.log" in capsys.readouterr().out
    assert ab_summary.main(["ab_summary.py", "--byk", "x.log"]) == 2
    assert "unknown option --byk" in capsys.readouterr().err
