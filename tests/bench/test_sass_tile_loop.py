"""CPU tests of scripts/sass_tile_loop.py (the static per-iteration instruction estimate of a kernel's main loop)
on small nvdisasm-style listings: the loop is found, the head-change blocks a branch on the cursor's line skips and the
blocks of a cold function are left out, NOPs are not counted, and the copies divide the count."""
import importlib.util
import pathlib

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "sass_tile_loop", pathlib.Path(__file__).resolve().parents[2] / "scripts" / "sass_tile_loop.py")
stl = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(stl)


def _sources(tmp_path):
    walk = tmp_path / "read_mma_walk.cuh"
    walk.write_text("// walk\nvoid next() {\n    ++tile;\n    if (++tr == nt) {\n        headChange();\n    }\n}\n")
    rm = tmp_path / "read_mma.cuh"
    rm.write_text("struct V {\n    __device__ __forceinline__ void build(int x) {\n        auto f = [](int y) {\n"
                  "            return y;\n        };\n        use(f(x));\n    }\n};\nint after();\n")
    return str(walk), str(rm)


def _listing(walk, rm, extra_hot=0):
    hot = "".join(f"        /*0{0x100 + 16 * i:03x}*/                   FFMA R{10 + i}, R1, R2, R3 ;\n"
                  for i in range(extra_hot))
    return f"""	.text.kernel:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_0:
        ## File "{walk}", line 3
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;
        ## File "{walk}", line 4
        /*0020*/                   ISETP.NE.AND P0, PT, R2, R3, PT ;
        /*0030*/              @P0 BRA `(.L_x_1) ;
        ## File "{walk}", line 5
        /*0040*/                   IMAD R4, R4, R5, RZ ;
        /*0050*/                   IMAD R5, R5, R6, RZ ;
.L_x_1:
        ## File "{rm}", line 6
        /*0060*/                   ISETP.NE.AND P2, PT, R7, R8, PT ;
        /*0070*/              @P2 BRA `(.L_x_2) ;
        ## File "{rm}", line 4
        /*0080*/                   IMAD R9, R9, R9, RZ ;
.L_x_2:
        ## File "{rm}", line 9
        /*0090*/                   HMMA.16816.F32 R12, R16, R20, R12 ;
        /*00a0*/                   NOP ;
        /*00b0*/                   FFMA R13, R1, R2, R13 ;
{hot}        /*0f00*/              @P1 BRA `(.L_x_0) ;
        /*0f10*/                   EXIT ;
.L_x_3:
        /*0f20*/                   BRA `(.L_x_3) ;
"""


def test_loop_estimate_skips_head_change_and_cold_function(tmp_path):
    walk, rm = _sources(tmp_path)
    lines = _listing(walk, rm).splitlines(keepends=True)
    n, ops, by_line = stl.estimate(lines, copies=1)
    # hot: IADD3, ISETP, @P0 BRA (cursor), HMMA, FFMA, @P1 BRA (body); cold: the two head-change IMADs (lines 5, skipped
    # by the branch on line 4) and the block of build() (lines 2-7 of read_mma.cuh: the ISETP / BRA on line 6 and the
    # IMAD on line 4); the NOP is not counted; LDC and EXIT are outside the loop
    assert n == 6
    assert ops == {"IADD3": 1, "ISETP": 1, "BRA": 2, "HMMA": 1, "FFMA": 1}
    assert ("read_mma_walk.cuh", 5) not in by_line and by_line[("read_mma.cuh", 9)] == 3
    n2, _, _ = stl.estimate(lines, copies=2)
    assert n2 == 3


def test_estimate_follows_the_hot_path_length(tmp_path):
    walk, rm = _sources(tmp_path)
    base, _, _ = stl.estimate(_listing(walk, rm).splitlines(keepends=True), copies=1)
    more, ops, _ = stl.estimate(_listing(walk, rm, extra_hot=5).splitlines(keepends=True), copies=1)
    assert more - base == 5 and ops["FFMA"] == 6


def test_body_end_matches_braces(tmp_path):
    walk, rm = _sources(tmp_path)
    assert stl._line_of(rm, "void build(") == 2
    assert stl._body_end(rm, 2) == 7  # the lambda's "};" on line 5 does not end the function
    assert stl._line_of(walk, "if (++tr == nt)") == 4


def test_cli_prints_one_line_per_listing(tmp_path, capsys):
    walk, rm = _sources(tmp_path)
    p = tmp_path / "k.sass"
    p.write_text(_listing(walk, rm))
    assert stl.main([str(p), "--copies", "1", "--lines", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{p}: ~6.0 instructions per iteration")
    assert len(out) == 3
