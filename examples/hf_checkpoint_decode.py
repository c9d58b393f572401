"""Decode a Hugging Face checkpoint's SSM layers with ReplaySSM and compare with conventional decoding.

Loads config.json + safetensors (Nemotron-H / Nemotron-3, Qwen3.5, Qwen3-Next), builds the SSM mixers of
the first `--layers` SSM layers, and feeds the same random normalized hidden states to two decoders: the
ReplaySSM CUDA kernels (bf16 activations, fp32 state; the float64 ReplaySSM reference without a GPU) and
float64 conventional decoding on the CPU. Prints the max relative difference of the mixer outputs.

    python examples/hf_checkpoint_decode.py /ckpt/NVIDIA-Nemotron-3-Nano-4B-BF16 --steps 40 --batch 4 -T 4
"""
import argparse
import sys
from dataclasses import replace

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--window", "-L", type=int, default=16)
    ap.add_argument("--verify", "-T", type=int, default=1, help="T > 1: speculative steps with random acceptance")
    ap.add_argument("--prompt", type=int, default=24, help="prompt tokens prefilled first (each backend's own prefill)")
    args = ap.parse_args()

    from replayssm_trtllm.models import (HfCheckpoint, SsmDecoder, decode_side_by_side, load_hf_config,
                                         load_mixer_weights, make_mixer)
    from replayssm_trtllm.models.backends import make_backend, mixer_placement
    spec = load_hf_config(args.path)
    spec = replace(spec, ssm_layers=spec.ssm_layers[:args.layers])
    ckpt = HfCheckpoint(args.path)
    weights = {i: load_mixer_weights(ckpt, spec, i) for i in spec.ssm_layers}
    T, S = args.verify, args.batch
    gpu = torch.cuda.is_available()
    replay_name = "replay-kernels" if gpu else "replay-reference"
    if not gpu:
        print("no GPU: comparing the float64 ReplaySSM reference instead of the kernels")
    decs = []
    for name in ("conventional-reference", replay_name):
        device, dtype = mixer_placement(name)
        mixers = {i: make_mixer(spec, w, dtype, device) for i, w in weights.items()}
        decs.append(SsmDecoder(spec, mixers, make_backend(name, spec, S, args.window, T)))
    print(f"{spec.model_type}: {spec.family} layers {list(spec.ssm_layers)}, {S} rows, prompt {args.prompt}, "
          f"L={args.window}, T={T}, {args.steps} steps, replay backend {replay_name}")

    def progress(step, worst):
        if step % 10 == 0:
            print(f"  step {step}: max rel diff so far {worst:.2e}", flush=True)

    worst = decode_side_by_side(decs, torch.arange(S), args.steps, T, args.prompt, progress=progress)
    if gpu:
        torch.cuda.synchronize()
        decs[1].backend.cache.check_errors()
    tol = 3e-2 if gpu else 1e-10
    print(f"max rel diff {worst:.2e} (tolerance {tol:g}): {'ok' if worst <= tol else 'FAIL'}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
