"""Splitting the test selection into N shards (``pytest --shard I/N``, tests/conftest.py), so that a suite longer than
one GPU call (the whole GPU suite on an H100 needs more than the 420 s a call left it in the seventieth session) runs
as N calls. Shard I of N keeps every N-th item of the selection sorted by node id, starting at the (I-1)-th: the
shards are disjoint, their union is the selection, their sizes differ by at most one, and a test's parametrizations
spread over the shards (so a slow test family does not land in one shard). The split depends only on the node ids,
so every pytest-xdist worker, collecting on its own, computes the same shard."""
from __future__ import annotations

from typing import Sequence, Tuple


def parse_shard(text: str) -> Tuple[int, int]:
    """``"I/N"`` -> (I, N) with 1 <= I <= N; a ValueError naming the option and what was given otherwise."""
    parts = str(text).split("/")
    try:
        if len(parts) != 2:
            raise ValueError
        index, count = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"--shard: expected I/N with integers 1 <= I <= N (e.g. 1/2); got {text!r}") from None
    if not 1 <= index <= count:
        raise ValueError(f"--shard: expected 1 <= I <= N; got I = {index}, N = {count}")
    return index, count


def shard_keep(nodeids: Sequence[str], index: int, count: int) -> list:
    """One flag per node id (in the given order): whether shard ``index`` of ``count`` keeps it."""
    order = sorted(range(len(nodeids)), key=lambda i: nodeids[i])
    keep = [False] * len(nodeids)
    for rank, i in enumerate(order):
        keep[i] = rank % count == index - 1
    return keep
