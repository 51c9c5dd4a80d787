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
# The checkers of scripts/check.sh (ruff, mypy, import-linter), pinned in requirements-dev.txt.
dev_stamp=.venv/.hloscope-requirements-dev
if ! cmp -s requirements-dev.txt "$dev_stamp" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
  cp requirements-dev.txt "$dev_stamp"
fi
# The small second environment for `--target` (deviceless GPU compile with jax's CUDA plugin): docs/gpu-target.md.
bash scripts/setup-cuda-target.sh
