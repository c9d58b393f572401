"""Checkpoint import (context-phase bridge, docs/engine-integration.md): host validation and the
reference semantics on the CPU; the kernel against the reference (bit for bit) on the GPU."""
from __future__ import annotations

import pytest
import torch

from replayssm_trtllm.ops.import_state import import_reference, validate_import_args


def _i32(x, dev="cpu"):
    return torch.tensor(x, dtype=torch.int32, device=dev)


# ------------------------------------------------------------------------------------------- CPU
def test_reference_transpose_cast_skip_and_reset():
    g = torch.Generator().manual_seed(0)
    S_src, S, H, R, Q = 5, 6, 3, 4, 7
    src = torch.randn(S_src, H, Q, R, generator=g)  # [S_src, H, Q, R] (TensorRT-LLM [H, N, P])
    dst = torch.randn(S, H, R, Q, generator=g).to(torch.bfloat16)
    before = dst.clone()
    o = _i32([3, 1, 4, 1, 5, 9])
    h = _i32([2, 7, 1, 8, 2, 8])
    err = import_reference(src, _i32([4, 0, 2]), dst, _i32([1, -1, 5]), o, h, transposed=True)
    assert err == -1
    assert torch.equal(dst[1], src[4].transpose(-1, -2).to(torch.bfloat16))
    assert torch.equal(dst[5], src[2].transpose(-1, -2).to(torch.bfloat16))
    for s in (0, 2, 3, 4):
        assert torch.equal(dst[s], before[s])
    assert o.tolist() == [3, 0, 4, 1, 5, 0] and h.tolist() == [2, 0, 1, 8, 2, 0]


def test_reference_reports_out_of_range_pairs():
    src = torch.randn(2, 1, 3, 3)
    dst = torch.zeros(3, 1, 3, 3)
    assert import_reference(src, _i32([0, 7]), dst, _i32([0, 2]), transposed=False) == 2
    assert torch.equal(dst[0], src[0]) and torch.equal(dst[2], torch.zeros(1, 3, 3))


def test_reference_skips_and_reports_a_repeated_destination():
    """A destination slot named by an earlier row: the first row is imported, the later one skipped and reported."""
    src = torch.randn(3, 1, 3, 3)
    dst = torch.zeros(4, 1, 3, 3)
    assert import_reference(src, _i32([0, 1, 2]), dst, _i32([2, 3, 2]), transposed=False) == 2
    assert torch.equal(dst[2], src[0]) and torch.equal(dst[3], src[1])


@pytest.mark.parametrize("case,msg", [
    ("dst_rank", r"'dst' must be a fp32/fp16/bf16 checkpoint \[S, H, R, Q\].*got float32 \[4, 2, 8\]"),
    ("src_shape", r"'src' must be a fp32/fp16/bf16 \[S_src, H, Q, R\] = \[S_src, 2, 16, 8\].*got float32 \[3, 2, 8, 16\]"),
    ("slots_dtype", r"'dst_slots' must be a contiguous int32 \[n\].*got int64 \[2\]"),
    ("src_slots_len", r"'src_slots' must be a contiguous int32 \[n\] = \[2\].*got int32 \[3\]"),
    ("cursor_len", r"'ring_origin' must be a contiguous int32 \[S\] = \[4\].*got int32 \[5\]"),
    ("cursor_pair", r"give both 'ring_origin' and 'ring_len'"),
])
def test_validation_messages(case, msg):
    S, H, R, Q = 4, 2, 8, 16
    dst = torch.zeros(S, H, R, Q)
    src = torch.zeros(3, H, Q, R)
    dslots, sslots = _i32([0, 1]), _i32([2, 0])
    o, h = torch.zeros(S, dtype=torch.int32), torch.zeros(S, dtype=torch.int32)
    if case == "dst_rank":
        dst = torch.zeros(S, H, R)
    elif case == "src_shape":
        src = torch.zeros(3, H, R, Q)
    elif case == "slots_dtype":
        dslots = dslots.long()
    elif case == "src_slots_len":
        sslots = _i32([0, 1, 2])
    elif case == "cursor_len":
        o = torch.zeros(S + 1, dtype=torch.int32)
    elif case == "cursor_pair":
        h = None
    with pytest.raises(ValueError, match=msg):
        validate_import_args(src, sslots, dst, dslots, o, h, None, transposed=True)


# ------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("shape", [("nemotron3-super", 128, 64, 128), ("nemotron3-nano", 96, 80, 128),
                                   ("qwen35-4b", 32, 128, 128), ("odd", 3, 33, 70)], ids=lambda s: s[0])
