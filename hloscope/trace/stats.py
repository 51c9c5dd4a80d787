"""`trace_stats(trace)`: the per-trace summary that `hloscope trace stats --json` prints, from one pass over the events.

Memory: the pass keeps per-name totals (one entry per distinct kernel name) and, for the step analysis, flat arrays
of 34 bytes per device execution event and 24 bytes per host launch (while steps are computed, about 20 more per
execution and 12 per launch, plus ~75 bytes per execution of the largest step); events themselves are never held
(docs/trace.md).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import NamedTuple

import msgspec

from hloscope.trace.load import CheckedEvents
from hloscope.trace.model import (
    CATEGORIES,
    CATEGORY_INDEX,
    COLLECTIVE,
    DEVICE_EXEC_KINDS,
    FLOW_CORRELATION_BASE,
    KERNEL,
    RUNTIME,
    SOURCE_HLO,
    SOURCE_NAMES,
    SOURCE_PROFILER,
    STEP,
    Event,
    Trace,
)
from hloscope.trace.results import (
    BeforeWindow,
    Collectives,
    HloOpRow,
    HostOps,
    ModeRow,
    RankRow,
    StepRow,
    TopRow,
    TraceRecord,
)
from hloscope.trace.steps import StepLocator, StepWindow, busy_summary, exposed_time, step_windows

# Imports inside functions: what only some traces need (a run's HLO ~23 ms, host ops ~7 ms, several traces'
# statistics ~2 ms), kept out of `trace stats` start-up.

TOP_N = 10
_TRAIN_PROGRAM = re.compile(r"train", re.IGNORECASE)  # XLA modules of a training step: jit_train_step, train_step...
_NO_CORRELATION = -1
_INT64 = 1 << 63  # correlation ids are kept in arrays of signed 64-bit integers
_CATEGORY_INDEX = CATEGORY_INDEX
_COLLECTIVE_INDEX = _CATEGORY_INDEX[COLLECTIVE]

# Spans of one training-step program's executions: flow correlation id, or (lane, start of the execution) ->
# [start, end] in us.
_Spans = dict[int | tuple[str, float], list[float]]


class _Accumulator:
    def __init__(self) -> None:
        self.events = 0
        self.kernels = 0
        self.device_time = 0.0
        self.host_runtime = 0.0
        self.categories = dict.fromkeys(CATEGORIES, 0.0)
        self.executions_by_category = dict.fromkeys(CATEGORIES, 0)
        self.source_time = {SOURCE_HLO: 0.0, SOURCE_NAMES: 0.0}  # device time by what decided its category
        self.by_name: dict[str, list[float]] = {}  # name -> [count, total_us]
        self.by_hlo_op: dict[tuple[str | None, str], list[float]] = {}  # (hlo_module, hlo_op) -> [count, total_us]
        self.host_markers: list[tuple[int, float, float]] = []
        self.device_markers: list[tuple[int, float, float]] = []
        self.devices: set[str] = set()
        # Device executions and host launches, flat, for the per-step analysis.
        self.exec_start = array("d")
        self.exec_end = array("d")
        self.exec_corr = array("q")
        self.exec_is_kernel = array("b")
        self.exec_category = array("b")  # index into CATEGORIES
        self.exec_anchor = array("d")  # start of the XLA program execution the event is part of (own start if none)
        self._open_executions: dict[tuple[str, str], tuple[float, set[str]]] = {}
        # Executions of training-step programs ("jit_train_step", ...) on the first device that ran them: the steps
        # when the profiler recorded no step markers. module -> (process, {execution: [start, end]})
        self.train_executions: dict[str, tuple[str, _Spans]] = {}
        self.launch_corr = array("q")
        self.launch_start = array("d")
        self.launch_dur = array("d")
        # For the job view (hloscope/trace/job.py), from the same pass: kernel executions by name, and the collectives
        # (device executions of category collective/communication) in file order.
        self.kernel_counts: dict[str, int] = {}
        self.collective_names: list[str] = []
        self.collective_index: dict[str, int] = {}
        self.collective_name = array("i")
        self.collective_start = array("d")
        self.collective_dur = array("d")

    def add_all(self, events: Iterable[Event]) -> None:
        """Add each event, in order. One loop with the totals and arrays in local names: it runs once per event of
        traces with millions of them, and most events (host ops) are only counted."""
        categories = self.categories
        executions_by_category = self.executions_by_category
        source_time = self.source_time
        by_name = self.by_name
        kernel_counts = self.kernel_counts
        devices = self.devices
        exec_start, exec_end, exec_corr = self.exec_start, self.exec_end, self.exec_corr
        exec_is_kernel, exec_category, exec_anchor = self.exec_is_kernel, self.exec_category, self.exec_anchor
        launch_corr, launch_start, launch_dur = self.launch_corr, self.launch_start, self.launch_dur
        device_kinds = DEVICE_EXEC_KINDS
        category_index = _CATEGORY_INDEX
        count = kernels = 0
        device_time, host_runtime = self.device_time, self.host_runtime
        try:
            for event in events:
                count += 1
                kind = event.kind
                if event.device and kind in device_kinds:
                    duration = event.dur_us
                    device_time += duration
                    category = event.category
                    categories[category] += duration
                    executions_by_category[category] += 1
                    source = event.category_source
                    source_time[source] = source_time.get(source, 0.0) + duration
                    name = event.name
                    entry = by_name.get(name)
                    if entry is None:
                        by_name[name] = [1, duration]
                    else:
                        entry[0] += 1
                        entry[1] += duration
                    if event.hlo_op is not None:
                        self._add_hlo_op(event.hlo_module, event.hlo_op, duration)
                    is_kernel = kind == KERNEL
                    if is_kernel:
                        kernels += 1
                        kernel_counts[name] = kernel_counts.get(name, 0) + 1
                    if category == COLLECTIVE:
                        self._note_collective(event)
                    devices.add(event.process)
                    start = event.start_us
                    exec_start.append(start)
                    exec_end.append(start + duration)
                    correlation = event.correlation
                    try:
                        exec_corr.append(_NO_CORRELATION if correlation is None else correlation)
                    except OverflowError:  # an id beyond 64 bits (valid JSON) links nothing that a launch could name
                        exec_corr.append(_NO_CORRELATION)
                    exec_is_kernel.append(is_kernel)
                    exec_category.append(category_index[category])
                    exec_anchor.append(self._execution_start(event))
                elif kind == RUNTIME:
                    host_runtime += event.dur_us
                    correlation = event.correlation
                    if correlation is not None and -_INT64 <= correlation < _INT64:
                        launch_corr.append(correlation)
                        launch_start.append(event.start_us)
                        launch_dur.append(event.dur_us)
                elif kind == STEP and event.step is not None:
                    marker = (event.step, event.start_us, event.start_us + event.dur_us)
                    (self.device_markers if event.device else self.host_markers).append(marker)
        finally:
            self.events += count
            self.kernels += kernels
            self.device_time, self.host_runtime = device_time, host_runtime

    def _add_hlo_op(self, module: str | None, op: str, duration: float) -> None:
        key = (module, op)
        entry = self.by_hlo_op.get(key)
        if entry is None:
            self.by_hlo_op[key] = [1, duration]
        else:
            entry[0] += 1
            entry[1] += duration

    def _note_collective(self, event: Event) -> None:
        index = self.collective_index.get(event.name)
        if index is None:
            index = self.collective_index[event.name] = len(self.collective_names)
            self.collective_names.append(event.name)
        self.collective_name.append(index)
        self.collective_start.append(event.start_us)
        self.collective_dur.append(event.dur_us)

    def collectives(self) -> Collectives:
        """The collectives in start order (the n-th occurrence of a collective is its n-th call on this device):
        distinct `names`, each call's `name` (index into names), `start_us` and `dur_us`."""
        order = sorted(range(len(self.collective_start)), key=self.collective_start.__getitem__)
        return Collectives(
            names=self.collective_names,
            name=[self.collective_name[i] for i in order],
            start_us=[self.collective_start[i] for i in order],
            dur_us=[self.collective_dur[i] for i in order],
        )

    def _execution_start(self, event: Event) -> float:
        """Where the program execution holding this XLA op began: a new execution starts on a lane when an op of the
        same module runs again (ops of one execution are distinct instructions, loops aside)."""
        module = event.hlo_module
        if module is None:
            return event.start_us
        key = (event.process + event.lane, module)
        current = self._open_executions.get(key)
        instruction = event.hlo_op or event.name
        if current is None or instruction in current[1]:  # a new execution
            current = (event.start_us, set())
            self._open_executions[key] = current
        current[1].add(instruction)
        if _TRAIN_PROGRAM.search(module):
            self._note_train_execution(event, module, current[0])
        return current[0]

    def _note_train_execution(self, event: Event, module: str, anchor: float) -> None:
        """Spans of the training-step program's executions, on the first device that ran it. XLA CPU ops dispatched
        through one thread-pool flow are one execution, whichever threads ran them; otherwise an execution is a run
        of distinct ops on one lane."""
        process, spans = self.train_executions.setdefault(module, (event.process, {}))
        if process != event.process:
            return
        key: int | tuple[str, float]
        if event.correlation is not None and event.correlation >= FLOW_CORRELATION_BASE:
            key = event.correlation
        else:
            key = (event.lane, anchor)
        span = spans.get(key)
        if span is None:
            spans[key] = [event.start_us, event.end_us]
        else:
            span[0] = min(span[0], event.start_us)
            span[1] = max(span[1], event.end_us)


