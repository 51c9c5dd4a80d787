"""Each profiled step split into measured parts: what the device did (by category and by op group) and, while it was
idle, what the host was doing (by named cause). The explain ledger is built from these per-step parts.

One step lasts from its marker's start to the next step's start: the loop's period, which is what the timed steps
measure (the host's work between markers included). Busy time is the union of the device executions clipped to that
window, so that per step `busy + idle == step` exactly and no device time falls between steps. Counts and the op
table take each execution in the step it started in. On a device that runs several ops at once (XLA's CPU thread pool,
GPU streams), each category's share of the busy time is apportioned by its summed op durations, except the
collectives' exposed part (collectives running with no other device work beside them), which is its own node.

Idle time is attributed to the host activity that covers it, first match wins: the input pipeline, compilation,
graph tracing and sync (PyTorch/XLA), Python before the graph sync (PyTorch/XLA), runtime dispatch (PjRt execute,
kernel launches), framework (aten) ops, the autograd engine and optimizer outside aten ops, torch.compile's generated
code, then "other host" (Python not named in the trace, the profiler).
With no device executions at all (PyTorch on the CPU) the host does the work: its step splits into the input
pipeline, time inside framework ops, and the rest (Python, autograd, optimizer glue).

Where the run measured how its main thread was scheduled (run.json `profile.host_scheduling`, Linux schedstat), the
time that thread was runnable but waiting for a CPU is taken out of the host time it inflated (the annotated phase it
lay in, else the unnamed rest, then dispatch and the other named causes) into a contention node: see
`split_contention`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from hloscope.trace.model import COLLECTIVE, STEP, Event
from hloscope.trace.steps import exposed_time, interval_length, merge_intervals, subtract_intervals

# Host-side causes of device idle time, in the order they claim it. Names: hloscope's own annotations
# (backends: hloscope/input, hloscope/sync), PyTorch's DataLoader records, torch_xla's and XLA's own TraceMe names.
HOST_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("input pipeline", re.compile(r"^hloscope/input|DataLoader|dataloader|__next__|^data[_ ]?load", re.IGNORECASE)),
    # Compiling, not running compiled code ("CompiledFunction", "Torch-Compiled Region" run inductor's output).
    ("compilation", re.compile(r"(^|[^A-Za-z])[Cc]ompile(?![d])|XlaCompile|PjRtCompile|CompileTime|BackendCompile"
                               r"|autotun|lower_jaxpr|backend_compile|compile_fx")),
    ("graph tracing and sync", re.compile(
        r"^hloscope/sync|SyncTensors|SyncLiveTensors|XLAGraphExecutor|XlaGraphExecutor|LazyGraph|MarkStep|mark_step"
        r"|^StepMarker$|CollectSyncTensors|ExtractIRAndPrepareXlaData|RunPostOrder|TensorCollectionBarrier"
        r"|ExecuteComputationWithBarrier|DeviceBarrier|torch_xla", re.IGNORECASE)),
    ("runtime dispatch", re.compile(
        r"PjRt|pjrt|ExecuteComputation|ExecuteReplicated|ExecuteHelper|ExecuteSharded|TransferToDevice"
        r"|TransferFromDevice|cudaLaunch|cuLaunch|hipLaunch|hipModuleLaunch|cudaMemcpy|hipMemcpy", re.IGNORECASE)),
    ("framework ops", re.compile(r"^aten::")),
    # c10d's collectives as PyTorch records them (record_param_comms): gloo's run on its own thread, on the CPU
    ("collectives", re.compile(r"^(gloo|nccl|mpi|ucc):")),
    ("autograd and optimizer", re.compile(r"^autograd::|^torch::autograd|^Optimizer\.|^torch::")),
    # torch.compile's generated code (inductor's kernels, outside the aten ops it still calls).
    ("compiled graphs", re.compile(r"CompiledFxGraph|CompiledFunction|Torch-Compiled Region")),
)
# The part of a step's collectives that no other device work overlaps (device:collective/communication is the rest)
EXPOSED_COLLECTIVES = f"device:{COLLECTIVE}, exposed"
OTHER_HOST = "other host"
FRAMEWORK_OPS = "framework ops"
# The part of the unnamed host time the main thread spent runnable but waiting for a core (split_contention).
CONTENTION = "idle:host waiting for a CPU (contention)"
HOST_CONTENTION = "host:waiting for a CPU (contention)"
# Host annotations that are not work: the step markers themselves, hloscope's device wait, profiler bookkeeping.
_NOT_HOST_WORK = re.compile(
    r"^ProfilerStep#|^hloscope/wait|^hloscope/step|StepTrace|^\$|^Step ?#?\d+$|profiler|^Wait for|ThreadpoolListener", re.IGNORECASE)
# PyTorch/XLA: the host runs the model's Python (building the lazy graph, or dynamo's guards) before it syncs the
# graph; when a step has a sync, the time from the step's start to the first sync is that work.
BEFORE_SYNC = "Python before the graph sync (lazy tracing, dynamo)"
_SYNC = re.compile(r"^hloscope/sync|^StepMarker$|^SyncLiveTensorsGraph$|^SyncTensorsGraph$|^ExecuteComputationWithBarrier$")
# The order in which host causes claim idle time.
CAUSE_ORDER = ("input pipeline", "compilation", "graph tracing and sync", BEFORE_SYNC, "runtime dispatch",
               "framework ops", "collectives", "autograd and optimizer", "compiled graphs")
# Nodes of a host-only step (no device executions).
HOST_WORK_NODES = {"input pipeline": "input pipeline", "framework ops": "inside framework ops",
                   "autograd and optimizer": "autograd engine and optimizer, outside aten ops",
                   "compiled graphs": "inside compiled graphs, outside aten ops", OTHER_HOST: "outside framework ops",
                   # gloo's collectives while no aten op computes: the exposed communication of DDP on the CPU
                   "collectives": "collectives (gloo / NCCL), outside framework ops"}


@dataclass
class OpSample:
    """One op group in one step: its calls and their durations (seconds)."""

    calls: int = 0
    seconds: float = 0.0
    durations: list[float] = field(default_factory=list)


@dataclass
class StepParts:
    """One profiled step, in seconds. `nodes` add up to `step_s` exactly."""

    number: int
    step_s: float
    busy_s: float
    nodes: dict[str, float]  # "device:<category>" / "idle:<host cause>" / "host:<part>" -> seconds
    ops: dict[str, OpSample]  # op group -> what ran of it
    executions: dict[str, int]  # device category -> executions (kernels, XLA ops, copies) in this step
    framework_ops: int  # framework (aten::*) ops the host ran, nested ones included
    # Time with a collective running (union): on the device, or gloo's / NCCL's host records on a host-only trace;
    # and its exposed part (no other device work beside it; on a host-only trace, no framework op)
    collective_s: float = 0.0
    collective_exposed_s: float = 0.0


@dataclass
class StepProfile:
    """Every profiled step of one trace; `kept` are the indices used for per-op and per-node statistics."""

    steps: list[StepParts]
    kept: list[int]
    dropped: dict[int, str]  # step index -> why ("profiler warm-up", "outlier: busy 3.4 ms vs median 1.9 ms")
    device: bool  # whether the trace has device executions (else the host did the work)

    def kept_steps(self) -> list[StepParts]:
        return [self.steps[i] for i in self.kept]


def default_op_group(event: Event) -> str:
    """Op group of a device execution or host op without program metadata: its name without instance numbers
    (`fusion.12` -> `fusion`, `loop_add_fusion_3` -> `loop_add_fusion`), kernel names cut at their arguments."""
    name = (event.hlo_op or event.name).split("(", 1)[0]
    name = re.sub(r"([._]\d+)+$", "", name)
    return name[:120]


@dataclass
class _StepEvents:
    """One pass over a trace's events, each filed under the step whose marker started last before it."""

    device: list[tuple[float, float, str]]  # every device execution: (start, end, category)
    counts: list[dict[str, int]]  # per step: category -> executions
    ops: list[dict[str, OpSample]]  # per step: op group -> its device executions
    host: list[dict[str, list[tuple[float, float]]]]  # per step: host cause -> intervals
    aten: list[list[tuple[float, float, str, str]]]  # per step: PyTorch ops (start, end, lane, name)
    last_step_device_end: float = 0.0  # where the last step's device work ends


