#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv with the pinned dependencies.
# Idempotent: a second call only checks the pins and re-links the package.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.hloscope-requirements
if ! cmp -s requirements.txt "$stamp" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
  cp requirements.txt "$stamp"
fi
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps -e .
# torch_xla 2.9.0's wheel ships its own, older torchax (0.0.6) at the same site-packages/torchax path: whichever package
# pip installs last wins. Put torchax 0.0.13's own files back whenever they are not the ones its RECORD lists, so that
# --mode torchax runs the pinned version (tests/test_environment.py checks the same).
if ! .venv/bin/python scripts/torchax_files.py; then
  .venv/bin/pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$(grep '^torchax==' requirements.txt)"
  .venv/bin/python scripts/torchax_files.py
fi
# The checkers of scripts/check.sh (ruff, mypy, import-linter), pinned in requirements-dev.txt.
dev_stamp=.venv/.hloscope-requirements-dev
if ! cmp -s requirements-dev.txt "$dev_stamp" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
  cp requirements-dev.txt "$dev_stamp"
fi
# The small second environment for `--target` (deviceless GPU compile with jax's CUDA plugin): docs/gpu-target.md.
bash scripts/setup-cuda-target.sh
