"""The ledger: one run's profiled step split into measured parts, and the difference of two ledgers node by node.

A run's ledger holds, per node ("device:matmul/conv", "idle:input pipeline", "host:inside framework ops", ...), the
node's seconds in every profiled step kept (warm-up and outlier steps dropped, hloscope.trace.step_profile). In each
step the nodes add up to the step exactly; the ledger's figure for a node is its median over the kept steps, and the
ledger's total is the sum of those medians. The difference of two ledgers is therefore additive by construction: the
node deltas sum to the profiled gap. Each delta is tested across the profiled steps (hloscope.significance) and counts
as a contributor only when it is significant; the rest is reported together as "within noise". What the profile
cannot account for, the timed gap minus the profiled gap, is the residual (the profiler's own effect plus noise).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

from hloscope.significance import ALPHA, differs, median_difference
from hloscope.trace.step_profile import OpSample

# Ledger node -> how the report names it.
NODE_TITLES = {
    "idle:input pipeline": "Device idle while the host loads input (input pipeline)",
    "idle:compilation": "Device idle while the host compiles",
    "idle:graph tracing and sync": "Device idle while the host traces and syncs the graph (PyTorch/XLA)",
    "idle:framework dispatch (aten ops)": "Device idle while the host dispatches framework ops",
    "idle:runtime dispatch": "Device idle while the runtime dispatches the program (PjRt execute, kernel launches)",
    "idle:Python before the graph sync (lazy tracing, dynamo)":
        "Device idle while Python runs the model before the graph sync (lazy tracing / dynamo)",
    "idle:other host": "Device idle, the host running Python / runtime code not named in the trace",
    "idle:host waiting for a CPU (contention)":
        "Device idle, the host waiting for a CPU (runnable, but other threads or processes held the cores)",
    "host:waiting for a CPU (contention)":
        "Host waiting for a CPU (runnable, but other threads or processes held the cores)",
    "host:input pipeline": "Input pipeline on the host",
    "host:compilation": "Compilation on the host",
    "host:graph tracing and sync": "Graph tracing and sync on the host",
    "host:inside framework ops": "Host time inside framework (aten) ops: the work itself, on the CPU",
    "host:autograd engine and optimizer, outside aten ops": "Host time in the autograd engine and optimizer, outside aten ops",
    "host:outside framework ops": "Host time outside framework ops (Python)",
    "idle:autograd and optimizer": "Device idle while the host runs the autograd engine / optimizer (outside aten ops)",
    "host:inside compiled graphs, outside aten ops": "Host time in torch.compile's generated code (outside aten ops)",
    "idle:compiled graphs": "Device idle while the host runs torch.compile's generated code (outside aten ops)",
    "device:collective/communication, exposed":
        "Exposed communication: collectives on the device with no compute or copy beside them",
    "device:collective/communication": "Device time in collectives overlapped by compute",
    "host:collectives (gloo / NCCL), outside framework ops":
        "Exposed communication on the host: collectives (gloo / NCCL) while no framework op computes",
    "idle:collectives": "Device idle while the host runs collectives (gloo / NCCL calls)",
}
WITHIN_NOISE = "within noise"


def node_title(node: str) -> str:
    if node in NODE_TITLES:
        return NODE_TITLES[node]
    group, _, name = node.partition(":")
    return f"Device time in {name}" if group == "device" else f"{group}: {name}"


@dataclass
class OpSeries:
    """One op group over the kept profiled steps."""

    calls: list[int]  # calls per step
    seconds: list[float]  # seconds per step
    per_call_s: float  # median duration of one call, over every call of the kept steps
    per_call_max_s: float

    def to_dict(self) -> dict:
        return {"calls": self.calls, "seconds": self.seconds, "per_call_s": self.per_call_s,
                "per_call_max_s": self.per_call_max_s}


@dataclass
class RunLedger:
    nodes: dict[str, list[float]]  # node -> seconds in each kept step (0.0 where the node was absent)
    ops: dict[str, OpSeries]
    step_s: list[float]  # length of each kept profiled step
    profiled_steps: int
    dropped: dict[str, str]  # step number -> why it was left out
    device: bool  # whether a device (or XLA's CPU runtime) executed the program; else the host did the work
    busy_s: list[float] = field(default_factory=list)
    # With the run's HLO: each executed instruction's series by `module<SEP>instruction` (hloscope.diff.timing), and
    # executions of other programs by op group; what explain's op table pairs by structure (hloscope.explain.ops)
    instructions: dict[str, OpSeries] = field(default_factory=dict)

    def node_median(self, node: str) -> float:
        values = self.nodes.get(node)
        return median(values) if values else 0.0

    @property
    def total_s(self) -> float:
        """The sum of the node medians: the ledger's profiled step."""
        return sum(self.node_median(node) for node in self.nodes)

    def to_dict(self) -> dict:
        return {"nodes": self.nodes, "node_median_s": {n: self.node_median(n) for n in self.nodes},
                "total_s": self.total_s, "ops": {k: v.to_dict() for k, v in self.ops.items()},
                "step_s": self.step_s, "busy_s": self.busy_s, "profiled_steps": self.profiled_steps,
                "kept_steps": len(self.step_s), "dropped": self.dropped, "device": self.device}

    @classmethod
    def from_profile(cls, profile, group_of: Callable[[str], str] | None = None) -> RunLedger:
        """From a hloscope.trace.step_profile.StepProfile. `group_of`: where the profile's op keys are instructions
        (`module<SEP>instruction`), the op group of a key; the ledger then keeps the per-instruction series too."""
        kept = profile.kept_steps()
        names = sorted({node for step in kept for node in step.nodes})
        nodes = {name: [step.nodes.get(name, 0.0) for step in kept] for name in names}
        steps = [step.ops for step in kept]
        instructions = _op_series(steps) if group_of is not None else {}
        if group_of is not None:
            steps = [_regrouped(ops, group_of) for ops in steps]
        dropped = {str(profile.steps[i].number): why for i, why in sorted(profile.dropped.items())}
        return cls(nodes, _op_series(steps), [s.step_s for s in kept], len(profile.steps), dropped, profile.device,
                   [s.busy_s for s in kept], instructions)


