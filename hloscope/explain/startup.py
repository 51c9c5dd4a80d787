"""explain's first-step section: the time to the first step of each run against the baseline's, with the startup
ledger each run recorded (run.json `startup`, written by hloscope.backends.startup_ledger), and the recompilations
inside its timed window with their causes. Pure functions over typed records; no I/O.

A first step is one figure per process, so its gap is judged on processes: with several per side (`compare
--repeats`), it must be at least `min_gap` of the baseline's first step and beyond each side's spread between processes
(max - min), else "no difference"; with one process on a side the spread is unmeasured, and a gap under
SINGLE_PROCESS_MIN_GAP of the baseline's first step is "cannot tell" (identical processes on a loaded machine differ
by tens of percent in compile time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, TypeVar

from msgspec import UnsetType

from hloscope.runs.records import UNREADABLE_CACHE_COUNT, Startup, convert_section
from hloscope.significance import PROCESS_ALPHA, pooled_process_variation, process_test

SINGLE_PROCESS_MIN_GAP = 0.5  # with one process per side: the smallest first-step gap told apart from noise


@dataclass(frozen=True)
class StartupPart:
    phase: str  # "imports" | "setup" | "first step"
    name: str  # "compilation (XLA backend compile)", ..., "unaccounted"
    seconds: float
    source: str  # the instrument that measured it


@dataclass(frozen=True)
class Recompilation:
    cause: str  # the guard that failed, the argument that changed, the new graph
    source: str
    seconds: float | None = None  # what the framework says this compile cost, where it does per compile
    frame: str | None = None  # the code that asked for the compile: "function (file:line)"
    graph_hash: str | None = None  # torch_xla: the new graph's hash


@dataclass
class StartupRecord:
    """One process's run.json `startup`: phases split into parts (each phase's `unaccounted` part included, so the
    parts of a phase add up to it), cache hits and misses up to the first step, and the timed window's compiles."""

    phases: dict[str, float]  # phase -> seconds (the driver's clock; the first step's is timing.first_step_s)
    parts: list[StartupPart]
    cache_counts: dict[str, int] = field(default_factory=dict)
    compile_cache: str | None = None  # the persistent cache directory the run used (HLOSCOPE_COMPILE_CACHE)
    window_compile_s: float | None = None  # framework-timed compile seconds inside the timed window
    recompilations: list[Recompilation] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return sum(self.phases.values())

    def part_seconds(self, phase: str) -> dict[str, float]:
        return {p.name: p.seconds for p in self.parts if p.phase == phase}

    def to_dict(self) -> dict:
        return {"phases": self.phases, "total_s": self.total_s,
                "parts": [{"phase": p.phase, "name": p.name, "seconds": p.seconds, "source": p.source}
                          for p in self.parts],
                "cache_counts": self.cache_counts, "compile_cache": self.compile_cache,
                "window_compile_s": self.window_compile_s,
                "recompilations": [recompilation_json(r) for r in self.recompilations]}


def recompilation_json(found: Recompilation) -> dict:
    document = {"cause": found.cause, "source": found.source, "seconds": found.seconds}
    if found.frame is not None:
        document["frame"] = found.frame
    if found.graph_hash is not None:
        document["graph_hash"] = found.graph_hash
    return document


T = TypeVar("T")


def _known(value: T | UnsetType | None) -> T | None:
    """A recompilation's key the framework did not write reads as unknown (None), as one it wrote null."""
    return None if isinstance(value, UnsetType) else value


def read_startup(data: Any, path: Path) -> StartupRecord:
    """run.json `startup` as a typed record; anything of the wrong shape is an InputError naming the file and the
    field."""
    raw = convert_section(path, data, Startup, "startup")
    phases: dict[str, float] = {}
    parts: list[StartupPart] = []
    for phase in raw.phases:
        phases[phase.name] = phase.seconds
        parts.extend(StartupPart(phase.name, part.name, part.seconds, part.source) for part in phase.parts)
        if phase.unaccounted_s:
            parts.append(StartupPart(phase.name, "unaccounted", phase.unaccounted_s, "remainder of the phase"))
    record = StartupRecord(phases, parts, dict(raw.cache_counts or {}),
                           raw.compile_cache.dir if raw.compile_cache else None)
    if raw.window is not None:
        record.window_compile_s = raw.window.compile_s
        record.recompilations = [Recompilation(item.cause, item.source, _known(item.seconds), _known(item.frame),
                                               _known(item.graph_hash)) for item in raw.window.recompilations]
    return record


@dataclass(frozen=True)
class PartDelta:
    """One part of the time to the first step: the run's and the baseline's (medians over processes)."""

    phase: str
    name: str
    seconds: float
    baseline_seconds: float | None  # None: no baseline ledger
    source: str

    @property
    def delta_s(self) -> float | None:
        return None if self.baseline_seconds is None else self.seconds - self.baseline_seconds

    def to_dict(self) -> dict:
        return {"phase": self.phase, "name": self.name, "seconds": self.seconds,
                "baseline_seconds": self.baseline_seconds, "delta_s": self.delta_s, "source": self.source}


