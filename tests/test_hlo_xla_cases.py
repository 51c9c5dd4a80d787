"""`hlo stats` against XLA's own parser and HloCostAnalysis (jaxlib, CPU client) on public files (tests/data/fetched/hlo,
SOURCES.md), case by case where the two could differ: every figure here is XLA's, computed in the test, never a copy
of hloscope's output. Each problem is checked as a class (every opcode, type or case of its kind), on one-op modules
written here besides the real files."""

from __future__ import annotations

import pytest
from helpers import FETCHED, fixture, paired_with_xla, split_input_file, xla_opcode

from hloscope.errors import ParseError
from hloscope.hlo.cost import module_cost, shape_size
from hloscope.hlo.memory import signature_bytes
from hloscope.hlo.ops import collective_bytes, collectives
from hloscope.hlo.parser import parse_hlo_file, parse_hlo_text
from hloscope.hlo.shapes import parse_shape
from hloscope.hlo.xla import run_isolated

HLO = FETCHED / "hlo"


def xla_costs(texts: list[str]) -> list[dict]:
    results = run_isolated(texts, "cost")
    for result in results:
        assert "error" not in result, result
    return results


def assert_cost_is_xla(module, xla: dict, rel: float = 0.0) -> None:
    """hloscope's own cost walk equals XLA's HloCostAnalysis (which sums in float32: `rel` for large modules)."""
    cost, analysis = module_cost(module)
    # XLA counts each custom call it reaches from the entry as -1 FLOP and -1 byte (HandleCustomCall: "unknown")
    custom_calls = sum(1 for i in analysis.costs if i.opcode == "custom-call")
    ours = {"flops": cost.flops - cost.library_flops - custom_calls, "transcendentals": cost.transcendentals,
            "bytes_accessed": cost.bytes_accessed - cost.library_bytes - custom_calls}
    theirs = {key: xla[key] for key in ours}
    if rel:
        assert ours == pytest.approx(theirs, rel=rel), module.name
    else:
        assert ours == theirs, module.name


def one_op(root: str, *params: str, extra: str = "") -> str:
    lines = "\n".join(f"  p{i} = {shape} parameter({i})" for i, shape in enumerate(params))
    return f"HloModule m\n{extra}\nENTRY e {{\n{lines}\n  ROOT r = {root}\n}}\n"


# -- 1. FLOPs of fft and ragged-dot (HloCostAnalysis::HandleFft, HandleRaggedDot) -------------------------------------

def _fft_modules() -> list[str]:
    texts = []
    for n in (1, 2, 3, 8, 9, 16, 1000):
        half = n // 2 + 1
        texts += [
            one_op(f"c64[3,{n}] fft(p0), fft_type=FFT, fft_length={{{n}}}", f"c64[3,{n}]"),
            one_op(f"c128[3,{n}] fft(p0), fft_type=IFFT, fft_length={{{n}}}", f"c128[3,{n}]"),
            one_op(f"c64[3,{half}] fft(p0), fft_type=RFFT, fft_length={{{n}}}", f"f32[3,{n}]"),
            one_op(f"f64[3,{n}] fft(p0), fft_type=IRFFT, fft_length={{{n}}}", f"c128[3,{half}]"),
        ]
    texts += [
        one_op("c64[2,8,16]{2,1,0} fft(p0), fft_type=FFT, fft_length={8,16}", "c64[2,8,16]{2,1,0}"),
        one_op("c128[2,8,16,3] fft(p0), fft_type=RFFT, fft_length={8,16,5}", "f64[2,8,16,5]"),
        one_op("f32[2,8,16,5] fft(p0), fft_type=IRFFT, fft_length={8,16,5}", "c64[2,8,16,3]"),
        one_op("c64[7,12,10] fft(p0), fft_type=IFFT, fft_length={7,12,10}", "c64[7,12,10]"),
    ]
    return texts


