"""What every mode implements (a Session) and the options a run is configured with."""

from __future__ import annotations

import contextlib
import itertools
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hloscope.backends import scheduling
from hloscope.errors import UsageError
from hloscope.machine import check_threads, cpu_affinity
from hloscope.models.presets import Preset, get_preset
from hloscope.modes import get_mode, settings_refusal
from hloscope.runs.records import HostPosition, Profile, StepScheduling

# --max-batch's default bound on compiles (hloscope/targets/max_batch.py): from batch 32, doubling up to 2048 (6
# compiles after the run's own) leaves 5 for the bisection.
MAX_BATCH_COMPILES = 12


# Run options whose record is left out when they keep the mode's own behaviour: the records of runs without them keep
# the keys they always had. Unlike runs/settings.py's _UNSET_CONFIG (a key always written, read as unset), these are
# not written at all.
_UNSET_OPTIONS: dict[str, Any] = {"donate": None, "compile_mode": None, "fullgraph": False, "threads": None}


@dataclass(frozen=True)
class RunOptions:
    mode: str = "jax"                 # a name in the mode registry (hloscope.modes)
    model: str = "vit-base"
    batch_size: int = 32
    steps: int = 50
    warmup: int = 10
    precision: str = "fp32"           # fp32 | tf32 | bf16
    device: str = "auto"              # auto | cpu | cuda
    data: str = "device"              # device | loader
    seed: int = 0
    dump_hlo: bool = False
    profile: bool = False
    profile_steps: int = 6            # steps in the trace; the first is the profiler's warm-up (PROFILE_WARMUP_STEPS)
    keep_all: bool = False
    target: str | None = None         # --target: compile for this GPU (hloscope.targets) instead of timing
    check_parity: bool = False        # --check-parity: same weights in every mode; first-step loss and gradient norm
    attention: str = "eager"          # --attention eager | sdpa | flash (transformers' attn_implementation)
    seq_len: int | None = None        # --seq-len for text presets (None: the preset's default)
    inject_host_delay_ms: float = 0.0  # --inject-host-delay: a known host sleep before each step's dispatch
    devices: int = 1                  # --devices N: data parallel over N devices (hloscope/backends/devices.py)
    optimizer: str = "sgd"            # --optimizer sgd | adamw (hloscope/backends/optimizers.py)
    xla_flags: str | None = None      # --xla-flags: the run's XLA_FLAGS, replacing the inherited (hloscope.runs.xla_flags)
    max_batch: bool = False           # --max-batch (with --target): search the largest batch that fits the target
    max_batch_compiles: int = MAX_BATCH_COMPILES  # --max-batch-compiles: the search's bound
    donate: bool | None = None        # --donate / --no-donate: donate the train state to the step (None: the mode's own)
    compile_mode: str | None = None   # --compile-mode: torch.compile's mode (None: torch.compile's default)
    fullgraph: bool = False           # --fullgraph: torch.compile(fullgraph=True), a graph break is an error
    threads: int | None = None        # --threads N: CPU affinity to N CPUs, OMP_NUM_THREADS and torch's threads

    @property
    def preset(self) -> Preset:
        return get_preset(self.model, self.seq_len)

    @property
    def compile_model(self) -> bool:
        return get_mode(self.mode).compile

    def to_json(self) -> dict:
        data = asdict(self)
        if not self.max_batch:  # the records of runs without the search keep the keys they always had
            del data["max_batch"], data["max_batch_compiles"]
        for name, unset in _UNSET_OPTIONS.items():  # an option left at the mode's own behaviour is not recorded
            if data[name] == unset:
                del data[name]
        data["compile_model"] = self.compile_model
        data["model_config"] = self.preset.config_kwargs()
        return data


def check_settings(options: RunOptions) -> None:
    """--donate/--no-donate, --compile-mode, --fullgraph where the mode refuses them, and --threads beyond this
    machine's CPUs: one UsageError line (exit 2), before anything is created."""
    check_target_settings(options.target, options.donate, options.compile_mode, options.fullgraph, options.threads)
    refusal = settings_refusal(options.mode, options.donate, options.compile_mode, options.fullgraph)
    if refusal is not None:
        raise UsageError(refusal)
    check_threads(options.threads)


