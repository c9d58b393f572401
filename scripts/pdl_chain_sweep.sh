#!/usr/bin/env bash
# RSSM_PDL_CHAIN=1 against the default at small and mid batches, both families, every kernel the automatic designs
# pick there (Mamba-2: stream kernel 3 and the split kernels 4, which the bench times side by side; GDN: the library's
# automatic choice -1 and the split kernels 6), each setting in its own process, alternating (scripts/ab_bench.sh).
# The fifty-fourth session measured the chain at B = 1 and B = 256 only (docs/benchmarks.md "Fifty-fourth session":
# B = 1 one-token steps 7-12% faster, the split kernels' B = 1 T = 4 verify 2-4% slower, B = 256 a wash); this is the
# rest of the data a per-step-kind default needs. The fifty-fifth session ran both families on an H100 (docs/benchmarks.md
# "Fifty-fifth session": no per-step-kind default adopted); `python3 scripts/ab_summary.py --by-kind LOG` groups the
# output by step kind, tokens and batch. Run after scripts/gpu_run.sh has built or unpacked the library, as
# its --extra command, one family per call (each takes several minutes):
#
#   EXTRA_TIMEOUT=560 scripts/gpu_run.sh --extra 'scripts/pdl_chain_sweep.sh mamba2'
#   EXTRA_TIMEOUT=560 scripts/gpu_run.sh --extra 'scripts/pdl_chain_sweep.sh gdn'
#
# BATCH (default 2,4,16,64) and TOKENS (default 1,2,4,8) override the sizes, VARIANTS the variant list (default
# mamba2 3,4, gdn -1,6). EXIT_LIB=PATH adds a third setting, the chain with the kernel library at PATH: an A/B build
# with -DRSSM_PDL_CHAIN_EXIT_TRIGGER=1 (common/pdl.h pdlChainEntryStep: the one-kernel steps trigger their dependents
# at exit, not at entry), carried as .carry/exit.so.xz:
#
#   xz -dc .carry/exit.so.xz > /tmp/exit.so && EXIT_LIB=/tmp/exit.so BATCH=1,2,4,8 scripts/pdl_chain_sweep.sh gdn
#
# Building that library here (~4 min on 2 cores; ~24 MB stripped + xz, so carry it without .whl_hf: the 64 MiB limit):
#   cmake -S cpp_plugins -B /tmp/build_exit -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
#         -DCMAKE_CUDA_FLAGS=-DRSSM_PDL_CHAIN_EXIT_TRIGGER=1 && make -C /tmp/build_exit -j2 replayssm_kernels
#   strip -o /tmp/exit.so /tmp/build_exit/libreplayssm_kernels.so && xz -9 -T2 -c /tmp/exit.so > .carry/exit.so.xz
# The same library with the chain off (the default path: the one-kernel steps' commit launches later too) is not a
# setting of this script; time it with scripts/ab_bench.sh FAMILY "ARGS" - RSSM_KERNEL_LIB=/tmp/exit.so - RSSM_KERNEL_LIB=/tmp/exit.so
set -uo pipefail
cd "$(dirname "$0")/.."
fam="${1:?usage: scripts/pdl_chain_sweep.sh mamba2|gdn}"
batch="${BATCH:-2,4,16,64}"
tokens="${TOKENS:-1,2,4,8}"
case "$fam" in
  mamba2) args="--variants ${VARIANTS:-3,4} --no-sweep-rows --repeats 3 --tokens $tokens --batch $batch --no-flashinfer" ;;
  gdn) args="--variants=${VARIANTS:--1,6} --tokens $tokens --batch $batch --window 16 --repeats 3" ;;
  *) echo "pdl_chain_sweep.sh: family must be mamba2 or gdn; got '$fam'" >&2; exit 2 ;;
esac
if [ -n "${EXIT_LIB:-}" ]; then
  [ -f "$EXIT_LIB" ] || { echo "pdl_chain_sweep.sh: EXIT_LIB=$EXIT_LIB is not a file" >&2; exit 2; }
  exit_setting="RSSM_PDL_CHAIN=1 RSSM_KERNEL_LIB=$EXIT_LIB"
  exec scripts/ab_bench.sh "$fam" "$args" - RSSM_PDL_CHAIN=1 "$exit_setting" - RSSM_PDL_CHAIN=1 "$exit_setting"
fi
exec scripts/ab_bench.sh "$fam" "$args" - RSSM_PDL_CHAIN=1 - RSSM_PDL_CHAIN=1
