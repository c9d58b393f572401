import re
import subprocess
import sys

import pytest

from replayssm_trtllm.cli import main


def test_traffic_super_prints_paper_ratio(capsys):
    assert main(["traffic", "--model", "nemotron-3-super-120b"]) == 0
    out = capsys.readouterr().out
    assert "M_replay/M_conv = 0.581" in out
    assert "L* = sqrt(2a(M_S/r - T)) = 12.9" in out


def test_traffic_speculative(capsys):
    assert main(["traffic", "--model", "qwen3.5-122b", "-T", "4", "-a", "3.5", "--shared-keys"]) == 0
    assert "recommended window" in capsys.readouterr().out


def test_traffic_per_step_table_matches_the_benchmarks_model(capsys):
    """The per-step section (thirty-seventh session) uses the benchmarks' byte model on the preset's layer: Qwen3.5-4B
    is bench gdn's q35-4b (T = 4 all-accepted 0.686 of a conventional step at equal efficiency, per-draft 3.66x), and
    Nemotron-3-Super's standard step is the issue's 1.81x traffic ideal; the Mamba-2 per-step io matches bench
    mamba2's."""
    from replayssm_trtllm.bench import gdn as bg
    from replayssm_trtllm.bench import mamba2 as bm
    from replayssm_trtllm.cli.traffic import io_bytes_per_token
    from replayssm_trtllm.presets import get_preset
    assert io_bytes_per_token(get_preset("nemotron-3-super-120b")) == bm._io_bytes(bm.SHAPES["super"], 2)
    assert io_bytes_per_token(get_preset("nemotron-3-nano-4b")) == bm._io_bytes(bm.SHAPES["nano"], 2)
    assert io_bytes_per_token(get_preset("qwen3.5-4b")) == bg._io_bytes(bg.SHAPES["q35-4b"], 2)
    assert main(["traffic", "--model", "qwen3.5-4b", "-T", "4"]) == 0
    out = capsys.readouterr().out
    assert "replay verify, all-accepted   : 0.686 (per-draft / replay 3.66x), flushing rows 0.250" in out
    assert "one-accepted" in out and "mixed-accepted" in out
    assert main(["traffic", "--model", "nemotron-3-super-120b"]) == 0
    assert "standard replay step (window-amortized): 0.553 (speedup 1.807x)" in capsys.readouterr().out


def test_traffic_rejects_bad_acceptance():
    with pytest.raises(SystemExit, match="1 <= a <= T"):
        main(["traffic", "--model", "qwen3.5-4b", "-T", "2", "-a", "3"])


