"""False positives and power of explain's tests between processes, simulated with the product's own statistics
(hloscope.significance): four configurations of three processes each, process medians drawn on a log scale, each
configuration against configuration 0 under the spread test alone (the rule before 2026-12-03) and under the spread
test plus Student's t with the variance pooled over the four, Holm at 1% (the rule since). First the false-positive
rate of configuration 1 when every configuration is the same, then the power for a +50% gap on configuration 3.
Results: benches/README.md "The process-level test".

    .venv/bin/python benches/simulate_process_test.py [--draws 20000]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from hloscope.significance import PROCESS_ALPHA, holm_levels, pooled_process_variation, process_test

MIN_GAP = 0.05
PROCESSES = 3
CONFIGURATIONS = 4


def verdicts(medians: list[list[float]]) -> tuple[list[bool], list[bool]]:
    """Per configuration but the first, against it: (called by the spread test alone, called by spread test + t)."""
    base = medians[0]
    control = max((max(m) - min(m)) / float(np.median(m)) for m in medians)
    variation = pooled_process_variation(medians)
    assert variation is not None  # noqa: S101 - every configuration has three processes
    spread, p_values = [], []
    for other in medians[1:]:
        relative = abs(float(np.median(other)) / float(np.median(base)) - 1)
        own = max(max(other) - min(other), max(base) - min(base)) / float(np.median(base))
        spread.append(relative > max(control, own) and relative >= MIN_GAP)
        p_values.append(process_test(other, base, variation).p_value)
    held = holm_levels(p_values, PROCESS_ALPHA)
    return spread, [s and differs for s, (differs, _) in zip(spread, held, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=20_000)
    args = parser.parse_args()
    rng = np.random.default_rng(3)
    models: dict[str, Callable[[], np.ndarray]] = {
        "normal, sd 5%": lambda: rng.normal(0, 0.05, PROCESSES),
        "normal, sd 15%": lambda: rng.normal(0, 0.15, PROCESSES),
        "Student t3 x 5%": lambda: 0.05 * rng.standard_t(3, PROCESSES),
        "30% of processes 20% slower (bimodal)":
            lambda: 0.2 * (rng.random(PROCESSES) < 0.3) + rng.normal(0, 0.02, PROCESSES),
        "half the processes 10% slower": lambda: 0.1 * (rng.random(PROCESSES) < 0.5) + rng.normal(0, 0.02, PROCESSES),
    }
    print("| process medians (log scale) | spread test alone | spread test + t-test, Holm at 1% |")
    print("|---|---|---|")
    for name, draw in models.items():
        before = now = 0
        for _ in range(args.draws):
            spread, tested = verdicts([list(np.exp(draw())) for _ in range(CONFIGURATIONS)])
            before, now = before + spread[0], now + tested[0]
        print(f"| {name} | {100 * before / args.draws:.2f}% | {100 * now / args.draws:.2f}% |")
    for sd in (0.05, 0.10, 0.15):
        before = now = 0
        draws = args.draws // 5
        for _ in range(draws):
            logs = [rng.normal(0, sd, PROCESSES) for _ in range(CONFIGURATIONS)]
            logs[3] = logs[3] + math.log(1.5)
            spread, tested = verdicts([list(np.exp(x)) for x in logs])
            before, now = before + spread[2], now + tested[2]
        print(f"power for +50% at sd {sd:.0%}: spread test alone {before / draws:.0%}, with the t-test {now / draws:.0%}")


if __name__ == "__main__":
    main()
