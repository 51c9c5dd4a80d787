"""Roofline LOWER BOUND for a GPU module's kernels: the least time each launch could take on the target GPU.

For every launch in the entry schedule (generated kernels, cuBLAS/cuDNN calls, copies; the same rules as the kernel
count, `hloscope.hlo.kernels.classify`):

    lower bound = max(FLOPs / peak FLOP/s, bytes accessed / memory bandwidth)

FLOPs and bytes follow XLA's HloCostAnalysis conventions (`hloscope.hlo.cost`, which also costs cuBLAS GEMMs and cuDNN
forward convolutions from their dimensions); a library call's bytes are its operands and its result (not its scratch
buffer). The peak is the fastest unit that can run the work, from the target file: tensor cores
(`matrix_unit_description`) for dots and convolutions of that dtype (f32 dots asking for `highest` precision use the
CUDA cores' f32 rate: cuBLAS and Triton then compute in true f32), CUDA cores (`scalar_unit_description`, or
`fpus_per_core` for f32) for everything else. Where the file gives no rate for a launch's dtype and unit, that launch
gets the memory bound alone (still a lower bound).

This is a bound, not a prediction: real kernels add launch overhead, latency, imperfect overlap, cache effects and
the un-autotuned algorithms of a deviceless compile, and transcendental functions count no FLOPs here. The step bound
is given two ways: `serial_s` sums the per-launch bounds (XLA runs a module's thunks one after another on one stream
unless told otherwise) and `aggregate_s` = max(total bytes / bandwidth, the busiest unit's FLOPs / its peak), which
holds even if launches overlapped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from hloscope.errors import InputError
from hloscope.hlo.cost import CostAnalysis, shape_size
from hloscope.hlo.gpu_spec import GpuTarget, target_from_text
from hloscope.hlo.kernels import launches as launches_of
from hloscope.hlo.load import dump_sibling
from hloscope.hlo.model import HloComputation, HloInstruction, HloModule
from hloscope.hlo.parser import parse_hlo_file
from hloscope.hlo.shapes import first_element

_MATRIX_OPS = ("dot", "convolution", "scaled-dot")


def _precision_of_custom_call(instr: HloInstruction) -> list[str]:
    config = instr.backend_config  # {} when it is not JSON or nested absurdly deep
    for key in ("gemm_backend_config", "cudnn_conv_backend_config"):
        section = config.get(key)
        precision_config = section.get("precision_config") if isinstance(section, dict) else None
        precision = precision_config.get("operand_precision") if isinstance(precision_config, dict) else None
        if isinstance(precision, list) and precision:
            return [str(p).lower() for p in precision]
    return []


class _MatrixFinder:
    """The dot/convolution a launch runs (itself, or the first inside its fused computation, depth first), found once
    per fused computation: a computation reached through many fusions (nested fusions that each call the level
    below twice) is searched once, not once per path to it, and without recursion."""

    def __init__(self) -> None:
        self._found: dict[str, HloInstruction | None] = {}  # computation name -> its first matrix op

    def __call__(self, instr: HloInstruction) -> HloInstruction | None:
        if instr.opcode in _MATRIX_OPS:
            return instr
        if instr.opcode == "fusion":
            for comp in instr.called_computations:
                found = self._in(comp)
                if found is not None:
                    return found
        return None

    def _in(self, root: HloComputation) -> HloInstruction | None:
        if root.name not in self._found:
            # callees first (iterative post-order), so that each computation's fusions are already searched
            on_path = {root.name}
            stack = [(root, iter(_fused_callees(root)))]
            while stack:
                comp, callees = stack[-1]
                callee = next(callees, None)
                if callee is None:
                    stack.pop()
                    on_path.discard(comp.name)
                    self._found[comp.name] = self._first(comp)
                elif callee.name not in self._found and callee.name not in on_path:  # a cycle is not followed
                    on_path.add(callee.name)
                    stack.append((callee, iter(_fused_callees(callee))))
        return self._found[root.name]

    def _first(self, comp: HloComputation) -> HloInstruction | None:
        for inner in comp.instructions:
            if inner.opcode in _MATRIX_OPS:
                return inner
            if inner.opcode == "fusion":
                for callee in inner.called_computations:
                    found = self._found.get(callee.name)
                    if found is not None:
                        return found
        return None


def _fused_callees(comp: HloComputation) -> list[HloComputation]:
    return [callee for instr in comp.instructions if instr.opcode == "fusion" for callee in instr.called_computations]


def _rate(rates: dict[str, float], dtype: str | None) -> float | None:
    """The peak for an element type (a tuple has none, and so no rate)."""
    return rates.get(dtype) if dtype is not None else None


def _peak(gpu: GpuTarget, instr: HloInstruction, kind: str,
          matrix_of: _MatrixFinder) -> tuple[float | None, str]:
    """The fastest FLOP/s rate the target states for this launch, and which unit it is."""
    if kind == "copy":
        return None, "none"
    if kind in ("cublas", "cudnn"):  # a library matrix call
        source = instr
        precision = _precision_of_custom_call(instr)
    else:
        matrix = matrix_of(instr)
        if matrix is None:
            dtype = first_element(instr.shape).element_type
            rate = _rate(gpu.vector_flops_s, dtype)
            return rate, (f"cuda_cores_{dtype}" if rate else "none")
        source = matrix
        precision = re.findall(r"[a-z]+", matrix.attrs.get("operand_precision", ""))
    dtype = source.operands[0].shape.element_type
    if dtype == "f32" and precision and all(p == "highest" for p in precision):
        return gpu.vector_flops_s.get("f32"), "cuda_cores_f32"
    rate = _rate(gpu.matrix_flops_s, dtype)
    return rate, (f"tensor_cores_{dtype}" if rate else "none")


def _launch_cost(analysis: CostAnalysis, instr: HloInstruction, kind: str) -> tuple[float, float]:
    """(FLOPs, bytes accessed) of one launch."""
    # cuBLAS GEMMs and cuDNN forward convolutions are costed from their dimensions by hloscope.hlo.cost (as XLA's
    # GpuHloCostAnalysis does); other library calls count 0 FLOPs, so they get their memory bound.
    flops = analysis.instruction_cost(instr).flops
    data: float
    if instr.opcode == "custom-call":  # library calls: operands plus the result (not the scratch buffer)
        data = sum(shape_size(o.shape) for o in instr.operands) + shape_size(first_element(instr.shape))
    else:
        data = analysis.instruction_cost(instr).bytes_accessed
    return flops, data


def roofline(module: HloModule, gpu: GpuTarget) -> dict[str, Any]:
    """Per-launch and per-step roofline lower bounds of one optimized GPU module (pure: no I/O)."""
    if not gpu.memory_bandwidth_bytes_s:
        return {"unavailable": f"the target file {gpu.path} gives no memory_bandwidth"}
    analysis = CostAnalysis(module)
    bandwidth = float(gpu.memory_bandwidth_bytes_s)
    launches: list[dict[str, Any]] = []
    matrix_of = _MatrixFinder()
    for _, instr, kind in launches_of(module, "gpu"):
        flops, data = _launch_cost(analysis, instr, kind)
        peak, unit = _peak(gpu, instr, kind, matrix_of)
        memory_s = data / bandwidth
        compute_s = flops / peak if peak and flops else (0.0 if flops == 0 else None)
        bound_s = max(memory_s, compute_s or 0.0)
        launches.append({"name": instr.name, "kind": kind, "flops": flops, "bytes": data,
                         "intensity_flops_per_byte": flops / data if data else None, "unit": unit,
                         "peak_flops_s": peak, "memory_s": memory_s, "compute_s": compute_s,
                         "lower_bound_s": bound_s,
                         "limited_by": "compute" if compute_s and compute_s > memory_s else "memory"})
    total_flops = sum(k["flops"] for k in launches)
    total_bytes = sum(k["bytes"] for k in launches)
    # Overlapping launches still share each unit: the busiest unit bounds the step from below.
    unit_s: dict[str, float] = {}
    for k in launches:
        if k["compute_s"]:
            unit_s[k["unit"]] = unit_s.get(k["unit"], 0.0) + k["compute_s"]
    step: dict[str, Any] = {
        "label": "roofline lower bound (not a prediction)",
        "target": gpu.name, "device": gpu.device, "memory_bandwidth_bytes_s": bandwidth,
        "launches": len(launches), "flops": total_flops, "bytes": total_bytes,
        "serial_s": sum(k["lower_bound_s"] for k in launches),
        "aggregate_s": max(total_bytes / bandwidth, max(unit_s.values(), default=0.0)),
        "compute_s_by_unit": unit_s,
        "memory_bound_launches": sum(1 for k in launches if k["limited_by"] == "memory"),
        "compute_bound_launches": sum(1 for k in launches if k["limited_by"] == "compute"),
        "launches_without_compute_peak": sum(1 for k in launches if k["compute_s"] is None),
        "by_kind_s": _sum_by(launches, "kind"),
        "uncosted": [k["name"] for k in launches if k["kind"] == "custom_call"],
    }
    return {"step": step, "launches": launches}


def _sum_by(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        out[row[key]] = out.get(row[key], 0.0) + row["lower_bound_s"]
    return out


def find_target_config(module_file: str | os.PathLike[str]) -> Path | None:
    """The `gpu_target_config.pbtxt` XLA dumps beside a GPU module it compiled (deviceless or not)."""
    return dump_sibling(module_file, "gpu_target_config.pbtxt")


def target_beside(module_file: str | os.PathLike[str]) -> GpuTarget | dict[str, str]:
    """The GPU a dumped module was compiled for (its gpu_target_config.pbtxt), or {"unavailable": reason}."""
    config = find_target_config(module_file)
    if config is None:
        return {"unavailable": "no GPU target given and no gpu_target_config.pbtxt beside the module"}
    try:
        return target_from_text(config.read_text(encoding="utf-8"), config.name, str(config))
    except (OSError, UnicodeDecodeError) as error:
        return {"unavailable": f"{config}: cannot read: {error}"}
    except InputError as error:
        return {"unavailable": str(error)}


def roofline_for_module(module: HloModule, module_file: str | os.PathLike[str],
                        gpu: GpuTarget | None = None) -> dict[str, Any]:
    """Roofline of an already parsed GPU module, for `gpu` or the target XLA dumped beside `module_file`
    (for `hloscope hlo stats`). {"unavailable": reason} when no usable target is known."""
    if gpu is None:
        found = target_beside(module_file)
        if isinstance(found, dict):
            return found
        gpu = found
    if not gpu.has_roofline:
        return {"unavailable": f"the target file {gpu.path} lacks memory bandwidth or compute rates"}
    return roofline(module, gpu)


def roofline_for_module_file(path: str | os.PathLike[str], gpu: GpuTarget | None = None) -> dict[str, Any]:
    """Roofline of the (single) module in an optimized GPU HLO file, for `gpu` or the target config XLA dumped beside
    it. Returns {"unavailable": reason} when no target is known or it lacks the numbers."""
    if gpu is None:
        found = target_beside(path)
        if isinstance(found, dict):
            return found
        gpu = found
    modules = parse_hlo_file(path)
    if len(modules) != 1:
        return {"unavailable": f"{path} holds {len(modules)} modules, expected one"}
    return roofline_for_module(modules[0], path, gpu)