def _sort_events(events: Iterable[Event], starts: list[float], category_of: Callable[[Event], str],
                 op_group_of: Callable[[Event], str]) -> _StepEvents:
    n = len(starts)
    seen = _StepEvents([], [{} for _ in range(n)], [{} for _ in range(n)], [{} for _ in range(n)], [[] for _ in range(n)])
    for event in events:
        index = bisect.bisect_right(starts, event.start_us) - 1
        if index < 0:
            continue
        if event.is_device_exec:
            category = category_of(event)
            seen.device.append((event.start_us, event.end_us, category))
            seen.counts[index][category] = seen.counts[index].get(category, 0) + 1
            _add_op(seen.ops[index], op_group_of(event), event.dur_us)
            if index == n - 1:
                seen.last_step_device_end = max(seen.last_step_device_end, event.end_us)
        elif not event.device and event.kind != STEP and event.dur_us > 0 and not _NOT_HOST_WORK.search(event.name):
            host = seen.host[index]
            if _SYNC.search(event.name):
                first = host.get(BEFORE_SYNC)
                if first is None or event.start_us < first[0][1]:
                    host[BEFORE_SYNC] = [(starts[index], event.start_us)]
            cause = _host_cause(event.name)
            if cause is not None:
                host.setdefault(cause, []).append((event.start_us, event.end_us))
            if event.name.startswith("aten::"):
                seen.aten[index].append((event.start_us, event.end_us, event.lane + event.process, event.name))
    return seen


