"""What a profiled run records so that explain can measure: the profiler's warm-up step marked, the step markers
wrapping the timed step, the host phases named in every mode's trace, the test-only host delay, and the configuration
fields a fair comparison needs.

The slow tests run each mode for real on the tiny preset (a fresh `hloscope run` per mode) and read the traces back
with hloscope's own readers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from statistics import median

import pytest

from hloscope.backends.base import ProfileResult, RunOptions, profile_warmup_steps
from hloscope.backends.driver import TEST_HOST_DELAY_ENV, host_delay_hook
from hloscope.errors import UsageError

MODES = ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax"]
STEPS, WARMUP, BATCH = 5, 2, 4


# -- fast: the record's shape ----------------------------------------------------------------------------------------

def test_six_profiled_steps_by_default_and_the_first_is_the_warmup():
    assert RunOptions().profile_steps == 6
    record = ProfileResult(step_numbers=[12, 13, 14, 15, 16, 17], step_marker="train_step").record()
    assert record["steps"] == 6 and record["warmup_steps"] == 1
    assert record["warmup_step_numbers"] == [12] and record["usable_step_numbers"] == [13, 14, 15, 16, 17]
    assert profile_warmup_steps(1) == 0  # a one-step profile keeps its only step


def test_the_cli_default_is_six():
    from hloscope.cli.run import command

    option = next(param for param in command.params if param.name == "profile_steps")
    assert option.default == 6


def test_host_delay_hook_reads_seconds_and_refuses_nonsense(monkeypatch):
    monkeypatch.delenv(TEST_HOST_DELAY_ENV, raising=False)
    assert host_delay_hook() is None
    monkeypatch.setenv(TEST_HOST_DELAY_ENV, "0.002")
    assert host_delay_hook() == 0.002
    monkeypatch.setenv(TEST_HOST_DELAY_ENV, "0")
    assert host_delay_hook() is None
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(TEST_HOST_DELAY_ENV, bad)
        with pytest.raises(UsageError, match=TEST_HOST_DELAY_ENV):
            host_delay_hook()


def test_options_record_the_delay_field():
    assert RunOptions().to_json()["test_host_delay_s"] is None
    assert RunOptions(test_host_delay_s=0.002).to_json()["test_host_delay_s"] == 0.002


# -- slow: real runs -------------------------------------------------------------------------------------------------

def hloscope_run(out: Path, mode: str, *extra: str, env: dict | None = None, steps: int = STEPS) -> dict:
    framework, _, compiled = mode.partition("+")
    run_id = mode.replace("+", "_")
    args = [sys.executable, "-m", "hloscope", "run", "--mode", framework, "--model", "vit-tiny",
            "--batch-size", str(BATCH), "--steps", str(steps), "--warmup", str(WARMUP), "--out", str(out),
            "--run-id", run_id, "--json", *extra] + (["--compile-model"] if compiled else [])
    result = subprocess.run(args, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PJRT_DEVICE": "CPU", **(env or {})})
    assert result.returncode == 0, result.stderr[-3000:]
    from hloscope.runs.rundir import load_run

    return load_run(out / run_id)


@pytest.fixture(scope="module")
def loader_runs(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("profiled")
    return {mode: hloscope_run(out, mode, "--profile", "--data", "loader") for mode in MODES}


def _events(record: dict):
    from hloscope.trace.load import load_traces

    traces = load_traces(record["_dir"])
    assert len(traces) == 1
    return list(traces[0].events)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_warmup_step_is_marked_and_the_markers_are_numbered_like_the_run(loader_runs, mode):
    record = loader_runs[mode]
    profile = record["profile"]
    first = WARMUP + STEPS + (1 if mode.startswith("pytorch") else 0)  # PyTorch: Kineto's own untraced warm-up first
    numbers = list(range(first, first + 6))
    assert profile["steps"] == 6 and profile["warmup_steps"] == 1 and profile["step_numbers"] == numbers
    assert profile["warmup_step_numbers"] == numbers[:1] and profile["usable_step_numbers"] == numbers[1:]
    assert len(record["timing"]["profiled_step_times_s"]) == 6
    markers = sorted((e for e in _events(record) if e.kind == "step"), key=lambda e: e.start_us)
    assert [e.step for e in markers] == numbers  # the first marker in the trace is the warm-up step


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_host_phases_are_named_inside_every_step_marker(loader_runs, mode):
    record = loader_runs[mode]
    events = _events(record)
    markers = [e for e in events if e.kind == "step"]
    expected = {"hloscope/input", "hloscope/wait"} | ({"hloscope/sync"} if mode.startswith("torch_xla") else set())
    assert set(record["profile"]["annotations"].values()) == expected
    for name in expected:
        found = [e for e in events if e.name == name]
        assert len(found) == 6, (mode, name, len(found))
        assert all(not e.device for e in found)
        # each inside one step marker, on the step's own thread
        for event in found:
            assert any(m.start_us <= event.start_us and event.end_us <= m.end_us + 1 and m.lane == event.lane
                       for m in markers), (mode, name)
    # the step marker spans the whole timed step: its duration is the profiled step time (the timer is inside it)
    # (each step's span covers its time; a span is not much longer, on the median: one step preempted between the
    # marker's start and the timer's, on a loaded machine, may add milliseconds to that step alone)
    timed = sorted(record["timing"]["profiled_step_times_s"])
    spans = sorted(m.dur_us / 1e6 for m in markers)
    for time_s, span_s in zip(timed, spans):
        assert span_s >= time_s * 0.98
    assert median(spans) - median(timed) < 0.5e-3 + 0.05 * median(timed)
    # the input pipeline (the DataLoader) takes measurable time in each step
    assert all(e.dur_us > 0 for e in events if e.name == "hloscope/input")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_configuration_field_a_comparison_needs_is_recorded(loader_runs, mode):
    record = loader_runs[mode]
    config, environment = record["config"], record["environment"]
    assert config["model"] == "vit-tiny" and config["model_config"]["image_size"] == 32
    assert config["batch_size"] == BATCH and config["data"] == "loader" and config["precision"] == "fp32"
    assert config["test_host_delay_s"] is None and config["profile_steps"] == 6
    precision = environment["precision"]
    assert precision["requested"] == "fp32" and precision["compute_dtype"] == "float32"
    assert precision["matmul_precision"] == "highest"
    assert environment["attention"]["implementation"] == "eager"
    compile_ = environment["compile"]
    assert compile_["backend"] == {"pytorch": "eager", "pytorch+compile": "inductor", "torch_xla": "xla",
                                   "torch_xla+compile": "openxla", "jax": "xla"}[mode]
    assert environment["packages"]["torch"] and environment["packages"]["jax"]
    assert environment["device"] and environment["device_kind"]
    threads = environment["threads"]
    assert threads["cpu_affinity"] >= 1
    if mode != "jax":
        assert threads["torch_num_threads"] >= 1 and threads["torch_num_interop_threads"] >= 1
    assert isinstance(environment["env"], dict)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["jax", "pytorch"])
def test_the_host_delay_hook_lengthens_every_step_and_is_recorded(tmp_path, mode):
    delay = 0.010
    plain = hloscope_run(tmp_path / "plain", mode, steps=15)
    delayed = hloscope_run(tmp_path / "delayed", mode, "--profile", steps=15, env={TEST_HOST_DELAY_ENV: str(delay)})
    assert plain["config"]["test_host_delay_s"] is None
    assert delayed["config"]["test_host_delay_s"] == delay
    assert any(TEST_HOST_DELAY_ENV in warning for warning in delayed["warnings"])
    assert min(delayed["timing"]["step_times_s"]) >= delay
    assert delayed["timing"]["median_s"] - plain["timing"]["median_s"] >= 0.9 * delay
    sleeps = [e for e in _events(delayed) if e.name == "hloscope/test_host_delay"]
    assert len(sleeps) == 6 and all(e.dur_us >= delay * 1e6 for e in sleeps)
