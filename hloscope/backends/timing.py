"""The timed loop shared by every mode, and the statistics over its step times.

Frameworks that dispatch asynchronously (JAX, torch_xla, CUDA) return from the step call long before the device has
finished. Each mode therefore supplies `wait(outputs)`, which blocks until the step's outputs exist on the device, and
the timer stops the clock only after it returns. The step times recorded are wall times of step + wait.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hloscope.runs.records import RankTiming
from hloscope.significance import percentile


@dataclass
class StepLog:
    """What the loop measured so far. Lists are appended in place, so an interrupted run keeps every finished step."""

    first_step_s: float | None = None
    warmup_times_s: list[float] = field(default_factory=list)
    step_times_s: list[float] = field(default_factory=list)
    window_s: float | None = None
    losses: list[float] = field(default_factory=list)  # (first step's loss, then every timed step's loss)
    # --inject-host-delay: how long each timed step slept on the host, in step order; None: not measured
    host_sleeps_s: list[float] | None = None


def timed(step: Callable[[int], Any], wait: Callable[[Any], None], index: int) -> tuple[Any, float]:
    """Run one step and wait for the device; return (outputs, seconds)."""
    start = time.perf_counter()
    outputs = step(index)
    wait(outputs)
    return outputs, time.perf_counter() - start


def run_loop(step: Callable[[int], Any], wait: Callable[[Any], None], loss_of: Callable[[Any], float],
             steps: int, warmup: int, log: StepLog,
             on_window_start: Callable[[], None] = lambda: None,
             on_step: Callable[[str, int], None] = lambda phase, index: None,
             slept: Callable[[], float] | None = None) -> None:
    """First step (compile) + `warmup - 1` more untimed steps, then `steps` timed steps.

    `warmup` counts the first step: `warmup=1` means only the compile step precedes the window. The loss is read
    outside the timed region (reading it forces a device->host copy that the step itself does not do). `slept`
    (--inject-host-delay): the seconds the host slept since its last call; read before and after each timed step,
    outside the timer, into `log.host_sleeps_s`.
    """
    outputs, seconds = timed(step, wait, 0)
    log.first_step_s = seconds
    log.losses.append(loss_of(outputs))
    on_step("warmup", 0)
    for index in range(1, max(warmup, 1)):
        _, seconds = timed(step, wait, index)
        log.warmup_times_s.append(seconds)
        on_step("warmup", index)
    on_window_start()
    first_timed = max(warmup, 1)
    if slept is not None:
        log.host_sleeps_s = []
    window_start = time.perf_counter()
    for index in range(first_timed, first_timed + steps):
        if slept is not None:
            slept()  # the warm-up's sleeps are not this step's
        outputs, seconds = timed(step, wait, index)
        log.step_times_s.append(seconds)
        if log.host_sleeps_s is not None and slept is not None:
            log.host_sleeps_s.append(slept())
        on_step("timed", index)
    log.window_s = time.perf_counter() - window_start
    if steps:
        log.losses.append(loss_of(outputs))


def step_statistics(step_times_s: list[float], batch_size: int, window_s: float | None = None) -> dict:
    """Summary of the timed steps: median, mean, p10, p90, std (sample), throughput at the median."""
    if not step_times_s:
        return {"steps": 0}
    ordered = sorted(step_times_s)
    median = statistics.median(ordered)
    stats = {
        "steps": len(ordered),
        "median_s": median,
        "mean_s": statistics.fmean(ordered),
        "p10_s": percentile(ordered, 0.10),
        "p90_s": percentile(ordered, 0.90),
        "std_s": statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
        "min_s": ordered[0],
        "max_s": ordered[-1],
        "throughput_img_s": batch_size / median if median > 0 else None,
    }
    if window_s is not None:
        stats["window_s"] = window_s
        stats["window_mean_s"] = window_s / len(ordered)
    return stats


def rank_timing(per_rank: list[list[float]], batch_size: int) -> tuple[list[float], list[RankTiming]]:
    """Several processes' step times (one list per rank, step by step): the job's step, which ends when the slowest
    rank has finished it (the longest rank time of each step), and each rank's own figures (`batch_size`: its share
    of the global batch)."""
    steps = min(len(times) for times in per_rank)
    slowest = [max(times[index] for times in per_rank) for index in range(steps)]
    ranks = [RankTiming(rank=rank, step_times_s=list(times), **step_statistics(list(times), batch_size))
             for rank, times in enumerate(per_rank)]
    return slowest, ranks


NOISY_P90_OVER_P10 = 2.0
NOISY_MAX_OVER_MEDIAN = 10.0


def noise_warning(stats: dict) -> str | None:
    """A warning when the timed steps spread so widely that the median may not be the step's own cost (a loaded or
    shared machine, a background job, frequency scaling): p90/p10 above 2 or the slowest step above 10x the median."""
    p10, p90, median, slowest = (stats.get(k) for k in ("p10_s", "p90_s", "median_s", "max_s"))
    if not p10 or not median or p90 is None or slowest is None:
        return None
    if p90 / p10 <= NOISY_P90_OVER_P10 and slowest / median <= NOISY_MAX_OVER_MEDIAN:
        return None
    return (f"noisy timing: p10 {p10 * 1e3:.2f} ms, median {median * 1e3:.2f} ms, p90 {p90 * 1e3:.2f} ms, "
            f"slowest {slowest * 1e3:.2f} ms (p90/p10 {p90 / p10:.1f}, slowest/median {slowest / median:.1f}); "
            "the machine was probably busy: rerun on an idle machine or with more --steps")
