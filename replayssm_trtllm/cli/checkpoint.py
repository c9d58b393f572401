"""``replayssm-trtllm checkpoint``: what ReplaySSM makes of a Hugging Face checkpoint directory.

Reads config.json and the safetensors headers (no tensor data unless ``--decode-check``) and prints:

- the SSM mixer shape and the SSM layers, and whether the CUDA kernels cover that shape;
- where the mixer tensors are and that every SSM layer has all of them in the shapes config.json implies;
- the replay cache per request slot at the chosen window L and verify length T (ring + cursors against
  the FP32 state it replaces for output-only steps);
- with ``--tp N``: what one rank of N-way tensor parallelism holds (its heads, its replay cache), or why the mixers
  cannot be split that way (models/tensor_parallel.py);
- with ``--decode-check N``: a prompt prefilled (``--prompt``, default 2 L tokens), then N decode steps of the
  first SSM layers with random inputs, ReplaySSM against
  conventional decoding in float64 on the CPU, through the checkpoint's own weights (standard mode, and
  speculative mode with random acceptance when ``-T`` > 1); with ``--tp``, also the N ranks' ReplaySSM decoders
  summed. Exits 1 if they disagree beyond ``--tol``.

Exit status: 0 when everything checked holds, 1 when a check fails, 2 when the checkpoint cannot be read.
"""
from __future__ import annotations

import sys
import time

import torch

from ..models import (HfCheckpoint, HfCheckpointError, HfConfigError, SsmDecoder, decode_side_by_side,
                      load_hf_config, load_mixer_weights, make_mixer)
from ..models.backends import make_backend
from ..models.checkpoint import mixer_tensor_problems, mixer_weight_shapes
from ..models.tensor_parallel import TensorParallelDecoder, rank_spec, tensor_parallel_problems
from ..config import ring_capacity_for
from ..presets import PRESETS

CURSOR_BYTES_PER_SLOT = 8   # ring_origin + ring_len, int32, shared by all layers
PROGRESS_EVERY_S = 5.0      # the decode check prints a progress line at most this often


def add_arguments(p):
    p.add_argument("path", help="checkpoint directory (config.json + *.safetensors)")
    p.add_argument("--window", "-L", type=int, default=16, help="replay window L (default 16)")
    p.add_argument("--verify", "-T", type=int, default=1, help="max tokens verified per step T (default 1)")
    p.add_argument("--decode-check", type=int, default=0, metavar="STEPS",
                   help="decode STEPS tokens per row with ReplaySSM and conventionally (float64, CPU) and compare")
    p.add_argument("--prompt", type=int, default=None, metavar="TOKENS",
                   help="prompt tokens prefilled before the decode check (default 2 L; 0: start from a zero state)")
    p.add_argument("--layers", type=int, default=1, help="SSM layers in the decode check (default 1: the first)")
    p.add_argument("--rows", type=int, default=2, help="rows in the decode check (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tol", type=float, default=1e-10, help="max relative difference of the decode check")
    p.add_argument("--tp", type=int, default=1, metavar="N",
                   help="tensor parallelism: report one rank of N (heads, replay cache) and, with --decode-check, "
                        "decode with the N ranks' slices summed too (default 1)")


def _mib(x: float) -> str:
    return f"{x / 2**20:.2f} MiB"


def _decode_check(spec, ckpt, layers, rows, steps, window, T, seed, tol, prompt, tp=1) -> bool:
    from dataclasses import replace
    sub = replace(spec, ssm_layers=tuple(spec.ssm_layers[:layers]))
    t0 = time.time()
    weights = {i: load_mixer_weights(ckpt, sub, i) for i in sub.ssm_layers}
    print(f"  loaded {len(weights)} layer(s) in {time.time() - t0:.1f} s")
    ok = True
    for mode, t in [("standard", 1)] + ([("speculative", T)] if T > 1 else []):
        decs = []
        for name in ("conventional-reference", "replay-reference"):
            mixers = {i: make_mixer(sub, w) for i, w in weights.items()}
            decs.append(SsmDecoder(sub, mixers, make_backend(name, sub, rows, window, t)))
        if tp > 1:
            decs.append(TensorParallelDecoder.from_weights(
                sub, weights, tp, lambda rs, t=t: make_backend("replay-reference", rs, rows, window, t)))
        t0 = last = time.time()

        def progress(step, worst):
            nonlocal last
            if time.time() - last >= PROGRESS_EVERY_S and step < steps:
                last = time.time()
                print(f"  {mode}: step {step}/{steps}, max rel diff so far {worst:.2e} ({last - t0:.0f} s)",
                      flush=True)

        worst = decode_side_by_side(decs, torch.arange(rows), steps, t, prompt, torch.Generator().manual_seed(seed),
                                    progress)
        good = worst <= tol
        ok &= good
        print(f"  {mode} (T={t}, L={window}, {rows} rows, prompt {prompt}, {steps} steps, "
              f"{len(sub.ssm_layers)} layer(s), "
              f"{time.time() - t0:.1f} s): ReplaySSM{f' (whole and its TP {tp} ranks summed)' if tp > 1 else ''} "
              f"vs conventional max rel diff {worst:.2e} -> "
              f"{'ok' if good else f'FAIL (tol {tol:g})'}")
    return ok


