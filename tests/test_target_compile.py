"""`compile_for_target`: the vit-tiny train steps of JAX and PyTorch/XLA compiled for H100 and A100 on this CPU by XLA's
deviceless compile, with kernel counts checked against the thunk sequences XLA writes.

The end-to-end tests need the CUDA-plugin environment that `scripts/setup.sh` creates (`.venv-cuda`, via
`scripts/setup-cuda-target.sh`); without it they skip and say so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import cli_invoke, command

from hloscope.backends.jax_workload import build_jax_workload
from hloscope.errors import InputError, MissingDependency, UsageError
from hloscope.hlo.gpu_spec import resolve_target
from hloscope.hlo.kernels import kernel_breakdown
from hloscope.hlo.memory import signature_bytes
from hloscope.hlo.parser import parse_hlo_file
from hloscope.hlo.thunks import parse_thunk_sequence
from hloscope.runs.rundir import load_run
from hloscope.targets.capture_jax import lower_jax_train_step
from hloscope.targets.compile import WORKER, compile_for_target
from hloscope.targets.cuda_env import find_target_python

PLUGIN_PYTHON = find_target_python()
needs_plugin = pytest.mark.usefixtures("cuda_plugin")  # fails the test where .venv-cuda is missing (conftest)

REQUIRED_KINDS = {"hlo", "buffer_assignment", "memory_report", "memory_analysis", "thunk_sequence"}


def test_modes_without_an_xla_graph_are_refused(tmp_path):
    with pytest.raises(UsageError, match="--mode jax or torch_xla or torchax, not pytorch"):
        compile_for_target("pytorch", "vit-tiny", 8, "fp32", "h100", tmp_path)
    with pytest.raises(UsageError, match="GEMM backend"):
        compile_for_target("jax", "vit-tiny", 8, "fp32", "h100", tmp_path, gemm="magic")
    with pytest.raises(InputError, match="no such GPU target file"):
        compile_for_target("jax", "vit-tiny", 8, "fp32", tmp_path / "b200.txtpb", tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written before the inputs are known to be good


def test_a_missing_plugin_environment_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOSCOPE_TARGET_PYTHON", str(tmp_path / "no-such-python"))
    with pytest.raises(MissingDependency) as err:
        compile_for_target("jax", "vit-tiny", 8, "fp32", "a100", tmp_path)
    assert err.value.exit_code == 3 and "HLOSCOPE_TARGET_PYTHON" in str(err.value)


@needs_plugin
def test_worker_reports_a_module_xla_cannot_read(tmp_path):
    """A bad graph comes back as data (stage and reason), never as a traceback on the terminal."""
    (tmp_path / "bad.hlo.txt").write_text("HloModule broken\n\nENTRY main {\n  ROOT x = f32[] nonsense()\n}\n")
    (tmp_path / "t.txtpb").write_text(resolve_target("h100").text)
    request = {"module": str(tmp_path / "bad.hlo.txt"), "format": "hlo", "target_config": str(tmp_path / "t.txtpb"),
               "dump_dir": str(tmp_path / "dump"), "gemm": "auto", "result": str(tmp_path / "result.json")}
    (tmp_path / "request.json").write_text(json.dumps(request))
    done = command(PLUGIN_PYTHON, WORKER, tmp_path / "request.json")
    result = json.loads((tmp_path / "result.json").read_text())
    assert done.code == 1 and "Traceback" not in done.stderr
    assert result["ok"] is False and result["stage"] == "parse" and "bad.hlo.txt" in result["error"]


def _check_compiled(record: dict, run_dir: Path, framework: str) -> dict:
    assert record["status"] == "compiled", record["error"]
    kinds = {a["kind"] for a in record["artifacts"]}
    assert kinds >= REQUIRED_KINDS
    for artifact in record["artifacts"]:
        assert (run_dir / artifact["path"]).is_file()
        assert artifact["train_step"] is True and artifact["module"]
    (after,) = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "after_optimizations"]
    (thunk_file,) = [a for a in record["artifacts"] if a["kind"] == "thunk_sequence"
                     and a["stage"] == "after_optimizations"]
    (module,) = parse_hlo_file(run_dir / after["path"])
    thunks = parse_thunk_sequence(run_dir / thunk_file["path"])
    by_category = thunks.counts_by_category()
    # The HLO analysis's kernel count (generated kernels, cuBLAS/cuDNN calls, copies apart) is XLA's own thunk list.
    breakdown = kernel_breakdown(module, "gpu")
    assert breakdown.get("generated", 0) == by_category["kernel"] == len(thunks.launches)
    assert breakdown.get("cublas", 0) + breakdown.get("cudnn", 0) == by_category["library"]
    assert breakdown.get("copy", 0) == by_category["copy"]
    assert record["kernels"]["by_kind"] == thunks.counts_by_kind()
    # XLA's memory analysis: the arguments are exactly the entry computation's parameters.
    assert record["memory"]["argument_bytes"] == signature_bytes(module)["parameter_bytes"]
    assert record["memory"]["temp_bytes"] > 0
    analysis = json.loads((run_dir / f"hlo/{after['module']}.memory_analysis.json").read_text())
    assert analysis["argument_size_in_bytes"] == record["memory"]["argument_bytes"]
    assert record["compiles"]["capture"]["framework"] == framework
    assert record["compiles"]["autotuned"] is False
    assert "lower bound" in record["roofline"]["label"]
    assert record["roofline"]["launches"] == len(thunks.thunks)
    return {"thunks": thunks, "module": module}


@pytest.fixture(scope="module")
def jax_a100_cli(tmp_path_factory) -> tuple[int, str, str, Path]:
    """`hloscope run --mode jax --model vit-tiny --batch-size 8 --target a100 --json` in this process: (exit code,
    stdout, stderr, run directory). The CLI's compiled run, and the jax A100 compile the tests below read (the call of
    compile_for_target that `compiled` would make)."""
    out = tmp_path_factory.mktemp("jax_a100_cli")
    code, stdout, stderr = cli_invoke("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "8", "--target",
                                      "a100", "--out", str(out), "--run-id", "jax-a100", "--json")
    return code, stdout, stderr, out / "jax-a100"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory, request):
    """Each (framework, target) compiled once for the tests below: (its run record, its run directory). For the H100,
    the runs of conftest's `compare --target h100` of both frameworks (vit-tiny, batch 8: the same call of
    compile_for_target, made once per session and shared with test_target_compare); for jax on the A100, the CLI's
    run of jax_a100_cli; for torch_xla on the A100, compile_for_target here."""
    cache: dict = {}

    def get(mode: str, target: str):
        if (mode, target) not in cache:
            if target == "h100":
                directory, _ = request.getfixturevalue("target_comparison")
                run_dir = directory / mode
                cache[mode, target] = (load_run(run_dir).to_dict(), run_dir)
            elif mode == "jax":
                code, _, stderr, run_dir = request.getfixturevalue("jax_a100_cli")
                assert code == 0, stderr
                cache[mode, target] = (load_run(run_dir).to_dict(), run_dir)
            else:
                run_dir = tmp_path_factory.mktemp(f"{mode}_{target}")
                cache[mode, target] = (compile_for_target(mode, "vit-tiny", 8, "fp32", target, run_dir), run_dir)
        return cache[mode, target]

    return get


@pytest.mark.slow
@needs_plugin
def test_jax_train_step_for_h100(compiled):
    record, run_dir = compiled("jax", "h100")
    checked = _check_compiled(record, run_dir, "jax")
    assert record["target"]["compute_capability"] == "9.0a"
    assert checked["module"].name == "jit_train_step"
    # 81,226 parameters (FACTS.md) + the TrainState step counter + 8 images 32x32x3 f32 + 8 int32 labels.
    assert record["memory"]["argument_bytes"] == 81_226 * 4 + 4 + 8 * 32 * 32 * 3 * 4 + 8 * 4
    assert any(a["kind"] == "stablehlo" and a["stage"] == "input" for a in record["artifacts"])


@pytest.mark.slow
@needs_plugin
def test_jax_train_step_for_a100_falls_back_to_cublas(compiled):
    """XLA's Triton GEMM path cannot tile ViT-tiny's GEMMs for sm_8.0 without autotuning (FACTS.md): cuBLAS instead,
    recorded in the run."""
    record, run_dir = compiled("jax", "a100")
    checked = _check_compiled(record, run_dir, "jax")
    compiles = record["compiles"]
    assert compiles["gemm_backend"] == "cublas" and compiles["triton_gemm_fallback"] is True
    assert "Couldn't find output tile sizes" in compiles["fallback_reason"]
    assert [a["gemm"] for a in compiles["attempts"]] == ["triton", "cublas"]
    assert any("cuBLAS" in note for note in record["notes"])
    assert checked["thunks"].counts_by_kind().get("kCublasLtMatmul", 0) > 0


@pytest.mark.slow
@needs_plugin
@pytest.mark.parametrize("target", ["h100", "a100"])
def test_torch_xla_train_step(compiled, target):
    record, run_dir = compiled("torch_xla", target)
    checked = _check_compiled(record, run_dir, "torch_xla")
    capture = record["compiles"]["capture"]
    assert checked["module"].name == capture["module"] and capture["module"].startswith("SyncTensorsGraph.")
    # the steady-state graph: compiled in step 1, reused by every later step (each on another batch of the pool)
    assert capture["graphs_compiled_per_step"][1:] == [[]] * (capture["steps"] - 1)
    assert len(capture["graphs_compiled_per_step"][0]) == 1
    (graph,) = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "input"]
    # torch_xla donates its parameter buffers (HLO `buffer_donor`); the GPU compile must see that too: XLA aliases
    # exactly the donated parameters that an output can reuse, here every model parameter (81,226 f32).
    header = (run_dir / graph["path"]).read_text().split("\n", 1)[0]
    assert "buffer_donor=" in header and record["compiles"]["donated_parameters"] > 0
    assert record["memory"]["alias_bytes"] == 81_226 * 4


@pytest.mark.slow
@needs_plugin
def test_both_frameworks_meet_the_same_compiler(compiled):
    jax_record, _ = compiled("jax", "h100")
    torch_record, _ = compiled("torch_xla", "h100")
    assert jax_record["target"]["compiler"] == torch_record["target"]["compiler"]
    assert jax_record["target"]["compiler"]["jaxlib"] == "0.10.2"
    # same model and batch: the same parameter and image bytes go in (torch_xla adds int64 labels and scalars)
    assert abs(jax_record["memory"]["argument_bytes"] - torch_record["memory"]["argument_bytes"]) < 1024


def test_cli_refuses_before_making_a_directory(cli_run, tmp_path):
    code, _out, err = cli_run("run", "--mode", "pytorch", "--model", "vit-tiny", "--target", "h100", "--out",
                             str(tmp_path))
    assert code == 2 and "--target compiles XLA graphs" in err and len(err.strip().splitlines()) == 1
    code, _out, err = cli_run("run", "--mode", "jax", "--model", "vit-tiny", "--target", str(tmp_path / "x.txtpb"),
                             "--out", str(tmp_path))
    assert code == 2 and "no such GPU target file" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # refused before a run directory was made


@pytest.mark.slow
@needs_plugin
def test_cli_run_target_writes_a_compiled_run(jax_a100_cli):
    code, out, err, run_dir = jax_a100_cli
    assert code == 0, err
    record = load_run(run_dir).to_dict()  # validates the record and that every artifact exists
    assert json.loads(out)["status"] == record["status"] == "compiled"
    assert record["config"]["target"] == "a100" and record["timing"]["step_times_s"] == []
    assert record["kernels"]["kernel_launches"] > 0 and "lower bound" in record["roofline"]["label"]


@pytest.mark.slow
def test_jax_graph_is_the_timed_step(tmp_path):
    """The StableHLO handed to the GPU compiler is, text for text, what `run --mode jax` lowers and times on the CPU:
    JAX's lowering of this step does not depend on the platform."""
    import jax

    info = lower_jax_train_step("vit-tiny", 8, "fp32", 0, tmp_path / "step.mlir")
    workload = build_jax_workload("vit-tiny", 8, "fp32", 0)
    timed = jax.jit(workload.train_step).lower(workload.state, *workload.batch).as_text(debug_info=True)
    ours = (tmp_path / "step.mlir").read_text()
    assert _without_locations(ours) == _without_locations(timed)
    assert ours.count("loc(") > 1000  # source locations kept: XLA turns them into op_name metadata
    assert info["matmul_precision"] == "highest" and info["module"] == "jit_train_step"


