"""`trace stats` on a host-only PyTorch trace (PyTorch on the CPU: no device events) gives the framework ops that
did the work, per step. Checked against the raw Kineto JSON of a real trace with its device events removed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from statistics import median

import pytest
from helpers import hloscope

from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

SAMPLED_TRACE = "hta/trace_filter__sampled_rank-0.json.gz"  # a real GPU run's trace: 2 ProfilerSteps, aten ops
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "async_cpu_to_gpu", "gpu_user_annotation"}


def _host_only(fixtures_dir: Path, tmp_path: Path) -> tuple[Path, list[dict]]:
    data = json.loads(gzip.decompress((fixtures_dir / SAMPLED_TRACE).read_bytes()))
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in DEVICE_CATEGORIES]
    path = tmp_path / "host_only.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path, data["traceEvents"]


def _top_level_aten(events: list[dict], start: float, end: float) -> dict[str, list[float]]:
    """name -> durations (us, clipped to the step) of aten ops starting in [start, end) not nested in another aten
    op of the same thread: computed from the raw JSON, independently of hloscope's reader."""
    # Stable sort: an op and its callee with the same start and length (aten::to calling aten::_to_copy) are
    # ordered as the file writes them, caller first.
    ops = sorted(((e["tid"], e["ts"], -e["dur"], e["name"]) for e in events
                  if e.get("ph") == "X" and e["name"].startswith("aten::") and start <= e["ts"] < end),
                 key=lambda op: op[:3])
    reach: dict = {}
    out: dict[str, list[float]] = {}
    for tid, ts, neg_dur, name in ops:
        if ts < reach.get(tid, float("-inf")):
            continue
        reach[tid] = ts - neg_dur
        out.setdefault(name, []).append(min(ts - neg_dur, end) - ts)
    return out


def test_host_op_table_matches_the_raw_json(fixtures_dir, tmp_path):
    path, events = _host_only(fixtures_dir, tmp_path)
    stats = trace_stats(load_trace(path)).to_dict()
    assert stats["kernels"] == 0 and stats["steps"] == 2
    host = stats["host_ops"]
    # Two steps: the first is the profiler's warm-up only when more than two remain, so both are used.
    markers = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))
    assert host["steps_used"] == [s["step"] for s in stats["per_step"]]
    windows = [(markers[0][0], markers[1][0]), (markers[1][0], markers[1][1])]
    expected = [_top_level_aten(events, start, end) for start, end in windows]
    rows = {row["name"]: row for row in host["ops"]}
    assert len(rows) == min(10, len({n for step in expected for n in step}))
    for name, row in rows.items():
        per_step = [sum(step.get(name, [])) for step in expected]
        calls = [len(step.get(name, [])) for step in expected]
        assert row["us_per_step"] == pytest.approx(median(per_step), rel=1e-9), name
        assert row["calls_per_step"] == median(calls), name
        durations = sorted(d for step in expected for d in step.get(name, []))
        assert row["per_call_us"] == pytest.approx(median(durations), rel=1e-9)
        assert row["max_call_us"] == pytest.approx(durations[-1], rel=1e-9)
    ranked = [row["us_per_step"] for row in host["ops"]]
    assert ranked == sorted(ranked, reverse=True)
    # The step splits into time inside top-level framework ops and the rest, exactly.
    assert sum(host["parts_us"].values()) == pytest.approx(host["step_us"], rel=1e-6)


def test_a_trace_with_device_kernels_has_no_host_op_table(fixtures_dir):
    stats = trace_stats(load_trace(fixtures_dir / SAMPLED_TRACE)).to_dict()
    assert stats["kernels"] > 0 and "host_ops" not in stats


def test_host_op_table_is_the_same_whatever_the_hash_seed(fixtures_dir, tmp_path):
    """Op names and step parts come from sets: the JSON must not depend on PYTHONHASHSEED (it did: parts_us order,
    and the order of ops with equal time per step)."""

    path, _ = _host_only(fixtures_dir, tmp_path)
    outputs = set()
    for seed in ("0", "1", "2", "3"):
        done = hloscope("trace", "stats", "--json", "--top", "1000", path, env={"PYTHONHASHSEED": seed})
        assert done.code == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
