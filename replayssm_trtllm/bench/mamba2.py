"""`replayssm-trtllm bench mamba2`: Mamba-2 decode kernels side by side on one GPU.

Kernels in one run: conventional decode (in place), conventional per-draft-snapshot verify,
ReplaySSM standard decode and speculative verify (with the device commit inside the timed graph),
and the FlashInfer peers when replayssm_trtllm.bench.peers provides them (else "not available").

Every kernel design (``--variants``, mamba2.h RSSM_MAMBA2_VARIANT_*) is timed side by side over a
few rows_per_cta values in one run; each case reports every (variant, rows) point and the best one, and
the targets use the best point of each kernel (the conventional baseline included: the speedups are
against the fastest conventional configuration of the run).

Timing: every case is one CUDA graph that drives a realistic cursor sequence through whole
windows (flush steps included) over `nl` layer buffers (enough layers that their checkpoints are
several times the L2, so no step reads a state another step left in L2); the graph is replayed
several times and the median per-layer-step time is reported. Correctness of each kernel is
checked against the conventional kernel on the same inputs before timing.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

from replayssm_trtllm.bench.common import (BandwidthSettler, add_settle_argument, command_line,
                                           drop_rank_shape_targets, git_commit, publish_official_run, resolve_shape,
                                           standard_ring_capacity, standard_steps_on_ring, target_value_text)

SHAPES = {"nano": dict(H=96, P=80, N=128, G=8), "super": dict(H=128, P=64, N=128, G=8)}


CONV_VARIANTS = (0, 1, 2, 4)  # the conventional decode kernels (variant 3 exists for the replay only; 4 is the
# split kernels in the replay and the warp-item kernel in the conventional decode)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shapes", default="super,nano",
                        help="comma list of: nano, super, or BASE-tpN (one rank of N-way tensor parallelism: heads "
                             "and groups / N, e.g. super-tp8; no targets recorded for it)")
    parser.add_argument("--batch", default=None, help="comma list of batch sizes (default 256,1; --full: 1,64,256,512)")
    parser.add_argument("--window", default=None, help="comma list of replay windows L (default 16; --full: 8,16,32)")
    parser.add_argument("--tokens", default=None, help="comma list of verify lengths T (default 1,4,8; --full: 1,2,4,8)")
    parser.add_argument("--variants", default="0,1,2,3",
                        help="comma list of kernel variants to time (mamba2.h; 3 = stream kernel, 4 = split kernels, "
                             "both replay only)")
    parser.add_argument("--rows", default=None,
                        help="comma list of rows_per_cta to time for every variant (default: a per-variant sweep)")
    parser.add_argument("--state-dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--act-dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--full", action="store_true", help="the full grid of batches, windows and T")
    parser.add_argument("--quick", action="store_true", help="(default; kept for old command lines)")
    parser.add_argument("--no-sweep-rows", action="store_true", help="time rows_per_cta = 0 (auto) only")
    parser.add_argument("--no-flashinfer", action="store_true",
                        help="skip the FlashInfer peer (it JIT-compiles for minutes without a prebuilt cache)")
    parser.add_argument("--sweep-rows", action="store_true", help="(default; kept for old command lines)")
    parser.add_argument("--repeats", type=int, default=5, help="timed graph replays per case (median)")
    parser.add_argument("--l2-bytes", type=float, default=240e6, help="min checkpoint bytes across layer buffers")
    parser.add_argument("--out", default="bench/results/latest-mamba2.json")
    parser.add_argument("--seed", type=int, default=0)
    add_settle_argument(parser)


# ------------------------------------------------------------------------------------------ utils
def _dt(name):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]




def _time_graph(fn, repeats: int, inner: int = 1):
    """Capture fn() in a CUDA graph, replay `inner` times per timing, return median seconds per replay."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up outside capture (also checks for launch errors)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3 / inner)
    del g
    return statistics.median(times)


