"""CPU check of scripts/mma_operand_precision.py: the orders of magnitude the MMA readout design relies on."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "mma_operand_precision", Path(__file__).resolve().parents[2] / "scripts" / "mma_operand_precision.py")
mop = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mop)


def test_narrowed_state_errors():
    r = mop.study(trials=40, seed=1)
    assert r["fp32"][1] < 1e-6
    assert r["bf16"][0] > 1e-3  # bf16 state (FlashInfer's choice): above a 2e-3-class output bound in the tail
    assert r["bf16 hi+lo"][1] < 5e-5 and r["tf32"][1] < 2e-3 and r["tf32 hi+lo"][1] < 1e-6
    assert r["bf16"][0] > 5 * r["tf32"][0] and r["tf32"][0] > 10 * r["bf16 hi+lo"][0]  # 3 mantissa bits apart, then 16
    # the tensor-core verify readout rounds S to TF32 (add half an ulp, the tensor core drops 13 bits); without the add
    # (raw fp32 bits, truncated) the error is ~1.6x larger, still well below bf16
    assert r["tf32"][0] < r["tf32 truncated"][0] < 2.5 * r["tf32"][0] and r["tf32 truncated"][1] < 2e-3
