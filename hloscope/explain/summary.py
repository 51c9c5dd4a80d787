"""What the explain rules know about one mode: a flat, optional-everywhere record built from a run directory.

Every field may be missing (a mode without HLO dumps has no kernel count, a mode without a trace has no idle time);
rules skip what they cannot support with numbers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from statistics import median
from typing import TYPE_CHECKING

from hloscope.explain.ledger import RunLedger
from hloscope.runs.records import HostScheduling
from hloscope.significance import Spread

if TYPE_CHECKING:
    from hloscope.explain.ops import ProgramGraph
    from hloscope.explain.startup import StartupRecord
    from hloscope.runs.replay_record import ReplaySummary, ReplayUnread


@dataclass(frozen=True)
class CpuPerStep:
    """One process's threads (main and others summed) per timed step: seconds on a CPU, and seconds runnable but
    waiting for one (run.json timing.host_scheduling, Linux schedstat); and the other processes' CPU time over the
    window as a share of the CPUs the run could use (None: not known)."""

    running_s: float
    waiting_s: float
    others_share: float | None = None


# Other processes below this share of the run's CPUs in every process compared: whatever the runs waited for was
# their own threads and children (a DataLoader's workers), a cost of their settings, not the machine's other work.
OTHER_WORK_SHARE = 0.1


@dataclass(frozen=True)
class Contention:
    """A configuration's threads per timed step (medians over its processes): seconds running, seconds waiting for a
    CPU, and the wait beyond what the comparison's common contention gives for that running time (`extra_s`)."""

    running_s: float
    waiting_s: float
    extra_s: float


def contention(summaries: list[ModeSummary]) -> list[Contention] | None:
    """Each configuration's Contention within the configurations given: extra = W - rho * R, rho = sum(W) / sum(R).
    Under a fair scheduler a runnable thread waits in proportion to the time it runs, so at the same load a
    configuration that computes more also waits more; what is left is how differently the machine's other work
    treated each one (a process that wakes from a sleep is favoured, a burst of load meets one process and not the
    next). None where a process did not measure its threads, nothing ran, or no other work ran beside any of them
    (OTHER_WORK_SHARE)."""
    medians = []
    for summary in summaries:
        cpu = summary.cpu_per_step
        if not cpu or len(cpu) != len(summary.processes):
            return None
        medians.append((median(c.running_s for c in cpu), median(c.waiting_s for c in cpu)))
    if all(c.others_share is not None and c.others_share < OTHER_WORK_SHARE
           for summary in summaries for c in summary.cpu_per_step):
        return None
    running = sum(r for r, _ in medians)
    if running <= 0:
        return None
    rho = sum(w for _, w in medians) / running
    return [Contention(r, w, w - rho * r) for r, w in medians]


