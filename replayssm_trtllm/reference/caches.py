"""Batched replay caches in the exact tensor layout of docs/design.md section 3 (float64 reference).

One cache = one layer: a checkpoint per slot, a ring of records per slot, and the per-slot
cursors (:class:`replayssm_trtllm.state.ReplayCursors`, shareable by all layers of a model).
Tensors (float64 here; the device dtypes of the design table in brackets):

Mamba-2 (:class:`Mamba2ReplayCacheRef`)::

    ckpt     [S, H, P, N]     recurrence checkpoint          [fp32 | fp16 | bf16]
    ckpt_lp  [S, H, P, N]     read copy (two_precision)      [fp16 | fp8 | nvfp4], else None
    ring_dt  [S, C, H]        dt after bias + softplus       [fp32]
    ring_x   [S, C, H, P]     x, the input's value           [act]
    ring_B   [S, C, G, N]     B, the input's value           [act]

GDN (:class:`GdnReplayCacheRef`)::

    ckpt     [S, HV, V, K];  ckpt_lp [S, HV, V, K] (two_precision)
    ring_g   [S, C, HV]       log-decay g                    [fp32]
    ring_u   [S, C, HV, V]    correction u (u_round applied) [fp16]
    ring_k   [S, C, H, K]     raw k (normalized on use)      [act]
    ring_beta[S, C, HV]       beta      (two_precision only, else None)   [fp32]
    ring_v   [S, C, HV, V]    raw v     (two_precision only, else None)   [act]

Step (T tokens per row, ``T = 1`` in standard mode): the record of token s of row b goes to ring
index ``(origin + h + s) % C`` of slot ``state_batch_indices[b]``; negative slots are padding rows
(skipped, nothing written, outputs left zero). The flush decision per row comes from the cursors
before the step (standard: ``h + 1 == L``, folding the h ring records and the current token;
speculative: ``h + T > L``, folding the h committed records only). Non-flush rows compute
outputs output-only (Eq. 6 / 11) from the checkpoint (the read copy when two_precision); flush
rows read the recurrence checkpoint and write ``ckpt = quant_hp(S)`` (and ``ckpt_lp = quant_lp(S)``).
The step never changes cursors; call :meth:`commit` once per model step (design 3.2).

Ring entries outside the live records (``cursors.live_mask(T)``) are dead: never read, and their
content is unspecified (the reference writes this step's records even on a standard flush row,
where they are dead after the commit). Compare ring buffers only under the live mask.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch

from ..state.cursors import STANDARD, ReplayCursors, ReplayPlan, mode_name, parse_mode
from ..state.phase import admission_phases, write_neutral_records
from ._validate import apply_quant, expect_int, expect_tensor, f64
from .gdn import default_scale, gdn_gates, l2norm
from .mamba2 import expand_groups, mamba2_gates, silu
from .replay import gdn_draft_corrections, output_only, replay

Quantizer = Optional[Callable[[torch.Tensor], torch.Tensor]]
F64 = torch.float64


def _index_tensor(op: str, sbi, name: str = "state_batch_indices", allow_padding: bool = True) -> torch.Tensor:
    if not isinstance(sbi, torch.Tensor):
        sbi = torch.as_tensor(list(sbi), dtype=torch.int64).reshape(-1)
    if sbi.dim() != 1 or sbi.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{op}: '{name}' must be an int32/int64 tensor of shape [B]; "
                         f"got {str(sbi.dtype).replace('torch.', '')} {list(sbi.shape)}")
    sbi = sbi.to(device="cpu", dtype=torch.int64)
    if not allow_padding and bool((sbi < 0).any()):
        raise ValueError(f"{op}: '{name}' must hold slots >= 0; got {sbi.tolist()}")
    return sbi


class _ReplayCacheBase:
    family = ""

    def _init_common(self, num_slots, window, max_verify, mode, two_precision, quant_hp, quant_lp, cursors):
        op = type(self).__name__
        self.num_slots = expect_int(op, "num_slots", num_slots, 1, None)
        self.window = expect_int(op, "window", window, 1, None)
        self._admitted = 0  # rows admitted through reset (the start of the next "spread" phases)
        self.max_verify = expect_int(op, "max_verify", max_verify, 1, None)
        self.mode = parse_mode(mode)
        self.two_precision = bool(two_precision)
        self.quant_hp, self.quant_lp = quant_hp, quant_lp
        if cursors is None:
            cursors = ReplayCursors(num_slots, window, max_verify, self.mode)
        elif not isinstance(cursors, ReplayCursors) or (cursors.num_slots, cursors.window, cursors.max_verify,
                                                        cursors.mode) != (num_slots, window, max_verify, self.mode):
            raise ValueError(f"{op}: shared 'cursors' must be a ReplayCursors with num_slots={num_slots}, "
                             f"window={window}, max_verify={max_verify}, mode={mode_name(self.mode)}")
        self.cursors = cursors
        self.capacity = cursors.capacity
        self.last_plan: Optional[ReplayPlan] = None

    def _reset_ckpt(self, op: str, slots, prefill_state, state_dims, phase=None):
        sbi = _index_tensor(op, slots, "slots")
        sz = dict(zip(state_dims[1:], self.ckpt.shape[1:]))
        sz["n"] = int(sbi.shape[0])
        expect_tensor(op, "prefill_state", prefill_state, ["n"] + list(state_dims[1:]), sz)
        counts = admission_phases(op, phase, int(sbi.shape[0]), self.window, self._admitted)
        self.cursors.reset(sbi, counts)   # validates slot range and duplicates
        self._admitted += int(sbi.shape[0])  # entries admitted so far, padding included (the next "spread" start)
        if counts is not None:  # neutral records ahead of the row's own (state/phase.py)
            write_neutral_records(self.family, self, sbi.tolist(), counts, 0)
        pre = f64(prefill_state)
        for i in range(sbi.shape[0]):
            s = int(sbi[i])
            if s < 0:
                continue
            self.ckpt[s] = apply_quant(op, "quant_hp", self.quant_hp, pre[i])
            if self.ckpt_lp is not None:
                self.ckpt_lp[s] = apply_quant(op, "quant_lp", self.quant_lp, pre[i])
        return counts

    def _store(self, op: str, slot: int, S: torch.Tensor) -> None:
        self.ckpt[slot] = apply_quant(op, "quant_hp", self.quant_hp, S)
        if self.ckpt_lp is not None:
            self.ckpt_lp[slot] = apply_quant(op, "quant_lp", self.quant_lp, S)

    def _read_ckpt(self, slot: int, flush: bool) -> torch.Tensor:
        """pi = HP on flush rows, the read copy (LP) otherwise (two_precision only)."""
        if self.ckpt_lp is not None and not flush:
            return self.ckpt_lp[slot].clone()
        return self.ckpt[slot].clone()

    def commit(self, state_batch_indices, accepted=None) -> None:
        """Advance the cursors (design 3.2): ``accepted`` [B] in [1, T] (speculative) or None (all T).

        With cursors shared by several layers, commit once per model step (on any one cache or on
        the cursors directly), not once per layer.
        """
        self.cursors.commit(state_batch_indices, accepted)

    def _common_repr(self) -> str:
        return (f"mode={mode_name(self.mode)}, L={self.window}, T_max={self.max_verify}, C={self.capacity}, "
                f"two_precision={self.two_precision}")


class Mamba2ReplayCacheRef(_ReplayCacheBase):
    """Float64 reference of one Mamba-2 layer's replay cache (design 3, layout in the module doc).

    Args:
        num_slots: S. H, P, N, G: heads, head dim, state size, groups (``H % G == 0``).
        window: L. max_verify: T_max (C = L + T_max). mode: ``"standard"``/0 or ``"speculative"``/1.
        two_precision: keep a read copy ``ckpt_lp`` (Alg. 3); quant_hp/quant_lp: storage formats of
            ``ckpt``/``ckpt_lp`` (float64 -> dequantized float64; None = identity).
        cursors: a ReplayCursors to share with other layers (default: a private one).
    """
    family = "mamba2"

    def __init__(self, num_slots: int, H: int, P: int, N: int, G: int, window: int, max_verify: int = 1,
                 mode: Union[str, int] = "standard", *, two_precision: bool = False, quant_hp: Quantizer = None,
                 quant_lp: Quantizer = None, cursors: Optional[ReplayCursors] = None):
        op = "Mamba2ReplayCacheRef"
        self._init_common(num_slots, window, max_verify, mode, two_precision, quant_hp, quant_lp, cursors)
        self.H, self.P, self.N, self.G = (expect_int(op, n, v, 1, None) for n, v in
                                          (("H", H), ("P", P), ("N", N), ("G", G)))
        if H % G != 0:
            raise ValueError(f"{op}: H={H} must be a multiple of G={G}")
        S, C = num_slots, self.capacity
        self.ckpt = torch.zeros(S, H, P, N, dtype=F64)
        self.ckpt_lp = torch.zeros(S, H, P, N, dtype=F64) if self.two_precision else None
        self.ring_dt = torch.zeros(S, C, H, dtype=F64)
        self.ring_x = torch.zeros(S, C, H, P, dtype=F64)
        self.ring_B = torch.zeros(S, C, G, N, dtype=F64)

    def __repr__(self) -> str:
        return (f"Mamba2ReplayCacheRef(S={self.num_slots}, H={self.H}, P={self.P}, N={self.N}, G={self.G}, "
                f"{self._common_repr()})")

    def reset(self, slots, prefill_state: torch.Tensor, phase=None) -> Optional[list]:
        """Context phase: ``prefill_state`` ``[n, H, P, N]`` becomes the checkpoint of ``slots`` ``[n]``
        (negative entries skipped); their rings are empty (``o = 0, h = 0``), or hold ``phase`` neutral records
        (``None``, ``"spread"``, an int or one per slot; state/phase.py). Returns the per-slot neutral-record counts,
        or None without a phase."""
        return self._reset_ckpt("Mamba2ReplayCacheRef.reset", slots, prefill_state, ["S", "H", "P", "N"], phase)

    def _records(self, slot: int, ridx: torch.Tensor, A: torch.Tensor):
        """Head-major generic records (alpha [H,n], v = dt x [H,n,P], k = B [H,n,N]) at ring indices."""
        dts = self.ring_dt[slot, ridx]                                          # [n, H]
        alphas = torch.exp(dts * A).transpose(0, 1)
        vs = (dts[..., None] * self.ring_x[slot, ridx]).permute(1, 0, 2)
        ks = expand_groups(self.ring_B[slot, ridx], self.H, dim=1).permute(1, 0, 2)
        return alphas, vs, ks

    def step(self, state_batch_indices, x: torch.Tensor, dt_raw: torch.Tensor, Bm: torch.Tensor,
             Cm: torch.Tensor, A: torch.Tensor, D: torch.Tensor, dt_bias: torch.Tensor,
             z: Optional[torch.Tensor] = None) -> torch.Tensor:
        """One decode step of T tokens per row (T = 1 in standard mode).

        Args: ``state_batch_indices`` [B] (negative = padding), then the inputs of
        :func:`mamba2_decode_naive` without the state: x [B,T,H,P], dt_raw [B,T,H], Bm/Cm [B,T,G,N],
        A/D/dt_bias [H], z [B,T,H,P] or None.
        Returns: y float64 ``[B, T, H, P]`` (zeros on padding rows). ``self.last_plan`` holds the plan
        (flush mask, write indices, ...). Cursors are not changed.
        """
        op = "Mamba2ReplayCacheRef.step"
        sbi = _index_tensor(op, state_batch_indices)
        sz = {"B": int(sbi.shape[0]), "H": self.H, "P": self.P, "N": self.N, "G": self.G}
        expect_tensor(op, "x", x, ["B", "T", "H", "P"], sz)
        expect_tensor(op, "dt_raw", dt_raw, ["B", "T", "H"], sz)
        expect_tensor(op, "Bm", Bm, ["B", "T", "G", "N"], sz)
        expect_tensor(op, "Cm", Cm, ["B", "T", "G", "N"], sz)
        for name, t in (("A", A), ("D", D), ("dt_bias", dt_bias)):
            expect_tensor(op, name, t, ["H"], sz)
        if z is not None:
            expect_tensor(op, "z", z, ["B", "T", "H", "P"], sz)
        T = sz["T"]
        plan = self.cursors.plan(sbi, T)
        self.last_plan = plan
        dt, _ = mamba2_gates(dt_raw, dt_bias, A)                                   # [B, T, H]
        A64, D64, xs = f64(A), f64(D), f64(x)
        Bs, Cs = f64(Bm), f64(Cm)
        y = torch.zeros(sz["B"], T, self.H, self.P, dtype=F64)
        for b in torch.nonzero(plan.valid)[:, 0].tolist():
            slot, h, flush = int(plan.slot[b]), int(plan.length[b]), bool(plan.flush[b])
            w = plan.write_index[b]
            self.ring_dt[slot, w] = dt[b]
            self.ring_x[slot, w] = xs[b]
            self.ring_B[slot, w] = Bs[b]
            alphas, vs, ks = self._records(slot, plan.record_index[b, :h + T], A64)
            qs = expand_groups(Cs[b], self.H, dim=1).permute(1, 0, 2)             # [H, T, N]
            S0 = self._read_ckpt(slot, flush)
            if self.mode == STANDARD and flush:        # fold h ring records + current token
                S = replay(S0, alphas, vs, ks)
                O = torch.einsum("hpn,htn->htp", S, qs)
                self._store(op, slot, S)
            else:
                O = output_only(S0, alphas, vs, ks, qs, h)                      # [H, T, P]
                if flush:                              # speculative: fold committed records only
                    self._store(op, slot, replay(S0, alphas[:, :h], vs[:, :h], ks[:, :h]))
            yb = O.permute(1, 0, 2) + D64[None, :, None] * xs[b]
            if z is not None:
                yb = yb * silu(z[b])
            y[b] = yb
        return y

    def committed_state(self, slots, A: torch.Tensor) -> torch.Tensor:
        """``Replay(ckpt, committed records)`` per slot: float64 ``[n, H, P, N]``, the conventional state
        after every committed token (A ``[H]`` turns the cached dt into decays)."""
        op = "Mamba2ReplayCacheRef.committed_state"
        sbi = _index_tensor(op, slots, "slots", allow_padding=False)
        expect_tensor(op, "A", A, ["H"], {"H": self.H})
        self.cursors.check_invariants(sbi)
        out = torch.zeros(sbi.shape[0], self.H, self.P, self.N, dtype=F64)
        for i, s in enumerate(sbi.tolist()):
            h, o = int(self.cursors.ring_len[s]), int(self.cursors.ring_origin[s])
            ridx = (o + torch.arange(h)) % self.capacity
            out[i] = replay(self.ckpt[s], *self._records(s, ridx, f64(A)))
        return out


class GdnReplayCacheRef(_ReplayCacheBase):
    """Float64 reference of one GDN layer's replay cache (design 3, layout in the module doc).

    Args:
        num_slots: S. H, HV, K, V: key heads, value heads (``HV % H == 0``), key and value head dims.
        window: L. max_verify: T_max. mode: ``"standard"``/0 or ``"speculative"``/1.
        two_precision: Alg. 6: keep the read copy ``ckpt_lp`` and raw (beta, v) records; a flush
            re-derives the folded corrections from ``ckpt`` (never folds cached u).
        u_round: storage format of ``ring_u`` (e.g. ``cast_quantizer(torch.float16)``); the step's own
            outputs use the unrounded u. quant_hp/quant_lp, cursors: as for Mamba-2.
    """
    family = "gdn"

    def __init__(self, num_slots: int, H: int, HV: int, K: int, V: int, window: int, max_verify: int = 1,
                 mode: Union[str, int] = "standard", two_precision: bool = False, u_round: Quantizer = None, *,
                 quant_hp: Quantizer = None, quant_lp: Quantizer = None, cursors: Optional[ReplayCursors] = None):
        op = "GdnReplayCacheRef"
        self._init_common(num_slots, window, max_verify, mode, two_precision, quant_hp, quant_lp, cursors)
        self.H, self.HV, self.K, self.V = (expect_int(op, n, v, 1, None) for n, v in
                                           (("H", H), ("HV", HV), ("K", K), ("V", V)))
        if HV % H != 0:
            raise ValueError(f"{op}: HV={HV} must be a multiple of H={H}")
        self.u_round = u_round
        S, C = num_slots, self.capacity
        self.ckpt = torch.zeros(S, HV, V, K, dtype=F64)
        self.ckpt_lp = torch.zeros(S, HV, V, K, dtype=F64) if self.two_precision else None
        self.ring_g = torch.zeros(S, C, HV, dtype=F64)
        self.ring_u = torch.zeros(S, C, HV, V, dtype=F64)
        self.ring_k = torch.zeros(S, C, H, K, dtype=F64)
        self.ring_beta = torch.zeros(S, C, HV, dtype=F64) if self.two_precision else None
        self.ring_v = torch.zeros(S, C, HV, V, dtype=F64) if self.two_precision else None

    def __repr__(self) -> str:
        return (f"GdnReplayCacheRef(S={self.num_slots}, H={self.H}, HV={self.HV}, K={self.K}, V={self.V}, "
                f"{self._common_repr()})")

    def reset(self, slots, prefill_state: torch.Tensor, phase=None) -> Optional[list]:
        """Context phase: ``prefill_state`` ``[n, HV, V, K]`` becomes the checkpoint of ``slots``; ``phase`` and the
        result as in :meth:`Mamba2ReplayCacheRef.reset`."""
        return self._reset_ckpt("GdnReplayCacheRef.reset", slots, prefill_state, ["S", "HV", "V", "K"], phase)

    def _keys(self, k_raw: torch.Tensor) -> torch.Tensor:
        """Raw keys ``[n, H, K]`` -> normalized, per value head, head-major ``[HV, n, K]``."""
        return torch.repeat_interleave(l2norm(k_raw), self.HV // self.H, dim=1).permute(1, 0, 2)

    def _committed(self, slot: int, ridx: torch.Tensor):
        alphas = torch.exp(self.ring_g[slot, ridx]).transpose(0, 1)                 # [HV, h]
        us = self.ring_u[slot, ridx].permute(1, 0, 2)                               # [HV, h, V]
        ks = self._keys(self.ring_k[slot, ridx])                                    # [HV, h, K]
        return alphas, us, ks

    def _rederive(self, S_hp, alphas, betas, vs, ks) -> torch.Tensor:
        """u_{1:n} from the HP checkpoint and raw records (Eq. 10 solve with no committed records)."""
        empty_u = torch.zeros(self.HV, 0, self.V, dtype=F64)
        empty_k = torch.zeros(self.HV, 0, self.K, dtype=F64)
        return gdn_draft_corrections(S_hp, alphas, betas, empty_u, empty_k, vs, ks, 0)

    def step(self, state_batch_indices, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, a: torch.Tensor,
             b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor, scale: Optional[float] = None
             ) -> torch.Tensor:
        """One decode step of T tokens per row (T = 1 in standard mode).

        Args: ``state_batch_indices`` [B] (negative = padding), then the inputs of
        :func:`gdn_decode_naive` without the state: q/k [B,T,H,K], v [B,T,HV,V], a/b [B,T,HV],
        A_log/dt_bias [HV], scale (None = K ** -0.5).
        Returns: o float64 ``[B, T, HV, V]`` (zeros on padding rows). Cursors are not changed.

        Per row: ``U_d`` by the Eq. 10 solve from the read checkpoint and the cached committed u
        (standard mode: T = 1); records (g, u_round(u), raw k[, beta, raw v]) are written; outputs by
        Eq. 11 with the unrounded draft u. Flush rows fold (standard: h records + current token,
        speculative: h committed records) with the cached u, or, when two_precision, with u
        re-derived from ``ckpt`` and the raw records.
        """
        op = "GdnReplayCacheRef.step"
        sbi = _index_tensor(op, state_batch_indices)
        sz = {"B": int(sbi.shape[0]), "H": self.H, "HV": self.HV, "K": self.K, "V": self.V}
        expect_tensor(op, "q", q, ["B", "T", "H", "K"], sz)
        expect_tensor(op, "k", k, ["B", "T", "H", "K"], sz)
        expect_tensor(op, "v", v, ["B", "T", "HV", "V"], sz)
        expect_tensor(op, "a", a, ["B", "T", "HV"], sz)
        expect_tensor(op, "b", b, ["B", "T", "HV"], sz)
        expect_tensor(op, "A_log", A_log, ["HV"], sz)
        expect_tensor(op, "dt_bias", dt_bias, ["HV"], sz)
        T = sz["T"]
        plan = self.cursors.plan(sbi, T)
        self.last_plan = plan
        scale = default_scale(self.K) if scale is None else float(scale)
        g, alpha_t, beta_t = gdn_gates(a, b, A_log, dt_bias)                       # [B, T, HV]
        rep = self.HV // self.H
        ks_raw, vs_raw = f64(k), f64(v)
        qn = torch.repeat_interleave(l2norm(q) * scale, rep, dim=2)                 # [B, T, HV, K]
        out = torch.zeros(sz["B"], T, self.HV, self.V, dtype=F64)
        for row in torch.nonzero(plan.valid)[:, 0].tolist():
            slot, h, flush = int(plan.slot[row]), int(plan.length[row]), bool(plan.flush[row])
            ridx_c = plan.record_index[row, :h]
            w = plan.write_index[row]
            S0 = self._read_ckpt(slot, flush)
            a_c, U_c, K_c = self._committed(slot, ridx_c)
            a_d = alpha_t[row].transpose(0, 1)                                      # [HV, T]
            b_d = beta_t[row].transpose(0, 1)
            V_d = vs_raw[row].permute(1, 0, 2)                                      # [HV, T, V]
            K_d = self._keys(ks_raw[row])                                           # [HV, T, K]
            Q = qn[row].permute(1, 0, 2)                                            # [HV, T, K]
            alphas = torch.cat([a_c, a_d], dim=1)
            Ud = gdn_draft_corrections(S0, alphas, b_d, U_c, K_c, V_d, K_d, h)      # [HV, T, V]
            # records
            self.ring_g[slot, w] = g[row]
            self.ring_u[slot, w] = apply_quant(op, "u_round", self.u_round, Ud).permute(1, 0, 2)
            self.ring_k[slot, w] = ks_raw[row]
            if self.two_precision:
                self.ring_beta[slot, w] = beta_t[row]
                self.ring_v[slot, w] = vs_raw[row]
            U_all, K_all = torch.cat([U_c, Ud], dim=1), torch.cat([K_c, K_d], dim=1)
            n_fold = h + T if self.mode == STANDARD else h
            if flush and self.mode == STANDARD:
                S = replay(S0, alphas, U_all, K_all)
                O = torch.einsum("hvk,htk->htv", S, Q)
            else:
                O = output_only(S0, alphas, U_all, K_all, Q, h)
            if flush:
                if self.two_precision:                  # S0 is the HP checkpoint on flush rows
                    ridx_f = plan.record_index[row, :n_fold]
                    bet = self.ring_beta[slot, ridx_f].transpose(0, 1)
                    vv = self.ring_v[slot, ridx_f].permute(1, 0, 2)
                    U_fold = self._rederive(S0, alphas[:, :n_fold], bet, vv, K_all[:, :n_fold])
                else:
                    U_fold = U_all[:, :n_fold]
                self._store(op, slot, replay(S0, alphas[:, :n_fold], U_fold, K_all[:, :n_fold]))
            out[row] = O.permute(1, 0, 2)
        return out

    def committed_state(self, slots) -> torch.Tensor:
        """``Replay(ckpt, committed records)`` per slot, float64 ``[n, HV, V, K]``: with cached u, or,
        when two_precision, with u re-derived from ``ckpt`` (what the next flush would fold)."""
        op = "GdnReplayCacheRef.committed_state"
        sbi = _index_tensor(op, slots, "slots", allow_padding=False)
        self.cursors.check_invariants(sbi)
        out = torch.zeros(sbi.shape[0], self.HV, self.V, self.K, dtype=F64)
        for i, s in enumerate(sbi.tolist()):
            h, o = int(self.cursors.ring_len[s]), int(self.cursors.ring_origin[s])
            ridx = (o + torch.arange(h)) % self.capacity
            a_c, U_c, K_c = self._committed(s, ridx)
            if self.two_precision and h > 0:
                U_c = self._rederive(self.ckpt[s], a_c, self.ring_beta[s, ridx].transpose(0, 1),
                                     self.ring_v[s, ridx].permute(1, 0, 2), K_c)
            out[i] = replay(self.ckpt[s], a_c, U_c, K_c)
        return out
