#!/usr/bin/env bash
# A kernel's shared-memory configuration and L1 under carve-out settings, by Nsight Compute (warm L2), on the GPU
# machine after scripts/gpu_run.sh has unpacked the library (as its --extra command):
#   scripts/carveout_check.sh ENV_NAME KERNEL_REGEX "PROFILE_ARGS" [SETTING ...]
#     SETTING: "-" (ENV_NAME unset: the driver's choice) or a value of ENV_NAME (e.g. min, 40)
#   e.g. scripts/carveout_check.sh RSSM_GDN_SPLIT_CARVEOUT gdnSplitReadoutKernel "--cases gdn --gdn-variants 6 --spec-tokens ''" - min
# Prints, per setting and launch: the kernel, its duration, the shared-memory configuration size, dynamic shared memory
# per CTA, the CTAs per SM that the shared memory and the registers allow, the L1 hit rate. Full reports (details page)
# go to $OUT/carveout-<setting>-details.txt; ncu's own log is printed when it fails.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then echo "usage: $0 ENV_NAME KERNEL_REGEX PROFILE_ARGS [SETTING ...]" >&2; exit 2; fi
envName="$1"; kre="$2"; pargs="$3"; shift 3
[ $# -gt 0 ] || set -- - min
out="${OUT:-out}"; mkdir -p "$out"
export RSSM_KERNEL_LIB="${RSSM_KERNEL_LIB:-$PWD/build/gpu/libreplayssm_kernels.so}" PYTHONPATH="$PWD:${PYTHONPATH:-}"
for s in "$@"; do
  tag="${s//[^A-Za-z0-9]/_}"
  echo "== $envName [$s]"
  if [ "$s" = "-" ]; then unset "$envName"; else export "$envName=$s"; fi
  # shellcheck disable=SC2086
  eval "ncu --clock-control none --cache-control none --nvtx --nvtx-include 'prof/' -k 'regex:$kre' \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    -o /tmp/carveout-$tag -f python3 scripts/profile_kernels.py $pargs" > "/tmp/carveout-$tag.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then echo "ncu rc=$rc"; tail -15 "/tmp/carveout-$tag.log"; continue; fi
  ncu -i "/tmp/carveout-$tag.ncu-rep" --page details > "$out/carveout-$tag-details.txt" 2>&1
  grep -E "Context 1|Duration|Shared Memory Configuration Size|Dynamic Shared Memory Per Block|Block Limit Shared|Block Limit Registers|L1/TEX Hit Rate|DRAM Throughput" \
    "$out/carveout-$tag-details.txt" | sed -E 's/ +/ /g; s/\(GdnReplayParams.*|\(Mamba2ReplayParams.*//' | cut -c1-150
done
unset "$envName"
