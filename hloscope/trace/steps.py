"""Training steps in a trace: where they are, and how busy the device was in each.

Steps come from the profilers' markers: PyTorch's `ProfilerStep#N`, `jax.profiler.StepTraceAnnotation` /
torch_xla's `StepTrace` (`step_num`), TensorFlow's "Steps" row. A device event belongs to the step during which the
host launched it (matched by correlation id, since the device runs behind the host); events without a launch record
(XLA's CPU runtime, TPU ops) belong to the last step that started before them: PyTorch/XLA and JAX dispatch
asynchronously, so a step's program often runs after the step's marker has ended.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StepWindow:
    number: int
    start_us: float
    end_us: float


def step_windows(markers: list[tuple[int, float, float]]) -> list[StepWindow]:
    """One window per step number (the earliest marker wins when a step is marked on several threads)."""
    by_number: dict[int, tuple[float, float]] = {}
    for number, start, end in markers:
        if number not in by_number or start < by_number[number][0]:
            by_number[number] = (start, end)
    windows = [StepWindow(number, start, end) for number, (start, end) in by_number.items()]
    return sorted(windows, key=lambda window: window.start_us)


class StepLocator:
    """Which step a timestamp belongs to."""

    def __init__(self, windows: list[StepWindow]):
        self._windows = windows
        self._starts = [window.start_us for window in windows]

    def index_at(self, time_us: float) -> int | None:
        """The step whose marker spans `time_us` (None when between or outside steps)."""
        index = bisect.bisect_right(self._starts, time_us) - 1
        if index >= 0 and time_us <= self._windows[index].end_us:
            return index
        return None

    def last_started(self, time_us: float) -> int | None:
        """The last step that started at or before `time_us` (None before the first step)."""
        index = bisect.bisect_right(self._starts, time_us) - 1
        return index if index >= 0 else None


@dataclass(frozen=True, slots=True)
class BusySummary:
    busy_us: float  # union of the intervals
    span_us: float  # first start to last end
    idle_us: float  # span - busy
    gaps: int  # idle gaps inside the span
    largest_gap_us: float


def busy_summary(intervals: list[tuple[float, float]]) -> BusySummary:
    """Union of (start, end) intervals and the idle gaps between them (intervals may overlap: several streams)."""
    if not intervals:
        return BusySummary(0.0, 0.0, 0.0, 0, 0.0)
    intervals.sort()
    busy = 0.0
    gaps = 0
    largest_gap = 0.0
    current_start, current_end = intervals[0]
    first_start = current_start
    for start, end in intervals[1:]:
        if start > current_end:
            busy += current_end - current_start
            gap = start - current_end
            gaps += 1
            largest_gap = max(largest_gap, gap)
            current_start, current_end = start, end
        elif end > current_end:
            current_end = end
    busy += current_end - current_start
    span = current_end - first_start
    return BusySummary(busy, span, max(span - busy, 0.0), gaps, largest_gap)


# Interval algebra of the per-step analyses (here rather than in step_profile, whose regexes `trace stats` need not
# compile).


def merge_intervals(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def exposed_time(collective: list[tuple[float, float]], other: list[tuple[float, float]]) -> float:
    """How long collectives ran with no other device work beside them: the union of the `collective` intervals minus
    the union of the `other` (compute, copies) intervals. On a trace of several devices (GPU streams, XLA's CPU
    devices of one process), overlap with any of them counts as overlapped."""
    return interval_length(subtract_intervals(merge_intervals(collective), merge_intervals(other))) if collective else 0.0


def interval_length(intervals: list[tuple[float, float]]) -> float:
    total: float = 0  # the int 0 for no intervals (as it always was)
    for start, end in intervals:
        total += end - start  # a plain running sum (not sum(), which compensates rounding since Python 3.12)
    return total


def subtract_intervals(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """a minus b, both sorted and disjoint, b within a."""
    out = []
    j = 0
    for s, e in a:
        cursor = s
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < e:
            out.append((cursor, e))
    return out
