"""One compact markdown table from a bench JSON (`replayssm-trtllm bench gdn|mamba2 ... --out FILE`): one line per
(shape, B, L, T), the fastest variant of each kernel kind, for the full grid of the issues' benchmark settings
(B in {1, 64, 256, 512}, L in {8, 16, 32}, T in {1, 2, 4, 8}), whose per-kernel rows are too many to read.

    python3 scripts/grid_table.py bench/results/2026-12-07-h200-gdn-grid.json

T = 1 lines: the conventional step and the window-amortized replay step in phase / staggered (us, and the speedup
over the conventional step). T > 1 lines: the per-draft-snapshot verify and the replay verify with all / one / mixed
acceptance, each as a multiple of one conventional standard step of the same (shape, B), timed in the same (shape, B,
L) block when the block has one (the issues' ratio); for GDN the replay verify is timed in phase and staggered, and
the table shows the slower of the two. Below the table: every (shape, B) whose conventional step differs by more than
5% between its L blocks (a slow block's ratios are flattered by its slower baseline). The last column is the
achieved bandwidth of the kernels shown, as a fraction of the run's measured copy bandwidth (the bench's `copy_frac`:
the step's compulsory bytes over its time, against the copy kernel's bytes read + written over its time): the
conventional step, then the replay cases in the order of the replay column.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

Key = Tuple[str, int, int, int]
COPY = "@copy"  # suffix of the fraction-of-copy entries in fastest()'s table


def _gdn_kind(r: Mapping) -> Optional[str]:
    k = r.get("kernel")
    if k == "conventional":
        return "conv"
    if k == "conventional_perdraft":
        return "perdraft"
    if k == "replay_standard":
        return "std_" + str(r.get("phase"))
    if k == "replay_speculative":
        return "spec_" + str(r.get("accept"))
    return None  # peers and the not-a-target ring-24 lines


def _mamba2_kind(r: Mapping) -> Optional[str]:
    k = str(r.get("kernel", ""))
    if k.startswith("conventional per-draft snapshots"):
        return "perdraft"
    if k.startswith("conventional"):
        return "conv"
    if "ring 24" in k:
        return None
    if k.startswith("replay standard in-phase"):
        return "std_inphase"
    if k.startswith("replay standard staggered"):
        return "std_staggered"
    for acc in ("all", "one", "mixed"):
        if k.startswith(f"replay verify {acc}-accepted"):
            return "spec_" + acc
    return None  # FlashInfer lines


def fastest(rows: Iterable[Mapping], family: str) -> Dict[Key, Dict[str, float]]:
    """{(shape, B, L, T): {kind: us}}: the fastest row of each kernel kind (for GDN's replay verify: the slower of
    its in-phase and staggered cases, each the fastest over variants). The chosen row's fraction of copy bandwidth
    is kept under `kind + COPY` when the row has one."""
    best: Dict[Tuple[Key, str, str], float] = {}
    frac: Dict[Tuple[Key, str, str], Optional[float]] = {}
    for r in rows:
        kind = _gdn_kind(r) if family == "gdn" else _mamba2_kind(r)
        if kind is None:
            continue
        us = float(r["us"] if family == "gdn" else r["us_per_step"])
        key = (str(r["shape"]), int(r["B"]), int(r["L"]), int(r["T"]))
        phase = str(r.get("phase")) if family == "gdn" and kind.startswith("spec_") else ""
        k3 = (key, kind, phase)
        if k3 not in best or us < best[k3]:
            best[k3] = us
            frac[k3] = float(r["copy_frac"]) if r.get("copy_frac") is not None else None
    out: Dict[Key, Dict[str, float]] = defaultdict(dict)
    for k3, us in best.items():
        key, kind, _phase = k3
        if us >= out[key].get(kind, 0.0):
            out[key][kind] = us
            out[key].pop(kind + COPY, None)
            if frac[k3] is not None:
                out[key][kind + COPY] = frac[k3]
    return dict(out)


def conventional_step(table: Mapping[Key, Mapping[str, float]], shape: str, B: int,
                      L: Optional[int] = None) -> Optional[float]:
    """One conventional standard step of (shape, B): the T = 1 line of the same window L when there is one (the
    benches time the conventional kernel again in every (shape, B, L) block, on that block's buffers, and the verify
    ratios are side by side with it), else the first window's figure. The conventional kernel does not depend on L,
    but its time can differ between blocks: on the sixty-seventh session's H100 grid, 371 us in one q35-4b B = 256
    block against 428-429 us in the other two."""
    if L is not None:
        kinds = table.get((shape, B, L, 1), {})
        if "conv" in kinds:
            return kinds["conv"]
    for (s, b, _L, T), kinds in sorted(table.items()):
        if s == shape and b == B and T == 1 and "conv" in kinds:
            return kinds["conv"]
    return None


def markdown(table: Mapping[Key, Mapping[str, float]]) -> str:
    lines = ["| shape | B | L | T | conventional standard step (us) | per-draft verify (x std) | "
             "replay: standard in phase / staggered (us, speedup) or verify all / one / mixed (x std) | "
             "% of copy: conventional (T = 1) or per-draft (T > 1); replay as listed |",
             "|---|---|---|---|---|---|---|---|"]

    def f(x: Optional[float], fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    def pct(kinds: Mapping[str, float], kind: str) -> str:
        x = kinds.get(kind + COPY)
        return "-" if x is None else f"{100.0 * x:.1f}"

    for key in sorted(table, key=lambda k: (k[0], k[1], k[2], k[3])):
        shape, B, L, T = key
        kinds = table[key]
        std = conventional_step(table, shape, B, L)
        replay_kinds = ("std_inphase", "std_staggered") if T == 1 else ("spec_all", "spec_one", "spec_mixed")
        copy_cell = f"{pct(kinds, 'conv') if T == 1 else pct(kinds, 'perdraft')}; " + \
            " / ".join(pct(kinds, k) for k in replay_kinds)
        if T == 1:
            conv = kinds.get("conv")
            cells = []
            for ph in ("std_inphase", "std_staggered"):
                us = kinds.get(ph)
                cells.append("-" if us is None else f"{us:.2f} ({(conv / us if conv else float('nan')):.3f}x)")
            lines.append(f"| {shape} | {B} | {L} | 1 | {f(conv, '.2f')} | - | {' / '.join(cells)} | {copy_cell} |")
        else:
            def ratio(kind: str) -> str:
                us = kinds.get(kind)
                return "-" if us is None or not std else f"{us / std:.3f}"
            lines.append(f"| {shape} | {B} | {L} | {T} | {f(std, '.2f')} | {ratio('perdraft')} | "
                         f"{ratio('spec_all')} / {ratio('spec_one')} / {ratio('spec_mixed')} | {copy_cell} |")
    return "\n".join(lines)


def baseline_spread(table: Mapping[Key, Mapping[str, float]], threshold: float = 0.05) -> List[str]:
    """One line per (shape, B) whose conventional step differs between its L blocks by more than `threshold` of the
    fastest: the kernel does not depend on L, so such a spread means a block's baseline was slow (the sixty-seventh
    session's H100 grid: 371 against 428 us), and that block's ratios are flattered by it."""
    by_sb: Dict[Tuple[str, int], Dict[int, float]] = defaultdict(dict)
    for (shape, B, L, T), kinds in table.items():
        if T == 1 and "conv" in kinds:
            by_sb[(shape, B)][L] = kinds["conv"]
    out = []
    for (shape, B), per_L in sorted(by_sb.items()):
        fast = min(per_L.values())
        slow = {L: us for L, us in sorted(per_L.items()) if us > fast * (1.0 + threshold)}
        if slow:
            out.append(f"{shape} B = {B}: the conventional step took {fast:.2f} us in its fastest block but "
                       + ", ".join(f"{us:.2f} us (+{100.0 * (us / fast - 1.0):.0f}%) at L = {L}"
                                   for L, us in slow.items())
                       + "; those blocks' ratios are taken against a slower baseline")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="a bench JSON (gdn: key 'results'; mamba2: key 'rows')")
    args = ap.parse_args(argv)
    with open(args.json) as fh:
        d = json.load(fh)
    if "results" in d:
        family, rows = "gdn", d["results"]
    elif "rows" in d:
        family, rows = "mamba2", d["rows"]
    else:
        print(f"{args.json}: neither 'results' (gdn) nor 'rows' (mamba2) in the JSON", file=sys.stderr)
        return 2
    table = fastest(rows, family)
    if not table:
        print(f"{args.json}: no timed rows", file=sys.stderr)
        return 1
    print(f"{family}: {d.get('gpu', '?')}, commit {d.get('git_commit', '?')}, `{d.get('command', '?')}`"
          f"{'' if d.get('complete', True) else ' (INCOMPLETE: the run stopped before its end)'}\n")
    print(markdown(table))
    spread = baseline_spread(table)
    if spread:
        print("\nThe conventional kernel does not depend on L, yet its time differed between blocks by more than 5%:")
        for line in spread:
            print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
