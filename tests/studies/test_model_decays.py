"""error-study --decays-from: the heads' decay centres taken from a checkpoint's SSM layers."""
from __future__ import annotations

import json
import math
import os
import sys

import pytest
import torch

from replayssm_trtllm.cli import error_study as cli
from replayssm_trtllm.studies.error_study import (FAMILIES, StudyConfig, make_inputs, result_from_dict,
                                                  study_alpha_range, study_centres)
from replayssm_trtllm.studies.model_decays import centres_from_checkpoint, model_decays, pick_centres

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "models"))
import hf_tiny  # noqa: E402

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def nemotron_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("decays")
    return d, hf_tiny.save("nemotron_h", d, seed=4)


def test_neutral_input_decays_of_every_head(nemotron_dir):
    d, mixers = nemotron_dir
    family, a, summary = model_decays(d)
    want = torch.cat([torch.exp(-torch.exp(m.A_log.detach().double())
                                * torch.nn.functional.softplus(m.dt_bias.detach().double()))
                      for _, m in sorted(mixers.items())])
    assert family == "mamba2" and summary["ssm_layers"] == 3 and summary["heads"] == 24
    torch.testing.assert_close(a, want)


def test_pick_centres_spans_the_spectrum():
    a = torch.tensor([0.5, 0.99, 0.9, 0.999, 0.7])
    assert pick_centres(a, 2) == pytest.approx([0.5, 0.999])
    assert pick_centres(a, 3) == pytest.approx([0.5, 0.9, 0.999])
    assert pick_centres(a, 1) == pytest.approx([0.9])
    with pytest.raises(ValueError, match="heads must be >= 1"):
        pick_centres(a, 0)


def test_given_centres_drive_the_inputs_and_widen_the_clip_range():
    fam = FAMILIES["gdn"]
    cfg = StudyConfig(family="gdn", heads=2, alpha_centres=(0.6, 0.995), decay_jitter=0.0)
    cfg.validate()
    assert study_centres(fam, cfg).tolist() == [0.6, 0.995]
    assert study_alpha_range(fam, cfg) == (0.6, fam.alpha_range[1])
    la = make_inputs(fam, cfg, 0, 8)["la"]                 # no jitter: every step at the centre
    torch.testing.assert_close(torch.exp(la[0].double()), torch.tensor([0.6, 0.995], dtype=torch.float64),
                               rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="alpha_centres must be 2 values"):
        StudyConfig(family="gdn", heads=2, alpha_centres=(0.5,)).validate()


def test_cli_runs_the_study_on_a_checkpoints_decays(nemotron_dir, tmp_path, capsys):
    d, _ = nemotron_dir
    family, centres, desc = centres_from_checkpoint(d, 2)
    args = ["--decays-from", str(d), "--max-steps", "64", "--heads", "2", "--eval-window", "32", "--prefill", "32",
            "--first-eval", "32", "--configs", "fp32,shared-nvfp4-sr,sep-nvfp4-fp32",
            "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md")]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "decay centres from nemotron_h checkpoint" in out
    (res,) = [result_from_dict(x) for x in json.loads((tmp_path / "r.json").read_text())]
    assert res.family == family == "mamba2"
    assert res.config.alpha_centres == pytest.approx(tuple(centres)) and res.config.decay_source == desc
    assert all(math.isfinite(x) for v in res.errors.values() for x in v)
    assert "from nemotron_h checkpoint" in (tmp_path / "r.md").read_text()
    with pytest.raises(SystemExit, match="is a mamba2 checkpoint; --family gdn contradicts it"):
        cli.main(args + ["--family", "gdn"])