def test_console_module_runs():
    r = subprocess.run([sys.executable, "-m", "replayssm_trtllm", "traffic", "--model", "nemotron-3-nano-4b"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "nemotron-3-nano-4b" in r.stdout


def test_unknown_subcommand_fails():
    with pytest.raises(SystemExit):
        main(["frobnicate"])


def _kernel_library_or_skip():
    from replayssm_trtllm.ops._lib import KernelLibraryError, load_library
    try:
        load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")


def test_kernels_prints_the_automatic_choice(capsys):
    """`replayssm-trtllm kernels`: the automatic design per batch and tokens per step, from the library's host queries
    (no GPU): WIR for small-batch GDN standard steps, the split kernels where the per-T rule holds, with the workspace
    the op would allocate; Mamba-2's stream kernel for the B = 1 verify step."""
    _kernel_library_or_skip()
    from replayssm_trtllm.cli.kernels import gdn_choice
    from replayssm_trtllm.presets import get_preset
    assert main(["kernels", "--model", "qwen3.5-4b", "--batch", "1,8,16", "--tokens", "1,4,8"]) == 0
    rows = {tuple(line.split()[:2]): line for line in capsys.readouterr().out.splitlines()
            if line.strip()[:1].isdigit()}
    assert len(rows) == 9
    assert "warp-item step (WIR)" in rows[("1", "1")] and rows[("1", "1")].split()[3] == "5"
    assert rows[("8", "4")].split()[3] == "4" and rows[("8", "4")].endswith(" 0 B")   # 256 < 512 at T = 4
    assert rows[("16", "4")].split()[3] == "6" and "split kernels" in rows[("16", "4")]
    v, name, ws = gdn_choice(get_preset("qwen3.5-4b"), 16, 4, 16, 0, 2)
    assert (v, ws > 0) == (6, True) and f"{ws} B" in rows[("16", "4")]
    assert rows[("8", "8")].split()[3] == "6"                                          # 256 at T = 8
    assert main(["kernels", "--model", "nemotron-3-nano-4b", "--batch", "1,2", "--tokens", "1,4"]) == 0
    rows = {tuple(line.split()[:2]): line.split()[3] for line in capsys.readouterr().out.splitlines()
            if line.strip()[:1].isdigit()}
    assert rows == {("1", "1"): "4", ("1", "4"): "3", ("2", "1"): "4", ("2", "4"): "4"}


def test_kernels_notes_steps_past_the_split_kernels_record_limit(capsys):
    """At L = 32 the verify steps (L + T > 32 records) cannot take the split kernels: the table shows the stream
    kernel at every batch and a note below says why and which window keeps them on the split kernels; at L = 16 there
    is no note."""
    _kernel_library_or_skip()
    assert main(["kernels", "--model", "qwen3.5-4b", "--batch", "1,256", "--tokens", "1,4", "--window", "32"]) == 0
    out = capsys.readouterr().out
    rows = {tuple(line.split()[:2]): line for line in out.splitlines() if line.strip()[:1].isdigit()}
    assert rows[("256", "4")].split()[3] == "4" and rows[("256", "1")].split()[3] == "6"
    assert ("note: at L = 32 the steps with T = 4 replay more than 32 records (standard: L; verify: L + T), past what "
            "the split kernels take") in out and "L <= 28 keeps them on the split kernels." in out
    assert main(["kernels", "--model", "qwen3.5-4b", "--batch", "256", "--tokens", "1,4,8", "--window", "16"]) == 0
    assert "note:" not in capsys.readouterr().out


def test_kernels_read_copy_prints_the_dual_precision_path(capsys, monkeypatch):
    """`replayssm-trtllm kernels --read-copy FMT`: the dual-precision decode's read path per batch and tokens per step
    (rssm_dual_precision_decode_path with the workspace the torch ops allocate): on qwen3.5-122b (64 value heads) an
    NVFP4 read copy takes the split kernels from B = 1 at T = 1 and from B x HV = 256 (B = 4) at T = 2, the tile
    kernel below; an fp16 one the stream kernel below B x HV = 1024; Mamba-2 Super with FP8 the split kernels at B = 1
    for standard steps, the tile kernel for a T = 4 verify below B x H = 768 (B = 6); Nano (head dim 80) from 384
    (B = 4)."""
    _kernel_library_or_skip()
    monkeypatch.delenv("RSSM_DP_DECODE_PATH", raising=False)

    def rows(argv):
        assert main(["kernels"] + argv) == 0
        return {tuple(line.split()[:2]): line for line in capsys.readouterr().out.splitlines()
                if line.strip()[:1].isdigit()}
    r = rows(["--model", "qwen3.5-122b", "--batch", "1,3,4,15,16", "--tokens", "1,2", "--read-copy", "nvfp4"])
    assert [r[(b, "1")].split()[3] for b in ("1", "3", "4", "15", "16")] == ["split"] * 5
    assert [r[(b, "2")].split()[3] for b in ("1", "3", "4", "15", "16")] == ["tile", "tile", "split", "split", "split"]
    assert r[("1", "2")].endswith(" 0 B") and not r[("4", "2")].endswith(" 0 B")
    r = rows(["--model", "qwen3.5-122b", "--batch", "15,16", "--tokens", "1", "--read-copy", "fp16"])
    assert (r[("15", "1")].split()[3], r[("16", "1")].split()[3]) == ("stream", "split")
    r = rows(["--model", "nemotron-3-super-120b", "--batch", "1,5,6", "--tokens", "1,4", "--read-copy", "fp8_e4m3"])
    assert [r[k].split()[3] for k in (("1", "1"), ("1", "4"), ("5", "4"), ("6", "4"))] == ["split", "tile", "tile",
                                                                                           "split"]
    r = rows(["--model", "nemotron-3-nano-4b", "--batch", "3,4", "--tokens", "4", "--read-copy", "fp8_e4m3"])
    assert (r[("3", "4")].split()[3], r[("4", "4")].split()[3]) == ("tile", "split")


def test_kernels_tp_shows_one_rank(capsys):
    """--tp N: the designs of one rank, which holds 1/N of the heads: qwen3.5-122b's B = 64 standard step is
    B x HV = 4096 whole (split kernels) but 512 on a rank of TP 8, below the split rule's 768 (stream kernel 4)."""
    _kernel_library_or_skip()
    assert main(["kernels", "--model", "qwen3.5-122b", "--batch", "64,128", "--tokens", "1"]) == 0
    out = capsys.readouterr().out
    whole = {line.split()[0]: line.split()[3] for line in out.splitlines() if line.strip()[:1].isdigit()}
    assert main(["kernels", "--model", "qwen3.5-122b", "--batch", "64,128", "--tokens", "1", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    rank = {line.split()[0]: line.split()[3] for line in out.splitlines() if line.strip()[:1].isdigit()}
    assert "one rank of TP 8: gdn, 8 heads x head_dim 128 x state 128, 2 key heads" in out
    assert whole == {"64": "6", "128": "6"} and rank == {"64": "4", "128": "6"}


def test_kernels_tp_that_does_not_divide_is_refused():
    with pytest.raises(SystemExit, match=re.escape("--tp 3: nemotron-3-super-120b: cannot split over 3 ranks: "
                                                   "mamba_num_heads=128 is not divisible by tp_size=3")):
        main(["kernels", "--model", "nemotron-3-super-120b", "--tp", "3"])
    with pytest.raises(SystemExit, match="n_groups=8 is not divisible by tp_size=16"):
        main(["kernels", "--model", "nemotron-3-super-120b", "--tp", "16"])


def test_kernels_refuses_bad_arguments():
    for argv, msg in ((["--batch", "0"], "--batch must be integers >= 1"),
                      (["--batch", "a,b"], "--batch must be comma-separated integers"),
                      (["--tokens", "9"], "--tokens at most 8"),
                      (["--window", "65"], "--window must be in [1, 64]")):
        with pytest.raises(SystemExit, match=re.escape(msg)):
            main(["kernels", "--model", "qwen3.5-4b"] + argv)


def test_bench_variants_list_led_by_a_negative_entry_parses():
    # `--variants -1,6` (-1: the library's automatic choice) used to stop in argparse with "expected one argument"
    import argparse
    from replayssm_trtllm.bench import gdn as bench_gdn
    from replayssm_trtllm.cli import join_negative_lists
    argv = join_negative_lists(["--variants", "-1,6", "--batch", "2", "--window", "-3"])
    assert argv == ["--variants=-1,6", "--batch", "2", "--window=-3"]
    assert join_negative_lists(["--variants=-1", "-x", "--batch", "1,2"]) == ["--variants=-1", "-x", "--batch", "1,2"]
    assert join_negative_lists(["--quick", "--variants", "-"]) == ["--quick", "--variants", "-"]
    p = argparse.ArgumentParser()
    bench_gdn.add_arguments(p)
    assert p.parse_args(argv[:3]).variants == "-1,6"
