"""The category of device time of each executed HLO instruction, from what it computes rather than from its name.

Names mislead: on XLA:CPU, matmuls and convolutions run inside YNNPACK fusions (`ynn_fusion.85`, `kind=kCustom`,
`backend_config={"fusion_config":{"kind":"__ynn_fusion"}}`) and so do layer-norm reductions (`ynn_fusion.84` is a
reduce); fusions named `copy_...` often compute (`copy_rsqrt_fusion`). So, for every instruction of an optimized
module that can run at top level (the entry computation and the computations it runs as code of their own):

- fusion (any kind, YNNPACK and oneDNN fusions included), call, while, conditional, async wrappers: by the opcodes of
  their called computations, recursively (nested fusions, reduction functions): any collective -> collective; any
  dot / convolution (or matmul library call) -> matmul/conv; any reduce, reduce-window, sort, scatter,
  select-and-scatter -> reduction; only data movement (copy, transpose, reshape, bitcast, broadcast, slice,
  concatenate, pad, reverse, dynamic-(update-)slice) -> copy/transpose; otherwise fusion/elementwise.
  kCustom fusions whose backend kind names a library: `__triton_gemm`, `__triton_nested_gemm_fusion`,
  `__cudnn$fusion`, `__cublas...` -> matmul/conv; `__dynamic_memcpy` -> memcpy/memset; others (`__triton`,
  `__ynn_fusion`, ...) by their computation.
- custom-call by target: cuBLAS (`__cublas$gemm`, `__cublas$lt$matmul*`), cuDNN convolutions and FMHA (`__cudnn$conv*`,
  `__cudnn$fmha*`), oneDNN (`__onednn$matmul`, `__onednn$convolution`), YNNPACK, TransformerEngine attention ->
  matmul/conv; oneDNN/cuDNN norms and softmax, TopK -> reduction; other targets by their called computation, else by
  the kernel-name table; compiler-only targets (Sharding, ...) run nothing.
- collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, collective-broadcast,
  send/recv, their -start/-done) -> collective; copy-start/copy-done, infeed/outfeed -> memcpy/memset; a top-level
  copy -> memcpy/memset when source and result have the same shape and layout, copy/transpose when the layout changes;
  dot, convolution -> matmul/conv; reduce, sort, scatter, ... -> reduction; transpose, broadcast, slice, ... ->
  copy/transpose; rng -> other; any other opcode -> fusion/elementwise.

`category_resolver(modules)` turns a run's modules into a function Event -> category that looks each XLA event's
`hlo_op` (or its kernel name, `hlo_map.kernel_name_for`) up in them, and falls back to the event's name-based category
for events no module knows. Pure functions over parsed modules: no I/O except `resolver_for_run`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from hloscope.errors import ParseError
from hloscope.hlo.kernels import NO_OP_TARGETS  # custom-call targets that run nothing
from hloscope.hlo.load import load_run_dir
from hloscope.hlo.model import HloComputation, HloInstruction, HloModule
from hloscope.hlo.ops import COLLECTIVE_OPCODES, executed_computations, fusion_backend_kind
from hloscope.runs.rundir import load_run
from hloscope.trace.categories import category_of
from hloscope.trace.hlo_map import kernel_name_for
from hloscope.trace.model import (
    COLLECTIVE,
    FUSION,
    LAYOUT,
    MATMUL,
    MEMCPY,
    MEMORY,
    MEMSET,
    OTHER,
    REDUCTION,
    SOURCE_HLO,
    SOURCE_NAMES,
    Event,
    EventStream,
    Trace,
)

MATMUL_OPCODES = frozenset({"dot", "convolution", "ragged-dot", "scaled-dot", "triangular-solve", "cholesky"})
REDUCTION_OPCODES = frozenset({"reduce", "reduce-window", "sort", "scatter", "select-and-scatter", "topk"})
COLLECTIVES = frozenset(COLLECTIVE_OPCODES | {
    "all-reduce-done", "all-gather-done", "collective-permute-done", "send-done", "recv-done", "ragged-all-to-all",
    "collective-broadcast", "all-to-all",
})  # fmt: skip
DATA_MOVEMENT = frozenset({
    "copy", "transpose", "bitcast", "reshape", "broadcast", "slice", "dynamic-slice", "dynamic-update-slice",
    "concatenate", "pad", "reverse", "copy-start", "copy-done",
})  # fmt: skip
# Instructions that compute nothing themselves (inside a fusion they say nothing about what it computes; at top
# level they run no code).
STRUCTURAL = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "after-all", "add-dependency", "opt-barrier", "domain",
    "partition-id", "replica-id",
})  # fmt: skip
NO_CODE_TOP_LEVEL = STRUCTURAL | {"bitcast"}
MEMORY_OPCODES = frozenset({"copy-start", "copy-done", "infeed", "outfeed"})
RANDOM_OPCODES = frozenset({"rng", "rng-bit-generator", "rng-get-and-update-state"})
# Instructions whose called computations are what they run.
WRAPPERS = frozenset({"fusion", "call", "while", "conditional", "async-start", "async-update", "async-done", "map"})

# kCustom fusion backend kinds (`fusion_backend_config.kind` on GPU, `fusion_config.kind` on CPU).
MATMUL_FUSION_KINDS = ("__triton_gemm", "__triton_nested_gemm_fusion", "__triton_scaled_dot", "__cudnn$fusion",
                       "__cublas", "__custom_fusion")
MEMCPY_FUSION_KINDS = ("__dynamic_memcpy",)


def custom_call_target_category(target: str) -> str | None:
    """Category of a custom-call by its target; None for targets that run nothing or that no rule knows."""
    lowered = target.lower()
    if target in NO_OP_TARGETS:
        return None
    if "dynamic_memcpy" in lowered:
        return MEMORY
    if any(word in lowered for word in ("fmha", "attn", "attention", "flash")):  # fused attention: softmax inside
        return MATMUL
    if any(word in lowered for word in ("norm", "softmax", "topk", "top_k", "sort", "reduce")):
        return REDUCTION
    if lowered.startswith(("__cublas", "__cudnn", "__onednn", "__ynn", "__xnn", "__hipblas", "__rocblas", "__miopen")):
        return MATMUL
    if any(word in lowered for word in ("gemm", "matmul", "conv", "dot")):
        return MATMUL
    return None


def _called(instr: HloInstruction) -> list[HloComputation]:
    try:
        return list(instr.called_computations)
    except ParseError:  # a module whose text names a computation it does not define: nothing to look into
        return []


def body_opcodes(computations: Iterable[HloComputation]) -> set[str]:
    """Every opcode in `computations` and in the computations they call, recursively (nested fusions, reduction
    functions, loop bodies). Custom calls count as `custom-call:<category>` when their target says what they do."""
    seen: set[str] = set()
    opcodes: set[str] = set()
    stack = list(computations)
    while stack:
        comp = stack.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        for instr in comp.instructions:
            opcode = instr.opcode
            if opcode == "custom-call":
                category = custom_call_target_category(instr.custom_call_target or "")
                opcodes.add(f"custom-call:{category}" if category else opcode)
            elif opcode == "fusion" and instr.fusion_kind == "kCustom":
                kind = fusion_backend_kind(instr) or ""
                if kind.startswith(MATMUL_FUSION_KINDS):
                    opcodes.add("dot")
                opcodes.add(opcode)
            else:
                opcodes.add(opcode)
            stack.extend(_called(instr))
    return opcodes


def category_of_opcodes(opcodes: set[str]) -> str:
    """The category of a computation from the set of opcodes it runs (see the module docstring)."""
    if opcodes & COLLECTIVES or f"custom-call:{COLLECTIVE}" in opcodes:
        return COLLECTIVE
    if opcodes & MATMUL_OPCODES or f"custom-call:{MATMUL}" in opcodes:
        return MATMUL
    if opcodes & REDUCTION_OPCODES or f"custom-call:{REDUCTION}" in opcodes:
        return REDUCTION
    computing = opcodes - STRUCTURAL - WRAPPERS
    if computing and computing <= DATA_MOVEMENT:
        return LAYOUT
    if not computing:  # parameters and bitcasts only: a no-op wrapper, nothing but data movement if it runs at all
        return LAYOUT
    return FUSION


def instruction_category(instr: HloInstruction) -> str | None:
    """The category of one instruction running at top level; None for instructions that run no code."""
    opcode = instr.opcode
    if opcode in NO_CODE_TOP_LEVEL:
        return None
    if opcode in COLLECTIVES:
        return COLLECTIVE
    if opcode == "fusion":
        return _fusion_category(instr)
    if opcode == "custom-call":
        return _custom_call_category(instr)
    if opcode in WRAPPERS:
        return _wrapper_category(instr)
    if opcode == "copy":
        operands = instr.operands
        same = operands and operands[0].shape_text == instr.shape_text
        return MEMORY if same else LAYOUT
    for opcodes, category in _BY_OPCODE:
        if opcode in opcodes:
            return category
    return FUSION


# Plain opcodes' categories, checked in this order; any other opcode runs as a generated (fused) kernel.
_BY_OPCODE = ((MEMORY_OPCODES, MEMORY), (MATMUL_OPCODES, MATMUL), (REDUCTION_OPCODES, REDUCTION),
              (DATA_MOVEMENT, LAYOUT), (RANDOM_OPCODES, OTHER))


def _fusion_category(instr: HloInstruction) -> str:
    """A custom fusion's backend kind names a library matmul or a memcpy; any other fusion is what its body does."""
    if instr.fusion_kind == "kCustom":
        kind = fusion_backend_kind(instr) or ""
        if kind.startswith(MATMUL_FUSION_KINDS):
            return MATMUL
        if kind.startswith(MEMCPY_FUSION_KINDS):
            return MEMORY
    return category_of_opcodes(body_opcodes(_called(instr)))


