"""One launch per kernel case inside an NVTX range named "prof", for Nsight Compute.

    ncu --clock-control none --nvtx --nvtx-include "prof/" --section SpeedOfLight ... \
        python3 scripts/profile_kernels.py [--cases gdn,mamba2] [--batch 256] [--window 16]

Every case runs once outside the range (warm-up, lazy module load) and once inside it. Cursors are
staggered (h = b mod L: the continuous-batching steady state, 1/L of the rows flush). Uses the
benchmark's buffer classes, so the kernels see the same inputs as in `bench gdn` / `bench mamba2`.
Without ncu it just runs the cases (a smoke test of the script).
"""
from __future__ import annotations

import argparse

import torch

import replayssm_trtllm.ops.gdn  # noqa: F401  (registers torch.ops.replayssm.gdn_*)
import replayssm_trtllm.ops.mamba2  # noqa: F401  (registers torch.ops.replayssm.mamba2_*)
import replayssm_trtllm.ops.commit  # noqa: F401
from replayssm_trtllm.bench import gdn as bgdn
from replayssm_trtllm.bench import mamba2 as bm2
from replayssm_trtllm.ops.gdn import DECODE_VARIANTS


def _run(name, fn):
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("prof")
    torch.cuda.nvtx.range_push(name)
    fn()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"ran {name}", flush=True)


