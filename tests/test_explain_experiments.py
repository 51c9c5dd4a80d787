"""explain --test-hypotheses without running a framework: the plan drawn from a report, and the verdicts drawn from
synthetic step times (three configurations: faster, slower, slower with one setting changed), including the edge
cases of a ratio of two noisy gaps."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import msgspec
import numpy as np
import pytest

from hloscope.backends.base import RunOptions
from hloscope.explain import experiments  # TestedBlock through it: pytest collects Test* names in a test module
from hloscope.explain.collect import cpu_per_step
from hloscope.explain.experiments import (
    CANNOT_TELL,
    CONFIRMED,
    NOT_TESTED,
    PARTLY,
    REFUTED,
    HypothesisTest,
    PairPlan,
    closing_tests,
    closure,
    conclude,
    expected_run_s,
    fit_repeats,
    interaction,
    joint_variants,
    judge,
    plan_pairs,
    plan_tests,
)
from hloscope.explain.hypotheses import Annotation
from hloscope.explain.report import ConfigDifference, Contributor, ExplainReport, ModeResult
from hloscope.explain.summary import CpuPerStep, ModeSummary
from hloscope.render import explain_html, explain_md, explain_term
from hloscope.runs.experiments import CTRL_C, run_configurations
from hloscope.runs.records import HostScheduling, RunRecord, decode_run


def processes(center_s: float, spread: float, count: int = 3, steps: int = 8, seed: int = 0) -> list[list[float]]:
    """`count` processes of `steps` steps around `center_s`, each step off by up to `spread` (a fraction) at random."""
    rng = np.random.default_rng(seed)
    return [[center_s * (1 + spread * (rng.random() * 2 - 1)) for _ in range(steps)] for _ in range(count)]


def verdict(fast, slow, changed) -> tuple[str, str]:
    found = closure(fast, slow, changed)
    assert found is not None
    return judge(found, float(np.median([t for p in fast for t in p])), "--precision fp32")


def test_a_change_that_closes_the_gap_is_confirmed_with_its_share_in_the_interval():
    fast, slow, changed = processes(0.010, 0.02, seed=1), processes(0.020, 0.02, seed=2), processes(0.0101, 0.02, seed=3)
    found = closure(fast, slow, changed)
    assert found is not None and found.share_ci is not None
    assert found.share_ci[0] <= found.share <= found.share_ci[1]
    assert 0.9 < found.share < 1.1
    assert verdict(fast, slow, changed)[0] == CONFIRMED
    assert "closes" in verdict(fast, slow, changed)[1]


def test_a_change_that_closes_part_of_the_gap_is_partly():
    fast, slow, changed = processes(0.010, 0.01, seed=1), processes(0.020, 0.01, seed=2), processes(0.017, 0.01, seed=3)
    assert verdict(fast, slow, changed)[0] == PARTLY


def test_a_much_faster_baseline_that_varies_between_processes_does_not_hide_a_plain_closure():
    """Process medians from a real re-run on a loaded CPU: the baseline's two processes took 2.9 and 8.0 ms a step,
    the slower side's 39.4 and 40.3, the changed one's 25.7 and 25.8. The closure (14 ms, 35% of the gap) stands far
    outside the slower and the changed sides' own variation; the baseline's is relative to a step 13x shorter and
    says nothing about theirs (pooled with them, it gave p = 0.37)."""
    def around(medians: list[float]) -> list[list[float]]:
        return [[m * (1 + 0.01 * ((i % 5) - 2)) for i in range(20)] for m in medians]

    fast, slow, changed = around([0.00291, 0.00801]), around([0.03943, 0.04027]), around([0.02573, 0.02579])
    found = closure(fast, slow, changed)
    assert found is not None and found.moved_p_value is not None and found.moved_p_value < 0.01, found
    assert verdict(fast, slow, changed)[0] == PARTLY
    # the same closure inside the slower and changed sides' own variation is still not told from it
    noisy_slow, noisy_changed = around([0.030, 0.050]), around([0.020, 0.032])
    still = closure(fast, noisy_slow, noisy_changed)
    assert still is not None and still.moved_p_value is not None and still.moved_p_value >= 0.01, still
    assert verdict(fast, noisy_slow, noisy_changed)[0] == CANNOT_TELL


def test_a_change_that_closes_nothing_is_refuted():
    fast, slow, changed = processes(0.010, 0.01, seed=1), processes(0.020, 0.01, seed=2), processes(0.020, 0.01, seed=3)
    found = closure(fast, slow, changed)
    assert found is not None and found.share_ci is not None and found.share_ci[1] < 0.2
    assert verdict(fast, slow, changed)[0] == REFUTED


def test_a_change_that_widens_the_gap_is_refuted():
    fast, slow, changed = processes(0.010, 0.01, seed=1), processes(0.020, 0.01, seed=2), processes(0.025, 0.01, seed=3)
    assert verdict(fast, slow, changed)[0] == REFUTED


def test_under_heavy_noise_a_closure_is_cannot_tell_never_confirmed():
    """Steps that wander by 60%: whatever the changed configuration's median, the interval is too wide to say."""
    fast, slow = processes(0.010, 0.6, seed=1), processes(0.016, 0.6, seed=2)
    for seed in range(4, 10):
        assert verdict(fast, slow, processes(0.011, 0.6, seed=seed))[0] == CANNOT_TELL