def trace_stats(trace: Trace, top: int = TOP_N, categories: Callable[[Event], str] | None = None) -> TraceRecord:
    """The summary of one trace, typed (`to_dict()`: the JSON, docs/trace.md has every key). `categories`: a
    `program_categories.CategoryResolver` (or any Event -> category function) that decides the category of each
    device execution, e.g. from the run's HLO; without it, the readers' name-based categories stand."""
    return trace_stats_and_totals(trace, top, categories)[0]


def trace_stats_and_totals(
    trace: Trace, top: int = TOP_N, categories: Callable[[Event], str] | None = None,
) -> tuple[TraceRecord, _Accumulator]:
    """`trace_stats`, and the totals of the pass it made (kernel counts by name, the collectives) for the job view."""
    if categories is not None:
        from hloscope.trace.program_categories import categorized

        trace = categorized(trace, categories)
    acc = _Accumulator()
    events = trace.events
    if isinstance(events, CheckedEvents):  # host ops and annotations are only counted here: the reader need not build them
        acc.add_all(events.lean())
        acc.events += events.counted
    else:
        acc.add_all(events)
    result = _result(trace, acc, top)
    if not result.kernels and result.per_step:
        per_step, host_ops = _host_ops(trace, result.per_step, top)
        result = msgspec.structs.replace(result, per_step=per_step, host_ops=host_ops)
    return result, acc


