"""Counting analyses over a parsed module: opcodes, fusions by kind, custom calls, collectives, layout changes,
and the precision of every dot and convolution. Pure functions, no I/O."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from hloscope.hlo.model import HloComputation, HloInstruction, HloModule

# Instructions whose called computations run as code of their own (not inlined like fusion bodies).
_CONTROL_FLOW = {"while", "conditional", "call", "async-start"}
COLLECTIVE_OPCODES = {
    "all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter", "all-to-all",
    "ragged-all-to-all", "collective-permute", "collective-permute-start", "collective-broadcast", "send", "recv",
}


def instructions_by_opcode(module: HloModule) -> dict[str, list[HloInstruction]]:
    """Every instruction of every computation by opcode: opcodes in the order of their first instruction, each list in
    module order. Made once per module: the counting analyses below each read a few opcodes of it."""
    index = module.by_opcode
    if index is None:
        index = module.by_opcode = {}
        for comp in module.computations:
            for instr in comp.instructions:
                found = index.get(instr.opcode)
                if found is None:
                    index[instr.opcode] = [instr]
                else:
                    found.append(instr)
    return index


def opcode_histogram(module: HloModule) -> dict[str, int]:
    """Every instruction of every computation (fusion bodies included), as XLA's parser sees them."""
    return dict(Counter({opcode: len(found) for opcode, found in instructions_by_opcode(module).items()}).most_common())


def executed_computations(module: HloModule) -> list[HloComputation]:
    """The entry computation and the computations it runs as code of their own: while bodies and conditions,
    conditional branches, calls and async computations; not fusion bodies nor reduction functions (to_apply).
    Computed once per module (every analysis of `hlo stats` walks them)."""
    if module.executed is not None:
        return module.executed
    seen: dict[str, HloComputation] = {}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if comp.name in seen:
            continue
        seen[comp.name] = comp
        for instr in comp.instructions:
            opcode = instr.opcode
            if opcode in _CONTROL_FLOW or (opcode.endswith("-start") and "calls" in instr.attrs):
                stack.extend(instr.called_computations)
    module.executed = list(seen.values())
    return module.executed


def entry_opcode_histogram(module: HloModule) -> dict[str, int]:
    """Opcodes of the entry computation and its non-fusion callees (what runs at the top level)."""
    return dict(Counter(i.opcode for c in executed_computations(module) for i in c.instructions).most_common())


def fusion_backend_kind(instr: HloInstruction) -> str | None:
    """The backend kind of a kCustom fusion: `fusion_backend_config.kind` on GPUs (`__triton_gemm`,
    `__cudnn$fusion`, ...), `fusion_config.kind` on XLA:CPU (`__onednn`, `__xnn`, ...)."""
    raw = instr.attrs.get("backend_config")
    if not raw or "kind" not in raw:
        return None
    config = instr.backend_config
    for key in ("fusion_backend_config", "fusion_config"):
        value = config.get(key)
        kind = value.get("kind") if isinstance(value, dict) else None
        if isinstance(kind, str):
            return kind
    if "fusion_backend_config" not in raw and "fusion_config" not in raw:
        return None
    match = re.search(r'kind\\?"?\s*:\s*\\?"([^"\\]+)', raw)  # hand-written tests use relaxed JSON
    return match.group(1) if match else None


def fusion_label(instr: HloInstruction) -> str:
    kind = instr.fusion_kind or "kUnknown"
    if kind == "kCustom":
        backend = fusion_backend_kind(instr)
        if backend:
            return f"kCustom:{backend}"
    return kind


def fusion_kinds(module: HloModule) -> dict[str, int]:
    """Fusion instructions by kind over the whole module; kCustom split by backend kind (`kCustom:__triton_gemm`)."""
    return dict(Counter(fusion_label(i) for i in instructions_by_opcode(module).get("fusion", ())).most_common())


def custom_call_targets(module: HloModule) -> dict[str, int]:
    return dict(Counter(i.custom_call_target or "" for i in instructions_by_opcode(module).get("custom-call", ())).most_common())


def collective_bytes(instr: HloInstruction) -> int:
    """Bytes a collective produces: its output; for async `-start` ops whose shape is a tuple (operands, outputs,
    context), the output element."""
    shape = instr.shape
    parts = shape.tuple_shapes
    if parts is not None and len(parts) >= 2 and instr.opcode.endswith("-start"):
        return parts[1].byte_size
    return shape.byte_size