def step_parts(
    events: Iterable[Event],
    windows: list[tuple[int, float, float]],
    category_of: Callable[[Event], str] | None = None,
    op_group_of: Callable[[Event], str] | None = None,
) -> list[StepParts]:
    """Split each step into measured parts, from one pass over the events. `windows` are the step markers
    (number, start_us, end_us); a step lasts from its marker's start to the next step's start (the loop's period, as
    the timed steps measure it), the last one to its marker's end or the end of the device work it started."""
    category_of = category_of or (lambda event: event.category)
    op_group_of = op_group_of or default_op_group
    windows = sorted(windows, key=lambda w: w[1])
    starts = [w[1] for w in windows]
    n = len(windows)
    seen = _sort_events(events, starts, category_of, op_group_of)
    device, counts, ops, host, aten = seen.device, seen.counts, seen.ops, seen.host, seen.aten
    last_end = max(windows[-1][2], seen.last_step_device_end) if windows else 0.0
    ends = [*starts[1:], last_end]
    # Device time inside each step: every execution clipped to the steps it overlaps.
    intervals: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    collective: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    by_category: list[dict[str, float]] = [{} for _ in range(n)]
    for begin, finish, category in device:
        index = max(0, bisect.bisect_right(starts, begin) - 1)
        while index < n and starts[index] < finish:
            s, e = max(begin, starts[index]), min(finish, ends[index])
            if e > s:
                (collective if category == COLLECTIVE else intervals)[index].append((s, e))
                by_category[index][category] = by_category[index].get(category, 0.0) + (e - s)
            index += 1
    any_device = bool(device)
    out = []
    for index, (number, start, _) in enumerate(windows):
        end = ends[index]
        merged = merge_intervals(intervals[index] + collective[index])
        busy = interval_length(merged)
        nodes: dict[str, float] = {}
        # Collectives with nothing else running are exposed communication, a node of their own; the rest of the busy
        # time is shared by the categories' summed durations (the collectives' less their exposed part).
        exposed = exposed_time(collective[index], intervals[index])
        shares = dict(by_category[index])
        if exposed > 0:
            shares[COLLECTIVE] = max(0.0, shares[COLLECTIVE] - exposed)
            nodes[EXPOSED_COLLECTIVES] = exposed / 1e6
        total_durations = sum(shares.values())
        for category, duration in sorted(shares.items()):
            nodes[f"device:{category}"] = (busy - exposed) * duration / total_durations / 1e6 if total_durations else 0.0
        remaining = _complement(merged, start, end)
        prefix = "idle" if any_device else "host"
        for cause in CAUSE_ORDER:
            covered = _intersection(remaining, merge_intervals(_clip(host[index].get(cause, []), start, end)))
            if covered:
                nodes[f"{prefix}:{_host_node(cause, any_device)}"] = interval_length(covered) / 1e6
                remaining = subtract_intervals(remaining, covered)
        nodes[f"{prefix}:{_host_node(OTHER_HOST, any_device)}"] = interval_length(remaining) / 1e6
        if any_device:
            communication = (interval_length(merge_intervals(collective[index])), exposed)
        else:
            communication = (interval_length(merge_intervals(_clip(host[index].get("collectives", []), start, end))),
                             nodes.get(f"host:{HOST_WORK_NODES['collectives']}", 0.0) * 1e6)
        if not any_device:
            for name, seconds in _top_level_ops(_clip4(aten[index], start, end)):
                sample = ops[index].setdefault(name, OpSample())
                sample.calls += len(seconds)
                sample.seconds += sum(seconds)
                sample.durations.extend(seconds)
        out.append(StepParts(number, (end - start) / 1e6, busy / 1e6, nodes, ops[index], counts[index],
                             len(aten[index]), communication[0] / 1e6, communication[1] / 1e6))
    return out


