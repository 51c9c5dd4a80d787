"""The per-module summary that `hloscope hlo stats --json` prints, built from the analyses as typed data
(hloscope.hlo.results.ModuleStats; `to_dict()` is the JSON)."""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from hloscope import files
from hloscope.errors import InputError, warn
from hloscope.hlo import attribution, kernels, memory, ops, thunks
from hloscope.hlo.cost import CostAnalysis, module_cost
from hloscope.hlo.load import LoadedModule
from hloscope.hlo.parser import collector_paused
from hloscope.hlo.results import (
    BufferAllocation,
    BufferAssignment,
    CollectiveOps,
    Collectives,
    JoinedLaunch,
    LayoutChanges,
    LayoutCount,
    Matmul,
    MemoryReport,
    ModuleMemory,
    ModuleStats,
    Roofline,
    RooflineUnavailable,
    Siblings,
    SourceKernels,
    ThunkCheck,
    ThunkLaunch,
    TopInstruction,
    Unreadable,
    UnreadableThunkSequence,
    XlaCost,
    XlaCostError,
    XlaCostSkipped,
)

# Imports inside functions: what only some options and inputs need, XLA's cost (~5 ms of imports: subprocess,
# tempfile) and a GPU target's roofline (~7 ms), kept out of `hlo stats --no-xla-cost` start-up.


def _read_sibling(path: str | None, parse: Callable[[str, str], dict[str, Any]]) -> dict[str, Any] | Unreadable | None:
    """A file XLA wrote beside the module; a broken one is reported in the result, not fatal to the analysis."""
    if not path:
        return None

    try:
        return parse(files.read_text(path, "an XLA report", max_bytes=SIBLING_MAX_BYTES), path)
    except InputError as error:
        return Unreadable(error=_sibling_left_out(error))


_warned_siblings: set[str] = set()


def _sibling_left_out(error: InputError) -> str:
    """A broken file beside a module (buffer assignment, memory report, thunk sequence) is left out of the figures: one
    warning line naming it (FILE:LINE:COL: why, once per file and process), the module's own figures stand. Returns
    the error's text for the module's result."""
    text = str(error)
    if error.path not in _warned_siblings:
        _warned_siblings.add(error.path)
        warn(f"{text} (left out; the module's own figures stand)")
    return text


SIBLING_MAX_BYTES = 1 << 30  # XLA's largest reports beside a 500 MB module are ~100 MB


def thunk_sequence_check(loaded: LoadedModule, with_launches: bool = False) -> ThunkCheck | UnreadableThunkSequence | None:
    """XLA's own launch list (thunk_sequence.txt beside a GPU module) joined with hloscope's, as ground truth."""
    if not loaded.thunk_sequence or loaded.platform != "gpu" or loaded.stage != "after_optimizations":
        return None
    try:
        sequence = thunks.parse_thunk_sequence(loaded.thunk_sequence)
    except InputError as error:
        return UnreadableThunkSequence(file=loaded.thunk_sequence, error=_sibling_left_out(error))
    joined = thunks.attach_launches(kernels.kernel_list(loaded.module, "gpu"), sequence)
    launches: list[JoinedLaunch] | list[ThunkLaunch] | msgspec.UnsetType = msgspec.UNSET
    if with_launches:  # the joined launches, or XLA's own list where the two do not join
        launches = ([JoinedLaunch(**row) for row in joined["launches"]] if joined["launches"]
                    else [ThunkLaunch(**thunk.to_dict()) for thunk in sequence.thunks])
    return ThunkCheck(file=loaded.thunk_sequence, by_kind=sequence.counts_by_kind(), agrees=joined["agrees"],
                      reason=joined["reason"], launches=launches)


_ASK_XLA = object()  # stats_record's default: run XLA's analysis for this one module


# The defaults of `hloscope hlo stats` (and of `hloscope diff`, whose two sides are exactly its records).
TOP = 10
SOURCE_DEPTH = 5


