"""CPU check of scripts/gdn_readout_drift.py: a TF32 state operand in the GDN verify readout does not make the
recurrence drift (the state error stays at the level set by u's fp16 rounding), while a bf16 operand costs about
8x more output error. The orders of magnitude the tensor-core verify readout's precision note relies on."""
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "gdn_readout_drift", Path(__file__).resolve().parents[2] / "scripts" / "gdn_readout_drift.py")
drift = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(drift)


@pytest.mark.parametrize("rho", [0.0, 0.99])
def test_tf32_operand_does_not_drift(rho):
    r = drift.run(steps=400, rho=rho, seed=1)
    fp32, tf32, bf16 = r["fp32"], r["tf32"], r["bf16"]
    assert fp32[1] < 1e-3 and tf32[1] < 1.25 * fp32[1]          # final state: fp16-u rounding dominates
    assert tf32[0] < 2.5 * fp32[0] < 2e-3                        # outputs: TF32 readout rounding on top
    assert bf16[0] > 3 * tf32[0]                                 # a bf16 state operand is clearly worse


def test_modes_validated():
    with pytest.raises(ValueError, match="mode must be fp32, tf32 or bf16; got 'fp8'"):
        drift.run(steps=1, modes=("fp8",))