def run(args) -> int:
    if args.window < 1 or args.verify < 1 or args.verify > args.window:
        print(f"checkpoint: need 1 <= T <= L; got L={args.window}, T={args.verify}", file=sys.stderr)
        return 2
    try:
        spec = load_hf_config(args.path)
        ckpt = HfCheckpoint(args.path)
    except (HfConfigError, HfCheckpointError, FileNotFoundError, ImportError) as e:
        print(f"checkpoint: {e}", file=sys.stderr)
        return 2
    ok = True
    s = spec
    names = ("H", "P", "N", "G") if s.family == "mamba2" else ("HV", "V", "K", "H")
    dims = ", ".join(f"{n}={v}" for n, v in zip(names, (s.heads, s.head_dim, s.state_dim, s.key_heads)))
    print(f"{args.path}: model_type {s.model_type}, {s.family} mixers ({dims}), hidden {s.hidden_size}, "
          f"conv {s.conv_kernel}, dtype {s.torch_dtype}")
    print(f"  {len(s.ssm_layers)} SSM layers of {s.num_layers}: {list(s.ssm_layers)}")
    same = [name for name, p in PRESETS.items() if (p.family, p.heads, p.head_dim, p.state_dim, p.key_heads) ==
            (s.family, s.heads, s.head_dim, s.state_dim, s.key_heads)]
    if same:
        print(f"  layer shape of the benchmarked preset {same[0]} (docs/benchmarks.md; replayssm-trtllm bench)")
    errs = s.kernel_support_errors()
    print("  CUDA kernels: cover this shape" if not errs else "  CUDA kernels: do NOT cover this shape: "
          + "; ".join(errs))

    # tensors: names and header shapes only
    try:
        prefix0 = ckpt.mixer_prefix(s, s.ssm_layers[0])
    except HfCheckpointError as e:
        print(f"  tensors: {e}")
        return 1
    root = prefix0.replace(f"layers.{s.ssm_layers[0]}.", "layers.<i>.")
    shapes = mixer_weight_shapes(s)
    bad, quantized = [], []
    for i in s.ssm_layers:
        for kind, name, detail in mixer_tensor_problems(ckpt, s, i):
            line = f"{name}: missing, {detail}" if kind == "missing" else f"{name}: {detail}"
            (quantized if kind == "quantized" else bad).append(line)
    print(f"  tensors: {root}{{{', '.join(shapes)}}}: "
          + ("all present with the expected shapes" if not bad else f"{len(bad)} problem(s)")
          + (f"; {len(quantized)} stored quantized" if quantized else ""))
    for b in bad[:20]:
        print(f"    {b}")
    if quantized:
        print(f"    quantized (the SSM parameters load; the plain-PyTorch mixer and --decode-check need unquantized "
              f"projections), e.g. {quantized[0]}")
    ok &= not bad

    # replay cache per slot
    preset = s.to_preset()
    C = ring_capacity_for(args.window, args.verify, speculative=args.verify > 1)
    ring = C * preset.record_bytes()
    state = preset.state_bytes()
    nl = len(s.ssm_layers)
    print(f"  replay cache per slot, L={args.window}, T={args.verify} (ring capacity {C}): ring {ring:,} B per layer "
          f"= {100 * ring / state:.1f}% of the {_mib(state)} FP32 state; all {nl} layers: ring {_mib(nl * ring)} + "
          f"checkpoints {_mib(nl * state)} + cursors {CURSOR_BYTES_PER_SLOT} B")
    tp = args.tp
    tp_errs = tensor_parallel_problems(s, tp)
    if tp_errs:
        print(f"  tensor parallelism TP {tp}: cannot split these mixers: " + "; ".join(tp_errs))
        ok = False
    elif tp > 1:
        r = rank_spec(s, tp)
        print(f"  tensor parallelism TP {tp}: each rank holds {r.heads} heads and {r.key_heads} key heads / groups "
              f"of every SSM layer (in_proj column-parallel, out_proj row-parallel + all-reduce, norms local); its "
              f"replay cache per slot, all {nl} layers: ring {_mib(nl * ring / tp)} + checkpoints "
              f"{_mib(nl * state / tp)} + cursors {CURSOR_BYTES_PER_SLOT} B; its kernels: replayssm-trtllm kernels "
              f"--config {args.path} --tp {tp}")

    if args.decode_check > 0:
        layers = max(1, min(args.layers, nl))
        print(f"  decode check: {layers} layer(s), {args.rows} rows, {args.decode_check} steps (float64, CPU)")
        try:
            prompt = 2 * args.window if args.prompt is None else args.prompt
            ok &= _decode_check(s, ckpt, layers, args.rows, args.decode_check, args.window, args.verify,
                                args.seed, args.tol, prompt, tp if not tp_errs else 1)
        except HfCheckpointError as e:
            print(f"  decode check: {e}")
            ok = False
    return 0 if ok else 1