def test_a_gap_that_does_not_reproduce_cannot_be_closed():
    fast, slow, changed = processes(0.010, 0.05, seed=1), processes(0.010, 0.05, seed=2), processes(0.010, 0.05, seed=3)
    result, why = verdict(fast, slow, changed)
    assert result == CANNOT_TELL and "did not reproduce" in why


# A real re-run on the loaded 2-core CPU (jax, vit-tiny, batch 16, 20 steps, milliseconds): bf16 against fp32, and bf16
# changed to fp32, so that the changed configuration is the faster one's exactly. Its two processes ran at 14.2 ms
# against the faster configuration's 10.1 and 11.9: the processes of one configuration landed as far apart as the gap.
REAL_FAST = [[10.15, 10.04, 10.07, 10.76, 9.38, 9.94, 9.48, 9.28, 9.93, 9.45, 12.03, 11.37, 12.19, 10.55, 9.53, 9.03,
              9.23, 11.34, 10.44, 10.62],
             [11.07, 10.61, 13.0, 10.25, 11.43, 10.59, 10.66, 12.42, 13.99, 15.49, 12.13, 11.41, 11.52, 12.15, 12.17,
              11.57, 10.35, 12.15, 12.92, 12.95]]
REAL_SLOW = [[15.01, 11.68, 13.14, 13.34, 18.47, 13.38, 14.08, 16.12, 14.14, 19.63, 10.38, 18.21, 15.11, 12.99, 15.0,
              13.05, 14.16, 14.02, 13.82, 13.99],
             [10.41, 10.8, 12.83, 10.76, 13.03, 13.34, 14.13, 13.49, 13.9, 12.92, 13.17, 13.43, 13.23, 13.82, 12.46,
              13.88, 13.57, 11.97, 12.37, 13.18]]
REAL_CHANGED = [[15.18, 15.89, 13.74, 13.01, 13.52, 13.13, 14.66, 14.25, 13.17, 14.41, 13.85, 15.21, 14.28, 14.32, 14.0,
                 12.67, 14.15, 14.21, 14.39, 13.89],
                [15.15, 12.79, 10.51, 11.52, 14.46, 16.6, 11.02, 9.18, 12.29, 14.37, 13.58, 14.9, 14.45, 15.06, 14.36,
                 14.26, 13.99, 15.06, 15.36, 14.04]]


def _seconds(side: list[list[float]], factor: float = 1.0) -> list[list[float]]:
    return [[t * factor / 1e3 for t in process] for process in side]


def test_a_gap_inside_the_variation_between_processes_is_never_refuted():
    """The steps' bootstrap puts the real re-run's gap at 2.7 ms (1.0 to 4.1) and the gap after at 3.5 ms (1.9 to
    4.4), which alone read as "the precision closes nothing: refuted". But the changed configuration is the faster
    one's, and the process medians do not tell the slower configuration from the faster (one-sided p ~0.03): there is
    no gap the change could have failed to close. The same processes with the gap made 3x larger than that variation
    are judged on their closure again."""
    fast, slow, changed = _seconds(REAL_FAST), _seconds(REAL_SLOW), _seconds(REAL_CHANGED)
    found = closure(fast, slow, changed)
    assert found is not None and found.gap_before_ci_s[0] > 0 and found.gap_after_ci_s[0] > 0
    assert found.gap_p_value is not None and 0.01 <= found.gap_p_value < 0.1, found
    result, why = judge(found, 0.0105, "--precision fp32")
    assert result == CANNOT_TELL and "did not reproduce" in why and "variation between processes" in why, why
    clear_slow, clear_changed = _seconds(REAL_SLOW, 3.0), _seconds(REAL_CHANGED, 3.0)
    clear = closure(fast, clear_slow, clear_changed)
    assert clear is not None and clear.gap_p_value is not None and clear.gap_p_value < 0.01, clear
    assert judge(clear, 0.0105, "--precision fp32")[0] == REFUTED


def test_a_closure_within_the_spread_between_processes_is_cannot_tell():
    """Each process steady, but the processes of one configuration far apart: the closure is the machine's."""
    fast = [[0.010] * 8, [0.010] * 8, [0.010] * 8]
    slow = [[0.016] * 8, [0.020] * 8, [0.024] * 8]
    changed = [[0.014] * 8, [0.018] * 8, [0.022] * 8]
    found = closure(fast, slow, changed)
    assert found is not None and found.noise_s is not None and abs(found.closed_s) <= found.noise_s
    assert judge(found, 0.010, "--data device")[0] in (CANNOT_TELL, REFUTED)


def test_a_closure_just_beyond_every_spread_must_also_stand_out_of_the_pooled_process_variation():
    """Steady processes, each configuration's three spread by 8.5%: a change that moves the slower configuration by
    2 ms moves it by more than any configuration's own spread (1.7 ms), and the steps alone would call it 20% closed
    (interval above 0), but three processes a side at that variation do not tell a 10% move from chance (p ~0.02):
    cannot tell, saying why. A 3 ms move is told apart (p ~0.003)."""
    factors = (0.96, 1.0, 1.045)
    fast, slow = [[0.010 * f] * 8 for f in factors], [[0.020 * f] * 8 for f in factors]
    found = closure(fast, slow, [[0.018 * f] * 8 for f in factors])
    assert found is not None and found.noise_s is not None and found.closed_s > found.noise_s
    assert found.share_ci is not None and found.share_ci[0] > 0
    assert found.moved_p_value is not None and 0.01 < found.moved_p_value < 0.05
    result, why = judge(found, 0.010, "--precision fp32")
    assert result == CANNOT_TELL and "do not tell it from the variation between processes" in why
    moved = closure(fast, slow, [[0.017 * f] * 8 for f in factors])
    assert moved is not None and moved.moved_p_value is not None and moved.moved_p_value < 0.01
    assert judge(moved, 0.010, "--precision fp32")[0] == PARTLY


