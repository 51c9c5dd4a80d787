#!/usr/bin/env bash
# The main job: every mode on the tiny ViT preset on the CPU, with HLO dumps and profiles, then the explanation.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PJRT_DEVICE=CPU
.venv/bin/hloscope compare --model vit-tiny --batch-size 8 --steps 20 --warmup 5 --dump-hlo --profile "$@"
# Then why the modes differ: `hloscope explain` without an argument explains the newest comparison under traces/:
# first as a self-contained HTML report, a new explain.html in that comparison directory (explain-2.html, ... if one
# is there), then on the terminal, which ends the job.
.venv/bin/hloscope explain --format html
.venv/bin/hloscope explain
