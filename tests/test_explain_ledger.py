"""The explain ledger on constructed runs whose right answer is known: significance of the gap, per-step parts that
add up, node deltas tested across steps, hypotheses attached to the node they explain, configuration differences."""

from __future__ import annotations

from math import comb
from statistics import median

import pytest

from hloscope.explain.engine import explain
from hloscope.explain.ledger import RunLedger
from hloscope.explain.summary import ModeSummary
from hloscope.significance import differs, median_difference, median_ratio, outliers
from hloscope.trace.model import HOST_OP, KERNEL, STEP, Event
from hloscope.trace.step_profile import profile_steps, step_parts

# ---- significance -----------------------------------------------------------------------------------------------


def test_median_difference_interval_brackets_a_clear_shift_and_zero_for_the_same_sample():
    a = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02, 0.98]
    shifted = [x + 0.5 for x in a]
    gap = median_difference(shifted, a)
    assert gap.estimate == pytest.approx(0.5)
    assert 0.3 < gap.low <= 0.5 <= gap.high < 0.7 and gap.excludes_zero
    same = median_difference(a, list(reversed(a)))
    assert same.estimate == 0.0 and not same.excludes_zero
    ratio = median_ratio(shifted, a)
    assert ratio.estimate == pytest.approx(1.5) and ratio.low < 1.5 < ratio.high


def test_mann_whitney_exact_p_values():
    # Completely separated samples of 5 and 5: the smallest two-sided p-value, 2 / C(10, 5).
    assert differs([2, 3, 4, 5, 6], [7, 8, 9, 10, 11]) == pytest.approx(2 / comb(10, 5))
    assert differs([1, 2], [3, 4]) == pytest.approx(2 / comb(4, 2))  # 0.33: two steps can never differ significantly
    assert differs([1.0], [2.0]) is None
    assert differs([1, 1, 1], [1, 1, 1]) == 1.0


def test_outliers_flags_a_preempted_step_and_not_a_small_wobble():
    assert outliers([1.93, 1.95, 1.91, 3.45, 1.94]) == [False, False, False, True, False]
    assert outliers([1.00, 1.02, 0.99, 1.05, 1.01]) == [False] * 5


# ---- per-step parts from events ---------------------------------------------------------------------------------


def _kernel(name, start, dur, category="matmul/conv"):
    return Event(name, start, dur, KERNEL, True, "XLA Ops", "/device:GPU:0", category=category)


def _host(name, start, dur, lane="thread 1"):
    return Event(name, start, dur, HOST_OP, False, lane, "host")


def _steps(count=6, period=1000.0, input_us=300.0, busy_us=400.0, slow_step=None):
    """`count` steps of `period` us: an input annotation, then one matmul kernel, then idle."""
    events, windows = [], []
    for i in range(count):
        start = i * period
        windows.append((i, start, start + period - 10))
        events.append(Event(f"ProfilerStep#{i}", start, period - 10, STEP, False, "thread 1", "host", step=i))
        events.append(_host("hloscope/input", start, input_us))
        busy = busy_us * (2.0 if i == slow_step else 1)
        events.append(_kernel("gemm", start + input_us + 50, busy))
    return events, windows


def test_step_parts_add_up_to_the_step_and_name_the_input_pipeline():
    events, windows = _steps()
    parts = step_parts(events, windows)
    assert len(parts) == len(windows) == 6
    for part in parts[:-1]:
        assert part.step_s == pytest.approx(1e-3)  # the period: next step's start - this step's start
        assert sum(part.nodes.values()) == pytest.approx(part.step_s)
        assert part.nodes["device:matmul/conv"] == pytest.approx(400e-6)
        assert part.nodes["idle:input pipeline"] == pytest.approx(300e-6)
        assert part.nodes["idle:other host"] == pytest.approx(300e-6)
        assert part.executions == {"matmul/conv": 1}


