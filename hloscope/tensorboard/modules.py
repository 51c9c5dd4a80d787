"""Keep, in an xplane's list of XLA modules, only those that ran in the profiled steps.

XProf's graph viewer and memory viewer offer every module whose HLO the profile holds: the `/host:metadata` plane has
one event metadata per compiled program (`jit_train_step(150)`, with its `Hlo Proto` and `program_id` stats), and XProf
writes each as `<module>.hlo_proto.pb` into the session directory, then lists those files sorted by name
(xprof/profile_plugin.py `hlo_module_list_impl`). A JAX program can compile many small programs besides its step
inside the profiling window (Flax's eager initialisation compiles ~75: `jit_add(112)`, `jit__truncated_normal(20)`...;
hloscope's runs jit it, and still seed the PRNG and convert the state outside the step), so the train step can be one
entry among dozens. The list cannot be reordered (XProf sorts it), but it follows what the xplane holds, so the
view's copy of the xplane keeps only the programs with an XLA op execution inside a step (from a step marker's start to
the next one's, as `trace stats` counts steps). Everything else of the xplane is unchanged. Without step markers or XLA
executions inside steps, nothing is filtered.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hloscope.files import int64
from hloscope.trace.xplane_proto import xspace_class

METADATA_PLANE = "/host:metadata"
STEP_MARKERS = ("train_step", "StepMarker")  # hloscope's step annotation (jax.profiler.StepTraceAnnotation, xp.StepTrace)


@dataclass
class ModuleFilter:
    kept: list[str] = field(default_factory=list)  # program names kept, e.g. "jit_train_step(150)"
    dropped: int = 0  # programs left out


def _stats(plane, holder) -> dict:
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    out = {}
    for stat in holder.stats:
        kind = stat.WhichOneof("value")
        value = getattr(stat, kind) if kind else None
        if kind == "ref_value":
            value = names.get(value, value)
        out[names.get(stat.metadata_id, str(stat.metadata_id))] = value
    return out


def _timed_events(space) -> Iterator[tuple[Any, Any, Any, int]]:
    """(plane, event, its metadata or None, start in ps) of every event outside the metadata plane."""
    for plane in space.planes:
        if plane.name == METADATA_PLANE:
            continue
        metadata = plane.event_metadata
        for line in plane.lines:
            base_ps = line.timestamp_ns * 1000
            for event in line.events:
                yield plane, event, metadata.get(event.metadata_id), base_ps + event.offset_ps


def programs_in_steps(space) -> set[int]:
    """Program ids of the XLA ops that started inside a profiled step (XLA ops: events named after their `hlo_op`)."""
    markers: list[float] = []
    ops: list[tuple[float, int]] = []
    for plane, event, meta, start in _timed_events(space):
        name = meta.name if meta is not None else ""
        if name in STEP_MARKERS:
            markers.append(start)
            continue
        stats = _stats(plane, event)
        if meta is not None:
            stats = {**_stats(plane, meta), **stats}
        program = int64(stats.get("program_id"))
        if program is not None and stats.get("hlo_op") == name:
            ops.append((start, program))
    if not markers:
        return set()
    markers.sort()
    return {program for start, program in ops if bisect.bisect_right(markers, start) > 0}


def keep_step_modules(source: Path, target: Path) -> ModuleFilter | None:
    """Write `source` (an xplane.pb) to `target` with only the programs that ran in the profiled steps in its metadata
    plane; None (nothing written) when there is nothing to leave out or nothing to keep."""
    space = xspace_class()()
    space.ParseFromString(source.read_bytes())
    result = keep_step_modules_in(space)
    if result is not None:
        target.write_bytes(space.SerializeToString())
    return result


def keep_step_modules_in(space) -> ModuleFilter | None:
    """Drop from the space's metadata plane the programs that did not run in the profiled steps; None (the space
    unchanged) when there is nothing to leave out or nothing to keep."""
    metadata = next((p for p in space.planes if p.name == METADATA_PLANE), None)
    if metadata is None or len(metadata.event_metadata) < 2:
        return None
    ran = programs_in_steps(space)
    if not ran:
        return None
    keep: list[int] = []
    drop: list[int] = []
    for key, meta in metadata.event_metadata.items():
        program = int64(_stats(metadata, meta).get("program_id"))
        (keep if program is not None and program in ran else drop).append(key)
    if not keep or not drop:
        return None
    result = ModuleFilter(kept=sorted(metadata.event_metadata[k].name for k in keep), dropped=len(drop))
    for key in drop:
        del metadata.event_metadata[key]
    return result


def step_marker_ms(space) -> list[float]:
    """The durations (ms) of the space's step markers, in time order: hloscope's `train_step` annotations of an XLA
    run (jax.profiler.StepTraceAnnotation, xp.StepTrace), or torch_xla's `StepMarker` events when there is none
    (torch_xla writes both: counting both would count each step twice)."""
    found: dict[str, list[tuple[int, float]]] = {name: [] for name in STEP_MARKERS}
    for _, event, meta, start in _timed_events(space):
        if meta is not None and meta.name in found:
            found[meta.name].append((start, event.duration_ps / 1e9))
    markers = next((found[name] for name in STEP_MARKERS if found[name]), [])
    return [ms for _, ms in sorted(markers)]
