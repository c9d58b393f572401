#!/usr/bin/env bash
# The twenty-second session's prepared A/B switches (both off by default, neither yet run on a GPU), side by side, two
# processes per setting: RSSM_MAMBA2_MMA_HSM=1 (Mamba-2 verify readout: head records by bulk copy, T <= 4) and
# RSSM_GDN_SPLIT_UPD=1 (GDN standard-step readout: the u_j permute after token 0's loads). Run on the GPU machine with
# the library's environment after their tests, e.g.
#   SAN_SEL="tests/kernels/test_mamba2.py tests/kernels/test_gdn.py" SAN_K="mma_readout_sanitize or deferred" \
#   EXTRA_TIMEOUT=300 scripts/gpu_run.sh --tests --xdist 4 \
#     --test-select "tests/kernels/test_mamba2.py tests/kernels/test_gdn.py" --test-k "hsm or deferred" \
#     --sanitize --extra scripts/ab_prepared.sh
set -u
cd "$(dirname "$0")/.."
scripts/ab_bench.sh mamba2 "--shapes super,nano --tokens 4 --batch 256 --window 16 --variants 4 --no-sweep-rows \
--no-flashinfer --repeats 3" - RSSM_MAMBA2_MMA_HSM=1 - RSSM_MAMBA2_MMA_HSM=1
scripts/ab_bench.sh gdn "--variants 6 --tokens 1 --batch 256 --window 16 --repeats 3" - RSSM_GDN_SPLIT_UPD=1 - \
  RSSM_GDN_SPLIT_UPD=1
