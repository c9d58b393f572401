#!/usr/bin/env python3
"""Smoke-test the peer wrappers (replayssm_trtllm.bench.peers) and the copy ceiling on a GPU.

Run on the GPU machine from the repo root, with .whl and .fi_cache carried:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
    PYTHONUNBUFFERED=1 python3 scripts/smoke_peers.py

Checks, each against a float64 torch reference on fresh random inputs (relative L2 error):
  1. measure_copy_bandwidth (GB/s, read + write).
  2. flashinfer selective_state_update, Nemotron-3-Super shape (H=128, P=64, N=128, G=8), B=4,
     fp32 state, bf16 x/B/C/z, scattered slots; a padding row (-1) must leave its slot alone.
  3. flashinfer checkpointing_ssu through FlashInferCheckpointingSSU, same shape, L=16:
     standard (T=1, 40 steps, crossing flushes) and speculative (T=4, 16 steps, random accepted
     counts); outputs of every step vs the conventional recurrence.
  4. fla GDN decode, Qwen3.5-122B shape (H=16, HV=64, K=V=128), B=4, impl 'inplace' (T=1 and
     T=3) and 'gather' (T=1).
  5. CUDA-graph timing (time_graph) of 2 and 3 at B=4 (a smoke number, not a benchmark).
FlashInfer's JIT is disabled (FLASHINFER_DISABLE_JIT=1) unless --allow-jit: a module missing
from .fi_cache then fails in seconds instead of compiling for ~10 minutes.
A compact summary is printed last; the full record goes to $OUT/smoke_peers.json when $OUT is set.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


# ---------------------------------------------------------------------------------------------
# float64 references (docs/design.md section 2)
# ---------------------------------------------------------------------------------------------
def mamba2_ref_step(S, x, dt_raw, A, Bm, Cm, D, z, dt_bias):
    """One token for rows b: S [B,H,P,N] f64 (updated copy returned), x [B,H,P], dt_raw [B,H],
    Bm/Cm [B,G,N]; returns (y [B,H,P], S_new)."""
    import torch
    import torch.nn.functional as F

    Bsz, H, P, N = S.shape
    G = Bm.shape[1]
    rep = H // G
    dt = F.softplus(dt_raw.double() + dt_bias.double())            # [B,H]
    alpha = torch.exp(dt * A.double())                              # [B,H]
    Bh = Bm.double().repeat_interleave(rep, dim=1)                  # [B,H,N]
    Ch = Cm.double().repeat_interleave(rep, dim=1)
    xd = x.double()
    S_new = alpha[..., None, None] * S + (dt[..., None] * xd)[..., None] * Bh[:, :, None, :]
    y = torch.einsum("bhpn,bhn->bhp", S_new, Ch) + D.double()[None, :, None] * xd
    if z is not None:
        y = y * F.silu(z.double())
    return y, S_new


def gdn_ref_step(S, q, k, v, a, b, A_log, dt_bias, scale):
    """One token: S [B,HV,V,K] f64, q/k [B,H,K], v [B,HV,V], a/b [B,HV]; returns (o, S_new)."""
    import torch
    import torch.nn.functional as F

    HV, H = v.shape[1], q.shape[1]
    g = -torch.exp(A_log.double()) * F.softplus(a.double() + dt_bias.double())
    alpha, beta = torch.exp(g), torch.sigmoid(b.double())

    def l2n(t):
        t = t.double()
        return t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)

    qn = (l2n(q) * scale).repeat_interleave(HV // H, dim=1)         # [B,HV,K]
    kn = l2n(k).repeat_interleave(HV // H, dim=1)
    Sa = alpha[..., None, None] * S
    u = beta[..., None] * (v.double() - torch.einsum("bhvk,bhk->bhv", Sa, kn))
    S_new = Sa + u[..., None] * kn[:, :, None, :]
    o = torch.einsum("bhvk,bhk->bhv", S_new, qn)
    return o, S_new


# ---------------------------------------------------------------------------------------------
def mamba_inputs(Bsz, T, H, P, N, G, dev, g):
    import torch

    bf = torch.bfloat16
    x = torch.randn(Bsz, T, H, P, device=dev, generator=g).to(bf)
    z = torch.randn(Bsz, T, H, P, device=dev, generator=g).to(bf)
    Bm = torch.randn(Bsz, T, G, N, device=dev, generator=g).mul(0.3).to(bf)
    Cm = torch.randn(Bsz, T, G, N, device=dev, generator=g).mul(0.3).to(bf)
    dt = (torch.rand(Bsz, T, H, device=dev, generator=g) * 2 - 3).to(bf)   # softplus ~ 0.05..0.3
    return x, dt, Bm, Cm, z


def check_ssu(res, dev, H=128, P=64, N=128, G=8, Bsz=4, S=8):
    import torch
    from replayssm_trtllm.bench import peers

    g = torch.Generator(device=dev).manual_seed(1)
    A = -torch.rand(H, device=dev, generator=g) * 4 - 0.5
    D = torch.randn(H, device=dev, generator=g)
    dt_bias = torch.randn(H, device=dev, generator=g) * 0.5
    state = torch.randn(S, H, P, N, device=dev, generator=g) * 0.5
    sbi = torch.tensor([5, 2, 7, 0], dtype=torch.int32, device=dev)
    x, dt, Bm, Cm, z = [t[:, 0] for t in mamba_inputs(Bsz, 1, H, P, N, G, dev, g)]
    ref_y, ref_S = mamba2_ref_step(state[sbi.long()].double(), x, dt, A, Bm, Cm, D, z, dt_bias)
    st = state.clone()
    out = torch.full_like(x, float("nan"))
    peers.flashinfer_ssu_decode(st, x, dt.float(), A, Bm, Cm, D, z=z, dt_bias=dt_bias,
                                state_batch_indices=sbi, out=out)
    torch.cuda.synchronize()
    e_y, e_s = rel(out, ref_y), rel(st[sbi.long()], ref_S)
    untouched = [1, 3, 4, 6]
    same_other = bool(torch.equal(st[untouched], state[untouched]))
    # padding row: slot -1 must be skipped (its slot untouched)
    sbi_pad = torch.tensor([5, -1, 7, 0], dtype=torch.int32, device=dev)
    st2 = state.clone()
    peers.flashinfer_ssu_decode(st2, x, dt.float(), A, Bm, Cm, D, z=z, dt_bias=dt_bias,
                                state_batch_indices=sbi_pad)
    torch.cuda.synchronize()
    pad_ok = bool(torch.equal(st2[2], state[2]))
    ok = e_y < 2e-2 and e_s < 1e-4 and same_other and pad_ok and bool(torch.isfinite(out).all())
    res["ssu"] = dict(ok=ok, rel_out=e_y, rel_state=e_s, other_slots_untouched=same_other,
                      padding_skipped=pad_ok)


def check_cssu(res, dev, T, steps, H=128, P=64, N=128, G=8, Bsz=4, S=8, L=16):
    import torch
    from replayssm_trtllm.bench import peers

    g = torch.Generator(device=dev).manual_seed(10 + T)
    A = -torch.rand(H, device=dev, generator=g) * 4 - 0.5
    D = torch.randn(H, device=dev, generator=g)
    dt_bias = torch.randn(H, device=dev, generator=g) * 0.5
    state = torch.randn(S, H, P, N, device=dev, generator=g) * 0.5
    sbi = torch.tensor([3, 6, 1, 4], dtype=torch.int32, device=dev)
    ref_S = state[sbi.long()].double()
    drv = peers.FlashInferCheckpointingSSU(state, A, D, dt_bias, ngroups=G, max_window=L, num_tokens=T)
    worst, flushes = 0.0, 0
    for step in range(steps):
        x, dt, Bm, Cm, z = mamba_inputs(Bsz, T, H, P, N, G, dev, g)
        out = torch.full_like(x, float("nan"))
        p_before = drv.pnat[sbi.long()].clone()
        drv.step(x, dt, Bm, Cm, z=z, state_batch_indices=sbi, out=out)
        acc = (torch.randint(1, T + 1, (Bsz,), device=dev, generator=g, dtype=torch.int32)
               if T > 1 else None)
        drv.commit(sbi, acc)
        flushes += int(((p_before + T) > L).sum())
        # reference: drafts run sequentially from the committed state; keep 'accepted' of them
        S_run, keep = ref_S, ref_S.clone()
        acc_l = [T] * Bsz if acc is None else acc.tolist()
        for t in range(T):
            y, S_run = mamba2_ref_step(S_run, x[:, t], dt[:, t], A, Bm[:, t], Cm[:, t], D, z[:, t], dt_bias)
            worst = max(worst, rel(out[:, t], y))
            for b in range(Bsz):
                if acc_l[b] == t + 1:
                    keep[b] = S_run[b]
        ref_S = keep
        if not bool(torch.isfinite(out).all()):
            worst = float("inf")
    torch.cuda.synchronize()
    res[f"cssu_T{T}"] = dict(ok=worst < 3e-2, worst_rel_out=worst, steps=steps, row_flushes=flushes,
                             pnat=drv.pnat[sbi.long()].tolist(), ring_start=drv.ring_start[sbi.long()].tolist())
    return drv


def check_fla(res, dev, impl, T, H=16, HV=64, K=128, V=128, Bsz=4, S=8):
    import torch
    from replayssm_trtllm.bench import peers

    g = torch.Generator(device=dev).manual_seed(20 + T)
    bf = torch.bfloat16
    A_log = torch.rand(HV, device=dev, generator=g).log()
    dt_bias = torch.randn(HV, device=dev, generator=g) * 0.5
    state = torch.randn(S, HV, V, K, device=dev, generator=g) * 0.1
    sbi = torch.tensor([6, 0, 3, 5], dtype=torch.int32, device=dev)
    q = torch.randn(Bsz, T, H, K, device=dev, generator=g).to(bf)
    k = torch.randn(Bsz, T, H, K, device=dev, generator=g).to(bf)
    v = torch.randn(Bsz, T, HV, V, device=dev, generator=g).to(bf)
    a = torch.randn(Bsz, T, HV, device=dev, generator=g).to(bf)
    b = torch.randn(Bsz, T, HV, device=dev, generator=g).to(bf)
    scale = K ** -0.5
    st = state.clone()
    o = peers.fla_gdn_decode(st, q, k, v, a, b, A_log, dt_bias, sbi, impl=impl)
    torch.cuda.synchronize()
    S_ref = state[sbi.long()].double()
    worst = 0.0
    for t in range(T):
        y, S_ref = gdn_ref_step(S_ref, q[:, t], k[:, t], v[:, t], a[:, t], b[:, t], A_log, dt_bias, scale)
        worst = max(worst, rel(o[:, t], y))
    e_s = rel(st[sbi.long()], S_ref)
    others = [1, 2, 4, 7]
    same_other = bool(torch.equal(st[others], state[others]))
    res[f"fla_{impl}_T{T}"] = dict(ok=worst < 2e-2 and e_s < 1e-3 and same_other, rel_out=worst,
                                   rel_state=e_s, other_slots_untouched=same_other)


def time_smoke(res, dev, Bsz=4, H=128, P=64, N=128, G=8, S=64, L=16):
    import torch
    from replayssm_trtllm.bench import common, peers

    g = torch.Generator(device=dev).manual_seed(99)
    A = -torch.rand(H, device=dev, generator=g) * 4 - 0.5
    D = torch.randn(H, device=dev, generator=g)
    dt_bias = torch.randn(H, device=dev, generator=g) * 0.5
    state = torch.randn(S, H, P, N, device=dev, generator=g) * 0.5
    sbi = torch.arange(Bsz, dtype=torch.int32, device=dev)
    x, dt, Bm, Cm, z = mamba_inputs(Bsz, 1, H, P, N, G, dev, g)
    x3, dt3, B3, C3, z3 = x[:, 0], dt[:, 0].float(), Bm[:, 0], Cm[:, 0], z[:, 0]
    out = torch.empty_like(x3)
    t_ssu = common.time_graph([lambda: peers.flashinfer_ssu_decode(
        state, x3, dt3, A, B3, C3, D, z=z3, dt_bias=dt_bias, state_batch_indices=sbi, out=out)] * (L + 1),
        reps=50)
    drv = peers.FlashInferCheckpointingSSU(state.clone(), A, D, dt_bias, ngroups=G, max_window=L, num_tokens=1)
    out4 = torch.empty_like(x)

    def cstep():
        drv.step(x, dt, Bm, Cm, z=z, state_batch_indices=sbi, out=out4)
        drv.commit(sbi)

    t_cssu = common.time_graph([cstep] * (L + 1), reps=50)
    res["timing_B4_unrotated"] = dict(ok=True, ssu_us=t_ssu["median_us"], ssu_mode=t_ssu["mode"],
                                      cssu_step_commit_us=t_cssu["median_us"], cssu_mode=t_cssu["mode"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allow-jit", action="store_true", help="let FlashInfer JIT-compile missing modules")
    ap.add_argument("--copy-bytes", type=int, default=4 << 30)
    args = ap.parse_args()
    if not args.allow_jit:
        os.environ.setdefault("FLASHINFER_DISABLE_JIT", "1")

    import torch
    from replayssm_trtllm.bench import common, peers

    res: dict = {}
    t0 = time.time()
    dev = torch.device("cuda")
    res["env"] = dict(torch=torch.__version__, gpu=common.gpu_name(),
                      flashinfer=peers.flashinfer_available(), fla=peers.fla_available(),
                      prebuilt=peers.flashinfer_prebuilt_modules(),
                      workspace=os.environ.get("FLASHINFER_WORKSPACE_BASE"))
    print("env:", json.dumps(res["env"], indent=1), flush=True)

    def section(name, fn, *a, **kw):
        t = time.time()
        try:
            fn(*a, **kw)
        except Exception as exc:
            res[name] = dict(ok=False, error=f"{type(exc).__name__}: {str(exc)[:600]}")
            traceback.print_exc()
        print(f"[{time.time() - t:6.1f} s] {name}: {res.get(name)}", flush=True)

    def bw():
        res["copy_bw"] = dict(ok=True, GBps=common.measure_copy_bandwidth(args.copy_bytes))

    section("copy_bw", bw)
    section("ssu", check_ssu, res, dev)
    section("cssu_T1", check_cssu, res, dev, 1, 40)
    section("cssu_T4", check_cssu, res, dev, 4, 16)
    section("fla_inplace_T1", check_fla, res, dev, "inplace", 1)
    section("fla_inplace_T3", check_fla, res, dev, "inplace", 3)
    section("fla_gather_T1", check_fla, res, dev, "gather", 1)
    section("timing_B4_unrotated", time_smoke, res, dev)

    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "smoke_peers.json").write_text(json.dumps(res, indent=1, default=str))
    rows = []
    for name, r in res.items():
        if name == "env":
            continue
        detail = {k: v for k, v in r.items() if k != "ok"}
        rows.append({"check": name, "ok": r.get("ok"),
                     "detail": ", ".join(f"{k}={common._fmt(v) if isinstance(v, float) else v}"
                                         for k, v in detail.items())[:160]})
    print(f"\n== smoke_peers summary ({time.time() - t0:.0f} s; flashinfer: {res['env']['flashinfer'][1]};"
          f" fla: {res['env']['fla'][1]})")
    print(common.format_table(rows, ["check", "ok", "detail"]))
    return 0 if all(r.get("ok") for n, r in res.items() if n != "env") else 1


if __name__ == "__main__":
    sys.exit(main())
