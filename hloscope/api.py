"""hloscope as a Python library: the analyses the commands print, returned as typed data, for notebooks and scripts.

    from hloscope import api

    run = api.load_run("traces/compare-20261201-072758/jax")        # run.json, checked and typed: run.timing.median_s
    modules = api.hlo_stats("traces/compare-20261201-072758/jax")   # one ModuleStats per HLO module
    traces = api.trace_stats("traces/compare-20261201-072758/jax")  # one TraceRecord per trace
    job = api.trace_job("traces/compare-20261201-072758")           # TraceJob: traces, modes, ranks, job
    done = api.trace_export("traces/compare-20261201-072758", "out")  # trace export: Parquet under out/
    report = api.diff("traces/.../jax", "traces/.../torch_xla")     # DiffReport
    replayed = api.replay("traces/compare-20261201-072758/jax")     # ReplayRecord (replays: a comparison's modes)
    why = api.explain("traces/compare-20261201-072758")             # ExplainReport
    why.modes[1].contributors[0].title
    kernels = api.kernels_table("traces/compare-20261201-072758")   # a pyarrow Table, with a mode column
    steps = api.steps_frame("traces/compare-20261201-072758")       # a pandas DataFrame
    options = RunOptions(model="vit-tiny", batch_size=8)            # from hloscope.backends.base
    comparison = api.compare(options)                               # every installed mode, fresh processes

Every function takes paths (str or Path). Each returns a typed record (msgspec Structs or dataclasses, read by
attribute) whose `to_dict()` is exactly what the matching command's `--json` prints, so a notebook and the terminal
always agree; the `*_table` functions return pyarrow Tables, one row per event, kernel, op, step or matched pair
(`to_pandas()`, `polars.from_arrow()`, DuckDB by name), and each has a `*_frame` twin giving the pandas DataFrame.
Bad input raises `hloscope.errors.InputError` (one line naming the file), an argument outside the bounds the
commands' options have (hloscope/limits.py) `hloscope.errors.UsageError`, a missing framework
`hloscope.errors.MissingDependency`; nothing here prints (what a command shows while it works, a progress bar or a
line per run, comes in as a callback or a progress object). The commands in `hloscope/cli/` are thin layers over these
functions and their renderers: hlo stats (`hlo_stats`), trace stats (`trace_job`), trace export (`trace_export`),
diff (`diff`), explain (`explain`, with `--test-hypotheses` `hypothesis_tests`), replay (`replay`, `replays`),
compare (`compare`), calibrate (`calibrate`) and tensorboard (`tensorboard_view`, which serves nothing: the command
runs TensorBoard on the view). `run` alone has no function: it is the measured process itself (its imports and
start-up are part of what it measures, and a framework cannot be unloaded from a notebook's process); `compare`
with one mode and `repeats=1` runs it in a fresh process and returns its comparison.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from hloscope.errors import HloscopeError, InputError, UsageError, warn
from hloscope.limits import (
    MAX_BUDGET_MIN,
    MAX_HOST_DELAY_MS,
    MAX_MIN_GAP,
    MAX_PROFILE_STEPS,
    MAX_REPEATS,
    MAX_SEED,
    MAX_SOURCE_DEPTH,
    MAX_STEPS,
    MAX_TOP_ROWS,
    MAX_WARMUP,
    check_range,
)
from hloscope.machine import check_threads
from hloscope.models.presets import get_preset
from hloscope.modes import (
    FRAMEWORK_IMPORTS,
    MODES,
    TARGET_MODES,
    get_mode,
    parse_device_counts,
    parse_modes,
    settings_refusal,
)
from hloscope.runs.records import ComparisonEntry, ComparisonRecord, RunRecord

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from hloscope.backends.base import RunOptions
    from hloscope.diff.report import DiffReport
    from hloscope.explain.experiments import TestedBlock
    from hloscope.explain.report import ExplainReport
    from hloscope.explain.tested import TestingPlan, TestingProgress
    from hloscope.hlo.load import LoadedModule
    from hloscope.hlo.results import ModuleStats
    from hloscope.runs.calibration_record import Calibration
    from hloscope.runs.records import AuditStage
    from hloscope.runs.replay_record import ReplayRecord
    from hloscope.runs.runner import PlannedRun
    from hloscope.tensorboard.logdir import Session, ViewLogdir
    from hloscope.trace.results import ExportSummary, TraceJob, TraceRecord

# Each function imports its own analysis when called: `hlo stats` and `trace stats` import this module at start-up
# and need none of the others' (diff, explain, replay, tensorboard, or each other's).
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
              launches: bool = False) -> list[ModuleStats]:
    """One record per HLO module at `path` (an HLO text file, an XLA dump directory or a run directory): kernels,
    fusions, custom calls, FLOPs, bytes, memory, collectives, precision; with XLA's own cost analysis beside
    hloscope's unless `xla_cost` is False, as the command (`--no-xla-cost`); with `launches`, every kernel launch of
    a GPU module's thunk sequence. A run directory with a profile adds each module's measured time (`measured`).
    Typed (hloscope/hlo/results.py: `records[0].kernels`, `records[0].memory.parameter_bytes`); each record's
    `to_dict()` is its entry of `hlo stats --json`'s "modules"."""
    from hloscope.hlo.load import load_modules
    from hloscope.hlo.stats import stats_records

    check_range("top", top, 1, MAX_TOP_ROWS)
    check_range("source_depth", source_depth, 1, MAX_SOURCE_DEPTH)
    loaded = load_modules(Path(path))
    results = stats_records(loaded, top, source_depth, launches, xla_cost)
    if Path(path).is_dir():  # only a run directory has a profile (the trace modules are not imported for a file)
        _add_measured(Path(path), loaded, results, top)
    return results


