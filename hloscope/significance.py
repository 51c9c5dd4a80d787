"""How sure a difference of timings is: intervals and tests from the samples themselves (scipy), never assumed.

- The gap between two runs' step times is the difference of their medians, with a percentile-bootstrap interval
  (resampling each run's timed steps; a fixed seed, so a report is reproducible).
- A ledger node (device time in one category, idle time for one host cause, ...) is compared across the two runs'
  profiled steps, a handful each: the exact two-sided Mann-Whitney U test says whether the two samples differ at all,
  and the bootstrap interval says by how much.
- Outlier steps (preemption, the profiler's own start-up) are flagged with the median absolute deviation.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 0
ALPHA = 0.05  # a node's difference counts when the Mann-Whitney test's two-sided p-value is below this
# A value is an outlier when it is this many scaled MADs from the median, and also at least OUTLIER_RATIO x the median
# away: a preempted step is 1.5-2x the others, while XLA's CPU ops under a loaded machine wobble by 20-30%.
OUTLIER_MADS = 3.5
OUTLIER_RATIO = 0.5


@dataclass(frozen=True)
class Interval:
    """An estimate of `a - b` with its confidence interval."""

    estimate: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def as_list(self) -> list[float]:
        return [self.low, self.high]


def median_difference(a: list[float], b: list[float], confidence: float = CONFIDENCE) -> Interval | None:
    """median(a) - median(b) with a percentile-bootstrap interval; None when either side has no sample. With a single
    sample on a side, that side contributes no spread (the interval is the other side's)."""
    return _bootstrap(a, b, lambda x, y: x - y, confidence)


def median_ratio(a: list[float], b: list[float], confidence: float = CONFIDENCE) -> Interval | None:
    """median(a) / median(b) with a percentile-bootstrap interval (medians of b must be positive)."""
    if not b or min(b) <= 0:
        return None
    return _bootstrap(a, b, lambda x, y: x / y, confidence)


def _bootstrap(a: list[float], b: list[float], statistic, confidence: float) -> Interval | None:
    if not a or not b:
        return None
    estimate = statistic(median(a), median(b))
    if len(a) == 1 and len(b) == 1:
        return Interval(estimate, estimate, estimate)
    rng = np.random.default_rng(SEED)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma = np.median(xa[rng.integers(0, len(xa), (RESAMPLES, len(xa)))], axis=1)
    mb = np.median(xb[rng.integers(0, len(xb), (RESAMPLES, len(xb)))], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(statistic(ma, mb), [tail, 1 - tail])
    return Interval(float(estimate), float(low), float(high))


def differs(a: list[float], b: list[float]) -> float | None:
    """Two-sided p-value of the exact Mann-Whitney U test that the two samples come from the same distribution; None
    when a side has fewer than 2 samples. With 5 steps a side the smallest p is 0.008; with 3, 0.1 (never below ALPHA):
    a handful of profiled steps can only show large, consistent differences."""
    if len(a) < 2 or len(b) < 2:
        return None
    if max(a) == min(a) == max(b) == min(b):
        return 1.0
    method = "exact" if len(a) + len(b) <= 40 else "asymptotic"
    return float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def outliers(values: list[float]) -> list[bool]:
    """Which values are far from the rest: |v - median| > OUTLIER_MADS scaled MADs and > OUTLIER_RATIO x median."""
    if len(values) < 3:
        return [False] * len(values)
    center = median(values)
    mad = 1.4826 * median(abs(v - center) for v in values)
    return [abs(v - center) > max(OUTLIER_MADS * mad, OUTLIER_RATIO * abs(center)) for v in values]


def spread(values: list[float]) -> dict | None:
    """median, p10, p90, and n of a sample (nearest-rank percentiles, as run.json records them)."""
    if not values:
        return None
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return {"median": median(ordered), "p10": rank(0.1), "p90": rank(0.9), "n": len(ordered)}
