"""GDN standard replay step timed at fixed cursors, one line per history length h (diagnostic, not a benchmark).

    python3 scripts/gdn_step_by_h.py [--shape q35-4b] [--batch 256] [--window 16] [--variant 6] [--h 0,1,2,4,8,15]
                                     [--mix mod,blocks,perm]

Every row holds the same h (and each "mixed" case one staggered batch, every h of the window on B / L rows), no commit
between steps, so each graph replays the same step: h = L - 1 is the flush step (this token's record fills the window
and every row folds it), h < L - 1 a non-flush step whose rows read h committed records. (h = L breaks the standard-mode
cursor rule h < L: the kernels skip such rows, so it is refused here.) The bench's in-phase cycle is the mean of
h = 0 .. L - 1; this script splits it, to see which steps an A/B switch moves (run it once per setting, each in its own
process, as scripts/ab_bench.sh does). Timings only: the official figures come from `replayssm-trtllm bench gdn`.

--mix names the staggered batches (default `mod`, the bench's): `mod` h_b = b mod L, `blocks` the same values sorted
(rows of one h contiguous), `perm` a fixed random permutation of `mod`'s values. All three hold the same h values, so
the same bytes and the same work; they differ in which readout warps get the flushing rows' items and when in each
warp's walk (the persistent readout hands out items (b, value head, row block) grid-strided over its warps).
Sixty-second session (H100): `perm` / `mod` 1.004-1.010, `blocks` / `mod` 1.020-1.035, the reverse of the warp-level
balance that scripts/readout_warp_balance.py models: flush work bunched in time costs, its spread over warps does not
(docs/benchmarks.md "Sixty-second session").
"""
from __future__ import annotations

import argparse
import math
import sys


MIX_PATTERNS = ("mod", "blocks", "perm")


def mixed_cursors(pattern: str, batch: int, window: int, seed: int = 0) -> list:
    """History length h_b of each row of a staggered batch (see the module docstring); every pattern holds the values
    of `mod` (b mod L), so the batches differ only in which rows hold which h."""
    mod = [b % window for b in range(batch)]
    if pattern == "mod":
        return mod
    if pattern == "blocks":
        return sorted(mod)
    if pattern == "perm":
        import random
        out = list(mod)
        random.Random(seed).shuffle(out)
        return out
    raise ValueError(f"mixed_cursors: pattern {pattern!r}: expected one of {MIX_PATTERNS}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="q35-4b")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--variant", type=int, default=6)
    ap.add_argument("--h", default="0,1,2,4,8,12,15", help="comma list of history lengths (0 .. window - 1)")
    ap.add_argument("--mix", default="mod", help="comma list of staggered batches: " + ", ".join(MIX_PATTERNS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--l2-bytes", type=float, default=240e6)
    args = ap.parse_args(argv)
    from replayssm_trtllm.bench.gdn import SHAPES
    if args.shape not in SHAPES:
        print(f"gdn_step_by_h: --shape {args.shape!r}: expected one of {sorted(SHAPES)}", file=sys.stderr)
        return 2
    B, L = args.batch, args.window
    if B < 1 or L < 1:
        print(f"gdn_step_by_h: --batch {B} / --window {L}: expected positive values", file=sys.stderr)
        return 2
    try:
        hs = [int(x) for x in args.h.split(",") if x.strip()]
    except ValueError:
        print(f"gdn_step_by_h: --h {args.h!r}: expected a comma list of integers", file=sys.stderr)
        return 2
    bad = [h for h in hs if not 0 <= h < L]
    if bad or not hs:
        print(f"gdn_step_by_h: --h values {bad or args.h!r} outside 0 .. window - 1 ({L - 1})", file=sys.stderr)
        return 2
    mixes = [m.strip() for m in args.mix.split(",") if m.strip()]
    bad_mix = [m for m in mixes if m not in MIX_PATTERNS]
    if bad_mix:
        print(f"gdn_step_by_h: --mix {bad_mix}: expected names from {list(MIX_PATTERNS)}", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("gdn_step_by_h: needs a CUDA GPU", file=sys.stderr)
        return 2
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.gdn  # noqa: F401
    from replayssm_trtllm.bench.gdn import _Layers, _time_graph
    sh = SHAPES[args.shape]
    nl = max(2, math.ceil(args.l2_bytes / (B * sh["HV"] * sh["V"] * sh["K"] * 4)))
    ls = _Layers(sh, B, L, 1, torch.float32, torch.bfloat16, nl, 0, False)
    print(f"# {torch.cuda.get_device_name()} {args.shape} B={B} L={L} v{args.variant}: us per layer-step, {nl} layers",
          flush=True)
    cases = [(f"h={h}", torch.full((B,), h, dtype=torch.int32, device="cuda")) for h in hs]
    for m in mixes:
        cases.append(("mixed" if m == "mod" else f"mixed-{m}",
                      torch.tensor(mixed_cursors(m, B, L), dtype=torch.int32, device="cuda")))
    for name, h0 in cases:
        ls.set_cursors(h0)
        t = _time_graph(lambda: [ls.replay_step(i, 1, 0, args.variant) for i in range(nl)], args.repeats) / nl
        print(f"{args.shape} B={B} L={L} step {name}: {t * 1e6:8.2f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
