"""Traces recorded here by JAX's and PyTorch/XLA's profilers on the CPU (each in a subprocess), read back.

Checked against what the frameworks say: the step markers given to the profiler, and the instruction names of the
compiled HLO module as XLA's own parser (jaxlib._hlo) reads them.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
from helpers import python

from hloscope.runs import rundir
from hloscope.trace.hlo_map import kernel_time_by_hlo_op
from hloscope.trace.load import load_trace, load_traces
from hloscope.trace.stats import trace_stats

STEPS = 3

JAX_SCRIPT = r"""
import json, sys
import jax, jax.numpy as jnp

def step(w, x):
    y = jnp.tanh(x @ w)
    return w - 0.01 * (x.T @ y), jnp.sum(y * y)

logdir, hlo_path = sys.argv[1], sys.argv[2]
jitted = jax.jit(step)
w, x = jnp.ones((64, 64)), jnp.ones((32, 64))
open(hlo_path, "w").write(jitted.lower(w, x).compile().as_text())
w, loss = jitted(w, x); loss.block_until_ready()
with jax.profiler.trace(logdir):
    for i in range(int(sys.argv[3])):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            w, loss = jitted(w, x); loss.block_until_ready()

# The same work without step markers, as a program named like a training step.
def train_step(w, x):
    return step(w, x)

train = jax.jit(train_step)
w, loss = train(w, x); loss.block_until_ready()
with jax.profiler.trace(logdir + "_unmarked"):
    for i in range(int(sys.argv[3])):
        w, loss = train(w, x); loss.block_until_ready()
"""

TORCH_XLA_SCRIPT = r"""
import sys
import torch, torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.profiler as xp

device = torch_xla.device()
w = torch.ones(64, 64, device=device)
x = torch.ones(32, 64, device=device)

def step(w):
    return w - 0.01 * (x.T @ torch.tanh(x @ w))

w = step(w); torch_xla.sync(); xm.wait_device_ops()
xp.start_trace(sys.argv[1])
for i in range(int(sys.argv[2])):
    with xp.StepTrace("train_step", step_num=i):
        w = step(w)
