"""`compare` and run records cut short (docs/reliability.md): a full disk, `running` records with no live writer,
dumps left in `.xla_dump` after a kill, and SIGTERM/SIGKILL against a real `compare`.

The commands run as real subprocesses under a timeout and an address-space limit; the readers (explain, hlo stats) are
forked from a process that has imported them (helpers.hloscope_forked).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import hloscope_forked

from hloscope.runs import rundir
from hloscope.runs.rundir import load_comparison

# ------------------------------------------------- (d)-(g) compare on a full disk, cut short, killed, signalled

TINY = ["--model", "vit-tiny", "--batch-size", "4", "--warmup", "1"]
# For the compares that are signalled in a timed window or meet a full comparison.json: the fairness audit sets each
# mode up in a process of its own before timing and changes nothing they check. The test whose children meet a full
# disk keeps it: the audit's set-up processes write run.json and meet that disk too.
NO_AUDIT = "--no-audit"
HLO_TEXT = ("HloModule jit_train_step, is_scheduled=true\n\nENTRY main {\n  a = f32[8,8]{1,0} parameter(0)\n"
            "  ROOT d = f32[8,8]{1,0} dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")


# its own runner: compare is signalled (SIGTERM, SIGINT) while it runs, so it is started here, not waited for
def _compare(out: Path, *args: str, env: dict | None = None, sigint_ignored: bool = False, **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", "hloscope", "compare", "--repeats", "1", "--modes", "jax,pytorch", *TINY, *args, "--out", str(out)]
    if sigint_ignored:  # as a background job of a script starts it (`hloscope compare ... &`)
        command = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *command]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PJRT_DEVICE": "CPU", **(env or {})}, **popen)


def _sigterm_in_timed_window(process: subprocess.Popen, run_dir: Callable[[], Path]) -> str:
    """SIGTERM to `compare` once the mode at run_dir() is in its timed window; compare's stderr."""
    try:
        _wait_for(lambda: _phase(run_dir()) == "timed window", what="the timed window")
        # the phase is written just before the first timed step: let the run spend CPU in its steps first (a fixed
        # pause let a busy machine deliver SIGTERM before the first step ended, and the run recorded 0 steps)
        _ran_for(_writer_pid(run_dir()), CPU_IN_WINDOW_S)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return err


def _wait_for(condition, timeout: float = 180, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _phase(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "run.json").read_text()).get("phase")
    except (OSError, ValueError):
        return None


# CPU seconds a run spends in its timed window before a test signals it, however busy the machine (CPU time only
# advances while the run runs): hundreds of tiny steps, and more than the first timed step's own cost (eager PyTorch's
# second step ever: 0.3 s of CPU was once not enough for it to end, and the run recorded 0 steps)
CPU_IN_WINDOW_S = 2.0


def _writer_pid(run_dir: Path) -> int:
    return json.loads((run_dir / "run.json").read_text())["writer"]["pid"]


