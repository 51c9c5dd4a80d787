"""Verdicts of `explain --test-hypotheses`, simulated with the product's own rule (hloscope.explain.experiments:
`closure` and `judge`): three configurations (faster, slower, slower with one setting changed) of three processes
each, as compare's default, and 30 timed steps a process, as the tiny presets run. Each process lands apart from
the others of its configuration by a between-process model on a log scale (normal, Student t3, bimodal: the models
of benches/simulate_process_test.py); each step wobbles around its process by a within-process noise. The faster
step is 1; the slower is 1 + gap; the changed one closes a known share of that gap: 1 + gap x (1 - share).
Per true share, the rate of each verdict. A change that closes nothing (share 0) or little (0.1) and is called
"confirmed" or "partly" is a false confirmation; a full closure (1.0) called "confirmed" is the power.
Results: benches/README.md "Verdicts of tested hypotheses".

    .venv/bin/python benches/simulate_closure.py [--draws 50] [--steps 30] [--seed 5]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hloscope.explain.experiments import CANNOT_TELL, CONFIRMED, PARTLY, REFUTED, closure, judge

PROCESSES = 3
SHARES = (0.0, 0.1, 0.3, 0.5, 0.8, 1.0)
GAPS = (0.10, 0.30, 0.50)
VERDICTS = (CONFIRMED, PARTLY, REFUTED, CANNOT_TELL)
# Within one process, steps wobble around the process's median by this sd on a log scale (a loaded CPU's steps).
WITHIN_SD = 0.05

Draw = Callable[[np.random.Generator], np.ndarray]
# name -> (how the processes of one configuration land apart, on a log scale; the draw of one configuration's shifts)
MODELS: dict[str, tuple[str, Draw]] = {
    "normal": ("normal, sd 5%", lambda rng: rng.normal(0, 0.05, PROCESSES)),
    "t3": ("Student t3 x 5%", lambda rng: 0.05 * rng.standard_t(3, PROCESSES)),
    "bimodal": ("30% of processes 20% slower (bimodal)",
                lambda rng: 0.2 * (rng.random(PROCESSES) < 0.3) + rng.normal(0, 0.02, PROCESSES)),
    "normal15": ("normal, sd 15%", lambda rng: rng.normal(0, 0.15, PROCESSES)),
}


def configuration(step: float, between: Draw, steps: int, rng: np.random.Generator) -> list[list[float]]:
    """One configuration's processes: each a list of step times around `step` x its process's own factor."""
    return [list(step * math.exp(shift) * np.exp(rng.normal(0, WITHIN_SD, steps))) for shift in between(rng)]


def verdict(gap: float, share: float, between: Draw, steps: int, rng: np.random.Generator) -> str:
    """The product's verdict on one simulated re-run."""
    fast = configuration(1.0, between, steps, rng)
    slow = configuration(1.0 + gap, between, steps, rng)
    changed = configuration(1.0 + gap * (1 - share), between, steps, rng)
    found = closure(fast, slow, changed)
    assert found is not None  # noqa: S101 - every configuration has timed steps
    return judge(found, median(t for p in fast for t in p), "the change")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=50, help="re-runs simulated per model, gap and share")
    parser.add_argument("--steps", type=int, default=30, help="timed steps a process")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--models", default="normal,t3,bimodal",
                        help=f"comma-separated, of {', '.join(MODELS)}")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    chosen = [MODELS[name] for name in args.models.split(",")]
    started = time.monotonic()
    print(f"% confirmed / partly / refuted / cannot tell, {args.draws} draws a cell, {PROCESSES} processes x "
          f"{args.steps} steps a configuration\n")
    false_calls = {share: [0, 0, 0] for share in SHARES[:2]}  # share -> [confirmed, partly, draws]
    for name, between in chosen:
        print(f"between processes: {name}\n")
        print("| true share closed | " + " | ".join(f"gap {gap:.0%}" for gap in GAPS) + " |")
        print("|---|" + "---|" * len(GAPS))
        for share in SHARES:
            cells = []
            for gap in GAPS:
                counts = dict.fromkeys(VERDICTS, 0)
                for _ in range(args.draws):
                    counts[verdict(gap, share, between, args.steps, rng)] += 1
                cells.append(" / ".join(f"{100 * counts[v] / args.draws:.0f}" for v in VERDICTS))
                if share in false_calls:
                    tally = false_calls[share]
                    tally[0], tally[1], tally[2] = (tally[0] + counts[CONFIRMED], tally[1] + counts[PARTLY],
                                                    tally[2] + args.draws)
            print(f"| {share:g} | " + " | ".join(cells) + " |", flush=True)
        print()
    for share, (confirmed, partly, draws) in false_calls.items():
        print(f"share {share:g}, every model and gap: {confirmed} confirmed and {partly} partly of {draws} "
              f"({100 * (confirmed + partly) / draws:.2f}%)")
    print(f"{time.monotonic() - started:.0f} s")

if __name__ == "__main__":
    main()