def _add_measured(path: Path, loaded: list[LoadedModule], results: list[ModuleStats], top: int) -> None:
    """Run directories with a profile: each module's measured time beside its HLO (`measured`, set on its record in
    `results`); a profile that cannot be read is a warning, the module's own figures stay."""
    from hloscope.hlo.results import Measured
    from hloscope.trace.hlo_map import measured_instructions
    from hloscope.trace.load import device_events_by_run

    by_run, unread = device_events_by_run(path)
    for error in unread:
        warn(f"no measured time from this run's profile: {error}")
    for index, (item, result) in enumerate(zip(loaded, results)):
        events = next((e for run, e in by_run.items() if Path(item.file).resolve().is_relative_to(run)), None)
        measured = measured_instructions(item.module, events, top) if events and item.stage == "after_optimizations" else None
        if measured is not None:
            results[index] = msgspec.structs.replace(result, measured=Measured.from_dict(measured))


def hlo_kernels_table(path: PathLike, source_depth: int = 5) -> Any:
    """One row per HLO module and kernel launch at `path` (an HLO text file, an XLA dump directory or a run directory),
    in schedule order: `module`, `file`, `stage`, `platform`, then the launch (`name`, `kind` as `kernel_breakdown`
    counts it, `opcode`, `detail`, `op_name`, `source` as `kernels_by_source` groups it at `source_depth`), its cost
    (`flops`, `bytes_accessed`, ... as `top_instructions`) and, for an optimized GPU module whose XLA thunk sequence
    joins its launches, XLA's `thunk_index`, `kernel_name`, `grid`, `block` and `shared_memory_bytes` (null
    elsewhere): the figures `hlo_stats` has per kernel, for every kernel (hloscope/hlo/tables.py)."""
    from hloscope.hlo.load import load_modules
    from hloscope.hlo.tables import kernels_table as table

    check_range("source_depth", source_depth, 1, MAX_SOURCE_DEPTH)
    return table(load_modules(Path(path)), source_depth)


def hlo_kernels_frame(path: PathLike, source_depth: int = 5) -> Any:
    """`hlo_kernels_table(path)` as a pandas DataFrame."""
    return hlo_kernels_table(path, source_depth).to_pandas()


def trace_stats(path: PathLike, top: int = 10) -> list[TraceRecord]:
    """One record per trace at `path` (a trace file, a run or comparison directory, a TensorBoard logdir): steps,
    kernels, busy and idle time, categories (from the run's HLO when it has one), top kernels and HLO ops. Typed
    (hloscope/trace/results.py); each one's `to_dict()` is its entry in `trace stats --json`'s `traces`."""
    from hloscope.trace import tables
    from hloscope.trace.job import summarize_file
    from hloscope.trace.results import FileError

    check_range("top", top, 1, MAX_TOP_ROWS)
    results = []
    for trace in tables.sources(Path(path)):
        summary = summarize_file(trace.file, top=top)
        if isinstance(summary, FileError):
            raise summary.input_error()
        stats = summary.stats
        if trace.mode is not None:  # a run's trace: its mode, and its rank within that mode (as the command)
            stats = msgspec.structs.replace(stats, rank=trace.rank, mode=trace.mode)
        results.append(stats)
    return results


