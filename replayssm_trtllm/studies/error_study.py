"""Error propagation of low-precision checkpoints through the recurrence (paper Sec. 3.3, 6, App. C.6, E.4).

A synthetic Mamba-2 layer and a synthetic GDN layer (a few heads at real head sizes) decode N steps from
a full-precision prefill state. Every precision configuration consumes the same inputs; its outputs are
compared with a float64 truth (the exact recurrence) and reported as a relative RMS error over a trailing
window of steps ending at N.

Configurations (L = window, standard decoding, docs/design.md section 3.1 / 4):
  fp32              ReplaySSM with an FP32 checkpoint: the arithmetic floor (fp32 math; GDN ring u in fp16)
  shared-F-sr       one checkpoint in format F written with SR at every flush; non-flush outputs replay from
                    it and the next flush starts from it (its rounding error re-enters the recurrence)
  sep-R-P           read copy R (RTN) for non-flush outputs, recurrence checkpoint P (fp32, or fp16+SR) for
                    flushes; the read copy is never fed back. GDN: the flush re-derives u from the
                    recurrence checkpoint and the cached raw (beta, v) (paper App. B.4)
  step-F-sr         conventional decoding with the state stored in F (SR) after every step (L = 1)

Arithmetic: the configurations compute in float32 (as the kernels do) and cast with the exact codecs of
``replayssm_trtllm.formats``; the truth computes in float64. Non-flush steps are computed output-only
from the read copy and the window's records; only flush steps produce a state (one vectorized window at a
time, paper Eq. 5 / Eq. 14), so long runs stay cheap.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from ..formats import PhiloxKey, decode, encode

F32, F64 = torch.float32, torch.float64


@dataclass(frozen=True)
class Family:
    name: str
    label: str
    dv: int                  # Mamba-2: head_dim P; GDN: value head dim V
    dk: int                  # Mamba-2: ssm_state_size N; GDN: key head dim K
    alpha_range: Tuple[float, float]


FAMILIES: Dict[str, Family] = {
    "mamba2": Family("mamba2", "Mamba-2 (P=64, N=128)", 64, 128, (0.9, 0.9999)),
    "gdn": Family("gdn", "GDN (K=V=128)", 128, 128, (0.9, 0.9995)),
}


@dataclass(frozen=True)
class Precision:
    name: str
    group: str               # 'floor' | 'shared' | 'separate' | 'per-step'
    read: str                # format of the copy non-flush steps read
    rec: str                 # format of the copy flushes read (== read when shared)
    label: str

    @property
    def per_step(self) -> bool:
        return self.group == "per-step"

    @property
    def shared(self) -> bool:
        return self.group in ("floor", "shared", "per-step")


def _cfgs() -> Dict[str, Precision]:
    c = [Precision("fp32", "floor", "fp32", "fp32", "FP32 checkpoint (floor)")]
    for f, lab in (("fp16", "FP16"), ("fp8_e4m3", "FP8"), ("nvfp4", "NVFP4")):
        short = {"fp8_e4m3": "fp8"}.get(f, f)
        c.append(Precision(f"shared-{short}-sr", "shared", f, f, f"shared {lab}+SR"))
    for r, rl in (("nvfp4", "NVFP4"), ("fp8_e4m3", "FP8")):
        short = {"fp8_e4m3": "fp8"}.get(r, r)
        c.append(Precision(f"sep-{short}-fp32", "separate", r, "fp32", f"{rl} read + FP32 rec."))
        c.append(Precision(f"sep-{short}-fp16sr", "separate", r, "fp16", f"{rl} read + FP16+SR rec."))
    for f, lab in (("fp16", "FP16"), ("fp8_e4m3", "FP8"), ("nvfp4", "NVFP4")):
        short = {"fp8_e4m3": "fp8"}.get(f, f)
        c.append(Precision(f"step-{short}-sr", "per-step", f, f, f"per-step {lab}+SR (conventional)"))
    return {p.name: p for p in c}


CONFIGS: Dict[str, Precision] = _cfgs()


@dataclass
class StudyConfig:
    family: str = "mamba2"
    max_steps: int = 4096        # decode steps N after the prefill (multiple of window)
    window: int = 16             # L
    heads: int = 4
    eval_window: int = 256       # trailing steps the RMS error is taken over (fewer when N is smaller)
    first_eval: int = 1024       # first N reported (then 2N, 4N, ... and max_steps)
    prefill: int = 512           # prompt tokens, processed in float64 (the initial checkpoint)
    seed: int = 0
    rng: str = "torch"           # SR words: 'torch' (fast generator) or 'philox' (the kernel contract)
    decay_jitter: float = 0.5    # per-step lognormal sigma of -log(alpha) around the head's centre
    configs: Sequence[str] = tuple(CONFIGS)
    chunk: int = 1024            # inputs are generated chunk by chunk (multiple of window)
    device: str = "cpu"          # torch device the decoding runs on (inputs are drawn on the CPU)
    # Per-head alpha centres to use instead of the family's log-spaced range (one per head), e.g. a model's own
    # (studies/model_decays.py); decay_source says where they came from (reports and JSON carry it).
    alpha_centres: Optional[Sequence[float]] = None
    decay_source: str = "synthetic"

    def validate(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"error_study: family must be one of {sorted(FAMILIES)}; got {self.family!r}")
        if self.window < 2:
            raise ValueError(f"error_study: window must be >= 2; got {self.window}")
        if self.max_steps < self.window or self.max_steps % self.window:
            raise ValueError(f"error_study: max_steps must be a positive multiple of window={self.window}; "
                             f"got {self.max_steps}")
        if self.chunk % self.window:
            raise ValueError(f"error_study: chunk must be a multiple of window={self.window}; got {self.chunk}")
        if not 1 <= self.eval_window <= self.max_steps:
            raise ValueError(f"error_study: eval_window must be in [1, max_steps={self.max_steps}]; "
                             f"got {self.eval_window}")
        if self.first_eval < 1:
            raise ValueError(f"error_study: first_eval must be >= 1; got {self.first_eval}")
        if self.heads < 1:
            raise ValueError(f"error_study: heads must be >= 1; got {self.heads}")
        if self.rng not in ("torch", "philox"):
            raise ValueError(f"error_study: rng must be 'torch' or 'philox'; got {self.rng!r}")
        bad = [c for c in self.configs if c not in CONFIGS]
        if bad:
            raise ValueError(f"error_study: unknown configs {bad}; choose from {list(CONFIGS)}")
        if self.alpha_centres is not None:
            a = list(self.alpha_centres)
            if len(a) != self.heads or not all(0.0 < float(x) < 1.0 for x in a):
                raise ValueError(f"error_study: alpha_centres must be {self.heads} values (one per head) in (0, 1); "
                                 f"got {a}")


@dataclass
class StudyResult:
    family: str
    config: StudyConfig
    eval_steps: List[int]
    errors: Dict[str, List[float]]            # config -> relative RMS error at each eval step
    head_errors: Dict[str, List[List[float]]]  # config -> [eval step][head]
    head_alpha: List[float]                    # mean per-head decay actually drawn
    seconds: float = 0.0
    notes: List[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- inputs
def head_decay_centres(fam: Family, heads: int) -> torch.Tensor:
    """Per-head centre of alpha: 1 - alpha log-spaced from 1 - alpha_min to 1 - alpha_max (float64 [H])."""
    lo, hi = fam.alpha_range
    if heads == 1:
        return torch.tensor([math.sqrt(lo * hi)], dtype=F64)
    t = torch.linspace(0, 1, heads, dtype=F64)
    return 1 - torch.exp(math.log(1 - lo) + t * (math.log(1 - hi) - math.log(1 - lo)))


def study_centres(fam: Family, cfg: "StudyConfig") -> torch.Tensor:
    """The run's per-head alpha centres: ``cfg.alpha_centres`` when given, else :func:`head_decay_centres`."""
    if cfg.alpha_centres is not None:
        return torch.tensor([float(a) for a in cfg.alpha_centres], dtype=F64)
    return head_decay_centres(fam, cfg.heads)


