"""`replayssm-trtllm traffic`: the memory-traffic model of the paper's Appendix C for a model preset."""
from __future__ import annotations

from ..presets import PRESETS, get_preset
from ..traffic import model_traffic, optimal_window, record_bytes_per_head, window_traffic


def add_arguments(p):
    p.add_argument("--model", required=True, choices=sorted(PRESETS), help="model preset")
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


def run(args) -> int:
    p = get_preset(args.model)
    T = args.verify
    a = float(T) if args.acceptance is None else args.acceptance
    if T < 1 or not (1.0 <= a <= T):
        raise SystemExit(f"traffic: need T >= 1 and 1 <= a <= T; got T={T}, a={a}")
    if args.window < 1:
        raise SystemExit(f"traffic: --window must be >= 1; got {args.window}")
    hpk = p.heads // p.key_heads if args.shared_keys else 1
    r = record_bytes_per_head(p.dv, p.dk, hpk)
    print(f"model {p.name} ({p.hf_id}): {p.family}, {p.num_ssm_layers} SSM layers x {p.heads} heads, "
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
    return 0
