"""The statistics module's bootstrap of a gap of gaps (a step's time outside its replayed program, A against B): the
estimate is the medians' arithmetic, the interval is reproducible, and a gap inside the noise cannot be told from 0."""

from __future__ import annotations

import math
import tracemalloc
from statistics import median

import numpy as np
import pytest
from scipy import stats

from hloscope.significance import (
    MAX_RESAMPLED,
    MAX_RESOLVABLE_FRACTION,
    RESAMPLES,
    SEED,
    ProcessVariation,
    hierarchical_median_difference,
    holm_levels,
    median_difference,
    median_gap_difference,
    percentile_interval,
    pooled_process_variation,
    process_test,
    processes_needed,
    resampled_medians,
    smallest_resolvable_fraction,
    unlike_variations,
    variance_larger_p,
)


def test_a_real_overhead_gap_excludes_zero_and_a_gap_inside_the_noise_does_not():
    program = [0.010 + 0.0001 * (i % 7) for i in range(30)]
    step_a = [t + 0.005 for t in program]  # A spends 5 ms outside its program, B 1 ms
    step_b = [t + 0.001 for t in program]
    gap = median_gap_difference(step_a, program, step_b, program)
    assert gap.estimate == (median(step_a) - median(program)) - (median(step_b) - median(program))
    assert abs(gap.estimate - 0.004) < 1e-12 and gap.low <= gap.estimate <= gap.high and gap.excludes_zero
    assert median_gap_difference(step_a, program, step_b, program) == gap  # a fixed seed: the same interval

    noisy = [0.010, 0.019, 0.011, 0.018, 0.012, 0.017, 0.013, 0.016]
    same = median_gap_difference(noisy, program, list(reversed(noisy)), program)
    assert same.estimate == 0.0 and not same.excludes_zero  # "cannot tell", never a difference


def test_the_two_sample_interval_is_the_same_resampling():
    import numpy as np

    a, b = [0.011, 0.013, 0.012, 0.015, 0.012], [0.010, 0.010, 0.011, 0.012, 0.010]
    rng = np.random.default_rng(SEED)
    low, high = percentile_interval(resampled_medians(a, rng) - resampled_medians(b, rng))
    assert median_difference(a, b).as_list() == [low, high]


def test_pooled_process_variation_is_the_anova_within_group_deviation_of_log_medians():
    configurations = [[1.0, 1.1, 0.95], [2.0, 2.4], [3.0]]  # the single process adds nothing
    logs = [np.log(c) for c in configurations[:2]]
    within = sum(float(((x - x.mean()) ** 2).sum()) for x in logs)
    variation = pooled_process_variation(configurations)
    assert variation is not None and variation.df == 3
    assert math.isclose(variation.log_sd, math.sqrt(within / 3))
    assert pooled_process_variation([[1.0], [2.0]]) is None


def test_process_test_is_students_t_on_log_medians():
    a, b = [1.2, 1.3, 1.25], [1.0, 1.05, 0.98]
    variation = pooled_process_variation([a, b])
    assert variation is not None
    found = process_test(a, b, variation)
    expected = stats.ttest_ind(np.log(a), np.log(b), equal_var=True)
    assert math.isclose(found.p_value, float(expected.pvalue), rel_tol=1e-9) and found.df == 4
    # the smallest significant ratio at a level is exactly where p crosses it
    edge = math.log1p(smallest_resolvable_fraction(variation, len(a), len(b), 0.01))
    at_edge = 2 * stats.t.sf(edge / found.standard_error, found.df)
    assert math.isclose(float(at_edge), 0.01, rel_tol=1e-6)
    assert process_test([1.0], [1.0], ProcessVariation(0.0, 2)).p_value == 1.0


def test_holm_steps_down_and_stops_at_the_first_kept_hypothesis():
    # m = 3: thresholds 0.01/3, 0.01/2, 0.01 in ascending order of p
    assert holm_levels([0.004, 0.002, 0.02], 0.01) == [(True, 0.005), (True, 0.01 / 3), (False, 0.01)]
    assert holm_levels([0.004, 0.0034, 0.001], 0.01) == [(True, 0.01), (True, 0.005), (True, 0.01 / 3)]
    # once one is kept, later (larger) p-values are kept even below their own threshold
    assert holm_levels([0.0045, 0.006, 0.004], 0.01) == [(False, 0.005), (False, 0.01), (False, 0.01 / 3)]


def test_processes_needed_is_the_first_count_whose_resolvable_gap_is_below_the_gap():
    variation = ProcessVariation(0.05, 8)
    needed = processes_needed(variation, math.log(1.10), 0.01)
    assert needed is not None and needed > 3
    assert smallest_resolvable_fraction(variation, needed, needed, 0.01) < 0.10
    assert smallest_resolvable_fraction(variation, needed - 1, needed - 1, 0.01) >= 0.10
    assert processes_needed(variation, math.log(1.001), 0.01) is None  # more than 50


def test_the_smallest_resolvable_gap_of_wildly_varying_processes_is_finite_and_capped():
    """Peaks of 1 kB and 1 GB in one configuration (a hand-edited record) once overflowed expm1: the figure is capped
    and stays a number JSON can hold."""
    variation = pooled_process_variation([[1e3, 1e9], [5e8]])
    fraction = smallest_resolvable_fraction(variation, 2, 1, 0.01)
    assert fraction == pytest.approx(MAX_RESOLVABLE_FRACTION) and math.isfinite(fraction)
    assert smallest_resolvable_fraction(pooled_process_variation([[1.0, 1.1], [1.0, 1.05]]), 2, 2, 0.01) < 10


