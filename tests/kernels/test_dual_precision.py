"""GPU tests of the dual-precision decode + flush kernels (Algorithms 3 and 6) against the float64
reference caches (replayssm_trtllm/reference, two_precision=True), and bit-exactness of the flush casts."""
import os

import pytest
import torch

from replayssm_trtllm.formats import PhiloxKey, encode, quantize_dequantize
from replayssm_trtllm.reference import GdnReplayCacheRef, Mamba2ReplayCacheRef, cast_quantizer
from replayssm_trtllm.reference.testing import (random_gdn_inputs, random_gdn_layer, random_mamba2_inputs,
                                                random_mamba2_layer, random_state)
from kernel_profile import cuda_kernel_names, instances

pytestmark = pytest.mark.gpu

# relative RMS tolerance of outputs per read format (fp16 activations; nvfp4 / fp8 allow rare one-code
# differences of the read copy, whose fp32 accumulator differs from the float64 reference in the last bits)
OUT_TOL = {"fp32": 3e-3, "fp16": 4e-3, "fp8_e4m3": 1.5e-2, "nvfp4": 3e-2}
STATE_TOL = 2e-4  # fp32 recurrence checkpoint vs float64


def _rel_rms(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm().clamp(min=1e-30))


def _qlp(fmt):
    if fmt == "fp32":
        return lambda S: S.float().double()
    return lambda S: quantize_dequantize(S.float().contiguous(), fmt).double()


def _h(t):  # the fp16 value of an input, as the reference sees it
    return t.half().double()


def _active(S, step, stagger):
    """Decode rows of one step: every slot plus a padding row; with `stagger`, slot s sits out the steps
    where (step + s) % 3 == 0, so the slots' cursors drift apart (continuous batching)."""
    rows = [s for s in range(S) if not (stagger and (step + s) % 3 == 0)] + [-1]
    return torch.tensor(rows, dtype=torch.int32)


def _run_mamba2(read_fmt, mode, T, S, H, P, G, L, steps, act=torch.float16, stagger=False, seed=3, kernels=None, defer=None,
                phase=None):
    """Mamba-2 dual-precision cache against the float64 reference over `steps` steps; returns the slot flushes.
    kernels: a set that receives the CUDA kernel names of the last step's decode. phase: the resets' admission
    phase (state/phase.py), the same for the cache and the reference."""
    from replayssm_trtllm.ops.dual_precision import Mamba2DualPrecisionCache
    N = 128
    g = torch.Generator().manual_seed(seed)
    layer = random_mamba2_layer(H, g)
    ref = Mamba2ReplayCacheRef(S, H, P, N, G, L, T, "speculative" if mode else "standard", two_precision=True,
                               quant_hp=lambda X: X.float().double(), quant_lp=_qlp(read_fmt))
    dev = Mamba2DualPrecisionCache(S, H, P, G, L, T, mode, read_fmt, "fp32", act_dtype=act)
    if defer is not None:
        dev.defer_flush_rows = defer
    pre = random_state((S, H, P, N), g)
    ref.reset(list(range(S)), pre, phase=phase)
    dev.reset(pre.float().cuda(), phase=phase)
    A, D, dtb = (layer[k].float().cuda() for k in ("A", "D", "dt_bias"))
    a = lambda t: t.to(act).double()  # the activation value as the kernel sees it
    flushes = 0  # slot flushes the reference performed (its ring length dropped)
    for step in range(steps):
        sbi = _active(S, step, stagger)
        inp = random_mamba2_inputs(sbi.shape[0], T, H, P, N, G, g)
        x, dtr, Bm, Cm, z = (inp[k].to(act) for k in ("x", "dt_raw", "Bm", "Cm", "z"))
        y_ref = ref.step(sbi, a(x), dtr.float(), a(Bm), a(Cm), layer["A"], layer["D"], layer["dt_bias"], a(z))
        args = (sbi.cuda(), x.cuda(), dtr.float().cuda(), Bm.cuda(), Cm.cuda(), A, D, dtb, z.cuda())
        if kernels is not None and step == steps - 1:
            y, names = cuda_kernel_names(lambda: dev.step(*args))
            kernels.update(names)
        else:
            y = dev.step(*args)
        acc = torch.randint(1, T + 1, (sbi.shape[0],), generator=g, dtype=torch.int32) if mode else None
        before = ref.cursors.ring_len.clone()
        ref.commit(sbi, acc)
        flushes += int((ref.cursors.ring_len < before).sum())
        dev.commit(sbi.cuda(), None if acc is None else acc.cuda(), T)
        valid = sbi >= 0
        err = _rel_rms(y.cpu()[valid], y_ref[valid])
        assert err < OUT_TOL[read_fmt], f"step {step}: y rel RMS {err:.2e} >= {OUT_TOL[read_fmt]}"
    assert torch.equal(dev.ring_len.cpu().long(), ref.cursors.ring_len.long())
    err = _rel_rms(dev.read_state("hp").cpu(), ref.ckpt)
    assert err < STATE_TOL, f"recurrence checkpoint rel RMS {err:.2e}"
    return flushes


def _run_gdn(read_fmt, mode, T, S, H, HV, V, L, steps, act=torch.float16, stagger=False, seed=5, kernels=None, defer=None,
             phase=None):
    """GDN dual-precision cache against the float64 reference over `steps` steps; returns the slot flushes.
    kernels: a set that receives the CUDA kernel names of the last step's decode. phase: as in _run_mamba2."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache
    K = 128
    g = torch.Generator().manual_seed(seed)
    layer = random_gdn_layer(HV, g)
    ref = GdnReplayCacheRef(S, H, HV, K, V, L, T, "speculative" if mode else "standard", two_precision=True,
                            u_round=cast_quantizer(torch.float16), quant_hp=lambda X: X.float().double(),
                            quant_lp=_qlp(read_fmt))
    dev = GdnDualPrecisionCache(S, H, HV, V, L, T, mode, read_fmt, "fp32", act_dtype=act)
    if defer is not None:
        dev.defer_flush_rows = defer
    pre = random_state((S, HV, V, K), g)
    ref.reset(list(range(S)), pre, phase=phase)
    dev.reset(pre.float().cuda(), phase=phase)
    A_log, dtb = layer["A_log"].float().cuda(), layer["dt_bias"].float().cuda()
    c = lambda t: t.to(act).double()
    flushes = 0  # slot flushes the reference performed (its ring length dropped)
    for step in range(steps):
        sbi = _active(S, step, stagger)
        inp = random_gdn_inputs(sbi.shape[0], T, H, HV, K, V, g)
        q, k, v, a, b = (inp[n].to(act) for n in ("q", "k", "v", "a", "b"))
        o_ref = ref.step(sbi, c(q), c(k), c(v), c(a), c(b), layer["A_log"], layer["dt_bias"])
        args = (sbi.cuda(), q.cuda(), k.cuda(), v.cuda(), a.cuda(), b.cuda(), A_log, dtb)
        if kernels is not None and step == steps - 1:
            o, names = cuda_kernel_names(lambda: dev.step(*args))
            kernels.update(names)
        else:
            o = dev.step(*args)
        acc = torch.randint(1, T + 1, (sbi.shape[0],), generator=g, dtype=torch.int32) if mode else None
        before = ref.cursors.ring_len.clone()
        ref.commit(sbi, acc)
        flushes += int((ref.cursors.ring_len < before).sum())
        dev.commit(sbi.cuda(), None if acc is None else acc.cuda(), T)
        valid = sbi >= 0
        err = _rel_rms(o.cpu()[valid], o_ref[valid])
        assert err < OUT_TOL[read_fmt], f"step {step}: o rel RMS {err:.2e} >= {OUT_TOL[read_fmt]}"
    assert torch.equal(dev.ring_len.cpu().long(), ref.cursors.ring_len.long())
    err = _rel_rms(dev.read_state("hp").cpu(), ref.ckpt)
    assert err < STATE_TOL, f"recurrence checkpoint rel RMS {err:.2e}"
    return flushes


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt", ["fp16", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3)], ids=["standard", "spec-T3"])
@pytest.mark.parametrize("phase", ["spread", pytest.param("per-slot", marks=pytest.mark.sanitize)])
def test_admission_phase_vs_reference(family, read_fmt, mode, T, phase):
    """Slots reset with neutral records (state/phase.py): "spread" gives slot s the phase s % L, "per-slot" an
    arbitrary list that includes L - 1 (the first step flushes there at T = 3); outputs and the recurrence
    checkpoint against the float64 reference reset with the same phases, staggered rows and a padding row,
    flushes at different steps per slot."""
    S, L = 7, 8
    ph = "spread" if phase == "spread" else [5, 0, 7, 3, 1, 6, 2]
    if family == "mamba2":
        flushes = _run_mamba2(read_fmt, mode, T, S, 4, 64, 2, L, 3 * L, stagger=True, seed=41, phase=ph)
    else:
        flushes = _run_gdn(read_fmt, mode, T, S, 2, 4, 64, L, 3 * L, stagger=True, seed=43, phase=ph)
    assert flushes >= S


# Read path of the non-flush rows (RSSM_DP_DECODE_PATH): "auto" is the launcher's rule (at these small
# sizes the stream path for 16-bit read copies, else the tile kernel); "split" forces the replay split
# kernels (Mamba-2 variant 4 with the read copy's row format, flushing rows skipped; 16-row read-copy
# items where the head dim allows, fp32 read copies on the 8-row readout; GDN variant 6 with the read
# copy's row format, appending raw beta and v for the flush; 16-row read-copy items where head_v allows).
PATHS = {"mamba2": ["auto", "split"], "gdn": ["auto", "split"]}


@pytest.fixture
def decode_path(request, monkeypatch):
    path = request.param
    if path == "auto":
        monkeypatch.delenv("RSSM_DP_DECODE_PATH", raising=False)
    else:
        monkeypatch.setenv("RSSM_DP_DECODE_PATH", path)
    return path


@pytest.mark.parametrize("decode_path", PATHS["mamba2"], indirect=True)
@pytest.mark.parametrize("read_fmt", ["fp32", "fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3)], ids=["standard", "spec-T3"])
def test_mamba2_vs_reference(read_fmt, mode, T, decode_path):
    _run_mamba2(read_fmt, mode, T, S=3, H=4, P=64, G=2, L=4, steps=7)


@pytest.mark.parametrize("decode_path", PATHS["mamba2"], indirect=True)
@pytest.mark.parametrize("read_fmt", ["fp32", "fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 8)], ids=["standard", "spec-T8"])
def test_mamba2_long_window_staggered(read_fmt, mode, T, decode_path):
    """Nemotron-3-Nano head dim 80 (several row tiles for fp32, a partial one), L = 16 over 40 steps
    (ring wrap-around, several flushes per slot), staggered slots, bf16 activations, T up to 8."""
    flushes = _run_mamba2(read_fmt, mode, T, S=4, H=4, P=80, G=2, L=16, steps=40, act=torch.bfloat16, stagger=True,
                          seed=17)
    assert flushes >= 4, f"only {flushes} slot flushes in 40 steps"


@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 4)], ids=["standard", "spec-T4"])
def test_mamba2_split_path_by_rule_at_nano_shape(read_fmt, mode, T, monkeypatch):
    """Nemotron-3-Nano heads (96 x 80, 8 groups) with 3 slots: 3 x 96 (row, head) pairs exceed one wave, so
    the launcher's own rule takes the split path (no override); L = 16 over 24 steps with flushes."""
    monkeypatch.delenv("RSSM_DP_DECODE_PATH", raising=False)
    flushes = _run_mamba2(read_fmt, mode, T, S=3, H=96, P=80, G=8, L=16, steps=24, act=torch.bfloat16, stagger=True,
                          seed=23)
    assert flushes >= 2, f"only {flushes} slot flushes in 24 steps"


