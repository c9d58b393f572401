"""Admission with a flush phase on the device (ops/admit.py, cpp_plugins/kernels/replay_commit/replay_admit.cu): the
ABI mirror, fill patterns and host checks on the CPU; on the GPU the kernel against the Python form (the caches and
the drop-ins on CPU tensors) bit for bit, its device-side range checks, and that it reads nothing back (no host
sync)."""
from __future__ import annotations

import ctypes

import pytest
import torch

from replayssm_trtllm.ops import admit as A


# ------------------------------------------------------------------------------------------- CPU
def test_abi_mirror_layout():
    # the C layout (g++ on replay_admit.h, sixty-third session): ring 40 bytes, params 392, slots at 32, rings at 72
    assert ctypes.sizeof(A.ReplayAdmitRing) == 40 and A.ReplayAdmitRing.fill.offset == 32
    assert ctypes.sizeof(A.ReplayAdmitParams) == 392
    assert A.ReplayAdmitParams.slots.offset == 32 and A.ReplayAdmitParams.rings.offset == 72


def test_fill_patterns():
    assert A.ring_fill_pattern("op", "r", torch.float32, 0.0) == 0
    assert A.ring_fill_pattern("op", "r", torch.float32, 1.0) == 0x3F800000
    assert A.ring_fill_pattern("op", "r", torch.bfloat16, 1.0) == 0x3F803F80
    assert A.ring_fill_pattern("op", "r", torch.float16, 1.0) == 0x3C003C00
    assert A.ring_fill_pattern("op", "r", torch.float16, -2.0) == 0xC000C000
    with pytest.raises(ValueError, match="ring 'r' has dtype float8_e4m3fn; the admission fills 2- or 4-byte"):
        A.ring_fill_pattern("op", "r", torch.float8_e4m3fn, 0.0)


def _args(S=5, C=6, n=3):
    i32 = lambda *s: torch.zeros(*s, dtype=torch.int32)  # noqa: E731
    return dict(slots=i32(n), ring_origin=i32(S), ring_len=i32(S), error_slot=i32(1),
                rings=[torch.zeros(2, S, C, 4), torch.zeros(2, S, C, 3, 8, dtype=torch.bfloat16)], fills=[0.0, 1.0],
                window=4, ring_capacity=C, phase_mode=A.PHASE_SPREAD, phase=0, phases=None)


@pytest.mark.parametrize("change, match", [
    (dict(slots=torch.zeros(3, dtype=torch.int64)), r"'slots' must be a contiguous int32 \[n\] on cpu; got int64"),
    (dict(ring_origin=torch.zeros(4, dtype=torch.int32)), r"'ring_origin' must be a contiguous int32 \[5\]"),
    (dict(error_slot=torch.zeros(2, dtype=torch.int32)), r"'error_slot' must be a contiguous int32 \[1\]"),
    (dict(window=7), r"need window >= 1 and ring_capacity >= window; got window=7, ring_capacity=6"),
    (dict(phase_mode=4), r"phase_mode must be 0 \(none\), 1 \(constant\), 2 \(spread\) or 3 \(per row\); got 4"),
    (dict(phase_mode=A.PHASE_CONSTANT, phase=4), r"phase must be in \[0, L - 1 = 3\]; got 4"),
    (dict(phase=-1), r"the spread start \(phase\) must be >= 0; got -1"),
    (dict(phase_mode=A.PHASE_PER_ROW), r"'phases' must be a contiguous int32 \[3\] on cpu with per-row phases"),
    (dict(fills=[0.0]), r"at most 8 rings with one fill value each; got 2 rings, 1 fills"),
    (dict(rings=[torch.zeros(2, 5, 7, 4)], fills=[0.0]),
     r"rings\[0\] must be a contiguous \[layers, S=5, C=6, \.\.\.\]"),
    (dict(rings=[torch.zeros(2, 5, 6, 3, dtype=torch.float16)], fills=[0.0]),
     r"rings\[0\]: a record must be a multiple of 4 bytes; got 6"),
])
def test_host_checks_name_the_argument(change, match):
    kw = _args()
    kw.update(change)
    with pytest.raises(ValueError, match="replay_admit: " + match):
        A.validate_admit_args(**kw)


def test_op_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="replay_admit: tensors must be on a CUDA device; got cpu"):
        torch.ops.replayssm.replay_admit(**_args())


