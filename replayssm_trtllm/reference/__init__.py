"""Float64 reference (the spec of every kernel, op and plugin; docs/design.md).

Conventional recurrences (``*_decode_naive``, with per-token state snapshots), the generic replay
math (Eq. 5, 6, 10, 11), the paper's Algorithms 1-6 over one sequence, and batched replay caches in
the exact device layout of docs/design.md section 3. Everything computes in torch float64 on CPU.
"""
from ..state.cursors import ReplayCursors, ReplayInvariantError, ReplayPlan
from .algorithms import (
    ReplaySequence,
    alg1_mamba2_standard,
    alg2_mamba2_speculative,
    alg3_mamba2_two_precision,
    alg4_gdn_standard,
    alg5_gdn_speculative,
    alg6_gdn_two_precision,
    commit_accepted,
    rederive_corrections,
)
from .caches import GdnReplayCacheRef, Mamba2ReplayCacheRef
from .gdn import default_scale, gdn_decode_naive, gdn_gates, l2norm
from .mamba2 import expand_groups, mamba2_decode_naive, mamba2_gates, silu, softplus
from .replay import (
    decay_matrix,
    gdn_draft_corrections,
    gdn_draft_corrections_sequential,
    output_only,
    replay,
)
from .testing import cast_quantizer

__all__ = [
    # Mamba-2
    "mamba2_gates", "mamba2_decode_naive", "softplus", "silu", "expand_groups",
    # GDN
    "gdn_gates", "gdn_decode_naive", "l2norm", "default_scale",
    # generic replay math
    "decay_matrix", "replay", "output_only", "gdn_draft_corrections", "gdn_draft_corrections_sequential",
    # algorithms over one sequence
    "ReplaySequence", "commit_accepted", "rederive_corrections",
    "alg1_mamba2_standard", "alg2_mamba2_speculative", "alg3_mamba2_two_precision",
    "alg4_gdn_standard", "alg5_gdn_speculative", "alg6_gdn_two_precision",
    # batched caches and the state machine
    "Mamba2ReplayCacheRef", "GdnReplayCacheRef", "ReplayCursors", "ReplayPlan", "ReplayInvariantError",
    "cast_quantizer",
]
