"""`replayssm-trtllm kernels`: which kernel the automatic design runs for a model's SSM layers, per batch and tokens
per step, and the workspace it needs (host queries of the kernel library: no GPU needed, nothing launched). With
--read-copy FMT: the read path of the dual-precision decode's non-flush rows instead (rssm_dual_precision_decode_path)."""
from __future__ import annotations

import ctypes

from ..config import SPLIT_KERNEL_MAX_RECORDS, split_kernel_note
from ..ops._lib import DTYPE_CODE_BY_NAME as DTYPES
from ..presets import PRESETS
from .traffic import model_from_args


GDN_NAMES = {0: "register kernel", 1: "tile kernel", 2: "tile kernel (whole head)", 3: "stream kernel",
             4: "stream kernel", 5: "stream kernel", 6: "split kernels (prep + readout)"}
READ_COPY = ("fp16", "bf16", "fp8_e4m3", "nvfp4", "fp32")
DP_PATH_NAMES = {"tile": "dual-precision tile kernel", "stream": "stream kernel on the read copy",
                 "split": "split kernels on the read copy"}
MAMBA2_NAMES = {0: "tile kernel", 1: "persistent kernel (8 warps)", 2: "persistent kernel (4 warps)",
                3: "stream kernel", 4: "split kernels (prep + readout)"}


def _ints(text: str, what: str):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"kernels: {what} must be comma-separated integers; got {text!r}") from None
    if not vals or min(vals) < 1:
        raise SystemExit(f"kernels: {what} must be integers >= 1; got {text!r}")
    return vals


def add_arguments(p):
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", choices=sorted(PRESETS), help="model preset")
    src.add_argument("--config", metavar="PATH",
                     help="a Hugging Face config.json (or its checkpoint directory): nemotron_h, qwen3_5, qwen3_next")
    p.add_argument("--batch", "-B", default="1,2,4,8,16,32,64,128,256",
                   help="batch sizes, comma-separated (default 1,2,4,...,256)")
    p.add_argument("--tokens", "-T", default="1,2,4,8",
                   help="tokens per step, comma-separated: 1 = the standard step, 2..8 = verify steps (default 1,2,4,8)")
    p.add_argument("--window", "-L", type=int, default=16, help="replay window L (default 16)")
    p.add_argument("--state-dtype", choices=sorted(DTYPES), default="fp32", help="checkpoint dtype (default fp32)")
    p.add_argument("--act-dtype", choices=("fp16", "bf16"), default="bf16", help="activations (default bf16)")
    p.add_argument("--tp", type=int, default=1, metavar="N",
                   help="tensor parallelism: the kernels of one rank of N, which holds 1/N of the heads and key heads "
                        "(default 1)")
    p.add_argument("--read-copy", choices=READ_COPY, default=None,
                   help="dual-precision mode: show the decode's read path for a read copy in this format (the "
                        "recurrence copy is read by the flush only)")


def gdn_choice(m, B: int, T: int, L: int, state_dtype: int, act_dtype: int):
    """(variant, kernel name, workspace bytes) of GDN_VARIANT_AUTO for one layer of model preset `m`."""
    from ..ops import gdn as G
    p = G.GdnReplayParams(batch=B, num_tokens=T, num_heads=m.key_heads, num_v_heads=m.heads, head_k=m.state_dim,
                          head_v=m.head_dim, num_slots=B + 1, window=L, ring_capacity=L + (T if T > 1 else 0),
                          mode=0 if T == 1 else 1, state_dtype=state_dtype, act_dtype=act_dtype, u_dtype=1,
                          variant=G.VARIANT_AUTO)
    ws = G.replay_workspace_bytes(p)
    v = G.replay_auto_variant(p, has_workspace=ws > 0)
    name = "warp-item step (WIR)" if v == 5 and G.replay_uses_warp_items(p) else GDN_NAMES.get(v, "?")
    return v, name, ws


def mamba2_choice(m, B: int, T: int, L: int, state_dtype: int, act_dtype: int):
    """(variant, kernel name, workspace bytes) of RSSM_MAMBA2_VARIANT_AUTO for one layer of model preset `m`."""
    from ..ops import mamba2 as M
    from ..ops._lib import host_function
    p = M.Mamba2ReplayParams(batch=B, num_tokens=T, nheads=m.heads, headdim=m.head_dim, dstate=m.state_dim,
                             ngroups=m.key_heads, num_slots=B + 1, window=L, ring_capacity=L + (T if T > 1 else 0),
                             mode=0 if T == 1 else 1, state_dtype=state_dtype, act_dtype=act_dtype, dt_dtype=0,
                             rows_per_cta=0, variant=-1, skip_flush_rows=0)
    ws = M.replay_workspace_bytes(p)
    if ws > 0:
        v = 4
    else:
        f = host_function("rssm_mamba2_replay_auto_variant", [ctypes.c_int32] * 3, ctypes.c_int)
        v = int(f(B, m.heads, m.state_dim))
    return v, MAMBA2_NAMES.get(v, "?"), ws


