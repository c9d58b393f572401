"""CPU tests of the host-side validation in the Mamba-2 and commit torch ops: every bad argument
is rejected with a message naming the op, the argument, the expectation and what was given,
before anything is launched (these run without a GPU or the kernel library)."""
from __future__ import annotations

import ctypes

import pytest
import torch

import replayssm_trtllm.ops.commit as commit_ops
import replayssm_trtllm.ops.mamba2 as m2
from replayssm_trtllm.ops.state_cache import ReplayCursorCache, replay_overhead_bytes

S, Bsz, T, H, P, N, G, L = 4, 2, 1, 128, 64, 128, 8, 16


def _replay_args(**over):
    C = L + 4
    a = dict(
        state=torch.zeros(S, H, P, N), ring_dt=torch.zeros(S, C, H), ring_x=torch.zeros(S, C, H, P, dtype=torch.bfloat16),
        ring_B=torch.zeros(S, C, G, N, dtype=torch.bfloat16), ring_origin=torch.zeros(S, dtype=torch.int32),
        ring_len=torch.zeros(S, dtype=torch.int32), x=torch.zeros(Bsz, T, H, P, dtype=torch.bfloat16),
        dt_raw=torch.zeros(Bsz, T, H, dtype=torch.bfloat16), B=torch.zeros(Bsz, T, G, N, dtype=torch.bfloat16),
        C=torch.zeros(Bsz, T, G, N, dtype=torch.bfloat16), A=-torch.ones(H), D=torch.ones(H), dt_bias=torch.zeros(H),
        z=None, state_batch_indices=torch.zeros(Bsz, dtype=torch.int32), window=L, mode=1)
    a.update(over)
    return a


def _call_replay(**over):
    a = _replay_args(**over)
    return torch.ops.replayssm.mamba2_replay_decode(
        a["state"], a["ring_dt"], a["ring_x"], a["ring_B"], a["ring_origin"], a["ring_len"], a["x"], a["dt_raw"],
        a["B"], a["C"], a["A"], a["D"], a["dt_bias"], a["z"], a["state_batch_indices"], a["window"], a["mode"])


def test_ring_x_dtype_message():
    bad = torch.zeros(S, L + 4, H, P, dtype=torch.float16)
    with pytest.raises(ValueError) as e:
        _call_replay(ring_x=bad)
    assert str(e.value) == ("mamba2_replay_decode: 'ring_x' must be bfloat16 [S, C, H, P] = [4, 20, 128, 64]; "
                            "got float16 [4, 20, 128, 64]")


@pytest.mark.parametrize("name,value,needle", [
    ("ring_B", torch.zeros(S, L + 4, G, 64, dtype=torch.bfloat16), "'ring_B' must be bfloat16 [S, C, G, N]"),
    ("ring_dt", torch.zeros(S, L + 4, H, dtype=torch.float16), "'ring_dt' must be float32 [S, C, H]"),
    ("ring_origin", torch.zeros(S, dtype=torch.int64), "'ring_origin' must be int32 [S]"),
    ("ring_len", torch.zeros(S + 1, dtype=torch.int32), "'ring_len' must be int32 [S] = [4]"),
    ("state", torch.zeros(S, H, P, N, dtype=torch.float64), "'state' must be float32 or float16 or bfloat16"),
    ("A", torch.zeros(H, dtype=torch.bfloat16), "'A' must be float32 [H] = [128]"),
    ("D", torch.zeros(H + 1), "'D' must be float32 [H] = [128]"),
    ("C", torch.zeros(Bsz, T, G, N, dtype=torch.float16), "'C' must be bfloat16 [B, T, G, N]"),
    ("dt_raw", torch.zeros(Bsz, T, H + 1, dtype=torch.bfloat16), "'dt_raw' must be bfloat16 or float32 [B, T, H]"),
    ("z", torch.zeros(Bsz, T, H, P, dtype=torch.float16), "'z' must be bfloat16 [B, T, H, P]"),
    ("state_batch_indices", torch.zeros(Bsz, dtype=torch.int64), "'state_batch_indices' must be int32 [B]"),
    ("window", 65, "window L must be in [1, 64]"),
    ("window", 20, "ring capacity C = 20 too small"),
    ("mode", 2, "mode must be 0 (standard) or 1 (speculative)"),
])
def test_replay_rejects(name, value, needle):
    with pytest.raises(ValueError) as e:
        _call_replay(**{name: value})
    assert needle in str(e.value) and str(e.value).startswith("mamba2_replay_decode: "), str(e.value)