def _ragged_dot_modules() -> list[str]:
    return [  # the three modes: ragged non-contracting (rhs group dimension), contracting, batch
        one_op("f32[19,11,7] ragged-dot(p0, p1, p2), lhs_contracting_dims={2}, rhs_contracting_dims={1}, "
               "lhs_ragged_dims={1}, rhs_group_dims={0}", "f32[19,11,5]", "f32[3,5,7]", "s64[19,3]"),
        one_op("bf16[6,7] ragged-dot(p0, p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={2}, "
               "lhs_ragged_dims={0}, rhs_group_dims={1}", "bf16[6,5]", "bf16[7,4,5]", "s32[4]"),
        one_op("f32[3,11,7] ragged-dot(p0, p1, p2), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, "
               "lhs_ragged_dims={2}", "f32[11,19,5]", "f32[19,5,7]", "s64[19,3]"),
        one_op("f32[2,11,7] ragged-dot(p0, p1, p2), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
               "rhs_contracting_dims={1}, lhs_ragged_dims={1}", "f32[2,11,5]", "f32[2,5,7]", "s32[3]"),
    ]


@pytest.mark.parametrize("kind", ["fft", "ragged-dot"])
def test_fft_and_ragged_dot_flops_are_xlas(kind: str):
    texts = _fft_modules() if kind == "fft" else _ragged_dot_modules()
    for text, xla in zip(texts, xla_costs(texts)):
        (module,) = parse_hlo_text(text)
        assert_cost_is_xla(module, xla)
        assert (module_cost(module)[0].flops > 0) == (xla["flops"] > 0)  # a zero-size transform costs nothing


def test_real_fft_and_ragged_dot_modules():
    """A100 3-D IFFT (jaxdecomp): 141,733,920,768 FLOPs (hloscope said 0); XLA's ragged_dot test modules: 770,
    43,890, 248,710 (0 before)."""
    for name in ("jaxdecomp__a100__16__jaxfft__2048_16_1_NCCL_float32_IFFT.hlo", "xla__hlo_to_mhlo__ragged_dot.hlo"):
        path = HLO / name
        modules = parse_hlo_file(path)
        texts = split_input_file(path.read_text())
        assert len(texts) == len(modules)
        for module, xla in zip(modules, xla_costs(texts)):
            assert xla["flops"] > 0
            assert_cost_is_xla(module, xla, rel=1e-6)


