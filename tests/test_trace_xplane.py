"""Real xplane.pb files (AMD GPU running JAX/XLA, V100 TensorFlow, TPU v6e and v5e JAX), checked by other readers:
XProf's own trace_viewer converter for the GPU planes, and plain ProfileData loops written here for the TPU."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from hloscope.trace.hlo_map import kernel_time_by_hlo_op
from hloscope.trace.load import load_traces
from hloscope.trace.stats import trace_stats
from hloscope.trace.xplane import XSpaceEvents
from hloscope.trace.xplane_proto import xspace_class

AMD = "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb"
V100 = "xprof/gpu_tf_multi_worker/v100_worker.xplane.pb"
TPU = "xprof/tpu/tpu_inference_2.xplane.pb"


def _trace_viewer_rows(path) -> Counter:
    """(process, thread) -> complete-event count, from XProf's trace_viewer converter (no hloscope code)."""
    from xprof.convert import raw_to_tool_data
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer", {})
    events = json.loads(data)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    return Counter(
        (processes.get(e["pid"]), threads.get((e["pid"], e.get("tid")))) for e in events if e.get("ph") == "X"
    )


def _profile(path):
    from jax.profiler import ProfileData

    return ProfileData.from_file(str(path))


def test_amd_gpu_xplane_kernels_match_xprof(fixtures_dir):
    path = fixtures_dir / AMD
    rows = _trace_viewer_rows(path)
    stream_events = sum(n for (process, thread), n in rows.items() if process.startswith("/device:GPU") and thread.startswith("Stream"))
    assert stream_events == 150  # SOURCES.md: /device:GPU:0 line "Stream #2", 150 events
    (trace,) = load_traces(path)
    assert trace.format == "xplane"
    stats = trace_stats(trace).to_dict()
    assert stats["kernels"] == stream_events
    assert stats["devices"] == 1
    # Every event of every /device: and /host: plane is read (SOURCES.md: 150 device + 1,842 host events).
    assert stats["events"] == 150 + 1842


def test_amd_gpu_kernel_time_per_hlo_op(fixtures_dir):
    path = fixtures_dir / AMD
    expected: dict[str, float] = defaultdict(float)
    for plane in _profile(path).planes:
        if plane.name == "/device:GPU:0":
            for line in plane.lines:
                for event in line.events:
                    expected[dict(event.stats)["hlo_op"]] += event.duration_ns / 1000.0
    (trace,) = load_traces(path)
    measured = kernel_time_by_hlo_op(trace)
    assert measured.keys() == expected.keys()
    for name, total in expected.items():
        assert measured[name] == pytest.approx(total)
    assert "te_fused_attn_forward_ffi.10" in measured
    assert all(event.hlo_module == "jit_loss_fn" for event in trace.events if event.is_device_exec)
    # `trace stats` lists the same totals, largest first.
    rows = trace_stats(trace, top=1000).to_dict()["hlo_ops"]
    assert {row["hlo_op"]: row["total_us"] for row in rows} == pytest.approx(dict(expected), abs=1e-3)
    assert [row["total_us"] for row in rows] == sorted((row["total_us"] for row in rows), reverse=True)
    assert {row["hlo_module"] for row in rows} == {"jit_loss_fn"}


def test_v100_tensorflow_xplane_matches_xprof(fixtures_dir):
    path = fixtures_dir / V100
    rows = _trace_viewer_rows(path)
    compute = sum(n for (p, t), n in rows.items() if p.startswith("/device:GPU") and t.startswith("Stream") and "(Compute)" in t)
    memcpy = sum(n for (p, t), n in rows.items() if p.startswith("/device:GPU") and t.startswith("Stream") and "Memcpy" in t)
    steps = sum(n for (p, t), n in rows.items() if p.startswith("/device:GPU") and t == "Steps")
    stats = trace_stats(load_traces(path)[0]).to_dict()
    assert stats["kernels"] == compute == 1330
    assert stats["steps"] == 1  # the same step 0 on GPU:4 and GPU:6
    assert steps == 2
    # Memory copies are device time too, in their own category.
    assert memcpy == 226
    assert stats["categories"]["memcpy/memset"] > 0
    assert stats["per_step"][0]["kernels"] == compute


