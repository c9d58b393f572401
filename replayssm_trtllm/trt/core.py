"""ctypes wrapper of the TensorRT-free plugin core (cpp_plugins/plugins/core/).

The core holds the single declaration of every plugin field (name, type, default, range), the
validation messages, the I/O index maps, shape / dtype rules, the workspace formula and the
versioned serialization. Tests and tools reach it through its C API in a small shared library:

    lib = CoreLib.build(tmp_dir)            # compiles core/*.cpp with g++ (no TensorRT, no GPU)
    cfg = lib.config("ReplayDecode", window=16, family="mamba2")
    blob = cfg.serialize(); cfg2 = lib.deserialize("ReplayDecode", blob)
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Sequence

KINDS = ("ReplayDecode", "GdnVerify", "DualPrecisionFlush", "ReplayCommit")
# core::DType codes (same values as RssmDtype for the float formats)
DTYPES = {"fp32": 0, "fp16": 1, "bf16": 2, "fp8": 3, "fp4": 4, "int32": 10, "int64": 11, "int8": 12, "uint8": 13,
          "bool": 14}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
MAX_DIMS = 8

REPO_ROOT = Path(__file__).resolve().parents[2]
CORE_DIR = REPO_ROOT / "cpp_plugins" / "plugins" / "core"
KERNELS_DIR = REPO_ROOT / "cpp_plugins" / "kernels"
STUB_CUDA_DIR = REPO_ROOT / "tests" / "plugins" / "stub_cuda"


class CoreError(ValueError):
    """A core check failed; the message is the core's own (op, field or tensor, expected, actual)."""


def _cuda_include() -> Optional[Path]:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda_runtime.h").exists():
            return Path(root) / "include"
    return None


def build_core_library(out_dir: Path, cxx: Optional[str] = None) -> Path:
    """Compile the core and its C API into ``out_dir/librssm_plugin_core.so`` with g++ (or $CXX).

    Uses the CUDA toolkit headers when found (only cudaStream_t is needed), else a one-typedef
    stub under tests/plugins/stub_cuda. Raises RuntimeError with the compiler output on failure
    and FileNotFoundError when no C++ compiler is on PATH.
    """
    cxx = cxx or os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise FileNotFoundError("no C++ compiler (g++/c++) on PATH: cannot build the plugin core")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / "librssm_plugin_core.so"
    cuda_inc = _cuda_include() or STUB_CUDA_DIR
    srcs = sorted(str(p) for p in CORE_DIR.glob("*.cpp"))
    cmd = [cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", f"-I{CORE_DIR}",
           f"-I{KERNELS_DIR}", f"-I{cuda_inc}", *srcs, "-o", str(lib)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"building the plugin core failed:\n{' '.join(cmd)}\n{res.stderr[-4000:]}")
    return lib