def test_every_opcode_xla_gives_flops_to():
    """One-op modules for each opcode HloCostAnalysis gives FLOPs or transcendentals to: hloscope's figures are XLA's."""
    add = "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = f32[] add(a, b)\n}"
    ge = "ge {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=GE\n}\n" + add
    lt = "lt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = pred[] compare(a, b), direction=LT\n}"
    texts = [
        one_op("f32[4,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}", "f32[4,8]", "f32[8,3]"),
        one_op("f32[4,3] scaled-dot(p0, p1, p2, p3), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
               "f8e4m3fn[4,32]", "f8e4m3fn[32,3]", "f8e8m0fnu[4,1]", "f8e8m0fnu[1,3]"),
        one_op("f32[1,8,8,4] convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
               "f32[1,8,8,3]", "f32[3,3,3,4]"),
        one_op("f32[1,8,8,4] convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
               "feature_group_count=4", "f32[1,8,8,4]", "f32[3,3,1,4]"),
        one_op("f32[1,6,6,4] convolution(p0, p1), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=4",
               "f32[4,8,8,2]", "f32[3,3,2,4]"),
        one_op("f32[1,15,15,4] convolution(p0, p1), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, "
               "dim_labels=b01f_01io->b01f", "f32[1,8,8,3]", "f32[3,3,3,4]"),
        one_op("f32[5,3] triangular-solve(p0, p1), left_side=true, lower=true, transpose_a=NO_TRANSPOSE",
               "f32[5,5]", "f32[5,3]"),
        one_op("f32[2,5,5] cholesky(p0), lower=true", "f32[2,5,5]"),
        one_op("f32[4,8] sort(p0), dimensions={1}, to_apply=lt", "f32[4,8]", extra=lt),
        one_op("f32[4] reduce(p0, p1), dimensions={1}, to_apply=add", "f32[4,8]", "f32[]", extra=add),
        one_op("f32[4,4] reduce-window(p0, p1), window={size=1x3 stride=1x2 pad=0_0x1_1}, to_apply=add",
               "f32[4,8]", "f32[]", extra=add),
        one_op("f32[4,8] reduce-window(p0, p1), window={size=1x15 pad=0_0x7_7}, to_apply=add", "f32[4,8]", "f32[]",
               extra=add),
        one_op("f32[4,8] map(p0, p1), dimensions={0,1}, to_apply=add", "f32[4,8]", "f32[4,8]", extra=add),
        one_op("f32[4,8] select-and-scatter(p0, p1, p2), window={size=2x2 stride=2x2}, select=ge, scatter=add",
               "f32[4,8]", "f32[2,4]", "f32[]", extra=ge),
        one_op("f32[8,4] scatter(p0, p1, p2), update_window_dims={1}, inserted_window_dims={0}, "
               "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add", "f32[8,4]", "s32[3,1]",
               "f32[3,4]", extra=add),
        one_op("f32[4,8] all-reduce(p0), replica_groups={}, to_apply=add", "f32[4,8]", extra=add),
        one_op("f32[4,8] rng(p0, p1), distribution=rng_uniform", "f32[]", "f32[]"),
        one_op("(u64[2], u32[4,8]) rng-bit-generator(p0), algorithm=rng_default", "u64[2]"),
        *(one_op(f"f32[4,8] {op}(p0)", "f32[4,8]") for op in (
            "exponential", "log", "logistic", "sqrt", "cbrt", "rsqrt", "tanh", "sine", "cosine", "tan",
            "exponential-minus-one", "log-plus-one", "erf", "abs", "negate", "floor", "round-nearest-even")),
        *(one_op(f"f32[4,8] {op}(p0, p1)", "f32[4,8]", "f32[4,8]") for op in (
            "add", "power", "atan2", "divide", "remainder", "maximum")),
    ]
    for text, xla in zip(texts, xla_costs(texts)):
        (module,) = parse_hlo_text(text)
        assert_cost_is_xla(module, xla)


# -- 2. Packed sub-byte elements: a layout's element size `E(n)` ---------------------------------------------------

def xla_shape_sizes(shapes: list[str]) -> list[float]:
    """XLA's size of each shape, as its HloCostAnalysis (CPU client) counts it: a copy reads and writes it once."""
    texts = [one_op(f"{shape} copy(p0)", shape) for shape in shapes]
    return [cost["bytes_accessed"] / 2 for cost in xla_costs(texts)]


SUB_BYTE = ["pred", "s1", "u1", "s2", "u2", "s4", "u4", "f4e2m1fn"]


def test_packed_element_size_is_xlas_for_every_type():
    """Every sub-byte type, with E(1)/E(2)/E(4) and without (then 1 byte each, as XLA counts it), in odd element
    counts (XLA rounds the packed bits up to whole bytes), with tiles and memory spaces beside E(n), and E(n) on wider
    types (XLA packs whatever the layout says)."""
    shapes = []
    for element_type in SUB_BYTE:
        shapes += [f"{element_type}[3,5]{{1,0}}", f"{element_type}[7]", f"{element_type}[]"]
        for bits in (1, 2, 4):
            shapes += [f"{element_type}[3,5]{{1,0:E({bits})}}", f"{element_type}[9]{{0:E({bits})}}",
                       f"{element_type}[]{{:E({bits})}}"]
    shapes += ["s4[9,256]{1,0:T(8,128)(2,1)E(4)S(1)}", "u4[1024,512]{1,0:E(4)}", "u8[9]{0:E(4)}", "f32[9]{0:E(16)}",
               "s4[9]{0:E(0)}", "s4[3,5]{1,0:D(D,C)T(2,128)L(2)#(u32)*(u32)E(4)S(1)SC(0:1)M(8)}"]
    for shape, size in zip(shapes, xla_shape_sizes(shapes)):
        parsed = parse_shape(shape)
        assert parsed.byte_size == size, shape
        assert shape_size(parsed) == size, shape


