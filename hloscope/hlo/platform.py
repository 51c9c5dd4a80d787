"""Which platform a module was compiled for: from the dump file name first, then from what the text shows."""

from __future__ import annotations

import re

from hloscope.hlo.model import HloModule

_GPU_NAME = re.compile(r"(?:^|[._])(?:sm_[\d.]+a?|gfx\w+)_gpu_|(?:^|[._])gpu_after_optimizations")
_CPU_NAME = re.compile(r"(?:^|[._])cpu_(?:after|before)_optimizations")
_TPU_NAME = re.compile(r"(?:^|[._])tpu_(?:after|before)_optimizations")
_GPU_TARGETS = ("__cublas", "__cudnn", "__gpu$", "__triton")


def detect_platform(file_name: str, module: HloModule) -> str:
    """cpu | gpu | tpu | neuron | unknown (rules in docs/hlo.md)."""
    if _CPU_NAME.search(file_name):
        return "cpu"
    if _GPU_NAME.search(file_name):
        return "gpu"
    if _TPU_NAME.search(file_name):
        return "tpu"
    layout = module.attrs.get("entry_computation_layout", "")
    if ":T(" in layout:
        return "tpu"
    for instr in module.all_instructions():
        if ":T(" in instr.shape_text:
            return "tpu"
        if instr.opcode == "custom-call":
            target = instr.custom_call_target or ""
            if target.startswith(_GPU_TARGETS):
                return "gpu"
            if target.startswith("AwsNeuron"):
                return "neuron"
        elif instr.opcode == "fusion" and "__triton" in (instr.attrs.get("backend_config") or ""):
            return "gpu"
    return "unknown"
