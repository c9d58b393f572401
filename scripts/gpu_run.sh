#!/usr/bin/env bash
# One call on a GPU machine: build the kernel library, run the GPU tests, optionally the
# compute-sanitizer checks and the side-by-side benchmarks, and print a short table last.
#
#   scripts/gpu_run.sh [--tests] [--xdist N] [--test-select PATHS] [--test-k EXPR] [--sanitize] [--harness]
#                      [--test-shard I/N] [--bench mamba2,gdn,precision] [--bench-args "..."] [--profile] [--extra "CMD"]
#                      [--only-on GPU_NAME_PART]
# --only-on NAME: do nothing (exit 0) unless the GPU's name contains NAME, e.g. H200. The device lends an H100 or an
#              H200 per call, and the targets are stated for the H200, so one call can hold both plans, each run with
#              its own OUT (logs.tgz is per run):
#   OUT=$OUT/h200 scripts/gpu_run.sh --only-on H200 --bench gdn; OUT=$OUT/any scripts/gpu_run.sh --tests ...
# --extra CMD: one more command (e.g. an A/B script under scripts/) run with the library's environment after the
#              checks and before the benches; its output is tailed here and kept in logs.tgz (EXTRA_TIMEOUT).
# --test-shard I/N: run shard I of N of the selected GPU tests (every N-th test by node id, tests/_shard_select.py), so a
#              suite longer than one call (the whole suite on an H100) runs as N calls. The test log (in logs.tgz)
#              names every test's result (-v) and the 30 slowest (--durations), so a run stopped by TEST_TIMEOUT says
#              which tests it reached.
# --test-k EXPR: pytest -k expression for the GPU tests (e.g. "v4 or dual"). -k matches file, class and function
#              names alike ("not test_gdn" drops test_dual_precision.py's test_gdn_* functions too): check it with
#              `pytest --collect-only -q -m gpu PATHS -k EXPR` here first; the run prints the selected count.
#              TEST_SEL / TEST_K in the environment set the defaults of --test-select / --test-k.
# --profile: Nsight Compute (ncu) on scripts/profile_kernels.py (PROFILE_ARGS), report in logs.tgz
#            and the per-kernel headline numbers in the output.
# TRT_INC=<TensorRT include dir> also builds the plugin library and the enqueue harness.
# Per-family bench arguments: BENCH_ARGS_MAMBA2, BENCH_ARGS_GDN, BENCH_ARGS_PRECISION; time limits:
# TEST_TIMEOUT, SAN_TIMEOUT, BENCH_TIMEOUT (seconds) so one slow step cannot eat the whole call. TEST_TIMEOUT defaults to 480:
# the whole GPU suite (tests/kernels tests/formats tests/bench tests/models tests/integrations, --xdist 16) took 381 s
# on an H200 and did not finish in 330 s on an H100 (fifty-first session), nor in 420 s (seventieth: 99% of 2107
# cases, no failure): give the H100 TEST_TIMEOUT=560 in a call of its own (the device allows 600 s per call), or
# split it over two calls with --test-shard 1/2 and 2/2.
# SAN_TOOLS: the compute-sanitizer tools of --sanitize (default "memcheck racecheck"); e.g. racecheck alone when
# memcheck already passed on the same library (racecheck of the 56 dual-precision cases ran past 150 s on an H100).
# SAN_SHARDS=N runs each tool as N processes at once over a round-robin split of the cases (4 shards: that racecheck
# took 76 s on an H100, sixtieth session).
#
# Peers (FlashInfer, fla) are installed from .whl/ when that folder exists (carried wheels), transformers and its
# dependencies (for tests/models' comparisons with transformers' own models) from .whl_hf/, and
# FlashInfer's JIT cache is taken from .fi_cache/ when present. Logs go to $OUT (default ./out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/out}"; mkdir -p "$OUT"
LOG=/tmp/rssm-logs; rm -rf "$LOG"; mkdir -p "$LOG"   # only 8 files come back from $OUT: logs are tarred
export PYTHONUNBUFFERED=1
# TEST_SEL / TEST_K in the environment are the defaults of --test-select / --test-k (like SAN_SEL / SAN_K, the paths
# and the -k expression of --sanitize)
TEST_SHARD=""; ONLY_ON=""; RUN_TESTS=0; RUN_SAN=0; RUN_HARNESS=0; RUN_PROFILE=0; XDIST=""; BENCH=""; BENCH_ARGS=""; EXTRA=""; TEST_SEL="${TEST_SEL:-tests/kernels tests/models tests/integrations}"; TEST_K="${TEST_K:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) RUN_TESTS=1 ;;
    --test-select) TEST_SEL="$2"; shift ;;
    --test-k) TEST_K="$2"; shift ;;
    --test-shard) TEST_SHARD="$2"; shift ;;
    --sanitize) RUN_SAN=1 ;;
    --harness) RUN_HARNESS=1 ;;
    --profile) RUN_PROFILE=1 ;;
    --xdist) XDIST="-n $2"; shift ;;
    --bench) BENCH="$2"; shift ;;
    --bench-args) BENCH_ARGS="$2"; shift ;;
    --extra) EXTRA="$2"; shift ;;
    --only-on) ONLY_ON="$2"; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