def test_one_process_per_side_is_marked_provisional():
    plan = PairPlan("jax (bf16)", "jax (fp32)", {"precision": "bf16"}, {"precision": "fp32"},
                    plan_tests(_result(["compute_dtype"]), {"precision": "bf16"}, {"precision": "fp32"}))
    labels = {name: f"jax [{name}]" for name in plan.variants()}
    summaries = {labels["baseline"]: _summary(labels["baseline"], [[0.010, 0.0101, 0.0099]]),
                 labels["slower"]: _summary(labels["slower"], [[0.030, 0.0301, 0.0299]]),
                 labels["slower, precision=fp32"]: _summary("x", [[0.010, 0.0102, 0.0098]])}
    tested = conclude(plan, summaries, labels, "tested", 1, [])
    assert [t.verdict for t in tested.tests] == [CONFIRMED] and tested.tests[0].provisional
    assert "provisional" in tested.tests[0].why


def test_the_plan_groups_hypotheses_by_setting_and_says_why_others_cannot_be_tested():
    tests = plan_tests(_result(["compute_dtype", "matmul_precision", "eager_ops"]), {"precision": "bf16"},
                       {"precision": "fp32"})
    by_setting = {t.setting: t for t in tests}
    assert by_setting["precision"].rules == ["compute_dtype", "matmul_precision"]
    assert by_setting["precision"].untestable is None and by_setting["precision"].fast_value == "fp32"
    eager = next(t for t in tests if t.rules == ["eager_ops"])
    assert eager.setting is None and "mode" in str(eager.untestable)


def test_a_hypothesis_whose_setting_is_the_same_on_both_sides_is_not_tested():
    """Identical precision: the hypothesis cannot hold, nothing runs for it, and it is never confirmed."""
    tests = plan_tests(_result([]), {"precision": "fp32", "data": "loader"}, {"precision": "fp32", "data": "device"},
                       rules=["compute_dtype"])
    precision = next(t for t in tests if t.setting == "precision")
    assert precision.untestable is not None and "both sides" in precision.untestable
    plan = PairPlan("a", "b", {"precision": "fp32"}, {"precision": "fp32"}, [precision])
    assert list(plan.variants()) == ["baseline", "slower"]
    tested = conclude(plan, {}, {"baseline": "b", "slower": "a"}, None, 2, [])
    assert tested.tests[0].verdict == NOT_TESTED


def test_a_setting_difference_without_a_hypothesis_is_tested_and_unrecorded_thread_counts_say_why_not():
    """A batch difference is tested; a thread difference whose sides' CPUs are not recorded cannot be matched."""
    result = _result([])
    result.config_differences = [ConfigDifference("batch_size", "16", "8"),
                                 ConfigDifference("threads.torch_num_threads", "2", "1")]
    tests = plan_tests(result, {"batch_size": 16}, {"batch_size": 8})
    assert [(t.setting, t.untestable is None) for t in tests] == [("batch_size", True), ("threads", False)]
    assert "not recorded on both sides" in str(tests[1].untestable)


def test_a_host_delay_injected_on_one_side_is_tested_by_running_without_it():
    """--inject-host-delay is a recorded setting hloscope sets: a pair that differs in it is re-run with the faster
    side's delay (none), as calibrate's known answers are."""
    result = _result([])
    result.config_differences = [ConfigDifference("inject_host_delay_ms", "15", None)]
    (test,) = plan_tests(result, {"inject_host_delay_ms": 15.0}, {"inject_host_delay_ms": 0.0})
    assert (test.setting, test.slow_value, test.fast_value, test.untestable) == ("inject_host_delay_ms", 15.0, 0.0,
                                                                                  None)
    assert test.title == "matching the injected host delay" and "--inject-host-delay" in test.change
    plan = PairPlan("a", "b", {"inject_host_delay_ms": 15.0}, {"inject_host_delay_ms": 0.0}, [test])
    assert RunOptions(**plan.variants()[test.variant]).inject_host_delay_ms == 0.0


NO_OPT = "--xla_backend_optimization_level=0"


def _flags_result() -> ModeResult:
    result = _result([])
    result.config_differences = [ConfigDifference("env.XLA_FLAGS", NO_OPT, None)]
    return result


def test_an_xla_flag_set_on_one_side_is_tested_with_the_faster_sides_flags():
    """The slower run had a flag the faster did not: the re-run is the slower one with no XLA flags at all."""
    tests = plan_tests(_flags_result(), {"precision": "fp32", "xla_flags": NO_OPT},
                       {"precision": "fp32", "xla_flags": ""})
    assert len(tests) == 1
    test = tests[0]
    assert (test.setting, test.slow_value, test.fast_value, test.untestable) == ("xla_flags", NO_OPT, "", None)
    assert test.title == "matching the XLA flags" and test.rules == ["xla_flags"]
    plan = PairPlan("a", "b", {"xla_flags": NO_OPT}, {"xla_flags": ""}, tests)
    variants = plan.variants()
    assert variants["slower, xla_flags=none"] == {"xla_flags": ""}
    tested = conclude(plan, {}, {"baseline": "b", "slower": "a"}, None, 2, [])
    assert tested.tests[0].change == f'--xla-flags "{NO_OPT}" -> ""'


