"""`hloscope trace export PATH OUT/`: every event of every trace as Parquet, one schema for Kineto and xplane alike.

Layout: `OUT/rank=N/<trace name>.parquet`, one file per trace (hive partitioning: DuckDB, Spark, Dask and pyarrow
read `rank` as a column). Each file is written to a temporary name and renamed when complete, and records its source
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
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hloscope.errors import InputError, MissingDependency, UsageError
from hloscope.trace.model import DEVICE_EXEC_KINDS, FLOW_CORRELATION_BASE, RUNTIME, STEP, Event
from hloscope.writing import atomic_output

EXPORT_VERSION = 1
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
    ])


def plan(files: Sequence[str | os.PathLike[str]], ranks: Sequence[int],
         out: str | os.PathLike[str]) -> list[tuple[str, int, str]]:
    """(trace file, job rank, Parquet file) for every trace; UsageError when OUT cannot be the output folder (a file,
    a symbolic link to nowhere, no permission), before anything is read."""
    root = Path(out)
    _output_folder(root)
    tasks = []
    used: set[Path] = set()
    for file, rank in zip(files, ranks):
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(file).name)
        stem = re.sub(r"(\.pt)?\.(trace\.)?json(\.gz)?$|\.xplane\.pb$|\.pb$", "", stem) or "trace"
        target = root / f"rank={rank}" / f"{stem}.parquet"
        counter = 1
        while target in used:
            counter += 1
            target = root / f"rank={rank}" / f"{stem}-{counter}.parquet"
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


def _own_folder(folder: Path) -> None:
    """Create `folder` (OUT/rank=N, one level below OUT) or accept the real folder there; _Occupied for a symbolic
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


def export_task(task: tuple[str, int, str]) -> dict[str, Any]:
    """Write one trace's events to its Parquet file (see `plan`); {"file", "rank", "out", "rows", "reused"} or
    {"file", "error", "error_path", ...} for a trace that cannot be read or a target path that holds something
    hloscope did not export (left as it is). Runs in pool and Dask workers alike."""
    from hloscope.trace.load import trace_rank

    file, rank, out = task
    target = Path(out)
    try:
        identity = _identity(file)
        trace_rank(file)  # a rank beyond 64 bits is refused here, naming the file (the plan numbered it by order)
    except OSError as error:
        return {"file": file, "error": f"cannot read: {error.strerror or error}", "error_path": file}
    except InputError as error:
        return {"file": file, "error": error.message, "error_path": error.path}
    try:
        _own_folder(target.parent)
    except _Occupied as occupied:
        return {"file": file, "error": str(occupied), "error_path": str(target.parent)}
    try:
        rows = _already_exported(target, identity)
    except _Occupied as occupied:
        return {"file": file, "error": str(occupied), "error_path": out}
    if rows is not None:
        return {"file": file, "rank": rank, "out": out, "rows": rows, "reused": 1}
    try:
        # replace only an export of hloscope's; a file that appeared meanwhile is refused
        rows = write_trace(file, target, identity, replace=target.is_file())
    except InputError as error:
        return {"file": file, "error": error.message, "error_path": error.path, "line": error.line, "col": error.col}
    except FileExistsError:
        return {"file": file, "error": "appeared while exporting: not replaced", "error_path": out}
    except OSError as error:
        return {"file": file, "error": f"cannot write: {error.strerror or error}", "error_path": out}
    return {"file": file, "rank": rank, "out": out, "rows": rows, "reused": 0}


class _Steps:
    """First pass: the step windows of a trace (host markers, else device markers) and its launches' steps."""

    def __init__(self, events: Iterable[Event]) -> None:
        from hloscope.trace.steps import StepLocator, step_windows

        host: list[tuple[int, float, float]] = []
        device: list[tuple[int, float, float]] = []
        launch_corr, launch_start = array("q"), array("d")
        for event in events:
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


def write_trace(file: str, target: Path, identity: dict[str, Any] | None = None, replace: bool = True) -> int:
    """Every event of the trace `file` into the Parquet file `target` (atomically; `replace=False`: FileExistsError
    rather than replace a file there); returns the number of rows."""
    from hloscope.trace.job import _resolver, host_of
    from hloscope.trace.load import load_trace
    from hloscope.trace.program_categories import categorized

    pa, pq = _pyarrow()
    trace = load_trace(file)
    resolver = _resolver(Path(file))
    if resolver is not None:
        trace = categorized(trace, resolver)
    steps = _Steps(trace.events)
    host = host_of(file)
    table_schema = schema().with_metadata({_METADATA_KEY: json.dumps(identity or _identity(file)).encode()})
    try:
        _own_folder(target.parent)
    except _Occupied as occupied:
        raise InputError(target.parent, str(occupied)) from None
    names = [field.name for field in table_schema]
    rows = 0
    with atomic_output(target, replace=replace) as output, pq.ParquetWriter(output, table_schema, compression="zstd") as writer:
        columns: dict[str, list[Any]] = {name: [] for name in names}

        def flush() -> None:
            writer.write_table(pa.Table.from_pydict(columns, schema=table_schema))
            for values in columns.values():
                values.clear()

        text = 0
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
            rows += 1
            text += (len(event.name) + len(event.lane) + len(event.process) + len(event.hlo_op or "")
                     + len(event.hlo_module or ""))
            if len(columns["name"]) >= BATCH or text >= BATCH_TEXT:
                flush()
                text = 0
        if columns["name"] or rows == 0:
            flush()
    return rows
