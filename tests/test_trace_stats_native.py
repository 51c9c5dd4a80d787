"""The compiled loops of the trace statistics (hloscope/trace/_stats_native.c) against the Python code they speed up.

The Python code of hloscope/trace/stats.py is the reference: `add_all` must leave the accumulator exactly as
`for event in events: acc.add(event)` leaves it (every attribute, value and type, dict order, array contents byte for
byte), `dispatched_time` must give the value and type of `_dispatched_time`'s sum, `place` and `step_figures` what
`_place`'s and `_step_figures`' Python bodies give (`step_figures` on every placement compared), and `Checked` what
load.CheckedEvents' generator gives (the same event objects, `skipped`, the warning, the same exceptions). Every trace
of the fixtures and of tests/data is compared, then synthetic events for every case the compiled code must take or
hand back, random event lists and executions, an iterator that fails midway, and hostile direct calls (in a child
process, so that a crash fails one test, not the run)."""

from __future__ import annotations

import gc
import io
import json
import math
import os
import subprocess
import sys
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers import FIXTURES, fixtures_missing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hloscope.errors import InputError
from hloscope.trace import load, stats
from hloscope.trace.load import load_trace
from hloscope.trace.model import (
    ANNOTATION,
    CATEGORIES,
    COLLECTIVE,
    FLOW_CORRELATION_BASE,
    HOST_OP,
    KERNEL,
    MEMCPY,
    MEMORY,
    MEMSET,
    RUNTIME,
    SOURCE_HLO,
    SOURCE_NAMES,
    STEP,
    Event,
    EventStream,
    Trace,
)
from hloscope.trace.steps import StepWindow, step_windows

pytest.importorskip("hloscope.trace._stats_native", exc_type=ImportError,
                    reason="hloscope.trace._stats_native is not built here (no compiler): nothing to compare")
if stats._native is None:
    pytest.skip("stats._native is None (HLOSCOPE_PURE_PYTHON=1): the Python code does everything",
                allow_module_level=True)
NATIVE = stats._native
DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
TRACE_SUFFIXES = (".json", ".json.gz", ".xplane.pb")
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------------------------- both ways, compared


