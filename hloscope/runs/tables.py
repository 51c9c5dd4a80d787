"""The step times of a comparison (or of one run) as one pyarrow Table: a row per measured step of every process, with
the mode, process and device count it belongs to, read from the typed records (comparison.json's entries, each run's
run.json timing). The shape a notebook groups and plots: `api.step_times_table(path).to_pandas()`.

Warm-up steps are rows too (`phase` says which), so that a reader sees what was left out of the medians. A mode whose
process left no run.json (killed before writing one) has no rows; comparison.json still lists it with its status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hloscope.errors import MissingDependency
from hloscope.runs.layout import COMPARISON_FILE, RUN_FILE
from hloscope.runs.records import ComparisonEntry, RunRecord
from hloscope.runs.rundir import comparison_run_dir, load_comparison, load_run

# column -> pyarrow type name, in the table's order
STEP_TIME_COLUMNS = (("mode", "string"), ("process", "int64"), ("variant", "string"), ("devices", "int64"),
                     ("status", "string"), ("dir", "string"), ("phase", "string"), ("step", "int64"),
                     ("step_s", "float64"))


def step_times_table(path: Path) -> Any:
    """The step times under `path`: a comparison directory (every mode and process it lists) or a run directory."""
    try:
        import pyarrow as pa
    except ImportError as error:
        raise MissingDependency("pyarrow", "the step-times table is a pyarrow Table") from error
    if (path / COMPARISON_FILE).is_file() or path.name == COMPARISON_FILE:
        comparison = load_comparison(path)
        runs = [(entry, comparison_run_dir(comparison.dir, entry.dir)) for entry in comparison.modes]
    else:
        run = load_run(path, check_artifacts=False)
        runs = [(ComparisonEntry(dir=run.dir.name, mode=run.mode, status=run.status), run.dir)]
    rows: list[dict[str, Any]] = []
    for entry, run_dir in runs:
        if (run_dir / RUN_FILE).is_file():
            rows += _rows(entry, load_run(run_dir, check_artifacts=False))
    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in STEP_TIME_COLUMNS])
    return pa.Table.from_pylist(rows, schema=schema)


def _rows(entry: ComparisonEntry, run: RunRecord) -> list[dict[str, Any]]:
    # a record from before --devices ran on one device
    devices = run.config.devices if isinstance(run.config.devices, int) else entry.devices or 1
    common = {"mode": entry.mode or run.mode, "process": entry.replicate or 1, "variant": entry.variant,
              "devices": devices, "status": run.status, "dir": entry.dir}
    return ([{**common, "phase": "warmup", "step": index, "step_s": float(value)}
             for index, value in enumerate(run.timing.warmup_times_s)]
            + [{**common, "phase": "timed", "step": index, "step_s": float(value)}
               for index, value in enumerate(run.timing.step_times_s)])
