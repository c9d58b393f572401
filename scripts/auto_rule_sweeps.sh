#!/usr/bin/env bash
# Every measured rule of the automatic designs, re-measured in one GPU call (for a card the rules were not measured
# on, e.g. an H200; ~7 minutes on an H100): the GDN replay split rule with fp32 checkpoints
# (scripts/gdn_split_rule_sweep.sh) and with bf16 checkpoints, and the dual-precision decode's read-path rule of both
# families (scripts/dp_path_timing.py). Prints each sweep's suggested values next to the library's tables
# (scripts/ab_variant_ratio.py --suggest, scripts/dp_rule_suggest.py). Run after scripts/gpu_run.sh has built or
# unpacked the library, as its --extra command:
#
#   EXTRA_TIMEOUT=560 scripts/gpu_run.sh --extra 'scripts/auto_rule_sweeps.sh $OUT'
#
# Logs and tables land in OUT_DIR (default /tmp). SWEEPS="gdn32 gdn16 dp" picks a subset.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp}"
mkdir -p "$out"
sweeps="${SWEEPS:-gdn32 gdn16 dp}"
export RSSM_KERNEL_LIB="${RSSM_KERNEL_LIB:-$PWD/build/gpu/libreplayssm_kernels.so}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
summary=()
if [[ " $sweeps " == *" gdn32 "* ]]; then
  scripts/gdn_split_rule_sweep.sh "$out" > "$out/auto-rules-gdn32.txt" 2>&1
  summary+=("GDN replay, fp32 checkpoints: $(tail -n 3 "$out/auto-rules-gdn32.txt" | tr '\n' ' ')")
fi
if [[ " $sweeps " == *" gdn16 "* ]]; then
  log="$out/split-rule-bf16.log"
  scripts/ab_bench.sh gdn "--variants 4,6 --tokens 1,2,3,4,8 --batch 4,8,16,32,64,128 --window 16 --repeats 3 \
--state-dtype bf16" - > "$log" 2>&1
  python3 scripts/ab_variant_ratio.py --markdown "$log" > "$out/split-rule-bf16-table.md" 2>&1
  s=$(python3 scripts/ab_variant_ratio.py --suggest "$log" 2>&1 | tail -n 1)
  sw=$(python3 scripts/ab_variant_ratio.py --suggest --worst "$log" 2>&1 | tail -n 1)
  lib=$(python3 -c 'from replayssm_trtllm.ops import gdn as G; print(",".join(str(G.replay_split_min_batch_heads(t, "bf16")) for t in range(1, 9)))' 2>&1 | tail -n 1)
  summary+=("GDN replay, bf16 checkpoints: suggested $s (mean per point), $sw (every case); library $lib")
fi
if [[ " $sweeps " == *" dp "* ]]; then
  logs=()
  for hv in 32 64; do
    python3 scripts/dp_path_timing.py --batch 1,2,4,8,12,16,32,64 --tokens 1,2,4,8 --hv $hv > "$out/dp-gdn-hv$hv.txt" 2>&1
    logs+=("$out/dp-gdn-hv$hv.txt")
  done
  for shape in super nano; do
    python3 scripts/dp_path_timing.py --family mamba2 --shape $shape --batch 1,2,4,8,16,32,64 --tokens 1,2,4,8 \
      > "$out/dp-mamba2-$shape.txt" 2>&1
    logs+=("$out/dp-mamba2-$shape.txt")
  done
  python3 scripts/dp_rule_suggest.py "${logs[@]}" > "$out/dp-rule-suggest.md" 2>&1
  summary+=("dual-precision decode: $(grep -c '^| \(gdn\|mamba2\) ' "$out/dp-rule-suggest.md") (family, read, T) rows in dp-rule-suggest.md; $(grep 'automatic choice more than' "$out/dp-rule-suggest.md")")
fi
echo "== automatic-design rule sweeps ($(nvidia-smi -L 2>/dev/null | head -n 1))"
for line in "${summary[@]}"; do echo "  $line"; done
[ -f "$out/dp-rule-suggest.md" ] && cat "$out/dp-rule-suggest.md"
exit 0
