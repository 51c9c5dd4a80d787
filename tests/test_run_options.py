"""Option handling that needs no training: clear one-line refusals, dump file classification."""

from __future__ import annotations

from importlib import metadata

import pytest
from helpers import hloscope

from hloscope.backends import parse_modes
from hloscope.backends.data import synthetic_pool, torch_loader
from hloscope.backends.xla_dump import classify
from hloscope.errors import UsageError
from hloscope.models.presets import get_preset
from hloscope.runs.rundir import load_run


def test_torch_xla_on_cuda_with_2_9_says_why_and_what_to_install(cli_run, tmp_path):
    # requirements.txt pins torch_xla 2.9, the first release without CUDA
    assert tuple(int(p) for p in metadata.version("torch_xla").split(".")[:2]) >= (2, 9)
    code, _, err = cli_run("run", "--mode", "torch_xla", "--device", "cuda", "--model", "vit-tiny", "--out", str(tmp_path))
    last = err.strip().splitlines()[-1]
    assert code == 2 and "Traceback" not in err
    assert "has no CUDA support (removed in 2.9)" in last and "torch_xla<=2.8" in last
    assert not list(tmp_path.iterdir())  # refused before a run directory was made


def test_unknown_modes_are_refused_in_one_line(cli_run, tmp_path):
    code, _, err = cli_run("compare", "--modes", "jax,tensorflow", "--out", str(tmp_path))
    assert code == 2 and err.strip() == ("hloscope: error: unknown mode(s) tensorflow; choose from pytorch, "
                                         "pytorch+compile, torch_xla, torch_xla+compile, jax, torchax")
    with pytest.raises(UsageError):
        parse_modes(" , ")
    assert parse_modes("jax, pytorch,jax") == ["jax", "pytorch"]


@pytest.mark.parametrize("name, kind, module, stage", [
    ("module_0150.jit_train_step.before_optimizations.txt", "hlo", "jit_train_step", "before_optimizations"),
    ("module_0150.jit_train_step.cpu_after_optimizations.txt", "hlo", "jit_train_step", "after_optimizations"),
    ("module_0150.jit_train_step.cpu_after_optimizations-buffer-assignment.txt", "buffer_assignment", "jit_train_step",
     "after_optimizations"),
    ("module_0150.jit_train_step.cpu_after_optimizations-memory-usage-report.txt", "memory_report", "jit_train_step",
     "after_optimizations"),
    ("module_0000.SyncTensorsGraph.1331.cpu_after_optimizations.txt", "hlo", "SyncTensorsGraph.1331",
     "after_optimizations"),
    ("module_0001.jit_step.sm_9.0_gpu_after_optimizations.txt", "hlo", "jit_step", "after_optimizations"),
    ("module_0003.jit_step.thunk_sequence.txt", "thunk_sequence", "jit_step", "after_optimizations"),
    ("module_0000.SyncTensorsGraph.66.divide.0_elemental_kernel_module.ir-no-opt.ll", "llvm_ir", "SyncTensorsGraph.66",
     "codegen"),
    ("module_0004.jit_f.obj-file.__compute_module_wrapped_sine.o", "object_file", "jit_f", "codegen"),
    # a real TPU dump (libtpu 0.0.42.1, JAX 0.10.2, TPU v5e): XLA tags each file with the compilation after the module
    ("module_0343.jit_train_step.cl_933746096.after_optimizations.txt", "hlo", "jit_train_step", "after_optimizations"),
    ("module_0343.jit_train_step.cl_933746096.before_optimizations.txt", "hlo", "jit_train_step",
     "before_optimizations"),
    ("module_0343.jit_train_step.cl_933746096.after_optimizations-buffer-assignment.txt", "buffer_assignment",
     "jit_train_step", "after_optimizations"),
    ("module_0343.jit_train_step.cl_933746096.after_optimizations-memory-usage-report.txt", "memory_report",
     "jit_train_step", "after_optimizations"),
    ("module_0343.jit_train_step.cl_933746096.tpu_comp_env.txt", "other", "jit_train_step", None),
])
def test_xla_dump_files_are_classified_by_name(name, kind, module, stage):
    entry = classify(name)
    assert (entry["kind"], entry["module"], entry["stage"]) == (kind, module, stage)


def test_files_xla_does_not_write_are_ignored():
    assert classify("notes.txt") is None and classify("module_x.y.txt") is None


def test_the_loader_draws_fresh_random_batches_like_the_benchmark():
    preset = get_preset("vit-tiny")
    batches = list(torch_loader(preset, batch_size=4, n_batches=3, seed=0))
    assert len(batches) == 3
    images, labels = batches[0]
    assert tuple(images.shape) == (4, 3, 32, 32) and tuple(labels.shape) == (4,)
    assert int(labels.min()) >= 0 and int(labels.max()) < preset.num_labels
    assert not bool((batches[0][0] == batches[1][0]).all())
    pool = synthetic_pool(preset, 4, seed=0)
    assert all((a[0] == b[0]).all() for a, b in zip(pool, synthetic_pool(preset, 4, seed=0)))  # same seed, same data


@pytest.mark.slow
@pytest.mark.parametrize("mode, precision_key, expected", [
    ("jax", "compute_dtype", "bfloat16"),
    ("torch_xla", "autocast", "bfloat16"),
    ("pytorch", "autocast", "bfloat16"),
])
def test_bf16_with_the_loader_is_in_effect(tmp_path, mode, precision_key, expected):
    """--precision bf16 --data loader: recorded as in effect, and for XLA modes visible in the compiled HLO."""

    result = hloscope("run", "--mode", mode, "--model", "vit-tiny", "--batch-size", "4", "--steps", "3", "--warmup", "1",
                      "--precision", "bf16", "--data", "loader", "--dump-hlo", "--out", tmp_path, "--run-id", "r",
                      timeout=600, memory_limit=None)
    assert result.code == 0, result.stderr[-2000:]
    record = load_run(tmp_path / "r").to_dict()
    assert record["config"]["data"] == "loader" and len(record["timing"]["step_times_s"]) == 3
    assert record["environment"]["precision"][precision_key] == expected
    assert record["loss"]["finite"]
    hlo = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "after_optimizations"]
    if mode != "pytorch":
        assert any("bf16[" in (tmp_path / "r" / a["path"]).read_text() for a in hlo)