def _op_series(steps: list[dict]) -> dict[str, OpSeries]:
    """Each op key's series over the kept steps ({key: hloscope.trace.step_profile.OpSample} per step)."""
    out = {}
    for key in sorted({k for ops in steps for k in ops}):
        samples = [ops.get(key) for ops in steps]
        durations = sorted(d for s in samples if s for d in s.durations)
        out[key] = OpSeries([s.calls if s else 0 for s in samples], [s.seconds if s else 0.0 for s in samples],
                            median(durations) if durations else 0.0, durations[-1] if durations else 0.0)
    return out


def _regrouped(ops: dict, group_of: Callable[[str], str]) -> dict:
    """One step's op samples merged by op group."""
    out: dict[str, OpSample] = {}
    for key, sample in ops.items():
        merged = out.setdefault(group_of(key), OpSample())
        merged.calls += sample.calls
        merged.seconds += sample.seconds
        merged.durations.extend(sample.durations)
    return out


@dataclass
class NodeDelta:
    """One ledger node, slow run minus fast run."""

    node: str
    slow_s: float  # median over the slow run's kept steps
    fast_s: float
    seconds: float  # slow_s - fast_s
    interval_s: list[float] | None  # bootstrap interval of the difference of medians
    p_value: float | None  # exact Mann-Whitney U, two-sided
    significant: bool


