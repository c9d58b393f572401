import pytest

from _shard_select import parse_shard, shard_keep


def pytest_addoption(parser):
    parser.addoption("--shard", default=None, metavar="I/N",
                     help="run shard I of N of the selection (every N-th test by node id; tests/_shard_select.py), "
                          "e.g. to split the GPU suite over calls (scripts/gpu_run.sh --test-shard I/N)")


def _gpu_ready() -> bool:
    try:
        import torch
        if not torch.cuda.is_available():
            return False
        from replayssm_trtllm.ops._lib import is_available
        return is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    shard = config.getoption("--shard")
    if shard:
        try:
            index, count = parse_shard(shard)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        keep = shard_keep([item.nodeid for item in items], index, count)
        dropped = [item for item, k in zip(items, keep) if not k]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item, k in zip(items, keep) if k]
    if _gpu_ready():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and the built kernel library")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """CI machines have 2 shared cores and the CPU tests work on small tensors: extra torch threads
    only add contention."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _release_gpu_cache(request):
    """GPU tests run 12-16 pytest-xdist workers on one GPU: give cached blocks back after each
    test so the workers' caching allocators do not starve each other (seen as OOM at 16 workers)."""
    yield
    if "gpu" in request.keywords:
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
