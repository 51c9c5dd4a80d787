"""issue 13: other vendors' device work in its own Kineto category. Meta MTIA traces (HTA's fixtures: device work
in `mtia_ccp_events`, launches in `mtia_runtime`) give device time; a trace whose device-like events no rule
classifies gets one warning with their count. Checked against `json.load`."""

from __future__ import annotations

import gzip
import json

import pytest

from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

MTIA = "hta/mtia_inference_trace__mtia_inference_rank_0.json.gz"
FIXTURES_WITHOUT_WARNINGS = [
    "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz",
    "hta/nccl_parser_config__nccl_data.json.gz",
    "tracelens/traces__b200__eager_trace.json.gz",
    MTIA,
]


def _mtia(real_file):
    path = real_file(MTIA)
    return path


def test_mtia_device_time(real_file, capsys):
    path = _mtia(real_file)
    events = [e for e in json.loads(gzip.decompress((path).read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    device = [e for e in events if e.get("cat") == "mtia_ccp_events"]
    runtime = [e for e in events if e.get("cat") == "mtia_runtime"]
    stats = trace_stats(load_trace(path))
    assert stats["kernels"] == len(device) == 1313
    assert stats["device_time_us"] == pytest.approx(sum(e["dur"] for e in device), abs=1e-3)
    assert stats["host_runtime_us"] == pytest.approx(sum(e["dur"] for e in runtime), abs=1e-3)
    assert "warning" not in capsys.readouterr().err


def test_unknown_device_category_gets_one_warning(real_file, tmp_path, capsys):
    """The MTIA trace as a vendor hloscope does not know would write it: the device events' category renamed."""
    document = json.loads(gzip.decompress((_mtia(real_file)).read_bytes()))
    for event in document["traceEvents"]:
        if event.get("cat") == "mtia_ccp_events":
            event["cat"] = "acme_queue_activity"  # carries args.stream, like every Kineto device activity
    path = tmp_path / "acme.json"
    path.write_text(json.dumps(document))
    expected = sum(1 for e in document["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "acme_queue_activity")
    trace = load_trace(path)
    stats = trace_stats(trace)
    trace_stats(trace)  # read twice: still one warning
    assert stats["device_time_us"] == 0
    err = capsys.readouterr().err
    assert err.count("warning") == 1
    assert f"{expected:,} event(s) look like device work" in err and "'acme_queue_activity'" in err


@pytest.mark.parametrize("relative", FIXTURES_WITHOUT_WARNINGS)
def test_known_traces_get_no_warning(real_file, relative, capsys):
    path = real_file(relative)
    trace_stats(load_trace(path))
    assert "look like device work" not in capsys.readouterr().err
