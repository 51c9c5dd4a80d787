"""Hypotheses: why a ledger node may differ between two runs, each stated with its evidence.

A hypothesis is a pure function `(slow, fast) -> Annotation | None` that fires only when the recorded facts support it
(a different setting, more kernels, more FLOPs, more copies...). It never adds time of its own: the engine attaches it
to the significant ledger contributors it can explain (`nodes`: node-name prefixes), or to the mode when none of those
differ significantly. Figures derived from an assumed constant are labelled `kind="estimate"` and name the assumption.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

from hloscope import units
from hloscope.explain.summary import ModeSummary
from hloscope.runs.records import section_document

# Assumed memory bandwidth, only to give the size of extra bytes a scale; labelled an estimate wherever it is used.
ASSUMED_BANDWIDTH_B_S = {"gpu": 2.0e12, "tpu": 1.2e12, "cpu": 2.0e10, "": 1.0e11}
# Relative differences below this are not worth a hypothesis for counts and sizes.
TOLERANCE = 0.05

DEVICE = "device:"
HOST_WORK = "host:inside framework ops"
# The ledger's CPU contention nodes (hloscope.trace.step_profile.split_contention), device and host-only traces.
CONTENTION_NODES = ("idle:host waiting for a CPU (contention)", "host:waiting for a CPU (contention)")
# Contention below this share of the profiled step is not worth a hypothesis of its own.
CONTENTION_MIN_FRACTION = 0.01


@dataclass
class Annotation:
    rule: str
    title: str
    claim: str  # one sentence that cites its numbers
    nodes: tuple[str, ...]  # ledger node prefixes this hypothesis can explain
    kind: str = "measured"  # "estimate" when a figure rests on an assumed constant (named in evidence["assumed"])
    evidence: dict = field(default_factory=dict)
    # attached to a contributor: the other significant parts it could also explain (None: not attached)
    also_nodes: list[str] | None = None

    def to_dict(self) -> dict:
        data = {"rule": self.rule, "title": self.title, "claim": self.claim, "kind": self.kind,
                "nodes": list(self.nodes), "evidence": self.evidence}
        if self.also_nodes is not None:
            data["also_nodes"] = self.also_nodes
        return data


def _more(x: float | None, y: float | None) -> bool:
    """x is meaningfully larger than y."""
    return x is not None and y is not None and x > y * (1 + TOLERANCE) and x - y > 0


_ms = units.ms
_bytes = units.size


def recompilation(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """Compilations inside the timed window: those steps pay a compile."""
    if not slow.compiles_in_window or slow.compiles_in_window <= (fast.compiles_in_window or 0):
        return None
    times = slow.step_times_s
    mid = median(times) if times else None
    slow_steps = [t for t in times if mid is not None and t > 2 * mid]
    claim = (f"{slow.mode} compiled {slow.compiles_in_window} time(s) inside the timed window "
             f"({fast.mode}: {fast.compiles_in_window or 0})")
    if slow_steps:
        claim += f"; {len(slow_steps)} of {len(times)} timed steps took over twice the median (slowest {_ms(max(slow_steps))})"
    return Annotation("recompilation", "Recompilation inside the timed window", claim,
                      ("idle:compilation", "host:compilation", "idle:other host"), evidence={
                          "compiles_in_window": {slow.mode: slow.compiles_in_window, fast.mode: fast.compiles_in_window or 0},
                          "steps_over_twice_median": len(slow_steps), "steps": len(times)})


def kernel_launches(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """More executions per step for the same work: each one costs dispatch time on the host and a gap on the device.
    Executed copies count: they are executions like any other."""
    ks, kf, counted = slow.executed_per_step, fast.executed_per_step, "profile (every executed op, copies included)"
    if ks is None or kf is None:
        ks, kf, counted = slow.kernels, fast.kernels, "compiled program (kernels; copies not counted)"
    if ks is None or kf is None or not _more(ks, kf):
        return None
    claim = f"{slow.mode} executes {ks:g} ops/kernels per step against {kf:g} under {fast.mode} ({ks / kf:.2f}x, from the {counted})"
    if slow.flops and fast.flops:
        claim += f"; FLOPs ratio {slow.flops / fast.flops:.2f}x"
    return Annotation("kernel_launches", "More executions per step", claim,
                      ("idle:other host", "idle:framework dispatch", "idle:graph tracing", DEVICE), evidence={
                          "executions_per_step": {slow.mode: ks, fast.mode: kf}, "counted_from": counted})


def layout_changes(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """Copies and transposes one side executes (layout conventions, parameter copies around donation)."""
    es, ef = slow.executed_copies_per_step, fast.executed_copies_per_step
    ns, nf = (slow.transposes or 0) + (slow.copies or 0), (fast.transposes or 0) + (fast.copies or 0)
    by_trace = es is not None and ef is not None and es > ef
    by_program = slow.transposes is not None and fast.transposes is not None and ns > nf
    if not (by_trace or by_program):
        return None
    parts = []
    if by_trace:
        parts.append(f"{slow.mode} executes {es:g} top-level copies/transposes per step against {ef:g} under {fast.mode}")
    if by_program:
        parts.append(f"its program holds {slow.transposes} transposes and {slow.copies or 0} copies (fusion bodies "
                     f"included) against {fast.transposes} and {fast.copies or 0}")
    return Annotation("layout_changes", "Layout changes (copies, transposes)", "; ".join(parts),
                      ("device:copy/transpose", "device:memcpy/memset"), evidence={
                          "executed_copies_per_step": {slow.mode: es, fast.mode: ef},
                          "transposes": {slow.mode: slow.transposes, fast.mode: fast.transposes},
                          "copies": {slow.mode: slow.copies, fast.mode: fast.copies}})


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


def matmul_precision(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """The two sides multiply at different precisions (fp32 where the other uses tf32/bf16 or XLA's default)."""
    dots_s, dots_f = _full_precision_dots(slow), _full_precision_dots(fast)
    setting_s = precision_rank(slow.matmul_precision) if slow.matmul_precision else None
    setting_f = precision_rank(fast.matmul_precision) if fast.matmul_precision else None
    # Programs differ in how many dots they have: compare the share at full precision, not the count.
    share_s = dots_s / sum(slow.dot_precision.values()) if slow.dot_precision else None
    share_f = dots_f / sum(fast.dot_precision.values()) if fast.dot_precision else None
    by_dots = share_s is not None and share_f is not None and abs(share_s - share_f) > TOLERANCE
    by_setting = setting_s is not None and setting_f is not None and setting_s != setting_f
    if not (by_dots or by_setting):
        return None
    parts = []
    if by_dots:
        parts.append(f"{dots_s} of {sum(slow.dot_precision.values())} dots/convolutions run at full fp32 under "
                     f"{slow.mode} against {dots_f} of {sum(fast.dot_precision.values())} under {fast.mode}")
    if by_setting:
        parts.append(f"matmul precision in effect: {slow.matmul_precision} vs {fast.matmul_precision}")
    return Annotation("matmul_precision", "Different matmul precision", "; ".join(parts),
                      ("device:matmul/conv", HOST_WORK), evidence={
                          "dot_precision": {slow.mode: slow.dot_precision, fast.mode: fast.dot_precision},
                          "matmul_precision": {slow.mode: slow.matmul_precision, fast.mode: fast.matmul_precision}})


def _uncosted(slow: ModeSummary, fast: ModeSummary) -> str:
    if not (slow.uncosted_custom_calls or fast.uncosted_custom_calls):
        return ""
    return (f" (not counting {slow.uncosted_custom_calls} and {fast.uncosted_custom_calls} library calls that XLA's "
            "cost analysis cannot see into)")


def more_compute(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """The slow side's program does more arithmetic (recomputation, unfused duplicates, a different algorithm)."""
    if slow.flops is None or fast.flops is None or not _more(slow.flops, fast.flops):
        return None
    claim = (f"{slow.mode} does {slow.flops:.3g} FLOPs per step against {fast.flops:.3g} "
             f"({slow.flops / fast.flops:.2f}x, XLA's cost analysis of the compiled programs)") + _uncosted(slow, fast)
    return Annotation("more_compute", "More arithmetic (FLOPs)", claim, ("device:matmul/conv", DEVICE), evidence={
        "flops": {slow.mode: slow.flops, fast.mode: fast.flops},
        "uncosted_custom_calls": {slow.mode: slow.uncosted_custom_calls, fast.mode: fast.uncosted_custom_calls}})


def memory_traffic(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """More bytes read and written: less fusion, extra materialised intermediates."""
    if slow.bytes_accessed is None or fast.bytes_accessed is None or not _more(slow.bytes_accessed,
                                                                                fast.bytes_accessed):
        return None
    extra = slow.bytes_accessed - fast.bytes_accessed
    bandwidth = ASSUMED_BANDWIDTH_B_S.get(slow.platform, ASSUMED_BANDWIDTH_B_S[""])
    claim = (f"{slow.mode} accesses {_bytes(slow.bytes_accessed)} per step against {_bytes(fast.bytes_accessed)} "
             f"({slow.bytes_accessed / fast.bytes_accessed:.2f}x){_uncosted(slow, fast)}; at an assumed "
             f"{_bytes(bandwidth)}/s the extra bytes would take ~{_ms(extra / bandwidth)} (estimate)")
    return Annotation("memory_traffic", "More memory traffic", claim, (DEVICE,), kind="estimate", evidence={
        "bytes_accessed": {slow.mode: slow.bytes_accessed, fast.mode: fast.bytes_accessed}, "extra_bytes": extra,
        "estimate_s": extra / bandwidth, "assumed": {"memory_bandwidth_B_s": bandwidth}})


def input_pipeline(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """One side loads each batch through a DataLoader inside the step; the other feeds batches already on device."""
    if slow.data == fast.data or "loader" not in (slow.data, fast.data):
        return None
    claim = f"{slow.mode} uses --data {slow.data} while {fast.mode} uses --data {fast.data}"
    return Annotation("input_pipeline", "Input pipeline in the step", claim,
                      ("idle:input pipeline", "host:input pipeline", "idle:other host", "host:outside framework ops"),
                      evidence={"data": {slow.mode: slow.data, fast.mode: fast.data}})


def compute_dtype(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """The two sides compute in different number formats (--precision): conversions are added, and a format the
    hardware lacks (bf16 on most CPUs) is emulated."""
    if not slow.precision or not fast.precision or slow.precision == fast.precision:
        return None
    claim = f"{slow.mode} ran with --precision {slow.precision} against {fast.precision} under {fast.mode}"
    if slow.compute_dtype and fast.compute_dtype and slow.compute_dtype != fast.compute_dtype:
        claim += f" (computing in {slow.compute_dtype} against {fast.compute_dtype})"
    if slow.converts is not None and fast.converts is not None and slow.converts != fast.converts:
        claim += f"; its program has {slow.converts} convert instructions against {fast.converts}"
    if slow.platform == "cpu" and "bf16" in (slow.precision, fast.precision):
        claim += "; on a CPU bf16 arithmetic is usually emulated"
    return Annotation("compute_dtype", "Different compute precision", claim, (DEVICE, HOST_WORK), evidence={
        "precision": {slow.mode: slow.precision, fast.mode: fast.precision},
        "compute_dtype": {slow.mode: slow.compute_dtype, fast.mode: fast.compute_dtype},
        "converts": {slow.mode: slow.converts, fast.mode: fast.converts}})


def attention(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """Different attention implementations (eager, sdpa, flash) run different kernels."""
    a, b = slow.settings.get("attention"), fast.settings.get("attention")
    if not a or not b or a == b:
        return None
    return Annotation("attention", "Different attention implementation", f"attention: {a} under {slow.mode}, {b} under "
                      f"{fast.mode}", ("device:matmul/conv", DEVICE, HOST_WORK), evidence={"attention": {slow.mode: a, fast.mode: b}})


def eager_ops(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """PyTorch without an XLA program dispatches framework ops one at a time (inductor's code still calls aten for what
    it does not generate) where an XLA mode runs one compiled program."""
    if not slow.framework_ops or slow.kernels is not None:
        return None
    if fast.framework_ops and not _more(slow.framework_ops, fast.framework_ops):
        return None  # both dispatch about as many ops: that is not what differs
    theirs = fast.kernels if fast.kernels is not None else fast.executed_per_step
    claim = f"{slow.mode} dispatched {slow.framework_ops:,} PyTorch ops (aten::*, nested ones included) per profiled step"
    if "compile" not in slow.mode:
        claim += ", one by one from Python"
    if fast.framework_ops:
        claim += f", against {fast.framework_ops:,} under {fast.mode}"
    elif theirs:
        claim += f", where {fast.mode} runs a compiled program of {theirs:,.0f} kernels"
    return Annotation("eager_ops", "Framework ops dispatched one by one", claim,
                      ("idle:framework dispatch", HOST_WORK, "host:autograd", "host:outside framework ops"),
                      evidence={"framework_ops_per_step": {slow.mode: slow.framework_ops, fast.mode: fast.framework_ops}})


def _contention_s(summary: ModeSummary) -> float | None:
    """Median seconds per profiled step the step's thread waited for a CPU (the ledger's contention node); None
    without a ledger."""
    if summary.ledger is None:
        return None
    return sum(summary.ledger.node_median(node) for node in CONTENTION_NODES)


def cpu_contention(slow: ModeSummary, fast: ModeSummary) -> Annotation | None:
    """The thread running the slow side's step was runnable but waiting for a CPU (Linux schedstat, read between the
    profiled step markers): other threads or processes held the cores. Names the other processes that used the most
    CPU time during the slow run's timed window (run.json timing.host_scheduling)."""
    waiting, base = _contention_s(slow), _contention_s(fast) or 0.0
    step = slow.profiled_step_s
    if waiting is None or not step or waiting < CONTENTION_MIN_FRACTION * step or not _more(waiting, base):
        return None
    claim = (f"the host waited for a CPU for {_ms(waiting)} per step under {slow.mode} against {_ms(base)} under "
             f"{fast.mode} (measured: schedstat, the step's thread runnable but not running)")
    evidence: dict = {"waiting_for_cpu_s_per_step": {slow.mode: waiting, fast.mode: base}}
    window = slow.host_scheduling
    if window is not None and window.seconds is not None and window.cpu_count is not None \
            and window.other_processes_cpu_s is not None:
        seconds, cpus, used = window.seconds, window.cpu_count, window.other_processes_cpu_s
        claim += (f"; during the timed window other processes used {used:.2f} CPU-s of the {seconds * cpus:.2f} "
                  f"available ({cpus} CPUs x {seconds:.2f} s)")
        affinity = window.cpu_affinity
        confined = affinity is not None and affinity < cpus
        processes = (window.other_processes_on_run_cpus if confined else window.other_processes) or []
        if confined:
            claim += f"; the run was allowed {affinity} of the {cpus} CPUs"
            if processes:
                claim += ", where ran"
        if processes:
            claim += (" " if confined else ": ") + ", ".join(
                f"{p.command} (pid {p.pid}) {p.cpu_s or 0:.2f} CPU-s" for p in processes)
        evidence["timed_window"] = section_document(window)
    return Annotation("cpu_contention", "The host waited for a CPU (contention)", claim, CONTENTION_NODES,
                      evidence=evidence)


HYPOTHESES: list[Callable[[ModeSummary, ModeSummary], Annotation | None]] = [
    cpu_contention, input_pipeline, compute_dtype, matmul_precision, attention, recompilation, eager_ops, kernel_launches,
    layout_changes, more_compute, memory_traffic,
]
