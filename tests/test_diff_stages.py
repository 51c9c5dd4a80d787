"""Match rate per stage, the other-stage hint and the step labels of `hloscope diff`."""

from __future__ import annotations

from hloscope.diff.pipeline import _rate, other_stage_hint
from hloscope.diff.report import DiffReport, MatchingCounts, RunsComparison, RunTiming, SideGraphs
from hloscope.render.diff_views import match_rate_line, side_by_side


def test_hint_names_the_stage_that_matches_better():
    rates = {"after_optimizations": _rate(192, 318, 441), "before_optimizations": _rate(666, 1115, 1178)}
    assert match_rate_line(rates) == (
        "match rate: after optimizations 44% (192 of 441), before optimizations 57% (666 of 1,178)")
    hint = other_stage_hint(rates, "after_optimizations")
    assert "57% of instructions before optimizations against 44% after optimizations (try --stage before)" in hint
    assert other_stage_hint(rates, "before_optimizations") is None


def test_step_rows_are_labelled_in_words():
    stats = {"name": "m", "file": "m.txt", "platform": "cpu", "stage": "after_optimizations"}
    timing = {"mode": "jax", "status": "ok", "median_s": 0.002, "mean_s": 0.002, "p10_s": 0.001, "p90_s": 0.003,
              "first_step_s": 1.5, "throughput_img_s": None}
    runs = RunsComparison(a=RunTiming(**timing), b=RunTiming(**{**timing, "first_step_s": 1.25}), delta={}, ratio=1.0)
    report = DiffReport(a=stats, b=stats, delta={}, matched=0,
                        matching=MatchingCounts(a_instructions=0, b_instructions=0, only_in_a=0, only_in_b=0,
                                                by_stage={}),
                        only_in_a=[], only_in_b=[], graphs=SideGraphs(a=[], b=[]), runs=runs, match_rate={},
                        compared="", notes=[])
    rows = {label: (a, b, d) for label, a, b, d in side_by_side(report)}
    assert rows["first step (with compilation)"] == ("1500.000 ms", "1250.000 ms", "-250.000 ms")
    assert "step first_step" not in rows and rows["step time median"][0] == "2.000 ms"