def trace_job(path: PathLike, top: int = 10, rank: Sequence[int] = (), ranks: str | None = None,
              jobs: int | None = None, scheduler: str | None = None, state_dir: PathLike | None = None,
              progress: Any = None, failures: list[InputError] | None = None) -> TraceJob:
    """Every trace at `path` (a trace file, a run or comparison directory, a TensorBoard logdir) read in parallel,
    typed (hloscope/trace/results.py; `to_dict()` is what `trace stats --json` prints): `traces` (one record each,
    as `trace_stats`), and for a comparison `modes` (a row per mode) and `jobs` (per mode), otherwise `ranks` and
    `job`: per-rank steps and busy/idle, the slowest rank per step, collectives' waiting vs transfer, ranks whose
    kernel mix differs (hloscope.trace.job); a key without content is UNSET. Only the ranks in
    `rank` or `ranks` ("0-7", "0,3,5-6") when given; `jobs` processes, or the Dask scheduler at `scheduler`; each
    file's summary kept in `state_dir` (a restart reads only what is missing); `progress` is told of each file done
    (hloscope.render.progress.FileProgressBar). A trace that cannot be read raises its InputError (the last one), or,
    when `failures` is a list, is appended to it and left out of the document."""
    from hloscope.trace import job
    from hloscope.trace.results import FileSummary, JobView, ModeJob, RankRow, TraceJob
    from hloscope.trace.stats import mode_summary, rank_summary

    check_range("top", top, 1, MAX_TOP_ROWS)
    if scheduler is not None:
        job.scheduler_address(scheduler)
    files, file_ranks, modes = _selected_traces(path, rank, ranks)
    state = job.StateDir(str(state_dir), {"top": top}) if state_dir else None
    names = [str(file) for file in files]
    summaries = job.run_per_file(
        job.summarize_file, names, kwargs={"top": top}, jobs=jobs, scheduler=scheduler, progress=progress,
        done=state.load(names) if state else None,
        on_result=(lambda index, result: state.save(names[index], result)) if state else None)
    for index, (summary, file_rank, mode) in enumerate(zip(summaries, file_ranks, modes)):
        if isinstance(summary, FileSummary) and mode is not None:  # a run's trace: its mode, and its rank in it
            summaries[index] = msgspec.structs.replace(
                summary, stats=msgspec.structs.replace(summary.stats, rank=file_rank, mode=mode))
    results = [summary.stats for summary in summaries if isinstance(summary, FileSummary)]
    errors = [error for summary in summaries if (error := job.summary_error(summary)) is not None]
    modes_table = mode_summary(results)
    # A job view (ranks, slowest rank per step) within one mode only: the modes of a comparison are separate runs.
    per_mode: dict[str | None, tuple[list[RankRow], JobView | None]] = {}
    for mode in dict.fromkeys(modes):
        picked = [index for index, file_mode in enumerate(modes) if file_mode == mode]
        mine = [summaries[index] for index in picked]
        ok = [summary.stats for summary in mine if isinstance(summary, FileSummary)]
        view = job.job_view(mine, [file_ranks[index] for index in picked], top=top) if len(ok) >= 2 else None
        per_mode[mode] = (rank_summary(ok), view)
    unset = msgspec.UNSET
    if modes_table:
        by_mode = {str(mode): ModeJob(ranks=table or unset, job=view or unset)
                   for mode, (table, view) in per_mode.items() if table or view}
        document = TraceJob(traces=results, modes=modes_table, jobs=by_mode or unset)
    else:
        ranks_table, view = next((found for found in per_mode.values() if found[0] or found[1]), ([], None))
        document = TraceJob(traces=results, ranks=ranks_table or unset, job=view or unset)
    _failed(errors, failures)
    return document


def trace_export(path: PathLike, out: PathLike, rank: Sequence[int] = (), ranks: str | None = None,
                 jobs: int | None = None, scheduler: str | None = None, progress: Any = None,
                 failures: list[InputError] | None = None) -> ExportSummary:
    """Every event of every trace at `path` written as Parquet under `out`/rank=N/ (a comparison's modes under
    `out`/mode=M/rank=N/; one file per trace, schema in docs/trace.md), as `trace export` writes it, typed
    (hloscope/trace/results.py): `out`, `events`, `traces`, `reused`, and `files`, one ExportedFile (`file`, `rank`,
    `out`, `rows`, `reused`) per trace written; `to_dict()` gives them as JSON.
    A file already exported from the same trace is kept (`reused`). `rank`, `ranks`, `jobs`, `scheduler`, `progress`
    and `failures` as `trace_job`."""
    from hloscope.trace import export as exporting
    from hloscope.trace import job
    from hloscope.trace.results import ExportedFile, ExportSummary

    if scheduler is not None:
        job.scheduler_address(scheduler)
    files, file_ranks, modes = _selected_traces(path, rank, ranks)
    tasks = exporting.plan(files, file_ranks, out, modes)
    results = job.run_per_file(exporting.export_task, tasks, jobs=jobs, scheduler=scheduler, label="export",
                               progress=progress)
    errors = [error for result in results if (error := job.summary_error(result)) is not None]
    written = [result for result in results if isinstance(result, ExportedFile)]
    document = ExportSummary(out=str(out), events=sum(result.rows for result in written), traces=len(written),
                             reused=sum(result.reused for result in written), files=written)
    _failed(errors, failures)
    return document


