"""`hloscope hlo stats`: numbers checked against XLA itself (HloCostAnalysis, thunk sequences) and the fixtures' facts;
op names printed as written however much they look like markup; computations called 400 deep analysed. Broken HLO is
tests/test_hlo_bad_input.py's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import (
    FIXTURES,
    HOSTILE_NAMES,
    assert_no_traceback,
    fixture,
    hlo_fixture_files,
    hloscope,
    python,
    split_for_xla,
    tiny_dot_module,
)

from hloscope.hlo import cost as cost_module
from hloscope.hlo.attribution import kernels_by_source, layer_of
from hloscope.hlo.cost import module_cost
from hloscope.hlo.kernels import kernel_breakdown
from hloscope.hlo.load import load_modules
from hloscope.hlo.opcodes import OPCODES
from hloscope.hlo.ops import collectives
from hloscope.hlo.parser import parse_hlo_file, parse_hlo_text
from hloscope.hlo.results import BufferAssignment, JoinedLaunch, MemoryReport, ThunkCheck
from hloscope.hlo.roofline import roofline_for_module_file
from hloscope.hlo.stats import module_stats
from hloscope.runs import rundir

GPU_AOT = sorted((FIXTURES / "gpu_aot").glob("*/")) if (FIXTURES / "gpu_aot").is_dir() else []
REQUIRED_KEYS = ["name", "file", "stage", "platform", "computations", "instructions", "opcodes", "fusions", "kernels",
                 "custom_calls", "flops", "bytes_accessed", "memory", "collectives"]


def xla_cost(text: str) -> dict:
    from jaxlib import _hlo, _jax

    return _jax.hlo_module_cost_analysis(_jax.get_tfrt_cpu_client(), _hlo.hlo_module_from_text(text))


def assert_close_to_xla(ours, theirs: dict, custom_calls: int, rel: float = 1e-4):
    """XLA's generic analysis sums float32 values (rounding) and counts each custom call as -1 FLOP and -1 byte;
    hloscope's cuBLAS/cuDNN figures (library_flops/bytes) are on top of it."""
    generic = {"flops": ours.flops - ours.library_flops, "transcendentals": ours.transcendentals,
               "bytes accessed": ours.bytes_accessed - ours.library_bytes}
    for key, value in generic.items():
        expected = theirs.get(key, 0.0)
        assert value == pytest.approx(expected, rel=rel, abs=custom_calls + 1), key


