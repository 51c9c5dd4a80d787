"""The properties of explain --test-hypotheses' verdicts that benches/simulate_closure.py measures (benches/README.md,
"Verdicts of tested hypotheses"), pinned on fixed-seed draws of the bench's model: three configurations of three
processes, 30 steps each, processes 5% apart (sd, log scale), steps 5% around their process. A change that closes
none of a gap that reproduced is never confirmed nor partly; one that closes all of a 50% gap is confirmed."""

from __future__ import annotations

import math
from statistics import median

import numpy as np

from hloscope.explain.experiments import CONFIRMED, PARTLY, REFUTED, closure, judge

PROCESSES, STEPS, BETWEEN_SD, WITHIN_SD = 3, 30, 0.05, 0.05


def configuration(step: float, rng: np.random.Generator) -> list[list[float]]:
    return [list(step * math.exp(shift) * np.exp(rng.normal(0, WITHIN_SD, STEPS)))
            for shift in rng.normal(0, BETWEEN_SD, PROCESSES)]


def rerun(gap: float, share: float, seed: int):
    """One simulated re-run: the closure and the verdict of a change that closes `share` of a `gap` (of the step)."""
    rng = np.random.default_rng(seed)
    fast, slow = configuration(1.0, rng), configuration(1.0 + gap, rng)
    changed = configuration(1.0 + gap * (1 - share), rng)
    found = closure(fast, slow, changed)
    assert found is not None
    return found, judge(found, median(t for p in fast for t in p), "--precision fp32")[0]


def test_a_change_that_closes_none_of_a_reproduced_gap_is_never_confirmed_nor_partly():
    verdicts = []
    for seed in range(24):
        found, verdict = rerun(0.5, 0.0, seed)
        assert found.gap_before_ci_s[0] > 0  # the gap reproduced: the verdict reads the share, not a missing gap
        verdicts.append(verdict)
    assert CONFIRMED not in verdicts and PARTLY not in verdicts
    assert verdicts.count(REFUTED) >= 6  # the rule does refute: the draws are not all "cannot tell"


def test_a_change_that_closes_all_of_a_50_percent_gap_is_confirmed():
    for seed in range(8):
        found, verdict = rerun(0.5, 1.0, seed)
        assert verdict == CONFIRMED, (seed, found)
