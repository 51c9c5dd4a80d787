"""`hloscope trace export PATH OUT/`: every event of every trace as Parquet, one schema for Kineto and xplane alike.

Layout: `OUT/rank=N/<trace name>.parquet`, one file per trace, and `OUT/mode=M/rank=N/<trace name>.parquet` for the
traces of hloscope runs (a comparison's modes; hive partitioning: DuckDB, Spark, Dask and pyarrow read `mode` and
`rank` as columns). Each file is written to a temporary name and renamed when complete, and records its source
(path, size, modification time) in its Parquet metadata: an export that is run again keeps the files already
written from unchanged traces, so an interrupted export restarts where it stopped.

Each trace is read twice, streamed, in bounded memory: once for its step markers and host launches, once to write
its events in row groups of `BATCH` events (fewer when their text passes `BATCH_TEXT` characters).
"""

from __future__ import annotations

import json
import os
import re
import stat
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from hloscope.errors import InputError, MissingDependency, UsageError
from hloscope.trace.job import _resolver, host_of
from hloscope.trace.load import load_trace, trace_rank
from hloscope.trace.model import DEVICE_EXEC_KINDS, FLOW_CORRELATION_BASE, RUNTIME, STEP, Event
from hloscope.trace.program_categories import categorized
from hloscope.trace.results import ExportedFile, FileError
from hloscope.trace.steps import StepLocator, step_windows
from hloscope.writing import atomic_output

EXPORT_VERSION = 2  # 2: profiler_category, self_us, depth, input_shapes; nullable integers for pandas
BATCH = 65536
# A row group is also written once the text in it (names, lanes, HLO ops) reaches this many characters: events that
# share one long name (an xplane stores it once) would otherwise be copied into one Arrow batch of BATCH copies.
BATCH_TEXT = 64 << 20
_INT64 = 1 << 63
_METADATA_KEY = b"hloscope.source"


def _pyarrow() -> tuple[Any, Any]:
    """(pyarrow, pyarrow.parquet): modules without type information."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        raise MissingDependency("pyarrow", "trace export writes Parquet") from error
    return pa, pq


def schema() -> Any:
    """The pyarrow schema of every exported file."""
    pa, _ = _pyarrow()
    return pa.schema([
        ("host", pa.string()),  # the host the file name names (TensorBoard's <host>.xplane.pb, ...)
        ("file", pa.string()),
        ("format", pa.string()),  # kineto, xplane, chrome
        ("process", pa.string()),  # device / process: Kineto pid, xplane plane (/device:GPU:0)
        ("lane", pa.string()),  # stream or thread
        ("device", pa.bool_()),  # runs on a device
        ("kind", pa.string()),  # kernel, memcpy, memset, runtime, host_op, annotation, step
        ("step", pa.int64()),  # the step the event belongs to (device work: its launch's step), null if none
        ("name", pa.string()),
        ("category", pa.string()),  # device executions: the seven categories of docs/trace.md
        ("start_us", pa.float64()),
        ("dur_us", pa.float64()),
        ("correlation", pa.int64()),  # launch <-> device execution; null when none or beyond 64 bits
        ("hlo_op", pa.string()),
        ("hlo_module", pa.string()),
        ("profiler_category", pa.string()),  # the profiler's own category: Kineto's cat (cpu_op, python_function, ...)
        ("self_us", pa.float64()),  # host events: dur_us less the events nested directly in it on the same thread
        ("depth", pa.int32()),  # host events: how many events on the same thread enclose it (0: top level)
        ("input_shapes", pa.string()),  # the op's input shapes as JSON (torch.profiler record_shapes=True)
    ], metadata=pandas_metadata(("step", "correlation", "depth")))


# pandas reads an integer column with nulls as float64 unless the file's pandas metadata names a nullable type.
_NULLABLE = {"step": "Int64", "correlation": "Int64", "depth": "Int32", "rank": "Int64"}


def pandas_metadata(columns: Iterable[str]) -> dict[bytes, bytes]:
    """Schema metadata that makes `to_pandas()` (and pandas.read_parquet) give the integer `columns`, which may hold
    nulls, pandas' nullable integer types (Int64) rather than floats; every other column as pyarrow converts it."""
    described = [{"name": name, "field_name": name, "pandas_type": _NULLABLE[name].lower(),
                  "numpy_type": _NULLABLE[name], "metadata": None} for name in columns]
    document = {"index_columns": [], "column_indexes": [], "columns": described, "creator": {"library": "hloscope"},
                "pandas_version": "2.0.0"}
    return {b"pandas": json.dumps(document).encode()}


