"""CPU test of the Mamba-2 bench's FlashInfer checkpointing_ssu handling: a JIT module that fails to build is tried
once per layer shape; the other token counts and batch sizes of that shape are skipped with a message (each failing
build cost ~50 s of device time), and other failures do not skip anything."""
import types

import pytest

torch = pytest.importorskip("torch")

from replayssm_trtllm.bench import mamba2 as bench_m2  # noqa: E402


class _Peers:
    """Stands in for bench.peers: the conventional peer fails (as on a machine without the library), the
    checkpointing peer raises `error` at construction and counts the attempts."""

    def __init__(self, error):
        self.error, self.attempts = error, 0

    def flashinfer_ssu_decode(self, *a, **k):
        raise RuntimeError("peer unavailable here")

    def FlashInferCheckpointingSSU(self, *a, **k):  # noqa: N802 (the peer's class name)
        self.attempts += 1
        raise self.error


def _layer(B=3, H=2, P=4, N=8, T=8):
    def inp(t):
        return {"x": torch.randn(B, t, H, P), "Bm": torch.randn(B, t, 1, N), "Cm": torch.randn(B, t, 1, N),
                "z": torch.randn(B, t, H, P), "dt_raw": torch.randn(B, t, H), "y": torch.empty(B, t, H, P)}
    return types.SimpleNamespace(nl=1, inputs={1: inp(1), 4: inp(4), 8: inp(T)}, conv=[torch.randn(B, H, P, N)],
                                 ckpt=[torch.randn(B, H, P, N)], A=torch.randn(H), D=torch.randn(H),
                                 dt_bias=torch.randn(H), sbi=torch.arange(B, dtype=torch.int32), G=1)


def _run(peers, shape, B, capsys):
    args = types.SimpleNamespace(repeats=1)
    out = bench_m2._flashinfer_cases(peers, _layer(B=B), None, shape, B, 16, [1, 4, 8], args,
                                     lambda **k: None, 1, 1.0, torch.Generator().manual_seed(0))
    return out, capsys.readouterr().out


def test_build_failure_is_tried_once_per_shape(capsys, monkeypatch):
    monkeypatch.setattr(bench_m2, "_FI_CSSU_BUILD_FAILED", set())
    peers = _Peers(RuntimeError("Ninja build failed. Ninja output:\n[1/3] nvcc ... error"))
    out, text = _run(peers, "nano-test", 3, capsys)
    assert out == {} and peers.attempts == 1
    assert "T=1: failed: RuntimeError: Ninja build failed" in text
    assert text.count("skipped (its JIT module failed to build for nano-test above)") == 2  # T = 4 and 8
    out, text = _run(peers, "nano-test", 1, capsys)  # another batch size of the same shape: not tried again
    assert peers.attempts == 1 and text.count("skipped") == 3
    out, text = _run(peers, "super-test", 3, capsys)  # another shape is tried
    assert peers.attempts == 2


def test_other_failures_skip_nothing(capsys, monkeypatch):
    monkeypatch.setattr(bench_m2, "_FI_CSSU_BUILD_FAILED", set())
    peers = _Peers(ValueError("max_window must be <= 16"))
    out, text = _run(peers, "super-test", 3, capsys)
    assert out == {} and peers.attempts == 3  # T = 1, 4, 8 each tried
    cssu = [l for l in text.splitlines() if "checkpointing_ssu T=" in l]
    assert len(cssu) == 3 and all("failed: ValueError: max_window" in l for l in cssu)
    assert "skipped" not in text