def _host_ops(trace: Trace, per_step: list[StepRow], top: int) -> tuple[list[StepRow], HostOps]:
    """A host-only trace (PyTorch on the CPU): the framework ops that did the work, per step (a second pass over the
    events; such traces hold no device events); and the steps with the collectives the host recorded."""
    from hloscope.trace.step_profile import host_op_table, profile_steps, step_parts

    windows = [(w.step, w.start_us, w.start_us + w.host_duration_us) for w in per_step]
    parts = step_parts(trace.events, windows)
    by_number = {part.number: part for part in parts}
    steps = []
    for step in per_step:  # DDP on the CPU: gloo's collectives, recorded on the host
        part = by_number[step.step]
        steps.append(msgspec.structs.replace(step, collective_us=round(part.collective_s * 1e6, 3),
                                             collective_exposed_us=round(part.collective_exposed_s * 1e6, 3)))
    return steps, msgspec.convert(host_op_table(profile_steps(parts, warmup=1), top), HostOps)


def summarize_events(
    events: Iterable[Event], file: str = "<events>", format: str = "events", top: int = TOP_N,
    categories: Callable[[Event], str] | None = None,
) -> TraceRecord:
    """`trace_stats` for any iterable of events (tests, filtered views)."""
    return trace_stats(Trace(file=file, format=format, events=events), top, categories)