def _selected_traces(path: PathLike, rank: Sequence[int], ranks: str | None) -> tuple[list, list[int], list]:
    """The trace files at `path` with their job ranks (within each mode for runs) and modes (None for traces outside
    hloscope runs), only the ranks asked for (`rank`, `ranks`: the commands' --rank and --ranks)."""
    from hloscope.trace import job
    from hloscope.trace.load import trace_files_and_modes

    try:
        wanted = job.parse_ranks(ranks or "", tuple(rank))
    except ValueError as error:
        raise UsageError(f"--ranks: {error}") from error
    files, modes = trace_files_and_modes(str(path))
    found = job.ranks_within_modes(files, modes) if any(modes) else job.job_ranks(files)[0]
    if wanted:
        kept = [(file, r, m) for file, r, m in zip(files, found, modes) if r in wanted]
        if not kept:
            raise UsageError(f"no trace at {path} has rank {wanted} "
                             f"(ranks there: {', '.join(map(str, sorted(set(found))[:16]))})")
        files, found, modes = [f for f, _, _ in kept], [r for _, r, _ in kept], [m for _, _, m in kept]
    return files, found, modes


def _failed(errors: list[InputError], failures: list[InputError] | None) -> None:
    """The traces that could not be read: told to the caller's list, or the last one raised."""
    if failures is not None:
        failures.extend(errors)
    elif errors:
        raise errors[-1]


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
         xla_cost: bool = True) -> DiffReport:
    """Two runs, dump directories or HLO files side by side, with the structural matching: typed
    (hloscope/diff/report.py: `report.matching.only_in_b`, `report.only_in_a[0].op_name`, `report.graphs.b[-1].flops`);
    `to_dict()` is what `diff --json` prints. The sides' statistics (`a`, `b`) are `hlo_stats` records (the sum of a
    train step's graphs, a dict, where a side runs as several)."""
    from hloscope.diff.pipeline import diff_paths

    return diff_paths(Path(a), Path(b), module, stage, xla_cost)


def diff_table(a: PathLike, b: PathLike, module: str | None = None, stage: str | None = None) -> Any:
    """The diff of A and B as a pyarrow Table: one row per matched pair of instructions (`kind` "matched", every pair,
    where `diff` keeps the counts and the pairs that took the most time) and per one-sided group (`kind` "only_in_a" |
    "only_in_b", as `diff`'s groups, every one): each side's graph, instruction, opcode and source op, the matcher's
    stage, counts, and with both sides profiled the device time per step of each side and B - A (hloscope/diff/
    tables.py)."""
    from hloscope.diff.pipeline import compare_paths
    from hloscope.diff.tables import diff_table as table

    _, compared = compare_paths(Path(a), Path(b), module, stage, xla_cost=False)  # the table holds no XLA cost
    return table(compared)


def diff_frame(a: PathLike, b: PathLike, module: str | None = None, stage: str | None = None) -> Any:
    """`diff_table(a, b)` as a pandas DataFrame."""
    return diff_table(a, b, module, stage).to_pandas()


def explain(*paths: PathLike, baseline: str | None = None, min_gap: float = 0.05,
            summaries: list | None = None) -> ExplainReport:
    """Each run against the baseline: the gap with its interval and verdict, configuration differences, the measured
    contributors, the residual and the op table, as typed data (hloscope.explain.report; `.to_dict()` is the
    `explain --json` document). Paths: comparison directories, run directories or folders of runs. `summaries`, when
    given a list, receives each run's ModeSummary."""
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


