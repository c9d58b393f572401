"""Is the conventional GDN step's time set by where its buffers lie, or by what ran before it? (docs/kernels-gdn.md
"Sixty-seventh session", Next 2.)

The sixty-seventh session's H100 grid timed the same conventional kernel (decode design 6) at 80.8-83.3% of copy in
12 of its 18 B >= 64 blocks and at 92.0-95.8% in the other six, in the same pattern on both shapes (q35-4b B = 256:
371.18 us in the first block of the run, 428.50 / 426.88 us in the next two). The kernel does not touch the rings,
so the blocks differ only in their buffers (the ring sizes allocated beside the states) and in their place in the
run. The seventh session saw a relative: per-draft pools allocated before the conventional timing made it ~8%
slower, which is why the bench allocates them after it. This script separates the two readings in one process:

  part 1, placement: three buffer sets of the bench's sizes (L = 8, 16, 32) alive at once, their conventional steps
          timed round-robin for --rounds rounds. A set slow in every round while the others are fast: placement.
  part 2, history: the first set's sizes again after a larger set (B = 2 x --batch, with its per-draft pools, as the
          grid's B = 512 blocks) was allocated, timed and freed the way the bench frees a block (del +
          empty_cache). Slower than part 1's sets: the allocation history.

    python3 scripts/conv_placement_ab.py --shape q35-4b --batch 256 --rounds 5 --variants 5,6

Prints us per layer-step and % of copy (the same byte count as `bench gdn`'s conventional line: state read +
written, the step's inputs and outputs), against a copy bandwidth measured first in the same process. Written in
the sixty-seventh session, which had no device time left for it: **not yet run on a GPU**.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys


def _parse_ints(text: str, name: str):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"conv_placement_ab: {name} {text!r}: expected a comma list of integers")
    if not vals:
        raise SystemExit(f"conv_placement_ab: {name} is empty")
    return vals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="q35-4b")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--windows", default="8,16,32", help="one buffer set per window, as the bench's blocks")
    ap.add_argument("--variants", default="5,6", help="conventional decode designs to time")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="graph replays per timing (median)")
    ap.add_argument("--l2-bytes", type=float, default=240e6)
    ap.add_argument("--trace-seconds", type=float, default=2.0,
                    help="part 3: how long to follow the copy probe after the larger set's allocation and free (0: "
                         "skip part 3)")
    args = ap.parse_args(argv)
    windows = _parse_ints(args.windows, "--windows")
    variants = _parse_ints(args.variants, "--variants")
    if args.batch < 1 or args.rounds < 1 or args.repeats < 1 or min(windows) < 1 or args.trace_seconds < 0:
        print("conv_placement_ab: --batch, --rounds, --repeats and the windows must be >= 1, --trace-seconds >= 0",
              file=sys.stderr)
        return 2
    import torch
    from replayssm_trtllm.bench.gdn import SHAPES, _io_bytes, _Layers, _time_graph, copy_bandwidth
    from replayssm_trtllm.bench.step_traffic import conventional_step_bytes
    problem = (f"--shape {args.shape!r}: expected one of {sorted(SHAPES)}" if args.shape not in SHAPES
               else None if torch.cuda.is_available() else "needs a CUDA GPU")
    if problem:
        print(f"conv_placement_ab: {problem}", file=sys.stderr)
        return 2
    import replayssm_trtllm.ops.gdn  # noqa: F401  (registers the ops)

    sh = SHAPES[args.shape]
    state_slot = sh["HV"] * sh["V"] * sh["K"] * 4
    copy_bw = copy_bandwidth()
    print(f"# {torch.cuda.get_device_name()} {args.shape}: copy {copy_bw / 1e12:.3f} TB/s (read + write)", flush=True)

    def buffers(B, L, tokens=(1,), snap=False):
        nl = max(2, math.ceil(args.l2_bytes / (B * state_slot)))
        ls = _Layers(sh, B, L, max(tokens), torch.float32, torch.bfloat16, nl, 0, snap, tokens)
        if snap:
            ls.ensure_snap()
        return ls

    def time_conv(ls, var):
        t = _time_graph(lambda: [ls.conv_step(i, 1, var) for i in range(ls.nl)], args.repeats) / ls.nl
        st, io = conventional_step_bytes(ls.B, state_slot, _io_bytes(sh, 2))
        return t, (st + io) / t / copy_bw

    def report(label, ts):
        us = [t * 1e6 for t, _ in ts]
        fr = [f for _, f in ts]
        print(f"{label}: median {statistics.median(us):8.2f} us ({100 * statistics.median(fr):.1f}% of copy), "
              f"rounds {' '.join(f'{u:.2f}' for u in us)}", flush=True)

    B = args.batch
    # ---- part 1: the sets alive together, timed round-robin
    sets = {L: buffers(B, L) for L in windows}
    times = {(L, v): [] for L in windows for v in variants}
    for _ in range(args.rounds):
        for L in windows:
            for v in variants:
                times[(L, v)].append(time_conv(sets[L], v))
    for (L, v), ts in times.items():
        report(f"part 1 B={B} set L={L} v{v}", ts)
    del sets
    torch.cuda.empty_cache()

    # ---- part 2: after a larger block with its per-draft pools, freed as the bench frees a block
    big = buffers(2 * B, windows[-1], tokens=(1, 8), snap=True)
    for v in variants:
        report(f"part 2 B={2 * B} (per-draft pools allocated) v{v}", [time_conv(big, v)])
    del big
    torch.cuda.empty_cache()
    after = buffers(B, windows[0])
    for v in variants:
        report(f"part 2 B={B} set L={windows[0]} after the larger block v{v}",
               [time_conv(after, v) for _ in range(args.rounds)])
    del after
    torch.cuda.empty_cache()
    if args.trace_seconds > 0:
        part3(args, torch, buffers, time_conv, report, variants, windows, B)
    return 0


def part3(args, torch, buffers, time_conv, report, variants, windows, B):
    """Part 3 (seventieth session): what the copy probe of the benches' BandwidthSettler reads (and NVML's clocks,
    power and clock-event reasons while it runs, where nvidia-ml-py is installed), every ~20 ms for
    --trace-seconds, (a) right after the larger set is allocated, (b) right after it is freed and a set of the
    batch's size allocated; then that set's conventional step after BandwidthSettler.settle. It tells whether the
    slow rounds of part 2 follow the allocation, the free or both, how long they last, whether the settle removes
    them, and whether the clocks or the power move with them."""
    import time
    from replayssm_trtllm.bench.common import BandwidthSettler
    settler = BandwidthSettler(max_seconds=max(3.0, args.trace_seconds), log=lambda m: print(m, flush=True))

    def trace(label):
        t0, pts = time.monotonic(), []
        while time.monotonic() - t0 < args.trace_seconds:
            r = settler.probe()
            settler.best = max(settler.best, r)
            pts.append((time.monotonic() - t0, r, settler.last_clocks))
            time.sleep(0.02)
        low = [t for t, r, _ in pts if r < 0.97 * settler.best]
        print(f"part 3 {label}: {len(pts)} probes over {pts[-1][0]:.2f} s; below 97% of the best "
              f"({settler.best / 1e12:.3f} TB/s) until {max(low):.2f} s" if low else
              f"part 3 {label}: {len(pts)} probes over {pts[-1][0]:.2f} s; none below 97% of the best "
              f"({settler.best / 1e12:.3f} TB/s)", flush=True)
        step = max(1, len(pts) // 20)
        print("  " + " ".join(f"{t:.2f}s:{100 * r / settler.best:.0f}%" for t, r, _ in pts[::step]), flush=True)
        # NVML's readings (nvidia-ml-py) while the probe ran: a clock or power transient shows here, a memory-traffic
        # one does not
        for t, r, c in pts[::step]:
            if c:
                print(f"  {t:.2f}s {100 * r / settler.best:.0f}%: SM {c['sm_mhz']} MHz, mem {c['mem_mhz']} MHz, "
                      f"{c['power_w']} W, reasons {c['reasons']}", flush=True)

    trace("(0) before anything else")
    big = buffers(2 * B, windows[-1], tokens=(1, 8), snap=True)
    torch.cuda.synchronize()
    trace(f"(a) after allocating B={2 * B} with per-draft pools")
    del big
    torch.cuda.empty_cache()
    after = buffers(B, windows[0])
    torch.cuda.synchronize()
    trace(f"(b) after freeing it and allocating B={B} L={windows[0]}")
    big = buffers(2 * B, windows[-1], tokens=(1, 8), snap=True)
    del big
    torch.cuda.empty_cache()
    res = settler.settle("part 3 (c)")
    print(f"part 3 (c) after a second allocation and free: settle waited {res.waited_s:.2f} s "
          f"({100 * res.first_frac:.0f}% -> {100 * res.last_frac:.0f}%)", flush=True)
    for v in variants:
        report(f"part 3 (c) B={B} set L={windows[0]} after the settle v{v}",
               [time_conv(after, v) for _ in range(args.rounds)])
    settler.close()


if __name__ == "__main__":
    sys.exit(main())
