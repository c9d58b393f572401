"""Replay state machine: per-slot ring cursors, flush plan and commit (docs/design.md section 3)."""
from .cursors import (
    SPECULATIVE,
    STANDARD,
    ReplayCursors,
    ReplayInvariantError,
    ReplayPlan,
    commit_update,
    flush_mask,
    mode_name,
    num_folded,
    parse_mode,
)

__all__ = [
    "ReplayCursors",
    "ReplayInvariantError",
    "ReplayPlan",
    "STANDARD",
    "SPECULATIVE",
    "commit_update",
    "flush_mask",
    "mode_name",
    "num_folded",
    "parse_mode",
]