def plan(files: Sequence[str | os.PathLike[str]], ranks: Sequence[int], out: str | os.PathLike[str],
         modes: Sequence[str | None] | None = None) -> list[tuple[str, int, str]]:
    """(trace file, job rank, Parquet file) for every trace; UsageError when OUT cannot be the output folder (a file,
    a symbolic link to nowhere, no permission), before anything is read. A trace of a comparison's mode goes to
    OUT/mode=M/rank=N/ (`ranks` within the mode): its modes are separate runs, never ranks of one job."""
    root = Path(out)
    _output_folder(root)
    tasks = []
    used: set[Path] = set()
    for file, rank, mode in zip(files, ranks, modes or [None] * len(files)):
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(file).name)
        stem = re.sub(r"(\.pt)?\.(trace\.)?json(\.gz)?$|\.xplane\.pb$|\.pb$", "", stem) or "trace"
        folder = root / f"rank={rank}"
        if mode is not None:
            folder = root / f"mode={re.sub(r'[^A-Za-z0-9_.+-]', '_', mode) or '_'}" / f"rank={rank}"
        target = folder / f"{stem}.parquet"
        counter = 1
        while target in used:
            counter += 1
            target = folder / f"{stem}-{counter}.parquet"
        used.add(target)
        tasks.append((str(file), rank, str(target)))
    return tasks


def _output_folder(folder: Path) -> None:
    """Create `folder` (and its parents) for the export, or say in one line why it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        why = "a symbolic link that leads nowhere (or in a loop)" if folder.is_symlink() else "exists and is not a folder"
        raise UsageError(f"{folder}: {why}: trace export writes a folder of Parquet files there") from None
    except OSError as error:
        raise UsageError(f"{folder}: cannot create the output folder: {error.strerror or error}") from None


def _identity(file: str) -> dict[str, Any]:
    info = os.stat(file)
    return {"file": os.path.abspath(file), "size": info.st_size, "mtime_ns": info.st_mtime_ns,
            "version": EXPORT_VERSION}


class _Occupied(Exception):
    """Something that hloscope did not export is at the target path: it is never replaced."""


def _own_folders(folder: Path) -> None:
    """`_own_folder` for each partition folder of `folder`, outermost first (OUT/mode=M, then OUT/mode=M/rank=N)."""
    levels = [folder]
    while "=" in levels[-1].parent.name:
        levels.append(levels[-1].parent)
    for level in reversed(levels):
        _own_folder(level)


def _own_folder(folder: Path) -> None:
    """Create `folder` (OUT/rank=N, a partition below OUT) or accept the real folder there; _Occupied for a symbolic
    link (to a folder outside OUT or anywhere: never written through), a file or anything else in the way. Checked
    with lstat, which does not follow links, right before the trace is written there."""
    try:
        folder.mkdir(exist_ok=True)
    except FileExistsError:
        pass  # a file, a dangling link: said below
    except OSError as error:
        raise _Occupied(f"cannot create: {error.strerror or error}") from None
    try:
        info = os.lstat(folder)
    except OSError as error:
        raise _Occupied(f"cannot inspect: {error.strerror or error}") from None
    if stat.S_ISLNK(info.st_mode):
        raise _Occupied("is a symbolic link: trace export never writes through one; remove it or choose another OUT")
    if not stat.S_ISDIR(info.st_mode):
        raise _Occupied("exists and is not a folder: cannot export there")


def _already_exported(target: Path, identity: dict[str, Any]) -> int | None:
    """Rows of `target` when it was written from this very trace; None when nothing is there or an export of
    hloscope's from another trace (replaced); _Occupied for anything else there: a file of the user's, a folder, a
    FIFO, a symbolic link (never followed, never replaced)."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _Occupied(f"cannot inspect: {error.strerror or error}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a folder" if stat.S_ISDIR(info.st_mode) else "a symbolic link" if stat.S_ISLNK(info.st_mode)
                else "not a regular file")
        raise _Occupied(f"is {kind}, not a Parquet file hloscope exported: not replaced")
    pa, pq = _pyarrow()
    try:
        metadata = pq.read_metadata(target)
        recorded = json.loads((metadata.metadata or {})[_METADATA_KEY])
        if not isinstance(recorded, dict) or "version" not in recorded:
            raise ValueError("no identity")
    # not Parquet (ArrowInvalid, a ValueError), unreadable (OSError), no identity key, not JSON (ValueError), and
    # whatever else Arrow says of the file (its ArrowException family)
    except (OSError, ValueError, KeyError, pa.ArrowException):
        raise _Occupied("exists and is not a Parquet file hloscope exported: not replaced") from None
    rows: int = metadata.num_rows
    return rows if recorded == identity else None


