"""Explain a comparison: every mode's gap to the fastest, with its contributors ranked by estimated seconds."""

from __future__ import annotations

from dataclasses import asdict

from hloscope.explain.rules import RULES, Contributor
from hloscope.explain.summary import ModeSummary


def rank(contributors: list[Contributor]) -> list[Contributor]:
    """Sized contributors first, largest first; unsized ones after, in rule order."""
    sized = sorted((c for c in contributors if c.seconds is not None), key=lambda c: -c.seconds)
    return sized + [c for c in contributors if c.seconds is None]


def explain_pair(slow: ModeSummary, fast: ModeSummary, rules=RULES) -> list[Contributor]:
    contributors = [c for c in (rule(slow, fast) for rule in rules) if c is not None]
    gap = (slow.step_time_s or 0.0) - (fast.step_time_s or 0.0)
    for c in contributors:
        # Traces measure a few profiled steps, the gap is the timed steps' median: no single cause exceeds the gap.
        if c.seconds is not None and gap > 0 and c.seconds > gap:
            c.evidence["estimate_before_cap_s"] = c.seconds
            c.seconds = gap
    return rank(contributors)


def explain(summaries: list[ModeSummary], rules=RULES) -> dict:
    """The explain report: fastest mode, then per mode its gap, ratio and ranked contributors (pure function)."""
    timed = [s for s in summaries if s.status == "ok" and s.step_time_s]
    if not timed:
        return _explain_compiled(summaries)
    fastest = min(timed, key=lambda s: s.step_time_s) if timed else None
    modes = []
    for summary in summaries:
        entry: dict = {"mode": summary.mode, "status": summary.status, "step_time_s": summary.step_time_s,
                       "gap_s": None, "ratio": None, "contributors": [], "explained_s": None, "unexplained_s": None}
        if fastest is not None and summary in timed:
            gap = summary.step_time_s - fastest.step_time_s
            entry["gap_s"], entry["ratio"] = gap, summary.step_time_s / fastest.step_time_s
            if summary is not fastest:
                contributors = explain_pair(summary, fastest, rules)
                explained = sum(c.seconds for c in contributors if c.seconds is not None)
                entry["contributors"] = [asdict(c) for c in contributors]
                entry["explained_s"] = explained
                entry["unexplained_s"] = max(0.0, gap - explained)
        modes.append(entry)
    return {
        "fastest": fastest.mode if fastest else None,
        "basis": "step_time",
        "modes": modes,
        "summaries": {s.mode: s.to_dict() for s in summaries},
    }


def _explain_compiled(summaries: list[ModeSummary]) -> dict:
    """No mode was timed. Modes compiled for a target GPU (`compare --target`) are ranked on their roofline lower
    bound per step instead; the rules, sized on measured step and trace times, have nothing to size and do not run."""
    bounded = [s for s in summaries if s.status == "compiled" and s.roofline_s]
    lowest = min(bounded, key=lambda s: s.roofline_s) if bounded else None
    modes = []
    for summary in summaries:
        entry: dict = {"mode": summary.mode, "status": summary.status, "step_time_s": None,
                       "roofline_s": summary.roofline_s, "gap_s": None, "ratio": None, "contributors": [],
                       "explained_s": None, "unexplained_s": None}
        if lowest is not None and summary in bounded:
            entry["gap_s"] = summary.roofline_s - lowest.roofline_s
            entry["ratio"] = summary.roofline_s / lowest.roofline_s
        modes.append(entry)
    return {
        "fastest": lowest.mode if lowest else None,
        "basis": "roofline_lower_bound" if lowest else "step_time",
        "modes": modes,
        "summaries": {s.mode: s.to_dict() for s in summaries},
    }