@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
def test_mamba2_split_path_8_row_items(read_fmt, monkeypatch):
    """The split path's 8-row readout items on read copies (RSSM_MAMBA2_READ_ROWS=8, the A/B switch; every
    replay head dim is a multiple of 16, so the 16-row read-copy readout is the default)."""
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_MAMBA2_READ_ROWS", "8")
    _run_mamba2(read_fmt, 1, 3, S=3, H=4, P=64, G=2, L=6, steps=12, stagger=True, seed=29)


@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3)], ids=["standard", "spec-T3"])
def test_gdn_split_path_8_row_items(read_fmt, mode, T, monkeypatch):
    """The GDN split path's 8-row readout items on read copies (RSSM_GDN_READ_ROWS=8, the A/B switch; the
    16-row read-copy readout is the default for head_v % 16 == 0, covered by the 'split' cases above)."""
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_GDN_READ_ROWS", "8")
    _run_gdn(read_fmt, mode, T, S=3, H=2, HV=4, V=64, L=6, steps=12, stagger=True, seed=37)


# The standard-mode read-copy readout on tensor cores (RSSM_MAMBA2_READ_MMA unset or 1; fp8 / nvfp4 rows as e4m3 mma
# operands, fp16 rows as f16 ones) and the CUDA-core one it replaces (0), side by side: head dims 64 / 80 / 128,
# windows 16 (4 ring records per lane), 24 (8 per lane) and 8, fp16 and bf16 activations, staggered slots with
# wrap-around and flushes (the flushing rows are skipped by the readout and decoded from the recurrence copy).
READ_MMA_CASES = [(64, 16, torch.float16), (80, 24, torch.bfloat16), (128, 8, torch.bfloat16)]


def _keep_tile_readouts(monkeypatch):
    """The 16-row tile readouts for nvfp4 rows too (they run by default on the other formats and shapes; nvfp4 rows at
    head dim 64 / 80 (Mamba-2) or head_v % 64 == 0 (GDN), window <= 16 run the head-staged readouts by default)."""
    monkeypatch.setenv("RSSM_MAMBA2_READ_MMA_HEAD", "0")
    monkeypatch.setenv("RSSM_GDN_READ_MMA_HEAD", "0")


