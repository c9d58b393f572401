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
    ap.add_argument("--prompt", type=int, default=24, help="prompt tokens prefilled first (float64 on the CPU)")
    args = ap.parse_args()

    from replayssm_trtllm.models import (ConventionalReference, HfCheckpoint, ReplayKernels, ReplayReference,
                                         SsmDecoder, load_hf_config, load_mixer_weights, make_mixer)
    spec = load_hf_config(args.path)
    spec = replace(spec, ssm_layers=spec.ssm_layers[:args.layers])
    ckpt = HfCheckpoint(args.path)
    weights = {i: load_mixer_weights(ckpt, spec, i) for i in spec.ssm_layers}
    T, S = args.verify, args.batch
    mode = "speculative" if T > 1 else "standard"
    gpu = torch.cuda.is_available()
    if gpu:
        replay = ReplayKernels(spec, S, args.window, T, mode, device="cuda")
        rdt, rdev = torch.float32, "cuda"
    else:
        print("no GPU: comparing the float64 ReplaySSM reference instead of the kernels")
        replay = ReplayReference(spec, S, args.window, T, mode)
        rdt, rdev = torch.float64, "cpu"
    decs = [SsmDecoder(spec, {i: make_mixer(spec, w) for i, w in weights.items()}, ConventionalReference(spec, S, T)),
            SsmDecoder(spec, {i: make_mixer(spec, w, rdt, rdev) for i, w in weights.items()}, replay)]
    gen = torch.Generator().manual_seed(0)
    slots = torch.arange(S)
    prompt = torch.randn(S, args.prompt, spec.hidden_size, generator=gen, dtype=torch.float64)
    for d, dev, dt in ((decs[0], "cpu", torch.float64), (decs[1], rdev, rdt)):
        d.reset(range(S))
        if args.prompt > 0:
            for i in spec.ssm_layers:
                d.prefill(i, prompt.to(dev, dt), slots)
    print(f"{spec.model_type}: {spec.family} layers {list(spec.ssm_layers)}, {S} rows, prompt {args.prompt}, "
          f"L={args.window}, T={T}, "
          f"{args.steps} steps, replay backend {replay.name}")
    worst = 0.0
    for step in range(args.steps):
        hidden = torch.randn(S, T, spec.hidden_size, generator=gen, dtype=torch.float64)
        acc = torch.randint(1, T + 1, (S,), generator=gen) if T > 1 else None
        ref = [decs[0].step(i, hidden, slots) for i in spec.ssm_layers]
        got = [decs[1].step(i, hidden.to(rdev, rdt), slots) for i in spec.ssm_layers]
        for d in decs:
            d.commit(acc)
        for a, b in zip(ref, got):
            worst = max(worst, float((b.double().cpu() - a).abs().max() / a.abs().max()))
        if (step + 1) % 10 == 0:
            print(f"  step {step + 1}: max rel diff so far {worst:.2e}", flush=True)
    if gpu:
        torch.cuda.synchronize()
        replay.cache.check_errors()
    tol = 3e-2 if gpu else 1e-10
    print(f"max rel diff {worst:.2e} (tolerance {tol:g}): {'ok' if worst <= tol else 'FAIL'}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
