"""`replayssm-trtllm bench precision`: dual-precision checkpoints (paper Section 6, E.4.2) on the GPU.

Both families side by side at one batch size and window (default B = 256, L = 16, standard decoding,
Nemotron-3-Super Mamba-2 layer H=128 P=64 N=128 G=8; Qwen3.5-122B GDN layer HK=16 HV=64 K=V=128):

* non-flush step (decode kernel only; no row flushes): read copy fp32 / fp16 / fp8_e4m3 / nvfp4;
* window-amortized step (decode + flush launch with staggered cursors h_b = b mod L, so 1/L of the
  rows flush every step, as under continuous batching): the same read copies with recurrence fp32
  and fp16+SR; as the caches' step runs it (the flushing rows deferred to the flush, which folds their
  token and writes their outputs), next to the flushing rows on the decode kernel and the flush on its
  item grid (RSSM_DP_FLUSH_GRID=items);
* baselines: the conventional fp32 kernel (ops/mamba2.py, ops/gdn.py) and the fp32 ReplaySSM step
  (the existing replay kernel, and this kernel with an fp32 read copy; the faster of the two is the
  "FP32-read replay" denominator of the non-flush targets);
* the non-flush step again through the read paths other than the launcher's default
  (RSSM_DP_DECODE_PATH: "stream" for 16-bit read copies, "tile" for every format; the default at
  B = 256 is "split" where a family has it: the replay split kernels on the read copy + the
  dual-precision kernel on the flushing rows), unless --no-compare-paths.

Every case runs --layers independent layers (default 4: own state, caches and rings, shared step inputs) in
one CUDA graph and reports microseconds per layer, as in a model's decode graph; --layers 1 times one layer
per graph replay, which puts the graph launch into every figure (the method before the seventeenth session).

Writes bench/results/latest-precision.json (targets, rows, gpu, date, command, git_commit) and a
section of docs/benchmarks.md through bench/common.py.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

READS = ("fp32", "fp16", "fp8_e4m3", "nvfp4")
RECS = ("fp32", "fp16")  # fp16 = fp16 + stochastic rounding
MAMBA2_SHAPE = {"H": 128, "P": 64, "G": 8}
GDN_SHAPE = {"HK": 16, "HV": 64, "V": 128}
_DEVICE = "cuda"  # the CPU dry run (tests/bench/test_bench_dry_run.py) sets "cpu"
NONFLUSH_GOALS = {("mamba2", "fp16"): 1.6, ("gdn", "fp16"): 1.6, ("mamba2", "fp8_e4m3"): 2.6,
                  ("gdn", "fp8_e4m3"): 2.4, ("mamba2", "nvfp4"): 3.4, ("gdn", "nvfp4"): 2.7}
WINDOW_GOAL = 2.8  # Mamba-2, nvfp4 read + fp16+SR recurrence, over the conventional fp32 kernel


# Read paths timed next to the default one (RSSM_DP_DECODE_PATH), for 16-bit read copies and for the others.
ALT_PATHS = {True: ("stream", "tile"), False: ("tile",)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--families", default="mamba2,gdn", help="comma list of: mamba2, gdn")
    parser.add_argument("--reads", default=",".join(READS), help="comma list of read-copy formats")
    parser.add_argument("--act-dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--reps", type=int, default=30, help="timed graph replays per case")
    parser.add_argument("--layers", type=int, default=4,
                        help="layers per CUDA graph: every case runs this many independent layers (own state, "
                             "caches and rings; shared step inputs) in one graph and reports the time per layer, "
                             "as in a model's decode graph (1 = one layer per replay: the graph launch is then "
                             "part of every figure, as before the seventeenth session)")
    parser.add_argument("--seed", type=int, default=0)
    from .common import add_settle_argument
    add_settle_argument(parser)
    parser.add_argument("--no-write", action="store_true", help="print only; do not write results")
    parser.add_argument("--no-compare-paths", action="store_true",
                        help="do not also time the non-default decode paths (RSSM_DP_DECODE_PATH=stream / tile) "
                             "next to the default one")


@contextlib.contextmanager
def env_setting(name, value):
    """Set (value None: unset) the environment variable `name` for the launches (and CUDA-graph captures) inside
    the block; the launchers read these switches per launch."""
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def decode_path(path):
    """Set RSSM_DP_DECODE_PATH for the launches inside the block."""
    return env_setting("RSSM_DP_DECODE_PATH", path)


def add_copy_fraction(rows, copy_gbps):
    """Adds "of copy" (achieved GB/s over the measured device copy bandwidth, GB/s) to every row with a "GB/s" figure;
    rows without one, or a missing / non-positive copy figure, are left as they are. Returns rows."""
    if copy_gbps is None or copy_gbps <= 0:
        return rows
    for r in rows:
        if r.get("GB/s") is not None:
            r["of copy"] = r["GB/s"] / copy_gbps
    return rows


def nonflush_ratio(t_fp32_candidates, t_read):
    """Speedup of a read format over the FP32-read replay step: the faster fp32 step is the denominator."""
    ts = [t for t in t_fp32_candidates if t is not None and t > 0]
    if not ts or t_read is None or t_read <= 0:
        return None
    return min(ts) / t_read


def state_bytes(fmt: str, H: int, P: int, N: int = 128) -> int:
    """Stored bytes of one [H, P, N] state in a format (docs/formats.md)."""
    per = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8_e4m3": 1 + 4 / 128, "nvfp4": 0.5 + 1 / 16}[fmt]
    extra = 4 * H if fmt == "nvfp4" else 0
    return int(round(H * P * N * per)) + extra


def record_bytes(family: str, sh: dict, act_bytes: int = 2) -> int:
    """Bytes of one ring record of one slot (design.md 3; GDN two-precision records)."""
    if family == "mamba2":
        return 4 * sh["H"] + act_bytes * sh["H"] * sh["P"] + act_bytes * sh["G"] * 128
    return 4 * sh["HV"] + 2 * sh["HV"] * sh["V"] + act_bytes * sh["HK"] * 128 + 4 * sh["HV"] + \
        act_bytes * sh["HV"] * sh["V"]


def step_bytes(family: str, sh: dict, B: int, read_fmt: str, h_mean: float, rec_fmt=None, flush_frac=0.0,
               deferred: bool = False) -> int:
    """Modelled HBM bytes of one step: read copy (non-flush rows), recurrence read (by the decode, unless the flush
    rows are deferred to the flush, and by the flush) + both copies written (flush rows), committed records read,
    this step's record written."""
    H, P = (sh["H"], sh["P"]) if family == "mamba2" else (sh["HV"], sh["V"])
    rb = record_bytes(family, sh)
    nb = B * (1 - flush_frac) * state_bytes(read_fmt, H, P)
    if rec_fmt is not None and flush_frac > 0:
        reads = 1 if deferred else 2  # flush (+ decode) reads of the recurrence copy
        nb += B * flush_frac * ((reads + 1) * state_bytes(rec_fmt, H, P) + state_bytes(read_fmt, H, P))
    nb += B * (h_mean + 1) * rb + B * flush_frac * (h_mean + 1) * rb
    return int(nb)


