"""The traces at a path as pyarrow Tables, for notebooks (hloscope.api's `*_table` functions): events, kernels, ops
and steps, one row each, with the `mode` and `rank` of the trace they come from. Zero-copy to pandas
(`to_pandas()`, nullable integers as Int64) and polars (`polars.from_arrow`); DuckDB queries them by name.

Every figure is the one `trace stats --json` prints for the same trace (same reading, same categories from the run's
HLO, same rounding): kernels and ops hold every name where the command lists the `--top` ones, steps are its
`per_step` rows flattened, events are `trace export`'s rows. Unlike the command and the export, these build whole
tables in memory: meant for one run or comparison, not for a job of many ranks (use `trace export` and DuckDB).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hloscope.trace.export import _pyarrow as modules
from hloscope.trace.export import event_batches, pandas_metadata, schema
from hloscope.trace.job import _resolver, ranks_within_modes
from hloscope.trace.load import load_trace, trace_files_and_modes, trace_rank
from hloscope.trace.model import CATEGORIES, HOST_OP
from hloscope.trace.program_categories import categorized
from hloscope.trace.results import TraceRecord
from hloscope.trace.stats import trace_stats_and_totals


@dataclass(frozen=True)
class TraceSource:
    """One trace file with the mode of its run (None outside hloscope runs) and its rank, as `trace stats` numbers
    them: within the mode for a run's traces, else the trace's own rank (None when it names none)."""

    file: str
    mode: str | None
    rank: int | None


def sources(path: str | Path) -> list[TraceSource]:
    """The traces at `path` (a trace file, a run or comparison directory, a folder of traces), in `trace stats`
    order."""
    files, modes = trace_files_and_modes(path)
    if any(mode is not None for mode in modes):
        ranks: list[int | None] = list(ranks_within_modes(files, modes))
    else:
        ranks = [trace_rank(file) for file in files]
    return [TraceSource(str(file), mode, rank) for file, mode, rank in zip(files, modes, ranks)]


def _pyarrow() -> Any:
    return modules()[0]


def _source_fields(pa: Any) -> list[tuple[str, Any]]:
    """The columns that say which trace a row comes from: every table starts with them."""
    return [("mode", pa.string()), ("rank", pa.int64()), ("file", pa.string())]


def _with_pandas_types(pa: Any, fields: list[tuple[str, Any]], nullable: tuple[str, ...]) -> Any:
    return pa.schema(fields, metadata=pandas_metadata(nullable))


def events_table(traces: list[TraceSource]) -> Any:
    """Every event of every trace: `trace export`'s columns (docs/trace.md) after `mode` and `rank`."""
    pa = _pyarrow()
    exported = schema()
    fields = [*_source_fields(pa)[:2], *((field.name, field.type) for field in exported)]
    table_schema = _with_pandas_types(pa, fields, ("rank", "step", "correlation", "depth"))
    tables = []
    for trace in traces:
        for batch in event_batches(trace.file):
            rows = batch.num_rows
            columns = [pa.array([trace.mode] * rows, pa.string()), pa.array([trace.rank] * rows, pa.int64()),
                       *batch.columns]
            tables.append(pa.Table.from_arrays(columns, schema=table_schema))
    return pa.concat_tables(tables) if tables else table_schema.empty_table()


@dataclass
class _Summary:
    """One trace's `trace stats` record and the totals of the pass that made it."""

    trace: TraceSource
    stats: TraceRecord
    by_name: dict[str, list[float]]  # kernel / op name -> [count, total_us]
    by_hlo_op: dict[tuple[str | None, str], list[float]]  # (module, instruction) -> [count, total_us]


def _summaries(traces: list[TraceSource]) -> Iterator[_Summary]:
    """Each trace read as `trace stats` reads it (categories from the run's HLO where it has one)."""
    for trace in traces:
        loaded = load_trace(trace.file)
        resolver = _resolver(Path(trace.file))
        if resolver is not None:
            loaded = categorized(loaded, resolver)
        stats, totals = trace_stats_and_totals(loaded)
        yield _Summary(trace, stats, totals.by_name, totals.by_hlo_op)


