#!/usr/bin/env bash
# One entry point for a fresh machine. Creates (or reuses) a virtual environment in .venv,
# installs what it needs, then:
#   ./dev.sh check          run the main job on the embedded default (replayssm-trtllm check)
#   ./dev.sh test [args]    run the test suite (what CI runs); extra args go to pytest
#   ./dev.sh shell          print the command that activates the environment
# Environment: RSSM_VENV (default .venv), RSSM_BUILD_KERNELS (auto|0|1), RSSM_CUDA_ARCHS (default 90a).
set -euo pipefail
cd "$(dirname "$0")"
VENV="${RSSM_VENV:-.venv}"
PY="${PYTHON:-python3}"

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "[dev] creating virtual environment $VENV"
    "$PY" -m venv "$VENV"
  fi
  # torch 2.13.0: a CPU build lies on this workplace's disk; elsewhere pip fetches it.
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "[dev] installing torch==2.13.0"
    "$VENV/bin/pip" install -q "torch==2.13.0"
  fi
  echo "[dev] installing replayssm-trtllm (editable) with test extras"
  "$VENV/bin/pip" install -q -e ".[test]"
  echo "[dev] $("$VENV/bin/python" -m replayssm_trtllm.ops._lib)"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  check)
    setup
    exec "$VENV/bin/replayssm-trtllm" check "$@" ;;
  test)
    setup
    exec "$VENV/bin/python" -m pytest -q "$@" ;;
  shell)
    setup
    echo "source $VENV/bin/activate" ;;
  *)
    echo "usage: ./dev.sh check | test [pytest args] | shell" >&2
    exit 2 ;;
esac