def test_device_time_is_clipped_to_the_step_it_runs_in():
    events, windows = _steps(count=3)
    events.append(_kernel("long", 900.0, 300.0, category="reduction"))  # runs 100 us into step 1
    parts = step_parts(events, windows)
    assert parts[0].nodes["device:reduction"] == pytest.approx(100e-6)
    assert parts[1].nodes["device:reduction"] == pytest.approx(200e-6)
    assert all(sum(p.nodes.values()) == pytest.approx(p.step_s) for p in parts)


def test_profile_drops_the_warm_up_and_a_preempted_step():
    events, windows = _steps(count=7, slow_step=4)
    profile = profile_steps(step_parts(events, windows), warmup=1)
    assert set(profile.dropped) == {0, 4}
    assert "warm-up" in profile.dropped[0] and "outlier" in profile.dropped[4]
    assert profile.kept == [1, 2, 3, 5, 6]


def test_host_only_step_splits_into_time_inside_and_outside_top_level_aten_ops():
    events, windows = [], [(0, 0.0, 1000.0), (1, 1000.0, 2000.0)]
    for base in (0.0, 1000.0):
        events += [_host("aten::linear", base + 100, 300), _host("aten::addmm", base + 150, 200),  # nested in linear
                   _host("aten::bmm", base + 500, 100), _host("aten::bmm", base + 700, 100)]
    parts = step_parts(events, windows)
    step = parts[0]
    assert step.nodes == pytest.approx({"host:inside framework ops": 500e-6, "host:outside framework ops": 500e-6})
    assert step.ops["aten::bmm"].calls == 2 and step.ops["aten::bmm"].seconds == pytest.approx(200e-6)
    assert "aten::addmm" not in step.ops  # nested: its time is inside aten::linear's
    assert step.framework_ops == 4


# ---- the engine on constructed ledgers ---------------------------------------------------------------------------


def _ledger(nodes: dict[str, list[float]], ops=None) -> RunLedger:
    n = len(next(iter(nodes.values())))
    steps = [sum(values[i] for values in nodes.values()) for i in range(n)]
    return RunLedger(nodes, ops or {}, steps, n + 1, {"0": "profiler warm-up"}, True,
                     [sum(v[i] for k, v in nodes.items() if k.startswith("device:")) for i in range(n)])


def _summary(mode, steps, ledger=None, **fields) -> ModeSummary:
    return ModeSummary(mode=mode, step_times_s=steps, step_time_s=median(steps), ledger=ledger, platform="cpu",
                       **fields)


JITTER = [0.00, 0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.015, -0.015, 0.0]


def _times(ms: float) -> list[float]:
    return [(ms + j) * 1e-3 for j in JITTER * 2]


def test_identical_runs_are_no_significant_difference_and_get_no_causes():
    ledger = _ledger({"device:matmul/conv": [4e-4] * 6, "idle:other host": [6e-4] * 6})
    a = _summary("jax (a)", _times(1.0), ledger)
    b = _summary("jax (b)", [t * 1.01 for t in _times(1.0)], ledger)
    entry = {m["mode"]: m for m in explain([a, b]).to_dict()["modes"]}["jax (b)"]
    assert entry["verdict"] == "no significant difference" and entry["significant"] is False
    assert entry["gap_ci_s"][0] <= entry["gap_s"] <= entry["gap_ci_s"][1]
    assert entry["contributors"] == [] and entry["residual_s"] == pytest.approx(entry["gap_s"])


def test_a_real_but_small_gap_under_min_gap_is_no_difference():
    a = _summary("a", _times(1.0))
    b = _summary("b", _times(1.03))  # 3%: outside the noise, inside the 5% practical threshold
    entry = explain([a, b]).to_dict()["modes"][1]
    assert entry["gap_ci_s"][0] > 0 and entry["verdict"] == "no significant difference"
    assert explain([a, b], min_gap=0.01).to_dict()["modes"][1]["verdict"] == "slower"


