#!/usr/bin/env bash
# The dual-precision GDN decode's split rule (dual_precision_decode_gdn.cu gdnDpSplitMinBatchHeads; 8192 for every
# format until the fifty-third session, which ran this first, then set the rule per format and T from
# scripts/dp_path_timing.py): the default read path (stream on 16-bit read copies or tile, below the rule) against
# RSSM_DP_DECODE_PATH=split, side by side, one process per setting and batch,
# on the precision bench's GDN shape (HV = 64) at mid batches. Prints the non-flush and window-amortized rows of
# each process (scripts/ab_precision.sh AB_ROWS=both). Run on the GPU after scripts/gpu_run.sh has built or unpacked
# the library (e.g. as its --extra command).
#
#   scripts/dp_split_rule_sweep.sh [OUT_DIR] [BATCHES] [READS]   # default /tmp, "8 16 32 64 128", fp16,fp8_e4m3,nvfp4
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp}"
batches="${2:-8 16 32 64 128}"
reads="${3:-fp16,fp8_e4m3,nvfp4}"
mkdir -p "$out"
for b in $batches; do
  log="$out/dp-split-rule-B$b.log"
  AB_ROWS=both scripts/ab_precision.sh "--families gdn --batch $b --reads $reads --reps 20" - RSSM_DP_DECODE_PATH=split \
    > "$log" 2>&1
  echo "== B = $b: rc=$? -> $log"
  cat "$log"
done