def dp_choice(m, B: int, T: int, L: int, read_fmt: str, act_dtype: int):
    """(path, name, workspace bytes) of the dual-precision decode's non-flush rows for one layer of model preset `m`,
    with the workspace the torch ops allocate and slot indices (dummy pointers: a host query, nothing runs)."""
    from ..ops import dual_precision as dp
    gdn = m.family == "gdn"
    p = dp.DualPrecisionDecodeParams(
        family=1 if gdn else 0, batch=B, num_tokens=T, num_slots=B + 1, window=L, ring_capacity=L + (T if T > 1 else 0),
        mode=0 if T == 1 else 1, nheads=m.heads, headdim=m.head_dim, dstate=m.state_dim, ngroups=m.key_heads,
        act_dtype=act_dtype, recurrence_dtype=0, read_dtype=dp.FMT_CODE[read_fmt], dt_dtype=0,
        stride_lp_slot=m.heads * m.head_dim * m.state_dim, stride_lp_head=m.head_dim * m.state_dim,
        stride_lp_row=m.state_dim)
    ws = dp.decode_workspace_bytes(p)
    p.state_batch_indices = 0x10000
    if ws > 0:
        p.workspace, p.workspace_bytes = 0x10000, ws
    path = dp.decode_path(p)
    return path, DP_PATH_NAMES.get(path, "refused (see RSSM_DP_DECODE_PATH)"), ws if path == "split" else 0


def run(args) -> int:
    m = model_from_args(args, "kernels")
    tp = getattr(args, "tp", 1)
    if tp != 1:
        from ..models.tensor_parallel import rank_preset
        try:
            m = rank_preset(m, tp)
        except ValueError as e:
            raise SystemExit(f"kernels: --tp {tp}: {e}") from None
    batches = _ints(args.batch, "--batch")
    tokens = _ints(args.tokens, "--tokens")
    if max(tokens) > 8:
        raise SystemExit(f"kernels: --tokens at most 8 (GDN_MAX_TOKENS / the Mamba-2 verify limit); got {args.tokens}")
    if not 1 <= args.window <= 64:
        raise SystemExit(f"kernels: --window must be in [1, 64]; got {args.window}")
    from ..ops._lib import KernelLibraryError, load_library
    try:
        lib = load_library()
    except KernelLibraryError as e:
        raise SystemExit(f"kernels: {e}") from None
    choose = gdn_choice if m.family == "gdn" else mamba2_choice
    sd, ad = DTYPES[args.state_dtype], DTYPES[args.act_dtype]
    read = getattr(args, "read_copy", None)
    if read is not None:
        if m.state_dim != 128:
            raise SystemExit(f"kernels: --read-copy needs state size 128 (the dual-precision kernels); the model has "
                             f"{m.state_dim}")
        choose = lambda m_, B, T, L, sd_, ad_: dp_choice(m_, B, T, L, read, ad_)  # noqa: E731
    state = f"{read} read copy (dual precision)" if read else f"{args.state_dtype} state"
    print(f"model {m.name}: {m.family}, {m.heads} heads x head_dim {m.head_dim} x state {m.state_dim}, "
          f"{m.key_heads} key heads / groups; L = {args.window}, {state}, {args.act_dtype} "
          f"activations; kernel library {getattr(lib, '_name', '?')}")
    print("the automatic design (what the torch ops and TensorRT plugins run), per layer"
          + (" (the decode's non-flush rows; flushing rows: the dual-precision kernel on the recurrence copy):"
             if read else ":"))
    print(f"{'B':>5} {'T':>2}  {'step':<8}  {'path' if read else 'variant':>7}  {'kernel':<32} {'workspace':>12}")
    for B in batches:
        for T in tokens:
            v, name, ws = choose(m, B, T, args.window, sd, ad)
            step = "standard" if T == 1 else "verify"
            wtxt = f"{ws / 2**20:.2f} MiB" if ws >= 2**20 else f"{ws} B"
            print(f"{B:>5} {T:>2}  {step:<8}  {v:>7}  {name:<32} {wtxt:>12}")
    print("workspace: what one layer's launch needs (the torch ops allocate it per call from the caching allocator; "
          "the TensorRT plugins declare the bound at their maximum shapes). Rules and overrides: docs/design.md "
          "section 8.")
    past = [T for T in tokens if split_kernel_note(args.window, T, 0 if T == 1 else 1) is not None]
    if past:
        keep = min(SPLIT_KERNEL_MAX_RECORDS - (0 if T == 1 else T) for T in past)
        print(f"note: at L = {args.window} the steps with T = {', '.join(map(str, past))} replay more than "
              f"{SPLIT_KERNEL_MAX_RECORDS} records (standard: L; verify: L + T), past what the split kernels take (one "
              f"record per lane), so they run on the other designs (stream or persistent kernels) at every batch "
              f"size, slower (docs/design.md section 8, \"The 32-record limit\"); L <= {keep} keeps them on the "
              f"split kernels.")
    return 0
