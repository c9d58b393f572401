"""Thin wrappers over the peer libraries the benchmarks compare against (docs/peers.md).

- FlashInfer 0.7.x ``flashinfer.mamba.selective_state_update``: conventional Mamba-2 decode
  (state read and written every token).
- FlashInfer 0.7.x ``flashinfer.mamba.checkpointing_ssu``: FlashInfer's own ReplaySSM kernel;
  :class:`FlashInferCheckpointingSSU` owns its ring and cursors and advances them on the device.
- flash-linear-attention (``fla-core``) Gated DeltaNet recurrent decode, in place on our state
  layout.

Nothing here is imported at module load: each peer is imported on first use, and
``flashinfer_available()`` / ``fla_available()`` say ``(False, reason)`` instead of raising when a
peer (or a GPU) is missing. Inputs use this project's layouts (docs/design.md section 2); the
wrappers only make views (broadcast A/D/dt_bias/dt the way FlashInfer's ``tie_hdim`` wants them)
and launch, so they are CUDA-graph capturable once warmed up.

FlashInfer JIT-compiles each (dtype, shape) module with nvcc on first use. Modules prebuilt by
``scripts/build_flashinfer_cache.sh`` sit in ``<repo>/.fi_cache``; importing FlashInfer through
this module sets ``FLASHINFER_WORKSPACE_BASE`` to that folder (unless already set) and points
FlashInfer's AOT folder at its ``cached_ops`` directory, so prebuilt modules load without nvcc.
Set ``RSSM_FI_PREBUILT=0`` to leave FlashInfer's defaults alone.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Tuple

REPO_ROOT = Path(__file__).resolve().parents[2]
FI_CACHE_DIR = REPO_ROOT / ".fi_cache"

_fi_status: Optional[Tuple[bool, str]] = None
_fla_status: Optional[Tuple[bool, str]] = None


# ----------------------------------------------------------------------------------------------
# Availability
# ----------------------------------------------------------------------------------------------
def _cuda_reason() -> Optional[str]:
    try:
        import torch
    except Exception as exc:  # pragma: no cover - torch is a hard dependency
        return f"torch import failed: {exc}"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


def _preload_libcuda() -> None:
    """Make the driver API's symbols global before FlashInfer's prebuilt modules load: they were
    linked here against an empty libcuda stub (no driver on the build machine), so their driver
    calls (cuTensorMapEncodeTiled, ...) bind lazily to whatever libcuda is loaded RTLD_GLOBAL.
    Without this, the first call aborts the process with 'undefined symbol'."""
    import ctypes
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue


def _import_flashinfer():
    """Import flashinfer with the repo's prebuilt JIT cache wired in (see module docstring)."""
    _preload_libcuda()
    use_cache = os.environ.get("RSSM_FI_PREBUILT", "1") != "0"
    if use_cache and "FLASHINFER_WORKSPACE_BASE" not in os.environ and FI_CACHE_DIR.is_dir():
        os.environ["FLASHINFER_WORKSPACE_BASE"] = str(FI_CACHE_DIR)
    import flashinfer  # noqa: F401
    import flashinfer.mamba  # noqa: F401
    from flashinfer.jit import env as jit_env

    if use_cache:
        cached_ops = Path(jit_env.FLASHINFER_JIT_DIR)
        packaged = Path(jit_env.FLASHINFER_AOT_DIR)
        if cached_ops.is_dir() and not (packaged.is_dir() and any(packaged.iterdir())):
            # get_aot_artifacts() looks for <FLASHINFER_AOT_DIR>/<uri>/<uri>.so, the same layout
            # as the JIT's cached_ops: a module found there is loaded with no ninja/nvcc step.
            jit_env.FLASHINFER_AOT_DIR = cached_ops
    return flashinfer


def flashinfer_available() -> Tuple[bool, str]:
    """``(True, 'flashinfer <version>, ...')`` if FlashInfer imports and a GPU is present, else
    ``(False, reason)``. Never raises; the answer is cached."""
    global _fi_status
    if _fi_status is not None:
        return _fi_status
    try:
        fi = _import_flashinfer()
    except Exception as exc:
        _fi_status = (False, f"flashinfer import failed: {type(exc).__name__}: {exc}")
        return _fi_status
    reason = _cuda_reason()
    if reason is not None:
        _fi_status = (False, f"flashinfer {fi.__version__} imported, but {reason}")
        return _fi_status
    _fi_status = (True, f"flashinfer {fi.__version__}; prebuilt modules: {len(flashinfer_prebuilt_modules())}")
    return _fi_status


