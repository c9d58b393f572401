"""Where the time of a small-batch Mamba-2 standard step goes (GPU; timings for A/B work, not targets).

    python3 scripts/b1_breakdown.py [--shapes super,nano] [--batch 1] [--window 16] [--repeats 5]
    ncu --nvtx --nvtx-include "prof/" ... python3 scripts/b1_breakdown.py --ncu

Times, in one process and on the benchmark's buffers (nl layer buffers rotated out of L2, CUDA graphs), per
layer-step: the conventional kernels (variants 0, 1, 2, 4), the replay step as the benchmark amortizes it (a
window of L steps, commit included), the replay step with every row's cursor held at h = L / 2 (non-flush steps
only, no commit) and at h = L - 1 (every step flushes, no commit), and a one-element kernel per layer (what a
graph node costs with nothing to do). With --ncu each of those kernels runs once inside an NVTX range "prof/...".
The official figures come from `replayssm-trtllm bench mamba2` (scripts/gpu_run.sh --bench mamba2).
"""
from __future__ import annotations

import argparse
import math

import torch

import replayssm_trtllm.ops.commit  # noqa: F401
import replayssm_trtllm.ops.mamba2  # noqa: F401
from replayssm_trtllm.bench import mamba2 as bm2


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="super,nano")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--replay-variant", type=int, default=4)
    ap.add_argument("--tmax", type=int, default=1,
                    help="ring capacity L + TMAX (the benchmark sizes the ring for its largest token count: "
                         "--tokens 1,4,8 gives L + 8)")
    ap.add_argument("--origin", type=int, default=0,
                    help="ring origin of the held-cursor cases (a value past capacity - h wraps their records)")
    ap.add_argument("--replay-only", action="store_true", help="skip the conventional kernels")
    ap.add_argument("--ncu", action="store_true", help="run each kernel once inside an NVTX range instead")
    args = ap.parse_args()
    B, L, rv = args.batch, args.window, args.replay_variant
    for shp in args.shapes.split(","):
        sh = bm2.SHAPES[shp]
        sb = bm2._state_bytes(sh, B, 4)
        nl = 2 if args.ncu else int(min(64, max(2, math.ceil(240e6 / sb))))
        ls = bm2._Layerset(sh, B, L, args.tmax, torch.float32, torch.bfloat16, nl, 0, token_list=[1],
                           std_capacity=L + args.tmax)  # the standard steps on the ring of --tmax
        one = [torch.zeros(1, device="cuda") for _ in range(nl)]

        def held(h):
            def fn():
                for l in range(nl):
                    ls.replay_step(l, 1, 0, 0, rv)
            return h, fn

        def window():
            for _ in range(L):
                for l in range(nl):
                    ls.replay_step(l, 1, 0, 0, rv)
                ls.commit(1, 0)

        cases = [(f"conventional v{v}", None, (lambda v=v: [ls.conv_step(l, 1, variant=v) for l in range(nl)]), nl)
                 for v in ((0, 1, 2, 4) if not args.replay_only else ())]
        cases += [("replay window (bench)", 0, window, L * nl),
                  ("replay held h=L/2 (non-flush)",) + held(L // 2) + (nl,),
                  ("replay held h=L-1 (flush)",) + held(L - 1) + (nl,),
                  ("one-element kernel", None, lambda: [o.add_(1.0) for o in one], nl)]
        if not 0 <= args.origin < ls.C_std:
            raise SystemExit(f"--origin must lie in [0, {ls.C_std}) (the ring capacity); got {args.origin}")
        print(f"== {shp} B={B} L={L} ring capacity {ls.C_std} held origin {args.origin} nl={nl} "
              f"state {sb / 2**20:.2f} MiB per layer")
        def place(name, h):  # the case's cursors: h records on every row; held cases start at --origin
            if h is not None:
                ls.set_cursors(torch.full((B,), h, dtype=torch.int32, device="cuda"))
                if name.startswith("replay held"):
                    ls.origin.fill_(args.origin)

        for name, h, fn, per in cases:
            place(name, h)
            if args.ncu:
                fn()
                torch.cuda.synchronize()
                place(name, h)
                torch.cuda.nvtx.range_push("prof")
                torch.cuda.nvtx.range_push(f"{shp}-{name}")
                if name.startswith("replay window"):
                    ls.replay_step(0, 1, 0, 0, rv)
                else:
                    fn()
                torch.cuda.nvtx.range_pop()
                torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()
                continue
            try:
                t = bm2._time_graph(fn, args.repeats) / per
            except RuntimeError as e:
                print(f"  {name:32s} skipped: {str(e).splitlines()[0][:120]}")
                continue
            print(f"  {name:32s} {t * 1e6:8.2f} us/layer-step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