@pytest.mark.parametrize("path", hlo_fixture_files(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_cost_agrees_with_xla_cost_analysis(path: Path):
    for module, chunk in zip(parse_hlo_file(path), split_for_xla(path.read_text())):
        cost, _ = module_cost(module)
        custom_calls = sum(1 for i in module.all_instructions() if i.opcode == "custom-call")
        assert_close_to_xla(cost, xla_cost(chunk), custom_calls)


@pytest.mark.parametrize("folder", [f for f in GPU_AOT if "cublas" in f.name], ids=lambda p: p.name)
def test_cublas_flops_make_the_optimized_module_add_up(folder: Path):
    """After XLA:GPU turns dots into cuBLAS calls, their FLOPs (GpuHloCostAnalysis convention) bring the optimized
    module's total back to the unoptimized module's, which still has its dots: within 0.1%."""
    before, after = (module_cost(m.module)[0] for m in load_modules(folder))
    assert after.library_flops > 0.99 * after.flops - 1e11
    assert after.flops == pytest.approx(before.flops, rel=1e-3)


def thunk_counts(path: Path) -> dict[str, int]:
    """Thunk kinds in XLA's thunk_sequence.txt, counted with a plain regex (`001: kCopy  [...] ...`)."""
    counts: dict[str, int] = {}
    for kind in re.findall(r"(?m)^\d+:\s+(k\w+)", path.read_text()):
        counts[kind] = counts.get(kind, 0) + 1
    return counts


@pytest.mark.parametrize("folder", GPU_AOT, ids=lambda p: p.name)
def test_gpu_kernel_count_agrees_with_xla_thunk_sequence(folder: Path):
    (after,) = [m for m in load_modules(folder) if m.stage == "after_optimizations"]
    assert after.platform == "gpu" and after.gpu_arch.startswith("sm_")
    stats = module_stats(after)
    thunks = thunk_counts(next(folder.glob("*thunk_sequence.txt")))
    breakdown = stats.kernel_breakdown
    assert breakdown.get("generated", 0) == thunks.get("kCustomKernel", 0)
    assert breakdown.get("cublas", 0) == thunks.get("kCublasLtMatmul", 0) + thunks.get("kGemm", 0)
    assert breakdown.get("cudnn", 0) == thunks.get("kConvolution", 0) + thunks.get("kCuDnn", 0)
    assert stats.copies == thunks.get("kCopy", 0)
    assert stats.kernels == sum(n for kind, n in thunks.items() if kind != "kCopy")
    # and launch by launch, in order, through the GPU-target reader of the same file
    assert isinstance(stats.thunk_sequence, ThunkCheck)
    assert stats.thunk_sequence.agrees, stats.thunk_sequence.reason
    launches = module_stats(after, with_launches=True).thunk_sequence.launches
    assert len(launches) == sum(thunks.values())
    assert all(isinstance(row, JoinedLaunch) for row in launches)
    assert all(row.grid for row in launches if row.thunk_kind == "kCustomKernel")


def test_gpu_aot_facts_from_sources_md():
    folder = fixture("gpu_aot/vit_tiny_sm90_triton")
    (after,) = [m for m in load_modules(folder) if m.stage == "after_optimizations"]
    stats = module_stats(after)
    fusions = stats.fusions
    assert (fusions["kLoop"], fusions["kInput"]) == (81, 38)
    assert sum(n for k, n in fusions.items() if k.startswith("kCustom")) == 47
    assert fusions["kCustom:__triton"] == 4
    assert stats.custom_calls == {"__cudnn$convBiasActivationForward": 2}
    assert stats.kernels == 168 and stats.copies == 13
    base = next(m for m in load_modules(FIXTURES / "gpu_aot/vit_base_sm90_cublas") if m.stage == "after_optimizations")
    base_stats = module_stats(base)
    assert base_stats.custom_calls["__cublas$lt$matmul"] == 243
    assert (base_stats.fusions["kLoop"], base_stats.fusions["kInput"]) == (399, 354)


def test_memory_from_buffer_assignment_and_report():
    folder = fixture("gpu_aot/mlp_sm90_triton")
    (after,) = [m for m in load_modules(folder) if m.stage == "after_optimizations"]
    memory = module_stats(after).memory
    text = Path(after.buffer_assignment).read_text()
    sizes = [int(s) for s in re.findall(r"(?m)^allocation \d+: size (\d+)", text)]
    assert isinstance(memory.buffer_assignment, BufferAssignment) and isinstance(memory.memory_report, MemoryReport)
    assert memory.buffer_assignment.allocations == len(sizes)
    assert memory.buffer_assignment.largest[0].size == max(sizes) == 5214480
    assert memory.memory_report.by_memory_space["default (color=0)"] == 8295416
    # f32[512] + f32[784,512] + f32[512] + f32[512,512] + f32[10] + f32[512,10] + f32[128,784] + s32[128]
    assert memory.parameter_bytes == 4 * (512 + 784 * 512 + 512 + 512 * 512 + 10 + 512 * 10 + 128 * 784 + 128)
    tpu = load_modules(FIXTURES / "pytorch_xla/keep_rolled_script/log/module_0002.jit_f.after_optimizations.txt")[0]
    assert tpu.platform == "tpu"
    assignment = module_stats(tpu).memory.buffer_assignment
    assert isinstance(assignment, BufferAssignment) and assignment.total_bytes == 1024  # "Total bytes used: 1024"


def test_stats_json_cli(cli_run):
    path = fixture("openxla_xla/gpu_tests/kernel_reuse.hlo")
    code, out, err = cli_run("hlo", "stats", "--json", str(path))
    assert code == 0, err
    modules = json.loads(out)["modules"]
    assert len(modules) == 5  # the file holds 5 modules separated by `// -----`
    for module in modules:
        assert list(module)[: len(REQUIRED_KEYS)] == REQUIRED_KEYS
        assert module["platform"] == "gpu"
        assert sum(module["opcodes"].values()) == module["instructions"]
        generic = module["flops"] - module["library_flops"]
        assert module["xla_cost"]["flops"] == pytest.approx(generic, abs=sum(module["custom_calls"].values()) + 1)
    first = modules[0]
    assert first["computations"] == 4 and first["instructions"] == 21
    assert first["fusions"] == {"kLoop": 3} and first["custom_calls"] == {"__cublas$lt$matmul": 4}
    assert first["kernels"] == 7


def test_stats_tables_cli(cli_run):
    folder = fixture("gpu_aot/mlp_sm90_triton")
    code, out, err = cli_run("hlo", "stats", "--no-xla-cost", str(folder))
    assert code == 0, err
    assert "jit_train_step" in out and "kernels by kind" in out and "before_optimizations" in out


def test_custom_calls_xla_cannot_cost_are_not_shown_as_negative_figures(cli_run):
    """XLA's HloCostAnalysis counts each custom call as -1 FLOP and -1 byte: kernel_reuse.hlo's first module (4 cuBLAS
    calls, 3 loop fusions) gets -4 FLOPs from XLA. JSON keeps XLA's figures and says how many custom calls are in them;
    the table shows them with those taken out, which is hloscope's own figure without library calls."""
    path = FIXTURES / "openxla_xla/gpu_tests/kernel_reuse.hlo"
    code, out, err = cli_run("hlo", "stats", "--json", str(path))
    assert code == 0, err
    first = json.loads(out)["modules"][0]
    assert first["xla_cost"]["flops"] == -4 and first["xla_cost"]["unknown_custom_calls"] == 4
    assert first["xla_cost"]["bytes_accessed"] + 4 == first["bytes_accessed"] - first["library_bytes"] == 632
    code, out, err = cli_run("hlo", "stats", str(path))
    assert code == 0, err
    table = out.split("KernelReuse", 2)[1]
    flops_row = next(line for line in table.splitlines() if "FLOPs without library calls" in line)
    assert "-4" not in flops_row and flops_row.split("│")[-1].strip() == "0"
    assert "counts each as -1 FLOP and -1 byte" in " ".join(table.split())
    assert "-4 FLOPs, 628 bytes" in " ".join(table.split())


@pytest.mark.parametrize("folder", [f for f in GPU_AOT if f.name in ("vit_base_sm80_cublas", "mlp_sm90_triton")],
                         ids=lambda p: p.name)
def test_roofline_beside_a_gpu_module_with_its_target_config(cli_run, folder: Path):
    """An optimized GPU module with XLA's gpu_target_config.pbtxt beside it gets the roofline lower bound of
    hloscope.hlo.roofline for that GPU, labelled as a bound; its unoptimized twin and a copy without the config
    get none."""
    code, out, err = cli_run("hlo", "stats", "--json", "--no-xla-cost", str(folder))
    assert code == 0, err
    before, after = json.loads(out)["modules"]
    assert "roofline" not in before and before["stage"] == "before_optimizations"
    (after_file,) = folder.glob("*gpu_after_optimizations.txt")
    assert after["roofline"] == roofline_for_module_file(after_file)["step"]
    assert "lower bound" in after["roofline"]["label"] and after["roofline"]["launches"] == after["kernels"] + after["copies"]
    code, out, err = cli_run("hlo", "stats", "--no-xla-cost", str(folder))
    text = " ".join(out.split())
    assert "roofline LOWER BOUND, not a prediction" in text
    assert f"{after['roofline']['serial_s'] * 1e3:.3f} ms serial" in text


def test_no_roofline_without_a_target_config(cli_run, tmp_path):
    folder = FIXTURES / "gpu_aot/mlp_sm90_triton"
    (after_file,) = folder.glob("*gpu_after_optimizations.txt")
    copy = tmp_path / after_file.name
    copy.write_text(after_file.read_text())
    code, out, err = cli_run("hlo", "stats", "--json", "--no-xla-cost", str(copy))
    assert code == 0, err
    assert "roofline" not in json.loads(out)["modules"][0]


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).parent / "data/bad").glob("hlo_*")))
def test_bad_hlo_inputs_exit_2_with_one_line(cli_run, name):
    path = Path(__file__).parent / "data/bad" / name
    code, _out, err = cli_run("hlo", "stats", "--json", "--no-xla-cost", str(path))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert re.match(rf"hloscope: error: {re.escape(str(path))}:\d+:\d+: \S", lines[0]), lines[0]


