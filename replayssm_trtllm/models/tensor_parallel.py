"""Tensor parallelism of the SSM mixers: which heads a rank holds, its slice of every mixer tensor, and an
emulation of the ranks in one process.

The 120B-class models (Nemotron-3-Super, Qwen3.5-122B) are served with tensor parallelism. An SSM mixer splits
the way TensorRT-LLM's and vLLM's Mamba-2 and Gated DeltaNet layers split it:

- heads are split into ``tp_size`` contiguous blocks, and so are the key heads (Mamba-2 groups, GDN key heads),
  so that every head of a rank finds its group / key head on the same rank;
- the input projections are column-parallel (each rank computes the rows of its heads: Mamba-2 ``z``, ``x``,
  ``B``, ``C``, ``dt``; GDN ``q``, ``k``, ``v``, ``z``, ``b``, ``a``), the depthwise conv, the gate and the
  per-head parameters are sliced with them;
- the norm stays local: Mamba-2's grouped RMSNorm normalizes over one group's channels (``d_inner / n_groups``),
  which a rank holds whole; GDN's per-head RMSNorm weight ``[head_v]`` is the same on every rank;
- ``out_proj`` is row-parallel: each rank multiplies its channels, and the ranks' partial outputs are summed (the
  all-reduce). A bias is added once, on rank 0.

The recurrence needs nothing from other ranks, so each rank runs the replay kernels (and keeps its own replay
cache: checkpoint, ring and cursors) on its heads only: per rank 1 / ``tp_size`` of the state, the ring and the
outputs, the same window and flush schedule on every rank (all ranks see the same tokens and accepted counts).
What changes per rank is the kernels' work size, batch x heads, which picks the kernel design
(``replayssm-trtllm kernels --tp N``).

Requirements (:func:`tensor_parallel_problems`): ``tp_size`` divides the heads and the key heads (Nemotron-3:
8 groups, so TP <= 8; Qwen3.5: 16 key heads, TP <= 16). A group split over ranks would need a cross-rank norm
(Mamba-2) or key (GDN); it is refused.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from .hf_config import GDN, MAMBA2, HfConfigError, SsmMixerSpec


def split_problems(family: str, heads: int, key_heads: int, tp_size) -> Tuple[str, ...]:
    """Why a layer of ``heads`` heads and ``key_heads`` key heads (Mamba-2 groups, GDN key heads) cannot be split
    over ``tp_size`` ranks, naming the config.json fields (empty: it can)."""
    if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1:
        return (f"tp_size must be a positive integer; got {tp_size!r}",)
    heads_field, key_field = (("mamba_num_heads", "n_groups") if family == MAMBA2
                              else ("linear_num_value_heads", "linear_num_key_heads"))
    errs = []
    if heads % tp_size:
        errs.append(f"{heads_field}={heads} is not divisible by tp_size={tp_size}")
    if key_heads % tp_size:
        what = ("the grouped RMSNorm and B / C of a group would span ranks" if family == MAMBA2
                else "a key head's q / k would span ranks")
        errs.append(f"{key_field}={key_heads} is not divisible by tp_size={tp_size} ({what}; "
                    f"tp_size must divide {key_heads})")
    return tuple(errs)


def tensor_parallel_problems(spec: SsmMixerSpec, tp_size: int) -> Tuple[str, ...]:
    """Why ``spec``'s mixers cannot be split over ``tp_size`` ranks (empty: they can)."""
    return split_problems(spec.family, spec.heads, spec.key_heads, tp_size)


