"""The kernel-name table (hloscope/data/kernel_categories.toml) on the real Kineto and xplane GPU fixtures: NVIDIA
V100, A100, H100, B200 (PyTorch) and AMD MI355 (JAX/XLA). Specific kernels land in the right category, category
totals are as counted, and no kernel that matters is left to no rule."""

from __future__ import annotations

import itertools
import re
import time
import tomllib
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hloscope.trace import categories
from hloscope.trace.categories import MATCHED_CHARS, category_of, kernel_rule, kernel_rules, required_text
from hloscope.trace.load import load_trace
from hloscope.trace.model import CATEGORIES
from hloscope.trace.stats import trace_stats

FIXTURES = {
    "v100": "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "a100": "hta/trace_diff__control__control.json.gz",
    "a100_nccl": "hta/nccl_parser_config__nccl_data.json.gz",
    "a100_sxm": "hta/negative_queue_length_values_check__rank0.json.gz",
    "alexnet": "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "h100_qwen": "tracelens/traces__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "h100_bert": "tracelens/traces__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "b200": "tracelens/traces__b200__eager_trace.json.gz",
    "mi355": "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb",
}


@pytest.fixture(scope="module")
def kernels(fixtures_dir) -> dict[str, dict[str, float]]:
    """{fixture: {kernel name: total device us}}."""
    out = {}
    for key, relative in FIXTURES.items():
        totals: dict[str, float] = defaultdict(float)
        for event in load_trace(fixtures_dir / relative).events:
            if event.is_device_exec:
                totals[event.name] += event.dur_us
        out[key] = dict(totals)
    return out


def test_the_table_is_valid():
    rules = kernel_rules()
    assert len(rules) >= 15 and {rule.category for rule in rules} == set(CATEGORIES)


def test_matching_ignores_case_and_the_table_is_written_in_lowercase(monkeypatch):
    # names are lowercased before matching, so a pattern with an uppercase letter could never match: refused
    assert category_of("VOLTA_SGEMM_64X64_NT") == category_of("volta_sgemm_64x64_nt") == "matmul/conv"
    assert category_of("NCCLDevKernel_AllReduce_Sum_f32_RING_LL") == "collective/communication"
    table = "[[rule]]\nlibrary = 'x'\ncategory = 'matmul/conv'\npatterns = ['\\bCijk_', 'gemm']\n"

    monkeypatch.setattr("hloscope.trace.categories._table_text", lambda: table)
    kernel_rules.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"rule 1 \(x\): pattern '\\\\bCijk_' has uppercase"):
            kernel_rules()
        table = table.replace("Cijk", "cijk")  # escapes such as \b, \d, \B stay as they are
        rule = kernel_rules()[0]
        assert rule.matches("cijk_alik") and rule.matches("xgemm") and not rule.matches("xcijk_")
    finally:
        kernel_rules.cache_clear()
        kernel_rule.cache_clear()


