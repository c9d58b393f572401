"""`pytest --shard I/N` (tests/_shard_select.py, tests/conftest.py): the split of a selection over several GPU calls."""
import subprocess
import sys
from pathlib import Path

import pytest

from _shard_select import parse_shard, shard_keep

REPO = Path(__file__).resolve().parents[2]


def test_parse_shard_accepts_and_names_bad_values():
    assert parse_shard("1/1") == (1, 1) and parse_shard("3/4") == (3, 4)
    for bad in ("0/2", "3/2", "1", "a/b", "1/2/3", ""):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_partition_the_selection(count):
    ids = [f"tests/x/test_{f}.py::test_{t}[{p}]" for f in "cab" for t in range(5) for p in range(3)]
    kept = [shard_keep(ids, i, count) for i in range(1, count + 1)]
    for j in range(len(ids)):
        assert sum(k[j] for k in kept) == 1  # disjoint, union = selection
    sizes = [sum(k) for k in kept]
    assert max(sizes) - min(sizes) <= 1
    # independent of the order the items were collected in (each xdist worker collects on its own)
    rev = list(reversed(ids))
    for i in range(1, count + 1):
        a = {x for x, k in zip(ids, shard_keep(ids, i, count)) if k}
        b = {x for x, k in zip(rev, shard_keep(rev, i, count)) if k}
        assert a == b
    if count == 3:  # one test's parametrizations spread over the shards
        fam = [j for j, x in enumerate(ids) if "test_a.py::test_0[" in x]
        assert {next(i for i in range(count) if kept[i][j]) for j in fam} == {0, 1, 2}


def _collected(*args):
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/core/test_test_sharding.py", *args], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    return out.returncode, [ln for ln in out.stdout.splitlines() if "::" in ln], out.stdout + out.stderr


def test_pytest_shard_option_end_to_end():
    rc, every, _ = _collected()
    assert rc == 0 and len(every) >= 6
    halves = [_collected("--shard", f"{i}/2") for i in (1, 2)]
    assert all(rc == 0 for rc, _, _ in halves)
    a, b = set(halves[0][1]), set(halves[1][1])
    assert a and b and not a & b and a | b == set(every)
    rc, _, text = _collected("--shard", "3/2")
    assert rc != 0 and "--shard: expected 1 <= I <= N" in text
