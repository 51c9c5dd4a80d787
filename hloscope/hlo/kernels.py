"""How many kernels (device launches) a module runs per execution, by platform. The rules are in docs/hlo.md.

GPU (XLA's thunk sequence): every fusion in the executed computations is one generated kernel (`kCustomKernel`),
except kCustom fusions that XLA hands to a library (`__cudnn$fusion`) or turns into a memcpy (`__dynamic_memcpy`);
`__cublas$*` custom calls are cuBLAS calls, `__cudnn$*` cuDNN calls; other custom calls one kernel each (unless a
known no-op); `copy`/`copy-start` are memcpys, reported apart; collectives are NCCL kernels. Parameters, constants,
tuples, get-tuple-element, bitcasts and ordering-only instructions launch nothing; while/conditional/call/async-start
run their computations (counted once, statically).
CPU, TPU and unknown platforms: every instruction of the executed computations that emits code is one kernel
(each fusion is one function; unfused ops are loops or runtime calls), with the same exclusions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hloscope.hlo.model import HloComputation, HloInstruction, HloModule
from hloscope.hlo.ops import COLLECTIVE_OPCODES, executed_computations, fusion_backend_kind

NO_CODE = {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "add-dependency", "opt-barrier",
    "domain", "while", "conditional", "call", "partition-id", "replica-id",
    "async-start", "async-done", "async-update", "all-reduce-done", "all-gather-done", "collective-permute-done", "copy-done",
    "send-done", "recv-done",
}
# Custom calls that only carry information for the compiler and run nothing: no kernel here, no device time in
# hloscope.trace.program_categories (which imports this set).
NO_OP_TARGETS = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "ShardBarrierFrom", "ShardBarrierTo",
    "LayoutConstraint", "AllocateBuffer", "annotate_device_placement", "MoveToHost", "MoveToDevice",
    "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape", "X64Combine", "X64SplitLow", "X64SplitHigh",
})


def classify(instr: HloInstruction, platform: str) -> str | None:
    """The kind of launch one top-level instruction is, or None when it launches nothing."""
    op = instr.opcode
    if op in NO_CODE:
        return None
    if op in ("copy", "copy-start"):
        return "copy"
    if op in COLLECTIVE_OPCODES:
        return "collective"
    if op == "fusion":
        backend = fusion_backend_kind(instr) if instr.fusion_kind == "kCustom" else None
        if backend == "__dynamic_memcpy":
            return "copy"
        if backend and backend.startswith("__cudnn"):
            return "cudnn"
        return "generated"
    if op == "custom-call":
        target = instr.custom_call_target or ""
        if target in NO_OP_TARGETS:
            return None
        if target.startswith("__cublas"):
            return "cublas"
        if target.startswith("__cudnn"):
            return "cudnn"
        return "custom_call"
    if op in ("dot", "convolution"):
        return "library"  # a BLAS/oneDNN/Eigen call on CPU; on GPU only before optimizations (then rewritten)
    return "generated" if platform == "gpu" else "other"


def launches(module: HloModule, platform: str) -> list[tuple[HloComputation, HloInstruction, str]]:
    """(computation, instruction, kind) of every launch, in schedule order. Computed once per module and platform
    (the kernel counts and the attribution of `hlo stats` both walk them)."""
    found = module.launches.get(platform)
    if found is None:
        found = module.launches[platform] = [
            (comp, instr, kind) for comp in executed_computations(module) for instr in comp.instructions
            if (kind := classify(instr, platform)) is not None
        ]
    return found


def kernel_breakdown(module: HloModule, platform: str) -> dict[str, int]:
    return dict(Counter(kind for _, _, kind in launches(module, platform)))


def kernel_count(breakdown: dict[str, int]) -> int:
    """Launches per execution, copies excluded (they are reported apart)."""
    return sum(n for kind, n in breakdown.items() if kind != "copy")


def kernel_list(module: HloModule, platform: str) -> list[dict[str, Any]]:
    """Each launch in schedule order: name, kind, opcode, fusion kind or custom-call target."""
    return [{"name": instr.name, "kind": kind, "opcode": instr.opcode,
             "detail": instr.fusion_kind or instr.custom_call_target or "", "computation": comp.name}
            for comp, instr, kind in launches(module, platform)]
