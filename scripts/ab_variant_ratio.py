#!/usr/bin/env python3
"""Time ratio of two GDN replay kernel designs per shape, batch and token count, from scripts/ab_bench.sh logs.

    python3 scripts/ab_variant_ratio.py [--num 6] [--den 4] [--markdown | --suggest [--worst]] AB_LOG [AB_LOG ...]

Each log is the output of `scripts/ab_bench.sh gdn "--variants 4,6 ..."` (one or more processes). Per (shape, B, T)
it prints the smallest and largest ratio us(variant NUM) / us(variant DEN) over the timed replay cases (standard rows
in phase / staggered; verify all / one / mixed acceptance, in phase / staggered; cases on a larger ring are left
out), ordered by T and batch x value heads: the table behind the automatic design's split rule
(gdn_launch.cu kSplitMinBatchHeads, fifty-second session). Each process's time is used as it stands (a case timed
by several processes gives several ratios).

--suggest prints a value for RSSM_GDN_SPLIT_MIN_BH (docs/switches.md) from the logs: per token count, the smallest
measured batch x value heads from which, at every larger measured point too, each shape's mean ratio is at most
1 - MARGIN (--margin, default 0); with --worst, each of its cases (phases, acceptance patterns, processes)
rather than their mean, the rule the fifty-sixth session's T = 2 entry was set by; a token count never reaching it
gets 2147483647 (never); one not measured takes the nearest measured smaller count's value (else the nearest larger
one). A suggestion from the timed points only: check it against the table (gdn_launch.cu) and time it before setting
it.
"""
import argparse
import collections
import functools
import importlib.util
import os
import re
import sys

_HV = {"q35-4b": 32, "q35-122b": 64}
_CASE = re.compile(r"(q35-\S+) B=(\d+) L=\d+ T=(\d+) (?:replay verify|replay) v(\d) ?(.*)$")


@functools.lru_cache(maxsize=None)
def _ab_summary():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab_summary.py")
    spec = importlib.util.spec_from_file_location("ab_summary", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cases(lines):
    """(shape, B, T, case) -> {variant: [us per process, in order]} from ab_bench output lines (the processes' timing
    lines as scripts/ab_summary.py reads them; cases on a larger ring left out)."""
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    for _label, timed in _ab_summary().parse(lines):
        for case, us in timed.items():
            m = _CASE.match(case)
            if not m or "capacity" in case:
                continue
            shape, B, T, v, rest = m.groups()
            rows[(shape, int(B), int(T), rest.strip())][v].append(us)
    return rows


def ratios_of(lines, num="6", den="4"):
    """(shape, B, T) -> [us(num) / us(den)] over cases and processes (process i's num against process i's den)."""
    out = collections.defaultdict(list)
    for (shape, B, T, _case), d in cases(lines).items():
        if num in d and den in d:
            out[(shape, B, T)] += [x / y for x, y in zip(d[num], d[den])]
    return out


NEVER = 2147483647
MAX_TOKENS = 8


def suggest(ratios, margin=0.0, worst=False):
    """RSSM_GDN_SPLIT_MIN_BH=... from {(shape, B, T): [ratio, ...]} (the rule in the module docstring; `worst`: a
    point's largest ratio per shape instead of its mean)."""
    by_t = collections.defaultdict(lambda: collections.defaultdict(dict))  # T -> B x HV -> shape -> mean ratio
    for (shape, B, T), r in ratios.items():
        by_t[T][_HV.get(shape, 0) * B][shape] = max(r) if worst else sum(r) / len(r)
    measured = {}
    for T, points in by_t.items():
        ok_from = NEVER
        for bh in sorted(points, reverse=True):  # walk down while every shape still wins
            if all(m <= 1.0 - margin for m in points[bh].values()):
                ok_from = bh
            else:
                break
        measured[T] = ok_from
    if not measured:
        raise SystemExit("no ratios to suggest from")
    out = []
    for T in range(1, MAX_TOKENS + 1):
        if T in measured:
            out.append(measured[T])
            continue
        lower = [t for t in measured if t < T]
        out.append(measured[max(lower)] if lower else measured[min(t for t in measured if t > T)])
    return "RSSM_GDN_SPLIT_MIN_BH=" + ",".join(str(v) for v in out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num", default="6", help="variant in the numerator (default 6, the split kernels)")
    ap.add_argument("--den", default="4", help="variant in the denominator (default 4, the stream kernel)")
    ap.add_argument("--markdown", action="store_true", help="one markdown table, a column per shape")
    ap.add_argument("--suggest", action="store_true", help="print an RSSM_GDN_SPLIT_MIN_BH value (see above)")
    ap.add_argument("--margin", type=float, default=0.0, help="--suggest: required gain (default 0)")
    ap.add_argument("--worst", action="store_true", help="--suggest: every case must win, not the mean")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    ratios = collections.defaultdict(list)
    for path in a.logs:
        with open(path) as f:
            for k, r in ratios_of(f.read().splitlines(), a.num, a.den).items():
                ratios[k] += r
    if not ratios:
        sys.exit(f"no case timed with both v{a.num} and v{a.den} in {a.logs}")
    if a.suggest:
        print(suggest(ratios, a.margin, a.worst))
        return
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
