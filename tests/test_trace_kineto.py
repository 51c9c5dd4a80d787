"""Kineto traces from real V100/A100/H100/B200 runs: counts checked against json.load of the same files; impossible
durations (negative, over a day) left out of every figure with one counted warning, and NaN or Infinity refused as
not JSON."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest
from helpers import assert_no_traceback, hloscope, kineto_trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hloscope.trace import load
from hloscope.trace.hlo_map import kernel_time_by_hlo_op
from hloscope.trace.load import load_traces
from hloscope.trace.model import CATEGORIES, KERNEL, Event
from hloscope.trace.stats import trace_stats

KINETO_FIXTURES = [
    "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/trace_filter__sampled_rank-0.json.gz",
    "hta/cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz",
    "hta/triton_example__triton_example.json.gz",
    "hta/trace_diff__control__control.json.gz",
    "hta/negative_queue_length_values_check__rank0.json.gz",
    "hta/nccl_parser_config__nccl_data.json.gz",
    "tracelens/traces__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/traces__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/traces__b200__eager_trace.json.gz",
]
# Kernel counts as SOURCES.md lists them (counted when the fixtures were collected).
SOURCES_KERNELS = {
    "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": 4350,
    "hta/trace_diff__control__control.json.gz": 8568,
    "hta/negative_queue_length_values_check__rank0.json.gz": 6080,
    "hta/nccl_parser_config__nccl_data.json.gz": 2700,
    "tracelens/traces__b200__eager_trace.json.gz": 768,
}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _independent_facts(path) -> dict:
    """What the trace says, computed with the standard library only (no hloscope code)."""
    with gzip.open(path, "rt") as stream:
        document = json.load(stream)
    events = document["traceEvents"]
    complete = [event for event in events if event.get("ph") == "X"]
    device = [event for event in complete if event.get("cat") in DEVICE_CATS]
    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for event in device:
        totals[event["name"]] += float(event.get("dur", 0))
        counts[event["name"]] += 1
    steps = {event["name"] for event in complete if event.get("name", "").startswith("ProfilerStep#")}
    launched = {event.get("args", {}).get("correlation") for event in device} - {None}
    runtime = [event for event in complete if event.get("cat") in ("cuda_runtime", "cuda_driver")]
    return {
        "runtime_us": sum(float(event.get("dur", 0)) for event in runtime),
        "launch_us": sum(float(event.get("dur", 0)) for event in runtime if event.get("args", {}).get("correlation") in launched),
        "all_events": len(events),
        "events": len(complete),
        "kernels": sum(1 for event in complete if event.get("cat") == "kernel"),
        "device_time_us": sum(float(event.get("dur", 0)) for event in device),
        "totals": totals,
        "counts": counts,
        "steps": len(steps),
    }


@pytest.mark.parametrize("relative", KINETO_FIXTURES)
def test_counts_match_json_load(fixtures_dir, relative):
    path = fixtures_dir / relative
    facts = _independent_facts(path)
    (trace,) = load_traces(path)
    assert trace.format == "kineto"
    stats = trace_stats(trace, top=5).to_dict()
    assert stats["events"] == facts["events"]
    assert stats["kernels"] == facts["kernels"]
    if relative in SOURCES_KERNELS:
        assert stats["kernels"] == SOURCES_KERNELS[relative]
    assert stats["device_time_us"] == pytest.approx(facts["device_time_us"], rel=1e-9, abs=1e-3)
    assert sum(stats["categories"].values()) == pytest.approx(facts["device_time_us"], rel=1e-9, abs=1e-3)
    assert set(stats["categories"]) == set(CATEGORIES)
    assert stats["steps"] == facts["steps"]
    # Host dispatch (runtime calls that launched device work) apart from all runtime time (synchronize included).
    assert stats["host_runtime_us"] == pytest.approx(facts["runtime_us"], rel=1e-9, abs=1e-3)
    assert stats["host_launch_us"] == pytest.approx(facts["launch_us"], rel=1e-9, abs=1e-3)
    # The top list is the largest totals, each with its count, in order.
    expected = sorted(facts["totals"].items(), key=lambda item: item[1], reverse=True)[:5]
    assert [row["total_us"] for row in stats["top"]] == pytest.approx([total for _, total in expected], abs=1e-3)
    for row in stats["top"]:
        assert row["count"] == facts["counts"][row["name"]]
        assert row["total_us"] == pytest.approx(facts["totals"][row["name"]], abs=1e-3)
        assert row["share"] == pytest.approx(row["total_us"] / facts["device_time_us"], abs=1e-4)


def test_control_trace_matches_sources_md(fixtures_dir):
    path = fixtures_dir / "hta/trace_diff__control__control.json.gz"
    facts = _independent_facts(path)
    assert facts["all_events"] == 109_123  # SOURCES.md: 109,123 events, 8,568 kernels
    stats = trace_stats(load_traces(path)[0]).to_dict()
    assert stats["kernels"] == 8_568
    # Six ProfilerStep# markers; every kernel's launch is inside one of them, so the steps hold all 8,568 kernels.
    assert [step["step"] for step in stats["per_step"]] == list(range(1009, 1015))
    assert sum(step["kernels"] for step in stats["per_step"]) == 8_568
    for step in stats["per_step"]:
        assert 0 < step["device_busy_us"] <= step["device_span_us"]
        assert step["device_idle_us"] == pytest.approx(step["device_span_us"] - step["device_busy_us"], abs=1e-2)
    # NCCL kernels are communication, cutlass kernels are matmul.
    assert stats["categories"]["collective/communication"] >= sum(
        total for name, total in facts["totals"].items() if name.startswith("ncclKernel")
    ) - 1e-3
    assert stats["top"][0]["name"].startswith("ncclKernel_SendRecv")


def test_steps_per_kernel_follow_the_launch(fixtures_dir):
    """Kernels are counted in the step whose host-side interval holds their cudaLaunchKernel (by correlation id)."""
    path = fixtures_dir / "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    with gzip.open(path, "rt") as stream:
        events = json.load(stream)["traceEvents"]
    steps = sorted(
        (event["ts"], event["ts"] + event["dur"], int(event["name"].split("#")[1]))
        for event in events
        if event.get("ph") == "X" and event.get("cat") != "gpu_user_annotation" and event.get("name", "").startswith("ProfilerStep#")
    )
    launch_step = {}
    for event in events:
        if event.get("cat") == "cuda_runtime" and "correlation" in event.get("args", {}):
            for start, end, number in steps:
                if start <= event["ts"] <= end:
                    launch_step[event["args"]["correlation"]] = number
    expected = defaultdict(int)
    for event in events:
        if event.get("cat") == "kernel":
            number = launch_step.get(event["args"].get("correlation"))
            if number is None:
                number = next((n for start, end, n in steps if start <= event["ts"] <= end), None)
            if number is not None:
                expected[number] += 1
    stats = trace_stats(load_traces(path)[0]).to_dict()
    assert {step["step"]: step["kernels"] for step in stats["per_step"]} == dict(expected)


def test_kernel_names_map_back_to_hlo_instructions():
    """A Kineto trace of an XLA program has no hlo_op: kernel names are matched as XLA sanitizes instruction names."""
    def kernel(name, dur):
        return Event(name=name, start_us=0.0, dur_us=dur, kind=KERNEL, device=True, lane="stream 7", process="0")

    events = [kernel("loop_add_fusion_1", 2.0), kernel("loop_add_fusion_1", 3.0), kernel("input_reduce_fusion", 4.0),
              kernel("void cutlass::Kernel<x>", 9.0)]
    totals = kernel_time_by_hlo_op(events, instruction_names=["loop_add_fusion.1", "input_reduce_fusion", "dot.2"])
    assert totals == {"loop_add_fusion.1": 5.0, "input_reduce_fusion": 4.0}
    assert kernel_time_by_hlo_op(events) == {}


# JSON has no NaN or infinity (RFC 8259): a file with those tokens is not JSON and is refused (the next test); any
# number JSON can hold, however impossible as a duration, is skipped with a count.
@given(durations=st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-10**6, 10**6)),
                          min_size=1, max_size=6))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_impossible_kineto_durations_are_skipped_with_one_counted_warning(tmp_path, durations):
    path = tmp_path / "t.pt.trace.json"
    names = [f"k{i}" for i in range(len(durations))] + ["good"]
    kineto_trace(path, names, [float(d) for d in durations] + [50.0])

    load._warned.clear()
    trace = load.load_trace(path)
    kept = [e for e in trace.events if e.is_device_exec]
    bad = sum(1 for d in durations if not (0 <= d <= load.MAX_EVENT_US))
    assert trace.events.skipped == bad
    assert all(0 <= e.dur_us <= load.MAX_EVENT_US for e in kept)


def test_non_json_infinity_is_refused_naming_the_file_line_and_column(tmp_path):
    path = tmp_path / "t.pt.trace.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": Infinity}]}')
    result = hloscope("trace", "stats", path, timeout=120)
    assert_no_traceback(result)
    assert result.code == 2 and f"{path}:1:" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_negative_durations_never_give_negative_device_time(tmp_path):
    path = kineto_trace(tmp_path / "t.pt.trace.json", ["a", "b", "c"], [-300.0, 1e308, 100.0])
    result = hloscope("trace", "stats", "--json", path, timeout=120)
    assert_no_traceback(result)
    assert result.code == 0, result.stderr
    (stats,) = json.loads(result.stdout)["traces"]
    assert stats["device_time_us"] == 100.0
    warnings = [line for line in result.stderr.splitlines() if line]
    assert len(warnings) == 1 and "2 event(s)" in warnings[0], result.stderr
