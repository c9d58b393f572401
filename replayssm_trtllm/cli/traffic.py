"""`replayssm-trtllm traffic`: the memory-traffic model of the paper's Appendix C for a model preset."""
from __future__ import annotations

from ..presets import PRESETS, get_preset
from ..traffic import model_traffic, optimal_window, record_bytes_per_head, window_traffic

STEP_BATCH = 256  # rows of the per-step table (staggered: row i starts at h = i mod (L + 1))


def add_arguments(p):
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", choices=sorted(PRESETS), help="model preset")
    src.add_argument("--config", metavar="PATH",
                     help="a Hugging Face config.json (or its checkpoint directory) instead of a preset: nemotron_h, "
                          "qwen3_5, qwen3_next")
    p.add_argument("--window", "-L", type=int, default=16, help="replay window L (default 16)")
    p.add_argument("--verify", "-T", type=int, default=1, help="tokens verified per step T (default 1)")
    p.add_argument("--acceptance", "-a", type=float, default=None,
                   help="mean tokens committed per step a, 1 <= a <= T (default T)")
    p.add_argument("--batch", "-B", type=int, default=1, help="sequences per step, scales the totals")
    p.add_argument("--shared-keys", action="store_true",
                   help="count the key once per group (our ring layout) instead of once per head "
                        "(the paper's conservative count)")


def _mib(x: float) -> str:
    return f"{x / 2**20:10.2f}"


def model_from_args(args, prog: str = "traffic"):
    """The layer shape of `--model PRESET` or `--config PATH` (a Hugging Face config.json); exits naming `prog` when
    the config cannot be read. Shared by the subcommands that take either."""
    if args.model is not None:
        return get_preset(args.model)
    from ..models import HfConfigError, load_hf_config
    try:
        return load_hf_config(args.config).to_preset(name=f"config {args.config}")
    except (HfConfigError, FileNotFoundError) as e:
        raise SystemExit(f"{prog}: {e}") from None


def run(args) -> int:
    p = model_from_args(args)
    T = args.verify
    a = float(T) if args.acceptance is None else args.acceptance
    if T < 1 or not (1.0 <= a <= T):
        raise SystemExit(f"traffic: need T >= 1 and 1 <= a <= T; got T={T}, a={a}")
    if args.window < 1:
        raise SystemExit(f"traffic: --window must be >= 1; got {args.window}")
    hpk = p.heads // p.key_heads if args.shared_keys else 1
    r = record_bytes_per_head(p.dv, p.dk, hpk)
    print(f"model {p.name}{f' ({p.hf_id})' if p.hf_id else ''}: {p.family}, {p.num_ssm_layers} SSM layers x {p.heads} heads, "
          f"d_v={p.dv}, d_k={p.dk}, {p.key_heads} key heads")
    print(f"  FP32 state per layer and sequence: {p.state_bytes() / 2**20:.2f} MiB; record r = {r:.1f} B/head "
          f"({'key per group' if args.shared_keys else 'key per head, paper count'})")
    for note in p.uncertain:
        print(f"  note: {note}")
    if T == 1 and a == 1.0:
        m_conv, m_rep = window_traffic(p.dv, p.dk, args.window, r)
        print(f"\nEq. 13, one head, one window of L={args.window}: M_conv = {m_conv:,.0f} B, "
              f"M_replay = {m_rep:,.0f} B, M_replay/M_conv = {m_rep / m_conv:.4f}")
    windows = sorted({4, 8, 16, 32, 64, args.window})
    windows = [L for L in windows if L >= T]
    rows, r, lstar = model_traffic(p, windows, T=T, a=a, shared_keys=args.shared_keys, batch=args.batch)
    print(f"\nper committed token, whole model, B={args.batch}, T={T}, a={a:g} (Eq. 15):")
    print(f"{'L':>4} {'conv MiB':>10} {'replay MiB':>10} {'replay/conv':>12}")
    for row in rows:
        mark = "  <- chosen" if row.window == args.window else ""
        print(f"{row.window:>4} {_mib(row.conv_bytes_per_token)} {_mib(row.replay_bytes_per_token)} "
              f"{row.ratio:12.4f}{mark}")
    print(f"\nrecommended window L* = sqrt(2a(M_S/r - T)) = {lstar:.1f} (Eq. 16); "
          f"M_S/r = {4 * p.dv * p.dk / r:.1f}")
    if args.window >= T:
        _per_step(p, args.window, T)
    return 0


def io_bytes_per_token(p, act_bytes: int = 2) -> int:
    """One sequence's step inputs and outputs of one layer and token, as the benchmarks count them (their `_io_bytes`
    on the preset's layer shape): Mamba-2 x, z, y [H, P], B, C [G, N], dt [H]; GDN q, k [H_k, K], v, o [H_v, V],
    a, b [H_v]."""
    if p.family == "mamba2":
        from ..bench.mamba2 import _io_bytes
        return _io_bytes(dict(H=p.heads, P=p.dv, N=p.dk, G=p.key_heads), act_bytes)
    from ..bench.gdn import _io_bytes
    return _io_bytes(dict(H=p.key_heads, HV=p.heads, K=p.dk, V=p.dv), act_bytes)


def _per_step(p, L: int, T: int) -> None:
    """One step of one layer against a conventional standard step (what the benchmarks' speculative targets divide
    by), from the cursor rules (replayssm_trtllm/bench/step_traffic.py): the ratio a step would have at the
    conventional kernel's efficiency, with the record layout of docs/design.md 3 (keys once per key head)."""
    import torch

    from ..bench.step_traffic import (conventional_step_bytes, perdraft_step_bytes, replay_cycle_traffic)
    from ..state.cursors import SPECULATIVE, STANDARD
    B, s_row, rec, io = STEP_BATCH, p.state_bytes(), p.record_bytes(), io_bytes_per_token(p)
    conv = sum(conventional_step_bytes(B, s_row, io))
    print(f"\nper step of one layer, B={B} rows staggered, L={L}, fp32 state, bf16 inputs (bytes / a conventional "
          f"standard step's = the step's time ratio at the conventional kernel's efficiency):")
    if T == 1:
        tr = replay_cycle_traffic(torch.arange(B) % L, L, mode=STANDARD, num_tokens=1, window=L,
                                  state_row_bytes=s_row, record_bytes=rec, io_row_bytes=io)
        print(f"  standard replay step (window-amortized): {tr.total_bytes / conv:.3f} (speedup "
              f"{conv / tr.total_bytes:.3f}x), flushing rows {tr.flush_fraction:.3f}")
        return
    g = torch.Generator().manual_seed(0)
    pd = sum(perdraft_step_bytes(B, s_row, io, T))
    print(f"  per-draft snapshots (conventional verify): {pd / conv:.3f}")
    for name in ("all", "one", "mixed"):
        if name == "mixed":
            accs = [torch.randint(1, T + 1, (B,), generator=g) for _ in range(2 * L)]
        else:
            accs = [torch.full((B,), T if name == "all" else 1)] * (2 * L)
        tr = replay_cycle_traffic(torch.arange(B) % (L + 1), accs, mode=SPECULATIVE, num_tokens=T, window=L,
                                  state_row_bytes=s_row, record_bytes=rec, io_row_bytes=io, passes=4,
                                  timed_passes=3, reset_each_pass=False)
        print(f"  replay verify, {name + '-accepted':15s}: {tr.total_bytes / conv:.3f} (per-draft / replay "
              f"{pd / tr.total_bytes:.2f}x), flushing rows {tr.flush_fraction:.3f}, committed records read per row "
              f"{tr.records_read:.1f}")
