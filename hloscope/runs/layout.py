"""The file names that mark a run directory and a comparison directory.

Apart from `rundir` (which creates and validates them) so that the trace and HLO readers can recognise a run directory
without importing what writes one: `hloscope trace stats FILE` starts faster.
"""

RUN_FILE = "run.json"
COMPARISON_FILE = "comparison.json"
