#!/usr/bin/env bash
# Set up from nothing if needed, then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-browser.sh
export PJRT_DEVICE=CPU
# Hundreds of processes import hloscope and the tests: with PYTHONDONTWRITEBYTECODE set (some images set it), each
# compiles every module it imports from source again (0.1-0.2 s of CPU a process) and each worker rewrites every test
# module's asserts again. Bytecode goes to the __pycache__ folders git ignores.
unset PYTHONDONTWRITEBYTECODE
# One pytest-xdist worker a CPU, at most 4: most tests run a framework in a child process, and two workers on this
# project's 2-core machine take about 60% of one's time. A test module stays on one worker, so that its module-scoped
# runs are made once; the session's shared runs are made once for all workers (tests/conftest.py, made_once), and
# the files go out in the order tests/conftest.py gives them (pytest_collection_modifyitems).
workers=$(.venv/bin/python -c 'from hloscope.machine import usable_cpus; print(min(4, usable_cpus()))')
exec .venv/bin/python -m pytest -ra -n "$workers" --dist loadfile --no-loadscope-reorder "$@"
