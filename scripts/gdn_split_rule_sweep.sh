#!/usr/bin/env bash
# The sweep behind the GDN automatic design's split rule (gdn_launch.cu kSplitMinBatchHeads, RSSM_GDN_SPLIT_MIN_BH):
# stream kernel 4 against the split kernels (variant 6), side by side in each process, on both Qwen3.5 shapes over
# the batches and token counts where the crossovers lay on an H100 (fifty-second session), then the ratio table and
# the suggested RSSM_GDN_SPLIT_MIN_BH value (scripts/ab_variant_ratio.py). Run on the GPU after scripts/gpu_run.sh
# has built or unpacked the library (e.g. as its --extra command); ~4 minutes on an H100.
#
#   scripts/gdn_split_rule_sweep.sh [OUT_DIR]      # logs and the table land in OUT_DIR (default /tmp)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp}"
mkdir -p "$out"
logs=()
run() {  # run NAME "BENCH ARGS"
  local log="$out/split-rule-$1.log"
  scripts/ab_bench.sh gdn "$2 --window 16 --repeats 3" - > "$log" 2>&1
  echo "== $1: rc=$? ($(grep -c ' us' "$log") timing lines) -> $log"
  logs+=("$log")
}
run t1     "--variants 4,6 --tokens 1 --batch 8,12,16,24,32,64,128"
run t2     "--variants 4,6 --tokens 2 --batch 32,48,64,128,256"
run t3t4   "--variants 4,6 --tokens 3,4 --batch 4,8,16,32,64"
run t5t8   "--variants 4,6 --tokens 5,6,7,8 --batch 2,4,8,16"
python3 scripts/ab_variant_ratio.py --markdown "${logs[@]}" | tee "$out/split-rule-table.md"
{ echo "mean per point: $(python3 scripts/ab_variant_ratio.py --suggest "${logs[@]}")"
  echo "every case:     $(python3 scripts/ab_variant_ratio.py --suggest --worst "${logs[@]}")"; } | tee "$out/split-rule-suggest.txt"
echo "(the library's rule now: $(RSSM_KERNEL_LIB="${RSSM_KERNEL_LIB:-$PWD/build/gpu/libreplayssm_kernels.so}" PYTHONPATH=$PWD python3 -c 'from replayssm_trtllm.ops import gdn as G; print(",".join(str(G.replay_split_min_batch_heads(t)) for t in range(1, 9)))' 2>/dev/null))"
