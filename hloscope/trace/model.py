"""One event model for every profiler trace hloscope reads (xplane.pb, Kineto JSON, JAX's trace.json.gz).

A reader turns a file into a stream of `Event`s; analyses are pure functions over such streams. Kineto traces can be
gigabytes, so `Trace.events` is re-iterable (each iteration streams the file again) rather than a list held in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

# What an event is. Device execution kinds are the ones that occupy a GPU/TPU (or, on the CPU, XLA's CPU runtime).
KERNEL = "kernel"  # a kernel / XLA op executing on the device
MEMCPY = "memcpy"  # a device memory copy
MEMSET = "memset"  # a device memory set
RUNTIME = "runtime"  # host-side launch / runtime API call (cudaLaunchKernel, hipModuleLaunchKernel, ...)
HOST_OP = "host_op"  # host work: framework ops, Python functions, XLA host runtime
ANNOTATION = "annotation"  # markers and derived rows: user annotations, XLA module spans, name scopes
STEP = "step"  # a training-step marker (ProfilerStep#N, StepTraceAnnotation, TF "Steps" row); `step` holds N
DEVICE_EXEC_KINDS = frozenset({KERNEL, MEMCPY, MEMSET})


def device_line_executes(plane: str, line: str) -> bool:
    """Whether a device plane's line holds executions: a GPU's "Stream #N" lines, any other device's "XLA Ops" line
    (the other lines are annotations: XLA Modules, name scopes, steps). Shared by the xplane and Chrome-JSON readers."""
    return line.startswith("Stream") if "GPU" in plane else line == "XLA Ops"


def execution_kind(name: str) -> str:
    """KERNEL, MEMCPY or MEMSET for an execution on a device line, by its name."""
    lowered = name.lower()
    if lowered.startswith("memset"):
        return MEMSET
    if lowered.startswith("memcpy"):
        return MEMCPY
    return KERNEL


# Correlation ids at or above this link XLA CPU ops to the thread-pool hand-off that dispatched them (xplane.py),
# apart from GPU launch correlation ids.
FLOW_CORRELATION_BASE = 1 << 62


class CorrelationIds:
    """A trace's correlation ids as events carry them: an id in [0, FLOW_CORRELATION_BASE) as it is; any other
    (rocprofiler writes 64-bit ids, half of them above what a signed 64-bit integer holds) renumbered downward from
    just below FLOW_CORRELATION_BASE, one number per distinct id in reading order. A launch and its device work still
    share one number, the analyses' int64 arrays hold it, and it is never taken for an XLA CPU flow. One instance per
    pass over a file, so that every pass numbers alike."""

    def __init__(self) -> None:
        self._renumbered: dict[int, int] = {}

    def __call__(self, value: int | None) -> int | None:
        if value is None or 0 <= value < FLOW_CORRELATION_BASE:
            return value
        number = self._renumbered.get(value)
        if number is None:
            number = self._renumbered[value] = FLOW_CORRELATION_BASE - 1 - len(self._renumbered)
        return number

# Categories of device time. From the program where the run has its optimized HLO (hloscope/trace/program_categories.py),
# otherwise from the kernel / op name (hloscope/trace/categories.py and hloscope/data/kernel_categories.toml).
MATMUL = "matmul/conv"
FUSION = "fusion/elementwise"
REDUCTION = "reduction"
LAYOUT = "copy/transpose"  # data movement only: copies that change the layout, transposes, concatenations, ...
MEMORY = "memcpy/memset"
COLLECTIVE = "collective/communication"
OTHER = "other"
CATEGORIES = (MATMUL, FUSION, REDUCTION, LAYOUT, MEMORY, COLLECTIVE, OTHER)
CATEGORY_INDEX = {name: index for index, name in enumerate(CATEGORIES)}  # position in CATEGORIES (per-step arrays)
# What decided an event's category: its HLO instruction in the run's optimized module, the profiler's own HLO category
# (TPU xplanes' `hlo_category` stat), or its name.
SOURCE_HLO = "hlo"
SOURCE_PROFILER = "profiler"
SOURCE_NAMES = "names"


class Event(msgspec.Struct, gc=False):
    """One complete (begin + duration) event of a trace. Times are microseconds on the trace's own clock.

    A msgspec struct rather than a dataclass: a reader builds one per event, and its constructor (in C) takes half
    the time; it holds only scalars, so the cycle collector need not track it."""

    name: str
    start_us: float
    dur_us: float
    kind: str
    device: bool  # True: runs on a device (GPU stream, TPU core, XLA CPU runtime op); False: host thread
    lane: str  # stream or thread, e.g. "stream 7", "Stream #2", "thread 1234", "XLA Ops"
    process: str  # Kineto pid or xplane plane name, e.g. "/device:GPU:0"
    category: str = OTHER  # meaningful for device execution events
    step: int | None = None  # step number when the profiler recorded it on the event itself
    hlo_op: str | None = None  # the HLO instruction an XLA event executes
    hlo_module: str | None = None  # the HLO module (XLA program) it belongs to
    correlation: int | None = None  # links a device event to its host launch
    category_source: str = SOURCE_NAMES  # SOURCE_HLO once program_categories classified it from the HLO
    profiler_category: str | None = None  # the profiler's own category (Kineto `cat`: cpu_op, python_function, ...)
    input_shapes: str | None = None  # the op's input shapes as compact JSON (Kineto `Input Dims`, record_shapes=True)

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us

    @property
    def is_device_exec(self) -> bool:
        return self.device and self.kind in DEVICE_EXEC_KINDS


# A single event longer than a day, or a timestamp beyond the year 5000 (in microseconds since 1970), is not a
# measurement: a corrupt or hand-edited trace (trace/load.py leaves such events out).
MAX_EVENT_US = 86_400e6
MAX_TIME_US = 1e17


@dataclass
class Flaws:
    """What one pass over a trace found impossible, by class (a short phrase, e.g. "with a negative duration"):
    events left out of every figure, and values read as something else (a step number beyond 64 bits: the marker is a
    plain event). The readers fill it; trace/load.py's CheckedEvents says it all in one warning line per file. Also
    `counted`: the events a lean pass (CheckedEvents.lean) counted without producing them."""

    left_out: Counter[str] = field(default_factory=Counter)
    read_otherwise: Counter[str] = field(default_factory=Counter)
    counted: int = 0


class EventStream:
    """A re-iterable view of a trace's events: each `iter()` reads them again from the source."""

    def __init__(self, source: Callable[[], Iterator[Event]]):
        self._source = source

    def __iter__(self) -> Iterator[Event]:
        return self._source()


@dataclass
class Trace:
    """One trace file: where it is, its format ("xplane", "kineto", "chrome" or "perfetto") and its events."""

    file: str
    format: str
    events: Iterable[Event]
    metadata: dict[str, Any] = field(default_factory=dict)