def _result(trace: Trace, acc: _Accumulator, top: int) -> TraceRecord:
    device_time = acc.device_time
    ranked = sorted(acc.by_name.items(), key=lambda item: item[1][1], reverse=True)[:top]
    host_launch = _dispatched_time(acc)
    per_step, step_source, before_window = _per_step(acc)
    return TraceRecord(
        file=trace.file,
        format=trace.format,
        steps=len(per_step),
        step_source=step_source,
        events=acc.events,
        kernels=acc.kernels,
        device_time_us=round(device_time, 3),
        devices=len(acc.devices),
        host_runtime_us=round(acc.host_runtime, 3),
        host_launch_us=round(host_launch, 3),
        categories={name: round(total, 3) for name, total in acc.categories.items()},
        category_source=next((source for source in (SOURCE_HLO, SOURCE_PROFILER) if acc.source_time.get(source)),
                             SOURCE_NAMES),
        category_source_us={name: round(total, 3) for name, total in acc.source_time.items()},
        executions_by_category=dict(acc.executions_by_category),
        top=[
            TopRow(name=name, count=int(count), total_us=round(total, 3),
                   share=round(total / device_time, 4) if device_time else 0.0)
            for name, (count, total) in ranked
        ],
        hlo_ops=[
            HloOpRow(hlo_op=op, hlo_module=module, count=int(count), total_us=round(total, 3),
                     share=round(total / device_time, 4) if device_time else 0.0)
            for (module, op), (count, total) in sorted(acc.by_hlo_op.items(), key=lambda item: -item[1][1])[:top]
        ],
        per_step=per_step,
        before_window=before_window,
    )


def _before_window(executions: int = 0, kernels: int = 0, time_us: float = 0.0) -> BeforeWindow:
    return BeforeWindow(executions=executions, kernels=kernels, device_time_us=round(time_us, 3))


def _per_step(acc: _Accumulator) -> tuple[list[StepRow], str | None, BeforeWindow]:
    host_windows = step_windows(acc.host_markers)
    windows = host_windows or step_windows(acc.device_markers)
    source = "markers" if windows else None
    if not windows and acc.train_executions:
        # No markers: each execution of the training-step program is a step (the module run most often).
        module, (_, spans) = max(acc.train_executions.items(), key=lambda item: (len(item[1][1]), item[0]))
        ordered = sorted(spans.values())
        windows = step_windows([(number, start, end) for number, (start, end) in enumerate(ordered)])
        source = f"executions of {module}"
    if not windows:
        return [], None, _before_window()
    step_of_execution, launch_time = _place(acc, windows, bool(host_windows))
    figures, early = _step_figures(acc, step_of_execution, len(windows))
    out = []
    for index, (window, step) in enumerate(zip(windows, figures, strict=True)):
        out.append(
            StepRow(
                step=window.number,
                start_us=round(window.start_us, 3),
                host_duration_us=round(window.end_us - window.start_us, 3),
                kernels=step.kernels,
                device_busy_us=round(step.busy_us, 3),
                device_span_us=round(step.span_us, 3),
                device_idle_us=round(step.idle_us, 3),
                idle_gaps=step.gaps,
                largest_gap_us=round(step.largest_gap_us, 3),
                host_runtime_us=round(launch_time[index], 3),
                executions_by_category=dict(zip(CATEGORIES, step.category_counts)),
                categories_us={name: round(total, 3) for name, total in zip(CATEGORIES, step.category_time)},
                collective_us=round(step.collective_us, 3),
                collective_exposed_us=round(step.collective_exposed_us, 3),
            )
        )
    return out, source, _before_window(*early)


class _StepFigures(NamedTuple):
    """The device work placed in one step."""

    kernels: int
    category_counts: list[int]  # executions by category, in CATEGORIES' order
    category_time: list[float]  # us by category
    busy_us: float  # BusySummary of the step's executions
    span_us: float
    idle_us: float
    gaps: int
    largest_gap_us: float
    collective_us: float  # union of the collectives' intervals
    collective_exposed_us: float  # its part that no other execution overlaps


