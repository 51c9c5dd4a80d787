"""Configuration differences between two runs (hloscope/runs/settings.py): a setting recorded by one run only is listed
with None ("not set") where its absence means something (environment variables, options, machine), and left out
where frameworks record different things by nature (package versions, thread figures, precision in effect)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_refused, hloscope, run_record

from hloscope.runs import settings as run_settings
from hloscope.runs.settings import differences, one_sided_counts

PACKAGES = {"torch": "2.9.0", "torch_xla": "2.9.0", "torchax": "0.0.13", "jax": "0.10.2", "jaxlib": "0.10.2",
            "flax": "0.12.8", "optax": "0.2.8", "transformers": "4.57.6", "numpy": "2.4.6", "click": "8.5.1"}
CONFIG = {"mode": "jax", "model": "vit-tiny", "batch_size": 8, "steps": 10, "warmup": 3, "precision": "fp32",
          "device": "auto", "data": "device", "seed": 0, "dump_hlo": False, "profile": True, "profile_steps": 6,
          "keep_all": False, "target": None, "check_parity": False, "attention": "eager", "seq_len": None,
          "inject_host_delay_ms": 0.0, "devices": 1, "compile_model": False,
          "model_config": {"image_size": 32, "patch_size": 8, "hidden_size": 64}}


def _jax_record(env: dict | None = None, **config) -> dict:
    """A run.json of `run --mode jax` as it is written (the fields settings() reads)."""
    return {"config": {**CONFIG, **config},
            "environment": {"hostname": "vm", "cpu_model": "AMD EPYC", "cpu_count": 2, "packages": dict(PACKAGES),
                            "env": {"PJRT_DEVICE": "CPU", **(env or {})}, "framework": "jax", "backend": "cpu",
                            "device": "TFRT_CPU_0", "platform": "cpu",
                            "precision": {"requested": "fp32", "matmul_precision": "highest",
                                          "compute_dtype": "float32", "param_dtype": "float32"},
                            "attention": {"implementation": "eager"}, "threads": {"cpu_affinity": 2}}}


def _pytorch_record(mode: str = "pytorch", env: dict | None = None) -> dict:
    """A run.json of a PyTorch mode as it is written: torch's thread figures, no JAX precision fields, and the
    environment variables torch_xla and inductor set for themselves during setup."""
    record = _jax_record(mode=mode)
    environment = record["environment"]
    environment.update(framework=mode.split("+")[0], device="cpu", device_name="cpu",
                       threads={"cpu_affinity": 2, "torch_num_threads": 2, "torch_num_interop_threads": 2},
                       env={"PJRT_DEVICE": "CPU", **(env or {})})
    environment["precision"] = {"requested": "fp32", "float32_matmul_precision": "highest",
                                "matmul_precision": "highest", "autocast": None, "compute_dtype": "float32"}
    if mode.startswith("torch_xla"):
        environment["env"]["XLA_FLAGS"] = "--xla_cpu_enable_fast_math=false"
    if mode.endswith("+compile"):
        environment["env"]["TORCHINDUCTOR_CACHE_DIR"] = "/tmp/torchinductor_root"
    return record


def settings(document: dict, matmul_precision: str | None = None, compute_dtype: str | None = None) -> dict[str, str]:
    """settings() of the run record that a run.json holding `document` reads as."""
    return run_settings.settings(run_record(document), matmul_precision, compute_dtype)


def _differences(a: dict, b: dict, **extra_b) -> list[dict]:
    return differences(settings(a, "highest", "float32"), settings(b, **extra_b))


@pytest.mark.parametrize(("name", "value"), [("XLA_FLAGS", "--xla_backend_optimization_level=0"),
                                             ("OMP_NUM_THREADS", "1"), ("JAX_ENABLE_X64", "1"),
                                             ("JAX_PLATFORMS", "cpu"), ("MKL_NUM_THREADS", "4")])
def test_an_environment_variable_set_on_one_run_only_is_listed_as_not_set_on_the_other(name, value):
    with_it, without = _jax_record(env={name: value}), _jax_record()
    assert differences(settings(with_it), settings(without)) == [{"field": f"env.{name}", "a": value, "b": None}]
    assert differences(settings(without), settings(with_it)) == [{"field": f"env.{name}", "a": None, "b": value}]
    assert json.loads(json.dumps(differences(settings(without), settings(with_it))))[0]["a"] is None  # JSON null


def test_options_and_machine_recorded_on_one_side_are_listed():
    text = _jax_record(model="gpt2-tiny", seq_len=64)
    assert {"field": "seq_len", "a": "64", "b": None} in differences(settings(text), settings(_jax_record()))
    gpu = _jax_record()
    gpu["environment"]["gpu_name"] = "NVIDIA H100"
    assert differences(settings(gpu), settings(_jax_record())) == [
        {"field": "machine.gpu_name", "a": "NVIDIA H100", "b": None}]


def test_the_injected_host_delay_is_a_difference_and_zero_means_not_set():
    delayed, plain = _jax_record(inject_host_delay_ms=3.0), _jax_record()
    assert differences(settings(delayed), settings(plain)) == [{"field": "inject_host_delay_ms", "a": "3", "b": None}]
    older = _jax_record()  # a record written before the option existed
    del older["config"]["inject_host_delay_ms"]
    assert differences(settings(plain), settings(older)) == []


def test_a_record_from_before_the_optimizer_option_trained_with_sgd():
    adamw, sgd = _jax_record(optimizer="adamw"), _jax_record(optimizer="sgd")
    older = _jax_record()  # written when SGD was the only optimizer: no `optimizer` key
    assert "optimizer" not in older["config"]
    assert differences(settings(sgd), settings(older)) == []
    assert differences(settings(adamw), settings(older)) == [{"field": "optimizer", "a": "adamw", "b": "sgd"}]


@pytest.mark.parametrize("mode", ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile"])
def test_jax_against_a_pytorch_mode_on_the_same_options_lists_nothing_one_sided(mode):
    jax, torch = _jax_record(), _pytorch_record(mode)
    a, b = settings(jax, "fp32", "float32"), settings(torch, "fp32")  # PyTorch reports no compute dtype
    assert set(a) != set(b)  # the records differ by nature: threads.torch_*, compute dtype in effect
    assert differences(a, b) == []
    assert differences(b, a) == []


def test_framework_reported_settings_need_both_sides_and_still_count_when_both_differ():
    for name in ("packages.torch", "threads.torch_num_threads", "compute dtype in effect",
                 "matmul precision in effect", "env.PJRT_DEVICE", "env.TORCHINDUCTOR_CACHE_DIR"):
        assert not one_sided_counts(name)
        assert differences({name: "x"}, {}) == [] and differences({}, {name: "x"}) == []
        assert differences({name: "x"}, {name: "y"}) == [{"field": name, "a": "x", "b": "y"}]
    for name in ("env.XLA_FLAGS", "env.OMP_NUM_THREADS", "env.JAX_ENABLE_X64", "batch_size", "model_config.image_size",
                 "machine.gpu_name"):
        assert one_sided_counts(name)


def test_torch_xlas_own_default_flag_is_not_a_difference_but_a_users_flag_is():
    torch_xla = _pytorch_record("torch_xla")
    assert differences(settings(_jax_record()), settings(torch_xla)) == []
    torch_xla["environment"]["env"]["XLA_FLAGS"] += " --xla_backend_optimization_level=0"
    assert differences(settings(_jax_record()), settings(torch_xla)) == [
        {"field": "env.XLA_FLAGS", "a": None, "b": "--xla_backend_optimization_level=0"}]


def _run_dir(directory: Path, env: dict, steps: list[float]) -> Path:
    directory.mkdir(parents=True)
    record = _jax_record(env=env)
    record.update(schema_version=1, run_id=directory.name, mode="jax", status="ok", error=None, artifacts=[],
                  timing={"step_times_s": steps, "median_s": sorted(steps)[len(steps) // 2],
                          "mean_s": sum(steps) / len(steps), "first_step_s": 1.5},
                  compiles={"in_window": {"xla_compiles": 0}})
    (directory / "run.json").write_text(json.dumps(record))
    return directory


def test_every_report_format_says_not_set(cli_run, tmp_path):
    slow = _run_dir(tmp_path / "slow", {"XLA_FLAGS": "--xla_backend_optimization_level=0"}, [0.014] * 10)
    fast = _run_dir(tmp_path / "fast", {}, [0.002] * 10)
    code, out, err = cli_run("explain", str(slow), str(fast), "--json")
    assert code == 0, err
    entry = next(m for m in json.loads(out)["modes"] if m["verdict"] != "baseline")
    assert entry["config_differences"] == [{"field": "env.XLA_FLAGS", "a": "--xla_backend_optimization_level=0",
                                            "b": None}]
    for fmt in ("md", "html"):
        code, out, err = cli_run("explain", str(slow), str(fast), "--format", fmt, "-o", "-")
        assert code == 0, err
        assert "env.XLA_FLAGS" in out and "not set" in out and "None" not in out, fmt
    code, out, err = cli_run("explain", str(slow), str(fast))
    assert code == 0 and "env.XLA_FLAGS" in out and "not set" in out, err


@pytest.mark.slow
def test_an_unoptimised_xla_run_is_explained_with_its_flag(tmp_path):
    """End to end: a real jax run with XLA_FLAGS in its environment against one without."""
    def run(run_id: str, env: dict) -> Path:
        result = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "4", "--steps", "5", "--warmup",
                          "2", "--out", tmp_path, "--run-id", run_id, "--json", timeout=600, memory_limit=None,
                          env={"XLA_FLAGS": None, **env})
        assert result.code == 0, result.stderr[-3000:]
        return tmp_path / run_id

    flagged = run("flagged", {"XLA_FLAGS": "--xla_backend_optimization_level=0"})
    plain = run("plain", {})
    result = hloscope("explain", flagged, plain, "--json")
    assert result.code == 0, result.stderr[-3000:]
    entries = json.loads(result.stdout)["modes"]
    listed = [d for entry in entries for d in entry["config_differences"]]
    assert {"field": "env.XLA_FLAGS", "a": "--xla_backend_optimization_level=0", "b": None} in listed or \
        {"field": "env.XLA_FLAGS", "a": None, "b": "--xla_backend_optimization_level=0"} in listed
    assert all(d["field"] == "env.XLA_FLAGS" for d in listed), listed  # nothing else differs between the two


def test_a_device_field_of_the_wrong_type_is_one_line_naming_the_run(tmp_path):
    """The device fields the platform is read from are typed: a hand-edited number is refused, not compared."""
    slow = _run_dir(tmp_path / "slow", {}, [0.014] * 10)
    fast = _run_dir(tmp_path / "fast", {}, [0.002] * 10)
    record = json.loads((slow / "run.json").read_text())
    record["environment"]["device_name"] = 5
    (slow / "run.json").write_text(json.dumps(record))
    assert_refused(hloscope("explain", slow, fast), slow / "run.json", words=("'environment.device_name' is int 5",))