def _custom_call_category(instr: HloInstruction) -> str | None:
    target = instr.custom_call_target or ""
    if target in NO_OP_TARGETS:
        return None
    category = custom_call_target_category(target)
    if category is not None:
        return category
    called = _called(instr)
    return category_of_opcodes(body_opcodes(called)) if called else category_of(target)


def _wrapper_category(instr: HloInstruction) -> str | None:
    """Async and call wrappers are what they run."""
    called = _called(instr)
    if called:
        return category_of_opcodes(body_opcodes(called))
    if instr.opcode.endswith("-done") or instr.opcode == "async-update":  # older text: the -done names only its -start
        operands = instr.operands
        return instruction_category(operands[0]) if operands else OTHER
    return OTHER


def executed_instructions(module: HloModule) -> Iterator[HloInstruction]:
    """The instructions that can run at top level: those of the entry computation and of the computations it runs
    as code of their own (while bodies, conditional branches, calls, async computations)."""
    for comp in executed_computations(module):
        yield from comp.instructions


def module_categories(module: HloModule) -> dict[str, str]:
    """{instruction name: category} for every instruction of `module` that can run at top level and runs code."""
    out: dict[str, str] = {}
    for instr in executed_instructions(module):
        category = instruction_category(instr)
        if category is not None:
            out.setdefault(instr.name, category)
    return out