# "1" runs the lean instances (the default for windows <= 16), "1-fat" the ones without (RSSM_MAMBA2_READ_MMA_LEAN=0).
@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mma", ["1", "1-fat", "0"], ids=["mma", "mma-fat", "cuda-core"])
@pytest.mark.parametrize("P,L,act", READ_MMA_CASES, ids=["P64-L16-fp16", "P80-L24-bf16", "P128-L8-bf16"])
def test_mamba2_read_copy_readout(read_fmt, mma, P, L, act, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_MAMBA2_READ_MMA", mma[0])
    _keep_tile_readouts(monkeypatch)
    monkeypatch.setenv("RSSM_MAMBA2_READ_MMA_LEAN", "0" if mma.endswith("fat") else "1")
    kernels = set()
    flushes = _run_mamba2(read_fmt, 0, 1, S=5, H=8, P=P, G=2, L=L, steps=2 * L + 6, act=act, stagger=True, seed=47,
                          kernels=kernels)
    assert flushes >= 4, f"only {flushes} slot flushes"
    used = any("mamba2ReadCopyMmaKernel" in n for n in kernels)
    assert kernels, "the profiler saw no CUDA kernels"
    assert used == (mma[0] == "1"), f"tensor-core read-copy readout used: {used}; kernels {sorted(kernels)}"


# The GDN read-copy readout on tensor cores (RSSM_GDN_READ_MMA unset or 1) and the CUDA-core one (0), side by side:
# GQA 1:2 and 1:4, head_v 64 / 128, windows 16 and 24 (4 / 8 ring records per lane), fp16 and bf16 activations,
# staggered slots with wrap-around and flushes.
GDN_READ_MMA_CASES = [(2, 4, 128, 16, torch.bfloat16), (1, 4, 64, 24, torch.float16)]


# "1" runs the bf16 instance with the first tile's rows copied before the PDL wait and the lean tile path (the
# defaults), "1-late" without the early rows (RSSM_GDN_READ_MMA_EARLY=0), "1-fat" without the lean path
# (RSSM_GDN_READ_MMA_LEAN=0).
@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mma", ["1", "1-late", "1-fat", "0"], ids=["mma", "mma-late", "mma-fat", "cuda-core"])
@pytest.mark.parametrize("H,HV,V,L,act", GDN_READ_MMA_CASES, ids=["gqa2-V128-L16-bf16", "gqa4-V64-L24-fp16"])
def test_gdn_read_copy_readout(read_fmt, mma, H, HV, V, L, act, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_GDN_READ_MMA", mma[0])
    _keep_tile_readouts(monkeypatch)
    monkeypatch.setenv("RSSM_GDN_READ_MMA_EARLY", "0" if mma.endswith("late") else "1")
    monkeypatch.setenv("RSSM_GDN_READ_MMA_LEAN", "0" if mma.endswith("fat") else "1")
    kernels = set()
    flushes = _run_gdn(read_fmt, 0, 1, S=5, H=H, HV=HV, V=V, L=L, steps=2 * L + 6, act=act, stagger=True, seed=53,
                       kernels=kernels)
    assert flushes >= 4, f"only {flushes} slot flushes"
    used = any("gdnReadCopyMmaKernel" in n for n in kernels)
    assert kernels, "the profiler saw no CUDA kernels"
    assert used == (mma[0] == "1"), f"tensor-core read-copy readout used: {used}; kernels {sorted(kernels)}"


# The occupancy bounds of the tensor-core readouts' compiled-format instances (RSSM_READ_MMA_MINB, the A/B switch: 4, 5
# and 6 CTAs per SM; the defaults are 4 for fp16 rows, 5 for fp8 / nvfp4), bf16 and fp16 activations.
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("minb", ["4", "5", "6"])
def test_read_copy_readout_occupancy_bounds(family, read_fmt, minb, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_READ_MMA_MINB", minb)
    _keep_tile_readouts(monkeypatch)
    kernels = set()
    act = torch.bfloat16 if read_fmt == "fp8_e4m3" else torch.float16
    if family == "mamba2":
        flushes = _run_mamba2(read_fmt, 0, 1, S=5, H=8, P=64, G=2, L=8, steps=22, act=act, stagger=True, seed=71,
                              kernels=kernels)
        name = "mamba2ReadCopyMmaKernel"
    else:
        flushes = _run_gdn(read_fmt, 0, 1, S=5, H=2, HV=4, V=128, L=8, steps=22, act=act, stagger=True, seed=73,
                           kernels=kernels)
        name = "gdnReadCopyMmaKernel"
    assert flushes >= 4, f"only {flushes} slot flushes"
    assert any(name in n for n in kernels), f"the tensor-core readout did not run: {sorted(kernels)}"


# The readouts' stage cursor on long tile walks: RSSM_READ_MMA_CTAS caps the persistent grid so that each warp's tile
# range crosses many heads, key-head groups and rows (the cursor tracks row and head incrementally); padding rows and
# staggered flushing rows (skipped tiles) fall inside the walks.
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("ctas", [pytest.param("1", marks=pytest.mark.sanitize), "3"])
def test_read_copy_readout_long_tile_walks(family, read_fmt, ctas, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_READ_MMA_CTAS", ctas)
    _keep_tile_readouts(monkeypatch)
    kernels = set()
    if family == "mamba2":
        flushes = _run_mamba2(read_fmt, 0, 1, S=7, H=12, P=64, G=3, L=6, steps=14, act=torch.bfloat16, stagger=True,
                              seed=79, kernels=kernels)
        name = "mamba2ReadCopyMmaKernel"
    else:
        flushes = _run_gdn(read_fmt, 0, 1, S=7, H=3, HV=12, V=64, L=6, steps=14, act=torch.bfloat16, stagger=True,
                           seed=83, kernels=kernels)
        name = "gdnReadCopyMmaKernel"
    assert flushes >= 4, f"only {flushes} slot flushes"
    if os.environ.get("RSSM_UNDER_SANITIZER") == "1" and not kernels:
        return  # compute-sanitizer holds CUPTI: the profiler sees no kernels (the outputs were checked above)
    assert any(name in n for n in kernels), f"the tensor-core readout did not run: {sorted(kernels)}"


# The head-staged read-copy readout (the default where it applies, RSSM_MAMBA2_READ_MMA_HEAD=0 off;
# mamba2_read_head_kernel.cuh: nvfp4 rows, head dims 64 / 80, windows <= 16, bf16 / fp16 activations). Against the
# float64 reference with staggered slots, padding rows, flushes and wrap-around, and on walks of several heads per warp
# (RSSM_READ_MMA_CTAS caps the grid: 1 CTA gives each of its 3 warps ~28 heads across rows, key groups and skipped rows;
# the default grid gives each warp one head). (Half-head units, "2", measured slower and were removed in the
# forty-fourth session.)
HEAD_READ_CASES = [(64, 16, torch.bfloat16, None), (80, 16, torch.float16, None), (64, 8, torch.bfloat16, "1"),
                   (80, 6, torch.bfloat16, "2")]
# the instance each head dim must run: (tiles per head, min CTAs per SM)
_HEAD_INSTANCE = {64: ("4", "5"), 80: ("5", "4")}


@pytest.mark.parametrize("P,L,act,ctas", [c if c[3] != "1" else pytest.param(*c, marks=pytest.mark.sanitize)
                                          for c in HEAD_READ_CASES],
                         ids=["P64-L16-bf16", "P80-L16-fp16", "P64-L8-bf16-ctas1", "P80-L6-bf16-ctas2"])
def test_mamba2_read_copy_head_readout(P, L, act, ctas, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_MAMBA2_READ_MMA_HEAD", "1")
    if ctas:
        monkeypatch.setenv("RSSM_READ_MMA_CTAS", ctas)
    kernels = set()
    flushes = _run_mamba2("nvfp4", 0, 1, S=7, H=12, P=P, G=3, L=L, steps=2 * L + 6, act=act, stagger=True, seed=89,
                          kernels=kernels)
    assert flushes >= 4, f"only {flushes} slot flushes"
    if os.environ.get("RSSM_UNDER_SANITIZER") == "1" and not kernels:
        return  # compute-sanitizer holds CUPTI: the profiler sees no kernels (the outputs were checked above)
    ran = {(a[0], a[1]) for a in instances(kernels, "mamba2ReadCopyHeadKernel")}
    assert ran == {_HEAD_INSTANCE[P]}, f"head-staged readout instances {ran}; kernels {sorted(kernels)}"


def _first_differences(a, b, n=6):
    """Where two output tensors differ bitwise: the count and the first indices (for a failing bit-identity test)."""
    d = torch.nonzero(a.view(torch.int16) != b.view(torch.int16))
    return f"{d.shape[0]} of {a.numel()} outputs differ, first at {d[:n].tolist()} (shape {list(a.shape)})"


def _mamba2_dp_outputs(P, L, act, steps, seed, S=7, H=12, G=3):
    """The Mamba-2 nvfp4 dual-precision cache's outputs (valid rows) of `steps` standard steps (staggered slots, a
    padding row), without a reference: for bit-for-bit comparisons of two launch settings on the same inputs."""
    from replayssm_trtllm.ops.dual_precision import Mamba2DualPrecisionCache
    g = torch.Generator().manual_seed(seed)
    layer = random_mamba2_layer(H, g)
    dev = Mamba2DualPrecisionCache(S, H, P, G, L, 1, 0, "nvfp4", "fp32", act_dtype=act)
    dev.reset(random_state((S, H, P, 128), g).float().cuda())
    A, D, dtb = (layer[k].float().cuda() for k in ("A", "D", "dt_bias"))
    outs = []
    for step in range(steps):
        sbi = _active(S, step, True)
        inp = random_mamba2_inputs(sbi.shape[0], 1, H, P, 128, G, g)
        x, dtr, Bm, Cm, z = (inp[k].to(act) for k in ("x", "dt_raw", "Bm", "Cm", "z"))
        y = dev.step(sbi.cuda(), x.cuda(), dtr.float().cuda(), Bm.cuda(), Cm.cuda(), A, D, dtb, z.cuda())
        outs.append(y[(sbi >= 0).cuda()].clone())  # the padding row's output is not written
        dev.commit(sbi.cuda(), None, 1)
    return outs


@pytest.mark.parametrize("P,act", [(64, torch.bfloat16), (80, torch.float16)], ids=["P64-bf16", "P80-fp16"])
def test_mamba2_read_copy_head_readout_changes_no_value(P, act, monkeypatch):
    """The head-staged readout computes what the 16-row tile kernel computes, in the same order: every output bit for
    bit, over 2 L + 6 steps (flushing rows come from the flush-only decode in both)."""
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_READ_MMA_CTAS", "2")  # several heads per warp
    runs = {}
    for head in ("0", "1"):
        monkeypatch.setenv("RSSM_MAMBA2_READ_MMA_HEAD", head)
        runs[head] = _mamba2_dp_outputs(P, 16, act, 38, seed=97)
    for step, (a, b) in enumerate(zip(runs["0"], runs["1"])):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16)), f"step {step}: " + _first_differences(a, b)


# The unit-staged GDN read-copy readout (the default where it applies, RSSM_GDN_READ_MMA_HEAD=0 off;
# gdn_read_head_kernel.cuh: nvfp4 rows, 64-row units, head_v % 64 == 0, windows <= 16, fp16 u): against the float64
# reference (staggered slots, a padding row, flushes, wrap-around), with one unit per warp (default grid) and long walks
# across value heads, key heads and rows. (32-row units, "2", measured slower and were removed in the forty-fourth
# session.)
GDN_HEAD_READ_CASES = [(2, 4, 128, 16, torch.bfloat16, None), (1, 4, 64, 16, torch.float16, None),
                       (3, 12, 64, 6, torch.bfloat16, "1"), (2, 4, 128, 8, torch.bfloat16, "2")]


@pytest.mark.parametrize("H,HV,V,L,act,ctas", [c if c[5] != "1" else pytest.param(*c, marks=pytest.mark.sanitize)
                                               for c in GDN_HEAD_READ_CASES],
                         ids=["gqa2-V128-L16-bf16", "gqa4-V64-L16-fp16", "gqa4-V64-L6-bf16-ctas1",
                              "gqa2-V128-L8-bf16-ctas2"])
def test_gdn_read_copy_head_readout(H, HV, V, L, act, ctas, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_GDN_READ_MMA_HEAD", "1")
    if ctas:
        monkeypatch.setenv("RSSM_READ_MMA_CTAS", ctas)
    kernels = set()
    flushes = _run_gdn("nvfp4", 0, 1, S=7, H=H, HV=HV, V=V, L=L, steps=2 * L + 6, act=act, stagger=True, seed=101,
                       kernels=kernels)
    assert flushes >= 4, f"only {flushes} slot flushes"
    if os.environ.get("RSSM_UNDER_SANITIZER") == "1" and not kernels:
        return  # compute-sanitizer holds CUPTI: the profiler sees no kernels (the outputs were checked above)
    ran = {(a[0], a[1]) for a in instances(kernels, "gdnReadCopyHeadKernel")}  # <min CTAs per SM, activation kind>
    assert ran == {("5", "1" if act == torch.bfloat16 else "2")}, f"unit-staged instances {ran}: {sorted(kernels)}"


def _gdn_dp_outputs(H, HV, V, L, act, steps, seed, S=7):
    """The GDN nvfp4 dual-precision cache's outputs (valid rows) of `steps` standard steps (staggered slots, a padding
    row), without a reference: for bit-for-bit comparisons of two launch settings on the same inputs."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache
    K = 128
    g = torch.Generator().manual_seed(seed)
    layer = random_gdn_layer(HV, g)
    dev = GdnDualPrecisionCache(S, H, HV, V, L, 1, 0, "nvfp4", "fp32", act_dtype=act)
    dev.reset(random_state((S, HV, V, K), g).float().cuda())
    A_log, dtb = layer["A_log"].float().cuda(), layer["dt_bias"].float().cuda()
    outs = []
    for step in range(steps):
        sbi = _active(S, step, True)
        inp = random_gdn_inputs(sbi.shape[0], 1, H, HV, K, V, g)
        q, k, v, a, b = (inp[n].to(act).cuda() for n in ("q", "k", "v", "a", "b"))
        o = dev.step(sbi.cuda(), q, k, v, a, b, A_log, dtb)
        outs.append(o[(sbi >= 0).cuda()].clone())  # the padding row's output is not written
        dev.commit(sbi.cuda(), None, 1)
    return outs


@pytest.mark.parametrize("H,HV,V,act", [(2, 4, 128, torch.bfloat16), (1, 4, 64, torch.float16)],
                         ids=["gqa2-V128-bf16", "gqa4-V64-fp16"])
def test_gdn_read_copy_head_readout_changes_no_value(H, HV, V, act, monkeypatch):
    """The unit-staged readout computes what the 16-row tile kernel computes, in the same order: every output bit for
    bit over 38 steps (the u it appends feeds the later steps, so a different u shows in their outputs)."""
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_READ_MMA_CTAS", "2")  # several units per warp
    runs = {}
    for head in ("0", "1"):
        monkeypatch.setenv("RSSM_GDN_READ_MMA_HEAD", head)
        runs[head] = _gdn_dp_outputs(H, HV, V, 16, act, 38, seed=103)
    for step, (a, b) in enumerate(zip(runs["0"], runs["1"])):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16)), f"step {step}: " + _first_differences(a, b)


@pytest.mark.parametrize("read_fmt", ["fp16", "nvfp4"])
def test_mamba2_head_dim_outside_replay_kernels(read_fmt, monkeypatch):
    """Head dim 24 (a multiple of 8 the dual-precision kernel takes, but not a replay-kernel head dim): the
    launcher's rule keeps such layers on the tile kernel (the stream and split paths would refuse them)."""
    monkeypatch.delenv("RSSM_DP_DECODE_PATH", raising=False)
    _run_mamba2(read_fmt, 0, 1, S=3, H=96, P=24, G=8, L=5, steps=8, seed=31)


@pytest.mark.parametrize("decode_path", PATHS["gdn"], indirect=True)
@pytest.mark.parametrize("read_fmt", ["fp32", "fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 2)], ids=["standard", "spec-T2"])
def test_gdn_vs_reference(read_fmt, mode, T, decode_path):
    _run_gdn(read_fmt, mode, T, S=3, H=2, HV=4, V=64, L=3, steps=6)


@pytest.mark.parametrize("decode_path", PATHS["gdn"], indirect=True)
@pytest.mark.parametrize("read_fmt", ["fp32", "fp16", "fp8_e4m3", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 8)], ids=["standard", "spec-T8"])
def test_gdn_long_window_staggered(read_fmt, mode, T, decode_path):
    """head_v_dim 128 with GQA 1:2, L = 16 over 40 steps (wrap-around, repeated flushes), staggered
    slots, bf16 activations, T up to 8."""
    flushes = _run_gdn(read_fmt, mode, T, S=4, H=2, HV=4, V=128, L=16, steps=40, act=torch.bfloat16, stagger=True,
                       seed=19)
    assert flushes >= 4, f"only {flushes} slot flushes in 40 steps"


# The flush-only decode kernel (flushing rows of the split path when they are not deferred) runs a grid of at most one
# wave, each CTA taking a contiguous range of (row group, head, row tile) items. RSSM_DP_FLUSH_ONLY_CTAS caps the grid
# so that each CTA walks many items across row groups (17 slots + a padding row = 3 groups of 8 rows; the cursors
# drift apart, so groups flush at different steps): standard steps with the flushing rows not deferred, and
# speculative steps (never deferred).
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt", ["fp16", "nvfp4"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3)], ids=["standard", "spec-T3"])
@pytest.mark.parametrize("ctas", [pytest.param("2", marks=pytest.mark.sanitize), "5"])
def test_flush_only_kernel_on_a_small_grid(family, read_fmt, mode, T, ctas, monkeypatch):
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_DP_FLUSH_ONLY_CTAS", ctas)
    kernels = set()
    if family == "mamba2":
        flushes = _run_mamba2(read_fmt, mode, T, S=17, H=4, P=64, G=2, L=4, steps=9, stagger=True, seed=61,
                              kernels=kernels, defer=False)
        name = "mamba2DpDecodeKernel"
    else:
        flushes = _run_gdn(read_fmt, mode, T, S=17, H=2, HV=4, V=128, L=4, steps=9, stagger=True, seed=67,
                           kernels=kernels, defer=False)
        name = "gdnDpDecodeKernel"
    assert flushes >= 8, f"only {flushes} slot flushes"
    if os.environ.get("RSSM_UNDER_SANITIZER") == "1" and not kernels:
        return  # compute-sanitizer holds CUPTI: the profiler sees no kernels (the outputs were checked above)
    assert any(name in n for n in kernels), f"the flush-only decode kernel did not run: {sorted(kernels)}"


def _bits(t):
    t = t.contiguous().cpu()
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16) if t.element_size() == 2 else t


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt", ["fp16", "fp8_e4m3", "nvfp4"])
def test_flush_casts_are_independent_and_bit_exact(family, read_fmt):
    """Two caches fed identically, one with an fp32 recurrence copy, one with fp16+SR: after a flush the
    fp16 copy equals encode(fp32 accumulator, 'fp16', 'sr', key) and the read copy encode(.., RTN)."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache, Mamba2DualPrecisionCache
    S, L, seed, layer_idx = 2, 2, 99, 3
    g = torch.Generator().manual_seed(11)
    if family == "mamba2":
        H, P, G = 4, 32, 2
        caches = [Mamba2DualPrecisionCache(S, H, P, G, L, 1, 0, read_fmt, rf, "sr", seed=seed, layer=layer_idx)
                  for rf in ("fp32", "fp16")]
        pre = random_state((S, H, P, 128), g).half().float().cuda()  # on the fp16 grid: SR keeps it
        lay = random_mamba2_layer(H, g)
        A = lay["A"].float().cuda()
    else:
        H, HV, V = 1, 2, 32
        caches = [GdnDualPrecisionCache(S, H, HV, V, L, 1, 0, read_fmt, rf, "sr", seed=seed, layer=layer_idx)
                  for rf in ("fp32", "fp16")]
        pre = random_state((S, HV, V, 128), g).half().float().cuda()
        lay = random_gdn_layer(HV, g)
    for c in caches:
        c.reset(pre)
    sbi = torch.arange(S, dtype=torch.int32).cuda()
    for step in range(L):  # the L-th step flushes every slot (standard mode)
        if family == "mamba2":
            inp = random_mamba2_inputs(S, 1, H, P, 128, G, g)
            args = [inp[k].half().cuda() for k in ("x", "dt_raw", "Bm", "Cm")]
            for c in caches:
                c.decode(sbi, *args, A)
                fl = c.flush(sbi, A)
        else:
            inp = random_gdn_inputs(S, 1, H, HV, 128, V, g)
            args = [inp[k].half().cuda() for k in ("q", "k", "v", "a", "b")]
            for c in caches:
                c.decode(sbi, *args, lay["A_log"].float().cuda(), lay["dt_bias"].float().cuda())
                fl = c.flush(sbi)
        for c in caches:
            c.commit(sbi)
    assert fl.cpu().tolist() == [1] * S
    acc32 = caches[0].hp.data.cpu()          # the fp32 accumulator, stored exactly
    for s in range(S):
        key = PhiloxKey(seed, s, layer_idx, 0)
        want = encode(acc32[s], "fp16", "sr", key=key)
        assert torch.equal(_bits(caches[1].hp.data[s]), _bits(want.data)), f"SR fp16 recurrence copy of slot {s}"
        want_lp = encode(acc32[s], read_fmt, "rtn")
        for c in caches:
            assert torch.equal(_bits(c.lp.data[s]), _bits(want_lp.data)), f"read copy of slot {s}"
            if want_lp.scale is not None:
                assert torch.equal(_bits(c.lp.scale[s]), _bits(want_lp.scale))


@pytest.mark.sanitize
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_small_shared_mode_sanitize(family):
    """Shared low-precision checkpoint (one SR copy) with L = 1: the conventional per-step quantized state."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache, Mamba2DualPrecisionCache
    g = torch.Generator().manual_seed(2)
    sbi = torch.tensor([1, -1, 0], dtype=torch.int32).cuda()
    if family == "mamba2":
        c = Mamba2DualPrecisionCache(2, 2, 16, 1, 1, 1, 0, "nvfp4", None, "sr")
        c.reset(random_state((2, 2, 16, 128), g).float().cuda())
        lay = random_mamba2_layer(2, g)
        for _ in range(3):
            inp = random_mamba2_inputs(3, 1, 2, 16, 128, 1, g)
            y = c.step(sbi, *(inp[k].half().cuda() for k in ("x", "dt_raw", "Bm", "Cm")), lay["A"].float().cuda())
            c.commit(sbi)
    else:
        c = GdnDualPrecisionCache(2, 1, 2, 16, 1, 1, 0, "fp8_e4m3", None, "sr")
        c.reset(random_state((2, 2, 16, 128), g).float().cuda())
        lay = random_gdn_layer(2, g)
        for _ in range(3):
            inp = random_gdn_inputs(3, 1, 1, 2, 128, 16, g)
            y = c.step(sbi, *(inp[k].half().cuda() for k in ("q", "k", "v", "a", "b")),
                       lay["A_log"].float().cuda(), lay["dt_bias"].float().cuda())
            c.commit(sbi)
    torch.cuda.synchronize()
    assert torch.isfinite(y[0].float()).all() and torch.isfinite(y[2].float()).all()


@pytest.mark.sanitize
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("rows", ["mma", "16", "8"])
def test_split_path_sanitize(family, rows, monkeypatch):
    """The split path (forced) on small shapes, for compute-sanitizer: every read format, standard and
    speculative, 16- and 8-row read-copy items ("mma": standard steps of both families on the tensor-core read-copy
    readouts, "16" on the CUDA-core ones), a padding row, flushes (the flushing rows go to the grouped flush-only
    dual-precision kernel); outputs checked against the float64 reference as in the tests above."""
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_MAMBA2_READ_ROWS" if family == "mamba2" else "RSSM_GDN_READ_ROWS",
                       "16" if rows == "mma" else rows)
    monkeypatch.setenv("RSSM_MAMBA2_READ_MMA", "1" if rows == "mma" else "0")
    monkeypatch.setenv("RSSM_GDN_READ_MMA", "1" if rows == "mma" else "0")
    for read_fmt in ("fp16", "fp8_e4m3", "nvfp4"):
        for mode, T in ((0, 1), (1, 3)):
            if family == "mamba2":
                _run_mamba2(read_fmt, mode, T, S=3, H=4, P=32, G=2, L=4, steps=6, stagger=True, seed=41)
            else:
                _run_gdn(read_fmt, mode, T, S=3, H=2, HV=4, V=32, L=4, steps=6, stagger=True, seed=43)


def _flush_case(family, read_fmt, rec_fmt, mode, T, S, L, seed, P=40, act=torch.bfloat16):
    """A cache with random checkpoints, rings and cursors (h uniform over the valid range, so some rows flush), and
    decode rows = the slots in a random order with padding rows interleaved. Three state heads of P rows, `act`
    records."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache, Mamba2DualPrecisionCache
    g = torch.Generator().manual_seed(seed)
    H = 3
    if family == "mamba2":
        c = Mamba2DualPrecisionCache(S, H, P, 1, L, T, mode, read_fmt, rec_fmt, "sr", act_dtype=act, seed=7, layer=2)
        c.ring_dt.copy_(torch.rand(c.ring_dt.shape, generator=g) * 0.1)
        c.ring_x.copy_(torch.randn(c.ring_x.shape, generator=g))
        c.ring_B.copy_(torch.randn(c.ring_B.shape, generator=g))
        extra = (-(0.5 + torch.rand(H, generator=g))).cuda()
    else:  # HV = 3 value heads on one key head
        c = GdnDualPrecisionCache(S, 1, H, P, L, T, mode, read_fmt, rec_fmt, "sr", act_dtype=act, seed=7, layer=2)
        c.ring_g.copy_(-torch.rand(c.ring_g.shape, generator=g) * 0.2)
        c.ring_k.copy_(torch.randn(c.ring_k.shape, generator=g))
        c.ring_beta.copy_(torch.rand(c.ring_beta.shape, generator=g))
        c.ring_v.copy_(torch.randn(c.ring_v.shape, generator=g))
        extra = None
    c.reset(random_state((S, H, P, 128), g).float().cuda())
    hmax = L - 1 if mode == 0 else L
    c.ring_len.copy_(torch.randint(0, hmax + 1, (S,), generator=g, dtype=torch.int32))
    c.ring_origin.copy_(torch.randint(0, c.capacity, (S,), generator=g, dtype=torch.int32))
    rows = torch.randperm(S, generator=g).to(torch.int32)
    pad = torch.randint(0, S, (S // 7,), generator=g)
    sbi = rows.clone()
    for i in sorted(pad.tolist(), reverse=True):
        sbi = torch.cat([sbi[:i], torch.tensor([-1], dtype=torch.int32), sbi[i:]])
    return c, sbi.cuda(), extra


def _copy_bits(c):
    out = [c.lp.data.clone()] + [t.clone() for t in (c.lp.scale, c.lp.gscale) if t is not None]
    if c.hp is not None:
        out += [c.hp.data.clone()] + ([c.hp.scale.clone()] if c.hp.scale is not None else [])
    return out


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt,rec_fmt", [("nvfp4", "fp16"), ("fp8_e4m3", "fp32"), ("fp16", None)],
                         ids=["nvfp4-fp16sr", "fp8-fp32", "fp16-shared"])
@pytest.mark.parametrize("mode,T", [(0, 1), (1, 3)], ids=["standard", "spec-T3"])
def test_flush_compacted_grid_matches_item_grid(family, read_fmt, rec_fmt, mode, T, monkeypatch):
    """The compacted one-wave flush (default) and the item grid (RSSM_DP_FLUSH_GRID=items) write the same bytes:
    1,100 slots (three scan chunks of 512 decode rows), rows in random order with padding rows, cursors anywhere in
    the valid range. `flushed` follows the flush rule (-1 padding, 1 flushed, 0 not), and the copies of the slots
    that do not flush are left untouched."""
    S, L = 1100, 4
    results = []
    for grid in ("compact", "items"):
        if grid == "items":
            monkeypatch.setenv("RSSM_DP_FLUSH_GRID", "items")
        else:
            monkeypatch.delenv("RSSM_DP_FLUSH_GRID", raising=False)
        c, sbi, A = _flush_case(family, read_fmt, rec_fmt, mode, T, S, L, seed=17)
        before = _copy_bits(c)
        fl = c.flush(sbi, A, T) if family == "mamba2" else c.flush(sbi, T)
        torch.cuda.synchronize()
        results.append((fl.cpu(), _copy_bits(c), before, c.ring_len.cpu(), sbi.cpu()))
    (fa, ca, before, h, sbi), (fb, cb, _, _, _) = results
    slot = sbi.long().clamp(min=0)
    hv = h[slot]
    rule = (hv + 1 == L) if mode == 0 else (hv + T > L)
    want = torch.where(sbi < 0, -1, rule.to(torch.int32))
    assert torch.equal(fa, want.to(torch.int32))
    assert torch.equal(fb, fa)
    assert 0 < int((fa == 1).sum()) < S
    flushed_slots = torch.zeros(S, dtype=torch.bool)
    flushed_slots[slot[fa == 1]] = True
    for a, b, b0 in zip(ca, cb, before):
        assert torch.equal(a.cpu(), b.cpu())
        a, b0 = a.cpu(), b0.cpu()
        assert torch.equal(a[~flushed_slots], b0[~flushed_slots])  # untouched
    # every flushed slot's read copy was rewritten (random records change the state)
    assert not torch.equal(ca[0].cpu()[flushed_slots], before[0].cpu()[flushed_slots])


def _extreme_flush_state(S, H, P, g):
    """fp32 states whose flush exercises the nvfp4 / fp8 encoders' edge paths, head by head: head 0 mixes exact
    zeros of both signs with small values; head 1 gives every 16-block one large element among tiny ones (1e4
    against 1e-30 .. 1e-6, so most codes are zero and some quotients are denormal); head 2 sits on e2m1 grid
    points and midpoints of a per-row scale (ties), and on even rows scales by 1e30 / 1e-30 (divisors outside
    the shared-reciprocal range [2^-90, 2^90]; in an fp16 recurrence copy these overflow / flush to zero)."""
    x = random_state((S, H, P, 128), g).float()
    signs = torch.where(torch.rand(S, P, 128, generator=g) < 0.5, -1.0, 1.0)
    x[:, 0] = torch.where(torch.rand(S, P, 128, generator=g) < 0.4, 0.0 * signs, x[:, 0] * 1e-3)
    tiny = 10.0 ** (-30 + 24 * torch.rand(S, P, 128, generator=g))
    x[:, 1] = signs * tiny
    x[:, 1, :, ::16] = 1e4 * signs[:, :, ::16]
    grid = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0])
    pick = grid[torch.randint(0, grid.numel(), (S, P, 128), generator=g)]
    rowscale = (0.5 + torch.rand(S, P, 1, generator=g)) * torch.where(torch.arange(P) % 2 == 0, 1.0, 1e-1)[None, :, None]
    x[:, 2] = signs * pick * rowscale
    x[:, 2, :, 0] = 6.0 * rowscale[..., 0]  # the block amax on a grid point
    big = torch.where(torch.rand(S, 1, 1, generator=g) < 0.5, 1e30, 1e-30)
    x[:, 2, ::2] = x[:, 2, ::2] * big
    return x


FIXED_FORMATS = [(r, c) for r in ("fp16", "fp8_e4m3", "nvfp4") for c in ("fp32", "fp16")]


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt,rec_fmt", FIXED_FORMATS, ids=[f"{r}-{c}" for r, c in FIXED_FORMATS])
@pytest.mark.parametrize("mode,T,P,act", [(0, 1, 40, "bf16"), (1, 3, 80, "fp16"), (0, 1, 64, "fp16"), (1, 5, 128, "bf16")],
                         ids=["standard-P40-bf16", "spec-T3-P80-fp16", "standard-P64-fp16", "spec-T5-P128-bf16"])
@pytest.mark.parametrize("state", ["random", "extreme"])
def test_flush_fixed_formats_match_runtime_formats(family, read_fmt, rec_fmt, mode, T, P, act, state, monkeypatch):
    """The fixed-format flush instances (RSSM_DP_FLUSH_FIXED_FMT=1: the two copies' formats as template arguments,
    row offsets stepped per row, Philox round keys as launch arguments, fp16 SR with one range test per four values,
    nvfp4 codes by the shared-reciprocal division and the integer e2m1 code; Mamba-2: the fold for head dims that
    fill the warps (P = 64 / 128 here) and for the activation format) write the same bytes as the
    run-time-format kernel (RSSM_DP_FLUSH_FIXED_FMT=0), which the tests above hold to the torch codec: both copies,
    their scales, `flushed`, untouched slots. 'extreme' states (_extreme_flush_state) with the ring records of their heads zeroed,
    so the flushed state keeps the zeros, tiny values, ties and extreme scales (Mamba-2: x_j = 0; GDN: beta_j = 0)."""
    _fixed_vs_runtime_flush(family, read_fmt, rec_fmt, mode, T, P, state, monkeypatch,
                            act=torch.float16 if act == "fp16" else torch.bfloat16)


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("rec_fmt", ["fp32", "fp16"])
@pytest.mark.parametrize("state", ["random", "extreme"])
def test_flush_fixed_formats_without_shared_reciprocal(family, rec_fmt, state, monkeypatch):
    """RSSM_DP_FLUSH_FIXED_FMT=2: the fixed-format instances with every nvfp4 division by __fdiv_rn (the fallback if
    the shared-reciprocal path ever disagreed) write the same bytes as the run-time-format kernel too."""
    _fixed_vs_runtime_flush(family, "nvfp4", rec_fmt, 0, 1, 64, state, monkeypatch, switch="2")


@pytest.mark.sanitize
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt,rec_fmt", [("nvfp4", "fp16"), ("fp8_e4m3", "fp32")], ids=["nvfp4-fp16", "fp8-fp32"])
def test_flush_fixed_formats_sanitize(family, read_fmt, rec_fmt, monkeypatch):
    """The fixed-format flush instances on a 64-row head (4 rows per warp) with extreme states, for
    compute-sanitizer; bytes as the run-time-format kernel's."""
    _fixed_vs_runtime_flush(family, read_fmt, rec_fmt, 0, 1, 64, "extreme", monkeypatch)


def _fixed_vs_runtime_flush(family, read_fmt, rec_fmt, mode, T, P, state, monkeypatch, act=torch.bfloat16, switch="1"):
    """Bytes of one flush with RSSM_DP_FLUSH_FIXED_FMT=`switch` against the run-time-format kernel (=0)."""
    from replayssm_trtllm.ops.dual_precision import state_encode
    # a window of T + 3 at least, so that a spread of cursors leaves some rows unflushed (h + T > L flushes every row
    # of a window below T)
    S, L = 300, max(4, T + 3)
    results = []
    for fixed in ("0", switch):
        monkeypatch.setenv("RSSM_DP_FLUSH_FIXED_FMT", fixed)
        monkeypatch.delenv("RSSM_DP_FLUSH_GRID", raising=False)
        c, sbi, A = _flush_case(family, read_fmt, rec_fmt, mode, T, S, L, seed=29, P=P, act=act)
        if state == "extreme":
            g = torch.Generator().manual_seed(31)
            x = _extreme_flush_state(S, 3, P, g).cuda()
            c._assign(c.hp, state_encode(x, c.hp.fmt, c.rounding if c.hp.fmt != "fp32" else "rtn", c.seed, c.layer))
            if family == "mamba2":
                c.ring_x.zero_()
            else:
                c.ring_beta.zero_()
        before = _copy_bits(c)
        fl, names = cuda_kernel_names(lambda: c.flush(sbi, A, T) if family == "mamba2" else c.flush(sbi, T))
        ran = [n for n in names if "flushCompact" in n]
        if not (os.environ.get("RSSM_UNDER_SANITIZER") == "1" and not names):  # the sanitizer hides the kernels
            assert len(ran) == 1 and ("flushCompactFixedKernel" in ran[0]) == (fixed != "0"), names
        results.append((fl.cpu(), [t.cpu() for t in _copy_bits(c)], [t.cpu() for t in before]))
    (fa, ca, b0), (fb, cb, b1) = results

    def bits(t):  # bytes, so that NaNs (non-finite states) compare too
        return t.contiguous().view(torch.uint8)
    assert all(torch.equal(bits(a), bits(b)) for a, b in zip(b0, b1))  # the same inputs
    assert torch.equal(fa, fb)
    assert 0 < int((fa == 1).sum()) < S
    for a, b in zip(ca, cb):
        assert torch.equal(bits(a), bits(b))
    assert not torch.equal(bits(ca[0]), bits(b0[0]))  # the flush wrote something


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt,rec_fmt", [("nvfp4", "fp16"), ("fp8_e4m3", "fp32"), ("fp16", "fp32")],
                         ids=["nvfp4-fp16sr", "fp8-fp32", "fp16-fp32"])
@pytest.mark.parametrize("how", ["eager", "graph"])
def test_deferred_steps_fixed_formats_match_runtime_formats(family, read_fmt, rec_fmt, how, monkeypatch):
    """The caches' default step (deferred flushing rows, concurrent flush) with the fixed-format flush instances
    (RSSM_DP_FLUSH_FIXED_FMT=1) against the same steps with the run-time-format flush, at a serving-like shape
    (Nemotron-3-Super / Qwen3.5-122B heads, 34 / 130 slots + a padding row, L = 16, flushes spread over the window):
    after each of L + 3 steps the outputs (the flushing rows' from the flush), `flushed` codes and both checkpoint
    copies are equal bit for bit. 'graph': the fixed-format step captured once in a CUDA graph and replayed."""
    L = 16
    S = 34 if family == "mamba2" else 130
    g = torch.Generator().manual_seed(43)
    (fixed, runtime), inputs, step = _dp_pair(family, read_fmt, rec_fmt, S, L, g)
    sbi = torch.tensor(list(range(S)) + [-1], dtype=torch.int32, device="cuda")
    B = sbi.shape[0]
    static_in = inputs(B)
    outs = [torch.empty_like(static_in[0] if family == "mamba2" else static_in[2]) for _ in range(2)]
    fls = [torch.empty(B, dtype=torch.int32, device="cuda") for _ in range(2)]

    def run_fixed():
        monkeypatch.setenv("RSSM_DP_FLUSH_FIXED_FMT", "1")
        step(fixed, sbi, static_in, outs[0], fls[0])
        fixed.commit(sbi)
        monkeypatch.setenv("RSSM_DP_FLUSH_FIXED_FMT", "0")

    graph = None
    flushed_rows = 0
    for it in range(L + 3):
        for dst, src in zip(static_in, inputs(B)):
            dst.copy_(src)
        graph = _eager_or_graph(how, it, run_fixed, graph)
        step(runtime, sbi, static_in, outs[1], fls[1])
        torch.cuda.synchronize()
        assert torch.equal(fls[0], fls[1]), f"step {it}: flushed codes differ"
        for a, b in zip(_copy_bits(fixed), _copy_bits(runtime)):
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), f"step {it}: checkpoint copies differ"
        assert torch.equal(outs[0][:-1].view(torch.int16), outs[1][:-1].view(torch.int16)), f"step {it}: outputs differ"
        flushed_rows += int((fls[1] == 1).sum())
        runtime.commit(sbi)
        assert torch.equal(fixed.ring_len, runtime.ring_len)
    assert flushed_rows >= S - 2  # every slot flushed about once


def test_mamba2_flush_matches_float64_fold(monkeypatch):
    """The compacted flush's fp32 recurrence copy against the fold in float64 (standard mode, 1,100 slots)."""
    monkeypatch.delenv("RSSM_DP_FLUSH_GRID", raising=False)
    L = 5
    c, sbi, A = _flush_case("mamba2", "fp16", "fp32", 0, 1, 1100, L, seed=23)
    S0 = c.hp.data.double().cpu()
    fl = c.flush(sbi, A).cpu()
    got = c.hp.data.double().cpu()
    o, h = c.ring_origin.cpu().long(), c.ring_len.cpu().long()
    dt, x, Bm = c.ring_dt.double().cpu(), c.ring_x.double().cpu(), c.ring_B.double().cpu()
    Ad = A.double().cpu()
    checked = 0
    for r in torch.nonzero(fl == 1).flatten().tolist()[:40]:
        s = int(sbi[r])
        idx = [(int(o[s]) + j) % c.capacity for j in range(int(h[s]) + 1)]
        cum = torch.cumsum(dt[s, idx] * Ad, 0)  # [nf, H]
        want = torch.exp(cum[-1])[:, None, None] * S0[s]
        for j, i in enumerate(idx):
            w = torch.exp(cum[-1] - cum[j]) * dt[s, i]  # [H]
            want += w[:, None, None] * x[s, i][:, :, None] * Bm[s, i, 0][None, None, :]
        err = float((got[s] - want).norm() / want.norm())
        assert err < 1e-5, f"slot {s}: rel err {err:.2e}"
        checked += 1
    assert checked > 10


def _check_deferred_pair(caches, fls, outs, sbi, step, nan_rows=None):
    """One step of a (deferred, decoded) cache pair: the same `flushed` codes, both checkpoint copies bit for bit
    equal, NaN outputs on `nan_rows` (a bool mask, invalid cursors) in both, outputs equal on the other rows that do
    not flush and within rounding on the flushing ones. Returns the number of flushing rows."""
    assert torch.equal(fls[0], fls[1])
    fl = fls[0].cpu() == 1
    for a, b in zip(_copy_bits(caches[0]), _copy_bits(caches[1])):
        assert torch.equal(a, b), f"step {step}: checkpoint copies differ"
    o0, o1 = outs[0].float().cpu(), outs[1].float().cpu()
    keep = (sbi.cpu() >= 0) & ~fl
    if nan_rows is not None:
        assert torch.isnan(o0[nan_rows]).all() and torch.isnan(o1[nan_rows]).all()
        keep &= ~nan_rows
    assert torch.equal(o0[keep], o1[keep]), f"step {step}: non-flushing rows' outputs differ"
    if fl.any():
        err = _rel_rms(o0[fl], o1[fl])
        assert err < 1e-2, f"step {step}: flushing rows' outputs rel RMS {err:.2e}"
    return int(fl.sum())


@pytest.mark.sanitize
@pytest.mark.parametrize("decode_path", PATHS["mamba2"] + ["tile"], indirect=True)
@pytest.mark.parametrize("read_fmt,rec_fmt", [("nvfp4", "fp16"), ("fp8_e4m3", "fp32"), ("fp16", None)],
                         ids=["nvfp4-fp16sr", "fp8-fp32", "fp16-shared"])
def test_mamba2_deferred_flush_rows_match_decoded_ones(read_fmt, rec_fmt, decode_path):
    """Standard steps with the flushing rows deferred to the flush (the cache's default) against the same steps with
    the decode kernels decoding them: both checkpoint copies bit for bit equal after every step (the same fold, the
    same dt), cursors equal, outputs equal on the rows that do not flush and within fp rounding on the flushing ones
    (y from the folded state instead of the output-only form); fp32 dt_raw on one cache pair, act dt_raw otherwise."""
    from replayssm_trtllm.ops.dual_precision import Mamba2DualPrecisionCache
    S, H, P, G, L = 7, 4, 32, 2, 4
    g = torch.Generator().manual_seed(31)
    lay = random_mamba2_layer(H, g)
    A, D, dtb = (lay[k].float().cuda() for k in ("A", "D", "dt_bias"))
    pre = random_state((S, H, P, 128), g).float().cuda()
    caches = []
    for defer in (True, False):
        c = Mamba2DualPrecisionCache(S, H, P, G, L, 1, 0, read_fmt, rec_fmt, "sr", act_dtype=torch.bfloat16, seed=3)
        c.defer_flush_rows = defer
        c.reset(pre)
        caches.append(c)
    flushed_rows = 0
    for step in range(3 * L + 1):
        sbi = _active(S, step, stagger=True).cuda()
        inp = random_mamba2_inputs(sbi.shape[0], 1, H, P, 128, G, g)
        x, Bm, Cm, z = (inp[k].to(torch.bfloat16).cuda() for k in ("x", "Bm", "Cm", "z"))
        dtr = inp["dt_raw"].float().cuda() if step % 2 else inp["dt_raw"].to(torch.bfloat16).cuda()
        fls = [torch.empty(sbi.shape[0], dtype=torch.int32, device="cuda") for _ in caches]
        ys = [c.step(sbi, x, dtr, Bm, Cm, A, D, dtb, z, flushed=f) for c, f in zip(caches, fls)]
        flushed_rows += _check_deferred_pair(caches, fls, ys, sbi, step)
        for c in caches:
            c.commit(sbi)
        assert torch.equal(caches[0].ring_len, caches[1].ring_len)
        assert torch.equal(caches[0].ring_origin, caches[1].ring_origin)
    assert flushed_rows >= S


def test_mamba2_deferred_flush_rejects_speculative_and_gdn():
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache, Mamba2DualPrecisionCache
    g = torch.Generator().manual_seed(1)
    c = Mamba2DualPrecisionCache(2, 2, 16, 1, 4, 2, 1, "fp16", "fp32")
    inp = random_mamba2_inputs(2, 2, 2, 16, 128, 1, g)
    x, dtr, Bm, Cm = (inp[k].half().cuda() for k in ("x", "dt_raw", "Bm", "Cm"))
    sbi = torch.arange(2, dtype=torch.int32).cuda()
    A = -torch.ones(2).cuda()
    with pytest.raises(ValueError, match="standard-mode"):
        c.decode(sbi, x, dtr, Bm, Cm, A, defer_flush_rows=True)
    with pytest.raises(ValueError, match="standard-mode"):
        c.flush(sbi, A, 2, step_inputs={"x": x, "dt_raw": dtr, "B": Bm, "C": Cm, "y": torch.empty_like(x)})
    gc = GdnDualPrecisionCache(2, 1, 2, 16, 4)
    extra = {"ring_g": gc.ring_g, "ring_k": gc.ring_k, "ring_beta": gc.ring_beta, "ring_v": gc.ring_v}
    with pytest.raises(ValueError, match="Mamba-2 standard-mode"):
        gc._flush(sbi, 1, extra, step_inputs={"x": x})


@pytest.mark.parametrize("decode_path", PATHS["mamba2"] + ["stream", "tile"], indirect=True)
@pytest.mark.parametrize("read_fmt", ["fp16", "nvfp4"])
def test_mamba2_deferred_step_invalid_cursors(read_fmt, decode_path):
    """A slot with invalid cursors (h = L in standard mode) under deferred flushing rows: its row's outputs are NaN
    (written by the replay kernels: the flush-only decode kernel is not launched then), its checkpoints and cursors
    are untouched, and every other row matches the same step without deferral (flushing rows to rounding)."""
    if decode_path == "stream" and read_fmt != "fp16":
        pytest.skip("the stream path reads 16-bit read copies only")
    _mamba2_deferred_invalid_cursors(read_fmt, 32)


def test_mamba2_deferred_step_invalid_cursors_head_readout(monkeypatch):
    """The same on the head-staged read-copy readout (nvfp4, head dim 64, RSSM_MAMBA2_READ_MMA_HEAD=1): its NaN path
    for the invalid slot, the padding row untouched."""
    monkeypatch.setenv("RSSM_DP_DECODE_PATH", "split")
    monkeypatch.setenv("RSSM_MAMBA2_READ_MMA_HEAD", "1")
    names = _mamba2_deferred_invalid_cursors("nvfp4", 64)
    assert any("mamba2ReadCopyHeadKernel" in n for n in names), f"the head-staged readout did not run: {sorted(names)}"


def _mamba2_deferred_invalid_cursors(read_fmt, P):
    """Body of the invalid-cursor tests above; returns the CUDA kernel names of the deferred step."""
    from replayssm_trtllm.ops.dual_precision import Mamba2DualPrecisionCache
    S, H, G, L = 9, 4, 2, 4
    g = torch.Generator().manual_seed(8)
    lay = random_mamba2_layer(H, g)
    A, D, dtb = (lay[k].float().cuda() for k in ("A", "D", "dt_bias"))
    pre = random_state((S, H, P, 128), g).float().cuda()
    hs = torch.tensor([0, 1, 2, 3, L, 3, 1, 2, 0], dtype=torch.int32)  # slot 4 invalid; slots 3 and 5 flush
    caches = []
    for defer in (True, False):
        c = Mamba2DualPrecisionCache(S, H, P, G, L, 1, 0, read_fmt, "fp32", act_dtype=torch.float16)
        c.defer_flush_rows = defer
        c.reset(pre)
        c.ring_dt.copy_(torch.rand(c.ring_dt.shape, generator=g) * 0.1)
        c.ring_x.copy_(torch.randn(c.ring_x.shape, generator=g))
        c.ring_B.copy_(torch.randn(c.ring_B.shape, generator=g))
        c.ring_len.copy_(hs)
        caches.append(c)
    caches[1].ring_dt.copy_(caches[0].ring_dt)
    caches[1].ring_x.copy_(caches[0].ring_x)
    caches[1].ring_B.copy_(caches[0].ring_B)
    sbi = torch.tensor([3, 4, 0, -1, 5, 1, 2, 6, 7, 8], dtype=torch.int32).cuda()
    inp = random_mamba2_inputs(sbi.shape[0], 1, H, P, 128, G, g)
    x, dtr, Bm, Cm, z = (inp[k].half().cuda() for k in ("x", "dt_raw", "Bm", "Cm", "z"))
    before = _copy_bits(caches[0])
    ys, names = [], set()
    for c in caches:
        y = torch.full_like(x, 7.0)  # poison: every valid row must be written
        out, n = cuda_kernel_names(lambda: c.step(sbi, x, dtr, Bm, Cm, A, D, dtb, z, y=y))
        names.update(n)
        ys.append(out.float().cpu())
    y0, y1 = ys
    assert torch.isnan(y0[1]).all() and torch.isnan(y1[1]).all()  # the invalid slot's row
    assert (y0[3] == 7.0).all()  # the padding row is untouched
    flushing = [0, 4]  # rows of slots 3 and 5
    other = [i for i in range(sbi.shape[0]) if i not in flushing + [1, 3]]
    assert torch.equal(y0[other], y1[other])
    assert _rel_rms(y0[flushing], y1[flushing]) < 1e-2
    assert torch.isfinite(y0[flushing]).all()
    for a, b0 in zip(_copy_bits(caches[0]), before):
        assert torch.equal(a[4].cpu(), b0[4].cpu())  # the invalid slot's checkpoints
    for a, b in zip(_copy_bits(caches[0]), _copy_bits(caches[1])):
        assert torch.equal(a, b)
    return names


@pytest.mark.sanitize
@pytest.mark.parametrize("decode_path", PATHS["gdn"] + ["tile"], indirect=True)
@pytest.mark.parametrize("read_fmt,rec_fmt", [("nvfp4", "fp16"), ("fp8_e4m3", "fp32"), ("fp16", None)],
                         ids=["nvfp4-fp16sr", "fp8-fp32", "fp16-shared"])
def test_gdn_deferred_flush_rows_match_decoded_ones(read_fmt, rec_fmt, decode_path):
    """GDN standard steps with the flushing rows deferred to the flush (the cache's default) against the same steps
    decoded by the decode kernels: checkpoint copies bit for bit equal after every step (the flush re-derives the
    token's gate, beta and normalized key with the decode's expressions), cursors equal, outputs equal on the rows
    that do not flush and within rounding on the flushing ones; a slot with invalid cursors gets NaN outputs."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache
    S, HK, HV, V, L = 7, 2, 4, 32, 4
    g = torch.Generator().manual_seed(37)
    lay = random_gdn_layer(HV, g)
    A_log, dtb = lay["A_log"].float().cuda(), lay["dt_bias"].float().cuda()
    pre = random_state((S, HV, V, 128), g).float().cuda()
    caches = []
    for defer in (True, False):
        c = GdnDualPrecisionCache(S, HK, HV, V, L, 1, 0, read_fmt, rec_fmt, "sr", act_dtype=torch.bfloat16, seed=3)
        c.defer_flush_rows = defer
        c.reset(pre)
        caches.append(c)
    flushed_rows = 0
    for step in range(3 * L + 1):
        sbi = _active(S, step, stagger=True).cuda()
        inp = random_gdn_inputs(sbi.shape[0], 1, HK, HV, 128, V, g)
        q, k, v, a, b = (inp[n].to(torch.bfloat16).cuda() for n in ("q", "k", "v", "a", "b"))
        if step == 2 * L:  # slot 2's cursors invalid for one step
            for c in caches:
                c.ring_len[2] = L
        fls = [torch.empty(sbi.shape[0], dtype=torch.int32, device="cuda") for _ in caches]
        os_ = [c.step(sbi, q, k, v, a, b, A_log, dtb, flushed=f) for c, f in zip(caches, fls)]
        bad = (sbi.cpu() == 2) if step == 2 * L else None
        flushed_rows += _check_deferred_pair(caches, fls, os_, sbi, step, bad)
        if bad is not None:
            for c in caches:
                c.ring_len[2] = 0
        for c in caches:
            c.commit(sbi)
        assert torch.equal(caches[0].ring_len, caches[1].ring_len)
    assert flushed_rows >= S


def _eager_or_graph(how, it, run, graph):
    """Step `it` of a test loop: run() eagerly, or for how == 'graph' captured once in a CUDA graph at step 1 and
    replayed from then on. Returns the graph (None before the capture)."""
    if how == "graph" and it == 1:
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
    if graph is not None:
        graph.replay()
    else:
        run()
    return graph


def _dp_pair(family, read_fmt, rec_fmt, S, L, g):
    """Two identical dual-precision caches (standard mode, deferred flushing rows, flushes spread over the window)
    at a serving-like shape, the layer's parameters and an input maker for B decode rows."""
    from replayssm_trtllm.ops.dual_precision import GdnDualPrecisionCache, Mamba2DualPrecisionCache
    if family == "mamba2":
        H, P, G = 128, 64, 8  # Nemotron-3-Super heads
        lay = random_mamba2_layer(H, g)
        params = tuple(lay[k].float().cuda() for k in ("A", "D", "dt_bias"))
        pre = random_state((S, H, P, 128), g).float().cuda()
        make = lambda: Mamba2DualPrecisionCache(S, H, P, G, L, 1, 0, read_fmt, rec_fmt, "sr", act_dtype=torch.bfloat16,
                                                seed=5)

        def inputs(B):
            inp = random_mamba2_inputs(B, 1, H, P, 128, G, g)
            return tuple(inp[k].to(torch.bfloat16).cuda() for k in ("x", "dt_raw", "Bm", "Cm", "z"))

        def step(c, sbi, inp, out, fl):
            x, dtr, Bm, Cm, z = inp
            A, D, dtb = params
            return c.step(sbi, x, dtr, Bm, Cm, A, D, dtb, z, flushed=fl, y=out)
    else:
        HK, HV, V = 16, 64, 128  # Qwen3.5-122B heads; B x HV >= 8192 takes the split path
        lay = random_gdn_layer(HV, g)
        params = (lay["A_log"].float().cuda(), lay["dt_bias"].float().cuda())
        pre = random_state((S, HV, V, 128), g).float().cuda()
        make = lambda: GdnDualPrecisionCache(S, HK, HV, V, L, 1, 0, read_fmt, rec_fmt, "sr", act_dtype=torch.bfloat16,
                                             seed=5)

        def inputs(B):
            inp = random_gdn_inputs(B, 1, HK, HV, 128, V, g)
            return tuple(inp[n].to(torch.bfloat16).cuda() for n in ("q", "k", "v", "a", "b"))

        def step(c, sbi, inp, out, fl):
            q, k, v, a, b = inp
            return c.step(sbi, q, k, v, a, b, *params, flushed=fl, o=out)
    caches = []
    for _ in range(2):
        c = make()
        c.reset(pre, phase="spread")
        caches.append(c)
    return caches, inputs, step


@pytest.mark.parametrize("family", ["mamba2", "gdn"])
@pytest.mark.parametrize("read_fmt,rec_fmt", [("nvfp4", "fp16"), ("fp8_e4m3", "fp32"), ("fp16", None)],
                         ids=["nvfp4-fp16sr", "fp8-fp32", "fp16-shared"])
@pytest.mark.parametrize("how", ["eager", "graph", "eager-flush-1-cta-per-sm"])
def test_concurrent_flush_matches_serial(family, read_fmt, rec_fmt, how, monkeypatch):
    """concurrent_flush (the flush on a side stream beside the decode) against the serial step at a serving-like
    shape (Nemotron-3-Super / Qwen3.5-122B heads, 34 / 130 slots + a padding row, L = 16, flushes spread over the
    window): after every one of 2L + 3 steps the outputs (bits, NaN rows included), `flushed` codes, both checkpoint
    copies, flush counters and, after the commit, the cursors are equal. 'graph': the concurrent step and its commit
    captured once in a CUDA graph and replayed on fresh inputs; 'eager-flush-1-cta-per-sm': the concurrent flush on a
    capped grid (RSSM_DP_FLUSH_CTAS_PER_SM=1), which shares the same items among fewer CTAs."""
    L = 16
    S = 34 if family == "mamba2" else 130
    g = torch.Generator().manual_seed(41)
    (conc, ser), inputs, step = _dp_pair(family, read_fmt, rec_fmt, S, L, g)
    conc.concurrent_flush, ser.concurrent_flush = True, False
    sbi = torch.tensor(list(range(S)) + [-1], dtype=torch.int32, device="cuda")
    B = sbi.shape[0]
    static_in = inputs(B)
    outs = [torch.empty_like(static_in[0] if family == "mamba2" else static_in[2]) for _ in range(2)]
    fls = [torch.empty(B, dtype=torch.int32, device="cuda") for _ in range(2)]
    cap = "1" if how == "eager-flush-1-cta-per-sm" else None

    def run_conc():
        if cap:
            monkeypatch.setenv("RSSM_DP_FLUSH_CTAS_PER_SM", cap)
        step(conc, sbi, static_in, outs[0], fls[0])
        conc.commit(sbi)
        monkeypatch.delenv("RSSM_DP_FLUSH_CTAS_PER_SM", raising=False)

    graph = None
    flushed_rows = 0
    for it in range(2 * L + 3):
        fresh = inputs(B)
        for dst, src in zip(static_in, fresh):
            dst.copy_(src)
        for o in outs:  # the same poison in both: the padding row must stay untouched, every other row written
            o.view(torch.int16).fill_(0x7FA5)
        bad = None
        if it == L + 1:  # slot 2's cursors invalid for one step (NaN outputs, nothing written)
            for c in (conc, ser):
                c.ring_len[2] = L
            bad = sbi.cpu() == 2
        graph = _eager_or_graph(how, it, run_conc, graph)
        step(ser, sbi, static_in, outs[1], fls[1])
        torch.cuda.synchronize()
        assert torch.equal(fls[0], fls[1]), f"step {it}: flushed codes differ"
        for a, b in zip(_copy_bits(conc), _copy_bits(ser)):
            assert torch.equal(a, b), f"step {it}: checkpoint copies differ"
        assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), f"step {it}: outputs differ"
        assert (outs[0][-1].view(torch.int16) == 0x7FA5).all(), f"step {it}: the padding row's outputs were written"
        assert (outs[0][:-1].view(torch.int16) != 0x7FA5).all(), f"step {it}: a row's outputs were not written"
        if bad is not None:
            assert torch.isnan(outs[0].float().cpu()[bad]).all()
        assert torch.equal(conc.flush_count, ser.flush_count)
        flushed_rows += int((fls[1] == 1).sum())
        ser.commit(sbi)  # (the concurrent cache committed in run_conc)
        assert torch.equal(conc.ring_len, ser.ring_len) and torch.equal(conc.ring_origin, ser.ring_origin)
        if bad is not None:  # slot 2 starts an empty window again
            for c in (conc, ser):
                c.ring_len[2] = 0
    assert flushed_rows >= 2 * S - 2  # every slot flushed about twice


