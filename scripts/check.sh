#!/usr/bin/env bash
# Static checks, run by .ci/run before the tests: ruff's lint rules (blind except and bandit's security rules among
# them), mypy (strict where pyproject.toml says), and the import-linter contracts that keep the layers of README's
# Layout. Configuration: pyproject.toml. Needs scripts/setup.sh.
# No formatter runs here: `ruff format` is applied file by file, never over the whole tree at once.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== ruff check"
.venv/bin/ruff check hloscope tests benches scripts
echo "== mypy"
.venv/bin/mypy
echo "== lint-imports"
.venv/bin/lint-imports --no-cache
