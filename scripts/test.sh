#!/usr/bin/env bash
# Set up from nothing if needed, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-browser.sh
export PJRT_DEVICE=CPU
# One pytest-xdist worker a CPU, at most 4: most tests run a framework in a child process, and two workers on this
# project's 2-core machine take about 60% of one's time. A test module stays on one worker, so that its module-scoped
# runs are made once; the session's shared runs are made once for all workers (tests/conftest.py, made_once).
workers=$(.venv/bin/python -c 'from hloscope.machine import usable_cpus; print(min(4, usable_cpus()))')
exec .venv/bin/python -m pytest -ra -n "$workers" --dist loadfile "$@"
