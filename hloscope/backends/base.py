"""What every mode implements (a Session) and the options a run is configured with."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hloscope.models.presets import VitPreset, get_preset


@dataclass(frozen=True)
class RunOptions:
    mode: str = "jax"                 # one of hloscope.backends.ALL_MODES
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
    test_host_delay_s: float | None = None  # test hook only (HLOSCOPE_TEST_HOST_DELAY_S, set by the driver)

    @property
    def preset(self) -> VitPreset:
        return get_preset(self.model)

    @property
    def compile_model(self) -> bool:
        return self.mode.endswith("+compile")

    def to_json(self) -> dict:
        data = asdict(self)
        data["compile_model"] = self.compile_model
        data["model_config"] = self.preset.vit_config_kwargs()
        return data


# The names hloscope gives the host phases of a step in every mode's profile (docs/run.md, "--profile"). Each is a host
# annotation on the thread that runs the step, inside the step marker: torch.profiler.record_function (PyTorch),
# jax.profiler.TraceAnnotation (JAX), torch_xla's profiler TraceMe (torch_xla).
STEP_MARKER = "train_step"              # JAX / torch_xla step annotation name; PyTorch's are ProfilerStep#N
INPUT_ANNOTATION = "hloscope/input"     # fetching the step's batch (the DataLoader with --data loader) onto the device
WAIT_ANNOTATION = "hloscope/wait"       # blocking until the device has finished the step
SYNC_ANNOTATION = "hloscope/sync"       # torch_xla: torch_xla.sync() cuts and dispatches the step's graph
DELAY_ANNOTATION = "hloscope/test_host_delay"  # the test-only host delay (HLOSCOPE_TEST_HOST_DELAY_S)
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

    def record(self) -> dict:
        """run.json `profile`: what the trace holds and which of its steps readers should drop."""
        warmup = profile_warmup_steps(len(self.step_numbers))
        return {"steps": len(self.step_numbers), "warmup_steps": warmup, "step_numbers": list(self.step_numbers),
                "warmup_step_numbers": list(self.step_numbers[:warmup]),
                "usable_step_numbers": list(self.step_numbers[warmup:]), "step_marker": self.step_marker,
                "annotations": dict(self.annotations), "notes": list(self.notes)}


class Session:
    """One mode's training loop pieces. The shared driver calls: setup, step/wait/loss_of (timed loop), compile_counts
    (before and after the timed window), memory, profile, artifacts, info, close."""

    profiling = False  # True while profile() runs (the driver sets it): the host phases are annotated only then

    def __init__(self, options: RunOptions, run_dir: Path):
        self.options = options
        self.run_dir = run_dir

    def annotation(self, name: str):
        """The framework's host annotation context manager named `name` (see INPUT_ANNOTATION...)."""
        return contextlib.nullcontext()

    def annotate(self, name: str):
        """`annotation(name)` in profiled steps; nothing in the timed window (no profiler listens there)."""
        return self.annotation(name) if self.profiling else contextlib.nullcontext()

    def test_host_delay(self) -> None:
        """Test hook (HLOSCOPE_TEST_HOST_DELAY_S): sleep on the host before the step's device work is dispatched, so
        the device waits for the host by that much. Each mode calls it in step(), after fetching the batch."""
        delay = self.options.test_host_delay_s
        if delay:
            with self.annotate(DELAY_ANNOTATION):
                time.sleep(delay)

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

    def window_starting(self) -> None:
        """Called after the warm-up, just before the timed window (outside the timed region)."""

    def memory(self) -> dict:
        return host_memory()

    def profile(self, steps: int) -> ProfileResult:
        raise NotImplementedError

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
    the thread environment variables are in environment.env."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {"cpu_affinity": affinity, **framework}


def host_memory() -> dict:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024
    return {"peak_host_rss_bytes": peak * scale}
