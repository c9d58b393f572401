"""The kernel library loader (replayssm_trtllm.ops._lib, CPU): an explicit RSSM_KERNEL_LIB that names a missing file
is an error, not a silent fall back to another (maybe stale) build."""
from __future__ import annotations

import pytest

from replayssm_trtllm.ops import _lib


def test_explicit_library_path_must_exist(monkeypatch, tmp_path):
    monkeypatch.setattr(_lib, "_lib", None)  # no library loaded yet in this process, as far as the loader knows
    monkeypatch.setenv("RSSM_KERNEL_LIB", str(tmp_path / "missing.so"))
    with pytest.raises(_lib.KernelLibraryError, match=r"RSSM_KERNEL_LIB=.*missing\.so: no such file"):
        _lib.load_library()


def test_not_found_message_names_every_place(monkeypatch, tmp_path):
    monkeypatch.setattr(_lib, "_lib", None)
    monkeypatch.delenv("RSSM_KERNEL_LIB", raising=False)
    monkeypatch.setattr(_lib, "_candidates", lambda: iter([tmp_path / "a.so", tmp_path / "b.so"]))
    with pytest.raises(_lib.KernelLibraryError, match=r"not found \(looked in: .*a\.so, .*b\.so\).*RSSM_KERNEL_LIB"):
        _lib.load_library()


def test_status_line_names_a_missing_explicit_path(monkeypatch, tmp_path):
    """library_status() (dev.sh prints it) reports an explicit RSSM_KERNEL_LIB that names no file instead of raising."""
    monkeypatch.setenv("RSSM_KERNEL_LIB", str(tmp_path / "missing.so"))
    line = _lib.library_status()
    assert line.startswith("CUDA kernel library NOT found") and "missing.so: no such file" in line, line


def test_arch_matches_cmake_arch_syntax():
    """The library reports its CMAKE_CUDA_ARCHITECTURES entries; "-real" (SASS only) and "-virtual" (PTX only)
    suffixes name the same compute capability (found on the H200: a "90a-real" build was refused as not sm_90)."""
    from replayssm_trtllm.ops._lib import arch_matches
    assert arch_matches(["90a"], 9, 0)
    assert arch_matches(["90a-real"], 9, 0)
    assert arch_matches(["80-virtual", "90a-real"], 9, 0)
    assert arch_matches(["100a-real", "120"], 12, 0)
    assert arch_matches(["unknown"], 8, 6)
    assert not arch_matches(["90a-real"], 10, 0)
    assert not arch_matches(["100a", "120-real"], 9, 0)


def test_host_function_binds_once_and_names_a_missing_symbol(monkeypatch):
    """host_function (the ops modules' host queries) and c_launcher (every op's C launcher, through it): the ctypes
    signature is set, the binding is reused, and a library without the symbol (built from older sources) raises
    KernelLibraryError naming it."""
    import ctypes

    class Fn:  # stands in for a ctypes function (takes argtypes / restype)
        def __call__(self, *a):
            return 7

    class FakeLib:
        _name = "/x/libreplayssm_kernels.so"
        rssm_query = Fn()
        rssm_thing_launch = Fn()

    class Params(ctypes.Structure):
        _fields_ = [("n", ctypes.c_int)]

    monkeypatch.setattr(_lib, "load_library", lambda: FakeLib())
    monkeypatch.setattr(_lib, "_host_functions", {})
    fn = _lib.host_function("rssm_query", [ctypes.c_int], ctypes.c_int)
    assert fn.argtypes == [ctypes.c_int] and fn.restype is ctypes.c_int and fn(1) == 7
    assert _lib.host_function("rssm_query", [ctypes.c_int], ctypes.c_int) is fn
    with pytest.raises(_lib.KernelLibraryError, match=r"libreplayssm_kernels\.so has no rssm_missing \(built from "
                                                       r"older sources\)"):
        _lib.host_function("rssm_missing", [], ctypes.c_int)
    launch = _lib.c_launcher("rssm_thing_launch", Params)  # (const Params*, cudaStream_t) -> int
    assert launch.argtypes[0]._type_ is Params and launch.argtypes[1] is ctypes.c_void_p
    assert launch.restype is ctypes.c_int and _lib.c_launcher("rssm_thing_launch", Params) is launch
    with pytest.raises(_lib.KernelLibraryError, match=r"has no rssm_gone_launch \(built from older sources\)"):
        _lib.c_launcher("rssm_gone_launch", Params)


def test_launch_on_current_stream_passes_the_params_and_the_devices_stream(monkeypatch):
    """The ops' one launch path (CPU, torch.cuda faked): the launcher gets a pointer to the filled params struct and the
    current stream of the op's device, entered as the current device; a non-zero status raises with the launcher's
    message and the op's name."""
    import contextlib
    import ctypes

    import torch

    class Params(ctypes.Structure):
        _fields_ = [("n", ctypes.c_int32)]

    entered = []

    @contextlib.contextmanager
    def fake_device(dev):
        entered.append(dev)
        yield

    monkeypatch.setattr(torch.cuda, "device", fake_device)
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda dev: type("S", (), {"cuda_stream": 0x5150 + dev.index})())
    seen = []

    def launcher(pp, stream):
        seen.append((ctypes.cast(pp, ctypes.POINTER(Params)).contents.n, stream.value))
        return _lib.RSSM_OK if len(seen) == 1 else 1

    dev = torch.device("cuda", 3)
    _lib.launch_on_current_stream(launcher, Params(n=7), dev, "some_op")
    assert seen == [(7, 0x5150 + 3)] and entered == [dev]

    class FakeLib:
        @staticmethod
        def rssm_last_error():
            return b"slot 9 out of range"

    monkeypatch.setattr(_lib, "load_library", lambda: FakeLib)
    with pytest.raises(RuntimeError, match=r"some_op: invalid argument: slot 9 out of range"):
        _lib.launch_on_current_stream(launcher, Params(n=8), dev, "some_op")
    assert seen[-1] == (8, 0x5150 + 3)


def test_check_status_raises_kernel_unsupported_for_a_refused_design(monkeypatch):
    """Status "unsupported" (a design the launcher does not implement for these sizes; nothing launched) raises
    KernelUnsupportedError, a RuntimeError, so a bench that tries several designs can skip exactly those; every
    other status raises a plain RuntimeError. The message is the launcher's own either way."""
    class Lib:
        @staticmethod
        def rssm_last_error():
            return b"GdnReplay: variant 6 (split kernels) handles at most 32 records per step"
    monkeypatch.setattr(_lib, "load_library", lambda: Lib())
    _lib.check_status(_lib.RSSM_OK, "op")
    with pytest.raises(_lib.KernelUnsupportedError, match=r"^gdn_replay: unsupported: GdnReplay: variant 6"):
        _lib.check_status(2, "gdn_replay")
    assert issubclass(_lib.KernelUnsupportedError, RuntimeError)
    for status, name in ((1, "invalid argument"), (3, "CUDA launch error"), (7, "status 7")):
        with pytest.raises(RuntimeError, match=f"^op: {name}: ") as info:
            _lib.check_status(status, "op")
        assert type(info.value) is RuntimeError
