"""The run record (run.json) and the comparison record (comparison.json) as typed data: one schema each.

`rundir.load_run` and `rundir.load_comparison` validate a file and return these; analyses and renderers read their
attributes, never the JSON keys. Each record keeps the document it was read from, so that `to_dict()` gives back the
exact JSON (keys, order, and keys this hloscope does not know, which a newer writer may add: they are kept, not
dropped) and writing a record read from disk gives the same bytes.

Units follow docs/api.md: durations in seconds (fields ending in `_s`), memory in bytes (`_bytes`), throughput in
images per second (`_img_s`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from hloscope.errors import InputError
from hloscope.modes import CompileMode
from hloscope.runs.memory_record import MemoryLedger

T = TypeVar("T")

# A figure as written: an integer stays one, so that what is read back prints and writes as it was recorded.
Number = int | float

# A span a record measured, in seconds: never negative, below 1e9 s (30 years); and a count of things (threads, CPUs,
# a process id), a non-negative integer. A record holding anything else is refused on reading, naming the field.
Seconds = Annotated[int, msgspec.Meta(ge=0, lt=10**9)] | Annotated[float, msgspec.Meta(ge=0, lt=1e9)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
# A size a run was made with (a batch, a model dimension, CPUs, steps asked): at least one. An amount that is not a
# span or a count (FLOPs, bytes moved, images a second, a delay in ms): never negative, never infinite. A figure
# that may take either sign (a loss): finite (JSON's 1e400 reads as infinity, which no record holds).
Size = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]
Amount = Annotated[int, msgspec.Meta(ge=0)] | Annotated[float, msgspec.Meta(ge=0, le=1.7e308)]
Finite = int | Annotated[float, msgspec.Meta(ge=-1.7e308, le=1.7e308)]

# The version both records are written with (rundir refuses newer files and reads every older one it knows).
SCHEMA_VERSION = 1


# Every part of a record is a frozen Struct of the keys this hloscope reads, typed; other keys are ignored by the
# Struct and kept in the record's document.
class ModelConfig(msgspec.Struct, frozen=True, kw_only=True):
    image_size: Size | None = None
    patch_size: Size | None = None
    hidden_size: Size | None = None
    num_hidden_layers: Size | None = None
    num_attention_heads: Size | None = None
    intermediate_size: Size | None = None
    num_labels: Size | None = None
    num_channels: Size | None = None


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The settings the run was made with (`hloscope run` options); a comparison's config has the same keys plus its
    mode list and repeats, and `devices` may be the list of `compare --devices`."""

    mode: str | None = None
    model: str | None = None
    batch_size: Size | None = None
    steps: Count | None = None
    warmup: Count | None = None
    precision: str | None = None
    device: str | None = None
    data: str | None = None
    seed: int | None = None
    dump_hlo: bool | None = None
    profile: bool | None = None
    profile_steps: Size | None = None
    keep_all: bool | None = None
    target: str | None = None
    check_parity: bool | None = None
    attention: str | None = None
    seq_len: Size | None = None
    inject_host_delay_ms: Amount | None = None
    devices: Size | list[Size] | None = None
    xla_flags: str | None = None  # --xla-flags (null: not given, the inherited XLA_FLAGS was kept)
    compile_model: bool | None = None
    max_batch: bool | None = None
    max_batch_compiles: Size | None = None
    donate: bool | None = None  # --donate / --no-donate (absent: the mode's own behaviour)
    compile_mode: CompileMode | None = None  # --compile-mode (absent: torch.compile's default)
    fullgraph: bool | None = None  # --fullgraph (absent: not asked)
    threads: Annotated[int, msgspec.Meta(ge=1)] | None = None  # --threads N (absent: every CPU the process was given)
    model_config: ModelConfig | None = None
    modes: list[str] | None = None  # comparison.json only
    repeats: Size | None = None  # comparison.json only


class ThreadTimes(msgspec.Struct, frozen=True, kw_only=True):
    """How a group of the run's threads was scheduled over a span (hloscope/backends/scheduling.py, Linux schedstat):
    seconds on a CPU, seconds runnable but waiting for one, and how often it was preempted while it had work."""

    running_s: Seconds | None = None
    waiting_for_cpu_s: Seconds | None = None
    involuntary_switches: Count | None = None


class OtherThreads(ThreadTimes, frozen=True, kw_only=True):
    """The run's threads other than the one running the step, summed, and how many of them were seen."""

    threads: Count | None = None


class ProcessCpu(msgspec.Struct, frozen=True, kw_only=True):
    """Another process that used CPU time during the timed window, and how much."""

    pid: Count | None = None
    command: str
    cpu_s: Seconds | None = None