def test_sub_byte_collective_files_count_packed_bytes():
    """u4 all-gather benchmark (u4[1024,512]{1,0:E(4)} -> u4[1024,4096]): XLA 2,359,296 bytes accessed (hloscope
    counted 4,718,592), collective bytes 2,097,152; XLA's sub-byte collective test modules (s4, u4, f4e2m1fn
    all-gather, all-to-all, collective-broadcast, collective-permute): each figure XLA's."""
    for name, count in (("xla__benchmarks__u4_all_gather_1x8.hlo", 1), ("xla__gpu_tests__sub_byte_collectives.hlo", 5)):
        path = HLO / name
        modules = parse_hlo_file(path)
        assert len(modules) == count
        texts = split_input_file(path.read_text())
        for module, xla in zip(modules, xla_costs(texts)):
            assert_cost_is_xla(module, xla)
            (collective,) = [i for i in module.entry.instructions if i.opcode != "parameter"]
            (param,) = [i for i in module.entry.instructions if i.opcode == "parameter"]
            out_size, param_size = xla_shape_sizes([collective.shape_text, param.shape_text])
            stats = collectives(module)
            assert stats["bytes"] == collective_bytes(collective) == out_size
            memory = signature_bytes(module)
            assert (memory["parameter_bytes"], memory["output_bytes"]) == (param_size, out_size)
    (module,) = parse_hlo_file(HLO / "xla__benchmarks__u4_all_gather_1x8.hlo")
    assert module_cost(module)[0].bytes_accessed == 2_359_296


# -- 4. Every shape XLA's parser accepts: buffers, dynamic dimensions, full layouts ---------------------------------

def _same_as_xla_view(texts: list[str]) -> None:
    for text, view in zip(texts, run_isolated(texts, "view")):
        assert "view" in view, (text, view)
        (module,) = parse_hlo_text(text)
        module.validate()
        ours = {c.name: sorted((i.name, i.opcode, tuple(i.operand_names)) for i in c.instructions)
                for c in module.computations}
        theirs = {c: sorted((n, xla_opcode(type("O", (), {"name": o})), tuple(ops)) for n, o, ops in v)
                  for c, v in view["view"].items()}
        assert ours == theirs, text


SHAPE_MODULES = [
    one_op("b(f32[2,4]) copy(p0)", "b(f32[2,4])"),
    one_op("b(f32[2,4]{0,1}) copy(p0)", "b(f32[2,4]{0,1})"),
    one_op("b(f32[<=2,4]) copy(p0)", "b(f32[<=2,4])"),
    one_op("f32[2,4] negate(p0)", "b (f32[2,4])"),
    one_op("(b(f32[2,4]), f32[3]) tuple(p0, p1)", "b(f32[2,4])", "f32[3]"),
    one_op("(f32[2], (s32[], b(u4[9]{0:E(4)}))) copy(p0)", "(f32[2], (s32[], b(u4[9]{0:E(4)})))"),
    one_op("b(f32[2]) get-tuple-element(p0), index=0", "(b(f32[2]), s32[])"),
    one_op('b(f32[2,4]) custom-call(), custom_call_target="CreateBuffer"'),
    "HloModule m\n\nf (a: b(f32[2])) -> b(f32[2]) {\n  ROOT a = b(f32[2]) parameter(0)\n}\n\n"
    "ENTRY e (p: b(f32[2])) -> b(f32[2]) {\n  p = b(f32[2]) parameter(0)\n  ROOT c = b(f32[2]) call(p), to_apply=f\n}\n",
    "HloModule m\nENTRY e {\n  p = b(f32[2]{0}) parameter(0)\n  ROOT c = f32[2] negate(b(f32[2]{0}) p)\n}\n",
    "HloModule m\nENTRY e {\n  ROOT c = f32[2] negate(b(f32[2]) parameter(0))\n}\n",
    one_op("f32[<=2,?,3]{2,1,0} copy(p0)", "f32[<=2,?,3]{2,1,0:D(D,C,D)T(2,128)S(1)}"),
    one_op("(f32[<=4], s32[]) copy(p0)", "(f32[<=4], s32[])"),
    one_op("s4[<=9]{0:E(4)} copy(p0)", "s4[<=9]{0:E(4)}"),
    one_op("f32[<=8,4] dynamic-reshape(p0, p1, p2)", "f32[4,8]", "s32[]", "s32[]"),
    one_op("pred[<=4] compare(p0, p0), direction=LT", "f32[<=4]"),
    one_op("(f32[2], token[]) copy(p0)", "(f32[2], token[])"),
    one_op("(opaque[], f32[2]) copy(p0)", "(opaque[], f32[2])"),
    one_op("f32[9,256]{1,0} copy(p0)", "f32[9,256]{1,0:T(8,*)}"),
]