xm.wait_device_ops()
xp.stop_trace()
"""


def _run(script: str, *args: str) -> None:
    done = python("-c", script, *args, env={"JAX_PLATFORMS": "cpu"})
    assert done.code == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def jax_profile(tmp_path_factory):
    root = tmp_path_factory.mktemp("jax_profile")
    _run(JAX_SCRIPT, str(root / "logdir"), str(root / "step.hlo.txt"), str(STEPS))
    return root


def _instruction_names(hlo_text: str) -> set[str]:
    from jaxlib import _hlo

    module = _hlo.hlo_module_from_text(hlo_text)
    return {instruction.name for computation in module.computations() for instruction in computation.instructions()}


@pytest.mark.slow
def test_jax_cpu_xplane_steps_and_ops(jax_profile):
    logdir = jax_profile / "logdir"
    traces = load_traces(logdir)  # the TensorBoard log directory: plugins/profile/<run>/<host>.xplane.pb
    assert [trace.format for trace in traces] == ["xplane"]  # the trace.json.gz beside it is not read twice
    stats = trace_stats(traces[0]).to_dict()
    assert stats["steps"] == STEPS and stats["step_source"] == "markers"
    assert [step["step"] for step in stats["per_step"]] == list(range(STEPS))
    entry = _instruction_names((jax_profile / "step.hlo.txt").read_text())
    ops = [event for event in traces[0].events if event.is_device_exec]
    # On the CPU the XLA runtime's op events are the device work: each is an instruction of the compiled module.
    assert ops and {event.hlo_op for event in ops} <= entry
    assert {event.hlo_module for event in ops} == {"jit_step"}
    per_execution = len(ops) // STEPS
    assert len(ops) == per_execution * STEPS
    assert [step["kernels"] for step in stats["per_step"]] == [per_execution] * STEPS
    assert stats["kernels"] == len(ops)
    totals = kernel_time_by_hlo_op(traces[0], module="jit_step")
    assert set(totals) == {event.hlo_op for event in ops}
    assert sum(totals.values()) == pytest.approx(stats["device_time_us"])


@pytest.mark.slow
def test_without_markers_the_train_step_executions_are_the_steps(jax_profile):
    (trace,) = load_traces(jax_profile / "logdir_unmarked")
    stats = trace_stats(trace).to_dict()
    assert stats["step_source"] == "executions of jit_train_step"
    ops = [event for event in trace.events if event.is_device_exec and event.hlo_module == "jit_train_step"]
    assert stats["steps"] == STEPS
    assert [step["kernels"] for step in stats["per_step"]] == [len(ops) // STEPS] * STEPS


@pytest.mark.slow
def test_jax_trace_json_beside_the_xplane_agrees(jax_profile):
    (xplane_file,) = (jax_profile / "logdir").rglob("*.xplane.pb")
    (json_file,) = (jax_profile / "logdir").rglob("*.trace.json.gz")
    from_json = load_trace(json_file)
    assert from_json.format == "chrome"
    from_xplane = load_trace(xplane_file)
    json_ops = Counter(event.hlo_op for event in from_json.events if event.is_device_exec)
    xplane_ops = Counter(event.hlo_op for event in from_xplane.events if event.is_device_exec)
    assert json_ops == xplane_ops
    json_stats, xplane_stats = trace_stats(from_json).to_dict(), trace_stats(from_xplane).to_dict()
    assert json_stats["steps"] == xplane_stats["steps"] == STEPS
    assert json_stats["device_time_us"] == pytest.approx(xplane_stats["device_time_us"], rel=1e-3)


@pytest.mark.slow
def test_jax_trace_json_alone_is_read_from_the_logdir(jax_profile, tmp_path, cli_run):
    """Without the xplane.pb beside it (deleted, or a profile copied without it), the trace.json.gz is what is read."""
    logdir = tmp_path / "logdir"
    shutil.copytree(jax_profile / "logdir", logdir)
    (xplane_file,) = logdir.rglob("*.xplane.pb")
    xplane_stats = trace_stats(load_trace(xplane_file)).to_dict()
    xplane_file.unlink()
    code, stdout, stderr = cli_run("trace", "stats", str(logdir), "--json")
    assert code == 0, stderr
    (trace,) = json.loads(stdout)["traces"]
    assert trace["file"].endswith(".trace.json.gz") and trace["format"] == "chrome"
    assert trace["steps"] == STEPS and trace["kernels"] == xplane_stats["kernels"]


@pytest.mark.slow
def test_torch_xla_cpu_xplane(tmp_path):
    _run(TORCH_XLA_SCRIPT, str(tmp_path / "logdir"), str(STEPS))
    (trace,) = load_traces(tmp_path / "logdir")
    stats = trace_stats(trace).to_dict()
    assert stats["steps"] == STEPS
    ops = [event for event in trace.events if event.is_device_exec]
    assert ops and all(event.hlo_module.startswith("SyncTensorsGraph") for event in ops)
    # Each step ran the train graph once; every execution is counted whole in one step. (Which step: on a loaded
    # machine the CPU client queues executions, and XLA's flows then link a queued one to the execution before it,
    # so it can count in an earlier step; docs/trace.md.)
    per_execution = len({event.hlo_op for event in ops if event.hlo_module == ops[-1].hlo_module})
    by_step = [step["kernels"] for step in stats["per_step"]]
    assert sum(by_step) == stats["kernels"] == len(ops)
    assert all(count % per_execution == 0 for count in by_step)
    assert stats["categories"]["matmul/conv"] > 0  # the two dots


@pytest.mark.slow
def test_hlo_stats_shows_measured_time_beside_the_instructions(jax_profile, cli_run, tmp_path):
    """A run directory with the compiled module and a profile of it: `hlo stats` lists device time per instruction,
    checked against ProfileData's own events and XLA's parser of the same module."""
    from jax.profiler import ProfileData

    run = tmp_path / "run"
    (run / "hlo").mkdir(parents=True)
    shutil.copy(jax_profile / "step.hlo.txt", run / "hlo" / "module_0001.jit_step.cpu_after_optimizations.txt")
    shutil.copytree(jax_profile / "logdir", run / "profile")
    rundir.write_run(run, {
        "schema_version": 1, "run_id": "r1", "mode": "jax", "status": "ok", "error": None, "config": {},
        "environment": {}, "timing": {}, "artifacts": [
            {"kind": "hlo", "path": "hlo/module_0001.jit_step.cpu_after_optimizations.txt", "module": "jit_step",
             "stage": "after_optimizations", "train_step": True, "format": "text"},
            {"kind": "trace", "path": "profile", "format": "xplane"}]})  # fmt: skip
    totals: Counter = Counter()
    counts: Counter = Counter()
    (xplane_file,) = run.rglob("*.xplane.pb")
    for plane in ProfileData.from_file(str(xplane_file)).planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if stats.get("hlo_op") == event.name and stats.get("hlo_module") == "jit_step":
                    totals[event.name] += event.duration_ns / 1000.0
                    counts[event.name] += 1
    code, stdout, stderr = cli_run("hlo", "stats", str(run), "--json", "--no-xla-cost", "--top", "5")
    assert code == 0, stderr
    (module,) = json.loads(stdout)["modules"]
    measured = module["measured"]
    assert measured["events"] == sum(counts.values())
    assert measured["device_time_us"] == pytest.approx(sum(totals.values()), abs=1e-2)
    assert measured["matched_us"] == pytest.approx(measured["device_time_us"], abs=1e-2)  # every op is in the module
    expected = totals.most_common(5)
    assert [row["total_us"] for row in measured["top"]] == pytest.approx([total for _, total in expected], abs=1e-2)
    names = _instruction_names((jax_profile / "step.hlo.txt").read_text())
    for row in measured["top"]:
        assert row["name"] in names and row["count"] == counts[row["name"]] == STEPS
        assert row["total_us"] == pytest.approx(totals[row["name"]], abs=1e-2)
        assert (row["fusion_kind"] is not None) == (row["opcode"] == "fusion")
    # The table shows the same rows.
    code, stdout, _ = cli_run("hlo", "stats", str(run), "--no-xla-cost", "--top", "5")
    assert "measured device time" in stdout and expected[0][0] in stdout
    # In a comparison, a module is measured by its own run's profile only: a second run with the same module name
    # and no profile gets no measured time.
    other = tmp_path / "other"
    shutil.copytree(run / "hlo", other / "hlo")
    record = rundir.load_run(run).to_dict()
    rundir.write_run(other, {**record, "artifacts": [a for a in record["artifacts"] if a["kind"] == "hlo"]})
    comparison = tmp_path / "cmp"
    comparison.mkdir()
    shutil.move(run, comparison / "jax")
    shutil.move(other, comparison / "jax_again")
    rundir.write_comparison(comparison, {"schema_version": 1, "comparison_id": "cmp", "config": {}, "modes": [
        {"mode": "jax", "dir": "jax"}, {"mode": "jax", "dir": "jax_again"}]})  # fmt: skip
    code, stdout, stderr = cli_run("hlo", "stats", str(comparison), "--json", "--no-xla-cost", "--top", "5")
    assert code == 0, stderr
    modules = json.loads(stdout)["modules"]
    assert [(m["file"].split("/cmp/")[1].split("/")[0], "measured" in m) for m in modules] == [
        ("jax", True), ("jax_again", False)]
    assert modules[0]["measured"] == measured
    # A broken profile costs only the measured time, with one warning naming it; the HLO statistics are all there.
    (xplane_file,) = comparison.rglob("*.xplane.pb")
    xplane_file.write_bytes(b"not a profile")
    code, stdout, stderr = cli_run("hlo", "stats", str(comparison), "--json", "--no-xla-cost")
    assert code == 0
    assert [("measured" in m) for m in json.loads(stdout)["modules"]] == [False, False]
    assert stderr.count("hloscope: warning: no measured time") == 1 and xplane_file.name in stderr
