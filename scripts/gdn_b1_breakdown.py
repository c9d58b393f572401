"""Where the time of a small-batch Gated DeltaNet standard step goes (GPU; timings for A/B work, not targets).

    python3 scripts/gdn_b1_breakdown.py [--shapes q35-4b,q35-122b] [--batch 1] [--window 16] [--repeats 5]

Times, in one process and on the benchmark's buffers (nl layer buffers rotated out of L2, CUDA graphs), per
layer-step: the conventional kernels (variants 5, 6), the replay step as the benchmark amortizes it (a window of
L steps, commit included), the replay step with every row's cursor held at h = L / 2 (non-flush steps only, no
commit) and at h = L - 1 (every step flushes, no commit), and a one-element kernel per layer (what a graph node
costs with nothing to do). The official figures come from `replayssm-trtllm bench gdn`
(scripts/gpu_run.sh --bench gdn).
"""
from __future__ import annotations

import argparse
import math

import torch

import replayssm_trtllm.ops.commit  # noqa: F401
import replayssm_trtllm.ops.gdn  # noqa: F401
from replayssm_trtllm.bench import gdn as bg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="q35-4b,q35-122b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--tmax", type=int, default=8, help="ring capacity L + tmax, as the benchmark allocates")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--replay-variants", default="5")
    ap.add_argument("--ncu", action="store_true",
                    help="instead of timing: one replay step per variant (h = L / 2, h = L - 1) and one conventional v6 step, "
                         "each inside an NVTX range prof/<name> (for ncu --nvtx --nvtx-include prof/)")
    args = ap.parse_args()
    B, L = args.batch, args.window
    for shp in args.shapes.split(","):
        sh = bg.SHAPES[shp]
        sb = B * sh["HV"] * sh["V"] * sh["K"] * 4
        nl = int(min(64, max(2, math.ceil(240e6 / sb))))
        ls = bg._Layers(sh, B, L, args.tmax, torch.float32, torch.bfloat16, nl, 0, False, token_list=[1],
                        std_capacity=L + args.tmax)  # the standard steps on the ring of --tmax
        one = [torch.zeros(1, device="cuda") for _ in range(nl)]
        if args.ncu:
            runs = [("conventional-v6", None, lambda: ls.conv_step(0, 1, variant=6))]
            runs += [(f"replay-v{rv}-h{hh}", hh, (lambda rv=rv: ls.replay_step(0, 1, 0, rv)))
                     for rv in [int(x) for x in args.replay_variants.split(",")] for hh in (L // 2, L - 1)]
            for name, h, fn in runs:
                for rng in (False, True):  # warm-up outside the range, then the profiled launch
                    if h is not None:
                        ls.set_cursors(torch.full((B,), h, dtype=torch.int32, device="cuda"))
                    if rng:
                        torch.cuda.nvtx.range_push("prof")
                        torch.cuda.nvtx.range_push(f"{shp}-{name}")
                    fn()
                    if rng:
                        torch.cuda.nvtx.range_pop()
                        torch.cuda.nvtx.range_pop()
                    torch.cuda.synchronize()
                print(f"ran {shp} {name}", flush=True)
            continue
        cases = [(f"conventional v{v}", None, (lambda v=v: [ls.conv_step(l, 1, variant=v) for l in range(nl)]), nl)
                 for v in (5, 6)]
        for rv in [int(x) for x in args.replay_variants.split(",")]:
            def held(rv=rv):
                for l in range(nl):
                    ls.replay_step(l, 1, 0, rv)

            def window(rv=rv):
                for _ in range(L):
                    for l in range(nl):
                        ls.replay_step(l, 1, 0, rv)
                    ls.commit(1, 0)
            cases += [(f"replay v{rv} window (bench)", 0, window, L * nl),
                      (f"replay v{rv} held h=L/2 (non-flush)", L // 2, held, nl),
                      (f"replay v{rv} held h=L-1 (flush)", L - 1, held, nl)]
        cases.append(("one-element kernel", None, lambda: [o.add_(1.0) for o in one], nl))
        print(f"== {shp} B={B} L={L} nl={nl} state {sb / 2**20:.2f} MiB per layer")
        for name, h, fn, per in cases:
            if h is not None:
                ls.set_cursors(torch.full((B,), h, dtype=torch.int32, device="cuda"))
            try:
                t = bg._time_graph(fn, args.repeats) / per
            except RuntimeError as e:
                print(f"  {name:36s} skipped: {str(e).splitlines()[0][:120]}")
                continue
            print(f"  {name:36s} {t * 1e6:8.2f} us/layer-step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