def test_the_input_pipeline_node_is_the_contributor_and_everything_adds_up():
    fast_ledger = _ledger({"device:matmul/conv": [4.0e-4, 4.1e-4, 3.9e-4, 4.0e-4, 4.05e-4, 3.95e-4],
                           "idle:other host": [6.0e-4, 6.1e-4, 5.9e-4, 6.0e-4, 6.05e-4, 5.95e-4]})
    slow_ledger = _ledger({"device:matmul/conv": [4.0e-4, 3.9e-4, 4.1e-4, 4.02e-4, 3.98e-4, 4.0e-4],
                           "idle:other host": [6.0e-4, 6.1e-4, 5.9e-4, 6.0e-4, 6.05e-4, 5.95e-4],
                           "idle:input pipeline": [2.0e-3, 2.1e-3, 1.9e-3, 2.0e-3, 2.05e-3, 1.95e-3]})
    fast = _summary("jax (device)", _times(1.0), fast_ledger, data="device")
    slow = _summary("jax (loader)", _times(3.1), slow_ledger, data="loader")
    report = explain([fast, slow])  # typed (hloscope.explain.report): what the renderers read
    entry = report.modes[1]
    assert report.baseline == "jax (device)" and entry.verdict == "slower"
    first = entry.contributors[0]
    assert first.node == "idle:input pipeline" and first.significant and first.kind == "measured"
    assert first.seconds == pytest.approx(2.0e-3)  # the loader run's median: the device run has no such node
    assert first.p_value == pytest.approx(2 / comb(12, 6))
    assert [a.rule for a in first.annotations] == ["input_pipeline"]
    assert entry.residual_s is not None and entry.gap_s is not None and entry.profiled_gap_s is not None
    total = sum(c.seconds for c in entry.contributors) + entry.residual_s
    assert total == pytest.approx(entry.gap_s, abs=1e-12)
    assert entry.residual_s == pytest.approx(entry.gap_s - entry.profiled_gap_s)
    assert report.to_dict()["modes"][1]["contributors"][0]["annotations"][0]["also_nodes"] == []  # the JSON form


def test_a_faster_run_against_a_chosen_baseline_has_a_negative_gap():
    a = _summary("a", _times(1.0))
    b = _summary("b", _times(2.0))
    entry = {m["mode"]: m for m in explain([a, b], baseline="b").to_dict()["modes"]}["a"]
    assert entry["verdict"] == "faster" and entry["gap_s"] < 0 and entry["gap_ci_s"][1] < 0
    with pytest.raises(Exception, match="not a timed run"):
        explain([a, b], baseline="c")


def test_batch_difference_is_listed_and_compared_per_sample():
    a = _summary("b8", _times(1.0), batch_size=8, settings={"batch_size": "8", "model": "vit-tiny"})
    b = _summary("b16", _times(2.32), batch_size=16, settings={"batch_size": "16", "model": "vit-tiny"})
    entry = explain([a, b]).to_dict()["modes"][1]
    assert entry["config_differences"] == [{"field": "batch_size", "a": "16", "b": "8"}]
    assert entry["ratio"] == pytest.approx(2.32, rel=0.01)
    assert entry["per_sample"]["ratio"] == pytest.approx(1.16, rel=0.01)
    assert entry["per_sample"]["batch_size"] == {"run": 16, "baseline": 8}


def test_too_few_profiled_steps_are_said_not_hidden():
    small = _ledger({"device:matmul/conv": [4e-4, 4e-4], "idle:other host": [6e-4, 6e-4]})
    big = _ledger({"device:matmul/conv": [4e-4, 4e-4], "idle:other host": [3e-3, 3e-3]})
    entry = explain([_summary("a", _times(1.0), small), _summary("b", _times(3.4), big)]).to_dict()["modes"][1]
    assert entry["verdict"] == "slower"
    assert not any(c["significant"] for c in entry["contributors"])
    assert any("too few" in note for note in entry["notes"])


def test_estimates_are_labelled_and_name_their_assumption():
    a = _summary("a", _times(1.0), bytes_accessed=1e6)
    b = _summary("b", _times(2.0), bytes_accessed=3e6)
    entry = explain([a, b]).to_dict()["modes"][1]
    memory = next(x for x in entry["annotations"] if x["rule"] == "memory_traffic")
    assert memory["kind"] == "estimate" and memory["evidence"]["assumed"] == {"memory_bandwidth_B_s": 2.0e10}
    assert "(estimate)" in memory["claim"]