def _spread_logs(width: float, center: float = 1.0) -> list[float]:
    """Three process medians whose logarithms are center's -width, 0, +width: their log variance is width**2."""
    return [center * math.exp(k * width) for k in (-1, 0, 1)]


def test_the_variance_test_is_the_one_sided_f_test_on_log_medians():
    # log variances 0.1**2 (df 2) against a pool of two 0.01**2 configurations (df 4): F = 100, and with 2 numerator
    # degrees of freedom the F distribution's tail is closed: (1 + 2F / 4) ** -2 = 51 ** -2
    noisy, quiet = _spread_logs(0.1), [_spread_logs(0.01), _spread_logs(0.01, 2.0)]
    assert math.isclose(variance_larger_p(noisy, quiet), 51 ** -2, rel_tol=1e-9)
    assert math.isclose(variance_larger_p(_spread_logs(0.04), quiet), 9 ** -2, rel_tol=1e-9)  # F = 16
    assert variance_larger_p(quiet[0], [noisy]) > 0.99  # one-sided: a quieter configuration is never "larger"
    assert variance_larger_p([1.0], quiet) == 1.0 and variance_larger_p(noisy, [[1.0]]) == 1.0  # unmeasured
    # others whose processes measured exactly alike (copies of one run) vary by nothing measured: never "larger"
    assert variance_larger_p(noisy, [[1.0, 1.0]]) == 1.0 and variance_larger_p([2.0, 2.0], [[1.0, 1.0]]) == 1.0
    assert unlike_variations([[1.0, 1.0, 1.0], _spread_logs(0.01), _spread_logs(0.3)]) == {2}


def test_a_configuration_varying_unlike_the_others_is_set_apart_whatever_the_order():
    quiet = [_spread_logs(0.01), _spread_logs(0.011, 2.0), [3.0]]  # the single process is not tested
    # F ~ 90: p ~ 4.7e-4, below 1% / 3 configurations tested
    assert unlike_variations([*quiet, _spread_logs(0.1)]) == {3}
    # F ~ 14.5: p ~ 0.015, not even below 1%
    assert unlike_variations([*quiet, _spread_logs(0.04)]) == set()
    # F = 25 (p = 13.5 ** -2 = 0.0055 on its own): below 1%, not below 1% / 3 (Bonferroni over those tested)
    assert unlike_variations([_spread_logs(0.01), _spread_logs(0.01, 2.0), _spread_logs(0.05)]) == set()
    assert unlike_variations([_spread_logs(0.01), _spread_logs(0.01, 2.0), _spread_logs(0.07)]) == {2}  # F = 49
    assert unlike_variations([_spread_logs(0.01), _spread_logs(0.2)]) == {1}  # two: the larger against the other
    # two noisy configurations cannot hide each other: each is tested against the quieter ones only
    five = [_spread_logs(0.01), _spread_logs(0.3), _spread_logs(0.012, 2.0), _spread_logs(0.25), _spread_logs(0.009)]
    assert unlike_variations(five) == {1, 3}
    for order in ([4, 3, 2, 1, 0], [1, 0, 3, 2, 4], [3, 1, 4, 0, 2]):
        assert {order[i] for i in unlike_variations([five[i] for i in order])} == {1, 3}
    alike = [_spread_logs(w, c) for w, c in ((0.03, 1.0), (0.05, 2.0), (0.04, 3.0), (0.02, 4.0))]
    assert unlike_variations(alike) == set()
    assert unlike_variations([_spread_logs(0.1)]) == set() and unlike_variations([]) == set()


def test_long_samples_are_resampled_through_their_quantiles_in_bounded_memory():
    """A run of 30,000 steps (or a run.json claiming one) is resampled through MAX_RESAMPLED of its quantiles: the
    intervals hold the true difference, are no narrower than the whole sample's would be, and the bootstrap stays
    within a few hundred MB whatever the length. A sample up to MAX_RESAMPLED long is used as it is."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(10.0, 1.0, 30_000), rng.normal(10.5, 1.0, 30_000)
    short = rng.normal(0.0, 1.0, MAX_RESAMPLED)
    drawn = np.random.default_rng(SEED).integers(0, MAX_RESAMPLED, (RESAMPLES, MAX_RESAMPLED))
    assert np.array_equal(resampled_medians(list(short), np.random.default_rng(SEED)),
                          np.median(short[drawn], axis=1))
    tracemalloc.start()
    try:
        single = median_difference(list(a), list(b))
        two_level = hierarchical_median_difference([list(a[:15_000]), list(a[15_000:])],
                                                   [list(b[:15_000]), list(b[15_000:])])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 700e6, peak
    whole_sample_half_width = 1.96 * 1.2533 * math.sqrt(2 / len(a))  # the median's standard error, both sides
    for interval in (single, two_level):
        assert interval is not None and interval.low < -0.5 < interval.high, interval
        assert (interval.high - interval.low) / 2 >= whole_sample_half_width, interval