def _step_figures(
    acc: _Accumulator, step_of_execution: array[int], steps: int,
) -> tuple[list[_StepFigures], tuple[int, int, float]]:
    """(the figures of each step, (executions, kernels, us) launched before the profiling window)."""
    starts = [array("d") for _ in range(steps)]
    ends = [array("d") for _ in range(steps)]
    collective = [array("b") for _ in range(steps)]  # 1 where the execution is a collective
    kernels = [0] * steps
    category_counts = [[0] * len(CATEGORIES) for _ in range(steps)]
    category_time = [[0.0] * len(CATEGORIES) for _ in range(steps)]
    early_executions = early_kernels = 0
    early_time = 0.0
    executions = zip(acc.exec_start, acc.exec_end, step_of_execution, acc.exec_is_kernel, acc.exec_category)
    for start, end, index, is_kernel, category in executions:
        if index < 0:
            if index == _EARLY:
                early_executions += 1
                early_kernels += is_kernel
                early_time += end - start
            continue
        starts[index].append(start)
        ends[index].append(end)
        collective[index].append(category == _COLLECTIVE_INDEX)
        kernels[index] += is_kernel
        category_counts[index][category] += 1
        category_time[index][category] += end - start
    figures = []
    for index in range(steps):
        busy = busy_summary(list(zip(starts[index], ends[index])))  # one step's intervals at a time
        communication = _collective_time(starts[index], ends[index], collective[index])
        starts[index] = ends[index] = array("d")  # this step's intervals are no longer needed
        collective[index] = array("b")
        figures.append(_StepFigures(kernels[index], category_counts[index], category_time[index], busy.busy_us,
                                    busy.span_us, busy.idle_us, busy.gaps, busy.largest_gap_us, *communication))
    return figures, (early_executions, early_kernels, early_time)


def _collective_time(starts: array[float], ends: array[float], flags: array[int]) -> tuple[float, float]:
    """(union of the collectives' intervals, its part that no other execution overlaps) of one step, in us."""
    if not any(flags):
        return 0.0, 0.0
    collective = [(s, e) for s, e, flag in zip(starts, ends, flags) if flag]
    other = [(s, e) for s, e, flag in zip(starts, ends, flags) if not flag]
    return busy_summary(collective).busy_us, exposed_time(collective, other)


def _dispatched_time(acc: _Accumulator) -> float:
    """Host dispatch: the time of the runtime calls whose correlation id is a device execution's (cudaLaunchKernel,
    cudaMemcpyAsync, XLA thread-pool hand-offs), apart from the rest of the runtime time (cudaDeviceSynchronize, event
    queries)."""
    dispatched = frozenset(acc.exec_corr)
    total: float = 0  # stays the int 0 when no launch matched (as it always has: "host_launch_us": 0)
    for correlation, duration in zip(acc.launch_corr, acc.launch_dur):
        if correlation in dispatched:
            total += duration  # a plain running sum (not sum(), which compensates rounding since Python 3.12)
    return total


_NO_STEP = -1  # an execution in no step (before the first one)
_EARLY = -2  # an execution launched before the profiler started recording: reported apart (before_window)
_OUTSIDE_STEPS = -1  # a launch in the trace, made outside every step marker


def _place(acc: _Accumulator, windows: list[StepWindow], host_windows: bool) -> tuple[array[int], list[float]]:
    """(the step index of each device execution, or _NO_STEP / _EARLY; the host launch time of each step).

    A device event is in the step its launch was in (when the steps are host markers); without a launch record, in
    the last step started before its program execution began."""
    locator = StepLocator(windows)
    launches = _LaunchSteps(acc, locator, len(windows))
    use_launches = host_windows and launches.any
    step_of = launches.step_of
    steps = array("i")
    for correlation, anchor in zip(acc.exec_corr, acc.exec_anchor):
        index = None
        if use_launches and correlation != _NO_CORRELATION:
            index = step_of(correlation)
            if index is None and correlation < FLOW_CORRELATION_BASE:
                # Launched before the profiler started recording (its launch is not in the trace: its correlation id
                # is below every captured launch, or missing): work of no captured step, reported apart.
                steps.append(_EARLY)
                continue
            if index == _OUTSIDE_STEPS:
                index = None
        if index is None:
            index = locator.last_started(anchor)
        steps.append(_NO_STEP if index is None else index)
    return steps, launches.time_per_step