class CompareProgress(Protocol):
    """Told what `compare` is doing as it does it (the command draws its progress bar and tables from this; a notebook
    may ignore it): each method is called in the order the comparison goes."""

    def skipped(self, mode: str, why: str) -> None:
        """A mode left out of the default set (not installed, no target capture, one device only)."""

    def started(self, directory: Path, modes: list[str], device_counts: list[int], repeats: int) -> None:
        """The comparison directory is made; nothing has run yet."""

    def auditing(self, mode: str) -> None:
        """The fairness audit sets `mode` up."""

    def audited(self, audit: AuditStage) -> None:
        """The fairness audit is done."""

    def running(self, runs: int) -> None:
        """The timed runs start: `runs` processes in all."""

    def run_started(self, label: str) -> None: ...

    def run_phase(self, mode: str, where: str) -> None:
        """Where a running process is (imports, compile, steps, ...)."""

    def run_done(self, entry: ComparisonEntry) -> None: ...

    def runs_done(self) -> None: ...

    def replay_started(self, mode: str) -> None: ...

    def replay_done(self, mode: str, summary: dict[str, Any]) -> None: ...


class _QuietCompare:
    """A CompareProgress that is told everything and says nothing."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *arguments: None


def compare(options: RunOptions, modes: Sequence[str] | str | None = None, out: PathLike = "traces", repeats: int = 3,
            device_counts: Sequence[int] | None = None, timeout_s: float | None = None, audit: bool = True,
            replay: bool = False, progress: CompareProgress | None = None) -> ComparisonRecord:
    """`hloscope compare`: every mode in `repeats` fresh processes, round-robin with the order rotated each round, into
    a new compare-<UTC> comparison directory under `out`; returns comparison.json, typed (`.dir` is the directory).
    `options` is every run's options (its `mode` is set per mode); `modes` (names, or one comma-separated string)
    default to every mode whose framework is installed (those not are told to `progress.skipped`). With `device_counts` (several), every mode at each count;
    a mode that refuses a setting or a count is recorded as refused while the others run. `audit`: the fairness audit
    first (every mode set up once). `replay`: each XLA mode's program replayed alone after the timing (the HLO is
    dumped for it). A mode that fails is recorded with its error; the others complete. `timeout_s` stops a process
    that runs longer. UsageError (nothing created) for settings no mode can run."""
    from hloscope.backends.base import check_target_settings
    from hloscope.runs.audit import run_audit
    from hloscope.runs.rundir import create_run_dir
    from hloscope.runs.runner import run_comparison

    told: CompareProgress = progress or _QuietCompare()
    check_range("repeats", repeats, 1, MAX_REPEATS)
    counts = parse_device_counts(",".join(map(str, device_counts))) if device_counts else [options.devices]
    # the options are named as the command's flags, as every UsageError of a setting is
    if replay and options.target:
        raise UsageError("--replay times the programs on this machine; --target compiles for another GPU without "
                         "running anything: use one or the other")
    if options.max_batch and not options.target:
        raise UsageError("--max-batch searches by compiling for a GPU: give --target h100|a100|PATH")
    if options.target and len(counts) > 1:
        raise UsageError("--target compiles for one GPU without running anything: give one --devices count")
    options = dataclasses.replace(options, devices=counts[0], dump_hlo=options.dump_hlo or replay)
    get_preset(options.model, options.seq_len)  # an unknown model or sequence length: refused before anything runs
    check_target_settings(options.target, options.donate, options.compile_mode, options.fullgraph, options.threads)
    check_threads(options.threads)  # the settings a mode refuses are recorded as refused, the others run
    selected, plan = _select_modes(modes, options, counts, told)
    by_devices = plan is not None
    plan = _refuse_settings(selected, options, plan)
    runnable = [mode for mode in selected if plan is None or any(p.mode == mode and p.refused is None for p in plan)]
    if not runnable and plan:  # every selected mode refuses: one line, as run refuses, and no directory
        raise UsageError(next(str(p.refused) for p in plan if p.refused is not None))
    if options.target:
        repeats = 1  # compiled for another GPU, nothing timed: one process says it all
    options_for = lambda mode: dataclasses.replace(options, mode=mode)  # noqa: E731
    config = {k: v for k, v in options_for(selected[0]).to_json().items() if k not in ("mode", "compile_model")}
    config["modes"] = selected
    config["repeats"] = repeats
    if by_devices:
        config["devices"] = counts  # every mode at each count (comparison.json's entries each hold their own)
    directory = create_run_dir(Path(out), None, prefix="compare")
    told.started(directory, selected, counts if by_devices else [], repeats)
    try:
        audit_before = None
        if audit and not options.target and runnable:
            audit_before = run_audit(runnable, options_for, timeout_s, on_mode=told.auditing)
            told.audited(audit_before)
    except KeyboardInterrupt:  # a Ctrl-C during the audit leaves no empty comparison directory behind
        with contextlib.suppress(OSError):
            directory.rmdir()
        raise
    told.running((len(plan) if plan is not None else len(selected)) * repeats)
    try:
        record = run_comparison(selected, options_for, directory, config, on_mode_start=told.run_started,
                                on_mode_phase=told.run_phase, on_mode_done=told.run_done, timeout_s=timeout_s,
                                audit_before=audit_before, plan=plan, repeats=repeats)
    finally:
        told.runs_done()
    return _replayed(record, options, timeout_s, told) if replay else record


def _select_modes(modes: Sequence[str] | str | None, options: RunOptions, counts: list[int],
                  told: CompareProgress) -> tuple[list[str], list[PlannedRun] | None]:
    """The modes to run (every installed one by default, those that compile for the target, those that run on the
    device count), and the plan of (mode, devices) runs when several device counts are given (else None)."""
    from hloscope.targets.run_target import check_target_run

    if modes is None:
        selected = []
        for known in MODES:
            if all(find_spec(package) is not None for package in known.packages):
                selected.append(known.name)
            else:
                told.skipped(known.name, "its framework is not installed")
    else:
        selected = parse_modes(modes if isinstance(modes, str) else ",".join(modes))
    if options.target:
        kept = [mode for mode in selected if mode in TARGET_MODES]
        for mode in selected:
            if mode not in kept:
                told.skipped(mode, f"--target needs an XLA graph ({', '.join(sorted(TARGET_MODES))})")
        if kept:
            check_target_run(kept[0], options.target, options.max_batch)
        selected = kept
    plan = None
    if len(counts) > 1:
        plan = _device_plan(selected, counts, options.batch_size)
    else:
        selected = _devices_modes(selected, counts[0], options.batch_size, modes is None, told)
    if not selected:
        raise UsageError(f"no mode to run: install {_packages_hint()}")
    return selected, plan


def _devices_modes(selected: list[str], devices: int, batch_size: int, by_default: bool,
                   told: CompareProgress) -> list[str]:
    """More than one device: modes named must all support it (else one line naming the mode); the default set keeps
    those that do, telling which it skips."""
    from hloscope.backends.devices import check_devices

    if devices > 1 and by_default:
        for mode in [m for m in selected if not get_mode(m).data_parallel]:
            told.skipped(mode, f"runs on one device only (--devices {devices})")
        selected = [m for m in selected if get_mode(m).data_parallel]
    for mode in selected:
        check_devices(mode, devices, batch_size)
    return selected


def _device_plan(selected: list[str], counts: list[int], batch_size: int) -> list[PlannedRun]:
    """Several device counts: every selected mode at each count, the smallest count first; a count the mode refuses
    (one device only, a batch the count does not divide) is planned as refused with check_devices' one line."""
    from hloscope.backends.devices import check_devices
    from hloscope.runs.runner import PlannedRun

    plan = []
    for count in counts:
        for mode in selected:
            try:
                check_devices(mode, count, batch_size)
            except UsageError as error:
                plan.append(PlannedRun(mode, count, refused=str(error)))
                continue
            plan.append(PlannedRun(mode, count))
    return plan


