"""How sure a difference of timings is: intervals and tests from the samples themselves (scipy), never assumed.

- The gap between two runs' step times is the difference of their medians, with a percentile-bootstrap interval
  (resampling each run's timed steps; a fixed seed, so a report is reproducible).
- A ledger node (device time in one category, idle time for one host cause, ...) is compared across the two runs'
  profiled steps, a handful each: the exact two-sided Mann-Whitney U test says whether the two samples differ at all,
  and the bootstrap interval says by how much.
- With several processes per configuration (`compare --repeats K`), the gap's interval is a hierarchical bootstrap:
  processes are resampled, then steps within each process, so that the variation between processes of one
  configuration (thread placement, memory layout, what else the machine runs) widens the interval as it should.
- Processes of one configuration land apart (thread placement, memory layout, what else the machine runs), and by
  more than the step-level interval sees. The process is the unit there: a t-test on the logarithms of the process
  medians, with their variance pooled over every configuration of the comparison that ran in several processes (the
  A/A control as a variance), at PROCESS_ALPHA family-wise over the configurations of one report (Holm). A
  configuration whose processes vary significantly more than the others' (`unlike_variations`: one-sided F-tests on
  the log variances) is set apart: it counts for the pairs it is part of, not for the others.
- Outlier steps (preemption, the profiler's own start-up) are flagged with the median absolute deviation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 0
ALPHA = 0.05  # a node's difference counts when the Mann-Whitney test's two-sided p-value is below this
# The process-level test's family-wise level. Stricter than ALPHA: a cause named for two identical configurations
# misleads, while a miss says "cannot tell" with the smallest gap the comparison resolves (benches/README.md).
PROCESS_ALPHA = 0.01
# A value is an outlier when it is this many scaled MADs from the median, and also at least OUTLIER_RATIO x the median
# away: a preempted step is 1.5-2x the others, while XLA's CPU ops under a loaded machine wobble by 20-30%.
OUTLIER_MADS = 3.5
OUTLIER_RATIO = 0.5
# The level of the test that sets a configuration's between-process variation apart from the others'
# (`unlike_variations`), Bonferroni-divided by the number of configurations tested.
VARIANCE_ALPHA = 0.01


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
    ma = resampled_medians(a, rng)
    mb = resampled_medians(b, rng)
    return Interval(float(estimate), *percentile_interval(statistic(ma, mb), confidence))


def median_gap_difference(step_a: list[float], part_a: list[float], step_b: list[float], part_b: list[float],
                          confidence: float = CONFIDENCE) -> Interval:
    """(median step_a - median part_a) - (median step_b - median part_b), with a percentile-bootstrap interval over
    the four samples (each resampled on its own): how much more of A's step than of B's lies outside the part (a
    replayed program: the framework's overhead). Every sample must hold a value."""
    estimate = (median(step_a) - median(part_a)) - (median(step_b) - median(part_b))
    rng = np.random.default_rng(SEED)
    first = resampled_medians(step_a, rng) - resampled_medians(part_a, rng)
    samples = first - (resampled_medians(step_b, rng) - resampled_medians(part_b, rng))
    return Interval(float(estimate), *percentile_interval(samples, confidence))


# A bootstrap draws as many values as the sample holds, RESAMPLES times over: a run.json of 200,000 step times (a long
# run, or a hostile file) would ask for gigabytes. A longer sample is resampled through this many of its quantiles,
# evenly spaced: its median stays where it was, and its interval is that of a sample of this size, a little wider
# than the whole sample's (never narrower). Shorter samples, every run hloscope's defaults make, are used as they are.
MAX_RESAMPLED = 2500
# The two-level bootstrap draws every process's steps in each resample: at most this many drawn values a side (with
# at least 200 resamples, the processes' steps are thinned to MAX_DRAWN // 200 in all).
MAX_DRAWN = 20_000_000
_MIN_RESAMPLES = 200


def _thinned(values: list[float] | np.ndarray, most: int = MAX_RESAMPLED) -> np.ndarray:
    """`values` as an array, or `most` of its quantiles, evenly spaced, where it holds more (MAX_RESAMPLED)."""
    x = np.asarray(values, dtype=float)
    if len(x) <= most:
        return x
    return np.quantile(x, (np.arange(most) + 0.5) / most)


def resampled_medians(values: list[float], rng: np.random.Generator) -> np.ndarray:
    """The medians of RESAMPLES bootstrap resamples of `values` (drawn with replacement, as many as there are; a
    sample longer than MAX_RESAMPLED through its quantiles)."""
    x = _thinned(values)
    return np.median(x[rng.integers(0, len(x), (RESAMPLES, len(x)))], axis=1)


def percentile_interval(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central `confidence` interval of bootstrap samples (the percentile method)."""
    tail = (1 - confidence) / 2
    low, high = np.quantile(samples, [tail, 1 - tail])
    return float(low), float(high)


def hierarchical_median_difference(a: list[list[float]], b: list[list[float]],
                                   confidence: float = CONFIDENCE) -> Interval | None:
    """median(pooled a) - median(pooled b), each side a list of processes' step times, with a two-level percentile
    bootstrap interval: each resample draws the side's processes with replacement, then each drawn process's steps
    with replacement, and takes the median of the pooled draw. None when a side has no step."""
    return _hierarchical(a, b, lambda x, y: x - y, confidence)


def hierarchical_median_ratio(a: list[list[float]], b: list[list[float]],
                              confidence: float = CONFIDENCE) -> Interval | None:
    """median(pooled a) / median(pooled b) with the same two-level interval (b's steps must be positive)."""
    if any(t <= 0 for p in b for t in p):
        return None
    return _hierarchical(a, b, lambda x, y: x / y, confidence)


def _hierarchical(a: list[list[float]], b: list[list[float]], statistic, confidence: float) -> Interval | None:
    a = [list(p) for p in a if p]
    b = [list(p) for p in b if p]
    if not a or not b:
        return None
    estimate = statistic(median([t for p in a for t in p]), median([t for p in b for t in p]))
    rng = np.random.default_rng(SEED)
    samples = statistic(_pooled_medians(a, rng), _pooled_medians(b, rng))
    return Interval(float(estimate), *percentile_interval(samples, confidence))


def pooled_median_resamples(processes: list[list[float]], seed: int = SEED) -> np.ndarray | None:
    """The bootstrap distribution of one configuration's pooled median (two levels: its processes, then the steps of
    each), for statistics of several configurations at once (explain --test-hypotheses: the share of a gap a change
    closes). Each configuration gets its own `seed`: resamples of independent configurations must not be paired by
    their draws. None when no process has a step."""
    kept = [list(p) for p in processes if p]
    if not kept:
        return None
    return _pooled_medians(kept, np.random.default_rng(seed))


def _pooled_medians(processes: list[list[float]], rng: np.random.Generator) -> np.ndarray:
    """Medians of two-level resamples (processes, then the steps of each) of one side. The number of resamples is
    capped so that one side never draws more than MAX_DRAWN steps (runs of many thousand steps); where even the
    fewest resamples would, each process is resampled through its quantiles (_thinned), as many as fit."""
    most = min(MAX_RESAMPLED, max(1, MAX_DRAWN // (_MIN_RESAMPLES * len(processes))))
    kept = [_thinned(steps, most) for steps in processes]
    lengths = np.asarray([len(p) for p in kept])
    width = int(lengths.max())
    table = np.full((len(kept), width), np.nan)
    for row, steps in enumerate(kept):
        table[row, :len(steps)] = steps
    resamples = max(_MIN_RESAMPLES, min(RESAMPLES, MAX_DRAWN // (len(processes) * width)))
    drawn = rng.integers(0, len(processes), (resamples, len(processes)))
    columns = []
    for slot in range(len(processes)):
        chosen = drawn[:, slot]
        picks = (rng.random((resamples, width)) * lengths[chosen][:, None]).astype(int)
        values = table[chosen[:, None], np.minimum(picks, width - 1)]
        values[np.arange(width)[None, :] >= lengths[chosen][:, None]] = np.nan  # a shorter process draws fewer steps
        columns.append(values)
    pooled = np.concatenate(columns, axis=1)
    # nanmedian masks every row; with processes of one length no draw is NaN and the plain median is the same, 3x faster
    return np.median(pooled, axis=1) if lengths.min() == width else np.nanmedian(pooled, axis=1)


def process_spread(medians: list[float]) -> float | None:
    """The spread between processes of one configuration: the largest minus the smallest of their medians; None with
    fewer than two processes (unmeasured)."""
    return max(medians) - min(medians) if len(medians) >= 2 else None


@dataclass(frozen=True)
class ProcessVariation:
    """How far processes of one configuration land apart, pooled over a comparison's configurations: the standard
    deviation of the logarithms of their process medians around each configuration's mean, and its degrees of freedom
    (the processes minus the configurations)."""

    log_sd: float
    df: int


def pooled_process_variation(configurations: list[list[float]]) -> ProcessVariation | None:
    """The pooled variation of the process medians of several configurations (each a list of positive medians);
    None when no configuration has two (unmeasured)."""
    squares, df = 0.0, 0
    for medians in configurations:
        if len(medians) < 2:
            continue
        one_squares, one_df = _log_squares(medians)
        squares += one_squares
        df += one_df
    return ProcessVariation(math.sqrt(squares / df), df) if df else None


def _log_squares(medians: list[float]) -> tuple[float, int]:
    """The sum of squared deviations of the logarithms of one configuration's process medians from their mean, and
    its degrees of freedom (the processes minus one)."""
    logs = np.log(np.asarray(medians, dtype=float))
    return float(((logs - logs.mean()) ** 2).sum()), len(logs) - 1


def variance_larger_p(medians: list[float], others: list[list[float]], exact_is_measured: bool = False) -> float:
    """One-sided p-value of the F-test that one configuration's process medians vary more (variance of their
    logarithms) than those of `others`, pooled; 1.0 where either side has fewer than two processes (unmeasured).
    Where the others do not vary at all there is nothing to be larger than, p 1, as unmeasured: step times equal to
    the last digit are copies of one run. With `exact_is_measured` (figures a program fixes, such as XLA's peak
    memory, which processes repeat exactly) no variation is a measured one, and any variation is larger: p 0."""
    from scipy import stats as scipy_stats

    pool = pooled_process_variation(others)
    if len(medians) < 2 or pool is None:
        return 1.0
    squares, df = _log_squares(medians)
    variance, pooled = squares / df, pool.log_sd ** 2
    if pooled == 0.0:
        return 0.0 if exact_is_measured and variance > 0.0 else 1.0
    return float(scipy_stats.f.sf(variance / pooled, df, pool.df))


def unlike_variations(configurations: list[list[float]], alpha: float = VARIANCE_ALPHA,
                      exact_is_measured: bool = False) -> set[int]:
    """The indexes of the configurations (each a list of process medians) whose between-process variation is unlike
    the others': significantly larger than that of the quieter ones. Pooling variances assumes they are alike, and a
    noisy configuration (a framework whose processes land 40% apart) would otherwise set the noise of every pair.

    Those with two or more processes are taken from the quietest (variance of log medians): each is tested against
    the pool of all quieter ones (one-sided F-test, `variance_larger_p`) at `alpha` / the number of configurations
    tested (Bonferroni: the most extreme of several is tested, as in Cochran's test for an outlying variance, ISO
    5725-2, whose last step this is). The first found larger is set apart with every configuration that varies more
    still. Growing the pool from the quietest, two noisy configurations cannot hide each other in it, as they do when
    each is tested against all the others (simulated, 3 processes each: two of five at 40x the others' SD are both
    set apart 97% of the time, against 41% by that leave-one-out rule; one at 40x beside two, 98% by either). With
    every variation alike, some configuration is set apart in about 1.4% (3 configurations) to 1.9% (6) of
    comparisons, and it then counts only for its own pairs. The result depends on the values, not on the order given
    (ties of variance aside, taken in the order given). `exact_is_measured`: as for `variance_larger_p`."""
    measured = [index for index, medians in enumerate(configurations) if len(medians) >= 2]
    if len(measured) < 2:
        return set()
    variance = {index: _log_squares(configurations[index])[0] / (len(configurations[index]) - 1)
                for index in measured}
    order = sorted(measured, key=lambda index: (variance[index], index))
    level = alpha / len(measured)
    for rank in range(1, len(order)):
        quieter = [configurations[index] for index in order[:rank]]
        if variance_larger_p(configurations[order[rank]], quieter, exact_is_measured) < level:
            return set(order[rank:])
    return set()


@dataclass(frozen=True)
class ProcessTest:
    """Two configurations' process medians compared: the difference of their mean logarithms (log of the ratio of
    geometric means), its standard error from the pooled variation, and the two-sided p-value of Student's t."""

    log_ratio: float
    standard_error: float
    df: int
    p_value: float


def process_test(a: list[float], b: list[float], variation: ProcessVariation) -> ProcessTest:
    """Student's t-test of the process medians `a` against `b` (one or more each), with the variance pooled over the
    comparison (`variation`), on their logarithms: a gap relative to the step, as load scales a step."""
    from scipy import stats as scipy_stats

    log_ratio = float(np.mean(np.log(a)) - np.mean(np.log(b)))
    error = variation.log_sd * math.sqrt(1 / len(a) + 1 / len(b))
    if error == 0.0:
        p_value = 1.0 if log_ratio == 0.0 else 0.0
    else:
        p_value = float(2 * scipy_stats.t.sf(abs(log_ratio) / error, variation.df))
    return ProcessTest(log_ratio, error, variation.df, p_value)


# The largest smallest-resolvable gap stated, as a fraction: processes that vary this much (a broken or hand-edited
# record, peaks of different sources) resolve no gap of any practical size, and a larger figure would overflow.
MAX_RESOLVABLE_FRACTION = 1e6


def smallest_resolvable_fraction(variation: ProcessVariation, a_count: int, b_count: int, alpha: float) -> float:
    """The smallest relative gap (a fraction of a step) the process-level test calls significant at level `alpha`
    between configurations of `a_count` and `b_count` processes, at most MAX_RESOLVABLE_FRACTION."""
    from scipy import stats as scipy_stats

    error = variation.log_sd * math.sqrt(1 / a_count + 1 / b_count)
    exponent = float(scipy_stats.t.ppf(1 - alpha / 2, variation.df)) * error
    return math.expm1(min(exponent, math.log1p(MAX_RESOLVABLE_FRACTION)))


def processes_needed(variation: ProcessVariation, log_ratio: float, alpha: float, most: int = 50) -> int | None:
    """How many processes a side the process-level test would need to call a relative gap of `log_ratio` significant
    at level `alpha`, were the variation between processes what it is now (its degrees of freedom kept, so the figure
    errs high); None when more than `most` would be needed."""
    for count in range(2, most + 1):
        if smallest_resolvable_fraction(variation, count, count, alpha) < math.expm1(abs(log_ratio)):
            return count
    return None


def holm_levels(p_values: list[float], alpha: float) -> list[tuple[bool, float]]:
    """Holm's step-down procedure over a family of tests: for each p-value, whether it is rejected and the level it
    was held to (alpha / (m - rank), rank in ascending order of p). Once one is not rejected, none after it is."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    out: list[tuple[bool, float]] = [(False, alpha)] * len(p_values)
    rejecting = True
    for rank, index in enumerate(order):
        level = alpha / (len(p_values) - rank)
        rejecting = rejecting and p_values[index] <= level
        out[index] = (rejecting, level)
    return out


def differs(a: list[float], b: list[float]) -> float | None:
    """Two-sided p-value of the exact Mann-Whitney U test that the two samples come from the same distribution; None
    when a side has fewer than 2 samples. With 5 steps a side the smallest p is 0.008; with 3, 0.1 (never below ALPHA):
    a handful of profiled steps can only show large, consistent differences."""
    if len(a) < 2 or len(b) < 2:
        return None
    if max(a) == min(a) == max(b) == min(b):
        return 1.0
    method = "exact" if len(a) + len(b) <= 40 else "asymptotic"
    # scipy here, not at the top: every run imports this module for its percentiles and never tests anything
    from scipy import stats as scipy_stats

    return float(scipy_stats.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def outliers(values: list[float]) -> list[bool]:
    """Which values are far from the rest: |v - median| > OUTLIER_MADS scaled MADs and > OUTLIER_RATIO x median."""
    if len(values) < 3:
        return [False] * len(values)
    center = median(values)
    mad = 1.4826 * median(abs(v - center) for v in values)
    return [abs(v - center) > max(OUTLIER_MADS * mad, OUTLIER_RATIO * abs(center)) for v in values]


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of an already sorted list: the one definition that
    run.json's p10/p90 (hloscope/backends/timing.py) and explain's step spreads use."""
    position = (len(sorted_values) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


@dataclass(frozen=True)
class Spread:
    """median, p10, p90, and n of a sample (interpolated percentiles, as run.json records them). The three figures are
    in the unit of the sample and their keys carry no unit suffix: explain's `step_spread`, seconds (docs/api.md)."""

    median: float
    p10: float
    p90: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "p10": self.p10, "p90": self.p90, "n": self.n}


def spread(values: list[float]) -> Spread | None:
    """The Spread of a sample; None for an empty one."""
    if not values:
        return None
    ordered = sorted(values)
    return Spread(median(ordered), percentile(ordered, 0.1), percentile(ordered, 0.9), len(ordered))
