"""Categories of device time from the program (hloscope.trace.program_categories), checked against XLA's own parser
(jaxlib._hlo) on real modules: a JAX CPU module with YNNPACK fusions, XLA GPU modules compiled for H100 (whose
thunk sequences say how many library calls and copies run), and a real JAX CPU run through `trace stats`."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from hloscope.hlo.load import load_file
from hloscope.hlo.parser import parse_hlo_file
from hloscope.trace.load import load_traces
from hloscope.trace.model import KERNEL, Event
from hloscope.trace.program_categories import (
    category_resolver,
    custom_call_target_category,
    instruction_category,
    module_categories,
)
from hloscope.trace.stats import summarize_events

DATA = Path(__file__).parent / "data" / "hlo"
YNN = DATA / "jax_cpu_ynn_grad.hlo"
GPU_AOT = "gpu_aot/{}/module_0001.jit_train_step.sm_9.0a_gpu_after_optimizations.txt"

# --- an independent oracle over XLA's own parse: opcodes from jaxlib._hlo, callees from its printed text ----------
_CALLEE = re.compile(
    r"\b(?:calls|to_apply|body|condition|true_computation|false_computation|select|scatter|branch_computations"
    r"|called_computations|async_computation)=\{?([^}]*?)\}?(?:,\s*[a-z_]+=|$)"
)
_NAME = re.compile(r"%?([\w.\-]+)")
_MATMUL = {"dot", "convolution"}
_REDUCE = {"reduce", "reduce-window", "sort", "scatter", "select-and-scatter"}
_MOVE = {"copy", "transpose", "bitcast", "reshape", "broadcast", "slice", "dynamic-slice", "dynamic-update-slice",
         "concatenate", "pad", "reverse"}
_NOTHING = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "opt-barrier"}


# XLA opcode enum names whose text form is not the plain kebab-case of the name (as in test_hlo_parser.py).
_OPCODE_TEXT = {
    "Exp": "exponential", "Expm1": "exponential-minus-one", "Log1p": "log-plus-one", "Cos": "cosine", "Sin": "sine",
    "Clz": "count-leading-zeros", "PopulationCount": "popcnt", "OptimizationBarrier": "opt-barrier", "TopK": "topk",
}


def _opcode(instruction) -> str:
    name = instruction.opcode.name[1:]
    return _OPCODE_TEXT.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _xla_view(text: str):
    from jaxlib import _hlo

    module = _hlo.hlo_module_from_text(text)
    comps = {c.name: c for c in module.computations()}
    return module, comps


def _callees(instruction) -> list[str]:
    line = instruction.to_string()
    out = []
    for match in _CALLEE.finditer(line):
        out += _NAME.findall(match.group(1))
    return out


def _opcodes_inside(names, comps) -> set[str]:
    seen, found, stack = set(), set(), list(names)
    while stack:
        name = stack.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for instruction in comps[name].instructions():
            found.add(_opcode(instruction))
            if _opcode(instruction) == "custom-call" and "__cublas" in instruction.to_string():
                found.add("dot")
            stack += _callees(instruction)
    return found


def _expected(instruction, comps) -> str | None:
    opcode, line = _opcode(instruction), instruction.to_string()
    if opcode in _NOTHING:
        return None
    if opcode == "fusion":
        if re.search(r'"kind":"__(triton_gemm|triton_nested_gemm_fusion|cudnn\$fusion)', line):
            return "matmul/conv"
        inside = _opcodes_inside(_callees(instruction), comps)
        if inside & _MATMUL:
            return "matmul/conv"
        if inside & _REDUCE:
            return "reduction"
        if not (inside - _NOTHING - _MOVE):
            return "copy/transpose"
        return "fusion/elementwise"
    if opcode == "custom-call":
        return "matmul/conv" if re.search(r'custom_call_target="__(cublas|cudnn\$conv)', line) else None
    if opcode == "copy":
        return None  # memcpy or layout: by shapes, checked apart
    return {"dot": "matmul/conv", "convolution": "matmul/conv"}.get(opcode) or (
        "reduction" if opcode in _REDUCE else "copy/transpose" if opcode in _MOVE else "fusion/elementwise")


def _check_against_xla(path: Path) -> dict[str, str]:
    """Every instruction of the entry computation: same opcode as XLA's parser says, and the category the oracle
    derives from XLA's parse. Returns our categories."""
    text = path.read_text()
    ours = parse_hlo_file(path)[0]
    xla_module, comps = _xla_view(text)
    xla_entry = xla_module.computations()[-1]  # XLA prints the entry computation last
    assert xla_entry.name == ours.entry.name
    categories = module_categories(ours)
    checked = 0
    for xla_instruction in xla_entry.instructions():
        instr = ours.entry.instruction(xla_instruction.name)
        assert instr.opcode == _opcode(xla_instruction)
        expected = _expected(xla_instruction, comps)
        if instr.opcode == "copy":
            expected = categories.get(instr.name)
            assert expected in ("memcpy/memset", "copy/transpose")
        assert categories.get(instr.name) == expected, (instr.name, xla_instruction.to_string()[:300])
        checked += expected is not None
    assert checked == len(categories)  # the entry is the only computation that runs code of its own here
    return categories


