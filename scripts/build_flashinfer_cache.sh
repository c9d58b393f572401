#!/usr/bin/env bash
# Prebuild FlashInfer's mamba JIT modules for the H200 (sm_90a) on this CPU-only machine, into
# .fi_cache/ (git-ignored), so the GPU run loads them instead of compiling (a checkpointing_ssu
# module takes ~10 min of nvcc on 2 cores, and its two large translation units do not get faster
# with more cores).
#
# Layout written (FlashInfer's own JIT layout, FLASHINFER_WORKSPACE_BASE=.fi_cache):
#   .fi_cache/.cache/flashinfer/<fi version>/90a/cached_ops/<uri>/<uri>.so
#   .fi_cache/.cache/flashinfer/<fi version>/90a/generated/<uri>/...      (rendered sources)
# Object files are deleted afterwards (only the .so is loaded). On the GPU,
# replayssm_trtllm.bench.peers points FlashInfer's AOT directory (jit.env.FLASHINFER_AOT_DIR) at
# that cached_ops folder, so a prebuilt .so is loaded directly (no ninja, no nvcc); any other
# shape is JIT-built there into the same folder.
#
# Prerequisite: scripts/fetch_peer_wheels.sh (the trimmed flashinfer wheel and apache-tvm-ffi in
# .whl/). Building against the trimmed wheel also proves it carries every header a build needs.
#
# Usage: scripts/build_flashinfer_cache.sh [CASE ...]
#   CASE = ssu:<dim>:<dstate>:<T>                     selective_state_update (sm90 variant)
#        | cssu:<dim>:<dstate>:<T>:<max_window>:<heads_per_group>:<ngroups>   checkpointing_ssu
#        | cssu-pdl:...  (the same fields)   checkpointing_ssu with enable_pdl=True (the peer of a run with
#          RSSM_PDL_CHAIN=1, replayssm_trtllm.bench.peers.pdl_chain_requested)
#   Exit status 1 when any module failed to compile (FlashInfer 0.7.4 checkpointing_ssu cannot compile
#   headdim 80, the Nemotron-3-Nano shape: 46 errors at D_PER_CTA = 40).
#   default: the Nemotron-3-Super shape (H=128, P=64, N=128, G=8 -> heads_per_group 16), L=16:
#        ssu:64:128:1  cssu:64:128:1:16:16:8  cssu:64:128:4:16:16:8
#   dtypes are fixed to our cases: fp32 state, bf16 x/B/C/z, int32 slot indices;
#   ssu: dt, D, dt_bias fp32 (FlashInfer requires D and dt_bias in dt's dtype);
#   cssu: dt bf16 (native), D/dt_bias fp32, A fp32.
# Env: PYTHON (host python with torch, default /work/venv/bin/python), RSSM_PEER_DL (scratch,
#      default /tmp/rssm_peer_dl), CUDA_HOME (default /usr/local/cuda), FI_ARCH (default 9.0a).
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || dirname "$0"/..)"
ROOT=$PWD
PYTHON=${PYTHON:-/work/venv/bin/python}
DL=${RSSM_PEER_DL:-/tmp/rssm_peer_dl}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
FI_WHL=$(ls .whl/flashinfer_python-*.whl 2>/dev/null | head -1)
TVM_VERSION=$(ls .whl/apache_tvm_ffi-*.whl 2>/dev/null | head -1 | sed -E 's/.*apache_tvm_ffi-([^-]+)-.*/\1/')
[ -n "$FI_WHL" ] && [ -n "$TVM_VERSION" ] || { echo "run scripts/fetch_peer_wheels.sh first" >&2; exit 1; }

# Host env: the trimmed flashinfer, tvm-ffi built for the host python, and small pure deps.
SITE="$DL/site_trim"
rm -rf "$SITE"
"$PYTHON" -m pip install -q --no-deps --no-compile --target "$SITE" "$FI_WHL"
HOSTENV="$DL/hostenv"
if [ ! -d "$HOSTENV/tvm_ffi" ]; then
  "$PYTHON" -m pip install -q --no-deps --target "$HOSTENV" "apache-tvm-ffi==$TVM_VERSION" 2>&1 | grep -v "is ignored" || true
  "$PYTHON" -m pip install -q --target "$HOSTENV" einops requests tqdm tabulate click ninja nvidia-ml-py jinja2 filelock packaging 2>&1 | grep -v "is ignored" || true
