#!/usr/bin/env bash
# Nsight Compute of the Mamba-2 standard split step (prep + readout, Super, B = 256, staggered and all-flush):
# per prep (PREPS, default "lean w4"; other than lean = RSSM_MAMBA2_SPLIT_PREP), then with SRC=1 the source counters
# (SASS, CSV) of the kernel matching SRC_KERNEL (default PrepLean).
# Usage (on the GPU machine, after scripts/gpu_run.sh has unpacked the library): scripts/ncu_split_prep.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-out}"; mkdir -p "$out"
export RSSM_KERNEL_LIB="$PWD/build/gpu/libreplayssm_kernels.so" PYTHONPATH="$PWD:${PYTHONPATH:-}"
sec="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
met="--metrics smsp__inst_executed.sum,gpu__time_duration.sum,smsp__warps_launched.sum"
args="--cases mamba2 --mamba2-variants 4 --spec-tokens ,"
for prep in ${PREPS:-lean w4}; do
  envs=(); [ "$prep" != lean ] && envs=(RSSM_MAMBA2_SPLIT_PREP=$prep)  # lean: the default
  echo "== ncu prep=$prep"
  env "${envs[@]}" ncu --clock-control none --nvtx --nvtx-include "prof/" $sec $met \
    python3 scripts/profile_kernels.py $args > "$out/ncu-$prep.txt" 2>&1
  grep -E "mamba2Split|Duration|inst_executed|Achieved Occupancy|Registers Per|Issued Warp|No Eligible|Memory Throughput|Warp Cycles Per Issued|Waves Per SM" "$out/ncu-$prep.txt" | sed -E 's/ +/ /g'
done
[ "${SRC:-0}" = 1 ] || exit 0
ncu --clock-control none --nvtx --nvtx-include "prof/" -k regex:${SRC_KERNEL:-PrepLean} --section SourceCounters -o /tmp/prep-src -f \
  python3 scripts/profile_kernels.py $args > /dev/null 2>&1
ncu --import /tmp/prep-src.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -c > "$out/prep-sass.csv.xz"
ls -la "$out"