def test_tpu_xplane_ops_and_modules(fixtures_dir):
    path = fixtures_dir / TPU
    ops = 0
    all_events = 0
    tpu0_events = 0
    modules = set()
    for plane in _profile(path).planes:
        count = sum(len(list(line.events)) for line in plane.lines)
        if plane.name.startswith(("/device:", "/host:")):
            all_events += count
        if plane.name == "/device:TPU:0":
            tpu0_events = count
        if plane.name.startswith("/device:TPU"):
            for line in plane.lines:
                if line.name == "XLA Ops":
                    ops += len(list(line.events))
                if line.name == "XLA Modules":
                    modules.update(event.name.split("(")[0] for event in line.events)
    assert tpu0_events == 2317  # SOURCES.md
    (trace,) = load_traces(path)
    stats = trace_stats(trace).to_dict()
    assert stats["kernels"] == ops
    assert stats["events"] == all_events
    assert stats["devices"] == 4
    events = [event for event in trace.events if event.is_device_exec]
    # Op names are HLO text on TPU: the event carries the instruction name, and the module from "XLA Modules".
    assert all(" = " not in event.name for event in events)
    assert {event.hlo_module for event in events} <= modules
    assert "jit__psum" in {event.hlo_module for event in events}
    all_reduce = [event for event in events if event.name == "all-reduce"]
    assert all_reduce and all(event.category == "collective/communication" for event in all_reduce)


@pytest.mark.parametrize("relative", [AMD, V100, TPU])
def test_shares_and_categories_add_up(fixtures_dir, relative):
    stats = trace_stats(load_traces(fixtures_dir / relative)[0], top=1000).to_dict()
    assert sum(stats["categories"].values()) == pytest.approx(stats["device_time_us"], rel=1e-6)
    assert sum(row["total_us"] for row in stats["top"]) == pytest.approx(stats["device_time_us"], rel=1e-6)
    assert sum(row["share"] for row in stats["top"]) == pytest.approx(1.0, abs=1e-3)


def test_a_bytes_stat_that_is_not_utf8_is_read_as_text(tmp_path):
    """XLA's reader raised UnicodeDecodeError on such a stat; its text is kept with the bad byte replaced."""
    space = xspace_class()()
    plane = space.planes.add(name="/device:GPU:0", id=1)
    plane.event_metadata[1].name = "fusion.1"
    plane.stat_metadata[1].name = "hlo_module"
    event = plane.lines.add(name="Stream #7", id=1).events.add(metadata_id=1, duration_ps=2_000_000)
    event.stats.add(metadata_id=1, bytes_value=b"jit_\xffstep")
    path = tmp_path / "bytes.xplane.pb"
    path.write_bytes(space.SerializeToString())
    (read,) = list(XSpaceEvents(path))
    assert read.name == "fusion.1" and read.hlo_module == "jit_\ufffdstep" and read.dur_us == 2.0


TPU_V5E = Path(__file__).parent / "data" / "traces" / "tpu_v5e_vit_step.xplane.pb"


def test_tpu_ops_take_their_category_from_the_profilers_hlo_category():
    """A TPU op name ("fusion.246") does not say what the fusion computes; XLA's `hlo_category` of each op does, and
    XProf's op profile groups by it. The matmul/conv time of a ViT step on a TPU v5e is XProf's "convolution fusion"
    time (by name it came out at 4.5% instead of 60%), copy/transpose its "data formatting": equal but for the
    nanosecond each event's time loses when read as XLA's reader does (whole nanoseconds)."""
    from xprof.convert import raw_to_tool_data

    data, _ = raw_to_tool_data.xspace_to_tool_data([str(TPU_V5E)], "op_profile", {"group_by": "category"})
    xprof = {c["name"]: c["metrics"]["rawTime"] / 1e6 for c in json.loads(data)["byCategory"]["children"]}
    stats = trace_stats(load_traces(TPU_V5E)[0]).to_dict()
    assert stats["category_source"] == "profiler"
    assert stats["categories"]["matmul/conv"] == pytest.approx(xprof["convolution fusion"], rel=1e-4)
    assert stats["categories"]["copy/transpose"] == pytest.approx(xprof["data formatting"], rel=1e-4)
    assert stats["categories"]["matmul/conv"] / stats["device_time_us"] > 0.5
