"""use_replay: whole transformers hybrid models with ReplaySSM in their SSM layers, against the models themselves.

Tiny NemotronH / Qwen3.5 / Qwen3-Next models (hf_tiny.py, random weights). Teacher-forced: the prompt, then one
token per forward through transformers' cache; the logits of every step are compared with the unpatched
model's. Attention, MLP and norms are transformers' in both; only the SSM mixers differ.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

from replayssm_trtllm.models import find_mixers, use_replay

sys.path.insert(0, os.path.dirname(__file__))
import hf_tiny  # noqa: E402

pytest.importorskip("transformers")

KINDS = ("nemotron_h", "qwen3_5", "qwen3_next", "qwen3_5_vl")
PROMPT, NEW = 7, 10


def _rel(a, b) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def _teacher(model, ids):
    """Logits after the prompt and after each later token, decoding through the cache: [B, steps, vocab]."""
    with torch.no_grad():
        out = model(ids[:, :PROMPT], use_cache=True)
        logits, cache = [out.logits[:, -1]], out.past_key_values
        for t in range(PROMPT, ids.shape[1] - 1):
            out = model(ids[:, t:t + 1], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits.append(out.logits[:, -1])
    return torch.stack(logits, 1)


@pytest.fixture(scope="module", params=KINDS)
def tiny_model(request):
    model, _ = hf_tiny.build(request.param, seed=KINDS.index(request.param) + 10)
    ids = torch.randint(3, 64, (2, PROMPT), generator=torch.Generator().manual_seed(5))   # 0-2: special tokens
    with torch.no_grad():
        seq = model.generate(ids, max_new_tokens=NEW, do_sample=False)
    return request.param, model, seq


@pytest.mark.parametrize("backend, phase", [("replay-reference", "spread"), ("replay-reference", None),
                                            ("conventional-reference", "spread")])
def test_whole_model_logits_match_transformers(tiny_model, backend, phase):
    """Window 4 over 16 positions: several flushes per row inside the model; the batch's rows admitted with the
    default "spread" phase (rows 0, 1 start with 0, 1 neutral records) or without one."""
    kind, model, seq = tiny_model
    ref = _teacher(model, seq)
    patch = use_replay(model, backend=backend, window=4) if phase == "spread" else \
        use_replay(model, backend=backend, window=4, admission_phase=phase)
    assert patch.decoder.admission_phase == phase
    try:
        got = _teacher(model, seq)
    finally:
        patch.remove()
    assert _rel(got, ref) < 1e-4, (kind, _rel(got, ref))
    assert torch.equal(_teacher(model, seq), ref)      # removed: the model's own mixers again, bit for bit


def test_generate_gives_the_same_tokens(tiny_model):
    kind, model, seq = tiny_model
    patch = use_replay(model, window=4)
    try:
        with torch.no_grad():
            again = model.generate(seq[:, :PROMPT], max_new_tokens=NEW, do_sample=False)
    finally:
        patch.remove()
    assert torch.equal(again, seq), kind


def test_a_forward_without_cache_is_a_whole_sequence(tiny_model):
    kind, model, seq = tiny_model
    with torch.no_grad():
        ref = model(seq).logits
        patch = use_replay(model, window=4)
        try:
            first = model(seq).logits
            second = model(seq).logits           # nothing kept between cache-less forwards
        finally:
            patch.remove()
    assert _rel(first, ref) < 1e-4 and torch.equal(first, second)


def test_a_new_cache_object_is_a_new_generation_at_a_reused_address(tiny_model):
    """The patch tells generations apart by their cache object, held weakly: a cache that is gone is never the current
    one, even when the next cache gets its address (CPython reuses it almost always; comparing id() made the
    cache-less forwards of the test above continue each other now and then)."""
    kind, model, _ = tiny_model

    class Cache:
        pass

    patch = use_replay(model, window=4)
    try:
        a = Cache()
        patch._remember_cache(a)
        assert patch._same_cache(a) and not patch._same_cache(Cache())
        del a  # freed at once (reference counting)
        b = Cache()  # most likely at a's address
        assert not patch._same_cache(b)
        patch._remember_cache(None)
        assert not patch._same_cache(b)
    finally:
        patch.remove()


# The kernels backend rounds the SSM layers' inputs to its activation dtype. Measured on the tiny models under
# the CPU emulation: fp16 activations ~1e-3 of the largest logit, bf16 up to ~3.3e-2 (Qwen3.5, three SSM layers).
TOL_FP16, TOL_BF16 = 5e-3, 6e-2


@pytest.mark.parametrize("act, tol", [(torch.float16, TOL_FP16), (torch.bfloat16, TOL_BF16)], ids=["fp16", "bf16"])
def test_kernels_backend_path_under_cpu_emulation(tiny_model, act, tol):
    """The kernels backend's Python (the device caches and commit, the prefill through the conventional
    kernels) with the ops emulated on the CPU by the float64 reference: the whole model within the activation
    dtype's rounding."""
    from replayssm_trtllm.ops.emulation import cpu_emulation
    kind, model, seq = tiny_model
    ref = _teacher(model, seq)
    with cpu_emulation():
        patch = use_replay(model, backend="replay-kernels", window=4, device="cpu", act_dtype=act)
        try:
            got = _teacher(model, seq)
        finally:
            patch.remove()
    assert _rel(got, ref) < tol, (kind, _rel(got, ref))


