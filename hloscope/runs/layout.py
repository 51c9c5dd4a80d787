"""The file names that mark a run directory and a comparison directory.

Apart from `rundir` (which creates and validates them) so that the trace and HLO readers can recognise a run directory
without importing what writes one: `hloscope trace stats FILE` starts faster.
"""

RUN_FILE = "run.json"
COMPARISON_FILE = "comparison.json"

# XLA's dump file names: `module_NNNN.<module>.<what>`, module names one word with optional numeric suffixes
# (`jit_train_step`, `SyncTensorsGraph.66`). On a TPU (libtpu 0.0.42 with JAX 0.10) XLA puts a compilation tag after the
# module name: `module_0343.jit_train_step.cl_933746096.after_optimizations.txt`. The start of every such name, up to
# `<what>`, for the run's dump mover (backends/xla_dump.py) and for what an interrupted run left (rundir).
DUMP_MODULE_PREFIX = r"^module_(?P<id>\d+)\.(?P<module>[^.]+(?:\.\d+)*)\.(?:cl_\d+\.)?"
# The artifact kind of each report XLA writes beside an optimized module, by the suffix of its name
DUMP_REPORT_KIND = {None: "hlo", "-buffer-assignment": "buffer_assignment",
                    "-buffer-assignment-values": "buffer_assignment", "-memory-usage-report": "memory_report",
                    "-live-range": "live_range"}
