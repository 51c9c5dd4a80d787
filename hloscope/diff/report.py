"""The diff report as typed data: what `hloscope.diff.pipeline` builds, `api.diff` returns and the renderers read, with
`to_dict()` giving exactly the JSON `hloscope diff --json` prints.

Every part is a frozen Struct whose fields are in the JSON's key order. A key only some reports hold (measured time,
run timing, traces; a group's module counts) is UNSET where it is absent, so that `to_dict()` writes exactly the keys
the command prints; `None` is a key printed as null. Maps whose keys come from the data stay dicts: opcodes, stages,
graph names, step numbers, the key-by-key differences (`delta`) and the match rate by stage. The two sides' statistics
(`a`, `b`) are `hlo stats` module records as `hloscope.hlo.stats` returns them, or, for a train step of several
graphs, their sum (`hloscope.diff.compare.total_record`: a dict, its keys those of the records summed).

Units follow docs/api.md: seconds in fields ending in `_s`, microseconds in `_us`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from hloscope.hlo.results import ModuleStats
from hloscope.typed import Record

# A figure as the analysis gave it: a count stays an int, a sum of floats a float, so that the JSON prints it as before.
Number = int | float
# One side's `hlo stats` record: typed for one graph, the summed dict for several.
StatsRecord = ModuleStats | dict[str, Any]


def stats_document(record: Any) -> dict[str, Any]:
    """A `hlo stats` (or `trace stats`) record as the JSON object the command prints: the one place a typed record
    (anything with `to_dict()`) and a plain one (a dict: the sum of several graphs) are told apart, for the key-by-key
    comparisons."""
    if hasattr(record, "to_dict"):
        document: dict[str, Any] = record.to_dict()
        return document
    return dict(record)


class _Part(Record, frozen=True, kw_only=True, omit_defaults=True):
    """A part of the diff report."""


class MatchingCounts(_Part, frozen=True, kw_only=True):
    """`matching`: graph instructions on each side (the entry computation and the control-flow bodies it calls), how
    many found no partner, and the pairs by the matcher's stage that made them (exact, top_down, bottom_up, loose...)."""

    a_instructions: int
    b_instructions: int
    only_in_a: int
    only_in_b: int
    by_stage: dict[str, int]


class SourceGroup(_Part, frozen=True, kw_only=True):
    """Instructions of one side without a partner, grouped by source op with layer indices folded (`hloscope.diff.match
    .source_group`): how many, by opcode, how many distinct source ops (one per layer), a few instruction names; with
    both sides' profiles their device time per step; and the modules they sit in (absent for hand-built graphs)."""

    op_name: str
    count: int
    opcodes: dict[str, int]
    sources: int
    examples: list[str]
    time_s: float | UnsetType = UNSET
    graphs: dict[str, int] | UnsetType = UNSET


class GraphRow(_Part, frozen=True, kw_only=True):
    """One graph of a side, or (graph "total") the sum over them: its `hlo stats` figures, graph instructions, how many
    matched and into which graphs of the other side, and with a profile the device time and executions per step. The
    total holds a figure only where a graph has it, and null where some graph lacks it."""

    graph: str
    instructions: Number | UnsetType | None = UNSET
    kernels: Number | UnsetType | None = UNSET
    flops: Number | UnsetType | None = UNSET
    transcendentals: Number | UnsetType | None = UNSET
    bytes_accessed: Number | UnsetType | None = UNSET
    copies: Number | UnsetType | None = UNSET
    xla_flops: Number | UnsetType | None = UNSET  # XLA's own cost analysis; null without it
    graph_instructions: int | UnsetType | None = UNSET
    matched: int | UnsetType | None = UNSET
    matched_to: dict[str, int] | UnsetType = UNSET  # graph of the other side -> instructions matched into it
    time_s: Number | UnsetType | None = UNSET
    executions: Number | UnsetType | None = UNSET

    def figure(self, name: str) -> Any:
        """A figure of the row, None where it has none (absent from a total, or null)."""
        value = getattr(self, name)
        return None if value is UNSET else value


class SideGraphs(_Part, frozen=True, kw_only=True):
    """`graphs`: the rows of each side, in the side's order, each list ending with its total row."""

    a: list[GraphRow]
    b: list[GraphRow]

    def side(self, side: str) -> list[GraphRow]:
        return self.a if side == "a" else self.b


class TimedPair(_Part, frozen=True, kw_only=True):
    """A matched pair with both sides' measured device time per step (b - a in `delta_s`): the instruction names, their
    modules, A's opcode (with the fusion kind), both source ops, and the matcher's stage that paired them."""

    a: str
    b: str
    graph_a: str
    graph_b: str
    opcode: str
    source_a: str
    source_b: str
    a_s: float
    b_s: float
    delta_s: float
    how: str | None


