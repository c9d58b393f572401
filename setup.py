"""Build hook: installs the pure-Python package and, when nvcc is available, drives CMake to build
the CUDA kernel library (cpp_plugins/) into replayssm_trtllm/_lib/.

Environment:
  RSSM_BUILD_KERNELS = auto (default: build when nvcc is found) | 1 (must build) | 0 (skip)
  RSSM_CUDA_ARCHS    = CMake CUDA architectures, default "90a" (e.g. "90a;100a;120")
  RSSM_BUILD_JOBS    = parallel build jobs (default: CPU count)
  TensorRT_INCLUDE_DIR = TensorRT headers; when set (or found) the plugin library is built too.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LIB_DIR = ROOT / "replayssm_trtllm" / "_lib"


def _log(msg: str) -> None:
    print(f"[replayssm-trtllm] {msg}", file=sys.stderr, flush=True)


def build_native() -> bool:
    mode = os.environ.get("RSSM_BUILD_KERNELS", "auto").lower()
    if mode in ("0", "off", "no", "false"):
        _log("RSSM_BUILD_KERNELS=0: the CUDA kernel library was NOT built (pure-Python install).")
        return False
    nvcc = shutil.which("nvcc") or (os.path.exists("/usr/local/cuda/bin/nvcc") and "/usr/local/cuda/bin/nvcc")
    cmake = shutil.which("cmake")
    if not nvcc or not cmake:
        missing = "nvcc" if not nvcc else "cmake"
        msg = (f"{missing} not found: the CUDA kernel library was NOT built. The pure-Python package "
               "(reference, formats, state machine, CLI) is installed; GPU ops will raise until you "
               "reinstall on a machine with the CUDA toolkit.")
        if mode in ("1", "on", "yes", "true"):
            raise RuntimeError(msg)
        _log(msg)
        return False
    archs = os.environ.get("RSSM_CUDA_ARCHS", "90a")
    build_dir = ROOT / "build" / "native"
    build_dir.mkdir(parents=True, exist_ok=True)
    cfg = [cmake, "-S", str(ROOT / "cpp_plugins"), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
           f"-DCMAKE_CUDA_ARCHITECTURES={archs}", f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    if os.environ.get("TensorRT_INCLUDE_DIR"):
        cfg.append(f"-DTensorRT_INCLUDE_DIR={os.environ['TensorRT_INCLUDE_DIR']}")
    jobs = os.environ.get("RSSM_BUILD_JOBS", str(os.cpu_count() or 1))
    _log(f"building CUDA kernels for archs {archs} with {nvcc} ({jobs} jobs) ...")
    try:
        subprocess.check_call(cfg)
        subprocess.check_call([cmake, "--build", str(build_dir), "-j", jobs])
    except subprocess.CalledProcessError as e:
        # SystemExit, not an Exception: setuptools' editable install runs a customized build_py "safely" and turns an
        # Exception into a warning, which let a kernel that does not compile pass CI with no library built.
        raise SystemExit(f"[replayssm-trtllm] the CUDA kernel build failed ({e}); fix the error above, or set "
                         "RSSM_BUILD_KERNELS=0 for a pure-Python install") from e
    LIB_DIR.mkdir(parents=True, exist_ok=True)
    copied = []
    for so in build_dir.rglob("*.so"):
        if so.name.startswith(("libreplayssm", "libReplaySsm")):
            shutil.copy2(so, LIB_DIR / so.name)
            copied.append(so.name)
    _log(f"built {', '.join(sorted(copied))} into {LIB_DIR.relative_to(ROOT)}")
    return True


class BuildPyWithKernels(build_py):
    def run(self):
        build_native()
        super().run()
        if not getattr(self, "editable_mode", False):
            target = Path(self.build_lib) / "replayssm_trtllm" / "_lib"
            target.mkdir(parents=True, exist_ok=True)
            for so in LIB_DIR.glob("*.so"):
                shutil.copy2(so, target / so.name)


setup(cmdclass={"build_py": BuildPyWithKernels})