def test_missing_path_and_empty_dir(cli_run, tmp_path):
    code, _, err = cli_run("hlo", "stats", str(tmp_path / "nope.hlo"))
    assert code == 2 and "no such file" in err
    code, _, err = cli_run("hlo", "stats", str(tmp_path))
    assert code == 2 and "no HLO modules here" in err


def _make_run(root: Path, mode: str, with_hlo: bool) -> Path:
    """A run directory as the harness writes it (rundir.write_run), holding the MLP GPU dump as its artifacts."""
    run = rundir.create_run_dir(root, run_id=mode.replace("+", "_"))
    artifacts = []
    if with_hlo:
        (run / "hlo").mkdir()
        for file in sorted((FIXTURES / "gpu_aot/mlp_sm90_triton").glob("module_0001.*")):
            shutil.copy(file, run / "hlo" / file.name)
            kind = "hlo" if file.name.endswith("optimizations.txt") else "other"
            stage = "before_optimizations" if "before" in file.name else "after_optimizations"
            artifacts.append({"kind": kind, "path": f"hlo/{file.name}", "module": "jit_train_step", "stage": stage,
                              "train_step": True})
        # another module of the same run (e.g. an init computation) that is not the train step
        shutil.copy(FIXTURES / "openxla_xla/gpu_tests/single_instruction.hlo", run / "hlo" / "module_0000.jit_init.before_optimizations.txt")
        artifacts.append({"kind": "hlo", "path": "hlo/module_0000.jit_init.before_optimizations.txt", "module": "jit_init",
                          "stage": "before_optimizations", "train_step": False})
    rundir.write_run(run, {"schema_version": 1, "run_id": run.name, "mode": mode, "status": "compiled", "error": None,
                           "config": {}, "artifacts": artifacts})
    return run