def collectives(module: HloModule) -> dict[str, Any]:
    """Collective instructions by opcode with the bytes they move (see collective_bytes) and their device groups
    (`replica_groups`, or `source_target_pairs` of collective-permutes and send/recv, as written: {text: count}).
    Async collectives that XLA's parser wraps (`reduce-scatter-start`, `all-to-all-start`, ...) are counted by the
    collective inside their async computation, so every collective is counted once, sync or async."""
    by_op: dict[str, dict[str, Any]] = {}
    for opcode, found in instructions_by_opcode(module).items():  # opcodes in the order of their first instruction
        if opcode not in COLLECTIVE_OPCODES:
            continue
        entry = by_op[opcode] = {"count": 0, "bytes": 0, "replica_groups": {}}
        for instr in found:
            entry["count"] += 1
            entry["bytes"] += collective_bytes(instr)
            attrs = instr.attrs
            groups = attrs.get("replica_groups", attrs.get("source_target_pairs"))
            if groups is not None:
                groups = " ".join(groups.split())
                entry["replica_groups"][groups] = entry["replica_groups"].get(groups, 0) + 1
    return {
        "count": sum(e["count"] for e in by_op.values()),
        "bytes": sum(e["bytes"] for e in by_op.values()),
        "by_opcode": by_op,
    }


def layout_changes(module: HloModule) -> dict[str, dict[str, int]]:
    """Transposes and copies: top level (their own kernels) and inside fusions."""
    top = {c.name for c in executed_computations(module)}
    out = {"transpose": {"top_level": 0, "in_fusions": 0, "bytes": 0}, "copy": {"top_level": 0, "in_fusions": 0, "bytes": 0}}
    index = instructions_by_opcode(module)
    for opcode in ("transpose", "copy", "copy-start"):
        key = "copy" if opcode != "transpose" else "transpose"
        for instr in index.get(opcode, ()):
            out[key]["top_level" if instr.computation.name in top else "in_fusions"] += 1
            out[key]["bytes"] += instr.shape.byte_size if opcode != "copy-start" else 0
    return out


def _precision_of(instr: HloInstruction) -> tuple[list[str], str | None]:
    attrs = instr.attrs
    for key in ("operand_precision", "precision_config"):
        if key in attrs:
            return [p.strip() for p in attrs[key].strip("{}").split(",") if p.strip()], attrs.get("algorithm")
    config = instr.backend_config
    for value in config.values():  # gemm_backend_config / cudnn_conv_backend_config of library calls
        if isinstance(value, dict) and isinstance(value.get("precision_config"), dict):
            precision = value["precision_config"]
            algorithm = precision.get("algorithm")
            return [str(p).lower() for p in precision.get("operand_precision", [])], algorithm
    return ["default", "default"], attrs.get("algorithm")


def matmul_precisions(module: HloModule) -> list[dict[str, Any]]:
    """Every dot, convolution and matmul/convolution library call: operand and output types, precision, algorithm."""
    rows: list[dict[str, Any]] = []
    for comp in module.computations:
        for instr in comp.instructions:
            target = instr.custom_call_target if instr.opcode == "custom-call" else None
            if instr.opcode not in ("dot", "convolution", "ragged-dot", "scaled-dot") and not (
                target and ("$gemm" in target or "matmul" in target or "conv" in target)
            ):
                continue
            precision, algorithm = _precision_of(instr)
            operand_types: list[str | None] = []
            for operand in instr.operands[:2]:
                leaves = list(operand.shape.leaves())
                operand_types.append(leaves[0].element_type if leaves else None)
            out_leaves = list(instr.shape.leaves())
            rows.append({
                "name": instr.name,
                "computation": comp.name,
                "opcode": instr.opcode if target is None else f"custom-call:{target}",
                "operand_types": operand_types,
                "output_type": out_leaves[0].element_type if out_leaves else None,
                "operand_precision": precision,
                "algorithm": algorithm,
            })
    return rows


def precision_summary(rows: list[dict[str, Any]]) -> dict[str, int]:
    """`bf16 x bf16 -> f32 [default]` -> count."""
    counter: Counter[str] = Counter()
    for row in rows:
        types = " x ".join(str(t) for t in row["operand_types"])
        tag = row["algorithm"] or ",".join(sorted(set(row["operand_precision"]))) or "default"
        counter[f"{types} -> {row['output_type']} [{tag}]"] += 1
    return dict(counter.most_common())
