#!/usr/bin/env python3
"""Time ratio of two GDN replay kernel designs per shape, batch and token count, from scripts/ab_bench.sh logs.

    python3 scripts/ab_variant_ratio.py [--num 6] [--den 4] [--markdown] AB_LOG [AB_LOG ...]

Each log is the output of `scripts/ab_bench.sh gdn "--variants 4,6 ..."` (one or more processes). Per (shape, B, T)
it prints the smallest and largest ratio us(variant NUM) / us(variant DEN) over the timed replay cases (standard rows
in phase / staggered; verify all / one / mixed acceptance, in phase / staggered; cases on a larger ring are left
out), ordered by T and batch x value heads: the table behind the automatic design's split rule
(gdn_launch.cu kSplitMinBatchHeads, fifty-second session). Each process's time is used as it stands (a case timed
by several processes gives several ratios).
"""
import argparse
import collections
import os
import re
import subprocess
import sys

_HV = {"q35-4b": 32, "q35-122b": 64}
_ROW = re.compile(r"\| (q35-\S+) B=(\d+) L=\d+ T=(\d+) (?:replay verify|replay) v(\d) ?(.*?) \|(.*)")


def _cases(path):
    """(shape, B, T, case) -> {variant: [us per process]} from one ab_bench log via scripts/ab_summary.py."""
    summary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab_summary.py")
    out = subprocess.run([sys.executable, summary, path], capture_output=True, text=True, check=True).stdout
    rows = collections.defaultdict(dict)
    for line in out.splitlines():
        m = _ROW.match(line)
        if not m or "capacity" in line:
            continue
        shape, B, T, v, case, rest = m.groups()
        vals = []
        for cell in rest.split("|"):
            try:
                vals.append(float(cell))
            except ValueError:
                continue
        # ab_summary prints a last ratio column when two or more processes ran: keep the us columns only
        n = len(vals) - 1 if len(vals) >= 3 else len(vals)
        rows[(shape, int(B), int(T), case.strip())][v] = vals[:max(n, 1)]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num", default="6", help="variant in the numerator (default 6, the split kernels)")
    ap.add_argument("--den", default="4", help="variant in the denominator (default 4, the stream kernel)")
    ap.add_argument("--markdown", action="store_true", help="one markdown table, a column per shape")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    ratios = collections.defaultdict(list)
    for path in a.logs:
        for (shape, B, T, case), d in _cases(path).items():
            if a.num in d and a.den in d:
                ratios[(shape, B, T)] += [x / y for x, y in zip(d[a.num], d[a.den])]
    if not ratios:
        sys.exit(f"no case timed with both v{a.num} and v{a.den} in {a.logs}")
    key = lambda k: (k[2], _HV.get(k[0], 0) * k[1], k[0])
    if a.markdown:
        cells = collections.defaultdict(dict)
        for (shape, B, T), r in ratios.items():
            cells[(T, _HV.get(shape, 0) * B)][shape] = f"{min(r):.3f}-{max(r):.3f} (B = {B})"
        shapes = sorted({k[0] for k in ratios})
        print(f"| T | B x HV | " + " | ".join(shapes) + " |")
        print("|---|---|" + "---|" * len(shapes))
        for T, bh in sorted(cells):
            print(f"| {T} | {bh} | " + " | ".join(cells[(T, bh)].get(s, "") for s in shapes) + " |")
        return
    for (shape, B, T) in sorted(ratios, key=key):
        r = ratios[(shape, B, T)]
        print(f"T={T} BxHV={_HV.get(shape, 0) * B:5d} {shape:8s} B={B:3d}  v{a.num}/v{a.den} min {min(r):.3f} "
              f"max {max(r):.3f}  n={len(r)}")


if __name__ == "__main__":
    main()
