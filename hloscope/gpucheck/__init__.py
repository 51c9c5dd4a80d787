"""`scripts/gpu-check.sh`: the invariants only a GPU can show, checked on the tools' own `--json` outputs.

checks: one function per invariant, on parsed JSON (testable with crafted input); timing_probe: an independent clock
for the step `run` timed; main: the steps in order, every result recorded in the output folder's SUMMARY.md. See
docs/gpu-check.md.
"""