def _without_locations(mlir: str) -> str:
    """MLIR text without its location table and `loc(#locN)` references (their numbering differs between lowerings)."""
    lines = [line for line in mlir.splitlines() if not line.startswith("#loc")]
    return re.sub(r"\s*loc\((?:[^()]|\([^()]*\))*\)", "", "\n".join(lines))


@pytest.mark.slow
@needs_plugin
def test_torch_xla_graph_is_the_timed_step(compiled, device_run):
    """The HLO captured for the GPU compile is, instruction for instruction, the train-step graph that
    `run --mode torch_xla --dump-hlo` times (apart from the op_name metadata XLA_HLO_DEBUG adds): conftest's one-device
    run, batch 8 as here."""
    record, run_dir = compiled("torch_xla", "h100")
    (graph,) = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "input"]
    timed = device_run("torch_xla", 1)
    assert timed["config"]["batch_size"] == 8
    (timed_graph,) = [a for a in timed["artifacts"] if a["kind"] == "hlo" and a["stage"] == "before_optimizations"
                      and a["train_step"]]

    def without_metadata(text: str) -> str:
        return re.sub(r", metadata=\{[^}]*\}", "", text)

    ours = (run_dir / graph["path"]).read_text()
    theirs = (Path(timed["_dir"]) / timed_graph["path"]).read_text()
    assert without_metadata(ours) == without_metadata(theirs)
    assert ours.count("op_name=") > 500
