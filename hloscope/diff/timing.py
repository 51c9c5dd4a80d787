"""Measured device time per HLO instruction and per step, for the time-weighted diff.

Each device execution of the profile names its instruction (`hlo_op`; else its kernel name is matched to the module's
instruction names, hloscope.trace.hlo_map) and its module (`hlo_module`). The profiled steps are split as explain's
ledger splits them (hloscope.trace.step_profile: a step lasts from its marker's start to the next marker's start, an
execution belongs to the step it started in; the profiler's warm-up steps and outlier steps are dropped), and an
instruction's time per step is the **median over the kept steps** of its summed execution time in each step (0 in a
step where it did not run). A graph's time per step is the sum of its instructions' medians, as the ledger's total is
the sum of its nodes' medians.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

from hloscope.trace.hlo_map import _strip_kernel_suffix, kernel_name_for
from hloscope.trace.model import Event
from hloscope.trace.step_profile import profile_steps, step_parts

SEP = "\x1f"  # between the module and the instruction in a key


@dataclass
class StepTimes:
    """Medians over the kept profiled steps, in seconds per step."""

    per_instruction: dict[tuple[str, str], float]  # (module, instruction) -> seconds per step
    executions: dict[tuple[str, str], float]  # (module, instruction) -> executions per step (median)
    per_module: dict[str, float]  # module -> sum of its instructions' medians
    module_executions: dict[str, float]  # module -> executions per step (median)
    unplaced_s: float  # device time per step (median) of executions that name no instruction of the compared graphs
    device_s: float  # median over the kept steps of the summed device execution time
    steps: int  # kept steps
    kept: list[int] = field(default_factory=list)  # their step numbers
    dropped: dict[int, str] = field(default_factory=dict)  # step number -> why it was left out


def instruction_keys(modules: list) -> Callable[[Event], str]:
    """Event -> `module<SEP>instruction` of the instruction of `modules` (hloscope.hlo.model.HloModule) a device
    execution runs, "" for executions of other programs: how the time-weighted diff and explain's op table attribute
    trace time to instructions."""
    names = {m.name: {i.name for c in m.computations for i in c.instructions} for m in modules}
    by_kernel: dict[str, dict[str, str]] = {}
    for module, instructions in names.items():
        table = by_kernel.setdefault(module, {})
        for name in instructions:
            table.setdefault(kernel_name_for(name), name)
            table.setdefault(name, name)
    only = next(iter(names)) if len(names) == 1 else None

    def key(event: Event) -> str:
        module = event.hlo_module if event.hlo_module in names else (only if event.hlo_module is None else None)
        if module is None:
            return ""
        instruction = event.hlo_op
        if instruction not in names[module]:
            table = by_kernel[module]
            instruction = (table.get(event.hlo_op or "") or table.get(event.name)
                           or table.get(_strip_kernel_suffix(event.name)))
        return f"{module}{SEP}{instruction}" if instruction else ""

    return key


def step_times(trace, stats: dict, modules: list, warmup: int = 1) -> StepTimes | None:
    """Per-instruction device time per step of `modules` (hloscope.hlo.model.HloModule) from a trace and its
    `trace stats` record; None when the trace has no step markers or no step is left."""
    windows = [(w["step"], w["start_us"], w["start_us"] + w["host_duration_us"]) for w in stats.get("per_step") or []]
    if not windows:
        return None
    names = [m.name for m in modules]
    group = instruction_keys(modules)
    profile = profile_steps(step_parts(trace.events, windows, op_group_of=group), warmup)
    kept = profile.kept_steps()
    if not kept:
        return None
    # in order, so that the sums over them (per module, the diff's totals) do not change with Python's hash seed
    keys = sorted({k for step in kept for k in step.ops})
    per_instruction, executions = {}, {}
    for key in keys:
        if not key:
            continue
        module, instruction = key.split(SEP, 1)
        per_instruction[(module, instruction)] = median(s.ops[key].seconds if key in s.ops else 0.0 for s in kept)
        executions[(module, instruction)] = median(s.ops[key].calls if key in s.ops else 0 for s in kept)
    per_module: dict[str, float] = {}
    for (module, _), seconds in per_instruction.items():
        per_module[module] = per_module.get(module, 0.0) + seconds
    module_executions = {
        m: median(sum(s.ops[k].calls for k in s.ops if k.startswith(m + SEP)) for s in kept) for m in names}
    return StepTimes(
        per_instruction=per_instruction, executions=executions, per_module=per_module,
        module_executions=module_executions,
        unplaced_s=median(s.ops[""].seconds if "" in s.ops else 0.0 for s in kept),
        device_s=median(math.fsum(o.seconds for o in s.ops.values()) for s in kept), steps=len(kept),
        kept=[s.number for s in kept], dropped={profile.steps[i].number: why for i, why in profile.dropped.items()})