def _params(**kw):
    p = A.ReplayAdmitParams(num_rows=1, num_slots=4, window=4, ring_capacity=5, phase_mode=A.PHASE_SPREAD, phase=0,
                            num_rings=1)
    p.slots = p.ring_origin = p.ring_len = 0x10000   # never dereferenced: validation fails first (or no row)
    g = p.rings[0]
    g.base, g.layer_stride, g.slot_stride, g.record_bytes, g.num_layers = 0x20000, 4 * 5 * 16, 5 * 16, 16, 2
    for k, v in kw.items():
        if k.startswith("g_"):          # a field of rings[0]
            setattr(g, k[2:], v)
        else:
            setattr(p, k, v)
    return p


@pytest.mark.parametrize("change, match", [
    (dict(num_slots=0), r"num_slots must be >= 1; got 0"),
    (dict(ring_capacity=3), r"ring_capacity must be >= window = 4; got 3"),
    (dict(phase_mode=5), r"phase_mode must be 0 \(none\), 1 \(constant\), 2 \(spread\) or 3 \(per row\); got 5"),
    (dict(phase_mode=A.PHASE_CONSTANT, phase=4), r"phase must be in \[0, L - 1 = 3\]; got 4"),
    (dict(phase=-2), r"the spread start \(phase\) must be >= 0; got -2"),
    (dict(phase_mode=A.PHASE_PER_ROW), r"phases must not be NULL with per-row phases"),
    (dict(num_rings=9), r"num_rings must be in \[0, 8\]; got 9"),
    (dict(g_base=0), r"rings\[0\].base must not be NULL"),
    (dict(g_record_bytes=6), r"rings\[0\].record_bytes must be a positive multiple of 4; got 6"),
    (dict(g_num_layers=0), r"rings\[0\].num_layers must be in \[1, 65535\]; got 0"),
    (dict(g_slot_stride=64), r"rings\[0\]: base and strides must be 4-byte aligned and a slot must span "
                                r"ring_capacity \* record_bytes = 80 bytes; got slot_stride 64"),
    (dict(g_base=0x20002), r"rings\[0\]: base and strides must be 4-byte aligned"),
])
def test_c_launcher_refuses_bad_params(change, match):
    """The C launcher's own checks (what a TensorRT runtime calling it directly relies on), on the CPU: each bad
    field returns RSSM_ERR_INVALID_ARGUMENT with a message naming it, before any CUDA call; no rows is a no-op."""
    from test_dual_precision_host import _lib_or_skip
    from replayssm_trtllm.ops._lib import check_status
    _lib_or_skip()
    with pytest.raises(RuntimeError, match="replay_admit: invalid argument: ReplayAdmit: " + match):
        check_status(A._get_launcher()(ctypes.byref(_params(**change)), None), "replay_admit")
    check_status(A._get_launcher()(ctypes.byref(_params(num_rows=0)), None), "replay_admit")


# ------------------------------------------------------------------------------------------- GPU
def _caches(device):
    from replayssm_trtllm.ops.gdn import GdnReplayStateCache
    from replayssm_trtllm.ops.state_cache import ReplayStateCache
    # Nemotron-3-Nano's heads (96 x 80, 8 groups) and Qwen3.5-4B's (16 key / 32 value heads), two layers, L = 16
    return [ReplayStateCache(2, 9, 96, 80, 128, 8, 16, max_verify=4, mode="speculative", device=device),
            GdnReplayStateCache(2, 9, 16, 32, 128, 128, 16, device=device)]


def _rings(c):
    return {n: getattr(c, n) for n in ("ring_dt", "ring_x", "ring_B", "ring_g", "ring_u", "ring_k") if hasattr(c, n)}


def _randomize(c, gen):
    for t in _rings(c).values():
        t.copy_(torch.randn(t.shape, generator=gen).to(t.dtype))
    c.ring_origin.copy_(torch.randint(0, c.capacity, (c.num_slots,), generator=gen).to(torch.int32))
    c.ring_len.copy_(torch.randint(0, c.window, (c.num_slots,), generator=gen).to(torch.int32))


