"""What every mode implements (a Session) and the options a run is configured with."""

from __future__ import annotations

import resource
import sys
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
    profile_steps: int = 3
    keep_all: bool = False
    target: str | None = None         # --target: compile for this GPU (hloscope.targets) instead of timing

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


@dataclass
class ProfileResult:
    step_times_s: list[float] = field(default_factory=list)
    artifacts: list[dict] = field(default_factory=list)


class Session:
    """One mode's training loop pieces. The shared driver calls: setup, step/wait/loss_of (timed loop), compile_counts
    (before and after the timed window), memory, profile, artifacts, info, close."""

    def __init__(self, options: RunOptions, run_dir: Path):
        self.options = options
        self.run_dir = run_dir

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


def host_memory() -> dict:
    """Peak resident set size of this process (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024
    return {"peak_host_rss_bytes": peak * scale}
