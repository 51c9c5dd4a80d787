"""hloscope's HLO parser against XLA's own parser (jaxlib._hlo.hlo_module_from_text) on every real HLO file."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FIXTURES, fixture, fixtures_missing, hlo_fixture_files, our_view, split_for_xla, xla_view
from jaxlib import _hlo

from hloscope.errors import ParseError
from hloscope.hlo.cost import module_cost
from hloscope.hlo.parser import parse_hlo_file, parse_hlo_text
from hloscope.hlo.printer import module_text


def test_fixture_files_found():
    files = hlo_fixture_files()
    if not files:
        fixtures_missing(f"no HLO files among the real fixtures at {FIXTURES}")
    # SOURCES.md lists 8 HLO files outside gpu_aot/ (2 are one module each in the TPU dump) plus 8 in gpu_aot/.
    assert len(files) >= 16, [f.name for f in files]


@pytest.mark.parametrize("path", hlo_fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_agrees_with_xla_parser(path: Path):
    ours = parse_hlo_file(path)
    chunks = split_for_xla(path.read_text())
    assert len(ours) == len(chunks)
    for module, chunk in zip(ours, chunks):
        theirs = _hlo.hlo_module_from_text(chunk)
        assert module.name == theirs.name
        assert our_view(module) == xla_view(theirs)
        assert module.instruction_count == sum(len(c.instructions()) for c in theirs.computations())


def test_sources_md_facts():
    """Counts SOURCES.md gives for the fixtures (grep counts made by whoever collected them)."""
    path = fixture("openxla_xla/benchmarks_hlo/hlo_llama3_8b_cp_bf16_1x4.hlo")
    (module,) = parse_hlo_file(path)
    assert module.entry.name == "main.66_spmd"
    targets = [i.custom_call_target for i in module.all_instructions() if i.opcode == "custom-call"]
    assert targets.count("te_fused_attn_forward_ffi") == 8 and targets.count("te_fused_attn_backward_ffi") == 4
    modules = parse_hlo_file(FIXTURES / "openxla_xla/gpu_tests/kernel_reuse.hlo")
    kinds = [i.fusion_kind for m in modules for i in m.all_instructions() if i.opcode == "fusion"]
    assert (len(kinds), kinds.count("kLoop"), kinds.count("kCustom")) == (14, 12, 2)


def test_parses_jax_compiled_module():
    """A module as hloscope's JAX mode produces it (compiled.as_text(): scheduled CPU HLO, stack-frame tables)."""
    import jax
    import jax.numpy as jnp

    def step(w, x, y):
        def loss(w):
            return jnp.mean((jnp.tanh(x @ w[0]) @ w[1] - y) ** 2)
        grads = jax.grad(loss)(w)
        return [a - 0.1 * g for a, g in zip(w, grads)]

    args = ([jnp.ones((16, 32)), jnp.ones((32, 4))], jnp.ones((8, 16)), jnp.ones((8, 4)))
    for text in (jax.jit(step).lower(*args).as_text(dialect="hlo"), jax.jit(step).lower(*args).compile().as_text()):
        (module,) = parse_hlo_text(text)
        assert our_view(module) == xla_view(_hlo.hlo_module_from_text(text))


def test_multi_line_constant_and_tuple_shapes():
    text = """HloModule m, is_scheduled=true

ENTRY %main (p: (f32[2], s32[])) -> f32[2,2] {
  %p = (f32[2]{0}, /*index=1*/s32[]) parameter(0)
  %gte = f32[2]{0} get-tuple-element((f32[2]{0}, s32[]) %p), index=0
  %c = f32[2,2]{1,0} constant({
    { 1, 2 },
    { 3, 4 }
  })
  ROOT %r = f32[2,2]{1,0} add(f32[2,2]{1,0} %c, f32[2,2]{1,0} %c), metadata={op_name="a(b" source_line=3}
}
"""
    (module,) = parse_hlo_text(text)
    assert our_view(module) == xla_view(_hlo.hlo_module_from_text(text))
    root = module.entry.root
    assert root.name == "r" and root.metadata == {"op_name": "a(b", "source_line": "3"}
    assert module.entry.instruction("c").shape.dims == (2, 2)
    assert module.entry.instruction("p").shape.tuple_shapes[1].element_type == "s32"