@contextmanager
def _python_only() -> Iterator[None]:
    """stats as it runs where the extension is not built: every function on its Python path (and the trace reader's
    event check, where a compiled twin of it is bound in load.py too)."""
    bound = [(module, name) for module, name in ((stats, "_native"), (load, "events_native")) if hasattr(module, name)]
    saved = [getattr(module, name) for module, name in bound]
    for module, name in bound:
        setattr(module, name, None)
    try:
        yield
    finally:
        for (module, name), value in zip(bound, saved):
            setattr(module, name, value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + "..."


def _difference(compiled: Any, python: Any, path: str) -> str | None:
    """Where the compiled result differs from the Python one, in value or in type, at any depth (None: nowhere).
    Floats are compared by repr (0.0 and -0.0 differ), arrays by typecode and bytes, dicts also by order."""
    if type(compiled) is not type(python):
        return f"{path}: {type(compiled).__name__} {_short(compiled)} != {type(python).__name__} {_short(python)}"
    if isinstance(compiled, array):
        if compiled.typecode != python.typecode:
            return f"{path}: typecode {compiled.typecode!r} != {python.typecode!r}"
        if compiled.tobytes() == python.tobytes():
            return None
        if len(compiled) != len(python):
            return f"{path}: {len(compiled)} items != {len(python)}: {_short(compiled)} != {_short(python)}"
        at = next(i for i in range(len(python)) if array(python.typecode, [compiled[i]]).tobytes() !=
                  array(python.typecode, [python[i]]).tobytes())
        return f"{path}[{at}]: {compiled[at]!r} != {python[at]!r}"
    if isinstance(compiled, dict):
        if len(compiled) != len(python):
            return (f"{path}: {len(compiled)} keys != {len(python)}; only compiled: "
                    f"{_short([k for k in compiled if k not in python])}, only Python: "
                    f"{_short([k for k in python if k not in compiled])}")
        for position, ((key, value), (python_key, python_value)) in enumerate(zip(compiled.items(), python.items())):
            found = (_difference(key, python_key, f"{path} key #{position}")
                     or _difference(value, python_value, f"{path}[{key!r}]"))
            if found:
                return found
        return None
    if isinstance(compiled, list | tuple):
        if len(compiled) != len(python):
            return f"{path}: {len(compiled)} items != {len(python)}: {_short(compiled)} != {_short(python)}"
        for index, (item, python_item) in enumerate(zip(compiled, python)):
            found = _difference(item, python_item, f"{path}[{index}]")
            if found:
                return found
        return None
    if isinstance(compiled, set | frozenset):
        typed, python_typed = {(type(x), x) for x in compiled}, {(type(x), x) for x in python}
        if typed != python_typed:
            return f"{path}: only compiled {_short(typed - python_typed)}, only Python {_short(python_typed - typed)}"
        return None
    if isinstance(compiled, float):
        return None if repr(compiled) == repr(python) else f"{path}: {compiled!r} != {python!r}"
    return None if compiled == python else f"{path}: {_short(compiled)} != {_short(python)}"


def _assert_same(compiled: Any, python: Any, what: str) -> None:
    found = _difference(compiled, python, what)
    if found is not None:
        pytest.fail(found)


def _assert_same_accumulator(compiled: stats._Accumulator, python: stats._Accumulator, what: str) -> None:
    assert type(compiled) is type(python), what
    assert list(vars(compiled)) == list(vars(python)), f"{what}: attributes {list(vars(compiled))}"
    found = [_difference(value, vars(python)[name], f"acc.{name}") for name, value in vars(compiled).items()]
    if any(found):  # every attribute that differs, each where it first does
        pytest.fail(f"{what}: " + "; ".join(difference for difference in found if difference))


def _error(error: BaseException | None) -> tuple[str, str] | None:
    return None if error is None else (type(error).__name__, str(error))


def _python_accumulator(events: Iterable[Any]) -> tuple[stats._Accumulator, BaseException | None]:
    """The reference: `add` for each event, in order; the exception that stopped it, if any."""
    acc = stats._Accumulator()
    try:
        for event in events:
            acc.add(event)
    except Exception as error:
        return acc, error
    return acc, None


def _compiled_accumulator(events: Iterable[Any]) -> tuple[stats._Accumulator, BaseException | None]:
    acc = stats._Accumulator()
    try:
        NATIVE.add_all(acc, events)
    except Exception as error:
        return acc, error
    return acc, None


def _compare_add_all(events: list[Any], what: str) -> stats._Accumulator:
    """add_all against the Python loop over the same events (errors too: type, message and the state they left);
    returns the Python accumulator."""
    python, python_error = _python_accumulator(events)
    compiled, compiled_error = _compiled_accumulator(events)
    assert _error(compiled_error) == _error(python_error), what
    _assert_same_accumulator(compiled, python, what)
    return python


def _windows_of(acc: stats._Accumulator) -> tuple[list[StepWindow], bool]:
    """The windows and host flag `_per_step` gives `_place` when markers exist."""
    host = step_windows(acc.host_markers)
    return host or step_windows(acc.device_markers), bool(host)


def _compare_dispatch(acc: stats._Accumulator, what: str) -> None:
    compiled = stats._dispatched_time(acc)
    direct = NATIVE.dispatched_time(acc.launch_corr, acc.launch_dur, acc.exec_corr)
    with _python_only():
        python = stats._dispatched_time(acc)
    _assert_same(compiled, python, f"{what}: dispatched_time")
    _assert_same(direct, python, f"{what}: dispatched_time (direct call)")


def _train_windows(acc: stats._Accumulator) -> list[StepWindow]:
    """The windows `_per_step` makes from the training-step program's executions when no marker exists."""
    if not acc.train_executions:
        return []
    _, (_, spans) = max(acc.train_executions.items(), key=lambda item: (len(item[1][1]), item[0]))
    return step_windows([(number, start, end) for number, (start, end) in enumerate(sorted(spans.values()))])


def _compare_step_figures(executions: Any, step_of_execution: array[int], steps: int, what: str) -> None:
    """`step_figures` (through `_step_figures` and called directly) against `_step_figures`' Python body, for the
    executions of `executions` (an accumulator or any object with its exec_* arrays): every figure with its type,
    floats by repr."""
    what = f"{what}: step_figures({steps} steps)"
    compiled = stats._step_figures(executions, step_of_execution, steps)
    direct = NATIVE.step_figures(executions.exec_start, executions.exec_end, step_of_execution,
                                 executions.exec_is_kernel, executions.exec_category, steps, len(stats.CATEGORIES),
                                 stats._COLLECTIVE_INDEX)
    with _python_only():
        python = stats._step_figures(executions, step_of_execution, steps)
    assert type(direct) is tuple and len(direct) == 2 and type(direct[0]) is list, (what, _short(direct))
    assert all(type(step) is tuple for step in direct[0]), (what, _short(direct))
    _assert_same(compiled, python, what)
    _assert_same(([stats._StepFigures(*step) for step in direct[0]], direct[1]), python, f"{what} (direct call)")


def _compare_place(acc: stats._Accumulator, windows: list[StepWindow], host_windows: bool, what: str) -> None:
    """place both ways, then step_figures both ways on the Python placement."""
    compiled = stats._place(acc, windows, host_windows)
    with _python_only():
        python = stats._place(acc, windows, host_windows)
    _assert_same(compiled, python, f"{what}: place({len(windows)} windows, host_windows={host_windows})")
    _compare_step_figures(acc, python[0], len(windows), f"{what}, {len(windows)} windows, host_windows={host_windows}")


def _compare_placements(acc: stats._Accumulator, what: str, more: Iterable[list[StepWindow]] = ()) -> None:
    """place (and step_figures on its placement) with the accumulator's own windows (as `_per_step` gives them, and
    with the other host flag; the training-step program's executions where no marker exists), with no window, and
    with any `more` windows, both flags."""
    windows, host = _windows_of(acc)
    cases = [([], True), ([], False)]
    if windows:
        cases += [(windows, host), (windows, not host)]
    elif train := _train_windows(acc):
        cases += [(train, False)]
    cases += [(extra, flag) for extra in more for flag in (True, False)]
    for case_windows, flag in cases:
        _compare_place(acc, case_windows, flag, what)


def _stats_outcome(trace: Trace) -> str:
    """trace_stats as JSON text (float reprs and int / float types show), or the error it raised."""
    try:
        return json.dumps(stats.trace_stats(trace), sort_keys=False)
    except Exception as error:
        return f"error {type(error).__name__}: {error}"


def _compare_trace_stats(events: list[Any], what: str) -> None:
    trace = Trace(file=what, format="kineto", events=events)
    compiled = _stats_outcome(trace)
    with _python_only():
        python = _stats_outcome(trace)
    assert compiled == python, what


def _compare_everything(events: list[Any], what: str, more: Iterable[list[StepWindow]] = ()) -> None:
    acc = _compare_add_all(events, what)
    _compare_dispatch(acc, what)
    _compare_placements(acc, what, more)
    _compare_trace_stats(events, what)


# ------------------------------------------------------------------------------------------- every trace file of the tests


def _trace_files() -> list[Path]:
    """Every Kineto / Chrome JSON and xplane.pb file of the real fixtures and of tests/data (tests/data/bad aside:
    files made to be refused; and run records, which are JSON but no traces)."""
    files: list[Path] = []
    for root in (FIXTURES, DATA):
        if root.is_dir():
            files += [path for path in sorted(root.rglob("*")) if path.is_file() and path.name.endswith(TRACE_SUFFIXES)
                      and BAD not in path.parents and not path.name.endswith(("run.json", "comparison.json"))]
    return files


def _file_id(path: Path) -> str:
    root, name = (FIXTURES, "fixtures") if FIXTURES in path.parents else (DATA, "data")
    return f"{name}/{path.relative_to(root)}"


@pytest.mark.parametrize("path", _trace_files(), ids=_file_id)
def test_every_trace_file_gives_the_same_statistics_both_ways(path):
    try:
        trace = load_trace(path)
        with _python_only():
            events = list(trace.events)
    except InputError as error:
        pytest.skip(f"not a trace hloscope reads: {error}")
    what = _file_id(path)
    _compare_everything(events, what)
    # trace_stats on the events both ways, and on the file itself (the reader's own iterable) compiled.
    listed = Trace(file=trace.file, format=trace.format, events=events, metadata=trace.metadata)
    with _python_only():
        python = _stats_outcome(listed)
    assert python.startswith("{"), python
    assert _stats_outcome(listed) == python, what
    assert _stats_outcome(load_trace(path)) == python, what


def test_the_files_compared_include_the_real_fixtures():
    if not FIXTURES.is_dir():
        fixtures_missing(f"real fixtures not found at {FIXTURES}")
    real = [path for path in _trace_files() if FIXTURES in path.parents]
    assert len(real) >= 10, real
    assert len(_trace_files()) >= len(real) + 8


# ----------------------------------------------------------------------------------------------------- synthetic events

GPU = "/device:GPU:0"
GPU1 = "/device:GPU:1"
HOST = "host"
CPU = "/host:CPU"
INT64 = 1 << 63


class PlainEvent(Event):
    """A subclass that changes nothing: handed back or taken, the same result."""


class LongerEnd(Event):
    """end_us is a property of Event; a subclass may compute it otherwise (`_note_train_execution` reads it)."""

    @property
    def end_us(self) -> float:
        return self.start_us + 2 * self.dur_us + 1


class DoubledDuration(Event):
    """A subclass whose dur_us is a property over Event's slot: only attribute access sees its value."""

    @property
    def dur_us(self) -> float:
        return 2 * Event.dur_us.__get__(self)

    @dur_us.setter
    def dur_us(self, value: float) -> None:
        Event.dur_us.__set__(self, value)


class Micro(float):
    """A float subclass: Python keeps the object itself where it stores a first duration (by_name, by_hlo_op)."""


class Count(int):
    """An int subclass (correlation ids, steps, durations)."""


class Name(str):
    """A str subclass, for names, processes, lanes and modules."""


def _event(name: str, start: Any, dur: Any, kind: str = KERNEL, device: bool = True, lane: str = "Stream #7",
           process: str = GPU, cls: type = Event, **fields: Any) -> Any:
    return cls(name, start, dur, kind, device, lane, process, **fields)


def _kernel(name: str, start: Any, dur: Any, correlation: Any = None, **fields: Any) -> Any:
    return _event(name, start, dur, correlation=correlation, **fields)


def _launch(start: Any, dur: Any, correlation: Any, name: str = "cudaLaunchKernel", **fields: Any) -> Any:
    fields.setdefault("device", False)
    fields.setdefault("lane", "thread 1")
    fields.setdefault("process", HOST)
    return _event(name, start, dur, RUNTIME, correlation=correlation, **fields)


def _marker(step: Any, start: Any, dur: Any, device: bool = False, lane: str = "thread 1") -> Any:
    return _event(f"ProfilerStep#{step}", start, dur, STEP, device, lane, GPU if device else HOST, step=step)


def _look_alike(**fields: Any) -> SimpleNamespace:
    """Not an Event: any object with Event's attributes (the Python loop reads attributes only)."""
    event = Event(**fields)
    values = {name: getattr(event, name) for name in Event.__slots__}
    return SimpleNamespace(**values, end_us=event.end_us, is_device_exec=event.is_device_exec)


def _int_times() -> list[Any]:
    """Integer times and durations: Python keeps an int where it stores a first duration, and sums int + int."""
    return [
        _marker(1, 0, 100), _marker(2, 100, 100),
        _launch(5, 2, 1), _kernel("gemm", 10, 5, 1), _kernel("gemm", 20, 7, 2), _launch(15, 3, 2),
        _kernel("gemm", 30.5, 2, None), _kernel("relu", 40, 0, 3), _launch(105, 1, 3),
        _kernel("Memcpy HtoD", 50, 4, 4, kind=MEMCPY, category=MEMORY), _launch(106, 2.5, 4, name="cudaMemcpyAsync"),
        _kernel("gemm", 120, 3, 5, hlo_op="dot.1", hlo_module="jit_step"),
        _kernel("gemm", 130, 2, 6, hlo_op="dot.1", hlo_module="jit_step"), _launch(125, 1, 5), _launch(126, 1, 6),
        _event("aten::mm", 8, 4, HOST_OP, False, "thread 1", HOST),
    ]


def _numeric_types() -> list[Any]:
    """bool, int and float subclasses where numbers go: Python stores the objects as they come."""
    return [
        _marker(True, 0, 50), _marker(Count(2), Micro(50.0), 50), _marker(1, 1, 10),
        _kernel("a", 1, True, 1), _launch(0.5, True, 1),
        _kernel("b", Micro(2.5), Micro(1.5), Count(2)), _launch(Micro(1.0), Micro(0.25), Count(2)),
        _kernel("c", Count(60), Count(3), 3, hlo_op="x.1", hlo_module="jit_train_step"), _launch(Count(55), Count(1), 3),
        _kernel("b", 70, 2.0, 4), _kernel("d", 80.0, Micro(0.5), 5, category=COLLECTIVE),
        _launch(75, 1.0, Count(4)), _launch(76, Micro(2.0), 5),
        _kernel("e", 90, -1.5, 6), _launch(88, -0.5, 6),
    ]


SPECIAL_CORRELATIONS = [
    -1, -7, 0, FLOW_CORRELATION_BASE - 1, FLOW_CORRELATION_BASE, FLOW_CORRELATION_BASE + 1, INT64 - 1, INT64,
    INT64 + 1, -INT64, -INT64 - 1, 1 << 64, Count(9),
]


def _correlations() -> list[Any]:
    """Correlation ids of every size: beyond 64 bits (no launch kept; the execution links nothing), -1 (the arrays'
    "none"), negative, at and above the XLA CPU flow base."""
    events: list[Any] = [_marker(1, 0, 1000), _marker(2, 1000, 1000)]
    for index, correlation in enumerate([None, *SPECIAL_CORRELATIONS]):
        events.append(_launch(10 * index + 1, 1 + index, correlation))
        events.append(_kernel(f"k{index % 3}", 10 * index + 1005, 2 + index / 4, correlation))
    events.append(_kernel("unlaunched", 500, 1, 12345))  # launched before the capture: early
    events.append(_kernel("unlaunched flow", 501, 1, FLOW_CORRELATION_BASE + 99))  # a flow: last step started
    events.append(_kernel("before everything", -50, 1, None))
    return events


def _xla_programs(markers: bool) -> list[Any]:
    """XLA ops with hlo_module: program executions on each lane (a repeated op starts a new one), the training-step
    program's spans on the first device that ran it (flow correlation ids join lanes), modules that are no training
    step, an empty module, an op named by its event name, and process + lane keys that collide as strings."""
    events: list[Any] = [_marker(1, 0, 40), _marker(2, 40, 60)] if markers else []
    for run in range(3):
        base = 100.0 * run
        flow = FLOW_CORRELATION_BASE + run
        events += [
            _kernel("fusion.1", base + 1, 2, flow, hlo_op="fusion.1", hlo_module="jit_train_step", lane="XLA Ops"),
            _kernel("fusion.2", base + 4, 3, flow, hlo_op="fusion.2", hlo_module="jit_train_step", lane="XLA Ops"),
            _kernel("fusion.3", base + 5, 9, flow, hlo_op="fusion.3", hlo_module="jit_train_step", lane="XLA Ops #2"),
            _kernel("dot", base + 8, 1, None, hlo_op=None, hlo_module="jit_train_step", lane="XLA Ops"),
            _kernel("dot", base + 9, 1, None, hlo_op="", hlo_module="jit_train_step", lane="XLA Ops #3"),
            _kernel("fusion.1", base + 3, 2, None, hlo_op="fusion.1", hlo_module="jit_train_step", process=GPU1),
            _kernel("copy.1", base + 2, 1, run, hlo_op="copy.1", hlo_module="TRAIN_loop", lane="bc", process="a"),
            _kernel("copy.2", base + 3, 1, run, hlo_op="copy.2", hlo_module="TRAIN_loop", lane="c", process="ab"),
            _kernel("copy.1", base + 6, 1, 1 << 64, hlo_op="copy.1", hlo_module="TRAIN_loop", lane="c", process="ab"),
            _kernel("reduce.5", base + 7, 2, None, hlo_op="reduce.5", hlo_module="jit_eval", category="reduction"),
            _kernel("reduce.5", base + 8, 2, None, hlo_op="reduce.5", hlo_module="", lane="XLA Ops"),
            _kernel("cpu op", base + 10, 1, flow, hlo_op="add.7", hlo_module="jit_train_step", process=CPU,
                    lane="XLA Ops", category_source=SOURCE_HLO),
            _launch(base + 0.5, 0.25, flow, name="ThreadpoolListener::StartRegion", process=CPU),
        ]
    return events


def _steps() -> list[Any]:
    """Host and device markers (a step marked on two threads: the earliest wins), markers without a step number,
    launches outside every step, executions before the first step and launched before the capture."""
    return [
        _marker(3, 200, 100), _marker(1, 10, 90), _marker(1, 5, 100, lane="thread 2"), _marker(2, 100, 80),
        _marker(None, 0, 1000), _marker(None, 0, 1000, device=True),
        _marker(7, 0, 150, device=True), _marker(8, 150, 150, device=True),
        _launch(1, 1, 1), _launch(12, 1, 2), _launch(190, 5, 3), _launch(250, 2, 4), _launch(400, 1, 5),
        _launch(13, 1, 6, name="cudaDeviceSynchronize"),
        _kernel("k", 2, 1, 1), _kernel("k", 20, 1, 2), _kernel("k", 195, 1, 3), _kernel("k", 260, 1, 4),
        _kernel("k", 410, 1, 5), _kernel("k", 3, 1, 0), _kernel("k", 4, 1, None), _kernel("k", -10, 1, None),
        _kernel("k", 1, 1, FLOW_CORRELATION_BASE + 5), _kernel("late", 600, 1, 6000),
    ]


def _collectives() -> list[Any]:
    """Collectives (names repeated, a copy among them, one out of start order, one on the host: no execution), with
    overlapping compute for the exposed time."""
    return [
        _marker(1, 0, 100), _marker(2, 100, 100),
        _kernel("ncclAllReduce", 10, 20, 1, category=COLLECTIVE), _launch(5, 1, 1, name="ncclAllReduce"),
        _kernel("gemm", 15, 10, 2), _launch(6, 1, 2),
        _kernel("ncclAllGather", 40, 5, 3, category=COLLECTIVE, lane="Stream #9"), _launch(7, 1, 3),
        _kernel("ncclAllReduce", 110, 20, 4, category=COLLECTIVE), _launch(105, 1, 4),
        _kernel("ncclAllReduce", 90, 5, 5, category=COLLECTIVE, lane="Stream #9"), _launch(8, 1, 5),
        _kernel("Memcpy PtoP", 120, 5, 6, kind=MEMCPY, category=COLLECTIVE), _launch(106, 1, 6),
        _event("gloo:all_reduce", 30, 5, KERNEL, False, "thread 1", HOST, category=COLLECTIVE),
        _event("ncclAllReduce", 130, 5, HOST_OP, True, "Stream #7", GPU, category=COLLECTIVE),
    ]


def _copies_and_runtime() -> list[Any]:
    """Copies and sets on and off the device, runtime calls on host and device, host ops, annotations, an unknown
    kind."""
    return [
        _marker(1, 0, 100),
        _kernel("Memcpy HtoD", 1, 2, 1, kind=MEMCPY, category=MEMORY), _launch(0, 1, 1, name="cudaMemcpyAsync"),
        _kernel("Memset", 3, 2, 2, kind=MEMSET, category=MEMORY), _launch(0.5, 1, 2, name="cudaMemsetAsync"),
        _kernel("Memcpy DtoH", 5, 2, 3, kind=MEMCPY, category=MEMORY, device=False),
        _kernel("Memset", 7, 2, 4, kind=MEMSET, category=MEMORY, device=False),
        _launch(8, 3, None), _launch(9, 4, 7, device=True), _launch(10, 5, None, device=True),
        _launch(11, 1, 3, name="cudaStreamSynchronize"),
        _event("aten::add", 12, 3, HOST_OP, False, "thread 1", HOST, correlation=1),
        _event("region", 13, 30, ANNOTATION, True, "XLA Modules", GPU),
        _event("mystery", 14, 1, "mystery", True, "Stream #7", GPU, correlation=2),
        _event("k", 15, 1, KERNEL, False, "thread 1", HOST, correlation=2),
    ]


def _subclasses_and_look_alikes() -> list[Any]:
    """Event subclasses (one overriding end_us, one dur_us) and an object that only has Event's attributes."""
    return [
        _marker(1, 0, 100),
        _kernel("plain", 1, 2, 1, cls=PlainEvent), _launch(0.5, 1, 1, cls=PlainEvent),
        _kernel("longer", 3, 2, FLOW_CORRELATION_BASE, hlo_op="f.1", hlo_module="jit_train_step", cls=LongerEnd),
        _kernel("longer", 6, 2, FLOW_CORRELATION_BASE, hlo_op="f.2", hlo_module="jit_train_step", cls=LongerEnd,
                lane="XLA Ops"),
        _kernel("doubled", 9, 2, 2, cls=DoubledDuration, category=COLLECTIVE, hlo_op="d.1", hlo_module="m"),
        _launch(1, 3, 2, cls=DoubledDuration), _marker(2, 100, 10), _event("s", 100, 5, STEP, False, "t", HOST,
                                                                          step=3, cls=DoubledDuration),
        _look_alike(name="alike", start_us=20, dur_us=1.5, kind=KERNEL, device=True, lane="Stream #1", process=GPU,
                    correlation=3, hlo_op="a.1", hlo_module="jit_train_step", category=COLLECTIVE),
        _look_alike(name="cudaLaunchKernel", start_us=19, dur_us=0.5, kind=RUNTIME, device=False, lane="t",
                    process=HOST, correlation=3),
        _look_alike(name="ProfilerStep#4", start_us=200, dur_us=10, kind=STEP, device=False, lane="t", process=HOST,
                    step=4),
    ]


def _duplicate_correlations() -> list[Any]:
    """The same correlation id on several launches, in and out of steps: the first kept in a run is the one found."""
    return [
        _marker(1, 0, 100), _marker(2, 100, 100),
        _launch(150, 1, 7), _launch(10, 2, 7), _launch(300, 4, 7), _launch(20, 1, 8), _launch(120, 1, 8),
        _launch(30, 1, 3), _launch(130, 1, 3), _launch(140, 1, 3),
        _kernel("k", 200, 1, 7), _kernel("k", 201, 1, 7), _kernel("k", 202, 1, 8), _kernel("k", 203, 1, 3),
    ]


def _many_runs(runs: int = 40) -> list[Any]:
    """Launches whose ids decrease: each starts a run of its own, and past 32 runs they go to `_LaunchSteps._others`
    (where a repeated id keeps the last launch's step), some outside every step."""
    events: list[Any] = [_marker(1, 0, 100), _marker(2, 100, 100)]
    for index in range(runs):
        correlation = 1000 - index
        start = 250.0 + index if index % 7 == 3 else 5.0 * index
        events.append(_launch(start, 0.5 + index % 3, correlation))
        events.append(_kernel(f"k{index % 4}", 400 + index, 1, correlation))
    events += [_launch(60, 1, 961), _launch(160, 1, 962), _launch(199, 1, 999), _kernel("again", 500, 1, 961),
               _kernel("again", 501, 1, 962), _kernel("missing", 502, 1, 10)]
    return events


def _sources() -> list[Any]:
    """category_source SOURCE_HLO, SOURCE_NAMES and one no reader writes (Python adds it to source_time)."""
    return [
        _kernel("a", 1, 2, None, category_source=SOURCE_HLO, category="matmul/conv"),
        _kernel("b", 2, 3, None, category_source=SOURCE_NAMES),
        _kernel("c", 3, 4, None, category_source="custom", category="copy/transpose"),
        _kernel("a", 4, 5, None, category_source=SOURCE_HLO, category="fusion/elementwise"),
    ]


def _str_subclasses() -> list[Any]:
    """str subclasses for names, processes, lanes, ops and modules (the objects are stored as they come)."""
    return [
        _kernel(Name("gemm"), 1, 2, None, process=Name(GPU), lane=Name("Stream #7")), _kernel("gemm", 3, 2, None),
        _kernel("relu", 5, 1, None, hlo_op=Name("r.1"), hlo_module=Name("jit_train_step")),
        _kernel(Name("relu"), 6, 1, None, hlo_op="r.1", hlo_module="jit_train_step", category=COLLECTIVE),
        _kernel(Name("ncclAllReduce"), 8, 1, None, category=COLLECTIVE),
        _marker(1, 0, 10), _launch(0.5, 1, Count(1), name=Name("cudaLaunchKernel")),
    ]


def _host_only() -> list[Any]:
    """No device work: the host ops table of a CPU run."""
    return [
        _marker(1, 0, 100), _marker(2, 100, 100), _marker(3, 200, 100),
        *[_event(f"aten::op{i % 5}", 10.0 * i, 3 + i % 4, HOST_OP, False, "thread 1", HOST) for i in range(30)],
        _event("gloo:all_reduce", 50, 20, HOST_OP, False, "thread 2", HOST, category=COLLECTIVE),
        _launch(5, 1, None, name="cudaDeviceSynchronize"),
    ]


SCENARIOS: dict[str, Callable[[], list[Any]]] = {
    "empty": list,
    "int times": _int_times,
    "numeric types": _numeric_types,
    "correlations": _correlations,
    "xla programs, no markers": lambda: _xla_programs(False),
    "xla programs, markers": lambda: _xla_programs(True),
    "steps": _steps,
    "collectives": _collectives,
    "copies and runtime": _copies_and_runtime,
    "subclasses and look-alikes": _subclasses_and_look_alikes,
    "duplicate correlations": _duplicate_correlations,
    "many runs": _many_runs,
    "sources": _sources,
    "str subclasses": _str_subclasses,
    "host only": _host_only,
}


def _everything() -> list[Any]:
    return [event for make in SCENARIOS.values() for event in make()]


# Windows of no marker: overlapping, touching, a zero-length one, far out.
OTHER_WINDOWS = [
    [StepWindow(0, 0.0, 50.0), StepWindow(1, 25.0, 120.0), StepWindow(2, 120.0, 120.0), StepWindow(3, 300.0, 310.0)],
    [StepWindow(5, -100.0, 1e9)],
]


@pytest.mark.parametrize("name", [*SCENARIOS, "everything"])
def test_synthetic_events_give_the_same_results_both_ways(name):
    events = _everything() if name == "everything" else SCENARIOS[name]()
    _compare_everything(events, name, OTHER_WINDOWS)


def test_the_synthetic_cases_reach_what_they_are_for():
    """The scenarios exercise the paths they name (checked on the Python reference)."""
    runs = stats._Accumulator()
    for event in _many_runs():
        runs.add(event)
    windows, _ = _windows_of(runs)
    launches = stats._LaunchSteps(runs, stats.StepLocator(windows), len(windows))
    assert len(launches._runs) == stats._LaunchSteps.MAX_RUNS and launches._others
    xla = stats._Accumulator()
    for event in _xla_programs(False):
        xla.add(event)
    assert set(xla.train_executions) == {"jit_train_step", "TRAIN_loop"}
    assert any(isinstance(key, int) for _, spans in xla.train_executions.values() for key in spans)
    with _python_only():
        result = stats.trace_stats(Trace("x", "xplane", _xla_programs(False)))
        assert result["step_source"] == "executions of jit_train_step" and result["steps"] >= 3
        steps = stats.trace_stats(Trace("x", "kineto", _steps()))
        assert steps["before_window"]["executions"] >= 2 and steps["steps"] == 3
        assert stats.trace_stats(Trace("x", "kineto", _host_only()))["host_ops"]


# ------------------------------------------------------------------------------------------------ random event lists

_NAMES = ["gemm", "relu", "ncclAllReduce", "Memcpy HtoD", "fusion.1", ""]
_PROCESSES = [GPU, GPU1, HOST, CPU]
_LANES = ["Stream #7", "Stream #9", "XLA Ops", "thread 1"]
_KINDS = [KERNEL, KERNEL, KERNEL, MEMCPY, MEMSET, RUNTIME, RUNTIME, RUNTIME, HOST_OP, ANNOTATION, STEP, STEP]
_CLASSES = [Event] * 12 + [PlainEvent, LongerEnd, DoubledDuration]
_times = st.one_of(st.integers(-5, 600), st.floats(-5, 600, allow_nan=False), st.just(Micro(33.25)))
_durations = st.one_of(st.integers(0, 120), st.floats(0, 120, allow_nan=False),
                       st.sampled_from([True, False, -2.5, Micro(1.75), Count(4), 1e-300]))
_correlations = st.one_of(st.none(), st.integers(0, 30), st.sampled_from(SPECIAL_CORRELATIONS))


@st.composite
def _random_event(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(_KINDS))
    fields = {
        "name": draw(st.sampled_from(_NAMES)), "start_us": draw(_times), "dur_us": draw(_durations), "kind": kind,
        "device": draw(st.sampled_from([True, True, True, False, False, 1, 0])), "lane": draw(st.sampled_from(_LANES)),
        "process": draw(st.sampled_from(_PROCESSES)),
        "category": draw(st.sampled_from([*CATEGORIES, COLLECTIVE, COLLECTIVE])),
        "step": draw(st.one_of(st.none(), st.integers(0, 6), st.sampled_from([1 << 70, -3]))) if kind == STEP else None,
        "hlo_op": draw(st.sampled_from([None, None, "fusion.1", "fusion.2", "dot.3", ""])),
        "hlo_module": draw(st.sampled_from([None, None, "jit_train_step", "jit_eval", "Train", ""])),
        "correlation": draw(_correlations),
        "category_source": draw(st.sampled_from([SOURCE_NAMES, SOURCE_NAMES, SOURCE_HLO, "custom"])),
    }
    if draw(st.integers(0, 20)) == 0:
        return _look_alike(**fields)
    return draw(st.sampled_from(_CLASSES))(**fields)


@st.composite
def _event_lists(draw: st.DrawFn) -> list[Any]:
    size = draw(st.integers(0, 80))  # hypothesis's own list sizes are mostly a handful
    events = draw(st.lists(_random_event(), min_size=size, max_size=size))
    if draw(st.integers(0, 5)) == 0:  # a block of decreasing launch ids: more than 32 runs
        block = _many_runs(draw(st.integers(30, 40)))
        at = draw(st.integers(0, len(events)))
        events[at:at] = block
    return events


_markers = st.lists(st.tuples(st.integers(0, 8), st.floats(-5, 600, allow_nan=False), st.floats(0, 150)), max_size=6)


@FAST
@given(events=_event_lists(), markers=_markers)
def test_random_event_lists_give_the_same_results_both_ways(events, markers):
    _compare_everything(events, "random events", [step_windows(markers)])


# ------------------------------------------------------------------------------------------- errors and the iteration


def _failing(events: list[Any], pulled: list[int], fail_after: int | None) -> Iterator[Any]:
    """The events (counting those asked for), then ValueError after `fail_after` of them."""
    for index, event in enumerate(events):
        if index == fail_after:
            raise ValueError(f"the reader failed after {fail_after} events")
        pulled.append(index)
        yield event


@pytest.mark.parametrize("fail_after", [None, 0, 1, 7, 40])
def test_an_error_of_the_events_iterator_ends_add_all_with_the_events_before_it_added(fail_after):
    """The exception comes out of add_all, and the accumulator holds exactly the events read before it (as the Python
    loop leaves it: `add` is per event); no event is asked for ahead of the Python loop."""
    events = _everything()
    python = stats._Accumulator()
    python_pulled: list[int] = []
    with pytest.raises(ValueError, match="the reader failed") if fail_after is not None else _nothing():
        for event in _failing(events, python_pulled, fail_after):
            python.add(event)
    compiled = stats._Accumulator()
    compiled_pulled: list[int] = []
    iterator = _failing(events, compiled_pulled, fail_after)
    with pytest.raises(ValueError, match="the reader failed") if fail_after is not None else _nothing():
        NATIVE.add_all(compiled, iterator)
    assert compiled_pulled == python_pulled
    assert next(iterator, "exhausted") == "exhausted"
    assert compiled.events == (len(events) if fail_after is None else fail_after)
    _assert_same_accumulator(compiled, python, f"fail after {fail_after}")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


class _NotHashable:
    __hash__ = None


# Events whose `add` raises midway (after counting it, and some totals): the exception, and the state it leaves, must
# be the Python loop's.
FAILING_EVENTS = {
    "unknown category": _kernel("k", 1, 2, 1, category="no such category"),
    "None duration": _kernel("k", 1, None, 1),
    "str duration": _kernel("k", 1, "2", 1),
    "None start": _kernel("k", None, 2, 1),
    "unhashable name": _kernel(["k"], 1, 2, 1),
    "unhashable module": _kernel("k", 1, 2, 1, hlo_op="f.1", hlo_module=["m"]),
    "unhashable process": _kernel("k", 1, 2, 1, process=_NotHashable()),
    "float correlation": _kernel("k", 1, 2, 1.5),
    "str correlation on a launch": _launch(1, 2, "7"),
    "None runtime duration": _launch(1, None, 7),
    "None step end": _marker(1, 1, None),
    "module that is no str": _kernel("k", 1, 2, 1, hlo_op="f.1", hlo_module=5),
    "not an event": 5,
    "None": None,
}


@pytest.mark.parametrize("name", list(FAILING_EVENTS))
def test_an_event_that_add_refuses_leaves_the_state_the_python_loop_leaves(name):
    good = _everything()
    events = [*good[:20], FAILING_EVENTS[name], *good[20:]]
    python, python_error = _python_accumulator(events)
    assert python_error is not None and python.events == 21
    compiled, compiled_error = _compiled_accumulator(events)
    assert _error(compiled_error) == _error(python_error), name
    _assert_same_accumulator(compiled, python, name)


def test_add_all_takes_any_iterable():
    events = _everything()
    python, _ = _python_accumulator(events)
    for iterable in (tuple(events), iter(events), (event for event in events), EventStream(lambda: iter(events))):
        compiled, error = _compiled_accumulator(iterable)
        assert error is None
        _assert_same_accumulator(compiled, python, type(iterable).__name__)
    # the method of the accumulator uses the compiled loop where it is built
    method = stats._Accumulator()
    method.add_all(events)
    _assert_same_accumulator(method, python, "_Accumulator.add_all")


def test_add_all_continues_an_accumulator_already_filled():
    events = _everything()
    python, _ = _python_accumulator(events + events)
    compiled = stats._Accumulator()
    for event in events:
        compiled.add(event)
    NATIVE.add_all(compiled, events)
    _assert_same_accumulator(compiled, python, "second pass")


# ------------------------------------------------------------------------------- the check of event times (Checked)

NAN, INF = float("nan"), float("inf")
MAX_EVENT_US, MAX_TIME_US = load.MAX_EVENT_US, load.MAX_TIME_US
# Durations and starts at and around every bound of load._possible, of every numeric type a reader or a caller gives.
CHECK_DURATIONS = [
    NAN, INF, -INF, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.5, MAX_EVENT_US, math.nextafter(MAX_EVENT_US, INF),
    math.nextafter(MAX_EVENT_US, 0.0), 0, 1, -1, 86_400_000_000, 86_400_000_001, True, False, Micro(2.0), Micro(-1.0),
    Micro(NAN), Micro(MAX_EVENT_US), Count(3), 10**400, -(10**400),
]
CHECK_STARTS = [
    NAN, INF, -INF, 0.0, -0.0, 1.0, MAX_TIME_US, -MAX_TIME_US, math.nextafter(MAX_TIME_US, INF),
    math.nextafter(-MAX_TIME_US, -INF), math.nextafter(MAX_TIME_US, 0.0), 10**17, 10**17 + 1, -(10**17),
    -(10**17) - 1, 0, True, False, Micro(5.0), Micro(1e18), Micro(-0.0), Count(-7), -(10**400),
]


def _checked_run(make_events: Callable[[], Iterable[Any]], native: bool, path: str = "checked.trace.json",
                 fresh: bool = True, failing_finish: bool = False) -> dict[str, Any]:
    """One pass of the event check over make_events(), compiled (`Checked`) or Python (`CheckedEvents._checked`): the
    objects it yields, the exception that ended it, what next() gives afterwards, `skipped`, each call of `_finish`
    and what was written on stderr (`fresh`: the path's warning not given yet)."""
    checked = load.CheckedEvents(Path(path), make_events())
    finished: list[int] = []
    finish = checked._finish

    def noted_finish(skipped: int) -> None:
        finished.append(skipped)
        if failing_finish:
            raise RuntimeError(f"finish failed after {skipped} skipped")
        finish(skipped)

    checked._finish = noted_finish
    if fresh:
        load._warned.discard(str(checked.path))
    stderr = io.StringIO()
    yielded: list[Any] = []
    error = iterator = None
    after: Any = "StopIteration"  # an iterator never made has nothing more to give either
    with redirect_stderr(stderr):
        try:
            iterator = (NATIVE.Checked(checked._events, load._possible, checked._finish, MAX_EVENT_US, MAX_TIME_US)
                        if native else checked._checked())
            for event in iterator:
                yielded.append(event)
        except Exception as caught:
            error = caught
        if iterator is not None:
            try:
                after = f"yielded {next(iterator)!r}"
            except StopIteration:
                after = "StopIteration"
            except Exception as caught:
                after = _error(caught)
    return {"yielded": yielded, "error": _error(error), "after": after, "skipped": checked.skipped,
            "finished": finished, "stderr": stderr.getvalue()}


def _compare_checked(make_events: Callable[[], Iterable[Any]], what: str, **options: Any) -> dict[str, Any]:
    """`Checked` against `CheckedEvents._checked` on fresh events from make_events(): the same objects in the same
    order, and everything else _checked_run notes; returns the Python outcome."""
    python = _checked_run(make_events, False, **options)
    compiled = _checked_run(make_events, True, **options)
    same = len(compiled["yielded"]) == len(python["yielded"]) and all(
        a is b for a, b in zip(compiled["yielded"], python["yielded"]))
    assert same, (f"{what}: compiled yields {_short(compiled['yielded'])}, Python {_short(python['yielded'])}")
    for key in ("error", "after", "skipped", "finished", "stderr"):
        assert compiled[key] == python[key], f"{what}: {key}: compiled {compiled[key]!r}, Python {python[key]!r}"
    return python


def _timed(start: Any, dur: Any, cls: type = Event) -> Any:
    if cls is SimpleNamespace:  # not an Event: only the two attributes the check reads
        return SimpleNamespace(start_us=start, dur_us=dur)
    return cls("k", start, dur, KERNEL, True, "Stream #7", GPU)


@pytest.mark.parametrize("cls", [Event, PlainEvent, SimpleNamespace], ids=["Event", "subclass", "look-alike"])
def test_checked_keeps_the_events_the_python_check_keeps(cls):
    """Every duration against a finite start and every start against a finite duration (NaN, infinities, negative,
    -0.0, 0, the bounds and the next doubles beyond them, ints, bools, float subclasses, ints beyond any double)."""
    events = [_timed(1.0, dur, cls) for dur in CHECK_DURATIONS] + [_timed(start, 2.0, cls) for start in CHECK_STARTS]
    events += [_timed(start, dur, cls) for start in CHECK_STARTS[::3] for dur in CHECK_DURATIONS[::2]]
    python = _compare_checked(lambda: events, f"{cls.__name__} events")
    assert 0 < python["skipped"] < len(events) and "impossible times" in python["stderr"]
    for dur in CHECK_DURATIONS:  # one event a list: what is kept is exactly load._possible's answer
        for start in (0.0, -0.0, 0, MAX_TIME_US):
            event = _timed(start, dur, cls)
            kept = _compare_checked(lambda event=event: [event], f"{cls.__name__}({start!r}, {dur!r})")["yielded"]
            assert (kept == [event]) is load._possible(event)


def test_checked_is_what_checked_events_iterates_where_built():
    events = [_timed(1.0, 2.0), _timed(1.0, -2.0), _timed(NAN, 1.0), _timed(3.0, 4.0)]
    checked = load.CheckedEvents(Path("iterated.json"), events)
    iterator = iter(checked)
    assert type(iterator) is NATIVE.Checked and iter(iterator) is iterator
    load._warned.discard("iterated.json")
    with redirect_stderr(io.StringIO()) as stderr:
        assert list(iterator) == [events[0], events[3]]
    assert checked.skipped == 2 and "iterated.json: 2 event(s) with impossible times" in stderr.getvalue()
    with _python_only():
        load._warned.discard("iterated.json")
        python = load.CheckedEvents(Path("iterated.json"), events)
        with redirect_stderr(io.StringIO()) as python_stderr:
            assert list(python) == [events[0], events[3]]
    assert python.skipped == 2 and python_stderr.getvalue() == stderr.getvalue()


def test_checked_warns_once_per_path_both_ways():
    """No warning when nothing is skipped (skipped set to 0); one warning per path, not per pass (load._warned)."""
    good = [_timed(1.0, 1.0)]
    bad = [_timed(1.0, 1.0), _timed(1.0, -1.0)]
    for native in (False, True):
        first = _checked_run(lambda: good, native, "once-a.json")
        assert first["stderr"] == "" and first["skipped"] == 0 and first["finished"] == [0], (native, first)
        first = _checked_run(lambda: bad, native, "once-b.json")
        again = _checked_run(lambda: bad, native, "once-b.json", fresh=False)
        other = _checked_run(lambda: bad, native, "once-c.json", fresh=False)
        assert first["stderr"].count("warning") == 1 and "once-b.json: 1 event(s)" in first["stderr"], (native, first)
        assert again["stderr"] == "" and again["skipped"] == 1 and again["finished"] == [1], (native, again)
        assert "once-c.json" in other["stderr"], (native, other)
        load._warned.discard("once-c.json")
    _compare_checked(lambda: bad, "second pass, warned before", path="once-b.json", fresh=False)


class _Unreadable:
    """An event whose start cannot be read (a property that fails with no AttributeError)."""

    dur_us = 1.0

    @property
    def start_us(self) -> float:
        raise RuntimeError("start_us cannot be read")


class _Falsy:
    def __bool__(self) -> bool:
        raise ValueError("the truth of this answer is ambiguous")


# Objects the check cannot judge: the exception of load._possible, raised at the same place both ways.
UNJUDGED = {
    "object()": object(),
    "None": None,
    "an int": 5,
    "no dur_us": SimpleNamespace(start_us=1.0),
    "no start_us": SimpleNamespace(dur_us=1.0),
    "start_us that raises": _Unreadable(),
    "str duration": _timed(1.0, "2"),
    "None duration": _timed(1.0, None),
    "None start": _timed(None, 1.0),
    "complex start": _timed(1j, 1.0),
    "unset slots, subclass": PlainEvent.__new__(PlainEvent),
}


@pytest.mark.parametrize("name", list(UNJUDGED))
@pytest.mark.parametrize("at", [0, 3])
def test_checked_raises_what_the_python_check_raises_on_an_object_it_cannot_judge(name, at):
    good = [_timed(1.0, 1.0), _timed(-1.0, 1.0), _timed(2.0, -1.0), _timed(4.0, 0.0)]
    events = [*good[:at], UNJUDGED[name], *good[at:]]
    python = _compare_checked(lambda: events, name)
    assert python["error"] is not None and python["finished"] == []


def test_checked_raises_what_an_answer_of_possible_raises(monkeypatch):
    """load._possible answering with no bool (1, "", None, [0]), or with an object whose truth fails."""
    answers = [True, 1, "", None, [0], _Falsy(), True]
    monkeypatch.setattr(load, "_possible", lambda event: answers[int(event.start_us)])
    events = [_timed(float(i), 1.0, PlainEvent) for i in range(len(answers))]
    python = _compare_checked(lambda: events[:5], "answers of every truth")
    assert len(python["yielded"]) == 3 and python["skipped"] == 2
    python = _compare_checked(lambda: events, "an answer whose truth fails")
    assert python["error"] == ("ValueError", "the truth of this answer is ambiguous") and len(python["yielded"]) == 3


@pytest.mark.parametrize("fail_after", [0, 1, 3, 5])
def test_an_error_of_the_events_iterator_ends_checked_as_it_ends_the_python_check(fail_after):
    """The exception comes out of the iteration, no event is asked for ahead of the Python generator, finish is not
    called, and both iterators are finished afterwards (next(): StopIteration)."""
    events = [_timed(float(i), -1.0 if i % 3 == 1 else 1.0) for i in range(6)]
    pulled: dict[bool, list[int]] = {False: [], True: []}
    outcomes = {}
    for native in (False, True):
        outcomes[native] = _checked_run(lambda native=native: _failing(events, pulled[native], fail_after), native)
    python, compiled = outcomes[False], outcomes[True]
    assert python["error"] == ("ValueError", f"the reader failed after {fail_after} events")
    assert python["after"] == "StopIteration" and python["finished"] == []
    assert compiled["yielded"] == python["yielded"] and pulled[True] == pulled[False]
    for key in ("error", "after", "skipped", "finished", "stderr"):
        assert compiled[key] == python[key], (key, compiled[key], python[key])
    _compare_checked(lambda: _failing(events, [], None), "no failure")


@pytest.mark.parametrize("events", [[], [_timed(1.0, 1.0)], [_timed(1.0, -1.0)], [_timed(1.0, 1.0), _timed(NAN, 1.0)]],
                         ids=["none", "kept", "skipped", "both"])
def test_a_failing_finish_ends_checked_as_it_ends_the_python_check(events):
    python = _compare_checked(lambda: events, "failing finish", failing_finish=True)
    assert python["error"] is not None and python["error"][0] == "RuntimeError" and python["after"] == "StopIteration"


def test_checked_takes_any_iterable_and_refuses_what_is_not_one():
    events = [_timed(1.0, 1.0), _timed(1.0, -1.0), _timed(2.0, 1.0)]
    for make in (lambda: tuple(events), lambda: iter(events), lambda: (e for e in events),
                 lambda: EventStream(lambda: iter(events)), lambda: load.CheckedEvents(Path("inner"), events)):
        load._warned.add("inner")  # the inner check warns once, in neither pass
        _compare_checked(make, type(make()).__name__)
    load._warned.discard("inner")
    for not_iterable in (5, None, object()):
        python = _compare_checked(lambda not_iterable=not_iterable: not_iterable, repr(not_iterable))
        assert python["error"][0] == "TypeError"


_check_values = st.one_of(
    st.sampled_from(CHECK_DURATIONS + CHECK_STARTS),
    st.floats(),
    st.floats(-2 * MAX_EVENT_US, 2 * MAX_EVENT_US),
    st.integers(-(10**18), 10**18),
)


@st.composite
def _checked_events(draw: st.DrawFn) -> list[Any]:
    events = [_timed(draw(_check_values), draw(_check_values),
                     draw(st.sampled_from([Event, Event, Event, PlainEvent, SimpleNamespace])))
              for _ in range(draw(st.integers(0, 30)))]
    if draw(st.integers(0, 9)) == 0:
        events.insert(draw(st.integers(0, len(events))), draw(st.sampled_from(list(UNJUDGED.values()))))
    return events


@settings(max_examples=120, deadline=None)
@given(events=_checked_events(), fail_after=st.one_of(st.none(), st.integers(0, 30)))
def test_random_event_lists_are_checked_the_same_both_ways(events, fail_after):
    _compare_checked(lambda: _failing(events, [], fail_after), "random events")


class _Holder:
    """Something reachable only through a cycle that runs through the Checked iterator."""


def test_a_reference_cycle_through_checked_is_collected():
    """Checked is known to the garbage collector: a cycle through its finish (the CheckedEvents' bound method, with
    the iterator kept on the CheckedEvents) or through its events (an event that holds the iterator) is freed, whether
    the iteration has started, finished or not begun."""
    assert gc.is_tracked(NATIVE.Checked([], load._possible, print, MAX_EVENT_US, MAX_TIME_US))
    for consumed in (0, 1, 3):
        checked = load.CheckedEvents(Path("cycle.json"), [_timed(1.0, 1.0), _timed(2.0, 1.0)])
        iterator = iter(checked)
        assert type(iterator) is NATIVE.Checked
        with redirect_stderr(io.StringIO()):
            for _ in zip(range(consumed), iterator):
                pass
        checked.iterator = iterator
        gone = weakref.ref(checked)
        del checked, iterator
        gc.collect()
        assert gone() is None, f"a cycle through finish, {consumed} events read: not collected"

        holder = _Holder()
        events = [_timed(1.0, 1.0), holder, _timed(2.0, 1.0)]
        holder.start_us, holder.dur_us = 1.0, 1.0
        holder.iterator = NATIVE.Checked(events, load._possible, _Holder, MAX_EVENT_US, MAX_TIME_US)
        for _ in zip(range(consumed), holder.iterator):
            pass
        gone = weakref.ref(holder)
        del holder, events
        gc.collect()
        assert gone() is None, f"a cycle through the events, {consumed} events read: not collected"


# ----------------------------------------------------------------------------------- each step's figures, directly

_STEP_TIMES = [-0.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.5, 3.0, 3.0, 5.0, 7.5, 10.0]


@st.composite
def _step_executions(draw: st.DrawFn) -> tuple[SimpleNamespace, array[int], int]:
    """Executions of a few steps: many ties (times from a short list, or repeated), nested and identical intervals,
    zero-length ones, -0.0, now and then infinite ends or a negative length; steps -1 (none) and -2 (early), steps
    with no execution, every category, is_kernel beyond 0 / 1 now and then."""
    steps = draw(st.integers(0, 5))
    size = draw(st.integers(0, 40))
    categories = len(CATEGORIES)
    executions = SimpleNamespace(exec_start=array("d"), exec_end=array("d"), exec_is_kernel=array("b"),
                                 exec_category=array("b"))
    step_of = array("i")
    time = st.one_of(st.sampled_from(_STEP_TIMES), st.floats(-5, 15, allow_nan=False, allow_infinity=False))
    for _ in range(size):
        shape = draw(st.sampled_from(["length", "length", "until", "zero", "again", "again", "odd"]))
        start = draw(time)
        if shape == "length":
            end = start + draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 2.5, 4.0, 10.0]))
        elif shape == "until":
            end = max(start, draw(time))
        elif shape == "zero":
            end = start if draw(st.booleans()) else -0.0 if start == 0 else start
        elif shape == "again" and executions.exec_start:
            at = draw(st.integers(0, len(executions.exec_start) - 1))
            start, end = executions.exec_start[at], executions.exec_end[at]
        else:
            end = draw(st.sampled_from([INF, start - 1.0, start + 1e-9, start])) if shape == "odd" else start + 1.0
            if shape == "odd" and draw(st.booleans()):
                start = -INF
        executions.exec_start.append(start)
        executions.exec_end.append(end)
        step_of.append(draw(st.sampled_from([-2, -1, *range(steps), *range(steps), *range(steps)])))
        executions.exec_is_kernel.append(draw(st.sampled_from([1, 1, 1, 0, 0, 2, -1])))
        executions.exec_category.append(draw(st.one_of(st.just(stats._COLLECTIVE_INDEX),
                                                       st.integers(0, categories - 1))))
    return executions, step_of, steps


