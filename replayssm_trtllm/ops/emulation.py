"""CPU emulation of the CUDA ops, from the float64 reference: for running the Python around the ops without a GPU.

Inside ``with cpu_emulation():`` the ops below take CPU tensors and compute what the kernels compute, by the
reference algorithms, in float64, storing into the same buffers in their dtypes (rings, checkpoints, states,
outputs, cursors) with the kernels' rules (records at ``(origin + h + t) % C``, the flush rules of design.md 3.1,
padding rows untouched, the device commit's checks into ``error_slot``). Outside the context the ops behave as
always (CPU tensors are refused). Nothing in the package enables it: it exists for tests of the code around the
ops (state caches, the models' kernels backend, the integrations' drop-ins) on machines without a GPU.

Emulated: ``mamba2_decode`` / ``_out`` (with or without snapshots), ``mamba2_replay_decode`` / ``_out``,
``gdn_decode`` (without snapshots), ``gdn_replay`` and ``replay_commit``. What it does not show: anything about
the kernels themselves (speed, their own rounding, races); the kernels are tested against the same reference on
the GPU.
"""
from __future__ import annotations

import contextlib
from typing import Optional

import torch

from ..reference import (expand_groups, gdn_decode_naive, gdn_draft_corrections, gdn_gates, l2norm,
                         mamba2_decode_naive, mamba2_gates, output_only, replay, silu)
from ..state.cursors import commit_update, flush_mask
from . import commit as _commit
from . import gdn as _gdn
from . import mamba2 as _mamba2

F64 = torch.float64
_registered = False


def _rows(sbi: Optional[torch.Tensor], Bsz: int):
    idx = torch.arange(Bsz) if sbi is None else sbi.reshape(-1).to(torch.int64)
    return [(b, int(s)) for b, s in enumerate(idx.tolist()) if s >= 0]


def _output_and_fold(state, slot, alphas, vs, ks, qs, h, flush, mode):
    """Outputs [heads, T, d_v] of one row from its checkpoint and records (h committed, then the T new ones),
    and the flush (design 3.1): standard folds all h + 1 records and reads the output from the new state;
    speculative folds the h committed ones and reads the outputs output-only."""
    S0 = state[slot].to(F64)
    if mode == 0 and flush:
        Sn = replay(S0, alphas, vs, ks)
        state[slot] = Sn.to(state.dtype)
        return torch.einsum("hxy,hty->htx", Sn, qs)
    O = output_only(S0, alphas, vs, ks, qs, h)
    if flush:
        state[slot] = replay(S0, alphas[:, :h], vs[:, :h], ks[:, :h]).to(state.dtype)
    return O


# ---- Mamba-2 ---------------------------------------------------------------------------------------
def _m2_decode(state, x, dt_raw, B, C, A, D, dt_bias, z, sbi, snapshots, y):
    (x4, dt4, B4, C4, z4, _), (Bsz, T, H, P, G, N, S) = _mamba2.validate_decode_args(
        state, x, dt_raw, B, C, A, D, dt_bias, z, sbi, snapshots)
    y4 = y.view(x4.shape)
    Dv = torch.zeros(H) if D is None else D
    bias = torch.zeros(H) if dt_bias is None else dt_bias
    for b, slot in _rows(sbi, Bsz):
        yy, states = mamba2_decode_naive(state[slot:slot + 1], x4[b:b + 1], dt4[b:b + 1], B4[b:b + 1], C4[b:b + 1],
                                         A, Dv, bias, None if z4 is None else z4[b:b + 1])
        y4[b] = yy[0].to(y.dtype)
        if snapshots is None:
            state[slot] = states[0, -1].to(state.dtype)
        else:
            snapshots[slot] = states[0].to(snapshots.dtype)