def test_an_xla_flag_difference_confirmed_by_its_re_run():
    tests = plan_tests(_flags_result(), {"xla_flags": NO_OPT}, {"xla_flags": ""})
    plan = PairPlan("a", "b", {"xla_flags": NO_OPT}, {"xla_flags": ""}, tests)
    labels = {name: f"jax [{name}]" for name in plan.variants()}
    summaries = {labels["baseline"]: _summary("b", processes(0.005, 0.05, seed=1)),
                 labels["slower"]: _summary("a", processes(0.020, 0.05, seed=2)),
                 labels["slower, xla_flags=none"]: _summary("c", processes(0.005, 0.05, seed=3))}
    tested = conclude(plan, summaries, labels, "tested", 3, [])
    assert tested.tests[0].verdict == CONFIRMED and '--xla-flags ""' in tested.tests[0].why


def test_xla_flags_not_recorded_on_a_side_say_why_not():
    """A record without its environment (None): nothing to set, and the reason says what to do."""
    tests = plan_tests(_flags_result(), {"xla_flags": NO_OPT}, {"xla_flags": None})
    assert tests[0].setting == "xla_flags" and "not recorded on both sides" in str(tests[0].untestable)
    assert "XLA_FLAGS" in str(tests[0].untestable)


def test_xla_flags_that_differ_only_in_hloscopes_own_flags_are_not_tested():
    """A device count or a dump directory puts hloscope's own flags in XLA_FLAGS: the requested flags match."""
    result = _result([])
    result.config_differences = [ConfigDifference("env.XLA_FLAGS", "--xla_force_host_platform_device_count=2", None)]
    tests = plan_tests(result, {"xla_flags": ""}, {"xla_flags": ""})
    assert tests[0].untestable is not None and "both sides" in tests[0].untestable


def test_a_pair_that_differs_in_nothing_has_no_xla_flags_test():
    """No configuration difference and no hypothesis: nothing about XLA flags is planned, let alone confirmed."""
    assert plan_tests(_result([]), {"xla_flags": ""}, {"xla_flags": ""}) == []


def test_a_configuration_that_did_not_run_says_why():
    plan = PairPlan("a", "b", {"data": "loader"}, {"data": "device"},
                    plan_tests(_result(["input_pipeline"]), {"data": "loader"}, {"data": "device"}))
    labels = {name: f"jax [{name}]" for name in plan.variants()}
    summaries = {labels["baseline"]: _summary("b", processes(0.01, 0.01)),
                 labels["slower"]: _summary("a", processes(0.02, 0.01))}
    tested = conclude(plan, summaries, labels, "tested", 3, ["jax [slower, data=device]: the budget was spent"])
    assert tested.tests[0].verdict == NOT_TESTED and "budget" in tested.tests[0].why


def test_two_changes_that_each_close_part_of_the_gap_are_run_together():
    """Effects that add up split the gap between them, so that at most one can close half of it: partly counts as
    closing, as confirmed does; a change that closed nothing or could not tell does not."""
    verdicts = [CONFIRMED, PARTLY, REFUTED, CANNOT_TELL, NOT_TESTED]
    tests = [HypothesisTest([v], v, "data", "loader", "device", v, "") for v in verdicts]
    assert [t.verdict for t in closing_tests(tests)] == [CONFIRMED, PARTLY]


def _two_partial_closures(noise: float = 0.01, count: int = 3):
    """A pair whose slower side (30 ms against 10 ms) is re-run with the data path and the precision matched, each
    closing 8 of the 20 ms: (the pair's re-run summaries, their labels, the two tests)."""
    plan = PairPlan("a", "b", {"data": "loader", "precision": "bf16"}, {"data": "device", "precision": "fp32"},
                    plan_tests(_result(["input_pipeline", "compute_dtype"]), {"data": "loader", "precision": "bf16"},
                               {"data": "device", "precision": "fp32"}))
    labels = {name: name for name in plan.variants()}
    summaries = {"baseline": _summary("b", processes(0.010, noise, count, seed=1)),
                 "slower": _summary("a", processes(0.030, noise, count, seed=2)),
                 "slower, data=device": _summary("c", processes(0.022, noise, count, seed=3)),
                 "slower, precision=fp32": _summary("d", processes(0.022, noise, count, seed=4))}
    tested = conclude(plan, summaries, labels, None, count, [])
    return summaries, labels, tested.tests


JOINT = "slower, data=device, precision=fp32"
ALONE = ("slower, data=device", "slower, precision=fp32")


def _joint(joint_s: float, noise: float = 0.01, count: int = 3, slow_s: float = 0.030, alone_s: float = 0.022):
    """The joint re-run: the baseline, the slower side again, each change alone again (`alone_s`) and both together
    (`joint_s`), by label, with its labels (variant name -> label)."""
    centers = {"baseline": 0.010, "slower": slow_s, ALONE[0]: alone_s, ALONE[1]: alone_s, JOINT: joint_s}
    labels = {name: f"jax [{name}]" for name in centers}
    summaries = {labels[name]: _summary(labels[name], processes(center, noise, count, seed=6 + i))
                 for i, (name, center) in enumerate(centers.items())}
    return summaries, labels