def flashinfer_prebuilt_modules() -> list:
    """Names of the JIT modules found as .so files where FlashInfer will load them from."""
    try:
        from flashinfer.jit import env as jit_env
    except Exception:
        return []
    d = Path(jit_env.FLASHINFER_AOT_DIR)
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if (p / f"{p.name}.so").is_file())


def fla_available() -> Tuple[bool, str]:
    """``(True, 'fla <version>')`` if fla's GDN/KDA recurrent kernels import and a GPU is present,
    else ``(False, reason)``. Never raises; the answer is cached."""
    global _fla_status
    if _fla_status is not None:
        return _fla_status
    try:
        import fla  # noqa: F401
        from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule  # noqa: F401
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd  # noqa: F401
    except Exception as exc:
        _fla_status = (False, f"fla import failed: {type(exc).__name__}: {exc}")
        return _fla_status
    reason = _cuda_reason()
    version = getattr(fla, "__version__", "?")
    _fla_status = (False, f"fla {version} imported, but {reason}") if reason else (True, f"fla {version}")
    return _fla_status


def _require(ok_reason: Tuple[bool, str], what: str) -> None:
    ok, reason = ok_reason
    if not ok:
        raise RuntimeError(f"{what}: peer unavailable: {reason}")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


# ----------------------------------------------------------------------------------------------
# FlashInfer: conventional decode
# ----------------------------------------------------------------------------------------------
def flashinfer_ssu_decode(state, x, dt, A, B, C, D, z=None, dt_bias=None, state_batch_indices=None,
                          out=None, dt_softplus: bool = True, pad_slot_id: int = -1):
    """One conventional Mamba-2 decode step through ``flashinfer.mamba.selective_state_update``.

    Our layout in, FlashInfer's broadcast views out:
        state [S, H, P, N] (fp32, updated in place at ``state_batch_indices``)
        x [B, H, P], z [B, H, P] or None, B / C [B, G, N]      (bf16 / fp16)
        dt [B, H] raw dt (before bias and softplus), A / D / dt_bias [H] fp32
        state_batch_indices [B] int32 (or int64); rows equal to ``pad_slot_id`` (-1) are skipped
    Returns ``out`` [B, H, P] (allocated when None).

    FlashInfer requires D and dt_bias in dt's dtype (one ``weight_t``); when dt is not D's dtype
    it is converted (``dt.to(D.dtype)``, one tiny elementwise kernel): pass an fp32 dt to avoid it.
    The JIT module is keyed on (state, x, dt, A, index dtypes, P, N, T=1); the prebuilt one is
    fp32 state, bf16 x, fp32 dt/D/dt_bias, int32 indices, P=64, N=128.
    """
    _require(flashinfer_available(), "flashinfer_ssu_decode")
    from flashinfer.mamba import selective_state_update

    _check(state.dim() == 4, f"flashinfer_ssu_decode: state must be [S, H, P, N]; got {tuple(state.shape)}")
    S, H, P, N = state.shape
    _check(x.dim() == 3 and tuple(x.shape[1:]) == (H, P),
           f"flashinfer_ssu_decode: x must be [B, {H}, {P}]; got {tuple(x.shape)}")
    Bsz = x.shape[0]
    _check(tuple(dt.shape) == (Bsz, H), f"flashinfer_ssu_decode: dt must be [{Bsz}, {H}]; got {tuple(dt.shape)}")
    for name, t in (("A", A), ("D", D)) + ((("dt_bias", dt_bias),) if dt_bias is not None else ()):
        _check(tuple(t.shape) == (H,), f"flashinfer_ssu_decode: {name} must be [{H}]; got {tuple(t.shape)}")
    if dt.dtype != D.dtype:
        dt = dt.to(D.dtype)
    if dt_bias is not None and dt_bias.dtype != D.dtype:
        dt_bias = dt_bias.to(D.dtype)
    dt_v = dt.contiguous().unsqueeze(-1).expand(Bsz, H, P)          # strides (H, 1, 0)
    A_v = A.contiguous().view(H, 1, 1).expand(H, P, N)              # strides (1, 0, 0)
    D_v = D.contiguous().view(H, 1).expand(H, P)                    # strides (1, 0)
    bias_v = dt_bias.contiguous().view(H, 1).expand(H, P) if dt_bias is not None else None
    if out is None:
        import torch

        out = torch.empty_like(x)
    return selective_state_update(state, x, dt_v, A_v, B, C, D_v, z=z, dt_bias=bias_v,
                                  dt_softplus=dt_softplus, state_batch_indices=state_batch_indices,
                                  pad_slot_id=pad_slot_id, out=out)


