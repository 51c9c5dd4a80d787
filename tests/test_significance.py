"""The statistics module's bootstrap of a gap of gaps (a step's time outside its replayed program, A against B): the
estimate is the medians' arithmetic, the interval is reproducible, and a gap inside the noise cannot be told from 0."""

from __future__ import annotations

from statistics import median

from hloscope.significance import median_difference, median_gap_difference, percentile_interval, resampled_medians


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

    from hloscope.significance import SEED

    a, b = [0.011, 0.013, 0.012, 0.015, 0.012], [0.010, 0.010, 0.011, 0.012, 0.010]
    rng = np.random.default_rng(SEED)
    low, high = percentile_interval(resampled_medians(a, rng) - resampled_medians(b, rng))
    assert median_difference(a, b).as_list() == [low, high]
