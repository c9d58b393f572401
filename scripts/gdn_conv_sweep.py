"""Launch shapes of the conventional GDN decode (variant 6, warp items) side by side (GPU; A/B work, not targets).

    python3 scripts/gdn_conv_sweep.py [--shapes q35-4b,q35-122b] [--batch 256] [--cfgs 0,6,1,2,3,4,5,8,9] [--rounds 3]

Times, in one process and on the benchmark's buffers (layer buffers rotated out of L2, CUDA graphs), the
conventional one-token step of variant 6 under each `RSSM_GDN_WARP_CFG` (gdn_warp_decode.cu: rows per warp,
threads per CTA, register bound) and variant 5, in `--rounds` interleaved rounds so drift hits every config alike,
and prints us per layer-step and the fraction of the copy bandwidth measured by the benchmark's own copy
(`bench gdn`'s `copy_bandwidth`). The official baseline figure comes from `replayssm-trtllm bench gdn`.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics

import torch

import replayssm_trtllm.ops.gdn  # noqa: F401
from replayssm_trtllm.bench import gdn as bg


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="q35-4b,q35-122b")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--cfgs", default="0,6,1,2,3,4,5,8,9")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if args.rounds < 1 or args.repeats < 1:
        ap.error("--rounds and --repeats must be >= 1")
    cfgs = [int(c) for c in args.cfgs.split(",") if c.strip()]
    copy_bw = bg.copy_bandwidth()
    print(f"# copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write)", flush=True)
    rows = []
    for shp in args.shapes.split(","):
        sh = bg.SHAPES[shp]
        B = args.batch
        sb = B * sh["HV"] * sh["V"] * sh["K"] * 4
        nl = int(min(64, max(2, math.ceil(240e6 / sb))))
        ls = bg._Layers(sh, B, 16, 1, torch.float32, torch.bfloat16, nl, 0, False, token_list=[1])
        cases = [(f"v6 cfg{c}", 6, c) for c in cfgs] + [("v5", 5, None)]
        times = {name: [] for name, _, _ in cases}
        for _ in range(args.rounds):
            for name, var, cfg in cases:
                if cfg is None:
                    os.environ.pop("RSSM_GDN_WARP_CFG", None)
                else:
                    os.environ["RSSM_GDN_WARP_CFG"] = str(cfg)
                t = bg._time_graph(lambda: [ls.conv_step(l_, 1, var) for l_ in range(nl)], args.repeats) / nl
                times[name].append(t)
        os.environ.pop("RSSM_GDN_WARP_CFG", None)
        for name, _, _ in cases:
            t = statistics.median(times[name])
            frac = 2 * sb / t / copy_bw
            spread = (max(times[name]) - min(times[name])) * 1e6
            rows.append((shp, name, t * 1e6, frac, spread))
    print(f"\n{'shape':10s} {'kernel':10s} {'us':>9s} {'of copy':>8s} {'spread us':>9s}")
    for shp, name, us, frac, spread in rows:
        print(f"{shp:10s} {name:10s} {us:9.2f} {frac:8.1%} {spread:9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
