"""What explain reads from run directories, on real GPU data: the ViT-Base H100 compilation's HLO statistics and real
Kineto traces from A100 and H100 GPUs wrapped in hand-written run directories."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from statistics import mean

import pytest

from hloscope.explain.collect import add_hlo, summarize_run
from hloscope.explain.engine import explain
from hloscope.explain.summary import ModeSummary
from hloscope.hlo.load import load_modules
from hloscope.hlo.stats import module_stats
from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats

A100_TRACE = "hta/trace_diff__control__control.json.gz"  # 6 ProfilerSteps, 1,428 kernels each
H100_TRACE = "tracelens/traces__h100__gaunernst_bert-small-uncased__1016001.json.gz"  # 1 step, 60 kernels


def test_hlo_summary_of_vit_base_on_h100(fixtures_dir):
    (loaded,) = [m for m in load_modules(fixtures_dir / "gpu_aot/vit_base_sm90_cublas") if m.stage == "after_optimizations"]
    summary = ModeSummary(mode="jax")
    add_hlo(summary, [module_stats(loaded)])
    # SOURCES.md, thunk_sequence.txt: 789 kCustomKernel + 243 kCublasLtMatmul + 2 kConvolution launches, 60 kCopy apart.
    assert summary.kernels == 789 + 243 + 2
    assert summary.kernel_kinds == {"fusion kLoop": 399, "fusion kInput": 354, "fusion kCustom:__triton": 36,
                                    "cublas": 243, "cudnn": 2}
    assert sum(summary.kernel_kinds.values()) == summary.kernels
    # hlo stats costs cuBLAS GEMMs and cuDNN forward convolutions (GpuHloCostAnalysis convention): none left uncosted
    assert summary.uncosted_custom_calls == 0 and summary.platform == "gpu"


def _run_dir(root: Path, mode: str, trace: Path, median_s: float) -> Path:
    run = root / mode
    (run / "kineto").mkdir(parents=True)
    shutil.copy(trace, run / "kineto" / "worker.pt.trace.json.gz")
    record = {"schema_version": 1, "run_id": mode, "mode": mode, "status": "ok", "config": {"data": "device"},
              "environment": {"platform": "cuda"}, "timing": {"median_s": median_s, "step_times_s": [median_s] * 5},
              "artifacts": [{"kind": "trace", "path": "kineto/worker.pt.trace.json.gz", "format": "kineto"}]}
    (run / "run.json").write_text(json.dumps(record))
    return run


def test_trace_summaries_and_report_from_real_gpu_traces(fixtures_dir, tmp_path):
    a100 = trace_stats(load_trace(fixtures_dir / A100_TRACE))
    steps = [s for s in a100["per_step"] if s["kernels"]]
    median = mean(s["host_duration_us"] for s in steps) / 1e6
    slow = summarize_run(_run_dir(tmp_path, "a100", fixtures_dir / A100_TRACE, median))
    fast = summarize_run(_run_dir(tmp_path, "h100", fixtures_dir / H100_TRACE, 0.0044))
    assert slow.platform == "gpu"
    assert slow.trace_kernels == pytest.approx(1428)
    assert slow.device_busy_s == pytest.approx(mean(s["device_busy_us"] for s in steps) / 1e6)
    assert slow.device_idle_s == pytest.approx(median - slow.device_busy_s)
    assert sum(slow.categories_s.values()) == pytest.approx(a100["device_time_us"] / len(steps) / 1e6)
    assert slow.timeline and {c for _, _, c in slow.timeline} <= set(a100["categories"])
    assert all(0 <= start and duration >= 0 for start, duration, _ in slow.timeline)
    assert fast.trace_kernels == pytest.approx(60)
    report = explain([fast, slow])
    assert report["fastest"] == "h100"
    entry = {m["mode"]: m for m in report["modes"]}["a100"]
    rules = [c["rule"] for c in entry["contributors"]]
    assert rules[0] == "device_time"  # 62 ms of kernels per step against 0.3 ms
    assert {"host_bound", "kernel_launches"} <= set(rules)
    launches = next(c for c in entry["contributors"] if c["rule"] == "kernel_launches")
    assert launches["evidence"]["kernels"] == {"a100": pytest.approx(1428), "h100": pytest.approx(60)}
    assert launches["evidence"]["counted_from"] == "trace"


def test_run_record_fields():
    from hloscope.explain.collect import from_run_record

    summary = from_run_record({
        "mode": "jax", "status": "ok", "config": {"data": "loader", "precision": "bf16"},
        "environment": {"platform": "gpu", "precision": {"requested": "bf16", "jax_default_matmul_precision": "default",
                                                         "compute_dtype": "bfloat16"}},
        "timing": {"median_s": 0.01, "mean_s": 0.02, "step_times_s": [0.01, 0.03], "first_step_s": 1.2},
        "compiles": {"in_window": {"xla_compiles": 1, "jit_cache_entries": 1}}})
    assert summary.compiles_in_window == 1  # two counters of the same recompile
    assert (summary.platform, summary.data, summary.precision) == ("gpu", "loader", "bf16")
    assert (summary.matmul_precision, summary.compute_dtype) == ("default", "bfloat16")
    assert summary.step_time_s == 0.01 and summary.step_times_s == [0.01, 0.03]


@pytest.mark.parametrize("environment,platform", [
    ({"platform": "cpu", "backend": "cpu", "device": "cpu:0"}, "cpu"),
    ({"platform": "Linux-6.18-x86_64", "device": "xla:0", "pjrt_device": "CPU", "device_type": "CPU"}, "cpu"),
    ({"platform": "Linux-6.18-x86_64", "device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3"}, "gpu"),
    ({"platform": "Linux", "device": "xla:0", "device_type": "TPU"}, "tpu"),
    ({"platform": "Linux-6.18-x86_64"}, ""),
])
def test_platform_from_each_backends_fields(environment, platform):
    from hloscope.explain.collect import from_run_record

    assert from_run_record({"environment": environment}).platform == platform


def test_torch_xla_matmul_precision_key():
    from hloscope.explain.collect import from_run_record

    record = {"environment": {"precision": {"requested": "tf32", "mat_mul_precision": "high"}}}
    assert from_run_record(record).matmul_precision == "high"


SAMPLED_TRACE = "hta/trace_filter__sampled_rank-0.json.gz"  # 2 ProfilerSteps of a real GPU run, 1,596 aten ops


def _aten_time_in_window(events: list[dict], window: dict) -> tuple[int, float]:
    """(aten ops starting in the step, seconds covered by at least one of them), counted from the raw JSON."""
    start, end = window["start_us"], window["start_us"] + window["host_duration_us"]
    spans = sorted((e["ts"], min(e["ts"] + e["dur"], end)) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"].startswith("aten::")
                   and start <= e["ts"] < end)
    covered, current = 0.0, None
    for begin, finish in spans:
        if current is None or begin > current[1]:
            covered += current[1] - current[0] if current else 0.0
            current = [begin, finish]
        else:
            current[1] = max(current[1], finish)
    covered += current[1] - current[0] if current else 0.0
    return len(spans), covered / 1e6


def _host_only_copy(source: Path, target: Path) -> Path:
    """The real trace with every device event and launch call removed: what PyTorch on a CPU records."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") not in DEVICE_CATEGORIES]
    target.write_bytes(gzip.compress(json.dumps(data).encode()))
    return target


DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "async_cpu_to_gpu", "gpu_user_annotation"}


def test_time_in_aten_ops_from_a_real_kineto_trace(fixtures_dir, tmp_path):
    """The host's time inside aten ops in the middle profiled step equals the union of the raw JSON's aten::*
    intervals. On a GPU (device kernels present) the eager rule leaves it unsized: it shows up as device idle time.
    The same trace with its device events removed (PyTorch on a CPU) sizes the gap from it."""
    trace = fixtures_dir / SAMPLED_TRACE
    raw = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    windows = trace_stats(load_trace(trace))["per_step"]
    middle = windows[len(windows) // 2]
    ops, covered_s = _aten_time_in_window(raw, middle)
    assert ops > 100 and 0 < covered_s < middle["host_duration_us"] / 1e6

    gpu = summarize_run(_run_dir(tmp_path / "gpu", "pytorch", trace, 0.050))
    assert gpu.framework_ops == ops and gpu.framework_op_s == pytest.approx(covered_s, rel=1e-9)
    assert gpu.framework_step_s == pytest.approx(middle["host_duration_us"] / 1e6)
    fast = ModeSummary(mode="jax", platform="gpu", step_time_s=0.010, device_busy_s=0.008, kernels=300)
    report = explain([fast, gpu])
    (eager,) = [c for c in report["modes"][1]["contributors"] if c["rule"] == "eager_ops"]
    assert eager["seconds"] is None
    assert "host_outside_ops" not in [c["rule"] for c in report["modes"][1]["contributors"]]

    cpu_trace = _host_only_copy(trace, tmp_path / "host_only.json.gz")
    cpu = summarize_run(_run_dir(tmp_path / "cpu", "pytorch", cpu_trace, 0.050))
    assert cpu.trace_kernels is None and cpu.framework_ops == ops
    assert cpu.framework_op_s == pytest.approx(covered_s, rel=1e-9)
    report = explain([fast, cpu])
    (eager,) = [c for c in report["modes"][1]["contributors"] if c["rule"] == "eager_ops"]
    share = covered_s / cpu.framework_step_s
    assert eager["seconds"] == pytest.approx(min(share * 0.050 - 0.008, 0.040))
    assert f"({share:.0%}" in eager["claim"] and "against 8 ms device busy per step under jax" in eager["claim"]
    # The rest of the middle step, outside aten ops, against JAX's 2 ms outside its 8 ms of device time.
    (outside,) = [c for c in report["modes"][1]["contributors"] if c["rule"] == "host_outside_ops"]
    assert outside["evidence"]["outside_op_s"] == pytest.approx(cpu.framework_step_s - covered_s, rel=1e-9)
    assert outside["seconds"] == pytest.approx(max(0.0, min((1 - share) * 0.050 - 0.002,
                                                            0.040 - max(0.0, share * 0.050 - 0.008))))
    assert f"({1 - share:.0%}: Python and autograd)" in outside["claim"]


def test_a_step_program_that_runs_after_its_marker_is_in_the_timeline():
    """JAX and PyTorch/XLA run a step's program after its marker ends: as in `trace stats`, the device work of the
    middle step is what starts before the next step does, not only what starts inside the marker."""
    from hloscope.explain.collect import step_timeline
    from hloscope.trace.model import HOST_OP, KERNEL, MATMUL, Event

    def kernel(name, start, dur):
        return Event(name, start, dur, KERNEL, True, "XLA Ops", "/host:CPU", category=MATMUL)

    events = [Event("aten::mm", 1010.0, 50.0, HOST_OP, False, "thread 1", "python"),
              kernel("dot.1", 1500.0, 200.0), kernel("transpose.2", 1800.0, 100.0),  # after the marker (1000-1100)
              kernel("dot.9", 2050.0, 70.0)]  # the next step's
    sample = step_timeline(events, {"start_us": 1000.0, "host_duration_us": 100.0}, next_start_us=2000.0)
    assert sample.spans == [(500e-6, 200e-6, MATMUL), (800e-6, 100e-6, MATMUL)]
    assert sample.layout_s == pytest.approx(100e-6) and sample.framework_ops == 1 and sample.step_s == pytest.approx(1e-4)
    last = step_timeline(events, {"start_us": 2000.0, "host_duration_us": 100.0})  # the last step: all that follows
    assert last.spans == [(50e-6, 70e-6, MATMUL)] and last.framework_ops == 0
