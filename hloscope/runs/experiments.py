"""Launch the configurations of a controlled experiment (explain --test-hypotheses): named configurations, each its
own run options, each in `repeats` fresh processes interleaved as compare runs modes, into one comparison directory
whose labels are `mode [name]`; stopped between runs when the time budget would be exceeded, or by Ctrl-C, keeping
what finished."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hloscope.runs.records import ComparisonEntry, ComparisonRecord
from hloscope.runs.rundir import load_comparison
from hloscope.runs.runner import PlannedRun, StopRequested, run_comparison

if TYPE_CHECKING:
    from hloscope.backends.base import RunOptions

CTRL_C = "interrupted by the user (Ctrl-C)"


@dataclass
class Launched:
    """What ran: the comparison directory, each configuration's label, the comparison record, and why it stopped
    early (None: every run was started)."""

    directory: Path
    labels: dict[str, str]  # configuration name -> its label in the comparison
    comparison: ComparisonRecord
    stopped: str | None = None
    not_run: list[str] = field(default_factory=list)  # "label (process N): why" for each run not timed


def run_configurations(configurations: dict[str, RunOptions], directory: Path, repeats: int,
                       expected_s: dict[str, float], deadline: float, timeout_s: float | None = None,
                       on_start: Callable[[str, float], None] = lambda label, expected: None,
                       on_done: Callable[[ComparisonEntry], None] = lambda entry: None) -> Launched:
    """Run every configuration `repeats` times, interleaved, into `directory`. A run whose expected seconds would end
    past `deadline` (time.monotonic()) is not started, nor any after it."""
    plan = [PlannedRun(options.mode, variant=name, changes=tuple(_fields(options).items()))
            for name, options in configurations.items()]
    labels = {p.variant: str(p.label) for p in plan if p.variant is not None}
    first = next(iter(configurations.values()))
    config = {k: v for k, v in first.to_json().items() if k not in ("mode", "compile_model")}
    config.update(modes=sorted({o.mode for o in configurations.values()}), repeats=repeats,
                  variants={name: _fields(options) for name, options in configurations.items()})

    def should_stop(planned: PlannedRun) -> str | None:
        needed = expected_s.get(str(planned.variant), 0.0)
        if time.monotonic() + needed > deadline:
            return f"the time budget was spent (the next run needs ~{needed:.0f} s)"
        on_start(str(planned.label), needed)
        return None

    stopped = None
    try:
        run_comparison(sorted({o.mode for o in configurations.values()}), lambda mode: _bare(mode, first),
                       directory, config, on_mode_done=on_done, timeout_s=timeout_s, plan=plan, repeats=repeats,
                       should_stop=should_stop)
    except StopRequested as stop:
        stopped = stop.reason
    except KeyboardInterrupt:
        stopped = CTRL_C
    comparison = load_comparison(directory)
    not_run = [f"{e.mode}{_process(e)}: {e.error or e.status}" for e in comparison.modes if e.status != "ok"]
    return Launched(directory, labels, comparison, stopped, not_run)


def _fields(options: RunOptions) -> dict[str, Any]:
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "mode"}


def _bare(mode: str, template: RunOptions) -> RunOptions:
    """The options a planned run starts from: every field is then set by its configuration's changes."""
    return dataclasses.replace(template, mode=mode)


def _process(entry: ComparisonEntry) -> str:
    return f" (process {entry.replicate})" if entry.replicate else ""