def _twin_caches(gen):
    """(CUDA cache, CPU cache) pairs of both families holding the same random rings and cursors (and checkpoints)."""
    for gpu, cpu in zip(_caches("cuda"), _caches("cpu")):
        _randomize(cpu, gen)
        for n, t in _rings(cpu).items():
            _rings(gpu)[n].copy_(t)
        gpu.ring_origin.copy_(cpu.ring_origin)
        gpu.ring_len.copy_(cpu.ring_len)
        gpu.ckpt.copy_(cpu.ckpt)
        yield gpu, cpu


def _assert_same_caches(gpu, cpu, *what):
    """Cursors, every ring tensor and the checkpoints of a CUDA cache equal a CPU cache's, bit for bit."""
    torch.cuda.synchronize()
    what = (type(gpu).__name__,) + what
    assert gpu.ring_len.tolist() == cpu.ring_len.tolist(), what
    assert gpu.ring_origin.tolist() == cpu.ring_origin.tolist(), what
    for name, t in _rings(cpu).items():
        assert torch.equal(_rings(gpu)[name].cpu(), t), what + (name,)
    assert torch.equal(gpu.ckpt.cpu(), cpu.ckpt), what


@pytest.mark.gpu
@pytest.mark.sanitize
def test_kernel_matches_the_python_form():
    """Every phase form through reset(), on the GPU (one replay_admit launch, the checkpoints by replay_import) and on a
    CPU copy (the Python form): rings, cursors and checkpoints equal bit for bit after each call, padding entries and
    other slots untouched, and "spread" continuing across calls."""
    gen = torch.Generator().manual_seed(3)
    calls = [([4, -1, 0], None), ([1, 7, 2], "spread"), ([3], "spread"), ([5, 8], 9), ([6, -1, 0], [15, 0, 3]),
             ([2, 4], torch.tensor([1, 14])), ([8, 1, 5], "spread")]
    for gpu, cpu in _twin_caches(gen):
        for slots, phase in calls:
            pre = torch.randn((2, len(slots)) + tuple(cpu.ckpt.shape[2:]), generator=gen)
            got = gpu.reset(torch.tensor(slots, device="cuda"), pre.cuda(), phase=phase)
            want = cpu.reset(slots, pre, phase=phase)
            assert got == want, (slots, phase)
            _assert_same_caches(gpu, cpu, slots, phase)   # checkpoints: replay_import per layer on CUDA
        assert int(gpu.error_slot.item()) == -1


