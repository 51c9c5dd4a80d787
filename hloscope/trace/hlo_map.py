"""Measured device time per HLO instruction, so the HLO analysis can show it beside each fusion.

An XLA event names its HLO instruction in the `hlo_op` stat (GPU/TPU xplanes, XLA CPU events, JAX's trace.json).
Where that stat is missing (a Kineto trace of an XLA program, command buffers), the kernel name is matched against the
module's instruction names the way XLA's GPU backend names kernels: the instruction name with every character outside
[A-Za-z0-9_$] replaced by "_" (`loop_add_fusion.1` -> `loop_add_fusion_1`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hloscope.trace.model import Event, Trace

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
    by_kernel_name: dict[str, str] = {}
    if instruction_names is not None:
        for name in instruction_names:
            by_kernel_name.setdefault(kernel_name_for(name), name)
            by_kernel_name.setdefault(name, name)
    totals: dict[str, float] = {}
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
        totals[instruction] = totals.get(instruction, 0.0) + event.dur_us
    return totals


def _strip_kernel_suffix(name: str) -> str:
    # ROCm appends ".kd" to kernel symbols (`loop_add_fusion.kd`); CUDA does not.
    return name[:-3] if name.endswith(".kd") else name