# ----------------------------------------------------------------------------------------------
# FlashInfer: checkpointing_ssu (its ReplaySSM kernel) with device-side cursors
# ----------------------------------------------------------------------------------------------
def advance_checkpointing_cursors(ring_start, pnat, slots, accepted, num_tokens: int,
                                  max_window: int, ring_len: int) -> None:
    """Advance FlashInfer's per-slot ring cursors after a checkpointing_ssu step, on the device.

    FlashInfer's rule (checkpointing_ssu.cuh, kernel_checkpointing_ssu.cuh): with ``pnat`` the
    slot's live (committed, not yet folded) records and ``T = num_tokens``,
        flush = pnat + T > max_window
        flush:     ring_start = (ring_start + pnat) % ring_len;  pnat = accepted
        no flush:  pnat = pnat + accepted
    (the kernel folded the ``pnat`` old records into the checkpoint on a flush; the T new records
    were appended at rows ``ring_start + pnat + i`` either way).

    ``ring_start`` / ``pnat`` are int32 buffers with one spare entry at the end (index S), the
    target of padding rows; ``slots`` [B] int64 holds each row's slot with padding rows already
    mapped to S. ``accepted`` is an int tensor [B] or None (= all T). Uses only device ops (no
    host sync), so it is CUDA-graph capturable; works on CPU tensors too (tested there).
    """
    import torch

    rs = ring_start.index_select(0, slots)
    p = pnat.index_select(0, slots)
    acc = (torch.full_like(p, num_tokens) if accepted is None else accepted.to(p.dtype))
    flush = (p + num_tokens) > max_window
    new_rs = torch.where(flush, torch.remainder(rs + p, ring_len), rs)
    new_p = torch.where(flush, acc, p + acc)
    ring_start.index_copy_(0, slots, new_rs)
    pnat.index_copy_(0, slots, new_p)


def pdl_chain_requested() -> bool:
    """Whether the step kernels of this run are programmatic dependents of the kernel before them
    (``RSSM_PDL_CHAIN=1``, cpp_plugins/kernels/common/pdl.h). The FlashInfer peer then launches with PDL
    too (``enable_pdl=True``), so that a side-by-side comparison gives both the same launch overlap. Mirrors the
    launchers' reading of the variable while its default is off (``pdlChainDefault``): on only for "1"."""
    import os

    return os.environ.get("RSSM_PDL_CHAIN", "0") == "1"


