"""Read an xplane.pb (XSpace) from JAX, PyTorch/XLA, TensorFlow or XProf into `Event`s.

Decoding is done by the protobuf runtime with the XSpace schema that XProf's or jaxlib's library carries
(`hloscope.trace.xplane_proto`). Names are kept as the file stores them: once per plane in its event and stat metadata,
which events refer to by id. Each name becomes one Python string, shared by every event that refers to it, so an
xplane whose events all refer to one huge name costs the name once, not once per event; what those references add
up to (the text a consumer would copy) is bounded as well (`limits.MAX_XPLANE_EXPANDED_BYTES`).
Planes named "/device:..." are devices, "/host:CPU" is the host.

Which rows are device executions:
- GPU planes: the "Stream #N" lines (kernels, and memcpy/memset by name); the other lines ("XLA Ops", "XLA Modules",
  "TensorFlow Ops", name scopes) are derived views of the same time and are kept as annotations, never counted twice.
- TPU and other device planes: the "XLA Ops" line. Op names there are HLO text ("%fusion.3 = f32[...] fusion(...)"):
  the event gets the instruction name, and its module from the enclosing "XLA Modules" event.
- Host threads: an event named after its own `hlo_op` stat is XLA's CPU runtime executing that op (the CPU is the
  device), e.g. `wrapped_tanh` or `loop_add_fusion` on a `tf_XLAEigen` / `tf_XLAPjRtCpuClient` thread. Any other
  host event with a `correlation_id` stat is a runtime call (launch, async copy) of the device work it correlates to.
"""

from __future__ import annotations

import bisect
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hloscope.errors import InputError, MissingDependency, reading

try:
    from google.protobuf.message import DecodeError
except ImportError as missing:  # a bare environment (a TPU VM's system Python): one line, not a traceback
    raise MissingDependency("protobuf", "an xplane profile is a protobuf message") from missing

from hloscope.files import int64
from hloscope.limits import MAX_XPLANE_EXPANDED_BYTES
from hloscope.machine import available_memory, gb
from hloscope.trace.categories import category_for, category_of_profiler_hlo
from hloscope.trace.model import (
    ANNOTATION,
    FLOW_CORRELATION_BASE,
    HOST_OP,
    KERNEL,
    MEMCPY,
    MEMSET,
    OTHER,
    RUNTIME,
    SOURCE_NAMES,
    SOURCE_PROFILER,
    STEP,
    CorrelationIds,
    Event,
    Flaws,
    device_line_executes,
    execution_kind,
)
from hloscope.trace.xplane_proto import xspace_class

# `<name> = <shape> <opcode>(` in TPU op names; the shape may be a tuple "(f32[..], f32[..])".
_HLO_TEXT = re.compile(r"^%?(?P<name>[^\s=]+) = (?:\([^=]*?\)|\S+) (?P<opcode>[\w-]+)\(")
_MODULE_SUFFIX = re.compile(r"\(\d+\)$")  # "jit_step(123456)" -> "jit_step"
# Bytes of memory per byte of xplane.pb while it is read: the file's bytes plus the parsed copy (measured ~2x).
XPLANE_MEMORY_FACTOR = 3
# An event's stats: stat name -> value.
_Stats = dict[str, int | float | str | bytes]
# The protobuf messages (XSpace, XPlane, XLine, XEvent, XStat) are built from a descriptor at run time: Any.


