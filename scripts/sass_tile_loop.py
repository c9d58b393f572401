"""Static estimate of the instructions one iteration of a kernel's main loop issues, from its SASS, without a GPU.

    # one kernel instance in its own cubin (a .cu that includes the kernel header and instantiates it), with lines:
    nvcc -std=c++17 -O3 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -Icpp_plugins/kernels \
         -Icpp_plugins/include -lineinfo -cubin -o k.cubin one.cu
    nvdisasm -g -c k.cubin > k.sass          # nvdisasm: the nvidia-cuda-nvdisasm wheel carries it (nvidia/cu13/bin)
    python3 scripts/sass_tile_loop.py k.sass [other.sass ...] [--copies 2] [--lines 20]

The SASS is split into basic blocks (labels; branches, EXIT, BSSY / BSYNC / WARPSYNC end a block). The loop is the
strongly connected set of blocks that holds the most instructions of --anchor (default HMMA). Cold blocks are taken
out: the blocks a branch on a --skip-src line jumps over (default: the stage cursor's head change, `++tr == nt` in
common/read_mma_walk.cuh, taken once per head), the blocks holding a line of the function whose first line holds the
cold pattern (default: VectorFragments::build in common/read_mma.cuh, run when the key changes; its end is found by
matching braces in the source file the listing names), and the targets of BRA.DIV (the
divergent fall-backs). The rest, divided by --copies (the loop body's unrolled copies: 2 in the GDN read-copy readout),
is the estimate. It still counts blocks that the common path skips (e.g. later divergent fall-back blocks), so compare
estimates of variants of one kernel, not against counters: in the thirty-second session it read 411 for the GDN nvfp4
read-copy readout whose counters showed ~391 per tile in the loop (442 with the per-head work), and 392 for the change
that measured 422 (-4.6% in both).
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys

_LINE = re.compile(r'## File "([^"]+)", line (\d+)')
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_INS = re.compile(r"/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def _opcode(text: str) -> str:
    words = text.split()
    return words[1] if words[0].startswith("@") else words[0]


def parse_blocks(lines):
    """Basic blocks of an `nvdisasm -g -c` listing: lists of (address, text, (file, line) or None), and each label's
    address."""
    blocks, cur, where, pending, labels = [], [], None, [], {}
    for raw in lines:
        m = _LINE.search(raw)
        if m:
            where = (m.group(1), int(m.group(2)))
            continue
        m = _LABEL.match(raw)
        if m:
            if cur:
                blocks.append(cur)
                cur = []
            pending.append(m.group(1))
            continue
        m = _INS.search(raw)
        if not m:
            continue
        addr, text = int(m.group(1), 16), m.group(2).strip()
        for lab in pending:
            labels[lab] = addr
        pending = []
        cur.append((addr, text, where))  # NOPs stay in their blocks (labels may point at them), not in the counts
        if _opcode(text).startswith(("BRA", "EXIT", "RET", "BSYNC", "BSSY", "WARPSYNC", "CALL")):
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks, labels


def _successors(blocks, labels):
    first = {b[0][0]: i for i, b in enumerate(blocks)}
    succ = collections.defaultdict(set)
    for i, b in enumerate(blocks):
        text = b[-1][1]
        op, pred = _opcode(text), text.startswith("@")
        m = _TARGET.search(text)
        if op.startswith("BRA") and m and labels.get(m.group(1)) in first:
            succ[i].add(first[labels[m.group(1)]])
        unconditional_jump = op.startswith("BRA") and not pred
        if not unconditional_jump and not op.startswith(("EXIT", "RET")) and i + 1 < len(blocks):
            succ[i].add(i + 1)
    return succ, first


def _sccs(n, succ):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10000, 4 * n))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in range(n):
        if v not in index:
            visit(v)
    return out


def _body_end(path: str, start: int):
    """1-based line where the braces opened from line `start` of `path` close (a function's body), or None."""
    depth, opened = 0, False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for no, text in enumerate(f, 1):
                if no < start:
                    continue
                for ch in text:
                    if ch == "{":
                        depth, opened = depth + 1, True
                    elif ch == "}":
                        depth -= 1
                        if opened and depth == 0:
                            return no
    except OSError:
        return None
    return None


def _line_of(path: str, pattern: str, after: int = 0):
    """1-based number of the first line of `path` after line `after` that contains `pattern`, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for no, text in enumerate(f, 1):
                if no > after and pattern in text:
                    return no
    except OSError:
        return None
    return None


def estimate(lines, copies=2, anchor="HMMA", skip_src=("read_mma_walk.cuh", "if (++tr == nt)"),
             cold_src=("read_mma.cuh", "void build(")):
    """Returns (instructions per iteration, opcode counts per iteration, per-(file, line) counts per iteration)."""
    blocks, labels = parse_blocks(lines)
    succ, first = _successors(blocks, labels)
    loop = max(_sccs(len(blocks), succ), key=lambda comp: sum(_opcode(t).startswith(anchor)
                                                               for i in comp for _, t, _ in blocks[i]))
    loop = set(loop)
    files = {w[0] for b in blocks for _, _, w in b if w}
    skip_lines, cold_ranges = set(), []
    for path in files:
        base = os.path.basename(path)
        if base == skip_src[0]:
            no = _line_of(path, skip_src[1])
            if no:
                skip_lines.add((path, no))
        if base == cold_src[0]:
            a = _line_of(path, cold_src[1])
            b = _body_end(path, a) if a else None
            if a and b:
                cold_ranges.append((path, a, b))
    cold = set()
    for i in sorted(loop):
        b = blocks[i]
        last = b[-1]
        if last[1].startswith("@") and _opcode(last[1]).startswith("BRA") and last[2] in skip_lines:
            m = _TARGET.search(last[1])
            if m and labels.get(m.group(1)) in first:
                cold.update(range(i + 1, first[labels[m.group(1)]]))
        if any(w and w[0] == p and a <= w[1] <= e for _, _, w in b for p, a, e in cold_ranges):
            cold.add(i)
        if "BRA.DIV" in last[1]:
            m = _TARGET.search(last[1])
            if m and labels.get(m.group(1)) in first:
                cold.add(first[labels[m.group(1)]])
    hot = [i for i in sorted(loop) if i not in cold]
    ops, by_line = collections.Counter(), collections.Counter()
    n = 0
    for i in hot:
        for _, text, where in blocks[i]:
            if _opcode(text).startswith("NOP"):
                continue
            n += 1
            ops[_opcode(text).split(".")[0]] += 1
            by_line[(os.path.basename(where[0]), where[1]) if where else None] += 1
    scale = 1.0 / copies
    return (n * scale, {k: v * scale for k, v in ops.items()}, {k: v * scale for k, v in by_line.items()})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", nargs="+", help="nvdisasm -g -c listings of one kernel each")
    ap.add_argument("--copies", type=int, default=2, help="unrolled copies of the loop body (default 2)")
    ap.add_argument("--anchor", default="HMMA", help="opcode that marks the main loop (default HMMA)")
    ap.add_argument("--lines", type=int, default=0, help="also print the N source lines with the most instructions")
    a = ap.parse_args(argv)
    for path in a.sass:
        with open(path, encoding="utf-8", errors="replace") as f:
            n, ops, by_line = estimate(f.readlines(), copies=a.copies, anchor=a.anchor)
        top = " ".join(f"{k}:{v:g}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:16])
        print(f"{path}: ~{n:.1f} instructions per iteration  {top}")
        for (where, v) in sorted(by_line.items(), key=lambda kv: -kv[1])[:a.lines]:
            print(f"    {v:6.1f}  {where[0]}:{where[1]}" if where else f"    {v:6.1f}  (no line)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
