"""CPU test of the benches' publishing step (dated JSON + a section appended to docs/benchmarks.md)."""
import json

from replayssm_trtllm.bench.common import publish_official_run


def test_publish_official_run_writes_dated_json_and_appends_tables(tmp_path):
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True)
    latest = res / "latest-mamba2.json"
    latest.write_text(json.dumps({"targets": {}, "x": 1}))
    md = tmp_path / "benchmarks.md"
    md.write_text("# Benchmarks\n")
    rows = [dict(shape="super", B=256, L=16, T=1, kernel="replay standard staggered", us_per_step=336.5, variant=4)]
    targets = {"standard_super": dict(value=1.66, goal=1.75, met=False, case="super B=256 L=16")}
    dated = publish_official_run("mamba2", latest, str(latest), rows, targets, "replayssm-trtllm bench mamba2",
                                 "NVIDIA H200", benchmarks_md=md, date="2026-11-30")
    assert dated == res / "2026-11-30-nvidia-h200-mamba2.json"
    assert json.loads(dated.read_text()) == {"targets": {}, "x": 1}
    text = md.read_text()
    assert text.startswith("# Benchmarks\n")
    assert "## mamba2 (appended by the bench): 2026-11-30, NVIDIA H200" in text
    assert "| super | 256 | 16 | 1 | replay standard staggered |" in text and "| 4 |" in text
    assert "| standard_super | 1.660 | 1.750 | no | super B=256 L=16 |" in text


def test_published_targets_carry_the_bandwidth_columns_where_present(tmp_path):
    """Verify targets with the step-traffic fields get columns for them ("-" where a target has none)."""
    latest = tmp_path / "latest-gdn.json"
    latest.write_text("{}")
    md = tmp_path / "benchmarks.md"
    targets = {"verify": dict(value=0.955, goal=0.7, met=False, copy_frac=0.652, ratio_at_equal_efficiency=0.685,
                              case="q35-4b"),
               "perdraft": dict(value=2.8, goal=4.0, met=False, value_at_equal_efficiency=3.66, case="q35-4b"),
               "conv": dict(value=0.909, goal=0.9, met=True, case="q35-4b")}
    publish_official_run("gdn", latest, str(latest), [], targets, "cmd", "NVIDIA H200", benchmarks_md=md,
                         date="2026-12-04")
    text = md.read_text()
    assert "| target | value | goal | met | copy_frac | ratio_at_equal_efficiency | value_at_equal_efficiency | case |" \
        in text
    assert "| verify | 0.955 | 0.7 | no | 0.652 | 0.685 | - | q35-4b |" in text
    assert "| conv | 0.909 | 0.9 | yes | - | - | - | q35-4b |" in text


def test_publish_official_run_skips_other_outputs(tmp_path):
    """A/B runs (--out elsewhere) publish nothing."""
    out = tmp_path / "ab.json"
    out.write_text("{}")
    md = tmp_path / "benchmarks.md"
    assert publish_official_run("gdn", out, "bench/results/latest-gdn.json", [], {}, "cmd", "NVIDIA H200",
                                benchmarks_md=md) is None
    assert not md.exists()


def test_published_target_on_its_goal_keeps_the_deciding_digit(tmp_path):
    """1.7497 against 1.75 is written 1.7497 (not "1.750 | 1.750 | no"); other values keep the usual format."""
    latest = tmp_path / "latest-gdn.json"
    latest.write_text("{}")
    md = tmp_path / "benchmarks.md"
    targets = {"inphase": dict(value=1.74972, goal=1.75, met=False, case="q35-122b"),
               "staggered": dict(value=1.802, goal=1.75, met=True, case="q35-122b"),
               "conv": dict(value=0.9025, goal=0.9, met=True, case="q35-4b")}
    publish_official_run("gdn", latest, str(latest), [], targets, "cmd", "NVIDIA H200", benchmarks_md=md,
                         date="2026-12-07")
    text = md.read_text()
    assert "| inphase | 1.7497 | 1.750 | no | q35-122b |" in text
    assert "| staggered | 1.802 | 1.750 | yes | q35-122b |" in text
    assert "| conv | 0.9025 | 0.9 | yes | q35-4b |" in text