def _cpu_s(pid: int) -> float | None:
    """The process's CPU time so far (user + system, from /proc); None once it has gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def _ran_for(pid: int, seconds: float) -> None:
    """Wait until the process `pid` has run `seconds` more of CPU (or has gone)."""
    start = _cpu_s(pid)
    if start is not None:
        _wait_for(lambda: (_cpu_s(pid) or float("inf")) - start >= seconds, what=f"{seconds} s of CPU in the run")


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_failed_write_is_an_output_error_and_leaves_the_old_record(tmp_path, monkeypatch):
    rundir.write_run(tmp_path, {"status": "ok", "n": 1})
    monkeypatch.setenv(rundir.TEST_ENOSPC_ENV, "run.json@1")
    monkeypatch.setattr(rundir, "_writes", {})
    with pytest.raises(rundir.OutputError, match="No space left on device"):
        rundir.write_run(tmp_path, {"status": "ok", "n": 2})
    assert json.loads((tmp_path / "run.json").read_text())["n"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left


@pytest.mark.slow
def test_compare_on_a_full_disk_is_one_line_and_every_finished_run_is_readable(tmp_path):
    """comparison.json can be written once, then the disk is full: every mode still runs, one warning, one error line
    (exit 2); explain reads both runs from their directories and says the comparison was cut short."""
    process = _compare(tmp_path, "--steps", "3", NO_AUDIT, env={"HLOSCOPE_TEST_ENOSPC": "comparison.json@2"})
    _, err = process.communicate(timeout=300)
    assert "Traceback" not in err and process.returncode == 2, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("hloscope: error:")]
    warnings = [line for line in err.splitlines() if line.startswith("hloscope: warning:")]
    assert len(errors) == 1 and "comparison.json: No space left on device" in errors[0], err
    assert len(warnings) == 1 and "going on with the next modes" in warnings[0], err
    (comparison_dir,) = tmp_path.glob("compare-*")
    assert json.loads((comparison_dir / "comparison.json").read_text())["status"] == "running"
    for mode in ("jax", "pytorch"):
        assert json.loads((comparison_dir / mode / "run.json").read_text())["status"] == "ok"
    result = hloscope_forked("explain", comparison_dir, timeout=180)
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    (warning,) = result.stderr.splitlines()
    assert "says 'running'" in warning and "no longer running" in warning and "2 not listed" in warning, warning
    assert "jax" in result.stdout and "pytorch" in result.stdout


@pytest.mark.slow
def test_a_child_on_a_full_disk_fails_in_one_line_and_compare_reports_it(tmp_path):
    process = _compare(tmp_path, "--steps", "3", env={"HLOSCOPE_TEST_ENOSPC": "run.json@2"})
    _, err = process.communicate(timeout=300)
    assert "Traceback" not in err and process.returncode == 1, err[-3000:]  # no mode succeeded
    (comparison_dir,) = tmp_path.glob("compare-*")
    comparison = json.loads((comparison_dir / "comparison.json").read_text())
    assert comparison["status"] == "failed"
    for entry in comparison["modes"]:
        assert entry["status"] == "failed" and "No space left on device" in entry["error"], entry
        log = (comparison_dir / entry["stderr_log"]).read_text()
        assert "Traceback" not in log and log.count("hloscope: error:") == 1, log[-2000:]


def test_a_running_comparison_with_a_dead_writer_is_said_and_its_runs_recovered(tmp_path, capsys):
    for mode in ("jax", "pytorch"):
        (tmp_path / mode).mkdir()
        rundir.write_json_atomic(tmp_path / mode / "run.json", {
            "schema_version": 1, "run_id": mode, "mode": mode, "status": "ok", "config": {},
            "timing": {"median_s": 0.01}, "artifacts": []})
    record = {"schema_version": 1, "status": "running", "config": {}, "modes": [
        {"mode": "jax", "dir": "jax", "status": "ok"}]}
    rundir.write_comparison(tmp_path, record)  # written by this (live) process: no warning, nothing added
    assert [m.dir for m in rundir.load_comparison(tmp_path).modes] == ["jax"]
    assert capsys.readouterr().err == ""
    record["writer"] = {"pid": _dead_pid(), "host": socket.gethostname(), "start_ticks": None}
    rundir.write_json_atomic(tmp_path / "comparison.json", record)
    comparison = rundir.load_comparison(tmp_path)
    assert [(m.dir, m.recovered) for m in comparison.modes] == [("jax", False), ("pytorch", True)]
    assert rundir.find_runs(tmp_path) == [tmp_path / "jax", tmp_path / "pytorch"]
    (line,) = capsys.readouterr().err.splitlines()
    assert "no longer running" in line and "1 not listed" in line, line


def test_a_running_run_with_a_dead_writer_is_said_once(tmp_path, capsys):
    rundir.write_json_atomic(tmp_path / "run.json", {
        "schema_version": 1, "run_id": "r", "mode": "jax", "status": "running", "config": {}, "artifacts": [],
        "writer": {"pid": _dead_pid(), "host": socket.gethostname(), "start_ticks": None}})
    rundir.load_run(tmp_path)
    rundir.load_run(tmp_path)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"hloscope: warning: {tmp_path / 'run.json'}: says 'running'") and "pid" in line, line


def test_dumps_left_in_xla_dump_by_an_interrupted_run_are_listed_and_analysed(tmp_path):
    run = tmp_path / "jax"
    (run / ".xla_dump").mkdir(parents=True)
    for stage in ("before_optimizations", "cpu_after_optimizations"):
        (run / ".xla_dump" / f"module_0001.jit_train_step.{stage}.txt").write_text(HLO_TEXT)
    (run / ".xla_dump" / "module_0001.jit_train_step.ir-no-opt.ll").write_text("; llvm")
    rundir.write_run(run, {"schema_version": 1, "run_id": "jax", "mode": "jax", "status": "interrupted",
                           "config": {}, "timing": {"step_times_s": [0.01, 0.01], "median_s": 0.01}, "artifacts": []})
    listed = rundir.load_run(run).artifacts
    assert [(a.kind, a.stage, a.train_step) for a in listed] == [
        ("hlo", "before_optimizations", True), ("hlo", "after_optimizations", True)]
    result = hloscope_forked("hlo", "stats", "--no-xla-cost", run, timeout=120)
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr
    assert "jit_train_step" in result.stdout
    result = hloscope_forked("explain", "--json", tmp_path, timeout=120)
    assert result.code == 0 and "jax" in result.stdout, result.stderr[-2000:]
    assert "need --dump-hlo" not in result.stdout, result.stdout[-2000:]


def test_dumps_a_tpu_run_left_are_listed_under_xlas_tpu_names(tmp_path):
    """On a TPU XLA tags each dump file with the compilation after the module name (tests/data/tpu_v5e)."""
    run = tmp_path / "jax"
    (run / ".xla_dump").mkdir(parents=True)
    for what in ("before_optimizations", "after_optimizations", "after_optimizations-memory-usage-report",
                 "tpu_comp_env"):
        (run / ".xla_dump" / f"module_0343.jit_train_step.cl_933746096.{what}.txt").write_text(HLO_TEXT)
    rundir.write_run(run, {"schema_version": 1, "run_id": "jax", "mode": "jax", "status": "interrupted",
                           "config": {}, "timing": {"step_times_s": [0.01], "median_s": 0.01}, "artifacts": []})
    assert [(a.kind, a.stage, a.module, a.module_id) for a in rundir.load_run(run).artifacts] == [
        ("memory_report", "after_optimizations", "jit_train_step", 343),  # in the order of the names
        ("hlo", "after_optimizations", "jit_train_step", 343),
        ("hlo", "before_optimizations", "jit_train_step", 343)]


@pytest.mark.slow
def test_sigkill_to_a_child_then_sigterm_to_compare_keep_every_run_listed_with_its_dumps(tmp_path):
    """A real `compare --modes jax,pytorch --dump-hlo`: the jax child is SIGKILLed in its timed window (the parent
    reports it and starts pytorch), then the parent gets SIGTERM in pytorch's window (handled like Ctrl-C)."""
    process = _compare(tmp_path, "--steps", "100000", "--dump-hlo", NO_AUDIT, start_new_session=True)
    try:
        _wait_for(lambda: list(tmp_path.glob("compare-*/jax")) and _phase(next(tmp_path.glob("compare-*/jax")))
                  == "timed window", what="jax's timed window")
        comparison_dir = next(tmp_path.glob("compare-*"))
        jax_pid = json.loads((comparison_dir / "jax" / "run.json").read_text())["writer"]["pid"]
        os.kill(jax_pid, signal.SIGKILL)
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    err = _sigterm_in_timed_window(process, lambda: comparison_dir / "pytorch")
    assert "Traceback" not in err and process.returncode == 130, err[-3000:]
    comparison = rundir_load(comparison_dir)
    entries = {e["mode"]: e for e in comparison["modes"]}
    assert comparison["status"] == "interrupted"
    assert entries["jax"]["status"] == "failed" and "SIGKILL" in entries["jax"]["error"]
    assert entries["pytorch"]["status"] == "interrupted" and entries["pytorch"]["steps"] > 0
    jax = json.loads((comparison_dir / "jax" / "run.json").read_text())
    hlo = [a for a in jax["artifacts"] if a["kind"] == "hlo" and a["train_step"]]
    assert hlo and all(a["path"].startswith(".xla_dump/") for a in hlo), jax["artifacts"]
    result = hloscope_forked("hlo", "stats", "--no-xla-cost", comparison_dir / "jax", timeout=120)
    assert result.code == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]