def kernels_table(traces: list[TraceSource]) -> Any:
    """One row per trace and device execution name (kernels, XLA ops, memcpy/memset): `count`, `total_us` and
    `share` of the trace's device time, longest first; a trace's first rows are `trace stats`' `top`."""
    pa = _pyarrow()
    fields = [*_source_fields(pa), ("name", pa.string()), ("count", pa.int64()), ("total_us", pa.float64()),
              ("share", pa.float64())]
    rows: list[dict[str, Any]] = []
    for summary in _summaries(traces):
        device_time = summary.stats.device_time_us
        ranked = sorted(summary.by_name.items(), key=lambda item: item[1][1], reverse=True)  # as trace stats ranks
        for name, (count, total) in ranked:
            rows.append({**_source(summary.trace), "name": name, "count": int(count), "total_us": round(total, 3),
                         "share": round(total / device_time, 4) if device_time else 0.0})
    return pa.Table.from_pylist(rows, schema=_with_pandas_types(pa, fields, ("rank",)))


def ops_table(traces: list[TraceSource]) -> Any:
    """One row per trace and op: the HLO instructions that device executions name (`kind` "hlo": `hlo_module`,
    `count`, `total_us`, `share` of device time, longest first: `trace stats`' `hlo_ops`, every one), then the
    framework ops on the host (`kind` "host": every host_op event by name, e.g. PyTorch's aten ops, with `count`,
    `total_us` and `self_us`, the time outside the ops nested in them: torch.profiler's key_averages)."""
    pa = _pyarrow()
    fields = [*_source_fields(pa), ("kind", pa.string()), ("hlo_module", pa.string()), ("name", pa.string()),
              ("count", pa.int64()), ("total_us", pa.float64()), ("self_us", pa.float64()), ("share", pa.float64())]
    rows: list[dict[str, Any]] = []
    for summary in _summaries(traces):
        device_time = summary.stats.device_time_us
        for (module, op), (count, total) in sorted(summary.by_hlo_op.items(), key=lambda item: -item[1][1]):
            rows.append({**_source(summary.trace), "kind": "hlo", "hlo_module": module, "name": op,
                         "count": int(count), "total_us": round(total, 3), "self_us": round(total, 3),
                         "share": round(total / device_time, 4) if device_time else 0.0})
        rows += _host_ops(summary.trace)
    return pa.Table.from_pylist(rows, schema=_with_pandas_types(pa, fields, ("rank",)))


def _host_ops(trace: TraceSource) -> list[dict[str, Any]]:
    """The host ops of one trace by name, from the export's self times (longest total first)."""
    totals: dict[str, list[float]] = {}  # name -> [count, total_us, self_us]
    for batch in event_batches(trace.file):
        columns = batch.select(["kind", "name", "dur_us", "self_us"]).to_pydict()
        for kind, name, duration, self_us in zip(columns["kind"], columns["name"], columns["dur_us"],
                                                 columns["self_us"]):
            if kind == HOST_OP:
                entry = totals.setdefault(name, [0, 0.0, 0.0])
                entry[0] += 1
                entry[1] += duration
                entry[2] += self_us
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])
    return [{**_source(trace), "kind": "host", "hlo_module": None, "name": name, "count": int(count),
             "total_us": round(total, 3), "self_us": round(self_us, 3), "share": None}
            for name, (count, total, self_us) in ranked]


_STEP_NUMBERS = ("start_us", "host_duration_us", "device_busy_us", "device_span_us", "device_idle_us",
                 "largest_gap_us", "host_runtime_us", "collective_us", "collective_exposed_us")


def steps_table(traces: list[TraceSource]) -> Any:
    """One row per trace and step: `trace stats`' `per_step` rows, with `executions_by_category` and
    `categories_us` flattened into one column per category (`executions_by_category.matmul/conv`, ...), as
    pandas.json_normalize would name them. Each row is one step; the commands' totals cover every profiled step."""
    pa = _pyarrow()
    fields = [*_source_fields(pa), ("step", pa.int64()), ("kernels", pa.int64()), ("idle_gaps", pa.int64()),
              *((name, pa.float64()) for name in _STEP_NUMBERS),
              *((f"executions_by_category.{category}", pa.int64()) for category in CATEGORIES),
              *((f"categories_us.{category}", pa.float64()) for category in CATEGORIES)]
    rows: list[dict[str, Any]] = []
    for summary in _summaries(traces):
        for step in summary.stats.per_step:
            row = {**_source(summary.trace), "step": step.step, "kernels": step.kernels, "idle_gaps": step.idle_gaps,
                   **{name: getattr(step, name) for name in _STEP_NUMBERS}}
            for category in CATEGORIES:
                row[f"executions_by_category.{category}"] = step.executions_by_category[category]
                row[f"categories_us.{category}"] = step.categories_us[category]
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=_with_pandas_types(pa, fields, ("rank",)))


def _source(trace: TraceSource) -> dict[str, Any]:
    return {"mode": trace.mode, "rank": trace.rank, "file": trace.file}