def _refuse_settings(selected: list[str], options: RunOptions,
                     plan: list[PlannedRun] | None) -> list[PlannedRun] | None:
    """The modes that refuse donation, a compile mode or fullgraph are planned as refused with the one line why, and
    the others run; the plan as it was (None: one run per mode) when no mode refuses."""
    from hloscope.runs.runner import PlannedRun

    refusals = {mode: settings_refusal(mode, options.donate, options.compile_mode, options.fullgraph)
                for mode in selected}
    if not any(refusals.values()):
        return plan
    if plan is None:
        return [PlannedRun(mode, refused=refusals[mode]) for mode in selected]
    return [p if p.refused is not None or refusals[p.mode] is None else dataclasses.replace(p, refused=refusals[p.mode])
            for p in plan]


def _packages_hint() -> str:
    """`torch, torch_xla or jax (with flax, optax, transformers)`: the frameworks, then the other packages."""
    main = list(FRAMEWORK_IMPORTS)
    extra = sorted({p for m in MODES for p in m.packages} - set(main))
    named = ", ".join(main[:-1]) + f" or {main[-1]}" if len(main) > 1 else main[0]
    return f"{named} (with {', '.join(extra)})" if extra else named


def _replayed(comparison: ComparisonRecord, options: RunOptions, timeout_s: float | None,
              told: CompareProgress) -> ComparisonRecord:
    """Each XLA mode's run replayed in its own subprocess (hloscope/runs/replays.py); comparison.json rewritten with
    the replays (a replay that fails is recorded with its error, nothing else lost)."""
    from hloscope.runs.records import ReplayPlan, amended_comparison
    from hloscope.runs.replays import replay_comparison
    from hloscope.runs.rundir import write_comparison

    done = replay_comparison(comparison, options.steps, options.warmup, options.device, timeout_s,
                             on_start=told.replay_started, on_done=told.replay_done)
    replays = {entry.dir: replay for entry, replay in done}
    modes = [msgspec.structs.replace(entry, replay=replays[entry.dir]) if entry.dir in replays else entry
             for entry in comparison.modes]
    replayed = amended_comparison(comparison, modes=modes, replay=ReplayPlan(
        steps=options.steps, warmup=options.warmup, device=options.device,
        how="hloscope replay RUN_DIR, one subprocess per XLA mode, after the timing"))
    write_comparison(replayed.dir, replayed)
    return replayed