def study_alpha_range(fam: Family, cfg: "StudyConfig") -> Tuple[float, float]:
    """The clip range of the jittered per-step alpha: the family's, widened to hold every given centre."""
    lo, hi = fam.alpha_range
    if cfg.alpha_centres is None:
        return lo, hi
    a = [float(x) for x in cfg.alpha_centres]
    return min(lo, min(a)), max(hi, max(a))


def _bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(F32)


def _l2norm(t: torch.Tensor) -> torch.Tensor:
    return t / torch.sqrt((t * t).sum(-1, keepdim=True) + 1e-6)


def make_inputs(fam: Family, cfg: StudyConfig, chunk_index: int, steps: int) -> Dict[str, torch.Tensor]:
    """Deterministic synthetic inputs for ``steps`` tokens (fp32, as the kernels see them).

    Activations are drawn N(0, 1) and rounded to bf16. Decay: -log(alpha_t) = lambda_h * exp(s z - s^2/2),
    z ~ N(0, 1), s = decay_jitter, lambda_h = -log(centre_h); alpha_t is clipped to the family's range (widened
    to hold given centres, :func:`study_alpha_range`).
    Mamba-2 (A = -1): dt = -log(alpha), the record vector is dt * x, key B and query C are shared by the
    heads (one group). GDN: one key head per value head, k and q l2-normalized (q also scaled by K^-1/2),
    beta = sigmoid(N(0, 1)).
    """
    g = torch.Generator().manual_seed(1_000_003 * cfg.seed + 7919 * (1 + list(FAMILIES).index(fam.name))
                                      + chunk_index + 17)
    H, dv, dk = cfg.heads, fam.dv, fam.dk
    lam_h = -torch.log(study_centres(fam, cfg))
    s = cfg.decay_jitter
    z = torch.randn(steps, H, generator=g, dtype=F64)
    lam = lam_h * torch.exp(s * z - s * s / 2)
    lo, hi = study_alpha_range(fam, cfg)
    alpha = torch.exp(-lam).clamp(lo, hi).to(F32)
    la = torch.log(alpha)                                   # fp32 log-decay (the ring's record)
    if fam.name == "mamba2":
        x = _bf16(torch.randn(steps, H, dv, generator=g))
        B = _bf16(torch.randn(steps, dk, generator=g))
        C = _bf16(torch.randn(steps, dk, generator=g))
        dt = -la
        return {"la": la, "v": dt[..., None] * x, "k": B, "q": C}
    k = _l2norm(_bf16(torch.randn(steps, H, dk, generator=g)))
    q = _l2norm(_bf16(torch.randn(steps, H, dk, generator=g))) * dk ** -0.5
    v = _bf16(torch.randn(steps, H, dv, generator=g))
    beta = torch.sigmoid(torch.randn(steps, H, generator=g))
    return {"la": la, "v": v, "k": k, "q": q, "beta": beta}