def test_every_shape_syntax_xla_accepts_is_read_and_costed_as_xla_does():
    """Buffer shapes `b(...)` (as result, parameter, tuple element, signature, operand shape, nested operand, with
    spaces), dynamic dimensions `<=n` and `?` (XLA's CPU size adds 4 bytes per dimension of a dynamic array), layouts
    with dimension level types, tiles (`*` too), memory spaces, element sizes, tokens and opaque values."""
    _same_as_xla_view(SHAPE_MODULES)
    for text, xla in zip(SHAPE_MODULES, xla_costs(SHAPE_MODULES)):
        (module,) = parse_hlo_text(text)
        assert_cost_is_xla(module, xla)
    assert str(parse_shape("b(f32[<=2,?,3]{2,1,0:E(4)})")) == "b(f32[<=2,?,3]{2,1,0:E(4)})"


@pytest.mark.parametrize("shape", ["b((f32[2]))", "b(token[])", "b(f32[2]", "b()"])
def test_buffer_shapes_xla_refuses_are_refused(shape: str):
    text = one_op(f"{shape} copy(p0)", shape)
    assert "error" in run_isolated([text], "view")[0]
    with pytest.raises(ParseError):
        for module in parse_hlo_text(text):
            module.validate()
            module_cost(module)


def test_real_files_with_buffer_and_dynamic_shapes():
    """XLA's custom_call.hlo (line 77 `b(f32[2,4]) custom-call()`) and types.hlo (line 12 `b(f32[]) custom-call`) were
    refused as "unknown opcode 'b'"; import_dynamic_reshape.hlo's dynamic shapes cost 56/52 bytes against XLA's 64/56."""
    for name in ("xla__hlo_to_mhlo__custom_call.hlo", "xla__hlo_to_mhlo__types.hlo",
                 "xla__hlo_to_mhlo__import_dynamic_reshape.hlo"):
        path = HLO / name
        modules = parse_hlo_file(path)
        texts = split_input_file(path.read_text())
        assert len(modules) == len(texts)
        views = run_isolated(texts, "view")
        for module, view, xla in zip(modules, views, xla_costs(texts)):
            module.validate()
            assert module.name == view["name"]
            assert len(module.computations) == len(view["view"])
            assert module.instruction_count == sum(len(v) for v in view["view"].values())
            assert_cost_is_xla(module, xla)


# -- 3. `// -----` splits modules; a longer run of dashes is a comment --------------------------------------------

def _same_modules_as_xla(text: str, chunks: list[str]) -> list:
    """hloscope's modules of `text` are XLA's modules of `chunks`: same names, computations, instructions, opcodes."""
    modules = parse_hlo_text(text)
    for module, view in paired_with_xla(modules, chunks):
        ours = {c.name: sorted((i.name, i.opcode) for i in c.instructions) for c in module.computations}
        theirs = {c: sorted((n, xla_opcode(type("O", (), {"name": o}))) for n, o, _ in v) for c, v in view.items()}
        assert ours == theirs
    return modules


