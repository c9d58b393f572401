#!/usr/bin/env bash
# Side-by-side A/B of the dual-precision steps (bench precision), one process per setting:
#   [AB_ROWS=window|both] scripts/ab_precision.sh "BENCH PRECISION ARGS" SETTING [SETTING ...]
# SETTING: "-" (defaults) or space-separated VAR=VALUE assignments for that process. Prints each process's non-flush
# rows and targets (AB_ROWS=window: the window-amortized steps, default and serial, and the conventional step;
# AB_ROWS=both: the non-flush and the window rows) (no results are written: --no-write). Run on the GPU machine with
# the library's environment (scripts/gpu_run.sh --extra). Examples:
#   scripts/ab_precision.sh "--families gdn --reads fp8_e4m3,nvfp4 --reps 20" - RSSM_GDN_READ_MMA_LEAN=0 -
#   AB_ROWS=window scripts/ab_precision.sh "--reads nvfp4,fp16" RSSM_DP_FLUSH_FIXED_FMT=0 - RSSM_DP_FLUSH_FIXED_FMT=0 -
set -u
cd "$(dirname "$0")/.."
args="$1"; shift
for s in "$@"; do
  echo "== precision [$s] $args"
  envs=(); [ "$s" != "-" ] && read -r -a envs <<< "$s"
  if [ "${AB_ROWS:-nonflush}" = window ]; then
    rows="window-amortized step  |window-amortized step, serial|conventional fp32|^target .*window|copy bandwidth|Error|error"
  elif [ "${AB_ROWS:-nonflush}" = both ]; then
    rows="non-flush step|window-amortized step  |window-amortized step, serial|conventional fp32|^target|copy bandwidth|Error|error"
  else
    rows="non-flush step|^target .*nonflush|copy bandwidth|Error|error"
  fi
  # shellcheck disable=SC2086
  env "${envs[@]}" python3 -m replayssm_trtllm bench precision $args --no-compare-paths --no-write 2>&1 \
    | grep -E "$rows" | grep -v "CUDA-core" | sed -E 's/ +/ /g'
done
