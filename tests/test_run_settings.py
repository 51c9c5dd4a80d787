"""The settings a run sets beyond the common ones: the donation of the train state (--donate / --no-donate),
torch.compile's mode and fullgraph (--compile-mode, --fullgraph) and the CPU threads (--threads). Refused where a mode
cannot take them (one line, exit 2, nothing created; in compare a refused mode beside the others), left out of the
record when not given, passed on to compare's and explain's child runs, and in effect in a real run."""

from __future__ import annotations

import os

import pytest
from helpers import hloscope, run_record

from hloscope.backends.base import RunOptions, compile_kwargs, thread_settings
from hloscope.machine import usable_cpus
from hloscope.runs.runner import run_command
from hloscope.runs.settings import in_effect, settings


@pytest.mark.parametrize("args, says", [
    (("--mode", "pytorch", "--no-donate"), "--no-donate --mode pytorch: eager PyTorch updates the state in place; "
                                           "donation does not apply"),
    (("--mode", "pytorch", "--donate"), "--donate --mode pytorch: eager PyTorch updates the state in place"),
    (("--mode", "pytorch+compile", "--donate"), "donation does not apply"),
    (("--mode", "torch_xla+compile", "--no-donate"), "openxla dynamo bridge aliases"),
    (("--mode", "jax", "--compile-mode", "reduce-overhead"), "the mode does not call torch.compile"),
    (("--mode", "torchax", "--fullgraph"), "--fullgraph --mode torchax: the mode does not call torch.compile"),
    (("--mode", "torch_xla+compile", "--compile-mode", "max-autotune"), "the openxla backend (aot_autograd) takes"),
    (("--mode", "jax", "--threads", "100000"), "--threads 100000: this machine lets hloscope use"),
    (("--mode", "jax", "--target", "h100", "--donate", "--threads", "1"),
     "--donate/--no-donate, --threads: --target compiles the step for h100 without running it"),
    (("--mode", "torch_xla+compile", "--target", "a100", "--fullgraph"), "--fullgraph: --target compiles the step"),
])
def test_a_setting_the_mode_cannot_take_is_refused_in_one_line_before_anything_is_made(cli_run, tmp_path, args, says):
    code, _, err = cli_run("run", *args, "--model", "vit-tiny", "--out", str(tmp_path))
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and says in err
    assert not list(tmp_path.iterdir())


def test_compare_whose_every_mode_refuses_a_setting_is_one_line_and_makes_nothing(cli_run, tmp_path):
    """The only mode refuses --no-donate: compare refuses as run does (one line, exit 2), with no comparison
    directory holding nothing but refusals."""
    code, _, err = cli_run("compare", "--modes", "pytorch", "--no-donate", "--model", "vit-tiny", "--batch-size", "8",
                           "--repeats", "1", "--out", str(tmp_path), "--json")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "donation does not apply" in lines[0], err[-2000:]
    assert not list(tmp_path.iterdir())


