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