def test_run_and_comparison_directories(tmp_path, cli_run):
    fixture("gpu_aot/mlp_sm90_triton")

    jax_run = _make_run(tmp_path, "jax", with_hlo=True)
    code, out, err = cli_run("hlo", "stats", "--json", "--no-xla-cost", str(jax_run))
    assert code == 0, err
    modules = json.loads(out)["modules"]
    assert [(m["name"], m["stage"], m["platform"]) for m in modules] == [
        ("jit_train_step", "before_optimizations", "gpu"), ("jit_train_step", "after_optimizations", "gpu")
    ]
    assert modules[1]["kernels"] == 24 and modules[1]["memory"]["buffer_assignment"]["allocations"] > 0
    _make_run(tmp_path, "pytorch", with_hlo=False)  # eager PyTorch records no HLO
    rundir.write_comparison(tmp_path, {"schema_version": 1, "comparison_id": "c", "config": {},
                                       "modes": [{"mode": "pytorch", "dir": "pytorch"}, {"mode": "jax", "dir": "jax"}]})
    code, out, err = cli_run("hlo", "stats", "--json", "--no-xla-cost", str(tmp_path))
    assert code == 0, err
    assert [m["name"] for m in json.loads(out)["modules"]] == ["jit_train_step", "jit_train_step"]
    # a run.json that lists a missing HLO file is reported by name
    (jax_run / "hlo" / "module_0001.jit_train_step.before_optimizations.txt").unlink()
    code, _, err = cli_run("hlo", "stats", "--json", str(jax_run))
    assert code == 2 and "module_0001.jit_train_step.before_optimizations.txt" in err and "missing" in err


