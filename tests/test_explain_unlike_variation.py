"""A configuration whose processes vary unlike the others' sets the noise only of the pairs it is part of: a quiet
pair keeps a clear, consistent slowdown beside a noisy mode, identical quiet configurations stay no difference, the
noisy mode's own gap is judged as before, and with every variation alike nothing changes. Synthetic summaries (no
framework): each case's right answer is known by construction."""

from __future__ import annotations

import random
from statistics import median

import pytest

from hloscope.explain.engine import explain
from hloscope.explain.replicates import group_processes
from hloscope.explain.summary import ModeSummary
from hloscope.render import explain_html, explain_md
from hloscope.render.explain_views import baseline_line
from hloscope.significance import PROCESS_ALPHA, pooled_process_variation, process_test

QUIET = (1.000, 1.006, 0.995)  # process medians within ~1% of each other, in ms
NOISY = (0.85, 1.00, 1.25)  # 40% of a step between its processes (torch_xla's on a loaded machine)


def _summary(label: str, centers_ms: tuple[float, ...], scale: float = 1.0, seed: int = 0) -> ModeSummary:
    """A configuration of one process per center, 30 steps each within 0.2% of it."""
    rng = random.Random(seed)
    members = [ModeSummary(mode=label, run_mode="jax", run_dirs=[f"/nowhere/{label}-{index}"],
                           step_times_s=[center * scale * 1e-3 * (1 + rng.uniform(-0.002, 0.002))
                                         for _ in range(30)])
               for index, center in enumerate(centers_ms)]
    (pooled,) = group_processes(members)
    return pooled


def _quiet_pair_and_noisy() -> tuple[ModeSummary, ModeSummary, ModeSummary]:
    """A, B 8% slower than A (each within 1% between its processes), and C spread 40%."""
    return (_summary("a", QUIET, seed=1), _summary("b", (1.080, 1.086, 1.075), seed=2),
            _summary("c", NOISY, scale=1.1, seed=3))


def test_a_consistent_slowdown_beside_a_noisy_configuration_is_called():
    a, b, c = _quiet_pair_and_noisy()
    report = explain([a, b, c], baseline="a")
    entry = report.mode("b")
    assert entry.verdict == "slower" and entry.significant and all(entry.tests.values())
    assert 0.07 < entry.ratio - 1 < 0.09
    assert entry.process_p_value is not None and entry.process_level is not None
    assert entry.process_p_value < entry.process_level
    # the noisy configuration is named as set apart; the control stated for the others is theirs
    noise = report.process_noise
    assert noise is not None and noise.configuration == "c" and noise.relative > 0.35
    assert noise.set_apart == ("c",) and noise.alike is not None and noise.alike.relative < 0.015
    assert noise.df == 6 and noise.alike.df == 4
    document = report.to_dict()["between_process_spread"]
    assert document["set_apart"] == ["c"] and document["alike"]["configuration"] in ("a", "b")
    line = baseline_line(report)
    assert f"up to {noise.alike.relative:.1%} of a step apart" in line
    assert "c varied between processes significantly more than the others" in line
    for rendered in (explain_md.render(report), explain_html.render(report)):  # the terminal prints the same line
        assert "c varied between processes significantly more than the others" in rendered


def test_the_quiet_pair_is_judged_as_if_the_noisy_configuration_were_not_there():
    a, b, c = _quiet_pair_and_noisy()
    beside = explain([a, b, c], baseline="a").mode("b")
    alone = explain([a, b], baseline="a").mode("b")
    assert beside.verdict == alone.verdict == "slower"
    assert beside.tests == alone.tests
    assert beside.gap_ci_s == alone.gap_ci_s and beside.process_p_value == alone.process_p_value
    assert beside.resolvable_gap_s == alone.resolvable_gap_s and beside.processes_needed == alone.processes_needed


@pytest.mark.parametrize("seed", range(10))
def test_identical_quiet_configurations_beside_a_noisy_one_are_no_difference(seed):
    rng = random.Random(seed)

    def quiet(label: str) -> ModeSummary:
        return _summary(label, tuple(1.0 + rng.uniform(-0.005, 0.005) for _ in range(3)), seed=rng.randrange(1000))

    report = explain([quiet("a"), quiet("a2"), _summary("c", NOISY, scale=1.1, seed=seed)], baseline="a")
    assert report.process_noise is not None and report.process_noise.set_apart == ("c",)
    entry = report.mode("a2")
    assert entry.verdict == "no significant difference" and not entry.significant


