"""`trace stats` reads a Kineto trace in a lean pass (trace/load.py's CheckedEvents.lean: host ops and annotations
counted, not built): its record must be the one a full pass over every event gives, on real PyTorch traces (GPU and
CPU, with and without input shapes) and on a trace with impossible times among its host ops."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import fixture

from hloscope.trace.load import CheckedEvents, load_trace
from hloscope.trace.model import Trace
from hloscope.trace.stats import trace_stats

TRACES = [
    "hta/trace_diff__control__control.json.gz",  # A100, 109k events, input shapes
    "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "tracelens/traces__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/traces__b200__eager_trace.json.gz",
]


def _full_pass(path: Path) -> Trace:
    """The trace with every event built: a list, which trace_stats reads as it is."""
    trace = load_trace(path)
    return Trace(file=trace.file, format=trace.format, events=list(trace.events), metadata=trace.metadata)


@pytest.mark.parametrize("name", TRACES)
def test_the_lean_pass_gives_the_full_passs_record(name):
    path = fixture(name)
    lean = load_trace(path)
    assert isinstance(lean.events, CheckedEvents)
    record = trace_stats(lean)
    assert lean.events.counted > 0  # host ops were counted, not built
    assert record.to_dict() == trace_stats(_full_pass(path)).to_dict()


def test_impossible_host_ops_are_left_out_by_both_passes(tmp_path):
    """Host ops with a negative duration or a time past the year 5000 are left out of both passes' counts alike."""
    events = json.loads(gzip.decompress(fixture("hta/trace_diff__control__control.json.gz").read_bytes()))
    host = [e for e in events["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    for event in host[:5]:
        event["dur"] = -1
    for event in host[5:8]:
        event["ts"] = 1e18
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(events))
    lean = trace_stats(load_trace(path))
    full = trace_stats(_full_pass(path))
    assert lean.to_dict() == full.to_dict()
    assert lean.events == full.events
