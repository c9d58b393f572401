"""ReplayConfig: the user-facing settings of a replay state cache, validated up front.

Every invalid combination raises ``ValueError`` naming the field, the value and what is allowed,
before any buffer is allocated or any engine is built.
"""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Optional

# Bits per stored element, used to order precisions (a read copy must not be more precise than
# the recurrence checkpoint it is derived from).
PRECISION_BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8_e4m3": 8, "nvfp4": 4}

RECURRENCE_DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3")
READ_DTYPES = ("none", "fp16", "fp8_e4m3", "nvfp4")
ROUNDINGS = ("rtn", "sr")
FAMILIES = ("mamba2", "gdn")
CHECKPOINT_MODES = ("separate", "shared")
U_DTYPES = ("fp16", "bf16")

MAX_WINDOW = 64       # kernels stage up to L + T records on chip
MAX_VERIFY = 8        # kernels verify at most 8 drafts per step
FP8_BLOCK = 128       # FP8-E4M3: one FP32 scale per 128 contiguous elements along K
NVFP4_BLOCK = 16      # NVFP4: one E4M3 scale per 16 elements along K


def ring_capacity_for(window: int, max_verify: int, speculative: bool) -> int:
    """Ring rows per slot (C) of a replay cache: ``window`` in standard mode, ``window + max_verify`` in
    speculative mode (design.md section 3). A standard step replays at most L records including its own (the flush
    step at h = L - 1 folds the L - 1 ring records and its token), so L rows hold every window and a flush moves
    the origin by L = C rows, i.e. not at all; a verify step writes its T drafts behind up to L committed records.
    The callers parse their own mode. The TensorRT plugins' ``ringCapacity`` (cpp_plugins/plugins/core/schema.cpp)
    is the same rule."""
    return int(window) + (int(max_verify) if speculative else 0)


# The split kernels (and the small-batch one-launch / warp-item steps) hold one ring record per lane of a warp: a step
# replaying more records (standard: window; verify: window + T) runs on the other designs (docs/design.md section 8)
SPLIT_KERNEL_MAX_RECORDS = 32


class ReplayPerformanceWarning(UserWarning):
    """A configuration that runs correctly but leaves the fast kernel designs (see :func:`split_kernel_note`)."""


def split_kernel_note(window: int, max_verify: int, mode: int) -> Optional[str]:
    """Why steps of a replay configuration cannot run on the split kernels, or None when every step can. ``mode``:
    0 standard (a step replays ``window`` records), 1 speculative (``window + T`` with T up to ``max_verify``). On
    the sixty-seventh session's H100 grid a T = 4 verify step at L = 32 took 1.06-1.37x (Mamba-2) and 1.32-1.73x (GDN)
    of a conventional step, against 0.58-0.90x / 0.58-1.03x at L = 8 and 16 (B >= 64), and a verify step at L = 32
    1.2x (T = 2) to 2-3x (T = 8) the time of one at L = 16 (B = 256; part of that is the longer window's records;
    docs/benchmarks.md "Sixty-seventh session")."""
    records = window if mode == 0 else window + max_verify
    if records <= SPLIT_KERNEL_MAX_RECORDS:
        return None
    if mode == 0:
        return (f"window={window} > {SPLIT_KERNEL_MAX_RECORDS}: every replay step runs on the other designs (stream "
                f"or persistent kernels; the split kernels take at most {SPLIT_KERNEL_MAX_RECORDS} records per step), "
                f"slower than at window <= {SPLIT_KERNEL_MAX_RECORDS}")
    return (f"window + max_verify = {window} + {max_verify} = {records} > {SPLIT_KERNEL_MAX_RECORDS}: verify steps "
            f"with window + T > {SPLIT_KERNEL_MAX_RECORDS} run on the other designs (stream or persistent kernels; the "
            f"split kernels take at most {SPLIT_KERNEL_MAX_RECORDS} records per step): on an H100 a verify step at "
            f"window 32 took 1.2x (T = 2) to 2-3x (T = 8) the time of one at window 16; window <= "
            f"{SPLIT_KERNEL_MAX_RECORDS - max_verify} keeps every step on them (docs/benchmarks.md \"Sixty-seventh "
            f"session\")")


def warn_past_split_kernels(owner: str, window: int, max_verify: int, mode: int, stacklevel: int = 3) -> None:
    """Warn (ReplayPerformanceWarning, prefixed with ``owner``) when :func:`split_kernel_note` has a note: the replay
    caches at construction, the TensorRT field builders at network build time."""
    note = split_kernel_note(window, max_verify, mode)
    if note is not None:
        warnings.warn(f"{owner}: {note}", ReplayPerformanceWarning, stacklevel=stacklevel)


def _allowed(field: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"ReplayConfig: field '{field}' must be one of {list(allowed)}; got {value!r}")


