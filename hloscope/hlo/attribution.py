"""Source attribution: which framework op (metadata op_name) produced which kernels."""

from __future__ import annotations

import re
from collections import defaultdict

from hloscope.hlo.kernels import classify
from hloscope.hlo.model import HloModule
from hloscope.hlo.ops import executed_computations

_WRAPPERS = re.compile(r"^(?:jit\([^)]*\)/)+")


def layer_of(op_name: str, depth: int = 3) -> str:
    """`jit(train_step)/jvp(Model)/vit/encoder/layer/0/attention/dot_general` -> a short layer path."""
    if not op_name:
        return "<no op_name>"
    path = _WRAPPERS.sub("", op_name)
    parts = [p for p in path.split("/") if p]
    parts = [re.sub(r"^(?:jvp|transpose|vmap|remat|checkpoint)\((.*)\)$", r"\1", p) for p in parts]
    if len(parts) > 1:
        parts = parts[:-1]  # drop the primitive (dot_general, add, ...)
    return "/".join(parts[:depth]) if parts else path


def kernels_by_source(module: HloModule, platform: str, depth: int = 3) -> list[dict]:
    """Launches grouped by the layer in their metadata op_name, biggest groups first."""
    groups: dict[str, dict] = defaultdict(lambda: {"kernels": 0, "fusions": 0, "kinds": defaultdict(int)})
    for comp in executed_computations(module):
        for instr in comp.instructions:
            kind = classify(instr, platform)
            if kind is None:
                continue
            group = groups[layer_of(instr.metadata.get("op_name", ""), depth)]
            group["kernels"] += 1
            group["fusions"] += instr.opcode == "fusion"
            group["kinds"][kind] += 1
    rows = [{"source": k, "kernels": v["kernels"], "fusions": v["fusions"], "kinds": dict(v["kinds"])} for k, v in groups.items()]
    return sorted(rows, key=lambda r: (-r["kernels"], r["source"]))