def rank_preset(preset, tp_size: int):
    """A :class:`~replayssm_trtllm.presets.ModelPreset` (a layer shape) as one rank of ``tp_size`` holds it: heads
    and key heads divided (what picks a rank's kernel design and sizes its replay cache). Raises ValueError naming
    the field when ``tp_size`` does not divide them."""
    errs = split_problems(preset.family, preset.heads, preset.key_heads, tp_size)
    if errs:
        raise ValueError(f"{preset.name}: cannot split over {tp_size} ranks: " + "; ".join(errs))
    if tp_size == 1:
        return preset
    return replace(preset, name=f"{preset.name}, one rank of TP {tp_size}", heads=preset.heads // tp_size,
                   key_heads=preset.key_heads // tp_size)


def check_split(spec: SsmMixerSpec, tp_size: int, tp_rank: Optional[int] = None, who: str = "tensor_parallel") -> None:
    """Raises (HfConfigError naming the config field, or ValueError for the rank) unless ``spec`` splits over
    ``tp_size`` ranks and ``tp_rank`` (when given) is one of them."""
    errs = tensor_parallel_problems(spec, tp_size)
    if errs:
        raise HfConfigError(f"{who}: {spec.model_type} mixers cannot be split over {tp_size} ranks: "
                            + "; ".join(errs))
    if tp_rank is not None and (isinstance(tp_rank, bool) or not isinstance(tp_rank, int)
                                or not 0 <= tp_rank < tp_size):
        raise ValueError(f"{who}: tp_rank must be an integer in [0, {tp_size}); got {tp_rank!r}")


def rank_spec(spec: SsmMixerSpec, tp_size: int) -> SsmMixerSpec:
    """The mixer spec of one rank: ``heads`` and ``key_heads`` divided by ``tp_size``, everything else the same
    (``hidden_size`` included: the projections still read the whole hidden state)."""
    check_split(spec, tp_size, who="rank_spec")
    if tp_size == 1:
        return spec
    extra = dict(spec.extra)
    extra["tensor_parallel"] = {"tp_size": tp_size, "heads": spec.heads, "key_heads": spec.key_heads}
    return replace(spec, heads=spec.heads // tp_size, key_heads=spec.key_heads // tp_size, extra=extra)


def _blocks(sizes: Sequence[int], tp_size: int, tp_rank: int) -> List[Tuple[int, int]]:
    """Row ranges of rank ``tp_rank`` in a tensor whose rows are the concatenation of ``sizes`` segments, each
    split into ``tp_size`` equal contiguous parts."""
    out, start = [], 0
    for n in sizes:
        part = n // tp_size
        out.append((start + tp_rank * part, start + (tp_rank + 1) * part))
        start += n
    return out


def _take_rows(t: torch.Tensor, ranges: Sequence[Tuple[int, int]], dim: int = 0) -> torch.Tensor:
    return torch.cat([t.narrow(dim, a, b - a) for a, b in ranges], dim=dim).contiguous()


def _layout(spec: SsmMixerSpec) -> Dict[str, Tuple[str, Tuple[int, ...]]]:
    """How each mixer tensor splits: ``name -> (kind, segment sizes along the split dimension)`` with kind
    ``"rows"`` (dim 0, each segment split), ``"cols"`` (dim 1 of out_proj), ``"replicated"`` or ``"bias0"``
    (out_proj's bias: rank 0 only)."""
    vdim, kdim, H = spec.value_dim, spec.key_dim, spec.heads
    if spec.family == MAMBA2:
        in_proj = (vdim, vdim, kdim, kdim, H)                      # z | x B C | dt
        return {"in_proj.weight": ("rows", in_proj), "in_proj.bias": ("rows", in_proj),
                "conv1d.weight": ("rows", (vdim, kdim, kdim)), "conv1d.bias": ("rows", (vdim, kdim, kdim)),
                "dt_bias": ("rows", (H,)), "A_log": ("rows", (H,)), "D": ("rows", (H,)),
                "norm.weight": ("rows", (vdim,)), "out_proj.weight": ("cols", (vdim,)),
                "out_proj.bias": ("bias0", ())}
    return {"in_proj_qkv.weight": ("rows", (kdim, kdim, vdim)), "in_proj_z.weight": ("rows", (vdim,)),
            "in_proj_b.weight": ("rows", (H,)), "in_proj_a.weight": ("rows", (H,)),
            "conv1d.weight": ("rows", (kdim, kdim, vdim)), "conv1d.bias": ("rows", (kdim, kdim, vdim)),
            "dt_bias": ("rows", (H,)), "A_log": ("rows", (H,)), "norm.weight": ("replicated", ()),
            "out_proj.weight": ("cols", (vdim,)), "out_proj.bias": ("bias0", ())}


def shard_mixer_weights(spec: SsmMixerSpec, weights: Mapping[str, torch.Tensor], tp_size: int,
                        tp_rank: int) -> Dict[str, torch.Tensor]:
    """Rank ``tp_rank``'s slice of one mixer's tensors (the names and layout of
    :func:`~.checkpoint.load_mixer_weights`; Qwen3-Next's packed projections unpacked), for a mixer of
    :func:`rank_spec` ``(spec, tp_size)``. Every tensor is checked against the full spec's shape first."""
    check_split(spec, tp_size, tp_rank, who="shard_mixer_weights")
    from .checkpoint import mixer_weight_shapes
    layout = _layout(spec)
    full = mixer_weight_shapes(replace(spec, packed_projections=False))
    out = {}
    for name, t in weights.items():
        if name not in layout:
            raise ValueError(f"shard_mixer_weights: {name!r} is not a {spec.family} mixer tensor this module "
                             f"splits (known: {sorted(layout)}; Qwen3-Next's packed projections must be unpacked "
                             f"first, as load_mixer_weights does)")
        if name in full and tuple(t.shape) != tuple(full[name]):
            raise ValueError(f"shard_mixer_weights: {name!r} has shape {list(t.shape)}; the full "
                             f"{spec.model_type} mixer's is {list(full[name])}")
        kind, sizes = layout[name]
        if kind == "rows":
            out[name] = _take_rows(t, _blocks(sizes, tp_size, tp_rank), 0)
        elif kind == "cols":
            out[name] = _take_rows(t, _blocks(sizes, tp_size, tp_rank), 1)
        elif kind == "replicated":
            out[name] = t.clone()
        else:  # bias0
            out[name] = t.clone() if tp_rank == 0 else torch.zeros_like(t)
    return out


def gather_mixer_weights(spec: SsmMixerSpec, shards: Sequence[Mapping[str, torch.Tensor]]
                         ) -> Dict[str, torch.Tensor]:
    """The inverse of :func:`shard_mixer_weights`: the full mixer's tensors from all ranks' slices (rank order).
    Replicated tensors must agree across ranks; out_proj's bias is rank 0's (the other ranks' are zero)."""
    tp_size = len(shards)
    check_split(spec, tp_size, who="gather_mixer_weights")
    layout = _layout(spec)
    out = {}
    for name in shards[0]:
        kind, sizes = layout[name]
        parts = [s[name] for s in shards]
        if kind in ("rows", "cols"):
            dim = 0 if kind == "rows" else 1
            segs = []
            for i, n in enumerate(sizes):
                off = sum(n_ // tp_size for n_ in sizes[:i])
                segs.extend(p.narrow(dim, off, n // tp_size) for p in parts)
            out[name] = torch.cat(segs, dim=dim)
        elif kind == "replicated":
            if any(not torch.equal(parts[0], p) for p in parts[1:]):
                raise ValueError(f"gather_mixer_weights: the replicated {name!r} differs between ranks")
            out[name] = parts[0].clone()
        else:
            out[name] = parts[0].clone()
    return out


class TensorParallelDecoder:
    """``tp_size`` rank decoders (:class:`~.backends.SsmDecoder` over :func:`rank_spec` mixers) run in one
    process, their outputs summed as the all-reduce after ``out_proj`` would: the single-process check that a
    split model decodes like the unsplit one (tests, ``replayssm-trtllm checkpoint --tp``).

    Same calls as :class:`~.backends.SsmDecoder` (``reset``, ``prefill``, ``step``, ``commit``); ``spec`` is the
    full model's spec, ``ranks`` the rank decoders."""

    def __init__(self, spec: SsmMixerSpec, ranks: Sequence):
        check_split(spec, len(ranks), who="TensorParallelDecoder")
        want = rank_spec(spec, len(ranks))
        for r, d in enumerate(ranks):
            if (d.spec.heads, d.spec.key_heads, d.spec.ssm_layers) != (want.heads, want.key_heads, want.ssm_layers):
                raise ValueError(f"TensorParallelDecoder: rank {r}'s decoder has heads={d.spec.heads}, "
                                 f"key_heads={d.spec.key_heads}, SSM layers {list(d.spec.ssm_layers)}; a rank of "
                                 f"{len(ranks)} needs heads={want.heads}, key_heads={want.key_heads}, SSM layers "
                                 f"{list(want.ssm_layers)}")
        self.spec, self.ranks = spec, list(ranks)
        self.mixers = self.ranks[0].mixers     # device and dtype of the inputs (models.compare)

    @classmethod
    def from_weights(cls, spec: SsmMixerSpec, weights: Mapping[int, Mapping[str, torch.Tensor]], tp_size: int,
                     backend_of, dtype: torch.dtype = torch.float64, device="cpu") -> "TensorParallelDecoder":
        """The ``tp_size`` ranks of ``spec``'s mixers over ``weights`` (``{model layer: full mixer tensors}``): each rank
        an :class:`~.backends.SsmDecoder` over :func:`rank_spec` mixers of its slices and ``backend_of(rank spec)``."""
        from .backends import SsmDecoder
        from .mixers import make_mixer
        rs = rank_spec(spec, tp_size)
        ranks = [SsmDecoder(rs, {i: make_mixer(rs, shard_mixer_weights(spec, w, tp_size, r), dtype, device)
                                 for i, w in weights.items()}, backend_of(rs)) for r in range(tp_size)]
        return cls(spec, ranks)

    def reset(self, slots: Sequence[int]) -> None:
        for d in self.ranks:
            d.reset(slots)

    def prefill(self, layer: int, hidden: torch.Tensor, slots) -> torch.Tensor:
        return sum(d.prefill(layer, hidden, slots) for d in self.ranks)

    def step(self, layer: int, hidden: torch.Tensor, slots) -> torch.Tensor:
        return sum(d.step(layer, hidden, slots) for d in self.ranks)

    def commit(self, accepted: Optional[torch.Tensor] = None) -> None:
        for d in self.ranks:
            d.commit(accepted)

    def export_requests(self, slots: Sequence[int]) -> list:
        """Each rank's :meth:`~.backends.SsmDecoder.export_requests` (rank order): a rank's states hold its heads."""
        return [d.export_requests(slots) for d in self.ranks]

    def import_requests(self, slots: Sequence[int], states: Sequence) -> None:
        """Each rank resumes its own part of :meth:`export_requests` (one entry per rank, rank order)."""
        if len(states) != len(self.ranks):
            raise ValueError(f"TensorParallelDecoder.import_requests: one RequestStates per rank ({len(self.ranks)}); "
                             f"got {len(states)}")
        for d, st in zip(self.ranks, states):
            d.import_requests(slots, st)