class FlashInferCheckpointingSSU:
    """Drive ``flashinfer.mamba.checkpointing_ssu`` (FlashInfer's ReplaySSM) for one Mamba-2 layer.

    Owns FlashInfer's ring (head-major: ``x_cache [S, H, R, P]``, ``B_cache [S, G, R, N]``,
    ``dt_cache [S, H, R]`` fp32, ``R = max_window + num_tokens``) and its per-slot cursors
    (``ring_start``, ``prev_num_accepted_tokens`` = pnat, int32), and advances the cursors on the
    device after each step (:meth:`commit`), with no host sync. The checkpoint is ``state``
    [S, H, P, N] (our layout, updated in place on flush steps only).

    Standard decoding: ``num_tokens=1`` (ring of ``max_window + 1``; a flush every
    ``max_window + 1`` tokens). Speculative: ``num_tokens=T`` drafts per step, ``commit(accepted)``
    with ``accepted [B]`` in [1, T]. FlashInfer limits ``max_window <= 16`` and
    ``T <= max_window``. To share cursors across layers (they see the same tokens), pass
    ``cursors=other.cursors`` and call :meth:`commit` once per model step on one of them.

    Per step: :meth:`step` (the layer kernel, per layer) then :meth:`commit` (once per model
    step). ``step`` takes our layouts: ``x [B, T, H, P]`` (or ``[B, H, P]`` for T=1), raw
    ``dt [B, T, H]`` (or ``[B, H]``; bf16 accepted natively), ``B / C [B, T, G, N]`` (or
    ``[B, G, N]``), optional ``z`` like x. Padding rows carry slot -1 and are skipped.

    ``enable_pdl``: FlashInfer's programmatic-dependent launch (a separately compiled module); None
    follows our own kernels' switch (:func:`pdl_chain_requested`).
    """

    def __init__(self, state, A, D, dt_bias, *, ngroups: int, max_window: int, num_tokens: int = 1,
                 act_dtype=None, dt_softplus: bool = True, algorithm: str = "auto",
                 use_scratch: bool = True, cursors: Optional[tuple] = None, ring: Optional[dict] = None,
                 enable_pdl: Optional[bool] = None):
        import torch

        _require(flashinfer_available(), "FlashInferCheckpointingSSU")
        self.enable_pdl = pdl_chain_requested() if enable_pdl is None else bool(enable_pdl)
        _check(state.dim() == 4, f"FlashInferCheckpointingSSU: state must be [S, H, P, N]; got {tuple(state.shape)}")
        S, H, P, N = state.shape
        _check(H % ngroups == 0, f"FlashInferCheckpointingSSU: H={H} must be divisible by ngroups={ngroups}")
        _check(1 <= num_tokens <= max_window <= 16,
               f"FlashInferCheckpointingSSU: need 1 <= num_tokens <= max_window <= 16 (FlashInfer limit); "
               f"got num_tokens={num_tokens}, max_window={max_window}")
        for name, t in (("A", A), ("D", D), ("dt_bias", dt_bias)):
            _check(tuple(t.shape) == (H,), f"FlashInferCheckpointingSSU: {name} must be [{H}]; got {tuple(t.shape)}")
        _check(D.dtype == dt_bias.dtype,
               f"FlashInferCheckpointingSSU: D and dt_bias must share a dtype (FlashInfer weight_t); "
               f"got {D.dtype} and {dt_bias.dtype}")
        dev = state.device
        act = act_dtype or torch.bfloat16
        self.state, self.S, self.H, self.P, self.N, self.G = state, S, H, P, N, ngroups
        self.T, self.max_window, self.ring_len = num_tokens, max_window, max_window + num_tokens
        self.dt_softplus, self.algorithm, self.use_scratch = dt_softplus, algorithm, use_scratch
        R = self.ring_len
        if ring is None:
            ring = {"x_cache": torch.zeros(S, H, R, P, dtype=act, device=dev),
                    "B_cache": torch.zeros(S, ngroups, R, N, dtype=act, device=dev),
                    "dt_cache": torch.zeros(S, H, R, dtype=torch.float32, device=dev)}
        self.x_cache, self.B_cache, self.dt_cache = ring["x_cache"], ring["B_cache"], ring["dt_cache"]
        if cursors is None:
            # One spare entry (index S) absorbs padding rows in commit(); FlashInfer sees [:S].
            cursors = (torch.zeros(S + 1, dtype=torch.int32, device=dev),
                       torch.zeros(S + 1, dtype=torch.int32, device=dev))
        self._rs_buf, self._pnat_buf = cursors
        _check(self._rs_buf.shape == (S + 1,) and self._pnat_buf.shape == (S + 1,),
               f"FlashInferCheckpointingSSU: cursors must be two int32 [{S + 1}] tensors")
        self.ring_start, self.pnat = self._rs_buf[:S], self._pnat_buf[:S]
        self.A_v = A.float().contiguous().view(H, 1, 1).expand(H, P, N)
        self.D_v = D.contiguous().view(H, 1).expand(H, P)
        self.bias_v = dt_bias.contiguous().view(H, 1).expand(H, P)
        self._scratch: dict = {}

    @property
    def cursors(self) -> tuple:
        return (self._rs_buf, self._pnat_buf)

    @property
    def ring(self) -> dict:
        return {"x_cache": self.x_cache, "B_cache": self.B_cache, "dt_cache": self.dt_cache}

    def reset(self, slots=None) -> None:
        """Empty the ring of ``slots`` (all when None): ring_start = pnat = 0 (design.md 3.3)."""
        if slots is None:
            self._rs_buf.zero_()
            self._pnat_buf.zero_()
        else:
            self._rs_buf[slots] = 0
            self._pnat_buf[slots] = 0

    def scratch(self, batch: int):
        """The two-kernel path's scratch trio for ``batch`` rows (allocated once per batch size;
        call once before CUDA-graph capture, which step() does on its first eager call)."""
        if batch not in self._scratch:
            from flashinfer.mamba import allocate_checkpointing_ssu_scratch

            self._scratch[batch] = allocate_checkpointing_ssu_scratch(
                batch, self.H, self.T, self.max_window, self.x_cache.dtype, self.state.device)
        return self._scratch[batch]

    def _as4(self, t, name, tail):
        if t.dim() == len(tail) + 1 and self.T == 1:
            t = t.unsqueeze(1)
        _check(t.dim() == len(tail) + 2 and t.shape[1] == self.T and tuple(t.shape[2:]) == tail,
               f"FlashInferCheckpointingSSU.step: {name} must be [B, {self.T}, {', '.join(map(str, tail))}]; "
               f"got {tuple(t.shape)}")
        return t

    def step(self, x, dt, B, C, z=None, state_batch_indices=None, out=None):
        """One checkpointing_ssu launch; returns ``out`` [B, T, H, P] (``[B, H, P]`` if x was 3-D).
        Does not move the cursors: call :meth:`commit` once per model step afterwards."""
        import torch
        from flashinfer.mamba import checkpointing_ssu

        squeeze = x.dim() == 3
        H, P, N, G = self.H, self.P, self.N, self.G
        x4 = self._as4(x, "x", (H, P))
        Bsz = x4.shape[0]
        dt3 = dt.unsqueeze(1) if (dt.dim() == 2 and self.T == 1) else dt
        _check(tuple(dt3.shape) == (Bsz, self.T, H),
               f"FlashInferCheckpointingSSU.step: dt must be [{Bsz}, {self.T}, {H}]; got {tuple(dt.shape)}")
        dt4 = dt3.contiguous().unsqueeze(-1).expand(Bsz, self.T, H, P)   # tie_hdim: stride(3) == 0
        B4, C4 = self._as4(B, "B", (G, N)), self._as4(C, "C", (G, N))
        z4 = self._as4(z, "z", (H, P)) if z is not None else None
        if out is None:
            out4 = torch.empty_like(x4)
        else:
            out4 = self._as4(out, "out", (H, P))
        sc = self.scratch(Bsz) if self.use_scratch else (None, None, None)
        checkpointing_ssu(self.state, self.x_cache, self.B_cache, self.dt_cache, self.ring_start,
                          self.pnat, x4, dt4, self.A_v, B4, C4, out4, D=self.D_v, z=z4,
                          dt_bias=self.bias_v, dt_softplus=self.dt_softplus,
                          state_batch_indices=state_batch_indices, pad_slot_id=-1,
                          cb_scaled=sc[0], cumAdt_vec=sc[1], cb_old=sc[2], algorithm=self.algorithm,
                          enable_pdl=self.enable_pdl)
        return out4.squeeze(1) if (squeeze and out is None) else (out if out is not None else out4)

    def commit(self, state_batch_indices, accepted=None) -> None:
        """Advance the cursors of the step's rows (FlashInfer's rule, see
        :func:`advance_checkpointing_cursors`); ``accepted [B]`` in [1, T] or None (= all T)."""
        import torch

        sbi = state_batch_indices.to(torch.int64)
        slots = torch.where(sbi < 0, torch.full_like(sbi, self.S), sbi)
        advance_checkpointing_cursors(self._rs_buf, self._pnat_buf, slots, accepted, self.T,
                                      self.max_window, self.ring_len)


