"""The diff of two paths as data: what `hloscope diff` prints, and what `hloscope.api.diff` returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hloscope.diff.adapt import graph_from_modules
from hloscope.diff.compare import diff_report, matching_counts
from hloscope.diff.graph import Graph
from hloscope.diff.inputs import load_side, pick_graphs, read_side
from hloscope.diff.match import Matching, match_graphs
from hloscope.diff.report import DiffReport, MatchingCounts, MatchRate
from hloscope.diff.timing import StepTimes, step_times
from hloscope.errors import HloscopeError, UsageError
from hloscope.hlo.stats import validate_all


@dataclass(frozen=True)
class Compared:
    """What a diff compared, beyond its report: both sides' graphs, the matching and the measured times (None without
    a usable profile): every matched pair, where the report keeps the counts and the pairs that took the most time."""

    graph_a: Graph
    graph_b: Graph
    matching: Matching
    times_a: StepTimes | None
    times_b: StepTimes | None


def diff_paths(a: Path, b: Path, module: str | None = None, stage: str | None = None,
               xla_cost: bool = True) -> DiffReport:
    """Compare A and B (run directories, XLA dump directories or HLO text files): the report `--json` prints."""
    return compare_paths(a, b, module, stage, xla_cost)[0]


def compare_paths(a: Path, b: Path, module: str | None = None, stage: str | None = None,
                  xla_cost: bool = True) -> tuple[DiffReport, Compared]:
    """The report of A against B, and the graphs, matching and times it was made from."""
    # a wrong-typed timing field is one line naming run.json (load_run's typed record), not a crash later. Both sides
    # are read and checked before XLA's cost analysis runs on either: a module hloscope refuses is one line, with no
    # warning of XLA's about the other side (or that module) before it.
    read_a, read_b = read_side(a, module, stage), read_side(b, module, stage)
    other_stage = other_stage_graphs(read_a[0], read_b[0], read_a[1][0].stage, a, b, module)
    side_a, side_b = load_side(a, module, stage, xla_cost, read_a), load_side(b, module, stage, xla_cost, read_b)
    graph_a = graph_from_modules([m.module for m in side_a.graphs])
    graph_b = graph_from_modules([m.module for m in side_b.graphs])
    times_a, times_b = measured_times(side_a), measured_times(side_b)
    matching = match_graphs(graph_a, graph_b)
    counts = matching_counts(graph_a, graph_b, matching)
    rates = stage_match_rates(side_a, side_b, len(matching.pairs), counts, other_stage)
    notes = [f"A: {n}" for n in side_a.notes] + [f"B: {n}" for n in side_b.notes]
    if (times_a is None) != (times_b is None):
        missing = "A" if times_a is None else "B"
        notes.append(f"{missing} has no measured time per instruction (a run directory recorded with "
                     "--dump-hlo --profile has one), so the matching is not weighted by time")
    hint = other_stage_hint(rates, side_a.loaded.stage)
    if hint:
        notes.append(hint)
    report = diff_report(side_a.stats, side_b.stats, graph_a, graph_b, matching, match_rate=rates,
                         compared=compared_line(side_a, side_b, counts), notes=notes, run_a=side_a.run,
                         run_b=side_b.run, trace_a=side_a.trace, trace_b=side_b.trace, records_a=side_a.graph_stats,
                         records_b=side_b.graph_stats, times_a=times_a, times_b=times_b)
    return report, Compared(graph_a, graph_b, matching, times_a, times_b)


def measured_times(side):
    """Measured device time per instruction and step of the compared graphs (None without a usable profile)."""
    if side.trace_data is None or side.trace is None or side.loaded.stage != "after_optimizations":
        return None  # the profile executes the optimized modules; instructions before optimizations never ran
    try:
        times = step_times(side.trace_data, side.trace, [m.module for m in side.graphs], side.warmup_steps)
    except HloscopeError as error:
        side.notes.append(f"measured time per instruction not read: {error}")
        return None
    if times is None:
        side.notes.append("the profile has no kept step with step markers: no measured time per instruction")
    return times


def _rate(matched: int, a: int, b: int) -> MatchRate:
    return MatchRate(matched=matched, a_instructions=a, b_instructions=b, rate=matched / max(a, b) if max(a, b) else None)


def other_stage_graphs(modules_a: list, modules_b: list, stage: str, a: Path, b: Path,
                       module: str | None) -> tuple[list, list] | None:
    """The graphs of the stage not compared (before optimizations when after is compared, and the reverse) on both
    sides, checked as the compared ones are; None when a side has no module at that stage."""
    other = "before" if stage == "after_optimizations" else "after"
    try:
        ma = pick_graphs(modules_a, str(a), module, other)
        mb = pick_graphs(modules_b, str(b), module, other)
    except UsageError:  # a side without the other stage: only the compared stage's rate
        return None
    validate_all(ma)
    validate_all(mb)
    return ma, mb


def stage_match_rates(side_a, side_b, matched: int, counts: MatchingCounts,
                      other_stage: tuple[list, list] | None) -> dict[str, MatchRate]:
    """Match rate (matched / the larger side's graph instructions) of the compared stage and, when both sides have
    it (`other_stage`: other_stage_graphs), of the other stage's largest module."""
    stage = side_a.loaded.stage
    rates = {stage: _rate(matched, counts.a_instructions, counts.b_instructions)}
    if other_stage is None:
        return rates
    ma, mb = other_stage
    ga, gb = graph_from_modules([x.module for x in ma]), graph_from_modules([x.module for x in mb])
    rates[ma[0].stage] = _rate(len(match_graphs(ga, gb).pairs), len(ga.nodes), len(gb.nodes))
    return rates


def other_stage_hint(rates: dict[str, MatchRate], stage: str) -> str | None:
    own = rates.get(stage)
    compared = own.rate if own is not None else None
    for other, rate in rates.items():
        better = rate.rate is not None and compared is not None and round(rate.rate, 2) > round(compared, 2)
        if other != stage and better:
            flag = "--stage before" if other == "before_optimizations" else "--stage after"
            return (f"the other stage matches better: {rate.rate:.0%} of instructions {other.replace('_', ' ')} "
                    f"against {compared:.0%} {stage.replace('_', ' ')} (try {flag})")
    return None


def compared_line(side_a, side_b, counts: MatchingCounts) -> str:
    """What was compared, said in every output."""

    def one(side, label, count):
        stage = side.loaded.stage.replace("_", " ")
        if len(side.graphs) == 1:
            return f"{label} {side.loaded.module.name} ({stage}, {count:,} graph instructions)"
        names = " + ".join(g.module.name for g in side.graphs)
        return (f"{label} the whole train step, {len(side.graphs)} graphs {names} ({stage}, {count:,} graph "
                "instructions together, matched as one)")

    return (one(side_a, "A", counts.a_instructions) + " against " + one(side_b, "B", counts.b_instructions)
            + "; graph instructions are the entry computation and the control-flow bodies it calls (top level), "
              "while 'instructions' in the table counts every instruction, fusion bodies included")
