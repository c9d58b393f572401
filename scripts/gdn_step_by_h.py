"""GDN standard replay step timed at fixed cursors, one line per history length h (diagnostic, not a benchmark).

    python3 scripts/gdn_step_by_h.py [--shape q35-4b] [--batch 256] [--window 16] [--variant 6] [--h 0,1,2,4,8,15,16]

Every row holds the same h (and "mixed": h_b = b mod (L + 1), every h of the window once per L + 1 rows), no commit
between steps, so each graph replays the same step: h = L is the flush step (every row folds its window), h < L a
non-flush step whose rows read h committed records. The bench's in-phase cycle is the mean of h = 0 .. L; this
script splits it, to see which steps an A/B switch moves (run it once per setting, each in its own process, as
scripts/ab_bench.sh does). Timings only: the official figures come from `replayssm-trtllm bench gdn`.
"""
from __future__ import annotations

import argparse
import math
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="q35-4b")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--variant", type=int, default=6)
    ap.add_argument("--h", default="0,1,2,4,8,12,15,16", help="comma list of history lengths (0 .. window)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--l2-bytes", type=float, default=240e6)
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("gdn_step_by_h: needs a CUDA GPU", file=sys.stderr)
        return 2
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.gdn  # noqa: F401
    from replayssm_trtllm.bench.gdn import SHAPES, _Layers, _time_graph
    sh = SHAPES[args.shape]
    B, L = args.batch, args.window
    hs = [int(x) for x in args.h.split(",") if x.strip()]
    bad = [h for h in hs if not 0 <= h <= L]
    if bad:
        print(f"gdn_step_by_h: --h values {bad} outside 0 .. window ({L})", file=sys.stderr)
        return 2
    nl = max(2, math.ceil(args.l2_bytes / (B * sh["HV"] * sh["V"] * sh["K"] * 4)))
    ls = _Layers(sh, B, L, 1, torch.float32, torch.bfloat16, nl, 0, False)
    print(f"# {torch.cuda.get_device_name()} {args.shape} B={B} L={L} v{args.variant}: us per layer-step, {nl} layers",
          flush=True)
    cases = [(f"h={h}", torch.full((B,), h, dtype=torch.int32, device="cuda")) for h in hs]
    cases.append(("mixed", torch.arange(B, dtype=torch.int32, device="cuda") % (L + 1)))
    for name, h0 in cases:
        ls.set_cursors(h0)
        t = _time_graph(lambda: [ls.replay_step(i, 1, 0, args.variant) for i in range(nl)], args.repeats) / nl
        print(f"{args.shape} B={B} L={L} step {name}: {t * 1e6:8.2f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
