"""Other vendors' device work in its own Kineto category. Meta MTIA traces (HTA's fixtures: device work
in `mtia_ccp_events`, launches in `mtia_runtime`) give kernels, copies and device time; a trace whose device-like events no rule
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


# MTIA's device queue (`mtia_ccp_events`) holds its kernels (op names: `fc-dtype_Float`, `pe_exe`, ...), its DMA
# transfers (`dma_request`, with args.direction) and event record / wait markers, which are not work.
MTIA_TRAINING = "hta/mtia_trace_single_rank__mtia_rank_0.json.gz"
MTIA_NOT_KERNELS = {"dma_request", "event_record", "event_wait"}


@pytest.mark.parametrize("relative, kernels, copies", [(MTIA, 97, 877), (MTIA_TRAINING, 3453, 22361)])
def test_mtia_kernels_copies_and_waits(real_file, relative, kernels, copies, capsys):
    path = real_file(relative)
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    queue = [e for e in events if e.get("cat") == "mtia_ccp_events"]
    kernel_events = [e for e in queue if e["name"] not in MTIA_NOT_KERNELS]
    copy_events = [e for e in queue if e["name"] == "dma_request"]
    runtime = [e for e in events if e.get("cat") == "mtia_runtime"]
    assert all(e["args"].get("direction") for e in copy_events)
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["kernels"] == len(kernel_events) == kernels
    assert stats["executions_by_category"]["memcpy/memset"] == len(copy_events) == copies
    assert stats["device_time_us"] == pytest.approx(sum(e["dur"] for e in kernel_events + copy_events), abs=1e-3)
    assert stats["categories"]["memcpy/memset"] == pytest.approx(sum(e["dur"] for e in copy_events), abs=1e-3)
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
    stats = trace_stats(trace).to_dict()
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


def test_habana_hpu_op_is_host_runtime_not_device_time(tmp_path):
    """libkineto's ActivityType.h: `HPU_OP, // HPU host side runtime event` (newer releases alias it to RUNTIME)."""
    events = [{"ph": "X", "cat": "hpu_op", "name": "synLaunch", "pid": 1, "tid": 2, "ts": 10.0, "dur": 5.0,
               "args": {"correlation": 7}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 2, "ts": 9.0, "dur": 8.0}]
    path = tmp_path / "hpu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["kernels"] == 0 and stats["device_time_us"] == 0
    assert stats["host_runtime_us"] == 5.0
