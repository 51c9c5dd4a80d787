"""The device memory of a train step compiled for a target GPU (`--target`), and whether it fits that GPU.

The peak is what XLA says of the GPU executable it compiled (CompiledMemoryStats, `hlo/<module>.memory_analysis.json`):
argument + output + temporary bytes, minus the outputs aliased to (donated) arguments. These are the buffers the
device allocator holds at once during one step: XLA packs every temporary into one preallocated block sized by its
heap simulation, so liveness inside the step is already counted. The generated code (kernels, cuBLAS/cuDNN handles)
is loaded by CUDA outside the allocator's pool and is recorded beside the peak, not in it. XLA's buffer assignment
(`*-buffer-assignment.txt`, "Total bytes used", thread-local allocations aside) states the same total: recorded too,
so that the two can be checked against each other.

What may use it: the PJRT GPU client that runs every XLA program here (JAX and torchax through jaxlib, PyTorch/XLA
through its own copy) preallocates a fixed fraction of the device's memory for its buffers, 75% by default
(JAX: XLA_PYTHON_CLIENT_MEM_FRACTION, PyTorch/XLA: PJRT_ALLOCATOR_FRACTION); the rest stays with the CUDA context,
the loaded kernels, the cuBLAS/cuDNN workspaces and other processes. A step fits when its peak is at most that 75%.
"""

from __future__ import annotations

from typing import Any

from hloscope.hlo.gpu_spec import GpuTarget
from hloscope.runs.memory_record import MemoryLedger, MemoryPart

ALLOCATOR_FRACTION = 0.75
RESERVE = ("25% of the device memory: the PJRT GPU client (JAX, torchax, PyTorch/XLA) preallocates 75% for XLA's "
           "buffers by default (XLA_PYTHON_CLIENT_MEM_FRACTION / PJRT_ALLOCATOR_FRACTION) and leaves the rest to the "
           "CUDA context, the loaded kernels and cuBLAS/cuDNN workspaces")
PEAK_HOW = ("XLA's memory analysis of the GPU executable: arguments + outputs - outputs aliased to arguments + "
            "temporaries (one block sized by XLA's heap simulation); the generated code is loaded outside this")
ANALYSIS_SOURCE = "XLA's memory analysis of the GPU executable (CompiledMemoryStats)"

# CompiledMemoryStats field -> the name run.json gives it (bytes)
_STATS = (("argument_size_in_bytes", "argument_bytes"), ("output_size_in_bytes", "output_bytes"),
          ("alias_size_in_bytes", "alias_bytes"), ("temp_size_in_bytes", "temp_bytes"),
          ("generated_code_size_in_bytes", "generated_code_bytes"))


def analysis_bytes(stats: dict[str, Any]) -> dict[str, int | None]:
    """The worker's CompiledMemoryStats (XLA's names) under run.json's names; None where XLA did not say."""
    return {name: (int(stats[key]) if stats.get(key) is not None else None) for key, name in _STATS}


def step_peak_bytes(stats: dict[str, Any]) -> int | None:
    """arguments + outputs + temporaries - aliased, from XLA's memory analysis; None when a figure is missing."""
    figures = analysis_bytes(stats)
    parts = [figures["argument_bytes"], figures["output_bytes"], figures["temp_bytes"], figures["alias_bytes"]]
    if any(value is None for value in parts):
        return None
    argument, output, temp, alias = (int(value or 0) for value in parts)
    return argument + output + temp - alias


def usable_bytes(gpu: GpuTarget) -> int | None:
    """The part of the target's memory an XLA step may use (ALLOCATOR_FRACTION of it); None: the spec states none."""
    if gpu.device_memory_bytes is None:
        return None
    return int(gpu.device_memory_bytes * ALLOCATOR_FRACTION)


def fits(peak_bytes: int, gpu: GpuTarget) -> bool | None:
    usable = usable_bytes(gpu)
    return None if usable is None else peak_bytes <= usable


def target_peak(stats: dict[str, Any], gpu: GpuTarget, buffer_assignment_bytes: int | None) -> dict[str, Any] | None:
    """run.json `memory.target_peak`: the step's peak, how it was computed, the target's memory and the headroom."""
    peak = step_peak_bytes(stats)
    if peak is None:
        return None
    usable = usable_bytes(gpu)
    device = gpu.device_memory_bytes
    return {"peak_bytes": peak, "how": PEAK_HOW, "generated_code_bytes": analysis_bytes(stats)["generated_code_bytes"],
            "buffer_assignment_bytes": buffer_assignment_bytes, "device_memory_bytes": device,
            "reserve_bytes": None if device is None or usable is None else device - usable, "reserve": RESERVE,
            "usable_bytes": usable, "headroom_bytes": None if usable is None else usable - peak,
            "fits": None if usable is None else peak <= usable}


def target_ledger(stats: dict[str, Any], arguments: dict[str, int] | None, optimizer: str) -> dict[str, Any] | None:
    """run.json `memory.ledger` of a compiled step, in the form of a timed run's (hloscope/runs/memory_record.py).

    `arguments`: the capture's bytes of the step's state and batch by part (parameters, buffers, optimizer_state,
    inputs), which are the entry parameters of the compiled step; the argument bytes they do not cover (scalars a
    framework passes in: learning rate, RNG seed) are the runtime's share here, so that the parts add up to the peak.
    """
    peak = step_peak_bytes(stats)
    if peak is None:
        return None
    figures = analysis_bytes(stats)
    ledger = MemoryLedger(peak_bytes=peak, peak_source=PEAK_HOW, optimizer=optimizer)
    ledger.compiled = {**figures, "peak_bytes": peak, "source": ANALYSIS_SOURCE}
    traced = "the entry parameters of the compiled step, by the captured step's {what}"
    if arguments:
        ledger.parts += [
            MemoryPart("parameters", arguments.get("parameters"), traced.format(what="parameters")),
            MemoryPart("buffers", arguments.get("buffers", 0), traced.format(what="model buffers")),
            MemoryPart("optimizer_state", arguments.get("optimizer_state"),
                       traced.format(what="optimizer state (step counts included)")),
            MemoryPart("inputs", arguments.get("inputs"), traced.format(what="batch (images or tokens, labels)")),
        ]
    else:
        ledger.notes.append("the capture did not trace the step's arguments to its state and batch: they are in the "
                            "runtime's share")
    alias = int(figures["alias_bytes"] or 0)
    ledger.parts += [
        MemoryPart("outputs", int(figures["output_bytes"] or 0) - alias,
                   f"{ANALYSIS_SOURCE}: output bytes minus those aliased to arguments (the updated state written to "
                   "new buffers, the loss)", detail={"aliased_bytes": alias}),
        MemoryPart("temporaries", figures["temp_bytes"], f"{ANALYSIS_SOURCE}: temporary buffers"),
    ]
    share = peak - ledger.accounted_bytes()
    if share >= 0:
        ledger.parts.append(MemoryPart("runtime", share, "argument bytes not traced to the state or the batch "
                                       "(scalars the framework passes: learning rate, RNG seed): the peak minus the "
                                       "other parts"))
    else:  # a byte count is never negative in run.json
        ledger.parts.append(MemoryPart("runtime", None, f"not measured: the captured state and batch hold {-share} "
                                       "bytes more than XLA's arguments (part of them became constants of the step)"))
    return ledger.to_dict()
