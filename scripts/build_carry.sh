#!/usr/bin/env bash
# Build what a GPU call carries (git-ignored), on this machine: the kernel library for sm_90a (SASS only, stripped,
# xz: ~25 MB; scripts/gpu_run.sh uses it when it loads and reports this package's ABI, instead of building there), the
# commit it was built at, and, when TensorRT headers are given, the plugin library and the direct-enqueue harness for
# `gpu_run.sh --harness`. The carry does not survive this machine between sessions; this rebuilds it in one step.
#
#   scripts/build_carry.sh [--trt-inc DIR] [--build-dir DIR] [--peers]
#
#   --trt-inc DIR    TensorRT include dir (e.g. .trt_headers/10.14/include, taken from NVIDIA/TensorRT release/10.14):
#                    also build .carry/plugins/ (scripts/trt_compile_check.sh, 0 warnings expected)
#   --build-dir DIR  CMake build dir (default /tmp/rssm_carry_build); reused if present (reconfigured for 90a-real: a dir
#                    built for other architectures is rebuilt, ~4.5 min on 2 cores), otherwise a second run only relinks
#   --peers          also fetch fla-core into .whl/ (scripts/fetch_peer_wheels.sh --fla-only: bench gdn's peer, 1.1 MB;
#                    FlashInfer is that script without the flag)
#
# Then, e.g.:  run(carry=[".carry", ".whl"], command="... scripts/gpu_run.sh --tests ... --harness")
# Size: the working tree plus every carried path must stay under 64 MiB (the library ~25 MB, .whl_hf ~21 MB).
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
TRT_INC=""; BUILD=/tmp/rssm_carry_build; PEERS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --trt-inc) TRT_INC="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --peers) PEERS=1 ;;
    *) echo "build_carry.sh: unknown option $1 (see the header)" >&2; exit 2 ;;
  esac
  shift
done
command -v nvcc >/dev/null || { echo "build_carry.sh: nvcc not on PATH (the CUDA toolkit builds the library)" >&2; exit 1; }
if [ -n "$TRT_INC" ] && [ ! -f "$TRT_INC/NvInferRuntime.h" ]; then
  echo "build_carry.sh: --trt-inc $TRT_INC has no NvInferRuntime.h" >&2; exit 2
fi
if ! git diff --quiet HEAD -- cpp_plugins; then
  echo "build_carry.sh: note: cpp_plugins/ has uncommitted changes; LIB_COMMIT names HEAD plus those changes"
fi
t0=$(date +%s)
echo "== kernel library: $BUILD (CMAKE_CUDA_ARCHITECTURES=90a-real, $(nproc) jobs)"
cmake -S cpp_plugins -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$BUILD.configure.log" 2>&1 \
  || { tail -20 "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target replayssm_kernels > "$BUILD.build.log" 2>&1 \
  || { grep -m 20 error "$BUILD.build.log"; exit 1; }
mkdir -p .carry
strip -o "$BUILD/libreplayssm_kernels.stripped.so" "$BUILD/libreplayssm_kernels.so"
xz -T"$(nproc)" -6 -c "$BUILD/libreplayssm_kernels.stripped.so" > .carry/libreplayssm_kernels.so.xz
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- cpp_plugins || commit="$commit+dirty"
echo "$commit" > .carry/LIB_COMMIT
echo "   .carry/libreplayssm_kernels.so.xz: $(du -b .carry/libreplayssm_kernels.so.xz | cut -f1) bytes, LIB_COMMIT $commit"
if [ -n "$TRT_INC" ]; then
  echo "== plugins against $TRT_INC"
  scripts/trt_compile_check.sh "$TRT_INC" "$BUILD" | sed 's/^/   /'
  mkdir -p .carry/plugins
  strip -o .carry/plugins/libreplayssm_trt_plugins.so "$BUILD/plugins/libreplayssm_trt_plugins.so"
  strip -o .carry/plugins/rssm_enqueue_harness "$BUILD/plugins/rssm_enqueue_harness"
  echo "   .carry/plugins: $(ls .carry/plugins | tr '\n' ' ')"
fi
if [ $PEERS -eq 1 ]; then
  PYTHON=${PYTHON:-python3} scripts/fetch_peer_wheels.sh --fla-only | sed 's/^/   /'
fi
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carry=$(du -cb .carry $( [ -d .whl ] && echo .whl ) 2>/dev/null | tail -1 | cut -f1)
echo "== done in $(( $(date +%s) - t0 )) s; tracked tree $tree + .carry/.whl $carry bytes of 67108864 (64 MiB)"
