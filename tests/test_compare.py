"""`compare` loses nothing when a mode crashes, is killed, lacks its framework or is interrupted.

Crashes are made on purpose with the documented test hook HLOSCOPE_TEST_CRASH="<mode>:<how>" (see docs/run.md);
a missing framework is made real by putting a package that fails to import first on the child's PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from functools import partial

import helpers
import pytest

from hloscope.runs.rundir import load_comparison, load_run

pytestmark = pytest.mark.slow

TINY = ["--model", "vit-tiny", "--batch-size", "4", "--steps", "3", "--warmup", "1"]


# runs of the frameworks themselves: their address space is not capped
hloscope = partial(helpers.hloscope, memory_limit=None, timeout=600)


@pytest.fixture
def without_flax(tmp_path) -> dict:
    """An environment in which `import flax` fails, as if it were not installed."""
    shadow = tmp_path / "shadow" / "flax"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'flax'\")\n")
    return {"PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}


def test_crashes_and_a_missing_framework_are_reported_and_the_rest_completes(tmp_path, without_flax):
    env = {**without_flax, "HLOSCOPE_TEST_CRASH": "pytorch:segv,pytorch+compile:kill,torch_xla+compile:raise"}
    # --no-audit: the audit sets every mode up once more before timing, and nothing here reads it
    result = hloscope("compare", "--repeats", "1", "--modes", "pytorch,pytorch+compile,torch_xla,torch_xla+compile,jax", *TINY,
                      "--no-audit", "--out", str(tmp_path / "out"), "--json", env=env)
    assert result.code == 0, result.stderr[-2000:]
    comparison_dir = tmp_path / "out" / json.loads(result.stdout)["comparison_id"]
    comparison = load_comparison(comparison_dir).to_dict()
    entries = {entry["mode"]: entry for entry in comparison["modes"]}
    assert comparison["status"] == "partial"
    assert entries["torch_xla"]["status"] == "ok" and entries["torch_xla"]["ratio_to_fastest"] == 1.0
    expected = {"pytorch": "killed by SIGSEGV", "pytorch+compile": "killed by SIGKILL",
                "torch_xla+compile": "RuntimeError: HLOSCOPE_TEST_CRASH", "jax": "'flax'"}
    for mode, reason in expected.items():
        entry = entries[mode]
        assert entry["status"] == "failed" and reason in entry["error"], entry
        assert entry["stderr_tail"].strip()
        record = load_run(comparison_dir / entry["dir"]).to_dict()  # each mode still has its run directory
        assert record["status"] == "failed" and reason in record["error"]
    assert "simulating segv" in entries["pytorch"]["stderr_tail"]


def test_a_missing_framework_is_one_clear_line(tmp_path, without_flax):
    result = hloscope("run", "--mode", "jax", *TINY, "--out", str(tmp_path), "--run-id", "jax", env=without_flax)
    assert result.code == 3
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hloscope: error:") and "'flax'" in last and "pip install flax" in last
    record = load_run(tmp_path / "jax").to_dict()
    assert record["status"] == "failed" and "flax" in record["error"]


def test_ctrl_c_during_run_keeps_the_steps_measured(tmp_path):
    result = hloscope("run", "--mode", "jax", *TINY[:-4], "--steps", "50", "--warmup", "1", "--out", str(tmp_path),
                      "--run-id", "jax", env={"HLOSCOPE_TEST_CRASH": "jax:interrupt"})
    assert result.code == 130 and "interrupted" in result.stderr
    record = load_run(tmp_path / "jax").to_dict()
    assert record["status"] == "interrupted"
    assert len(record["timing"]["step_times_s"]) == 2 and record["timing"]["median_s"] > 0
    assert record["timing"]["first_step_s"] > 0


def test_ctrl_c_during_compare_marks_the_running_and_the_pending_modes(tmp_path):
    out = tmp_path / "out"
    # its own runner: Ctrl-C reaches compare while it runs, so the process is started here and signalled
    # --no-audit: Ctrl-C comes in the timed window; the audit's set-up processes before it change nothing checked here
    process = subprocess.Popen([sys.executable, "-m", "hloscope", "compare", "--repeats", "1", "--modes", "jax,pytorch",
                                "--model", "vit-tiny", "--batch-size", "4", "--steps", "100000", "--warmup", "1",
                                "--no-audit", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PJRT_DEVICE": "CPU"}, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        run_json = None
        while time.monotonic() < deadline:
            found = list(out.glob("*/jax/run.json"))
            if found and json.loads(found[0].read_text()).get("phase") == "timed window":
                run_json = found[0]
                break
            time.sleep(0.2)
        assert run_json is not None, "the jax mode never reached its timed window"
        time.sleep(1)
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, err.decode()[-2000:]
    comparison = load_comparison(run_json.parent.parent).to_dict()
    assert comparison["status"] == "interrupted"
    entries = {entry["mode"]: entry for entry in comparison["modes"]}
    assert entries["jax"]["status"] == "interrupted"
    jax_record = load_run(run_json.parent).to_dict()
    assert jax_record["status"] == "interrupted" and len(jax_record["timing"]["step_times_s"]) > 0
    assert entries["pytorch"]["status"] == "interrupted" and "not started" in entries["pytorch"]["error"]
    assert load_run(run_json.parent.parent / "pytorch").status == "interrupted"


def test_a_mode_over_its_time_limit_is_stopped_and_reported(tmp_path):
    result = hloscope("compare", "--repeats", "1", "--modes", "jax", *TINY, "--timeout", "1", "--out", str(tmp_path), "--json")
    assert result.code == 1  # no mode succeeded
    entry = json.loads(result.stdout)["modes"][0]
    assert entry["status"] == "failed" and entry["error"].startswith("timed out")
    assert load_run(tmp_path / json.loads(result.stdout)["comparison_id"] / "jax").status == "failed"