def _family_cases(family, args, torch, time_graph, settle=None):
    from ..ops import dual_precision as dp
    B, L, act = args.batch, args.window, {"bf16": torch.bfloat16, "fp16": torch.float16}[args.act_dtype]
    dev = _DEVICE
    g = torch.Generator(device=dev).manual_seed(args.seed)
    sbi = torch.arange(B, dtype=torch.int32, device=dev)
    rows, res = [], {}
    h_mid = L // 2
    stagger = (torch.arange(B, device=dev) % L).to(torch.int32)
    nl = max(1, int(getattr(args, "layers", 1)))
    # one graph of nl layers (fns: one callable per layer); microseconds per layer. ``settle(what)``
    # (BandwidthSettler.settle) runs where buffers were just allocated: before the conventional, the fp32 replay and
    # each (recurrence, read format) block's timings
    settle = settle or (lambda what: None)
    timed = lambda fns: time_graph(list(fns), reps=args.reps)["median_us"]
    if family == "mamba2":
        from ..ops import mamba2 as m2
        sh = MAMBA2_SHAPE
        H, P, G, N = sh["H"], sh["P"], sh["G"], 128
        x = torch.randn(B, 1, H, P, device=dev, generator=g).to(act)
        dtr = (0.3 * torch.randn(B, 1, H, device=dev, generator=g)).to(act)
        Bm = torch.randn(B, 1, G, N, device=dev, generator=g).to(act)
        Cm = torch.randn(B, 1, G, N, device=dev, generator=g).to(act)
        z = torch.randn(B, 1, H, P, device=dev, generator=g).to(act)
        A = -(0.5 + 3.5 * torch.rand(H, device=dev, generator=g))
        D = torch.rand(H, device=dev, generator=g)
        dtb = torch.full((H,), -3.0, device=dev)
        # conventional fp32 kernel (automatic choice: the warp-item kernel, variant 4, at these shapes)
        states = [torch.randn(B, H, P, N, device=dev, generator=g) * 0.5 for _ in range(nl)]
        y = torch.empty_like(x)
        settle("precision mamba2: conventional fp32")
        res["conv"] = timed([lambda s=s: m2.mamba2_decode_out(s, x, dtr, Bm, Cm, A, D, dtb, z, sbi, None, y)
                             for s in states])
        # existing fp32 replay kernel, non-flush cursors
        C = L + 1
        rdt = torch.rand(B, C, H, device=dev, generator=g) * 0.05
        rx = torch.randn(B, C, H, P, device=dev, generator=g).to(act)
        rB = torch.randn(B, C, G, N, device=dev, generator=g).to(act)
        ro = torch.zeros(B, dtype=torch.int32, device=dev)
        rl = torch.full((B,), h_mid, dtype=torch.int32, device=dev)
        rings = [(rx.clone(), rB.clone()) for _ in range(nl)]  # each layer its own records
        settle("precision mamba2: replay fp32")
        res["replay_fp32"] = timed([lambda s=s, r=r: m2.mamba2_replay_decode_out(
            s, rdt, r[0], r[1], ro, rl, x, dtr, Bm, Cm, A, D, dtb, z, sbi, L, 0, y) for s, r in zip(states, rings)])
        del states, rings
        conv_bytes = 2 * B * state_bytes("fp32", H, P)
        make = lambda rf, rec: dp.Mamba2DualPrecisionCache(B, H, P, G, L, 1, 0, rf, rec, "sr", act_dtype=act)
        dec = lambda c: (lambda: c.decode(sbi, x, dtr, Bm, Cm, A, D, dtb, z, y))
        fl = torch.empty(B, dtype=torch.int32, device=dev)
        # decode + flush as the cache's step runs them (standard mode: the flushing rows deferred to the flush,
        # c.defer_flush_rows; bench rows "flush rows on the decode kernel" time it switched off)
        step = lambda c: (lambda: c.step(sbi, x, dtr, Bm, Cm, A, D, dtb, z, fl, False, y))
        # the cache's ring may be shorter than ours (standard mode needs only L records)
        fill = lambda c: (c.ring_dt.copy_(rdt[:, :c.ring_dt.shape[1]]), c.ring_x.copy_(rx[:, :c.ring_x.shape[1]]),
                          c.ring_B.copy_(rB[:, :c.ring_B.shape[1]]))
    else:
        from ..ops import gdn as gd
        sh = GDN_SHAPE
        HK, HV, V, K = sh["HK"], sh["HV"], sh["V"], 128
        q = torch.randn(B, 1, HK, K, device=dev, generator=g).to(act)
        k = torch.randn(B, 1, HK, K, device=dev, generator=g).to(act)
        v = torch.randn(B, 1, HV, V, device=dev, generator=g).to(act)
        a = (0.3 * torch.randn(B, 1, HV, device=dev, generator=g)).to(act)
        b = torch.randn(B, 1, HV, device=dev, generator=g).to(act)
        A_log = torch.rand(HV, device=dev, generator=g)
        dtb = torch.full((HV,), -3.0, device=dev)
        states = [torch.randn(B, HV, V, K, device=dev, generator=g) * 0.5 for _ in range(nl)]
        o = torch.empty_like(v)
        # the warp-item conventional kernel (variant 6; fastest in bench gdn, seventh session)
        settle("precision gdn: conventional fp32")
        res["conv"] = timed([lambda s=s: gd.gdn_decode(s, sbi, q, k, v, a, b, A_log, dtb, out=o, variant=6)
                             for s in states])
        C = L + 1
        rg = -torch.rand(B, C, HV, device=dev, generator=g) * 0.1
        ru = torch.randn(B, C, HV, V, device=dev, generator=g).half()
        rk = torch.randn(B, C, HK, K, device=dev, generator=g).to(act)
        ro = torch.zeros(B, dtype=torch.int32, device=dev)
        rl = torch.full((B,), h_mid, dtype=torch.int32, device=dev)
        rings = [(ru.clone(), rk.clone()) for _ in range(nl)]  # each layer its own records
        settle("precision gdn: replay fp32")
        res["replay_fp32"] = timed([lambda s=s, r=r: gd.gdn_replay(s, sbi, ro, rl, rg, r[0], r[1], q, k, v, a, b,
                                                                   A_log, dtb, L, 0, out=o)
                                    for s, r in zip(states, rings)])
        del states, rings
        conv_bytes = 2 * B * state_bytes("fp32", HV, V)
        make = lambda rf, rec: dp.GdnDualPrecisionCache(B, HK, HV, V, L, 1, 0, rf, rec, "sr", act_dtype=act)
        dec = lambda c: (lambda: c.decode(sbi, q, k, v, a, b, A_log, dtb, None, o))
        fl = torch.empty(B, dtype=torch.int32, device=dev)
        step = lambda c: (lambda: c.step(sbi, q, k, v, a, b, A_log, dtb, None, fl, False, o))
        fill = lambda c: (c.ring_g.copy_(rg[:, :c.ring_g.shape[1]]), c.ring_u.copy_(ru[:, :c.ring_u.shape[1]]),
                          c.ring_k.copy_(rk[:, :c.ring_k.shape[1]]),
                          c.ring_beta.fill_(0.5), c.ring_v.copy_(torch.randn_like(c.ring_v)))
    torch.cuda.synchronize()
    rows.append({"family": family, "case": "conventional fp32", "read": "-", "recurrence": "fp32",
                 "us": res["conv"], "bytes": conv_bytes, "GB/s": conv_bytes / res["conv"] / 1e3})
    rows.append({"family": family, "case": "replay fp32 (existing kernel), non-flush", "read": "fp32",
                 "recurrence": "fp32", "us": res["replay_fp32"]})
    reads = [r for r in args.reads.split(",") if r]
    for rec in RECS:
        for rf in reads:
            cs = [make(rf, rec) for _ in range(nl)]  # one cache per layer
            for c in cs:
                _fill_copy(c.lp, torch, g)
                if c.hp is not None:
                    _fill_copy(c.hp, torch, g)
                fill(c)
            settle(f"precision {family}: read {rf}, recurrence {rec}")
            if rec == RECS[-1]:  # the non-flush step never touches the recurrence copy (FP16+SR kept, E.4.2)
                for c in cs:
                    c.ring_len.fill_(h_mid)
                t_nf = timed(dec(c) for c in cs)
                res[("nonflush", rf)] = t_nf
                nb = step_bytes(family, sh, B, rf, h_mid)
                rows.append({"family": family, "case": "non-flush step", "read": rf, "recurrence": "any",
                             "us": t_nf, "bytes": nb, "GB/s": nb / t_nf / 1e3})
                if rf in ("fp16", "fp8_e4m3", "nvfp4"):
                    # the default read-copy readout (tensor cores) against the CUDA-core one, in the same run
                    with env_setting("RSSM_MAMBA2_READ_MMA" if family == "mamba2" else "RSSM_GDN_READ_MMA", "0"):
                        t_cc = timed(dec(c) for c in cs)
                    res[("nonflush_cudacore", rf)] = t_cc
                    rows.append({"family": family, "case": "non-flush step, CUDA-core read-copy readout", "read": rf,
                                 "recurrence": "any", "us": t_cc, "bytes": nb, "GB/s": nb / t_cc / 1e3,
                                 "x conv": res["conv"] / t_cc})
                if not getattr(args, "no_compare_paths", False):
                    # the same step through the other read paths (the default above is the launcher's rule)
                    for path in ALT_PATHS[rf in ("fp16", "bf16")]:
                        with decode_path(path):
                            t_alt = timed(dec(c) for c in cs)
                        res[("nonflush_" + path, rf)] = t_alt
                        rows.append({"family": family, "case": f"non-flush step, {path} path", "read": rf,
                                     "recurrence": "any", "us": t_alt, "bytes": nb, "GB/s": nb / t_alt / 1e3,
                                     "x conv": res["conv"] / t_alt})
            for c in cs:
                c.ring_len.copy_(stagger)
            t_w = timed(step(c) for c in cs)
            res[("window", rf, rec)] = t_w
            nb = step_bytes(family, sh, B, rf, (L - 1) / 2, rec, 1.0 / L, deferred=True)
            rows.append({"family": family, "case": "window-amortized step", "read": rf,
                         "recurrence": rec + ("+SR" if rec != "fp32" else ""), "us": t_w, "bytes": nb,
                         "GB/s": nb / t_w / 1e3, "x conv": res["conv"] / t_w})
            # the flushing rows decoded by the decode kernels (re-reading the recurrence copy), in the same run
            for c in cs:
                c.defer_flush_rows = False
            t_wd = timed(step(c) for c in cs)
            for c in cs:
                c.defer_flush_rows = True
            res[("window_decoded", rf, rec)] = t_wd
            nbd = step_bytes(family, sh, B, rf, (L - 1) / 2, rec, 1.0 / L)
            rows.append({"family": family, "case": "window-amortized step, flush rows on the decode kernel",
                         "read": rf, "recurrence": rec + ("+SR" if rec != "fp32" else ""), "us": t_wd,
                         "bytes": nbd, "GB/s": nbd / t_wd / 1e3, "x conv": res["conv"] / t_wd})
            # the same step with the flush on its item grid (one CTA per (head, row)) instead of the compacted
            # one-wave kernel, in the same run
            with env_setting("RSSM_DP_FLUSH_GRID", "items"):
                t_wi = timed(step(c) for c in cs)
            res[("window_itemgrid", rf, rec)] = t_wi
            rows.append({"family": family, "case": "window-amortized step, item-grid flush", "read": rf,
                         "recurrence": rec + ("+SR" if rec != "fp32" else ""), "us": t_wi, "bytes": nb,
                         "GB/s": nb / t_wi / 1e3, "x conv": res["conv"] / t_wi})
            # the caches' default runs the flush on a side stream beside the decode (concurrent_flush, graph
            # branches; thirty-ninth session). In the same run: the serial step (decode, then flush) and the
            # concurrent one with the flush's grid capped at 2 / 1 CTAs per SM (room for the decode's CTAs)
            for setting, cap in ((False, None), (True, "2"), (True, "1")):
                for c in cs:
                    c.concurrent_flush = setting
                with env_setting("RSSM_DP_FLUSH_CTAS_PER_SM", cap):
                    t_wc = timed(step(c) for c in cs)
                res[("window_concurrent" if setting else "window_serial", rf, rec, cap)] = t_wc
                rows.append({"family": family, "case": "window-amortized step, " +
                             (f"concurrent flush ({cap} flush CTA{'s' if cap != '1' else ''} per SM)" if setting
                              else "serial flush"), "read": rf,
                             "recurrence": rec + ("+SR" if rec != "fp32" else ""), "us": t_wc, "bytes": nb,
                             "GB/s": nb / t_wc / 1e3, "x conv": res["conv"] / t_wc})
            for c in cs:
                c.concurrent_flush = None
            del cs, c
            torch.cuda.empty_cache()
    base = [res.get(("nonflush", "fp32")), res["replay_fp32"]]
    for r in rows:
        if r["case"] == "non-flush step":
            r["x fp32 read"] = nonflush_ratio(base, r["us"])
            r["x conv"] = res["conv"] / r["us"]
    return rows, res