def test_replay_standard_needs_one_token():
    with pytest.raises(ValueError, match="standard mode .* T = 1"):
        _call_replay(mode=0, x=torch.zeros(Bsz, 2, H, P, dtype=torch.bfloat16),
                     dt_raw=torch.zeros(Bsz, 2, H, dtype=torch.bfloat16),
                     B=torch.zeros(Bsz, 2, G, N, dtype=torch.bfloat16), C=torch.zeros(Bsz, 2, G, N, dtype=torch.bfloat16))


def test_replay_unsupported_sizes():
    with pytest.raises(ValueError, match="head dim P must be one of"):
        _call_replay(state=torch.zeros(S, H, 96, N), ring_x=torch.zeros(S, L + 4, H, 96, dtype=torch.bfloat16),
                     x=torch.zeros(Bsz, T, H, 96, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="state size N must be one of"):
        n = 32
        _call_replay(state=torch.zeros(S, H, P, n), ring_B=torch.zeros(S, L + 4, G, n, dtype=torch.bfloat16),
                     B=torch.zeros(Bsz, T, G, n, dtype=torch.bfloat16), C=torch.zeros(Bsz, T, G, n, dtype=torch.bfloat16))


def test_replay_last_dim_must_be_contiguous():
    x = torch.zeros(Bsz, T, H, P * 2, dtype=torch.bfloat16)[..., ::2]
    with pytest.raises(ValueError, match="'x' must have a contiguous last dim"):
        _call_replay(x=x)


def test_replay_cpu_tensors_rejected_after_validation():
    with pytest.raises(ValueError, match="CUDA device"):
        _call_replay()


def test_decode_rejects():
    x = torch.zeros(Bsz, 4, H, P, dtype=torch.float16)
    args = [torch.zeros(S, H, P, N), x, torch.zeros(Bsz, 4, H, dtype=torch.float16),
            torch.zeros(Bsz, 4, G, N, dtype=torch.float16), torch.zeros(Bsz, 4, G, N, dtype=torch.float16),
            -torch.ones(H), None, None, None, None]
    with pytest.raises(ValueError) as e:
        torch.ops.replayssm.mamba2_decode(*args, torch.zeros(S, 3, H, P, N))
    assert "mamba2_decode: 'snapshots' must be float32 [S, T, H, P, N] = [4, 4, 128, 64, 128]" in str(e.value)
    with pytest.raises(ValueError, match="must be on a CUDA device"):
        torch.ops.replayssm.mamba2_decode(*args, None)
    with pytest.raises(ValueError, match="T must be in \\[1, 8\\]"):
        x9 = torch.zeros(Bsz, 9, H, P, dtype=torch.float16)
        torch.ops.replayssm.mamba2_decode(torch.zeros(S, H, P, N), x9, torch.zeros(Bsz, 9, H, dtype=torch.float16),
                                          torch.zeros(Bsz, 9, G, N, dtype=torch.float16),
                                          torch.zeros(Bsz, 9, G, N, dtype=torch.float16), -torch.ones(H),
                                          None, None, None, None, None)


def test_commit_rejects():
    sbi = torch.zeros(2, dtype=torch.int32)
    o, h = torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="ring_capacity must be >= 20"):
        torch.ops.replayssm.replay_commit(sbi, None, o, h, None, 16, 19, 4, 1)
    with pytest.raises(ValueError, match="'accepted' must be a contiguous int32 \\[B\\] = \\[2\\]"):
        torch.ops.replayssm.replay_commit(sbi, torch.ones(3, dtype=torch.int32), o, h, None, 16, 20, 4, 1)
    with pytest.raises(ValueError, match="'ring_len' must be a contiguous int32 \\[S\\] = \\[4\\]"):
        torch.ops.replayssm.replay_commit(sbi, None, o, torch.zeros(4, dtype=torch.int64), None, 16, 20, 4, 1)
    with pytest.raises(ValueError, match="num_tokens must be 1 in standard mode"):
        torch.ops.replayssm.replay_commit(sbi, None, o, h, None, 16, 17, 2, 0)


