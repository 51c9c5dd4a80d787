"""Run directories and comparisons: what `hloscope run` and `hloscope compare` write and read back.

- `layout`: the file names that mark a run or comparison directory (no imports: read by the trace and HLO readers).
- `rundir`: the on-disk layout (run.json, comparison.json, artifact paths), atomic writes, loading and finding runs.
- `runner`: `compare` runs each mode in its own subprocess and collects the results (a failing mode loses no other).
- `fields`, `settings`: typed views of a run record (timings, devices; precision and the settings that must match).
- `audit`, `parity`: are the modes of a comparison comparable (same settings; same loss and gradients on one batch)?
- `environment`: versions, device and environment variables recorded with every run.

Nothing here imports a framework or renders text.
"""