def _m2_replay(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z, sbi,
               window, mode, y):
    (x4, dt4, B4, C4, z4, _), (Bsz, T, H, P, G, N, S, Cap, mode) = _mamba2.validate_replay_args(
        state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z, sbi, window, mode)
    y4 = y.view(x4.shape)
    A64 = A.to(F64)
    D64 = torch.zeros(H, dtype=F64) if D is None else D.to(F64)
    bias = torch.zeros(H) if dt_bias is None else dt_bias
    dt_all, _ = mamba2_gates(dt4, bias, A)                                    # [B, T, H] float64
    for b, slot in _rows(sbi, Bsz):
        o, h = int(ring_origin[slot]), int(ring_len[slot])
        flush = bool(flush_mask(torch.tensor(h), T, window, mode))
        ridx = (o + torch.arange(h + T)) % Cap
        w = ridx[h:]
        ring_dt[slot, w] = dt_all[b].to(ring_dt.dtype)
        ring_x[slot, w] = x4[b]
        ring_B[slot, w] = B4[b]
        dts = ring_dt[slot, ridx].to(F64)                                      # [h + T, H]
        alphas = torch.exp(dts * A64).T                                       # [H, h + T]
        vs = (dts[..., None] * ring_x[slot, ridx].to(F64)).permute(1, 0, 2)   # [H, h + T, P]
        ks = expand_groups(ring_B[slot, ridx].to(F64), H, dim=1).permute(1, 0, 2)
        qs = expand_groups(C4[b].to(F64), H, dim=1).permute(1, 0, 2)          # [H, T, N]
        O = _output_and_fold(state, slot, alphas, vs, ks, qs, h, flush, mode)
        yb = O.permute(1, 0, 2) + D64[None, :, None] * x4[b].to(F64)
        if z4 is not None:
            yb = yb * silu(z4[b])
        y4[b] = yb.to(y.dtype)