class HostScheduling(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `timing.host_scheduling`: how the host's CPUs were shared during the timed window (the window's
    seconds, the machine's CPUs and those the run could use), this process's threads, and the other processes' CPU
    time with the largest of them (on the machine, and on the run's CPUs: null without a CPU affinity)."""

    seconds: Seconds | None = None
    cpu_count: Count | None = None
    cpu_affinity: Count | None = None
    main_thread: ThreadTimes
    other_threads: OtherThreads
    other_processes_cpu_s: Seconds | None = None
    other_processes: list[ProcessCpu]
    other_processes_on_run_cpus: list[ProcessCpu] | None = None


class PhaseScheduling(msgspec.Struct, frozen=True, kw_only=True):
    """How the thread running the step was scheduled inside one of hloscope's host annotations of a profiled step
    (hloscope/input, hloscope/sync, hloscope/wait), summed over the step: seconds on a CPU, seconds runnable but
    waiting for one."""

    running_s: Seconds
    waiting_for_cpu_s: Seconds


class StepScheduling(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `profile.host_scheduling`, one profiled step: how its threads were scheduled between its markers, and
    the step thread inside each host annotation (annotation name -> figures; absent in runs from before they were
    measured), so that explain can tell a wait inside the input pipeline from one in dispatch or Python."""

    step: Count | None = None
    main_thread: ThreadTimes
    other_threads: OtherThreads
    phases: dict[str, PhaseScheduling] | UnsetType = UNSET


class HostPosition(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `profile.host_positions`, one profiled step: where the host entered the step marker, started and
    stopped the timer and left the marker (perf_counter seconds from the profile's start)."""

    step: Count
    marker_entered_s: Number
    timer_start_s: Number
    timer_stop_s: Number
    marker_left_s: Number


class RankTiming(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One rank of a data-parallel run (run.json `timing.ranks`): its own step times and their summary (none without
    a timed step)."""

    rank: Count
    step_times_s: list[Seconds]
    steps: Count
    median_s: Seconds | None = None
    mean_s: Seconds | None = None
    p10_s: Seconds | None = None
    p90_s: Seconds | None = None
    std_s: Seconds | None = None
    min_s: Seconds | None = None
    max_s: Seconds | None = None
    throughput_img_s: Amount | UnsetType | None = UNSET  # null: a step of no duration


class Timing(msgspec.Struct, frozen=True, kw_only=True):
    """The timed window: every step's duration and their summary (median, mean, interpolated p10/p90)."""

    step_times_s: list[Number] = []
    warmup_times_s: list[Number] = []
    profiled_step_times_s: list[Number] = []
    # --inject-host-delay: how long the host really slept in each timed / profiled step, in step order (a loaded
    # machine wakes it late); None: no delay was injected, or a run from before they were measured
    injected_host_delay_s: list[Number] | None = None
    profiled_injected_host_delay_s: list[Number] | None = None
    first_step_s: Seconds | None = None
    setup_s: Seconds | None = None
    steps: Count | None = None
    median_s: Seconds | None = None
    mean_s: Seconds | None = None
    p10_s: Seconds | None = None
    p90_s: Seconds | None = None
    std_s: Seconds | None = None
    min_s: Seconds | None = None
    max_s: Seconds | None = None
    throughput_img_s: Amount | None = None
    window_s: Seconds | None = None
    window_mean_s: Seconds | None = None
    noisy: bool | None = None
    host_scheduling: HostScheduling | None = None  # the timed window's (null: not measured)
    host_scheduling_note: str | None = None  # why the window's host scheduling was not measured
    ranks: list[RankTiming] | None = None  # data-parallel runs: each rank's own step times and figures
    step_is: str | None = None  # data-parallel runs: what one step's time is


class TargetPeak(msgspec.Struct, frozen=True, kw_only=True):
    """A compiled step's peak device memory (XLA's memory analysis, hloscope/targets/device_memory.py) against the
    target GPU's: the usable part (the device's minus the reserve), the headroom (usable - peak), whether it fits."""

    peak_bytes: Count
    how: str | None = None
    generated_code_bytes: Count | None = None
    buffer_assignment_bytes: Count | None = None
    device_memory_bytes: Count | None = None
    reserve_bytes: Count | None = None
    reserve: str | None = None
    usable_bytes: Count | None = None
    headroom_bytes: int | None = None
    fits: bool | None = None


class Memory(msgspec.Struct, frozen=True, kw_only=True):
    peak_host_rss_bytes: Count | None = None
    device_peak_bytes: Count | None = None
    source: str | None = None
    # XLA's estimate for a run compiled for a target GPU: arguments + outputs + temporaries - aliased
    device_peak_estimate_bytes: Count | None = None
    argument_bytes: Count | None = None
    output_bytes: Count | None = None
    temp_bytes: Count | None = None
    alias_bytes: Count | None = None
    generated_code_bytes: Count | None = None
    target_peak: TargetPeak | None = None  # a run compiled for a target GPU: its peak against the GPU's memory


class MaxBatchCompile(msgspec.Struct, frozen=True, kw_only=True):
    """One compile of the `--max-batch` search: the batch, the step's peak and whether it fits the target."""

    batch_size: Size
    status: str | None = None
    peak_bytes: Count | None = None
    fits: bool | None = None
    capture_s: Seconds | None = None
    compile_s: Seconds | None = None
    seconds: Seconds | None = None
    gemm_backend: str | None = None
    error: str | None = None
    run: bool = False  # the run's own compile (at --batch-size), where the search starts


class MaxBatch(msgspec.Struct, frozen=True, kw_only=True):
    """`--max-batch`: the largest batch whose compiled step fits the target's usable memory (None: not even batch 1,
    or the search stopped before one fitted), with every compile it made."""

    batch_size: Size | None = None
    exact: bool | None = None  # batch_size + 1 was compiled and does not fit
    at_least: bool | None = None  # the search stopped (bound or failure) before the answer was exact
    smallest_not_fitting: Size | None = None
    usable_bytes: Count | None = None
    reserve_bytes: Count | None = None
    reserve: str | None = None
    device_memory_bytes: Count | None = None
    max_compiles: Size | None = None
    time_budget_s: Seconds | None = None
    stopped_by: str | None = None  # "compiles", "time" or "failure"
    message: str | None = None
    search_s: Seconds | None = None
    compiles: list[MaxBatchCompile] = []


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """The GPU a `--target` run was compiled for (it never ran)."""

    name: str | None = None
    device: str | None = None
    compute_capability: str | None = None
    sm_count: Size | None = None
    device_memory_bytes: Count | None = None


class Roofline(msgspec.Struct, frozen=True, kw_only=True):
    """A `--target` run's lower bound of one step: every kernel one after the other, and all of them overlapped."""

    serial_s: Seconds | None = None
    aggregate_s: Seconds | None = None
    flops: Amount | None = None
    bytes: Amount | None = None
    label: str | None = None


class Kernels(msgspec.Struct, frozen=True, kw_only=True):
    """What XLA's thunk sequence of a `--target` run launches per step."""

    kernel_launches: Count | None = None
    library_calls: Count | None = None
    copies: Count | None = None
    by_kind: dict[str, int] = {}


# A framework's compile counters by its own names (Session.compile_counts: jit's cache entries and XLA compiles for
# JAX, dynamo's graphs and recompiles for torch.compile, CompileTime and UncachedCompile for PyTorch/XLA): each mode
# counts different events, so the names stay open and only the counts are typed.
CompileCounts = dict[str, Count]


class Compiles(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Compilations before and inside the timed window (the counters differ by framework: kept by name)."""

    before_window: CompileCounts | None = None
    in_window: CompileCounts | None = None
    total: CompileCounts | None = None
    recompiled_in_window: bool | None = None
    # a run compiled for a target GPU: how long XLA took and which GEMMs it emitted
    target_compile_s: Number | None = None
    gemm_backend: str | None = None
    triton_gemm_fallback: bool | None = None


class Loss(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    first: Finite | None = None
    last: Finite | None = None
    finite: bool | None = None
    falling: bool | None = None


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """The profiled steps after the timed window: what the trace holds and which of its steps readers drop."""

    steps: Count | None = None
    warmup_steps: Count | None = None
    step_numbers: list[Count] = []  # the numbers of the step markers in the trace, in order
    warmup_step_numbers: list[Count] = []
    usable_step_numbers: list[Count] = []
    step_marker: str | None = None  # how a step marker is named in the mode's trace
    annotations: dict[str, str] = {}  # phase -> host annotation name
    notes: list[str] = []
    host_scheduling: list[StepScheduling] | None = None  # one entry per profiled step (null: not measured)
    # one entry per profiled step; absent in runs from before they were recorded
    host_positions: list[HostPosition] | None = None


class PrecisionInEffect(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `environment.precision`: the precision asked for and the switches the framework had in effect. Each
    framework reports its own switch under its own name (null here where it has none), and every one of them its
    matmul precision as `matmul_precision` too."""

    requested: str | None = None
    jax_default_matmul_precision: str | None = None  # JAX, torchax: jax.default_matmul_precision (null: XLA's default)
    float32_matmul_precision: str | None = None  # PyTorch: torch.get_float32_matmul_precision()
    mat_mul_precision: str | None = None  # PyTorch/XLA: torch_xla.backends.get_mat_mul_precision()
    matmul_precision: str | None = None
    cuda_matmul_allow_tf32: bool | None = None  # PyTorch's TF32 switches
    cudnn_allow_tf32: bool | None = None
    autocast: str | None = None  # PyTorch, PyTorch/XLA: the autocast dtype (null: no autocast)
    torchax_autocast: str | None = None
    compute_dtype: str | None = None
    param_dtype: str | None = None

    def matmul(self) -> str | None:
        """The matmul precision in effect, under whichever name the framework (or an older record) gave it."""
        return (self.jax_default_matmul_precision or self.float32_matmul_precision or self.matmul_precision
                or self.mat_mul_precision or None)


class AttentionInEffect(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `environment.attention`: the attention implementation the model ran, and where that was read."""

    implementation: str | None = None
    source: str | None = None


# XLA's per-compile options as jax.jit was given them: XLA's own names, each a scalar
CompileOptions = dict[str, str | int | float | bool | None]


class CompileInEffect(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `environment.compile`: how the step was compiled: the API (null: eager), the backend, torch.compile's
    mode, fullgraph and dynamic, and jax.jit's XLA options."""

    api: str | None = None
    backend: str | None = None
    mode: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    options: CompileOptions | None = None


class DonationInEffect(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `environment.donation`: whether the step updates the train state in place, and how."""

    state_in_place: bool | None = None
    how: str | None = None


class ThreadsInEffect(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `environment.threads`: the CPUs the process could use, and PyTorch's thread pools."""

    cpu_affinity: Count | None = None
    torch_num_threads: Count | None = None
    torch_num_interop_threads: Count | None = None


class Environment(msgspec.Struct, frozen=True, kw_only=True):
    """Where and with what the run was made: machine, versions, and the settings each framework had in effect."""

    hloscope: str | None = None
    python: str | None = None
    platform: str | None = None
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_count: Size | None = None
    packages: dict[str, str | None] = {}
    env: dict[str, str] = {}
    framework: str | None = None
    backend: str | None = None
    device: str | None = None
    device_kind: str | None = None
    device_type: str | None = None  # torch_xla's runtime device type (CPU, CUDA, TPU)
    pjrt_device: str | None = None  # torch_xla: PJRT_DEVICE in effect
    device_name: str | None = None  # PyTorch: the CUDA device's name, or cpu
    gpu_name: str | None = None
    gpu_count: int | None = None
    # the settings the framework had in effect (Session.info(): written as it reports them, read typed)
    precision: PrecisionInEffect | None = None
    attention: AttentionInEffect | None = None
    compile: CompileInEffect | None = None
    donation: DonationInEffect | None = None
    threads: ThreadsInEffect | None = None
    frameworks_imported: list[str] = []


class Parity(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`--check-parity`: the probe before the first step (hloscope/runs/parity.py compares them): what it was computed
    on, then the loss, gradient and weight norms on the shared first batch, or why there are none (`error`)."""

    precision: str | None = None
    seed: int | None = None
    batch: str | None = None
    attention: str | None = None
    error: str | None = None  # the mode has no probe, or it raised: the other figures are absent
    loss: Number | None = None
    grad_norm: Number | None = None
    weights_norm: Number | None = None
    parameters: int | None = None
    weights: str | None = None  # where the initial weights came from
    seconds: Seconds | None = None


class ParityFigures(msgspec.Struct, frozen=True, kw_only=True):
    """The three quantities a parity probe measures: a tolerance of each, or one mode's relative difference."""

    loss: Number
    grad_norm: Number
    weights_norm: Number


class ParityMode(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One mode of comparison.json `parity`: its probe's figures against the reference's and its status ("ok",
    "mismatch"), or "not checked" and why (its figures absent)."""

    mode: str
    loss: Number | None = None
    grad_norm: Number | None = None
    weights_norm: Number | None = None
    weights: str | UnsetType | None = UNSET  # null: the probe did not say where its weights came from
    relative_difference: ParityFigures | None = None
    status: str
    reason: str | None = None


class ComparisonParity(msgspec.Struct, frozen=True, kw_only=True):
    """comparison.json `parity` (`compare --check-parity`, hloscope/runs/parity.py): every mode's probe against the
    reference (the first mode with one, null: none), the tolerances of the precision, and what failed."""

    precision: str | None = None
    tolerance: ParityFigures | None = None
    reference: str | None = None
    ok: bool | None = None
    modes: list[ParityMode] = []
    failures: list[str] = []


class StartupPart(msgspec.Struct, frozen=True):
    """One share of a startup phase: seconds, and the instrument that measured them."""

    name: str
    seconds: Seconds
    source: str


class StartupPhase(msgspec.Struct, frozen=True, kw_only=True):
    """A span of the run the driver timed (imports, setup, first step), split into the framework's parts and what
    they leave unaccounted."""

    name: str
    seconds: Seconds
    parts: list[StartupPart]
    unaccounted_s: Number = 0.0


class CompileCache(msgspec.Struct, frozen=True, kw_only=True):
    """The persistent compile cache a run used (HLOSCOPE_COMPILE_CACHE): its directory and each cache's folder."""

    dir: str
    folders: dict[str, str] = {}
    left_out: str | UnsetType = UNSET  # the caches not used, and why (--dump-hlo: XLA dumps only what it compiles)


class StartupRecompilation(msgspec.Struct, frozen=True, kw_only=True):
    """One compile inside the timed window as the framework explains it (hloscope/backends/startup_ledger.py): its
    cause and the instrument that said so (`source`), with what that framework knows besides: PyTorch/XLA the graph's
    hash, dynamo and PyTorch/XLA the user frame and the seconds, dynamo its compile id. A key the framework does not
    write stays out (unset: JAX writes cause and source only); null where it writes the key without a value."""

    cause: str
    graph_hash: str | UnsetType = UNSET
    frame: str | UnsetType | None = UNSET
    compile_id: str | UnsetType = UNSET
    seconds: Number | UnsetType | None = UNSET
    source: str


class StartupWindow(msgspec.Struct, frozen=True, kw_only=True):
    """The compiles inside the timed window: their parts and seconds, the cache counters' change, and what changed."""

    compile_parts: list[StartupPart] = []
    compile_s: Number = 0.0
    counts: dict[str, int] = {}
    recompilations: list[StartupRecompilation] = []


# Startup.cache_counts: programs found in a persistent compile cache that could not be loaded back
UNREADABLE_CACHE_COUNT = "persistent_cache_unreadable"


class Startup(msgspec.Struct, frozen=True, kw_only=True):
    """run.json `startup`, the startup ledger (hloscope/backends/startup_ledger.py): where the time to the first step
    went, phase by phase; every key is written, null where unknown."""

    phases: list[StartupPhase]
    total_s: Seconds | None = None
    cache_counts: dict[str, int] | None = None  # persistent cache hits and misses up to the first step
    compile_cache: CompileCache | None = None
    framework_source: str | None = None  # the instrument of the framework's parts
    window: StartupWindow | None = None


class Artifact(msgspec.Struct, frozen=True, kw_only=True):
    """One file of a run directory that run.json lists (path relative to the run directory)."""

    path: str
    kind: str = ""
    module: str | None = None
    module_id: int | None = None
    stage: str | None = None
    format: str | None = None
    train_step: bool | None = None
    leftover: bool = False  # found in the dump directory of a run cut short, not listed by it


@dataclass(frozen=True)
class RunRecord:
    """run.json. `file` is where it was read from (its run directory is `dir`); `document` the JSON as read."""

    schema_version: int
    run_id: str
    mode: str
    status: str
    config: RunConfig
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    environment: Environment = field(default_factory=Environment)
    timing: Timing = field(default_factory=Timing)
    memory: Memory = field(default_factory=Memory)
    compiles: Compiles = field(default_factory=Compiles)
    loss: Loss = field(default_factory=Loss)
    profile: Profile = field(default_factory=Profile)
    target: Target = field(default_factory=Target)
    roofline: Roofline = field(default_factory=Roofline)
    kernels: Kernels = field(default_factory=Kernels)
    max_batch: MaxBatch | None = None  # `--target --max-batch`: the search and its answer
    artifacts: list[Artifact] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    parity: Parity | None = None  # `--check-parity`: the probe before the first step
    stderr_tail: str | None = None
    file: Path = Path("run.json")
    document: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def dir(self) -> Path:
        return self.file.parent

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON, as read (unknown keys kept, same order): writing it gives the file's bytes back."""
        return copy.deepcopy(self.document)

    def artifact_path(self, artifact: Artifact) -> Path:
        return self.dir / artifact.path

    def has(self, name: str) -> bool:
        """Whether run.json holds this part, not null."""
        return self.document.get(name) is not None

    def section(self, name: str) -> dict[str, Any]:
        """A part of run.json this hloscope has no type for (graph, parity, ...), as read; {} when absent."""
        value = self.document.get(name)
        return copy.deepcopy(value) if isinstance(value, dict) else {}


class ComparisonEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One mode (one run directory) of a comparison: its outcome and the summary `compare` prints."""

    dir: str
    mode: str | None = None  # absent in a hand-made comparison: the directory's name stands for it
    status: str | None = None
    error: str | None = None
    median_s: Number | None = None
    mean_s: Number | None = None
    p10_s: Number | None = None
    p90_s: Number | None = None
    std_s: Number | None = None
    window_mean_s: Number | None = None
    steps: int | None = None
    first_step_s: Number | None = None
    throughput_img_s: Number | None = None
    peak_memory_bytes: Count | None = None
    peak_memory_source: str | None = None
    recompiled_in_window: bool | None = None
    loss_first: Number | None = None
    loss_last: Number | None = None
    noisy: bool | None = None
    warnings: list[str] = []
    devices: int | None = None
    returncode: int | None = None
    wall_s: Number | None = None
    stderr_log: str | None = None
    stderr_tail: str | None = None
    ratio_to_fastest: Number | None = None
    kernels: int | None = None  # a run compiled for a target GPU: its generated kernels
    roofline_lower_bound_s: Number | None = None
    target_peak_bytes: Count | None = None  # ... its peak device memory (XLA's memory analysis)
    target_usable_bytes: Count | None = None  # ... what the target GPU leaves an XLA program
    max_batch: int | None = None  # `--max-batch`: the largest batch that fits (max_batch_at_least: a lower bound)
    max_batch_at_least: bool | None = None
    max_batch_message: str | None = None
    replicate: int | None = None  # which fresh process of its configuration (`compare --repeats K`: 1..K)
    variant: str | None = None  # one of several configurations of the same mode (`hloscope calibrate`)
    parity: Parity | None = None  # `--check-parity`: the probe before the first step
    # `compare --replay`: the replayed program's summary as hloscope/runs/replays.py reports it (and `hloscope replay
    # COMPARISON_DIR --json` prints it): which keys it has, and their order, depend on how the replay ended (ran, not
    # replayable, failed to start), which one Struct's field order cannot write back
    replay: dict[str, Any] | None = None
    recovered: bool = False  # a run directory a comparison cut short did not list


class Configuration(msgspec.Struct, frozen=True, kw_only=True):
    """The processes of one mode (and device count) of a comparison, pooled: `compare --repeats`."""

    mode: str
    processes: int | None = None
    timed_processes: int | None = None
    dirs: list[str] = []
    median_s: Number | None = None
    process_medians_s: list[Number] = []
    between_process_spread_s: Number | None = None
    between_process_spread: Number | None = None  # relative to the pooled median
    devices: int | None = None


class BetweenProcessControl(msgspec.Struct, frozen=True, kw_only=True):
    """The A/A control: the largest relative spread between processes of one configuration."""

    relative: Number | None = None
    configuration: str | None = None
    processes: int | None = None
    meaning: str | None = None


class AuditRow(msgspec.Struct, frozen=True, kw_only=True):
    """One setting of the fairness audit: its value in each mode (mode -> text) and whether they agree ("same",
    "recorded by some", "by design", "mismatch")."""

    setting: str
    values: dict[str, str]
    status: str | None = None


class AuditStage(msgspec.Struct, frozen=True, kw_only=True):
    """The fairness audit at one stage (hloscope/runs/audit.py): the modes audited, those that could not be (mode ->
    why), every setting, the mismatches and the settings that differ by design, and whether none mismatches."""

    stage: str | None = None
    modes: list[str] = []
    errors: dict[str, str] = {}
    rows: list[AuditRow] = []
    mismatches: list[AuditRow]
    by_design: list[AuditRow] = []
    ok: bool | None = None


class Audit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """comparison.json `audit`: the audit of the modes as set up before timing, whether the comparison is fair, and
    once the runs are timed, the same audit of the timed runs."""

    before_timing: AuditStage | None = None
    ok: bool | None = None
    timed_runs: AuditStage | None = None


class ReplayPlan(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """comparison.json `replay` (`compare --replay`): how the XLA modes' programs were replayed after the timing: the
    steps, warm-up steps and device each replay was given, and in words how."""

    steps: int | None = None
    warmup: int | None = None
    device: str | None = None
    how: str | None = None


@dataclass(frozen=True)
class ComparisonRecord:
    """comparison.json. `file` is where it was read from (the comparison directory is `dir`)."""

    schema_version: int
    modes: list[ComparisonEntry]
    comparison_id: str | None = None
    status: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    config: RunConfig = field(default_factory=RunConfig)
    audit: Audit | None = None  # the fairness audit's tables (hloscope/runs/audit.py)
    configurations: list[Configuration] = field(default_factory=list)
    between_process_spread: BetweenProcessControl | None = None
    parity: ComparisonParity | None = None
    replay: ReplayPlan | None = None  # `compare --replay`: how the XLA modes' programs were replayed
    file: Path = Path("comparison.json")
    document: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def dir(self) -> Path:
        return self.file.parent

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON, as read or as built by `comparison_record` (unknown keys kept, same order)."""
        return copy.deepcopy(self.document)


def section_document(section: msgspec.Struct) -> dict[str, Any]:
    """A typed part of a record as the JSON object rundir writes: its fields in the order the Struct declares them,
    those left at their default omitted (the Structs written this way say `omit_defaults`), framework scalars (numpy)
    as plain numbers. The one encoder of the parts a writer builds typed."""
    document: dict[str, Any] = msgspec.to_builtins(section, enc_hook=_plain)  # a Struct encodes as an object
    return document


def configuration_document(row: Configuration) -> dict[str, Any]:
    """One row of comparison.json `configurations`: `devices` only where the comparison ran several device counts."""
    document = section_document(row)
    if row.devices is None:
        del document["devices"]
    return document


# comparison.json's entries as `compare` writes them: the keys every entry of its kind has (null when unknown), in
# this order, then the optional ones (`_ENTRY_OPTIONAL`) that apply, then the ratio to the fastest mode.
_ENTRY_SUMMARY = ("mode", "dir", "status", "error", "median_s", "mean_s", "p10_s", "p90_s", "std_s", "window_mean_s",
                  "steps", "first_step_s", "throughput_img_s", "peak_memory_bytes", "peak_memory_source",
                  "recompiled_in_window", "loss_first", "loss_last", "noisy", "warnings")
_ENTRY_REFUSED = ("mode", "dir", "status", "error", "devices", "median_s", "steps", "warnings")


def _entry_optional(entry: ComparisonEntry) -> list[tuple[str, ...]]:
    """The groups of keys an entry holds beyond its kind's fixed ones: each written when it applies."""
    compiled = entry.status == "compiled"  # a --target run: not timed, what XLA generated instead
    return [group for group, applies in (
        (("devices",), entry.devices is not None),
        (("parity",), entry.parity is not None),
        (("kernels", "roofline_lower_bound_s"), compiled),
        (("target_peak_bytes", "target_usable_bytes"), compiled and entry.target_peak_bytes is not None),
        (("max_batch", "max_batch_at_least", "max_batch_message"),
         compiled and (entry.max_batch, entry.max_batch_at_least, entry.max_batch_message) != (None, None, None)),
        (("returncode", "wall_s", "stderr_log"), entry.wall_s is not None),  # the process ran: how it ended
        (("stderr_tail",), entry.stderr_tail is not None),
        (("replicate",), entry.replicate is not None),
        (("variant",), entry.variant is not None),
        (("ratio_to_fastest",), True),
        (("replay",), entry.replay is not None),
    ) if applies]


def entry_document(entry: ComparisonEntry) -> dict[str, Any]:
    """One entry of comparison.json `modes` as `compare` writes it (a refused run: the few keys it has)."""
    fixed = _ENTRY_REFUSED if entry.status == "refused" else _ENTRY_SUMMARY
    keys = [*fixed, *(key for group in _entry_optional(entry) for key in group if key not in fixed)]
    document = {key: getattr(entry, key) for key in keys}
    document["warnings"] = list(entry.warnings)
    if entry.parity is not None:
        document["parity"] = section_document(entry.parity)
    return document


def comparison_record(file: Path, config: dict[str, Any], modes: list[ComparisonEntry], *, comparison_id: str,
                      status: str, started_at: str, finished_at: str | None = None,
                      audit: Audit | None = None, configurations: list[Configuration] | None = None,
                      between_process_spread: BetweenProcessControl | None = None,
                      parity: ComparisonParity | None = None, replay: ReplayPlan | None = None
                      ) -> ComparisonRecord:
    """comparison.json as `compare` writes it, typed, with its document: `config` as given (every key, in its order),
    then the entries, the audit, and what a finished comparison adds (`configurations` and the between-process
    control: a comparison that ran to its end, not one interrupted; `parity`: --check-parity; `replay`: --replay).
    The one place the comparison's JSON is assembled."""
    document: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "comparison_id": comparison_id, "status": status,
                                "started_at": started_at, "config": config,
                                "modes": [entry_document(entry) for entry in modes]}
    if audit is not None:
        document["audit"] = section_document(audit)
    if finished_at is not None:
        document["finished_at"] = finished_at
    if configurations is not None:
        document["configurations"] = [configuration_document(row) for row in configurations]
        document["between_process_spread"] = (section_document(between_process_spread)
                                              if between_process_spread is not None else None)
    if parity is not None:
        document["parity"] = section_document(parity)
    if replay is not None:
        document["replay"] = section_document(replay)
    file = Path(file)
    try:
        typed_config = msgspec.convert(config, RunConfig)
    except msgspec.ValidationError as error:
        raise InputError(file, f"not a valid comparison.json: {_field_message(str(error), config, 'config.')}") from None
    return ComparisonRecord(schema_version=SCHEMA_VERSION, modes=list(modes), comparison_id=comparison_id,
                            status=status, started_at=started_at, finished_at=finished_at, config=typed_config,
                            audit=audit, configurations=list(configurations or []),
                            between_process_spread=between_process_spread, parity=parity, replay=replay, file=file,
                            document=document)


def amended_comparison(record: ComparisonRecord, **changes: Any) -> ComparisonRecord:
    """A comparison `comparison_record` built, with some of its parts changed (`modes`, `replay`, ...)."""
    parts = {name: getattr(record, name) for name in ("modes", "comparison_id", "status", "started_at", "finished_at",
                                                     "audit", "between_process_spread", "parity", "replay")}
    parts["configurations"] = record.configurations if "configurations" in record.document else None
    parts.update(changes)
    return comparison_record(record.file, record.document["config"], **parts)


def unfinished_run(file: Path, run_id: str, mode: str, config: dict[str, Any], status: str,
                   error: str | None) -> RunRecord:
    """run.json for a run whose process wrote none: its settings, no step, and why (`status`, `error`)."""
    return decode_run(file, {"schema_version": SCHEMA_VERSION, "run_id": run_id, "mode": mode, "config": config,
                             "timing": {"step_times_s": []}, "artifacts": [], "status": status, "error": error})


def amended_run(record: RunRecord, parts: dict[str, Any], more_artifacts: list[dict[str, Any]] | None = None
                ) -> RunRecord:
    """The run record with top-level parts of run.json set (`parts`: JSON values, e.g. status, error, stderr_tail)
    and artifacts added to its list; every other key is kept, in its order, and a part it lacked goes at the end."""
    document = record.to_dict()
    document.update(parts)
    if more_artifacts:
        document["artifacts"] = [*(document.get("artifacts") or []), *more_artifacts]
    return decode_run(record.file, document)


# The summary of the timed steps (backends/timing.py step_statistics), in the order run.json holds it.
_TIMING_STATISTICS = ("median_s", "mean_s", "p10_s", "p90_s", "std_s", "min_s", "max_s", "throughput_img_s")


def timing_document(timing: Timing, window_measured: bool = False, profiled: bool = False) -> dict[str, Any]:
    """run.json `timing` as the run has learnt it so far, the one order every run writes: the step times, the setup
    time, the timed window's host scheduling (`window_measured`: the window closed, its figures or null), each rank's
    figures, then the summary once the steps are summarised (`steps` set: the warm-up, the first step, the statistics
    of a run with steps, the window), the injected delays, the mean of a window cut short, whether it is noisy, and
    the profiled steps (`profiled`)."""
    document: dict[str, Any] = {"step_times_s": list(timing.step_times_s)}
    if timing.setup_s is not None:
        document["setup_s"] = timing.setup_s
    if window_measured:
        document["host_scheduling"] = (section_document(timing.host_scheduling)
                                       if timing.host_scheduling is not None else None)
    if timing.host_scheduling_note is not None:
        document["host_scheduling_note"] = timing.host_scheduling_note
    if timing.ranks is not None:
        document.update(ranks=[section_document(rank) for rank in timing.ranks], step_is=timing.step_is)
    if timing.steps is not None:
        document.update(warmup_times_s=list(timing.warmup_times_s), first_step_s=timing.first_step_s,
                        steps=timing.steps)
        if timing.steps:
            document.update({key: getattr(timing, key) for key in _TIMING_STATISTICS})
        if timing.window_s is not None:
            document.update(window_s=timing.window_s, window_mean_s=timing.window_mean_s)
    if timing.injected_host_delay_s is not None:
        document["injected_host_delay_s"] = list(timing.injected_host_delay_s)
    if timing.window_s is None and timing.window_mean_s is not None:  # interrupted inside the window
        document["window_mean_s"] = timing.window_mean_s
    if timing.noisy is not None:
        document["noisy"] = timing.noisy
    if profiled:
        document["profiled_step_times_s"] = timing.profiled_step_times_s
        if timing.profiled_injected_host_delay_s is not None:
            document["profiled_injected_host_delay_s"] = timing.profiled_injected_host_delay_s
    return document


@dataclass
class RunParts:
    """run.json as the driver learns it during a run: each part typed where a Struct describes it, the framework's
    own dictionaries (its settings, memory, graph) and the artifact entries as reported. `run_document` writes it."""

    run_id: str
    mode: str
    started_at: str
    config: dict[str, Any]
    environment: Environment  # the machine's part (collect_environment), and env as setup left it
    framework: dict[str, Any] = field(default_factory=dict)  # Session.info(): the settings the framework had in effect
    frameworks_imported: list[str] | None = None  # once the run ended: the frameworks its process imported
    status: str = "running"
    error: str | None = None
    finished_at: str | None = None
    timing: Timing = field(default_factory=Timing)
    window_measured: bool = False  # the timed window closed: its host scheduling is written (null when unmeasured)
    profiled: bool = False  # steps were profiled: their times are written
    memory: dict[str, Any] | None = None  # Session.memory(): the peaks, with the framework's own keys
    memory_ledger: MemoryLedger | None = None  # memory_ledger.measure: where the peak went
    compiles: Compiles | None = None
    loss: Loss | None = None
    graph: dict[str, Any] = field(default_factory=dict)  # the session's graph summary: its keys differ by mode
    # each producer's own keys in its own order (dump files, traces, step inputs): one Struct would reorder them
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    parity: Parity | None = None  # --check-parity: the probe before the first step
    phase: str | None = None  # where a running run is (its last write before the end says it)
    profile: Profile | None = None
    error_traceback: str | None = None  # a run the framework's error failed: where it was raised
    startup: Startup | None = None  # the startup ledger, once the run ended


# The environment's keys that describe the machine (runs/environment.py collect_environment), in the order it has them.
_MACHINE = ("hloscope", "python", "platform", "hostname", "cpu_model", "cpu_count", "packages", "env")


def environment_document(machine: Environment, framework: dict[str, Any],
                         frameworks_imported: list[str] | None = None) -> dict[str, Any]:
    """run.json `environment`: the machine's keys, then the framework's settings as it reports them (a key of both:
    the framework's value, in the machine's place), then the frameworks the process imported once the run ended."""
    document: dict[str, Any] = {key: getattr(machine, key) for key in _MACHINE}
    document["packages"], document["env"] = dict(machine.packages), dict(machine.env)
    document.update(framework)
    if frameworks_imported is not None:
        document["frameworks_imported"] = list(frameworks_imported)
    return document


def memory_document(memory: dict[str, Any] | None, ledger: MemoryLedger | None) -> dict[str, Any]:
    """run.json `memory`: the peaks as the framework reports them, then the ledger once measured ({} until then)."""
    document = dict(memory or {})
    if ledger is not None:
        document["ledger"] = ledger.to_dict()
    return document


def run_document(parts: RunParts) -> dict[str, Any]:
    """run.json as the driver writes it, the one order every run has: what the run is and how it ended, its settings,
    environment, timing (timing_document), memory, compiles, loss, graph, artifacts and warnings, then the parts a
    run has only when it got there: the parity probe, where a running run is, the profile, the failure's traceback
    and the startup ledger."""
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "run_id": parts.run_id, "mode": parts.mode, "status": parts.status,
        "error": parts.error, "started_at": parts.started_at, "finished_at": parts.finished_at,
        "config": parts.config,
        "environment": environment_document(parts.environment, parts.framework, parts.frameworks_imported),
        "timing": timing_document(parts.timing, parts.window_measured, parts.profiled),
        "memory": memory_document(parts.memory, parts.memory_ledger),
        "compiles": section_document(parts.compiles) if parts.compiles is not None else {},
        "loss": section_document(parts.loss) if parts.loss is not None else {},
        "graph": parts.graph, "artifacts": list(parts.artifacts), "warnings": list(parts.warnings)}
    optional = (("parity", section_document(parts.parity) if parts.parity is not None else None),
                ("phase", parts.phase),
                ("profile", section_document(parts.profile) if parts.profile is not None else None),
                ("error_traceback", parts.error_traceback),
                ("startup", section_document(parts.startup) if parts.startup is not None else None))
    document.update((key, value) for key, value in optional if value is not None)
    return document


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy / framework scalars
        return value.item()
    raise NotImplementedError(f"not JSON serialisable: {type(value).__name__}")


def decode_run(file: Path, document: dict[str, Any], what: str = "run.json") -> RunRecord:
    """The typed run record of a document (already checked by rundir); a value of the wrong type is an InputError
    naming the file and the field."""
    return replace(_convert(file, document, RunRecord, what), file=file, document=document)


def decode_comparison(file: Path, document: dict[str, Any]) -> ComparisonRecord:
    """The typed comparison record of a document (already checked by rundir)."""
    return replace(_convert(file, document, ComparisonRecord, "comparison.json"), file=file, document=document)


# Parts a record may hold as null (older or cut-short runs): read as empty.
_NULLABLE = {"config", "environment", "timing", "memory", "compiles", "loss", "profile", "target", "roofline", "kernels",
             "artifacts", "warnings", "notes", "configurations", "max_batch"}
_NULLABLE_TIMING = {"step_times_s", "warmup_times_s", "profiled_step_times_s"}


def decode_entry(file: Path, entry: dict[str, Any]) -> ComparisonEntry:
    """One mode entry of comparison.json (`file`) as `compare` settles it, typed."""
    return _convert(file, entry, ComparisonEntry, "comparison.json entry")


def _convert(file: Path, document: dict[str, Any], kind: type, what: str) -> Any:
    # the file and document fields are set by the caller, never read from the JSON
    body = {key: value for key, value in document.items()
            if key not in ("file", "document") and not (value is None and key in _NULLABLE)}
    if isinstance(body.get("timing"), dict):
        body["timing"] = {key: value for key, value in body["timing"].items()
                          if not (value is None and key in _NULLABLE_TIMING)}
    try:
        return msgspec.convert(body, kind)
    except msgspec.ValidationError as error:
        raise InputError(file, f"not a valid {what}: {_field_message(str(error), document)}") from None


# msgspec's names of JSON types, as the other messages of rundir say them
_EXPECTED = (("float", "a number"), ("int", "an integer"), ("str", "a string"), ("bool", "true or false"),
             ("object", "an object"), ("array", "a list"))
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _field_message(text: str, document: Any, prefix: str = "") -> str:
    """msgspec's "Expected `int`, got `str` - at `$.config.steps`" as "'config.steps' is str 'six', expected an
    integer" (the value quoted from the document), the way rundir names a wrong field; `prefix` names where the
    document sits in its file (`startup.`)."""
    message, _, where = text.partition(" - at `$")
    where = where.rstrip("`").lstrip(".")
    name = prefix + where if where else prefix.rstrip(".")
    expected = re.match(r"Expected `([^`]*)`( [<>=]+ [^,]+)?", message)
    if not name:
        return message
    if expected is None:  # a missing field, a value not among the allowed: msgspec's words, at the field
        return f"'{name}': {message}"
    value: Any = document
    for key, index in _STEP.findall("." + where if where else ""):
        value = value.get(key) if isinstance(value, dict) and key else (
            value[int(index)] if isinstance(value, list) and index and int(index) < len(value) else None)
    names = [text for name_, text in _EXPECTED if re.search(rf"\b{name_}\b", expected.group(1))]
    if "a number" in names and "an integer" in names:  # int | float: a number
        names.remove("an integer")
    expected_text = " or ".join(names) or expected.group(1)
    bound = (expected.group(2) or "").strip()  # a constraint on the value: ">= 1"
    expected_text += f" {bound}" if bound else ""
    if "[...]" in where:  # a value under an object's open keys: msgspec does not say which key, only what it got
        got = re.search(r"got `([^`]*)`", message)
        held = dict(_EXPECTED).get(got.group(1), got.group(1)) if got else "a value out of range"
        return f"'{name}' holds {held}, expected {expected_text}"
    return f"'{name}' is {type(value).__name__} {value!r:.40}, expected {expected_text}"


def convert_section(file: Path, value: Any, kind: type[T], section: str, what: str = "run.json") -> T:
    """A part of a record (`section`, e.g. "startup") as the msgspec Struct `kind`; a value of the wrong shape is one
    InputError naming the file and the field. `section` "": the whole document."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as error:
        where = f"{section}." if section else ""
        raise InputError(file, f"not a valid {what}: {_field_message(str(error), value, where)}") from None