# ----------------------------------------------------------------------------------------------
# flash-linear-attention: Gated DeltaNet recurrent decode
# ----------------------------------------------------------------------------------------------
def gdn_gates(a, b, A_log, dt_bias):
    """design.md 2: ``g = -exp(A_log) * softplus(a + dt_bias)`` (log-decay) and ``beta =
    sigmoid(b)``, both fp32, shaped like ``a`` / ``b``."""
    import torch
    import torch.nn.functional as F

    g = -torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float())
    beta = torch.sigmoid(b.float())
    return g, beta


def fla_gdn_decode(state, q, k, v, a, b, A_log, dt_bias, state_batch_indices, scale=None, out=None,
                   impl: str = "inplace"):
    """Gated DeltaNet decode with fla's Triton recurrent kernels, on our state layout.

        state [S, HV, V, K] fp32 (fla's ``state_v_first=True`` layout), updated in place
        q, k [B, T, H, K] (or [B, H, K]); v [B, T, HV, V] (or [B, HV, V]); a, b [B, T, HV]
        (or [B, HV]); A_log, dt_bias [HV] fp32; state_batch_indices [B] int (no padding rows:
        fla does not skip negative slots).
    g and beta are computed in torch as design.md says (two small elementwise kernels); the
    kernel L2-normalizes q and k itself (``use_qk_l2norm_in_kernel=True``) and scales q by
    ``scale`` (default K**-0.5). Returns o like v.

    impl:
      'inplace' (default): ``fla.ops.kda.fused_recurrent.fused_recurrent_kda_fwd`` with
          ``ssm_state_indices`` and ``inplace_final_state=True``: reads and writes each row's
          slot in place, one launch. It is fla's continuous-batching recurrent kernel (KDA:
          per-channel decay); with the GDN log-decay broadcast over K (materialized [B, T, HV, K],
          the kernel needs it contiguous) it computes exactly the GDN recurrence. fla 0.6's
          ``fused_recurrent_gated_delta_rule`` itself has no state indices.
      'gather': ``fla.ops.gated_delta_rule.fused_recurrent_gated_delta_rule`` on
          ``state[idx]`` (gathered), ``output_final_state=True``, then ``state[idx] = final``:
          the literal GDN API, paying a gather and a scatter of the state (about 3x the
          state traffic of 'inplace').
    """
    import torch

    _require(fla_available(), "fla_gdn_decode")
    _check(state.dim() == 4, f"fla_gdn_decode: state must be [S, HV, V, K]; got {tuple(state.shape)}")
    S, HV, Vd, Kd = state.shape
    if q.dim() == 3:
        q, k, v, a, b = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), a.unsqueeze(1), b.unsqueeze(1)
    Bsz, T, H, _ = q.shape
    _check(tuple(k.shape) == (Bsz, T, H, Kd) and tuple(q.shape) == (Bsz, T, H, Kd),
           f"fla_gdn_decode: q, k must be [B, T, H, {Kd}]; got {tuple(q.shape)}, {tuple(k.shape)}")
    _check(tuple(v.shape) == (Bsz, T, HV, Vd), f"fla_gdn_decode: v must be [{Bsz}, {T}, {HV}, {Vd}]; got {tuple(v.shape)}")
    _check(tuple(a.shape) == (Bsz, T, HV) and tuple(b.shape) == (Bsz, T, HV),
           f"fla_gdn_decode: a, b must be [{Bsz}, {T}, {HV}]; got {tuple(a.shape)}, {tuple(b.shape)}")
    _check(HV % H == 0, f"fla_gdn_decode: HV={HV} must be a multiple of H={H}")
    _check(state.dtype == torch.float32, f"fla_gdn_decode: state must be float32; got {state.dtype}")
    scale = Kd ** -0.5 if scale is None else scale
    g, beta = gdn_gates(a, b, A_log, dt_bias)
    idx = state_batch_indices
    if impl == "inplace":
        from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

        gk = g.unsqueeze(-1).expand(Bsz, T, HV, Kd).contiguous()
        # The kernel reads the slot of token t at indices[n * stride0 + t]: a [B, T] contiguous
        # index (every token of a row -> the row's slot) for T > 1, the [B] vector for T = 1.
        sidx = idx.to(torch.int32)
        sidx = sidx.view(Bsz, 1).expand(Bsz, T).contiguous() if T > 1 else sidx.contiguous()
        o, _ = fused_recurrent_kda_fwd(q=q, k=k, v=v, g=gk, beta=beta.contiguous(),
                                       initial_state=state, scale=scale, inplace_final_state=True,
                                       state_v_first=True, ssm_state_indices=sidx,
                                       use_qk_l2norm_in_kernel=True, out=out)
        return o
    if impl == "gather":
        from fla.ops.gated_delta_rule.fused_recurrent import fused_recurrent_gated_delta_rule

        lidx = idx.to(torch.int64)
        h0 = state.index_select(0, lidx)
        o, ht = fused_recurrent_gated_delta_rule(q, k, v, g=g, beta=beta, scale=scale,
                                                 initial_state=h0, output_final_state=True,
                                                 use_qk_l2norm_in_kernel=True, state_v_first=True)
        state.index_copy_(0, lidx, ht)
        if out is not None:
            out.copy_(o)
            return out
        return o
    raise ValueError(f"fla_gdn_decode: impl must be 'inplace' or 'gather'; got {impl!r}")
