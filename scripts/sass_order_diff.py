"""Compare two SASS listings of one kernel outside given source-line ranges: how many instructions each has there,
which opcodes differ in count, and how many stay in the same order (difflib over the opcode sequences).

    # each instance in its own cubin with line info, disassembled with nvdisasm -g (scripts/sass_tile_loop.py says how)
    python3 scripts/sass_order_diff.py a.sass b.sass --exclude gdn_split_kernels.cuh:792-890 \
        --exclude stream_rows.cuh:77-82 --exclude stream_rows.cuh:189-250

An instruction belongs to the source line of the last `//## File "...", line N` note before it (the innermost inlined
location, so a helper shared by the excluded and the kept code counts as kept). Static only: it says whether the
compiler emitted and ordered the kept code alike in both instances, not what either costs at run time.
"""
from __future__ import annotations

import argparse
import collections
import difflib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_tile_loop  # noqa: E402  (the listing parser: scripts/sass_tile_loop.py)


def load(path: str) -> list[tuple[str, tuple[str, int] | None]]:
    """(opcode, (file basename, line)) of every instruction of an `nvdisasm -g` listing, in address order."""
    with open(path) as f:
        blocks, _ = sass_tile_loop.parse_blocks(f)
    return [(sass_tile_loop._opcode(text), (os.path.basename(loc[0]), loc[1]) if loc else None)
            for block in blocks for _, text, loc in block]


def parse_range(spec: str) -> tuple[str, int, int]:
    name, _, lines = spec.rpartition(":")
    lo, _, hi = lines.partition("-")
    if not name or not lo.isdigit() or not (hi or lo).isdigit():
        raise argparse.ArgumentTypeError(f"--exclude wants FILE:FIRST-LAST (or FILE:LINE), got {spec!r}")
    return name, int(lo), int(hi or lo)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--exclude", type=parse_range, action="append", default=[], metavar="FILE:FIRST-LAST")
    args = ap.parse_args()

    def kept(loc) -> bool:
        return loc is not None and not any(loc[0] == f and lo <= loc[1] <= hi for f, lo, hi in args.exclude)

    seqs = []
    for path in (args.a, args.b):
        ins = load(path)
        if not ins:
            raise SystemExit(f"error: no SASS instructions in {path} (expected an nvdisasm -g listing)")
        seq = [op for op, loc in ins if kept(loc)]
        print(f"{path}: {len(ins)} instructions, {len(seq)} outside the excluded lines")
        seqs.append(seq)
    ca, cb = (collections.Counter(s) for s in seqs)
    diff = sorted(((op, cb[op] - ca[op]) for op in set(ca) | set(cb) if ca[op] != cb[op]), key=lambda kv: -abs(kv[1]))
    print("opcode count changes (b - a):", ", ".join(f"{op} {d:+d}" for op, d in diff) or "none")
    sm = difflib.SequenceMatcher(a=seqs[0], b=seqs[1], autojunk=False)
    same = sum(i2 - i1 for tag, i1, i2, _, _ in sm.get_opcodes() if tag == "equal")
    print(f"in the same order: {same} of {len(seqs[0])} (a) / {len(seqs[1])} (b)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
