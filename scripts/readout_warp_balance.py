"""Load balance of the GDN split readout's static item walk under a cost model (CPU only; a model, not a measurement).

    python3 scripts/readout_warp_balance.py [--shape q35-4b] [--batch 256] [--window 16] [--warps 2640]
                                            [--flush-cost 2.89] [--h-slope 0.115] [--mix mod,blocks,perm] [--lpt]

The standard-step readout (gdnSplitReadoutKernel) is a persistent grid: items it = (b HV + hv) nrb + blk, one item =
8 value rows of one (row b, value head), handed to warp it mod W (stream::ItemWalker; W = warps of the grid, 2640 =
132 SMs x 5 CTAs x 4 warps at the default 128x5 configuration). In a staggered batch the rows at h = L - 1 fold their
window (flush items) and cost several non-flush items each, so a warp's work depends on how many flush items the walk
gives it. Cost model, in units of an h = 0 non-flush item: a non-flush item at h costs 1 + h-slope x h / (L - 2), a
flush item flush-cost. Defaults from recorded per-h timings (scripts/gdn_step_by_h.py): flush-cost 398.6 / 138.1 us
(H200, q35-4b B = 256 L = 16, docs/kernels-gdn.md "Forty-ninth session"), h-slope 213 / 191 - 1 between h = 0 and 14
(H100, "Forty-sixth session").

For each staggered pattern of scripts/gdn_step_by_h.py --mix, averaged over the L steps of a cycle: the most loaded
warp against the mean (warp level) and the most loaded SM against the mean (CTA c on SM c mod SMs, 4 warps per CTA;
the hardware's placement may differ). --lpt adds the longest-processing-time assignment's warp level for the first
step of `mod`, a bound on what a balanced walk could reach. Timing the patterns on a GPU (scripts/gdn_step_by_h.py
--h 0 --mix mod,blocks,perm) tests the model: on an H100 (sixty-second session) the step times followed neither level
(`perm`, the worst balanced, 0.4-1.0% slower; `blocks`, balanced like `mod`, 2.0-3.5% slower), so this balance is not
what the step pays for (docs/benchmarks.md "Sixty-second session"). Kept for the record and for other shapes or cards.
"""
from __future__ import annotations

import argparse
import heapq
import importlib.util
import pathlib
import sys

_STEP_BY_H = pathlib.Path(__file__).resolve().parent / "gdn_step_by_h.py"


def _mixed_cursors():
    spec = importlib.util.spec_from_file_location("gdn_step_by_h", _STEP_BY_H)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.mixed_cursors, mod.MIX_PATTERNS


def item_costs(h_rows, window, items_per_row, flush_cost, h_slope):
    """Cost of each item in walk order (row-major: a row's items are consecutive)."""
    import numpy as np
    h = np.asarray(h_rows)
    row_cost = np.where(h == window - 1, flush_cost, 1.0 + h_slope * h / max(window - 2, 1))
    return np.repeat(row_cost, items_per_row)


def walk_balance(costs, warps, warps_per_cta=4, sms=132):
    """(warp max / mean, SM max / mean) of the grid-strided walk: item i to warp i mod warps."""
    import numpy as np
    i = np.arange(costs.size)
    warp = i % warps
    per_warp = np.bincount(warp, weights=costs, minlength=warps)
    per_sm = np.bincount((np.arange(warps) // warps_per_cta) % sms, weights=per_warp, minlength=sms)
    per_sm = per_sm[per_sm > 0]
    return per_warp.max() / per_warp.mean(), per_sm.max() / per_sm.mean()


def lpt_balance(costs, warps):
    """Warp max / mean of the longest-processing-time-first assignment (a bound for a balanced walk)."""
    heap = [(0.0, w) for w in range(warps)]
    for c in sorted(costs.tolist(), reverse=True):
        load, w = heapq.heappop(heap)
        heapq.heappush(heap, (load + c, w))
    loads = [load for load, _ in heap]
    return max(loads) / (sum(loads) / len(loads))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="q35-4b")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--warps", type=int, default=132 * 5 * 4, help="warps of the persistent grid")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--flush-cost", type=float, default=398.6 / 138.1)
    ap.add_argument("--h-slope", type=float, default=213 / 191 - 1)
    ap.add_argument("--mix", default="mod,blocks,perm")
    ap.add_argument("--lpt", action="store_true")
    args = ap.parse_args(argv)
    mixed_cursors, patterns = _mixed_cursors()
    from replayssm_trtllm.bench.gdn import SHAPES
    if args.shape not in SHAPES:
        print(f"readout_warp_balance: --shape {args.shape!r}: expected one of {sorted(SHAPES)}", file=sys.stderr)
        return 2
    if args.batch < 1 or args.window < 2 or args.warps < 1 or args.sms < 1:
        print("readout_warp_balance: --batch, --warps and --sms must be positive and --window at least 2",
              file=sys.stderr)
        return 2
    if args.flush_cost <= 0 or args.h_slope < 0:
        print(f"readout_warp_balance: --flush-cost {args.flush_cost} / --h-slope {args.h_slope}: expected a "
              "positive flush cost and a non-negative slope", file=sys.stderr)
        return 2
    mixes = [m.strip() for m in args.mix.split(",") if m.strip()]
    bad = [m for m in mixes if m not in patterns]
    if bad or not mixes:
        print(f"readout_warp_balance: --mix {bad or args.mix!r}: expected names from {list(patterns)}", file=sys.stderr)
        return 2
    sh = SHAPES[args.shape]
    per_row = sh["HV"] * (sh["V"] // 8)
    L = args.window
    print(f"# {args.shape} B={args.batch} L={L}: {args.batch * per_row} items over {args.warps} warps; flush item "
          f"{args.flush_cost:.3f}, h-slope {args.h_slope:.3f} (model, not a measurement)")
    for m in mixes:
        h0 = mixed_cursors(m, args.batch, L)
        warp_r, sm_r = [], []
        for step in range(L):
            costs = item_costs([(h + step) % L for h in h0], L, per_row, args.flush_cost, args.h_slope)
            w, s = walk_balance(costs, args.warps, sms=args.sms)
            warp_r.append(w)
            sm_r.append(s)
        print(f"mix {m:7s}: warp max/mean {sum(warp_r) / L:.4f} (worst step {max(warp_r):.4f}), "
              f"SM max/mean {sum(sm_r) / L:.4f}")
    if args.lpt:
        costs = item_costs(mixed_cursors("mod", args.batch, L), L, per_row, args.flush_cost, args.h_slope)
        print(f"balanced bound (LPT, step 0 of mod): warp max/mean {lpt_balance(costs, args.warps):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
