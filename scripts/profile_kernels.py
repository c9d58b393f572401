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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="gdn,mamba2")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--gdn-variants", default="0,1")
    ap.add_argument("--mamba2-variants", default="0,2")
    ap.add_argument("--spec-tokens", default="4")
    args = ap.parse_args()
    B, L = args.batch, args.window
    h0 = torch.arange(B, dtype=torch.int32, device="cuda") % L
    spec = [int(t) for t in args.spec_tokens.split(",") if t]
    Tmax = max([1] + spec)
    if "gdn" in args.cases:
        ls = bgdn._Layers(bgdn.SHAPES["q35-4b"], B, L, Tmax, torch.float32, torch.bfloat16, 1, 0, False,
                          token_list=[1] + spec)
        for v in [int(x) for x in args.gdn_variants.split(",")]:
            _run(f"gdn_conv_v{v}", lambda: ls.conv_step(0, 1, v))
            ls.set_cursors(h0)
            _run(f"gdn_replay_std_v{v}", lambda: ls.replay_step(0, 1, 0, v))
            for T in spec:
                hs = torch.clamp(h0, max=L - 1)
                ls.set_cursors(hs)
                _run(f"gdn_replay_spec_T{T}_v{v}", lambda: ls.replay_step(0, T, 1, v))
        del ls
    if "mamba2" in args.cases:
        sh = bm2.SHAPES["super"]
        ls = bm2._Layerset(sh, B, L, Tmax, torch.float32, torch.bfloat16, 1, 0, token_list=[1] + spec)
        for v in [int(x) for x in args.mamba2_variants.split(",")]:
            _run(f"m2_conv_v{v}", lambda: ls.conv_step(0, 1, variant=v))
            ls.set_cursors(h0)
            _run(f"m2_replay_std_v{v}", lambda: ls.replay_step(0, 1, 0, variant=v))
            for T in spec:
                ls.set_cursors(h0)
                _run(f"m2_replay_spec_T{T}_v{v}", lambda: ls.replay_step(0, T, 1, variant=v))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
