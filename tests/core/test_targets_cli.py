"""`replayssm-trtllm targets`: reading the benchmarks' recorded targets (no GPU)."""
import json
import subprocess
from pathlib import Path

import pytest

from replayssm_trtllm.cli import main
from replayssm_trtllm.cli.targets import TargetsError, load_result, rows_from_result

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def _result(targets, **extra):
    return {"family": "gdn", "targets": targets, "gpu": "TEST GPU", "date": "2026-12-07", "command": "bench x",
            "git_commit": "abc1234", **extra}


def test_goal_direction_from_string_and_from_met_flag():
    rows = {r.name: r for r in rows_from_result(_result({
        "a": {"value": 0.7, "goal": "<= 0.65", "met": False},
        "b": {"value": 1.8, "goal": ">= 1.75", "met": True},
        "c": {"value": 0.93, "goal": 0.7, "met": False},     # bare number: lower is better (missed while above)
        "d": {"value": 1.69, "goal": 1.75, "met": False},    # bare number: higher is better (missed while below)
        "e": {"value": 1.0, "goal": 1.0, "met": True},
    }), "gdn")}
    assert (rows["a"].goal, rows["a"].direction) == (0.65, "<=")
    assert (rows["b"].goal, rows["b"].direction) == (1.75, ">=")
    assert rows["c"].direction == "<=" and rows["d"].direction == ">=" and rows["e"].direction == "="


def test_needed_and_conventional_fractions_follow_the_recorded_bound():
    # A verify step at 0.93 of a conventional step while moving its bytes at 66.9% of copy; at the conventional
    # kernel's efficiency it would be 0.685. So the conventional kernel runs at 0.93 * 0.669 / 0.685 of copy, and the
    # goal 0.70 needs 0.669 * 0.93 / 0.70 of copy.
    (r,) = rows_from_result(_result({"v": {"value": 0.93, "goal": 0.7, "met": False, "copy_frac": 0.669,
                                           "ratio_at_equal_efficiency": 0.685}}), "gdn")
    assert r.conventional_frac == pytest.approx(0.93 * 0.669 / 0.685)
    assert r.needed_frac == pytest.approx(0.669 * 0.93 / 0.70)
    assert r.at_equal_efficiency == 0.685 and r.beyond_equal_efficiency is False
    (r,) = rows_from_result(_result({"v": {"value": 0.747, "goal": "<= 0.65", "met": False, "copy_frac": 0.82,
                                           "ratio_at_equal_efficiency": 0.678}}), "mamba2")
    assert r.beyond_equal_efficiency is True and r.needed_frac > r.conventional_frac
    (r,) = rows_from_result(_result({"p": {"value": 2.85, "goal": 4.0, "met": False,
                                           "value_at_equal_efficiency": 3.66}}), "gdn")
    assert r.direction == ">=" and r.beyond_equal_efficiency is True and r.needed_frac is None
    (r,) = rows_from_result(_result({"s": {"value": 1.8, "goal": 1.75, "met": True}}), "gdn")
    assert r.beyond_equal_efficiency is None


def test_missing_values_are_listed_as_not_run(capsys, tmp_path):
    """The benchmarks record a case that did not run as None / NaN, never met (bench/common.py Target)."""
    rows = {r.name: r for r in rows_from_result(_result({
        "none": {"value": None, "goal": 0.7, "met": False, "copy_frac": 0.6, "ratio_at_equal_efficiency": 0.68},
        "nan": {"value": float("nan"), "goal": ">= 4", "met": False, "value_at_equal_efficiency": 3.7},
    }), "gdn")}
    assert rows["none"].value is None and rows["none"].direction == "?" and rows["none"].needed_frac is None
    assert rows["none"].beyond_equal_efficiency is None
    assert rows["nan"].value is None and rows["nan"].direction == ">=" and rows["nan"].beyond_equal_efficiency is None
    f = tmp_path / "r.json"
    f.write_text(json.dumps(_result({"none": {"value": None, "goal": 0.7, "met": False}})))
    assert main(["targets", str(f)]) == 0
    assert "| none | not run | ? 0.7 | **missed** |" in capsys.readouterr().out