def test_jax_cpu_module_with_ynnpack_fusions_against_xla(tmp_path):
    categories = _check_against_xla(YNN)
    assert Counter(categories.values()) == {
        "matmul/conv": 10, "reduction": 9, "fusion/elementwise": 10, "copy/transpose": 4,
    }
    # YNNPACK fusions: by what they compute, not by their name.
    assert {name: categories[name] for name in categories if name.startswith("ynn_fusion")} == {
        "ynn_fusion": "matmul/conv", "ynn_fusion.2": "matmul/conv", "ynn_fusion.3": "matmul/conv",
        "ynn_fusion.4": "matmul/conv", "ynn_fusion.6": "matmul/conv",  # softmax(q k^T): dot + reduce -> matmul
        "ynn_fusion.1": "reduction", "ynn_fusion.5": "reduction",  # reduce_sum of the layer norm
    }
    # A fusion named transpose_copy_* that also computes is elementwise; one that only moves data is a layout change.
    assert categories["transpose_copy_fusion"] == "fusion/elementwise"
    assert categories["transpose_copy_fusion.1"] == "copy/transpose"
    assert categories["wrapped_reduce-window"] == "reduction"
    assert categories["add_sqrt_fusion"] == "reduction"  # its name says nothing of the reduce inside


@pytest.mark.parametrize(("folder", "expected", "library_calls", "copies"), [
    ("vit_tiny_sm90_triton", {"reduction": 71, "matmul/conv": 45, "fusion/elementwise": 27, "copy/transpose": 25,
                              "memcpy/memset": 13}, 45, 13),
    ("vit_base_sm90_cublas", {"fusion/elementwise": 396, "reduction": 314, "matmul/conv": 245, "copy/transpose": 79,
                              "memcpy/memset": 60}, 245, 60),
])
def test_gpu_modules_against_xla_and_their_thunk_sequences(fixtures_dir, folder, expected, library_calls, copies):
    path = fixtures_dir / GPU_AOT.format(folder)
    categories = _check_against_xla(path)
    assert Counter(categories.values()) == expected
    thunks = (path.parent / "module_0001.jit_train_step.thunk_sequence.txt").read_text()
    # XLA's own list of what runs: cuBLAS calls + cuDNN convolutions + Triton GEMM kernels are the matmuls...
    gemm_kernels = len(re.findall(r"kCustomKernel .*(gemm|triton_dot)", thunks))
    assert len(re.findall(r": kCublasLtMatmul|: kConvolution", thunks)) + gemm_kernels == library_calls
    # ... and the kCopy thunks the memcpys.
    assert len(re.findall(r": kCopy ", thunks)) == copies


def test_custom_call_targets():
    for target in ("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8", "__cudnn$convForward",
                   "__cudnn$convBiasActivationForward", "__cudnn$fmhaSoftmax", "__onednn$matmul",
                   "__onednn$convolution", "te_fused_attn_forward_ffi"):
        assert custom_call_target_category(target) == "matmul/conv", target
    assert custom_call_target_category("__onednn$layernorm") == "reduction"
    assert custom_call_target_category("__gpu$TopK") == "reduction"
    assert custom_call_target_category("Sharding") is None