# ---- GDN -------------------------------------------------------------------------------------------
def _gdn_keys(k_raw: torch.Tensor, HV: int) -> torch.Tensor:
    """[n, H, K] raw -> normalized per value head, head-major [HV, n, K]."""
    return torch.repeat_interleave(l2norm(k_raw), HV // k_raw.shape[1], dim=1).permute(1, 0, 2)


def _gdn_decode(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias, o, scale, snapshot, variant=0):
    if snapshot:
        raise NotImplementedError("cpu_emulation: gdn_decode with snapshot=True is not emulated")
    sizes, _, _ = _gdn.validate_decode_args(state, state_indices, num_accepted, q, k, v, a, b, A_log, dt_bias, o,
                                            snapshot, require_cuda=False)
    for row, slot in _rows(state_indices, sizes["B"]):
        r = slice(row, row + 1)
        oo, states = gdn_decode_naive(state[slot:slot + 1], q[r], k[r], v[r], a[r], b[r], A_log, dt_bias, scale)
        o[row] = oo[0].to(o.dtype)
        state[slot] = states[0, -1].to(state.dtype)


def _gdn_replay(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k, q, k, v, a, b, A_log,
                dt_bias, o, window, mode, scale, variant=0):
    sizes, _ = _gdn.validate_replay_args(state, state_batch_indices, ring_origin, ring_len, ring_g, ring_u, ring_k,
                                         q, k, v, a, b, A_log, dt_bias, o, window, mode, require_cuda=False)
    T, HV, Cap = sizes["T"], sizes["HV"], sizes["C"]
    g_all, alpha_all, beta_all = gdn_gates(a, b, A_log, dt_bias)             # [B, T, HV]
    qn = torch.repeat_interleave(l2norm(q) * scale, HV // sizes["H"], dim=2)  # [B, T, HV, K]
    for row, slot in _rows(state_batch_indices, sizes["B"]):
        oo, h = int(ring_origin[slot]), int(ring_len[slot])
        flush = bool(flush_mask(torch.tensor(h), T, window, mode))
        ridx_c = (oo + torch.arange(h)) % Cap
        w = (oo + h + torch.arange(T)) % Cap
        S0 = state[slot].to(F64)
        a_c = torch.exp(ring_g[slot, ridx_c].to(F64)).T                       # [HV, h]
        U_c = ring_u[slot, ridx_c].to(F64).permute(1, 0, 2)                   # [HV, h, V]
        K_c = _gdn_keys(ring_k[slot, ridx_c], HV)                             # [HV, h, K]
        K_d = _gdn_keys(k[row], HV)                                           # [HV, T, K]
        V_d = v[row].to(F64).permute(1, 0, 2)
        alphas = torch.cat([a_c, alpha_all[row].T], dim=1)
        Ud = gdn_draft_corrections(S0, alphas, beta_all[row].T, U_c, K_c, V_d, K_d, h)   # [HV, T, V]
        ring_g[slot, w] = g_all[row].to(ring_g.dtype)
        ring_u[slot, w] = Ud.permute(1, 0, 2).to(ring_u.dtype)
        ring_k[slot, w] = k[row]
        U_all, K_all = torch.cat([U_c, Ud], dim=1), torch.cat([K_c, K_d], dim=1)
        O = _output_and_fold(state, slot, alphas, U_all, K_all, qn[row].permute(1, 0, 2), h, flush, mode)
        o[row] = O.permute(1, 0, 2).to(o.dtype)


# ---- commit ----------------------------------------------------------------------------------------
def _commit_emu(state_batch_indices, accepted, ring_origin, ring_len, error_slot, window, ring_capacity, num_tokens,
                mode):
    """The device commit: the same checks into ``error_slot`` (first bad slot, nothing clamped), the cursor
    update of the state machine (``state.cursors.commit_update``) on the rows that pass."""
    _commit.validate_commit_args(state_batch_indices, accepted, ring_origin, ring_len, error_slot, window,
                                 ring_capacity, num_tokens, mode)
    mode = _commit.mode_code(mode)
    L, C, T = window, ring_capacity, num_tokens
    for b, slot in enumerate(state_batch_indices.tolist()):
        if slot < 0:
            continue
        ok = slot < ring_origin.shape[0]
        if ok:
            o, h = int(ring_origin[slot]), int(ring_len[slot])
            acc = T if mode == 0 or accepted is None else int(accepted[b])
            ok = 0 <= o < C and h >= 0 and (h <= L - 1 if mode == 0 else h <= L) and 1 <= acc <= T
        if not ok:
            if error_slot is not None and int(error_slot[0]) == -1:
                error_slot[0] = slot
            continue
        new_o, new_h = commit_update(torch.tensor(o), torch.tensor(h), torch.tensor(acc), T, L, C, mode)
        ring_origin[slot], ring_len[slot] = int(new_o), int(new_h)


# ---- registration ----------------------------------------------------------------------------------
def _ops():
    return {
        "mamba2_decode": (_mamba2.mamba2_decode, _k_m2_decode),
        "mamba2_decode_out": (_mamba2.mamba2_decode_out, _k_m2_decode_out),
        "mamba2_replay_decode": (_mamba2.mamba2_replay_decode, _k_m2_replay),
        "mamba2_replay_decode_out": (_mamba2.mamba2_replay_decode_out, _k_m2_replay_out),
        "gdn_decode": (_gdn._gdn_decode_op, _gdn_decode),
        "gdn_replay": (_gdn._gdn_replay_op, _gdn_replay),
        "replay_commit": (_commit.replay_commit, _commit_emu),
    }


def _k_m2_decode(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, rows_per_cta=0,
                 variant=-1):
    y = torch.empty(x.shape, dtype=x.dtype)
    _m2_decode(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, y)
    return y


def _k_m2_decode_out(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, y, rows_per_cta=0,
                     variant=-1):
    _m2_decode(state, x, dt_raw, B, C, A, D, dt_bias, z, state_batch_indices, snapshots, y)


def _k_m2_replay(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
                 state_batch_indices, window, mode, rows_per_cta=0, variant=-1):
    y = torch.empty(x.shape, dtype=x.dtype)
    _m2_replay(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
               state_batch_indices, window, mode, y)
    return y


def _k_m2_replay_out(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
                     state_batch_indices, window, mode, y, rows_per_cta=0, variant=-1):
    _m2_replay(state, ring_dt, ring_x, ring_B, ring_origin, ring_len, x, dt_raw, B, C, A, D, dt_bias, z,
               state_batch_indices, window, mode, y)


# The CPU kernels are registered once and kept disabled by contexts entered here and never left
# (``set_kernel_enabled`` is a context manager): outside ``cpu_emulation`` the ops refuse CPU tensors as always.
_KEEP_DISABLED = contextlib.ExitStack()


def _register() -> None:
    global _registered
    if _registered:
        return
    for op, fn in _ops().values():
        op.register_kernel("cpu")(fn)
        _KEEP_DISABLED.enter_context(op.set_kernel_enabled("cpu", False))
    _registered = True


@contextlib.contextmanager
def cpu_emulation():
    """Within the block, the emulated ops accept CPU tensors (see the module doc)."""
    _register()
    with contextlib.ExitStack() as stack:
        for op, _ in _ops().values():
            stack.enter_context(op.set_kernel_enabled("cpu", True))
        yield


__all__ = ["cpu_emulation"]
