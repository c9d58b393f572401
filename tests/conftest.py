import pytest


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
