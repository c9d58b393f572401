"""The `check` subcommand body (replayssm_trtllm.cli.check)."""
import argparse

import torch

from replayssm_trtllm.cli import check


def namespace(*argv):
    return check.add_arguments(argparse.ArgumentParser()).parse_args(list(argv))


def test_defaults_and_help():
    args = namespace()
    assert (args.steps, args.window, args.verify, args.seed, args.tolerance) == (200, 16, 4, 0, 1e-10)
    parser = check.add_arguments(argparse.ArgumentParser())
    text = parser.format_help()
    assert "Nemotron-3-Nano" in text and "Qwen3.5" in text and "--verify" in text


def test_check_passes_and_prints_table(capsys):
    rc = check.run(namespace("--steps", "24", "--window", "4", "--verify", "2", "--slots", "3", "--seed", "1"))
    out = capsys.readouterr().out
    assert rc == 0, out
    for fam in ("mamba2", "gdn"):
        for mode in ("standard", "speculative"):
            line = next(ln for ln in out.splitlines() if ln.startswith(fam) and f" {mode} " in ln)
            assert line.rstrip().endswith("ok")
    assert "out max rel" in out


def test_check_progress_lines(capsys):
    rc = check.run(namespace("--steps", "100", "--window", "2", "--verify", "1", "--slots", "1",
                             "--family", "gdn", "--mode", "standard"))
    out = capsys.readouterr().out
    assert rc == 0
    assert "[check] gdn/standard: step 100/100" in out


def test_check_fails_on_wrong_reference(monkeypatch, capsys):
    real = check.mamba2_decode_naive

    def noisy(*a, **k):
        y, s = real(*a, **k)
        return y * (1 + 1e-8), s
    monkeypatch.setattr(check, "mamba2_decode_naive", noisy)
    rc = check.run(namespace("--steps", "6", "--window", "3", "--verify", "2", "--slots", "2", "--family", "mamba2",
                             "--mode", "speculative", "--quiet"))
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL" in out


def test_check_rejects_bad_arguments(capsys):
    assert check.run(namespace("--window", "2", "--verify", "3")) == 2
    assert "1 <= verify <= window" in capsys.readouterr().err


def test_check_restores_threads():
    n = torch.get_num_threads()
    check.run(argparse.Namespace(steps=2, window=2, verify=1, slots=1, seed=0, family="gdn", mode="standard",
                                 tolerance=1e-10, quiet=True))
    assert torch.get_num_threads() == n
