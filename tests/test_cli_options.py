"""Option values (docs/reliability.md) checked before any work (hloscope/cli/options.py),
`-o -` as stdout for every -o, a symlink loop at an artifact, a damaged StableHLO / HLO module given to replay, and a
negative measured overhead reported as an anomaly."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest
from helpers import assert_refused, first_good_hlo, good_run, hloscope, needs_fixtures

from hloscope.cli.options import FiniteFloatRange
from hloscope.errors import InputError
from hloscope.explain.replay_split import split
from hloscope.explain.summary import ModeSummary
from hloscope.limits import MAX_SEED, MAX_STEPS
from hloscope.render.output import check_writable, choose_format, emit
from hloscope.render.replay_text import render_text
from hloscope.replay.program import Program, Shape, make_inputs
from hloscope.replay.runner import _against_run, replay
from hloscope.runs.records import HostScheduling, decode_run
from hloscope.runs.replay_record import (
    ReplayCompilers,
    ReplayConfig,
    ReplayDevice,
    ReplayRecord,
    ReplaySource,
    ReplaySummary,
    ReplayTiming,
    ReplayXla,
)

# ----------------------------------------------------------------------------------- a symlink loop at an artifact


@needs_fixtures
@pytest.mark.parametrize("command", [("explain",), ("hlo", "stats"), ("diff",)], ids=" ".join)
def test_symlink_loop_at_an_artifact_is_one_line(command, tmp_path):
    run = good_run(tmp_path / "runs")
    hlo = next((run / "hlo").glob("*after_optimizations.txt"))
    hlo.unlink()
    hlo.symlink_to(hlo.name)  # a link to itself
    args = (*command, run, first_good_hlo(), "--no-xla-cost") if command == ("diff",) else (*command, run)
    assert_refused(hloscope(*args, timeout=120), hlo, words=("symlink loop",))


# ---------------------------------------------------------------- option values, checked before any work

HUGE = "99999999999999999999999"

# every command with a checked numeric option, and values that must be refused before any work (out of range, not
# a number, beyond 64 bits)
REFUSED = [
    ("run", "--mode", "jax", "--seed", "-1"),
    ("run", "--mode", "jax", "--seed", HUGE),
    ("run", "--mode", "jax", "--steps", HUGE),
    ("run", "--mode", "jax", "--batch-size", HUGE),
    ("run", "--mode", "jax", "--warmup", "0"),
    ("run", "--mode", "jax", "--profile-steps", "0"),
    ("run", "--mode", "jax", "--model", "gpt2-tiny", "--seq-len", HUGE),
    ("compare", "--timeout", "nan"),
    ("compare", "--timeout", "inf"),
    ("compare", "--steps", HUGE),
    ("compare", "--batch-size", HUGE),
    ("compare", "--seed", "-1"),
    ("replay", "x.hlo", "--seed", "-1"),
    ("replay", "x.hlo", "--profile", "--profile-steps", "-3"),
    ("replay", "x.hlo", "--profile", "--profile-steps", "0"),
    ("replay", "x.hlo", "--steps", HUGE),
    ("replay", "x.hlo", "--warmup", "0"),
    ("explain", "--min-gap", "nan"),
    ("explain", "--min-gap", "inf"),
    ("hlo", "stats", "x.hlo", "--top", HUGE),
    ("hlo", "stats", "x.hlo", "--top", "0"),
    ("hlo", "stats", "x.hlo", "--source-depth", "257"),
    ("trace", "stats", "x.json", "--top", "1001"),
]


@pytest.mark.parametrize("args", REFUSED, ids=" ".join)
def test_bad_option_values_are_refused_before_any_work(args, cli_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # run/compare would make traces/ here; explain would read traces/
    code, _, stderr = cli_run(*args)
    assert code == 2, stderr
    assert "Invalid value for" in stderr and "Traceback" not in stderr
    assert list(tmp_path.iterdir()) == []  # no run or comparison directory left behind


def test_finite_float_range_refuses_nan_and_infinity():
    import click

    kind = FiniteFloatRange(0, 10)
    assert kind.convert("0.5", None, None) == 0.5
    for text in ("nan", "NaN", "inf", "-inf"):
        with pytest.raises(click.BadParameter):
            kind.convert(text, None, None)
    assert math.isnan(click.FloatRange(0, 10).convert("nan", None, None))  # what click's own type lets through


def test_bounds_are_in_the_help(cli_run):
    for command in ("run", "compare", "replay"):
        code, stdout, _ = cli_run(command, "--help")
        assert code == 0 and f"0<=x<={MAX_SEED}" in stdout.replace("\n", " ") and f"1<=x<={MAX_STEPS}" in stdout


def test_the_largest_seed_replays(tmp_path):
    """--seed 2**32-1 (the bound) reaches every generator of the replay's inputs, an unsigned RNG-seed scalar too."""
    import jax

    program = Program(name="p", file="p", fmt="hlo", executable=None, compiled_hlo="", outputs=[], feeds={},
                      feeds_from="none", parameters=[Shape("u32", ()), Shape("u8", ()), Shape("f32", (2, 3))])
    seed_u32, seed_u8, weights = make_inputs(program, jax.devices("cpu")[0], None, None, MAX_SEED)
    assert int(seed_u32) == (20260101 + MAX_SEED) % 2**32 and int(seed_u8) == (20260101 + MAX_SEED) % 2**8
    assert weights.shape == (2, 3)


