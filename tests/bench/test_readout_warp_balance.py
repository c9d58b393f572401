"""scripts/readout_warp_balance.py: the cost model of the GDN split readout's static item walk (CPU; a model, not a
measurement). Checked against counts worked out by hand."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "readout_warp_balance.py"
_spec = importlib.util.spec_from_file_location("readout_warp_balance", _PATH)
wb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wb)


def test_uniform_items_balance_is_the_item_count_rounding():
    """All items of equal cost (an in-phase non-flush step): q35-4b B = 256 has 131072 items over 2640 warps, so warps
    hold 50 or 49 items and the most loaded one is 50 / (131072 / 2640) over the mean."""
    costs = np.ones(256 * 32 * 16)
    w, s = wb.walk_balance(costs, 2640)
    assert w == pytest.approx(50 / (131072 / 2640))
    # SM level: warps 0..1711 hold 50 items; SM c has CTAs c, c + 132, ... (4 warps each): SMs 0..31 hold 16 warps
    # of 50 and 4 of 49 (996 items), the others 992.
    assert s == pytest.approx(996 / (131072 / 132))


def test_item_costs_follow_the_model():
    c = wb.item_costs([0, 7, 15], 16, 3, flush_cost=2.5, h_slope=0.14)
    assert c.tolist() == pytest.approx([1.0] * 3 + [1.07] * 3 + [2.5] * 3)


def test_flush_items_of_one_row_land_on_consecutive_warps():
    """One flushing row of 512 items at the start of the walk: warps 0..511 carry one flush item each."""
    costs = np.ones(4 * 512)
    costs[:512] = 3.0
    per_warp = np.bincount(np.arange(costs.size) % 1000, weights=costs, minlength=1000)
    w, _ = wb.walk_balance(costs, 1000)
    assert w == pytest.approx(per_warp.max() / per_warp.mean())
    assert per_warp[:48].tolist() == [5.0] * 48  # items i (flush, 3), i + 1000 and i + 2000 (1 each)
    assert per_warp[48:512].tolist() == [4.0] * 464 and per_warp[512:].max() == 2.0


def test_lpt_bound_is_at_most_the_walk():
    rng = np.random.default_rng(1)
    costs = np.repeat(np.where(rng.permutation(64) % 16 == 15, 2.9, 1.0), 32)
    w, _ = wb.walk_balance(costs, 100)
    assert 1.0 <= wb.lpt_balance(costs, 100) <= w


@pytest.mark.parametrize("argv,needle", [
    (["--shape", "q35-9b"], "--shape 'q35-9b'"),
    (["--window", "1"], "--window at least 2"),
    (["--flush-cost", "0"], "expected a positive flush cost"),
    (["--mix", "zigzag"], "--mix ['zigzag']"),
])
def test_bad_arguments_are_refused(argv, needle, capsys):
    assert wb.main(argv) == 2
    assert needle in capsys.readouterr().err


def test_default_run_prints_every_pattern(capsys):
    assert wb.main(["--mix", "mod,perm"]) == 0
    out = capsys.readouterr().out
    assert "mix mod" in out and "mix perm" in out and "model, not a measurement" in out