fi
# The link line asks for -lcuda; no driver here, so link against an empty stub with the
# driver's soname (the .so ends up needing only libcudart.so.13, which torch loads on the GPU).
STUBS="$DL/stubs"
if [ ! -f "$STUBS/libcuda.so" ]; then
  mkdir -p "$STUBS"; echo "" > "$STUBS/empty.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$STUBS/libcuda.so" "$STUBS/empty.c"
fi

export PATH="$HOSTENV/bin:$CUDA_HOME/bin:$PATH"
export LIBRARY_PATH="$STUBS${LIBRARY_PATH:+:$LIBRARY_PATH}"
export FLASHINFER_WORKSPACE_BASE="$ROOT/.fi_cache"
export FLASHINFER_CUDA_ARCH_LIST=${FI_ARCH:-9.0a}
export PYTHONPATH="$SITE:$HOSTENV"
mkdir -p .fi_cache
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(ssu:64:128:1 cssu:64:128:1:16:16:8 cssu:64:128:4:16:16:8)

export RSSM_FI_FAILED="$DL/failed_modules.txt"
rm -f "$RSSM_FI_FAILED"
"$PYTHON" - "${CASES[@]}" <<'PY'
import os, sys, time
import torch
from flashinfer.jit import env as jit_env
from flashinfer.jit.mamba import gen_selective_state_update_sm90_module
from flashinfer.jit.mamba.checkpointing_ssu import gen_checkpointing_ssu_module
f32, bf16, i32, i64 = torch.float32, torch.bfloat16, torch.int32, torch.int64
print("JIT dir:", jit_env.FLASHINFER_JIT_DIR, flush=True)
failed = []
for case in sys.argv[1:]:
    kind, *nums = case.split(":")
    n = [int(v) for v in nums]
    if kind == "ssu":
        dim, dstate, t = n
        # (state, input, weight(=dt), A, stateIndex, state_scale, dim, dstate, ntokens,
        #  cu_seqlens, num_accepted_tokens, philox_rounds) exactly as selective_state_update keys it
        spec = gen_selective_state_update_sm90_module(f32, bf16, f32, f32, i32, None, dim, dstate, t,
                                                      i32, i64, 0)
    elif kind in ("cssu", "cssu-pdl"):
        dim, dstate, t, mw, hpg, ng = n
        # (state, input, dt, weight(=D), A, stateIndex, state_scale, dim, dstate, npredicted,
        #  max_window, heads_per_group, ngroups, philox_rounds, enable_pdl)
        spec = gen_checkpointing_ssu_module(f32, bf16, bf16, f32, f32, i32, None, dim, dstate, t, mw,
                                            hpg, ng, 0, kind == "cssu-pdl")
    else:
        raise SystemExit(f"unknown case {case!r}")
    t0 = time.time()
    try:
        spec.build(verbose=False)
        print(f"built {spec.name} in {time.time() - t0:.0f} s", flush=True)
    except Exception as e:  # keep going: one shape failing (e.g. an unsupported dim) is a finding
        failed.append(spec.name)
        print(f"FAILED {spec.name} after {time.time() - t0:.0f} s: {str(e)[-2000:]}", flush=True)
print("failed:", failed)
if failed:  # the script's exit status says so (the caller must not take a failed shape for a built one)
    open(os.environ["RSSM_FI_FAILED"], "w").write("\n".join(failed) + "\n")
PY

# Keep only what is loaded (.so) plus the small build files; drop object files and locks.
find .fi_cache -name '*.o' -delete
find .fi_cache -name '*.lock' -delete
echo "== .fi_cache"
find .fi_cache -name '*.so' -printf '%s\t%p\n'
du -sh .fi_cache
if [ -s "$RSSM_FI_FAILED" ]; then
  echo "FAILED modules (not built; FlashInfer cannot compile these shapes):" >&2
  cat "$RSSM_FI_FAILED" >&2
  exit 1
fi
