"""Measured device time per HLO instruction, so the HLO analysis can show it beside each fusion.

An XLA event names its HLO instruction in the `hlo_op` stat (GPU/TPU xplanes, XLA CPU events, JAX's trace.json).
Where that stat is missing (a Kineto trace of an XLA program, command buffers), the kernel name is matched against the
module's instruction names the way XLA's GPU backend names kernels: the instruction name with every character outside
[A-Za-z0-9_$] replaced by "_" (`loop_add_fusion.1` -> `loop_add_fusion_1`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hloscope.trace.model import Event, Trace

if TYPE_CHECKING:
    from hloscope.hlo.model import HloModule

_NOT_KERNEL_CHAR = re.compile(r"[^A-Za-z0-9_$]")


def kernel_name_for(instruction_name: str) -> str:
    """The GPU kernel name XLA gives the kernel of an HLO instruction."""
    return _NOT_KERNEL_CHAR.sub("_", instruction_name)


def kernel_time_by_hlo_op(
    trace: Trace | Iterable[Event],
    instruction_names: Iterable[str] | None = None,
    module: str | None = None,
) -> dict[str, float]:
    """{hlo_instruction_name: total device microseconds} over the trace's device executions.

    `instruction_names` (the HLO module's instructions) lets kernels without an `hlo_op` stat be matched by name;
    `module` keeps only events of that HLO module (events whose module is unknown are kept).
    """
    events = trace.events if isinstance(trace, Trace) else trace
    return {name: total for name, (_, total) in _time_by_instruction(events, instruction_names, module).items()}


def _time_by_instruction(
    events: Iterable[Event], instruction_names: Iterable[str] | None, module: str | None
) -> dict[str, tuple[int, float]]:
    """{hlo_instruction_name: (executions, total device microseconds)}; see `kernel_time_by_hlo_op`."""
    by_kernel_name: dict[str, str] = {}
    if instruction_names is not None:
        for name in instruction_names:
            by_kernel_name.setdefault(kernel_name_for(name), name)
            by_kernel_name.setdefault(name, name)
    found: dict[str, tuple[int, float]] = {}
    for event in events:
        if not event.is_device_exec:
            continue
        if module is not None and event.hlo_module is not None and event.hlo_module != module:
            continue
        instruction = event.hlo_op
        if instruction is None and by_kernel_name:
            instruction = by_kernel_name.get(event.name) or by_kernel_name.get(_strip_kernel_suffix(event.name))
        if instruction is None:
            continue
        count, total = found.get(instruction, (0, 0.0))
        found[instruction] = (count + 1, total + event.dur_us)
    return found


def _strip_kernel_suffix(name: str) -> str:
    # ROCm appends ".kd" to kernel symbols (`loop_add_fusion.kd`); CUDA does not.
    return name[:-3] if name.endswith(".kd") else name


def measured_instructions(module: HloModule, events: Iterable[Event], top: int = 10) -> dict[str, Any] | None:
    """Measured device time beside the instructions of an optimized HLO module (`hloscope hlo stats` on a run
    directory that holds both the module and a profile of it): None when no event of the trace belongs to `module`.

    `module` is an `hloscope.hlo.model.HloModule`; `events` the device executions of the run's traces. Rows are the
    instructions with the most device time, each with its opcode (fusions: their kind), executions and share of the
    module's measured time.
    """
    device = [e for e in events if e.is_device_exec and e.hlo_module == module.name]
    if not device:
        return None
    instructions = {i.name: i for c in module.computations for i in c.instructions}
    found = _time_by_instruction(device, instructions, module.name)
    measured_us = sum(e.dur_us for e in device)
    rows = []
    for name, (count, total) in sorted(found.items(), key=lambda item: item[1][1], reverse=True)[:top]:
        instruction = instructions.get(name)
        rows.append({
            "name": name,
            "opcode": instruction.opcode if instruction is not None else None,
            "fusion_kind": instruction.fusion_kind if instruction is not None and instruction.opcode == "fusion" else None,
            "count": count,
            "total_us": round(total, 3),
            "share": round(total / measured_us, 4) if measured_us else 0.0,
        })  # fmt: skip
    return {
        "device_time_us": round(measured_us, 3),
        "events": len(device),
        "matched_us": round(sum(total for _, total in found.values()), 3),  # device time whose instruction is in this module's text
        "top": rows,
    }
