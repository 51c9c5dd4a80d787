#!/usr/bin/env bash
# Set up from nothing if needed, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-browser.sh
export PJRT_DEVICE=CPU
exec .venv/bin/python -m pytest -ra "$@"