def copy_bandwidth(nbytes: int = 2 << 30, repeats: int = 5) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read + written, through an SM kernel
    (``torch.mul(src, 1, out=dst)``): a plain ``copy_`` becomes a memcpy node in a CUDA graph, which
    measured only ~2.7 TB/s on the H200 (run of 2026-11-30), below what kernels reach."""
    import torch
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    src.fill_(1.0)
    for _ in range(20):  # let the clocks ramp up
        torch.mul(src, 1.0, out=dst)
    t = _time_graph(lambda: torch.mul(src, 1.0, out=dst), repeats, inner=10)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / t


def inplace_bandwidth(nbytes: int = 2 << 30, repeats: int = 5) -> float:
    """In-place read-modify-write bandwidth in bytes/s (bytes read + written) of an SM kernel
    (``torch.mul(buf, 1.0, out=buf)``): the access pattern of a conventional decode step, which updates
    the state in place. A reference beside the copy figure (the targets stay against the copy)."""
    import torch
    buf = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    buf.fill_(1.0)
    for _ in range(20):
        torch.mul(buf, 1.0, out=buf)
    t = _time_graph(lambda: torch.mul(buf, 1.0, out=buf), repeats, inner=10)
    del buf
    torch.cuda.empty_cache()
    return 2 * nbytes / t


class _Layerset:
    """nl layer buffers of one shape: conventional states, replay checkpoints + rings, inputs."""

    def __init__(self, sh, B, L, Tmax, st, act, nl, seed, need_conv=True, need_replay=True, need_snap=0,
                 token_list=(1,), std_capacity=None, device="cuda"):
        """Rings: capacity C = L + Tmax for the speculative steps and C_std (default L, the ring a standard-mode
        deployment allocates: ReplayConfig.ring_capacity with max_verify = 1) for the standard steps; a separate
        set of ring tensors when the two differ (set ``std_capacity`` = L + Tmax to run standard steps on the
        speculative ring, as the benchmark did before the twenty-ninth session)."""
        import torch
        g = torch.Generator(device=device).manual_seed(seed)
        H, P, N, G = sh["H"], sh["P"], sh["N"], sh["G"]
        self.H, self.P, self.N, self.G, self.B, self.L, self.nl = H, P, N, G, B, L, nl
        self.C = L + Tmax
        self.C_std = standard_ring_capacity("_Layerset", L, std_capacity)
        S = B
        d = device
        self.sbi = torch.arange(B, dtype=torch.int32, device=d)
        init = lambda *shape, dtype: (0.5 * torch.randn(*shape, generator=g, device=d)).to(dtype)  # noqa: E731
        self.conv = [init(S, H, P, N, dtype=st) for _ in range(nl)] if need_conv else []
        self.ckpt = [init(S, H, P, N, dtype=st) for _ in range(nl)] if need_replay else []
        self.rings = {}  # capacity -> (ring_dt, ring_x, ring_B), one tensor per layer each
        if need_replay:
            for C in sorted({self.C, self.C_std}):
                self.rings[C] = ([torch.full((S, C, H), 0.02, dtype=torch.float32, device=d) for _ in range(nl)],
                                 [init(S, C, H, P, dtype=act) for _ in range(nl)],
                                 [init(S, C, G, N, dtype=act) for _ in range(nl)])
            self.ring_dt, self.ring_x, self.ring_B = self.rings[self.C]
        self.snap = torch.empty(S, need_snap, H, P, N, dtype=st, device=d) if need_snap else None
        self.origin = torch.zeros(S, dtype=torch.int32, device=d)
        self.length = torch.zeros(S, dtype=torch.int32, device=d)
        self.err = torch.full((1,), -1, dtype=torch.int32, device=d)
        self.A = -(0.5 + 3.5 * torch.rand(H, generator=g, device=d))
        self.D = torch.rand(H, generator=g, device=d) + 0.5
        self.dt_bias = torch.log(torch.expm1(0.002 + 0.06 * torch.rand(H, generator=g, device=d)))
        self.inputs = {}
        for T in sorted({1, Tmax} | set(token_list)):
            self.inputs[T] = dict(
                x=torch.randn(B, T, H, P, generator=g, device=d).to(act),
                dt_raw=torch.clamp(0.3 * torch.randn(B, T, H, generator=g, device=d), -1, 1).to(act),
                Bm=torch.randn(B, T, G, N, generator=g, device=d).to(act),
                Cm=torch.randn(B, T, G, N, generator=g, device=d).to(act),
                z=torch.randn(B, T, H, P, generator=g, device=d).to(act),
                y=torch.empty(B, T, H, P, device=d, dtype=act))

    def set_cursors(self, h0):
        self.origin.zero_()
        self.length.copy_(h0)

    def conv_step(self, layer, T=1, snap=False, rows=0, variant=0):
        import torch
        i = self.inputs[T]
        torch.ops.replayssm.mamba2_decode_out(self.conv[layer], i["x"], i["dt_raw"], i["Bm"], i["Cm"], self.A, self.D,
                                              self.dt_bias, i["z"], self.sbi, self.snap[:, :T] if snap else None, i["y"],
                                              rows, variant)

    def capacity(self, mode):
        """Ring capacity of a step in ``mode`` (0 standard: C_std, 1 speculative: C)."""
        return self.C_std if mode == 0 else self.C

    def replay_step(self, layer, T, mode, rows=0, variant=0):
        import torch
        i = self.inputs[T]
        ring_dt, ring_x, ring_B = self.rings[self.capacity(mode)]
        torch.ops.replayssm.mamba2_replay_decode_out(
            self.ckpt[layer], ring_dt[layer], ring_x[layer], ring_B[layer], self.origin, self.length,
            i["x"], i["dt_raw"], i["Bm"], i["Cm"], self.A, self.D, self.dt_bias, i["z"], self.sbi, self.L, mode,
            i["y"], rows, variant)

    def commit(self, T, mode, acc=None):
        import torch
        torch.ops.replayssm.replay_commit(self.sbi, acc, self.origin, self.length, self.err, self.L,
                                          self.capacity(mode), T, mode)


def _state_bytes(sh, B, st_bytes):
    return B * sh["H"] * sh["P"] * sh["N"] * st_bytes


def _record_bytes(sh, act_bytes):
    return 4 * sh["H"] + act_bytes * sh["H"] * sh["P"] + act_bytes * sh["G"] * sh["N"]


def _io_bytes(sh, act_bytes, T=1):
    """Bytes of one row's step inputs and outputs, which every kernel (conventional or replay) reads or writes once:
    x, z and y [T, H, P], B and C [T, G, N], dt_raw [T, H] (activation dtype). Counted in the achieved bandwidth
    since the twenty-ninth session (before, only the state and the ring records were; `copy_frac_state_only` keeps
    that figure)."""
    return T * act_bytes * (3 * sh["H"] * sh["P"] + 2 * sh["G"] * sh["N"] + sh["H"])


def _check(ls, T, variant, rtol=2e-2, atol_frac=1e-2):
    """Replay output of `variant` (in-phase h = 0 rows, speculative T tokens) and conventional output of
    `variant` vs the conventional variant-0 output on the same inputs and state; returns
    (max of |err| / (rtol |ref| + atol_frac rms) over both, ok)."""
    import torch
    mode = 0 if T == 1 else 1
    outs = {}
    cv = variant if variant in CONV_VARIANTS else 0  # variant 3 is replay-only
    for name, v in (("ref", 0), ("conv", cv), ("replay", variant)):
        ls.conv[0].copy_(ls.ckpt[0])
        ls.set_cursors(torch.zeros_like(ls.length))
        if name == "replay":
            ls.replay_step(0, T, mode, variant=v)
        else:
            ls.conv_step(0, T, snap=T > 1, variant=v)
        outs[name] = ls.inputs[T]["y"].float().clone()
    torch.cuda.synchronize()
    y_c = outs["ref"]
    rms = float(y_c.pow(2).mean().sqrt())
    err = max(float(((outs[k] - y_c).abs() / (rtol * y_c.abs() + atol_frac * rms)).max()) for k in ("conv", "replay"))
    return err, err <= 1.0 and not math.isnan(err)


def _rows_list(variant, sh, chunk, sweep, explicit):
    """rows_per_cta values timed for one variant (0 = the launcher's auto choice first)."""
    if variant in (3, 4):
        return [0]  # the stream, split and warp-item kernels pick their own rows
    if explicit:
        return explicit
    if not sweep:
        return [0]
    P = sh["P"]
    if variant == 0:
        full = math.ceil(P / chunk) * chunk
        cand = [chunk, 2 * chunk, full]
    else:
        cand = [P, math.ceil(P / 2 / 8) * 8, 16]
    out = [0]
    for r in cand:
        if r <= 128 and r not in out:
            out.append(r)
    return out


def _timed(fn, repeats):
    """_time_graph, or None when the configuration is refused (printed)."""
    try:
        return _time_graph(fn, repeats)
    except (RuntimeError, ValueError) as e:
        print(f"    skipped: {str(e).splitlines()[0][:160]}")
        return None


# Layer shapes whose FlashInfer checkpointing_ssu JIT module failed to build in this process: the other token counts
# and batch sizes of that shape are skipped (each failing build took 30-50 s on the H200). FlashInfer 0.7.4's kernel
# splits the head dimension over two CTAs and static-asserts a multiple of 16 per CTA, so Nemotron-3-Nano's head_dim 80
# never builds (docs/kernels-mamba2.md "Thirty-second session").
_FI_CSSU_BUILD_FAILED: set = set()


def _is_jit_build_failure(e: Exception) -> bool:
    return "Ninja build failed" in str(e) or "Build failed" in str(e)


def _flashinfer_cases(peers, ls, sh, shp, B, L, tokens, args, record, sb, copy_bw, gen, io1=0, settle=None):
    """Times the released peer on the same layer buffers: FlashInfer's conventional
    ``selective_state_update`` and its ReplaySSM ``checkpointing_ssu`` (standard in phase and
    staggered, speculative T in {4, 8} with all/one/mixed acceptance). Each case is checked against
    our conventional kernel first; a failing or unavailable case is recorded, never fatal.
    Returns {"conv": s, "cssu_std_<phase>": s, "cssu_T<T>_<accept>": s} (seconds per layer-step).
    ``settle(what)`` (BandwidthSettler.settle) runs after the checks and allocations, before each timed group."""
    import torch
    settle = settle or (lambda what: None)
    out = {}
    nl = ls.nl
    base = dict(shape=shp, B=B, L=L, T=1)
    i1 = ls.inputs[1]
    x1, Bm1, Cm1, z1 = i1["x"][:, 0], i1["Bm"][:, 0], i1["Cm"][:, 0], i1["z"][:, 0]
    dt1 = i1["dt_raw"][:, 0].float().contiguous()
    y1 = torch.empty_like(x1)
    try:  # correctness first: one step from the same state as our conventional kernel
        s_ref, s_fi = ls.conv[0].clone(), ls.conv[0].clone()
        y_ref = torch.ops.replayssm.mamba2_decode(s_ref, i1["x"], i1["dt_raw"], i1["Bm"], i1["Cm"], ls.A, ls.D,
                                                  ls.dt_bias, i1["z"], ls.sbi, None)
        y_fi = peers.flashinfer_ssu_decode(s_fi, x1, dt1, ls.A, Bm1, Cm1, ls.D, z=z1, dt_bias=ls.dt_bias,
                                           state_batch_indices=ls.sbi)
        err = ((y_fi.float() - y_ref[:, 0].float()).norm() / y_ref.float().norm()).item()
        serr = ((s_fi - s_ref).norm() / s_ref.norm()).item()
        print(f"  FlashInfer selective_state_update vs ours: rel err y {err:.2e}, state {serr:.2e}")
        del s_ref, s_fi
        if not (err < 2e-2 and serr < 1e-3):
            raise RuntimeError(f"mismatch (y {err:.2e}, state {serr:.2e})")
        fn = lambda: [peers.flashinfer_ssu_decode(ls.conv[l], x1, dt1, ls.A, Bm1, Cm1, ls.D, z=z1,  # noqa: E731
                                                  dt_bias=ls.dt_bias, state_batch_indices=ls.sbi, out=y1)
                      for l in range(nl)]
        settle(f"{shp} B={B} L={L}: FlashInfer selective_state_update")
        t = _timed(fn, args.repeats)
        if t is not None:
            t /= nl
            out["conv"] = t
            record(**base, kernel="flashinfer selective_state_update", us_per_step=t * 1e6,
                   gbps=(2 * sb + io1) / t / 1e9, copy_frac=(2 * sb + io1) / t / copy_bw,
                   copy_frac_state_only=2 * sb / t / copy_bw)
    except Exception as e:
        print(f"  FlashInfer selective_state_update: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
              f"{_missing_module(e)}")
    if L > 16:
        return out  # FlashInfer limits max_window to 16
    for T in sorted({1} | {t for t in tokens if t in (4, 8) and t <= L}):
        if shp in _FI_CSSU_BUILD_FAILED:
            print(f"  FlashInfer checkpointing_ssu T={T}: skipped (its JIT module failed to build for {shp} above)")
            continue
        try:
            fis = []
            for l in range(nl):
                fis.append(peers.FlashInferCheckpointingSSU(
                    ls.ckpt[l], ls.A, ls.D, ls.dt_bias, ngroups=ls.G, max_window=L, num_tokens=T,
                    act_dtype=i1["x"].dtype, cursors=fis[0].cursors if fis else None))
            iT = ls.inputs[T]
            rs, pnat = fis[0].cursors
            rs.zero_()
            pnat.zero_()
            # check: from an empty ring, the first step equals conventional decoding of the T tokens
            y_fi = fis[0].step(iT["x"], iT["dt_raw"], iT["Bm"], iT["Cm"], z=iT["z"], state_batch_indices=ls.sbi)
            s_ref = ls.ckpt[0].clone()
            y_ref = torch.ops.replayssm.mamba2_decode(s_ref, iT["x"], iT["dt_raw"], iT["Bm"], iT["Cm"], ls.A, ls.D,
                                                      ls.dt_bias, iT["z"], ls.sbi, None)
            err = ((y_fi.float() - y_ref.float()).norm() / y_ref.float().norm()).item()
            print(f"  FlashInfer checkpointing_ssu T={T} first step vs our conventional: rel err y {err:.2e}")
            del s_ref
            if not err < 2e-2:
                raise RuntimeError(f"mismatch (y {err:.2e})")
            if T == 1:
                cases = (("std_in-phase", torch.zeros(B, dtype=torch.int32), None),
                         ("std_staggered", torch.arange(B, dtype=torch.int32) % (L + 1), None))
            else:
                cases = []
                for accept in ("all", "one", "mixed"):
                    if accept == "all":
                        accs = [torch.full((B,), T, dtype=torch.int32) for _ in range(2 * L)]
                    elif accept == "one":
                        accs = [torch.ones(B, dtype=torch.int32) for _ in range(2 * L)]
                    else:
                        accs = [torch.randint(1, T + 1, (B,), generator=gen, dtype=torch.int32) for _ in range(2 * L)]
                    cases.append((f"T{T}_{accept}", torch.arange(B, dtype=torch.int32) % (L + 1),
                                  [a.cuda() for a in accs]))
            settle(f"{shp} B={B} L={L} T={T}: FlashInfer checkpointing_ssu")
            for name, p0, accs in cases:
                K = (L + 1) if accs is None else len(accs)

                def cycle(K=K, accs=accs):
                    for k in range(K):
                        for l in range(nl):
                            fis[l].step(iT["x"], iT["dt_raw"], iT["Bm"], iT["Cm"], z=iT["z"],
                                        state_batch_indices=ls.sbi, out=iT["y"])
                        fis[0].commit(ls.sbi, None if accs is None else accs[k])
                rs.zero_()
                pnat.zero_()
                pnat[:B].copy_(p0.cuda())
                t = _timed(cycle, args.repeats)
                if t is None:
                    continue
                t /= K * nl
                out[f"cssu_{name}"] = t
                record(shape=shp, B=B, L=L, T=T, kernel=f"flashinfer checkpointing_ssu {name}",
                       us_per_step=t * 1e6)
            del fis
        except Exception as e:
            print(f"  FlashInfer checkpointing_ssu T={T}: failed: {type(e).__name__}: "
                  f"{str(e).splitlines()[0][:200]}{_missing_module(e)}")
            if _is_jit_build_failure(e):
                _FI_CSSU_BUILD_FAILED.add(shp)
    return out


def _missing_module(e: Exception) -> str:
    """The JIT module FlashInfer looked for when its cache missed (MissingJITCacheError.spec.name), so that it can be
    prebuilt with scripts/build_flashinfer_cache.sh; empty for other errors."""
    name = getattr(getattr(e, "spec", None), "name", None)
    return f" [missing module: {name}]" if name else ""


# ------------------------------------------------------------------------------------------- run
def run(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("bench mamba2: needs a CUDA GPU", file=sys.stderr)
        return 2
    import replayssm_trtllm.ops.commit  # noqa: F401
    import replayssm_trtllm.ops.mamba2  # noqa: F401
    from replayssm_trtllm.ops._lib import KernelUnsupportedError
    from replayssm_trtllm.ops.mamba2 import row_chunk
    from replayssm_trtllm.ops.state_cache import replay_overhead_bytes
    from replayssm_trtllm.bench.step_traffic import (conventional_step_bytes, perdraft_step_bytes, replay_cycle_traffic,
                                                     traffic_bounds)
    from replayssm_trtllm.state.cursors import SPECULATIVE, STANDARD

    st, act = _dt(args.state_dtype), _dt(args.act_dtype)
    st_b, act_b = torch.tensor([], dtype=st).element_size(), torch.tensor([], dtype=act).element_size()
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    try:
        shape_of = {s: resolve_shape(SHAPES, s, ("H", "G")) for s in shapes}
    except ValueError as e:
        print(f"bench mamba2: {e}", file=sys.stderr)
        return 2
    ints = lambda text: [int(v) for v in text.split(",") if v.strip()]  # noqa: E731
    batches = ints(args.batch) if args.batch else ([1, 64, 256, 512] if args.full else [256, 1])
    windows = ints(args.window) if args.window else ([8, 16, 32] if args.full else [16])
    tokens = ints(args.tokens) if args.tokens else ([1, 2, 4, 8] if args.full else [1, 4, 8])
    variants = ints(args.variants)
    explicit_rows = ints(args.rows) if args.rows else None
    sweep = not args.no_sweep_rows
    peers, peer_status = None, "not available"
    try:
        from replayssm_trtllm.bench import peers as _peers
        ok, why = (False, "skipped (--no-flashinfer)") if args.no_flashinfer else _peers.flashinfer_available()
        peers, peer_status = (_peers, "available") if ok else (None, f"not available: {why}")
        if ok and _peers.pdl_chain_requested():  # both sides launch with PDL (RSSM_PDL_CHAIN=1)
            peer_status += " (checkpointing_ssu with enable_pdl=True, as RSSM_PDL_CHAIN=1 launches ours)"
    except Exception as e:  # pragma: no cover - depends on the machine
        peer_status = f"not available: {type(e).__name__}: {e}"
    print(f"FlashInfer peer: {peer_status}")

    copy_bw = copy_bandwidth()
    print(f"device-to-device copy: {copy_bw / 1e12:.3f} TB/s (read + write)")
    rmw_bw = inplace_bandwidth()
    print(f"in-place read-modify-write (torch.mul(buf, 1, out=buf)): {rmw_bw / 1e12:.3f} TB/s "
          f"({rmw_bw / copy_bw:.1%} of copy; the access pattern of a conventional step)")
    print(f"variants {variants}; rows_per_cta sweep {'on' if sweep else 'off'}")
    settler = BandwidthSettler(args.settle_seconds, log=lambda m: print(m, flush=True))
    rows_out, targets, best_rows = [], {}, []
    peer_reference = {}  # FlashInfer checkpointing_ssu figures (us per layer-step), beside the targets
    gen = torch.Generator().manual_seed(args.seed)

    def record(**kw):
        rows_out.append(kw)
        extra = f"  speedup {kw['speedup']:.3f}x" if kw.get("speedup") else ""
        extra += f"  x{kw['ratio_to_conv_step']:.3f} conv" if kw.get("ratio_to_conv_step") else ""
        bw = f"  {kw['gbps']:.0f} GB/s ({100 * kw['copy_frac']:.1f}% copy)" if kw.get("gbps") else ""
        print(f"{kw['shape']:5s} B={kw['B']:<4d} L={kw['L']:<3d} T={kw['T']} {kw['kernel']:44s} "
              f"{kw['us_per_step']:9.2f} us/step{bw}{extra}", flush=True)

    def sweep_case(label, base, points, fn_of, per_s, by=None, by_state=None, **extra):
        """Times fn_of(v, rows) for every (v, rows) point; records each; returns (best t, v, rows). by: bytes per
        step (state, records and the step's inputs and outputs); by_state: the same without the inputs and outputs."""
        best = (None, None, None)
        for v, rows in points:
            t = _timed(fn_of(v, rows), args.repeats)
            if t is None:
                continue
            t /= per_s
            kw = dict(base, kernel=f"{label} v{v} rows={rows or 'auto'}", us_per_step=t * 1e6, variant=v, rows=rows)
            if by:
                kw.update(gbps=by / t / 1e9, copy_frac=by / t / copy_bw)
            if by_state:
                kw.update(copy_frac_state_only=by_state / t / copy_bw)
            kw.update({k: (f(t) if callable(f) else f) for k, f in extra.items()})
            record(**kw)
            if best[0] is None or t < best[0]:
                best = (t, v, rows)
        if best[0] is not None:
            best_rows.append(dict(base, kernel=label, us_per_step=best[0] * 1e6, variant=best[1], rows=best[2]))
        return best

    out = Path(args.out)
    ov = replay_overhead_bytes(128, 64, 128, 8, 16, 4, act_bytes=2)  # the memory target: no timing, one value
    ring_target = dict(
        value=ov["ratio_with_cursors_unshared"], goal="<= 0.12", met=ov["ratio_with_cursors_unshared"] <= 0.12,
        case=f"ring {ov['ring_bytes']} B + cursors 8 B per slot per layer vs fp32 state {ov['state_bytes_fp32']} B")

    def write_out(copy_bw_end=None, complete=False):
        """The JSON as far as the run got (``complete`` False until the last block; the end's copy bandwidth then)."""
        targets.pop("ring_overhead_super_L16_T4", None)  # kept last, after the blocks' targets
        targets["ring_overhead_super_L16_T4"] = ring_target
        result = dict(
            gpu=torch.cuda.get_device_name(), date=datetime.datetime.now().isoformat(timespec="seconds"),
            command=command_line(), git_commit=git_commit(), copy_bandwidth_Bps=copy_bw,
            copy_bandwidth_end_Bps=copy_bw_end, inplace_rmw_bandwidth_Bps=rmw_bw, variants=variants,
            complete=complete,
            bandwidth_bytes="state read/written, ring records read/written and the step's inputs and outputs (x, z, "
                            "y, B, C, dt_raw); copy_frac_state_only / value_state_bytes_only: without the inputs and "
                            "outputs",
            state_dtype=args.state_dtype, act_dtype=args.act_dtype, peers=peer_status,
            targets=drop_rank_shape_targets(targets, shapes),  # partial files too
            peer_reference=peer_reference, rows=rows_out, settle=settler.summary(),
            best=best_rows)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1, default=float))
        return result

    for shp in shapes:
        sh = shape_of[shp]
        rec_b = _record_bytes(sh, act_b)
        ch = row_chunk(st, sh["N"])
        for B in batches:
            sb = _state_bytes(sh, B, st_b)
            io1 = B * _io_bytes(sh, act_b)  # one token's inputs and outputs of all rows
            conv_st, conv_io = conventional_step_bytes(B, sb / B, io1 / B)  # FlashInfer's conventional step: the same
            by_conv = conv_st + conv_io
            nl = int(min(64, max(2, math.ceil(args.l2_bytes / sb))))
            for L in windows:
                Tmax = max(tokens)
                try:
                    ls = _Layerset(sh, B, L, Tmax, st, act, nl, args.seed + B + L,
                                   need_snap=Tmax if Tmax > 1 else 0, token_list=tokens)
                except torch.OutOfMemoryError:
                    print(f"{shp} B={B} L={L}: out of memory, skipped")
                    torch.cuda.empty_cache()
                    continue
                for v in variants:
                    for T in sorted(set(tokens) | {1}):
                        try:
                            err, ok = _check(ls, T, v)
                        except KernelUnsupportedError as e:
                            # a design the launcher refuses for these sizes (the split kernels past 32 records per
                            # step: L = 32, T >= 2) is reported and left out; the timing skips it the same way; any
                            # other error stops the run
                            print(f"{shp} B={B} L={L} T={T} v{v}: refused: {str(e).splitlines()[0][:200]}")
                            torch.cuda.synchronize()
                            continue
                        print(f"{shp} B={B} L={L} T={T} v{v}: conventional and replay vs conventional v0: "
                              f"max err / bound = {err:.2f} {'OK' if ok else 'MISMATCH'}")
                        if not ok:
                            targets[f"correct_{shp}_B{B}_L{L}_T{T}_v{v}"] = dict(
                                value=err, goal="<= 1", met=False, case=f"{shp} B={B} L={L} T={T} variant {v}")
                target_case = L == 16 and B in (1, 256)
                do_sweep = sweep and target_case
                pts = [(v, r) for v in variants for r in _rows_list(v, sh, ch, do_sweep, explicit_rows)]
                conv_pts = [(v, r) for v, r in pts if v in CONV_VARIANTS]
                base = dict(shape=shp, B=B, L=L, T=1)
                settler.settle(f"{shp} B={B} L={L}: the block's timings (buffers allocated, checks run)")
                # ---- conventional standard step
                conv_best, cv, cr = sweep_case(
                    "conventional", base, conv_pts,
                    lambda v, r: (lambda: [ls.conv_step(l, 1, rows=r, variant=v) for l in range(nl)]), nl,
                    by=by_conv, by_state=conv_st)
                if conv_best is None:
                    print(f"{shp} B={B} L={L}: no conventional configuration ran; skipped")
                    continue
                print(f"  best conventional: {conv_best * 1e6:.2f} us (v{cv}, rows={cr or 'auto'})")
                fi = _flashinfer_cases(peers, ls, sh, shp, B, L, tokens, args, record, sb, copy_bw, gen, io1,
                                       settle=settler.settle) if peers is not None else {}
                settler.settle(f"{shp} B={B} L={L}: the replay timings")
                if fi.get("conv") is not None and fi["conv"] < conv_best:
                    print(f"  FlashInfer selective_state_update is the fastest conventional kernel: "
                          f"{fi['conv'] * 1e6:.2f} us")
                    conv_best, cv, cr = fi["conv"], "flashinfer", 0
                for key, t_fi in fi.items():  # peer figures, not targets: kept apart from `targets`
                    if key.startswith("cssu") and t_fi is not None:
                        peer_reference.setdefault(f"flashinfer_{key}_{shp}_B{B}_L{L}", dict(
                            us_per_step=t_fi * 1e6, case=f"FlashInfer checkpointing_ssu {key}"))
                if B >= 256 and L == 16:
                    frac = by_conv / conv_best / copy_bw
                    targets.setdefault(f"conv_copy_frac_{shp}_B{B}", dict(
                        value=frac, goal=">= 0.90", met=frac >= 0.90,
                        value_state_bytes_only=conv_st / conv_best / copy_bw,
                        case=f"{shp} B={B} conventional standard step (best: v{cv} rows={cr or 'auto'}); bytes: state "
                             f"read + written and the step's inputs and outputs"))
                # ---- replay standard, window-amortized, in phase and staggered
                # traffic per step over a window (the same in phase and staggered): per row L checkpoint reads, 1
                # write, 0 + 1 + ... + (L - 1) record reads, L record writes, one token's inputs and outputs each
                tr_std = replay_cycle_traffic(torch.zeros(B, dtype=torch.int32), L, mode=STANDARD, num_tokens=1,
                                              window=L, state_row_bytes=sb / B, record_bytes=rec_b,
                                              io_row_bytes=io1 / B)
                by_st, by = tr_std.state_bytes, tr_std.total_bytes
                for phase in ("in-phase", "staggered"):
                    h0 = torch.zeros(B, dtype=torch.int32) if phase == "in-phase" else (
                        torch.arange(B, dtype=torch.int32) % L)

                    def cyc(v, r, h0=h0):
                        def cycle():
                            for _ in range(L):
                                for l in range(nl):
                                    ls.replay_step(l, 1, 0, r, v)
                                ls.commit(1, 0)
                        ls.set_cursors(h0.cuda())
                        return cycle
                    t, v_, r_ = sweep_case(f"replay standard {phase}", base, pts, cyc, L * nl, by=by, by_state=by_st,
                                           speedup=lambda t: conv_best / t)
                    if t is None:
                        continue
                    print(f"  best replay standard {phase}: {t * 1e6:.2f} us (v{v_}, rows={r_ or 'auto'}, ring "
                          f"capacity {ls.C_std}), {conv_best / t:.3f}x the best conventional")
                    t_spec_ring = None
                    if ls.C_std != ls.C:  # beside it (not a target): the same step on the speculative ring (L + Tmax)
                        with standard_steps_on_ring(ls, ls.C):
                            t_spec_ring = _timed(cyc(v_, r_), args.repeats)
                        if t_spec_ring is not None:
                            t_spec_ring /= L * nl
                            record(**base, kernel=f"replay standard {phase} v{v_} (ring {ls.C}, not a target)",
                                   us_per_step=t_spec_ring * 1e6, variant=v_, rows=r_,
                                   speedup=conv_best / t_spec_ring)
                    if L == 16 and B in (1, 256):
                        goal = 1.75 if B >= 256 else 1.0
                        targets[f"std_speedup_{shp}_B{B}_{phase}"] = dict(
                            value=conv_best / t, goal=f">= {goal}", met=conv_best / t >= goal,
                            case=f"{shp} B={B} L=16 {phase}, window-amortized, flushes included, ring capacity "
                                 f"{ls.C_std} (replay v{v_} rows={r_ or 'auto'} vs conventional v{cv} "
                                 f"rows={cr or 'auto'})")
                        if t_spec_ring is not None:
                            targets[f"std_speedup_{shp}_B{B}_{phase}"][f"value_ring_{ls.C}"] = conv_best / t_spec_ring
                        if B >= 256 and phase == "in-phase":
                            targets[f"replay_copy_frac_{shp}_B{B}"] = dict(
                                value=by / t / copy_bw, goal=">= 0.85", met=by / t / copy_bw >= 0.85,
                                value_state_bytes_only=by_st / t / copy_bw,
                                case=f"{shp} B={B} L=16 replay standard in-phase (v{v_} rows={r_ or 'auto'})")
                # ---- speculative
                spec_pts = [(v, r) for v in variants for r in _rows_list(v, sh, ch, do_sweep, explicit_rows)
                            if r == 0 or (v != 0 and r == math.ceil(sh["P"] / 2 / 8) * 8) or explicit_rows]
                for T in tokens:
                    if T == 1 or T > L:
                        continue
                    bT = dict(shape=shp, B=B, L=L, T=T)
                    by_pd = sum(perdraft_step_bytes(B, sb / B, io1 / B, T))
                    t_pd, vpd, rpd = sweep_case(
                        "conventional per-draft snapshots", bT, [(v, 0) for v in variants if v in CONV_VARIANTS],
                        lambda v, r: (lambda: ls.conv_step(0, T, snap=True, rows=r, variant=v)), 1, by=by_pd,
                        ratio_to_conv_step=lambda t: t / conv_best)
                    K = 2 * L
                    h0_spec = torch.arange(B, dtype=torch.int32) % (L + 1)
                    for accept in ("all", "one", "mixed"):
                        if accept == "all":
                            accs = [torch.full((B,), T, dtype=torch.int32) for _ in range(K)]
                        elif accept == "one":
                            accs = [torch.ones(B, dtype=torch.int32) for _ in range(K)]
                        else:
                            accs = [torch.randint(1, T + 1, (B,), generator=gen, dtype=torch.int32) for _ in range(K)]
                        # the bytes of this cycle's steps, from the cursor rules: the graph runs the cycle once to
                        # warm up, once after capture and `repeats` times timed, the cursors carrying over
                        tr = replay_cycle_traffic(h0_spec, accs, mode=SPECULATIVE, num_tokens=T, window=L,
                                                  state_row_bytes=sb / B, record_bytes=rec_b, io_row_bytes=io1 / B,
                                                  passes=2 + args.repeats, timed_passes=args.repeats,
                                                  reset_each_pass=False)
                        accs = [a.cuda() for a in accs]

                        def scyc(v, r, accs=accs):
                            def spec_cycle():
                                for k in range(K):
                                    for l in range(nl):
                                        ls.replay_step(l, T, 1, r, v)
                                    ls.commit(T, 1, accs[k])
                            ls.set_cursors(h0_spec.cuda())
                            return spec_cycle
                        t, v_, r_ = sweep_case(f"replay verify {accept}-accepted", bT, spec_pts, scyc, K * nl,
                                               by=tr.total_bytes, by_state=tr.state_bytes,
                                               ratio_to_conv_step=lambda t: t / conv_best,
                                               speedup=(lambda t: t_pd / t) if t_pd else None)
                        if t is None:
                            continue
                        print(f"  best replay verify T={T} {accept}: {t * 1e6:.2f} us (v{v_}, rows={r_ or 'auto'}), "
                              f"{t / conv_best:.3f} x conventional step"
                              + (f", {t_pd / t:.2f}x faster than per-draft" if t_pd else ""))
                        bounds = traffic_bounds(tr.total_bytes, by_conv, conv_best, copy_bw)
                        print(f"    bytes per layer-step {tr.total_bytes / 1e6:.1f} MB (flushing rows "
                              f"{tr.flush_fraction:.3f}, records read per row {tr.records_read:.2f}): "
                              f"{tr.total_bytes / t / copy_bw:.1%} of copy; the ratio at the conventional kernel's "
                              f"efficiency {bounds['ratio_at_equal_efficiency']:.3f}, at copy bandwidth "
                              f"{bounds['ratio_at_copy_bandwidth']:.3f}")
                        if L == 16 and B >= 256 and T in (4, 8):
                            goal = 0.65 if T == 4 else 0.85
                            targets[f"spec_T{T}_ratio_{shp}_B{B}_{accept}"] = dict(
                                value=t / conv_best, goal=f"<= {goal}", met=t / conv_best <= goal,
                                copy_frac=tr.total_bytes / t / copy_bw, flush_fraction=tr.flush_fraction, **bounds,
                                case=f"{shp} B={B} L=16 T={T} {accept}-accepted, flushes included "
                                     f"(v{v_} rows={r_ or 'auto'})")
                            t_fi = fi.get(f"cssu_T{T}_{accept}")
                            if t_fi is not None:
                                targets[f"spec_T{T}_vs_flashinfer_{shp}_B{B}_{accept}"] = dict(
                                    value=t_fi / t, goal=">= 1", met=t_fi / t >= 1,
                                    case=f"{shp} B={B} L=16 T={T} {accept}-accepted: FlashInfer "
                                         f"checkpointing_ssu time / ours")
                            if T == 4 and t_pd:
                                targets[f"spec_T4_vs_perdraft_{shp}_B{B}_{accept}"] = dict(
                                    value=t_pd / t, goal=">= 4", met=t_pd / t >= 4,
                                    value_at_equal_efficiency=by_pd / tr.total_bytes,
                                    case=f"{shp} B={B} L=16 T=4 {accept}-accepted vs per-draft snapshots "
                                         f"(best per-draft v{vpd})")
                del ls
                torch.cuda.empty_cache()
                write_out()  # after every (shape, B, L) block: a run stopped by a time limit keeps what it timed

    settler.close()
    copy_bw2 = copy_bandwidth()
    print(f"device-to-device copy at the end: {copy_bw2 / 1e12:.3f} TB/s (read + write)")
    targets = drop_rank_shape_targets(targets, shapes)  # the JSON, the published tables and the printout alike
    result = write_out(copy_bw2, complete=True)
    dated = publish_official_run("mamba2", out, "bench/results/latest-mamba2.json", best_rows, targets,
                                 command_line(), result["gpu"],
                                 columns=["shape", "B", "L", "T", "kernel", "us_per_step", "variant"])
    if dated:
        print(f"also wrote {dated} and appended the tables to docs/benchmarks.md")
    print("\nBEST PER CASE (us per layer-step)")
    for r in best_rows:
        print(f"  {r['shape']:5s} B={r['B']:<4d} L={r['L']:<3d} T={r['T']} {r['kernel']:36s} {r['us_per_step']:9.2f}"
              f"  v{r['variant']} rows={r['rows'] or 'auto'}")
    if peer_reference:
        print("\nPEER REFERENCE (us per layer-step)")
        for k, v in peer_reference.items():
            print(f"  {k}: {v['us_per_step']:.2f}")
    print("\nTARGETS")
    for k, v in targets.items():
        bw = (f" [{v['copy_frac']:.1%} of copy; {v['ratio_at_equal_efficiency']:.3f} at the conventional kernel's "
              f"efficiency]" if "ratio_at_equal_efficiency" in v else "")
        val = target_value_text(v["value"], v["goal"], v["met"])
        print(f"  {'MET ' if v['met'] else 'MISS'} {k}: {val} (goal {v['goal']}; {v['case']}){bw}")
    print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
