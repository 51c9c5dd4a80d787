"""Run directories and comparisons: what `hloscope run` and `hloscope compare` write and read back.

- `layout`: the file names that mark a run or comparison directory (no imports: read by the trace and HLO readers).
- `records`: run.json and comparison.json as typed records (one schema each; `to_dict()` is the JSON as written).
- `rundir`: the on-disk layout (run.json, comparison.json, artifact paths), atomic writes, loading (into `records`)
  and finding runs.
- `runner`: `compare` runs each mode in its own subprocess and collects the results (a failing mode loses no other).
- `settings`: the settings of a run record that must match (precision, devices, versions), flattened.
- `audit`, `parity`: are the modes of a comparison comparable (same settings; same loss and gradients on one batch)?
- `environment`: versions, device and environment variables recorded with every run.

Nothing here imports a framework or renders text.
"""
