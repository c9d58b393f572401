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
