"""The bytes behind the benchmarks' achieved bandwidth (CPU): the step's inputs and outputs are counted beside the
state and the ring records (twenty-ninth session), so "% of copy" is the kernel's whole traffic."""
from replayssm_trtllm.bench import mamba2 as bm


def test_mamba2_io_bytes_super_and_nano():
    sup, nano = bm.SHAPES["super"], bm.SHAPES["nano"]
    # x, z, y [H, P] + B, C [G, N] + dt_raw [H], bf16
    assert bm._io_bytes(sup, 2) == 2 * (3 * 128 * 64 + 2 * 8 * 128 + 128) == 53504
    assert bm._io_bytes(nano, 2) == 2 * (3 * 96 * 80 + 2 * 8 * 128 + 96)
    assert bm._io_bytes(sup, 2, T=4) == 4 * bm._io_bytes(sup, 2)
    # against the fp32 state read + written: 0.6% of a conventional step's traffic on both shapes
    for sh in (sup, nano):
        frac = bm._io_bytes(sh, 2) / (2 * bm._state_bytes(sh, 1, 4))
        assert 0.005 < frac < 0.008
