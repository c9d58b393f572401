import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The float64 reference works on tiny tensors: extra threads only add contention on shared CPUs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