def _held(h0, L, h):
    """Cursors with h committed records on every row (--spec-h)."""
    import torch
    if not 0 <= h <= L:
        raise SystemExit(f"--spec-h {h}: expected 0 .. L = {L}")
    return torch.full_like(h0, h)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="gdn,mamba2", help="comma list of gdn, mamba2, dp")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--gdn-variants", default="0,1")
    ap.add_argument("--mamba2-variants", default="0,2")
    ap.add_argument("--commit", action="store_true", help="also the device commit after the Mamba-2 speculative "
                    "cases (one token accepted per row)")
    ap.add_argument("--mamba2-shapes", default="super", help="comma list of the bench's Mamba-2 shapes (super, nano); "
                    "cases of a shape other than super are named m2<shape>_...")
    ap.add_argument("--gdn-inphase", action="store_true",
                    help="also the GDN standard step with every row flushing (h = L - 1) and with none (h = L / 2)")
    ap.add_argument("--spec-tokens", default="4")
    ap.add_argument("--spec-h", default="-1",
                    help="committed records of every row in the speculative cases (gdn, mamba2); -1: staggered rows "
                         "(rows with h + T > L flush). A value <= L - T gives a step where no row flushes. A comma "
                         "list profiles the speculative step once per value (named ..._h<value>; both families "
                         "since the forty-fourth session)")
    ap.add_argument("--dp-reads", default="fp16,nvfp4", help="read formats of the 'dp' case (dual-precision "
                    "decode, non-flush step, h = L/2, the shapes of bench precision)")
    ap.add_argument("--dp-rec", default="fp32", choices=["fp32", "fp16"],
                    help="recurrence copy of the 'dp' case (fp16: fp16 + stochastic rounding)")
    ap.add_argument("--dp-families", default="mamba2,gdn", help="families of the 'dp' case")
    ap.add_argument("--dp-steps", default="nonflush,stagger",
                    help="steps of the 'dp' case: nonflush (h = L/2), stagger (decode, flush and cache step of "
                         "staggered rows)")
    args = ap.parse_args()
    B, L = args.batch, args.window
    spec_hs = [int(x) for x in str(args.spec_h).split(",") if x]
    h0 = torch.arange(B, dtype=torch.int32, device="cuda") % L
    spec = [int(t) for t in args.spec_tokens.split(",") if t]
    Tmax = max([1] + spec)
    if "gdn" in args.cases:
        ls = bgdn._Layers(bgdn.SHAPES["q35-4b"], B, L, Tmax, torch.float32, torch.bfloat16, 1, 0, False,
                          token_list=[1] + spec)
        for v in [int(x) for x in args.gdn_variants.split(",")]:
            if v in DECODE_VARIANTS:  # variant 6 (split) is replay-only
                _run(f"gdn_conv_v{v}", lambda: ls.conv_step(0, 1, v))
            ls.set_cursors(h0)
            _run(f"gdn_replay_std_v{v}", lambda: ls.replay_step(0, 1, 0, v))
            if args.gdn_inphase:  # the two kinds of in-phase step: every row flushes / none does (h = L / 2)
                ls.set_cursors(torch.full_like(h0, L - 1))
                _run(f"gdn_replay_std_allflush_v{v}", lambda: ls.replay_step(0, 1, 0, v))
                ls.set_cursors(torch.full_like(h0, L // 2))
                _run(f"gdn_replay_std_noflush_v{v}", lambda: ls.replay_step(0, 1, 0, v))
            for T in spec:
                for hh in spec_hs:
                    ls.set_cursors(torch.clamp(h0, max=L - 1) if hh < 0 else _held(h0, L, hh))
                    _run(f"gdn_replay_spec_T{T}_v{v}" + (f"_h{hh}" if len(spec_hs) > 1 else ""),
                         lambda: ls.replay_step(0, T, 1, v))
        del ls
    if "mamba2" in args.cases:
        for shp in [x for x in args.mamba2_shapes.split(",") if x]:
            sh = bm2.SHAPES[shp]
            pre = "m2" if shp == "super" else f"m2{shp}"
            ls = bm2._Layerset(sh, B, L, Tmax, torch.float32, torch.bfloat16, 1, 0, token_list=[1] + spec)
            for v in [int(x) for x in args.mamba2_variants.split(",")]:
                if v not in (3, 4):  # variants 3 (stream) and 4 (split) are replay-only
                    _run(f"{pre}_conv_v{v}", lambda: ls.conv_step(0, 1, variant=v))
                ls.set_cursors(h0)
                _run(f"{pre}_replay_std_v{v}", lambda: ls.replay_step(0, 1, 0, variant=v))
                ls.set_cursors(torch.full_like(h0, L - 1))  # in phase, every row flushes
                _run(f"{pre}_replay_std_allflush_v{v}", lambda: ls.replay_step(0, 1, 0, variant=v))
                for T in spec:
                    for hh in spec_hs:
                        ls.set_cursors(h0 if hh < 0 else _held(h0, L, hh))
                        _run(f"{pre}_replay_spec_T{T}_v{v}" + (f"_h{hh}" if len(spec_hs) > 1 else ""),
                             lambda: ls.replay_step(0, T, 1, variant=v))
                    if args.commit:  # the device commit of one-accepted rows (moves the cursors; profiled last)
                        ones = torch.ones(B, dtype=torch.int32, device="cuda")
                        _run(f"{pre}_commit_T{T}", lambda: ls.commit(T, 1, ones))
            del ls
    if "dp" in args.cases:
        _profile_dual_precision(B, L, [r for r in args.dp_reads.split(",") if r], args.dp_rec,
                                [f for f in args.dp_families.split(",") if f],
                                [s for s in args.dp_steps.split(",") if s])
    return 0


def _profile_dual_precision(B, L, reads, rec="fp32", families=("mamba2", "gdn"), steps=("nonflush", "stagger")):
    unknown = set(steps) - {"nonflush", "stagger"}
    if unknown:
        raise SystemExit(f"--dp-steps: unknown step(s) {sorted(unknown)}; expected nonflush, stagger")
    from replayssm_trtllm.bench.precision import GDN_SHAPE, MAMBA2_SHAPE
    from replayssm_trtllm.ops import dual_precision as dp
    dev, act = "cuda", torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    rnd = lambda *shape: torch.randn(*shape, device=dev, generator=g)  # noqa: E731
    sbi = torch.arange(B, dtype=torch.int32, device=dev)
    H, P, G = MAMBA2_SHAPE["H"], MAMBA2_SHAPE["P"], MAMBA2_SHAPE["G"]
    x, z, dtr = rnd(B, 1, H, P).to(act), rnd(B, 1, H, P).to(act), (0.3 * rnd(B, 1, H)).to(act)
    Bm, Cm = rnd(B, 1, G, 128).to(act), rnd(B, 1, G, 128).to(act)
    A, D, dtb = -(0.5 + torch.rand(H, device=dev)), torch.rand(H, device=dev), torch.full((H,), -3.0, device=dev)
    y = torch.empty_like(x)
    HK, HV, V = GDN_SHAPE["HK"], GDN_SHAPE["HV"], GDN_SHAPE["V"]
    q, k, v = rnd(B, 1, HK, 128).to(act), rnd(B, 1, HK, 128).to(act), rnd(B, 1, HV, V).to(act)
    a, b = (0.3 * rnd(B, 1, HV)).to(act), rnd(B, 1, HV).to(act)
    A_log, gdtb = torch.rand(HV, device=dev), torch.full((HV,), -3.0, device=dev)
    o = torch.empty_like(v)
    fl = torch.empty(B, dtype=torch.int32, device=dev)
    stagger = (torch.arange(B, device=dev) % L).to(torch.int32)
    for rf in reads:
        if "mamba2" in families:
            c = dp.Mamba2DualPrecisionCache(B, H, P, G, L, 1, 0, rf, rec, "sr", act_dtype=act)
            if "nonflush" in steps:
                c.ring_len.fill_(L // 2)
                _run(f"dp_m2_nonflush_{rf}", lambda: c.decode(sbi, x, dtr, Bm, Cm, A, D, dtb, z, y))
            if "stagger" in steps:
                c.ring_len.copy_(stagger)  # 1/L of the rows flush: decode + flush of the window-amortized step
                _run(f"dp_m2_stagger_decode_{rf}", lambda: c.decode(sbi, x, dtr, Bm, Cm, A, D, dtb, z, y))
                _run(f"dp_m2_stagger_flush_{rf}", lambda: c.flush(sbi, A, 1, fl, False))
                # the cache's step: flushing rows deferred to the flush (standard mode default)
                _run(f"dp_m2_stagger_step_{rf}", lambda: c.step(sbi, x, dtr, Bm, Cm, A, D, dtb, z, fl, False, y))
            del c
        if "gdn" in families:
            c = dp.GdnDualPrecisionCache(B, HK, HV, V, L, 1, 0, rf, rec, "sr", act_dtype=act)
            if "nonflush" in steps:
                c.ring_len.fill_(L // 2)
                _run(f"dp_gdn_nonflush_{rf}", lambda: c.decode(sbi, q, k, v, a, b, A_log, gdtb, None, o))
            if "stagger" in steps:
                c.ring_len.copy_(stagger)
                _run(f"dp_gdn_stagger_decode_{rf}", lambda: c.decode(sbi, q, k, v, a, b, A_log, gdtb, None, o))
                _run(f"dp_gdn_stagger_flush_{rf}", lambda: c.flush(sbi, 1, fl, False))
                _run(f"dp_gdn_stagger_step_{rf}", lambda: c.step(sbi, q, k, v, a, b, A_log, gdtb, None, fl, False, o))
            del c

if __name__ == "__main__":
    raise SystemExit(main())