# ------------------------------------------------------------------------------------------- windows
def _decay_weights(la: torch.Tensor):
    """la [L, H] log-decays -> W [H, t, i] = gamma_{i+1:t} for i <= t (else 0), gam [H, L] = gamma_{1:t}."""
    L = la.shape[0]
    c = torch.cumsum(la, 0).T                               # [H, L]
    tril = torch.ones(L, L, dtype=torch.bool, device=la.device).tril()
    diff = (c[:, :, None] - c[:, None, :]).masked_fill(~tril, 0.0)
    W = torch.exp(diff).masked_fill(~tril, 0.0)
    return W, torch.exp(c)


def mamba2_window(R: torch.Tensor, Sr: torch.Tensor, w: Dict[str, torch.Tensor]):
    """One standard window of L steps (flush at the last step).

    R, Sr [Cb, H, P, N]: read copy (non-flush outputs) and recurrence checkpoint (flush); w: la [L, H],
    v = dt*x [L, H, P], k = B [L, N], q = C [L, N] in R's dtype.
    Returns y [Cb, H, P, L] and the flushed state [Cb, H, P, N] (before any cast).
    """
    la, v, B, C = w["la"], w["v"], w["k"], w["q"]
    W, gam = _decay_weights(la)
    BC = C @ B.T                                            # [t, j] = C_t . B_j
    y_ring = torch.einsum("jhp,htj->hpt", v, W * BC)         # sum_{j<=t} gamma_{j+1:t} (B_j.C_t) v_j
    y = gam[None, :, None, :] * (R @ C.T) + y_ring
    delta = torch.einsum("jhp,hj,jn->hpn", v, W[:, -1, :], B)
    S_new = gam[:, -1][None, :, None, None] * Sr + delta
    y[..., -1] = S_new @ C[-1]
    return y, S_new