def split_contention(parts: list[StepParts], waiting_s: dict[int, float],
                     phase_waiting_s: dict[int, dict[str, float]] | None = None) -> None:
    """Move each step's CPU contention out of the host time it inflated, in place. `waiting_s`: step number -> seconds
    the thread running the step was runnable but not running (schedstat's run-queue wait, measured by the run between
    the step markers); `phase_waiting_s`: step number -> {host annotation name: seconds of that wait inside it} where
    the run measured it (run.json `profile.host_scheduling[].phases`). The nodes still add up to the step.

    - A wait inside an annotation (hloscope/input, hloscope/sync, hloscope/wait) leaves the node of the cause that
      annotation names (the input pipeline's; hloscope/wait's is the unnamed host time), up to that node's time: the
      rest of it overlapped device work and delayed nothing.
    - The rest of the wait lay outside them, in the host's dispatch and Python: it leaves the unnamed host time
      first, then the named causes outside the annotations (runtime dispatch, framework ops, autograd...), each in
      proportion to its time, since the trace cannot say in which of them the thread was preempted. A thread preempted
      for 12 ms inside PjRt's execute call is contention, not 12 ms of dispatch.
    - Without per-annotation figures (runs from before they were measured) the whole wait is assumed to lie in the
      unnamed host time and is capped by it."""
    for part in parts:
        waiting = waiting_s.get(part.number)
        if not waiting or waiting <= 0:
            continue
        device = f"idle:{OTHER_HOST}" in part.nodes
        prefix, target = ("idle", CONTENTION) if device else ("host", HOST_CONTENTION)
        unnamed = f"{prefix}:{_host_node(OTHER_HOST, device)}"
        inside = (phase_waiting_s or {}).get(part.number)
        if inside is None:
            _move(part, unnamed, target, waiting)
            continue
        annotated, budget = set(), waiting  # each second of the wait is placed once, whatever the reads' rounding
        for name, seconds in inside.items():
            cause = OTHER_HOST if _NOT_HOST_WORK.search(name) else _host_cause(name) or OTHER_HOST
            node = f"{prefix}:{_host_node(cause, device)}"
            annotated.add(node)
            share = min(max(seconds, 0.0), budget)
            budget -= share
            _move(part, node, target, share)
        rest = _move(part, unnamed, target, budget)
        named = {node: seconds for node, seconds in part.nodes.items()
                 if node.startswith(f"{prefix}:") and node not in annotated | {unnamed, target} and seconds > 0}
        total = sum(named.values())
        if rest > 0 and total > 0:
            fraction = min(rest, total) / total
            for node, seconds in named.items():
                _move(part, node, target, seconds * fraction)


def _move(part: StepParts, source: str, target: str, seconds: float) -> float:
    """Move up to `seconds` from node `source` to `target` (capped by the source's time); returns what was left."""
    moved = min(seconds, part.nodes.get(source, 0.0))
    if moved > 0:
        part.nodes[source] -= moved
        part.nodes[target] = part.nodes.get(target, 0.0) + moved
    return seconds - max(moved, 0.0)