def test_too_large_for_memory_is_refused_up_front(cli_run, monkeypatch):
    path = fixture("openxla_xla/benchmarks_hlo/hlo_llama31_8b_bf16_1x8.hlo")
    monkeypatch.setenv("HLOSCOPE_HLO_MAX_BYTES", "1000000")
    code, _, err = cli_run("hlo", "stats", "--json", str(path))
    assert code == 2 and "refusing rather than running out of memory" in err and len(err.strip().splitlines()) == 1


def test_kernels_by_source_layer():
    folder = fixture("gpu_aot/vit_tiny_sm90_triton")

    assert layer_of("jit(train_step)/transpose(jvp(ViT))/vit/encoder/layer/0/attention/dot_general") == "ViT/vit/encoder/layer/0 (backward)"
    assert layer_of("jit(train_step)/jvp()/add") == "add (top level)"
    (after,) = [m for m in load_modules(folder) if m.stage == "after_optimizations"]
    rows = {r["source"]: r for r in kernels_by_source(after.module, "gpu")}
    stats = module_stats(after)
    assert sum(r["kernels"] for r in rows.values()) == stats.kernels + stats.copies
    layer = "FlaxViTForImageClassificationModule/vit/encoder/layer/{}"
    # the two encoder layers are the same code: the same kernels, forward and backward
    assert rows[layer.format(0)]["kernels"] == rows[layer.format(1)]["kernels"] > 0
    assert rows[layer.format(0) + " (backward)"]["kernels"] == rows[layer.format(1) + " (backward)"]["kernels"] > 0


def test_collectives_counted_with_their_bytes():
    path = fixture("openxla_xla/benchmarks_hlo/hlo_llama31_8b_bf16_1x8.hlo")
    size = {"bf16": 2, "f32": 4, "s32": 4}
    expected: dict[str, list[int]] = {}
    # an independent count: `= <shape> all-gather(` lines, every array in the (possibly tuple) shape
    for shape, op in re.findall(r"= (\(.*?\)|\S+) (all-gather|all-reduce)\(", path.read_text()):
        entry = expected.setdefault(op, [0, 0])
        entry[0] += 1
        for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", shape):
            n = 1
            for d in filter(None, dims.split(",")):
                n *= int(d)
            entry[1] += n * size[dtype]
    (loaded,) = load_modules(path)
    got = module_stats(loaded).collectives.by_opcode
    assert {op: [v.count, v.bytes] for op, v in got.items()} == expected
    assert expected["all-reduce"][0] == 1197 and expected["all-gather"][0] == 450


