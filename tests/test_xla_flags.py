"""--xla-flags without running a framework: the check of a value, what a run process's XLA_FLAGS becomes, the flags a
recorded run was made with (given or inherited, hloscope's own left out, a device count the user exported kept), the
child's command line, and a run.json whose flags are not a string of flags refused in one line before anything runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import assert_refused, hloscope

from hloscope.api import explain
from hloscope.backends.base import RunOptions
from hloscope.backends.devices import host_device_flags
from hloscope.explain.experiments import plan_pairs
from hloscope.explain.report import ConfigDifference
from hloscope.explain.tested import recorded_options
from hloscope.runs import rundir, xla_flags
from hloscope.runs.runner import run_command
from hloscope.runs.xla_flags import HOST_DEVICE_COUNT_FLAG

NO_OPT = "--xla_backend_optimization_level=0"


def test_a_string_of_flags_is_kept_with_single_spaces():
    assert xla_flags.check(f"  {NO_OPT}\t--xla_cpu_enable_fast_math=true ") == \
        f"{NO_OPT} --xla_cpu_enable_fast_math=true"
    assert xla_flags.check("") == ""


@pytest.mark.parametrize("value", ["$(touch /tmp/x)", "--xla_a=1; rm -rf /", "xla_a=1", "--xla_a=\x00",
                                   "--xla_a='b c'", "-" * 3, "--" + "a" * 20000])
def test_anything_but_flags_is_refused_with_the_token_named(value):
    with pytest.raises(ValueError, match=r"not an XLA flag|characters"):
        xla_flags.check(value)


def test_a_value_that_is_not_text_is_refused():
    with pytest.raises(ValueError, match="must be text"):
        xla_flags.check(["--xla_a"])  # type: ignore[arg-type]


def test_the_option_replaces_the_inherited_flags_and_none_keeps_them(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_inherited=1")
    xla_flags.apply(None)
    assert os.environ["XLA_FLAGS"] == "--xla_inherited=1"
    xla_flags.apply(NO_OPT)
    assert os.environ["XLA_FLAGS"] == NO_OPT
    xla_flags.apply("")
    assert "XLA_FLAGS" not in os.environ


def test_the_options_arguments_leave_the_command_line_jaxs_cache_key_reads(monkeypatch):
    """jax keys its persistent cache on every argument that starts with --xla: once the option is XLA_FLAGS, its
    arguments (one or two of them) leave sys.argv, and nothing else does."""
    monkeypatch.setattr(sys, "argv", ["hloscope", "run", "--xla-flags", NO_OPT, "--mode", "jax",
                                      f"--xla-flags={NO_OPT}", "--out", "x"])
    xla_flags.apply(NO_OPT)
    assert sys.argv == ["hloscope", "run", "--mode", "jax", "--out", "x"] and os.environ["XLA_FLAGS"] == NO_OPT


def test_the_recorded_flags_come_from_the_option_else_the_environment_less_hloscopes_own():
    given = {"config": {"xla_flags": NO_OPT}, "environment": {"env": {"XLA_FLAGS": f"{NO_OPT} --xla_dump_to=/r"}}}
    assert xla_flags.recorded(given) == NO_OPT
    inherited = {"config": {"devices": 2}, "environment": {"env": {
        "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 {NO_OPT} --xla_dump_to=/r --xla_dump_hlo_as_text "
                     "--xla_cpu_enable_fast_math=false"}}}
    assert xla_flags.recorded(inherited) == NO_OPT
    assert xla_flags.recorded({"config": {}, "environment": {"env": {}}}) == ""  # recorded: none set
    assert xla_flags.recorded({"config": {}}) is None  # no environment: not known
    with pytest.raises(ValueError):
        xla_flags.recorded({"config": {"xla_flags": "$(id)"}})


def _inherited(flags: str, config: dict) -> dict:
    return {"config": config, "environment": {"env": {"XLA_FLAGS": flags}}}


def test_the_device_count_that_devices_set_is_left_out_of_the_requested_flags():
    set_by_devices = host_device_flags(NO_OPT, 4)  # the flags --devices 4 leaves in XLA_FLAGS
    assert xla_flags.recorded(_inherited(set_by_devices, {"devices": 4})) == NO_OPT


def test_a_device_count_the_user_exported_stays_in_the_requested_flags():
    exported = f"{HOST_DEVICE_COUNT_FLAG}=8 {NO_OPT}"
    assert xla_flags.recorded(_inherited(exported, {"devices": 1})) == exported  # one device: hloscope added nothing
    assert xla_flags.recorded(_inherited(exported, {"devices": 2})) == exported  # --devices 2 would have set 2
    assert xla_flags.recorded(_inherited(exported, {"devices": True})) == exported  # not a device count


def test_a_record_without_a_device_count_keeps_the_device_count_flag():
    exported = f"{NO_OPT} {HOST_DEVICE_COUNT_FLAG}=4 --xla_dump_to=/r"
    kept = f"{NO_OPT} {HOST_DEVICE_COUNT_FLAG}=4"
    assert xla_flags.recorded(_inherited(exported, {})) == kept
    assert xla_flags.recorded(_inherited(exported, {"devices": None})) == kept
    assert xla_flags.recorded({"environment": {"env": {"XLA_FLAGS": exported}}}) == kept  # no config at all


def test_the_child_gets_the_flags_as_one_argument(tmp_path):
    command = run_command(RunOptions(mode="jax", model="vit-tiny", xla_flags=NO_OPT), tmp_path)
    assert f"--xla-flags={NO_OPT}" in command
    assert "--xla-flags=" in run_command(RunOptions(mode="jax", model="vit-tiny", xla_flags=""), tmp_path)
    assert not any(a.startswith("--xla-flags") for a in run_command(RunOptions(mode="jax", model="vit-tiny"),
                                                                      tmp_path))


def test_run_refuses_a_value_that_is_not_flags_before_anything_runs(tmp_path):
    result = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--xla-flags", "$(touch x)", "--out", tmp_path)
    assert result.code == 2 and "is not an XLA flag" in result.stderr
    assert not list(tmp_path.iterdir())


def _run(root: Path, name: str, config: dict, steps: list[float] | None = None, env: dict | None = None) -> Path:
    run = rundir.create_run_dir(root, run_id=name)
    steps = steps or [0.002, 0.0021, 0.0019, 0.002]
    rundir.write_run(run, {"schema_version": 1, "run_id": name, "mode": "jax", "status": "ok", "error": None,
                           "config": {"model": "vit-tiny", "batch_size": 8, "data": "device", "precision": "fp32",
                                      **config},
                           "environment": {"platform": "cpu", "env": env or {}},
                           "timing": {"step_times_s": steps, "median_s": sorted(steps)[len(steps) // 2],
                                      "mean_s": sum(steps) / len(steps),
                                      "first_step_s": 1.0}})
    return run


def test_explain_refuses_recorded_flags_that_are_not_flags_in_one_line(tmp_path):
    """A run.json may come from anyone: its flags reach a child's environment only once checked."""
    bad = _run(tmp_path, "bad", {"xla_flags": "--xla_a=1 $(touch pwned)"})
    good = _run(tmp_path, "good", {})
    result = hloscope("explain", bad, good, "--test-hypotheses", "--budget", "0.1")
    assert_refused(result, bad / "run.json", words=("XLA flag",))
    assert not (Path.cwd() / "pwned").exists() and not list(tmp_path.glob("tested-*"))