@dataclass
class ModeSummary:
    mode: str
    status: str = "ok"
    platform: str = ""  # "cpu" | "gpu" | "tpu" | "" (unknown)
    # Timing, from run.json
    step_time_s: float | None = None  # median of the timed steps
    mean_s: float | None = None
    step_times_s: list[float] = field(default_factory=list)  # every timed step, of every process pooled
    # the timed steps of each process of this configuration (`compare --repeats K`: K fresh processes; one otherwise)
    replicates: list[list[float]] = field(default_factory=list)
    run_dirs: list[str] = field(default_factory=list)  # the run directory of each process
    # median, p10, p90 (seconds, written under keys without the `_s` suffix: docs/api.md) and n of the timed steps
    step_spread: Spread | None = None
    noisy: bool | None = None  # run.json flagged its timed window as noisy
    batch_size: int | None = None
    run_mode: str = ""  # run.json's mode (`mode` above is the label: with several device counts, `jax (2 devices)`)
    devices: int | None = None  # run.json config.devices: data parallel over this many devices (same global batch)
    settings: dict[str, str] = field(default_factory=dict)  # what a fair comparison holds equal (hloscope/runs/settings.py)
    first_step_s: float | None = None
    throughput_img_s: float | None = None
    compiles_in_window: int | None = None
    data: str | None = None  # "device" | "loader"
    precision: str | None = None  # requested: fp32 | tf32 | bf16
    compute_dtype: str | None = None  # what the framework reported it computes in (float32, bfloat16, ...)
    matmul_precision: str | None = None  # what the framework reported in effect
    peak_memory_bytes: float | None = None
    # Compiled program, from the train step's HLO (per step: every module the step runs)
    kernels: int | None = None
    fusions: dict[str, int] = field(default_factory=dict)
    kernel_kinds: dict[str, int] = field(default_factory=dict)  # "fusion kLoop", "cublas", "copy", ... -> kernels
    uncosted_custom_calls: int = 0  # library calls (cuBLAS, cuDNN) that XLA's cost analysis leaves out of FLOPs
    custom_calls: dict[str, int] = field(default_factory=dict)
    transposes: int | None = None
    copies: int | None = None
    converts: int | None = None
    dot_precision: dict[str, int] = field(default_factory=dict)  # precision name -> number of dots/convolutions
    flops: float | None = None
    bytes_accessed: float | None = None
    # Profile: the ledger of the kept profiled steps (warm-up and outliers dropped) and figures derived from it
    ledger: RunLedger | None = None
    # the optimized train-step program, read when explain's op table pairs its ops with another run's by structure
    program: ProgramGraph | None = None
    executed_per_step: float | None = None  # device executions per step, copies included (median of kept steps)
    executed_copies_per_step: float | None = None  # of which top-level copies and transposes
    # The same, summarised over the kept profiled steps (medians; the ledger holds the per-step values)
    trace_kernels: float | None = None  # kernel executions per step
    device_busy_s: float | None = None
    device_idle_s: float | None = None  # the profiled step minus device busy time
    profiled_step_s: float | None = None
    host_dispatch_s: float | None = None  # host launch calls of device work (GPU runtime calls)
    categories_s: dict[str, float] = field(default_factory=dict)  # category -> device seconds per step
    layout_kernel_s: float | None = None  # seconds per step in copy/transpose executions
    # PyTorch's host side per profiled step: the framework ops (aten::*, nested ones included) it dispatched
    framework_ops: int | None = None
    # run.json timing.host_scheduling: the timed window's CPU contention and the other processes that held the CPUs;
    # `--json` repeats it as the file holds it (an older run's lacks keys added since)
    host_scheduling: HostScheduling | None = None
    host_scheduling_json: dict | None = field(default=None, repr=False)
    # Per timed process, its threads' CPU time per timed step (that window); empty where a process did not measure it.
    # Configurations that waited more or less for the CPU time they ran met the machine's other work differently: a
    # verdict must hold with that difference taken out (`contention` above).
    cpu_per_step: list[CpuPerStep] = field(default_factory=list)
    # Compiled, not timed (`compare --target`): what run.json records of XLA's compile for the target GPU
    target: str | None = None  # the GPU's name
    roofline_s: float | None = None  # roofline lower bound per step, launches one after another (not a prediction)
    roofline_aggregate_s: float | None = None  # the same bound with launches overlapping: the busiest unit
    thunk_kernels: int | None = None  # from XLA's thunk_sequence.txt: generated kernel launches,
    thunk_library_calls: int | None = None  # cuBLAS/cuDNN calls,
    thunk_copies: int | None = None  # and device copies
    memory_estimate_bytes: float | None = None  # XLA's memory analysis: arguments + outputs - aliases + temporaries
    # `hloscope replay`: the newest replay record of the run (hloscope.runs.replay_record), None without one
    replay: ReplaySummary | ReplayUnread | None = None
    timeline: list[tuple[float, float, str]] = field(default_factory=list)  # (start_s, duration_s, category), one step
    notes: list[str] = field(default_factory=list)  # what could not be read, said once to the user
    # the errors of files the run lists but that cannot be read (bad input: explain names them and exits 2)
    unreadable_files: list[str] = field(default_factory=list)
    # run.json `startup` of each process (hloscope.explain.startup); first_steps_s: each process's first step
    startups: list[StartupRecord] = field(default_factory=list)
    first_steps_s: list[float] = field(default_factory=list)

    @property
    def processes(self) -> list[list[float]]:
        """The timed steps per process: the replicates, or the one process whose steps `step_times_s` holds."""
        return self.replicates or ([self.step_times_s] if self.step_times_s else [])

    @property
    def process_medians_s(self) -> list[float]:
        return [median(steps) for steps in self.processes if steps]

    def to_dict(self) -> dict:
        ledger, program, startups, first_steps = self.ledger, self.program, self.startups, self.first_steps_s
        self.ledger = self.program = None  # the program may hold a whole parsed graph: never copied
        self.startups, self.first_steps_s = [], []
        try:
            data = asdict(self)
        finally:
            self.ledger, self.program, self.startups, self.first_steps_s = ledger, program, startups, first_steps
        data["ledger"] = ledger.to_dict() if ledger is not None else None
        data["program"] = {"modules": program.modules} if program is not None else None
        # the startup ledger is in the mode's `startup` block; these lists stay out of the summary (as before them)
        del data["startups"], data["first_steps_s"]
        data["host_scheduling"] = data.pop("host_scheduling_json")
        return data