def test_kcustom_fusion_kinds(fixtures_dir):
    module = load_file(fixtures_dir / GPU_AOT.format("vit_tiny_sm90_triton"))[0].module
    by_kind = Counter()
    for instr in module.entry.instructions:
        if instr.fusion_kind == "kCustom":
            kind = instr.backend_config["fusion_backend_config"]["kind"]
            by_kind[(kind, instruction_category(instr))] += 1
    # 43 Triton GEMMs are matmuls; the 4 generic __triton fusions (softmax) are classified by their computation.
    assert by_kind == {("__triton_nested_gemm_fusion", "matmul/conv"): 43, ("__triton", "reduction"): 4}


def test_resolver_looks_events_up_by_module_op_and_kernel_name():
    module = parse_hlo_file(YNN)[0]
    resolve = category_resolver([module])

    def event(name, hlo_op=None, hlo_module=None, category="fusion/elementwise"):
        return Event(name, 0.0, 1.0, KERNEL, True, "XLA Ops", "/host:CPU", category, hlo_op=hlo_op,
                     hlo_module=hlo_module)

    assert resolve.classify(event("ynn_fusion.3", "ynn_fusion.3", module.name)) == ("matmul/conv", "hlo")
    assert resolve(event("ynn_fusion_5")) == "reduction"  # a GPU-style kernel name, no module named
    # Another program's op of the same name is not this module's; the name rules stand.
    assert resolve.classify(event("ynn_fusion.3", "ynn_fusion.3", "jit_other")) == ("fusion/elementwise", "names")
    assert resolve.classify(event("unknown_kernel")) == ("fusion/elementwise", "names")
    stats = summarize_events([event("ynn_fusion.3", "ynn_fusion.3", module.name), event("something")],
                             categories=resolve).to_dict()
    assert stats["categories"]["matmul/conv"] == 1.0 and stats["categories"]["fusion/elementwise"] == 1.0
    assert stats["category_source"] == "hlo" and stats["category_source_us"] == {"hlo": 1.0, "names": 1.0}


@pytest.fixture(scope="module")
def jax_run(every_mode_comparison):
    """The jax run of conftest's comparison of every mode (--dump-hlo --profile), read only."""
    return every_mode_comparison / "jax"


@pytest.mark.slow
def test_trace_stats_on_a_jax_run_takes_categories_from_its_hlo(jax_run, cli_run):
    code, stdout, stderr = cli_run("trace", "stats", str(jax_run), "--json")
    assert code == 0, stderr
    stats = json.loads(stdout)["traces"][0]
    assert stats["category_source"] == "hlo"
    assert stats["category_source_us"]["names"] == 0.0  # every op of the train step found in its module
    module = load_file(next((jax_run / "hlo").glob("*jit_train_step.cpu_after_optimizations.txt")))[0].module
    per_execution = Counter(module_categories(module).values())
    steps = [s for s in stats["per_step"] if s["kernels"]]
    assert steps
    for step in steps:  # each step runs every top-level instruction of the program once
        assert {k: v for k, v in step["executions_by_category"].items() if v} == per_execution
        # and holds the time of those executions only: a category's time per step is never more than the trace's
        # (a step's own duration is left free: on a loaded machine one op ran 40x its usual time)
        assert all(0 < us <= stats["categories"][category] * (1 + 1e-9)
                   for category, us in step["categories_us"].items() if step["executions_by_category"].get(category))
    totals = {category: sum(step["categories_us"].get(category, 0.0) for step in steps) for category in per_execution}
    assert all(total <= stats["categories"][category] * (1 + 1e-9) for category, total in totals.items()), totals
    # The patch convolution runs in a YNNPACK fusion: matmul/conv by the program, fusion/elementwise by its name.
    names = summarize_events(_device_events(jax_run)).to_dict()
    assert names["category_source"] == "names"
    assert stats["categories"]["matmul/conv"] > names["categories"]["matmul/conv"]
    assert stats["executions_by_category"]["matmul/conv"] > names["executions_by_category"]["matmul/conv"]


def _device_events(run):
    return [e for trace in load_traces(run) for e in trace.events]
