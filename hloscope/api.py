"""hloscope as a Python library: the analyses the commands print, returned as data, for notebooks and scripts.

    from hloscope import api

    run = api.load_run("traces/compare-20261201-072758/jax")        # run.json, checked and typed: run.timing.median_s
    modules = api.hlo_stats("traces/compare-20261201-072758/jax")   # one record per HLO module (hlo stats --json)
    traces = api.trace_stats("traces/compare-20261201-072758/jax")  # one record per trace (trace stats --json)
    report = api.diff("traces/.../jax", "traces/.../torch_xla")     # diff --json
    why = api.explain("traces/compare-20261201-072758")             # typed; why.to_dict() is explain --json
    why.modes[1].contributors[0].title
    kernels = api.kernels_table("traces/compare-20261201-072758")   # a pyarrow Table, with a mode column
    steps = api.steps_table("traces/compare-20261201-072758")       # also events_table and ops_table

Every function takes paths (str or Path). The `*_table` functions return pyarrow Tables, one row per event, kernel,
op or step of each trace with its `mode` and `rank` (`to_pandas()`, `polars.from_arrow()`, DuckDB by name), holding
the figures `trace stats --json` prints. The others return exactly what the matching command's `--json` prints (plain
dicts and lists; explain's report, run.json and comparison.json as typed records whose `to_dict()` is that JSON), so a
notebook and the terminal always agree. Bad input raises `hloscope.errors.InputError` (one line
naming the file), an argument outside the bounds the commands' options have (hloscope/limits.py)
`hloscope.errors.UsageError`, a missing framework `hloscope.errors.MissingDependency`; nothing here prints. The commands in
`hloscope/cli/` are thin layers over these functions and their renderers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hloscope.limits import MAX_MIN_GAP, MAX_SOURCE_DEPTH, MAX_TOP_ROWS, check_range
from hloscope.runs.records import ComparisonRecord, RunRecord

if TYPE_CHECKING:
    from hloscope.explain.report import ExplainReport
    from hloscope.hlo.load import LoadedModule

PathLike = str | os.PathLike


def load_run(path: PathLike) -> RunRecord:
    """A run directory's run.json (or the file itself), checked: newer schemas, missing artifacts and impossible
    values are refused. Typed (hloscope/runs/records.py); `to_dict()` is the JSON as written."""
    from hloscope.runs.rundir import load_run as load

    return load(Path(path))


def load_comparison(path: PathLike) -> ComparisonRecord:
    """A comparison directory's comparison.json, checked. Typed (hloscope/runs/records.py); `dir` is the comparison
    directory and `to_dict()` the JSON as written."""
    from hloscope.runs.rundir import load_comparison as load

    return load(Path(path))


def hlo_stats(path: PathLike, xla_cost: bool = True, top: int = 10, source_depth: int = 5,
              launches: bool = False) -> list[dict]:
    """One record per HLO module at `path` (an HLO text file, an XLA dump directory or a run directory): kernels,
    fusions, custom calls, FLOPs, bytes, memory, collectives, precision; with XLA's own cost analysis beside
    hloscope's unless `xla_cost` is False, as the command (`--no-xla-cost`); with `launches`, every kernel launch of
    a GPU module's thunk sequence. A run directory with a profile adds each module's measured time (`measured`)."""
    from hloscope.hlo.load import load_modules
    from hloscope.hlo.stats import stats_records

    check_range("top", top, 1, MAX_TOP_ROWS)
    check_range("source_depth", source_depth, 1, MAX_SOURCE_DEPTH)
    loaded = load_modules(Path(path))
    results = stats_records(loaded, top, source_depth, launches, xla_cost)
    if Path(path).is_dir():  # only a run directory has a profile (the trace modules are not imported for a file)
        _add_measured(Path(path), loaded, results, top)
    return results


def _add_measured(path: Path, loaded: list[LoadedModule], results: list[dict[str, Any]], top: int) -> None:
    """Run directories with a profile: each module's measured time beside its HLO (`measured`); a profile that cannot
    be read is a warning, the module's own figures stay."""
    from hloscope.errors import warn
    from hloscope.trace.hlo_map import measured_instructions
    from hloscope.trace.load import device_events_by_run

    by_run, unread = device_events_by_run(path)
    for error in unread:
        warn(f"no measured time from this run's profile: {error}")
    for item, result in zip(loaded, results):
        events = next((e for run, e in by_run.items() if Path(item.file).resolve().is_relative_to(run)), None)
        measured = measured_instructions(item.module, events, top) if events and item.stage == "after_optimizations" else None
        if measured is not None:
            result["measured"] = measured


