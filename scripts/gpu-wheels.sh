#!/usr/bin/env bash
# Download, on a machine that reaches PyPI, the Python 3.12 x86-64 wheels that hloscope's GPU check needs on this
# project's lent GPU machine (which reaches no package index) into .whl/, to be carried there with the working tree.
# The list is scripts/gpu-wheels.txt; more NAME==VERSION arguments add to it (flax==0.12.8 optax==0.2.8, say, should
# the machine's own turn out unusable). Fails when the folder is over 60 MiB: a call carries at most 64 MiB, the
# working tree's untracked files included. Then, on the machine (docs/gpu-check.md):
#
#   HLOSCOPE_PYTHON=/opt/torch/.venv/bin/python3 HLOSCOPE_WHEELS=.whl bash scripts/gpu-check.sh --out ... --budget-s 400
#
#   bash scripts/gpu-wheels.sh [NAME==VERSION ...]
set -euo pipefail
cd "$(dirname "$0")/.."
limit_mib=60
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' scripts/gpu-wheels.txt | grep -v '^$')
wanted+=("$@")
rm -rf .whl
mkdir .whl
# pip matches each manylinux tag exactly: the ones PyPI's wheels of the list are built for
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
           manylinux2014_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$tag")
done
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -d .whl "${wanted[@]}"
ls -l .whl | awk 'NR > 1 {printf "%10d  %s\n", $5, $9}'
bytes=$(du -cb .whl/*.whl | tail -1 | cut -f1)
echo "gpu-wheels: ${#wanted[@]} packages, $(ls .whl/*.whl | wc -l) wheels, $(awk "BEGIN {printf \"%.1f\", $bytes / 1048576}") MiB in .whl/"
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  echo "gpu-wheels: over $limit_mib MiB: the device call carries at most 64 MiB with the working tree" >&2
  exit 1
fi
