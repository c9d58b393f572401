#!/usr/bin/env bash
# Compile check of the replayssm TensorRT plugin library against TensorRT headers given by path.
#
#   scripts/trt_compile_check.sh <tensorrt-include-dir> [build-dir]
#
# Configures cpp_plugins/ with -DTensorRT_INCLUDE_DIR=<dir>, builds the plugin objects, then the
# kernel library, the plugin library (linked with -Wl,--no-undefined and without libnvinfer) and
# the direct-enqueue harness. If the kernel library does not build, the plugin objects are still
# compiled and the script says what could not be linked. Prints a summary; exit 0 only when the
# plugin library and the harness linked. Needs cmake, g++ and nvcc (CUDA toolkit); no GPU.
set -u -o pipefail
INC=${1:?usage: $0 <tensorrt-include-dir> [build-dir]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
INC=$(cd "$INC" 2>/dev/null && pwd) || { echo "error: no directory $1" >&2; exit 2; }
[ -f "$INC/NvInferRuntime.h" ] || { echo "error: $INC has no NvInferRuntime.h" >&2; exit 2; }
VER=$(sed -n 's/^#define TRT_\(MAJOR\|MINOR\|PATCH\)_ENTERPRISE \([0-9]*\).*/\2/p' "$INC/NvInferVersion.h" | paste -sd.)
BUILD=${2:-$ROOT/build/trt_check_$VER}
mkdir -p "$BUILD"
LOG=$BUILD/logs; mkdir -p "$LOG"
JOBS=${RSSM_BUILD_JOBS:-$(nproc)}
echo "== TensorRT $VER headers: $INC"
echo "== build dir: $BUILD"
cmake -S "$ROOT/cpp_plugins" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTensorRT_INCLUDE_DIR="$INC" \
      -DRSSM_CUDA_ARCHS="${RSSM_CUDA_ARCHS:-90a}" > "$LOG/configure.log" 2>&1 \
  || { echo "configure FAILED (see $LOG/configure.log)"; tail -20 "$LOG/configure.log"; exit 1; }
grep "replayssm:" "$LOG/configure.log" | sed 's/^-- /   /'

status=0
step() {  # name target
  if cmake --build "$BUILD" -j "$JOBS" --target "$2" > "$LOG/$2.log" 2>&1; then
    nw=$(grep -c "warning:" "$LOG/$2.log" || true)
    echo "   $1 ($2): OK, $nw warning(s)"
    return 0
  fi
  echo "   $1 ($2): FAILED (log: $LOG/$2.log); first errors:"
  grep -m 10 "error" "$LOG/$2.log" | sed 's/^/      /'
  return 1
}
echo "== results"
step "plugin objects (TensorRT headers, no kernels)" replayssm_trt_plugin_objects || status=1
if step "kernel library" replayssm_kernels; then
  step "plugin library (-Wl,--no-undefined, no libnvinfer)" replayssm_trt_plugins || status=1
  step "direct-enqueue harness" rssm_enqueue_harness || status=1
  LIB=$(find "$BUILD" -name 'libreplayssm_trt_plugins.so' | head -1)
  if [ -n "$LIB" ]; then
    echo "   NEEDED: $(readelf -d "$LIB" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | paste -sd' ')"
    if readelf -d "$LIB" | grep -q 'libnvinfer'; then echo "   ERROR: links libnvinfer"; status=1; fi
    echo "   exported entry points: $(nm -D --defined-only "$LIB" | awk '{print $3}' | grep -E '^(getCreators|setLoggerFinder|initReplaySsmPlugins|replayssm_plugins_trt_version)$' | paste -sd' ')"
  fi
else
  echo "   plugin library NOT linked: the kernel library did not build (plugin objects above still compiled)"
  status=1
fi
exit $status