class XSpaceEvents:
    """The events of one parsed xplane.pb, produced one plane at a time each time it is iterated.

    The parsed XSpace is held by the protobuf runtime (about the file's size); Python holds the events of one plane
    at most, and each distinct name once.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._space = _parse(self.path)

    def __iter__(self) -> Iterator[Event]:
        return self.events(Flaws())

    def events(self, flaws: Flaws) -> Iterator[Event]:
        """One pass over the events; those with impossible times (`_impossible`) are left out and counted in
        `flaws.left_out` by class (trace/load.py's CheckedEvents warns once per file)."""
        correlations = CorrelationIds()  # shared by the device and host planes: launches and their work match
        budget = _ExpandedBytes(self.path)
        for plane in self._space.planes:
            if plane.name.startswith("/device:"):
                yield from _device_plane_events(_Plane(plane, budget, flaws), correlations)
            elif plane.name.startswith("/host:"):
                yield from _host_plane_events(_Plane(plane, budget, flaws), correlations)


def _parse(path: Path) -> Any:
    with reading(path, "a trace file"):
        size = path.stat().st_size
        _check_memory(path, size)
        data = path.read_bytes()
    if not data:
        raise InputError(path, "empty file: not an xplane.pb profile")
    xspace = xspace_class()
    try:
        space = xspace.FromString(data)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise InputError(path, "not a valid xplane.pb (XSpace protobuf): truncated or corrupt") from error
    del data
    if not any(plane.name.startswith(("/device:", "/host:")) for plane in space.planes):
        raise InputError(path, "not an xplane.pb profile: it has no /device: or /host: planes")
    return space


def _check_memory(path: Path, size: int) -> None:
    """Refuse, rather than be killed, when the file and its parsed copy cannot both fit in available memory."""
    available = available_memory()
    if available is None:
        return
    needed = XPLANE_MEMORY_FACTOR * size
    if needed > available:
        raise InputError(
            path,
            f"too large to read here: an xplane.pb is read whole, which needs about "
            f"{gb(needed)} for this {gb(size)} file, and {gb(available)} is available",
        )


class _ExpandedBytes:
    """The characters of the names and text stats that the events of one pass refer to, counted as if each event had
    its own copy (what a consumer writing one row per event copies). Past MAX_XPLANE_EXPANDED_BYTES the file is
    refused: a small file whose events all refer to one huge name would otherwise cost that name per event."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.total = 0

    def add(self, count: int) -> None:
        self.total += count
        if self.total > MAX_XPLANE_EXPANDED_BYTES:
            raise InputError(
                self.path,
                f"not read: its events refer to more than {gb(MAX_XPLANE_EXPANDED_BYTES)} of names and text "
                "(a few names repeated by every event, each far longer than any real name)",
            )


class _Plane:
    """One XPlane with its names decoded once: event metadata id -> name, stat metadata id -> name (the same string
    object for every event and stat that refers to it), and the per-name work (parsing, categories) done once."""

    def __init__(self, plane: Any, budget: _ExpandedBytes, flaws: Flaws | None = None) -> None:
        self.plane = plane
        self.name: str = plane.name
        self.budget = budget
        self.left_out = (flaws or Flaws()).left_out
        self._event_names: dict[int, str] = {}
        self._stat_names: dict[int, str] = {}
        self.derived: dict[tuple[object, ...], Any] = {}  # per-name results, keyed by (what, name id, ...)

    def event_name(self, metadata_id: int) -> str:
        name = self._event_names.get(metadata_id)
        if name is None:
            metadata = self.plane.event_metadata.get(metadata_id)
            name = self._event_names[metadata_id] = sys.intern(metadata.name) if metadata is not None else ""
        return name

    def stat_name(self, metadata_id: int) -> str:
        name = self._stat_names.get(metadata_id)
        if name is None:
            metadata = self.plane.stat_metadata.get(metadata_id)
            name = self._stat_names[metadata_id] = sys.intern(metadata.name) if metadata is not None else ""
        return name

    def events(self, line: Any) -> Iterator[tuple[Any, int, str, float, float, _Stats]]:
        """(event, name id, name, start ns, duration ns, stats) for each event of `line`, as XLA's reader
        (jaxlib's ProfileData) gives them: start = the line's timestamp + the offset, in whole nanoseconds. Events
        with impossible times are left out and counted by class in `left_out`."""
        timestamp = line.timestamp_ns
        add = self.budget.add
        where = len(self.name) + len(line.name)  # each event carries its plane's and line's names too
        left_out = self.left_out
        if timestamp < 0 or timestamp > MAX_TIMESTAMP_NS:  # no event of the line has a time
            count = len(line.events)
            if count:
                left_out[LINE_BEFORE_1970 if timestamp < 0 else LINE_AFTER_5000] += count
            return
        for xevent in line.events:
            why = _impossible(timestamp, xevent.offset_ps, xevent.duration_ps)
            if why is not None:
                left_out[why] += 1
                continue
            metadata_id = xevent.metadata_id
            name = self.event_name(metadata_id)
            stats = self.stats(xevent)
            add(where + len(name) + sum(len(value) for value in stats.values() if isinstance(value, str | bytes)))
            yield (xevent, metadata_id, name, float(timestamp + xevent.offset_ps // 1000),
                   float(xevent.duration_ps // 1000), stats)

    def stats(self, xevent: Any) -> _Stats:
        stats: _Stats = {}
        for stat in xevent.stats:
            which = stat.WhichOneof("value")
            if which is None:
                continue
            if which == "ref_value":
                value = self.stat_name(stat.ref_value)
            elif which == "bytes_value":  # as text, as XLA's reader gives it
                value = stat.bytes_value.decode("utf-8", "replace")
            else:
                value = getattr(stat, which)
            stats[self.stat_name(stat.metadata_id)] = value
        return stats


# An xplane's times: a line's timestamp_ns since 1970, each event's offset_ps from it and its duration_ps, all int64.
# XLA's profiler writes none of them negative; a duration beyond a day or a time beyond the year 5000 is no measurement
# (the same bounds as trace/load.py's check of every reader's events). Each class is named in the one warning line.
MAX_DURATION_PS = 86_400 * 10**12
MAX_TIMESTAMP_NS = 10**20  # 1e17 us, about the year 5000
NEGATIVE_OFFSET = "with a negative offset_ps (before their line began)"
NEGATIVE_DURATION = "with a negative duration_ps"
DAY_LONG = "with a duration_ps longer than a day"
AFTER_5000 = "starting after the year 5000"
LINE_BEFORE_1970 = "on a line whose timestamp_ns is negative"
LINE_AFTER_5000 = "on a line whose timestamp_ns is after the year 5000"


def _impossible(timestamp_ns: int, offset_ps: int, duration_ps: int) -> str | None:
    """Why an event's times are impossible (the class counted in the warning), or None."""
    if offset_ps < 0:
        return NEGATIVE_OFFSET
    if duration_ps < 0:
        return NEGATIVE_DURATION
    if duration_ps > MAX_DURATION_PS:
        return DAY_LONG
    if timestamp_ns + offset_ps // 1000 > MAX_TIMESTAMP_NS:
        return AFTER_5000
    return None


def _device_plane_events(plane: _Plane, correlations: CorrelationIds) -> list[Event]:
    plane_name = plane.name
    derived = plane.derived
    out: list[Event] = []
    modules: list[tuple[float, float, str]] = []  # (start, end, module) from the "XLA Modules" line
    ops_needing_module: list[Event] = []
    for line in plane.plane.lines:
        line_name = line.name
        executes = device_line_executes(plane_name, line_name)
        for _, name_id, name, start_ns, duration_ns, stats in plane.events(line):
            start = start_ns / 1000.0
            duration = duration_ns / 1000.0
            hlo_op = _str_or_none(stats.get("hlo_op"))
            step = None
            if executes:
                executed = derived.get(("exec", name_id))
                if executed is None:
                    executed = derived[("exec", name_id)] = _executed_name(name)
                kind, name, opcode = executed
                # ROCm xplanes put copies on "Stream #N(MemcpyOther)" lines as events named "CopyDeviceToDevice":
                # the profiler's memcpy_details / memset_details stat says what they are (XProf's kernel_stats counts
                # only events with kernel_details).
                if kind == KERNEL and "kernel_details" not in stats:
                    if "memcpy_details" in stats:
                        kind = MEMCPY
                    elif "memset_details" in stats:
                        kind = MEMSET
                if opcode is not None:
                    hlo_op = hlo_op or name
                known = derived.get(("category", name_id, kind))
                if known is None:
                    known = derived[("category", name_id, kind)] = _device_category(plane, name_id, name, kind,
                                                                                     opcode)
                category, source = known
            else:
                kind = ANNOTATION
                category, source = OTHER, SOURCE_NAMES
                if line_name == "Steps":
                    kind, step = STEP, int64(stats.get("step_name", name))
                elif line_name == "XLA Modules":
                    module = derived.get(("module", name_id))
                    if module is None:
                        module = derived[("module", name_id)] = _MODULE_SUFFIX.sub("", name)
                    modules.append((start, start + duration, module))
            event = Event(
                name=name,
                start_us=start,
                dur_us=duration,
                kind=kind,
                device=True,
                lane=line_name,
                process=plane_name,
                category=category,
                step=step,
                hlo_op=hlo_op,
                hlo_module=_str_or_none(stats.get("hlo_module")),
                correlation=correlations(_int_or_none(stats.get("correlation_id"))),
                category_source=source,
            )
            if executes and event.hlo_module is None:
                ops_needing_module.append(event)
            out.append(event)
    _attach_modules(ops_needing_module, modules)
    return out


def _executed_name(name: str) -> tuple[str, str, str | None]:
    """(kind, name, HLO opcode or None) of a device execution named `name`: TPU op names that are HLO text give
    their instruction name and opcode."""
    kind = execution_kind(name)
    parsed = _HLO_TEXT.match(name) if name.startswith("%") else None
    if parsed:
        return kind, parsed.group("name"), parsed.group("opcode")
    return kind, name, None


def _device_category(plane: _Plane, name_id: int, name: str, kind: str, opcode: str | None) -> tuple[str, str]:
    """(category, what decided it) of a device execution: the profiler's `hlo_category` where its event metadata has
    one (TPU), else its HLO opcode or name."""
    if kind not in (MEMCPY, MEMSET):
        metadata = plane.plane.event_metadata.get(name_id)
        profiler = category_of_profiler_hlo(plane.stats(metadata).get("hlo_category")) if metadata is not None else None
        if profiler is not None:
            return profiler, SOURCE_PROFILER
    return (category_for(name, kind) if opcode is None else _opcode_category(name, opcode)), SOURCE_NAMES


def _opcode_category(name: str, opcode: str) -> str:
    # A fusion's opcode says nothing about what it computes; its name ("convolution_fusion.2") may.
    return category_for(name if opcode == "fusion" else opcode, KERNEL)


def _attach_modules(ops: list[Event], modules: list[tuple[float, float, str]]) -> None:
    """Give each op the XLA module whose execution span contains its start."""
    if not ops or not modules:
        return
    modules.sort()
    starts = [start for start, _, _ in modules]
    for op in ops:
        index = bisect.bisect_right(starts, op.start_us) - 1
        if index >= 0 and modules[index][1] >= op.start_us:
            op.hlo_module = modules[index][2]


def _host_plane_events(plane: _Plane, correlations: CorrelationIds) -> list[Event]:
    out: list[Event] = []
    plane_name = plane.name
    derived = plane.derived
    flows = _HandOffs(plane)
    for line in plane.plane.lines:
        line_name = line.name
        region = None  # the thread-pool flow whose work this thread is running
        for _, name_id, name, start_ns, duration_ns, stats in plane.events(line):
            hlo_op = _str_or_none(stats.get("hlo_op"))
            correlation = correlations(_int_or_none(stats.get("correlation_id")))
            device = False
            step = None
            region = _region_after(stats, name, region)
            if hlo_op is not None and (hlo_op is name or hlo_op == name):
                kind, device = KERNEL, True  # XLA's CPU runtime executing an op
                if correlation is None:
                    correlation = flows.dispatch(stats, region)
            elif correlation is not None:
                # A host runtime call that the profiler correlated with device work: kernel launches (cuLaunchKernel,
                # hipModuleLaunchKernel, hipExtModuleLaunchKernel; older ROCm xplanes name the launch after its
                # kernel), async copies (cuMemcpyHtoDAsync, hipMemcpyDtoDAsync), stream waits. Which of them
                # launched device work is decided by the correlation ids of the device executions (trace_stats).
                kind = RUNTIME
            elif stats.get("_pt") == _THREAD_POOL_FLOW and (flow := _int_or_none(stats.get("_p"))) is not None:
                kind, correlation = RUNTIME, FLOW_CORRELATION_BASE + flow  # work handed to a thread pool
            elif "step_num" in stats:
                kind, step = STEP, int64(stats["step_num"])
            else:
                kind = HOST_OP
            category = OTHER
            if device:
                known = derived.get(("category", name_id, kind))
                if known is None:
                    known = derived[("category", name_id, kind)] = category_for(name, kind)
                category = known
            out.append(
                Event(
                    name=name,
                    start_us=start_ns / 1000.0,
                    dur_us=duration_ns / 1000.0,
                    kind=kind,
                    device=device,
                    lane=line_name,
                    process=plane_name,
                    category=category,
                    step=step,
                    hlo_op=hlo_op,
                    hlo_module=_str_or_none(stats.get("hlo_module")),
                    correlation=correlation,
                )
            )
    return out


# XLA's CPU runtime hands work between threads through thread pools and records each hand-off as a flow: the
# producer event carries stats `_pt` = 15 and `_p` = id, the consumer thread's "ThreadpoolListener::StartRegion"
# carries `_ct` = 15 and `_c` = id. CPU ops get FLOW_CORRELATION_BASE + the id of the hand-off that dispatched them as
# their correlation, and that producer event the same, as a launch: the op is in the step of its dispatch, even when it
# runs after the next step began.
# Which hand-off dispatched an op: PjRt marks each execution with a run id, on the caller's
# "...LoadedExecutable::Execute" event (`_pt` = 5, `_p` = run id) and on every op it runs (stat `run_id`); the first
# hand-off inside that Execute event is the execution's (on the Python thread in JAX: a root). Worker threads' regions
# cannot say it for every op: a thread whose StopRegion went unrecorded, or whose region is still open when a later
# step hands work over (a loaded machine), would chain ops of several steps to the first step's hand-off. They stand
# in for ops without a run id (PyTorch/XLA's CPU client records none) or whose Execute event is not in the trace: the
# op's region, followed back through the hand-offs to its first producer.
_PJRT_FLOW = 5
_RUN_ID_BITS = (1 << 64) - 1  # the flow id is the run id's 64 bits unsigned, the op's stat the same bits signed
_THREAD_POOL_FLOW = 15


class _HandOffs:
    """The thread-pool hand-offs of one host plane: which dispatched each CPU op."""

    def __init__(self, plane: _Plane) -> None:
        self.parent: dict[int, int | None] = {}  # producer flow id -> the flow whose region it ran in (None: a root)
        first: dict[int, int] = {}  # run id -> the first hand-off inside its Execute event
        executed: set[int] = set()
        repeated: set[int] = set()  # run ids of several Execute events (PyTorch/XLA's are all 0): no execution's own
        for line in plane.plane.lines:
            region = None
            execution: tuple[int, int] | None = None  # (end in ps from the line's start, run id) of an Execute
            for xevent in line.events:
                stats = plane.stats(xevent)
                producer = stats.get("_pt")
                flow = _int_or_none(stats.get("_p"))
                if flow is not None and producer == _PJRT_FLOW:
                    flow &= _RUN_ID_BITS
                    if flow in executed:
                        repeated.add(flow)
                    executed.add(flow)
                    execution = (xevent.offset_ps + xevent.duration_ps, flow)
                elif flow is not None and producer == _THREAD_POOL_FLOW:
                    self.parent[flow] = region
                    if execution is not None and xevent.offset_ps <= execution[0]:
                        first.setdefault(execution[1], flow)
                region = _region_after(stats, plane.event_name(xevent.metadata_id), region)
        self.run_hand_off = {run: flow for run, flow in first.items() if run not in repeated}

    def dispatch(self, stats: _Stats, region: int | None) -> int | None:
        """The correlation of a CPU op with these stats, run in `region` (None: no hand-off known): the first
        producer of its execution's hand-off where its run id names one, else of its region's."""
        run = _int_or_none(stats.get("run_id"))
        hand_off = self.run_hand_off.get(run & _RUN_ID_BITS, region) if run is not None else region
        return None if hand_off is None else FLOW_CORRELATION_BASE + _flow_root(hand_off, self.parent)


def _region_after(stats: _Stats, name: str, region: int | None) -> int | None:
    if stats.get("_ct") == _THREAD_POOL_FLOW and (flow := _int_or_none(stats.get("_c"))) is not None:
        return flow
    if name == "ThreadpoolListener::StopRegion":
        return None
    return region


def _flow_root(flow: int, parent: dict[int, int | None]) -> int:
    for _ in range(64):  # chains are a few hand-offs long; the bound guards against a malformed cycle
        up = parent.get(flow)
        if up is None:
            return flow
        flow = up
    return flow


def _str_or_none(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _int_or_none(value: int | float | str | bytes | None) -> int | None:
    """An id as written (protobuf integers as they are: a uint64 correlation id stays one), None for text or a float
    that is not a whole number of at most 64 bits (files.int64: never an int() of 5,000 digits)."""
    if type(value) is int:
        return value
    return int64(value)