def test_async_collective_bytes_and_kernels():
    text = """HloModule m, is_scheduled=true

ENTRY main {
  p = f32[8,128]{1,0} parameter(0)
  ags = (f32[8,128]{1,0}, f32[16,128]{1,0}) all-gather-start(p), replica_groups={{0,1}}, dimensions={0}
  agd = f32[16,128]{1,0} all-gather-done(ags)
  ars = f32[16,128]{1,0} all-reduce-start(agd), replica_groups={{0,1}}, to_apply=add
  ROOT ard = f32[16,128]{1,0} all-reduce-done(ars)
}

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""
    (module,) = parse_hlo_text(text)
    found = collectives(module)
    assert found["by_opcode"] == {"all-gather-start": {"count": 1, "bytes": 16 * 128 * 4, "replica_groups": {"{{0,1}}": 1}},
                                  "all-reduce-start": {"count": 1, "bytes": 16 * 128 * 4, "replica_groups": {"{{0,1}}": 1}}}
    assert kernel_breakdown(module, "gpu") == {"collective": 2}


def test_hlo_stats_needs_no_framework():
    """`hloscope hlo stats` on a dump copied from elsewhere imports neither torch nor JAX (only jaxlib for --xla-cost)."""
    folder = fixture("gpu_aot/mlp_sm90_triton")
    code = (
        "import sys\n"
        "from hloscope.cli import main\n"
        "try:\n"
        f"    main(['hlo', 'stats', '--json', '--no-xla-cost', {str(folder)!r}])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in ('torch', 'torch_xla', 'jax', 'jaxlib', 'flax', 'transformers') if m in sys.modules), file=sys.stderr)\n"
    )
    result = python("-c", code, timeout=120)
    assert result.code == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]"
    assert json.loads(result.stdout)["modules"][1]["kernels"] == 24


def test_tpu_dump_and_top_instructions():
    path = fixture("pytorch_xla/keep_rolled_script/log")
    before, after = load_modules(path)
    assert (before.stage, after.stage) == ("before_optimizations", "after_optimizations")
    stats = module_stats(after)
    # SOURCES.md: ENTRY main.6, scheduled, 1 kLoop fusion, 0 custom-call; TPU layouts {0:T(128)}
    assert (stats.platform, stats.entry, stats.is_scheduled) == ("tpu", "main.6", True)
    assert stats.fusions == {"kLoop": 1} and stats.custom_calls == {} and stats.kernels == 1
    (top,) = stats.top_instructions
    # the fusion: convert + add over s32[9] -> f32[9] (the broadcast is free): 18 FLOPs; reads 36 B, writes 36 B
    assert (top.name, top.flops, top.bytes_accessed) == ("fusion", 18.0, 72.0)
    assert top.op_name == "jit(f)/jit(main)/add"


def test_every_opcode_is_free_elementwise_handled_or_default_bytes_only():
    """Each opcode falls in exactly one cost rule: free, elementwise, a handler of its own, or its default bytes alone
    (the set the compiled loop also relies on); handlers are only for opcodes XLA knows."""
    handled = set(cost_module._HANDLERS)
    rules = [cost_module.ZERO_BYTES, cost_module.ELEMENTWISE, handled, cost_module.DEFAULT_BYTES_ONLY]
    assert handled <= set(OPCODES)
    assert set().union(*rules) >= set(OPCODES)
    assert sum(len(rule) for rule in rules) == len(set().union(*rules))
    assert {"copy", "broadcast", "reshape", "concatenate", "pad", "all-gather"} <= cost_module.DEFAULT_BYTES_ONLY


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_op_names_with_brackets_print_as_written_in_hlo_stats(tmp_path, name):
    result = hloscope("hlo", "stats", "--no-xla-cost", tiny_dot_module(tmp_path / "m.hlo", name), timeout=120)
    assert_no_traceback(result)
    assert result.code == 0, result.stderr
    assert name[-50:] in result.stdout.replace("\n", ""), result.stdout


def _call_chain(path: Path, depth: int) -> Path:
    """Valid HLO (XLA's own parser accepts it) whose computations call each other `depth` deep."""
    lines = ["HloModule chain", ""]
    for i in range(depth):
        body = "negate(p)" if i == 0 else f"call(p), to_apply=comp{i - 1}"
        lines += [f"comp{i} {{", "  p = f32[4]{0} parameter(0)", f"  ROOT r = f32[4]{{0}} {body}", "}", ""]
    lines += ["ENTRY main {", "  p = f32[4]{0} parameter(0)", f"  ROOT r = f32[4]{{0}} call(p), to_apply=comp{depth - 1}",
              "}", ""]
    path.write_text("\n".join(lines))
    return path


def test_deeply_nested_computations_do_not_crash_hlo_stats(tmp_path):
    path = _call_chain(tmp_path / "chain.hlo", 400)
    result = hloscope("hlo", "stats", "--json", "--no-xla-cost", path)
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    assert result.code == 0, result.stderr[-1500:]
    (module,) = json.loads(result.stdout)["modules"]
    assert module["computations"] == 401
    assert module["flops"] == 4  # the one negate of f32[4] at the bottom of the chain, as XLA's HloCostAnalysis counts
