#!/usr/bin/env bash
# Fetch transformers and the dependencies the GPU image lacks, as wheels for the GPU machine (python 3.12, no package
# index there), into .whl_hf/ (git-ignored; scripts/gpu_run.sh installs it when carried). tests/models compares our
# models with transformers' own at the pinned version (docs/models.md); without it those tests skip or, with the image's
# own transformers, refuse the patch.
#
#   transformers 5.25.0 + huggingface_hub 2.4.0, tokenizers, safetensors, kernels (transformers' requirements), and
#   huggingface_hub 2.4's HTTP stack: httpx2 / httpcore2 with anyio, idna, h11, truststore (without httpx2 `import
#   transformers` fails: the forty-fifth session's whole-suite runs skipped the three comparisons for it).
#   hf-xet (4 MB) is not fetched: nothing in the tests downloads from the Hub.
#
# Usage: scripts/fetch_hf_wheels.sh   (from the repo root; idempotent, ~21 MB)
# Env:   PYTHON (host python with pip, default python3)
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || dirname "$0"/..)"
PYTHON=${PYTHON:-python3}
mkdir -p .whl_hf
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
PINS=(transformers==5.25.0 huggingface_hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 kernels==0.19.1
      httpx2==2.17.0 httpcore2==2.17.0 anyio==4.16.0 idna==3.21 h11==0.16.0 truststore==0.10.5)
for pin in "${PINS[@]}"; do
  "$PYTHON" -m pip download -q --no-deps "${PLAT[@]}" -d .whl_hf "$pin" 2>&1 | grep -v "is ignored" || true
done
n=$(ls .whl_hf/*.whl | wc -l)
echo "== .whl_hf: $n wheels, $(du -sh .whl_hf | cut -f1)"
[ "$n" -ge "${#PINS[@]}" ] || { echo "missing wheels: expected ${#PINS[@]}" >&2; exit 1; }
