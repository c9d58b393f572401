"""Top SASS lines of one kernel by warp stall samples, from an Nsight Compute report with the SourceCounters
section (GPU machine):

    ncu --section SourceCounters -k regex:NAME -c 1 -o rep python3 ...
    python3 scripts/ncu_source_hotspots.py rep.ncu-rep [--top 30]

Prints the lines with the most sampled stalls (all reasons, and the largest reason columns), so a kernel's
latency sources can be read without the GUI.
"""
import argparse
import csv
import io
import subprocess
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    out = subprocess.run(["ncu", "-i", args.report, "--page", "source", "--csv", "--print-source", "sass"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return out.returncode
    rows = list(csv.reader(io.StringIO(out.stdout)))
    hdr_i = next(i for i, r in enumerate(rows) if any("Source" == c for c in r))
    hdr = rows[hdr_i]
    body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
    src = hdr.index("Source")
    samp = next(i for i, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All"))
    reasons = [i for i, c in enumerate(hdr) if c.startswith("stall_") or c.startswith("Stall ")]

    def num(v):
        try:
            return float(v.replace(",", ""))
        except ValueError:
            return 0.0
    total = sum(num(r[samp]) for r in body) or 1.0
    ex = next((i for i, c in enumerate(hdr) if c.startswith("Instructions Executed")), None)
    executed = sum(num(r[ex]) for r in body) if ex is not None else 0
    print(f"{len(body)} SASS lines, {total:.0f} stall samples, {executed:.0f} warp instructions executed")
    for r in sorted(body, key=lambda r: -num(r[samp]))[:args.top]:
        top = sorted(((num(r[i]), hdr[i]) for i in reasons), reverse=True)[:2]
        why = ", ".join(f"{n}={v:.0f}" for v, n in top if v > 0)
        print(f"{100 * num(r[samp]) / total:5.1f}%  {r[src].strip()[:90]:90s}  {why}")
    if ex is not None and executed > 0:
        ops = {}
        for r in body:
            toks = r[src].split()
            if toks and toks[0].startswith("@"):
                toks = toks[1:]
            if toks:
                op = toks[0].split(".")[0]
                ops[op] = ops.get(op, 0) + num(r[ex])
        print("executed by opcode:", ", ".join(f"{k} {100 * v / executed:.1f}%"
                                                for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:24]))
        print("most executed:")
        for r in sorted(body, key=lambda r: -num(r[ex]))[:args.top]:
            print(f"{num(r[ex]):12.0f}  {r[src].strip()[:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
