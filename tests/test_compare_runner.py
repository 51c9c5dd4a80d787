"""compare's bookkeeping without running a framework: exits described, dead children's run.json written for them, a
comparison whose every mode failed recorded `failed`, and SIGTERM to compare handled like Ctrl-C, keeping the runs
that finished."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from hloscope.backends.base import RunOptions
from hloscope.errors import UsageError
from hloscope.modes import parse_device_counts, run_label
from hloscope.runs import rundir
from hloscope.runs import runner as compare_runner
from hloscope.runs.records import ComparisonEntry, unfinished_run
from hloscope.runs.rundir import load_run, write_run
from hloscope.runs.runner import (
    ModeOutcome,
    PlannedRun,
    add_ratios,
    describe_exit,
    run_command,
    settle_run,
    stderr_tail,
    summary_entry,
)


def test_exits_are_described_for_people():
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL (killed: out of memory?)"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(None) == "did not finish"


def test_stderr_tail_keeps_the_last_lines(tmp_path):
    log = tmp_path / "err.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert stderr_tail(log, 3) == "line 97\nline 98\nline 99"
    assert stderr_tail(tmp_path / "missing.log") == ""


def _outcome(tmp_path: Path, returncode, text: str) -> ModeOutcome:
    (tmp_path / "logs").mkdir(exist_ok=True)
    log = tmp_path / "logs" / "jax.stderr.log"
    log.write_text(text)
    return ModeOutcome("jax", returncode, 1.5, log)


def test_a_child_killed_mid_run_gets_a_failed_run_json_that_keeps_what_it_wrote(tmp_path):
    options = RunOptions(mode="jax", model="vit-tiny")
    run_dir = tmp_path / "jax"
    run_dir.mkdir()
    write_run(run_dir, {"schema_version": 1, "run_id": "jax", "mode": "jax", "status": "running", "config": {},
                        "timing": {"step_times_s": []}, "artifacts": [], "environment": {"python": "3.11"}})
    record = settle_run(options, tmp_path, _outcome(tmp_path, -signal.SIGKILL, "loading\nKilled\n"))
    assert record.status == "failed"
    assert record.error == "killed by SIGKILL (killed: out of memory?); stderr ends with: Killed"
    on_disk = load_run(run_dir).to_dict()
    assert on_disk["status"] == "failed" and on_disk["environment"] == {"python": "3.11"}


def test_a_child_that_never_made_its_directory_still_gets_one(tmp_path):
    options = RunOptions(mode="jax", model="vit-tiny", steps=3)
    record = settle_run(options, tmp_path, _outcome(tmp_path, 1, "ImportError: boom\n"))
    on_disk = load_run(tmp_path / "jax").to_dict()
    assert on_disk["status"] == record.status == "failed"
    assert on_disk["config"]["steps"] == 3 and "exited with code 1" in on_disk["error"]


def test_a_finished_childs_record_is_taken_as_written(tmp_path):
    options = RunOptions(mode="jax", model="vit-tiny")
    (tmp_path / "jax").mkdir()
    write_run(tmp_path / "jax", {"schema_version": 1, "run_id": "jax", "mode": "jax", "status": "ok", "config": {},
                                 "timing": {"step_times_s": [0.002], "median_s": 0.002, "throughput_img_s": 4000.0},
                                 "memory": {"peak_host_rss_bytes": 10}, "artifacts": []})
    record = settle_run(options, tmp_path, _outcome(tmp_path, 0, ""))
    entry = summary_entry(record, _outcome(tmp_path, 0, ""))
    assert entry.status == "ok" and entry.median_s == 0.002 and entry.peak_memory_source == "host_rss"
    assert entry.stderr_log == "logs/jax.stderr.log"


def test_ratios_are_to_the_fastest_successful_mode():
    entries = [ComparisonEntry(dir="a", status="ok", median_s=0.004), ComparisonEntry(dir="b", status="ok", median_s=0.002),
               ComparisonEntry(dir="c", status="failed", median_s=0.001)]
    assert [e.ratio_to_fastest for e in add_ratios(entries)] == [2.0, 1.0, None]


def test_each_mode_runs_as_a_fresh_python_with_the_same_options(tmp_path):
    options = RunOptions(mode="torch_xla+compile", model="vit-tiny", batch_size=4, dump_hlo=True, profile=True)
    command = run_command(options, tmp_path)
    assert command[:5] == [sys.executable, "-m", "hloscope", "run", "--mode"]
    assert command[5] == "torch_xla" and "--compile-model" in command
    assert command[command.index("--run-id") + 1] == "torch_xla_compile"
    assert {"--dump-hlo", "--profile", "--json"} <= set(command) and "--keep-all" not in command
    assert all(type(part) is str for part in command)  # plain strings only: no Paths or numbers


def test_a_run_per_mode_and_device_count_is_named_by_its_count(tmp_path):
    assert parse_device_counts("4,1,2,2") == [1, 2, 4]
    for bad in ("0,2", "1,x", ","):
        try:
            parse_device_counts(bad)
        except UsageError as error:
            assert str(error).startswith(f"--devices {bad}: expected")
        else:
            raise AssertionError(bad)
    planned = PlannedRun("pytorch+compile", 2)
    options = planned.options(lambda mode: RunOptions(mode=mode, model="vit-tiny", batch_size=4))
    assert options.devices == 2 and planned.dir_name == "pytorch_compile-2dev"
    command = run_command(options, tmp_path, planned.dir_name)
    assert command[command.index("--run-id") + 1] == "pytorch_compile-2dev"
    assert command[command.index("--devices") + 1] == "2"
    assert PlannedRun("jax").dir_name == "jax"  # one device count: the folder is the mode's, as before
    assert run_label("jax", 1) == "jax (1 device)" and run_label("jax", 4) == "jax (4 devices)"


def _fake_compare(tmp_path, monkeypatch, outcomes):
    """run_comparison with each mode's child replaced: `outcomes[mode]` is a status to record, or 'sigterm' to have
    the parent receive SIGTERM while that mode runs."""
    def fake_run_mode(options, comparison_dir, timeout_s=None, on_poll=None, name=None):
        run = comparison_dir / options.mode
        run.mkdir()
        what = outcomes[options.mode]
        if what == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        rundir.write_run(run, {"schema_version": 1, "run_id": options.mode, "mode": options.mode, "config": {},
                               "status": what, "error": None,
                               "timing": {"step_times_s": [0.01] * 20, "median_s": 0.01}})
        return None

    monkeypatch.setattr(compare_runner, "run_mode", fake_run_mode)
    monkeypatch.setattr(compare_runner, "settle_run", lambda options, d, outcome, status="failed", reason=None, name=None:
                        rundir.load_run(d / options.mode, check_artifacts=False)
                        if (d / options.mode / "run.json").exists() else
                        unfinished_run(d / options.mode / "run.json", options.mode, options.mode, {}, status, reason))
    monkeypatch.setattr(compare_runner, "get_mode", lambda mode: type("M", (), {"dir_name": mode})(), raising=False)
    options = lambda mode: RunOptions(mode=mode)  # noqa: E731
    return compare_runner.run_comparison(list(outcomes), options, tmp_path, {})


def test_every_mode_failed_is_failed_not_partial(tmp_path, monkeypatch):
    comparison = _fake_compare(tmp_path, monkeypatch, {"jax": "failed", "pytorch": "failed"})
    assert comparison.status == "failed"
    assert json.loads((tmp_path / "comparison.json").read_text())["status"] == "failed"


def test_sigterm_to_compare_is_handled_like_ctrl_c_and_keeps_finished_runs(tmp_path, monkeypatch):
    with pytest.raises(KeyboardInterrupt):
        _fake_compare(tmp_path, monkeypatch, {"jax": "ok", "pytorch": "sigterm", "torch_xla": "ok"})
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert comparison["status"] == "interrupted"
    assert next((e["mode"], e["status"]) for e in comparison["modes"]) == ("jax", "ok")
    assert {e["mode"] for e in comparison["modes"]} == {"jax", "pytorch", "torch_xla"}