@pytest.mark.parametrize("name, counts", [
    ("xla__hlo_to_mhlo__case_conditional.hlo", [(9, 38)]),  # was split in 2 modules at its decorative lines
    ("xla__hlo_to_mhlo__if_conditional.hlo", [(14, 70)]),  # was split in 4
    ("xla__gpu_tests__pdl.hlo", [(1, 2), (2, 4), (3, 23), (3, 11)]),  # --split-input-file: 4 modules, 2 headerless
    ("xla__gpu_tests__sub_byte_collectives.hlo", [(1, 2)] * 5),
    ("xla__hlo_to_mhlo__ragged_dot.hlo", [(1, 4)] * 3),
])
def test_modules_of_real_test_files_are_xlas(name: str, counts: list[tuple[int, int]]):
    """Files XLA's tools read whole (decorative `// ----------------------` lines between computations) are one
    module; files run with --split-input-file are split at each `// -----`, headerless chunks included."""
    text = (HLO / name).read_text()
    chunks = split_input_file(text)
    modules = _same_modules_as_xla(text, chunks)
    assert [(len(m.computations), m.instruction_count) for m in modules] == counts
    for module, xla in zip(modules, xla_costs(chunks)):
        assert_cost_is_xla(module, xla)


def test_decorative_dash_lines_never_split_and_the_marker_always_does():
    """Every run of dashes but five is a comment, wherever it stands between computations (a computation after one
    may call a computation before it, as XLA's while.hlo does); `// -----`, indented or with text after it, splits."""
    add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
    entry = ("ENTRY e {\n  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
             "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}\n")
    for dashes in (1, 2, 3, 4, 6, 7, 22, 80):
        line = "// " + "-" * dashes
        text = f"{line}\nHloModule m\n{line}\n{add}\n{line}\n{entry}{line}\n"
        (module,) = _same_modules_as_xla(text, [text])
        assert len(module.computations) == 2
    for marker in ("// -----", "  // -----", "// ----- second module", "// -----\t"):
        text = f"HloModule a\n{add}{entry}\n{marker}\nHloModule b\n{add}{entry}\n{marker}\n// CHECK: nothing\n"
        modules = _same_modules_as_xla(text, [f"HloModule a\n{add}{entry}", f"HloModule b\n{add}{entry}"])
        assert [m.name for m in modules] == ["a", "b"]


def test_outfeed_and_layoutless_transposes_cost_as_xla():
    """Found on XLA's import_emit_stablehlo.hlo beside the four problems: outfeed reads every array its operands
    carry (HandleOutfeed; hloscope counted the tuple's index table: 16 vs XLA's 20 bytes), and a transpose written
    without layouts has XLA's default layout, so an identity or size-1 permutation is a bitcast (0 bytes, was 120)."""
    texts = [
        one_op("s32[3,5] transpose(p0), dimensions={0,1}", "s32[3,5]"),
        one_op("s32[5,3] transpose(p0), dimensions={1,0}", "s32[3,5]"),
        one_op("s32[5,3]{0,1} transpose(p0), dimensions={1,0}", "s32[3,5]"),
        one_op("s32[5,3] transpose(p0), dimensions={1,0}", "s32[3,5]{0,1}"),
        one_op("f32[4,3,5] transpose(p0), dimensions={1,0,2}", "f32[3,4,5]"),
        one_op("f32[1,5] transpose(p0), dimensions={1,0}", "f32[5,1]"),
        one_op('token[] outfeed(p0, p1), outfeed_shape=(s32[3]{0}, (f32[2], s32[])), outfeed_config="x"',
               "(s32[3], (f32[2], s32[]))", "token[]"),
        one_op("token[] outfeed(p0, p1), outfeed_shape=s32[3]{0}", "s32[3]", "token[]"),
        one_op("((s32[3], f32[2]), token[]) infeed(p0)", "token[]"),
    ]
    for text, xla in zip(texts, xla_costs(texts)):
        (module,) = parse_hlo_text(text)
        assert_cost_is_xla(module, xla)


# -- 5. scan: the applied computation's cost times the elements of operand 1 (HloCostAnalysis::HandleScan) ---------