def test_the_noisy_configurations_own_gap_is_held_to_its_variation():
    """C against A: its pair holds C, so the pool and the control are every configuration's, as they were before
    any configuration was set apart."""
    a, b, c = _quiet_pair_and_noisy()
    report = explain([a, b, c], baseline="a")
    entry = report.mode("c")
    assert entry.verdict == "no significant difference"
    assert entry.tests["beyond_process_spread"] is False and entry.tests["processes_differ"] is False
    every = pooled_process_variation([s.process_medians_s for s in (a, b, c)])
    assert every is not None
    expected = process_test(c.process_medians_s, a.process_medians_s, every)
    assert entry.process_p_value == pytest.approx(expected.p_value, rel=1e-12)
    assert entry.process_p_value > PROCESS_ALPHA / 2  # the two tests' Holm levels are at least half of it
    # the control of its pair is the comparison's: C's own 40% at the baseline's median
    noise = report.process_noise
    assert noise is not None and entry.resolvable_gap_s is not None
    assert entry.resolvable_gap_s >= noise.relative * median(a.step_times_s)


def test_a_noisy_baseline_holds_every_gap_to_its_variation():
    a, b, c = _quiet_pair_and_noisy()
    report = explain([a, b, c], baseline="c")
    every = pooled_process_variation([s.process_medians_s for s in (a, b, c)])
    assert every is not None
    for label, summary in (("a", a), ("b", b)):
        entry = report.mode(label)
        expected = process_test(summary.process_medians_s, c.process_medians_s, every)
        assert entry.process_p_value == pytest.approx(expected.p_value, rel=1e-12)
    assert "The baseline's processes varied significantly more" in baseline_line(report)


def _process(rng: random.Random, center: float, jitter: float) -> list[float]:
    return [center * (1 + rng.uniform(-jitter, jitter)) for _ in range(30)]


def test_with_every_variation_alike_nothing_changes():
    """The inputs of test_explain_replicates' clean separation case (four configurations, each spread 8.5% between
    its processes): every verdict, interval, p-value and resolvable gap is the one explain gave before configurations
    could be set apart."""
    rng = random.Random(6)
    shape = (0.96, 1.0, 1.045)

    def configuration(label: str, center_ms: float) -> ModeSummary:
        members = [ModeSummary(mode=label, step_times_s=_process(rng, center_ms * 1e-3 * f, 0.002), run_mode="jax",
                               run_dirs=[f"/nowhere/{label}-{index}"]) for index, f in enumerate(shape)]
        (pooled,) = group_processes(members)
        return pooled

    summaries = [configuration("base", 6.5), configuration("same", 5.93), configuration("loader", 8.0),
                 configuration("delay", 9.5)]
    report = explain(summaries, baseline="base")
    assert report.process_noise is not None and report.process_noise.set_apart == ()
    assert report.process_noise.alike is None
    before = {  # explain's figures for these inputs before this rule existed
        "same": ["no significant difference", [-0.0010933712284911983, -5.180875523228762e-05],
                 0.029318923130632085, 0.01, 0.0008024706551175774, 5],
        "loader": ["slower", [0.00089750634673921, 0.002102177288177137], 0.00033126071545536384, 0.005,
                   0.000924355829051629, None],
        "delay": ["slower", [0.0023409054541395015, 0.0036744448148244516], 4.309854756614376e-06,
                  0.0033333333333333335, 0.0009993886057730154, None]}
    for label, (verdict, interval, p_value, level, resolvable, needed) in before.items():
        entry = report.mode(label)
        assert entry.verdict == verdict and entry.processes_needed == needed
        assert entry.gap_ci_s == pytest.approx(interval, rel=1e-12)
        assert entry.process_p_value == pytest.approx(p_value, rel=1e-12)
        assert entry.process_level == pytest.approx(level, rel=1e-12)
        assert entry.resolvable_gap_s == pytest.approx(resolvable, rel=1e-12)