class _LaunchSteps:
    """The step of each host launch, found by correlation id.

    Profilers number launches in order per thread, so the ids arrive as a few interleaved increasing runs: each run
    is kept as flat arrays searched by bisection (12 bytes a launch); past MAX_RUNS runs, the rest go to a dict."""

    MAX_RUNS = 32

    def __init__(self, acc: _Accumulator, locator: StepLocator, steps: int):
        self.time_per_step = time_per_step = [0.0] * steps
        self._runs: list[tuple[array[int], array[int]]] = []  # (increasing correlation ids, their step indices)
        self._others: dict[int, int] = {}
        dispatched = frozenset(acc.exec_corr)
        runs = self._runs
        # Each id goes to the first run whose last id is not above it. The runs' last ids decrease from run to run
        # (a new run starts below all of them; an id joins run i only below the last id of run i - 1), so that run is
        # found by bisection over their negated last ids.
        negated_lasts: list[int] = []
        for correlation, start, duration in zip(acc.launch_corr, acc.launch_start, acc.launch_dur):
            index = locator.index_at(start)
            if index is None:
                index = _OUTSIDE_STEPS
            elif correlation in dispatched:  # a launch of device work, not a synchronize
                time_per_step[index] += duration
            run = bisect_left(negated_lasts, -correlation)
            if run < len(runs):
                correlations, indices = runs[run]
                correlations.append(correlation)
                indices.append(index)
                negated_lasts[run] = -correlation
            elif len(runs) < self.MAX_RUNS:
                runs.append((array("q", [correlation]), array("i", [index])))
                negated_lasts.append(-correlation)
            else:
                self._others[correlation] = index
        self.any = bool(self._runs or self._others)

    def step_of(self, correlation: int) -> int | None:
        """The step index of the launch with this correlation id; _OUTSIDE_STEPS when that launch was made outside
        every step; None when the trace holds no such launch."""
        for correlations, indices in self._runs:
            if correlations[0] <= correlation <= correlations[-1]:  # (bisect only the runs whose range holds it)
                position = bisect_left(correlations, correlation)
                if correlations[position] == correlation:
                    return indices[position]
        return self._others.get(correlation)


def rank_summary(results: list[TraceRecord]) -> list[RankRow]:
    """One row per trace of a multi-rank directory (two or more traces with a known rank, HTA's layout), by rank:
    steps, kernels, device time, host dispatch, the median step's device busy time and the work launched before the
    profiling window. Empty otherwise."""
    ranked = [(r.rank, r) for r in results if isinstance(r.rank, int)]
    if len(ranked) < 2:
        return []
    from statistics import median  # not for one trace: 2 ms of imports

    rows = []
    for rank, result in sorted(ranked, key=lambda pair: (pair[0], pair[1].file)):
        busy = [step.device_busy_us for step in result.per_step]
        rows.append(RankRow(rank=rank, file=result.file, steps=result.steps, kernels=result.kernels,
                            device_time_us=result.device_time_us, host_launch_us=result.host_launch_us,
                            median_step_busy_us=round(median(busy), 3) if busy else None,
                            before_window_us=result.before_window.device_time_us))
    return rows


def mode_summary(results: list[TraceRecord]) -> list[ModeRow]:
    """One row per mode of a comparison (traces whose record names a `mode`; two or more modes), in the comparison's
    order: its traces, steps, kernels, device time, host dispatch, and the median step's host time and device busy
    time over all its traces' steps. Empty otherwise: modes are separate runs, never ranks of one job."""
    modes = list(dict.fromkeys(r.mode for r in results if isinstance(r.mode, str)))
    if len(modes) < 2:
        return []
    from statistics import median

    rows = []
    for mode in modes:
        mine = [r for r in results if r.mode == mode]
        steps = [step for r in mine for step in r.per_step]
        rows.append(ModeRow(mode=mode, traces=len(mine), steps=sum(r.steps for r in mine),
                            kernels=sum(r.kernels for r in mine),
                            device_time_us=round(sum(r.device_time_us for r in mine), 3),
                            host_launch_us=round(sum(r.host_launch_us for r in mine), 3),
                            median_step_us=round(median(s.host_duration_us for s in steps), 3) if steps else None,
                            median_step_busy_us=round(median(s.device_busy_us for s in steps), 3) if steps else None))
    return rows