def hypothesis_tests(report: ExplainReport, out: PathLike, budget_min: float | None = None, repeats: int = 3,
                     rules: Sequence[str] = (), on_plan: Callable[[TestingPlan], None] | None = None,
                     progress: TestingProgress | None = None) -> TestedBlock:
    """explain's hypotheses tested by re-runs (`--test-hypotheses`): for each significant gap of `report` (from
    `explain`), the slower configuration run again with each suspected setting changed to the faster one's,
    interleaved with both in `repeats` fresh processes, into new tested-<UTC> comparison directories under `out`,
    within `budget_min` minutes (default 10 on a CPU, 60 otherwise); `rules` (hypothesis names) tests those on every
    configuration, found or not. `on_plan` is given the plan before anything runs (hloscope/explain/tested.py:
    TestingPlan), `progress` is told of each run as it starts. Returns the results, typed
    (hloscope/explain/experiments.py: TestedBlock, `.to_dict()` is explain --json's `tested`), also set as
    `report.tested`. A configuration none of whose runs can be read is not run again (its gaps are not tested)."""
    from hloscope.explain.tested import plan_testing, run_testing

    if budget_min is not None:
        check_range("budget_min", budget_min, 0.1, MAX_BUDGET_MIN)
    check_range("repeats", repeats, 1, MAX_REPEATS)
    plan = plan_testing(report, budget_min, repeats, list(rules) or None)
    if on_plan is not None:
        on_plan(plan)
    return run_testing(report, plan, Path(out), progress)


def calibrate(options: RunOptions, out: PathLike = "traces", repeats: int = 3, delay_ms: float = 3.0,
              timeout_s: float | None = None, on_directory: Callable[[Path], None] | None = None,
              on_start: Callable[[str], None] | None = None) -> Calibration:
    """What this machine resolves at `options` (one mode's run options, profiled): three configurations, A, A' (the
    same options: an A/A pair) and A with `delay_ms` slept on the host before every step, each in `repeats` fresh
    processes interleaved as compare runs them, into a new calibrate-<UTC> directory under `out`; then explained
    against A (hloscope/explain/calibration.py). Writes calibration.json there and returns it, typed
    (hloscope/runs/calibration_record.py; `.dir` is the directory, `.to_dict()` the JSON). `on_directory` is told
    the directory before anything runs, `on_start` each configuration's label as its process starts. HloscopeError
    when no process of A ran (their logs are in the directory)."""
    from hloscope.backends.base import check_settings
    from hloscope.explain.calibration import calibration
    from hloscope.runs.calibration_record import write_calibration
    from hloscope.runs.rundir import create_run_dir, measured_host_delay_s
    from hloscope.runs.runner import run_variants

    check_range("repeats", repeats, 1, MAX_REPEATS)
    check_range("delay_ms", delay_ms, 0.01, MAX_HOST_DELAY_MS)
    if options.target:
        raise UsageError("calibrate times steps on this machine; --target compiles for another GPU")
    get_mode(options.mode)  # an unknown mode, model or refused setting: one line, and nothing created
    get_preset(options.model, options.seq_len)
    check_settings(options)
    options = dataclasses.replace(options, profile=True)  # the delay is looked for in the profiled steps' ledger
    delayed = f"A+{delay_ms:g}ms"
    variants: dict[str, dict[str, Any]] = {"A": {}, "A'": {}, delayed: {"inject_host_delay_ms": delay_ms}}
    directory = create_run_dir(Path(out), None, prefix="calibrate")
    if on_directory is not None:
        on_directory(directory)
    record = run_variants(options.mode, options, variants, directory, repeats, timeout_s,
                          on_start=on_start or (lambda label: None))
    labels = [f"{options.mode} [{name}]" for name in variants]
    if not any(entry.status == "ok" and entry.mode == labels[0] for entry in record.modes):
        raise HloscopeError(f"{options.mode} never ran: nothing to calibrate (see {directory}/logs)")
    report = explain(directory, baseline=labels[0])
    result = calibration(report, options.mode, labels[1], labels[2], delay_ms / 1e3,
                         measured_host_delay_s(directory, delayed))
    return write_calibration(result, directory)