@contextmanager
def _collective_index(index: int) -> Iterator[None]:
    saved = stats._COLLECTIVE_INDEX
    stats._COLLECTIVE_INDEX = index
    try:
        yield
    finally:
        stats._COLLECTIVE_INDEX = saved


@settings(max_examples=300, deadline=None)
@given(case=_step_executions(), collective=st.one_of(st.just(stats._COLLECTIVE_INDEX),
                                                     st.integers(0, len(CATEGORIES) - 1)))
def test_random_executions_give_the_same_step_figures_both_ways(case, collective):
    executions, step_of, steps = case
    with _collective_index(collective):
        _compare_step_figures(executions, step_of, steps, f"random executions, collective index {collective}")


def _executions(*rows: tuple[float, float, int, int, int]) -> tuple[SimpleNamespace, array[int]]:
    """(start, end, step, is_kernel, category) rows -> (executions, step_of_execution)."""
    return SimpleNamespace(exec_start=array("d", [row[0] for row in rows]), exec_end=array("d", [row[1] for row in rows]),
                           exec_is_kernel=array("b", [row[3] for row in rows]),
                           exec_category=array("b", [row[4] for row in rows])), array("i", [row[2] for row in rows])


C_, M_ = stats._COLLECTIVE_INDEX, CATEGORIES.index("matmul/conv")
STEP_CASES: dict[str, tuple[tuple[float, float, int, int, int], ...]] = {
    "no execution": (),
    "only early and no step": ((1.0, 2.0, -2, 1, M_), (0.5, 3.0, -1, 1, C_), (-0.0, 0.0, -2, 0, C_)),
    "collective fully covered": ((2.0, 4.0, 0, 1, C_), (1.0, 5.0, 0, 1, M_)),
    "collective covered exactly": ((2.0, 4.0, 0, 1, C_), (2.0, 4.0, 0, 1, M_)),
    "collective covered by two touching": ((2.0, 4.0, 0, 1, C_), (1.0, 3.0, 0, 1, M_), (3.0, 5.0, 0, 1, M_)),
    "collective partly covered": ((2.0, 6.0, 0, 1, C_), (1.0, 3.0, 0, 1, M_), (4.0, 5.0, 0, 1, M_)),
    "collective not covered": ((2.0, 4.0, 0, 1, C_), (5.0, 6.0, 0, 1, M_), (0.0, 1.0, 0, 1, M_)),
    "collective only": ((2.0, 4.0, 0, 1, C_), (3.0, 7.0, 0, 1, C_)),
    "zero-length collective": ((2.0, 2.0, 0, 1, C_), (1.0, 3.0, 0, 1, M_)),
    "zero-length collective alone": ((2.0, 2.0, 0, 1, C_),),
    "-0.0 zero-length": ((-0.0, -0.0, 0, 1, C_), (0.0, 0.0, 0, 1, C_), (-0.0, 0.0, 0, 1, M_)),
    "-0.0 and 0.0 ties": ((0.0, -0.0, 0, 1, M_), (-0.0, -0.0, 0, 1, M_), (-0.0, 0.0, 1, 1, M_), (0.0, 0.0, 1, 1, M_)),
    "nested and identical": ((0.0, 10.0, 0, 1, M_), (2.0, 3.0, 0, 1, M_), (2.0, 3.0, 0, 0, C_), (0.0, 10.0, 0, 1, C_)),
    "gaps": ((0.0, 1.0, 0, 1, M_), (3.0, 4.0, 0, 1, M_), (10.0, 10.5, 0, 1, C_), (4.0, 4.0, 0, 1, M_)),
    "steps with nothing between": ((0.0, 1.0, 0, 1, M_), (5.0, 6.0, 3, 1, C_)),
}


