#!/usr/bin/env python3
"""The dual-precision decode's read paths side by side, standard and speculative, one process.

For each (batch, tokens per step, read format) the non-flush decode launch of a GdnDualPrecisionCache (or, with
--family mamba2, a Mamba2DualPrecisionCache at the Nemotron-3 Super / Nano heads; cursors at
h = (L - T) // 2: no row flushes) is timed in a CUDA graph over `--layers` caches (one per layer, so small batches do
not sit in L2) with RSSM_DP_DECODE_PATH unset (the launcher's rule) and forced to each path that can run it (16-bit
read copies: stream, split; FP8 / NVFP4: tile, split; a path that cannot run a case prints nan). Prints one line per case with the times and the ratio of the
split path over the other explicit path; the automatic choice's time shows which one the rule took. It exists to set
the rules of dual_precision_decode_gdn.cu (gdnDpSplitMinBatchHeads) and dual_precision_decode_mamba2.cu; bench precision times only standard steps at one
batch. GPU only. Example:

    python3 scripts/dp_path_timing.py --batch 1,2,4,8,16,32 --tokens 1,2,4 --reads fp16,fp8_e4m3,nvfp4 --hv 64
"""
import argparse
import sys

import torch

from replayssm_trtllm.bench import common
from replayssm_trtllm.bench.precision import decode_path
from replayssm_trtllm.ops import dual_precision as dp


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=ints, default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--tokens", type=ints, default=[1, 2, 4])
    ap.add_argument("--reads", default="fp16,fp8_e4m3,nvfp4")
    ap.add_argument("--family", choices=["gdn", "mamba2"], default="gdn")
    ap.add_argument("--hv", type=int, default=64, help="GDN value heads (Qwen3.5: 32 at 4B, 64 at 122B); 16 key heads")
    ap.add_argument("--shape", choices=["super", "nano"], default="super",
                    help="Mamba-2 heads: super 128 x 64, nano 96 x 80 (8 groups, dstate 128)")
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("dp_path_timing.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    L, dev = args.window, "cuda"
    g = torch.Generator(device=dev).manual_seed(7)
    act = torch.bfloat16
    if args.family == "gdn":
        HK, H, P, N = 16, args.hv, 128, 128
        A_log = torch.rand(H, device=dev, generator=g)
        dtb = torch.full((H,), -3.0, device=dev)
        desc = f"GDN HK {HK} HV {H} V {P} K {N}"
    else:
        H, P = (128, 64) if args.shape == "super" else (96, 80)
        G, N = 8, 128
        A = -(0.5 + 3.5 * torch.rand(H, device=dev, generator=g))
        Dsk = torch.rand(H, device=dev, generator=g)
        dtb = torch.full((H,), -3.0, device=dev)
        desc = f"Mamba-2 {args.shape} H {H} P {P} G {G} N {N}"
    print(f"{desc} L {L}, bf16 activations, non-flush decode launch, us per layer "
          f"({args.layers} layers per graph, median of {args.reps} replays)")
    print(f"{'B':>4} {'T':>2} {'read':>9} {'B x H':>7} | {'auto':>8} {'other':>8} {'split':>8} | split/other")
    rnd = lambda *shape: torch.randn(*shape, device=dev, generator=g)  # noqa: E731
    for T in args.tokens:
        mode = "standard" if T == 1 else "speculative"
        h = (L - T) // 2 if T > 1 else L // 2
        for B in args.batch:
            sbi = torch.arange(B, dtype=torch.int32, device=dev)
            if args.family == "gdn":
                q, k = rnd(B, T, HK, N).to(act), rnd(B, T, HK, N).to(act)
                v = rnd(B, T, H, P).to(act)
                a, b = (0.3 * rnd(B, T, H)).to(act), rnd(B, T, H).to(act)
                o = torch.empty_like(v)
                step_args = (sbi, q, k, v, a, b, A_log, dtb, None, o)
            else:
                x, z = rnd(B, T, H, P).to(act), rnd(B, T, H, P).to(act)
                dtr = (0.3 * rnd(B, T, H)).to(act)
                Bm, Cm = rnd(B, T, G, N).to(act), rnd(B, T, G, N).to(act)
                y = torch.empty_like(x)
                step_args = (sbi, x, dtr, Bm, Cm, A, Dsk, dtb, z, y)
            for rf in [r for r in args.reads.split(",") if r]:
                caches = []
                for _ in range(args.layers):
                    if args.family == "gdn":
                        c = dp.GdnDualPrecisionCache(B, HK, H, P, L, T, mode, rf, "fp32", "sr", act_dtype=act)
                        c.ring_g.copy_(-torch.rand(c.ring_g.shape, device=dev, generator=g) * 0.1)
                        c.ring_u.copy_(rnd(*c.ring_u.shape))
                        c.ring_k.copy_(rnd(*c.ring_k.shape))
                    else:
                        c = dp.Mamba2DualPrecisionCache(B, H, P, G, L, T, mode, rf, "fp32", "sr", act_dtype=act)
                        c.ring_dt.copy_(torch.rand(c.ring_dt.shape, device=dev, generator=g) * 0.05)
                        c.ring_x.copy_(rnd(*c.ring_x.shape))
                        c.ring_B.copy_(rnd(*c.ring_B.shape))
                    if c.lp.data.dtype == torch.uint8:
                        c.lp.data.copy_(torch.randint(0, 255, c.lp.data.shape, device=dev, dtype=torch.uint8,
                                                      generator=g) & 0x77)
                    else:
                        c.lp.data.copy_(rnd(*c.lp.data.shape) * 0.5)
                    if c.lp.scale is not None:
                        c.lp.scale.fill_(0x38 if c.lp.scale.dtype == torch.uint8 else 1e-3)
                    if c.lp.gscale is not None:
                        c.lp.gscale.fill_(1e-3)
                    c.ring_len.fill_(h)
                    caches.append(c)
                fns = [lambda c=c: c.decode(*step_args) for c in caches]
                other = "stream" if rf in ("fp16", "bf16") else "tile"
                t = {}
                for name, path in (("auto", None), ("other", other), ("split", "split")):
                    with decode_path(path):
                        try:
                            t[name] = common.time_graph(fns, reps=args.reps)["median_us"]  # per call = per layer
                        except RuntimeError as e:  # e.g. a path that cannot run these sizes
                            print(f"   ({name} = {path}: {str(e).splitlines()[0][:100]})")
                            t[name] = float("nan")
                print(f"{B:>4} {T:>2} {rf:>9} {B * H:>7} | {t['auto']:8.2f} {t['other']:8.2f} {t['split']:8.2f} | "
                      f"{t['split'] / t['other']:.3f} ({other})", flush=True)
                del caches, fns
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
