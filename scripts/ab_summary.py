#!/usr/bin/env python3
"""Compact side-by-side table of scripts/ab_bench.sh output: one row per timed case, one column per process (setting).

    python3 scripts/ab_summary.py AB_OUTPUT.log        (scripts/ab_bench.sh prints it at its end)

Reads the "== FAMILY [SETTING] bench ARGS" headers and the timing lines under them ("<case> 463.64 us/step ..." from
bench mamba2, "<case>: 175.73 us ..." from bench gdn); cases that appear under no header are ignored. The last column
is the ratio of the second process to the first where both timed the case (e.g. switch / default).

Also reads the "sm clock (busy): N MHz ..." line that scripts/ab_bench.sh prints after each process when nvidia-smi
is there (the median SM clock over the samples in which a kernel was running), as a row of its own: a switch that
lowers the clock (tensor-core work did, twenty-sixth session) shows there.

    python3 scripts/ab_summary.py --clock SAMPLES.csv  (nvidia-smi "clocks.sm, utilization.gpu" samples -> that line)

    python3 scripts/ab_summary.py --by-kind AB_OUTPUT.log

groups the cases of an A/B whose processes cycle through its settings (A B A B ..., as scripts/pdl_chain_sweep.sh runs
them, or A B C A B C ...) by step kind, tokens and batch (the shapes, phases and acceptance patterns of one group
pooled): per later setting and group the number of cases and the smallest, median and largest ratio of that setting
to the first, each case's ratio being the sum of its processes of that setting over the sum of its first-setting
processes. Kinds: "conventional", "per-draft", "replay vN standard",
"replay vN verify" (N the variant in the case, -1 the automatic choice).
"""
from __future__ import annotations

import re
import sys

HEADER = re.compile(r"^== (\S+) \[(.*)\] bench")
TIMING = re.compile(r"^(?P<case>.+?)[ :]+(?P<us>[0-9]+\.[0-9]+) us(/step)?\b")
CLOCK = re.compile(r"^sm clock \(busy\): (?P<mhz>[0-9]+) MHz")
CLOCK_CASE = "(SM clock while busy, MHz: median)"


def clock_line(samples, busy_pct=50):
    """The summary line of nvidia-smi samples "clocks.sm, utilization.gpu" (csv, no header, no units): the median SM
    clock over the samples with utilization >= busy_pct, or a line saying there were none."""
    busy = []
    for row in samples:
        parts = [x.strip() for x in row.split(",")]
        if len(parts) < 2:
            continue
        try:
            mhz, util = float(parts[0]), float(parts[1])
        except ValueError:
            continue
        if util >= busy_pct:
            busy.append(mhz)
    if not busy:
        return "sm clock (busy): no busy samples"
    busy.sort()
    mid = len(busy) // 2
    med = busy[mid] if len(busy) % 2 else (busy[mid - 1] + busy[mid]) / 2
    return f"sm clock (busy): {med:.0f} MHz median, {busy[0]:.0f}-{busy[-1]:.0f} MHz, {len(busy)} samples"


def parse(lines):
    """[(column label, {case: us})] in process order."""
    cols = []
    for line in lines:
        line = line.rstrip("\n")
        m = HEADER.match(line)
        if m:
            cols.append((f"{m.group(1)} [{m.group(2)}]", {}))
            continue
        m = CLOCK.match(line)
        if m and cols:
            cols[-1][1].setdefault(CLOCK_CASE, float(m.group("mhz")))
            continue
        m = TIMING.match(line)
        if m and cols and "best" not in m.group("case"):
            case = re.sub(r"\s+", " ", m.group("case")).strip()
            cols[-1][1].setdefault(case, float(m.group("us")))
    return cols


def table(cols):
    """Markdown-ish rows: per family, the cases in first-seen order."""
    out = []
    fams = []
    for label, _ in cols:
        fam = label.split(" ", 1)[0]
        if fam not in fams:
            fams.append(fam)
    for fam in fams:
        fc = [(label, d) for label, d in cols if label.split(" ", 1)[0] == fam]
        cases = []
        for _, d in fc:
            cases += [c for c in d if c not in cases]
        if not cases:
            continue
        heads = [f"{i + 1}: {label.split(' ', 1)[1]}" for i, (label, _) in enumerate(fc)]
        out.append(f"# {fam}: us per step; columns = processes in order")
        out.append("| case | " + " | ".join(heads) + " | 2 / 1 |")
        for case in cases:
            vals = [d.get(case) for _, d in fc]
            cells = ["" if v is None else f"{v:.1f}" for v in vals]
            ratio = f"{vals[1] / vals[0]:.3f}" if len(vals) > 1 and vals[0] and vals[1] else ""
            out.append(f"| {case} | " + " | ".join(cells) + f" | {ratio} |")
    return out