@pytest.mark.parametrize("name", list(STEP_CASES))
@pytest.mark.parametrize("steps", [4, 7])
def test_step_cases_give_the_same_figures_both_ways(name, steps):
    executions, step_of = _executions(*STEP_CASES[name])
    _compare_step_figures(executions, step_of, steps, name)
    for rows in (STEP_CASES[name], STEP_CASES[name][::-1]):  # every category as the collective one, reversed order
        executions, step_of = _executions(*rows)
        for index in range(len(CATEGORIES)):
            with _collective_index(index):
                _compare_step_figures(executions, step_of, steps, f"{name}, collective index {index}")


def test_the_step_cases_reach_what_they_are_for():
    """On the Python reference: an exposed time of the int 0 where the collective is covered, a float otherwise."""
    with _python_only():
        covered = stats._step_figures(_executions(*STEP_CASES["collective fully covered"])[0],
                                      _executions(*STEP_CASES["collective fully covered"])[1], 1)[0][0]
        partly = stats._step_figures(*_executions(*STEP_CASES["collective partly covered"]), 1)[0][0]
    assert type(covered.collective_exposed_us) is int and covered.collective_us == 2.0
    assert type(partly.collective_exposed_us) is float and partly.collective_exposed_us == 2.0


# ---------------------------------------------------------------------------------------------- hostile direct calls

