#!/usr/bin/env bash
# Compile check of the kernel library for other GPU architectures than the default 90a (no GPU needed).
#
#   scripts/arch_compile_check.sh [ARCH_LIST] [build-dir]      (default "80;100a;120", the ones users build)
#
# Configures cpp_plugins/ with -DRSSM_CUDA_ARCHS=ARCH_LIST and builds the kernel library with `make -k`, so every
# translation unit that fails is reported, not only the first. Prints the failing files and the distinct errors,
# then a one-line summary; exit 0 only when the library linked. CI compiles 90a (what the lent GPUs run); this is
# the check for the rest of the list (sixty-ninth session: sm_80 did not compile, an unguarded sm_89 fp8 conversion;
# about 5 min per architecture on 2 cores).
set -u -o pipefail
ARCHS=${1:-80;100a;120}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${2:-$ROOT/build/arch_check_${ARCHS//;/_}}
mkdir -p "$BUILD"
echo "== architectures: $ARCHS"
echo "== build dir: $BUILD"
cmake -S "$ROOT/cpp_plugins" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DRSSM_CUDA_ARCHS="$ARCHS" > "$BUILD/configure.log" 2>&1 \
  || { echo "configure FAILED (see $BUILD/configure.log)"; tail -20 "$BUILD/configure.log"; exit 1; }
t0=$(date +%s)
make -C "$BUILD" -k -j "${RSSM_BUILD_JOBS:-$(nproc)}" replayssm_kernels > "$BUILD/make.log" 2>&1
rc=$?
failed=$(grep -o 'kernels/[A-Za-z0-9_/]*\.cu\.o\] Error' "$BUILD/make.log" | sed 's/\.o\] Error//' | sort -u)
if [ $rc -eq 0 ]; then
  echo "== OK: the kernel library built for $ARCHS in $(( $(date +%s) - t0 )) s"
else
  echo "== FAILED for $ARCHS (rc $rc, $(( $(date +%s) - t0 )) s); translation units that did not compile:"
  echo "${failed:-  (none named; see $BUILD/make.log)}" | sed 's/^/  /'
  echo "== distinct errors:"
  grep -E 'error' "$BUILD/make.log" | sed -E 's/line [0-9]+; //; s#/tmp/tmpxft_[0-9a-f_]+-[0-9]+_##' | sort | uniq -c | sort -rn | head -20
fi
exit $rc
