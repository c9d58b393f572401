#!/usr/bin/env bash
# Nsight Compute on the dual-precision read-copy readouts of `bench precision` (one launch per setting), for an A/B
# of the readout kernels' limiters. Run on the GPU machine with the library's environment (scripts/gpu_run.sh --extra):
#   scripts/ncu_read_copy.sh FAMILY READ SETTING [SETTING ...]
# FAMILY: mamba2 | gdn; READ: fp16 | fp8_e4m3 | nvfp4; SETTING: "-" (defaults) or space-separated VAR=VALUE
# assignments, e.g.
#   scripts/ncu_read_copy.sh mamba2 nvfp4 RSSM_MAMBA2_READ_MMA_HEAD=0 -
# Prints the headline sections of the first readout launch after the warm-up ones (B = 256, L = 16, the bench's shapes).
set -u
cd "$(dirname "$0")/.."
fam="$1"; fmt="$2"; shift 2
for s in "$@"; do
  echo "== ncu $fam $fmt [$s]"
  envs=(); [ "$s" != "-" ] && read -r -a envs <<< "$s"
  env "${envs[@]}" ncu --clock-control none -k "regex:${fam}ReadCopy(Head|Mma)Kernel" -s 2 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis \
    python3 -m replayssm_trtllm bench precision --families "$fam" --reads "$fmt" --reps 2 --layers 1 \
      --no-compare-paths --no-write 2>&1 \
    | grep -E "ReadCopy|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|No Eligible|Issued Warp|Eligible Warps|Active Warps Per|Dynamic Shared|Grid Size|Block Size|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Stall|stall" \
    | sed -E 's/ +/ /g' | head -60
done