# Run in a child process before each section below: the helpers of the hostile calls.
HOSTILE_PRELUDE = r'''
import sys
from array import array
from types import SimpleNamespace

from hloscope.trace import load, stats
from hloscope.trace.model import COLLECTIVE, FLOW_CORRELATION_BASE, KERNEL, RUNTIME, STEP, Event

N = stats._native
assert N is not None


FAILURES = []


def step(name):
    print(name, flush=True)  # the last name printed is the call that crashed, if one does


def checked(check):
    """A check whose AssertionError is noted (and the next one run): every failure is reported at once."""
    def run(name, *args, **kwargs):
        try:
            check(name, *args, **kwargs)
        except AssertionError as failure:
            FAILURES.append(f"{name}: {failure}")
            print(f"FAILED {name}: {failure}", flush=True)
    return run


@checked
def refused(name, call, kinds=(TypeError, ValueError)):
    step(name)
    try:
        call()
    except kinds:
        return
    except Exception as error:
        raise AssertionError(f"raised {type(error).__name__}: {error}, not one of {[k.__name__ for k in kinds]}")
    raise AssertionError("not refused")


def canon(x):
    if isinstance(x, array):
        return ("array", x.typecode, x.tobytes())
    if isinstance(x, dict):
        return (type(x).__name__, tuple((canon(k), canon(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(canon(i) for i in x))
    if isinstance(x, (set, frozenset)):
        return (type(x).__name__, tuple(sorted(repr(canon(i)) for i in x)))
    if isinstance(x, SimpleNamespace):
        return ("namespace", canon(vars(x)))
    return (type(x).__name__, repr(x))


def outcome(call):
    try:
        call()
    except Exception as error:
        return (type(error).__name__, str(error))
    return None


def state(acc):
    return {name: canon(value) for name, value in vars(acc).items()}


@checked
def refused_or_same(name, make_acc, make_events):
    """add_all either refuses (TypeError / ValueError, or the Python loop's error before adding anything) or does what
    the Python loop does (state and error)."""
    step(name)
    python = make_acc()
    events = make_events(python)
    python_error = outcome(lambda: [python.add(event) for event in events])
    compiled = make_acc()
    before = state(compiled)
    compiled_error = outcome(lambda: N.add_all(compiled, make_events(compiled)))
    if compiled_error is not None and compiled_error[0] in ("TypeError", "ValueError"):
        return  # refused
    if compiled_error is not None and python_error is not None and compiled_error[0] == python_error[0] and (
            state(compiled) == before):
        return  # refused before adding anything, with the error the Python loop meets on the way
    assert compiled_error == python_error, f"compiled {compiled_error}, Python {python_error}"
    compiled_state, python_state = state(compiled), state(python)
    differ = [k for k in set(compiled_state) | set(python_state) if compiled_state.get(k) != python_state.get(k)]
    assert not differ, f"(same error {python_error}) attributes differ: " + "; ".join(
        f"{k}: compiled {compiled_state.get(k)!r:.150} Python {python_state.get(k)!r:.150}" for k in sorted(differ))


@checked
def survives(name, make_acc, make_events):
    """Outside the contract (the pass holds the accumulator's containers from its start): no crash, whatever the
    outcome."""
    step(name)
    acc = make_acc()
    outcome(lambda: N.add_all(acc, make_events(acc)))


def events():
    return [
        Event("ProfilerStep#1", 0.0, 100.0, STEP, False, "t", "host", step=1),
        Event("cudaLaunchKernel", 1.0, 1.0, RUNTIME, False, "t", "host", correlation=1),
        Event("gemm", 2.0, 3.0, KERNEL, True, "Stream #7", "gpu", correlation=1, hlo_op="dot.1", hlo_module="jit_train_step"),
        Event("nccl", 5.0, 3.0, KERNEL, True, "Stream #7", "gpu", category=COLLECTIVE, correlation=2),
        Event("gemm", 9.0, 3.0, KERNEL, True, "Stream #7", "gpu", correlation=3, hlo_op="dot.1", hlo_module="jit_train_step"),
        Event("cudaLaunchKernel", 4.0, 1.0, RUNTIME, False, "t", "host", correlation=3),
    ] * 3


Acc = stats._Accumulator
E = events()
'''

