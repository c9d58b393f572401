#!/usr/bin/env bash
# Fetch the peer libraries the benchmarks compare against, as wheels for the GPU machine
# (python 3.12, torch 2.11+cu130, triton 3.6, no package index there), into .whl/.
#
#   flashinfer-python  newest 0.7.x, repacked as a *trimmed* wheel (the full wheel is ~100 MB,
#                      715 MB unpacked; the tree that travels to the GPU is capped at 64 MiB).
#                      Kept: every .py in each flashinfer package directory that
#                      `import flashinfer.mamba` + a mamba JIT build touches, the JIT headers
#                      (data/include, cutlass/include, cccl/libcudacxx) and the mamba sources
#                      in data/csrc. Everything else (other kernels' sources, cubins) is dropped.
#   apache-tvm-ffi     flashinfer's FFI runtime (not in the GPU image), cp312 manylinux wheel.
#   fla-core           flash-linear-attention kernels (pure Triton; needs only einops, torch,
#                      triton, all in the GPU image).
# Other flashinfer Requires-Dist (cuda-python, cuda-tile, nccl4py, nvidia-cutlass-dsl,
# nvidia-cudnn-frontend, ...) are not needed by flashinfer.mamba and are not fetched.
#
# Usage: scripts/fetch_peer_wheels.sh            (from the repo root; idempotent)
#        scripts/fetch_peer_wheels.sh --fla-only (fla-core alone, bench gdn's peer, 1.1 MB; other wheels in .whl kept)
# Env:   FI_VERSION (default 0.7.4), FLA_VERSION (0.6.0), TVM_FFI_VERSION (0.1.15.post2),
#        PYTHON (host python with torch, default /work/venv/bin/python),
#        RSSM_PEER_DL (scratch dir for the full wheel and a host env, default /tmp/rssm_peer_dl)
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || dirname "$0"/..)"
ROOT=$PWD
FI_VERSION=${FI_VERSION:-0.7.4}
FLA_VERSION=${FLA_VERSION:-0.6.0}
TVM_FFI_VERSION=${TVM_FFI_VERSION:-0.1.15.post2}
PYTHON=${PYTHON:-/work/venv/bin/python}
DL=${RSSM_PEER_DL:-/tmp/rssm_peer_dl}
mkdir -p "$DL" .whl

PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
pipdl() { "$PYTHON" -m pip download -q --no-deps "${PLAT[@]}" "$@" 2>&1 | grep -v "is ignored" || true; }

# Remove other versions first: two versions of one package stop the install on the GPU side.
if [ "${1:-}" = --fla-only ]; then
  rm -f .whl/fla_core-*.whl
  pipdl -d .whl "fla-core==$FLA_VERSION"
  ls .whl/fla_core-"$FLA_VERSION"-*.whl >/dev/null 2>&1 || { echo "fla-core $FLA_VERSION not downloaded" >&2; exit 1; }
  echo "== .whl: $(ls .whl | tr '\n' ' ')"
  exit 0
fi
[ $# -eq 0 ] || { echo "fetch_peer_wheels.sh: unknown argument $1 (--fla-only or none)" >&2; exit 2; }
rm -f .whl/flashinfer_python-*.whl .whl/apache_tvm_ffi-*.whl .whl/fla_core-*.whl

echo "== download (GPU target: cp312 manylinux)"
[ -f "$DL/flashinfer_python-$FI_VERSION-py3-none-any.whl" ] || pipdl -d "$DL" "flashinfer-python==$FI_VERSION"
pipdl -d .whl "apache-tvm-ffi==$TVM_FFI_VERSION"
pipdl -d .whl "fla-core==$FLA_VERSION"
FULL="$DL/flashinfer_python-$FI_VERSION-py3-none-any.whl"
[ -f "$FULL" ] || { echo "flashinfer wheel not downloaded" >&2; exit 1; }

echo "== host env for tracing imports (host python: $("$PYTHON" -V))"
HOSTENV="$DL/hostenv"
if [ ! -d "$HOSTENV/tvm_ffi" ]; then
  "$PYTHON" -m pip install -q --no-deps --target "$HOSTENV" "apache-tvm-ffi==$TVM_FFI_VERSION" 2>&1 | grep -v "is ignored" || true
  "$PYTHON" -m pip install -q --target "$HOSTENV" einops requests tqdm tabulate click ninja nvidia-ml-py jinja2 filelock packaging 2>&1 | grep -v "is ignored" || true
fi
FULLDIR="$DL/flashinfer-$FI_VERSION-full"
if [ ! -f "$FULLDIR/flashinfer/__init__.py" ]; then
  rm -rf "$FULLDIR"; mkdir -p "$FULLDIR"; (cd "$FULLDIR" && unzip -q "$FULL")
fi

echo "== trace the import closure of flashinfer.mamba"
FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE="$DL/trace_ws" \
PYTHONPATH="$FULLDIR:$HOSTENV" "$PYTHON" - "$FULLDIR" "$DL/fi_import_closure.txt" <<'PY'
import sys, os
full, out = sys.argv[1], sys.argv[2]
import flashinfer.mamba  # noqa: F401
import flashinfer.jit.mamba.checkpointing_ssu, flashinfer.jit.mamba.selective_state_update  # noqa
import flashinfer.jit.core, flashinfer.jit.cpp_ext  # noqa
files = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and os.path.abspath(f).startswith(os.path.join(full, "flashinfer")):
        files.add(os.path.relpath(os.path.abspath(f), full))
open(out, "w").write("\n".join(sorted(files)) + "\n")
print(f"{len(files)} modules imported")
PY

echo "== repack trimmed flashinfer wheel"
"$PYTHON" - "$FULL" "$DL/fi_import_closure.txt" .whl <<'PY'
import base64, hashlib, os, re, sys, zipfile
full, closure, outdir = sys.argv[1:4]
imported = [l.strip() for l in open(closure) if l.strip()]
keep_dirs = {os.path.dirname(p) for p in imported}           # whole package dirs, non-recursive
data_trees = ("flashinfer/data/include/", "flashinfer/data/cutlass/include/",
              "flashinfer/data/cccl/libcudacxx/include/")
csrc_keep = re.compile(r"flashinfer/data/csrc/(checkpointing_ssu|selective_state_update|"
                       r"flashinfer_mamba_binding|replayssm_materialize|tvm_ffi_utils)[^/]*$")
zin = zipfile.ZipFile(full)
names = zin.namelist()
dist = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
def keep(n):
    if n.endswith("/"):
        return False
    if n.startswith(dist + "/"):
        return not n.endswith("/RECORD")
    if n.startswith(data_trees) or csrc_keep.match(n):
        return True
    if n.startswith("flashinfer/data/"):
        return False
    return os.path.dirname(n) in keep_dirs and not n.endswith((".so", ".cubin", ".a"))
kept = [n for n in names if keep(n)]
m = re.match(r"(flashinfer_python)-([^-]+)-", os.path.basename(full))
out = os.path.join(outdir, f"{m.group(1)}-{m.group(2)}-1rssmtrim-py3-none-any.whl")
record = []
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
    for n in kept:
        data = zin.read(n)
        zout.writestr(zin.getinfo(n), data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{n},sha256={h},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    zout.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
print(f"kept {len(kept)} of {len(names)} files -> {out} ({os.path.getsize(out)/2**20:.1f} MiB)")
PY

echo "== .whl"
ls -la .whl
du -ch .whl/*.whl | tail -1
