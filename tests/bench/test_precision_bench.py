"""CPU tests for the pure-Python parts of replayssm_trtllm.bench.precision (the GPU run itself is device-only)."""
import argparse

import pytest

from replayssm_trtllm.bench import precision as P


def test_copy_fraction_is_achieved_over_measured_copy_bandwidth():
    rows = [{"case": "a", "GB/s": 3000.0}, {"case": "b"}, {"case": "c", "GB/s": 4500.0}]
    out = P.add_copy_fraction(rows, 4000.0)
    assert out is rows
    assert rows[0]["of copy"] == pytest.approx(0.75)
    assert "of copy" not in rows[1]  # no bandwidth figure: untouched
    assert rows[2]["of copy"] == pytest.approx(1.125)


@pytest.mark.parametrize("copy", [None, 0.0, -1.0])
def test_copy_fraction_needs_a_positive_copy_figure(copy):
    rows = [{"case": "a", "GB/s": 3000.0}]
    P.add_copy_fraction(rows, copy)
    assert "of copy" not in rows[0]


def test_nonflush_ratio_takes_the_faster_fp32_step():
    assert P.nonflush_ratio([300.0, 280.0], 140.0) == pytest.approx(2.0)
    assert P.nonflush_ratio([None, 280.0], 140.0) == pytest.approx(2.0)
    assert P.nonflush_ratio([None, None], 140.0) is None
    assert P.nonflush_ratio([280.0], None) is None


def test_layers_option(capsys):
    ap = argparse.ArgumentParser()
    P.add_arguments(ap)
    assert ap.parse_args([]).layers == 4
    assert ap.parse_args(["--layers", "1"]).layers == 1
    assert P.run(ap.parse_args(["--layers", "0"])) == 2  # refused before any device work
    assert "--layers must be >= 1; got 0" in capsys.readouterr().err