@dataclass
class StartupComparison:
    """explain --json `modes[].startup`: the run's time to the first step against the baseline's."""

    first_step_s: float | None  # median over processes of the measured first step
    baseline_first_step_s: float | None
    gap_s: float | None
    verdict: str  # "baseline" | "slower" | "faster" | "no difference" | "cannot tell" | "not recorded"
    processes: int
    baseline_processes: int
    total_s: float | None  # imports + setup + first step
    baseline_total_s: float | None
    parts: list[PartDelta] = field(default_factory=list)
    cache_counts: dict[str, int] = field(default_factory=dict)
    compile_cache: str | None = None
    recompilations: list[Recompilation] = field(default_factory=list)
    window_compile_s: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"first_step_s": self.first_step_s, "baseline_first_step_s": self.baseline_first_step_s,
                "gap_s": self.gap_s, "verdict": self.verdict, "processes": self.processes,
                "baseline_processes": self.baseline_processes, "total_s": self.total_s,
                "baseline_total_s": self.baseline_total_s, "parts": [p.to_dict() for p in self.parts],
                "cache_counts": self.cache_counts, "compile_cache": self.compile_cache,
                "window_compile_s": self.window_compile_s,
                "recompilations": [recompilation_json(r) for r in self.recompilations],
                "notes": self.notes}


def first_step_verdict(run: list[float], baseline: list[float], min_gap: float) -> tuple[float, str]:
    """The gap of medians between two sets of first steps (one per process) and what can be said of it."""
    gap = median(run) - median(baseline)
    base = median(baseline)
    if abs(gap) < min_gap * base:
        return gap, "no difference"
    if len(run) < 2 or len(baseline) < 2:
        if abs(gap) < SINGLE_PROCESS_MIN_GAP * base:
            return gap, "cannot tell"
    elif abs(gap) <= max(max(run) - min(run), max(baseline) - min(baseline)) or not _processes_differ(run, baseline):
        return gap, "no difference"
    return gap, "slower" if gap > 0 else "faster"


def _processes_differ(run: list[float], baseline: list[float]) -> bool:
    """Whether two sets of first steps (one per process) differ by Student's t on their logarithms, the variance
    pooled over the two, at PROCESS_ALPHA: a few processes a side that separate by a little more than each side's
    spread are not yet a difference (explain's step-time verdicts hold processes to the same test)."""
    variation = pooled_process_variation([run, baseline])
    return variation is None or process_test(run, baseline, variation).p_value < PROCESS_ALPHA


def _median_parts(records: list[StartupRecord]) -> dict[tuple[str, str], tuple[float, str]]:
    """(phase, part) -> (median over the processes, 0 where a process lacks it; source)."""
    keys: dict[tuple[str, str], str] = {}
    for record in records:
        for part in record.parts:
            keys.setdefault((part.phase, part.name), part.source)
    found = {}
    for key, source in keys.items():
        values = [sum(p.seconds for p in r.parts if (p.phase, p.name) == key) for r in records]
        found[key] = (median(values), source)
    return found


def compare_startup(run: list[StartupRecord], run_first_s: list[float], baseline: list[StartupRecord],
                    baseline_first_s: list[float], is_baseline: bool, min_gap: float) -> StartupComparison | None:
    """The run's startup against the baseline's. `*_first_s`: timing.first_step_s of each process (the figure
    compare prints); the records: each process's run.json `startup`. None when the run recorded none (runs from before
    the ledger: their reports keep their shape)."""
    if not run:
        return None
    first = median(run_first_s) if run_first_s else None
    base_first = median(baseline_first_s) if baseline_first_s else None
    comparison = StartupComparison(first, base_first, None, "not recorded", len(run_first_s), len(baseline_first_s),
                                   median([r.total_s for r in run]) if run else None,
                                   median([r.total_s for r in baseline]) if baseline else None)
    if is_baseline:
        comparison.verdict, comparison.gap_s = "baseline", 0.0
    elif run_first_s and baseline_first_s and base_first:
        comparison.gap_s, comparison.verdict = first_step_verdict(run_first_s, baseline_first_s, min_gap)
        if comparison.verdict != "no difference" and (len(run_first_s) < 2 or len(baseline_first_s) < 2):
            comparison.notes.append("one process on a side: the spread of first steps between processes is "
                                    "unmeasured (`hloscope compare --repeats 3` measures it)")
    if not baseline and not is_baseline:
        comparison.notes.append("the baseline recorded no startup ledger (a run from before run.json `startup`): "
                                "the parts are this run's alone")
    mine = _median_parts(run)
    theirs = _median_parts(baseline) if baseline else {}
    for key in list(mine) + [k for k in theirs if k not in mine]:
        seconds, source = mine.get(key, (0.0, theirs.get(key, (0.0, ""))[1]))
        base = theirs.get(key, (0.0, source))[0] if baseline else None
        comparison.parts.append(PartDelta(key[0], key[1], seconds, base, source))
    # phase by phase in the run's order (a part only the baseline has joins its phase), each phase's remainder last
    order = {phase: index for index, phase in enumerate([*run[0].phases, *(baseline[0].phases if baseline else [])])}
    comparison.parts.sort(key=lambda p: (order.get(p.phase, len(order)), p.name == "unaccounted"))
    first_record = run[0]
    comparison.cache_counts = dict(first_record.cache_counts)
    comparison.compile_cache = first_record.compile_cache
    comparison.recompilations = [r for record in run for r in record.recompilations]
    windows = [r.window_compile_s for r in run if r.window_compile_s is not None]
    comparison.window_compile_s = median(windows) if windows else None
    unreadable = max(record.cache_counts.get(UNREADABLE_CACHE_COUNT, 0) for record in run)
    if unreadable:
        comparison.notes.append(f"the persistent compile cache held {unreadable} of this run's programs that the "
                                "framework could not load back (torch_xla's CPU client cannot deserialize what it "
                                "wrote): each process compiled its step again however warm the cache")
    if len(run) > 1:
        comparison.notes.append(f"parts: medians over {len(run)} processes (cache counts and recompilations: every "
                                "process's, counts from the first)")
    return comparison

