"""Paper Algorithms 1-6 over ONE sequence, literally as in the algorithm boxes (float64).

The generic notation of :mod:`replay` is used: a Mamba-2 record is ``(alpha, v, k)`` with
``v = dt x``, ``k = B``, query ``q = C`` (the ``D x`` skip and the ``silu(z)`` gate are applied by
the caller); a GDN record is ``(alpha, u, k)`` (Alg. 6: ``(alpha, beta, u, v, k)``) with ``k``, ``q``
already normalized and scaled. Every tensor may carry leading dims ``...`` (e.g. heads) shared by
the checkpoint ``[..., dv, dk]``: ``alpha`` ``[...]``, ``v``/``u`` ``[..., dv]``, ``k``/``q`` ``[..., dk]``.

:class:`ReplaySequence` holds the checkpoint(s), a ring of capacity ``C = L + max_verify`` and the
ring origin and committed length ``h``; committed record j (1-based) lives at ring index
``(origin + j - 1) % C``. The boxes drop the committed prefix inside the step ("Drop B_{1:h};
h <- 0") and advance ``h`` later in :func:`commit_accepted`; the batched caches of
:mod:`caches` instead leave the cursors alone during the step and apply both in one commit
(docs/design.md 3.2). Both give the same cursors after the commit.

Checkpoint formats: ``quant_hp(S)`` / ``quant_lp(S)`` map a float64 state to the dequantized
float64 value of its stored format (None = identity). Algorithms 1, 2, 4, 5 keep one checkpoint
and store ``quant_hp(S)`` on a flush (identity by default, so ``S_ckpt <- S`` as in the boxes).
Algorithms 3 and 6 keep both and read the read copy ``ckpt_lp`` on non-flush steps; with
``read_copy=False`` no read copy exists and every step reads ``ckpt`` (the run "without the lp copy").
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import torch

from ._validate import apply_quant, describe, expect_int, expect_tensor, f64
from .replay import gdn_draft_corrections, output_only, replay

Quantizer = Optional[Callable[[torch.Tensor], torch.Tensor]]


class ReplaySequence:
    """Replay state of one sequence: checkpoint(s), ring of records, origin and committed length h.

    Args:
        ckpt: ``[..., dv, dk]`` initial checkpoint (prefill state).
        window: L >= 1.
        max_verify: T_max >= 1 (ring capacity ``C = L + T_max``); speculative steps need T_max <= L.
        quant_hp, quant_lp: checkpoint storage formats (None = identity).
        read_copy: keep a separate read copy ``ckpt_lp = quant_lp(S)`` (Alg. 3 / 6); when False
            ``ckpt_lp`` is None and non-flush steps read ``ckpt``.
    Attributes:
        ckpt (high-precision / only checkpoint), ckpt_lp, ring (list of record dicts or None),
        origin, h, window, capacity, max_verify, pending_T (T of a speculative step awaiting commit).
    """

    def __init__(self, ckpt: torch.Tensor, window: int, max_verify: int = 1, quant_hp: Quantizer = None,
                 quant_lp: Quantizer = None, read_copy: bool = True):
        op = "ReplaySequence"
        if not isinstance(ckpt, torch.Tensor) or ckpt.dim() < 2 or not ckpt.is_floating_point():
            raise ValueError(f"{op}: 'ckpt' must be a floating-point tensor of shape [..., dv, dk]; "
                             f"got {describe(ckpt)}")
        self.window = expect_int(op, "window", window, 1, None)
        self.max_verify = expect_int(op, "max_verify", max_verify, 1, None)
        self.capacity = self.window + self.max_verify
        self.quant_hp, self.quant_lp = quant_hp, quant_lp
        S = f64(ckpt)
        self.lead = list(S.shape[:-2])
        self.dv, self.dk = int(S.shape[-2]), int(S.shape[-1])
        self.ckpt = apply_quant(op, "quant_hp", quant_hp, S)
        self.ckpt_lp = apply_quant(op, "quant_lp", quant_lp, S) if read_copy else None
        self.ring: List[Optional[Dict[str, torch.Tensor]]] = [None] * self.capacity
        self.origin = 0
        self.h = 0
        self.pending_T: Optional[int] = None
        self.num_flushes = 0

    # ---- ring helpers -------------------------------------------------------------------------
    def ring_index(self, j: int) -> int:
        """Ring index of record j (0-based: committed 0..h-1 first, then drafts)."""
        return (self.origin + j) % self.capacity

    def write(self, j: int, rec: Dict[str, torch.Tensor]) -> None:
        if j < self.h:
            raise RuntimeError(f"ReplaySequence: write of record {j} would overwrite a committed record "
                               f"(origin={self.origin}, h={self.h}, C={self.capacity})")
        self.ring[self.ring_index(j)] = rec

    def records(self, start: int, stop: int) -> List[Dict[str, torch.Tensor]]:
        out = []
        for j in range(start, stop):
            r = self.ring[self.ring_index(j)]
            if r is None:
                raise RuntimeError(f"ReplaySequence: record {j} was never written")
            out.append(r)
        return out

    def stack(self, recs: List[Dict[str, torch.Tensor]], field: str) -> torch.Tensor:
        """Stack a field over records: scalars -> ``[..., n]``, vectors -> ``[..., n, d]``."""
        if not recs:
            width = {"alpha": None, "beta": None, "k": self.dk}.get(field, self.dv)
            shape = self.lead + ([0] if width is None else [0, width])
            return torch.zeros(shape, dtype=torch.float64)
        vals = [r[field] for r in recs]
        scalar = vals[0].dim() == len(self.lead)
        return torch.stack(vals, dim=-1 if scalar else -2)

    def drop_committed(self) -> None:
        """``Drop B_{1:h}; h <- 0``: advance the ring origin past the committed records."""
        self.origin = (self.origin + self.h) % self.capacity
        self.h = 0

    def committed_state(self, field: str = "v") -> torch.Tensor:
        """``Replay(ckpt, B_{1:h})`` with the cached values (``field`` = "v" for Mamba-2, "u" for GDN)."""
        recs = self.records(0, self.h)
        return replay(self.ckpt, self.stack(recs, "alpha"), self.stack(recs, field), self.stack(recs, "k"))


def _check_token(op: str, seq: ReplaySequence, **tensors) -> Dict[str, torch.Tensor]:
    """One token: alpha/beta ``[...]``, v ``[..., dv]``, k/q ``[..., dk]``."""
    sz = {"dv": seq.dv, "dk": seq.dk}
    dims = {"alpha": [], "beta": [], "v": ["dv"], "k": ["dk"], "q": ["dk"]}
    out = {}
    for name, t in tensors.items():
        expect_tensor(op, name, t, seq.lead + dims[name], sz)
        out[name] = f64(t)
    return out


def _check_tokens(op: str, seq: ReplaySequence, **tensors) -> (int, Dict[str, torch.Tensor]):
    """T tokens: alphas/betas ``[..., T]``, vs ``[..., T, dv]``, ks/qs ``[..., T, dk]``."""
    sz = {"dv": seq.dv, "dk": seq.dk}
    dims = {"alphas": ["T"], "betas": ["T"], "vs": ["T", "dv"], "ks": ["T", "dk"], "qs": ["T", "dk"]}
    out = {}
    for name, t in tensors.items():
        expect_tensor(op, name, t, seq.lead + dims[name], sz)
        out[name] = f64(t)
    T = sz["T"]
    if not 1 <= T <= seq.max_verify or T > seq.window:
        raise ValueError(f"{op}: number of tokens T must be in [1, min(max_verify, window)] = "
                         f"[1, {min(seq.max_verify, seq.window)}]; got {T}")
    if seq.pending_T is not None:
        raise RuntimeError(f"{op}: previous speculative step (T={seq.pending_T}) was never committed; "
                           f"call commit_accepted first")
    if not 0 <= seq.h <= seq.window:
        raise RuntimeError(f"{op}: invariant 0 <= h <= L violated (h={seq.h}, L={seq.window})")
    return T, out


def _check_standard(op: str, seq: ReplaySequence) -> None:
    if seq.pending_T is not None:
        raise RuntimeError(f"{op}: a speculative step (T={seq.pending_T}) awaits commit_accepted")
    if not 0 <= seq.h < seq.window:
        raise RuntimeError(f"{op}: invariant 0 <= h < L violated (h={seq.h}, L={seq.window})")


def _split(x: torch.Tensor, s: int, scalar: bool) -> torch.Tensor:
    return x[..., s] if scalar else x[..., s, :]


def commit_accepted(seq: ReplaySequence, a: int) -> None:
    """``Later, given accepted length a: h <- h + a`` (Alg. 2, 3, 5, 6), with ``1 <= a <= T``."""
    if seq.pending_T is None:
        raise RuntimeError("commit_accepted: no speculative step awaits a commit")
    a = expect_int("commit_accepted", "a", a, 1, seq.pending_T)
    seq.h += a
    seq.pending_T = None


# ---- Mamba-2 ------------------------------------------------------------------------------------

def alg1_mamba2_standard(seq: ReplaySequence, alpha: torch.Tensor, v: torch.Tensor, k: torch.Tensor,
                         q: torch.Tensor) -> torch.Tensor:
    """Algorithm 1, standard decoding step. Returns ``o`` ``[..., dv]``.

    ::

        B_{h+1} <- (alpha, v, k); h <- h + 1
        S <- Replay(S_ckpt, B_{1:h}); o <- S q
        if h = L: S_ckpt <- S (stored as quant_hp(S)); B <- {}; h <- 0
    """
    op = "alg1_mamba2_standard"
    _check_standard(op, seq)
    x = _check_token(op, seq, alpha=alpha, v=v, k=k, q=q)
    seq.write(seq.h, {"alpha": x["alpha"], "v": x["v"], "k": x["k"]})
    seq.h += 1
    recs = seq.records(0, seq.h)
    S = replay(seq.ckpt, seq.stack(recs, "alpha"), seq.stack(recs, "v"), seq.stack(recs, "k"))
    o = torch.einsum("...vk,...k->...v", S, x["q"])
    if seq.h == seq.window:
        seq.ckpt = apply_quant(op, "quant_hp", seq.quant_hp, S)
        seq.drop_committed()
        seq.num_flushes += 1
    return o


def _mamba2_speculative(op: str, seq: ReplaySequence, alphas, vs, ks, qs, two_precision: bool) -> torch.Tensor:
    T, x = _check_tokens(op, seq, alphas=alphas, vs=vs, ks=ks, qs=qs)
    h = seq.h
    for s in range(T):                                              # B_{h+1:h+T} <- X (h unchanged)
        seq.write(h + s, {"alpha": x["alphas"][..., s], "v": x["vs"][..., s, :], "k": x["ks"][..., s, :]})
    flush = h + T > seq.window
    if two_precision and not flush and seq.ckpt_lp is not None:    # pi <- HP if h + T > L else LP
        S = seq.ckpt_lp
    else:
        S = seq.ckpt
    recs = seq.records(0, h + T)
    O = output_only(S, seq.stack(recs, "alpha"), seq.stack(recs, "v"), seq.stack(recs, "k"), x["qs"], h)
    if flush:                                                       # flush committed records only
        S = replay(S, seq.stack(recs[:h], "alpha"), seq.stack(recs[:h], "v"), seq.stack(recs[:h], "k"))
        seq.ckpt = apply_quant(op, "quant_hp", seq.quant_hp, S)
        if two_precision and seq.ckpt_lp is not None:
            seq.ckpt_lp = apply_quant(op, "quant_lp", seq.quant_lp, S)
        seq.drop_committed()                                        # keep B_{h+1:h+T}
        seq.num_flushes += 1
    seq.pending_T = T
    return O


def alg2_mamba2_speculative(seq: ReplaySequence, alphas: torch.Tensor, vs: torch.Tensor, ks: torch.Tensor,
                            qs: torch.Tensor) -> torch.Tensor:
    """Algorithm 2, speculative decoding step over T drafts. Returns ``O`` ``[..., T, dv]``.

    Args: alphas ``[..., T]``, vs ``[..., T, dv]``, ks/qs ``[..., T, dk]``. Then call
    :func:`commit_accepted` with the accepted count a.
    ::

        B_{h+1:h+T} <- X                      (h unchanged; ring capacity L + T_max)
        S <- S_ckpt; O <- OutputOnly(S, B_{1:h+T}, Q)
        if h + T > L: S <- Replay(S, B_{1:h}); S_ckpt <- S; drop B_{1:h}; h <- 0
        later: h <- h + a
    """
    return _mamba2_speculative("alg2_mamba2_speculative", seq, alphas, vs, ks, qs, two_precision=False)


def alg3_mamba2_two_precision(seq: ReplaySequence, alphas: torch.Tensor, vs: torch.Tensor, ks: torch.Tensor,
                              qs: torch.Tensor) -> torch.Tensor:
    """Algorithm 3, two-precision speculative step. Same arguments as :func:`alg2_mamba2_speculative`.

    ::

        B_{h+1:h+T} <- X
        pi <- HP if h + T > L else LP; S <- S_ckpt^pi
        O <- OutputOnly(S, B_{1:h+T}, Q)
        if h + T > L: S <- Replay(S, B_{1:h}); S_ckpt^HP <- Q_HP(S); S_ckpt^LP <- Q_LP(S);
                      drop B_{1:h}; h <- 0
        later: h <- h + a

    The read copy never enters the recurrence: flushes replay raw inputs from ``S_ckpt^HP``.
    """
    return _mamba2_speculative("alg3_mamba2_two_precision", seq, alphas, vs, ks, qs, two_precision=True)


# ---- GDN ----------------------------------------------------------------------------------------

def alg4_gdn_standard(seq: ReplaySequence, alpha: torch.Tensor, beta: torch.Tensor, v: torch.Tensor,
                      k: torch.Tensor, q: torch.Tensor, u_round: Quantizer = None) -> torch.Tensor:
    """Algorithm 4, GDN standard decoding step. Returns ``o`` ``[..., dv]``.

    ``u_round`` maps the correction to the stored record format (e.g. through fp16); the step's
    own state update and output use the unrounded u (it stays in registers in a fused kernel).
    ::

        S <- Replay(S_ckpt, B_{1:h})          (state before this token)
        u <- beta (v - alpha S k)
        B_{h+1} <- (alpha, u, k); h <- h + 1
        S <- alpha S + u k^T; o <- S q
        if h = L: S_ckpt <- S; B <- {}; h <- 0
    """
    op = "alg4_gdn_standard"
    _check_standard(op, seq)
    x = _check_token(op, seq, alpha=alpha, beta=beta, v=v, k=k, q=q)
    recs = seq.records(0, seq.h)
    S = replay(seq.ckpt, seq.stack(recs, "alpha"), seq.stack(recs, "u"), seq.stack(recs, "k"))
    al = x["alpha"][..., None]
    u = x["beta"][..., None] * (x["v"] - al * torch.einsum("...vk,...k->...v", S, x["k"]))
    u_store = apply_quant(op, "u_round", u_round, u)
    seq.write(seq.h, {"alpha": x["alpha"], "u": u_store, "k": x["k"], "beta": x["beta"], "v": x["v"]})
    seq.h += 1
    S = al[..., None] * S + u[..., :, None] * x["k"][..., None, :]
    o = torch.einsum("...vk,...k->...v", S, x["q"])
    if seq.h == seq.window:
        seq.ckpt = apply_quant(op, "quant_hp", seq.quant_hp, S)
        seq.drop_committed()
        seq.num_flushes += 1
    return o


def rederive_corrections(S_hp: torch.Tensor, recs: List[Dict[str, torch.Tensor]], seq: ReplaySequence
                         ) -> torch.Tensor:
    """Re-derive ``u_{1:h}`` from the high-precision checkpoint and raw (alpha, beta, v, k) records.

    ``u_j = beta_j (v_j - alpha_j S_{j-1} k_j)`` along the HP path (paper Eq. 8); computed as the
    Eq. 10 solve with no committed records and the h records as "drafts". Returns ``[..., h, dv]``.
    """
    empty_u = seq.stack([], "u")
    empty_k = seq.stack([], "k")
    return gdn_draft_corrections(S_hp, seq.stack(recs, "alpha"), seq.stack(recs, "beta"), empty_u, empty_k,
                                 seq.stack(recs, "v"), seq.stack(recs, "k"), 0)


def _gdn_speculative(op: str, seq: ReplaySequence, alphas, betas, vs, ks, qs, u_round, two_precision: bool
                     ) -> torch.Tensor:
    T, x = _check_tokens(op, seq, alphas=alphas, betas=betas, vs=vs, ks=ks, qs=qs)
    h = seq.h
    flush = h + T > seq.window
    if two_precision and not flush and seq.ckpt_lp is not None:   # pi <- HP if h + T > L else LP
        S = seq.ckpt_lp
    else:
        S = seq.ckpt                                                # load S_ckpt^pi
    committed = seq.records(0, h)
    a_c = seq.stack(committed, "alpha")
    all_alphas = torch.cat([a_c, x["alphas"]], dim=-1)
    U_c, K_c = seq.stack(committed, "u"), seq.stack(committed, "k")
    Ud = gdn_draft_corrections(S, all_alphas, x["betas"], U_c, K_c, x["vs"], x["ks"], h)
    Ud_store = apply_quant(op, "u_round", u_round, Ud)
    for s in range(T):                                              # B_{h+1:h+T} <- (alpha, [beta,] u, [v,] k)
        seq.write(h + s, {"alpha": x["alphas"][..., s], "beta": x["betas"][..., s], "u": Ud_store[..., s, :],
                          "v": x["vs"][..., s, :], "k": x["ks"][..., s, :]})
    O = output_only(S, all_alphas, torch.cat([U_c, Ud], dim=-2), torch.cat([K_c, x["ks"]], dim=-2), x["qs"], h)
    if flush:                                                       # flush committed records only
        if two_precision:                                           # re-derive u_{1:h} from S (= HP)
            U_fold = rederive_corrections(S, committed, seq) if h > 0 else U_c
        else:
            U_fold = U_c
        S = replay(S, a_c, U_fold, K_c)
        seq.ckpt = apply_quant(op, "quant_hp", seq.quant_hp, S)
        if two_precision and seq.ckpt_lp is not None:
            seq.ckpt_lp = apply_quant(op, "quant_lp", seq.quant_lp, S)
        seq.drop_committed()
        seq.num_flushes += 1
    seq.pending_T = T
    return O


def alg5_gdn_speculative(seq: ReplaySequence, alphas: torch.Tensor, betas: torch.Tensor, vs: torch.Tensor,
                         ks: torch.Tensor, qs: torch.Tensor, u_round: Quantizer = None) -> torch.Tensor:
    """Algorithm 5, GDN speculative verification step. Returns ``O`` ``[..., T, dv]``.

    Args: alphas/betas ``[..., T]``, vs ``[..., T, dv]``, ks/qs ``[..., T, dk]`` (normalized);
    ``u_round`` as in :func:`alg4_gdn_standard` (applies to the stored records only).
    ::

        S <- S_ckpt
        U_d <- solve Eq. 10 from S, B_{1:h}, X
        B_{h+1:h+T} <- (alpha_s, u_s, k_s)    (h unchanged)
        O <- OutputOnly(S, B_{1:h+T}, Q)      (Eq. 11, U in place of V)
        if h + T > L: S <- Replay(S, B_{1:h}); S_ckpt <- S; drop B_{1:h}; h <- 0
        later: h <- h + a
    """
    return _gdn_speculative("alg5_gdn_speculative", seq, alphas, betas, vs, ks, qs, u_round, two_precision=False)


def alg6_gdn_two_precision(seq: ReplaySequence, alphas: torch.Tensor, betas: torch.Tensor, vs: torch.Tensor,
                           ks: torch.Tensor, qs: torch.Tensor, u_round: Quantizer = None) -> torch.Tensor:
    """Algorithm 6, GDN two-precision speculative step. Same arguments as :func:`alg5_gdn_speculative`.

    ::

        pi <- HP if h + T > L else LP; S <- S_ckpt^pi
        U_d <- solve Eq. 10 from S, B_{1:h}, X          (cached committed u)
        B_{h+1:h+T} <- (alpha_s, beta_s, u_s, v_s, k_s)
        O <- OutputOnly(S, B_{1:h+T}, Q)
        if h + T > L: recompute u_{1:h} from S (= HP) and (alpha, beta, v, k)_{1:h};
                      S <- Replay(S, B_{1:h}) with the recomputed u;
                      S_ckpt^HP <- Q_HP(S); S_ckpt^LP <- Q_LP(S); drop B_{1:h}; h <- 0
        later: h <- h + a

    The recomputed corrections are formed in float64 (never rounded), so neither the read copy
    nor ``u_round`` reaches the recurrence checkpoint.
    """
    return _gdn_speculative("alg6_gdn_two_precision", seq, alphas, betas, vs, ks, qs, u_round, two_precision=True)
