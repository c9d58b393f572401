#!/usr/bin/env bash
# The switches prepared for the next device session, side by side (one process per setting, each setting twice).
# Twenty-third session: RSSM_MAMBA2_FUSED_PARTS=n (the one-launch small-batch Mamba-2 step with a head's 8-row items
# split over n CTAs; 1 = one CTA per (row, head), the default) at B = 1 on both shapes. Run on the GPU machine with the
# library's environment after the fused tests, e.g.
#   SAN_SEL=tests/kernels/test_mamba2.py SAN_K=fused_sanitize EXTRA_TIMEOUT=300 scripts/gpu_run.sh --tests --xdist 4 \
#     --test-select tests/kernels/test_mamba2.py --test-k fused --sanitize --extra scripts/ab_prepared.sh
# (The twenty-second session's switches, RSSM_MAMBA2_MMA_HSM and RSSM_GDN_SPLIT_UPD, were decided in the twenty-third:
# HSM removed, UPD the default.)
set -u
cd "$(dirname "$0")/.."
scripts/ab_bench.sh mamba2 "--shapes super,nano --tokens 1 --batch 1 --window 16 --variants 4 --no-sweep-rows \
--no-flashinfer --repeats 5" - RSSM_MAMBA2_FUSED_PARTS=2 RSSM_MAMBA2_FUSED_PARTS=4 RSSM_MAMBA2_FUSED_PARTS=10 \
  - RSSM_MAMBA2_FUSED_PARTS=2 RSSM_MAMBA2_FUSED_PARTS=4 RSSM_MAMBA2_FUSED_PARTS=10