def _gdn_corrections(S0: torch.Tensor, A: torch.Tensor, gam: torch.Tensor, w, u_round):
    """u_t = beta_t (v_t - alpha_t S_{t-1} k_t) along the window, S_{t-1} replayed from S0 and u_{<t}.

    A [H, t, i] = gamma_{i+1:t} (k_t . k_i). u_round: the ring's storage dtype (u is stored, then the
    stored value is what later steps replay) or None (formed on the fly in S0's precision).
    """
    k, v, beta = w["k"], w["v"], w["beta"]
    L = k.shape[0]
    Sk = torch.einsum("chvk,thk->chvt", S0, k)
    U = torch.empty_like(Sk)
    for t in range(L):
        pred = gam[:, t][None, :, None] * Sk[..., t]
        if t:
            pred = pred + torch.einsum("chvi,hi->chv", U[..., :t], A[:, t, :t])
        u = beta[t][None, :, None] * (v[t][None] - pred)
        if u_round is not None:
            u = u.to(u_round).to(S0.dtype)
        U[..., t] = u
    return U


def gdn_window(R: torch.Tensor, Sr: torch.Tensor, w: Dict[str, torch.Tensor], rederive: torch.Tensor,
               u_round: Optional[torch.dtype]):
    """One standard GDN window of L steps (flush at the last step).

    Non-flush steps compute u_t from the read copy R (stored as ``u_round``) and output o_t = S_t q_t
    output-only. The flush folds the cached u into Sr, except for the configurations in ``rederive``
    (index tensor), which re-derive u from Sr in full precision (paper App. B.4).
    Returns o [Cb, H, V, L] and the flushed state [Cb, H, V, K].
    """
    la, k, q = w["la"], w["k"], w["q"]
    W, gam = _decay_weights(la)
    KK = torch.einsum("thk,ihk->hti", k, k)
    KQ = torch.einsum("thk,ihk->hti", q, k)
    A = W * KK
    U = _gdn_corrections(R, A, gam, w, u_round)
    o = gam[None, :, None, :] * torch.einsum("chvk,thk->chvt", R, q) + torch.einsum("chvi,hti->chvt", U, W * KQ)
    if rederive.numel():
        U = U.clone()
        U[rederive] = _gdn_corrections(Sr[rederive], A, gam, w, None)
    S_new = gam[:, -1][None, :, None, None] * Sr + torch.einsum("chvj,hj,jhk->chvk", U, W[:, -1, :], k)
    o[..., -1] = torch.einsum("chvk,hk->chv", S_new, q[-1])
    return o, S_new


def _step(fam: str, S: torch.Tensor, w: Dict[str, torch.Tensor], t: int):
    """One conventional step on states S [Cb, H, dv, dk]: returns (output [Cb, H, dv], new state)."""
    alpha = torch.exp(w["la"][t])[None, :, None, None]
    if fam == "mamba2":
        S_new = alpha * S + w["v"][t][None, :, :, None] * w["k"][t][None, None, None, :]
        return S_new @ w["q"][t], S_new
    k = w["k"][t]
    Sk = torch.einsum("chvk,hk->chv", S, k)
    u = w["beta"][t][None, :, None] * (w["v"][t][None] - alpha[..., 0] * Sk)
    S_new = alpha * S + u[..., None] * k[None, :, None, :]
    return torch.einsum("chvk,hk->chv", S_new, w["q"][t]), S_new


# ------------------------------------------------------------------------------------------- casts
class _Caster:
    """Casts float32 states with the exact codecs; SR words from torch's generator or from Philox."""

    def __init__(self, cfg: StudyConfig, family_index: int):
        self.rng = cfg.rng
        self.device = torch.device(cfg.device)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed * 7 + 3 + family_index)
        self.seed = cfg.seed
        self.layer = family_index
        self.flushes: Dict[int, int] = {}

    def __call__(self, x: torch.Tensor, fmt: str, rounding: str, slot: int) -> torch.Tensor:
        if fmt == "fp32":
            return x.clone()
        if rounding == "rtn":
            return decode(encode(x, fmt))
        n = self.flushes.get(slot, 0)
        self.flushes[slot] = n + 1
        if self.rng == "philox":
            return decode(encode(x, fmt, "sr", key=PhiloxKey(self.seed, slot, self.layer, n)))
        words = torch.randint(0, 2**32, x.shape, generator=self.gen, dtype=torch.int64, device=x.device)
        return decode(encode(x, fmt, "sr", words=words))