class CoreLib:
    def __init__(self, path):
        self.path = Path(path)
        L = ctypes.CDLL(str(self.path))
        self._L = L
        vp, cp, i32, i64 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int64
        P32, P64, PU64 = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64)
        sig = {
            "rssm_core_last_error": (cp, []),
            "rssm_core_names": (i32, [i32, cp, cp, cp, i32]),
            "rssm_core_schema_json": (i32, [i32, cp, i32]),
            "rssm_core_config_new": (vp, [i32]),
            "rssm_core_config_free": (None, [vp]),
            "rssm_core_config_set_int": (i32, [vp, cp, i64]),
            "rssm_core_config_set_float": (i32, [vp, cp, ctypes.c_double]),
            "rssm_core_config_set_enum": (i32, [vp, cp, cp]),
            "rssm_core_config_get_int": (i32, [vp, cp, P64]),
            "rssm_core_config_get_float": (i32, [vp, cp, ctypes.POINTER(ctypes.c_double)]),
            "rssm_core_config_get_enum": (i32, [vp, cp, cp, i32]),
            "rssm_core_validate": (i32, [vp]),
            "rssm_core_config_from_fields": (vp, [i32, i32, ctypes.POINTER(cp), P32, ctypes.POINTER(vp), P32]),
            "rssm_core_serialize": (i32, [vp, ctypes.c_char_p, i32]),
            "rssm_core_deserialize": (vp, [i32, ctypes.c_char_p, ctypes.c_size_t]),
            "rssm_core_num_inputs": (i32, [vp]),
            "rssm_core_num_outputs": (i32, [vp]),
            "rssm_core_io_name": (i32, [vp, i32, i32, cp, i32]),
            "rssm_core_supports_type": (i32, [vp, i32, P32, i32, i32]),
            "rssm_core_output_types": (i32, [vp, i32, P32, P32]),
            "rssm_core_output_shape": (i32, [vp, i32, P32, P64, i32, P64]),
            "rssm_core_check_inputs": (i32, [vp, i32, P32, P32, P64]),
            "rssm_core_workspace_size": (i64, [vp, i32, P32, P32, P64]),
            "rssm_core_translate": (i32, [vp, i32, P32, P32, P64, PU64, i32, P32, P32, P64, PU64, cp, i32]),
        }
        for name, (res, args) in sig.items():
            fn = getattr(L, name)
            fn.restype, fn.argtypes = res, args

    @classmethod
    def build(cls, out_dir) -> "CoreLib":
        return cls(build_core_library(Path(out_dir)))

    # ---- helpers
    def error(self) -> str:
        return self._L.rssm_core_last_error().decode()

    def _check(self, rc):
        if rc is None or (isinstance(rc, int) and rc < 0):
            raise CoreError(self.error())
        return rc

    @staticmethod
    def kind(name: str) -> int:
        if name not in KINDS:
            raise ValueError(f"unknown plugin {name!r}; expected one of {list(KINDS)}")
        return KINDS.index(name)

    def names(self, plugin: str):
        bufs = [ctypes.create_string_buffer(64) for _ in range(3)]
        self._check(self._L.rssm_core_names(self.kind(plugin), *bufs, 64))
        return tuple(b.value.decode() for b in bufs)

    def schema(self, plugin: str) -> list:
        k = self.kind(plugin)
        n = self._check(self._L.rssm_core_schema_json(k, None, 0))
        buf = ctypes.create_string_buffer(n + 1)
        self._L.rssm_core_schema_json(k, buf, n + 1)
        return json.loads(buf.value.decode())

    def config(self, plugin: str, **fields) -> "CoreConfig":
        h = self._L.rssm_core_config_new(self.kind(plugin))
        cfg = CoreConfig(self, h, plugin)
        for name, value in fields.items():
            cfg.set(name, value)
        return cfg

    def config_from_fields(self, plugin: str, fields: Sequence[tuple]) -> "CoreConfig":
        """fields: (name, trt_type_code, value) as a creator would receive them (1 float32, 5 int32,
        6 char, 10 int64); this is exactly the createPlugin path."""
        keep, names, types, datas, lens = [], [], [], [], []
        for name, t, value in fields:
            if t == 5:
                obj = ctypes.c_int32(value)
                n = 1
            elif t == 10:
                obj = ctypes.c_int64(value)
                n = 1
            elif t == 1:
                obj = ctypes.c_float(value)
                n = 1
            elif t == 6:
                raw = value.encode() + b"\0"
                obj = ctypes.create_string_buffer(raw, len(raw))
                n = len(raw)
            else:
                obj, n = ctypes.c_int32(0), 1
            keep.append(obj)
            names.append(name.encode())
            types.append(t)
            datas.append(ctypes.cast(ctypes.pointer(obj), ctypes.c_void_p) if not isinstance(obj, ctypes.Array)
                         else ctypes.cast(obj, ctypes.c_void_p))
            lens.append(n)
        N = len(fields)
        h = self._L.rssm_core_config_from_fields(
            self.kind(plugin), N, (ctypes.c_char_p * N)(*names), (ctypes.c_int32 * N)(*types),
            (ctypes.c_void_p * N)(*datas), (ctypes.c_int32 * N)(*lens))
        if not h:
            raise CoreError(self.error())
        return CoreConfig(self, h, plugin)

    def deserialize(self, plugin: str, blob: bytes) -> "CoreConfig":
        h = self._L.rssm_core_deserialize(self.kind(plugin), blob, len(blob))
        if not h:
            raise CoreError(self.error())
        return CoreConfig(self, h, plugin)


def _tensor_arrays(tensors):
    """tensors: sequence of (dtype_name, dims) -> ctypes (dtypes, ranks, dims[8 * n])."""
    n = len(tensors)
    dt = (ctypes.c_int32 * max(n, 1))(*[DTYPES[t] for t, _ in tensors])
    rk = (ctypes.c_int32 * max(n, 1))(*[len(d) for _, d in tensors])
    flat = []
    for _, d in tensors:
        flat += list(d) + [0] * (MAX_DIMS - len(d))
    dims = (ctypes.c_int64 * max(len(flat), 1))(*flat)
    return dt, rk, dims


