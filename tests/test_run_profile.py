"""What a profiled run records so that explain can measure: the profiler's warm-up step marked, the step markers
wrapping the timed step, the host phases named in every mode's trace, the injected host delay (--inject-host-delay),
and the configuration fields a fair comparison needs.

The slow tests run each mode for real on the tiny preset (conftest's profiled loader runs, shared with
test_input_pipeline; for the host delay, one run each that differs from its loader run only in the delay) and read the
traces back with hloscope's own readers.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from helpers import LOADER_RUN_BATCH, LOADER_RUN_STEPS, LOADER_RUN_WARMUP, hloscope

from hloscope.backends.base import ProfileResult, RunOptions, Session, profile_warmup_steps
from hloscope.backends.timing import StepLog, run_loop
from hloscope.cli.run import build_options
from hloscope.cli.run import command as run_cli
from hloscope.limits import MAX_HOST_DELAY_MS
from hloscope.runs.records import section_document
from hloscope.runs.rundir import load_run
from hloscope.runs.runner import run_command
from hloscope.trace.load import load_traces

MODES = ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax"]
# conftest's loader_run, which the profile tests read
STEPS, WARMUP, BATCH = LOADER_RUN_STEPS, LOADER_RUN_WARMUP, LOADER_RUN_BATCH


# -- fast: the record's shape ----------------------------------------------------------------------------------------

def test_six_profiled_steps_by_default_and_the_first_is_the_warmup():
    assert RunOptions().profile_steps == 6
    record = section_document(ProfileResult(step_numbers=[12, 13, 14, 15, 16, 17], step_marker="train_step").record())
    assert record["steps"] == 6 and record["warmup_steps"] == 1
    assert record["warmup_step_numbers"] == [12] and record["usable_step_numbers"] == [13, 14, 15, 16, 17]
    assert profile_warmup_steps(1) == 0  # a one-step profile keeps its only step


def test_the_cli_default_is_six():
    option = next(param for param in run_cli.params if param.name == "profile_steps")
    assert option.default == 6


@pytest.mark.parametrize("bad", ["soon", "-1", "nan", "inf", str(MAX_HOST_DELAY_MS * 2)])
def test_the_host_delay_option_refuses_nonsense(cli_run, tmp_path, bad):
    for command in ("run", "compare"):
        mode = ["--mode", "jax"] if command == "run" else []
        code, _, err = cli_run(command, *mode, "--inject-host-delay", bad, "--out", str(tmp_path))
        assert code == 2 and "--inject-host-delay" in err, (command, bad, err)
    assert not any(tmp_path.iterdir())  # refused before any run directory


def test_options_record_the_delay_and_compare_passes_it_on(tmp_path):
    assert RunOptions().to_json()["inject_host_delay_ms"] == 0
    values = {"model": "vit-tiny", "batch_size": 4, "steps": 5, "warmup": 2, "precision": "fp32", "device": "cpu",
              "data": "device", "seed": 0, "dump_hlo": False, "profile": False, "profile_steps": 6, "keep_all": False}
    options = build_options("jax", **values, inject_host_delay_ms=2.5)
    assert options.to_json()["inject_host_delay_ms"] == 2.5
    command = run_command(options, tmp_path)
    assert command[command.index("--inject-host-delay") + 1] == "2.5"
    assert "--inject-host-delay" not in run_command(build_options("jax", **values), tmp_path)


class _Sleeper(Session):
    """A session whose step sleeps twice (such a step's figure is the sum), with no framework."""

    def step(self, index):
        self.inject_host_delay()
        self.inject_host_delay()
        return index

    def wait(self, outputs):
        pass

    def loss_of(self, outputs):
        return 1.0

    def profiler(self, result, first, steps):
        return contextlib.nullcontext()

    def step_marker(self, index):
        return contextlib.nullcontext()


@pytest.mark.parametrize("delay_ms", [0.0, 1.0])
def test_the_host_sleep_is_measured_per_step_and_summed_within_one(tmp_path, delay_ms):
    session = _Sleeper(RunOptions(inject_host_delay_ms=delay_ms, steps=3, warmup=2), tmp_path)
    log = StepLog()
    run_loop(session.step, session.wait, session.loss_of, 3, 2, log,
             slept=session.take_host_sleep if delay_ms else None)
    result = session.profile(2)
    if not delay_ms:
        assert log.host_sleeps_s is None and result.host_sleeps_s is None
        return
    for slept, times in ((log.host_sleeps_s, log.step_times_s), (result.host_sleeps_s, result.step_times_s)):
        assert slept is not None and len(slept) == len(times)
        assert all(2 * delay_ms / 1e3 <= s <= t for s, t in zip(slept, times, strict=True))
    positions = section_document(result.record())["host_positions"]
    assert [p["step"] for p in positions] == result.step_numbers == [5, 6]
    for p in positions:
        assert p["marker_entered_s"] <= p["timer_start_s"] <= p["timer_stop_s"] <= p["marker_left_s"]


# -- slow: real runs -------------------------------------------------------------------------------------------------

def hloscope_run(out: Path, mode: str, *extra: str, env: dict | None = None, steps: int = STEPS) -> dict:
    framework, _, compiled = mode.partition("+")
    run_id = mode.replace("+", "_")
    result = hloscope("run", "--mode", framework, "--model", "vit-tiny", "--batch-size", str(BATCH), "--steps",
                      str(steps), "--warmup", str(WARMUP), "--out", out, "--run-id", run_id, "--json", *extra,
                      *(["--compile-model"] if compiled else []), timeout=600, memory_limit=None, env=env)
    assert result.code == 0, result.stderr[-3000:]

    return {**load_run(out / run_id).to_dict(), "_dir": str(out / run_id)}  # the JSON, and where it is


@pytest.fixture(scope="module")
def loader_runs(loader_run) -> dict[str, dict]:
    """Each mode's profiled `--data loader` run (conftest's, shared with the input pipeline's tests)."""
    return {mode: {**load_run(loader_run(mode)).to_dict(), "_dir": str(loader_run(mode))} for mode in MODES}


def _events(record: dict):
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


# The trace's clock and the host's perf_counter measure the same intervals apart from their resolution (Kineto
# writes microseconds) and their rates (Kineto converts the CPU's time-stamp counter with a measured factor): a few
# microseconds and a thousandth of the interval, whatever the machine's load. (Seen on the tiny preset: the spans
# exceed the timer by 5-400 us and fall short of the bracket by 15-200 us.)
CLOCK_SLACK_S, CLOCK_RATE_SLACK = 2e-6, 1e-3


def _within(inner_s: float, outer_s: float) -> bool:
    """`inner_s` <= `outer_s`, one measured on the trace's clock and the other on the host's."""
    return inner_s <= outer_s * (1 + CLOCK_RATE_SLACK) + CLOCK_SLACK_S


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_host_phases_are_named_inside_every_step_marker(loader_runs, mode):
    """Each phase is inside one step marker, and each marker spans its timed step and not much more: compared step by
    step with where the host was (run.json `profile.host_positions`, perf_counter), never with a fixed bound, so that a
    loaded machine, which stretches a step and the host's bracket around it alike, cannot fail it.

    The marker's duration in the trace lies between the timer's (the timer runs inside the marker) and the host's time
    from entering the marker's context to leaving it (TraceMe opens and closes inside that); Kineto's ProfilerStep#N
    opens in the previous step's `profiler.step()`, so its bracket runs from the previous step's timer stop. A marker
    that closed before the wait or opened after the batch is shorter than the timer; one that opened before its
    context was entered (taking in the scheduling snapshot or the previous step) or closed after it was left (taking
    in the next step) is longer than the bracket: either fails."""
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
    # the step marker spans the whole timed step and no more than the host spent around it, step by step
    positions = {p["step"]: p for p in record["profile"]["host_positions"]}
    kineto = record["profile"]["step_marker"].startswith("ProfilerStep")
    timed = dict(zip(record["profile"]["step_numbers"], record["timing"]["profiled_step_times_s"], strict=True))
    assert sorted(positions) == sorted(timed) == sorted(m.step for m in markers)
    for marker in markers:
        position, span_s = positions[marker.step], marker.dur_us / 1e6
        timer_s = position["timer_stop_s"] - position["timer_start_s"]
        assert timer_s == pytest.approx(timed[marker.step], abs=1e-6)
        assert _within(timer_s, span_s), (mode, marker.step, timer_s, span_s)
        if kineto:  # ProfilerStep#N opens at the end of step N-1's marker (the first: in the unrecorded lead-in)
            previous = positions.get(marker.step - 1)
            if previous is None:
                continue
            bracket_s = position["marker_left_s"] - previous["timer_stop_s"]
        else:
            bracket_s = position["marker_left_s"] - position["marker_entered_s"]
        assert _within(span_s, bracket_s), (mode, marker.step, span_s, bracket_s)
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
def test_the_injected_host_delay_lengthens_every_step_unmarked_and_is_recorded(loader_runs, tmp_path, mode):
    """Every timed and profiled step records how long it slept: at least the delay asked for, and no longer than the
    step's own time. Both hold on any machine load; without the sleep (or with it outside the timer) one fails. The
    run without the delay is conftest's loader run of the mode; the delayed one differs from it only in the delay."""
    delay = 0.010
    plain = loader_runs[mode]
    delayed = hloscope_run(tmp_path / "delayed", mode, "--profile", "--data", "loader", "--inject-host-delay",
                           str(delay * 1e3))
    assert plain["config"]["inject_host_delay_ms"] == 0
    assert {k: v for k, v in plain["config"].items() if k != "inject_host_delay_ms"} == \
        {k: v for k, v in delayed["config"].items() if k != "inject_host_delay_ms"}
    assert not any("--inject-host-delay" in warning for warning in plain["warnings"])
    assert delayed["config"]["inject_host_delay_ms"] == delay * 1e3
    assert any("--inject-host-delay" in warning and "on purpose" in warning for warning in delayed["warnings"])
    # every timed and profiled step sleeps, at least the delay (a sleep never ends early; a loaded machine wakes the
    # host late, and the record says by how much), inside the step's timer; the plain run sleeps in none
    for times, sleeps in (("step_times_s", "injected_host_delay_s"),
                          ("profiled_step_times_s", "profiled_injected_host_delay_s")):
        slept = delayed["timing"][sleeps]
        assert len(slept) == len(delayed["timing"][times]) == (STEPS if times == "step_times_s" else 6)
        assert min(slept) >= delay, (sleeps, slept)
        assert all(step_s >= slept_s for step_s, slept_s in zip(delayed["timing"][times], slept, strict=True))
        assert plain["timing"].get(sleeps) is None
    # nothing hloscope writes into the trace tells where the sleep is: the same annotations as without it
    def annotations(record: dict) -> set[str]:
        return {e.name for e in _events(record) if e.name.startswith("hloscope/")}

    assert annotations(delayed) == annotations(plain) == set(delayed["profile"]["annotations"].values())
