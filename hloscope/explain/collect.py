"""Read what the explain rules need about each mode from its run directory: run.json, the train step's HLO statistics
and the trace statistics. Anything unreadable becomes a note on the mode, never a failure of the whole report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from hloscope.errors import HloscopeError
from hloscope.explain.summary import ModeSummary
from hloscope.run_fields import RunFields

# Device events longer than this many per step are not drawn one by one in the timeline strip.
TIMELINE_LIMIT = 4000


def _platform(environment: dict) -> str:
    """cpu | gpu | tpu | "" from the device fields the backends record (their names differ by framework)."""
    for key in ("backend", "device_type", "pjrt_device", "device_kind", "device", "device_name", "platform"):
        text = str(environment.get(key) or "").lower()
        if "cuda" in text or "gpu" in text or "rocm" in text:
            return "gpu"
        if "tpu" in text:
            return "tpu"
        if text.startswith("cpu"):
            return "cpu"
    return ""


def _precision_setting(environment: dict, name: str) -> str | None:
    """The first setting under environment.precision whose key contains `name` (frameworks name them differently)."""
    precision = environment.get("precision")
    if isinstance(precision, dict):
        for key, value in precision.items():
            if name in key and isinstance(value, str) and value:
                return value
    return None


def _compiles(in_window) -> int | None:
    """Compilations in the timed window: the largest of the framework's counters, which count the same events in
    different ways (JAX: XLA compiles and jit cache entries; torch_xla: CompileTime and UncachedCompile)."""
    if not isinstance(in_window, dict):
        return None
    counts = [v for v in in_window.values() if isinstance(v, int) and not isinstance(v, bool)]
    return max(counts, default=0)


def from_run_record(run: dict) -> ModeSummary:
    """The run record's timing and settings (a field of the wrong type is an InputError naming run.json)."""
    fields = RunFields(run)
    environment, compiles = fields.section("environment"), fields.section("compiles")
    summary = ModeSummary(
        mode=run.get("mode", "?"), status=run.get("status", "?"), platform=_platform(environment),
        step_time_s=fields.number("timing", "median_s"), mean_s=fields.number("timing", "mean_s"),
        step_times_s=fields.numbers("timing", "step_times_s"), first_step_s=fields.number("timing", "first_step_s"),
        throughput_img_s=fields.number("timing", "throughput_img_s"),
        compiles_in_window=_compiles(compiles.get("in_window")),
        data=fields.text("config", "data"), precision=fields.text("config", "precision"),
        matmul_precision=(_precision_setting(environment, "matmul_precision")
                          or _precision_setting(environment, "mat_mul_precision")),
        compute_dtype=_precision_setting(environment, "compute_dtype"),
    )
    if summary.status == "compiled":
        add_compiled(summary, fields)
    return summary


def add_compiled(summary: ModeSummary, fields: RunFields) -> None:
    """What a run compiled for a target GPU (`--target`) recorded instead of timings: the GPU, the roofline lower
    bound, the launches of XLA's thunk sequence and XLA's memory estimate."""
    summary.target = fields.text("target", "device") or fields.text("target", "name")
    summary.roofline_s = fields.number("roofline", "serial_s")
    summary.roofline_aggregate_s = fields.number("roofline", "aggregate_s")
    summary.thunk_kernels = fields.number("kernels", "kernel_launches")
    summary.thunk_library_calls = fields.number("kernels", "library_calls")
    summary.thunk_copies = fields.number("kernels", "copies")
    summary.memory_estimate_bytes = fields.number("memory", "device_peak_estimate_bytes")
    if summary.roofline_s is None:
        summary.notes.append("compiled for a target GPU without a roofline lower bound in run.json")


