#!/usr/bin/env bash
# The main job: every mode on the tiny ViT preset on the CPU, with HLO dumps and profiles, then the explanation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PJRT_DEVICE=CPU
.venv/bin/hloscope compare --model vit-tiny --batch-size 8 --steps 20 --warmup 5 --dump-hlo --profile "$@"
# Then why the modes differ: the newest comparison explained on the terminal, and as a self-contained HTML report in it.
latest=$(ls -dt traces/compare-*/ | head -n 1 || true)
.venv/bin/hloscope explain "$latest"
.venv/bin/hloscope explain "$latest" --format html -o "${latest%/}/explain.html"
