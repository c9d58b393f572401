"""CPU tests for the pure-Python parts of replayssm_trtllm.bench.common."""
import json
import math

import pytest

from replayssm_trtllm.bench import common as C


# ---- targets ------------------------------------------------------------------------------
@pytest.mark.parametrize("value,goal,hib,met", [
    (2.0, 1.5, True, True), (1.5, 1.5, True, True), (1.4, 1.5, True, False),
    (10.0, 12.0, False, True), (12.0, 12.0, False, True), (12.5, 12.0, False, False),
    (None, 1.0, True, False), (float("nan"), 1.0, False, False),
], ids=["hib-above", "hib-equal", "hib-below", "lib-below", "lib-equal", "lib-above", "none", "nan"])
def test_make_target_met(value, goal, hib, met):
    t = C.make_target("speedup", value, goal, hib, case="B64-L16")
    assert set(t) == {"value", "goal", "met", "case"}
    assert t["met"] is met
    assert t["goal"] == goal and t["case"] == "B64-L16"


def test_target_record_as_dict_matches_make_target():
    t = C.Target("bw_frac", 0.8, 0.75, True, "B256")
    assert t.met and t.as_dict() == C.make_target("bw_frac", 0.8, 0.75, True, "B256")


# ---- rotation sizing ----------------------------------------------------------------------
def test_rotation_count_reaches_four_times_l2():
    l2 = C.H200_L2_BYTES
    for set_bytes in (1, 1000, 7 * 2**20, l2 // 3, l2, 5 * l2):
        k = C.rotation_count(set_bytes, l2)
        assert k * set_bytes >= 4 * l2
        assert k >= 2
        if k > 2:  # minimal: one set fewer would not reach 4 x L2
            assert (k - 1) * set_bytes < 4 * l2


def test_rotation_count_exact_and_limits():
    assert C.rotation_count(60 * 2**20, 60 * 2**20) == 4
    assert C.rotation_count(61 * 2**20, 60 * 2**20) == 4          # ceil(240 / 61) = 4
    assert C.rotation_count(2**30, 60 * 2**20) == 2               # min_count
    assert C.rotation_count(2**30, 60 * 2**20, min_count=1) == 1
    assert C.rotation_count(10, 100, factor=2) == 20
    with pytest.raises(ValueError, match="max_count"):
        C.rotation_count(2**20, 60 * 2**20, max_count=8)
    with pytest.raises(ValueError):
        C.rotation_count(0, 60 * 2**20)


def test_make_rotated_and_tensor_bytes():
    torch = pytest.importorskip("torch")
    made = []

    def make(i):
        made.append(i)
        return {"x": torch.empty(1000, dtype=torch.float32), "ids": (torch.empty(10, dtype=torch.int64),)}

    sets = C.make_rotated(make, l2_bytes=10_000)
    assert C.tensor_bytes(sets[0]) == 4080
    assert len(sets) == math.ceil(4 * 10_000 / 4080) == 10
    assert made == list(range(10))
    assert C.tensor_bytes(sets) == 10 * 4080
    shared = torch.empty(5, dtype=torch.float64)
    assert C.tensor_bytes([shared, shared, {"a": shared}]) == 40   # counted once


# ---- timing summaries -----------------------------------------------------------------------
def test_summarize_times_percentiles():
    s = C.summarize_times([5.0, 1.0, 3.0, 2.0, 4.0])
    assert s["median_us"] == 3.0 and s["reps"] == 5
    assert s["p10_us"] == pytest.approx(1.4) and s["p90_us"] == pytest.approx(4.6)
    assert C.summarize_times([7.0]) == {"median_us": 7.0, "p10_us": 7.0, "p90_us": 7.0, "reps": 1}
    with pytest.raises(ValueError):
        C.summarize_times([])


# ---- tables --------------------------------------------------------------------------------
def test_format_table_alignment_and_missing_cells():
    rows = [{"impl": "flashinfer", "B": 4, "median_us": 12.3456, "ok": True},
            {"impl": "ours", "B": 128, "median_us": 1234.5, "speedup": 0.0123}]
    text = C.format_table(rows, ["impl", "B", "median_us", "speedup", "ok"])
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0].split() == ["impl", "B", "median_us", "speedup", "ok"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert "12.346" in lines[2] and "1234.5" in lines[3] and "0.0123" in lines[3]
    assert lines[2].split()[-2] == "-" and lines[2].split()[-1] == "yes"
    assert lines[3].split()[-1] == "-"
    # numeric columns right-aligned: the B column ends at the same offset on every row
    ends = {ln.index(tok) + len(tok) for ln, tok in zip(lines[2:], ["4", "128"])}
    assert len(ends) == 1


def test_format_table_default_columns_first_seen_order():
    text = C.format_table([{"a": 1}, {"b": 2.5, "a": 3}])
    assert text.splitlines()[0].split() == ["a", "b"]
    assert C.format_table([]) == ""


def test_markdown_table():
    md = C.markdown_table([{"x": 1, "y": "a|b"}], ["x", "y"])
    assert md.splitlines() == ["| x | y |", "|---|---|", "| 1 | a\\|b |"]


def test_slugify():
    assert C.slugify("NVIDIA H200") == "nvidia-h200"
    assert C.slugify("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert C.slugify("  ") == "unknown"


# ---- results files --------------------------------------------------------------------------
def test_write_results(tmp_path):
    md = tmp_path / "benchmarks.md"
    md.write_text("# Benchmarks\n\nintro\n")
    rows = [{"impl": "ours", "B": 4, "median_us": 10.5}, {"impl": "flashinfer", "B": 4, "median_us": 21.0}]
    targets = {"speedup_B4": C.make_target("speedup_B4", 2.0, 1.5, True, "B4")}
    jp, lp = C.write_results("mamba2", rows, targets, "python -m bench.mamba2 --B 4",
                             extra={"bw_GBps": 4300.0}, results_dir=tmp_path / "results",
                             benchmarks_md=md, gpu="NVIDIA H200", date="2026-11-30")
    assert jp == tmp_path / "results" / "2026-11-30-nvidia-h200-mamba2.json"
    assert lp == tmp_path / "results" / "latest-mamba2.json"
    data = json.loads(jp.read_text())
    assert json.loads(lp.read_text()) == data
    for key in ("rows", "targets", "gpu", "date", "command", "git_commit"):
        assert key in data
    assert data["rows"] == rows and data["gpu"] == "NVIDIA H200" and data["date"] == "2026-11-30"
    assert data["targets"]["speedup_B4"] == {"value": 2.0, "goal": 1.5, "met": True, "case": "B4"}
    assert data["extra"] == {"bw_GBps": 4300.0}
    assert data["git_commit"] == "unknown" or len(data["git_commit"]) >= 7
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nintro\n\n## mamba2: 2026-11-30, NVIDIA H200")
    assert "python -m bench.mamba2 --B 4" in text
    assert "| impl | B | median_us |" in text and "| flashinfer | 4 | 21.000 |" in text
    assert "| speedup_B4 | 2.000 | 1.500 | yes | B4 |" in text
    # a second run appends, and target lists of Target records are accepted
    C.write_results("mamba2", rows[:1], [C.Target("t", 1.0, 2.0, False, "c")], "cmd2",
                    results_dir=tmp_path / "results", benchmarks_md=md, gpu="NVIDIA H200",
                    date="2026-11-30")
    assert md.read_text().count("## mamba2:") == 2
    assert json.loads(lp.read_text())["targets"] == {"t": {"value": 1.0, "goal": 2.0, "met": True, "case": "c"}}


def test_write_results_rejects_bad_family(tmp_path):
    with pytest.raises(ValueError, match="family"):
        C.write_results("../x", [], {}, "cmd", results_dir=tmp_path, benchmarks_md=tmp_path / "b.md")


def test_git_commit_unknown_outside_a_repo(tmp_path):
    assert C.git_commit(tmp_path) == "unknown"


def test_gpu_helpers_refuse_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    with pytest.raises(RuntimeError, match="CUDA"):
        C.measure_copy_bandwidth(1 << 20)
    with pytest.raises(RuntimeError, match="CUDA"):
        C.time_graph([lambda: None])
    assert C.l2_cache_bytes() == C.H200_L2_BYTES
    assert C.gpu_name() == "cpu"


def test_command_line_has_no_machine_paths():
    from replayssm_trtllm.bench.common import command_line
    assert command_line(["/x/y/replayssm_trtllm/__main__.py", "bench", "gdn", "--quick"], env={}) == \
        "replayssm-trtllm bench gdn --quick"
    assert command_line(["replayssm-trtllm"], env={}) == "replayssm-trtllm"


def test_command_line_records_kernel_switches():
    """A/B switches in the environment are part of the recorded command (sorted); where the library or the commit
    come from, and other variables, are not."""
    from replayssm_trtllm.bench.common import command_line, kernel_switches
    env = {"RSSM_GDN_SPLIT_EARLY": "1", "RSSM_GDN_PREP_LEAN": "0", "RSSM_GIT_COMMIT": "abc", "HOME": "/root",
           "RSSM_KERNEL_LIB": "/x/lib.so"}
    assert kernel_switches(env) == "RSSM_GDN_PREP_LEAN=0 RSSM_GDN_SPLIT_EARLY=1"
    assert command_line(["replayssm-trtllm", "bench", "gdn"], env=env) == \
        "RSSM_GDN_PREP_LEAN=0 RSSM_GDN_SPLIT_EARLY=1 replayssm-trtllm bench gdn"


def test_target_value_text_shows_the_digit_that_decides_met():
    from replayssm_trtllm.bench.common import target_value_text
    # 1.7497 against >= 1.75: "1.750 missed" would read as a contradiction
    assert target_value_text(1.7497, 1.75, False) == "1.7497"
    assert target_value_text(1.7497, ">= 1.75", False) == "1.7497"
    assert target_value_text(1.75003, ">= 1.75", True) == "1.750"  # already on the goal's side
    assert target_value_text(0.65004, "<= 0.65", False) == "0.65004"
    assert target_value_text(0.6496, 0.65, True) == "0.650"  # 0.650 <= 0.65 holds: met reads right
    assert target_value_text(1.698, 1.75, False) == "1.698"
    assert target_value_text(1.75, 1.75, True) == "1.750"
    assert target_value_text(float("nan"), 1.75, False) == "nan"
    assert target_value_text(None, 1.75, False) == "None"
    assert target_value_text(1.25, "about 1", False) == "1.250"  # an unparsable goal: the plain three decimals
