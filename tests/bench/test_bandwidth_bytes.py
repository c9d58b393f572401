"""The benchmarks' accounting (CPU, twenty-ninth session): the bytes behind the achieved bandwidth (the step's inputs
and outputs counted beside the state and the ring records, so "% of copy" is the kernel's whole traffic) and the ring
each kind of step runs on (standard steps: the L + 1 ring of a standard-mode deployment)."""
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


def test_standard_steps_get_the_standard_mode_ring():
    """The benches' layer buffers (built on the CPU here): standard steps on a ring of capacity L + 1 (what a
    standard-mode deployment allocates: ReplayConfig.ring_capacity with max_verify = 1), speculative steps on
    L + Tmax; std_capacity = L + Tmax shares one ring (the benchmark before the twenty-ninth session); a capacity
    below L is refused."""
    import pytest
    import torch
    from replayssm_trtllm.bench import gdn as bg
    from replayssm_trtllm.config import ReplayConfig
    L, Tmax = 8, 4
    assert ReplayConfig(window=L, max_verify=1).ring_capacity == L + 1
    ls = bm._Layerset(dict(H=4, P=16, N=16, G=2), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0,
                      token_list=(1, Tmax), device="cpu")
    assert (ls.capacity(0), ls.capacity(1)) == (L + 1, L + Tmax)
    assert sorted(ls.rings) == [L + 1, L + Tmax]
    assert [r[0].shape[1] for r in ls.rings[L + 1]] == [L + 1] * 3  # ring_dt, ring_x, ring_B of layer 0
    assert ls.ring_x[0].shape == (3, L + Tmax, 4, 16)  # the attributes stay the speculative ring
    shared = bm._Layerset(dict(H=4, P=16, N=16, G=2), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0,
                          token_list=(1, Tmax), std_capacity=L + Tmax, device="cpu")
    assert sorted(shared.rings) == [L + Tmax] and shared.capacity(0) == L + Tmax
    with pytest.raises(ValueError, match="std_capacity must be in"):
        bm._Layerset(dict(H=4, P=16, N=16, G=2), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0, std_capacity=L - 1,
                     device="cpu")
    g = bg._Layers(dict(H=1, HV=2, K=16, V=16), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0, False,
                   token_list=(1, Tmax), device="cpu")
    assert (g.capacity(0), g.capacity(1)) == (L + 1, L + Tmax)
    assert [r[0].shape[1] for r in g.rings[L + 1]] == [L + 1] * 3 and g.ring_u[0].shape[1] == L + Tmax
