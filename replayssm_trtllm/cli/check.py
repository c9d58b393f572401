"""``replayssm-trtllm check``: ReplaySSM against conventional decoding, in float64 on CPU.

Decodes an embedded toy model (one Mamba-2 layer and one GDN layer, random weights and inputs
with realistic decays) conventionally and with the float64 ReplaySSM caches, in standard mode
(Algorithms 1 / 4) and speculative mode (Algorithms 2 / 5, random acceptance per row), with several
slots at staggered positions, padding rows and a mid-run request reset. Prints the max abs /
max rel error of the outputs and of the committed state per family and mode; exits non-zero if
any relative error exceeds the tolerance (default 1e-10).

Relative error = ``max |replay - conventional| / max |conventional|`` per step (outputs) or per
check (committed states), maximized over the run.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Dict, List

import torch

from ..reference import (GdnReplayCacheRef, Mamba2ReplayCacheRef, gdn_decode_naive, mamba2_decode_naive)
from ..reference.testing import (random_gdn_inputs, random_gdn_layer, random_mamba2_inputs, random_mamba2_layer,
                                 random_state)

# Scaled-down shapes: Nemotron-3-Nano-4B Mamba-2 (H=96, P=80, N=128, G=8) -> same heads per group (12)
# and head_dim / d_state (80/128 = 20/32); Qwen3.5-4B GDN (H=16, HV=32, K=V=128) -> same HV/H (2), K = V.
MAMBA2_DIMS = {"H": 24, "P": 20, "N": 32, "G": 2}
GDN_DIMS = {"H": 2, "HV": 4, "K": 32, "V": 32}
FAMILIES = ("mamba2", "gdn")
MODES = ("standard", "speculative")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the ``check`` options to ``parser`` and return it."""
    parser.description = (
        "Check ReplaySSM (checkpoint + ring of cached inputs) against conventional decoding in float64 on an "
        "embedded toy model: one Mamba-2 layer scaled down from Nemotron-3-Nano-4B "
        f"(H={MAMBA2_DIMS['H']}, P={MAMBA2_DIMS['P']}, N={MAMBA2_DIMS['N']}, G={MAMBA2_DIMS['G']}: 12 heads per "
        "group and head_dim/d_state = 80/128 as in the model) and one GDN layer scaled down from Qwen3.5-4B "
        f"(H={GDN_DIMS['H']}, HV={GDN_DIMS['HV']}, K=V={GDN_DIMS['K']}: HV/H = 2 and K = V as in the model). "
        "Exits 1 if any relative error exceeds the tolerance.")
    parser.add_argument("--steps", type=int, default=200, help="decode steps per family and mode (default 200)")
    parser.add_argument("--window", type=int, default=16, help="replay window L (default 16)")
    parser.add_argument("--verify", type=int, default=4,
                        help="speculative verification length T, 1 <= T <= L (default 4)")
    parser.add_argument("--slots", type=int, default=4, help="sequences decoded together at staggered positions "
                                                              "(default 4)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--family", choices=("all",) + FAMILIES, default="all", help="model family (default all)")
    parser.add_argument("--mode", choices=("all",) + MODES, default="all", help="decode mode (default all)")
    parser.add_argument("--tolerance", type=float, default=1e-10,
                        help="max allowed relative error (default 1e-10)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _rel(err: torch.Tensor, ref: torch.Tensor) -> float:
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    return float(err.abs().max()) / max(scale, 1e-300) if err.numel() else 0.0


def _run_case(family: str, mode: str, args, log) -> Dict[str, float]:
    g = torch.Generator().manual_seed(args.seed * 1000 + FAMILIES.index(family) * 10 + MODES.index(mode))
    S, L = args.slots, args.window
    T = 1 if mode == "standard" else args.verify
    Tm = 1 if mode == "standard" else args.verify
    if family == "mamba2":
        d = MAMBA2_DIMS
        layer = random_mamba2_layer(d["H"], g)
        cache = Mamba2ReplayCacheRef(S, d["H"], d["P"], d["N"], d["G"], L, Tm, mode)
        state_shape = (d["H"], d["P"], d["N"])
    else:
        d = GDN_DIMS
        layer = random_gdn_layer(d["HV"], g)
        cache = GdnReplayCacheRef(S, d["H"], d["HV"], d["K"], d["V"], L, Tm, mode)
        state_shape = (d["HV"], d["V"], d["K"])

    def inputs(B):
        if family == "mamba2":
            return random_mamba2_inputs(B, T, d["H"], d["P"], d["N"], d["G"], g)
        return random_gdn_inputs(B, T, d["H"], d["HV"], d["K"], d["V"], g)

    def naive(states, inp):
        if family == "mamba2":
            return mamba2_decode_naive(states, **inp, **layer)
        return gdn_decode_naive(states, **inp, **layer)

    def committed(slots):
        if family == "mamba2":
            return cache.committed_state(slots, layer["A"])
        return cache.committed_state(slots)

    conv = torch.zeros((S,) + state_shape, dtype=torch.float64)
    active = torch.zeros(S, dtype=torch.bool)
    join = [i * 3 for i in range(S)]                  # staggered positions
    reset_step = args.steps // 2                      # slot 0 starts a new request mid-run
    st = {"max_abs": 0.0, "max_rel": 0.0, "state_abs": 0.0, "state_rel": 0.0, "flushes": 0, "tokens": 0}
    every = max(1, args.steps // 4)
    for step in range(args.steps):
        new = [s for s in range(S) if join[s] == step or (s == 0 and step == reset_step and step > 0)]
        if new:
            pre = random_state((len(new),) + state_shape, g)
            cache.reset(torch.tensor(new), pre)
            conv[new] = pre
            active[new] = True
        # rows: active slots in random order plus one padding row
        slots = torch.nonzero(active)[:, 0]
        rows = torch.cat([slots[torch.randperm(len(slots), generator=g)], torch.tensor([-1])])
        rows = rows[torch.randperm(len(rows), generator=g)]
        inp = inputs(len(rows))
        out = cache.step(rows, **inp, **layer)
        st["flushes"] += int(cache.last_plan.flush.sum())
        valid = rows >= 0
        vs = rows[valid]
        ref, snaps = naive(conv[vs], {k: (v[valid] if v is not None else None) for k, v in inp.items()})
        diff = out[valid] - ref
        st["max_abs"] = max(st["max_abs"], float(diff.abs().max()))
        st["max_rel"] = max(st["max_rel"], _rel(diff, ref))
        if bool(out[~valid].abs().max() != 0):
            st["max_rel"] = float("inf")               # padding rows must be left untouched
        st["tokens"] += int(valid.sum()) * T
        if mode == "standard":
            cache.commit(rows)
            conv[vs] = snaps[:, 0]
        else:
            acc = torch.randint(1, T + 1, (len(rows),), generator=g, dtype=torch.int32)
            cache.commit(rows, acc)
            conv[vs] = snaps[torch.arange(len(vs)), acc[valid].long() - 1]
        if step % 10 == 9 or step == args.steps - 1:
            cs = committed(vs)
            st["state_abs"] = max(st["state_abs"], float((cs - conv[vs]).abs().max()))
            st["state_rel"] = max(st["state_rel"], _rel(cs - conv[vs], conv[vs]))
        if log and args.steps >= 100 and (step + 1) % every == 0:
            log(f"[check] {family}/{mode}: step {step + 1}/{args.steps}, max rel err {st['max_rel']:.2e}")
    return st


def run(args: argparse.Namespace) -> int:
    """Run the check; returns 0 when every relative error is within ``args.tolerance``, 1 otherwise
    (2 for invalid arguments)."""
    defaults = vars(add_arguments(argparse.ArgumentParser()).parse_args([]))
    for k, v in defaults.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    if args.steps < 1 or args.window < 1 or args.slots < 1 or not 1 <= args.verify <= args.window:
        print(f"check: need steps >= 1, window >= 1, slots >= 1 and 1 <= verify <= window; got steps={args.steps}, "
              f"window={args.window}, slots={args.slots}, verify={args.verify}", file=sys.stderr)
        return 2
    log = None if args.quiet else (lambda msg: print(msg, flush=True))
    families = FAMILIES if args.family == "all" else (args.family,)
    modes = MODES if args.mode == "all" else (args.mode,)
    rows: List[tuple] = []
    t0 = time.time()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # tiny tensors: extra threads only add contention
    try:
        for fam in families:
            for mode in modes:
                st = _run_case(fam, mode, args, log)
                ok = st["max_rel"] <= args.tolerance and st["state_rel"] <= args.tolerance
                rows.append((fam, mode, st, ok))
    finally:
        torch.set_num_threads(threads)
    print(f"ReplaySSM vs conventional decoding (float64, L={args.window}, T={args.verify}, slots={args.slots}, "
          f"steps={args.steps}, seed={args.seed}, tolerance={args.tolerance:.0e} relative)")
    hdr = f"{'family':<7} {'mode':<12} {'tokens':>7} {'flushes':>7} {'out max abs':>12} {'out max rel':>12} " \
          f"{'state max abs':>13} {'state max rel':>13}  status"
    print(hdr)
    print("-" * len(hdr))
    for fam, mode, st, ok in rows:
        print(f"{fam:<7} {mode:<12} {st['tokens']:>7d} {st['flushes']:>7d} {st['max_abs']:>12.3e} "
              f"{st['max_rel']:>12.3e} {st['state_abs']:>13.3e} {st['state_rel']:>13.3e}  "
              f"{'ok' if ok else 'FAIL'}")
    print(f"({time.time() - t0:.1f} s)")
    return 0 if all(ok for *_, ok in rows) else 1


def main(argv=None) -> int:
    parser = add_arguments(argparse.ArgumentParser(prog="replayssm-trtllm check"))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