@pytest.mark.parametrize("targets, message", [
    ({}, "non-empty 'targets'"),
    ({"x": 3}, "expected an object"),
    ({"x": {"value": 1.0, "met": True}}, "missing goal"),
    ({"x": {"value": 1.0, "goal": "about 2", "met": True}}, "goal must be a number"),
    ({"x": {"value": "fast", "goal": 2, "met": True}}, "value must be a number"),
    ({"x": {"value": 1.0, "goal": 2, "met": "yes"}}, "met must be true or false"),
    ({"x": {"value": None, "goal": 2, "met": True}}, "met is true but the value is missing"),
    ({"x": {"value": 1.0, "goal": 2, "met": False, "copy_frac": "high"}}, "copy_frac must be a number"),
])
def test_bad_results_name_the_target_and_what_was_wrong(targets, message):
    with pytest.raises(TargetsError, match=message) as e:
        rows_from_result(_result(targets), "gdn", source="r.json")
    assert "r.json" in str(e.value)


def test_missing_or_malformed_file(tmp_path):
    with pytest.raises(TargetsError, match="no such results file"):
        load_result(tmp_path / "latest-gdn.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TargetsError, match="not JSON"):
        load_result(bad)
    with pytest.raises(SystemExit, match="bad.json: not JSON"):
        main(["targets", str(bad)])


@pytest.mark.parametrize("family", ["mamba2", "gdn", "precision"])
def test_committed_results_every_target_listed(family):
    """The committed official results: one row per recorded target, met flags as recorded, and for each verify
    target the implied conventional efficiency agrees with the run's own conventional-kernel record (the bound is
    computed from the bytes, so this checks the arithmetic end to end)."""
    path = RESULTS / f"latest-{family}.json"
    result = load_result(path)
    rows = rows_from_result(result, family, source=str(path))
    assert [r.name for r in rows] == list(result["targets"])
    assert [r.met for r in rows] == [t["met"] for t in result["targets"].values()]
    conv = {k: v["value"] for k, v in result["targets"].items() if "conv" in k and "copy" in k}
    for r in rows:
        if r.conventional_frac is None:
            continue
        shape = next(s for s in ("super", "nano", "q35-4b", "q35-122b") if s in r.name)
        (recorded,) = [v for k, v in conv.items() if shape in k]
        assert r.conventional_frac == pytest.approx(recorded, abs=0.01), r.name


def test_cli_prints_missed_table(capsys):
    assert main(["targets", "--missed", str(RESULTS / "latest-gdn.json")]) == 0
    out = capsys.readouterr().out
    assert "gdn:" in out and " of 14 met" in out
    table = [line for line in out.splitlines() if line.startswith("| ") and "target" not in line]
    assert table and all("**missed**" in line for line in table)


def test_cli_summary_is_one_line_per_file(capsys):
    files = [str(RESULTS / f"latest-{fam}.json") for fam in ("mamba2", "gdn")]
    assert main(["targets", "--summary", *files]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("mamba2: ") and lines[1].startswith("gdn: ")
    assert all(" met (" in line for line in lines)


def test_cli_prints_synthetic_result(tmp_path, capsys):
    f = tmp_path / "latest-gdn.json"
    f.write_text(json.dumps(_result({"v": {"value": 0.93, "goal": 0.7, "met": False, "copy_frac": 0.669,
                                           "ratio_at_equal_efficiency": 0.685},
                                     "s": {"value": 1.8, "goal": 1.75, "met": True}})))
    assert main(["targets", str(f)]) == 0
    out = capsys.readouterr().out
    assert "gdn: 1 of 2 met (TEST GPU, commit abc1234" in out
    assert "| v | 0.930 | <= 0.7 | **missed** | 66.9% | 88.9% | 90.8% | 0.685 | no |" in out
    assert "| s | 1.800 | >= 1.75 | met |" in out


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True,
                   capture_output=True)


def test_kernel_sources_note_compares_the_record_commit_with_head(tmp_path):
    """The note says whether cpp_plugins/kernels changed between a record's commit and HEAD (naming the files), that
    a commit the checkout lacks is unknown, that a "+dirty" record timed changes on top of its commit, and nothing
    outside a checkout or for a value that is not a commit hash."""
    from replayssm_trtllm.cli.targets import kernel_sources_note
    repo = tmp_path / "repo"
    (repo / "cpp_plugins" / "kernels" / "gdn").mkdir(parents=True)
    src = repo / "cpp_plugins" / "kernels" / "gdn" / "step.cu"
    src.write_text("// v1\n")
    (repo / "README.md").write_text("x\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    first = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    (repo / "README.md").write_text("y\n")                  # not a kernel source
    _git(repo, "commit", "-q", "-am", "docs")
    docs_only = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    assert kernel_sources_note(first, repo) == f"kernel sources (cpp_plugins/kernels) unchanged from {first} to HEAD"
    src.write_text("// v2\n")
    _git(repo, "commit", "-q", "-am", "kernel")
    assert kernel_sources_note(first, repo) == (
        f"kernel sources (cpp_plugins/kernels) changed from {first} to HEAD in 1 file(s): gdn/step.cu")
    assert kernel_sources_note(docs_only[:9] + "+dirty", repo).endswith(
        f"(the record says {docs_only[:9]}+dirty: changes on top of it)")
    assert kernel_sources_note("deadbeef", repo) == (
        "kernel sources since deadbeef: unknown (this checkout does not hold that commit)")
    for not_a_commit in (None, "", "abc", "main", 1234567):
        assert kernel_sources_note(not_a_commit, repo) == ""
    outside = tmp_path / "plain"
    outside.mkdir()
    assert kernel_sources_note(first, outside) == ""


def test_summary_says_when_a_run_stopped_before_its_end(tmp_path, capsys):
    """The benches write their JSON after every (shape, B, L) block; a file from a run cut short by a time limit
    (complete false) must not read as a finished record."""
    partial = _result({"s": {"value": 1.8, "goal": 1.75, "met": True}})
    partial["complete"] = False
    f = tmp_path / "latest-gdn.json"
    f.write_text(json.dumps(partial))
    assert main(["targets", "--summary", str(f)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("gdn: 1 of 1 met (") and "INCOMPLETE" in line
    partial["complete"] = True
    f.write_text(json.dumps(partial))
    assert main(["targets", "--summary", str(f)]) == 0
    assert "INCOMPLETE" not in capsys.readouterr().out


def test_table_prints_the_digit_that_decides_a_missed_target(tmp_path, capsys):
    """1.7497 against >= 1.75 (the sixty-sixth session's q35-122b in-phase figure) shows as 1.7497, not 1.750."""
    f = tmp_path / "latest-gdn.json"
    f.write_text(json.dumps(_result({"s": {"value": 1.74972, "goal": ">= 1.75", "met": False},
                                     "t": {"value": 1.698, "goal": ">= 1.75", "met": False}})))
    assert main(["targets", "--missed", str(f)]) == 0
    out = capsys.readouterr().out
    assert "| s | 1.7497 | >= 1.75 | **missed** |" in out
    assert "| t | 1.698 | >= 1.75 | **missed** |" in out


def test_settle_note_says_how_the_run_waited():
    """Seventieth session: the records say whether their timed groups waited for the bandwidth to recover after
    large allocations and frees (the benches' `settle`; the precision bench's under `extra`)."""
    from replayssm_trtllm.cli.targets import settle_note
    assert "not recorded" in settle_note({"gpu": "H200"})
    assert settle_note({"settle": {"max_seconds": 0, "waits": 0}}) == "timing settle: off (--settle-seconds 0)"
    assert settle_note({"settle": {"max_seconds": 3.0, "waits": 12, "reported": []}}) == \
        "timing settle: 12 waits, 0 over 50 ms"
    st = {"max_seconds": 3.0, "fraction": 0.97, "waits": 9, "reported": [
        {"what": "q35-4b B=256 L=16 T=4: pools", "waited_s": 0.42, "settled": True},
        {"what": "q35-122b B=256 L=16: block", "waited_s": 3.01, "settled": False}]}
    text = settle_note({"extra": {"settle": st}})
    assert text.startswith("timing settle: 9 waits, 2 over 50 ms (longest 3.01 s before 'q35-122b B=256 L=16: block')")
    assert "1 timed without the probe back at 97% of its best" in text


def test_cli_prints_the_settle_note(tmp_path, capsys):
    tg = {"x_speedup": {"value": 1.8, "goal": 1.75, "met": True, "case": "c"}}
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_result(tg)))
    new.write_text(json.dumps(_result(tg, settle={"max_seconds": 3.0, "waits": 4, "reported": []})))
    assert main(["targets", str(old), str(new)]) == 0
    out = capsys.readouterr().out.split(f"## {new}")
    assert "timing settle: not recorded" in out[0] and "timing settle: 4 waits, 0 over 50 ms" in out[1]