@pytest.mark.parametrize("name", ["openxla_xla/gpu_tests/kernel_reuse.hlo", "graphhelper_ptxla/bert_dp_graph_2.SyncTensorsGraph.1450.hlo.txt",
                                  "gpu_aot/mlp_sm90_triton/module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"])
def test_printed_module_parses_back_the_same(name):
    path = fixture(name)
    modules = parse_hlo_file(path)
    assert modules
    for module in modules:
        text = module_text(module)
        (again,) = parse_hlo_text(text)
        assert our_view(again) == our_view(module)
        assert [[(i.shape_text.replace(" ", ""), i.attrs.keys()) for i in c.instructions] for c in again.computations] == [
            [(i.shape_text.replace(" ", ""), i.attrs.keys()) for i in c.instructions] for c in module.computations
        ]
        assert our_view(again) == xla_view(_hlo.hlo_module_from_text(text))


@pytest.mark.parametrize(
    "text, line, col, words",
    [
        ("", 1, 1, "no HLO module"),
        ("HloModule m\n\nENTRY main {\n  p = f32[2]{0} parameter(0)\n", 5, 1, "not closed"),
        ("HloModule m\n\nENTRY main {\n  p = f32[2]{0} parameter(0)\n  ROOT x = f32[2]{0} add(p, p\n}\n", 5, 30, "expected ')'"),
        ("HloModule m\nENTRY main {\n  p = f32[2]{0} parameter(0)\n  ROOT q = f32[2]{0} negate(p)\n  ROOT r = f32[2]{0} negate(p)\n}\n", 5, 3, "second ROOT"),
        ("module @jit_f {\n}\n", 1, 1, "StableHLO"),
    ],
)
def test_malformed_text_is_a_parse_error_with_position(text, line, col, words):
    with pytest.raises(ParseError) as info:
        for module in parse_hlo_text(text, path="x.hlo"):
            module.validate()
    error = info.value
    assert (error.path, error.line, error.col) == ("x.hlo", line, col)
    assert words in error.message


def test_torch_xla_save_tensors_file():
    """XLA_SAVE_TENSORS_FILE with XLA_SAVE_TENSORS_FMT=hlo (written by the PyTorch/XLA 2.9 here for a 2-step MLP):
    one module per synced graph, the wrapper text skipped; each module as XLA parses it."""
    path = Path(__file__).parent / "data/hlo/torch_xla_save_tensors.hlo"
    modules = parse_hlo_file(path)
    assert [m.name for m in modules] == ["IrToHlo.184", "IrToHlo.177"]
    lines = path.read_text().splitlines(keepends=True)
    for module in modules:
        text = "".join(lines[module.lineno - 1 : module.end_lineno])
        assert our_view(module) == xla_view(_hlo.hlo_module_from_text(text))


def test_torch_xla_ir_text_is_refused():
    path = fixture("pytorch_xla/keep_rolled_script/log.0")
    with pytest.raises(ParseError) as info:
        parse_hlo_file(path)
    assert info.value.line == 11 and "XLA_SAVE_TENSORS_FMT=hlo" in info.value.message


def test_cyclic_call_graph_is_a_parse_error():
    text = """HloModule m

fused {
  p = f32[2]{0} parameter(0)
  ROOT f = f32[2]{0} fusion(p), kind=kLoop, calls=fused
}

ENTRY main {
  p = f32[2]{0} parameter(0)
  ROOT f = f32[2]{0} fusion(p), kind=kLoop, calls=fused
}
"""
    (module,) = parse_hlo_text(text, path="cycle.hlo")
    with pytest.raises(ParseError) as info:
        module_cost(module)
    assert (info.value.line, info.value.message) == (3, "computation 'fused' calls itself")