@dataclass(frozen=True)
class ReplayConfig:
    """Settings of one replay state cache.

    Attributes:
        window: replay window L (committed records kept before a flush), in [1, 64].
        max_verify: largest verify length T per step (1 = standard decoding only), in [1, min(8, L)].
        recurrence_dtype: format of the checkpoint that carries the recurrence.
        read_dtype: format of the separate read copy used on non-flush steps ('none' = no copy).
        rounding: rounding of recurrence-checkpoint writes; default 'sr' for a low-precision
            recurrence, None (exact) for fp32. The read copy is always written with RTN.
        checkpoint_mode: 'separate' (Algorithms 3/6) or 'shared' (one low-precision copy that is
            both read and fed back; the paper's baseline).
        family: 'mamba2' or 'gdn' (optional; enables family-specific checks).
        key_dim: K (Mamba-2 dstate, GDN head_k_dim) when known; enables block-size checks.
        u_dtype: GDN correction record dtype ('fp16' default, as the paper recommends).
        seed: Philox seed of stochastic rounding.
    """

    window: int = 16
    max_verify: int = 1
    recurrence_dtype: str = "fp32"
    read_dtype: str = "none"
    rounding: Optional[str] = None
    checkpoint_mode: str = "separate"
    family: Optional[str] = None
    key_dim: Optional[int] = None
    u_dtype: str = "fp16"
    seed: int = 0

    def __post_init__(self):
        for name in ("window", "max_verify", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"ReplayConfig: field '{name}' must be an int; got {type(v).__name__} {v!r}")
        if not 1 <= self.window <= MAX_WINDOW:
            raise ValueError(f"ReplayConfig: field 'window' must be in [1, {MAX_WINDOW}]; got {self.window}")
        if not 1 <= self.max_verify <= MAX_VERIFY:
            raise ValueError(
                f"ReplayConfig: field 'max_verify' must be in [1, {MAX_VERIFY}]; got {self.max_verify}")
        if self.max_verify > self.window:
            raise ValueError(
                f"ReplayConfig: field 'max_verify' must be <= window ({self.window}) so the drafts fit "
                f"behind the committed records; got {self.max_verify}")
        _allowed("recurrence_dtype", self.recurrence_dtype, RECURRENCE_DTYPES)
        _allowed("read_dtype", self.read_dtype, READ_DTYPES)
        _allowed("checkpoint_mode", self.checkpoint_mode, CHECKPOINT_MODES)
        _allowed("u_dtype", self.u_dtype, U_DTYPES)
        if self.family is not None:
            _allowed("family", self.family, FAMILIES)
        if self.rounding is not None:
            _allowed("rounding", self.rounding, ROUNDINGS)
            if self.recurrence_dtype == "fp32":
                raise ValueError(
                    f"ReplayConfig: field 'rounding' applies to a low-precision recurrence checkpoint; "
                    f"got {self.rounding!r} with recurrence_dtype 'fp32' (leave rounding unset)")
        if self.read_dtype != "none":
            rb, wb = PRECISION_BITS[self.read_dtype], PRECISION_BITS[self.recurrence_dtype]
            if rb > wb:
                raise ValueError(
                    f"ReplayConfig: field 'read_dtype' must not be more precise than recurrence_dtype "
                    f"'{self.recurrence_dtype}' ({wb} bits); got {self.read_dtype!r} ({rb} bits)")
            if self.read_dtype == self.recurrence_dtype:
                raise ValueError(
                    f"ReplayConfig: field 'read_dtype' equal to recurrence_dtype duplicates the checkpoint; "
                    f"got {self.read_dtype!r} (use read_dtype='none')")
        if self.checkpoint_mode == "shared":
            if self.read_dtype != "none":
                raise ValueError(
                    f"ReplayConfig: field 'read_dtype' must be 'none' with checkpoint_mode 'shared' (one "
                    f"copy is both read and fed back); got {self.read_dtype!r}")
            if self.recurrence_dtype == "fp32":
                raise ValueError(
                    "ReplayConfig: field 'checkpoint_mode' 'shared' needs a low-precision recurrence_dtype "
                    "(fp16, bf16 or fp8_e4m3); got recurrence_dtype 'fp32'")
        if self.key_dim is not None:
            if not isinstance(self.key_dim, int) or self.key_dim < 1:
                raise ValueError(f"ReplayConfig: field 'key_dim' must be a positive int; got {self.key_dim!r}")
            for fmt, block in (("nvfp4", NVFP4_BLOCK), ("fp8_e4m3", FP8_BLOCK)):
                if fmt in (self.read_dtype, self.recurrence_dtype) and self.key_dim % block:
                    raise ValueError(
                        f"ReplayConfig: field 'key_dim' must be a multiple of {block} for {fmt} "
                        f"(one scale per {block} elements along K); got {self.key_dim}")

    @property
    def ring_capacity(self) -> int:
        """Records per slot: L in standard mode (max_verify = 1), L committed + T drafts in speculative mode
        (design.md section 3; :func:`ring_capacity_for`)."""
        return ring_capacity_for(self.window, self.max_verify, self.speculative)

    @property
    def effective_rounding(self) -> Optional[str]:
        if self.recurrence_dtype == "fp32":
            return None
        return self.rounding or "sr"

    @property
    def speculative(self) -> bool:
        return self.max_verify > 1

    def to_dict(self) -> dict:
        return asdict(self)