@pytest.mark.gpu
def test_device_phases_are_checked_on_the_device():
    """Per-slot phases as a device tensor are not read back: a value outside [0, L - 1] and a slot >= S are reported
    in error_slot (check_errors raises) and their rows are left untouched; the other rows are admitted."""
    from replayssm_trtllm.integrations import ReplayGatedDeltaRuleUpdate
    pools = [torch.randn(6, 4, 64, 64, device="cuda") for _ in range(2)]
    op = ReplayGatedDeltaRuleUpdate(pools, 2, window=8)
    op.ring_len.fill_(3)
    op.ring_g.fill_(5.0)
    op.start_requests(torch.tensor([1, 2, 4], device="cuda"), phase=torch.tensor([2, 8, 5], device="cuda"))
    torch.cuda.synchronize()
    assert op.ring_len.tolist() == [3, 2, 3, 3, 5, 3]
    assert int(op.error_slot.item()) == 2
    assert bool((op.ring_g[:, 2] == 5.0).all()) and bool((op.ring_g[:, 1, :2] == 0).all())
    with pytest.raises(RuntimeError, match="invariant violated for slot 2"):
        op.check_errors()
    op.error_slot.fill_(-1)
    op.start_requests(torch.tensor([9], dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    assert int(op.error_slot.item()) == 9


@pytest.mark.gpu
def test_start_requests_reads_nothing_back():
    """The drop-ins' start_requests with device slots and the default "spread" phase (and with an int, and without a
    phase) runs under torch's sync debug mode "error": no host sync."""
    from replayssm_trtllm.integrations import ReplaySelectiveStateUpdate
    pools = [torch.randn(8, 8, 32, 64, device="cuda") for _ in range(3)]
    op = ReplaySelectiveStateUpdate(pools, 2, window=4)
    slots = torch.tensor([5, 0, 3], device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        op.start_requests(slots)
        op.start_requests(slots[:1], phase=2)
        op.start_requests(slots[1:], phase=None)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert op.ring_len.tolist() == [0, 0, 0, 0, 0, 2, 0, 0]
    assert int(op.error_slot.item()) == -1


@pytest.mark.gpu
def test_cache_reset_reads_nothing_back():
    """The CUDA caches' reset with device slots (one padding entry) and a device prefill state: no host sync (torch's
    sync debug mode "error"); the admitted slots hold the prefill rows, the padding entry's row and the other slots
    are untouched; a slot >= S lands in error_slot instead of a device-side assert."""
    for c in _caches("cuda"):
        c.ckpt.fill_(3.0)
        slots = torch.tensor([7, -1, 2], device="cuda")
        pre = torch.randn((2, 3) + tuple(c.ckpt.shape[2:]), device="cuda")
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            c.reset(slots, pre, phase="spread")
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert torch.equal(c.ckpt[:, 7], pre[:, 0].to(c.state_dtype)) and torch.equal(c.ckpt[:, 2], pre[:, 2])
        assert bool((c.ckpt[:, [0, 1, 3, 4, 5, 6, 8]] == 3.0).all())
        assert c.ring_len.tolist()[7] == 0 and c.ring_len.tolist()[2] == 2
        assert int(c.error_slot.item()) == -1
        c.reset(torch.tensor([11], device="cuda"), pre[:, :1])
        torch.cuda.synchronize()
        assert int(c.error_slot.item()) == 11


@pytest.mark.gpu
def test_admission_replays_in_a_cuda_graph():
    """The CUDA caches' reset captured in a CUDA graph with device slots, device prefill states and each phase form
    that reads no host value at replay time (device per-slot phases, "spread", an int, None). Every replay admits the
    slots, phases and states the captured tensors hold at replay time, equal bit for bit to the Python form on a CPU
    copy; a captured "spread" replays its capture's start (consecutive phases within one admission, as intended: rows
    admitted by different replays are admitted at different steps anyway)."""
    gen = torch.Generator().manual_seed(17)
    for gpu, cpu in _twin_caches(gen):
        n = 3
        slots = torch.zeros(n, dtype=torch.int64, device="cuda")
        phases = torch.zeros(n, dtype=torch.int32, device="cuda")
        pre = torch.zeros((2, n) + tuple(cpu.ckpt.shape[2:]), device="cuda", dtype=gpu.state_dtype)
        for form in ("per-row", "spread", 5, None):
            phase = phases if form == "per-row" else form
            start = gpu._admitted
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                gpu.reset(slots, pre, phase=phase)
            for rep in range(3):
                chosen = torch.randperm(gpu.num_slots, generator=gen)[:n]
                if rep == 1:
                    chosen[1] = -1                        # a padding entry: its row stays untouched
                new_phases = torch.randint(0, gpu.window, (n,), generator=gen, dtype=torch.int32)
                new_pre = torch.randn(tuple(pre.shape), generator=gen).to(gpu.state_dtype)
                slots.copy_(chosen)
                phases.copy_(new_phases)
                pre.copy_(new_pre)
                graph.replay()
                if form == "per-row":
                    want_phase = new_phases
                elif form == "spread":                    # the capture's start, at every replay
                    want_phase = [(start + i) % gpu.window for i in range(n)]
                else:
                    want_phase = form
                cpu.reset(chosen.tolist(), new_pre, phase=want_phase)
                _assert_same_caches(gpu, cpu, form, rep)
            del graph
        assert int(gpu.error_slot.item()) == -1


@pytest.mark.gpu
@pytest.mark.sanitize
def test_device_slot_named_twice_is_admitted_once_and_reported():
    """The caches' reset with device slots naming one slot twice (distinct prefill states and device phases): the first
    entry is admitted (its phase, records and checkpoint, bit for bit as the Python form with that entry alone), the
    later one is left out and its slot reported in error_slot; the other entries are admitted as usual."""
    gen = torch.Generator().manual_seed(23)
    for gpu, cpu in _twin_caches(gen):
        pre = torch.randn((2, 4) + tuple(cpu.ckpt.shape[2:]), generator=gen).to(gpu.state_dtype)
        slots, phases = [6, 2, 6, 6], [3, 9, 11, 0]
        gpu.reset(torch.tensor(slots, device="cuda"), pre.cuda(), phase=torch.tensor(phases, device="cuda"))
        cpu.reset(slots[:2], pre[:, :2], phase=phases[:2])     # what the first two entries alone do
        _assert_same_caches(gpu, cpu)
        assert int(gpu.error_slot.item()) == 6, type(gpu).__name__