def test_ctypes_struct_sizes():
    """Layouts checked against the C headers with offsetof on x86-64 (sizes 344 / 360 / 64)."""
    assert ctypes.sizeof(m2.Mamba2DecodeParams) == 344 and m2.Mamba2DecodeParams.y.offset == 336
    assert m2.Mamba2DecodeParams.variant.offset == 44
    assert ctypes.sizeof(m2.Mamba2ReplayParams) == 376 and m2.Mamba2ReplayParams.y.offset == 352
    assert m2.Mamba2ReplayParams.workspace.offset == 360 and m2.Mamba2ReplayParams.workspace_bytes.offset == 368
    assert m2.Mamba2ReplayParams.variant.offset == 56 and m2.Mamba2ReplayParams.stride_state_slot.offset == 64
    assert ctypes.sizeof(commit_ops.ReplayCommitParams) == 64 and commit_ops.ReplayCommitParams.error_slot.offset == 56


def test_cursor_cache_modes_cpu():
    c = ReplayCursorCache(4, 16, 4, "speculative", device="cpu")
    assert c.capacity == 20 and c.mode == 1
    with pytest.raises(ValueError, match="max_verify=1"):
        ReplayCursorCache(4, 16, 4, "standard", device="cpu")


def test_cursor_cache_reset_lengths_cpu():
    """reset_cursors(slots, lengths) (the admission phases of state/phase.py): o = 0, h = lengths[i] for the
    non-negative slots; lengths outside [0, L - 1] or of the wrong count refused before anything changes."""
    c = ReplayCursorCache(5, 8, 1, "standard", device="cpu")
    c.ring_origin[:] = 2
    c.reset_cursors([1, -1, 3], [2, 0, 7])
    assert c.ring_len.tolist() == [0, 2, 0, 7, 0] and c.ring_origin.tolist() == [2, 0, 2, 0, 2]
    for bad in ([8], [1, 2]):
        with pytest.raises(ValueError, match=r"ReplayCursorCache.reset_cursors: 'lengths' must be one value per slot "
                                             r"\(1 slots\), each in \[0, L - 1 = 7\]"):
            c.reset_cursors([4], bad)
    assert c.ring_len.tolist() == [0, 2, 0, 7, 0] and c.ring_origin.tolist() == [2, 0, 2, 0, 2]


def test_admission_refuses_duplicate_or_out_of_range_host_slots():
    """Slots given on the host are checked before anything changes: a slot twice (which row's phase and checkpoint
    would win is left to chance) or a slot >= S is refused, in reset() and in the drop-ins' start_requests."""
    from replayssm_trtllm.integrations import ReplayGatedDeltaRuleUpdate
    from replayssm_trtllm.ops.state_cache import ReplayStateCache
    c = ReplayStateCache(1, 5, 8, 16, 32, 2, 8, device="cpu")
    c.ring_len.fill_(3)
    pre = torch.randn((1, 3) + tuple(c.ckpt.shape[2:]))
    from replayssm_trtllm.state.cursors import ReplayInvariantError
    with pytest.raises(ReplayInvariantError, match=r"ReplayStateCache.reset: slot 2 appears in more than one row "
                                                   r"\(\[0, 2\]\); each slot may be named by one row per call"):
        c.reset([2, -1, 2], pre, phase="spread")
    with pytest.raises(ReplayInvariantError, match=r"row 1 maps to slot 5, outside \[0, num_slots=5\)"):
        c.reset(torch.tensor([0, 5, -1]), pre)
    assert c.ring_len.tolist() == [3] * 5 and c._admitted == 0
    c.reset([-1, 4, -1], pre)                            # padding entries may repeat
    assert c.ring_len.tolist() == [3, 3, 3, 3, 0]
    op = ReplayGatedDeltaRuleUpdate([torch.zeros(4, 4, 64, 64)], 2, window=4)
    with pytest.raises(ReplayInvariantError, match=r"ReplayGatedDeltaRuleUpdate.start_requests: slot 1 appears in "
                                                   r"more than one row \(\[0, 2\]\)"):
        op.start_requests([1, 0, 1])


