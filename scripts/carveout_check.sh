#!/usr/bin/env bash
# A kernel's shared-memory configuration and L1 under carve-out settings: scripts/ncu_source.sh (Nsight Compute, warm
# L2, plus the memory workload section) once per setting, on the GPU machine after scripts/gpu_run.sh has unpacked the
# library (as its --extra command):
#   scripts/carveout_check.sh ENV_NAME KERNEL_REGEX "PROFILE_ARGS" [SETTING ...]
#     SETTING: "-" (ENV_NAME unset: the driver's choice) or a value of ENV_NAME (e.g. min, driver, 40)
#   e.g. scripts/carveout_check.sh RSSM_GDN_SPLIT_CARVEOUT gdnSplitReadoutKernel "--cases gdn --gdn-variants 6 --spec-tokens ''" - driver
# Prints, per setting and launch: the kernel, its duration, the shared-memory configuration size, dynamic shared memory
# per CTA, the CTAs per SM that the shared memory and the registers allow, the L1 hit rate. The reports are
# ncu_source.sh's: $OUT/carveout-<setting>-details.txt and -src.csv.xz.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then echo "usage: $0 ENV_NAME KERNEL_REGEX PROFILE_ARGS [SETTING ...]" >&2; exit 2; fi
envName="$1"; kre="$2"; pargs="$3"; shift 3
[ $# -gt 0 ] || set -- - min
out="${OUT:-out}"
for s in "$@"; do
  tag="${s//[^A-Za-z0-9]/_}"
  echo "== $envName [$s]"
  if [ "$s" = "-" ]; then unset "$envName"; else export "$envName=$s"; fi
  eval "NCU_EXTRA='--cache-control none --section MemoryWorkloadAnalysis' scripts/ncu_source.sh carveout-$tag '$kre' $pargs"
  grep -E "Context 1|Duration|Shared Memory Configuration Size|Dynamic Shared Memory Per Block|Block Limit Shared|Block Limit Registers|L1/TEX Hit Rate|DRAM Throughput" \
    "$out/carveout-$tag-details.txt" | sed -E 's/ +/ /g; s/\(GdnReplayParams.*|\(Mamba2ReplayParams.*//' | cut -c1-150
done
unset "$envName"
