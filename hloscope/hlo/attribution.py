"""Source attribution: which framework op (metadata op_name) produced which kernels."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from hloscope.hlo.kernels import launches
from hloscope.hlo.model import HloModule

_WRAPPERS = re.compile(r"^(?:jit\([^)]*\)/)+")


_TRANSFORM = re.compile(r"^(jvp|transpose|vmap|remat|checkpoint|pjit|custom_jvp_call|custom_vjp_call)\((.*)\)$")


def op_path(op_name: str) -> tuple[list[str], bool]:
    """The source path of an HLO `op_name` with JAX's wrappers unwrapped, and whether it is the backward pass:
    `jit(train_step)/transpose(jvp(ViT))/vit/encoder/layer/0/attention/dot_general` ->
    (["ViT", "vit", "encoder", "layer", "0", "attention", "dot_general"], True). The one shortening rule of
    `hloscope hlo stats` (layer_of), `hloscope diff` and `hloscope explain` (short_op_name)."""
    path = _WRAPPERS.sub("", op_name)
    backward = False
    parts = []
    for part in path.split("/"):
        while True:
            match = _TRANSFORM.match(part)
            if match is None:
                break
            backward |= match.group(1) == "transpose"
            part = match.group(2)
        if part:
            parts.append(part)
    return parts, backward


def short_op_name(op_name: str) -> str:
    """An op_name shortened as `hlo stats` shortens it, the primitive kept:
    `jit(train_step)/transpose(jvp(ViT))/vit/layer/0/attention/dot_general` -> `ViT/vit/layer/0/attention/dot_general
    (backward)`; names without JAX's wrappers (torch_xla's `aten__addmm`) are unchanged."""
    if not op_name:
        return op_name
    parts, backward = op_path(op_name)
    label = "/".join(parts) or op_name
    return f"{label} (backward)" if backward else label


def layer_of(op_name: str, depth: int = 5) -> str:
    """`jit(train_step)/transpose(jvp(ViT))/vit/encoder/layer/0/attention/dot_general` -> `ViT/vit/encoder (backward)`:
    JAX's transformation wrappers unwrapped, the primitive dropped, `depth` path components kept."""
    if not op_name:
        return "<no op_name>"
    parts, backward = op_path(op_name)
    if len(parts) == 1:  # a primitive outside any module (optimizer update, loss): say so
        label = f"{parts[0]} (top level)"
    else:
        label = "/".join(parts[:-1][:depth]) if parts else "<top level>"  # the primitive (dot_general, ...) dropped
    return f"{label} (backward)" if backward else label


def kernels_by_source(module: HloModule, platform: str, depth: int = 5) -> list[dict[str, Any]]:
    """Launches grouped by the layer in their metadata op_name, biggest groups first."""
    # Launches counted by (op_name, kind, fusion or not) first, so that each distinct op_name is shortened once; the
    # counts keep the order of first appearance, so each group's kinds are in the order of its launches.
    counts: dict[tuple[str, str, bool], int] = {}
    for _, instr, kind in launches(module, platform):
        key = (instr.metadata.get("op_name", ""), kind, instr.opcode == "fusion")
        counts[key] = counts.get(key, 0) + 1
    layers: dict[str, str] = {}
    groups: dict[str, dict[str, Any]] = defaultdict(lambda: {"kernels": 0, "fusions": 0, "kinds": defaultdict(int)})
    for (op_name, kind, fusion), n in counts.items():
        layer = layers.get(op_name)
        if layer is None:
            layer = layers[op_name] = layer_of(op_name, depth)
        group = groups[layer]
        group["kernels"] += n
        group["fusions"] += n if fusion else 0
        group["kinds"][kind] += n
    rows = [{"source": k, "kernels": v["kernels"], "fusions": v["fusions"], "kinds": dict(v["kinds"])} for k, v in groups.items()]
    return sorted(rows, key=lambda r: (-r["kernels"], r["source"]))
