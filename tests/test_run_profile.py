"""What a profiled run records so that explain can measure: the profiler's warm-up step marked, the step markers
wrapping the timed step, the host phases named in every mode's trace, the injected host delay (--inject-host-delay),
and the configuration fields a fair comparison needs.

The slow tests run each mode for real on the tiny preset (conftest's profiled loader runs, shared with
test_input_pipeline; the host delay's own runs) and read the traces back with hloscope's own readers.
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

import pytest
from helpers import LOADER_RUN_BATCH, LOADER_RUN_STEPS, LOADER_RUN_WARMUP, hloscope

from hloscope.backends.base import ProfileResult, RunOptions, profile_warmup_steps
from hloscope.limits import MAX_HOST_DELAY_MS

MODES = ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax"]
# conftest's loader_run, which the profile tests read
STEPS, WARMUP, BATCH = LOADER_RUN_STEPS, LOADER_RUN_WARMUP, LOADER_RUN_BATCH


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


@pytest.mark.parametrize("bad", ["soon", "-1", "nan", "inf", str(MAX_HOST_DELAY_MS * 2)])
def test_the_host_delay_option_refuses_nonsense(cli_run, tmp_path, bad):
    for command in ("run", "compare"):
        mode = ["--mode", "jax"] if command == "run" else []
        code, _, err = cli_run(command, *mode, "--inject-host-delay", bad, "--out", str(tmp_path))
        assert code == 2 and "--inject-host-delay" in err, (command, bad, err)
    assert not any(tmp_path.iterdir())  # refused before any run directory


def test_options_record_the_delay_and_compare_passes_it_on(tmp_path):
    from hloscope.cli.run import build_options
    from hloscope.runs.runner import run_command

    assert RunOptions().to_json()["inject_host_delay_ms"] == 0
    values = {"model": "vit-tiny", "batch_size": 4, "steps": 5, "warmup": 2, "precision": "fp32", "device": "cpu",
              "data": "device", "seed": 0, "dump_hlo": False, "profile": False, "profile_steps": 6, "keep_all": False}
    options = build_options("jax", **values, inject_host_delay_ms=2.5)
    assert options.to_json()["inject_host_delay_ms"] == 2.5
    command = run_command(options, tmp_path)
    assert command[command.index("--inject-host-delay") + 1] == "2.5"
    assert "--inject-host-delay" not in run_command(build_options("jax", **values), tmp_path)


# -- slow: real runs -------------------------------------------------------------------------------------------------

def hloscope_run(out: Path, mode: str, *extra: str, env: dict | None = None, steps: int = STEPS) -> dict:
    framework, _, compiled = mode.partition("+")
    run_id = mode.replace("+", "_")
    result = hloscope("run", "--mode", framework, "--model", "vit-tiny", "--batch-size", str(BATCH), "--steps",
                      str(steps), "--warmup", str(WARMUP), "--out", out, "--run-id", run_id, "--json", *extra,
                      *(["--compile-model"] if compiled else []), timeout=600, memory_limit=None, env=env)
    assert result.code == 0, result.stderr[-3000:]
    from hloscope.runs.rundir import load_run

    return {**load_run(out / run_id).to_dict(), "_dir": str(out / run_id)}  # the JSON, and where it is


@pytest.fixture(scope="module")
def loader_runs(loader_run) -> dict[str, dict]:
    """Each mode's profiled `--data loader` run (conftest's, shared with the input pipeline's tests)."""
    from hloscope.runs.rundir import load_run

    return {mode: {**load_run(loader_run(mode)).to_dict(), "_dir": str(loader_run(mode))} for mode in MODES}


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
    assert config["inject_host_delay_ms"] == 0 and config["profile_steps"] == 6
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
def test_the_injected_host_delay_lengthens_every_step_unmarked_and_is_recorded(tmp_path, mode):
    delay = 0.010
    plain = hloscope_run(tmp_path / "plain", mode, "--profile", steps=15)
    delayed = hloscope_run(tmp_path / "delayed", mode, "--profile", "--inject-host-delay", str(delay * 1e3), steps=15)
    assert plain["config"]["inject_host_delay_ms"] == 0
    assert not any("--inject-host-delay" in warning for warning in plain["warnings"])
    assert delayed["config"]["inject_host_delay_ms"] == delay * 1e3
    assert any("--inject-host-delay" in warning and "on purpose" in warning for warning in delayed["warnings"])
    # every timed and profiled step sleeps
    assert min(delayed["timing"]["step_times_s"]) >= delay
    assert min(delayed["timing"]["profiled_step_times_s"]) >= delay
    assert delayed["timing"]["median_s"] - plain["timing"]["median_s"] >= 0.9 * delay
    # nothing hloscope writes into the trace tells where the sleep is: the same annotations as without it
    def annotations(record: dict) -> set[str]:
        return {e.name for e in _events(record) if e.name.startswith("hloscope/")}

    assert annotations(delayed) == annotations(plain) == set(delayed["profile"]["annotations"].values())