def test_the_interaction_of_two_changes_that_each_close_part_of_the_gap():
    _, _, tests = _two_partial_closures()
    assert [t.verdict for t in tests] == [PARTLY, PARTLY]
    assert closing_tests(tests) == tests  # two partly closures: the joint configuration runs
    name, changes = joint_variants(tests)
    assert name == JOINT and list(changes) == [*ALONE, JOINT]  # each change alone again, then both together
    assert changes[JOINT] == {"data": "device", "precision": "fp32"} and changes[ALONE[0]] == {"data": "device"}
    joint, labels = _joint(0.014)  # 16 ms closed together, as the two 8 ms closures add up to
    found = interaction(tests, joint, labels, JOINT, [])
    assert found.verdict == "additive" and found.joint is not None, found.why
    assert found.sum_single_s == pytest.approx(0.016, rel=0.1) and set(found.single_closed_s) == {"data", "precision"}
    assert found.excess_s == pytest.approx(0.0, abs=0.002) and found.margin_s == pytest.approx(0.004, rel=0.1)
    low, high = found.excess_ci_s
    assert -found.margin_s <= low <= found.excess_s <= high <= found.margin_s
    assert interaction(tests, {}, {}, None, ["stopped"]).verdict == "not run"


def test_the_singles_of_the_interaction_are_the_ones_measured_beside_the_joint_run():
    """The machine may be slower during the joint re-run than during the pair's: every closure the excess is made of
    comes from that one re-run, so a load that slows all of its configurations alike leaves the verdict additive,
    and the single closures reported are the ones measured there (11 ms and 11 ms here, 8 ms each in the first)."""
    _, _, tests = _two_partial_closures()
    joint, labels = _joint(0.019, slow_s=0.041, alone_s=0.030)  # 11 + 11 = 22 ms, and 22 ms closed together
    found = interaction(tests, joint, labels, JOINT, [])
    assert found.verdict == "additive", found.why
    assert all(value == pytest.approx(0.011, rel=0.15) for value in found.single_closed_s.values())
    del joint[labels[ALONE[1]]]
    missing = interaction(tests, joint, labels, JOINT, ["jax [slower, precision=fp32]: crashed"])
    assert missing.verdict == "not run" and "alone" in missing.why and "crashed" in missing.why


def test_changes_that_remove_the_same_time_overlap_and_ones_that_feed_each_other_compound():
    _, _, tests = _two_partial_closures()
    joint, labels = _joint(0.022)  # together they close 8 ms, as each alone: the same time removed twice
    found = interaction(tests, joint, labels, JOINT, [])
    assert found.verdict == "overlapping" and found.excess_ci_s[1] < 0, found.why
    joint, labels = _joint(0.0105, slow_s=0.034, alone_s=0.026)  # 23.5 ms closed together against 16 ms summed
    assert interaction(tests, joint, labels, JOINT, []).verdict == "compounding"


def test_an_interaction_the_noise_leaves_open_is_cannot_tell_not_a_verdict():
    """Two processes a side and steps 60% apart: the excess's interval is wider than the margin either way, so the
    product cannot say whether the effects add up, even where the estimate happens to be near the sum."""
    _, _, tests = _two_partial_closures(noise=0.01, count=3)
    joint, labels = _joint(0.014, noise=0.6, count=2)
    found = interaction(tests, joint, labels, JOINT, [])
    assert found.verdict == CANNOT_TELL, found.why
    assert found.excess_ci_s[1] - found.excess_ci_s[0] > 2 * found.margin_s
    assert "holds both" in found.why or "did not reproduce" in found.why


# A real joint re-run on a loaded 2-core machine (vit-tiny, batch 32, 3 processes each): the slower side had XLA flags
# that slow the step and a 20 ms host sleep before each step. Per configuration: its process medians, and its threads'
# CPU wait and CPU time per step (main and other threads summed), all in ms. Without the sleep the threads waited about
# twice as long for each millisecond they ran (the scheduler favours a process that wakes from a sleep), so removing
# the sleep closed 3-14 ms, not 20.
LOADED = {"baseline": ([5.45, 6.77, 4.61], [8.5, 10.5, 7.9], [6.3, 6.8, 5.6]),
          "slower": ([42.04, 41.51, 41.27], [23.9, 23.4, 20.6], [24.4, 23.5, 20.7]),
          ALONE[0]: ([27.33, 38.79, 38.19], [28.5, 49.4, 47.9], [26.5, 22.6, 28.0]),
          ALONE[1]: ([28.26, 25.69, 25.52], [9.1, 7.1, 4.0], [8.6, 6.2, 7.4]),
          JOINT: ([4.58, 6.81, 4.37], [7.4, 8.6, 7.1], [5.9, 6.7, 5.1])}


def _loaded(measured: bool = True) -> tuple[dict[str, ModeSummary], dict[str, str]]:
    """LOADED's configurations, 10 steps a process within 1% of its median, with their threads' CPU time or without."""
    labels = {name: name for name in LOADED}
    summaries = {}
    for seed, (name, (medians, waited, ran)) in enumerate(LOADED.items()):
        rng = np.random.default_rng(seed)
        summary = _summary(name, [[m * 1e-3 * (1 + 0.01 * rng.standard_normal()) for _ in range(10)] for m in medians])
        summary.cpu_per_step = [CpuPerStep(r * 1e-3, w * 1e-3) for w, r in zip(waited, ran)] if measured else []
        summaries[name] = summary
    return summaries, labels