def node_deltas(slow: RunLedger, fast: RunLedger, practical_s: float) -> list[NodeDelta]:
    """Every node of either ledger: its difference, interval and test. Significant: p < ALPHA and at least
    `practical_s` in size."""
    out = []
    for node in sorted(set(slow.nodes) | set(fast.nodes)):
        a = slow.nodes.get(node) or [0.0] * len(slow.step_s)
        b = fast.nodes.get(node) or [0.0] * len(fast.step_s)
        delta = slow.node_median(node) - fast.node_median(node)
        interval = median_difference(a, b)
        p_value = differs(a, b)
        significant = p_value is not None and p_value < ALPHA and abs(delta) >= practical_s
        out.append(NodeDelta(node, slow.node_median(node), fast.node_median(node), delta,
                             interval.as_list() if interval else None, p_value, significant))
    return out


@dataclass(frozen=True)
class OpFigures:
    """One side of an op table row, per kept profiled step: median calls and seconds, and the op's median and longest
    call. A side without the op: 0 calls, 0.0 seconds, no per-call figures (None)."""

    calls: int | float  # a median of counts: an integer, or halfway between two
    seconds: float
    per_call_s: float | None
    per_call_max_s: float | None

    def to_dict(self) -> dict:
        return {"calls": self.calls, "seconds": self.seconds, "per_call_s": self.per_call_s,
                "per_call_max_s": self.per_call_max_s}


@dataclass
class OpDelta:
    """One row of the op table: an op of the slow run and its counterpart in the fast run."""

    group: str  # the slow run's op group, the fast run's where the slow run has none
    slow: OpFigures
    fast: OpFigures
    seconds: float  # slow - fast, per step
    p_value: float | None
    significant: bool
    slow_name: str | None = None  # each side's op group; None: no counterpart on that side
    fast_name: str | None = None
    matched: bool = True  # False: only one side has this work
    matched_by: str = "name"  # "structure" (hloscope.diff.match over the two programs) | "name" (equal op groups)
    instructions: dict[str, list[str]] = field(default_factory=dict)  # "slow"/"fast": a few instructions of the row
    instruction_counts: dict[str, int] = field(default_factory=dict)  # "slow"/"fast": all of the row's instructions
    match_stages: dict[str, int] = field(default_factory=dict)  # pairs by the matching stage that made them


def op_deltas(slow: RunLedger, fast: RunLedger, practical_s: float, top: int | None = 15) -> list[OpDelta]:
    """The op groups whose time per step changed most (matched by group name), largest change first; a group that
    only one run has is a row with `matched` False."""
    out = []
    for group in set(slow.ops) | set(fast.ops):
        a, b = slow.ops.get(group), fast.ops.get(group)
        out.append(series_delta(group, a, b, slow, fast, practical_s, slow_name=group if a else None,
                                fast_name=group if b else None, matched=a is not None and b is not None,
                                matched_by="name"))
    out.sort(key=lambda d: (-abs(d.seconds), d.group))
    return out if top is None else out[:top]


def series_delta(group: str, a: OpSeries | None, b: OpSeries | None, slow: RunLedger, fast: RunLedger,
                 practical_s: float, **row) -> OpDelta:
    """One op table row: the slow side's series `a` against the fast side's `b` (None: that side has none, 0 in each
    of its steps), the difference of medians per step, its Mann-Whitney test and whether it counts (p < ALPHA and at
    least `practical_s`); `row`: OpDelta's naming fields."""
    sa = a.seconds if a else [0.0] * len(slow.step_s)
    sb = b.seconds if b else [0.0] * len(fast.step_s)
    delta = (median(sa) if sa else 0.0) - (median(sb) if sb else 0.0)
    p_value = differs(sa, sb)
    return OpDelta(group, op_figures(a), op_figures(b), delta, p_value,
                   p_value is not None and p_value < ALPHA and abs(delta) >= practical_s, **row)


def op_figures(series: OpSeries | None) -> OpFigures:
    if series is None:
        return OpFigures(0, 0.0, None, None)
    return OpFigures(median(series.calls) if series.calls else 0, median(series.seconds) if series.seconds else 0.0,
                     series.per_call_s, series.per_call_max_s)