class CategoryResolver:
    """Event -> category: the HLO category of the instruction an XLA event executes, found in the run's optimized
    modules by (module, `hlo_op`) or by kernel name; the event's own name-based category otherwise.

    Call it like a function (`resolver(event) -> category`), or `classify(event) -> (category, source)` where source
    is "hlo" or "names".
    """

    def __init__(self, modules: Iterable[HloModule]):
        self.modules: dict[str, dict[str, str]] = {}  # module name -> {instruction or kernel name: category}
        self._any: dict[str, str] = {}  # the same over all modules, for events that do not name their module
        for module in modules:
            table = self.modules.setdefault(module.name, {})
            for name, category in module_categories(module).items():
                for key in (name, kernel_name_for(name)):
                    table.setdefault(key, category)
                    self._any.setdefault(key, category)

    def __bool__(self) -> bool:
        return bool(self._any)

    def __call__(self, event: Event) -> str:
        return self.classify(event)[0]

    def lookup(self, event: Event) -> str | None:
        """The HLO category of the instruction `event` executes, or None when no module knows it."""
        if event.hlo_module is not None:
            table = self.modules.get(event.hlo_module)
            if table is None:  # another program (an init or a helper jit): its instruction names mean nothing here
                return None
        else:
            table = self._any
        for key in (event.hlo_op, event.name):
            if key is None:
                continue
            category = table.get(key)
            if category is None and key.endswith(".kd"):  # ROCm kernel symbols
                category = table.get(key[:-3])
            if category is not None:
                return category
        return None

    def classify(self, event: Event) -> tuple[str, str]:
        if event.kind in (MEMCPY, MEMSET):
            return MEMORY, SOURCE_NAMES
        category = self.lookup(event)
        if category is None:  # what the reader decided stands (the profiler's category, or the name's)
            return event.category, event.category_source
        return category, SOURCE_HLO


def _modules_of(items: Iterable[object]) -> list[HloModule]:
    """HloModules from HloModules or LoadedModules; modules before optimization are left out (their instructions are
    not the ones that run)."""
    out = []
    for item in items:
        if isinstance(item, HloModule):
            out.append(item)
            continue
        module = getattr(item, "module", None)
        if getattr(item, "stage", None) != "before_optimizations" and isinstance(module, HloModule):
            out.append(module)
    return out


def category_resolver(modules: Iterable[object]) -> CategoryResolver:
    """The function the analyses call: `category_resolver(modules)(event) -> category`. `modules`: parsed optimized
    modules (`hloscope.hlo.model.HloModule`, or `hloscope.hlo.load.LoadedModule`s, whose before-optimization stages
    are skipped)."""
    return CategoryResolver(_modules_of(modules))


def resolver_for_run(run_dir: str | os.PathLike[str]) -> CategoryResolver | None:
    """The resolver of a run directory's optimized train-step modules; None when the run recorded no HLO after
    optimization. Raises HloscopeError when the HLO it lists cannot be read."""
    record = load_run(Path(run_dir), check_artifacts=False)
    if not any(a.kind == "hlo" and a.train_step and a.stage != "before_optimizations" for a in record.artifacts):
        return None
    resolver = category_resolver(m for m in load_run_dir(Path(run_dir)) if m.stage == "after_optimizations")
    return resolver or None


def categorized(trace: Trace, resolver: Callable[[Event], str]) -> Trace:
    """The same trace whose device executions carry the resolver's category (and `category_source`), every time its
    events are iterated; `resolver` is a CategoryResolver (or any Event -> category function: the category is
    replaced and the source left as it was)."""
    classify: Callable[[Event], tuple[str, str]] = (getattr(resolver, "classify", None)
                                                    or (lambda event: (resolver(event), event.category_source)))

    def events() -> Iterator[Event]:
        for event in trace.events:
            if event.is_device_exec:
                event.category, event.category_source = classify(event)
            yield event

    return Trace(file=trace.file, format=trace.format, events=EventStream(events), metadata=dict(trace.metadata))