CASE_KEY = re.compile(r"^\S+ B=(?P<B>\d+) L=\d+ T=(?P<T>\d+) (?P<rest>.*)$")


def case_kind(case):
    """(kind, T, B) of a bench case line, or None for lines that are no step (the clock row, ring-24 extras)."""
    m = CASE_KEY.match(case)
    if not m or "not a target" in case:
        return None
    rest, T = m.group("rest"), int(m.group("T"))
    if "per-draft" in rest:
        kind = "per-draft"
    elif "conventional" in rest:
        kind = "conventional"
    else:
        v = re.search(r" v(-?\d+)", rest)
        if not v or "replay" not in rest:
            return None
        kind = f"replay v{v.group(1)} " + ("standard" if T == 1 else "verify")
    return kind, T, int(m.group("B"))


def by_kind(cols):
    """Rows "| kind | T | B | cases | min | median | max |" of each later setting over the first (see the module doc),
    one table per later setting, or [] unless the processes cycle through two or more settings (A B A B ...,
    A B C A B C ...) at least once."""
    labels = [label for label, _ in cols]
    settings = list(dict.fromkeys(labels))
    n = len(settings)
    if n < 2 or any(labels[i] != settings[i % n] for i in range(len(labels))):
        return []
    cases = []
    for _, d in cols:
        cases += [c for c in d if c not in cases]
    out = []
    for k in range(1, n):
        groups = {}
        for case in cases:
            key = case_kind(case)
            a = [d.get(case) for i, (_, d) in enumerate(cols) if i % n == 0]
            b = [d.get(case) for i, (_, d) in enumerate(cols) if i % n == k]
            if key is None or not b or None in a or None in b or not sum(a):
                continue
            groups.setdefault(key, []).append(sum(b) / sum(a))
        out += [f"# {settings[k]} / {settings[0]}: ratio per case = sum over its processes; lower = {settings[k]} faster",
                "| kind | T | B | cases | min | median | max |", "|---|---|---|---|---|---|---|"]
        if not groups:
            out.append("| (no step case was timed by every process of both settings: see the processes' output) "
                       "| | | | | | |")
        for (kind, T, B) in sorted(groups, key=lambda key: (key[0], key[1], key[2])):
            r = sorted(groups[(kind, T, B)])
            med = r[len(r) // 2] if len(r) % 2 else (r[len(r) // 2 - 1] + r[len(r) // 2]) / 2
            out.append(f"| {kind} | {T} | {B} | {len(r)} | {r[0]:.3f} | {med:.3f} | {r[-1]:.3f} |")
    return out


def main(argv) -> int:
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) >= 2 and argv[1].startswith("-") and argv[1] not in ("--clock", "--by-kind"):
        print(f"ab_summary: unknown option {argv[1]} (see --help)", file=sys.stderr)
        return 2
    if len(argv) == 3 and argv[1] == "--clock":
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            print(clock_line(f))
        return 0
    if len(argv) == 3 and argv[1] == "--by-kind":
        with open(argv[2], encoding="utf-8", errors="replace") as f:
            rows = by_kind(parse(f))
        print("\n".join(rows) if rows else "ab_summary --by-kind: needs processes cycling through two or more settings")
        return 0 if rows else 1
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        cols = parse(f)
    rows = table(cols)
    print("\n".join(rows) if rows else "ab_summary: no timing lines found")
    for line in silent_processes(cols):
        print(line)
    return 0


def silent_processes(cols):
    """One warning line per process that printed no timing line (a bench that stopped early: its error is in the
    process's output above the table; the fifty-fifth session's gdn processes printed only a TypeError)."""
    return [f"WARNING: process {i + 1} {label.split(' ', 1)[1]} printed no timing line"
            for i, (label, d) in enumerate(cols) if not [c for c in d if c != CLOCK_CASE]]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