def check_target_settings(target: str | None, donate: bool | None, compile_mode: str | None, fullgraph: bool,
                          threads: int | None) -> None:
    """--target compiles the step for a GPU without running it, from the mode's own capture: the settings of a run
    (--donate/--no-donate, --compile-mode, --fullgraph, --threads) would be recorded but not applied, so they are
    refused in one line (exit 2)."""
    given = [flag for flag, value in (("--donate/--no-donate", donate is not None), ("--compile-mode", compile_mode),
                                      ("--fullgraph", fullgraph), ("--threads", threads)) if value]
    if target and given:
        raise UsageError(f"{', '.join(given)}: --target compiles the step for {target} without running it, from the "
                         "mode's own capture; these settings apply to a run only")


# The names hloscope gives the host phases of a step in every mode's profile (docs/run.md, "--profile"). Each is a host
# annotation on the thread that runs the step, inside the step marker: torch.profiler.record_function (PyTorch),
# jax.profiler.TraceAnnotation (JAX), torch_xla's profiler TraceMe (torch_xla).
STEP_MARKER = "train_step"              # JAX / torch_xla step annotation name; PyTorch's are ProfilerStep#N
INPUT_ANNOTATION = "hloscope/input"     # fetching the step's batch (the DataLoader with --data loader) onto the device
WAIT_ANNOTATION = "hloscope/wait"       # blocking until the device has finished the step
SYNC_ANNOTATION = "hloscope/sync"       # torch_xla: torch_xla.sync() cuts and dispatches the step's graph
PROFILE_WARMUP_STEPS = 1                # the first profiled step carries the profiler's start-up: readers drop it


def profile_warmup_steps(steps: int) -> int:
    """How many of `steps` profiled steps are the profiler's warm-up (a one-step profile keeps its only step)."""
    return PROFILE_WARMUP_STEPS if steps > PROFILE_WARMUP_STEPS else 0


@dataclass
class ProfileResult:
    step_times_s: list[float] = field(default_factory=list)
    artifacts: list[dict] = field(default_factory=list)
    step_numbers: list[int] = field(default_factory=list)  # the numbers of the step markers in the trace, in order
    step_marker: str = ""  # how a step marker is named in this mode's trace
    annotations: dict[str, str] = field(default_factory=dict)  # phase -> host annotation name
    notes: list[str] = field(default_factory=list)
    # per recorded step, how the host's threads were scheduled (hloscope.backends.scheduling); None: not measured
    host_scheduling: list[StepScheduling] | None = field(default_factory=list)
    # --inject-host-delay: per recorded step, how long the host slept (Session.take_host_sleep); None: no delay asked
    host_sleeps_s: list[float] | None = None
    # per recorded step, where the host was (perf_counter seconds from the profile's start): entering the step marker,
    # starting the timer, stopping it, leaving the marker (Session.profile)
    positions: list[HostPosition] = field(default_factory=list)

    def record(self) -> Profile:
        """run.json `profile`: what the trace holds and which of its steps readers should drop."""
        warmup = profile_warmup_steps(len(self.step_numbers))
        return Profile(steps=len(self.step_numbers), warmup_steps=warmup, step_numbers=list(self.step_numbers),
                       warmup_step_numbers=list(self.step_numbers[:warmup]),
                       usable_step_numbers=list(self.step_numbers[warmup:]), step_marker=self.step_marker,
                       annotations=dict(self.annotations), notes=list(self.notes),
                       host_scheduling=None if self.host_scheduling is None else list(self.host_scheduling),
                       host_positions=list(self.positions))


