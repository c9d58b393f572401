#!/usr/bin/env bash
# A/B timing of environment switches with one build, each setting in its own process, back to back:
#
#   scripts/ab_bench.sh FAMILY "BENCH ARGS" SETTING [SETTING ...]
#
# SETTING is "-" (no switch) or space-separated NAME=VALUE pairs, e.g. "RSSM_MAMBA2_SPLIT_PREP=w4". Two builds in one
# run: "RSSM_KERNEL_LIB=/tmp/ref.so" as a setting loads another kernel library in that process (carry it stripped and
# xz'd in .carry/ and unpack it first, e.g. `xz -dc .carry/ref.so.xz > /tmp/ref.so`; thirty-fifth session). Prints the
# timing lines of `replayssm-trtllm bench FAMILY BENCH ARGS` per setting (correctness checks that fail are
# printed too), then one table of every case by process (scripts/ab_summary.py). Expects the kernel library built
# or unpacked by scripts/gpu_run.sh (build/gpu). Timings only: the official results come from scripts/gpu_run.sh
# --bench (which writes the JSON). With nvidia-smi present, each process's SM clock is sampled every 100 ms and the
# median over the busy samples is printed after it (a row of the table): tensor-core work lowered the H200's clock
# by 8-10% in the twenty-sixth session, which timings alone do not show.
set -uo pipefail
cd "$(dirname "$0")/.."
fam="$1"; args="$2"; shift 2
export RSSM_KERNEL_LIB="${RSSM_KERNEL_LIB:-$PWD/build/gpu/libreplayssm_kernels.so}"
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
log="$(mktemp /tmp/ab-$fam-XXXX.log)"
for setting in "$@"; do
  echo "== $fam [$setting] bench $args"
  envs=()
  [ "$setting" != "-" ] && read -r -a envs <<< "$setting"
  clk=""
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=clocks.sm,utilization.gpu --format=csv,noheader,nounits -lms 100 > "$log.clk" 2>/dev/null &
    clk=$!
  fi
  # shellcheck disable=SC2086
  env "${envs[@]}" python3 -m replayssm_trtllm bench "$fam" $args --out "/tmp/ab-$fam.json" 2>&1 \
    | grep -E "us/step| us |FAIL|rror|copy:|copy bandwidth" | grep -v "^  best" | sed -E 's/ +/ /g'
  if [ -n "$clk" ]; then
    kill "$clk" 2>/dev/null; wait "$clk" 2>/dev/null
    python3 scripts/ab_summary.py --clock "$log.clk"
  fi
done | tee "$log"
# one row per case, one column per process (scripts/ab_summary.py)
python3 scripts/ab_summary.py "$log"
