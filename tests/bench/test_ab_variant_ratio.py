"""scripts/ab_variant_ratio.py: split / stream time ratios from scripts/ab_bench.sh logs and the suggested
RSSM_GDN_SPLIT_MIN_BH value (CPU)."""
from __future__ import annotations

import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ab_variant_ratio.py"
_spec = importlib.util.spec_from_file_location("ab_variant_ratio", _PATH)
avr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(avr)


def _log(times):
    """One ab_bench process: {(shape, B, T): (us v4, us v6)} as the bench's timing lines."""
    out = ["== gdn [-] bench --variants 4,6", "# NVIDIA H100 80GB HBM3: copy bandwidth 3032 GB/s (read + write)"]
    for (shape, B, T), (v4, v6) in times.items():
        out.append(f"{shape} B={B} L=16 T={T} conventional v4: {2 * v4:.2f} us 815 GB/s (26.9% of copy)")
        for v, us in (("4", v4), ("6", v6)):
            if T == 1:
                out.append(f"{shape} B={B} L=16 T=1 replay v{v} inphase : {us:.2f} us speedup 1.400x 70.0% of copy")
                out.append(f"{shape} B={B} L=16 T=1 replay v{v} staggered: {us * 1.02:.2f} us speedup 1.380x")
                out.append(f"{shape} B={B} L=16 T=1 replay v{v} inphase on the ring of capacity 24 (not a target): "
                           f"{us * 5:.2f} us speedup 1.000x")
            else:
                for acc in ("all", "one"):
                    out.append(f"{shape} B={B} L=16 T={T} replay verify v{v} {acc} inphase : {us:.2f} us (1.0x std)")
        out.append(f"{shape} B={B} L=16 T={T} replay verify best all inphase : v6 {v6:.2f} us (1.0x std step)")
    return out


TIMES = {
    ("q35-4b", 8, 1): (10.0, 12.0), ("q35-4b", 16, 1): (20.0, 19.0), ("q35-4b", 32, 1): (40.0, 38.0),
    ("q35-122b", 8, 1): (20.0, 20.4), ("q35-122b", 16, 1): (40.0, 39.0),
    ("q35-4b", 8, 4): (30.0, 27.0), ("q35-4b", 16, 4): (60.0, 60.6), ("q35-4b", 32, 4): (120.0, 90.0),
    ("q35-4b", 8, 2): (10.0, 11.0), ("q35-4b", 32, 2): (40.0, 41.0),
}


def test_ratios_per_shape_batch_tokens():
    r = avr.ratios_of(_log(TIMES))
    assert set(r) == set(TIMES)
    # standard: in phase and staggered (same ratio), the larger-ring case left out; verify: all and one
    assert [round(x, 9) for x in r[("q35-4b", 8, 1)]] == [1.2, 1.2] and len(r[("q35-4b", 8, 4)]) == 2
    assert abs(r[("q35-4b", 32, 4)][0] - 0.75) < 1e-12
    # two processes: process i against process i
    both = avr.ratios_of(_log(TIMES) + _log({k: (v4, v4) for k, (v4, _) in TIMES.items()}))
    assert sorted(round(x, 9) for x in both[("q35-4b", 8, 1)]) == [1.0, 1.0, 1.2, 1.2]


def test_suggest_rule():
    s = avr.suggest(avr.ratios_of(_log(TIMES)))
    values = [int(x) for x in s.split("=", 1)[1].split(",")]
    # T = 1: at 512 q35-4b wins (0.95) but q35-122b (8 x 64) loses (1.02): from 1024, where both win
    assert values[0] == 1024
    # T = 2: never wins -> never; T = 3 (not measured) takes T = 2's value
    assert values[1] == values[2] == avr.NEVER
    # T = 4: wins at 256 and 1024 but not at 512: the walk down stops at 512 -> 1024; T = 5..8 inherit it
    assert values[3:] == [1024] * 5
    # a margin of 10% leaves only T = 4 at 1024 (0.75)
    m = [int(x) for x in avr.suggest(avr.ratios_of(_log(TIMES)), margin=0.1).split("=", 1)[1].split(",")]
    assert m[0] == avr.NEVER and m[3] == 1024


def test_suggest_worst_case_rule():
    """--worst: every case of a point must win (the fifty-sixth session's T = 2 decision: at 3072 the mean won, one
    case lost by 2.5%); the mean rule takes the lower point."""
    r = {("q35-122b", 48, 2): [0.96, 0.99, 1.025], ("q35-4b", 128, 2): [0.92, 1.0], ("q35-4b", 256, 2): [0.92, 0.97]}
    mean = int(avr.suggest(r).split("=", 1)[1].split(",")[1])
    worst = int(avr.suggest(r, worst=True).split("=", 1)[1].split(",")[1])
    assert (mean, worst) == (3072, 4096)
