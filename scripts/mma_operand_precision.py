"""Output error of a state readout y = S . C when the fp32 state S enters a tensor-core product narrowed (CPU, float64
reference; no GPU needed). Informs the design of an MMA-form verify readout (docs/analysis-flashinfer-cssu.md):
FlashInfer 0.7.4 narrows S to bf16 for that product.

    python scripts/mma_operand_precision.py [--trials 200] [--seed 0]

S: [P = 64, N = 128] with row scales spread over e^N(0, 1) (states of heads with different decays), C: bf16 values
(the model's activations), T = 8 tokens. Prints the per-token relative L2 error of y for S as fp32, bf16, bf16 hi + lo
(two bf16 terms: two MMAs), tf32 (10-bit mantissa, m16n8k8; rounded by cvt.rna, or truncated: the raw fp32 bits
as the operand) and tf32 hi + lo.
"""
from __future__ import annotations

import argparse

import torch


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 to tf32 (10 explicit mantissa bits), to nearest."""
    i = x.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def _tf32_truncated(x: torch.Tensor) -> torch.Tensor:
    """fp32 as an m16n8k8 TF32 operand without a cvt: the tensor core ignores the 13 low mantissa bits (toward 0)."""
    i = x.contiguous().view(torch.int32)
    return (i & ~0x1FFF).view(torch.float32)


def study(trials: int = 200, seed: int = 0, P: int = 64, N: int = 128, T: int = 8) -> dict:
    g = torch.Generator().manual_seed(seed)
    out: dict = {}
    for _ in range(trials):
        S = torch.randn(P, N, dtype=torch.float64, generator=g) * torch.exp(torch.randn(P, 1, dtype=torch.float64, generator=g))
        C = torch.randn(N, T, dtype=torch.float64, generator=g).to(torch.bfloat16).to(torch.float64)
        y = S @ C
        s32 = S.float()
        hi = s32.to(torch.bfloat16).float()
        lo = (s32 - hi).to(torch.bfloat16).float()
        t_hi = _tf32(s32)
        t_lo = _tf32(s32 - t_hi)
        cases = {"fp32": s32, "bf16": hi, "bf16 hi+lo": hi + lo, "tf32": t_hi, "tf32 truncated": _tf32_truncated(s32),
                 "tf32 hi+lo": t_hi + t_lo}
        for name, Sa in cases.items():
            e = ((Sa.double() @ C - y).norm(dim=0) / y.norm(dim=0)).max().item()
            out.setdefault(name, []).append(e)
    return {k: (float(torch.tensor(v).median()), float(torch.tensor(v).max())) for k, v in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for k, (med, mx) in study(a.trials, a.seed).items():
        print(f"{k:14s} relative L2 error of y per token: median {med:.2e}  max {mx:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
