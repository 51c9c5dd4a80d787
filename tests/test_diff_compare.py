"""Deltas between two modules' statistics, runs and traces, and the Markdown report escaping HTML and Markdown in the
names it prints."""

from __future__ import annotations

import io

import pytest
from helpers import assert_no_traceback, hloscope, run_record, tiny_dot_module

from hloscope.diff.compare import compare_runs, compare_stats, compare_traces, delta
from hloscope.diff.report import DiffReport, MatchingCounts, SideGraphs
from hloscope.render import diff_html, diff_md, diff_term


def test_delta_of_numbers_and_nested_dicts():
    assert delta(3, 5) == 2
    assert delta(None, 4) == 4
    assert delta("x", "y") is None
    assert delta({"kLoop": 399, "kInput": 354, "kCustom": 36}, {"kLoop": 374, "kInput": 486, "kCustom": 24}) == {
        "kInput": 132, "kLoop": -25, "kCustom": -12}
    assert delta({"a": 1, "b": 2}, {"a": 1, "c": 1}) == {"b": -2, "c": 1}
    assert delta({"memory": {"temp": 10, "total": 30}}, {"memory": {"temp": 15, "total": 30}}) == {"memory": {"temp": 5}}


def test_compare_stats_leaves_identity_fields_and_booleans_alone():
    a = {"name": "m", "platform": "gpu", "kernels": 10, "flops": 1.5e9, "scheduled": True}
    b = {"name": "n", "platform": "gpu", "kernels": 12, "flops": 1.5e9, "scheduled": False}
    assert compare_stats(a, b) == {"kernels": 2, "flops": 0.0}


def test_compare_runs_and_traces():
    runs = compare_runs(run_record({"mode": "jax", "status": "ok", "timing": {"median_s": 0.002}}),
                        run_record({"mode": "torch_xla", "status": "ok", "timing": {"median_s": 0.012}}))
    assert runs.ratio == pytest.approx(6.0) and runs.delta["median_s"] == pytest.approx(0.010)
    assert runs.a.mode == "jax" and runs.b.median_s == 0.012
    step_a = {"kernels": 5, "device_busy_us": 100.0, "device_idle_us": 10.0, "host_duration_us": 200.0}
    step_b = {"kernels": 7, "device_busy_us": 150.0, "device_idle_us": 10.0, "host_duration_us": 260.0}
    traces = compare_traces({"kernels": 10, "categories": {"matmul": 5.0}, "top": [{"name": "k1", "total_us": 4.0}],
                             "per_step": [step_a, step_a, {"kernels": 0}]},
                            {"kernels": 14, "categories": {"matmul": 9.0}, "top": [{"name": "k2", "total_us": 6.0}],
                             "per_step": [step_b, step_b]})
    assert traces.a.per_step["kernels"] == 5  # the step without kernels is not averaged in
    assert traces.delta["kernels"] == 4 and traces.delta["categories"] == {"matmul": 4.0}
    assert traces.delta["per_step"] == {"kernels": 2, "device_busy_us": 50.0, "host_duration_us": 60.0}
    assert [r.name for r in traces.kernels_changed_most] == ["k2", "k1"]
    assert traces.to_dict()["kernels_changed_most"][0] == {"name": "k2", "a_us": 0.0, "b_us": 6.0, "delta_us": 6.0}


def test_trace_part_of_the_report_in_every_format():
    """Time by category, per-step idle time and the kernels whose time changed most reach all three renderers."""
    from rich.console import Console

    step_a = {"kernels": 5, "device_busy_us": 100.0, "device_idle_us": 12.0}
    step_b = {"kernels": 7, "device_busy_us": 150.0, "device_idle_us": 4321.0}
    traces = compare_traces({"categories": {"matmul/conv": 500.0}, "top": [{"name": "dot.7", "total_us": 40.0}],
                             "per_step": [step_a]},
                            {"categories": {"matmul/conv": 900.0}, "top": [{"name": "gemm_fusion", "total_us": 65.5}],
                             "per_step": [step_b]})
    stats = {"name": "m", "file": "m.txt", "platform": "cpu", "stage": "after_optimizations", "kernels": 5}
    report = DiffReport(a=stats, b={**stats, "kernels": 7}, delta={"kernels": 2}, matched=0,
                        matching=MatchingCounts(a_instructions=0, b_instructions=0, only_in_a=0, only_in_b=0,
                                                by_stage={}),
                        only_in_a=[], only_in_b=[], graphs=SideGraphs(a=[], b=[]), traces=traces, match_rate={},
                        compared="", notes=[])
    buffer = io.StringIO()
    diff_term.render(report, Console(file=buffer, width=200, color_system=None))
    for text in (diff_md.render(report), diff_html.render(report), buffer.getvalue()):
        assert "trace us matmul/conv" in text and "+400" in text  # time by category
        assert "trace per step device_idle_us" in text and "4,321" in text and "+4,309" in text  # idle time
        assert "gemm_fusion" in text and "+65.5" in text and "-40.0" in text  # kernels whose time changed most


def test_diff_markdown_escapes_html_and_markdown(tmp_path):
    a = tiny_dot_module(tmp_path / "a.hlo", "<script>alert(1)</script>")
    b = tiny_dot_module(tmp_path / "b<img src=x>.hlo", "a|b")
    out = tmp_path / "report.md"
    result = hloscope("diff", "--no-xla-cost", "--format", "md", "-o", out, a, b, timeout=120)
    assert_no_traceback(result)
    assert result.code == 0, result.stderr
    text = out.read_text()
    assert "<script>" not in text and "<img" not in text
    assert "&lt;img src=x&gt;" in text
