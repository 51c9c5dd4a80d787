"""Read an xplane.pb (XSpace) from JAX, PyTorch/XLA, TensorFlow or XProf into `Event`s.

Decoding is done by XLA's own reader, `jax.profiler.ProfileData` (its class lives in jaxlib, imported directly so that
reading a trace does not import all of JAX). Planes named "/device:..." are devices, "/host:CPU" is the host.

Which rows are device executions:
- GPU planes: the "Stream #N" lines (kernels, and memcpy/memset by name); the other lines ("XLA Ops", "XLA Modules",
  "TensorFlow Ops", name scopes) are derived views of the same time and are kept as annotations, never counted twice.
- TPU and other device planes: the "XLA Ops" line. Op names there are HLO text ("%fusion.3 = f32[...] fusion(...)"):
  the event gets the instruction name, and its module from the enclosing "XLA Modules" event.
- Host threads: an event named after its own `hlo_op` stat is XLA's CPU runtime executing that op (the CPU is the
  device), e.g. `wrapped_tanh` or `loop_add_fusion` on a `tf_XLAEigen` / `tf_XLAPjRtCpuClient` thread.
"""

from __future__ import annotations

import bisect
import os
import re
from pathlib import Path

from hloscope.errors import InputError, MissingDependency
from hloscope.trace.categories import category_for
from hloscope.trace.model import ANNOTATION, HOST_OP, KERNEL, MEMCPY, MEMSET, RUNTIME, STEP, Event

# `<name> = <shape> <opcode>(` in TPU op names; the shape may be a tuple "(f32[..], f32[..])".
_HLO_TEXT = re.compile(r"^%?(?P<name>[^\s=]+) = (?:\([^=]*?\)|\S+) (?P<opcode>[\w-]+)\(")
_MODULE_SUFFIX = re.compile(r"\(\d+\)$")  # "jit_step(123456)" -> "jit_step"
_LAUNCH = re.compile(r"launch|cuGraphLaunch|cudaGraphLaunch", re.IGNORECASE)


def _profile_data_class():
    try:
        from jaxlib import _profile_data  # what jax.profiler.ProfileData is, without importing jax

        return _profile_data.ProfileData
    except ImportError:
        try:
            from jax.profiler import ProfileData
        except ImportError as error:
            raise MissingDependency("jaxlib", "to read xplane.pb profiles") from error
        return ProfileData


def read_xplane(path: str | os.PathLike) -> list[Event]:
    """All events of an xplane.pb; raises InputError for empty, truncated, corrupt or non-xplane files."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise InputError(path, "no such file") from error
    except IsADirectoryError as error:
        raise InputError(path, "is a directory, not a trace file") from error
    except OSError as error:
        raise InputError(path, f"cannot read: {error.strerror or error}") from error
    if not data:
        raise InputError(path, "empty file: not an xplane.pb profile")
    try:
        space = _profile_data_class().from_serialized_xspace(data)
    except (RuntimeError, ValueError) as error:
        raise InputError(path, "not a valid xplane.pb (XSpace protobuf): truncated or corrupt") from error
    planes = list(space.planes)
    if not any(plane.name.startswith(("/device:", "/host:")) for plane in planes):
        raise InputError(path, "not an xplane.pb profile: it has no /device: or /host: planes")
    events: list[Event] = []
    for plane in planes:
        if plane.name.startswith("/device:"):
            events.extend(_device_plane_events(plane))
        elif plane.name.startswith("/host:"):
            events.extend(_host_plane_events(plane))
    return events


def _stats(xevent) -> dict:
    return dict(xevent.stats)


def _device_plane_events(plane) -> list[Event]:
    plane_name = plane.name
    is_gpu = "GPU" in plane_name
    out: list[Event] = []
    modules: list[tuple[float, float, str]] = []  # (start, end, module) from the "XLA Modules" line
    ops_needing_module: list[Event] = []
    for line in plane.lines:
        line_name = line.name
        if is_gpu:
            executes = line_name.startswith("Stream")
        else:
            executes = line_name == "XLA Ops"
        for xevent in line.events:
            stats = _stats(xevent)
            name = xevent.name
            start = xevent.start_ns / 1000.0
            duration = xevent.duration_ns / 1000.0
            hlo_op = _str_or_none(stats.get("hlo_op"))
            step = None
            if executes:
                kind = _exec_kind(name)
                opcode = None
                parsed = _HLO_TEXT.match(name) if name.startswith("%") else None
                if parsed:
                    name, opcode = parsed.group("name"), parsed.group("opcode")
                    hlo_op = hlo_op or name
                category = category_for(opcode or name, kind) if opcode is None else _opcode_category(name, opcode)
            else:
                kind = ANNOTATION
                category = category_for(name, kind)
                if line_name == "Steps":
                    kind, step = STEP, _int_or_none(stats.get("step_name", name))
                elif line_name == "XLA Modules":
                    modules.append((start, start + duration, _MODULE_SUFFIX.sub("", name)))
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
                correlation=_int_or_none(stats.get("correlation_id")),
            )
            if executes and event.hlo_module is None:
                ops_needing_module.append(event)
            out.append(event)
    _attach_modules(ops_needing_module, modules)
    return out


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


def _exec_kind(name: str) -> str:
    lowered = name.lower()
    if lowered.startswith("memset"):
        return MEMSET
    if lowered.startswith("memcpy"):
        return MEMCPY
    return KERNEL


def _host_plane_events(plane) -> list[Event]:
    out: list[Event] = []
    plane_name = plane.name
    for line in plane.lines:
        line_name = line.name
        for xevent in line.events:
            stats = _stats(xevent)
            name = xevent.name
            hlo_op = _str_or_none(stats.get("hlo_op"))
            correlation = _int_or_none(stats.get("correlation_id"))
            device = False
            step = None
            if hlo_op is not None and hlo_op == name:
                kind, device = KERNEL, True  # XLA's CPU runtime executing an op
            elif correlation is not None and _LAUNCH.search(name):
                kind = RUNTIME
            elif "step_num" in stats:
                kind, step = STEP, _int_or_none(stats["step_num"])
            else:
                kind = HOST_OP
            out.append(
                Event(
                    name=name,
                    start_us=xevent.start_ns / 1000.0,
                    dur_us=xevent.duration_ns / 1000.0,
                    kind=kind,
                    device=device,
                    lane=line_name,
                    process=plane_name,
                    category=category_for(name, kind),
                    step=step,
                    hlo_op=hlo_op,
                    hlo_module=_str_or_none(stats.get("hlo_module")),
                    correlation=correlation,
                )
            )
    return out


def _str_or_none(value) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _int_or_none(value) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
