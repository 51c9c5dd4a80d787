#!/usr/bin/env bash
# Create (or refresh) .venv-cuda: jax + its CUDA 12 plugin + ptxas, for compiling train steps for a GPU this machine
# does not have (`hloscope run --target h100|a100|PATH`). About 1.2 GB, ~20 s. Needs no GPU.
# Kept apart from .venv because the plugin makes every JAX process on a machine without a GPU log a plugin
# initialisation traceback (see docs/gpu-target.md). Idempotent: a second call only checks the pins.
set -euo pipefail
cd "$(dirname "$0")/.."
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64|Linux-aarch64) ;;
  *) echo "setup-cuda-target: jax's CUDA plugin has wheels for Linux x86_64/aarch64 only; --target is unavailable here" >&2
     exit 0 ;;
esac
PYTHON=${PYTHON:-python3}
if [ ! -x .venv-cuda/bin/python ]; then
  "$PYTHON" -m venv .venv-cuda
fi
stamp=.venv-cuda/.hloscope-requirements
if ! cmp -s requirements-cuda-target.txt "$stamp" 2>/dev/null; then
  .venv-cuda/bin/pip install --quiet --disable-pip-version-check -r requirements-cuda-target.txt
  cp requirements-cuda-target.txt "$stamp"
fi