def replay(path: PathLike, device: str = "cpu", steps: int = 50, warmup: int = 10, profile: bool = False,
           profile_steps: int = 6, seed: int = 0, on_skip: Callable[[str], None] | None = None) -> ReplayRecord:
    """Replay a run directory made with --dump-hlo, or an HLO / StableHLO module file, alone through jaxlib's XLA on
    one device, timed as `run` times a step, and record it in replay.json (a new name if one exists) beside it: the
    record, typed (hloscope/runs/replay_record.py), with `written` the file recorded (None when the directory is not
    writable); its `to_dict()` is what `replay --json` prints. `status` "not_replayable" when nothing could be
    replayed; `on_skip` is told each module left out, in one line.
    XLA runs in a child process, whose JAX_PLATFORMS is cpu for a CPU replay (unless set), so that no GPU plugin
    starts; the calling process's environment is left as it is, and jax is not imported into it."""
    from hloscope.replay.runner import replay as run_replay

    check_range("steps", steps, 1, MAX_STEPS)
    check_range("warmup", warmup, 1, MAX_WARMUP)
    check_range("profile_steps", profile_steps, 1, MAX_PROFILE_STEPS)
    check_range("seed", seed, 0, MAX_SEED)
    return run_replay(path, device=device, steps=steps, warmup=warmup, profile=profile, profile_steps=profile_steps,
                      seed=seed, on_skip=on_skip or (lambda line: None))


def replays(path: PathLike, device: str = "cpu", steps: int = 50, warmup: int = 10, profile: bool = False,
            on_done: Callable[[str, dict], None] | None = None) -> list[dict]:
    """Each XLA mode's run of the comparison directory at `path` replayed in its own subprocess, as `replay --json`
    prints it for a comparison: one {"mode", "dir", ...its replay summary} per mode, `on_done(mode, summary)` told of
    each as it ends. comparison.json is left as it is (each replay.json sits in its run directory, where explain
    reads it). UsageError when no run of an XLA mode finished there."""
    from hloscope.runs.replays import replay_comparison, replayable_entries
    from hloscope.runs.rundir import load_comparison as load

    check_range("steps", steps, 1, MAX_STEPS)
    check_range("warmup", warmup, 1, MAX_WARMUP)
    folder = Path(path)
    comparison = load(folder)
    if not replayable_entries(comparison):
        xla = ", ".join(mode.name for mode in MODES if mode.xla)
        raise UsageError(f"{folder}: no run of an XLA mode ({xla}) finished in this comparison: nothing to replay")
    done = replay_comparison(comparison, steps, warmup, device, profile=profile,
                             on_done=on_done or (lambda mode, summary: None))
    return [{"mode": entry.mode, "dir": entry.dir, **summary} for entry, summary in done]


def tensorboard_view(directory: PathLike, logdir: PathLike, progress: Any = None,
                     on_problem: Callable[[str, str], None] | None = None) -> tuple[ViewLogdir, list[Session]]:
    """The view `tensorboard` serves: every profile under `directory` (xplane.pb files, Kineto traces converted to
    XSpace) as runs named `<mode>/<comparison>` in a new TensorBoard logdir at `logdir` (created; `directory` is not
    written), with each run's profiled steps, the XLA modules kept and what XProf's tools can show. Returns the view
    (hloscope.tensorboard.logdir.ViewLogdir: `sync()` again to follow `directory`) and the runs shown.
    `on_problem(run, why)` is told of each run left out (a trace that cannot be converted); InputError when no
    profile could be read. `progress` is told how far a Kineto trace's conversion is
    (hloscope.render.progress.PhaseProgressBar)."""
    from hloscope.tensorboard.logdir import ViewLogdir

    view = ViewLogdir(Path(directory), Path(logdir), progress=progress)
    view.root.mkdir()
    shown = view.sync()
    if on_problem is not None:
        for name, why in view.problems.items():
            on_problem(name, why)
    if not shown:
        raise InputError(Path(directory), "no profile could be read (see the warnings above)")
    return view, shown