def export_task(task: tuple[str, int, str]) -> ExportedFile | FileError:
    """Write one trace's events to its Parquet file (see `plan`): what was written (ExportedFile), or the FileError
    of a trace that cannot be read or a target path that holds something hloscope did not export (left as it is).
    Runs in pool and Dask workers alike."""
    file, rank, out = task
    target = Path(out)
    try:
        identity = _identity(file)
        trace_rank(file)  # a rank beyond 64 bits is refused here, naming the file (the plan numbered it by order)
    except OSError as error:
        return FileError(file=file, error=f"cannot read: {error.strerror or error}", error_path=file)
    except InputError as error:
        return FileError(file=file, error=error.message, error_path=error.path)
    try:
        _own_folders(target.parent)
    except _Occupied as occupied:
        return FileError(file=file, error=str(occupied), error_path=str(target.parent))
    try:
        rows = _already_exported(target, identity)
    except _Occupied as occupied:
        return FileError(file=file, error=str(occupied), error_path=out)
    if rows is not None:
        return ExportedFile(file=file, rank=rank, out=out, rows=rows, reused=1)
    try:
        # replace only an export of hloscope's; a file that appeared meanwhile is refused
        rows = write_trace(file, target, identity, replace=target.is_file())
    except InputError as error:
        return FileError(file=file, error=error.message, error_path=error.path, line=error.line, col=error.col)
    except FileExistsError:
        return FileError(file=file, error="appeared while exporting: not replaced", error_path=out)
    except OSError as error:
        return FileError(file=file, error=f"cannot write: {error.strerror or error}", error_path=out)
    return ExportedFile(file=file, rank=rank, out=out, rows=rows, reused=0)


class _Steps:
    """First pass: the step windows of a trace (host markers, else device markers) and its launches' steps."""

    def __init__(self, events: Iterable[Event]) -> None:
        host: list[tuple[int, float, float]] = []
        device: list[tuple[int, float, float]] = []
        launch_corr, launch_start = array("q"), array("d")
        nesting = _Nesting()
        for event in events:
            if not event.device:
                nesting.add(event)
            if event.kind == STEP and event.step is not None:
                (device if event.device else host).append((event.step, event.start_us, event.end_us))
            elif event.kind == RUNTIME and event.correlation is not None and -_INT64 <= event.correlation < _INT64:
                launch_corr.append(event.correlation)
                launch_start.append(event.start_us)
        self.windows = step_windows(host) or step_windows(device)
        self.locator = StepLocator(self.windows)
        self.use_launches = bool(host) and len(launch_corr) > 0
        import numpy as np

        corr = np.frombuffer(launch_corr, dtype=np.int64) if launch_corr else np.zeros(0, dtype=np.int64)
        order = np.argsort(corr, kind="stable")
        self._corr = corr[order]
        self._start = (np.frombuffer(launch_start, dtype=np.float64) if launch_start else np.zeros(0))[order]
        self.self_us, self.depth = nesting.solve()

    def of(self, event: Event) -> int | None:
        if not self.windows:
            return None
        if event.kind == STEP:
            return event.step
        if event.device and event.kind in DEVICE_EXEC_KINDS:
            correlation = event.correlation
            if self.use_launches and correlation is not None and -_INT64 <= correlation < _INT64:
                position = int(self._corr.searchsorted(correlation))
                if position < len(self._corr) and self._corr[position] == correlation:
                    index = self.locator.index_at(float(self._start[position]))
                    if index is not None:
                        return self.windows[index].number
                elif correlation < FLOW_CORRELATION_BASE:
                    return None  # launched before the profiling window (as trace stats' before_window)
            index = self.locator.last_started(event.start_us)
        else:
            index = self.locator.index_at(event.start_us)
        return None if index is None else self.windows[index].number