# Each section runs in a child process of its own (a crash in one hides none of the others).
HOSTILE_SECTIONS = {
    'add_all arguments': r'''
refused("add_all(object())", lambda: N.add_all(object(), E))
refused("add_all(None)", lambda: N.add_all(None, E))
refused("add_all(a namespace)", lambda: N.add_all(SimpleNamespace(), E))
refused("add_all(events=5)", lambda: N.add_all(Acc(), 5))
refused("add_all(events=None)", lambda: N.add_all(Acc(), None))
refused("add_all()", lambda: N.add_all())
refused("add_all(acc)", lambda: N.add_all(Acc()))
refused("add_all(acc, events, extra)", lambda: N.add_all(Acc(), E, 1))

''',
    'accumulators changed before the call': r'''
def with_attribute(name, value):
    def make():
        acc = Acc()
        setattr(acc, name, value() if callable(value) else value)
        return acc
    return make


def without(name):
    def make():
        acc = Acc()
        delattr(acc, name)
        return acc
    return make


class LoudDict(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.writes = getattr(self, "writes", 0) + 1


for attribute, value in [
    ("exec_start", list), ("exec_corr", lambda: array("d")), ("exec_corr", lambda: array("i")),
    ("exec_is_kernel", lambda: array("q")), ("exec_category", list), ("launch_corr", lambda: array("d")),
    ("launch_dur", lambda: array("q")), ("collective_name", lambda: array("d")), ("categories", None),
    ("categories", lambda: LoudDict.fromkeys(Acc().categories, 0.0)), ("by_name", LoudDict), ("by_name", list),
    ("kernel_counts", None), ("devices", list), ("devices", frozenset), ("events", 1.5), ("events", None),
    ("device_time", 1), ("device_time", "x"), ("host_markers", tuple), ("_open_executions", None),
    ("train_executions", list), ("collective_index", None), ("source_time", LoudDict),
]:
    refused_or_same(f"acc.{attribute} = {value!r}", with_attribute(attribute, value), lambda acc: E)
for attribute in ["exec_start", "by_name", "kernel_counts", "launch_corr", "host_markers", "events", "_open_executions"]:
    refused_or_same(f"del acc.{attribute}", without(attribute), lambda acc: E)
''',
    'accumulators changed during the pass': r'''
def changing(change, after=2):
    def make_events(acc):
        def generate():
            for index, event in enumerate(E):
                if index == after:
                    change(acc)
                yield event
        return generate()
    return make_events


survives("a new exec_start midway", Acc, changing(lambda acc: setattr(acc, "exec_start", array("d"))))
survives("exec_anchor grown midway", Acc, changing(lambda acc: acc.exec_anchor.extend(range(100000))))
survives("exec_corr emptied midway", Acc, changing(lambda acc: acc.exec_corr.__delitem__(slice(None))))
survives("by_name deleted midway", Acc, changing(lambda acc: delattr(acc, "by_name")))
survives("by_name replaced midway", Acc, changing(lambda acc: setattr(acc, "by_name", {})))
survives("categories cleared midway", Acc, changing(lambda acc: acc.categories.clear()))
survives("attributes cleared midway", Acc, changing(lambda acc: vars(acc).clear()))
survives("devices a list midway", Acc, changing(lambda acc: setattr(acc, "devices", [])))
survives("open executions cleared midway", Acc, changing(lambda acc: acc._open_executions.clear(), 3))
''',
    'fields that run Python code': r'''
class Meddling(str):
    acc = None

    def __hash__(self):
        if Meddling.acc is not None:
            Meddling.acc.by_name = {}
            Meddling.acc.kernel_counts = {}
            Meddling.acc._open_executions = {}
            Meddling.acc.collective_index = {}
            Meddling.acc.exec_start = array("d")
        return str.__hash__(self)


def meddling_events(field):
    def make_events(acc):
        Meddling.acc = acc
        out = []
        for event in E:
            value = getattr(event, field)
            fields = {name: getattr(event, name) for name in Event.__slots__}
            fields[field] = Meddling(value) if value is not None else value
            out.append(Event(**fields))
        return out
    return make_events


for field in ["name", "process", "lane", "hlo_op", "hlo_module", "category", "kind", "category_source"]:
    refused_or_same(f"{field} whose hash changes the accumulator", Acc, meddling_events(field))
Meddling.acc = None


class Sneaky(Event):
    acc = None

    @property
    def kind(self):
        if Sneaky.acc is not None:
            Sneaky.acc.exec_end = array("d")
            Sneaky.acc.launch_dur = array("d")
        return Event.kind.__get__(self)

    @kind.setter
    def kind(self, value):
        Event.kind.__set__(self, value)


def sneaky_events(acc):
    Sneaky.acc = acc
    return [Sneaky(**{name: getattr(e, name) for name in Event.__slots__}) for e in E]


refused_or_same("an Event subclass whose kind changes the accumulator", Acc, sneaky_events)
''',
    'accumulator subclasses': r'''
class Hooked(Acc):
    def add(self, event):
        self.hooked = getattr(self, "hooked", 0) + 1
        super().add(event)


refused_or_same("a subclass whose add is its own", Hooked, lambda acc: E)
refused_or_same("a subclass", type("Sub", (Acc,), {}), lambda acc: E)


class Anchoring(Acc):
    def _execution_start(self, event):
        event.correlation = None
        return "not a time" if event.name == "gemm" else super()._execution_start(event)


refused_or_same("a subclass whose _execution_start gives no float", Anchoring, lambda acc: events())


class Rewriting(Acc):
    """Python code run in the middle of an event's updates changes the event's fields (the Python loop reads them
    after the call)."""
    def _note_collective(self, event):
        super()._note_collective(event)
        event.process = "".join(["replaced ", event.process])
        event.correlation = int("1" * 30)


refused_or_same("a subclass whose _note_collective changes the event", Rewriting, lambda acc: events())
''',
    'events with unset slots': r'''
for slot in Event.__slots__:
    for event in E[:4]:
        def make_events(acc, slot=slot, event=event):
            unset = Event(**{name: getattr(event, name) for name in Event.__slots__})
            delattr(unset, slot)
            return [*E[:2], unset, *E[2:]]
        refused_or_same(f"{event.kind} event (device={event.device}) without {slot}", Acc, make_events)
refused_or_same("an Event made by __new__ alone", Acc, lambda acc: [Event.__new__(Event)])
''',
    'dispatched_time': r'''
q, d = array("q", [1, 2, 3]), array("d", [1.0, 2.0, 3.0])
assert N.dispatched_time(q, d, array("q", [2])) == 2.0
assert N.dispatched_time(array("q"), array("d"), array("q")) == 0 and type(N.dispatched_time(array("q"), array("d"), array("q"))) is int
for name, args in [
    ("launch_corr of doubles", (d, d, q)), ("launch_dur of int64", (q, q, q)), ("exec_corr of doubles", (q, d, d)),
    ("launch_corr of int32", (array("i", [1, 2, 3]), d, q)), ("exec_corr of bytes", (q, d, array("b", [1]))),
    ("lists", ([1, 2, 3], [1.0, 2.0, 3.0], [2])), ("None", (None, d, q)), ("bytes", (q.tobytes(), d, q)),
    ("launch_dur shorter", (q, array("d", [1.0]), q)), ("launch_corr shorter", (array("q", [1]), d, q)),
]:
    refused(f"dispatched_time: {name}", lambda args=args: N.dispatched_time(*args))
refused("dispatched_time()", lambda: N.dispatched_time())
refused("dispatched_time(two)", lambda: N.dispatched_time(q, d))
refused("dispatched_time(four)", lambda: N.dispatched_time(q, d, q, q))
''',
    'place': r'''
B = FLOW_CORRELATION_BASE
good = [array("q", [1, 2, -1]), array("d", [1.0, 5.0, 9.0]), array("q", [1, 2]), array("d", [0.5, 4.0]),
        array("d", [0.25, 0.5]), array("d", [0.0, 4.0]), array("d", [3.0, 8.0]), True, B]
steps, times = N.place(*good)
assert isinstance(steps, array) and steps.typecode == "i" and len(steps) == 3, steps
assert type(times) is list and len(times) == 2, times
typecodes = ["q", "d", "q", "d", "d", "d", "d"]
for position in range(7):
    wrong = "d" if typecodes[position] == "q" else "q"
    for bad in (array(wrong, [1] * len(good[position])), array("i", [1] * len(good[position])),
                array("f", [1] * len(good[position])), list(good[position]), None, good[position].tobytes()):
        args = list(good)
        args[position] = bad
        refused(f"place: argument {position} {bad!r}", lambda args=args: N.place(*args))
for position, shorter in [(1, array("d", [1.0])), (0, array("q", [1])), (2, array("q", [1])), (3, array("d", [0.5])),
                          (4, array("d", [0.25])), (5, array("d", [0.0])), (6, array("d", [3.0])),
                          (6, array("d", [3.0, 8.0, 9.0]))]:
    args = list(good)
    args[position] = shorter
    refused(f"place: argument {position} of another length", lambda args=args: N.place(*args))
for flow in ("x", None, 1.5):
    refused(f"place: flow_base {flow!r}", lambda flow=flow: N.place(*good[:8], flow))
refused("place: flow_base 2**64", lambda: N.place(*good[:8], 1 << 64), (TypeError, ValueError, OverflowError))
refused("place()", lambda: N.place())
refused("place(8 arguments)", lambda: N.place(*good[:8]))
refused("place(10 arguments)", lambda: N.place(*good, 0))


@checked
def safe(name, args):
    """Arguments outside the contract (unsorted windows, NaN): any result of the right shape, or a refusal."""
    step(name)
    try:
        steps, times = N.place(*args)
    except (TypeError, ValueError):
        return
    assert len(steps) == len(args[0]) and len(times) == len(args[5]), (name, steps, times)
    assert all(-2 <= index < len(args[5]) for index in steps), (name, steps)


nan = float("nan")
many = array("q", range(1000, 0, -1))
safe("place: unsorted windows", [array("q", [1, 2, 5, -1]), array("d", [9.0, 1.0, 5.0, 7.0]), array("q", [1, 2, 5]),
                                 array("d", [8.0, 0.5, 4.0]), array("d", [1.0, 1.0, 1.0]),
                                 array("d", [6.0, 0.0, 4.0]), array("d", [10.0, 3.0, 5.0]), True, B])
safe("place: NaN everywhere", [array("q", [1, 2, -1]), array("d", [nan, 1.0, nan]), array("q", [1, 2]),
                               array("d", [nan, 0.5]), array("d", [nan, 1.0]), array("d", [nan, 0.0]),
                               array("d", [1.0, nan]), False, B])
safe("place: many runs, no window", [many, array("d", range(1000)), many, array("d", range(1000)),
                                     array("d", [1.0] * 1000), array("d"), array("d"), True, B])
safe("place: negative flow base", [many, array("d", range(1000)), many, array("d", range(1000)),
                                   array("d", [1.0] * 1000), array("d", [0.0]), array("d", [500.0]), True, -1])


class Sub(array):
    pass


@checked
def subclasses(name):
    step(name)
    try:
        result = N.place(*[Sub(a.typecode, a) if isinstance(a, array) else a for a in good])
    except (TypeError, ValueError):
        return
    assert canon(result) == canon(N.place(*good)), result


subclasses("place: array subclasses")
''',
    'setup refused': r'''
from hloscope.trace.model import DEVICE_EXEC_KINDS

class NotAnEvent:
    __slots__ = ("name",)

for cls in (NotAnEvent, object, None):
    refused(f"setup({cls!r})", lambda cls=cls: N.setup(cls, DEVICE_EXEC_KINDS, KERNEL, RUNTIME, STEP, COLLECTIVE,
                                                       stats._CATEGORY_INDEX))
refused_or_same("add_all after a refused setup()", Acc, lambda acc: E)
''',
    'step_figures': r'''
from hloscope.trace.model import CATEGORIES

CI, CN = stats._COLLECTIVE_INDEX, len(CATEGORIES)
good = [array("d", [0.0, 1.0, 2.0]), array("d", [1.0, 3.0, 2.5]), array("i", [0, -1, 1]), array("b", [1, 0, 1]),
        array("b", [0, CI, CI]), 2, CN, CI]
figures, early = N.step_figures(*good)
assert type(figures) is list and len(figures) == 2 and all(type(f) is tuple and len(f) == 10 for f in figures), figures
assert early == (0, 0, 0.0), early
codes = ["d", "d", "i", "b", "b"]
for position, code in enumerate(codes):
    size = len(good[position])
    wrong = [c for c in "dqibBhfl" if c != code]
    for bad in [*(array(c, [1] * size) for c in wrong), list(good[position]), None, good[position].tobytes(), "abc",
                memoryview(good[position]).cast("B")]:
        args = list(good)
        args[position] = bad
        refused(f"step_figures: argument {position} {bad!r}", lambda args=args: N.step_figures(*args))
    args = list(good)
    args[position] = memoryview(array(code, [0] * (2 * size)))[::2]  # strided: no C-contiguous buffer
    refused(f"step_figures: argument {position} strided", lambda args=args: N.step_figures(*args),
            (TypeError, ValueError, BufferError))
    for other in (size - 1, size + 1, 0):
        args = list(good)
        args[position] = array(code, [0] * other)
        refused(f"step_figures: argument {position} of length {other}", lambda args=args: N.step_figures(*args))
for name, column, values in [
    ("a step index == steps", 2, [0, 2, 1]), ("a step index far out", 2, [0, 2**31 - 1, 1]),
    ("a category -1", 4, [0, -1, 0]), ("a category == categories", 4, [0, CN, 0]), ("a category 127", 4, [0, 127, 0]),
    ("a category -128", 4, [0, -128, 0]),
]:
    args = list(good)
    args[column] = array(args[column].typecode, values)
    refused(f"step_figures: {name}", lambda args=args: N.step_figures(*args))
for name, position, value in [
    ("steps -1", 5, -1), ("steps -2**62", 5, -2**62), ("steps 1 (an index out of it)", 5, 1),
    ("categories 0", 6, 0), ("categories -1", 6, -1), ("categories 128", 6, 128), ("categories 1000", 6, 1000),
    ("categories 2 (a category out of it)", 6, 2), ("collective index -1", 7, -1),
    ("collective index == categories", 7, CN), ("collective index 127", 7, 127), ("steps 2.0", 5, 2.0),
    ("steps '2'", 5, "2"), ("steps None", 5, None), ("categories 7.0", 6, 7.0), ("collective index None", 7, None),
]:
    args = list(good)
    args[position] = value
    refused(f"step_figures: {name}", lambda args=args: N.step_figures(*args))
for name, position, value in [("steps 2**63", 5, 2**63), ("categories 2**64", 6, 2**64),
                              ("collective index -2**70", 7, -2**70)]:
    args = list(good)
    args[position] = value
    refused(f"step_figures: {name}", lambda args=args: N.step_figures(*args), (TypeError, ValueError, OverflowError))
for name, steps in [("steps sys.maxsize", sys.maxsize), ("steps 2**62", 2**62), ("steps 2**60", 2**60)]:
    refused(f"step_figures: {name}", lambda steps=steps: N.step_figures(*good[:5], steps, CN, CI),
            (TypeError, ValueError, MemoryError, OverflowError))
refused("step_figures()", lambda: N.step_figures())
refused("step_figures(7 arguments)", lambda: N.step_figures(*good[:7]))
refused("step_figures(9 arguments)", lambda: N.step_figures(*good, 0))
refused("step_figures(keyword)", lambda: N.step_figures(*good[:7], collective_index=CI))


def python_figures(args):
    executions = SimpleNamespace(exec_start=args[0], exec_end=args[1], exec_is_kernel=args[3], exec_category=args[4])
    saved = stats._native, stats._COLLECTIVE_INDEX, stats.CATEGORIES
    stats._native, stats._COLLECTIVE_INDEX, stats.CATEGORIES = None, args[7], tuple(range(args[6]))
    try:
        figures, early = stats._step_figures(executions, args[2], args[5])
    finally:
        stats._native, stats._COLLECTIVE_INDEX, stats.CATEGORIES = saved
    return [tuple(step) for step in figures], early


@checked
def same_figures(name, args):
    # Arguments the statistics never give but the Python code reads alike: the Python figures, or a refusal.
    step(name)
    try:
        compiled = N.step_figures(*args)
    except (TypeError, ValueError):
        return
    assert canon(compiled) == canon(python_figures(args)), (compiled, python_figures(args))


@checked
def safe(name, args):
    # Arguments outside the contract (NaN: Python's sort and C's qsort may order them apart): figures of the right
    # shape, or a refusal.
    step(name)
    try:
        figures, early = N.step_figures(*args)
    except (TypeError, ValueError):
        return
    assert len(figures) == args[5] and all(len(f) == 10 and len(f[1]) == len(f[2]) == args[6] for f in figures)
    assert len(early) == 3


same_figures("step_figures: step indices below -2", [good[0], good[1], array("i", [-3, -2**31, -2]), *good[3:]])
same_figures("step_figures: no executions, many steps", [array("d"), array("d"), array("i"), array("b"), array("b"),
                                                         5000, CN, CI])
same_figures("step_figures: one category", [*good[:4], array("b", [0, 0, 0]), 2, 1, 0])
same_figures("step_figures: 127 categories", [*good[:4], array("b", [0, 126, 5]), 2, 127, 126])
same_figures("step_figures: array subclasses", [type("Sub", (array,), {})(a.typecode, a) if isinstance(a, array)
                                                else a for a in good])
same_figures("step_figures: memoryviews", [memoryview(a) if isinstance(a, array) else a for a in good])
nan, inf = float("nan"), float("inf")
safe("step_figures: NaN everywhere", [array("d", [nan, 1.0, nan, 0.0, nan]), array("d", [1.0, nan, nan, nan, 2.0]),
                                      array("i", [0, 0, 0, 0, -2]), array("b", [1] * 5), array("b", [CI, 0, CI, 0, 0]),
                                      1, CN, CI])
safe("step_figures: infinities", [array("d", [-inf, inf, 0.0]), array("d", [inf, inf, -inf]), array("i", [0, 0, 0]),
                                  array("b", [1, 1, 1]), array("b", [CI, 0, CI]), 1, CN, CI])
''',
    'Checked arguments': r'''
from pathlib import Path

MAX_EVENT_US, MAX_TIME_US = load.MAX_EVENT_US, load.MAX_TIME_US


class Plain(Event):
    pass


plain = [Plain("k", 1.0, 1.0, KERNEL, True, "s", "p")]


def run(*args):
    return list(N.Checked(*args))


refused("Checked()", lambda: N.Checked())
refused("Checked(4 arguments)", lambda: N.Checked(E, load._possible, print, MAX_EVENT_US))
refused("Checked(6 arguments)", lambda: N.Checked(E, load._possible, print, MAX_EVENT_US, MAX_TIME_US, 1.0))
for events in (5, None, 1.5, object()):
    refused(f"Checked(events={events!r})", lambda events=events: run(events, load._possible, print, MAX_EVENT_US,
                                                                      MAX_TIME_US))


class BadIter:
    def __iter__(self):
        return 5


refused("Checked(events whose __iter__ gives no iterator)", lambda: run(BadIter(), load._possible, print, MAX_EVENT_US,
                                                                         MAX_TIME_US))
for name, bounds in [("max_event_us 'x'", ("x", MAX_TIME_US)), ("max_time_us None", (MAX_EVENT_US, None)),
                     ("max_event_us a list", ([1.0], MAX_TIME_US))]:
    refused(f"Checked({name})", lambda bounds=bounds: run(E, load._possible, print, *bounds))
refused("Checked(max_time_us 10**400)", lambda: run(E, load._possible, print, MAX_EVENT_US, 10**400),
        (TypeError, ValueError, OverflowError))
for possible in (5, None, "possible"):
    refused(f"Checked(possible={possible!r}) on an Event subclass",
            lambda possible=possible: run(plain, possible, print, MAX_EVENT_US, MAX_TIME_US))
    refused(f"Checked(possible={possible!r}) on an object",
            lambda possible=possible: run([SimpleNamespace(start_us=1.0, dur_us=1.0)], possible, print,
                                          MAX_EVENT_US, MAX_TIME_US))
for finish in (5, None, "finish"):
    refused(f"Checked(finish={finish!r})", lambda finish=finish: run(E, load._possible, finish, MAX_EVENT_US,
                                                                     MAX_TIME_US))
    refused(f"Checked(finish={finish!r}), no event", lambda finish=finish: run([], load._possible, finish,
                                                                               MAX_EVENT_US, MAX_TIME_US))
refused("Checked(possible taking no argument)", lambda: run(plain, lambda: True, print, MAX_EVENT_US, MAX_TIME_US))
refused("Checked(finish taking no argument)", lambda: run(E, load._possible, lambda: None, MAX_EVENT_US, MAX_TIME_US))
refused("a subclass of Checked", lambda: type("Sub", (N.Checked,), {}))


@checked
def bounds_work(name, bounds, expected):
    # Other bounds than load's: the compiled check uses the ones it is given.
    step(name)
    events = [Event("k", float(i), float(i), KERNEL, True, "s", "p") for i in range(5)]
    kept = [e.start_us for e in N.Checked(events, load._possible, lambda skipped: None, *bounds)]
    assert kept == expected, kept


bounds_work("Checked(max_event_us 2.5)", (2.5, MAX_TIME_US), [0.0, 1.0, 2.0])
bounds_work("Checked(max_time_us 3.0)", (MAX_EVENT_US, 3.0), [0.0, 1.0, 2.0, 3.0])
bounds_work("Checked(NaN bounds)", (float("nan"), float("nan")), [])
''',
    'Checked: events with unset slots': r'''
from pathlib import Path


def outcome_of_check(events, native):
    # (positions of the events yielded, the error, skipped, next() afterwards)
    checked = load.CheckedEvents(Path("unset.json"), events)
    load._warned.add("unset.json")
    yielded, error = [], None
    iterator = None
    try:
        iterator = (N.Checked(checked._events, load._possible, checked._finish, load.MAX_EVENT_US, load.MAX_TIME_US)
                    if native else checked._checked())
        for event in iterator:
            yielded.append(next(i for i, e in enumerate(events) if e is event))
    except Exception as caught:
        error = (type(caught).__name__, str(caught))
    after = "StopIteration"
    if iterator is not None:
        try:
            after = repr(next(iterator))
        except StopIteration:
            pass
        except Exception as caught:
            after = (type(caught).__name__, str(caught))
    return yielded, error, checked.skipped, after


@checked
def same_check(name, events):
    step(name)
    python = outcome_of_check(events, False)
    compiled = outcome_of_check(events, True)
    assert compiled == python, f"compiled {compiled}, Python {python}"


def fields(**changed):
    values = {"name": "k", "start_us": 1.0, "dur_us": 2.0, "kind": KERNEL, "device": True, "lane": "s", "process": "p"}
    return {**values, **changed}


for cls in (Event, type("Plain", (Event,), {})):
    for slot in Event.__slots__:
        for dur in (2.0, -2.0, 2):
            unset = cls(**fields(dur_us=dur))
            delattr(unset, slot)
            same_check(f"{cls.__name__} with dur_us={dur!r}, no {slot}", [cls(**fields()), unset, cls(**fields())])
    same_check(f"{cls.__name__} made by __new__ alone", [cls(**fields()), cls.__new__(cls)])
''',
    'Checked re-entered': r'''
from pathlib import Path


class Plain(Event):
    pass


def plain(start, dur=1.0):
    return Plain("k", start, dur, KERNEL, True, "s", "p")


BOX = {}


def reentering_possible(catch):
    def possible(event):
        if event.start_us == 1.0:
            if catch:
                try:
                    next(BOX["iterator"])
                except Exception as error:
                    BOX.setdefault("inner", []).append(type(error).__name__)
            else:
                next(BOX["iterator"])
        return event.dur_us >= 0
    return possible


class ReenteringSource:
    # An iterator of events that calls next() on the check reading it, after its second event.
    def __init__(self, events, catch):
        self.events, self.catch, self.index = list(events), catch, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.index == 2:
            if self.catch:
                try:
                    next(BOX["iterator"])
                except Exception as error:
                    BOX.setdefault("inner", []).append(type(error).__name__)
            else:
                next(BOX["iterator"])
        if self.index >= len(self.events):
            raise StopIteration
        self.index += 1
        return self.events[self.index - 1]


def reentered(native, events, possible=None, catch=True, source=False):
    # What the check gives when the events' reading or load._possible calls next() on the check itself.
    saved = load._possible
    if possible is not None:
        load._possible = possible
    try:
        checked = load.CheckedEvents(Path("reentered.json"), ReenteringSource(events, catch) if source else events)
        load._warned.add("reentered.json")
        finished = []
        checked._finish = finished.append
        BOX.clear()
        iterator = BOX["iterator"] = (N.Checked(checked._events, load._possible, checked._finish, load.MAX_EVENT_US,
                                                load.MAX_TIME_US) if native else checked._checked())
        yielded, error = [], None
        try:
            for event in iterator:
                yielded.append(events.index(event))
        except Exception as caught:
            error = (type(caught).__name__, str(caught))
        return yielded, error, finished, BOX.get("inner")
    finally:
        load._possible = saved
        BOX.clear()


@checked
def same_or_refused(name, **how):
    # The Python generator's outcome, or a refusal (ValueError / RuntimeError) of the re-entrant call: no crash.
    step(name)
    events = [plain(0.0), plain(1.0), plain(2.0, -1.0), plain(3.0, -1.0), plain(4.0), plain(5.0, -1.0)]
    python = reentered(False, events, **how)
    compiled = reentered(True, events, **how)
    if compiled == python:
        return
    refusals = ("ValueError", "RuntimeError")
    inner_refused = compiled[3] is not None and all(kind in refusals for kind in compiled[3])
    outer_refused = compiled[1] is not None and compiled[1][0] in refusals
    assert (inner_refused and compiled[:3] == python[:3]) or outer_refused, f"compiled {compiled}, Python {python}"


same_or_refused("possible calls next() on the check, error caught", possible=reentering_possible(True))
same_or_refused("possible calls next() on the check, error raised", possible=reentering_possible(False), catch=False)
same_or_refused("the events call next() on the check, error caught", source=True)
same_or_refused("the events call next() on the check, error raised", source=True, catch=False)
''',
}