def _fill_copy(c, torch, g):
    """Plausible stored bytes for timing (values do not change the kernels' work)."""
    if c.data.dtype == torch.uint8:
        c.data.copy_(torch.randint(0, 255, c.data.shape, device=c.data.device, dtype=torch.uint8, generator=g) & 0x77)
    else:
        c.data.copy_(torch.randn(c.data.shape, device=c.data.device, generator=g) * 0.5)
    if c.scale is not None:
        if c.scale.dtype == torch.uint8:
            c.scale.fill_(0x38)  # e4m3 1.0
        else:
            c.scale.fill_(1e-3)
    if c.gscale is not None:
        c.gscale.fill_(1e-3)


def run(args) -> int:
    if getattr(args, "layers", 1) < 1:
        print(f"bench precision: --layers must be >= 1; got {args.layers}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("bench precision: needs torch", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench precision: needs a CUDA GPU", file=sys.stderr)
        return 2
    from . import common
    from ..ops._lib import is_available
    if not is_available():
        print("bench precision: the kernel library is not built (see ops/_lib.py)", file=sys.stderr)
        return 2
    fams = [f for f in args.families.split(",") if f]
    all_rows, targets = [], {}
    # the device's copy bandwidth (bytes read + written, best of a copy and an SM copy kernel; bench gdn's
    # measurement) for the rows' "of copy" column
    from .gdn import copy_bandwidth
    copy_gbps = copy_bandwidth() / 1e9
    print(f"device copy bandwidth: {copy_gbps:.0f} GB/s (read + write)", flush=True)
    settler = common.BandwidthSettler(getattr(args, "settle_seconds", 3.0), log=lambda m: print(m, flush=True))
    for fam in fams:
        rows, res = _family_cases(fam, args, torch, common.time_graph, settle=settler.settle)
        all_rows += rows
        for (f, rf), goal in NONFLUSH_GOALS.items():
            if f != fam:
                continue
            val = nonflush_ratio([res.get(("nonflush", "fp32")), res["replay_fp32"]], res.get(("nonflush", rf)))
            targets[f"{fam}_nonflush_{rf}_read_speedup_over_fp32_read"] = common.make_target(
                f"{fam}_nonflush_{rf}", val, goal, True, f"B={args.batch} L={args.window} standard, non-flush step")
        if fam == "mamba2":
            tw = res.get(("window", "nvfp4", "fp16"))
            targets["mamba2_window_nvfp4_read_fp16sr_over_conventional_fp32"] = common.make_target(
                "mamba2_window", None if tw is None else res["conv"] / tw, WINDOW_GOAL, True,
                f"B={args.batch} L={args.window}, staggered flushes (1/L rows per step), decode + flush")
        torch.cuda.empty_cache()
    settler.close()
    add_copy_fraction(all_rows, copy_gbps)
    print(common.format_table(all_rows, ["family", "case", "read", "recurrence", "us", "bytes", "GB/s", "of copy",
                                         "x fp32 read", "x conv"]))
    for n, t in targets.items():
        print(f"target {n}: {t['value']} (goal {t['goal']}) {'MET' if t['met'] else 'NOT MET'}")
    if not args.no_write:
        common.write_results("precision", all_rows, targets, common.command_line(),
                             extra={"batch": args.batch, "window": args.window, "act_dtype": args.act_dtype,
                                    "settle": settler.summary(),
                                    "layers_per_graph": max(1, args.layers), "copy_GBps": copy_gbps},
                             columns=["family", "case", "read", "recurrence", "us", "GB/s", "of copy", "x fp32 read",
                                      "x conv"])
    return 0


if __name__ == "__main__":  # pragma: no cover
    ap = argparse.ArgumentParser(prog="replayssm-trtllm bench precision")
    add_arguments(ap)
    sys.exit(run(ap.parse_args()))
