"""The diff of two paths as data: what `hloscope diff` prints, and what `hloscope.api.diff` returns."""

from __future__ import annotations

from pathlib import Path

from hloscope.diff.adapt import graph_from_modules
from hloscope.diff.compare import diff_report
from hloscope.diff.inputs import load_side, pick_graphs
from hloscope.diff.match import match_graphs
from hloscope.diff.timing import step_times
from hloscope.errors import HloscopeError, UsageError


def diff_paths(a: Path, b: Path, module: str | None = None, stage: str | None = None, xla_cost: bool = True) -> dict:
    """Compare A and B (run directories, XLA dump directories or HLO text files): the report `--json` prints."""
    # a wrong-typed timing field is one line naming run.json (load_run's typed record), not a crash later
    side_a, side_b = load_side(a, module, stage, xla_cost), load_side(b, module, stage, xla_cost)
    graph_a = graph_from_modules([m.module for m in side_a.graphs])
    graph_b = graph_from_modules([m.module for m in side_b.graphs])
    times_a, times_b = measured_times(side_a), measured_times(side_b)
    report = diff_report(side_a.stats, side_b.stats, graph_a, graph_b, match_graphs(graph_a, graph_b),
                         side_a.run, side_b.run, side_a.trace, side_b.trace, side_a.graph_stats, side_b.graph_stats,
                         times_a, times_b)
    report["match_rate"] = stage_match_rates(side_a, side_b, report, module)
    report["compared"] = compared_line(side_a, side_b, report)
    report["notes"] = [f"A: {n}" for n in side_a.notes] + [f"B: {n}" for n in side_b.notes]
    if (times_a is None) != (times_b is None):
        missing = "A" if times_a is None else "B"
        report["notes"].append(f"{missing} has no measured time per instruction (a run directory recorded with "
                               "--dump-hlo --profile has one), so the matching is not weighted by time")
    hint = other_stage_hint(report["match_rate"], side_a.loaded.stage)
    if hint:
        report["notes"].append(hint)
    return report


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


def _rate(matched: int, a: int, b: int) -> dict:
    return {"matched": matched, "a_instructions": a, "b_instructions": b,
            "rate": matched / max(a, b) if max(a, b) else None}


def stage_match_rates(side_a, side_b, report: dict, module: str | None) -> dict:
    """Match rate (matched / the larger side's graph instructions) of the compared stage and, when both sides have
    it, of the other stage's largest module."""
    stage = side_a.loaded.stage
    m = report["matching"]
    rates = {stage: _rate(report["matched"], m["a_instructions"], m["b_instructions"])}
    other = "before" if stage == "after_optimizations" else "after"
    try:
        ma = pick_graphs(side_a.modules, side_a.path, module, other)
        mb = pick_graphs(side_b.modules, side_b.path, module, other)
    except UsageError:  # a side without the other stage: only the compared stage's rate
        return rates
    ga, gb = graph_from_modules([x.module for x in ma]), graph_from_modules([x.module for x in mb])
    rates[ma[0].stage] = _rate(len(match_graphs(ga, gb).pairs), len(ga.nodes), len(gb.nodes))
    return rates


def other_stage_hint(rates: dict, stage: str) -> str | None:
    compared = rates.get(stage, {}).get("rate")
    for other, rate in rates.items():
        better = rate.get("rate") is not None and compared is not None and round(rate["rate"], 2) > round(compared, 2)
        if other != stage and better:
            flag = "--stage before" if other == "before_optimizations" else "--stage after"
            return (f"the other stage matches better: {rate['rate']:.0%} of instructions {other.replace('_', ' ')} "
                    f"against {compared:.0%} {stage.replace('_', ' ')} (try {flag})")
    return None


def compared_line(side_a, side_b, report: dict) -> str:
    """What was compared, said in every output."""
    m = report["matching"]

    def one(side, label, count):
        stage = side.loaded.stage.replace("_", " ")
        if len(side.graphs) == 1:
            return f"{label} {side.loaded.module.name} ({stage}, {count:,} graph instructions)"
        names = " + ".join(g.module.name for g in side.graphs)
        return (f"{label} the whole train step, {len(side.graphs)} graphs {names} ({stage}, {count:,} graph "
                "instructions together, matched as one)")

    return (one(side_a, "A", m["a_instructions"]) + " against " + one(side_b, "B", m["b_instructions"])
            + "; graph instructions are the entry computation and the control-flow bodies it calls (top level), "
              "while 'instructions' in the table counts every instruction, fusion bodies included")
