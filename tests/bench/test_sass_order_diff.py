"""CPU tests of scripts/sass_order_diff.py (two SASS listings compared outside excluded source lines) on small
nvdisasm-style listings: excluded lines drop out, predicated instructions count by their opcode, a reordering is
reported as fewer instructions in the same order, opcode count changes are signed b - a, and bad input is refused."""
import argparse
import importlib.util
import pathlib

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "sass_order_diff", pathlib.Path(__file__).resolve().parents[2] / "scripts" / "sass_order_diff.py")
sod = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sod)


def _listing(tmp_path, name, body):
    """body: (line, instruction text) pairs, all in /src/kern.cuh."""
    text = "\t.text.kernel:\n"
    for i, (line, ins) in enumerate(body):
        text += f'\t//## File "/src/kern.cuh", line {line}\n        /*{16 * i:04x}*/                   {ins} ;\n'
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_load_reads_opcodes_and_locations(tmp_path):
    p = _listing(tmp_path, "a.sass", [(3, "IADD3 R2, R2, 0x1, RZ"), (4, "@P0 BRA `(.L_x_1)"), (9, "FFMA R1, R2, R3, R4")])
    assert sod.load(p) == [("IADD3", ("kern.cuh", 3)), ("BRA", ("kern.cuh", 4)), ("FFMA", ("kern.cuh", 9))]


def test_excluded_lines_and_reorder(tmp_path, capsys, monkeypatch):
    a = _listing(tmp_path, "a.sass", [(1, "IADD3 R1, R1, 0x1, RZ"), (2, "IMAD R2, R2, R3, RZ"), (3, "LOP3.LUT R4"),
                                      (10, "FFMA R5, R6, R7, R8"), (4, "EXIT")])
    # b: lines 1-3 reordered, the excluded line 10 doubled, one more MOV on line 2
    b = _listing(tmp_path, "b.sass", [(2, "IMAD R2, R2, R3, RZ"), (1, "IADD3 R1, R1, 0x1, RZ"), (3, "LOP3.LUT R4"),
                                      (10, "FFMA R5, R6, R7, R8"), (10, "FFMA R9, R6, R7, R8"), (2, "MOV R3, R4"),
                                      (4, "EXIT")])
    monkeypatch.setattr("sys.argv", ["sass_order_diff.py", a, b, "--exclude", "kern.cuh:10-12"])
    assert sod.main() == 0
    out = capsys.readouterr().out
    assert f"{a}: 5 instructions, 4 outside the excluded lines" in out
    assert f"{b}: 7 instructions, 5 outside the excluded lines" in out
    assert "opcode count changes (b - a): MOV +1" in out
    assert "in the same order: 3 of 4 (a) / 5 (b)" in out


def test_identical_listings(tmp_path, capsys, monkeypatch):
    a = _listing(tmp_path, "a.sass", [(1, "IADD3 R1, R1, 0x1, RZ"), (2, "EXIT")])
    monkeypatch.setattr("sys.argv", ["sass_order_diff.py", a, a])
    sod.main()
    out = capsys.readouterr().out
    assert "opcode count changes (b - a): none" in out and "in the same order: 2 of 2 (a) / 2 (b)" in out


def test_bad_input_refused(tmp_path, monkeypatch):
    with pytest.raises(argparse.ArgumentTypeError, match="FILE:FIRST-LAST"):
        sod.parse_range("kern.cuh")
    assert sod.parse_range("kern.cuh:7") == ("kern.cuh", 7, 7)
    empty = tmp_path / "empty.sass"
    empty.write_text("not a listing\n")
    monkeypatch.setattr("sys.argv", ["sass_order_diff.py", str(empty), str(empty)])
    with pytest.raises(SystemExit, match="no SASS instructions"):
        sod.main()