def stats_record(loaded: LoadedModule, top: int = TOP, source_depth: int = SOURCE_DEPTH, with_launches: bool = False,
                 xla_cost: bool = True, xla_figures: object = _ASK_XLA) -> ModuleStats:
    """One module's record of `hloscope hlo stats --json`: `module_stats`, then XLA's own cost figures (`xla_cost`,
    when asked; `xla_figures` when already computed, see `stats_records`) and, for an optimized GPU module with XLA's
    gpu_target_config.pbtxt beside it, its roofline lower bound (`roofline`)."""
    result = module_stats(loaded, top_sources=top, source_depth=source_depth, with_launches=with_launches)
    added: dict[str, Any] = {}
    if xla_cost:
        if xla_figures is _ASK_XLA:
            from hloscope.hlo.xla import xla_cost_analysis

            xla_figures = xla_cost_analysis(loaded)
        added["xla_cost"] = _xla_cost(xla_figures)
    bound = roofline_beside(loaded)
    if bound is not None:
        added["roofline"] = bound
    return msgspec.structs.replace(result, **added) if added else result


def _xla_cost(figures: object) -> XlaCost | XlaCostError | XlaCostSkipped | None:
    """XLA's figures (`hloscope.hlo.xla.xla_cost_analyses`), typed: None without jaxlib."""
    if not isinstance(figures, dict):
        return None
    if "error" in figures:
        return XlaCostError(error=figures["error"])
    if "skipped" in figures:
        return XlaCostSkipped(skipped=figures["skipped"])
    return XlaCost(**figures)


def stats_records(modules: Sequence[LoadedModule], top: int = TOP, source_depth: int = SOURCE_DEPTH,
                  with_launches: bool = False, xla_cost: bool = True) -> list[ModuleStats]:
    """`stats_record` of each module, XLA's analyses of all of them run first in one child process within one time
    limit (`hloscope.hlo.xla.xla_cost_analyses`), not one child per module."""
    figures: list[Any] = [None] * len(modules)
    if xla_cost:
        from hloscope.hlo.xla import xla_cost_analyses

        # hloscope's own reading first: a module it refuses is one error line, with no warning of what XLA (which may
        # crash on the same text) made of it before
        validate_all(modules)

        figures = list(xla_cost_analyses(modules))
    return [stats_record(loaded, top, source_depth, with_launches, xla_cost, xla_figures=figure)
            for loaded, figure in zip(modules, figures)]


def validate_all(modules: Sequence[LoadedModule]) -> None:
    """Every module checked as `hlo stats` checks it (HloModule.validate, once per module), before anything is run
    on them: XLA's cost analysis, or a diff's walk of their graphs."""
    with collector_paused():
        for loaded in modules:
            loaded.module.validate()


def roofline_beside(loaded: LoadedModule) -> Roofline | RooflineUnavailable | None:
    """The step's roofline lower bound (`hloscope.hlo.roofline`) for the GPU XLA compiled an optimized module for,
    as its dumped gpu_target_config.pbtxt describes it; None when there is no such file."""
    if loaded.platform != "gpu" or loaded.stage != "after_optimizations":
        return None
    from hloscope.hlo import roofline

    if roofline.find_target_config(loaded.file) is None:
        return None
    result = roofline.roofline_for_module(loaded.module, loaded.file)
    if "step" not in result:
        return RooflineUnavailable(unavailable=result["unavailable"])
    return Roofline(**result["step"])


def module_stats(loaded: LoadedModule, top_sources: int = TOP, source_depth: int = SOURCE_DEPTH,
                 with_launches: bool = False) -> ModuleStats:
    """Typed summary of one module (`to_dict()`: its JSON). Keys: name, file, stage, platform, computations,
    instructions, opcodes, fusions, kernels, custom_calls, flops, bytes_accessed, memory, collectives, and more detail
    after those (`thunk_sequence`: XLA's launch list beside a GPU module, with every launch when `with_launches`)."""
    with collector_paused():
        return _module_stats(loaded, top_sources, source_depth, with_launches)


