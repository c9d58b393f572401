import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    """The CI machines have 2 shared cores: small tensors run fastest on one thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