@pytest.mark.sanitize
@pytest.mark.parametrize("family", ["mamba2", "gdn"])
def test_concurrent_flush_sanitize(family):
    """A few concurrent standard steps (nvfp4 read, fp16+SR recurrence) under compute-sanitizer (gpu_run.sh
    --sanitize), checked against the serial step as above."""
    L = 4
    g = torch.Generator().manual_seed(43)
    (conc, ser), inputs, step = _dp_pair(family, "nvfp4", "fp16", 5, L, g)
    conc.concurrent_flush, ser.concurrent_flush = True, False
    sbi = torch.tensor([0, 1, -1, 2, 3, 4], dtype=torch.int32, device="cuda")
    flushed = 0
    for it in range(L + 1):
        inp = inputs(sbi.shape[0])
        fls = [torch.empty(sbi.shape[0], dtype=torch.int32, device="cuda") for _ in range(2)]
        poison = torch.empty_like(inp[0] if family == "mamba2" else inp[2]).view(torch.int16).fill_(0x7FA5)
        outs = [step(c, sbi, inp, poison.clone().view(torch.bfloat16), f) for c, f in zip((conc, ser), fls)]
        torch.cuda.synchronize()
        assert torch.equal(fls[0], fls[1])
        assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
        assert torch.equal(outs[0][2].view(torch.int16), poison[2])  # the padding row untouched
        for a, b in zip(_copy_bits(conc), _copy_bits(ser)):
            assert torch.equal(a, b)
        flushed += int((fls[1] == 1).sum())
        for c in (conc, ser):
            c.commit(sbi)
    assert flushed >= 5