def _module_stats(loaded: LoadedModule, top_sources: int, source_depth: int, with_launches: bool) -> ModuleStats:
    module = loaded.module
    module.validate()
    platform = loaded.platform
    breakdown = kernels.kernel_breakdown(module, platform)
    cost, analysis = module_cost(module)
    mem = _memory(loaded)  # before the thunk sequence: a broken report of each is warned of in this order
    precisions = ops.matmul_precisions(module)
    layout = ops.layout_changes(module)
    thunk_check = thunk_sequence_check(loaded, with_launches)
    return ModuleStats(
        name=module.name,
        file=loaded.file,
        stage=loaded.stage,
        platform=platform,
        computations=len(module.computations),
        instructions=module.instruction_count,
        opcodes=ops.opcode_histogram(module),
        fusions=ops.fusion_kinds(module),
        kernels=kernels.kernel_count(breakdown),
        custom_calls=ops.custom_call_targets(module),
        flops=cost.flops,
        bytes_accessed=cost.bytes_accessed,
        memory=mem,
        collectives=_collectives(ops.collectives(module)),
        module_index=loaded.index,
        gpu_arch=loaded.gpu_arch,
        is_scheduled=module.is_scheduled,
        entry=module.entry.name,
        entry_opcodes=ops.entry_opcode_histogram(module),
        kernel_breakdown=breakdown,
        copies=breakdown.get("copy", 0),
        transcendentals=cost.transcendentals,
        library_flops=cost.library_flops,
        library_bytes=cost.library_bytes,
        uncosted_custom_calls=len(analysis.uncosted),
        layout_changes=LayoutChanges(transpose=LayoutCount(**layout["transpose"]), copy=LayoutCount(**layout["copy"])),
        precision=ops.precision_summary(precisions),
        matmuls=[Matmul(**row) for row in precisions],
        kernels_by_source=[SourceKernels(**row) for row in
                           attribution.kernels_by_source(module, platform, source_depth)[:top_sources]],
        top_instructions=top_instructions(loaded, analysis, top_sources),
        siblings=Siblings(
            buffer_assignment=loaded.buffer_assignment and os.path.basename(loaded.buffer_assignment),
            memory_report=loaded.memory_report and os.path.basename(loaded.memory_report),
            thunk_sequence=loaded.thunk_sequence and os.path.basename(loaded.thunk_sequence),
        ),
        thunk_sequence=msgspec.UNSET if thunk_check is None else thunk_check,
    )


def _memory(loaded: LoadedModule) -> ModuleMemory:
    """The entry signature's bytes, and XLA's buffer assignment and memory report where they are beside the module."""
    found = _read_sibling(loaded.buffer_assignment, memory.parse_buffer_assignment)
    assignment: BufferAssignment | Unreadable | msgspec.UnsetType = msgspec.UNSET
    if isinstance(found, dict):
        assignment = BufferAssignment(
            allocations=found["allocations"], total_bytes=found["total_bytes"], temp_bytes=found["temp_bytes"],
            bytes_by_kind=found["bytes_by_kind"], largest=[BufferAllocation(**row) for row in found["largest"]])
    elif found is not None:
        assignment = found
    reported = _read_sibling(loaded.memory_report, memory.parse_memory_report)
    report: MemoryReport | Unreadable | msgspec.UnsetType = msgspec.UNSET
    if isinstance(reported, dict):
        report = MemoryReport(**reported)
    elif reported is not None:
        report = reported
    return ModuleMemory(**memory.signature_bytes(loaded.module), buffer_assignment=assignment, memory_report=report)


def _collectives(found: dict[str, Any]) -> Collectives:
    return Collectives(count=found["count"], bytes=found["bytes"],
                       by_opcode={opcode: CollectiveOps(**entry) for opcode, entry in found["by_opcode"].items()})


def top_instructions(loaded: LoadedModule, analysis: CostAnalysis, n: int = 10) -> list[TopInstruction]:
    """The top-level instructions (entry and control-flow bodies) with the most FLOPs, then bytes accessed."""
    costed = []
    known = analysis.costs  # every executed instruction is costed already: a look-up, not a call, for each
    for comp in ops.executed_computations(loaded.module):
        for instr in comp.instructions:
            cost = known.get(instr) or analysis.instruction_cost(instr)
            if cost.flops or cost.bytes_accessed or cost.transcendentals:
                costed.append((instr, cost))
    # the first n of a stable sort, without sorting (or making a row of) every instruction
    top = heapq.nsmallest(n, costed, key=lambda pair: (-pair[1].flops, -pair[1].bytes_accessed))
    return [TopInstruction(name=instr.name, opcode=instr.opcode, flops=cost.flops, transcendentals=cost.transcendentals,
                           library_flops=cost.library_flops, library_bytes=cost.library_bytes,
                           bytes_accessed=cost.bytes_accessed, op_name=instr.metadata.get("op_name", ""))
            for instr, cost in top]