# ------------------------------------------------------------------------------------------------- -o - is stdout

TINY_HLO = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %y = f32[4]{0} add(%x, %x)
}
"""


@pytest.mark.parametrize("form", [(), ("--json",), ("--format", "md")], ids=["terminal", "json", "md"])
def test_diff_dash_output_is_stdout(form, cli_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.hlo").write_text(TINY_HLO, encoding="utf-8")
    (tmp_path / "b.hlo").write_text(TINY_HLO.replace("add", "multiply"), encoding="utf-8")
    code, stdout, stderr = cli_run("diff", "a.hlo", "b.hlo", "--no-xla-cost", "-o", "-", *form)
    assert code == 0, stderr
    assert "multiply" in stdout and "wrote" not in stderr
    assert not (tmp_path / "-").exists()


def test_render_output_reads_dash_as_stdout(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("-").write_text("the user's file", encoding="utf-8")  # a file named '-' is never the target, nor refused
    check_writable(Path("-"), force=False)
    assert choose_format(False, None, Path("-")) == "terminal"
    emit("report\n", Path("-"), force=False)
    assert capsys.readouterr().out == "report\n" and Path("-").read_text(encoding="utf-8") == "the user's file"


# --------------------------------------------------------------------------- damaged modules given to replay: exit 2


def _stablehlo() -> str:
    import jax
    import jax.numpy as jnp

    return jax.jit(lambda w, x: (w - 0.1 * x, jnp.sum(w * x))).lower(jnp.ones((3, 2)), jnp.ones((3, 2))).as_text()


def test_truncated_stablehlo_replay_names_the_file_and_position(tmp_path):
    text = _stablehlo()
    path = tmp_path / "step.stablehlo.mlir"
    path.write_text(text[: text.index("dense<") + len("dense")], encoding="utf-8")  # cut inside a constant
    line = assert_refused(hloscope("replay", path, "--steps", "2", "--warmup", "1", timeout=300), path, position=True)
    assert "StableHLO" in line and "expected '<' after 'dense'" in line
    assert list(tmp_path.iterdir()) == [path]  # no replay.json for a file that cannot be read


def test_truncated_hlo_replay_names_the_file_and_position(tmp_path):
    path = tmp_path / "module.hlo.txt"
    path.write_text(TINY_HLO[: TINY_HLO.index("add(") + 6], encoding="utf-8")
    with pytest.raises(InputError) as raised:
        replay(path, steps=2, warmup=1)
    # hloscope's own parser checks the text before XLA sees it: it names the end of the file, after the cut line 5
    assert raised.value.path == str(path) and raised.value.line in (5, 6) and raised.value.col is not None


# ------------------------------------------------------------------------- a negative overhead is an anomaly


def _run_record(timing: dict):
    """A run.json record holding only `timing`, typed as the replay reads it."""
    return decode_run(Path("run.json"), {"schema_version": 1, "run_id": "r", "mode": "jax", "status": "ok",
                                         "config": {}, "timing": timing})


def test_negative_overhead_is_reported_as_an_anomaly():
    steps, program = [0.010] * 10, [0.013] * 10  # the replay 3 ms slower than the run (a busy machine)
    run = ModeSummary(mode="jax", step_times_s=steps, replay=ReplaySummary(file="replay.json", program_times_s=program))
    data = split(run, run)
    assert data is not None and data.overhead_s == pytest.approx(-0.003) and data.overhead_anomaly is True
    assert data.overhead_note == "replay slower than the run by 3.000 ms: overhead not measurable here"
    comparison = _against_run(_run_record({"step_times_s": steps, "median_s": 0.010}),
                              ReplayTiming(step_times_s=program, median_s=0.013))
    assert comparison is not None and comparison.overhead_anomaly is True
    record = ReplayRecord(status="ok", source=ReplaySource(path="r"), config=ReplayConfig(device="cpu", warmup=1, seed=0),
                          device=ReplayDevice(platform="cpu", kind="cpu"),
                          compiler=ReplayCompilers(replay=ReplayXla(xla="jaxlib")), comparison=comparison)
    text = render_text(record)
    assert "overhead not measurable here" in text and "framework overhead -" not in text
    slower = ModeSummary(mode="jax", step_times_s=program, replay=ReplaySummary(file="replay.json", program_times_s=steps))
    positive = split(slower, slower)
    assert positive is not None and positive.overhead_anomaly is False and "overhead_note" not in positive.to_dict()


def test_an_overhead_measured_under_load_is_not_an_overhead():
    """The run and its replay are timed minutes apart: a run slowed by load (flagged noisy, or its main thread waiting
    for a CPU) would show a large "framework overhead" that is the load's. The record says it cannot tell instead."""
    steps, program = [0.021] * 10, [0.0023] * 10  # seen: a jax run at 21 ms under load, its replay 2.3 ms
    others = {"other_threads": {}, "other_processes": []}
    waited = {"seconds": 1.0, "main_thread": {"running_s": 0.6, "waiting_for_cpu_s": 0.4}, **others}
    quiet = {"seconds": 1.0, "main_thread": {"running_s": 0.99, "waiting_for_cpu_s": 0.01}, **others}
    cases = [  # (run noisy, run host scheduling, replay noisy) -> the note, or None for a measured overhead
        ((True, quiet, False), "run timing noisy: overhead not measurable here"),
        ((False, waited, False), "run waited for a CPU 40% of its timed window: overhead not measurable here"),
        ((False, quiet, True), "replay timing noisy: overhead not measurable here"),
        ((True, waited, True), "run timing noisy; run waited for a CPU 40% of its timed window; replay timing noisy: "
                               "overhead not measurable here"),
        ((False, quiet, False), None),
        ((None, None, False), None),  # older records: nothing flagged, nothing measured
    ]
    for (run_noisy, scheduling, replay_noisy), note in cases:
        window = None if scheduling is None else msgspec.convert(scheduling, HostScheduling)
        summary = ModeSummary(mode="jax", step_times_s=steps, noisy=run_noisy, host_scheduling=window,
                              replay=ReplaySummary(file="replay.json", program_times_s=program, noisy=replay_noisy))
        comparison = _against_run(
            _run_record({"step_times_s": steps, "median_s": 0.021, "noisy": run_noisy, "host_scheduling": scheduling}),
            ReplayTiming(step_times_s=program, median_s=0.0023, noisy=replay_noisy))
        measured = split(summary, summary)
        assert measured is not None
        for data in (measured.to_dict(), msgspec.to_builtins(comparison)):
            assert data is not None and data["overhead_anomaly"] is (note is not None)
            assert data.get("overhead_note") == note
