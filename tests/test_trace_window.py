"""Device work launched before the profiling window (its launch is not in the trace: its correlation id is
below every captured launch) belongs to no captured step and is reported apart. Checked against `json.load` on a
V100 DDP trace (HTA) and an MI300X DDP trace (TraceLens); shared/fixtures/SOURCES.md."""

from __future__ import annotations

import gzip
import json

import pytest

from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

V100_DDP = "hta/trace_diff__test__test.json.gz"
MI300_DDP = "tracelens/traces__mi300__resnet_act_checkpoint.json.gz"
NO_EARLY_WORK = "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME = ("cuda_runtime", "cuda_driver")


def _expected(path) -> tuple[dict, dict[int, int]]:
    """From the raw JSON: what has no launch in the trace, and per step the kernels whose launch lies in its marker."""
    events = [e for e in json.loads(gzip.decompress((path).read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") in RUNTIME and "correlation" in e["args"]}
    first_launch = min(launches)
    device = [e for e in events if e.get("cat") in DEVICE]
    early = [e for e in device if e["args"]["correlation"] not in launches]
    assert early and all(e["args"]["correlation"] < first_launch for e in early)
    before = {"executions": len(early), "kernels": sum(e["cat"] == "kernel" for e in early),
              "device_time_us": sum(e["dur"] for e in early)}
    markers: dict[int, tuple[float, float]] = {}
    for e in events:
        if e["name"].startswith("ProfilerStep#"):
            number = int(e["name"].split("#")[1])
            if number not in markers or e["ts"] < markers[number][0]:
                markers[number] = (e["ts"], e["ts"] + e["dur"])
    per_step = dict.fromkeys(markers, 0)
    for kernel in device:
        launch = launches.get(kernel["args"]["correlation"])
        if kernel["cat"] == "kernel" and launch is not None:
            for number, (start, end) in markers.items():
                if start <= launch["ts"] <= end:
                    per_step[number] += 1
    return before, per_step


@pytest.mark.parametrize("relative,first_step", [(V100_DDP, 1555), (MI300_DDP, 746)])
def test_work_launched_before_the_window_is_in_no_step(real_file, relative, first_step):
    path = real_file(relative)
    before, per_step = _expected(path)
    stats = trace_stats(load_trace(path)).to_dict()
    assert {s["step"]: s["kernels"] for s in stats["per_step"]} == per_step
    assert stats["per_step"][0]["kernels"] == first_step  # not 2,101 / 1,383
    assert stats["before_window"]["executions"] == before["executions"]
    assert stats["before_window"]["kernels"] == before["kernels"]
    # end - start of timestamps near 3.7e12 us: a few ns of rounding per event
    assert stats["before_window"]["device_time_us"] == pytest.approx(before["device_time_us"], rel=1e-6)
    # Nothing is lost: the steps' executions and the early ones are every device execution.
    assert sum(sum(s["executions_by_category"].values()) for s in stats["per_step"]) + before["executions"] == sum(
        stats["executions_by_category"].values())


def test_a_trace_without_early_work_reports_none(real_file):
    stats = trace_stats(load_trace(real_file(NO_EARLY_WORK))).to_dict()
    assert stats["before_window"] == {"executions": 0, "kernels": 0, "device_time_us": 0.0}
    assert [s["kernels"] for s in stats["per_step"]] == [870] * 5