def test_state_caches_reset_phase_cpu():
    """reset(..., phase) of the torch-op caches (allocated on the CPU: no kernel runs): every layer's ring rows
    0 .. d - 1 of each admitted slot hold the neutral record (Mamba-2 zeros; GDN g = u = 0, k = 1), the rest and the
    padding / other slots keep their contents, h = d; "spread" continues from the entries admitted before (padding
    included: the count is known without reading the slots back from the device)."""
    from replayssm_trtllm.ops.gdn import GdnReplayStateCache
    from replayssm_trtllm.ops.state_cache import ReplayStateCache
    caches = [ReplayStateCache(2, 5, 8, 16, 32, 2, 8, device="cpu"),
              GdnReplayStateCache(2, 5, 2, 4, 64, 16, 8, device="cpu")]
    for c in caches:
        rings = {n: getattr(c, n) for n in ("ring_dt", "ring_x", "ring_B", "ring_g", "ring_u", "ring_k")
                 if hasattr(c, n)}
        for t in rings.values():
            t.fill_(7.0)
        c.reset([3, -1, 0], torch.randn((2, 3) + tuple(c.ckpt.shape[2:])), phase=[5, 2, 0])
        assert c.ring_len.tolist() == [0, 0, 0, 5, 0] and c._admitted == 3   # entries, the padding one included
        for n, t in rings.items():
            want = 1.0 if n == "ring_k" else 0.0
            assert bool((t[:, 3, :5] == want).all()) and bool((t[:, 3, 5:] == 7.0).all()), n
            assert bool((t[:, [0, 1, 2, 4]] == 7.0).all()), n
        c.reset([1, 2], torch.randn((2, 2) + tuple(c.ckpt.shape[2:])), phase="spread")
        assert c.ring_len.tolist()[1:3] == [3, 4]


def test_overhead_super_L16_T4():
    o = replay_overhead_bytes(128, 64, 128, 8, 16, 4)
    assert o["ring_bytes"] == 20 * (4 * 128 + 2 * 128 * 64 + 2 * 8 * 128) == 378880
    assert o["state_bytes_fp32"] == 4194304
    assert o["ratio_with_cursors_unshared"] <= 0.12


