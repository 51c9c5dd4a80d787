"""JSON integers above 2^63 are valid JSON (rocprofiler-sdk writes 64-bit unsigned ids) and are read as
Python ints, never refused as "integer overflow". Checked against `json.load`."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from hloscope.errors import InputError
from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

ROCPROF = "tracelens/rocprof__908_results.json.gz"
ALEXNET = "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
HUGE = 17332996360099338395  # from the rocprofiler file: above 2^63, below 2^64
HUGER = 2**70 + 1


def test_rocprofiler_output_is_json_but_not_a_trace(real_file):
    path = real_file(ROCPROF)
    document = json.loads(gzip.decompress((path).read_bytes()))  # the reference: valid JSON with integers above 2^63
    assert "traceEvents" not in document and HUGE > 2**63
    assert str(HUGE) in gzip.decompress(path.read_bytes()).decode()
    with pytest.raises(InputError, match="no 'traceEvents' list"):  # not "integer overflow"
        list(load_trace(path).events)


@pytest.mark.parametrize("layout", ["object", "array"])
def test_a_kineto_trace_with_huge_integers(fixtures_dir, tmp_path, layout):
    """The real A100 alexnet trace with 64-bit-unsigned and larger integers added to its args; both the fast decoder
    (a {"traceEvents": [...]} document) and the streaming one (a bare event array) read it as json.load does."""
    document = json.loads(gzip.decompress((fixtures_dir / ALEXNET).read_bytes()))
    for index, event in enumerate(document["traceEvents"]):
        if isinstance(event.get("args"), dict):
            event["args"]["rocprof_id"] = HUGE + index
            event["args"]["bigger"] = HUGER
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document if layout == "object" else document["traceEvents"]))
    reference = json.loads(path.read_text())
    events = reference["traceEvents"] if layout == "object" else reference
    complete = [e for e in events if e.get("ph") == "X"]
    kernels = [e for e in complete if e.get("cat") == "kernel"]
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["events"] == len(complete)
    assert stats["kernels"] == len(kernels) == 79
    assert stats["device_time_us"] == pytest.approx(
        sum(e["dur"] for e in complete if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), abs=1e-3)


def test_a_correlation_id_beyond_64_bits_links_nothing(fixtures_dir, tmp_path):
    document = json.loads(gzip.decompress((fixtures_dir / ALEXNET).read_bytes()))
    kernel = next(e for e in document["traceEvents"] if e.get("cat") == "kernel")
    kernel["args"]["correlation"] = HUGER
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document))
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["kernels"] == 79


def _launch_us(events: list[dict]) -> float:
    """json.load's reading of host launch time: runtime calls whose correlation id some device execution carries."""
    device = {e["args"]["correlation"] for e in events
              if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "args" in e}
    return sum(e["dur"] for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"
               and e.get("args", {}).get("correlation") in device)


@pytest.mark.parametrize("layout", ["object", "array"])
@pytest.mark.parametrize("ids", ["plus 2^63", "plus 2^64", "random 64-bit"])
def test_64_bit_correlation_ids_still_link_launches_to_their_work(fixtures_dir, tmp_path, ids, layout):
    """rocprofiler writes 64-bit ids: half of them do not fit a signed 64-bit integer and most are above 2^62 (where
    XLA CPU flow ids begin). Every id of a real A100 trace replaced that way: the same launches are matched."""
    document = json.loads(gzip.decompress((fixtures_dir / ALEXNET).read_bytes()))
    chosen: dict[int, int] = {}
    draw = random.Random(13)
    for event in document["traceEvents"]:
        args = event.get("args")
        if isinstance(args, dict) and isinstance(args.get("correlation"), int):
            old = args["correlation"]
            if ids == "random 64-bit":
                args["correlation"] = chosen.setdefault(old, draw.getrandbits(64))
            else:
                args["correlation"] = old + (2**63 if ids == "plus 2^63" else 2**64)
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(document if layout == "object" else document["traceEvents"]))
    original = trace_stats(load_trace(fixtures_dir / ALEXNET)).to_dict()
    stats = trace_stats(load_trace(path)).to_dict()
    expected = _launch_us(json.loads(path.read_text())["traceEvents"] if layout == "object" else json.loads(
        path.read_text()))
    assert expected > 0
    assert stats["host_launch_us"] == pytest.approx(expected, abs=1e-3) == original["host_launch_us"]
    assert stats["per_step"] == original["per_step"] and stats["before_window"] == original["before_window"]
