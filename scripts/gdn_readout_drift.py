"""Long-run effect of a narrowed state operand in the GDN verify readout (CPU, float64 reference; no GPU needed).

Unlike Mamba-2's, the GDN readout's result enters the recurrence: the correction u_t = beta_t (v_t - alpha_t S kn_t)
is computed from the state, appended to the ring (fp16) and folded into the checkpoint at the next flush. The
tensor-core verify readout (cpp_plugins/kernels/gdn/gdn_split_mma_kernel.cuh) rounds S to TF32 for S . k; this
study runs one GDN head for N steps and compares, against the float64 recurrence,

* "fp32":  S . k in fp32 (the CUDA-core readouts), u rounded to fp16;
* "tf32":  S rounded to TF32 (to nearest, as the kernel's bits + 0x1000) for S . k and S . q, u rounded to fp16;
* "bf16":  S rounded to bf16 (what FlashInfer's checkpointing_ssu does for Mamba-2), u rounded to fp16,

with the values v_t correlated with the state's prediction (v = rho alpha S kn + sqrt(1 - rho^2) noise: rho -> 1
is the cancellation of a trained delta rule, where u is small against S kn). It reports the relative RMS error of
the outputs o_t = S_t qn_t over the last 10% of the steps and of the final state. It models the recurrence
conventionally (every step's u computed from the full state); in the replay kernels the TF32 operand is the
checkpoint part only, so this is an upper bound on the readout's share.

    python scripts/gdn_readout_drift.py [--steps 4000] [--rho 0,0.9,0.99] [--seed 0]
"""
from __future__ import annotations

import argparse
import math

import torch


def _tf32(x: torch.Tensor) -> torch.Tensor:
    i = x.float().contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def _operand(S32: torch.Tensor, mode: str) -> torch.Tensor:
    if mode == "fp32":
        return S32.double()
    if mode == "tf32":
        return _tf32(S32).double()
    if mode == "bf16":
        return S32.to(torch.bfloat16).double()
    raise ValueError(f"mode must be fp32, tf32 or bf16; got {mode!r}")


def run(steps: int = 4000, rho: float = 0.9, seed: int = 0, K: int = 128, V: int = 64,
        modes=("fp32", "tf32", "bf16")) -> dict:
    """Returns {mode: (output rel RMS error over the last 10% of the steps, final state rel error)}."""
    g = torch.Generator().manual_seed(seed)
    S_ref = 0.5 * torch.randn(V, K, dtype=torch.float64, generator=g)
    S = {m: S_ref.float().clone() for m in modes}
    tail = max(1, steps // 10)
    err = {m: [0.0, 0.0] for m in modes}  # sum of squared output errors, of squared reference outputs (tail)
    for t in range(steps):
        k = torch.randn(K, dtype=torch.float64, generator=g)
        q = torch.randn(K, dtype=torch.float64, generator=g)
        kn, qn = k / k.norm(), q / q.norm()
        alpha = math.exp(-0.02 - 0.08 * torch.rand(1, generator=g, dtype=torch.float64).item())  # decays 0.90-0.98
        beta = 0.2 + 0.6 * torch.rand(1, generator=g, dtype=torch.float64).item()
        noise = 0.5 * torch.randn(V, dtype=torch.float64, generator=g)  # the scale of S kn at the start
        pred = alpha * (S_ref @ kn)
        v = (rho * pred + math.sqrt(max(0.0, 1.0 - rho * rho)) * noise).to(torch.bfloat16).double()
        # float64 reference
        u_ref = beta * (v - alpha * (S_ref @ kn))
        S_ref = alpha * S_ref + torch.outer(u_ref, kn)
        o_ref = S_ref @ qn
        for m in modes:
            Sm = S[m]
            x = (_operand(Sm, m) @ kn.float().double()).float()  # the product's fp32 accumulation
            u = (beta * (v.float() - alpha * x)).half().float()  # u appended in fp16
            Sm = (alpha * Sm + torch.outer(u, kn.float())).float()
            S[m] = Sm
            o = (_operand(Sm, m) @ qn.float().double()).float().double()
            if t >= steps - tail:
                err[m][0] += float(((o - o_ref) ** 2).sum())
                err[m][1] += float((o_ref ** 2).sum())
    return {m: (math.sqrt(err[m][0] / err[m][1]), float((S[m].double() - S_ref).norm() / S_ref.norm()))
            for m in modes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--rho", default="0,0.9,0.99", help="comma list of value / prediction correlations")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(f"GDN readout drift, one head K = 128, V = 64, {a.steps} steps (output error over the last 10%)")
    print(f"{'rho':>5} {'operand':>8} {'output rel RMS':>15} {'final state rel':>16}")
    for r in (float(x) for x in a.rho.split(",")):
        for m, (eo, es) in run(a.steps, r, a.seed).items():
            print(f"{r:5.2f} {m:>8} {eo:15.3e} {es:16.3e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
