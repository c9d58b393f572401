"""Locate and load the CUDA kernel library ``libreplayssm_kernels.so`` through ctypes.

Torch ops fill a ctypes mirror of a kernel params struct and call the ``extern "C"`` launcher on
``torch.cuda.current_stream()``; nothing here depends on a torch C++ extension.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

LIB_NAME = "libreplayssm_kernels.so"
EXPECTED_ABI_VERSION = 8

RSSM_OK = 0
_STATUS_UNSUPPORTED = 2
_STATUS_NAMES = {1: "invalid argument", _STATUS_UNSUPPORTED: "unsupported", 3: "CUDA launch error"}

_lib = None


class KernelLibraryError(RuntimeError):
    """The kernel library is missing, stale, or built for another GPU architecture."""


class KernelUnsupportedError(RuntimeError):
    """A launcher refused sizes or a design it does not implement (status "unsupported", e.g. the split kernels past
    32 records per step); nothing was launched or written. Callers that try several designs catch this one only."""


def _candidates():
    env = os.environ.get("RSSM_KERNEL_LIB")
    if env:  # an explicit path is the only candidate: never fall back to another (maybe stale) build
        if not Path(env).is_file():
            raise KernelLibraryError(f"RSSM_KERNEL_LIB={env}: no such file (expected the path of {LIB_NAME}; "
                                     "unset it to use the library built into the package)")
        yield Path(env)
        return
    here = Path(__file__).resolve().parent.parent / "_lib" / LIB_NAME
    yield here
    yield Path(__file__).resolve().parents[2] / "build" / "native" / LIB_NAME


def load_library() -> ctypes.CDLL:
    """Return the loaded kernel library, or raise KernelLibraryError saying how to build it."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(str(path))
        if path.exists():
            lib = ctypes.CDLL(str(path))
            lib.rssm_kernel_abi_version.restype = ctypes.c_int
            lib.rssm_build_archs.restype = ctypes.c_char_p
            lib.rssm_last_error.restype = ctypes.c_char_p
            abi = lib.rssm_kernel_abi_version()
            if abi != EXPECTED_ABI_VERSION:
                raise KernelLibraryError(
                    f"{path}: kernel ABI version {abi}, this package expects {EXPECTED_ABI_VERSION}; "
                    "rebuild with `pip install --no-build-isolation -e .`")
            _check_arch(lib, path)
            _lib = lib
            return lib
    raise KernelLibraryError(
        f"{LIB_NAME} not found (looked in: {', '.join(tried)}). It is built by `pip install -e .` "
        "when nvcc and cmake are on PATH (RSSM_BUILD_KERNELS=1 makes that mandatory), or set "
        "RSSM_KERNEL_LIB to its path.")


# RSSM_DTYPE_* codes (rssm_common.h) of the 32- and 16-bit types by name; the dual-precision formats extend it
DTYPE_CODE_BY_NAME = {"fp32": 0, "fp16": 1, "bf16": 2}

_host_functions = {}


def host_function(name: str, argtypes, restype):
    """A function of the kernel library (a host-only query, or a C launcher) with its ctypes signature, bound once; a
    library built before the function existed raises KernelLibraryError naming it."""
    fn = _host_functions.get(name)
    if fn is None:
        lib = load_library()
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise KernelLibraryError(
                f"the kernel library {lib._name} has no {name} (built from older sources); rebuild it with "
                "`pip install --no-build-isolation -e .`") from None
        fn.argtypes, fn.restype = argtypes, restype
        _host_functions[name] = fn
    return fn


def build_archs(lib) -> list[str]:
    return [a.strip() for a in lib.rssm_build_archs().decode().split(",") if a.strip()]


def arch_matches(archs: list[str], major: int, minor: int) -> bool:
    """True when one of the library's build archs (CMAKE_CUDA_ARCHITECTURES entries: "90a", "90a-real" (SASS only),
    "90-virtual" (PTX only), "100a", ...) is the device's compute capability; "unknown" matches any device."""
    dev = f"{major}{minor}"
    names = [a.split("-")[0].rstrip("af") for a in archs]
    return dev in names or "unknown" in archs


def _check_arch(lib, path) -> None:
    try:
        import torch
        if not torch.cuda.is_available():
            return
        major, minor = torch.cuda.get_device_capability()
    except Exception:  # pragma: no cover - no torch / no driver
        return
    archs = build_archs(lib)
    dev = f"{major}{minor}"
    ok = arch_matches(archs, major, minor)
    if not ok:
        raise KernelLibraryError(
            f"{path} carries code for sm_{{{','.join(archs)}}} but this GPU is sm_{dev}; rebuild with "
            f"RSSM_CUDA_ARCHS='{dev}{'a' if major in (9, 10) else ''}' pip install --no-build-isolation -e .")


def check_status(status: int, op: str) -> None:
    """Raise with the launcher's own message when a launcher returned an error."""
    if status != RSSM_OK:
        msg = load_library().rssm_last_error().decode() or "(no message)"
        cls = KernelUnsupportedError if status == _STATUS_UNSUPPORTED else RuntimeError
        raise cls(f"{op}: {_STATUS_NAMES.get(status, f'status {status}')}: {msg}")


def c_launcher(name: str, params_struct):
    """The library's C launcher ``name``, ``(const Params*, cudaStream_t) -> status``, with its ctypes signature (bound
    once, by :func:`host_function`: a library built before the launcher existed raises KernelLibraryError). Called on
    every launch, so a bound launcher is returned by one dict lookup, before any signature is built."""
    fn = _host_functions.get(name)
    if fn is not None:
        return fn
    return host_function(name, [ctypes.POINTER(params_struct), ctypes.c_void_p], ctypes.c_int)


def launch_on_current_stream(launcher, params, device, op: str) -> None:
    """Call a C launcher ``(const Params*, cudaStream_t) -> status`` on ``device``'s current torch stream.

    ``params`` is the filled ctypes params struct; a non-zero status raises with the launcher's message (``op``
    names the op in it). Nothing is synchronized, so a CUDA-graph capture on that stream records the launch.
    """
    import torch  # the kernels' callers are torch ops; this module itself stays importable without torch

    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        check_status(launcher(ctypes.byref(params), ctypes.c_void_p(stream)), op)


def is_available() -> bool:
    try:
        load_library()
        return True
    except (KernelLibraryError, OSError):
        return False


def library_status() -> str:
    """One line saying whether the CUDA kernel library is built, where, and for which SMs."""
    try:
        paths = list(_candidates())
    except KernelLibraryError as e:  # an explicit RSSM_KERNEL_LIB that names no file
        return f"CUDA kernel library NOT found: {e}"
    for path in paths:
        if path.exists():
            try:
                lib = ctypes.CDLL(str(path))
                lib.rssm_build_archs.restype = ctypes.c_char_p
                return f"CUDA kernel library built: {path} (sm_{lib.rssm_build_archs().decode()})"
            except OSError as e:
                return f"CUDA kernel library at {path} does not load: {e}"
    return ("CUDA kernel library NOT built (no nvcc/cmake at install time, or RSSM_BUILD_KERNELS=0): the "
            "reference, formats, state machine and CLI work; GPU ops and benchmarks will raise")


if __name__ == "__main__":
    print(library_status())