def _add(total: dict, part: dict) -> None:
    for key, value in (part or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value


def kernel_kinds(stats: dict) -> dict[str, int]:
    """Kernels by kind: generated kernels split by fusion kind, then library calls and the rest. Copies are left out,
    as the HLO analysis leaves them out of its kernel count (they are memcpys; the layout rule counts them)."""
    kinds = {f"fusion {k}": v for k, v in (stats.get("fusions") or {}).items()}
    for kind, n in (stats.get("kernel_breakdown") or {}).items():
        if kind == "copy" or (kind == "generated" and kinds):
            continue
        kinds[kind] = kinds.get(kind, 0) + n
    return kinds


def add_hlo(summary: ModeSummary, stats: list[dict]) -> None:
    """Sum the statistics of the modules one step runs (torch_xla may run several graphs per step)."""
    if not stats:
        return
    opcodes: dict = {}
    for s in stats:
        _add(summary.fusions, s.get("fusions"))
        _add(summary.custom_calls, s.get("custom_calls"))
        _add(opcodes, s.get("opcodes"))
        precision = s.get("dot_precision") or s.get("precision") or {}
        if isinstance(precision, dict):
            _add(summary.dot_precision, precision)
        _add(summary.kernel_kinds, kernel_kinds(s))
        summary.uncosted_custom_calls += s.get("uncosted_custom_calls") or 0
    summary.kernels = sum(s.get("kernels") or 0 for s in stats)
    summary.transposes, summary.copies = opcodes.get("transpose", 0), opcodes.get("copy", 0)
    summary.converts = opcodes.get("convert", 0)
    flops = [s.get("flops") for s in stats]
    summary.flops = sum(flops) if all(isinstance(f, (int, float)) for f in flops) else None
    accessed = [s.get("bytes_accessed") for s in stats]
    summary.bytes_accessed = sum(accessed) if all(isinstance(b, (int, float)) for b in accessed) else None
    if not summary.platform:
        summary.platform = {"gpu": "gpu", "tpu": "tpu", "cpu": "cpu"}.get(stats[0].get("platform"), "")


def add_trace(summary: ModeSummary, stats: dict) -> None:
    steps = [s for s in stats.get("per_step") or [] if s.get("kernels") or s.get("device_busy_us")]
    if steps:
        summary.trace_kernels = mean(s.get("kernels", 0) for s in steps)
        summary.device_busy_s = mean(s.get("device_busy_us", 0.0) for s in steps) / 1e6
        windows = [s["host_duration_us"] for s in steps if s.get("host_duration_us")]
        summary.profiled_step_s = mean(windows) / 1e6 if windows else None
        # Idle over the whole step, not only between its first and last kernel: the time before the first kernel is
        # exactly the device waiting for the host. Measured against the timed median (see ModeSummary).
        if summary.step_time_s:
            summary.device_idle_s = max(0.0, summary.step_time_s - summary.device_busy_s)
        elif summary.profiled_step_s:
            summary.device_idle_s = max(0.0, summary.profiled_step_s - summary.device_busy_s)
        summary.host_dispatch_s = mean(s.get("host_runtime_us", 0.0) for s in steps) / 1e6
        summary.categories_s = {k: v / len(steps) / 1e6 for k, v in (stats.get("categories") or {}).items() if v}
    elif stats.get("kernels"):
        summary.notes.append("the trace has no step markers: per-step device time is unknown")


@dataclass
class StepSample:
    """One profiled step as the explain report shows it."""

    spans: list[tuple[float, float, str]]  # device executions: (start_s relative to the step, duration_s, category)
    layout_s: float  # time in transpose/copy kernels
    framework_ops: int  # PyTorch ops (aten::*) the host dispatched, nested ones included
    framework_op_s: float  # wall time during which at least one of those ops ran (any thread)
    step_s: float  # the step's length


def step_timeline(events, window: dict, next_start_us: float | None = None) -> StepSample:
    """One step window: device executions, time in transpose/copy kernels, and the PyTorch ops the host ran.
    The host's ops are those inside the step marker; device executions, as in `trace stats`, those that start before
    the next step does (JAX and PyTorch/XLA run a step's program after its marker has ended)."""
    start, end = window["start_us"], window["start_us"] + window.get("host_duration_us", 0.0)
    device_end = float("inf") if next_start_us is None else max(end, next_start_us)
    spans, layout_us, ops = [], 0.0, []
    for event in events:
        if event.start_us < start or event.start_us >= (device_end if event.is_device_exec else end):
            continue
        if not event.is_device_exec:
            if event.name.startswith("aten::"):
                ops.append((event.start_us, min(event.end_us, end)))
            continue
        if "transpose" in event.name or "copy" in event.name:
            layout_us += event.dur_us
        if len(spans) < TIMELINE_LIMIT:
            spans.append(((event.start_us - start) / 1e6, event.dur_us / 1e6, event.category))
    return StepSample(spans, layout_us / 1e6, len(ops), _covered_us(ops) / 1e6, (end - start) / 1e6)


def _covered_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: nested and overlapping ops count once."""
    total, reach = 0.0, float("-inf")
    for begin, finish in sorted(intervals):
        if finish > reach:
            total += finish - max(begin, reach)
            reach = finish
    return total


def summarize_run(run_dir: str | Path) -> ModeSummary:
    """Everything known about one mode's run directory (I/O happens here, not in the rules)."""
    from hloscope.rundir import load_run

    run_dir = Path(run_dir)
    summary = from_run_record(load_run(run_dir))
    kinds = {a.get("kind") for a in load_run(run_dir, check_artifacts=False).get("artifacts", [])}
    if "hlo" in kinds:
        try:
            from hloscope.hlo.load import load_modules
            from hloscope.hlo.stats import module_stats

            loaded = load_modules(run_dir)
            after = [m for m in loaded if m.stage == "after_optimizations"] or loaded
            add_hlo(summary, [module_stats(m) for m in after])
        except HloscopeError as error:
            summary.notes.append(f"HLO not read: {error}")
    else:
        summary.notes.append("no XLA HLO in this run (PyTorch without XLA has none; XLA modes need --dump-hlo)")
    if "trace" in kinds:
        try:
            from hloscope.trace.load import load_traces
            from hloscope.trace.stats import trace_stats

            for trace in load_traces(run_dir):
                stats = trace_stats(trace)
                if not stats.get("per_step") and not stats.get("kernels"):
                    continue
                add_trace(summary, stats)
                windows = stats.get("per_step") or []
                if windows:
                    index = len(windows) // 2
                    following = windows[index + 1]["start_us"] if index + 1 < len(windows) else None
                    sample = step_timeline(trace.events, windows[index], following)
                    summary.timeline = sample.spans
                    summary.layout_kernel_s = sample.layout_s if stats.get("kernels") else None
                    if sample.framework_ops:
                        summary.framework_ops, summary.framework_op_s = sample.framework_ops, sample.framework_op_s
                        summary.framework_step_s = sample.step_s
                break
        except HloscopeError as error:
            summary.notes.append(f"trace not read: {error}")
    elif summary.status != "compiled":  # a run compiled for a target GPU never ran: there is nothing to profile
        summary.notes.append("no profiler trace in this run (run with --profile)")
    return summary