def test_padded_batches_are_refused(tiny_model):
    kind, model, seq = tiny_model
    ids = seq[:, :PROMPT].clone()
    pad = model.config.get_text_config().pad_token_id
    ids[0, 0] = pad if pad is not None else 0
    patch = use_replay(model, window=4)
    try:
        with pytest.raises(NotImplementedError, match="padded batches"):
            with torch.no_grad():
                model.generate(ids, max_new_tokens=2, do_sample=False,
                               attention_mask=(ids != ids[0, 0]).long())
    finally:
        patch.remove()


def test_mixers_found_are_the_configs_ssm_layers(tiny_model):
    kind, model, _ = tiny_model
    from replayssm_trtllm.models import parse_hf_config
    assert sorted(find_mixers(model)) == list(parse_hf_config(model.config.to_dict()).ssm_layers)
    with pytest.raises(ValueError, match="backend must be one of"):
        use_replay(model, backend="fast")
    patch = use_replay(model)
    try:
        with pytest.raises(ValueError, match="patched already"):
            use_replay(model)
    finally:
        patch.remove()


@pytest.mark.gpu
def test_kernels_backend_on_the_gpu(tiny_model):
    """The CUDA kernels in the whole model (model on the GPU in fp32, bf16 activations in the SSM layers).
    Needs transformers on the GPU machine (not installed on the lent H200: carry its wheels to run it)."""
    kind, model, seq = tiny_model
    ref = _teacher(model, seq)
    model.cuda()
    try:
        patch = use_replay(model, backend="replay-kernels", window=4)
        try:
            got = _teacher(model, seq.cuda()).cpu()
        finally:
            patch.remove()
    finally:
        model.cpu()
    assert _rel(got, ref) < TOL_BF16, (kind, _rel(got, ref))


@pytest.mark.parametrize("phase", ["spread", "none"])
def test_generate_example_runs_on_the_cpu(tmp_path, phase):
    """examples/hf_generate_replay.py on a tiny saved NemotronH checkpoint, with either admission phase: identical
    tokens, exit 0."""
    import subprocess
    hf_tiny.save("nemotron_h", tmp_path, seed=3)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, os.path.join(root, "examples", "hf_generate_replay.py"), str(tmp_path),
                        "--new-tokens", "6", "--window", "4", "--admission-phase", phase], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tokens identical" in r.stdout and f"admission phase {phase}" in r.stdout


def _speculative_run(model, seq, gen, **patch_kw):
    """Greedy speculative decoding with use_replay(max_verify=4): each verify forward feeds the last kept token
    and 1-3 drafts, the first `good` of them right (from the greedy sequence) and the next one wrong; the drafts
    are checked greedily and the kept prefix accepted. Returns (worst relative logit difference against the
    teacher-forced full forward over the kept positions, verify steps, tokens rejected)."""
    with torch.no_grad():
        ref = model(seq).logits
        patch = use_replay(model, window=4, max_verify=4, **patch_kw)
        try:
            out = model(seq[:, :PROMPT], use_cache=True)
            cache = out.past_key_values
            worst = _rel(out.logits[:, -1], ref[:, PROMPT - 1])
            p, steps, rejected = PROMPT, 0, 0
            while p < seq.shape[1] - 4:
                k = int(torch.randint(1, 4, (1,), generator=gen))
                good = int(torch.randint(0, k + 1, (1,), generator=gen))
                drafts = seq[:, p + 1:p + 1 + k].clone()
                if good < k:       # a wrong draft: shifted by 1..59 within the ids 3..63
                    shift = 1 + int(torch.randint(0, 59, (1,), generator=gen))
                    drafts[:, good] = 3 + (drafts[:, good] - 3 + shift) % 61
                o = model(torch.cat([seq[:, p:p + 1], drafts], 1), past_key_values=cache, use_cache=True)
                n = 1
                while n <= k and bool((o.logits[:, n - 1].argmax(-1) == drafts[:, n - 1]).all()):
                    n += 1
                worst = max(worst, _rel(o.logits[:, :n], ref[:, p:p + n]))
                patch.accept(cache, n)
                p, steps, rejected = p + n, steps + 1, rejected + (k + 1 - n)
        finally:
            patch.remove()
    return worst, steps, rejected