@pytest.mark.parametrize("section", list(HOSTILE_SECTIONS))
def test_hostile_direct_calls_are_refused_or_give_the_python_result_without_a_crash(section):
    """Calls the statistics never make (wrong types and lengths, accumulators changed before or during the pass,
    fields whose hash runs Python code, events with unset slots): each is refused with TypeError / ValueError, or gives
    what the Python code gives, and none crashes; in a child process, so that a crash fails this test (the last call
    printed is the one that crashed)."""
    env = {key: value for key, value in os.environ.items() if key != "HLOSCOPE_PURE_PYTHON"}
    script = HOSTILE_PRELUDE + HOSTILE_SECTIONS[section] + '\nprint("ok" if not FAILURES else f"{len(FAILURES)} failed")\n'
    done = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or lines[-1:] != ["ok"]:
        failed = "\n".join(line for line in lines if line.startswith("FAILED "))
        pytest.fail(f"exit status {done.returncode}, last call printed: {lines[-1:]}\n{failed}\n{done.stderr[-2000:]}")


def test_nan_times_given_directly_are_sorted_by_the_python_code_both_ways():
    # Events read from a file never hold NaN (CheckedEvents skips them); events given directly can. C's sort and
    # Python's order NaN differently, so step_figures hands such steps back to the Python code.
    from hloscope.trace.model import KERNEL, STEP

    nan = float("nan")
    events = [Event("ProfilerStep#1", 0.0, 100.0, STEP, False, "thread 1", "host", step=1),
              Event("k", nan, 2.0, KERNEL, True, "stream 7", "gpu"), Event("k", 0.0, nan, KERNEL, True, "stream 7", "gpu"),
              Event("k", 1.0, 2.0, KERNEL, True, "stream 7", "gpu"), Event("k", 5.0, 1.0, KERNEL, True, "stream 7", "gpu")]
    compiled = json.dumps(stats.summarize_events(events))
    with _python_only():
        python = json.dumps(stats.summarize_events(events))
    assert compiled == python and '"steps": 1' in python
    assert stats._native.step_figures(array("d", [nan]), array("d", [1.0]), array("i", [0]), array("b", [1]),
                                      array("b", [0]), 1, 7, 5) is None
