#!/usr/bin/env python3
"""The speculative steps' achieved bandwidth and traffic bounds, derived from a recorded benchmark JSON.

Benchmarks from the thirty-seventh session on record these themselves (`copy_frac`, `ratio_at_equal_efficiency`,
`ratio_at_copy_bandwidth` in each verify target); this script derives them for older results (the bytes from
replayssm_trtllm.bench.step_traffic, the times and the copy bandwidth from the JSON). Mixed acceptance is drawn
afresh (uniform in [1, T], as the benchmarks draw it), so its bytes can differ from the timed cycle's by a fraction of
a percent; all- and one-accepted cycles are exact.

    python scripts/traffic_bounds_from_results.py bench/results/latest-mamba2.json bench/results/latest-gdn.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from replayssm_trtllm.bench import gdn as bg  # noqa: E402
from replayssm_trtllm.bench import mamba2 as bm  # noqa: E402
from replayssm_trtllm.bench.step_traffic import (conventional_step_bytes, perdraft_step_bytes,  # noqa: E402
                                                 replay_cycle_traffic)
from replayssm_trtllm.state.cursors import SPECULATIVE  # noqa: E402

B, L = 256, 16


def _accs(accept: str, T: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    if accept == "all":
        return [torch.full((B,), T)] * (2 * L)
    if accept == "one":
        return [torch.ones(B, dtype=torch.int64)] * (2 * L)
    return [torch.randint(1, T + 1, (B,), generator=g) for _ in range(2 * L)]


def _line(family, shape, T, accept, phase, t_us, t_conv_us, copy_bps, tr, conv_bytes, t_pd_us, pd_bytes):
    t, tc = t_us * 1e-6, t_conv_us * 1e-6
    r = dict(family=family, shape=shape, T=T, accept=accept, phase=phase, us=t_us, ratio=t / tc,
             copy_frac=tr.total_bytes / t / copy_bps, conv_copy_frac=conv_bytes / tc / copy_bps,
             bound_equal=tr.total_bytes / conv_bytes, bound_copy=tr.total_bytes / copy_bps / tc,
             flush=tr.flush_fraction)
    if t_pd_us:
        r.update(perdraft=t_pd_us / t_us, perdraft_equal=pd_bytes / tr.total_bytes,
                 perdraft_copy_frac=pd_bytes / (t_pd_us * 1e-6) / copy_bps)
    return r


def mamba2_lines(res: dict):
    out = []
    copy_bps = res["copy_bandwidth_Bps"]
    best = res["best"]
    repeats = 3
    for shape in ("super", "nano"):
        sh = bm.SHAPES[shape]
        s_row, rec, io = bm._state_bytes(sh, 1, 4), bm._record_bytes(sh, 2), bm._io_bytes(sh, 2)
        conv_bytes = sum(conventional_step_bytes(B, s_row, io))
        t_conv = next(r["us_per_step"] for r in best if r["shape"] == shape and r["B"] == B and r["T"] == 1
                      and r["kernel"] == "conventional")
        for T in (4, 8):
            rows = {r["kernel"]: r["us_per_step"] for r in best if r["shape"] == shape and r["B"] == B
                    and r["L"] == L and r["T"] == T}
            t_pd = rows.get("conventional per-draft snapshots")
            for accept in ("all", "one", "mixed"):
                t = rows.get(f"replay verify {accept}-accepted")
                if t is None:
                    continue
                tr = replay_cycle_traffic(torch.arange(B) % (L + 1), _accs(accept, T, T), mode=SPECULATIVE,
                                          num_tokens=T, window=L, state_row_bytes=s_row, record_bytes=rec,
                                          io_row_bytes=io, passes=2 + repeats, timed_passes=repeats,
                                          reset_each_pass=False)
                out.append(_line("mamba2", shape, T, accept, "staggered", t, t_conv, copy_bps, tr, conv_bytes, t_pd,
                                 sum(perdraft_step_bytes(B, s_row, io, T))))
    return out


def gdn_lines(res: dict):
    out = []
    copy_bps = res["copy_bw_gbps"] * 1e9
    rows = res["results"]
    for shape in ("q35-4b", "q35-122b"):
        sh = bg.SHAPES[shape]
        s_row = sh["HV"] * sh["V"] * sh["K"] * 4
        rec = bg._record_bytes(sh, 2)
        io = bg._io_bytes(sh, 2)
        conv_bytes = sum(conventional_step_bytes(B, s_row, io))
        sel = [r for r in rows if r["shape"] == shape and r["B"] == B and r["L"] == L]
        t_conv = min(r["us"] for r in sel if r["kernel"] in ("conventional", "fla_fused_recurrent") and r["T"] == 1)
        for T in (4, 8):
            pds = [r["us"] for r in sel if r["kernel"] == "conventional_perdraft" and r["T"] == T]
            t_pd = min(pds) if pds else None
            for accept in ("all", "one", "mixed"):
                for phase in ("inphase", "staggered"):
                    ts = [r["us"] for r in sel if r["kernel"] == "replay_speculative" and r["T"] == T
                          and r["accept"] == accept and r["phase"] == phase]
                    if not ts:
                        continue
                    h0 = torch.zeros(B) if phase == "inphase" else torch.arange(B) % (L + 1)
                    tr = replay_cycle_traffic(h0, _accs(accept, T, T), mode=SPECULATIVE, num_tokens=T, window=L,
                                              state_row_bytes=s_row, record_bytes=rec, io_row_bytes=io)
                    out.append(_line("gdn", shape, T, accept, phase, min(ts), t_conv, copy_bps, tr, conv_bytes,
                                     t_pd, sum(perdraft_step_bytes(B, s_row, io, T))))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", help="bench JSON files (latest-mamba2.json / latest-gdn.json format)")
    args = p.parse_args(argv)
    header = ("| family | shape | T | accept | phase | us | ratio to conv. step | % of copy | conv. % of copy | "
              "ratio at conv. efficiency | ratio at copy bw | flushing rows | per-draft / ours | per-draft / ours at "
              "equal efficiency | per-draft % of copy |")
    for path in args.results:
        res = json.loads(Path(path).read_text())
        lines = mamba2_lines(res) if "best" in res else gdn_lines(res)
        print(f"\n{path} (git_commit {res.get('git_commit')}, {res.get('date')}):\n")
        print(header)
        print("|" + "---|" * 15)
        for r in lines:
            pd = (f"{r['perdraft']:.2f} | {r['perdraft_equal']:.2f} | {r['perdraft_copy_frac']:.1%}" if "perdraft" in r
                  else "- | - | -")
            print(f"| {r['family']} | {r['shape']} | {r['T']} | {r['accept']} | {r['phase']} | {r['us']:.1f} | "
                  f"{r['ratio']:.3f} | {r['copy_frac']:.1%} | {r['conv_copy_frac']:.1%} | {r['bound_equal']:.3f} | "
                  f"{r['bound_copy']:.3f} | {r['flush']:.3f} | {pd} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