def _scan_modules() -> list[str]:
    scalar = ("b {\n a = f32[] parameter(0)\n c = f32[] parameter(1)\n s = f32[] add(a, c)\n e = f32[] exponential(s)\n"
              " m = f32[] multiply(e, s)\n ROOT t = (f32[], f32[]) tuple(m, s)\n}")
    vector = ("b {\n a = f32[4] parameter(0)\n c = f32[4] parameter(1)\n s = f32[4] add(a, c)\n"
              " e = f32[4] exponential(s)\n ROOT t = (f32[4], f32[4]) tuple(e, s)\n}")
    three = ("b {\n a = f32[] parameter(0)\n c = f32[] parameter(1)\n d = f32[] parameter(2)\n s = f32[] add(a, c)\n"
             " u = f32[] multiply(s, d)\n ROOT t = (f32[], f32[], f32[]) tuple(s, u, s)\n}")
    return [
        one_op("(f32[10], f32[]) scan(p0, p1), dimensions={0}, num_carries=1, to_apply=b", "f32[10]", "f32[]",
               extra=scalar),
        one_op("(f32[3,37], f32[]) scan(p0, p1), dimensions={1}, num_carries=1, is_reverse=true, to_apply=b",
               "f32[3,37]", "f32[]", extra=scalar),
        one_op("(f32[6,4], f32[4]) scan(p0, p1), dimensions={0}, num_carries=1, to_apply=b", "f32[6,4]", "f32[4]",
               extra=vector),
        one_op("(f32[6,5], f32[2], f32[3]) scan(p0, p1, p2), dimensions={0}, num_carries=2, to_apply=b",
               "f32[6,5]", "f32[2]", "f32[3]", extra=three),
        one_op("(f32[6,5], f32[8,5], f32[3]) scan(p0, p1, p2), dimensions={0}, num_carries=1, to_apply=b",
               "f32[6,5]", "f32[8,5]", "f32[3]", extra=three),
    ]


def test_scan_costs_as_xla():
    """XLA's frontend_attributes.hlo module 4 (`scan` of f32[10] with a one-add body): XLA 1 FLOP, hloscope 0 (scan
    had no handler). XLA's HandleScan multiplies the body's FLOPs and transcendentals by the elements of operand 1
    (not by the scan length), and counts the default bytes; checked on one-op modules of other shapes and carries."""
    texts = _scan_modules()
    for text, xla in zip(texts, xla_costs(texts)):
        (module,) = parse_hlo_text(text)
        assert_cost_is_xla(module, xla)
        assert xla["flops"] > 0
    path = HLO / "xla__hlo_to_mhlo__frontend_attributes.hlo"
    modules = parse_hlo_file(path)
    texts = split_input_file(path.read_text())
    assert len(modules) == len(texts) == 16
    for module, xla in zip(modules, xla_costs(texts)):
        assert_cost_is_xla(module, xla)
    assert module_cost(modules[4])[0].flops == 1


# -- 6. Shapes XLA's parser builds itself: send, recv, their -done, infeed, add-dependency, after-all --------------

def _send_recv(body: str) -> str:
    return "HloModule m\nENTRY e {\n" + body + "\n}\n"


DERIVED_SHAPE_MODULES = [  # each writes a shape XLA replaces by the one it builds from the operands
    _send_recv("  t = token[] after-all()\n  r = (f32[128,32], u32[], token[]) recv(t), channel_id=5\n"
               "  ROOT d = (f32[128,21], token[]) recv-done(r), channel_id=5"),
    _send_recv("  t = token[] after-all()\n  r = (f32[128,32], u32[], token[]) recv(t), channel_id=5\n"
               "  ROOT d = (f32[128,32], token[]) recv-done(r), channel_id=5"),
    _send_recv("  t = token[] after-all()\n  ROOT r = (f32[128,32], s32[7], token[]) recv(t), channel_id=5"),
    _send_recv("  t = token[] after-all()\n  ROOT r = (f32[128,32], u32[], f32[9]) recv(t), channel_id=5"),
    _send_recv("  p = f32[16] parameter(0)\n  t = token[] after-all()\n"
               "  ROOT s = (f32[3], u32[], token[]) send(p, t), channel_id=5"),
    _send_recv("  p = f32[16] parameter(0)\n  t = token[] after-all()\n"
               "  s = (f32[16], u32[], token[]) send(p, t), channel_id=5\n  ROOT d = f32[5] send-done(s), channel_id=5"),
    _send_recv("  p = f32[16] parameter(0)\n  t = token[] after-all()\n  d = f32[5] add-dependency(p, t)\n"
               "  ROOT n = f32[16] negate(d)"),
    _send_recv("  p = f32[16] parameter(0)\n  ROOT d = f32[5] after-all()"),
    _send_recv("  t = token[] after-all()\n  ROOT i = (f32[16], f32[3]) infeed(t)"),
    _send_recv("  t = token[] after-all()\n  r = (f32[4,3], u32[], token[]) recv(t), channel_id=1\n"
               "  d = (f32[4,3], token[]) recv-done(r), channel_id=1\n  ROOT g = get-tuple-element(d), index=0"),
]