def test_an_interaction_made_by_contention_is_cannot_tell_with_it_named():
    """The excess of the loaded re-run (+17.8 ms: "compounding" by the step times alone) is matched by the same
    combination of the configurations' extra waits (+18.1 ms: each one's wait beyond their common 1.36 ms of waiting
    per ms of running): at equal contention the verdict differs, so the settings are not shown to interact. Without
    the measurement the step times decide, as before."""
    _, _, tests = _two_partial_closures()
    summaries, labels = _loaded(measured=False)
    assert interaction(tests, summaries, labels, JOINT, []).verdict == "compounding"
    summaries, labels = _loaded()
    found = interaction(tests, summaries, labels, JOINT, [])
    assert found.verdict == CANNOT_TELL and found.excess_ci_s[0] > 0 and found.excess_s > found.margin_s, found.why
    assert found.contention_excess_s == pytest.approx(0.0181, abs=1e-4)
    assert "met different contention" in found.why and "+18.1 ms" in found.why, found.why


def _pair(slow_cpu: tuple[float, float], changed_cpu: tuple[float, float], changed_s: float = 0.039):
    """The data path matched on a 42 ms slower side (baseline 5 ms) moves its step to `changed_s`; each side's
    threads' (waiting, running) seconds a step. Returns the one test."""
    plan = PairPlan("a", "b", {"data": "loader"}, {"data": "device"},
                    plan_tests(_result(["input_pipeline"]), {"data": "loader"}, {"data": "device"}))
    summaries = {"baseline": _summary("b", processes(0.005, 0.01, seed=1)),
                 "slower": _summary("a", processes(0.042, 0.01, seed=2)),
                 "slower, data=device": _summary("c", processes(changed_s, 0.01, seed=3))}
    cpu = {"baseline": (0.005, 0.005), "slower": slow_cpu, "slower, data=device": changed_cpu}
    for name, summary in summaries.items():
        summary.cpu_per_step = [CpuPerStep(cpu[name][1], cpu[name][0])] * len(summary.processes)
    (test,) = conclude(plan, summaries, {name: name for name in summaries}, None, 3, []).tests
    return test


def test_a_closure_made_or_hidden_by_contention_is_cannot_tell():
    """As on the loaded machine above: without the sleep the threads waited 48 ms for 26.5 ms of running against
    23 ms for 23.5 ms, so removing it moved the step by 3 ms, 8% of the gap, refuted by the step times. At their
    common contention (1.42 ms of waiting per ms of running) it would close 64%: the verdict depends on the machine's
    other work and is "cannot tell", with both sides' figures named."""
    test = _pair((0.023, 0.0235), (0.048, 0.0265))
    assert test.verdict == CANNOT_TELL and test.contention_closed_s == pytest.approx(-0.0208, abs=1e-4), test.why
    assert "closes 8%" in test.why and "waited 23 ms a step for a CPU over 23.5 ms of running" in test.why
    assert "the changed one's 48 ms over 26.5 ms" in test.why and "would close 64%" in test.why, test.why


def test_a_change_that_computes_less_waits_less_and_keeps_its_verdict():
    """A setting that makes the step compute four times more makes it wait four times more at the same load: that
    waiting is the setting's cost, not contention. Confirmed stays confirmed and refuted stays refuted when both
    sides waited alike for each ms they ran."""
    test = _pair((0.040, 0.040), (0.010, 0.010), changed_s=0.006)
    assert test.verdict == CONFIRMED and test.contention_closed_s == pytest.approx(0.0), test.why
    test = _pair((0.023, 0.023), (0.026, 0.026))
    assert test.verdict == REFUTED and test.contention_closed_s == pytest.approx(0.0), test.why


def test_contention_that_adds_up_leaves_the_interaction_to_the_step_times():
    """A load that makes every configuration wait alike for its running time leaves the interaction to the step
    times: additive stays additive, compounding stays compounding; a process without the measurement leaves it
    unmeasured."""
    _, _, tests = _two_partial_closures()
    joint, labels = _joint(0.014)
    for summary in joint.values():  # 1.5 ms of waiting per ms of running everywhere
        summary.cpu_per_step = [CpuPerStep(0.004, 0.006)] * len(summary.processes)
    found = interaction(tests, joint, labels, JOINT, [])
    assert found.verdict == "additive" and found.contention_excess_s == pytest.approx(0.0), found.why
    joint, labels = _joint(0.0105, slow_s=0.034, alone_s=0.026)  # 23.5 ms closed together against 16 ms summed
    running = {"slower": 0.020, ALONE[0]: 0.016, ALONE[1]: 0.014, JOINT: 0.005}
    for name, ran in running.items():
        joint[labels[name]].cpu_per_step = [CpuPerStep(ran, 2 * ran)] * 3
    found = interaction(tests, joint, labels, JOINT, [])
    assert found.verdict == "compounding" and found.contention_excess_s == pytest.approx(0.0, abs=1e-12), found.why
    joint[labels[JOINT]].cpu_per_step = joint[labels[JOINT]].cpu_per_step[:2]  # one process unmeasured
    assert interaction(tests, joint, labels, JOINT, []).contention_excess_s is None


