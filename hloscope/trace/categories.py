"""Which category of device time a kernel or XLA op belongs to, from its name (first matching rule wins).

The rules look at kernel names as CUDA/ROCm libraries, PyTorch, Triton/Inductor and XLA write them, and at HLO opcodes:
  1. collective/communication: nccl, rccl, all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
     send/recv, psum
  2. memcpy/memset: memcpy, memset, XLA copy / copy-start / copy-done, dynamic memcpy
  3. matmul/conv: gemm, cublas, cutlass, xmma (sm80_xmma, sm90_xmma), cuDNN conv kernels (by "conv"), matmul, dot, conv,
     triton gemm fusions, Inductor templates (triton_tem, mm, bmm), attention kernels (fmha, flash)
  4. reduction: reduce, reduction, softmax, norm and bn_ kernels, Inductor triton_red / triton_per
  5. fusion/elementwise: fusion, elementwise, Inductor triton_poi, XLA loop/input fusions and wrapped elementwise ops
  6. other: everything else
"""

from __future__ import annotations

import re
from functools import lru_cache

from hloscope.trace.model import COLLECTIVE, FUSION, MATMUL, MEMCPY, MEMORY, MEMSET, OTHER, REDUCTION

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        COLLECTIVE,
        re.compile(
            r"nccl|rccl|all[-_]?reduce|all[-_]?gather|reduce[-_]?scatter|all[-_]?to[-_]?all|collective[-_]?permute"
            r"|sendrecv|\bsend\b|\brecv\b|send[-_]done|recv[-_]done|psum|cross[-_]replica"
        ),
    ),
    (MEMORY, re.compile(r"memcpy|memset|^%?copy([-_.]|$)|copy[-_](start|done)|dynamic_memcpy")),
    (
        MATMUL,
        re.compile(
            r"gemm|gemv|cublas|cutlass|xmma|matmul|\bdot\b|dot[-_.]|^%?dot|conv(?!ert)|wgrad|dgrad|winograd"
            r"|fmha|flash|attention|mma_|_mma|triton_tem|bmm|addmm|_mm_|ampere_(s|h)|volta_(s|h)|turing_(s|h)|sm\d+_"
        ),
    ),
    (
        REDUCTION,
        re.compile(r"reduc|softmax|norm|\bbn_|triton_red|triton_per|argmax|argmin|cumsum|scan|topk|sort"),
    ),
    (
        FUSION,
        re.compile(
            r"fusion|fused|elementwise|triton_poi|triton|loop_|wrapped_|vectorized|unrolled|pointwise|broadcast"
            r"|transpose|concatenate|slice|convert|add|mul|sub|div|exp|tanh|relu|gelu|select|compare|maximum|minimum"
        ),
    ),
)


@lru_cache(maxsize=65536)
def category_of(name: str) -> str:
    """The category of one kernel / op name (case-insensitive)."""
    lowered = name.lower()
    for category, pattern in _RULES:
        if pattern.search(lowered):
            return category
    return OTHER


def category_for(name: str, kind: str) -> str:
    """Memory kinds are memcpy/memset whatever their name; otherwise the name decides."""
    if kind in (MEMCPY, MEMSET):
        return MEMORY
    return category_of(name)
