"""Error-propagation study: the windowed replay equals the recurrence, and a tiny run end to end."""
import json
import math

import pytest
import torch

from replayssm_trtllm.cli import error_study as cli
from replayssm_trtllm.studies.error_study import (CONFIGS, FAMILIES, StudyConfig, _step, check_claims, eval_points,
                                                  gdn_window, make_inputs, mamba2_window, merge_results,
                                                  result_from_dict, run_study)

F64 = torch.float64


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_window_equals_sequential_recurrence(family):
    fam = FAMILIES[family]
    cfg = StudyConfig(family=family, heads=2)
    w = {k: v.to(F64) for k, v in make_inputs(fam, cfg, 0, 16).items()}
    S0 = torch.randn(1, 2, fam.dv, fam.dk, dtype=F64) * 0.1
    if family == "mamba2":
        y, S_new = mamba2_window(S0, S0, w)
    else:
        y, S_new = gdn_window(S0, S0, w, torch.tensor([], dtype=torch.long), None)
    S = S0
    for t in range(16):
        o, S = _step(family, S, w, t)
        assert torch.allclose(y[..., t], o, rtol=1e-10, atol=1e-12), t
    assert torch.allclose(S_new, S, rtol=1e-10, atol=1e-12)


def test_gdn_flush_rederives_u_from_recurrence_checkpoint():
    fam = FAMILIES["gdn"]
    w = {k: v.to(F64) for k, v in make_inputs(fam, StudyConfig(family="gdn", heads=2), 1, 16).items()}
    S_hp = torch.randn(1, 2, 128, 128, dtype=F64) * 0.1
    S_lp = S_hp + 1e-2 * torch.randn_like(S_hp)            # a perturbed read copy
    both_R, both_S = torch.cat([S_lp, S_lp]), torch.cat([S_hp, S_hp])
    o, S_new = gdn_window(both_R, both_S, w, torch.tensor([1]), None)
    S = S_hp
    for t in range(16):
        _, S = _step("gdn", S, w, t)
    assert torch.allclose(S_new[1], S[0], rtol=1e-10, atol=1e-12)     # re-derived: the exact HP recurrence
    assert not torch.allclose(S_new[0], S[0], rtol=1e-6, atol=1e-8)    # folded: read-copy error enters
    assert torch.equal(o[0, ..., :-1], o[1, ..., :-1])                 # non-flush outputs come from the read copy


def test_eval_points():
    assert eval_points(131072, 256) == [1024 * 2**i for i in range(8)]
    assert eval_points(3000 - 3000 % 16, 256) == [1024, 2048, 2992]
    assert eval_points(192, 64) == [64, 128, 192]
    assert eval_points(2048, 64, first_eval=64) == [64, 128, 256, 512, 1024, 2048]


def test_study_end_to_end_tiny(tmp_path, capsys):
    args = [
        "--max-steps", "192", "--heads", "2", "--eval-window", "64", "--prefill", "64",
        "--json", str(tmp_path / "r.json"), "--png", str(tmp_path / "r.png"), "--markdown", str(tmp_path / "r.md"),
    ]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "error-study mamba2: step 192/192" in out and "| claim | measured | holds |" in out
    assert (tmp_path / "r.png").stat().st_size > 10_000
    results = [result_from_dict(d) for d in json.loads((tmp_path / "r.json").read_text())]
    assert [r.family for r in results] == ["mamba2", "gdn"]
    for r in results:
        assert r.eval_steps == [64, 128, 192] and list(r.errors) == list(CONFIGS)
        assert all(math.isfinite(x) and x > 0 for v in r.errors.values() for x in v)
        e = {k: v[-1] for k, v in r.errors.items()}
        for rd in ("nvfp4", "fp8"):
            assert e[f"sep-{rd}-fp32"] < e[f"shared-{rd}-sr"], (r.family, rd, e)
            assert e[f"sep-{rd}-fp16sr"] < e[f"shared-{rd}-sr"], (r.family, rd, e)
        assert e["fp32"] < min(v for k, v in e.items() if k != "fp32")
        assert len(check_claims(r)) == 13
    # re-render from the saved results
    assert cli.main(["--load-json", str(tmp_path / "r.json")]) == 0
    assert "NVFP4 read + FP32 rec." in capsys.readouterr().out


def test_philox_rng_and_merge():
    base = dict(family="mamba2", max_steps=32, heads=1, eval_window=16, prefill=16, rng="philox")
    a = run_study(StudyConfig(**base, configs=("shared-fp8-sr",)))
    b = run_study(StudyConfig(**base, configs=("step-fp8-sr", "fp32")))
    again = run_study(StudyConfig(**base, configs=("shared-fp8-sr",)))
    assert a.errors == again.errors                       # Philox SR: reproducible run to run
    (m,) = merge_results([a, b])
    assert list(m.errors) == ["fp32", "shared-fp8-sr", "step-fp8-sr"]
    with pytest.raises(ValueError, match="differ in settings"):
        merge_results([a, run_study(StudyConfig(**{**base, "seed": 1}, configs=("fp32",)))])


@pytest.mark.parametrize("kw,msg", [
    ({"max_steps": 100}, "multiple of window=16"),
    ({"family": "rwkv"}, "family must be one of"),
    ({"configs": ("shared-fp4",)}, "unknown configs"),
    ({"rng": "mt"}, "rng must be"),
])
def test_bad_settings(kw, msg):
    with pytest.raises(ValueError, match=msg):
        StudyConfig(**kw).validate()
