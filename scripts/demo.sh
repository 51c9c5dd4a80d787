#!/usr/bin/env bash
# The main job: every mode on the tiny ViT preset on the CPU, with HLO dumps and profiles, then the explanation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PJRT_DEVICE=CPU
.venv/bin/hloscope compare --model vit-tiny --batch-size 8 --steps 20 --warmup 5 --dump-hlo --profile "$@"
# Then why the modes differ: `hloscope explain` without an argument explains the newest comparison under traces/,
# on the terminal and as a self-contained HTML report beside it (a new file each time).
.venv/bin/hloscope explain
.venv/bin/hloscope explain --format html -o "traces/explain-$(date -u +%Y%m%d-%H%M%S).html"
