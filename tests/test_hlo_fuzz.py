"""Property-based tests of the HLO parser: mutated real HLO never raises anything but ParseError, and what the
printer writes parses back to the same module."""

from __future__ import annotations

import pytest
from helpers import FIXTURES
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hloscope.errors import ParseError
from hloscope.hlo import attribution, kernels, memory, ops
from hloscope.hlo.cost import module_cost
from hloscope.hlo.parser import parse_hlo_text
from hloscope.hlo.printer import module_text

SEEDS = [
    "openxla_xla/gpu_tests/kernel_reuse.hlo",
    "pytorch_xla/keep_rolled_script/log/module_0002.jit_f.after_optimizations.txt",
    "gpu_aot/mlp_sm90_triton/module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt",
    "openxla_xla/gpu_tests/single_instruction.hlo",
]
# A tuple-shaped, multi-line, old-format module to mutate as well.
EXTRA_SEED = """HloModule extra, entry_computation_layout={(f32[2,2]{1,0}, s32[])->(f32[2,2]{1,0}, s32[])}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %x, f32[] %y)
}

%body (t: (f32[2,2], s32[])) -> (f32[2,2], s32[]) {
  %t = (f32[2,2]{1,0}, s32[]) parameter(0)
  %a = f32[2,2]{1,0} get-tuple-element((f32[2,2]{1,0}, s32[]) %t), index=0
  %d = f32[2,2]{1,0} dot(f32[2,2]{1,0} %a, f32[2,2]{1,0} %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,default}
  %r = f32[2]{0} reduce(f32[2,2]{1,0} %d, f32[] %z), dimensions={1}, to_apply=%add
  %z = f32[] constant(0)
  %i = s32[] get-tuple-element((f32[2,2]{1,0}, s32[]) %t), index=1
  ROOT %o = (f32[2,2]{1,0}, s32[]) tuple(f32[2,2]{1,0} %d, s32[] %i)
}

%cond (t: (f32[2,2], s32[])) -> pred[] {
  %t = (f32[2,2]{1,0}, s32[]) parameter(0)
  %i = s32[] get-tuple-element((f32[2,2]{1,0}, s32[]) %t), index=1
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(s32[] %i, s32[] %n), direction=LT
}

ENTRY %main (p: f32[2,2], q: s32[]) -> (f32[2,2], s32[]) {
  %p = f32[2,2]{1,0} parameter(0)
  %q = s32[] parameter(1)
  %c = f32[2,2]{1,0} constant({ { 1, 2 },
    { 3, 4 } })
  %t = (f32[2,2]{1,0}, s32[]) tuple(f32[2,2]{1,0} %c, s32[] %q)
  ROOT %w = (f32[2,2]{1,0}, s32[]) while((f32[2,2]{1,0}, s32[]) %t), condition=%cond, body=%body
}
"""


def _seeds() -> list[str]:
    texts = [EXTRA_SEED]
    for name in SEEDS:
        path = FIXTURES / name
        if path.exists():
            texts.append(path.read_text()[:20000] if "mlp" not in name else path.read_text())
    return texts


SEED_TEXTS = _seeds()
ALPHABET = "(){}[],=%. \n\"\\:/*-_0123456789abcdefxyzROOTENTRYHloModule\x00é"


def analyse(text: str) -> None:
    """Everything `hlo stats` does to a module, minus the file system."""
    for module in parse_hlo_text(text, path="fuzz.hlo"):
        module.validate()
        for platform in ("gpu", "cpu"):
            kernels.kernel_breakdown(module, platform)
            attribution.kernels_by_source(module, platform)
        module_cost(module)
        ops.opcode_histogram(module)
        ops.entry_opcode_histogram(module)
        ops.fusion_kinds(module)
        ops.custom_call_targets(module)
        ops.collectives(module)
        ops.layout_changes(module)
        ops.precision_summary(ops.matmul_precisions(module))
        memory.signature_bytes(module)


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SEED_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "insert", "replace", "truncate", "dup_line", "drop_line"]))
        at = draw(st.integers(0, max(len(text) - 1, 0)))
        if kind == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)) :]
        elif kind == "insert":
            text = text[:at] + draw(st.text(ALPHABET, min_size=1, max_size=12)) + text[at:]
        elif kind == "replace":
            text = text[:at] + draw(st.text(ALPHABET, min_size=1, max_size=3)) + text[at + 1 :]
        elif kind == "truncate":
            text = text[:at]
        else:
            lines = text.split("\n")
            index = at % max(len(lines), 1)
            if kind == "dup_line":
                lines.insert(index, lines[index])
            else:
                del lines[index]
            text = "\n".join(lines)
    return text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_hlo_raises_only_parse_errors(text):
    try:
        analyse(text)
        event("analysed")
    except ParseError as error:
        event("parse error")
        assert error.line is not None and error.line >= 1 and error.col is not None and error.col >= 1
        assert error.path == "fuzz.hlo"


def _structure(module):
    return [
        (c.name, c is module.entry, [(i.name, i.opcode, tuple(i.operand_names), i.shape_text.replace(" ", ""),
                                      tuple(i.attrs), i is c.root) for i in c.instructions])
        for c in module.computations
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_printed_modules_parse_back_to_the_same_module(text):
    try:
        modules = parse_hlo_text(text)
        for module in modules:
            module.validate()
    except ParseError as error:  # refused at a position in the text, or on the line after its last at its end
        assert 1 <= error.line <= len(text.splitlines()) + 1 and error.col >= 1, (error.line, error.col)
        return
    for module in modules:
        (again,) = parse_hlo_text(module_text(module))
        assert _structure(again) == _structure(module)


@pytest.mark.parametrize("index", range(len(SEED_TEXTS)))
def test_seeds_print_back_to_the_same_modules(index):
    modules = parse_hlo_text(SEED_TEXTS[index])
    assert modules
    for module in modules:
        (again,) = parse_hlo_text(module_text(module))
        assert _structure(again) == _structure(module)