# (fixture, the start of a real kernel name in it, category)
KERNELS = [
    ("a100_sxm", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>", "matmul/conv"),
    ("h100_qwen", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul/conv"),
    ("b200", "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "matmul/conv"),  # cuBLAS on Blackwell
    ("b200", "bmm_MxE4m3_MxE2m1MxE4m3_Fp32", "matmul/conv"),
    ("b200", "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausal", "matmul/conv"),
    ("h100_qwen", "void pytorch_flash::flash_fwd_kernel<", "matmul/conv"),
    ("mi355", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64", "matmul/conv"),  # hipBLASLt / Tensile
    ("mi355", "void ck_tile::kentry<ck_tile::gfx950_t, 2, ck_tile::FmhaFwdKernel<", "matmul/conv"),  # CK FMHA
    ("mi355", "gemm_fusion_dot.kd", "matmul/conv"),  # XLA Triton GEMM on ROCm
    ("v100", "volta_sgemm_64x64_nt", "matmul/conv"),
    ("v100", "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "matmul/conv"),
    ("v100", "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>", "matmul/conv"),
    ("v100", "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>", "matmul/conv"),
    ("a100", "void splitKreduce_kernel<float, float, float, float, true, false, false>", "matmul/conv"),  # cuBLAS split-K
    ("a100_nccl", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "collective/communication"),
    ("b200", "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>", "collective/communication"),
    ("a100", "Memcpy HtoD (Pinned -> Device)", "memcpy/memset"),
    ("a100_nccl", "Memset (Device)", "memcpy/memset"),
    ("a100_nccl", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>", "fusion/elementwise"),
    ("a100_sxm", "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>", "fusion/elementwise"),
    ("b200", "triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0", "fusion/elementwise"),
    ("h100_qwen", "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda", "fusion/elementwise"),
    ("v100", "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float", "reduction"),
    ("v100", "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>", "reduction"),
    ("a100", "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", "reduction"),
    ("a100", "void cub::DeviceRadixSortOnesweepKernel<", "reduction"),
    ("mi355", "input_reduce_fusion.kd", "reduction"),
    ("h100_qwen", "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda",
     "copy/transpose"),
    ("a100", "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>", "copy/transpose"),
    ("a100_nccl", "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>",
     "copy/transpose"),
    ("b200", "void moe::dev::routing::routingIndicesOffsetsKernel<", "reduction"),
    ("a100", "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1<", "other"),
    ("mi355", "transformer_engine::fused_attn_rocm::populate_rng_state_kernel", "other"),  # random numbers
]


@pytest.mark.parametrize(("fixture", "prefix", "category"), KERNELS)
def test_real_kernels_land_in_their_category(kernels, fixture, prefix, category):
    names = [name for name in kernels[fixture] if name.startswith(prefix)]
    assert names, f"{prefix!r} is not a kernel of {FIXTURES[fixture]}"
    assert {category_of(name) for name in names} == {category}


# Device time by category (us), counted with the table; they add up to the trace's device time.
TOTALS = {
    "b200": {"matmul/conv": 6485.42, "fusion/elementwise": 532.254, "reduction": 1152.711, "copy/transpose": 551.03,
             "memcpy/memset": 802.844, "collective/communication": 2141.501, "other": 0.0},
    "h100_qwen": {"matmul/conv": 16648.906, "fusion/elementwise": 18901.428, "reduction": 1061.596,
                  "copy/transpose": 8820.768, "memcpy/memset": 214.602, "collective/communication": 0.0, "other": 0.0},
    "v100": {"matmul/conv": 300429.39, "fusion/elementwise": 73657.261, "reduction": 93211.433,
             "copy/transpose": 855.518, "memcpy/memset": 4300.839, "collective/communication": 0.0, "other": 0.0},
    "mi355": {"matmul/conv": 10753.294, "fusion/elementwise": 59.121, "reduction": 1120.408, "copy/transpose": 0.0,
              "memcpy/memset": 166.482, "collective/communication": 0.0, "other": 34.28},
}


@pytest.mark.parametrize("fixture", sorted(TOTALS))
def test_category_totals_on_real_traces(fixtures_dir, fixture):
    stats = trace_stats(load_trace(fixtures_dir / FIXTURES[fixture])).to_dict()
    assert stats["categories"] == pytest.approx(TOTALS[fixture], abs=0.01)
    assert stats["category_source"] == "names"  # no HLO beside these traces


def test_no_kernel_that_matters_is_left_to_no_rule(kernels):
    """Kernels no rule matches (they count as "other") are under 0.5% of each trace's device time; the list is in
    the failure message so that a new library is easy to add."""
    for fixture, totals in kernels.items():
        device = sum(totals.values())
        unmatched = {name: us for name, us in totals.items() if kernel_rule(name) is None}
        share = sum(unmatched.values()) / device
        listed = "\n".join(f"{us:10.1f} us  {name[:120]}" for name, us in sorted(unmatched.items(), key=lambda i: -i[1]))
        assert share < 0.005, f"{FIXTURES[fixture]}: {share:.1%} of device time matches no rule:\n{listed}"


def test_a_rule_matches_exactly_where_the_alternation_of_its_patterns_would(kernels):
    # Patterns without regex syntax are matched as substrings (faster): the answer must be the regex alternation's,
    # on every device name of the fixtures and the tests' traces and on names made of the patterns' own pieces.

    table = tomllib.loads(categories._table_text())["rule"]
    rules = kernel_rules()
    alternations = [re.compile("|".join(f"(?:{p})" for p in entry["patterns"])) for entry in table]
    names = {name.lower() for totals in kernels.values() for name in totals}
    pieces = [p.strip("^$\\b") for entry in table for p in entry["patterns"]]
    names |= {"".join(pair) for pair in itertools.combinations(pieces[::3], 2)}
    names |= {f"x{piece}y" for piece in pieces} | {f"{piece}_1" for piece in pieces} | set(pieces)
    assert len(names) > 1000 and sum(bool(rule.literals) for rule in rules) >= 10
    for name in names:
        for rule, alternation in zip(rules, alternations, strict=True):
            assert rule.matches(name) == bool(alternation.search(name)), (rule.library, name)


@pytest.mark.parametrize(
    ("pattern", "required"),
    [
        (r"all[-_]?reduce", "reduce"), (r"\bsend\b", "send"), (r"^%?copy([-_.]\d+)?$", "copy"),
        (r"batch_?norm", "batch"), (r"wvspli?tk", "wvspl"), (r"a{2}bc", "bc"), ("ab{1,3}", "a"), (r"ab+c", "ab"),
        (r"ab*?cd", "cd"), (r"[]ab]cd", "cd"), (r"x[^]]yz", "yz"), (r"[a\]]bc", "bc"), (r"\.abc", "abc"),
        ("abc{", "ab"), (r"conv(?!ert|ersion)", "conv"), (r"im(3d)?2col", "2col"),
        # no text is certain: an alternation at the top, inline flags (verbose mode ignores spaces)
        ("a|bcd", ""), ("(?x)a b", ""), ("(ab)?", ""), (r"\d+", ""),
    ],
)
def test_required_text_is_a_text_every_match_contains(pattern, required):
    assert required_text(pattern) == required


# Pieces of patterns that always compile: an atom, bare or quantified, an alternation, a zero-width assertion.
_ATOMS = ["a", "b", "c", "ab", "_", ".", "[ab]", "[^a]", "(a|b)", "(?:ab)", r"\d"]
_QUANTIFIERS = ["", "?", "*", "+", "*?", "+?", "??", "{1,2}", "{2}"]
_QUANTIFIED = st.builds(str.__add__, st.sampled_from(_ATOMS), st.sampled_from(_QUANTIFIERS))
_ZERO_WIDTH = [r"\b", "^", "$", "(?!b)"]


@given(st.data(), st.booleans(), st.lists(st.one_of(_QUANTIFIED, st.just("|")), min_size=1, max_size=8),
       st.booleans())
@settings(max_examples=400, deadline=None)
def test_every_match_contains_the_required_text(data, at_start, pieces, at_end):
    # anchored only at its ends, a pattern of these pieces matches some name: one is drawn
    pattern = ("^" if at_start else "") + "".join(pieces) + ("$" if at_end else "")
    expression = re.compile(pattern)
    name = data.draw(st.from_regex(expression), label="name")
    match = expression.search(name)
    assert match is not None and required_text(pattern) in match.group(), (pattern, name)


@given(st.lists(st.one_of(_QUANTIFIED, st.sampled_from([*_ZERO_WIDTH, "|"])), min_size=1, max_size=8),
       st.text(alphabet="abc_1 ", max_size=12))
@settings(max_examples=400, deadline=None)
def test_a_name_without_the_required_text_never_matches(pieces, name):
    pattern = "".join(pieces)
    expression = re.compile(pattern)
    required = required_text(pattern)
    for text in (name, f"x{name}", name * 2, "ab" + name + "ba"):
        assert required in text or expression.search(text) is None, (pattern, text)


def _pieces_of_every_pattern() -> set[str]:
    """Each pattern of the table, and each run of plain text in it: repeated, these make the names on which a
    backtracking pattern would take time quadratic (or worse) in the name's length."""
    pieces = set()
    for rule in kernel_rules():
        for pattern in (*rule.literals, *(expression.pattern for _, expression in rule.expressions)):
            pieces.add(pattern)
            pieces.update(piece for piece in re.split(r"\\[a-z]|[]^$()[?*+{}|.\\>=!:]", pattern) if piece)
    return pieces | {"ck::", "ck_tile::", "ck::gem", "ampere_", "%copy-", "copy_", "cutlass_1_", "sm1", "\n"}


def test_a_hostile_name_is_categorised_at_once():
    # `ck::.*(gemm|conv)` searched with re took 0.8 s on a 10 KB name of repeated "ck::", 22 s on 80 KB and hours on
    # 1 MB: a trace can hold any name. Now the table is linear in the name and reads only its first MATCHED_CHARS.

    kernel_rule.cache_clear()
    start = time.perf_counter()
    assert category_of("ck::" * 250_000) == "other"
    assert category_of("void ck::" * 100_000 + "gemm") == "other"  # the gemm lies past the part that is matched
    assert category_of("void ck::kernel_x<" + "ab, " * 250_000) == "other"
    assert category_of("void ck::kernel_gemm_x<" + "ab, " * 250_000) == "matmul/conv"
    pieces = _pieces_of_every_pattern()
    assert len(pieces) > 100
    for piece in pieces:  # 100 KB each (a pattern quadratic in the name would take minutes on one of them)
        category_of((piece * (100_000 // len(piece) + 1))[:100_000])
    assert time.perf_counter() - start < 5.0
    assert category_of("x" * (MATCHED_CHARS - 4) + "gemm") == "matmul/conv"
    assert category_of("x" * (MATCHED_CHARS - 3) + "gemm") == "other"


def test_every_pattern_is_linear_in_the_name():
    # without the bound on the matched length: every rule on 200 KB names of repeated pieces that patterns start with

    rules = kernel_rules()
    start = time.perf_counter()
    for piece in ["ck::", "ck_tile::", "%", "copy_", "ampere_"]:
        name = (piece * (200_000 // len(piece) + 1))[:200_000]
        for rule in rules:
            rule.matches(name)
    assert time.perf_counter() - start < 5.0  # ~0.3 s on a quiet machine; `ck::.*(gemm|conv)` took minutes on one


def test_composable_kernel_patterns_answer_as_first_written(kernels):
    # `(?m:^(?>.*?ck::).*(?:gemm|conv))` (one pass) is the `ck::.*(gemm|conv)` of the table as first written (a
    # search that restarts at every "ck::"): the same answer on every device name of the fixtures and on edge cases

    for prefix in ("ck::", "ck_tile::"):
        original = re.compile(re.escape(prefix) + ".*(gemm|conv)")
        rewritten = re.compile(f"(?m:^(?>.*?{re.escape(prefix)}).*(?:gemm|conv))")
        names = {name.lower() for totals in kernels.values() for name in totals}
        names |= {f"{prefix}gemm", f"x {prefix} a conv", f"gemm {prefix}", f"{prefix}\ngemm", f"a\n{prefix}conv",
                  f"{prefix} x\n{prefix} gemm", f"{prefix} gemm\nz", f"{prefix}{prefix}conv", f"{prefix}\n{prefix}", ""}
        assert sum(bool(original.search(name)) for name in names) > 5
        for name in names:
            assert bool(rewritten.search(name)) == bool(original.search(name)), name
