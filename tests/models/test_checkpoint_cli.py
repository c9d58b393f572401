"""`replayssm-trtllm checkpoint` on tiny checkpoints written by transformers."""
from __future__ import annotations

import json
import os
import sys

import pytest

from replayssm_trtllm.cli import main

sys.path.insert(0, os.path.dirname(__file__))
import hf_tiny  # noqa: E402

pytest.importorskip("transformers")
pytest.importorskip("safetensors")


@pytest.fixture(scope="module")
def nemotron_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("nemotron_cli")
    hf_tiny.save("nemotron_h", d, seed=3)
    return d


def test_report_and_decode_check(nemotron_dir, capsys):
    rc = main(["checkpoint", str(nemotron_dir), "-L", "4", "-T", "3", "--decode-check", "10", "--layers", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "mamba2 mixers (H=8, P=32, N=64, G=2)" in out
    assert "3 SSM layers of 5: [0, 2, 4]" in out
    assert "CUDA kernels: cover this shape" in out
    assert "benchmarked preset" not in out          # a tiny shape matches no preset
    assert "backbone.layers.<i>.mixer." in out and "all present with the expected shapes" in out
    # ring per layer: C = 7 records of (4 H + 2 H P + 2 G N) bytes
    assert f"ring {7 * (4 * 8 + 2 * 8 * 32 + 2 * 2 * 64):,} B per layer" in out
    assert out.count("ReplaySSM vs conventional max rel diff") == 2 and "FAIL" not in out


def test_report_standard_mode_ring(nemotron_dir, capsys):
    """-T 1 (standard decoding): the ring holds L records (ring_capacity_for), not L + 1."""
    rc = main(["checkpoint", str(nemotron_dir), "-L", "4"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "(ring capacity 4)" in out and f"ring {4 * (4 * 8 + 2 * 8 * 32 + 2 * 2 * 64):,} B per layer" in out


def test_a_failing_decode_check_exits_1(nemotron_dir, capsys):
    rc = main(["checkpoint", str(nemotron_dir), "-L", "4", "--decode-check", "6", "--tol", "0"])
    out = capsys.readouterr().out
    assert rc == 1 and "FAIL (tol 0)" in out


def test_wrong_shape_exits_1_and_names_the_tensor(nemotron_dir, tmp_path, capsys):
    from safetensors.torch import load_file, save_file
    import torch
    w = load_file(str(nemotron_dir / "model.safetensors"))
    w["backbone.layers.4.mixer.dt_bias"] = torch.zeros(7)
    save_file(w, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((nemotron_dir / "config.json").read_text())
    rc = main(["checkpoint", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "backbone.layers.4.mixer.dt_bias: shape [7], expected [8]" in out


def test_unreadable_checkpoint_exits_2(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert main(["checkpoint", str(tmp_path)]) == 2
    assert "model_type 'llama' is not supported" in capsys.readouterr().err
    assert main(["checkpoint", str(tmp_path / "nowhere")]) == 2
    assert main(["checkpoint", str(tmp_path), "-L", "2", "-T", "3"]) == 2


def test_example_runs_on_the_cpu(nemotron_dir):
    """examples/hf_checkpoint_decode.py without a GPU compares the float64 ReplaySSM reference."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "hf_checkpoint_decode.py"), str(nemotron_dir),
                        "--steps", "12", "-L", "4", "-T", "2", "--batch", "3"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replay backend replay-reference" in r.stdout and ": ok" in r.stdout


def test_preempt_and_resume_example_runs_on_the_cpu(nemotron_dir):
    """examples/preempt_and_resume.py without a GPU: the float64 ReplaySSM reference; requests swapped out after 6
    steps (window 4: past a flush), other requests in their slots, then resumed in new slots, decode like requests
    never preempted (speculative, T = 2)."""
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "preempt_and_resume.py"), str(nemotron_dir),
                        "-L", "4", "-T", "2", "--batch", "4", "--prompt", "5", "--before", "6", "--other", "3",
                        "--after", "6"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backend replay-reference" in r.stdout and "swapped 2 requests out to host memory" in r.stdout
    assert "resumed them in slots [4, 5]" in r.stdout and ": ok" in r.stdout


def test_quantized_projections_are_reported_not_failed(nemotron_dir, tmp_path, capsys):
    """An NVFP4-style checkpoint (packed uint8 projections with scales): the report names them as quantized
    and still exits 0 (the SSM parameters are fine); the decode check then fails with the loader's error."""
    from safetensors.torch import load_file, save_file
    import torch
    w = load_file(str(nemotron_dir / "model.safetensors"))
    for i in (0, 2, 4):
        name = f"backbone.layers.{i}.mixer.in_proj.weight"
        rows, cols = w[name].shape
        w[name] = torch.zeros(rows, cols // 2, dtype=torch.uint8)
        w[name + "_scale"] = torch.ones(rows, cols // 16, dtype=torch.float8_e4m3fn)
    save_file(w, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((nemotron_dir / "config.json").read_text())
    assert main(["checkpoint", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "all present with the expected shapes; 3 stored quantized" in out
    assert "in_proj.weight: dtype U8, with backbone.layers.0.mixer.in_proj.weight_scale" in out
    assert main(["checkpoint", str(tmp_path), "--decode-check", "2"]) == 1
    assert "is stored quantized (dtype U8" in capsys.readouterr().out


def test_tensor_parallel_report_and_split_decode_check(nemotron_dir, capsys):
    """--tp 2: one rank's heads and replay cache, and the decode check with the two ranks' slices summed as well."""
    rc = main(["checkpoint", str(nemotron_dir), "-L", "4", "-T", "2", "--tp", "2", "--decode-check", "5"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "tensor parallelism TP 2: each rank holds 4 heads and 1 key heads / groups" in out
    ring = 6 * (4 * 8 + 2 * 8 * 32 + 2 * 2 * 64)          # C = L + T = 6 records per layer, all 3 layers, halved
    assert f"ring {3 * ring / 2 / 2**20:.2f} MiB" in out.split("tensor parallelism")[1]
    assert out.count("ReplaySSM (whole and its TP 2 ranks summed) vs conventional max rel diff") == 2
    assert "FAIL" not in out


def test_tensor_parallel_that_does_not_divide_fails_naming_the_field(nemotron_dir, capsys):
    rc = main(["checkpoint", str(nemotron_dir), "-L", "4", "--tp", "4"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "TP 4: cannot split these mixers: n_groups=2 is not divisible by tp_size=4" in out
