"""What explain reads from run directories, on real GPU data: the ViT-Base H100 compilation's HLO statistics and real
Kineto traces from A100 and H100 GPUs wrapped in hand-written run directories."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from math import comb
from pathlib import Path
from statistics import median

import pytest
from helpers import run_record

from hloscope.explain.collect import add_hlo, from_run_record, step_timeline, summarize_run
from hloscope.explain.engine import explain
from hloscope.explain.ledger import RunLedger
from hloscope.explain.summary import ModeSummary
from hloscope.hlo.load import load_modules
from hloscope.hlo.stats import module_stats
from hloscope.trace.model import HOST_OP, KERNEL, LAYOUT, MATMUL, Event

A100_TRACE = "hta/trace_diff__control__control.json.gz"  # 6 ProfilerSteps, 1,428 kernels each


def test_hlo_summary_of_vit_base_on_h100(fixtures_dir):
    (loaded,) = [m for m in load_modules(fixtures_dir / "gpu_aot/vit_base_sm90_cublas") if m.stage == "after_optimizations"]
    summary = ModeSummary(mode="jax")
    add_hlo(summary, [module_stats(loaded).to_dict()])
    # SOURCES.md, thunk_sequence.txt: 789 kCustomKernel + 243 kCublasLtMatmul + 2 kConvolution launches, 60 kCopy apart.
    assert summary.kernels == 789 + 243 + 2
    assert summary.kernel_kinds == {"fusion kLoop": 399, "fusion kInput": 354, "fusion kCustom:__triton": 36,
                                    "cublas": 243, "cudnn": 2}
    assert sum(summary.kernel_kinds.values()) == summary.kernels
    # hlo stats costs cuBLAS GEMMs and cuDNN forward convolutions (GpuHloCostAnalysis convention): none left uncosted
    assert summary.uncosted_custom_calls == 0 and summary.platform == "gpu"


def _run_dir(root: Path, mode: str, trace: Path, step_times_s: list[float], platform: str = "cuda") -> Path:
    """A hand-written run directory around a real trace, with the given timed steps."""
    run = root / mode
    (run / "kineto").mkdir(parents=True)
    shutil.copy(trace, run / "kineto" / "worker.pt.trace.json.gz")
    record = {"schema_version": 1, "run_id": mode, "mode": mode, "status": "ok", "config": {"data": "device"},
              "environment": {"platform": platform},
              "timing": {"median_s": median(step_times_s), "step_times_s": step_times_s},
              "artifacts": [{"kind": "trace", "path": "kineto/worker.pt.trace.json.gz", "format": "kineto"}]}
    (run / "run.json").write_text(json.dumps(record))
    return run


# ---- figures computed from the raw Kineto JSON (json + gzip only, not hloscope's reader) --------------------------

DEVICE_EXEC = {"kernel", "gpu_memcpy", "gpu_memset"}  # what the device executes; cuda_runtime calls are host side


def _raw_events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _union_us(intervals) -> float:
    total, current = 0.0, None
    for begin, finish in sorted(intervals):
        if current is None or begin > current[1]:
            total += current[1] - current[0] if current else 0.0
            current = [begin, finish]
        else:
            current[1] = max(current[1], finish)
    return total + (current[1] - current[0] if current else 0.0)


def _raw_steps(events: list[dict]) -> list[dict]:
    """Each ProfilerStep as a loop period: [its start, the next step's start); the last one to its marker's end or the
    end of the device work that started in it. Busy = union of kernel/memcpy/memset intervals clipped to the period."""
    markers = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in events
                     if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))
    device = [(e["ts"], e["ts"] + e["dur"], e["cat"]) for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_EXEC]
    steps = []
    for i, (start, marker_end, number) in enumerate(markers):
        if i + 1 < len(markers):
            end = markers[i + 1][0]
        else:
            end = max([marker_end] + [finish for begin, finish, _ in device if begin >= start])
        started = [(b, f, c) for b, f, c in device if start <= b < end]
        busy = _union_us((max(b, start), min(f, end)) for b, f, _ in device if f > start and b < end)
        steps.append({"number": number, "start": start, "step_s": (end - start) / 1e6, "busy_s": busy / 1e6,
                      "executions": len(started), "kernels": sum(c == "kernel" for _, _, c in started),
                      "copies": sum(c != "kernel" for _, _, c in started), "started": sorted(started)})
    return steps


def _faster_copy(source: Path, target: Path, scale: float = 0.8) -> Path:
    """The same A100 trace as a faster run that executes fewer ops: memcpy/memset dropped, every time x `scale`."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    t0 = min(e["ts"] for e in data["traceEvents"] if "ts" in e)
    events = []
    for event in data["traceEvents"]:
        if event.get("cat") in {"gpu_memcpy", "gpu_memset"}:
            continue
        event = dict(event)
        if "ts" in event:
            event["ts"] = t0 + (event["ts"] - t0) * scale
        if "dur" in event:
            event["dur"] = event["dur"] * scale
        events.append(event)
    data["traceEvents"] = events
    target.write_bytes(gzip.compress(json.dumps(data).encode()))
    return target


def test_ledger_of_a_real_a100_trace_against_the_raw_json(fixtures_dir, tmp_path):
    """6 ProfilerSteps of a real A100 run: the first is the profiler's warm-up; per kept step the ledger's step is the
    loop period, its busy time the union of the device executions clipped to it, and its nodes add up to the step."""
    raw = _raw_steps(_raw_events(fixtures_dir / A100_TRACE))
    assert [s["number"] for s in raw] == [1009, 1010, 1011, 1012, 1013, 1014]
    kept = raw[1:]
    summary = summarize_run(_run_dir(tmp_path, "a100", fixtures_dir / A100_TRACE, [s["step_s"] for s in raw]))
    ledger = summary.ledger
    assert summary.platform == "gpu" and ledger.device
    assert ledger.profiled_steps == 6 and list(ledger.dropped) == ["1009"] and "warm-up" in ledger.dropped["1009"]
    assert ledger.step_s == pytest.approx([s["step_s"] for s in kept], abs=1e-9)
    assert ledger.busy_s == pytest.approx([s["busy_s"] for s in kept], abs=1e-9)
    # e.g. step 1012: 76.770 ms from its start to step 1013's, 66.030 ms of it with a kernel, memcpy or memset running
    assert (kept[2]["step_s"], kept[2]["busy_s"]) == pytest.approx((0.076770, 0.066030), abs=1e-9)
    for i, step in enumerate(kept):
        nodes = {name: values[i] for name, values in ledger.nodes.items()}
        assert sum(nodes.values()) == pytest.approx(step["step_s"], abs=1e-9)
        device = sum(v for name, v in nodes.items() if name.startswith("device:"))
        assert device == pytest.approx(step["busy_s"], abs=1e-9)
        assert all(name.startswith(("device:", "idle:")) and v >= 0 for name, v in nodes.items())
    assert summary.device_busy_s == pytest.approx(median(s["busy_s"] for s in kept), abs=1e-9)
    assert summary.device_idle_s == pytest.approx(median(s["step_s"] - s["busy_s"] for s in kept), abs=1e-9)
    assert summary.profiled_step_s == pytest.approx(median(s["step_s"] for s in kept), abs=1e-9)
    assert sum(summary.categories_s.values()) == pytest.approx(
        sum(ledger.node_median(n) for n in ledger.nodes if n.startswith("device:")))
    # Counts: every execution in the step it started in (1,428 kernels + 147 memcpy/memset from step 1010 on).
    assert summary.trace_kernels == median(s["kernels"] for s in kept) == 1428
    assert summary.executed_per_step == median(s["executions"] for s in kept) == 1575
    assert summary.executed_copies_per_step >= median(s["copies"] for s in kept) == 147
    # The timeline strip: the middle kept step's (1012) device executions, (start_s from its marker, duration_s, category).
    middle = kept[len(kept) // 2]
    assert isinstance(summary.timeline, list) and len(summary.timeline) == len(middle["started"])
    assert all(isinstance(span, tuple) and len(span) == 3 for span in summary.timeline)
    ordered = sorted(summary.timeline)
    assert [x for s, d, _ in ordered for x in (s, d)] == pytest.approx(
        [x for b, f, _ in middle["started"] for x in ((b - middle["start"]) / 1e6, (f - b) / 1e6)], abs=1e-9)
    assert {c for _, _, c in summary.timeline} <= {n.removeprefix("device:") for n in ledger.nodes}


def test_explain_between_two_real_gpu_runs_adds_up_and_annotates_the_right_nodes(fixtures_dir, tmp_path):
    """The A100 run against the same trace made 20% faster with its memcpy/memset removed: the device nodes that
    shrank are the contributors, contributors + residual == gap, and kernel_launches cites the executions per step
    counted in the profile (1,575 against 1,428)."""
    slow_raw = _raw_steps(_raw_events(fixtures_dir / A100_TRACE))
    fast_trace = _faster_copy(fixtures_dir / A100_TRACE, tmp_path / "fast.json.gz")
    fast_raw = _raw_steps(_raw_events(fast_trace))
    slow_times, fast_times = [s["step_s"] for s in slow_raw], [s["step_s"] for s in fast_raw]
    slow = summarize_run(_run_dir(tmp_path, "a100", fixtures_dir / A100_TRACE, slow_times))
    fast = summarize_run(_run_dir(tmp_path, "a100-fast", fast_trace, fast_times))
    assert fast.executed_per_step == median(s["executions"] for s in fast_raw[1:]) == 1428
    report = explain([fast, slow]).to_dict()  # as `explain --json` prints it
    assert report["baseline"] == "a100-fast"
    entry = {m["mode"]: m for m in report["modes"]}["a100"]
    assert entry["gap_s"] == pytest.approx(median(slow_times) - median(fast_times), abs=1e-12)
    assert entry["gap_ci_s"][0] <= entry["gap_s"] <= entry["gap_ci_s"][1] and entry["gap_ci_s"][0] > 0
    assert entry["significant"] is True and entry["verdict"] == "slower"
    # Additive by construction: contributors (significant nodes + the within-noise line) + residual == the timed gap,
    # and the profiled gap is the difference of the two ledgers' totals.
    assert sum(c["seconds"] for c in entry["contributors"]) + entry["residual_s"] == pytest.approx(entry["gap_s"], abs=1e-12)
    assert entry["profiled_gap_s"] == pytest.approx(slow.ledger.total_s - fast.ledger.total_s, abs=1e-12)
    significant = [c for c in entry["contributors"] if c["significant"]]
    assert significant and all(c["node"].startswith("device:") and c["seconds"] > 0 for c in significant)
    # each part's p-value is the exact two-sided Mann-Whitney U of its per-step seconds (5 kept steps a side), as scipy
    # computes it from the evidence; the parts whose steps do not overlap at all get the smallest p, 2 / C(10, 5)
    from scipy.stats import mannwhitneyu

    apart = []
    for c in significant:
        a, b = c["evidence"]["a100"], c["evidence"]["a100-fast"] or [0.0] * 5
        assert c["p_value"] == pytest.approx(mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)
        assert c["p_value"] < 0.05
        if min(a) > max(b):
            apart.append(c["node"])
            assert c["p_value"] == pytest.approx(2 / comb(10, 5))
        else:  # steps that overlap are less extreme than any ordering that keeps the two sides apart
            assert c["p_value"] > 2 / comb(10, 5) * (1 + 1e-9), c
    assert "device:memcpy/memset" in apart  # the fast run has none of it: no overlap
    # The largest: memcpy/memset, all of the slow run's (the fast run has none), its median over the kept steps.
    first = significant[0]
    assert first["node"] == "device:memcpy/memset" and fast.ledger.node_median("device:memcpy/memset") == 0.0
    assert first["seconds"] == pytest.approx(median(slow.ledger.nodes["device:memcpy/memset"]))
    # Each hypothesis annotates the largest significant node it can explain; the others are named in also_nodes.
    rules = {c["node"]: [a["rule"] for a in c["annotations"]] for c in significant}
    assert rules == {c["node"]: (["kernel_launches", "layout_changes"] if c is first else []) for c in significant}
    assert first["annotations"][0]["also_nodes"] == [c["node"] for c in significant[1:]]  # every device node
    assert "device:copy/transpose" in first["annotations"][1]["also_nodes"]
    launches = next(a for a in first["annotations"] if a["rule"] == "kernel_launches")
    assert launches["evidence"]["executions_per_step"] == {"a100": 1575, "a100-fast": 1428}
    assert launches["evidence"]["counted_from"].startswith("profile")
    assert "executes 1575 ops/kernels per step against 1428 under a100-fast (1.10x" in launches["claim"]
    layout = next(a for a in first["annotations"] if a["rule"] == "layout_changes")
    assert layout["evidence"]["executed_copies_per_step"]["a100"] - layout["evidence"]["executed_copies_per_step"][
        "a100-fast"] == 147  # the memcpy/memset dropped


def test_run_record_fields():
    summary = from_run_record(run_record({
        "mode": "jax", "status": "ok", "config": {"data": "loader", "precision": "bf16"},
        "environment": {"platform": "gpu", "precision": {"requested": "bf16", "jax_default_matmul_precision": "default",
                                                         "compute_dtype": "bfloat16"}},
        "timing": {"median_s": 0.01, "mean_s": 0.02, "step_times_s": [0.01, 0.03], "first_step_s": 1.2},
        "compiles": {"in_window": {"xla_compiles": 1, "jit_cache_entries": 1}}}))
    assert summary.compiles_in_window == 1  # two counters of the same recompile
    assert (summary.platform, summary.data, summary.precision) == ("gpu", "loader", "bf16")
    assert (summary.matmul_precision, summary.compute_dtype) == ("default", "bfloat16")
    # the median is computed from the step times (0.02), never taken from the record's own median_s (0.01)
    assert summary.step_time_s == 0.02 and summary.step_times_s == [0.01, 0.03]


@pytest.mark.parametrize("environment,platform", [
    ({"platform": "cpu", "backend": "cpu", "device": "cpu:0"}, "cpu"),
    ({"platform": "Linux-6.18-x86_64", "device": "xla:0", "pjrt_device": "CPU", "device_type": "CPU"}, "cpu"),
    ({"platform": "Linux-6.18-x86_64", "device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3"}, "gpu"),
    ({"platform": "Linux", "device": "xla:0", "device_type": "TPU"}, "tpu"),
    ({"platform": "Linux-6.18-x86_64"}, ""),
])
def test_platform_from_each_backends_fields(environment, platform):
    assert from_run_record(run_record({"environment": environment})).platform == platform


def test_torch_xla_matmul_precision_key():
    record = {"environment": {"precision": {"requested": "tf32", "mat_mul_precision": "high"}}}
    assert from_run_record(run_record(record)).matmul_precision == "high"


SAMPLED_TRACE = "hta/trace_filter__sampled_rank-0.json.gz"  # 2 ProfilerSteps of a real GPU run, 1,596 aten ops
# Host events that the ledger counts as time inside framework ops (step_profile.HOST_CAUSES "framework ops").
# c10d's collectives as PyTorch records them on the host (record_param_comms)
COLLECTIVE_OP = re.compile(r"^(gloo|nccl|mpi|ucc):")
FRAMEWORK_OP = re.compile(r"^aten::|^autograd::|^torch::|^Optimizer\.|^(gloo|nccl|mpi|ucc):")
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "async_cpu_to_gpu", "gpu_user_annotation"}


def _host_only_copy(source: Path, target: Path) -> Path:
    """The real trace with every device event and launch call removed: what PyTorch on a CPU records."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in DEVICE_CATEGORIES]
    target.write_bytes(gzip.compress(json.dumps(data).encode()))
    return target


def _host_steps(events: list[dict]) -> list[dict]:
    """Per step (loop period; no device work, so the last one ends at its marker's end), from the raw JSON: the union
    of framework-op intervals, the union of aten::* intervals, the aten ops started in it, and the top-level aten
    ops (not nested inside another aten op on the same thread) by name: (calls, seconds clipped to the step)."""
    markers = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                     if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in {"cpu_op", "user_annotation", "python_function"}
           and e.get("dur", 0) > 0 and not e["name"].startswith("ProfilerStep#")]
    steps = []
    for i, (start, marker_end) in enumerate(markers):
        end = markers[i + 1][0] if i + 1 < len(markers) else marker_end

        def clipped(selected, start=start, end=end):
            return [(max(e["ts"], start), min(e["ts"] + e["dur"], end)) for e in selected
                    if e["ts"] + e["dur"] > start and e["ts"] < end]

        aten = [e for e in ops if e["name"].startswith("aten::")]
        top: dict[str, list[float]] = {}
        for thread in {(e["pid"], e["tid"]) for e in aten}:
            reach = float("-inf")
            for s, f, name in sorted(((max(e["ts"], start), min(e["ts"] + e["dur"], end), e["name"]) for e in aten
                                      if (e["pid"], e["tid"]) == thread and e["ts"] + e["dur"] > start and e["ts"] < end),
                                     key=lambda op: (op[0], -op[1])):  # an enclosing op first
                if s < reach:
                    continue  # nested inside the enclosing aten op
                reach = f
                top.setdefault(name, []).append((f - s) / 1e6)
        collectives = [e for e in ops if COLLECTIVE_OP.search(e["name"])]
        steps.append({"step_s": (end - start) / 1e6,
                      "inside_s": _union_us(clipped(e for e in ops if FRAMEWORK_OP.search(e["name"]))) / 1e6,
                      "aten_s": _union_us(clipped(aten)) / 1e6,
                      "aten_or_collective_s": _union_us(clipped(aten + collectives)) / 1e6,
                      "aten_started": sum(start <= e["ts"] < end for e in aten),
                      "top": {name: (len(d), sum(d)) for name, d in top.items()}})
    return steps


def test_host_only_pytorch_ledger_from_a_real_kineto_trace(fixtures_dir, tmp_path):
    """The real trace with its device events removed (PyTorch on a CPU): each step splits into time inside framework
    ops (the union of their intervals) and outside them; the per-op table holds the top-level aten ops."""
    cpu_trace = _host_only_copy(fixtures_dir / SAMPLED_TRACE, tmp_path / "host_only.json.gz")
    raw = _host_steps(_raw_events(cpu_trace))
    assert len(raw) == 2 and all(s["aten_started"] > 100 for s in raw)
    cpu = summarize_run(_run_dir(tmp_path, "pytorch", cpu_trace, [s["step_s"] for s in raw] * 3, platform="cpu"))
    ledger = cpu.ledger
    # Two profiled steps: both kept (at least two are), none is a warm-up to drop.
    assert not ledger.device and ledger.profiled_steps == 2 and ledger.dropped == {}
    assert cpu.device_busy_s is None and cpu.trace_kernels is None and cpu.timeline == []
    assert ledger.step_s == pytest.approx([s["step_s"] for s in raw], abs=1e-9)
    autograd = "host:autograd engine and optimizer, outside aten ops"
    collectives = "host:collectives (gloo / NCCL), outside framework ops"
    assert set(ledger.nodes) == {"host:inside framework ops", collectives, autograd, "host:outside framework ops"}
    # Inside framework ops: the union of aten::* intervals (what the op table adds up to); then the collectives
    # PyTorch records on the host (nccl:*, this DDP trace's) outside them: |aten U collectives| - |aten|; then the
    # autograd engine and optimizer spans outside both: |framework spans U aten U collectives| - |aten U collectives|;
    # outside: the rest of the step.
    assert ledger.nodes["host:inside framework ops"] == pytest.approx([s["aten_s"] for s in raw], abs=1e-9)
    assert ledger.nodes[collectives] == pytest.approx([s["aten_or_collective_s"] - s["aten_s"] for s in raw], abs=1e-9)
    assert all(seconds > 0 for seconds in ledger.nodes[collectives])  # the trace's all-reduces do run outside aten ops
    assert ledger.nodes[autograd] == pytest.approx([s["inside_s"] - s["aten_or_collective_s"] for s in raw], abs=1e-9)
    assert ledger.nodes["host:outside framework ops"] == pytest.approx(
        [s["step_s"] - s["inside_s"] for s in raw], abs=1e-9)
    assert cpu.framework_ops == round(median(s["aten_started"] for s in raw))
    # The op table: top-level aten ops only; their seconds add up to the time covered by aten ops.
    for i, step in enumerate(raw):
        assert sum(series.seconds[i] for series in ledger.ops.values()) == pytest.approx(step["aten_s"], abs=1e-9)
        assert {name for name, series in ledger.ops.items() if series.calls[i]} == set(step["top"])
    for name in ("aten::mm", "aten::bmm", "aten::to", "aten::copy_"):
        series = ledger.ops[name]
        assert series.calls == [step["top"][name][0] for step in raw]
        assert series.seconds == pytest.approx([step["top"][name][1] for step in raw], abs=1e-9)
    assert ledger.ops["aten::mm"].calls == [74, 73] and ledger.ops["aten::bmm"].calls == [13, 14]
    assert "aten::addmm" not in ledger.ops  # runs nested inside aten::linear here


def test_explain_of_host_only_pytorch_with_too_few_profiled_steps(fixtures_dir, tmp_path):
    """Two profiled steps a side can never make a node significant (smallest Mann-Whitney p = 1/3): no measured
    contributor, the note says why, everything still adds up to the timed gap, and eager_ops annotates the run."""
    cpu_trace = _host_only_copy(fixtures_dir / SAMPLED_TRACE, tmp_path / "host_only.json.gz")
    raw = _host_steps(_raw_events(cpu_trace))
    slow = summarize_run(_run_dir(tmp_path, "pytorch", cpu_trace, [s["step_s"] for s in raw] * 3, platform="cpu"))
    fast_ledger = RunLedger({"device:matmul/conv": [0.20, 0.21], "idle:other host": [0.05, 0.05]}, {}, [0.25, 0.26],
                            3, {"0": "profiler warm-up"}, True, [0.20, 0.21])
    fast = ModeSummary(mode="jax", platform="cpu", step_times_s=[0.25, 0.26, 0.25, 0.255, 0.26, 0.25],
                       step_time_s=0.2525, kernels=300, ledger=fast_ledger)
    entry = {m["mode"]: m for m in explain([fast, slow]).to_dict()["modes"]}["pytorch"]
    assert entry["significant"] is True and entry["gap_s"] == pytest.approx(median([s["step_s"] for s in raw]) - 0.2525)
    assert not any(c["significant"] for c in entry["contributors"])
    assert any("too few" in note for note in entry["notes"])
    assert sum(c["seconds"] for c in entry["contributors"]) + entry["residual_s"] == pytest.approx(entry["gap_s"], abs=1e-12)
    assert entry["profiled_gap_s"] == pytest.approx(slow.ledger.total_s - fast_ledger.total_s, abs=1e-12)
    (eager,) = [a for a in entry["annotations"] if a["rule"] == "eager_ops"]  # no node to attach to: on the run
    assert f"{slow.framework_ops:,} PyTorch ops" in eager["claim"] and "300 kernels" in eager["claim"]


def test_a_step_program_that_runs_after_its_marker_is_in_the_timeline():
    """JAX and PyTorch/XLA run a step's program after its marker ends: as in `trace stats`, the device work of the
    middle step is what starts before the next step does, not only what starts inside the marker."""
    def kernel(name, start, dur, category=MATMUL):
        return Event(name, start, dur, KERNEL, True, "XLA Ops", "/host:CPU", category=category)

    events = [Event("aten::mm", 1010.0, 50.0, HOST_OP, False, "thread 1", "python"),
              kernel("dot.1", 1500.0, 200.0), kernel("transpose.2", 1800.0, 100.0, LAYOUT),  # after the marker
              kernel("dot.9", 2050.0, 70.0)]  # the next step's
    spans = step_timeline(events, {"start_us": 1000.0, "host_duration_us": 100.0}, next_start_us=2000.0)
    assert [c for _, _, c in spans] == [MATMUL, LAYOUT]  # host ops are not in the strip
    assert [x for s, d, _ in spans for x in (s, d)] == pytest.approx([500e-6, 200e-6, 800e-6, 100e-6])
    last = step_timeline(events, {"start_us": 2000.0, "host_duration_us": 100.0})  # the last step: all that follows
    assert len(last) == 1 and last[0][2] == MATMUL and last[0][:2] == pytest.approx((50e-6, 70e-6))