def trace_stats(path: PathLike, top: int = 10) -> list[dict]:
    """One record per trace at `path` (a trace file, a run or comparison directory, a TensorBoard logdir): steps,
    kernels, busy and idle time, categories (from the run's HLO when it has one), top kernels and HLO ops."""
    from hloscope.trace import tables
    from hloscope.trace.job import summarize_file, summary_error

    check_range("top", top, 1, MAX_TOP_ROWS)
    results = []
    for trace in tables.sources(Path(path)):
        summary = summarize_file(trace.file, top=top)
        error = summary_error(summary)
        if error is not None:
            raise error
        if trace.mode is not None:  # a run's trace: its mode, and its rank within that mode (as the command)
            summary["stats"]["mode"] = trace.mode
            summary["stats"]["rank"] = trace.rank
        results.append(summary["stats"])
    return results


def events_table(path: PathLike) -> Any:
    """Every event of every trace at `path` (a trace file, a run or comparison directory, a folder of traces) as a
    pyarrow Table: `mode` (the run's mode; null outside runs) and `rank`, then `trace export`'s columns
    (docs/trace.md). Held in memory: for a job of many ranks, `trace export` and DuckDB."""
    from hloscope.trace import tables

    return tables.events_table(tables.sources(Path(path)))


def kernels_table(path: PathLike) -> Any:
    """One row per trace and device execution name: `mode`, `rank`, `file`, `name`, `count`, `total_us`, `share`
    (of the trace's device time), longest first; each trace's first rows are `trace stats`' `top`."""
    from hloscope.trace import tables

    return tables.kernels_table(tables.sources(Path(path)))


def ops_table(path: PathLike) -> Any:
    """One row per trace and op: HLO instructions (`kind` "hlo", as `trace stats`' `hlo_ops`, every one), then host
    framework ops (`kind` "host": PyTorch's aten ops, with `self_us`, as torch.profiler's key_averages)."""
    from hloscope.trace import tables

    return tables.ops_table(tables.sources(Path(path)))


def steps_table(path: PathLike) -> Any:
    """One row per trace and step: `trace stats`' `per_step`, category dictionaries flattened to one column each."""
    from hloscope.trace import tables

    return tables.steps_table(tables.sources(Path(path)))


def step_times_table(path: PathLike) -> Any:
    """Every measured step of a comparison (each mode and process it lists) or of one run directory: a pyarrow Table,
    one row per step with `mode`, `process`, `variant`, `devices`, `status`, `dir`, `phase` (warmup | timed),
    `step` and `step_s` (seconds), read from run.json's timing (hloscope/runs/tables.py)."""
    from hloscope.runs.tables import step_times_table as table

    return table(Path(path))


# DataFrame views of the tables: pyarrow's own conversion, nullable integer columns as pandas' Int64 (pandas needed)
def step_times_frame(path: PathLike) -> Any:
    """`step_times_table(path)` as a pandas DataFrame."""
    return step_times_table(path).to_pandas()


def events_frame(path: PathLike) -> Any:
    """`events_table(path)` as a pandas DataFrame."""
    return events_table(path).to_pandas()


def kernels_frame(path: PathLike) -> Any:
    """`kernels_table(path)` as a pandas DataFrame."""
    return kernels_table(path).to_pandas()


def ops_frame(path: PathLike) -> Any:
    """`ops_table(path)` as a pandas DataFrame."""
    return ops_table(path).to_pandas()


def steps_frame(path: PathLike) -> Any:
    """`steps_table(path)` as a pandas DataFrame."""
    return steps_table(path).to_pandas()


def diff(a: PathLike, b: PathLike, module: str | None = None, stage: str | None = None,
         xla_cost: bool = True) -> dict:
    """Two runs, dump directories or HLO files side by side, with the structural matching (`diff --json`)."""
    from hloscope.diff.pipeline import diff_paths

    return diff_paths(Path(a), Path(b), module, stage, xla_cost)


def explain(*paths: PathLike, baseline: str | None = None, min_gap: float = 0.05,
            summaries: list | None = None) -> ExplainReport:
    """Each run against the baseline: the gap with its interval and verdict, configuration differences, the measured
    contributors, the residual and the op table, as typed data (hloscope.explain.report; `.to_dict()` is the
    `explain --json` document). Paths: comparison directories, run directories or folders of runs. `summaries`, when
    given a list, receives each run's ModeSummary."""
    from hloscope.errors import InputError, UsageError
    from hloscope.explain.engine import explain as explain_runs
    from hloscope.explain.inputs import load_many

    if not paths:
        raise UsageError("explain needs at least one comparison or run directory")
    check_range("min_gap", min_gap, 0.0, MAX_MIN_GAP)
    found = [Path(path) for path in paths]
    for path in found:
        if not path.exists():
            raise InputError(path, "no such file or directory")
    found_summaries, meta = load_many(found)
    if summaries is not None:
        summaries.extend(found_summaries)
    report = explain_runs(found_summaries, baseline=baseline, min_gap=min_gap)
    report.comparison = meta
    return report
