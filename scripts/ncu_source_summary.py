"""Summarize Nsight Compute source-counter exports: where the stall samples of each kernel launch are.

    ncu --clock-control none --nvtx --nvtx-include "prof/" --section SourceCounters -o rep python3 <script> ...
    ncu -i rep.ncu-rep --page source --csv --print-source cuda,sass > src.csv
    python3 scripts/ncu_source_summary.py src.csv [--kernel Replay] [--top 20] [--file gdn_stream_kernels.cuh]
                                          [--phases "209:preload,340:loads,..."] [--instructions]

Per launch of the kernels whose name contains --kernel: total samples, samples per stall reason, the top source lines
(file:line, source text, the two largest stall reasons), and with --phases the samples per range of lines of --file
(each "last_line:name" closes a phase; lines of other files are "other files"). A launch starts where a (file, line)
of the same kernel repeats. Used in the sixteenth session for the GDN B = 1 step (docs/kernels-gdn.md).
--instructions ranks the lines (and sums the phases) by warp instructions executed instead of stall samples: where an
instruction-bound kernel's work goes (the thirtieth session's T = 4 preps). The export may be xz-compressed
(src.csv.xz, as the CSVs under docs/logs/ncu/ are).
"""
from __future__ import annotations

import argparse
import collections
import csv
import io
import lzma
import sys


def _open_text(path):
    """The export as text, read through xz when the name ends in .xz."""
    if str(path).endswith(".xz"):
        return io.TextIOWrapper(lzma.open(path, "rb"), newline="")
    return open(path, newline="")


def _count(text):
    """An integer cell of the export ("1,234", "-" or empty for none)."""
    text = (text or "").replace(",", "")
    return int(text) if text.isdigit() else 0


def parse(path, kernel):
    """Rows of the kernels matching `kernel`: (function, file, line, source, samples, {stall reason: samples},
    warp instructions executed)."""
    fp = fn = hdr = None
    out = []
    with _open_text(path) as f:
        for r in csv.reader(f):
            if not r:
                continue
            if r[0] == "File Path":
                fp = r[1]
                continue
            if r[0] == "Function Name":
                fn = r[1]
                continue
            if r[0] == "Line No":
                hdr = r
                continue
            if hdr is None or fn is None or not r[0].isdigit() or kernel not in fn:
                continue
            rec = dict(zip(hdr, r))
            stalls = {k: int(v) for k, v in zip(hdr, r)
                      if k.startswith("stall_") and "(Not" not in k and v.isdigit()}
            out.append((fn, fp, int(r[0]), r[1], _count(rec.get("Warp Stall Sampling (All Samples)")), stalls,
                        _count(rec.get("Instructions Executed"))))
    return out


def split_launches(rows):
    launches, seen = [], set()
    for row in rows:
        key = (row[0], row[1], row[2])
        if not launches or key in seen:
            launches.append([])
            seen = set()
        seen.add(key)
        launches[-1].append(row)
    return launches


def parse_phases(spec):
    phases = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        last, name = item.split(":", 1)
        phases.append((int(last), name))
    return sorted(phases)


def summarize(launch, top, file_sub, phases, instructions=False):
    """Report lines of one launch, ranked by stall samples (or, with `instructions`, by warp instructions executed)."""
    key = 6 if instructions else 4
    unit = "warp instructions" if instructions else "samples"
    lines = []
    total = sum(r[key] for r in launch)
    reasons = collections.Counter()
    for r in launch:
        reasons.update(r[5])
    lines.append(f"launch of {launch[0][0][:90]}: {total} {unit}")
    lines.append("  stall reasons: " + ", ".join(f"{k[6:]} {v}" for k, v in reasons.most_common(8) if v))
    for r in sorted(launch, key=lambda r: -r[key])[:top]:
        if r[key] == 0:
            break
        two = ", ".join(f"{k[6:]} {v}" for k, v in collections.Counter(r[5]).most_common(2) if v)
        lines.append(f"  {r[key]:5d} {100.0 * r[key] / max(total, 1):5.1f}%  {r[1].split('/')[-1]}:{r[2]}  "
                     f"{r[3].strip()[:70]}  [{two}]")
    if phases:
        per = collections.Counter()
        for r in launch:
            if file_sub and file_sub in r[1]:
                name = next((n for last, n in phases if r[2] <= last), phases[-1][1])
            else:
                name = "other files"
            per[name] += r[key]
        lines.append("  phases: " + ", ".join(f"{n} {v}" for n, v in per.items()))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--kernel", default="", help="substring of the kernel's function name")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--file", default="", help="substring of the source file the phases refer to")
    ap.add_argument("--phases", default="", help='comma list of "last_line:name"')
    ap.add_argument("--instructions", action="store_true",
                    help="rank lines and sum phases by warp instructions executed instead of stall samples")
    a = ap.parse_args(argv)
    rows = parse(a.csv, a.kernel)
    if not rows:
        print(f"no source rows for kernels matching {a.kernel!r} in {a.csv}", file=sys.stderr)
        return 1
    for launch in split_launches(rows):
        print("\n".join(summarize(launch, a.top, a.file, parse_phases(a.phases), a.instructions)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