class _Nesting:
    """How host events nest on their thread, for the self time and depth of each (the PyTorch profiler's self CPU
    time): 20 bytes per host event while reading, the answers 10 more. An event is inside the one before it on the
    same thread (process and lane) when it starts before that one ends; its time inside comes off that one's self
    time. Events that start together: the longer one encloses the other (the file's order when equally long)."""

    def __init__(self) -> None:
        self._lanes: dict[tuple[str, str], int] = {}
        self.lane = array("i")
        self.start = array("d")
        self.end = array("d")

    def add(self, event: Event) -> None:
        lane = self._lanes.setdefault((event.process, event.lane), len(self._lanes))
        self.lane.append(lane)
        self.start.append(event.start_us)
        self.end.append(event.start_us + event.dur_us)

    def solve(self) -> tuple[array[float], array[int]]:
        """(self time in us, depth) of each host event, in reading order."""
        import numpy as np

        count = len(self.start)
        self_us = array("d", (end - start for start, end in zip(self.start, self.end)))
        depth = array("h", bytes(2 * count))
        if not count:
            return self_us, depth
        starts = np.frombuffer(self.start, dtype=np.float64)
        ends = np.frombuffer(self.end, dtype=np.float64)
        order = np.lexsort((np.arange(count), starts - ends, starts, np.frombuffer(self.lane, dtype=np.int32)))
        stack: list[int] = []
        lane = -1
        for index in order.tolist():
            if self.lane[index] != lane:
                lane, stack = self.lane[index], []
            start = self.start[index]
            while stack and self.end[stack[-1]] <= start:
                stack.pop()
            if stack:
                parent = stack[-1]
                self_us[parent] -= min(self.end[index], self.end[parent]) - start
            depth[index] = min(len(stack), 32767)
            stack.append(index)
        return self_us, depth


def write_trace(file: str, target: Path, identity: dict[str, Any] | None = None, replace: bool = True) -> int:
    """Every event of the trace `file` into the Parquet file `target` (atomically; `replace=False`: FileExistsError
    rather than replace a file there); returns the number of rows."""
    _, pq = _pyarrow()
    base = schema()
    table_schema = base.with_metadata({**base.metadata, _METADATA_KEY: json.dumps(identity or _identity(file)).encode()})
    batches = event_batches(file)
    first = next(batches)  # the trace is read (and refused) before anything is created at the target
    try:
        _own_folders(target.parent)
    except _Occupied as occupied:
        raise InputError(target.parent, str(occupied)) from None
    rows = 0
    with atomic_output(target, replace=replace) as output, pq.ParquetWriter(output, table_schema, compression="zstd") as writer:
        for table in chain([first], batches):
            writer.write_table(table.replace_schema_metadata(table_schema.metadata))
            rows += table.num_rows
    return rows


def event_batches(file: str) -> Iterator[Any]:
    """The events of the trace `file` as pyarrow Tables of `schema()`, BATCH events at most each (fewer once their
    text reaches BATCH_TEXT), in bounded memory: two streamed passes. At least one table, empty for no events."""
    pa, _ = _pyarrow()
    trace = load_trace(file)
    resolver = _resolver(Path(file))
    if resolver is not None:
        trace = categorized(trace, resolver)
    steps = _Steps(trace.events)
    host = host_of(file)
    table_schema = schema()
    columns: dict[str, list[Any]] = {field.name: [] for field in table_schema}

    def batch() -> Any:
        table = pa.Table.from_pydict(columns, schema=table_schema)
        for values in columns.values():
            values.clear()
        return table

    rows = text = 0
    host_index = 0  # host events so far: their index into the first pass's self times and depths
    for event in trace.events:
        correlation = event.correlation
        if correlation is not None and not -_INT64 <= correlation < _INT64:
            correlation = None
        columns["host"].append(host)
        columns["file"].append(file)
        columns["format"].append(trace.format)
        columns["process"].append(event.process)
        columns["lane"].append(event.lane)
        columns["device"].append(event.device)
        columns["kind"].append(event.kind)
        columns["step"].append(steps.of(event))
        columns["name"].append(event.name)
        columns["category"].append(event.category if event.is_device_exec else None)
        columns["start_us"].append(event.start_us)
        columns["dur_us"].append(event.dur_us)
        columns["correlation"].append(correlation)
        columns["hlo_op"].append(event.hlo_op)
        columns["hlo_module"].append(event.hlo_module)
        columns["profiler_category"].append(event.profiler_category)
        if event.device:
            columns["self_us"].append(None)
            columns["depth"].append(None)
        else:
            # (rounded as trace stats rounds; never below zero from the subtractions' rounding)
            columns["self_us"].append(round(max(0.0, steps.self_us[host_index]), 3))
            columns["depth"].append(steps.depth[host_index])
            host_index += 1
        columns["input_shapes"].append(event.input_shapes)
        rows += 1
        text += (len(event.name) + len(event.lane) + len(event.process) + len(event.hlo_op or "")
                 + len(event.hlo_module or "") + len(event.input_shapes or ""))
        if len(columns["name"]) >= BATCH or text >= BATCH_TEXT:
            yield batch()
            text = 0
    if columns["name"] or rows == 0:
        yield batch()
