"""PyTorch profiler (Kineto) Chrome-trace events -> an XSpace that TensorBoard's profile plugin (XProf) can show.

Layout follows what XProf's own GPU profiles look like: one "/host:CPU" plane whose lines are the CPU threads, and one
"/device:GPU:N" plane per GPU whose lines are CUDA streams ("Stream #7"), with GPU annotations on a line of their own
per stream. Kineto arguments become event stats; the ones XProf understands get XProf's names (`correlation_id`,
`kernel_details`). This module is pure: events in, protobuf message out (see `write_xspace` for the file).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hloscope.files import int64
from hloscope.trace.kineto import trace_id
from hloscope.trace.steps import StepLocator, step_windows
from hloscope.trace.xplane_proto import xspace_class

HOST_PLANE = "/host:CPU"
# Kineto categories recorded by the GPU (CUPTI/roctracer activities); everything else happened on a CPU thread.
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "mtia_ccp_events"})
# Kineto argument -> XProf stat name, where XProf has a name of its own for the same fact.
STAT_RENAMES = {"correlation": "correlation_id", "External id": "external_id"}


@dataclass
class Conversion:
    """The XSpace plus what did not make it in, by Chrome-trace phase (`ph`), for the user and the tests."""

    xspace: Any
    events: int = 0
    dropped: Counter = field(default_factory=Counter)
    step_ms: list[float] = field(default_factory=list)  # the `ProfilerStep#N` markers' durations, in time order
    memory_records: int = 0  # PyTorch allocation records (`[memory]`), given XProf's memory profile names


@dataclass
class _Line:
    id: int
    name: str
    events: list = field(default_factory=list)  # (start_ns, duration_ps, name, args)


class _Plane:
    def __init__(self, proto: Any):
        self.proto = proto
        self.lines: dict[Any, _Line] = {}
        self._event_ids: dict[str, int] = {}
        self._stat_ids: dict[str, int] = {}

    def line(self, key: Any, name: str) -> _Line:
        if key not in self.lines:
            self.lines[key] = _Line(id=len(self.lines) + 1, name=name)
        return self.lines[key]

    def event_metadata_id(self, name: str) -> int:
        return self._metadata_id(self.proto.event_metadata, self._event_ids, name)

    def stat_metadata_id(self, name: str) -> int:
        return self._metadata_id(self.proto.stat_metadata, self._stat_ids, name)

    @staticmethod
    def _metadata_id(table: Any, ids: dict[str, int], name: str) -> int:
        """The id of `name` in one of the plane's metadata maps, adding it on first use (ids start at 1: 0 means
        "no metadata" to XProf)."""
        if name not in ids:
            ids[name] = len(ids) + 1
            entry = table[ids[name]]
            entry.id, entry.name = ids[name], name
        return ids[name]

    def set_stat(self, message: Any, name: str, value: Any) -> None:
        stat = message.stats.add()
        stat.metadata_id = self.stat_metadata_id(name)
        if isinstance(value, bool):
            stat.int64_value = int(value)
        elif isinstance(value, int) and -(2**63) <= value < 2**63:
            stat.int64_value = value
        elif isinstance(value, float) and math.isfinite(value):
            stat.double_value = value
        elif isinstance(value, str):
            stat.str_value = value
        else:  # lists (shapes, grid sizes), dicts, huge ints: keep them readable
            stat.str_value = json.dumps(value)

    def first_start_ns(self) -> int | None:
        starts = [event[0] for line in self.lines.values() for event in line.events]
        return min(starts) if starts else None

    def finish(self, origin_ns: int) -> None:
        """Write the collected lines into the protobuf: time-ordered events, offsets relative to the line start,
        line starts relative to `origin_ns`."""
        for line in self.lines.values():
            if not line.events:
                continue
            line.events.sort(key=lambda e: (e[0], -e[1]))
            proto_line = self.proto.lines.add()
            proto_line.id = line.id
            proto_line.name = line.name
            start_ns = line.events[0][0]
            proto_line.timestamp_ns = start_ns - origin_ns
            end_ps = 0
            for event_start_ns, duration_ps, name, args in line.events:
                event = proto_line.events.add()
                event.metadata_id = self.event_metadata_id(name)
                event.offset_ps = (event_start_ns - start_ns) * 1000
                event.duration_ps = duration_ps
                end_ps = max(end_ps, event.offset_ps + duration_ps)
                for key, value in args.items():
                    self.set_stat(event, key, value)
            proto_line.duration_ps = end_ps


def kineto_to_xspace(trace: Mapping[str, Any], events: Iterable[Mapping[str, Any]], host: str) -> Conversion:
    """Convert Kineto events (the `traceEvents` items) into an XSpace.

    `trace` holds the trace's top-level fields (`baseTimeNanoseconds`, `deviceProperties`); `host` becomes
    the XSpace's host name. Raises ValueError for an event without a usable time.
    """
    xspace = xspace_class()()
    xspace.hostnames.append(host)
    result = Conversion(xspace=xspace)
    base_ns = int64(trace.get("baseTimeNanoseconds") or 0)
    if base_ns is None:
        raise ValueError("'baseTimeNanoseconds' is not a whole number of nanoseconds that fits 64 bits")
    properties = trace.get("deviceProperties")
    devices: dict[int, Mapping[str, Any]] = {}
    for i, d in enumerate(properties if isinstance(properties, list) else []):
        if isinstance(d, Mapping) and (number := int64(d.get("id", i))) is not None and 0 <= number < 2**31:
            devices[number] = d

    host_plane = _Plane(xspace.planes.add())
    host_plane.proto.id, host_plane.proto.name = 0, HOST_PLANE
    gpu_planes: dict[int, _Plane] = {}
    thread_names: dict[tuple[Any, Any], str] = {}
    process_names: dict[Any, str] = {}

    for index, event in enumerate(events):
        phase = event.get("ph")
        if phase == "M":
            _remember_name(event, thread_names, process_names)
            continue
        if phase not in ("X", "i", "I") or (phase in ("i", "I") and event.get("s") == "g"):
            result.dropped[phase or "?"] += 1
            continue
        try:
            start_ns = base_ns + _us_to_ns(event["ts"])
            duration_ps = max(0, round(float(event.get("dur", 0)) * 1_000_000))
        except (KeyError, TypeError, ValueError, OverflowError):
            raise ValueError(f"event {index} ({event.get('name')!r}) has no finite numeric 'ts'/'dur'") from None
        args = _stats(event)
        category = event.get("cat") or ""
        pid, tid = trace_id(event.get("pid")), trace_id(event.get("tid"))
        if category in GPU_CATEGORIES:
            device = _as_int(args.get("device", pid), default=0)
            plane = gpu_planes.get(device)
            if plane is None:
                plane = gpu_planes[device] = _gpu_plane(xspace, device, devices.get(device))
            stream = trace_id(args.get("stream", tid))
            annotation = category == "gpu_user_annotation"
            line_name = f"Stream #{stream}" + (" annotations" if annotation else "")
            line = plane.line((stream, annotation), line_name)
        else:
            line = host_plane.line((pid, tid), str(tid))
        name = str(event.get("name", ""))
        if name == KINETO_MEMORY_EVENT:
            name = _memory_event(args)
            result.memory_records += 1
        line.events.append((start_ns, duration_ps, name, args))
        result.events += 1

    _name_host_lines(host_plane, thread_names, process_names)
    markers = _add_xprof_grouping(host_plane, gpu_planes)
    _add_peak_memory(host_plane)
    result.step_ms = [(end - start) / 1e6 for _, start, end in sorted(markers, key=lambda m: m[1])]
    planes = [host_plane, *gpu_planes.values()]
    # Times start at 0, as in JAX's own xplanes: XProf computes in picoseconds, and Kineto's wall-clock nanoseconds
    # (~1.8e18) times 1000 overflow 64 bits. The wall-clock start is kept as a stat of the host plane.
    starts = [start for start in (plane.first_start_ns() for plane in planes) if start is not None]
    origin_ns = min(starts, default=0)
    if starts:
        host_plane.set_stat(host_plane.proto, "kineto_start_time_ns", origin_ns)
    for plane in planes:
        plane.finish(origin_ns)
    return result


# XProf's derived "Steps" line on a device plane (tsl's kThreadIdStepInfo): its events, one per step with `group_id`,
# are the device step markers XProf's step database is built from. tsl declares it `constexpr int = 0xdeadbeef`, so
# as the int64 line id it is compared with, it is negative.
STEPS_LINE_ID = 0xDEADBEEF - 2**32
# Host events that launch device work: the kernel's step is the step of its launch.
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime"})


def _step_number(name: str) -> int | None:
    if name.startswith("ProfilerStep#"):
        return int64(name[len("ProfilerStep#") :])  # None also for a number beyond 64 bits: not a step
    return None


def tf_op_fullname(op: str) -> str:
    """XProf's `tf_op` stat for a PyTorch op: the op's own name. XProf parses it as "name:type" split at the first ':';
    `aten::mm` is neither a TensorFlow nor a JAX op type, so XProf keeps the whole string as the op name with an
    unknown type (its tables show `aten::mm`, type "Unknown")."""
    return op


def _add_xprof_grouping(host_plane: _Plane, gpu_planes: dict[int, _Plane]) -> list[tuple[int, float, float]]:
    """Add the stats XProf's step, op and kernel tools read, as its own grouping pass would have written them; returns
    the step markers found, (number, start ns, end ns).

    XProf groups events into steps only when no plane has a `group_id` stat yet (tsl's IsXSpaceGrouped), from
    TensorFlow/JAX root events PyTorch does not write; so the grouping is done here, the way `hloscope trace stats`
    assigns steps (hloscope/trace/steps.py):
    - every `ProfilerStep#N` gets `group_id` N and `step_name` "ProfilerStep#N" (XProf's implicit host step marker;
      its trace viewer draws an event under its `step_name`, so the marker keeps its own name there); every host event
      that starts inside a step's marker gets that step's `group_id` (host-only traces: XProf's step is the marker);
    - a device event gets the `group_id` of the step in which its launch (same `correlation_id`) started, or, without
      a launch record, of the last step that started before it; each GPU plane gets a "Steps" line (XProf's derived
      step line) with one event per step spanning that step's device events (GPU traces: XProf's step time);
    - `tf_op` ("name:type", see `tf_op_fullname`) on every `cpu_op` event (framework op stats' host side) and on
      every device event: the innermost `cpu_op` around its launch on the launching thread (device side, op profile,
      kernel stats' op name).
    """
    markers: list[tuple[int, float, float]] = []
    for line in host_plane.lines.values():
        for start, duration_ps, name, _ in line.events:
            number = _step_number(name)
            if number is not None:
                markers.append((number, start, start + duration_ps // 1000))
    windows = step_windows(markers)
    locator = StepLocator(windows)
    launches: dict[int, tuple[int, str | None]] = {}  # correlation id -> (launch start ns, innermost cpu_op)
    for line in host_plane.lines.values():
        _group_host_line(line, windows, locator, launches)
    for plane in gpu_planes.values():
        _group_device_plane(plane, windows, locator, launches)
    return markers


def _group_host_line(line: Any, windows: list, locator: Any, launches: dict[int, tuple[int, str | None]]) -> None:
    """A host line's step marker stats, each event's step, `tf_op` on cpu_ops, and each launch's innermost cpu_op
    (into `launches`, by correlation id)."""
    ops: list[tuple[int, str]] = []  # stack of open cpu_ops: (end ns, name)
    for start, duration_ps, name, args in sorted(line.events, key=lambda e: (e[0], -e[1])):
        number = _step_number(name)
        if number is not None:
            args["group_id"] = number
            args["step_name"] = name  # the trace viewer shows this name; the step number is the group_id
        elif windows:
            step = locator.index_at(start)
            if step is not None:
                args["group_id"] = windows[step].number
        while ops and ops[-1][0] <= start:
            ops.pop()
        category = args.get("kineto_category")
        if category == "cpu_op":
            args["tf_op"] = tf_op_fullname(name)
            ops.append((start + duration_ps // 1000, name))
        elif category in LAUNCH_CATEGORIES:
            correlation = args.get("correlation_id")
            if isinstance(correlation, int) and correlation > 0:
                launches[correlation] = (start, ops[-1][1] if ops else None)


def _group_device_plane(plane: _Plane, windows: list, locator: Any,
                        launches: dict[int, tuple[int, str | None]]) -> None:
    """Each device event's `tf_op` (its launch's cpu_op) and step (its launch's, else the last step started before
    it), and the plane's "Steps" line spanning each step's device events."""
    spans: dict[int, list[int]] = {}  # step number -> [first start ns, last end ns]
    for line in plane.lines.values():
        for start, duration_ps, _, args in line.events:
            if args.get("kineto_category") == "gpu_user_annotation":
                continue
            launch = launches.get(args.get("correlation_id"))
            if launch is not None and launch[1] is not None:
                args["tf_op"] = tf_op_fullname(launch[1])
            if not windows:
                continue
            step = locator.index_at(launch[0]) if launch is not None else None
            if step is None:
                step = locator.last_started(start)
            if step is None:
                continue
            number = windows[step].number
            args["group_id"] = number
            end = start + duration_ps // 1000
            span = spans.setdefault(number, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
    if spans:
        steps = plane.line("xprof steps", "Steps")
        steps.id = STEPS_LINE_ID
        for number, (start, end) in sorted(spans.items()):
            steps.events.append((start, (end - start) * 1000, str(number), {"group_id": number}))


# PyTorch's allocation records (`profile_memory=True`): instant events named "[memory]" whose `Bytes` is positive for an
# allocation and negative for a free, with the allocator's totals after it. XProf's memory profile reads host events
# named MemoryAllocation / MemoryDeallocation with its allocator stats (xprof xplane_to_memory_profile.cc).
KINETO_MEMORY_EVENT = "[memory]"
MEMORY_ALLOCATION, MEMORY_DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"


def _memory_event(args: dict[str, Any]) -> str:
    """Give a Kineto allocation record XProf's name and stats (Kineto's own arguments stay as they are); returns the
    event's name. The allocator is the device (`cpu`, `cuda:0`); `peak_bytes_in_use` is added by _add_peak_memory."""
    size = _as_int(args.get("Bytes"), default=0)
    device_type = _as_int(args.get("Device Type"), default=0)  # c10::DeviceType: 0 CPU, 1 CUDA
    device = _as_int(args.get("Device Id"), default=-1)
    args["allocator_name"] = "cpu" if device_type == 0 else f"{'cuda' if device_type == 1 else device_type}:{device}"
    args["bytes_allocated"] = _as_int(args.get("Total Allocated"), default=0)
    args["bytes_reserved"] = _as_int(args.get("Total Reserved"), default=0)
    args["requested_bytes"] = args["allocation_bytes"] = abs(size)
    address = _as_int(args.get("Addr"), default=0)
    if 0 <= address < 2**63:
        args["addr"] = address
    return MEMORY_ALLOCATION if size >= 0 else MEMORY_DEALLOCATION


def _add_peak_memory(host_plane: _Plane) -> None:
    """`peak_bytes_in_use` on each allocation record: the most each allocator held so far, in time order."""
    records = sorted(((start, args) for line in host_plane.lines.values() for start, _, name, args in line.events
                      if name in (MEMORY_ALLOCATION, MEMORY_DEALLOCATION)), key=lambda record: record[0])
    peaks: dict[str, int] = {}
    for _, args in records:
        allocator = args["allocator_name"]
        peaks[allocator] = max(peaks.get(allocator, 0), args["bytes_allocated"])
        args["peak_bytes_in_use"] = peaks[allocator]


def _remember_name(event: Mapping[str, Any], threads: dict, processes: dict) -> None:
    name = (event.get("args") or {}).get("name")
    if name is None:
        return
    if event.get("name") == "thread_name":
        threads[(trace_id(event.get("pid")), trace_id(event.get("tid")))] = str(name)
    elif event.get("name") == "process_name":
        processes[trace_id(event.get("pid"))] = str(name)


def _name_host_lines(plane: _Plane, threads: dict, processes: dict) -> None:
    """Thread lines get Kineto's thread names; with several processes, the process goes in front."""
    pids = {pid for pid, _ in plane.lines}
    for (pid, tid), line in plane.lines.items():
        name = threads.get((pid, tid), f"thread {tid}" if isinstance(tid, int) else str(tid))
        if len(pids) > 1:
            name = f"{processes.get(pid, pid)}/{name}"
        line.name = name


def _stats(event: Mapping[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {str(key): value for key, value in (event.get("args") or {}).items()}
    stats = {STAT_RENAMES.get(key, key): value for key, value in args.items()}
    if event.get("cat"):
        stats["kineto_category"] = event["cat"]
    if event.get("cat") == "kernel":
        details = _kernel_details(args)
        if details:
            stats["kernel_details"] = details
    name = str(event.get("name", ""))
    step = _step_number(name)
    if step is not None:
        stats["step_num"] = step
    return stats


def _kernel_details(args: Mapping[str, Any]) -> str:
    """XProf's kernel launch summary (`regs:R grid:X,Y,Z block:X,Y,Z ...`) from Kineto's kernel arguments.

    Kineto reports one `shared memory` figure (static plus dynamic), so it is given as static_shared with
    dynamic_shared 0; XProf only adds them up.
    """
    parts = []
    if "registers per thread" in args:
        parts.append(f"regs:{_as_int(args['registers per thread'])}")
    if "shared memory" in args:
        parts.append(f"static_shared:{_as_int(args['shared memory'])} dynamic_shared:0")
    for key in ("grid", "block"):
        dims = args.get(key)
        if isinstance(dims, list) and dims:
            parts.append(f"{key}:" + ",".join(str(_as_int(d)) for d in dims))
    if "est. achieved occupancy %" in args:
        parts.append(f"occ_pct:{float(args['est. achieved occupancy %']):.1f}")
    return " ".join(parts)


def _gpu_plane(xspace: Any, device: int, properties: Mapping[str, Any] | None) -> _Plane:
    plane = _Plane(xspace.planes.add())
    plane.proto.id, plane.proto.name = device + 1, f"/device:GPU:{device}"
    if properties:
        vendor = _vendor(str(properties.get("name", "")))
        if vendor:
            plane.set_stat(plane.proto, "device_vendor", vendor)
        # Plane stats under the names XProf's GPU profiles use (see a CUPTI xplane's /device:GPU:N plane).
        for kineto_key, xprof_name in (
            ("name", "device_name"),
            ("computeMajor", "compute_cap_major"),
            ("computeMinor", "compute_cap_minor"),
            ("numSms", "core_count"),
            ("totalGlobalMem", "memory_size"),
        ):
            if kineto_key in properties:
                plane.set_stat(plane.proto, xprof_name, properties[kineto_key])
    return plane


def _vendor(device_name: str) -> str | None:
    """XProf's `device_vendor` values ("Nvidia", "AMD") from the device name Kineto reports."""
    upper = device_name.upper()
    if "NVIDIA" in upper or upper.startswith(("TESLA", "QUADRO", "GEFORCE")):
        return "Nvidia"
    if "AMD" in upper or "INSTINCT" in upper or "RADEON" in upper:
        return "AMD"
    return None


def _us_to_ns(microseconds: Any) -> int:
    """Kineto's float microseconds as exact integer nanoseconds (wall-clock values need more than a double's digits)."""
    value = float(microseconds)
    whole = math.floor(value)
    return int(whole) * 1000 + round((value - whole) * 1000)


def _as_int(value: Any, default: int = 0) -> int:
    """A number from the trace as an int64; `default` for anything else (files.int64: never int() of 5,000 digits)."""
    number = int64(value)
    return default if number is None else number
