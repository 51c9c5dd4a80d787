"""The rules that turn two mode summaries into contributors to a step-time gap.

Each rule is a pure function `rule(slow, fast) -> Contributor | None` that fires only when the numbers support it and
states those numbers as evidence. `seconds` is the rule's estimate of how much of the per-step gap it explains, or None
when the data cannot size it (such contributors rank after the sized ones). Estimates are made independently, so they
can overlap (more kernels also means more idle time); the report shows what is left unexplained. The rules and their
assumptions are listed in docs/diff-explain.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Callable

from hloscope.explain.summary import ModeSummary

# Assumed cost of one extra kernel launch (launch latency plus the gap it leaves), per platform. Used only when a trace
# cannot measure it; the evidence says so.
LAUNCH_COST_S = {"gpu": 5e-6, "tpu": 2e-6, "cpu": 1e-6, "": 2e-6}
# Assumed memory bandwidth to size extra bytes accessed, when no trace measures it.
BANDWIDTH_B_S = {"gpu": 2.0e12, "tpu": 1.2e12, "cpu": 2.0e10, "": 1.0e11}
# The trace analysis' category of matmul and convolution kernels (hloscope.trace.model.MATMUL).
MATMUL = "matmul/conv"
# Relative differences below this are noise for counts and sizes.
TOLERANCE = 0.05


@dataclass
class Contributor:
    rule: str
    title: str
    claim: str  # one sentence that cites its numbers
    seconds: float | None  # estimated share of the per-step gap, None when it cannot be sized
    evidence: dict = field(default_factory=dict)


def _more(x: float | None, y: float | None) -> bool:
    """x is meaningfully larger than y."""
    return x is not None and y is not None and x > y * (1 + TOLERANCE) and x - y > 0


def _ms(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def _bytes(n: float) -> str:
    for factor, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n:.0f} B"


def _sum(values) -> float:
    return float(sum(values))


def recompilation(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """Compilations inside the timed window: those steps pay a compile; the mean pays its share."""
    if not slow.compiles_in_window or slow.compiles_in_window <= (fast.compiles_in_window or 0):
        return None
    times = slow.step_times_s
    mid = median(times) if times else None
    outliers = [t for t in times if mid is not None and t > 2 * mid]
    seconds = _sum(t - mid for t in outliers) / len(times) if outliers else None
    claim = (f"{slow.mode} compiled {slow.compiles_in_window} time(s) inside the timed window "
             f"({fast.mode}: {fast.compiles_in_window or 0})")
    if outliers:
        claim += f"; {len(outliers)} of {len(times)} steps took over twice the median (slowest {_ms(max(outliers))})"
    return Contributor("recompilation", "Recompilation inside the timed window", claim, seconds, {
        "compiles_in_window": {slow.mode: slow.compiles_in_window, fast.mode: fast.compiles_in_window or 0},
        "outlier_steps": len(outliers), "steps": len(times), "median_s": mid,
    })


def host_bound(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """The device sits idle waiting for the host (Python tracing, dispatch, synchronisation)."""
    if not _more(slow.device_idle_s, fast.device_idle_s):
        return None
    delta = slow.device_idle_s - fast.device_idle_s
    share = slow.device_idle_s / slow.step_time_s if slow.step_time_s else None
    claim = (f"the device is idle {_ms(slow.device_idle_s)} per step under {slow.mode} against "
             f"{_ms(fast.device_idle_s)} under {fast.mode}")
    if share is not None:
        claim += f" ({share:.0%} of its step)"
    evidence = {"device_idle_s": {slow.mode: slow.device_idle_s, fast.mode: fast.device_idle_s},
                "device_busy_s": {slow.mode: slow.device_busy_s, fast.mode: fast.device_busy_s},
                "step_time_s": {slow.mode: slow.step_time_s, fast.mode: fast.step_time_s},
                "profiled_step_s": {slow.mode: slow.profiled_step_s, fast.mode: fast.profiled_step_s}}
    if slow.host_dispatch_s:
        evidence["host_dispatch_s"] = {slow.mode: slow.host_dispatch_s, fast.mode: fast.host_dispatch_s}
        claim += f"; host dispatch takes {_ms(slow.host_dispatch_s)} per step"
    return Contributor("host_bound", "Device idle, waiting for the host", claim, delta, evidence)


def _kind_deltas(slow: ModeSummary, fast: ModeSummary) -> dict[str, int]:
    kinds, base = slow.kernel_kinds, fast.kernel_kinds
    if not kinds or not base:  # one side's program is unknown: no per-kind comparison
        return {}
    deltas = {k: kinds.get(k, 0) - base.get(k, 0) for k in set(kinds) | set(base)}
    return dict(sorted(((k, d) for k, d in deltas.items() if d), key=lambda kv: (-kv[1], kv[0])))


def kernel_launches(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """More kernels per step for the same work: each launch costs latency the device spends idle or underused."""
    counted = "compiled program"
    ks, kf = slow.kernels, fast.kernels
    if ks is None or kf is None:
        ks, kf, counted = slow.trace_kernels, fast.trace_kernels, "trace"
    if not _more(ks, kf):
        return None
    extra = ks - kf
    cost = LAUNCH_COST_S.get(slow.platform, LAUNCH_COST_S[""])
    deltas = _kind_deltas(slow, fast)
    claim = f"{slow.mode} launches {ks:g} kernels per step against {kf:g} ({ks / kf:.2f}x, from the {counted})"
    if deltas:
        top = ", ".join(f"{k} {d:+d}" for k, d in list(deltas.items())[:3])
        claim += f"; largest changes: {top}"
    if slow.flops and fast.flops:
        claim += f"; FLOPs ratio {slow.flops / fast.flops:.2f}x"
    return Contributor("kernel_launches", "More kernel launches", claim, extra * cost, {
        "kernels": {slow.mode: ks, fast.mode: kf}, "extra_kernels": extra, "counted_from": counted,
        "assumed_launch_cost_s": cost, "by_kind_delta": deltas,
        "flops": {slow.mode: slow.flops, fast.mode: fast.flops},
    })


def layout_changes(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """Transposes and copies one side needs (layout conventions: NCHW vs NHWC, weight layouts)."""
    ns = (slow.transposes or 0) + (slow.copies or 0)
    nf = (fast.transposes or 0) + (fast.copies or 0)
    if slow.transposes is None or fast.transposes is None or ns <= nf:
        return None
    if slow.layout_kernel_s is not None and fast.layout_kernel_s is not None:
        seconds, sized = max(0.0, slow.layout_kernel_s - fast.layout_kernel_s), "measured in the trace"
    else:
        seconds, sized = (ns - nf) * LAUNCH_COST_S.get(slow.platform, LAUNCH_COST_S[""]), "launch cost assumed"
    claim = (f"{slow.mode} has {slow.transposes} transposes and {slow.copies or 0} copies against "
             f"{fast.transposes} and {fast.copies or 0} under {fast.mode} ({ns - nf:+d} layout changes)")
    return Contributor("layout_changes", "Layout changes (transposes, copies)", claim, seconds, {
        "transposes": {slow.mode: slow.transposes, fast.mode: fast.transposes},
        "copies": {slow.mode: slow.copies, fast.mode: fast.copies}, "sized": sized,
        "layout_kernel_s": {slow.mode: slow.layout_kernel_s, fast.mode: fast.layout_kernel_s},
    })


def precision_rank(name: str) -> int:
    """3: full fp32 (highest, f32 algorithms); 2: high (bf16x3/bf16_6x); 1: default, tf32, bf16 and lower."""
    text = name.lower()
    if "highest" in text or "f32_f32_f32" in text or text in {"fp32", "f32", "float32"}:
        return 3
    if text == "high" or "x3" in text or "x6" in text or "x9" in text:
        return 2
    return 1


def _full_precision_dots(summary: ModeSummary) -> int:
    return sum(n for name, n in summary.dot_precision.items() if precision_rank(name) == 3)


def matmul_precision(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """The slow side multiplies at a higher precision (fp32 where the other uses tf32/bf16 or XLA's default)."""
    dots_s, dots_f = _full_precision_dots(slow), _full_precision_dots(fast)
    setting_s = precision_rank(slow.matmul_precision) if slow.matmul_precision else None
    setting_f = precision_rank(fast.matmul_precision) if fast.matmul_precision else None
    by_dots = bool(slow.dot_precision and fast.dot_precision and dots_s > dots_f)
    by_setting = setting_s is not None and setting_f is not None and setting_s > setting_f
    if not (by_dots or by_setting):
        return None
    seconds = None
    ms, mf = slow.categories_s.get(MATMUL), fast.categories_s.get(MATMUL)
    if ms is not None and mf is not None and ms > mf:
        seconds = ms - mf
    parts = []
    if by_dots:
        parts.append(f"{dots_s} of {sum(slow.dot_precision.values())} dots/convolutions run at full fp32 under "
                     f"{slow.mode} against {dots_f} of {sum(fast.dot_precision.values())} under {fast.mode}")
    if by_setting:
        parts.append(f"matmul precision in effect: {slow.matmul_precision} vs {fast.matmul_precision}")
    if seconds is not None:
        parts.append(f"matmul kernels take {_ms(ms)} vs {_ms(mf)} per step")
    return Contributor("matmul_precision", "Different matmul precision", "; ".join(parts), seconds, {
        "dot_precision": {slow.mode: slow.dot_precision, fast.mode: fast.dot_precision},
        "matmul_precision": {slow.mode: slow.matmul_precision, fast.mode: fast.matmul_precision},
        "matmul_s": {slow.mode: ms, fast.mode: mf},
    })


def _uncosted(slow: ModeSummary, fast: ModeSummary) -> str:
    if not (slow.uncosted_custom_calls or fast.uncosted_custom_calls):
        return ""
    return (f" (not counting {slow.uncosted_custom_calls} and {fast.uncosted_custom_calls} library calls that XLA's "
            "cost analysis cannot see into)")


def more_compute(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """The slow side's program does more arithmetic (recomputation, unfused duplicates, a different algorithm)."""
    if not _more(slow.flops, fast.flops):
        return None
    ms, mf = slow.categories_s.get(MATMUL), fast.categories_s.get(MATMUL)
    if ms is not None and mf is not None:
        seconds, sized = max(0.0, ms - mf), "matmul time measured in the trace"
    elif fast.device_busy_s:
        seconds, sized = fast.device_busy_s * (slow.flops / fast.flops - 1), "fast side's busy time scaled by FLOPs"
    else:
        seconds, sized = None, "not sized"
    claim = f"{slow.mode} does {slow.flops:.3g} FLOPs per step against {fast.flops:.3g} ({slow.flops / fast.flops:.2f}x)"
    claim += _uncosted(slow, fast)
    return Contributor("more_compute", "More arithmetic (FLOPs)", claim, seconds, {
        "flops": {slow.mode: slow.flops, fast.mode: fast.flops}, "sized": sized,
        "uncosted_custom_calls": {slow.mode: slow.uncosted_custom_calls, fast.mode: fast.uncosted_custom_calls}})


def memory_traffic(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """More bytes read and written: less fusion, extra materialised intermediates."""
    if not _more(slow.bytes_accessed, fast.bytes_accessed):
        return None
    extra = slow.bytes_accessed - fast.bytes_accessed
    bandwidth = BANDWIDTH_B_S.get(slow.platform, BANDWIDTH_B_S[""])
    claim = (f"{slow.mode} accesses {_bytes(slow.bytes_accessed)} per step against "
             f"{_bytes(fast.bytes_accessed)} ({slow.bytes_accessed / fast.bytes_accessed:.2f}x)") + _uncosted(slow, fast)
    return Contributor("memory_traffic", "More memory traffic", claim, extra / bandwidth, {
        "bytes_accessed": {slow.mode: slow.bytes_accessed, fast.mode: fast.bytes_accessed},
        "extra_bytes": extra, "assumed_bandwidth_B_s": bandwidth,
        "uncosted_custom_calls": {slow.mode: slow.uncosted_custom_calls, fast.mode: fast.uncosted_custom_calls}})


def input_pipeline(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """The slow side loads each batch through a DataLoader inside the step; the other feeds batches already on device."""
    if slow.data != "loader" or fast.data == "loader":
        return None
    claim = (f"{slow.mode} reads each batch through the DataLoader (--data loader) while {fast.mode} uses --data "
             f"{fast.data}; its step takes {_ms(slow.step_time_s)} against {_ms(fast.step_time_s)}")
    if slow.device_idle_s is not None and fast.device_idle_s is not None:
        claim += f", its device idles {_ms(slow.device_idle_s)} per step against {_ms(fast.device_idle_s)}"
    # Not sized: loading shows up as device idle time, which host_bound already counts.
    return Contributor("input_pipeline", "Input pipeline in the step", claim, None,
                       {"data": {slow.mode: slow.data, fast.mode: fast.data},
                        "step_time_s": {slow.mode: slow.step_time_s, fast.mode: fast.step_time_s},
                        "device_idle_s": {slow.mode: slow.device_idle_s, fast.mode: fast.device_idle_s}})


def eager_ops(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """PyTorch without an XLA program: the host dispatches framework ops (one at a time from Python in eager mode;
    inductor's compiled code still calls aten for what it does not generate), where the fast mode runs one program.
    Without device kernels (PyTorch on the CPU) the host does the work itself: sized by the share of the profiled step
    spent inside aten ops, applied to the timed step, minus the fast mode's device time (or its own time in aten ops)."""
    if not slow.framework_ops or slow.kernels is not None:
        return None
    theirs = fast.kernels if fast.kernels is not None else fast.trace_kernels
    eager = "compile" not in slow.mode
    claim = f"{slow.mode} dispatched {slow.framework_ops:,} PyTorch ops (aten::*, nested ones included) in one profiled step"
    if eager:
        claim += ", one by one from Python"
    if theirs:
        claim += f", where {fast.mode} runs one compiled program of {theirs:,.0f} kernels"
    evidence = {"framework_ops_per_step": slow.framework_ops, "kernels": {fast.mode: theirs}}
    seconds = None
    host_s = _host_op_seconds(slow)
    if host_s is not None and not slow.trace_kernels:  # with device kernels, the host's cost is device idle time
        share = slow.framework_op_s / slow.framework_step_s
        claim += (f"; with no device kernels the host does the work: {_ms(slow.framework_op_s)} of the "
                  f"{_ms(slow.framework_step_s)} profiled step ran inside aten ops ({share:.0%}, the rest is {_outside(slow)}), "
                  f"~{_ms(host_s)} of the {_ms(slow.step_time_s)} timed step")
        fast_s, what = _fast_work(fast)
        evidence.update(framework_op_s=slow.framework_op_s, profiled_step_s=slow.framework_step_s,
                        host_op_share=share, host_op_s=host_s, sized="share of the profiled step in aten ops x timed step")
        if fast_s is not None:
            claim += f", against {_ms(fast_s)} {what} per step under {fast.mode}"
            seconds = max(0.0, host_s - fast_s)
            evidence["fast_work_s"] = {fast.mode: fast_s, "what": what}
    title = "Ops dispatched one by one (eager)" if eager else "Framework ops dispatched per step"
    return Contributor("eager_ops", title, claim, seconds, evidence)


def _outside(slow: ModeSummary) -> str:
    return "Python and autograd" if "compile" not in slow.mode else "Python, autograd and inductor's generated code"


def _fast_work(fast: ModeSummary) -> tuple[float | None, str]:
    """The fast mode's work per step that the slow mode's time in aten ops is set against: its device busy time, or
    for a host-only PyTorch mode its own time in aten ops."""
    return (fast.device_busy_s, "device busy") if fast.device_busy_s else (_host_op_seconds(fast), "in aten ops")


def host_outside_ops(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """The rest of a host-only PyTorch step (no device kernels): the time outside aten ops (Python, the autograd
    engine, optimizer glue; under compile also inductor's generated code), measured in the same profiled step as
    eager_ops. Sized the same way: its share of the profiled step x the timed median, minus the fast mode's time
    outside its own work (its step minus what eager_ops set against), capped so that with eager_ops it stays within
    the gap."""
    host_s = _host_op_seconds(slow)
    if not slow.framework_ops or slow.kernels is not None or slow.trace_kernels or host_s is None:
        return None
    outside_share = 1 - slow.framework_op_s / slow.framework_step_s
    outside_s = slow.step_time_s - host_s
    claim = (f"{_ms(slow.framework_step_s - slow.framework_op_s)} of the {_ms(slow.framework_step_s)} profiled step "
             f"of {slow.mode} ran outside aten ops ({outside_share:.0%}: {_outside(slow)}), ~{_ms(outside_s)} of the "
             f"{_ms(slow.step_time_s)} timed step")
    evidence = {"outside_op_s": slow.framework_step_s - slow.framework_op_s, "profiled_step_s": slow.framework_step_s,
                "outside_share": outside_share, "outside_s": outside_s,
                "sized": "share of the profiled step outside aten ops x timed step"}
    seconds = None
    fast_s, what = _fast_work(fast)
    if fast_s is not None and fast.step_time_s:
        fast_outside = max(0.0, fast.step_time_s - fast_s)
        claim += f", against {_ms(fast_outside)} of the {_ms(fast.step_time_s)} step outside {what} under {fast.mode}"
        gap = slow.step_time_s - fast.step_time_s
        in_ops = max(0.0, host_s - fast_s)  # what eager_ops sizes
        seconds = max(0.0, min(outside_s - fast_outside, gap - in_ops))
        evidence["fast_outside_s"] = {fast.mode: fast_outside, "what": f"step minus {what}"}
    title = ("Python / autograd host overhead outside framework ops" if "compile" not in slow.mode
             else "Python, autograd and generated code outside framework ops")
    return Contributor("host_outside_ops", title, claim, seconds, evidence)


def _host_op_seconds(summary: ModeSummary) -> float | None:
    """Seconds of the timed step inside framework ops: their share of the profiled step (profiling slows the host, so
    the profiled step's own length would overstate it) times the timed median."""
    if not (summary.framework_op_s and summary.framework_step_s and summary.step_time_s):
        return None
    return summary.framework_op_s / summary.framework_step_s * summary.step_time_s


def device_time(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """Device busy time that grew, by kernel category (what the other rules did not name)."""
    if not _more(slow.device_busy_s, fast.device_busy_s):
        return None
    deltas = {c: slow.categories_s.get(c, 0.0) - fast.categories_s.get(c, 0.0)
              for c in set(slow.categories_s) | set(fast.categories_s)}
    grown = dict(sorted(((c, d) for c, d in deltas.items() if d > 0), key=lambda kv: -kv[1]))
    claim = f"the device is busy {_ms(slow.device_busy_s)} per step under {slow.mode} against {_ms(fast.device_busy_s)}"
    if grown:
        claim += "; grew most: " + ", ".join(f"{c} +{_ms(d)}" for c, d in list(grown.items())[:3])
    return Contributor("device_time", "Longer device time", claim, slow.device_busy_s - fast.device_busy_s, {
        "device_busy_s": {slow.mode: slow.device_busy_s, fast.mode: fast.device_busy_s}, "category_delta_s": grown})


def compute_dtype(slow: ModeSummary, fast: ModeSummary) -> Contributor | None:
    """The two modes were asked to compute in different number formats (--precision), which changes the programs:
    conversions are added, and a format the hardware lacks (bf16 on most CPUs) is emulated."""
    if not slow.precision or not fast.precision or slow.precision == fast.precision:
        return None
    claim = f"{slow.mode} ran with --precision {slow.precision} against {fast.precision} under {fast.mode}"
    if slow.compute_dtype and fast.compute_dtype and slow.compute_dtype != fast.compute_dtype:
        claim += f" (computing in {slow.compute_dtype} against {fast.compute_dtype})"
    if slow.converts is not None and fast.converts is not None and slow.converts != fast.converts:
        claim += f"; its program has {slow.converts} convert instructions against {fast.converts}"
    if slow.platform == "cpu" and slow.precision == "bf16":
        claim += "; on a CPU bf16 arithmetic is usually emulated and slower than fp32"
    return Contributor("compute_dtype", "Different compute precision setting", claim, None, {
        "precision": {slow.mode: slow.precision, fast.mode: fast.precision},
        "compute_dtype": {slow.mode: slow.compute_dtype, fast.mode: fast.compute_dtype},
        "converts": {slow.mode: slow.converts, fast.mode: fast.converts}})


RULES: list[Callable[[ModeSummary, ModeSummary], Contributor | None]] = [
    recompilation, host_bound, kernel_launches, layout_changes, matmul_precision, more_compute, memory_traffic,
    input_pipeline, compute_dtype, eager_ops, host_outside_ops, device_time,
]