def test_shapes_xla_builds_from_operands_cost_as_xla():
    """XLA's import_async.hlo module 14 writes `recv-done(recv-start)` as (f32[128,21], token[]) of a recv of
    f32[128,32]: XLA's parser builds recv-done's shape from its operand (and send, send-done, add-dependency,
    after-all's from theirs, recv's and infeed's from the written data element plus u32[]/token[]), so XLA counts
    32,796 bytes where hloscope counted the written shape: 27,164. Every such opcode, written wrong, costs as XLA's."""
    for text, xla in zip(DERIVED_SHAPE_MODULES, xla_costs(DERIVED_SHAPE_MODULES)):
        (module,) = parse_hlo_text(text)
        assert_cost_is_xla(module, xla)
    (module,) = parse_hlo_text(DERIVED_SHAPE_MODULES[0])
    assert module.entry.root.shape_text == "(f32[128,32], token[])"
    path = HLO / "xla__hlo_to_mhlo__import_async.hlo"
    modules = parse_hlo_file(path)
    texts = split_input_file(path.read_text())
    assert len(modules) == len(texts)
    for module, xla in zip(modules, xla_costs(texts)):
        assert_cost_is_xla(module, xla)
    assert module_cost(modules[14])[0].bytes_accessed == 32_796


# -- 7. Intended differences: custom calls (XLA -1 each; hloscope costs cuBLAS/cuDNN calls, 0 for the others) -------

def test_custom_call_differences_are_exactly_the_documented_ones():
    """kernel_reuse.hlo module 3: hloscope 1,075 FLOPs / 2,132 bytes against XLA's 71 / 928 is 4 cuBLAS GEMMs costed
    by hloscope (1,000 FLOPs, 1,200 bytes, as GpuHloCostAnalysis) that XLA's generic analysis counts -1 each;
    offload_scan_output.hlo: hloscope 2 FLOPs / 145 bytes against XLA's 1 / 144 is one `annotate_device_placement`
    call, 0 in hloscope, -1 in XLA. Nothing else differs, in any module of either file."""
    kernel_reuse = fixture("openxla_xla/gpu_tests/kernel_reuse.hlo")
    for path in (kernel_reuse, HLO / "xla__gpu_tests__offload_scan_output.hlo"):
        modules = parse_hlo_file(path)
        texts = split_input_file(path.read_text())
        assert len(modules) == len(texts)
        for module, xla in zip(modules, xla_costs(texts)):
            assert_cost_is_xla(module, xla)
    modules = parse_hlo_file(kernel_reuse)
    cost, analysis = module_cost(modules[3])
    assert (cost.flops, cost.bytes_accessed, cost.library_flops, cost.library_bytes) == (1075, 2132, 1000, 1200)
    assert analysis.uncosted == []
    (xla,) = xla_costs([split_input_file(kernel_reuse.read_text())[3]])
    assert (xla["flops"], xla["bytes_accessed"]) == (1075 - 1000 - 4, 2132 - 1200 - 4) == (71, 928)
    (module,) = parse_hlo_file(HLO / "xla__gpu_tests__offload_scan_output.hlo")
    cost, analysis = module_cost(module)
    assert (cost.flops, cost.bytes_accessed, analysis.uncosted) == (2, 145, ["custom-call.9"])