@pytest.mark.parametrize("transposed", [True, False], ids=["transposed", "same-layout"])
@pytest.mark.parametrize("src_dt,dst_dt", [(torch.float32, torch.float32), (torch.float32, torch.float16),
                                           (torch.bfloat16, torch.float32), (torch.float32, torch.bfloat16)],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_import_matches_reference(shape, transposed, src_dt, dst_dt):
    import replayssm_trtllm.ops.import_state  # noqa: F401
    _, H, R, Q = shape
    g = torch.Generator().manual_seed(H * R + Q + int(transposed))
    S_src, S, n = 7, 9, 5
    src = torch.randn(S_src, H, *((Q, R) if transposed else (R, Q)), generator=g).to(src_dt)
    dst = (10 + torch.randn(S, H, R, Q, generator=g)).to(dst_dt)  # fresh non-zero contents
    src_slots = torch.randperm(S_src, generator=g)[:n].to(torch.int32)
    dst_slots = torch.randperm(S, generator=g)[:n].to(torch.int32)
    dst_slots[2] = -1  # padding row
    o = torch.randint(0, 9, (S,), generator=g, dtype=torch.int32)
    h = torch.randint(1, 9, (S,), generator=g, dtype=torch.int32)
    ref_dst, ref_o, ref_h = dst.clone(), o.clone(), h.clone()
    assert import_reference(src, src_slots, ref_dst, dst_slots, ref_o, ref_h, transposed) == -1
    d_dst, d_o, d_h = dst.cuda(), o.cuda(), h.cuda()
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    torch.ops.replayssm.replay_import(src.cuda(), src_slots.cuda(), d_dst, dst_slots.cuda(), d_o, d_h, err, transposed)
    torch.cuda.synchronize()
    assert int(err.item()) == -1
    assert torch.equal(d_dst.cpu(), ref_dst), "checkpoint differs from the reference (bit-exact expected)"
    assert torch.equal(d_o.cpu(), ref_o) and torch.equal(d_h.cpu(), ref_h)


@pytest.mark.gpu
@pytest.mark.sanitize
def test_import_out_of_range_and_graph():
    """An out-of-range pair is skipped and reported; the launch captures into a CUDA graph."""
    import replayssm_trtllm.ops.import_state  # noqa: F401
    g = torch.Generator().manual_seed(3)
    H, R, Q = 4, 64, 128
    src = torch.randn(3, H, Q, R, generator=g).cuda()
    dst = torch.randn(4, H, R, Q, generator=g).cuda()
    before = dst.clone()
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    src_slots, dst_slots = _i32([0, 9], "cuda"), _i32([1, 2], "cuda")  # source slot 9 does not exist
    torch.ops.replayssm.replay_import(src, src_slots, dst, dst_slots, None, None, err, True)
    torch.cuda.synchronize()
    assert int(err.item()) == 2
    assert torch.equal(dst[1], src[0].transpose(-1, -2)) and torch.equal(dst[2], before[2])
    # CUDA graph: capture, change the source, replay
    o = torch.full((4,), 5, dtype=torch.int32, device="cuda")
    h = torch.full((4,), 3, dtype=torch.int32, device="cuda")
    ok_slots = _i32([2, 0], "cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.ops.replayssm.replay_import(src, None, dst, ok_slots, o, h, None, True)  # warm-up
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch.ops.replayssm.replay_import(src, None, dst, ok_slots, o, h, None, True)
    src.mul_(2.0)
    o.fill_(5)
    h.fill_(3)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(dst[2], src[2].transpose(-1, -2)) and torch.equal(dst[0], src[0].transpose(-1, -2))
    assert o.cpu().tolist() == [0, 5, 0, 5] and h.cpu().tolist() == [0, 3, 0, 3]


@pytest.mark.gpu
@pytest.mark.sanitize
def test_import_skips_and_reports_a_repeated_destination():
    """Device slots naming one destination twice (and a third time): the first row is imported, bit for bit as the
    reference; the later rows are skipped (no interleaving of two copies) and the slot is reported in error_slot."""
    import replayssm_trtllm.ops.import_state  # noqa: F401
    g = torch.Generator().manual_seed(5)
    H, R, Q = 3, 64, 128
    src = torch.randn(4, H, Q, R, generator=g)
    dst = torch.randn(5, H, R, Q, generator=g)
    src_slots, dst_slots = _i32([0, 1, 2, 3]), _i32([4, 1, 4, 4])
    ref = dst.clone()
    o, h = torch.full((5,), 2, dtype=torch.int32), torch.full((5,), 3, dtype=torch.int32)
    ref_o, ref_h = o.clone(), h.clone()
    want = import_reference(src, src_slots, ref, dst_slots, ref_o, ref_h, transposed=True)
    assert want == 4
    err = torch.full((1,), -1, dtype=torch.int32, device="cuda")
    d_dst, d_o, d_h = dst.cuda(), o.cuda(), h.cuda()
    torch.ops.replayssm.replay_import(src.cuda(), src_slots.cuda(), d_dst, dst_slots.cuda(), d_o, d_h, err, True)
    torch.cuda.synchronize()
    assert int(err.item()) == 4
    assert torch.equal(d_dst.cpu(), ref) and torch.equal(d_dst[4].cpu(), src[0].transpose(-1, -2))
    assert torch.equal(d_o.cpu(), ref_o) and torch.equal(d_h.cpu(), ref_h)
