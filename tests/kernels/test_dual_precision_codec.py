"""The GPU codec parity tests (tests/formats/test_codec_cuda_parity.py) collected under tests/kernels too,
so `pytest -m gpu tests/kernels` (scripts/gpu_run.sh) runs them."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_codec_cuda_parity", Path(__file__).resolve().parents[1] / "formats" / "test_codec_cuda_parity.py")
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)

pytestmark = _mod.pytestmark
test_encode_bit_exact = _mod.test_encode_bit_exact
test_decode_bit_exact = _mod.test_decode_bit_exact
test_encode_small_sanitize = _mod.test_encode_small_sanitize