declare -a SUMMARY
note() { SUMMARY+=("$1"); echo "== $1"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOG/gpu.txt"
if [ -n "$ONLY_ON" ] && ! grep -q -- "$ONLY_ON" "$LOG/gpu.txt"; then
  gpu_name=$(cut -d, -f1 "$LOG/gpu.txt" | head -n 1)
  echo "== skipped (--only-on $ONLY_ON): this GPU is ${gpu_name:-unknown (nvidia-smi printed nothing)}"
  exit 0
fi

for wdir in .whl .whl_hf; do
  if ls $wdir/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wdir/*.whl \
      && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}" && note "$wdir: installed $(ls $wdir | wc -l) wheels"
  fi
done
if [ -d .fi_cache ]; then
  export FLASHINFER_WORKSPACE_BASE="$PWD/.fi_cache"
fi

# A library built on the dev machine may be carried in build/gpu (saves the build here); it is used
# only if it loads and reports this package's ABI. Otherwise build here.
t0=$(date +%s)
LIBSO="$PWD/build/gpu/libreplayssm_kernels.so"
# Carried from the dev machine (git-ignored): .carry/libreplayssm_kernels.so.xz (stripped + xz) or .so.gz, built by
# scripts/build_carry.sh (with --trt-inc DIR also .carry/plugins for --harness) for 90a-real: SASS only, ~25 MB xz;
# the default 90a also embeds PTX, ~34 MB, which with the tracked tree, the peers' wheels and FlashInfer's module cache
# no longer fits the 64 MiB carry.
if [ -f .carry/libreplayssm_kernels.so.xz ] || [ -f .carry/libreplayssm_kernels.so.gz ]; then
  mkdir -p build/gpu/plugins
  if [ -f .carry/libreplayssm_kernels.so.xz ]; then
    python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" \
      .carry/libreplayssm_kernels.so.xz "$LIBSO"
  else
    gunzip -c .carry/libreplayssm_kernels.so.gz > "$LIBSO"
  fi
  cp .carry/plugins/* build/gpu/plugins/ 2>/dev/null
fi
if [ -f "$LIBSO" ] && python3 -c "import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); from replayssm_trtllm.ops._lib import EXPECTED_ABI_VERSION as V; sys.exit(0 if l.rssm_kernel_abi_version()==V else 1)" "$LIBSO" 2>>"$LOG/cmake.log"; then
  note "build: using carried build/gpu/libreplayssm_kernels.so"
else
  cmake -S cpp_plugins -B build/gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
        ${TRT_INC:+-DTensorRT_INCLUDE_DIR=$TRT_INC} > "$LOG/cmake.log" 2>&1 \
    && cmake --build build/gpu -j"$(nproc)" >> "$LOG/cmake.log" 2>&1
  rc=$?
  note "build: rc=$rc in $(( $(date +%s) - t0 ))s"
  if [ $rc -ne 0 ]; then tail -40 "$LOG/cmake.log"; exit $rc; fi
fi
export RSSM_KERNEL_LIB="$LIBSO"
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export LD_LIBRARY_PATH="$PWD/build/gpu:$PWD/build/gpu/plugins:${LD_LIBRARY_PATH:-}"

if [ $RUN_PROFILE -eq 1 ]; then
  t0=$(date +%s)
  timeout ${PROFILE_TIMEOUT:-180} ncu --clock-control none --nvtx --nvtx-include "prof/" \
    ${PROFILE_SECTIONS:---section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats} \
    python3 scripts/profile_kernels.py ${PROFILE_ARGS:-} > "$LOG/ncu.log" 2>&1
  rc=$?
  note "ncu profile: rc=$rc [$(( $(date +%s) - t0 ))s]"
  grep -E "^  [A-Za-z_].*\(|Duration|Memory Throughput|DRAM Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Dynamic Shared|Warp Cycles Per Issued|No Eligible|Stall" "$LOG/ncu.log" | head -${PROFILE_LINES:-150}
fi

if [ $RUN_TESTS -eq 1 ]; then
  # The selection's size first, so a -k expression that drops more than meant shows in the summary (fifty-eighth
  # session: -k "not test_gdn ..." also dropped test_dual_precision.py's test_gdn_* functions, 77 cases unseen).
  read -r -a sel <<< "$TEST_SEL"
  pt=(-m gpu "${sel[@]}" ${TEST_K:+-k "$TEST_K"} ${TEST_SHARD:+--shard "$TEST_SHARD"} -p no:cacheprovider)
  note "gpu tests selected${TEST_SHARD:+ (shard $TEST_SHARD)}: $(timeout 60 python3 -m pytest --collect-only -q "${pt[@]}" 2>&1 | tail -1)"
  t0=$(date +%s)
  # -v: one line per test in the log, so a run stopped by its time limit shows which tests it reached
  timeout ${TEST_TIMEOUT:-480} python3 -m pytest -v --durations=30 "${pt[@]}" $XDIST > "$LOG/gpu-tests.log" 2>&1
  rc=$?
  note "gpu tests ($TEST_SEL${TEST_SHARD:+, shard $TEST_SHARD}): rc=$rc, $(tail -1 "$LOG/gpu-tests.log") [$(( $(date +%s) - t0 ))s]"
  [ $rc -eq 124 ] && note "gpu tests: stopped at the limit after $(grep -cE ' (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)' "$LOG/gpu-tests.log") results (each named in gpu-tests.log)"
  grep -E "^(FAILED|ERROR)" "$LOG/gpu-tests.log" | head -20
fi

# pytest's result line and compute-sanitizer's summary line of one sanitizer log (the tool prints it last: memcheck's
# ERROR SUMMARY; racecheck prints RACECHECK SUMMARY instead, s60 on an H100)
san_result() {
  echo "$(grep -E ' in [0-9.]+s( \([0-9:]+\))?$' "$1" | tail -1 | sed 's/^=* *//; s/ *=*$//'); $(grep -E '(ERROR|RACECHECK) SUMMARY' "$1" | tail -1 | sed 's/^=* *//')"
}
if [ $RUN_SAN -eq 1 ]; then
  # SAN_SHARDS=N (default 1; timings in the header): split the sanitize cases round-robin over N compute-sanitizer
  # processes run at once. Each shard's log is sanitize-<tool>-<i>.log; the summary has one line per shard (rc, pytest,
  # the tool's summary) and a last line counting the shards that did not exit 0.
  read -r -a san_sel <<< "${SAN_SEL:-tests/kernels}"
  san_pt=(-q -m "gpu and sanitize" "${san_sel[@]}" ${SAN_K:+-k "$SAN_K"} -p no:cacheprovider)
  shards=${SAN_SHARDS:-1}
  if [ "$shards" -gt 1 ]; then
    mapfile -t san_ids < <(timeout 60 python3 -m pytest --collect-only "${san_pt[@]}" 2>/dev/null \
      | awk '/^$/ {exit} /::/ && !seen[$0]++')   # the ids come first, before a blank line and any warnings summary
    if [ ${#san_ids[@]} -eq 0 ]; then
      note "sanitize cases: none collected for sharding (pytest --collect-only failed?); running each tool as one process"
      shards=1
    else
      note "sanitize cases: ${#san_ids[@]} in $shards shards"
    fi
    for i in $(seq 0 $((shards - 1))); do
      : > "$LOG/sanitize-shard-$i.txt"
      for j in $(seq "$i" "$shards" $((${#san_ids[@]} - 1))); do echo "${san_ids[$j]}" >> "$LOG/sanitize-shard-$i.txt"; done
    done
  fi
  for tool in ${SAN_TOOLS:-memcheck racecheck}; do
    t0=$(date +%s)
    if [ "$shards" -le 1 ]; then
      RSSM_UNDER_SANITIZER=1 timeout ${SAN_TIMEOUT:-120} compute-sanitizer --tool $tool --error-exitcode 99 --target-processes all \
        python3 -m pytest "${san_pt[@]}" > "$LOG/sanitize-$tool.log" 2>&1
      rc=$?
      note "compute-sanitizer $tool: rc=$rc, $(san_result "$LOG/sanitize-$tool.log") [$(( $(date +%s) - t0 ))s]"
      continue
    fi
    pids=()
    for i in $(seq 0 $((shards - 1))); do
      mapfile -t ids < "$LOG/sanitize-shard-$i.txt"
      [ ${#ids[@]} -eq 0 ] && { pids+=(""); continue; }
      RSSM_UNDER_SANITIZER=1 timeout ${SAN_TIMEOUT:-120} compute-sanitizer --tool $tool --error-exitcode 99 --target-processes all \
        python3 -m pytest -q -p no:cacheprovider "${ids[@]}" > "$LOG/sanitize-$tool-$i.log" 2>&1 &
      pids+=($!)
    done
    bad=0
    for i in $(seq 0 $((shards - 1))); do
      [ -z "${pids[$i]}" ] && continue
      wait "${pids[$i]}"; rc=$?
      [ $rc -ne 0 ] && bad=$((bad + 1))
      note "compute-sanitizer $tool shard $i/$shards: rc=$rc, $(san_result "$LOG/sanitize-$tool-$i.log")"
    done
    note "compute-sanitizer $tool: $shards shards, $bad not exiting 0 [$(( $(date +%s) - t0 ))s]"
  done
fi

if [ $RUN_HARNESS -eq 1 ]; then
  H=build/gpu/plugins/rssm_enqueue_harness
  if [ -x "$H" ]; then
    t0=$(date +%s)
    timeout 60 "$H" > "$LOG/harness.log" 2>&1
    rc=$?
    note "TensorRT plugin enqueue harness: rc=$rc, $(tail -1 "$LOG/harness.log") [$(( $(date +%s) - t0 ))s]"
    tail -25 "$LOG/harness.log"
  else
    note "TensorRT plugin enqueue harness: not built (configure with TRT_INC=<TensorRT include dir>)"
  fi
fi

if [ -n "$EXTRA" ]; then
  t0=$(date +%s)
  timeout ${EXTRA_TIMEOUT:-180} bash -c "$EXTRA" > "$LOG/extra.log" 2>&1
  rc=$?
  note "extra ($EXTRA): rc=$rc [$(( $(date +%s) - t0 ))s]"
  tail -40 "$LOG/extra.log"
fi

# benches last: a slow bench cannot starve the checks above of device time
for fam in ${BENCH//,/ }; do
  t0=$(date +%s)
  args_var="BENCH_ARGS_${fam^^}"; fam_args="${!args_var:-$BENCH_ARGS}"
  # FlashInfer JIT-compiles its modules for minutes without a prebuilt cache (.fi_cache/): skip the
  # peer then, unless RSSM_BENCH_FLASHINFER=1 asks for the compile.
  if [ "$fam" = mamba2 ] && [ ! -d .fi_cache ] && [ "${RSSM_BENCH_FLASHINFER:-0}" != 1 ] && [[ " $fam_args " != *" --no-flashinfer "* ]]; then
    fam_args="$fam_args --no-flashinfer"
    note "bench mamba2: no .fi_cache, FlashInfer peer skipped (RSSM_BENCH_FLASHINFER=1 compiles it)"
  fi
  tmo_var="BENCH_TIMEOUT_${fam^^}"; tmo="${!tmo_var:-${BENCH_TIMEOUT:-240}}"
  timeout $tmo python3 -m replayssm_trtllm bench "$fam" $fam_args > "$LOG/bench-$fam.log" 2>&1
  rc=$?
  note "bench $fam: rc=$rc [$(( $(date +%s) - t0 ))s]"
  # the recorded targets, met or missed (its line names the run's GPU, commit and date, so a stale file shows), of
  # the file this run wrote: --out FILE when the bench args name one (a grid or A/B run), else latest-<family>.json;
  # a run cut by its time limit (rc 124) still left the blocks it finished there, marked INCOMPLETE
  out_json="bench/results/latest-$fam.json"
  read -r -a fam_argv <<< "$fam_args"
  for i in "${!fam_argv[@]}"; do
    case "${fam_argv[$i]}" in
      --out) out_json="${fam_argv[$((i + 1))]:-$out_json}" ;;
      --out=*) out_json="${fam_argv[$i]#--out=}" ;;
    esac
  done
  if [ -f "$out_json" ] && { [ $rc -eq 0 ] || [ $rc -eq 124 ]; }; then
    note "targets ($out_json): $(python3 -m replayssm_trtllm targets --summary "$out_json" 2>&1)"
  fi
  cp "$out_json" "$OUT/" 2>/dev/null
  tail -30 "$LOG/bench-$fam.log"
done

cp docs/benchmarks.md "$OUT/benchmarks.md" 2>/dev/null
cp bench/results/*.json "$LOG/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$LOG" . 2>/dev/null

echo; echo "================ summary ================"
for s in "${SUMMARY[@]}"; do echo "$s"; done
