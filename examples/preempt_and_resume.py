"""Preempt requests out of a ReplaySSM decoder and resume them later in other slots, as a serving scheduler does.

Loads a Hugging Face checkpoint's SSM layers (Nemotron-H / Nemotron-3, Qwen3.5, Qwen3-Next) into two decoders over
the same weights: one keeps every request in its slot; the other, after `--before` steps, swaps half of its
requests out to host memory (`export_requests`: their SSM states after the committed tokens and their conv
histories), runs other requests in the freed slots for `--other` steps, then resumes the swapped-out requests in
different slots (`import_requests`). Both decoders then get the same inputs per request for `--after` steps, and the
script prints the largest relative difference of the resumed requests' outputs. On a GPU the decoders run the
ReplaySSM kernels (bf16 activations, fp32 state), without one the float64 ReplaySSM reference.

    python examples/preempt_and_resume.py /ckpt/NVIDIA-Nemotron-3-Nano-4B-BF16 --batch 4 -T 4
"""
import argparse
import sys
from dataclasses import replace

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--layers", type=int, default=2, help="SSM layers to load (default 2)")
    ap.add_argument("--batch", type=int, default=4, help="requests (even; half are preempted)")
    ap.add_argument("--window", "-L", type=int, default=16)
    ap.add_argument("--verify", "-T", type=int, default=1, help="T > 1: speculative steps with random acceptance")
    ap.add_argument("--prompt", type=int, default=12)
    ap.add_argument("--before", type=int, default=20, help="steps before the preemption")
    ap.add_argument("--other", type=int, default=5, help="steps of other requests in the freed slots")
    ap.add_argument("--after", type=int, default=20, help="steps after resuming")
    args = ap.parse_args()
    if args.batch < 2 or args.batch % 2:
        raise SystemExit(f"--batch must be even and >= 2; got {args.batch}")

    from replayssm_trtllm.models import HfCheckpoint, SsmDecoder, load_hf_config, load_mixer_weights, make_mixer
    from replayssm_trtllm.models.backends import make_backend, mixer_placement
    spec = load_hf_config(args.path)
    spec = replace(spec, ssm_layers=spec.ssm_layers[:args.layers])
    ckpt = HfCheckpoint(args.path)
    weights = {i: load_mixer_weights(ckpt, spec, i) for i in spec.ssm_layers}
    gpu = torch.cuda.is_available()
    name = "replay-kernels" if gpu else "replay-reference"
    device, dtype = mixer_placement(name)
    n, T, H = args.batch, args.verify, spec.hidden_size
    slots_total = 2 * n                       # room for the other requests and the resumed ones

    def decoder():
        mixers = {i: make_mixer(spec, w, dtype, device) for i, w in weights.items()}
        return SsmDecoder(spec, mixers, make_backend(name, spec, slots_total, args.window, T, device=device))

    keep, swap = decoder(), decoder()
    g = torch.Generator().manual_seed(0)
    put = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
    print(f"{spec.model_type}: {spec.family} layers {list(spec.ssm_layers)}, {n} requests, L={args.window}, T={T}, "
          f"backend {name}")

    def step(dec, slots, hidden, acc):
        outs = [dec.step(layer, put(hidden), torch.as_tensor(slots)).double().cpu() for layer in spec.ssm_layers]
        dec.commit(acc)
        return outs

    def inputs(rows):
        hidden = torch.randn(rows, T, H, generator=g, dtype=torch.float64)
        return hidden, (torch.randint(1, T + 1, (rows,), generator=g) if T > 1 else None)

    first = list(range(n))
    prompt = torch.randn(n, args.prompt, H, generator=g, dtype=torch.float64)
    for dec in (keep, swap):
        dec.reset(first)
        for layer in spec.ssm_layers:
            dec.prefill(layer, put(prompt), torch.tensor(first))
    for _ in range(args.before):
        hidden, acc = inputs(n)
        step(keep, first, hidden, acc)
        step(swap, first, hidden, acc)

    # preempt the second half: to host memory; their slots go to other requests for a while
    out_slots = first[n // 2:]
    saved = swap.export_requests(out_slots).to("cpu")
    mib = (saved.ssm.numel() * saved.ssm.element_size() + sum(c.numel() * c.element_size() for c in saved.conv.values())) / 2**20
    print(f"  step {args.before}: swapped {len(out_slots)} requests out to host memory ({mib:.2f} MiB)")
    swap.reset(out_slots)
    for _ in range(args.other):
        hidden, acc = inputs(len(out_slots))
        step(swap, out_slots, hidden, acc)

    # resume them in slots they never had; both decoders get the same inputs per request from here on
    new_slots = list(range(n, n + len(out_slots)))
    swap.import_requests(new_slots, saved)
    print(f"  resumed them in slots {new_slots} after {args.other} steps of other requests in slots {out_slots}")
    worst = 0.0
    for _ in range(args.after):
        hidden, acc = inputs(n)
        a = step(keep, first, hidden, acc)
        b = step(swap, first[:n // 2] + new_slots, hidden, acc)
        for la, lb in zip(a, b):
            worst = max(worst, float((lb - la).abs().max() / la.abs().max()))
    if gpu:
        torch.cuda.synchronize()
        for dec in (keep, swap):
            dec.backend.cache.check_errors()
    tol = 1e-2 if gpu else 1e-10
    print(f"max rel diff, resumed against never preempted: {worst:.2e} (tolerance {tol:g}): "
          f"{'ok' if worst <= tol else 'FAIL'}")
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
