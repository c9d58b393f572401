"""Decode with a Mamba-2 replay cache next to the conventional kernel and compare (needs a GPU).

A Nemotron-3-Super-shaped layer stack (H=128, P=64, N=128, G=8), random weights and inputs, rows at
staggered ring positions, standard decoding for `--steps` steps: the replay cache (checkpoint + ring,
written once per window) must produce the conventional kernel's outputs up to fp32 rounding.

    python examples/mamba2_replay_decode.py --steps 48 --batch 8 --layers 2
"""
import argparse
import sys

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--phase", choices=["none", "spread"], default="none",
                    help="flush phase at admission (state/phase.py): 'spread' gives the rows admitted together "
                         "different flush steps (the outputs stay the same)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("this example needs a CUDA GPU and the kernel library (pip install -e . with nvcc)")
        return 1
    import replayssm_trtllm.ops.commit  # noqa: F401  (registers torch.ops.replayssm.replay_commit)
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    from replayssm_trtllm.ops.state_cache import ReplayStateCache

    H, P, N, G, Lyr, Bsz = 128, 64, 128, 8, args.layers, args.batch
    dev, act = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    A = -torch.rand(Lyr, H, device=dev, generator=g) * 4 - 0.5
    D = torch.randn(Lyr, H, device=dev, generator=g)
    dt_bias = torch.randn(Lyr, H, device=dev, generator=g) * 0.5 - 2
    prefill = torch.randn(Lyr, Bsz, H, P, N, device=dev, generator=g) * 0.1

    cache = ReplayStateCache(Lyr, Bsz, H, P, N, G, window=args.window, device=dev)
    slots = torch.arange(Bsz, dtype=torch.int32, device=dev)
    cache.reset(slots, prefill, phase=None if args.phase == "none" else args.phase)
    conv_state = prefill.clone()  # conventional: one full state per layer, updated every step

    worst = 0.0
    for step in range(args.steps):
        for layer in range(Lyr):
            x = torch.randn(Bsz, H, P, device=dev, generator=g).to(act)
            dt = torch.randn(Bsz, H, device=dev, generator=g).to(act)
            Bm = torch.randn(Bsz, G, N, device=dev, generator=g).to(act)
            Cm = torch.randn(Bsz, G, N, device=dev, generator=g).to(act)
            z = torch.randn(Bsz, H, P, device=dev, generator=g).to(act)
            y_rep = cache.step(layer, slots, x, dt, Bm, Cm, A[layer], D[layer], dt_bias[layer], z)
            y_conv = torch.ops.replayssm.mamba2_decode(conv_state[layer], x, dt, Bm, Cm, A[layer], D[layer],
                                                       dt_bias[layer], z, slots, None)
            err = ((y_rep.float() - y_conv.float()).norm() / y_conv.float().norm()).item()
            worst = max(worst, err)
        cache.commit()  # once per model step, after all layers: advances the shared cursors
    cache.check_errors()
    print(f"{args.steps} steps x {Lyr} layers, B={Bsz}, L={args.window}: worst relative difference "
          f"replay vs conventional = {worst:.2e}")
    return 0 if worst < 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
