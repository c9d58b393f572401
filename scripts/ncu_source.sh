#!/usr/bin/env bash
# Nsight Compute source counters of the kernels whose name matches a regex, on scripts/profile_kernels.py cases:
#   scripts/ncu_source.sh NAME KERNEL_REGEX [profile_kernels.py arguments ...]
# writes $OUT/NAME-src.csv.xz (per-instruction SASS with CUDA lines: stall samples, instructions executed; read it
# with scripts/ncu_source_summary.py / ncu_source_hotspots.py) and $OUT/NAME-details.txt (the headline sections),
# and prints the headline numbers. Run on the GPU machine after scripts/gpu_run.sh has unpacked the library (as
# its --extra command). NCU_SCRIPT (default scripts/profile_kernels.py) names another script that marks its kernels
# with NVTX ranges under "prof/" (e.g. scripts/b1_breakdown.py --ncu). NCU_EXTRA: more ncu options (e.g.
# "--cache-control none": by default ncu flushes the caches before every pass, so a launch starts with a cold L2).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then echo "usage: $0 NAME KERNEL_REGEX [profile_kernels.py args]" >&2; exit 2; fi
name="$1"; kre="$2"; shift 2
out="${OUT:-out}"; mkdir -p "$out"
export RSSM_KERNEL_LIB="${RSSM_KERNEL_LIB:-$PWD/build/gpu/libreplayssm_kernels.so}" PYTHONPATH="$PWD:${PYTHONPATH:-}"
# shellcheck disable=SC2086
ncu --clock-control none ${NCU_EXTRA:-} --nvtx --nvtx-include "prof/" -k "regex:$kre" --section SourceCounters --section SpeedOfLight \
  --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --metrics smsp__inst_executed.sum,gpu__time_duration.sum -o "/tmp/ncu-$name" -f \
  python3 "${NCU_SCRIPT:-scripts/profile_kernels.py}" "$@" > "/tmp/ncu-$name.log" 2>&1
rc=$?
echo "== ncu $name ($kre): rc=$rc"
[ $rc -eq 0 ] || tail -20 "/tmp/ncu-$name.log"
ncu -i "/tmp/ncu-$name.ncu-rep" --page source --csv --print-source cuda,sass 2>/dev/null | xz -c > "$out/$name-src.csv.xz"
ncu -i "/tmp/ncu-$name.ncu-rep" --page details > "$out/$name-details.txt" 2>&1
grep -E "^  [A-Za-z_].*\(|Duration|inst_executed|DRAM Throughput|Registers Per|Achieved Occupancy|Waves Per SM|Issue Slots Busy|Issued Warp|No Eligible|Warp Cycles Per Issued" \
  "$out/$name-details.txt" | sed -E 's/ +/ /g'
