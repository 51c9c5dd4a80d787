"""PyTorch 1.8/1.9 Kineto categories (Kernel, Memcpy, Memset, Runtime, Operator), checked against json.load."""

from __future__ import annotations

import json
from pathlib import Path

from hloscope.trace.load import load_traces
from hloscope.trace.stats import trace_stats

TRACE = Path(__file__).parent / "data" / "traces" / "pytorch18_excerpt.json"


def test_pytorch18_categories_read():
    events = [e for e in json.loads(TRACE.read_text())["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e["cat"] in ("Kernel", "Memcpy", "Memset")]
    runtime = [e for e in events if e["cat"] == "Runtime"]
    stats = trace_stats(load_traces(str(TRACE))[0]).to_dict()
    assert stats["kernels"] == sum(e["cat"] == "Kernel" for e in events) == 1
    assert stats["device_time_us"] == sum(e["dur"] for e in device)
    assert stats["host_runtime_us"] == sum(e["dur"] for e in runtime)
    assert stats["steps"] == 1
