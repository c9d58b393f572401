"""GPU parity of the kernels' device codec (cpp_plugins/kernels/dual_precision/dp_codec.cuh) with the torch
reference codec (replayssm_trtllm/formats): identical bytes for RTN and for SR with the same Philox key,
identical decoded floats (docs/formats.md)."""
import pytest
import torch

from replayssm_trtllm.formats import PhiloxKey, decode, encode
from replayssm_trtllm.formats.codec import EncodedState

pytestmark = pytest.mark.gpu

FMTS = ["fp16", "bf16", "fp8_e4m3", "nvfp4"]


def _states(S=3, H=2, P=64, N=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(S, H, P, N, generator=g) * torch.exp2(torch.randint(-12, 12, (S, H, P, 1), generator=g).float()))
    x[0, 0, 3] = 0.0                                   # zero rows / blocks
    x[0, 0, 4, :16] = -0.0
    x[0, H - 1, min(5, P - 1), 7] = 1e-30                              # fp16/e4m3 underflow, fp32 subnormal scales
    if S >= 3 and H >= 2 and P >= 7:                   # special values need the full-size case
        x[1, 0, 6, :] = torch.linspace(-70000, 70000, N)   # fp16 overflow
        x[1, 1, 2, 9] = float("nan")                       # non-finite block / state
        x[2, 0, 1, 0] = float("inf")
        x[2, 1] *= 1e-38                                   # tiny state (nvfp4 global-scale underflow)
    return x.float().contiguous()


def _bits(t):
    if t is None:
        return None
    t = t.contiguous().cpu()
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16)
    return t


@pytest.mark.parametrize("rounding", ["rtn", "sr"])
@pytest.mark.parametrize("fmt", FMTS)
def test_encode_bit_exact(fmt, rounding):
    from replayssm_trtllm.ops.dual_precision import state_encode
    x = _states()
    S = x.shape[0]
    seed, layer = 0x1234_5678_9ABC_DEF0, 7
    slot_ids = torch.tensor([5, 0, 2**31 - 1], dtype=torch.int32)
    flush_index = torch.tensor([0, 3, 123456], dtype=torch.int32)
    got = state_encode(x.cuda(), fmt, rounding, seed, layer, slot_ids.cuda(), flush_index.cuda())
    torch.cuda.synchronize()
    for s in range(S):
        key = PhiloxKey(seed, int(slot_ids[s]), layer, int(flush_index[s])) if rounding == "sr" else None
        ref = encode(x[s], fmt, rounding, key=key)
        assert torch.equal(_bits(got.data[s]), _bits(ref.data)), f"{fmt}/{rounding}: payload of state {s} differs"
        if ref.scale is not None:
            assert torch.equal(_bits(got.scale[s]), _bits(ref.scale)), f"{fmt}/{rounding}: scales of state {s} differ"
        if ref.global_scale is not None:
            assert torch.equal(_bits(got.gscale[s]), _bits(ref.global_scale)), f"{fmt}: global scale of state {s}"


def _tie_states():
    """States whose fp8 / nvfp4 encodes meet exact rounding ties (ties to even) after the scale division.
    fp8: every row's amax is 448, so the row scale is 1 and the elements are e4m3 midpoints (normal and subnormal).
    nvfp4: the state amax 2688 makes the global scale 1; a block whose amax is 6 then has block scale 1 and its
    elements are e2m1 midpoints and grid points; the block holding 2688 has scale 448 and elements 448 * t."""
    g = torch.Generator().manual_seed(5)
    P, N = 8, 128
    mids = [2.0**e * (1 + (2 * i + 1) / 16) for e in range(-6, 8) for i in range(8)]
    mids += [(2 * i + 1) * 2.0**-10 for i in range(7)]  # subnormal midpoints
    mids = torch.tensor([m for m in mids if m < 448])
    idx = torch.randint(0, mids.numel(), (P, N), generator=g)
    sign = torch.where(torch.rand(P, N, generator=g) < 0.5, -1.0, 1.0)
    fp8 = (mids[idx] * sign)
    fp8[:, 0] = 448.0
    t = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 0.0])
    idx = torch.randint(0, t.numel(), (P, N), generator=g)
    sign = torch.where(torch.rand(P, N, generator=g) < 0.5, -1.0, 1.0)
    fp4 = t[idx] * sign
    fp4[:, ::16] = 6.0  # every 16-block's amax is 6
    fp4[0, :16] *= 448.0  # ... except the first block, amax 2688 (the state amax)
    return {"fp8_e4m3": fp8.reshape(1, 1, P, N).float(), "nvfp4": fp4.reshape(1, 1, P, N).float()}


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "nvfp4"])
def test_encode_rtn_ties_bit_exact(fmt):
    """RTN at exact ties (the e4m3 hardware conversion and the e2m1 rint path of dp_codec.cuh) equals the torch
    codec; the tie values are checked to survive the scale division in the reference."""
    from replayssm_trtllm.ops.dual_precision import state_encode
    x = _tie_states()[fmt]
    ref = encode(x[0], fmt, "rtn")
    if fmt == "nvfp4":
        assert float(ref.global_scale.flatten()[0]) == 1.0
    got = state_encode(x.cuda(), fmt, "rtn", 0, 0)
    torch.cuda.synchronize()
    assert torch.equal(_bits(got.data[0]), _bits(ref.data)), f"{fmt}: payload differs at ties"
    assert torch.equal(_bits(got.scale[0]), _bits(ref.scale))


@pytest.mark.sanitize
def test_encode_small_sanitize():
    from replayssm_trtllm.ops.dual_precision import state_decode, state_encode
    x = _states(S=1, H=1, P=8)
    for fmt in FMTS:
        c = state_encode(x.cuda(), fmt, "sr", 1, 0)
        state_decode(c)
    torch.cuda.synchronize()


@pytest.mark.parametrize("fmt", FMTS)
def test_decode_bit_exact(fmt):
    from replayssm_trtllm.ops.dual_precision import StateCopy, state_decode
    g = torch.Generator().manual_seed(1)
    S, H, P, N = 2, 3, 16, 128
    c = StateCopy.empty(fmt, S, H, P, N, "cpu")
    if c.data.dtype == torch.uint8:
        c.data.copy_(torch.randint(0, 256, c.data.shape, generator=g, dtype=torch.int64).to(torch.uint8))
    else:
        bits = torch.randint(-32768, 32768, c.data.shape, generator=g, dtype=torch.int64).to(torch.int16)
        c.data.copy_(bits.view(c.data.dtype))
    if fmt == "fp8_e4m3":
        c.scale.copy_(torch.randn(c.scale.shape, generator=g) * 1e-3)
    if fmt == "nvfp4":
        c.scale.copy_(torch.randint(0, 256, c.scale.shape, generator=g, dtype=torch.int64).to(torch.uint8))
        c.gscale.copy_(torch.rand(S, H, generator=g) * 1e-2)
    dev = StateCopy(fmt, c.data.cuda(), None if c.scale is None else c.scale.cuda(),
                    None if c.gscale is None else c.gscale.cuda())
    got = state_decode(dev).cpu()
    for s in range(S):
        ref = decode(EncodedState(fmt, (H, P, N), c.data[s], None if c.scale is None else c.scale[s],
                                  None if c.gscale is None else c.gscale[s]))
        same = (got[s].view(torch.int32) == ref.view(torch.int32)) | (torch.isnan(got[s]) & torch.isnan(ref))
        assert bool(same.all()), f"{fmt}: decode of state {s} differs in {int((~same).sum())} elements"
