#!/usr/bin/env bash
# Side-by-side A/B of the L2 prefetch switches (twenty-first session; every one off by default), one process per
# setting, back to back, twice each: GDN (split readout of the standard step, tensor-core verify readout, conventional
# warp decode on a persistent grid) and Mamba-2 (tensor-core verify readout, conventional warp decode on a persistent
# grid). Run on the GPU machine with the library's environment, e.g.
#   scripts/gpu_run.sh --extra scripts/ab_l2pf.sh      (EXTRA_TIMEOUT=400)
# The switches only issue prefetch.global.L2; test_l2_prefetch_changes_no_value (GDN) checks bit-identical results.
set -u
cd "$(dirname "$0")/.."
GDN_ON="RSSM_GDN_SPLIT_L2PF=1 RSSM_GDN_MMA_L2PF=1 RSSM_GDN_WARP_L2PF=1"
M2_ON="RSSM_MAMBA2_MMA_L2PF=1 RSSM_MAMBA2_WARP_L2PF=1"
scripts/ab_bench.sh gdn "--variants 6 --tokens 1,4,8 --batch 256 --window 16 --repeats 3" - "$GDN_ON" - "$GDN_ON"
scripts/ab_bench.sh mamba2 "--shapes super,nano --tokens 1,4,8 --batch 256 --window 16 --variants 4 --no-sweep-rows \
--no-flashinfer --repeats 3" - "$M2_ON" - "$M2_ON"