def test_fake_impls_trace():
    """register_fake: the ops trace under FakeTensorMode (torch.compile / graph capture path)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = _replay_args()
        y = torch.ops.replayssm.mamba2_replay_decode(
            a["state"], a["ring_dt"], a["ring_x"], a["ring_B"], a["ring_origin"], a["ring_len"], a["x"],
            a["dt_raw"], a["B"], a["C"], a["A"], a["D"], a["dt_bias"], a["z"], a["state_batch_indices"], L, 1)
        assert y.shape == (Bsz, T, H, P) and y.dtype == torch.bfloat16


def test_auto_variant_rule():
    """RSSM_MAMBA2_VARIANT_AUTO (-1): the stream replay kernel (3) for dstate 128/256 when
    batch x nheads <= 128, else the persistent kernel (2); conventional decode: 2. Host-only
    functions of the kernel library (no GPU needed; skipped when the library is not built)."""
    from replayssm_trtllm.ops import mamba2 as m2
    from replayssm_trtllm.ops._lib import KernelLibraryError, load_library
    try:
        lib = load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")
    auto = lib.rssm_mamba2_replay_auto_variant
    assert auto(1, 128, 128) == 3 and auto(1, 96, 256) == 3
    assert auto(2, 128, 128) == 2 and auto(256, 128, 128) == 2
    assert auto(1, 8, 64) == 2  # dstate 64: no stream kernel
    assert lib.rssm_mamba2_decode_auto_variant(1, 128, 128) == 4  # the warp-item decode
    assert lib.rssm_mamba2_decode_auto_variant(256, 128, 256) == 4
    assert lib.rssm_mamba2_decode_auto_variant(256, 128, 64) == 2  # dstate 64: no warp-item kernel
    assert m2._check_variant("op", -1) == -1
    with pytest.raises(ValueError, match=r"variant must be one of \(0, 1, 2, 3, 4\) or -1 \(auto\); got 5"):
        m2._check_variant("op", 5)


def test_split_variant_workspace_rules():
    """Variant 4 (split kernels): the workspace size query and the launcher's refusals (no workspace,
    too small a workspace, dstate 64, rows_per_cta != 0), all before anything is launched. Host-only
    functions of the kernel library (skipped when it is not built)."""
    from replayssm_trtllm.ops._lib import KernelLibraryError, check_status, load_library
    try:
        load_library()
    except (KernelLibraryError, OSError) as e:
        pytest.skip(f"kernel library not available: {e}")
    p = m2.Mamba2ReplayParams(batch=2, num_tokens=1, nheads=8, headdim=64, dstate=128, ngroups=2, num_slots=2,
                              window=8, ring_capacity=8, mode=0, state_dtype=0, act_dtype=2, dt_dtype=0, variant=4)
    need = 2 * 8 * ((16 + 2 * 9 + 3) // 4 * 4) * 4  # head records of 16 + (T + 1)(L + T) words, 16-byte rounded
    assert m2.replay_workspace_bytes(p) == need
    p.variant = 2
    assert m2.replay_workspace_bytes(p) == 0
    p.variant = -1  # auto, standard mode: the split kernels at any batch given a workspace (the torch op allocates it)
    assert m2.replay_workspace_bytes(p) == need
    p.mode, p.num_tokens, p.ring_capacity = 1, 2, 10  # speculative, batch x nheads = 16 <= 128: the stream kernel
    assert m2.replay_workspace_bytes(p) == 0
    p.mode, p.num_tokens, p.ring_capacity = 0, 1, 8
    p.batch = 64  # -> variant 4 given a workspace
    assert m2.replay_workspace_bytes(p) == 64 * 8 * ((16 + 2 * 9 + 3) // 4 * 4) * 4
    p.window, p.ring_capacity = 40, 40  # more than 32 records: the persistent kernel, no workspace
    assert m2.replay_workspace_bytes(p) == 0
    # the bound a TensorRT plugin requests at a profile's maximum shapes covers every smaller launch
    bound = load_library().rssm_mamba2_replay_workspace_bound
    bound.argtypes, bound.restype = [ctypes.POINTER(m2.Mamba2ReplayParams)], ctypes.c_int64
    q = m2.Mamba2ReplayParams(batch=64, num_tokens=4, nheads=8, headdim=64, dstate=128, ngroups=2, num_slots=64,
                              window=16, ring_capacity=20, mode=1, state_dtype=0, act_dtype=2, dt_dtype=0, variant=-1)
    b = bound(ctypes.byref(q))
    assert b == 64 * 8 * ((16 + 5 * 20 + 3) // 4 * 4) * 4
    for B_, T_ in ((64, 1), (64, 4), (2, 4)):
        step = m2.Mamba2ReplayParams(batch=B_, num_tokens=T_, nheads=8, headdim=64, dstate=128, ngroups=2,
                                     num_slots=64, window=16, ring_capacity=20, mode=1, state_dtype=0, act_dtype=2,
                                     dt_dtype=0, variant=-1)
        n_step = m2.replay_workspace_bytes(step)
        assert n_step <= b and (n_step > 0) == (B_ == 64)
    q.window, q.ring_capacity = 32, 36  # 33 records even at T = 1: never the split kernels
    assert bound(ctypes.byref(q)) == 0
    p.batch, p.window, p.ring_capacity, p.variant = 2, 8, 8, 4
    fake = 1 << 20  # never dereferenced: every case below is refused on the host
    for name in ("x", "dt_raw", "Bm", "Cm", "A", "y", "ring_origin", "ring_len", "ring_dt", "ring_x", "ring_B",
                 "state"):
        setattr(p, name, fake)
    p.stride_state_slot, p.stride_state_head, p.stride_state_p = 8 * 64 * 128, 64 * 128, 128
    p.stride_C_b, p.stride_C_t, p.stride_C_g = 256, 256, 128
    run = lambda: check_status(m2._fn("rssm_mamba2_replay_launch", m2.Mamba2ReplayParams)(  # noqa: E731
        ctypes.byref(p), None), "mamba2")
    with pytest.raises(RuntimeError, match=f"variant 4 needs a workspace of {need} bytes"):
        run()
    p.workspace, p.workspace_bytes = fake, need - 4
    with pytest.raises(RuntimeError, match=f"variant 4 needs a workspace of {need} bytes"):
        run()
    p.workspace = fake + 8
    with pytest.raises(RuntimeError, match="workspace must be 16-byte aligned"):
        run()
    p.workspace, p.workspace_bytes, p.dstate = fake, need, 64
    with pytest.raises(RuntimeError, match=r"variant 4 \(split kernels\) supports dstate 128 or 256; got 64"):
        run()
    p.dstate, p.rows_per_cta = 128, 16
    with pytest.raises(RuntimeError, match="variant 4 picks its own rows; rows_per_cta must be 0; got 16"):
        run()
    p.rows_per_cta, p.stride_C_t = 0, 258
    with pytest.raises(RuntimeError, match="variant 4 needs Cm rows 8-byte aligned"):
        run()
    p.stride_C_t, p.mode, p.num_tokens, p.window, p.ring_capacity = 256, 1, 4, 30, 34
    p.workspace_bytes = m2.replay_workspace_bytes(p)
    with pytest.raises(RuntimeError, match=r"at most 32 records per step .* got 34"):
        run()


def test_caches_register_the_ops_they_call():
    """A cache imported on its own registers every torch op its step and commit call (found on the H200: the
    Mamba-2 ReplayStateCache imported alone had no torch.ops.replayssm.mamba2_replay_decode). Fresh interpreters,
    so no other test's imports hide it."""
    import subprocess
    import sys
    cases = {"replayssm_trtllm.ops.state_cache": ["mamba2_replay_decode", "replay_commit"],
             "replayssm_trtllm.ops.gdn": ["gdn_replay", "gdn_decode", "replay_commit"]}
    for module, ops in cases.items():
        code = (f"import importlib, torch; importlib.import_module({module!r}); "
                f"print([o for o in {ops!r} if not hasattr(torch.ops.replayssm, o)])")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "[]", f"{module} imported alone lacks the ops {out.stdout.strip()}"


