#!/usr/bin/env bash
# Prove hloscope on a machine with one NVIDIA GPU, from a fresh clone, in about 10 minutes: set up .venv, add the CUDA
# wheels the pinned versions need when a GPU is present, then run hloscope.gpucheck (every step, every check, one
# output folder with SUMMARY.md). `--dry-run` runs every step on the CPU with the tiny preset (CI runs it).
#
#   bash scripts/gpu-check.sh [--dry-run] [--out DIR] [--modes pytorch,jax] [--max-mb 10] [--timeout S] [--budget-s S]
#
# HLOSCOPE_PYTHON=/path/to/python uses an environment that is already set up (no pip at all). HLOSCOPE_WHEELS=DIR
# (a machine without a package index: this project's lent GPU machine, wheels from scripts/gpu-wheels.sh) also skips
# scripts/setup.sh: it installs DIR/*.whl with --no-index into HLOSCOPE_SITE (default /tmp/hloscope-site), which goes on
# PYTHONPATH before the environment's own packages; hloscope runs from this source tree either way (no install, so the
# HLO C extension is absent there: its pure-Python path runs). docs/gpu-check.md.
set -euo pipefail
cd "$(dirname "$0")/.."
dry_run=0
for arg in "$@"; do
  [ "$arg" = "--dry-run" ] && dry_run=1
done
if [ -n "${HLOSCOPE_WHEELS:-}" ]; then
  python=${HLOSCOPE_PYTHON:-python3}
  site=${HLOSCOPE_SITE:-/tmp/hloscope-site}
  shopt -s nullglob
  wheels=("$HLOSCOPE_WHEELS"/*.whl)
  shopt -u nullglob
  if [ "${#wheels[@]}" = 0 ]; then
    echo "gpu-check: HLOSCOPE_WHEELS=$HLOSCOPE_WHEELS holds no wheels (run scripts/gpu-wheels.sh, then carry .whl)" >&2
    exit 2
  fi
  "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$site" "${wheels[@]}"
  echo "gpu-check: ${#wheels[@]} wheels from $HLOSCOPE_WHEELS installed into $site (first on PYTHONPATH after the source tree)"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
elif [ -n "${HLOSCOPE_PYTHON:-}" ]; then
  python=$HLOSCOPE_PYTHON
else
  bash scripts/setup.sh
  python=.venv/bin/python
  if [ "$dry_run" = 0 ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    # requirements.txt pins jax[cpu]: on a GPU jaxlib needs its CUDA 12 plugin of the same version (PyPI's
    # jax-cuda12-plugin and jax-cuda12-pjrt, with the nvidia-*-cu12 libraries). torch==2.9.0 from PyPI is already
    # the CUDA 12.8 build on Linux x86_64; a CPU build (+cpu, from another index) is replaced by PyPI's.
    jax_version=$("$python" -c 'import importlib.metadata as m; print(m.version("jax"))')
    "$python" -m pip install --quiet --disable-pip-version-check "jax[cuda12]==$jax_version"
    if [ "$("$python" -c 'import torch; print(torch.version.cuda or "")')" = "" ]; then
      torch_version=$("$python" -c 'import importlib.metadata as m; print(m.version("torch").split("+")[0])')
      "$python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps \
        --index-url https://pypi.org/simple "torch==$torch_version"
      "$python" -m pip install --quiet --disable-pip-version-check --index-url https://pypi.org/simple \
        "torch==$torch_version"
    fi
  fi
fi
if [ "$dry_run" = 1 ]; then
  export PJRT_DEVICE=CPU
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m hloscope.gpucheck "$@"