# ------------------------------------------------------------------------------------------- driver
def eval_points(max_steps: int, eval_window: int, first_eval: int = 1024) -> List[int]:
    """N = first_eval, 2 first_eval, ... (powers of two) up to max_steps, max_steps itself included; runs shorter
    than first_eval start at eval_window."""
    first = first_eval if max_steps >= first_eval else eval_window
    pts, n = [], 1
    while n <= max_steps:
        if n >= first:
            pts.append(n)
        n *= 2
    if not pts or pts[-1] != max_steps:
        pts.append(max_steps)
    return pts


def run_study(cfg: StudyConfig, progress: Optional[Callable[[str], None]] = None) -> StudyResult:
    """Decode ``cfg.max_steps`` steps of one family under every configuration in ``cfg.configs``."""
    cfg.validate()
    fam = FAMILIES[cfg.family]
    fidx = list(FAMILIES).index(fam.name)
    H, dv, dk, L, N = cfg.heads, fam.dv, fam.dk, cfg.window, cfg.max_steps
    names = list(cfg.configs)
    win = [n for n in names if not CONFIGS[n].per_step]
    stp = [n for n in names if CONFIGS[n].per_step]
    dev = torch.device(cfg.device)
    cast = _Caster(cfg, fidx)
    slot = {n: i for i, n in enumerate(names)}
    is_gdn = fam.name == "gdn"
    rederive = torch.tensor([i for i, n in enumerate(win) if is_gdn and not CONFIGS[n].shared], dtype=torch.long,
                            device=dev)
    no_rederive = torch.tensor([], dtype=torch.long, device=dev)
    t0 = time.time()

    def window_fn(R, Sr, w, dtype):
        w = {k: v.to(dtype) for k, v in w.items()}
        if is_gdn:
            truth = dtype == F64
            return gdn_window(R, Sr, w, rederive if not truth else no_rederive,
                              None if truth else torch.float16)
        return mamba2_window(R, Sr, w)

    # prefill in float64: the exact initial state
    S = torch.zeros(1, H, dv, dk, dtype=F64, device=dev)
    if cfg.prefill:
        pre = {k: v.to(dev) for k, v in make_inputs(fam, cfg, -1, cfg.prefill).items()}
        for s in range(0, cfg.prefill - cfg.prefill % L, L):
            _, S = window_fn(S, S, {k: v[s:s + L] for k, v in pre.items()}, F64)
        for s in range(cfg.prefill - cfg.prefill % L, cfg.prefill):
            _, S = _step(fam.name, S, {k: v.to(F64) for k, v in pre.items()}, s)
    S0 = S[0].to(F32)

    def init(n):
        p = CONFIGS[n]
        if p.shared:
            q = cast(S0, p.rec, "sr", slot[n])
            return q, q
        return cast(S0, p.read, "rtn", slot[n]), cast(S0, p.rec, "sr", slot[n])

    first = {n: init(n) for n in names}
    Rw = torch.stack([first[n][0] for n in win]) if win else None
    Srw = torch.stack([first[n][1] for n in win]) if win else None
    Sp = torch.stack([first[n][0] for n in stp]) if stp else None

    err2 = torch.zeros(len(names), N, H, dtype=F64, device=dev)
    ref2 = torch.zeros(N, H, dtype=F64, device=dev)
    stp_slots = torch.tensor([slot[n] for n in stp], dtype=torch.long, device=dev)
    done = 0
    while done < N:
        T = min(cfg.chunk, N - done)
        inp = {k: v.to(dev) for k, v in make_inputs(fam, cfg, done // cfg.chunk, T).items()}
        y_true = torch.empty(T, H, dv, dtype=F64, device=dev)
        for s in range(0, T, L):
            w = {k: v[s:s + L] for k, v in inp.items()}
            yt, S = window_fn(S, S, w, F64)
            y_true[s:s + L] = yt[0].permute(2, 0, 1)
            if win:
                yc, S_new = window_fn(Rw, Srw, w, F32)
                e = (yc.to(F64) - yt).pow(2).sum(2).permute(0, 2, 1)        # [Cw, L, H]
                for i, n in enumerate(win):
                    err2[slot[n], done + s:done + s + L] = e[i]
                    p = CONFIGS[n]
                    if p.shared:
                        Rw[i] = Srw[i] = cast(S_new[i], p.rec, "sr", slot[n])
                    else:
                        Rw[i] = cast(S_new[i], p.read, "rtn", slot[n])
                        Srw[i] = cast(S_new[i], p.rec, "sr", slot[n])
        ref2[done:done + T] = y_true.pow(2).sum(-1)
        if stp:
            ys = torch.empty(len(stp), T, H, dv, dtype=F32, device=dev)
            for t in range(T):
                ys[:, t], S_new = _step(fam.name, Sp, inp, t)
                for i, n in enumerate(stp):
                    Sp[i] = cast(S_new[i], CONFIGS[n].rec, "sr", slot[n])
            err2[stp_slots, done:done + T] = (ys.to(F64) - y_true).pow(2).sum(-1)
        done += T
        if progress:
            el = time.time() - t0
            progress(f"error-study {fam.name}: step {done}/{N} ({100 * done / N:.0f}%), {el:.0f} s elapsed, "
                     f"~{el / done * (N - done):.0f} s left")

    pts = eval_points(N, cfg.eval_window, cfg.first_eval)
    errors: Dict[str, List[float]] = {}
    head_errors: Dict[str, List[List[float]]] = {}
    err2, ref2 = err2.cpu(), ref2.cpu()
    for n in names:
        errors[n], head_errors[n] = [], []
        for p in pts:
            lo = max(0, p - cfg.eval_window)
            rel_h = (err2[slot[n], lo:p].sum(0) / ref2[lo:p].sum(0)).sqrt()
            head_errors[n].append(rel_h.tolist())
            errors[n].append(float(rel_h.pow(2).mean().sqrt()))
    alpha_mean = torch.exp(make_inputs(fam, cfg, 0, min(N, cfg.chunk))["la"].to(F64)).mean(0).tolist()
    return StudyResult(fam.name, cfg, pts, errors, head_errors, alpha_mean, time.time() - t0)


# ------------------------------------------------------------------------------------------- results
def merge_results(results: Sequence[StudyResult]) -> List[StudyResult]:
    """Merge runs of the same family that differ only in their configurations (one result per family,
    configurations in CONFIGS order). Raises ValueError when merged runs disagree on anything else."""
    out: Dict[str, StudyResult] = {}
    for r in results:
        if r.family not in out:
            out[r.family] = StudyResult(r.family, r.config, list(r.eval_steps), {}, {}, list(r.head_alpha),
                                        r.seconds, list(r.notes))
        m = out[r.family]
        mine = {k: v for k, v in vars(m.config).items() if k != "configs"}
        theirs = {k: v for k, v in vars(r.config).items() if k != "configs"}
        if mine != theirs or m.eval_steps != r.eval_steps:
            raise ValueError(f"merge_results: runs of {r.family} differ in settings: {mine} vs {theirs}")
        m.errors.update(r.errors)
        m.head_errors.update(r.head_errors)
        m.seconds = max(m.seconds, r.seconds)
    for m in out.values():
        order = [c for c in CONFIGS if c in m.errors]
        m.errors = {c: m.errors[c] for c in order}
        m.head_errors = {c: m.head_errors[c] for c in order}
        m.config = StudyConfig(**{**vars(m.config), "configs": tuple(order)})
    return [out[f] for f in FAMILIES if f in out]


def result_to_dict(r: StudyResult) -> dict:
    d = {k: v for k, v in vars(r).items() if k != "config"}
    d["config"] = {**vars(r.config), "configs": list(r.config.configs)}
    if r.config.alpha_centres is not None:
        d["config"]["alpha_centres"] = [float(a) for a in r.config.alpha_centres]
    return d


def result_from_dict(d: dict) -> StudyResult:
    c = d["config"]
    centres = c.get("alpha_centres")
    cfg = StudyConfig(**{**c, "configs": tuple(c["configs"]),
                         "alpha_centres": None if centres is None else tuple(float(a) for a in centres)})
    return StudyResult(d["family"], cfg, list(d["eval_steps"]), dict(d["errors"]), dict(d["head_errors"]),
                       list(d["head_alpha"]), float(d.get("seconds", 0.0)), list(d.get("notes", [])))


# ------------------------------------------------------------------------------------------- report
def check_claims(res: StudyResult) -> List[Tuple[str, str, bool]]:
    """The paper's qualitative claims, each as (claim, measured value, holds?). Missing configs are skipped."""
    e, pts = res.errors, res.eval_steps
    out = []
    first = next((i for i, p in enumerate(pts) if p >= 1024), 0)   # "flat from N = 1K" when 1K was measured
    for n in [c for c in e if CONFIGS[c].group == "shared"]:
        r = e[n][-1] / e[n][first]
        out.append((f"{n} grows with N", f"x{r:.2f} from N={pts[first]} to {pts[-1]}", r > 1.2))
    for n in [c for c in e if CONFIGS[c].group == "separate"]:
        r = e[n][-1] / e[n][first]
        out.append((f"{n} flat (<= 1.2x)", f"x{r:.2f} from N={pts[first]} to {pts[-1]}", r <= 1.2))
    if "sep-nvfp4-fp32" in e and "shared-nvfp4-sr" in e:
        r = e["shared-nvfp4-sr"][-1] / e["sep-nvfp4-fp32"][-1]
        out.append(("sep-nvfp4-fp32 >= 10x below shared-nvfp4-sr at the largest N", f"{r:.1f}x", r >= 10))
    for rd in ("nvfp4", "fp8"):
        a, b = f"sep-{rd}-fp16sr", f"sep-{rd}-fp32"
        if a in e and b in e:
            rs = [x / y for x, y in zip(e[a], e[b])]
            out.append((f"{a} within 1.25x of {b} at every N", f"max ratio {max(rs):.3f}", max(rs) <= 1.25))
    for f in ("fp16", "fp8", "nvfp4"):
        a, b = f"step-{f}-sr", f"shared-{f}-sr"
        if a in e and b in e:
            rs = [x / y for x, y in zip(e[a], e[b])]
            out.append((f"{a} worse than {b} at every N", f"min ratio {min(rs):.2f}", min(rs) > 1))
    return out


def _fmt_err(x: float) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.2e}"


def _n_label(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else str(n)


def markdown_report(results: Sequence[StudyResult]) -> str:
    """One table per family (relative RMS output error vs N) and the claim checks."""
    lines = []
    for res in results:
        fam = FAMILIES[res.family]
        cols = [_n_label(p) for p in res.eval_steps]
        lines.append(f"#### {fam.label}: relative output error vs N (L={res.config.window}, "
                     f"{res.config.heads} heads, head alpha centres "
                     f"{', '.join(f'{a:.4g}' for a in study_centres(fam, res.config).tolist())}"
                     f"{'' if res.config.decay_source == 'synthetic' else ' from ' + res.config.decay_source})")
        lines.append("")
        lines.append("| config | " + " | ".join(cols) + " |")
        lines.append("|---|" + "---:|" * len(cols))
        for n, v in res.errors.items():
            lines.append(f"| {CONFIGS[n].label} (`{n}`) | " + " | ".join(_fmt_err(x) for x in v) + " |")
        lines.append("")
        lines.append("| claim | measured | holds |")
        lines.append("|---|---|---|")
        for c, m, ok in check_claims(res):
            lines.append(f"| {c} | {m} | {'yes' if ok else '**no**'} |")
        lines.append("")
        lines.append(f"({res.seconds:.0f} s on {res.config.device}, rng {res.config.rng}, seed {res.config.seed}, "
                     f"trailing window {res.config.eval_window} steps, prefill {res.config.prefill})")
        lines.append("")
    return "\n".join(lines)


_STYLE = {"floor": ("0.4", "-", "o"), "shared": (None, "-", "s"), "separate": (None, "--", "^"),
          "per-step": (None, ":", "x")}
_COLOR = {"fp16": "tab:blue", "fp8_e4m3": "tab:orange", "nvfp4": "tab:red"}


def plot_results(results: Sequence[StudyResult], path: str) -> None:
    """Log-log PNG: relative output error vs N, one panel per family."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6.5 * len(results), 6.0), squeeze=False)
    for ax, res in zip(axes[0], results):
        for n, v in res.errors.items():
            p = CONFIGS[n]
            color, ls, mk = _STYLE[p.group]
            if color is None:
                color = _COLOR[p.read]
            if p.group == "separate" and p.rec == "fp16":
                ls, mk = "-.", "v"
            ax.plot(res.eval_steps, [x if math.isfinite(x) else float("nan") for x in v], ls=ls, marker=mk,
                    color=color, label=p.label, ms=4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("generation length N (decode steps)")
        ax.set_ylabel(f"relative RMS output error (last {res.config.eval_window} steps)")
        ax.set_title(f"{FAMILIES[res.family].label}, L={res.config.window}")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
