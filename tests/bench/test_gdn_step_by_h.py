"""scripts/gdn_step_by_h.py (GDN standard step at fixed cursors): its argument checks, which run before any GPU work
(CPU). The timing itself needs a GPU and is not a test (a diagnostic; docs/kernels-gdn.md "Forty-sixth session")."""
from __future__ import annotations

import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gdn_step_by_h.py"
_spec = importlib.util.spec_from_file_location("gdn_step_by_h", _PATH)
gdn_step_by_h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gdn_step_by_h)


@pytest.mark.parametrize("argv,needle", [
    (["--h", "0,16"], "--h values [16] outside 0 .. window - 1 (15)"),  # h = L: skipped rows, not a step
    (["--h", "-1", "--window", "8"], "--h values [-1] outside 0 .. window - 1 (7)"),
    (["--h", "1,x"], "expected a comma list of integers"),
    (["--h", ","], "outside 0 .. window - 1"),
    (["--shape", "q35-9b"], "--shape 'q35-9b': expected one of ['q35-122b', 'q35-4b']"),
    (["--batch", "0"], "expected positive values"),
])
def test_bad_arguments_are_refused_before_any_gpu_work(argv, needle, capsys):
    assert gdn_step_by_h.main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err, err


def test_valid_arguments_reach_the_gpu_check(capsys):
    """Valid arguments pass the checks; without a GPU the script then says it needs one (rc 2), with a GPU it would
    time the steps (not run here)."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would time the steps")
    assert gdn_step_by_h.main(["--h", "0,8,15"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize("B,L", [(256, 16), (37, 8), (5, 16)])
@pytest.mark.parametrize("pattern", gdn_step_by_h.MIX_PATTERNS)
def test_mixed_patterns_hold_the_same_history_lengths(pattern, B, L):
    """Every --mix pattern holds the values of `mod` (b mod L), so the staggered batches do the same work and move the
    same bytes; `mod` is the bench's staggered batch itself and `blocks` keeps rows of one h contiguous."""
    h = gdn_step_by_h.mixed_cursors(pattern, B, L)
    mod = [b % L for b in range(B)]
    assert len(h) == B and sorted(h) == sorted(mod)
    if pattern == "mod":
        assert h == mod
    if pattern == "blocks":
        assert h == sorted(h)
    if pattern == "perm" and B == 256:
        assert h != mod and h != sorted(h)  # a real reshuffle, the same one every call
        assert h == gdn_step_by_h.mixed_cursors(pattern, B, L)


def test_unknown_mix_pattern_is_refused(capsys):
    assert gdn_step_by_h.main(["--mix", "mod,zigzag"]) == 2
    assert "--mix ['zigzag']: expected names from ['mod', 'blocks', 'perm']" in capsys.readouterr().err
    with pytest.raises(ValueError, match="pattern 'zigzag'"):
        gdn_step_by_h.mixed_cursors("zigzag", 4, 2)
