import shutil

import pytest

from replayssm_trtllm.trt.core import CoreLib


@pytest.fixture(scope="session")
def core(tmp_path_factory):
    """The plugin core built from source with g++ (no TensorRT, no GPU)."""
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("no C++ compiler (g++/c++) on PATH: the plugin core cannot be built for these tests")
    return CoreLib.build(tmp_path_factory.mktemp("rssm_core"))