@pytest.mark.slow
def test_sigterm_stops_a_compare_started_with_sigint_ignored(tmp_path):
    """A background job of a script (`hloscope compare ... &`) starts with SIGINT ignored, and its children inherit
    that; compare still stops its running mode by SIGINT (on SIGTERM), which the child takes back as Ctrl-C."""
    process = _compare(tmp_path, "--steps", "100000", NO_AUDIT, sigint_ignored=True, start_new_session=True)
    err = _sigterm_in_timed_window(process, lambda: next(tmp_path.glob("compare-*/jax"), tmp_path / "none"))
    assert process.returncode == 130, err[-3000:]
    comparison_dir = next(tmp_path.glob("compare-*"))
    jax = rundir_load(comparison_dir)["modes"][0]
    assert jax["status"] == "interrupted" and jax["steps"] > 0, jax


@pytest.mark.slow
def test_sigkill_to_compare_leaves_a_comparison_readers_recover(tmp_path):
    """SIGKILL cannot be handled: comparison.json stays `running`. With the whole group killed (the OOM killer, a
    batch system), readers say so and read the jax run and its dumps as found."""
    process = _compare(tmp_path, "--steps", "100000", "--dump-hlo", NO_AUDIT, start_new_session=True)
    try:
        _wait_for(lambda: list(tmp_path.glob("compare-*/jax")) and _phase(next(tmp_path.glob("compare-*/jax")))
                  == "timed window", what="jax's timed window")
        _ran_for(_writer_pid(next(tmp_path.glob("compare-*/jax"))), CPU_IN_WINDOW_S)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
    comparison_dir = next(tmp_path.glob("compare-*"))
    # the killed jax child may still be tearing down its memory when compare has gone (seen on a busy machine): until
    # it has, its run.json is rightly read as a run in progress
    jax_record = json.loads((comparison_dir / "jax" / "run.json").read_text())
    _wait_for(lambda: rundir.writer_alive(jax_record) is False, what="the killed jax run to exit")
    assert json.loads((comparison_dir / "comparison.json").read_text())["status"] == "running"
    result = hloscope_forked("explain", "--json", comparison_dir, timeout=180)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "says 'running'" in line]
    assert len(warnings) == 2, result.stderr  # comparison.json and jax's run.json, once each
    assert "need --dump-hlo" not in result.stdout
    result = hloscope_forked("hlo", "stats", "--no-xla-cost", comparison_dir, timeout=120)
    assert result.code == 0 and "jit_train_step" in result.stdout, result.stderr[-2000:]


def rundir_load(path: Path) -> dict:
    return load_comparison(path).to_dict()
