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


def test_gdn_io_bytes_q35_shapes():
    from replayssm_trtllm.bench import gdn as bg
    sh = bg.SHAPES["q35-4b"]
    # q, k [H, K] + v, o [HV, V] + a, b [HV], bf16
    assert bg._io_bytes(sh, 2) == 2 * (2 * sh["H"] * sh["K"] + 2 * sh["HV"] * sh["V"] + 2 * sh["HV"])
    for name in ("q35-4b", "q35-122b"):
        s = bg.SHAPES[name]
        frac = bg._io_bytes(s, 2) / (2 * s["HV"] * s["V"] * s["K"] * 4)
        assert 0.004 < frac < 0.007, (name, frac)


def test_standard_steps_on_ring_restores_the_ring():
    """The swap used to time the standard step on the speculative ring beside the official one is undone even when
    the timing raises; an unknown capacity is refused."""
    import pytest
    import torch
    from replayssm_trtllm.bench.common import standard_steps_on_ring
    ls = bm._Layerset(dict(H=4, P=16, N=16, G=2), 2, 8, 4, torch.float32, torch.bfloat16, 1, 0, token_list=(1, 4),
                      device="cpu")
    with standard_steps_on_ring(ls, 12):
        assert ls.capacity(0) == 12
    assert ls.capacity(0) == 8   # the standard-mode ring: L rows
    with pytest.raises(RuntimeError, match="boom"):
        with standard_steps_on_ring(ls, 12):
            raise RuntimeError("boom")
    assert ls.capacity(0) == 8
    with pytest.raises(ValueError, match="no ring of capacity 10"):
        standard_steps_on_ring(ls, 10)


def test_standard_steps_get_the_standard_mode_ring():
    """The benches' layer buffers (built on the CPU here): standard steps on a ring of capacity L (what a
    standard-mode deployment allocates: ReplayConfig.ring_capacity with max_verify = 1; L before the
    sixty-eighth session, still selectable with std_capacity), speculative steps on
    L + Tmax; std_capacity = L + Tmax shares one ring (the benchmark before the twenty-ninth session); a capacity
    below L is refused."""
    import pytest
    import torch
    from replayssm_trtllm.bench import gdn as bg
    from replayssm_trtllm.config import ReplayConfig
    L, Tmax = 8, 4
    assert ReplayConfig(window=L, max_verify=1).ring_capacity == L
    ls = bm._Layerset(dict(H=4, P=16, N=16, G=2), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0,
                      token_list=(1, Tmax), device="cpu")
    assert (ls.capacity(0), ls.capacity(1)) == (L, L + Tmax)
    assert sorted(ls.rings) == [L, L + Tmax]
    assert [r[0].shape[1] for r in ls.rings[L]] == [L] * 3  # ring_dt, ring_x, ring_B of layer 0
    assert ls.ring_x[0].shape == (3, L + Tmax, 4, 16)  # the attributes stay the speculative ring
    shared = bm._Layerset(dict(H=4, P=16, N=16, G=2), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0,
                          token_list=(1, Tmax), std_capacity=L + Tmax, device="cpu")
    assert sorted(shared.rings) == [L + Tmax] and shared.capacity(0) == L + Tmax
    with pytest.raises(ValueError, match="std_capacity must be in"):
        bm._Layerset(dict(H=4, P=16, N=16, G=2), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0, std_capacity=L - 1,
                     device="cpu")
    g = bg._Layers(dict(H=1, HV=2, K=16, V=16), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0, False,
                   token_list=(1, Tmax), device="cpu")
    assert (g.capacity(0), g.capacity(1)) == (L, L + Tmax)
    assert [r[0].shape[1] for r in g.rings[L]] == [L] * 3 and g.ring_u[0].shape[1] == L + Tmax
    wide = bg._Layers(dict(H=1, HV=2, K=16, V=16), 3, L, Tmax, torch.float32, torch.bfloat16, 1, 0, False,
                      token_list=(1, Tmax), std_capacity=L + 1, device="cpu")
    assert wide.capacity(0) == L + 1 and sorted(wide.rings) == [L + 1, L + Tmax]