class Session:
    """One mode's training loop pieces. The shared driver calls: setup, step/wait/loss_of (timed loop), compile_counts
    (before and after the timed window), memory, profile, artifacts, info, close.

    `memory` and `profile` are written once, here; a mode supplies their hooks: `device_memory`, and `profiler` (start
    and stop its profiler around the profiled steps), `step_marker` (its per-step marker) and the `profile_*`
    descriptions."""

    profiling = False  # True while profile() runs (the driver sets it): the host phases are annotated only then
    # HLOSCOPE_TEST_RESHAPE (hloscope.backends.startup_ledger): from this step index on, every batch loses its last
    # sample, so that the mode meets a new input shape inside the timed window; None: never
    trim_batch_from: int | None = None
    host_sleep_s = 0.0  # --inject-host-delay: seconds slept since take_host_sleep() last read them
    # profiled steps: the step thread's (nanoseconds running, waiting for a CPU) inside each host annotation since
    # profile() last reset it (annotate)
    phase_times: dict[str, tuple[int, int]]

    # run.json `profile`: how this mode's step marker is named, the host phases it annotates, notes
    profile_step_marker = ""
    profile_annotations: ClassVar[dict[str, str]] = {"input": INPUT_ANNOTATION, "wait": WAIT_ANNOTATION}
    profile_notes: tuple[str, ...] = ()
    profile_lead_in_steps = 0  # steps the profiler runs before it records (Kineto's schedule warm-up): not recorded
    # run.json `memory.source` when the device reports no memory statistics
    host_memory_source = "peak host RSS (the device reports no memory statistics)"

    def __init__(self, options: RunOptions, run_dir: Path):
        self.options = options
        self.run_dir = run_dir
        self.phase_times = {}

    def annotation(self, name: str):
        """The framework's host annotation context manager named `name` (see INPUT_ANNOTATION...)."""
        return contextlib.nullcontext()

    def annotate(self, name: str):
        """`annotation(name)` in profiled steps, with the step thread's schedstat read around it (`phase_times`);
        nothing in the timed window (no profiler listens there)."""
        return self._measured_annotation(name) if self.profiling else contextlib.nullcontext()

    @contextlib.contextmanager
    def _measured_annotation(self, name: str) -> Iterator[None]:
        """The annotation, and the thread's time on a CPU and waiting for one inside it added to `phase_times[name]`:
        a wait there is the annotated phase's (the input pipeline's), not dispatch's or Python's. Two schedstat reads
        (a few microseconds) around the annotation, in profiled steps only."""
        before = scheduling.thread_times()
        with self.annotation(name):
            yield
        after = scheduling.thread_times()
        if before is not None and after is not None:
            running, waiting = self.phase_times.get(name, (0, 0))
            self.phase_times[name] = (running + after[0] - before[0], waiting + after[1] - before[1])

    def inject_host_delay(self) -> None:
        """--inject-host-delay: sleep on the host before the step's device work is dispatched, so that the device waits
        for the host by a known amount. Each mode calls it in step(), after fetching the batch, in every step (timed
        and profiled). No annotation: nothing in the trace tells explain where the delay is, as with a real one.

        The sleep is measured (time.perf_counter, from before the call to the wake-up) and added to `host_sleep_s`: a
        loaded machine wakes the host late, and the device waits for as long as the host really slept."""
        delay_ms = self.options.inject_host_delay_ms
        if delay_ms > 0:
            start = time.perf_counter()
            time.sleep(delay_ms / 1e3)
            self.host_sleep_s += time.perf_counter() - start

    def take_host_sleep(self) -> float:
        """Seconds the injected host delay slept since the last call (the sum, if a step slept more than once)."""
        slept, self.host_sleep_s = self.host_sleep_s, 0.0
        return slept

    def setup(self) -> None:
        raise NotImplementedError

    def step(self, index: int) -> Any:
        """Run training step `index` (fetching its batch) and return its outputs, without waiting for the device."""
        raise NotImplementedError

    def wait(self, outputs: Any) -> None:
        """Block until the device has finished computing `outputs`."""
        raise NotImplementedError

    def loss_of(self, outputs: Any) -> float:
        raise NotImplementedError

    def compile_counts(self) -> dict[str, int]:
        """Cumulative compilation counters; the driver diffs them around the timed window."""
        return {}

    def parity(self) -> dict:
        """--check-parity, right after setup (the weights are still the initial ones): on the shared first batch
        (`data.parity_batch`), the loss, the global L2 norm of the gradients and of the weights, without updating the
        weights. run.json `parity` (see hloscope/runs/parity.py)."""
        raise NotImplementedError(f"{self.options.mode} has no parity probe")

    def window_starting(self) -> None:
        """Called after the warm-up, just before the timed window (outside the timed region)."""

    def rank_step_times(self, step_times_s: list[float]) -> list[list[float]] | None:
        """Multi-process data parallelism (DDP ranks): every rank's timed step times, by rank, gathered after the timed
        window (every rank calls it); None for a mode that runs in one process."""
        return None

    # -- memory -------------------------------------------------------------------------------------------------------
    def device_memory(self) -> dict | None:
        """The device's peak memory as run.json `memory` fields (with `source`), or None where it reports none."""
        return None

    def memory(self) -> dict:
        """run.json `memory`: this process's peak RSS, and the device's peak where the framework reports it."""
        memory = host_memory()
        device = self.device_memory()
        if device:
            memory.update(device)
        if memory.get("device_peak_bytes") is None:  # per-device fields without a device figure (CPU devices)
            memory.pop("device_peak_bytes", None)
            memory["source"] = self.host_memory_source
        return memory

    # -- profile ------------------------------------------------------------------------------------------------------
    def profiler(self, result: ProfileResult, first: int, steps: int) -> ContextManager:
        """Context manager that records a trace of the steps run inside it into the run directory and, on a normal
        exit, lists the files written in `result.artifacts`. `first` is the first profiled step's index."""
        raise NotImplementedError

    def step_marker(self, index: int) -> ContextManager:
        """Context manager that marks profiled step `index` in the trace (its step marker)."""
        raise NotImplementedError

    def profile(self, steps: int) -> ProfileResult:
        """`steps` more steps after the timed window, under the mode's profiler. In every mode the step marker wraps
        exactly the timed step: marker opens, timer starts, batch, step, wait, timer stops, marker closes. Steps are
        numbered like the run's (the first profiled step is `warmup + steps`), so the profiler's warm-up step is the
        marker with the smallest number.

        How the host's threads were scheduled in each recorded step (time waiting for a CPU: explain's contention) is
        read between the markers, outside the timer: one snapshot just before each marker opens, which ends the
        previous step and starts this one as the trace's step windows do (marker start to next marker start), and one
        after the last marker. Its cost (~12 us a thread) lies in the trace's step, between the markers.

        Each recorded step also records where the host was (`ProfileResult.positions`, perf_counter seconds from the
        profile's start): entering the marker, starting the timer, stopping it, leaving the marker, so that the
        marker's span in the trace can be checked against the host's own clock; and, with --inject-host-delay, how long
        it slept (`ProfileResult.host_sleeps_s`)."""
        result = ProfileResult(step_marker=self.profile_step_marker, annotations=dict(self.profile_annotations),
                               notes=list(self.profile_notes))
        first = self.options.warmup + self.options.steps
        lead_in = self.profile_lead_in_steps
        snapshots: list[scheduling.Snapshot | None] = []
        phases: list[dict[str, tuple[int, int]]] = []
        sleeps: list[float] = []
        origin = time.perf_counter()
        with self.profiler(result, first, steps):
            for offset in range(lead_in + steps):
                index = first + offset
                if offset >= lead_in:
                    snapshots.append(scheduling.snapshot())
                self.take_host_sleep()  # a sleep outside the step (none today) is not the step's
                self.phase_times = {}
                entered = time.perf_counter()
                with self.step_marker(index):
                    start = time.perf_counter()
                    outputs = self.step(index)
                    self.wait(outputs)
                    stop = time.perf_counter()
                left = time.perf_counter()
                slept = self.take_host_sleep()
                if offset >= lead_in:
                    result.step_times_s.append(stop - start)
                    result.step_numbers.append(index)
                    sleeps.append(slept)
                    phases.append(self.phase_times)
                    result.positions.append(HostPosition(step=index, marker_entered_s=entered - origin,
                                                         timer_start_s=start - origin, timer_stop_s=stop - origin,
                                                         marker_left_s=left - origin))
            snapshots.append(scheduling.snapshot())
        figures = [scheduling.difference(a, b) for a, b in itertools.pairwise(snapshots)]
        if any(f is None for f in figures):
            result.host_scheduling = None
            result.notes.append(scheduling.NOT_MEASURED)
        else:
            result.host_scheduling = [scheduling.step_scheduling(n, f, inside)
                                      for n, f, inside in zip(result.step_numbers, figures, phases) if f is not None]
        result.host_sleeps_s = sleeps if self.options.inject_host_delay_ms > 0 else None
        return result

    def artifacts(self) -> list[dict]:
        """Artifacts written during the run (HLO, kernels), after the timed window. Paths relative to run_dir."""
        return []

    def info(self) -> dict:
        """Environment facts only the framework knows: device name, precision settings in effect, versions."""
        return {}

    def close(self) -> None:
        pass


def thread_settings(**framework: int | None) -> dict:
    """CPU threads the process may use (its CPU affinity) and what the framework reports (torch.get_num_threads...);
    the thread environment variables are in environment.env. With --threads, `cpu_affinity` is the N it set."""
    return {"cpu_affinity": cpu_affinity(), **framework}


def compile_kwargs(defaults: dict, options: RunOptions) -> dict:
    """torch.compile's keyword arguments for a run: the mode's `defaults` with --compile-mode and --fullgraph applied
    ("default" is torch.compile's mode=None)."""
    mode = None if options.compile_mode in (None, "default") else options.compile_mode
    return {**defaults, "mode": mode, "fullgraph": bool(options.fullgraph or defaults.get("fullgraph"))}


def host_memory() -> dict:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024
    return {"peak_host_rss_bytes": peak * scale}