class CoreConfig:
    def __init__(self, lib: CoreLib, handle, plugin: str):
        self.lib, self.h, self.plugin = lib, handle, plugin

    def __del__(self):
        try:
            self.lib._L.rssm_core_config_free(self.h)
        except Exception:
            pass

    def _field(self, name):
        for f in self.lib.schema(self.plugin):
            if f["name"] == name:
                return f
        raise CoreError(f"{self.plugin}: no field '{name}'")

    def set(self, name: str, value):
        t = self._field(name)["type"]
        L, b = self.lib._L, name.encode()
        if t == "enum":
            rc = L.rssm_core_config_set_enum(self.h, b, str(value).encode())
        elif t == "float32":
            rc = L.rssm_core_config_set_float(self.h, b, float(value))
        else:
            rc = L.rssm_core_config_set_int(self.h, b, int(value))
        self.lib._check(rc)
        return self

    def get(self, name: str):
        t = self._field(name)["type"]
        L, b = self.lib._L, name.encode()
        if t == "enum":
            buf = ctypes.create_string_buffer(64)
            self.lib._check(L.rssm_core_config_get_enum(self.h, b, buf, 64))
            return buf.value.decode()
        if t == "float32":
            v = ctypes.c_double()
            self.lib._check(L.rssm_core_config_get_float(self.h, b, ctypes.byref(v)))
            return v.value
        v = ctypes.c_int64()
        self.lib._check(L.rssm_core_config_get_int(self.h, b, ctypes.byref(v)))
        return v.value

    def values(self) -> dict:
        return {f["name"]: self.get(f["name"]) for f in self.lib.schema(self.plugin)}

    def validate(self):
        self.lib._check(self.lib._L.rssm_core_validate(self.h))
        return self

    def serialize(self) -> bytes:
        L = self.lib._L
        n = self.lib._check(L.rssm_core_serialize(self.h, None, 0))
        buf = ctypes.create_string_buffer(n)
        L.rssm_core_serialize(self.h, buf, n)
        return buf.raw[:n]

    def io_names(self):
        L = self.lib._L
        nin, nout = self.lib._check(L.rssm_core_num_inputs(self.h)), self.lib._check(L.rssm_core_num_outputs(self.h))

        def name(o, i):
            buf = ctypes.create_string_buffer(64)
            self.lib._check(L.rssm_core_io_name(self.h, o, i, buf, 64))
            return buf.value.decode()
        return [name(0, i) for i in range(nin)], [name(1, i) for i in range(nout)]

    def supports(self, pos: int, io_types: Sequence[str], n_in: int, n_out: int) -> bool:
        arr = (ctypes.c_int32 * (n_in + n_out))(*[DTYPES[t] for t in io_types] + [0] * (n_in + n_out - len(io_types)))
        return bool(self.lib._check(self.lib._L.rssm_core_supports_type(self.h, pos, arr, n_in, n_out)))

    def output_types(self, in_types: Sequence[str]):
        n = len(in_types)
        arr = (ctypes.c_int32 * n)(*[DTYPES[t] for t in in_types])
        out = (ctypes.c_int32 * 8)()
        k = self.lib._check(self.lib._L.rssm_core_output_types(self.h, n, arr, out))
        return [DTYPE_NAMES[out[i]] for i in range(k)]

    def output_shape(self, input_dims: Sequence[Sequence[int]], out_idx: int = 0):
        tensors = [("fp32", d) for d in input_dims]
        _, rk, dims = _tensor_arrays(tensors)
        out = (ctypes.c_int64 * MAX_DIMS)()
        r = self.lib._check(self.lib._L.rssm_core_output_shape(self.h, len(tensors), rk, dims, out_idx, out))
        return [out[i] for i in range(r)]

    def check_inputs(self, tensors):
        dt, rk, dims = _tensor_arrays(tensors)
        self.lib._check(self.lib._L.rssm_core_check_inputs(self.h, len(tensors), dt, rk, dims))

    def workspace_size(self, tensors) -> int:
        dt, rk, dims = _tensor_arrays(tensors)
        r = self.lib._L.rssm_core_workspace_size(self.h, len(tensors), dt, rk, dims)
        if r < 0:
            raise CoreError(self.lib.error())
        return r

    def translate(self, inputs, outputs, in_ptrs=None, out_ptrs=None) -> dict:
        """Fill the kernel params struct; returns its fields as a dict (pointers as ints or None)."""
        dt, rk, dims = _tensor_arrays(inputs)
        odt, ork, odims = _tensor_arrays(outputs)
        in_ptrs = in_ptrs or [0x1000 * (i + 1) for i in range(len(inputs))]
        out_ptrs = out_ptrs or [0x100000 * (i + 1) for i in range(len(outputs))]
        ip = (ctypes.c_uint64 * len(in_ptrs))(*in_ptrs)
        op = (ctypes.c_uint64 * len(out_ptrs))(*out_ptrs)
        L = self.lib._L
        n = self.lib._check(L.rssm_core_translate(self.h, len(inputs), dt, rk, dims, ip, len(outputs), odt, ork, odims,
                                                  op, None, 0))
        buf = ctypes.create_string_buffer(n + 1)
        L.rssm_core_translate(self.h, len(inputs), dt, rk, dims, ip, len(outputs), odt, ork, odims, op, buf, n + 1)
        out = {}
        for line in buf.value.decode().splitlines():
            k, v = line.split("=", 1)
            if v == "null":
                out[k] = None
            elif v.startswith("0x"):
                out[k] = int(v, 16)
            else:
                try:
                    out[k] = int(v)
                except ValueError:
                    out[k] = float(v)
        return out