def test_explain_refuses_recorded_flags_that_are_not_text_in_one_line(tmp_path):
    bad = _run(tmp_path, "bad", {})
    record = json.loads((bad / "run.json").read_text())
    record["config"]["xla_flags"] = ["--xla_a=1"]
    (bad / "run.json").write_text(json.dumps(record))
    good = _run(tmp_path, "good", {})
    result = hloscope("explain", bad, good, "--test-hypotheses", "--budget", "0.1")
    assert_refused(result, bad / "run.json", words=("xla_flags",))


def test_a_flag_exported_on_one_side_becomes_a_test_with_the_recorded_flags(tmp_path):
    """Old runs and exported flags: no config.xla_flags, the flags only in the recorded XLA_FLAGS. explain lists the
    difference, and the plan re-runs the slower side with the faster one's recorded flags (none), both sides given
    their flags explicitly; hloscope's own dump flag is not part of them."""
    slow = _run(tmp_path, "slow", {}, steps=[0.010, 0.0102, 0.0098, 0.0101, 0.0099, 0.01],
                env={"XLA_FLAGS": f"{NO_OPT} --xla_dump_to=/somewhere"})
    fast = _run(tmp_path, "fast", {}, steps=[0.002, 0.0021, 0.0019, 0.002, 0.00205, 0.00195])
    report = explain(slow, fast, baseline=str(fast))
    entry = next(m for m in report.modes if m.mode == "jax (slow)")
    assert ConfigDifference("env.XLA_FLAGS", NO_OPT, None) in entry.config_differences
    options, _, _ = recorded_options(report)
    assert options["jax (slow)"]["xla_flags"] == NO_OPT and options["jax (fast)"]["xla_flags"] == ""
    (plan,) = plan_pairs(report, options)
    test = next(t for t in plan.tests if t.setting == "xla_flags")
    assert test.untestable is None and test.change == f'--xla-flags "{NO_OPT}" -> ""'
    assert plan.variants()[test.variant]["xla_flags"] == ""