def test_compare_refuses_more_threads_than_the_machine_has_in_one_line(cli_run, tmp_path):
    code, _, err = cli_run("compare", "--modes", "jax", "--threads", "100000", "--out", str(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--threads 100000: this machine lets hloscope use" in lines[0]
    assert not list(tmp_path.iterdir())


def test_options_left_at_the_modes_own_behaviour_are_not_recorded():
    """The records of runs without the options keep the keys they always had."""
    plain = RunOptions(mode="jax", model="vit-tiny").to_json()
    assert not {"donate", "compile_mode", "fullgraph", "threads"} & set(plain)
    given = RunOptions(mode="pytorch+compile", model="vit-tiny", compile_mode="max-autotune", fullgraph=True,
                       threads=1).to_json()
    assert (given["compile_mode"], given["fullgraph"], given["threads"]) == ("max-autotune", True, 1)
    assert RunOptions(mode="jax", donate=False).to_json()["donate"] is False


def test_compile_options_reach_torch_compile():
    from hloscope.backends.pytorch_mode import COMPILE_KWARGS  # imports torch: kept out of collection

    options = RunOptions(mode="pytorch+compile", compile_mode="reduce-overhead", fullgraph=True)
    assert compile_kwargs(COMPILE_KWARGS, options) == {"backend": "inductor", "mode": "reduce-overhead",
                                                       "fullgraph": True, "dynamic": None}
    assert compile_kwargs(COMPILE_KWARGS, RunOptions(mode="pytorch+compile", compile_mode="default")) == COMPILE_KWARGS


@pytest.mark.parametrize("options, flags", [
    (RunOptions(mode="jax", donate=True), ["--donate"]),
    (RunOptions(mode="torch_xla", donate=False), ["--no-donate"]),
    (RunOptions(mode="pytorch+compile", compile_mode="max-autotune", fullgraph=True),
     ["--compile-mode", "max-autotune", "--fullgraph"]),
    (RunOptions(mode="pytorch", threads=1), ["--threads", "1"]),
    (RunOptions(mode="jax"), []),
])
def test_a_child_run_is_started_with_the_settings_of_its_options(tmp_path, options, flags):
    command = run_command(options, tmp_path)
    valued = ("--compile-mode", "--threads")
    given = [arg for before, arg in zip(["", *command], command)
             if arg in ("--donate", "--no-donate", "--fullgraph", *valued) or before in valued]
    assert given == flags


def test_the_settings_are_listed_and_what_a_run_had_in_effect_is_read_from_its_record():
    record = {"mode": "jax", "config": {"mode": "jax", "donate": True, "threads": 1},
              "environment": {"threads": {"cpu_affinity": 1}}}
    listed = settings(run_record(record))
    assert (listed["donate"], listed["threads"], listed["threads.cpu_affinity"]) == ("True", "1", "1")
    assert in_effect(run_record(record)) == {"threads": 1, "donate": True, "compile_mode": None, "fullgraph": None}
    eager = in_effect(run_record({"mode": "pytorch", "config": {}, "environment": {"threads": {"cpu_affinity": 2}}}))
    assert eager == {"threads": 2, "donate": None, "compile_mode": None, "fullgraph": None}
    compiled = in_effect(run_record({"mode": "torch_xla+compile", "config": {"mode": "torch_xla+compile"}}))
    assert compiled == {"threads": None, "donate": True, "compile_mode": "default", "fullgraph": False}


def test_the_recorded_cpu_affinity_is_none_where_the_platform_does_not_say(monkeypatch):
    """run.json records the affinity it read, or None; --threads is then checked against the machine's CPU count."""
    assert thread_settings(torch_num_threads=2) == {"cpu_affinity": len(os.sched_getaffinity(0)), "torch_num_threads": 2}

    def unknown(pid: int) -> set[int]:
        raise OSError("no affinity here")

    monkeypatch.setattr(os, "sched_getaffinity", unknown)
    assert thread_settings(torch_num_threads=2) == {"cpu_affinity": None, "torch_num_threads": 2}
    assert usable_cpus() == (os.cpu_count() or 1)


@pytest.mark.slow
def test_jax_donates_its_state_and_runs_on_one_cpu_when_asked(tmp_path):
    """--donate: the compiled step aliases the state's buffers with its outputs (input_output_alias in the HLO) and
    the record says the state is updated in place; --threads 1: the process ran on one CPU, OMP_NUM_THREADS=1."""
    from hloscope.runs.rundir import load_run

    result = hloscope("run", "--mode", "jax", "--donate", "--threads", "1", "--dump-hlo", "--model", "vit-tiny",
                      "--batch-size", "8", "--steps", "3", "--warmup", "1", "--out", tmp_path, "--run-id", "r",
                      timeout=600, memory_limit=None)
    assert result.code == 0, result.stderr[-2000:]
    record = load_run(tmp_path / "r").to_dict()
    assert record["config"]["donate"] is True and record["config"]["threads"] == 1
    assert record["environment"]["donation"]["state_in_place"] is True
    assert record["environment"]["threads"]["cpu_affinity"] == 1
    assert record["environment"]["env"]["OMP_NUM_THREADS"] == "1"
    optimized = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "after_optimizations"]
    assert optimized and all("input_output_alias" in (tmp_path / "r" / a["path"]).read_text() for a in optimized)
    assert record["loss"]["finite"] and len(record["timing"]["step_times_s"]) == 3


@pytest.mark.slow
def test_pytorch_compile_runs_with_the_compile_mode_fullgraph_and_threads_asked(tmp_path):
    """--compile-mode reduce-overhead --fullgraph --threads 1: torch.compile was called so (environment.compile) and
    torch used one thread on one CPU."""
    from hloscope.runs.rundir import load_run

    result = hloscope("run", "--mode", "pytorch+compile", "--compile-mode", "reduce-overhead", "--fullgraph",
                      "--threads", "1", "--model", "vit-tiny", "--batch-size", "8", "--steps", "3", "--warmup", "1",
                      "--out", tmp_path, "--run-id", "r", timeout=900, memory_limit=None)
    assert result.code == 0, result.stderr[-2000:]
    record = load_run(tmp_path / "r").to_dict()
    assert (record["config"]["compile_mode"], record["config"]["fullgraph"]) == ("reduce-overhead", True)
    compiled = record["environment"]["compile"]
    assert (compiled["api"], compiled["mode"], compiled["fullgraph"]) == ("torch.compile", "reduce-overhead", True)
    threads = record["environment"]["threads"]
    assert (threads["cpu_affinity"], threads["torch_num_threads"]) == (1, 1)
    assert record["loss"]["finite"] and len(record["timing"]["step_times_s"]) == 3


@pytest.mark.slow
def test_torch_xla_without_donation_aliases_no_parameter_buffer(tmp_path):
    """--no-donate in lazy torch_xla: the step's compiled graph has no input_output_alias (with torch_xla's default
    donation it has), and the record says the state is written to new buffers."""
    from hloscope.runs.rundir import load_run

    result = hloscope("run", "--mode", "torch_xla", "--no-donate", "--dump-hlo", "--model", "vit-tiny",
                      "--batch-size", "8", "--steps", "2", "--warmup", "1", "--out", tmp_path, "--run-id", "r",
                      timeout=600, memory_limit=None)
    assert result.code == 0, result.stderr[-2000:]
    record = load_run(tmp_path / "r").to_dict()
    assert record["config"]["donate"] is False
    assert record["environment"]["donation"]["state_in_place"] is False
    optimized = [a for a in record["artifacts"] if a["kind"] == "hlo" and a["stage"] == "after_optimizations"]
    assert optimized and not any("input_output_alias" in (tmp_path / "r" / a["path"]).read_text() for a in optimized)
    assert record["loss"]["finite"] and len(record["timing"]["step_times_s"]) == 2


def test_compare_plans_only_the_modes_that_refuse_a_setting_as_refused():
    from hloscope.api import _refuse_settings
    from hloscope.backends.base import RunOptions
    from hloscope.runs.runner import PlannedRun

    donate, autotune = RunOptions(donate=True), RunOptions(compile_mode="max-autotune")
    plan = _refuse_settings(["pytorch", "jax", "torch_xla"], donate, None)
    assert [(p.mode, p.refused is not None) for p in plan] == [("pytorch", True), ("jax", False), ("torch_xla", False)]
    assert "donation does not apply" in str(plan[0].refused)
    assert _refuse_settings(["jax"], donate, None) is None  # nothing refused: one run per mode, as before
    by_devices = _refuse_settings(["pytorch", "jax"], autotune,
                                  [PlannedRun("pytorch", 1), PlannedRun("jax", 1), PlannedRun("jax", 2, refused="x")])
    assert [(p.mode, p.devices, p.refused is not None) for p in by_devices] == [
        ("pytorch", 1, True), ("jax", 1, True), ("jax", 2, True)]
    assert by_devices[2].refused == "x"


def test_compare_refuses_run_settings_with_target_in_one_line(cli_run, tmp_path):
    code, _, err = cli_run("compare", "--modes", "jax", "--target", "h100", "--threads", "1", "--out", str(tmp_path))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--target compiles the step for h100" in lines[0], err
    assert not list(tmp_path.iterdir())