class SideCounts(_Part, frozen=True, kw_only=True):
    a: int
    b: int


class SideSteps(_Part, frozen=True, kw_only=True):
    """The profiled step numbers of each side kept for the medians."""

    a: list[int]
    b: list[int]


class SideDropped(_Part, frozen=True, kw_only=True):
    """The profiled steps of each side left out of the medians: step number -> why."""

    a: dict[str, str]
    b: dict[str, str]


class TimeTotals(_Part, frozen=True, kw_only=True):
    """One side's measured device time per step: in matched instructions, in instructions without a partner, in
    executions that name no compared instruction, and the whole (the median of the per-step sums)."""

    matched_s: float
    only_s: float
    unplaced_s: float
    device_s: float


class SideTotals(_Part, frozen=True, kw_only=True):
    a: TimeTotals
    b: TimeTotals


class TimeWeighted(_Part, frozen=True, kw_only=True):
    """`time_weighted` (both sides profiled): the matching weighted by measured time. `pairs` are the matched pairs
    that took time on a side, ranked by the size of their difference, the first of `pairs_total`."""

    basis: str
    steps: SideCounts
    kept_steps: SideSteps
    dropped_steps: SideDropped
    totals: SideTotals
    pairs: list[TimedPair]
    pairs_total: int


class RunTiming(_Part, frozen=True, kw_only=True):
    """One side's step time from its run.json (median, mean, p10, p90, first step, throughput)."""

    mode: str | None
    status: str | None
    median_s: Number | None
    mean_s: Number | None
    p10_s: Number | None
    p90_s: Number | None
    first_step_s: Number | None
    throughput_img_s: Number | None


class RunsComparison(_Part, frozen=True, kw_only=True):
    """`runs` (two run directories): each side's timing, the changes (b - a, largest first, unchanged left out) and
    B's median over A's."""

    a: RunTiming
    b: RunTiming
    delta: dict[str, Number]
    ratio: float | None


class TraceSummary(_Part, frozen=True, kw_only=True):
    """The scalar figures of one side's `trace stats` record, its device time by category and (`per_step`) the mean
    over the steps that ran kernels of kernels, busy, idle and host time (empty without such steps)."""

    steps: int | None
    events: int | None
    kernels: int | None
    device_time_us: Number | None
    host_runtime_us: Number | None
    categories: dict[str, Number]
    per_step: dict[str, Number]


class KernelChange(_Part, frozen=True, kw_only=True):
    """A kernel's total time in each trace and its change."""

    name: str
    a_us: Number
    b_us: Number
    delta_us: Number


class TracesComparison(_Part, frozen=True, kw_only=True):
    """`traces` (two run directories with traces): each side's summary, their differences key by key and the kernels
    whose total time changed most."""

    a: TraceSummary
    b: TraceSummary
    delta: dict[str, Any]
    kernels_changed_most: list[KernelChange]


class MatchRate(_Part, frozen=True, kw_only=True):
    """Matched graph instructions over the larger side's (None when both sides have none)."""

    matched: int
    a_instructions: int
    b_instructions: int
    rate: float | None


class DiffReport(_Part, frozen=True, kw_only=True):
    """`hloscope diff A B`: both sides' `hlo stats` records and their differences, the structural matching (counts,
    one-sided groups, per-graph rows), with profiles the matching weighted by measured time, with run directories
    their step times and traces, the match rate by stage, what was compared and the notes."""

    a: StatsRecord
    b: StatsRecord
    delta: dict[str, Any]  # b - a of every numeric statistic, key by key (hloscope.diff.compare.compare_stats)
    matched: int
    matching: MatchingCounts
    only_in_a: list[SourceGroup]
    only_in_b: list[SourceGroup]
    graphs: SideGraphs
    time_weighted: TimeWeighted | UnsetType = UNSET
    runs: RunsComparison | UnsetType = UNSET
    traces: TracesComparison | UnsetType = UNSET
    match_rate: dict[str, MatchRate]  # by stage: the compared one first
    compared: str
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The `diff --json` document; each side's record as its own `to_dict()` writes it."""
        document: dict[str, Any] = msgspec.to_builtins(self)
        document["a"], document["b"] = stats_document(self.a), stats_document(self.b)
        return document

    def record(self, side: str) -> dict[str, Any]:
        """Side "a"'s or "b"'s statistics as `hlo stats --json` prints them: the side-by-side table shows them key by
        key, whether they are one graph's typed record or a train step's sum."""
        return stats_document(self.a if side == "a" else self.b)

    def groups(self, side: str) -> list[SourceGroup]:
        """The one-sided groups of side "a" (`only_in_a`) or "b"."""
        return self.only_in_a if side == "a" else self.only_in_b