def test_speculative_decoding_inside_the_model(tiny_model):
    """Verify forwards of 2-4 tokens with rejected drafts: the SSM layers verify output-only and commit the kept
    count, transformers' attention cache drops the rest; every kept position's logits equal the teacher-forced
    forward's."""
    kind, model, seq = tiny_model
    worst, steps, rejected = _speculative_run(model, seq, torch.Generator().manual_seed(21))
    assert steps >= 3 and rejected >= 1, (steps, rejected)
    assert worst < 1e-4, (kind, worst)


def test_speculative_decoding_kernels_path_under_cpu_emulation(tiny_model):
    from replayssm_trtllm.ops.emulation import cpu_emulation
    kind, model, seq = tiny_model
    with cpu_emulation():
        worst, _, _ = _speculative_run(model, seq, torch.Generator().manual_seed(22), backend="replay-kernels",
                                       device="cpu", act_dtype=torch.float16)
    assert worst < TOL_FP16, (kind, worst)


def test_accept_misuse_is_refused(tiny_model):
    kind, model, seq = tiny_model
    patch = use_replay(model, window=4, max_verify=3)
    try:
        with torch.no_grad():
            out = model(seq[:, :PROMPT], use_cache=True)
            cache = out.past_key_values
            with pytest.raises(RuntimeError, match="no verify step"):
                patch.accept(cache, 1)
            model(seq[:, PROMPT:PROMPT + 3], past_key_values=cache, use_cache=True)
            with pytest.raises(ValueError, match=r"n must be in \[1, 3\]"):
                patch.accept(cache, 4)
            with pytest.raises(RuntimeError, match="was not accepted"):
                model(seq[:, PROMPT + 3:PROMPT + 4], past_key_values=cache, use_cache=True)
            patch.accept(cache, 3)
            with pytest.raises(NotImplementedError, match="at most max_verify=3"):
                model(seq[:, PROMPT + 3:PROMPT + 7], past_key_values=cache, use_cache=True)
    finally:
        patch.remove()


@pytest.mark.gpu
def test_speculative_decoding_with_the_kernels_on_the_gpu(tiny_model):
    """The speculative run above through the CUDA kernels (model on the GPU in fp32). Needs transformers on the
    GPU machine (carried in .whl_hf/)."""
    kind, model, seq = tiny_model
    model.cuda()
    try:
        worst, steps, rejected = _speculative_run(model, seq.cuda(), torch.Generator().manual_seed(23),
                                                  backend="replay-kernels")
    finally:
        model.cpu()
    assert steps >= 3 and rejected >= 1 and worst < TOL_BF16, (kind, worst)


def test_token_count_in_either_transformers_cache_layout():
    """The patch advances the sequence length where the installed transformers keeps it: a tensor count in the
    linear-attention (SSM) cache layers (5.25), or nothing where those layers keep no count and the attention layers
    count themselves (earlier 5.x: the layout is built here from 5.25's classes with the count removed). A cache with
    neither is refused, naming the transformers version."""
    from types import SimpleNamespace

    import transformers
    from transformers.cache_utils import DynamicLayer, LinearAttentionLayer

    from replayssm_trtllm.models.hf_patch import ReplayPatch

    counted = LinearAttentionLayer()
    if hasattr(counted, "cumulative_length_linear"):  # transformers 5.25 (the tests' pin)
        ReplayPatch._count_tokens(SimpleNamespace(layers=[counted, DynamicLayer()]), 0, 3)
        ReplayPatch._count_tokens(SimpleNamespace(layers=[counted, DynamicLayer()]), 0, 1)
        assert int(counted.cumulative_length_linear) == 4

    uncounted = LinearAttentionLayer()
    if hasattr(uncounted, "cumulative_length_linear"):
        del uncounted.cumulative_length_linear
    attention = DynamicLayer()
    ReplayPatch._count_tokens(SimpleNamespace(layers=[uncounted, attention]), 0, 3)  # the attention layer counts
    assert not hasattr(uncounted, "cumulative_length_linear")

    with pytest.raises(NotImplementedError, match=f"transformers {transformers.__version__}"):
        ReplayPatch._count_tokens(SimpleNamespace(layers=[uncounted]), 0, 3)  # no attention layer either
