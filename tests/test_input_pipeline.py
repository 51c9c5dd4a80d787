"""`--data loader` in a profiled run: the time each step spends obtaining its batch (the DataLoader's `next()`, the
conversion to the framework's arrays, the host-to-device transfer) lies inside the step's `hloscope/input`
annotation in every mode, and explain's ledger gives it to its input pipeline node, which claims idle time before any
other host cause.

One short profiled run per mode (vit-tiny, batch 4), each in a fresh `hloscope run` process: conftest's loader_run,
shared with test_run_profile; for JAX also a `--data device` run with the same options, for explain's comparison.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.backends.base import RunOptions
from hloscope.explain.collect import summarize_run
from hloscope.trace.load import load_traces
from hloscope.trace.step_profile import CAUSE_ORDER, CONTENTION, HOST_CAUSES, HOST_CONTENTION

pytestmark = pytest.mark.slow

MODES = ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax", "torchax"]
INPUT_NODES = ("idle:input pipeline", "host:input pipeline")
PROFILED_STEPS = RunOptions().profile_steps  # conftest's loader_run profiles the default number of steps
# What obtaining a batch records in each trace: the DataLoader's own record (Kineto) or its `__next__` frame (JAX's
# Python tracer), and the host-to-device transfer (JAX's device_put, torch_xla's PjRt transfer).
FETCH_EVENTS = re.compile(r"DataLoader|dataloader\.py:\d+ __next__|DevicePutWithSharding|TransferToDevice")


@pytest.fixture(scope="module")
def runs(loader_run):
    """conftest's profiled runs, one per (mode, data), shared with test_run_profile."""
    return loader_run


def test_the_input_pipeline_claims_idle_time_first():
    assert CAUSE_ORDER[0] == "input pipeline" and HOST_CAUSES[0][0] == "input pipeline"
    pattern = HOST_CAUSES[0][1]
    for name in ("hloscope/input", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
        assert pattern.search(name)


@pytest.mark.parametrize("mode", MODES)
def test_obtaining_the_batch_lies_inside_the_input_annotation(runs, mode):
    (trace,) = load_traces(runs(mode))
    events = [e for e in trace.events if not e.device]
    markers = [e for e in events if e.kind == "step"]
    inputs = [e for e in events if e.name == "hloscope/input"]
    assert len(markers) == PROFILED_STEPS and len(inputs) == PROFILED_STEPS
    fetches = [e for e in events if FETCH_EVENTS.search(e.name)
               and any(m.start_us <= e.start_us <= m.end_us for m in markers)]
    assert len(fetches) >= PROFILED_STEPS, sorted({e.name for e in events})[:50]  # at least one per step
    for fetch in fetches:
        assert any(i.start_us <= fetch.start_us and fetch.end_us <= i.end_us + 0.01 and i.lane == fetch.lane
                   for i in inputs), (mode, fetch.name, fetch.start_us)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_has_a_positive_input_pipeline_node(runs, mode):
    ledger = summarize_run(runs(mode)).ledger
    assert ledger is not None
    measured = {node: ledger.node_median(node) for node in INPUT_NODES if node in ledger.nodes}
    assert measured and max(measured.values()) > 0, sorted(ledger.nodes)


def test_jax_loader_against_device_the_input_node_outweighs_every_other_idle_increase(runs):
    loader, device = runs("jax"), runs("jax", "device")
    result = hloscope("explain", loader, device, "--json")
    assert result.code == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    summaries = {Path(s["run_dirs"][0]).name: s for s in report["summaries"].values()}
    slow = summaries[loader.name]["ledger"]["node_median_s"]
    fast = summaries[device.name]["ledger"]["node_median_s"]
    entry = next(m for m in report["modes"] if m["verdict"] != "baseline")
    assert {"field": "data", "a": "loader", "b": "device"} in entry["config_differences"] or \
        {"field": "data", "a": "device", "b": "loader"} in entry["config_differences"]
    input_node = next(node for node in INPUT_NODES if node in slow)
    # Measured on the loader run's own steps: the DataLoader's time is in its input node, whatever the gap's verdict.
    assert slow[input_node] > 0
    # Every other part of the host's own work: the CPU wait the runs measured (the contention node) is the machine's
    # load, which the ledger takes out of the parts it inflated; it may differ between the two runs by any amount.
    increases = {node: seconds - fast.get(node, 0.0) for node, seconds in slow.items()
                 if node.startswith(("idle:", "host:")) and node not in (*INPUT_NODES, CONTENTION, HOST_CONTENTION)}
    assert slow[input_node] >= max(increases.values(), default=0.0), (slow, fast)