def test_caches_warn_when_steps_leave_the_split_kernels():
    """A cache whose steps replay more than 32 records (standard: window; speculative: window + max_verify) runs
    correctly on the other designs but slower (the sixty-seventh session's grid: L = 32 with drafts); its
    constructor says so once, with the window that would keep every step on the split kernels. Configurations
    within the limit, the paper's L = 16 with T <= 8 among them, stay silent. Both families' caches (the GDN cache
    shares the cursor base)."""
    import warnings
    from replayssm_trtllm.ops.gdn import GdnReplayStateCache
    from replayssm_trtllm.ops.state_cache import (ReplayPerformanceWarning, ReplayStateCache,
                                                  split_kernel_note)
    from replayssm_trtllm.ops.commit import MODE_SPECULATIVE, MODE_STANDARD
    assert split_kernel_note(16, 8, MODE_SPECULATIVE) is None
    assert split_kernel_note(24, 8, MODE_SPECULATIVE) is None    # exactly 32 records
    assert split_kernel_note(32, 1, MODE_STANDARD) is None
    assert split_kernel_note(33, 1, MODE_STANDARD).startswith("window=33 > 32: every replay step runs on the other "
                                                              "designs (stream or persistent kernels; the split")
    with pytest.warns(ReplayPerformanceWarning, match=r"ReplayCursorCache: window \+ max_verify = 32 \+ 2 = 34 > 32: "
                                                      r".*window <= 30 keeps every step on them"):
        ReplayCursorCache(4, 32, 2, "speculative", device="cpu")
    with pytest.warns(ReplayPerformanceWarning, match=r"GdnReplayStateCache: window \+ max_verify = 28 \+ 8 = 36"):
        GdnReplayStateCache(1, 2, 2, 4, 64, 16, 28, max_verify=8, mode="speculative", device="cpu")
    with pytest.warns(ReplayPerformanceWarning, match=r"ReplayStateCache: window=40 > 32"):
        ReplayStateCache(1, 2, 8, 16, 32, 2, 40, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ReplayCursorCache(4, 16, 8, "speculative", device="cpu")
        ReplayStateCache(1, 2, 8, 16, 32, 2, 16, max_verify=4, mode="speculative", device="cpu")
