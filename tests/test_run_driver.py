"""The driver's bookkeeping with a stand-in Session: recompiles in the window, failures and interrupts recorded."""

from __future__ import annotations

import itertools
from typing import ClassVar

import numpy as np
import pytest
from helpers import REPO

from hloscope.backends import driver, timing
from hloscope.backends.base import RunOptions, Session
from hloscope.backends.timing import StepLog
from hloscope.runs.records import Environment, RunParts, run_document
from hloscope.runs.rundir import create_run_dir, load_run, write_run


class FakeSession(Session):
    """Losses fall by 0.1 a step; `compiles` grows when the step index is in `recompile_at`."""

    recompile_at: ClassVar[set[int]] = set()
    fail_at: int | None = None

    def setup(self) -> None:
        self.compiles = 1
        self.graph = {"kind": "none"}

    def step(self, index: int):
        if index == self.fail_at:
            raise ValueError("shapes do not match")
        if index in self.recompile_at:
            self.compiles += 1
        return 3.0 - 0.1 * index

    def wait(self, outputs) -> None:
        pass

    def loss_of(self, outputs) -> float:
        return outputs

    def compile_counts(self) -> dict[str, int]:
        return {"compiles": self.compiles}

    def info(self) -> dict:
        return {"framework": "fake", "precision": {"requested": self.options.precision}}


@pytest.fixture
def clock(monkeypatch):
    """Replace the step timer's clock: each step takes the next of the given seconds (first, warm-up, timed)."""
    def use(seconds) -> None:
        times = iter(seconds)

        def timed(step, wait, index):
            outputs = step(index)
            wait(outputs)
            return outputs, next(times)

        monkeypatch.setattr(timing, "timed", timed)

    return use



@pytest.fixture
def fake(monkeypatch, clock):
    clock(itertools.repeat(0.010))  # a steady 10 ms a step, so that only the tests that want noise see it
    monkeypatch.setattr(driver, "load_session", lambda options, run_dir: FakeSession(options, run_dir))
    FakeSession.recompile_at, FakeSession.fail_at = set(), None
    return FakeSession


def _run(tmp_path, **overrides):
    options = RunOptions(mode="jax", model="vit-tiny", batch_size=4, steps=5, warmup=2, **overrides)
    run_dir = create_run_dir(tmp_path, "run")
    warnings: list[str] = []
    return driver.execute(options, run_dir, warn=warnings.append), warnings, run_dir


def test_a_clean_run_records_everything(tmp_path, fake):
    record, warnings, run_dir = _run(tmp_path)
    assert record["status"] == "ok" and warnings == []
    assert len(record["timing"]["step_times_s"]) == 5 and len(record["timing"]["warmup_times_s"]) == 1
    assert record["loss"] == {"first": 3.0, "last": pytest.approx(2.4), "finite": True, "falling": True}
    assert record["compiles"] == {"before_window": {"compiles": 1}, "in_window": {"compiles": 0},
                                  "total": {"compiles": 1}, "recompiled_in_window": False}
    assert load_run(run_dir).environment.framework == "fake"


def test_a_compile_inside_the_timed_window_is_flagged(tmp_path, fake):
    fake.recompile_at = {1, 4}  # one during warm-up (fine), one inside the window (steps 2..6)
    record, warnings, _ = _run(tmp_path)
    assert record["compiles"]["in_window"] == {"compiles": 1} and record["compiles"]["recompiled_in_window"]
    assert len(warnings) == 1 and "compiled again inside the timed window" in warnings[0]
    assert record["warnings"] == warnings


def test_a_failing_step_leaves_a_failed_run_json(tmp_path, fake):
    fake.fail_at = 3
    with pytest.raises(driver.ModeFailed, match="ValueError: shapes do not match"):
        _run(tmp_path)
    record = load_run(tmp_path / "run").to_dict()
    assert record["status"] == "failed" and record["error"] == "ValueError: shapes do not match"
    assert "Traceback" in record["error_traceback"]
    assert record["environment"]["framework"] == "fake"  # what setup knew is kept


def test_an_interrupt_keeps_the_steps_measured(tmp_path, fake, monkeypatch):
    monkeypatch.setenv(driver.TEST_CRASH_ENV, "pytorch:raise, jax:interrupt")
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path)
    record = load_run(tmp_path / "run").to_dict()
    assert record["status"] == "interrupted" and len(record["timing"]["step_times_s"]) == 2
    assert record["timing"]["window_mean_s"] > 0 and "phase" not in record


def test_noisy_steps_are_flagged_in_run_json_and_on_the_terminal(tmp_path, fake, clock):
    clock([0.5] * 2 + [0.010, 0.011, 0.010, 0.250, 0.012])  # one timed step 23x the median
    record, warnings, run_dir = _run(tmp_path)
    assert record["timing"]["noisy"] is True
    assert len(warnings) == 1 and warnings[0].startswith("noisy timing") and "slowest/median 22.7" in warnings[0]
    assert load_run(run_dir).warnings == warnings


def test_steady_steps_are_not_flagged(tmp_path, fake, clock):
    clock([0.5] * 2 + [0.010, 0.011, 0.010, 0.012, 0.011])
    record, warnings, _ = _run(tmp_path)
    assert record["timing"]["noisy"] is False and warnings == []


def test_typed_parts_write_the_bytes_written_before_them(tmp_path):
    """The loss and compiles parts, built as typed Structs and encoded by records.section_document, write run.json
    byte for byte as the dict-building writer did (tests/data/records/written/run.json, written by it from these
    inputs): a NaN loss as null, a numpy loss as a number, the Struct's other fields left out."""
    log = StepLog(first_step_s=1.25, warmup_times_s=[0.5, 0.25], step_times_s=[0.125, 0.25, 0.0625, 0.1],
                  window_s=0.5375, losses=[3.0, 2.5, float(np.float32(2.25)), 2.0, float("nan")])
    parts = RunParts(run_id="golden", mode="jax", started_at="", config={}, environment=Environment())
    driver.fill_timing(parts, log, 8)
    parts.compiles = driver._compiles({"jit": 2, "lowerings": 1}, {"jit": 3, "lowerings": 1})
    document = run_document(parts)
    falling = StepLog(step_times_s=[0.1], losses=[np.float64(2.0), 1.5])
    second = RunParts(run_id="second", mode="jax", started_at="", config={}, environment=Environment())
    driver.fill_timing(second, falling, 8)
    record = {"schema_version": 1, "run_id": "golden", "mode": "jax", "status": "ok", "error": None,
              "timing": document["timing"], "loss": document["loss"], "compiles": document["compiles"],
              "second_loss": run_document(second)["loss"]}
    written = write_run(tmp_path, record)
    assert written.read_bytes() == (REPO / "tests" / "data" / "records" / "written" / "run.json").read_bytes()