def test_the_cpu_per_step_is_read_from_the_timed_window():
    def window(**changed) -> HostScheduling:  # as run.json's timing.host_scheduling is read (typed by load_run)
        figures = {"seconds": 1.0, "cpu_count": 4, "cpu_affinity": 2, "other_processes_cpu_s": 0.5,
                   "main_thread": {"running_s": 0.5, "waiting_for_cpu_s": 0.02},
                   "other_threads": {"running_s": 0.9, "waiting_for_cpu_s": 0.18, "threads": 4},
                   "other_processes": []}
        return msgspec.convert({**figures, **changed}, HostScheduling)

    (cpu,) = cpu_per_step(window(), 20)
    assert cpu.running_s == pytest.approx(0.07) and cpu.waiting_s == pytest.approx(0.01)
    assert cpu.others_share == pytest.approx(0.25)  # 0.5 CPU-s of the 2 CPUs the run could use for 1 s
    assert cpu_per_step(window(cpu_affinity=None), 20)[0].others_share == pytest.approx(0.125)
    assert cpu_per_step(window(seconds=0.0), 20)[0].others_share is None
    assert cpu_per_step(None, 20) == [] and cpu_per_step(window(), 0) == []
    # a thread group without its figures (a window missing one is refused on reading: test_host_scheduling)
    assert cpu_per_step(window(other_threads={"running_s": 0.9, "waiting_for_cpu_s": None}), 20) == []


@pytest.mark.parametrize(("noise", "additive_at_least"), [(0.03, 36), (0.15, 0)])
def test_an_interaction_built_to_add_up_is_never_called_otherwise_by_chance(noise, additive_at_least):
    """Effects that add up exactly, drawn 40 times with steps `noise` apart (3 processes of 10 steps a
    configuration): never overlapping or compounding (the interval is at the processes' 1% level, and a verdict also
    needs the estimate beyond the margin); additive nearly always where the steps are 3% apart, cannot tell where
    they are 15% apart."""
    calls = []
    rng = np.random.default_rng(0)

    def draw(center: float) -> ModeSummary:
        return _summary("x", [[center * (1 + noise * rng.standard_normal()) for _ in range(10)] for _ in range(3)])

    _, _, tests = _two_partial_closures()
    for _ in range(40):
        centers = {"baseline": 0.010, "slower": 0.030, ALONE[0]: 0.022, ALONE[1]: 0.022, JOINT: 0.014}
        labels = {name: name for name in centers}
        calls.append(interaction(tests, {name: draw(center) for name, center in centers.items()}, labels, JOINT,
                                 []).verdict)
    assert set(calls) <= {"additive", CANNOT_TELL}, calls
    assert calls.count("additive") >= additive_at_least, calls


