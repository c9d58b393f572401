#!/usr/bin/env python3
"""The dual-precision decode's split rule from scripts/dp_path_timing.py outputs, against the library's table.

    python3 scripts/dp_rule_suggest.py [--tol 0.02] [--markdown] LOG [LOG ...]

Each LOG is the output of one `scripts/dp_path_timing.py` run (GDN at one value-head count, or Mamba-2 at one shape:
its header line names it). Per (family, read format, tokens per step) it lists the measured points (B x heads: time
of the split path / the other path), the smallest measured B x heads from which the split path is at most 1 + TOL of
the other path at that point and at every larger one, on every shape measured ("suggested"; "never" if no such
point), the same per shape, and the library's entry (`rssm_dual_precision_split_min_batch_heads`, when the kernel
library loads; per shape because Mamba-2's FP8 entry depends on the head dim). It also lists the cases where the
automatic choice ("auto" column) took more than 1 + TOL of the faster explicit path. A suggestion from the timed
points only: check it against the table (dual_precision_decode_{gdn,mamba2}.cu) before changing it.
"""
import argparse
import collections
import re
import sys

_HDR_GDN = re.compile(r"^GDN HK (\d+) HV (\d+) V (\d+) K (\d+)")
_HDR_M2 = re.compile(r"^Mamba-2 (\S+) H (\d+) P (\d+) G (\d+) N (\d+)")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\d+) \|\s+(\S+)\s+(\S+)\s+(\S+) \|")


def parse(lines):
    """[(family, shape label, headdim, B, T, read, B x heads, auto, other, split)] from one or more logs' lines."""
    out, cur = [], None
    for line in lines:
        m = _HDR_GDN.match(line)
        if m:
            cur = ("gdn", f"HV{m.group(2)}", int(m.group(3)))
            continue
        m = _HDR_M2.match(line)
        if m:
            cur = ("mamba2", m.group(1), int(m.group(3)))
            continue
        m = _ROW.match(line)
        if m and cur is not None:
            B, T, read, bh = int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4))
            try:
                auto, other, split = (float(m.group(i)) for i in (5, 6, 7))
            except ValueError:
                continue
            out.append((cur[0], cur[1], cur[2], B, T, read, bh, auto, other, split))
    return out


def suggest(points, tol):
    """The smallest B x heads among `points` [(bh, ratio)] from which every point at or above it has ratio <= 1 + tol;
    None if there is none (the largest point is slower)."""
    best = None
    for bh in sorted({p[0] for p in points}, reverse=True):
        if all(r <= 1 + tol for b, r in points if b >= bh):
            best = bh
        else:
            break
    return best


def library_entry(family, read, T, headdim):
    try:
        sys.path.insert(0, ".")
        from replayssm_trtllm.ops import dual_precision as dp
        return dp.split_min_batch_heads(family, read, T, headdim)
    except Exception:  # no library here: the table is not shown
        return None


def report(rows, tol=0.02, library=library_entry):
    """Lines of the report (see the module doc)."""
    groups = collections.defaultdict(list)
    for fam, shape, hd, B, T, read, bh, auto, other, split in rows:
        if other > 0 and split == split and other == other:  # nan-safe
            groups[(fam, read, T)].append((shape, hd, bh, split / other))
    lines = ["| family | read | T | points (B x H: split / other) | suggested | per shape | library |",
             "|---|---|---|---|---|---|---|"]
    fmt = lambda v: "never" if v is None else str(v)  # noqa: E731
    for (fam, read, T) in sorted(groups):
        pts = sorted(groups[(fam, read, T)], key=lambda p: (p[2], p[0]))
        allp = [(p[2], p[3]) for p in pts]
        shapes = sorted({(p[0], p[1]) for p in pts})
        per = [f"{s}: {fmt(suggest([(p[2], p[3]) for p in pts if p[0] == s], tol))}" for s, _ in shapes]
        libs = sorted({str(library(fam, read, T, hd)) for _, hd in shapes})
        desc = ", ".join(f"{p[2]} {p[3]:.3f}" + (f" ({p[0]})" if len(shapes) > 1 else "") for p in pts)
        lines.append(f"| {fam} | {read} | {T} | {desc} | {fmt(suggest(allp, tol))} | {'; '.join(per)} | "
                     f"{' / '.join(libs)} |")
    off = [r for r in rows if r[7] > (1 + tol) * min(r[8], r[9])]
    lines.append("")
    lines.append(f"automatic choice more than {tol:.0%} above the faster path: {len(off)} of {len(rows)} cases")
    for fam, shape, hd, B, T, read, bh, auto, other, split in off:
        lines.append(f"  {fam} {shape} B={B} T={T} {read}: auto {auto:.2f} us, other {other:.2f}, split {split:.2f}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--tol", type=float, default=0.02, help="ratio slack counted as even (default 0.02)")
    args = ap.parse_args(argv)
    lines = []
    for path in args.logs:
        with open(path) as f:
            lines += f.read().splitlines()
    rows = parse(lines)
    if not rows:
        print("dp_rule_suggest.py: no dp_path_timing.py rows in the logs", file=sys.stderr)
        return 2
    print("\n".join(report(rows, args.tol)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
