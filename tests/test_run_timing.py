"""The timed loop waits for the device, and its statistics are the textbook ones."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from helpers import python

from hloscope.backends.base import RunOptions
from hloscope.backends.jax_mode import JaxSession
from hloscope.backends.timing import StepLog, noise_warning, run_loop, step_statistics


class DelayedResult:
    """What an asynchronous framework returns: the call comes back at once, the value is ready `delay` later."""

    def __init__(self, delay: float, value: float):
        self.value = value
        self.ready = threading.Event()
        self.ready_at = time.perf_counter() + delay
        threading.Timer(delay, self.ready.set).start()


def test_the_timer_counts_the_time_until_the_result_is_ready():
    delay = 0.05
    dispatched: list[float] = []

    def step(index):
        start = time.perf_counter()
        result = DelayedResult(delay, 10.0 - index)
        dispatched.append(time.perf_counter() - start)
        return result

    log = StepLog()
    run_loop(step, wait=lambda result: result.ready.wait(), loss_of=lambda result: result.value,
             steps=4, warmup=2, log=log)
    assert len(log.step_times_s) == 4 and len(log.warmup_times_s) == 1 and log.first_step_s is not None
    # The calls themselves returned almost at once; every recorded step still covers the whole delay.
    assert max(dispatched) < delay / 2  # (a loaded 2-core machine can take 10+ ms to start a timer thread)
    assert min(log.step_times_s) >= delay
    assert log.window_s >= 4 * delay
    assert log.losses == [10.0, 10.0 - 5]  # first step's loss, then the last timed step's


def test_without_waiting_the_same_steps_look_instant():
    """The counter-check: a timer that does not wait would report the dispatch time only."""
    log = StepLog()
    run_loop(lambda i: DelayedResult(0.05, 1.0), wait=lambda result: None, loss_of=lambda r: r.value,
             steps=3, warmup=1, log=log)
    assert max(log.step_times_s) < 0.05


def test_jax_wait_blocks_until_the_outputs_are_computed(tmp_path):
    import jax

    session = JaxSession(RunOptions(mode="jax"), tmp_path)  # wait takes the step's outputs: no workload needed
    x = jax.numpy.ones((512, 512))
    step = jax.jit(lambda a: jax.lax.fori_loop(0, 40, lambda _, b: jax.numpy.tanh(b @ a), a))
    step(x).block_until_ready()  # compiled before the timed call
    loss = x[0, 0].block_until_ready()  # its own small program, compiled and run before: a loaded machine can take
    outputs = (step(x), {"loss": loss})  # longer to compile it than the step takes to compute
    leaves = jax.tree_util.tree_leaves(outputs)
    assert not all(leaf.is_ready() for leaf in leaves)  # dispatched: 40 matmuls (10 GFLOP) still to compute
    session.wait(outputs)
    assert all(leaf.is_ready() for leaf in leaves)


# A real torch_xla session on the CPU, in its own process (its runtime stays out of this one): how many XLA
# executions torch_xla's metrics count at each point of one step.
TORCH_XLA_STEP = """
import json, sys
from pathlib import Path
import torch_xla.debug.metrics as metrics
from hloscope.backends.base import RunOptions
from hloscope.backends.torch_xla_mode import TorchXlaSession

def executions():
    data = metrics.metric_data("ExecuteTime")
    return data[0] if data else 0

session = TorchXlaSession(RunOptions(mode="torch_xla", model="vit-tiny", batch_size=2, steps=1, warmup=0),
                          Path(sys.argv[1]))
session.setup()
before = executions()
outputs = session.step(0)
dispatched = executions()
session.wait(outputs)
print(json.dumps({"before": before, "dispatched": dispatched, "waited": executions()}))
"""


@pytest.mark.slow
def test_torch_xla_wait_runs_the_traced_step(tmp_path):
    """torch_xla traces the step lazily: nothing runs until wait cuts the graph and waits for its execution."""
    done = python("-c", TORCH_XLA_STEP, tmp_path, timeout=600)
    assert done.code == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["dispatched"] == counts["before"]  # the step only traced
    assert counts["waited"] == counts["before"] + 1  # wait ran it: the whole step is one graph


def test_statistics_match_numpy():
    times = [0.010, 0.012, 0.011, 0.030, 0.009, 0.0105, 0.0111]
    stats = step_statistics(times, batch_size=8, window_s=0.1)
    assert stats["median_s"] == pytest.approx(np.median(times))
    assert stats["mean_s"] == pytest.approx(np.mean(times))
    assert stats["p10_s"] == pytest.approx(np.percentile(times, 10))
    assert stats["p90_s"] == pytest.approx(np.percentile(times, 90))
    assert stats["std_s"] == pytest.approx(np.std(times, ddof=1))
    assert stats["throughput_img_s"] == pytest.approx(8 / np.median(times))
    assert stats["window_mean_s"] == pytest.approx(0.1 / 7)


def test_an_interrupted_loop_keeps_the_steps_it_measured():
    log = StepLog()

    def on_step(phase, index):
        if phase == "timed" and len(log.step_times_s) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_loop(lambda i: i, lambda o: None, float, steps=10, warmup=1, log=log, on_step=on_step)
    assert len(log.step_times_s) == 3 and log.window_s is None


@pytest.mark.parametrize("times, noisy", [
    ([0.010] * 9 + [0.011], False),
    ([0.017] * 5 + [0.040] * 5, True),           # p90/p10 = 2.35
    ([0.017] * 19 + [2.0], True),                # one step 118x the median (what a shared machine produced)
    ([0.010] * 10 + [0.019] * 2, False),         # a few slower steps, inside both limits
])
def test_noisy_windows_are_recognised(times, noisy):
    warning = noise_warning(step_statistics(times, 8))
    assert (warning is not None) == noisy