def test_expected_run_time_and_budget():
    def record(**parts) -> RunRecord:
        document = {"schema_version": 1, "run_id": "r", "mode": "jax", "status": "ok", "config": {}, **parts}
        return decode_run(Path("run.json"), document)

    assert expected_run_s(record(started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:00:30Z")) == 40.0
    estimate = expected_run_s(record(timing={"median_s": 0.5, "first_step_s": 4.0},
                                     config={"steps": 6, "warmup": 2, "profile": True, "profile_steps": 2}))
    assert estimate == pytest.approx(10.0 + 4.0 + 10 * 0.5)
    # a clock that went backwards or a time that is not ISO 8601: the estimate from the steps
    assert expected_run_s(record(started_at="2026-01-01T00:00:30Z", finished_at="2026-01-01T00:00:00Z",
                                 timing={"median_s": 1.0}, config={"steps": 2})) == pytest.approx(10.0 + 1.0 + 2.0)
    assert fit_repeats([40.0, 40.0, 40.0], 3, 600) == 3
    assert fit_repeats([40.0, 40.0, 40.0], 3, 250) == 2
    assert fit_repeats([40.0, 40.0, 40.0], 3, 100) == 0


def _result(rules: list[str]) -> ModeResult:
    annotations = [Annotation(rule, rule, "claim", ("device:",)) for rule in rules]
    contributor = Contributor("device:matmul/conv", "t", True, 0.01, None, None, "c", {}, annotations=annotations[:1])
    return ModeResult("slow", "ok", significant=True, verdict="slower", contributors=[contributor],
                      annotations=annotations[1:])


def _summary(label: str, steps: list[list[float]]) -> ModeSummary:
    return ModeSummary(mode=label, step_times_s=[t for p in steps for t in p], replicates=steps,
                       run_dirs=[f"{label}-{i}" for i in range(len(steps))])


def test_the_tested_block_leads_every_rendering_and_the_json():
    """Terminal, Markdown and HTML open with the tested result; --json carries it as `tested`; a report without it
    keeps its document as it was."""
    from rich.console import Console

    plan = PairPlan("jax [slower]", "jax [baseline]", {"precision": "bf16"}, {"precision": "fp32"},
                    plan_tests(_result(["compute_dtype", "eager_ops"]), {"precision": "bf16"}, {"precision": "fp32"}))
    labels = {name: name for name in plan.variants()}
    summaries = {"baseline": _summary("b", processes(0.010, 0.01, seed=1)),
                 "slower": _summary("a", processes(0.030, 0.01, seed=2)),
                 "slower, precision=fp32": _summary("c", processes(0.010, 0.01, seed=3))}
    block = experiments.TestedBlock(600.0, [conclude(plan, summaries, labels, "traces/tested-x", 3, [])], stopped=None)
    report = ExplainReport("jax [baseline]", "step_time", [ModeResult("jax [baseline]", "ok", verdict="baseline")],
                           {})
    plain = report.to_dict()
    assert "tested" not in plain
    report.tested = block
    document = json.loads(json.dumps(report.to_dict()))
    tested = document["tested"]["pairs"][0]["tests"]
    assert [t["verdict"] for t in tested] == [CONFIRMED, NOT_TESTED]
    assert tested[0]["change"] == "--precision bf16 -> fp32" and 0.9 < tested[0]["closure"]["share_closed"] < 1.1
    lead = "matching the precision (--precision fp32) closes"
    out = io.StringIO()
    explain_term.render(report, Console(file=out, width=200))
    terminal = out.getvalue()
    markdown, page = explain_md.render(report), explain_html.render(report)
    for text in (terminal, markdown, page):
        assert lead in text and "untested" in text
        assert text.index(lead) < text.index("Baseline: jax")


def test_named_hypotheses_are_tested_even_where_the_gap_was_not_significant():
    quiet = ModeResult("jax (loader)", "ok", gap_s=-0.001, significant=False, verdict="no significant difference")
    report = ExplainReport("jax (fp32)", "step_time", [ModeResult("jax (fp32)", "ok", gap_s=0.0, verdict="baseline"),
                                                      quiet], {})
    options = {"jax (fp32)": {"data": "device", "precision": "fp32"},
               "jax (loader)": {"data": "loader", "precision": "fp32"}}
    assert plan_pairs(report, options) == []
    (plan,) = plan_pairs(report, options, ["input_pipeline", "compute_dtype"])
    assert (plan.slow, plan.fast) == ("jax (loader)", "jax (fp32)")
    assert [(t.setting, t.untestable is None) for t in plan.tests] == [("data", True), ("precision", False)]
    assert plan.tests[0].title == "matching the data path" and plan.tests[0].rules == ["input_pipeline"]


def test_a_spent_budget_starts_nothing_and_says_so(tmp_path):
    """The launcher asks before each run: past the deadline nothing starts, every run is recorded as not started
    with the budget as the reason, and comparison.json says interrupted."""
    fast = RunOptions(mode="jax", model="vit-tiny", batch_size=8, steps=4, warmup=1)
    slow = RunOptions(mode="jax", model="vit-tiny", batch_size=8, steps=4, warmup=1, precision="bf16")
    launched = run_configurations({"baseline": fast, "slower": slow}, tmp_path, 2, {"baseline": 30.0, "slower": 30.0},
                                  time.monotonic() + 10.0)
    assert launched.stopped is not None and "budget" in launched.stopped
    assert launched.labels == {"baseline": "jax [baseline]", "slower": "jax [slower]"}
    assert launched.comparison.status == "interrupted"
    assert len(launched.not_run) == 4 and all("not started: the time budget was spent" in n for n in launched.not_run)


def test_test_options_without_test_hypotheses_are_refused(cli_run, tmp_path):
    """--budget alone would be silently ignored: one line, exit 2, nothing run."""
    code, _, stderr = cli_run("explain", str(tmp_path), "--budget", "3", "--test-repeats", "2")
    assert code == 2 and "--budget, --test-repeats only apply with --test-hypotheses" in stderr
    assert not any(tmp_path.iterdir())


def test_ctrl_c_keeps_the_comparison_and_says_what_did_not_run(tmp_path):
    def interrupt(label: str, expected: float) -> None:
        raise KeyboardInterrupt

    options = RunOptions(mode="jax", model="vit-tiny", batch_size=8, steps=4, warmup=1)
    launched = run_configurations({"baseline": options, "slower": options}, tmp_path, 1,
                                  {"baseline": 1.0, "slower": 1.0}, time.monotonic() + 600, on_start=interrupt)
    assert launched.stopped == CTRL_C and launched.comparison.status == "interrupted"
    assert [n.split(":")[0] for n in launched.not_run] == ["jax [baseline]", "jax [slower]"]


def test_a_baseline_varying_unlike_the_two_compared_does_not_set_the_spread_a_closure_must_exceed():
    """The faster configuration's processes 4.5 ms apart around 12 ms (their log variance hundreds of times the other
    two's), the slower and the changed one's 0.2 ms apart: a 3 ms move stands out of the two compared, and only they
    set the spread it must exceed. The same faster side beside two configurations varying alike still counts."""
    def steady(medians_ms: list[float]) -> list[list[float]]:
        return [[m * 1e-3 * (1 + 0.002 * ((i % 5) - 2)) for i in range(20)] for m in medians_ms]

    fast, slow, changed = steady([10.0, 12.0, 14.5]), steady([19.9, 20.0, 20.1]), steady([16.9, 17.0, 17.1])
    found = closure(fast, slow, changed)
    assert found is not None and found.noise_s is not None
    assert found.noise_s == pytest.approx(0.2e-3, rel=0.05) and found.closed_s > found.noise_s
    assert judge(found, 0.012, "--precision fp32")[0] == PARTLY
    alike = closure(fast, steady([19.0, 20.0, 21.5]), steady([16.0, 17.0, 18.5]))
    assert alike is not None and alike.noise_s is not None and alike.noise_s == pytest.approx(4.5e-3, rel=0.05)


def test_a_faster_configuration_whose_processes_vary_keeps_the_gap_unproven():
    """The faster configuration's two processes at 10 and 14 ms, the slower and the changed ones steady at 14 ms: its
    variation is far larger than theirs (the spread test leaves it out of `between_process_spread_s`), but it is one of
    the two sides of the gap, so the gap is not told from it: cannot tell, never refuted."""
    fast = [[0.010] * 20, [0.014] * 20]
    slow, changed = [[0.0140] * 20, [0.0141] * 20], [[0.0142] * 20, [0.0143] * 20]
    found = closure(fast, slow, changed)
    assert found is not None and found.gap_p_value is not None and found.gap_p_value >= 0.01, found
    result, why = judge(found, 0.012, "--precision fp32")
    assert result == CANNOT_TELL and "did not reproduce" in why, why