def profile_steps(parts: list[StepParts], warmup: int = 1) -> StepProfile:
    """Drop the profiler's warm-up steps and the outlier steps (busy time, or step length on a host-only trace)."""
    # Here, not at the top: hloscope.significance imports numpy and scipy (0.4-1 s), which `trace stats` (it imports
    # this module for a host-only trace's op table) never needs.
    from hloscope.significance import outliers

    device = any(p.busy_s > 0 for p in parts)
    dropped: dict[int, str] = {}
    # Keep at least two steps: with only two profiled, the first is all there is to compare.
    warmup = min(warmup, max(0, len(parts) - 2))
    for index in range(warmup):
        dropped[index] = "profiler warm-up (the first profiled step carries the profiler's start-up)"
    candidates = [i for i in range(len(parts)) if i not in dropped]
    values = [parts[i].busy_s if device else parts[i].step_s for i in candidates]
    center = median(values) if values else 0.0
    what = "busy" if device else "step"
    for i, flagged in zip(candidates, outliers(values)):
        if flagged:
            value = parts[i].busy_s if device else parts[i].step_s
            dropped[i] = f"outlier: {what} {value * 1e3:.3f} ms vs median {center * 1e3:.3f} ms (preempted?)"
    kept = [i for i in range(len(parts)) if i not in dropped]
    return StepProfile(parts, kept, dropped, device)


def _host_cause(name: str) -> str | None:
    for cause, pattern in HOST_CAUSES:
        if pattern.search(name):
            return cause
    return None


def _host_node(cause: str, device: bool) -> str:
    """Node name of a host cause: as idle time when a device runs the program, as the work itself when none does."""
    if device:
        return "framework dispatch (aten ops)" if cause == FRAMEWORK_OPS else cause
    return HOST_WORK_NODES.get(cause, cause)


def _add_op(ops: dict[str, OpSample], group: str, dur_us: float) -> None:
    sample = ops.get(group)
    if sample is None:
        sample = ops[group] = OpSample()
    sample.calls += 1
    sample.seconds += dur_us / 1e6
    sample.durations.append(dur_us / 1e6)


def _clip4(ops: list[tuple[float, float, str, str]], start: float, end: float) -> list[tuple[float, float, str, str]]:
    return [(max(s, start), min(e, end), lane, name) for s, e, lane, name in ops if e > start and s < end]


def _top_level_ops(ops: list[tuple[float, float, str, str]]) -> list[tuple[str, list[float]]]:
    """(name, durations in seconds) of the aten ops not nested inside another aten op on the same thread."""
    by_name: dict[str, list[float]] = {}
    reach: dict[str, float] = {}
    for start, end, lane, name in sorted(ops, key=lambda o: (o[2], o[0], -o[1])):
        if start < reach.get(lane, float("-inf")):
            continue  # nested inside an op already counted
        reach[lane] = end
        by_name.setdefault(name, []).append((end - start) / 1e6)
    return list(by_name.items())


def _clip(intervals: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    return [(max(s, start), min(e, end)) for s, e in intervals if e > start and s < end]


def _complement(merged: list[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    out, cursor = [], start
    for s, e in merged:
        if s > cursor:
            out.append((cursor, s))
        cursor = max(cursor, e)
    if cursor < end:
        out.append((cursor, end))
    return out


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Intersection of two sorted, disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def host_op_table(profile: StepProfile, top: int = 20) -> dict[str, Any]:
    """A host-only trace's framework ops over the kept steps: per op, calls per step, the median and longest call,
    and time per step (medians), longest first; with the step split into time inside and outside those ops."""
    kept = profile.kept_steps()
    if not kept:
        return {}
    step_us = median(s.step_s for s in kept) * 1e6
    rows: list[dict[str, Any]] = []
    for name in sorted({g for s in kept for g in s.ops}):  # sorted: the same output whatever the hash seed
        samples = [s.ops.get(name) for s in kept]
        durations = sorted(d for sample in samples if sample for d in sample.durations)
        per_step = median(sample.seconds if sample else 0.0 for sample in samples) * 1e6
        rows.append({"name": name, "calls_per_step": median(sample.calls if sample else 0 for sample in samples),
                     "per_call_us": median(durations) * 1e6, "max_call_us": durations[-1] * 1e6,
                     "us_per_step": per_step, "share_of_step": per_step / step_us if step_us else 0.0})
    rows.sort(key=lambda row: -row["us_per_step"])  # stable: equal times stay in name order
    nodes = {node: median(s.nodes.get(node, 0.0) for s in kept) * 1e6 for node in sorted({n for s in kept for n in s.nodes})}
    return {"steps_used": [s.number for s in kept],
            "dropped": {str(profile.steps[i].number): why for i, why in sorted(profile.dropped.items())},
            "step_us": step_us, "parts_us": nodes, "ops": rows[:top]}
