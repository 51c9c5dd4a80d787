"""Scaling efficiency from 1 to N devices on constructed runs whose right answer is known: the
efficiency arithmetic, its bootstrap interval against scipy's own bootstrap, the causes of the lost efficiency from the
ledgers, the engine's significance rules, refused device counts, and what every renderer says about shared CPU cores."""

from __future__ import annotations

import html
import json
import re
from statistics import median

import numpy as np
import pytest
from rich.console import Console
from scipy import stats as scipy_stats

from hloscope.explain.engine import explain
from hloscope.explain.ledger import RunLedger
from hloscope.explain.scaling import scaling, scaling_point
from hloscope.explain.summary import ModeSummary
from hloscope.render import explain_html, explain_md, explain_term

ONE = [1.00e-3, 1.02e-3, 0.98e-3, 1.01e-3, 0.99e-3, 1.03e-3, 0.97e-3, 1.00e-3, 1.01e-3, 0.99e-3]
COMM = "device:collective/communication, exposed"
COMPUTE = "device:matmul/conv"
IDLE = "idle:runtime dispatch"


def _ledger(nodes: dict[str, list[float]]) -> RunLedger:
    steps = [sum(values) for values in zip(*nodes.values())]
    return RunLedger(nodes, {}, steps, len(steps) + 1, {}, True, steps)


def _run(devices: int, times: list[float], ledger: RunLedger | None = None, platform: str = "cpu",
         batch: int = 8, status: str = "ok") -> ModeSummary:
    return ModeSummary(mode=f"jax ({devices} device{'s' if devices > 1 else ''})", status=status, platform=platform,
                       step_times_s=times, step_time_s=median(times) if times else None, batch_size=batch,
                       run_mode="jax", devices=devices, ledger=ledger, settings={"machine.cpu_count": "2"})


def test_efficiency_is_step1_over_n_times_stepN_with_scipys_bootstrap_interval():
    two = [t * 0.8 for t in ONE]  # 0.8 ms on 2 devices: speed-up 1.25, efficiency 62.5%
    point = scaling_point(_run(2, two), _run(1, ONE))
    assert point.devices == 2
    assert point.efficiency == pytest.approx(median(ONE) / (2 * median(two)))
    assert point.efficiency == pytest.approx(0.625)
    assert point.speedup == pytest.approx(1.25)
    assert point.ideal_step_s == pytest.approx(median(ONE) / 2)
    assert point.lost_s == pytest.approx(median(two) - median(ONE) / 2)
    # the interval: percentile bootstrap resampling both runs' steps, as scipy computes it independently
    reference = scipy_stats.bootstrap((np.array(ONE), np.array(two)),
                                      lambda a, b, axis=-1: np.median(a, axis=axis) / (2 * np.median(b, axis=axis)),
                                      method="percentile", n_resamples=4000, random_state=1, paired=False)
    low, high = point.efficiency_ci
    assert low <= point.efficiency <= high
    assert low == pytest.approx(reference.confidence_interval.low, abs=0.02)
    assert high == pytest.approx(reference.confidence_interval.high, abs=0.02)
    assert point.significant and all(point.tests.values())


def test_perfect_scaling_is_not_a_loss_and_seeks_no_cause():
    half = [t / 2 for t in ONE]
    ledger = _ledger({COMPUTE: [0.9e-3] * 5})
    point = scaling_point(_run(2, half, ledger), _run(1, ONE, ledger))
    assert point.efficiency == pytest.approx(1.0)
    assert point.lost_s == pytest.approx(0.0)
    assert not point.significant and not point.tests["interval_excludes_zero"]
    assert point.causes == [] and point.profiled_lost_s is None


def test_a_loss_below_the_minimum_gap_is_within_noise():
    slightly = [t / 2 * 1.03 for t in ONE]  # 3% over the ideal step: below the engine's 5% practical threshold
    point = scaling_point(_run(2, slightly), _run(1, ONE))
    assert point.tests["interval_excludes_zero"] and not point.tests["at_least_min_gap"]
    assert not point.significant


def test_causes_are_each_nodes_excess_over_its_ideal_share():
    # 1 device: 0.8 ms compute + 0.2 ms idle per profiled step. 2 devices: compute does not halve (shared cores):
    # 0.6 ms, idle 0.1 ms (its ideal share), and 0.3 ms of exposed all-reduce the 1-device run does not have.
    wobble = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]
    one = _ledger({COMPUTE: [0.8e-3 * w for w in wobble], IDLE: [0.2e-3 * w for w in wobble]})
    two = _ledger({COMPUTE: [0.6e-3 * w for w in wobble], IDLE: [0.1e-3 * w for w in wobble[::-1]],
                   COMM: [0.3e-3 * w for w in wobble]})
    two_times = list(ONE)  # the same 1 ms step on 2 devices: efficiency 50%
    point = scaling_point(_run(2, two_times, two), _run(1, ONE, one))
    assert point.efficiency == pytest.approx(0.5)
    causes = {c.node: c for c in point.causes}
    assert set(causes) == {COMM, COMPUTE}  # idle is at its ideal share: not a cause
    assert causes[COMM].kind == "communication" and causes[COMPUTE].kind == "compute"
    assert causes[COMM].seconds == pytest.approx(median(two.nodes[COMM]) - 0.0)
    assert causes[COMPUTE].seconds == pytest.approx(median(two.nodes[COMPUTE]) - median(one.nodes[COMPUTE]) / 2)
    assert [c.node for c in point.causes] == [COMM, COMPUTE]  # largest loss first: 0.3 ms, then 0.2 ms
    assert all(c.p_value is not None and c.p_value < 0.05 for c in point.causes)
    # the parts add up: every node's excess (the idle one within noise) is the profiled loss; the residual the rest
    expected = sum(median(two.nodes.get(n, [0.0])) - median(one.nodes.get(n, [0.0])) / 2 for n in (COMM, COMPUTE, IDLE))
    assert point.profiled_lost_s == pytest.approx(expected)
    assert point.within_noise_s == pytest.approx(median(two.nodes[IDLE]) - median(one.nodes[IDLE]) / 2)
    assert point.residual_s == pytest.approx(point.lost_s - expected)


def test_a_noisy_window_needs_the_engines_larger_gap():
    over = [t / 2 * 1.15 for t in ONE]  # 15% over the ideal step: a loss at 5%, within noise at the noisy 25%
    assert scaling_point(_run(2, over), _run(1, ONE)).significant
    noisy = _run(2, over)
    noisy.noisy = True
    assert not scaling_point(noisy, _run(1, ONE)).significant


def test_scaling_groups_by_mode_and_records_refused_and_other_batches():
    runs = [_run(1, ONE), _run(2, [t * 0.8 for t in ONE]),
            _run(3, [], status="refused"), _run(4, [t * 0.6 for t in ONE], batch=16)]
    runs[2].notes = ["--devices 3 --batch-size 8: the global batch must divide by the device count"]
    other = ModeSummary(mode="torchax", status="ok", step_times_s=ONE, run_mode="torchax", devices=1)
    (result,) = scaling([*runs, other])
    assert result.mode == "jax" and result.reference == "jax (1 device)"
    assert [p.devices for p in result.points] == [2]
    assert result.notes[0].startswith("3 devices: refused: --devices 3 --batch-size 8: the global batch must divide")
    assert "global batch 16 against 8" in result.notes[1]
    assert result.shared_cpu and result.cpu_cores == 2
    assert scaling([_run(2, ONE), _run(4, ONE)]) == []  # no 1-device run: no reference to scale from


def test_explain_reports_scaling_in_json_and_every_renderer_says_the_cores_are_shared():
    wobble = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]
    one = _ledger({COMPUTE: [0.8e-3 * w for w in wobble]})
    two = _ledger({COMPUTE: [0.7e-3 * w for w in wobble], COMM: [0.3e-3 * w for w in wobble]})
    report = explain([_run(1, ONE, one), _run(2, ONE, two)])
    document = json.loads(json.dumps(report.to_dict()))
    (mode,) = document["scaling"]
    assert mode["shared_cpu"] and mode["points"][0]["efficiency"] == pytest.approx(0.5)
    assert {c["kind"] for c in mode["points"][0]["causes"]} == {"communication", "compute"}
    assert "scaling" in document["method"]
    console = Console(record=True, width=100)
    explain_term.render(report, console)
    outputs = {"terminal": console.export_text(), "md": explain_md.render(report).replace("\\", "").replace("**", ""),
               "html": html.unescape(re.sub(r"<[^>]+>", "", explain_html.render(report)))}
    for name, text in outputs.items():
        flat = " ".join(text.split())
        assert "CPU devices sharing this host's 2 CPU cores" in flat, name
        assert "partitioning and collective overhead, not a speed-up" in flat, name
        assert "50% (" in flat and "communication: Exposed communication" in flat, name
        assert "time lost per step against the ideal: +0.500 ms (95% interval" in flat, name
    on_gpu = explain([_run(1, ONE, one, platform="gpu"), _run(2, ONE, two, platform="gpu")])
    assert not on_gpu.scaling[0].shared_cpu
    assert "not a speed-up" not in explain_md.render(on_gpu)


def _processes(devices: int, medians_s: list[float]) -> ModeSummary:
    """A run of `devices` devices in one process per median, each process's steps ONE's shape around its median."""
    replicates = [[t * m / 1e-3 for t in ONE] for m in medians_s]
    summary = _run(devices, [t for p in replicates for t in p])
    summary.replicates = replicates
    return summary


def test_one_process_a_side_is_provisional():
    point = scaling_point(_run(2, [t * 0.8 for t in ONE]), _run(1, ONE))
    assert point.provisional and any("one process on a side" in note for note in point.notes), point.notes
    assert point.to_dict()["provisional"] is True


def test_a_loss_the_processes_do_not_tell_from_their_variation_is_not_a_loss():
    """Three processes a device count, each spread by 4% around its configuration: the 2-device steps lose 0.085 ms
    against the ideal, beyond every step and process spread and with an interval clear of zero, which the steps alone
    called a loss; three processes a side at that variation do not tell it from chance (p ~0.013): no loss, no
    causes. A little less variation (p ~0.004) is told apart."""
    point = scaling_point(_processes(2, [0.55e-3, 0.575e-3, 0.60e-3]), _processes(1, [0.94e-3, 0.98e-3, 1.03e-3]))
    assert not point.provisional
    assert {name for name, passed in point.tests.items() if not passed} == {"processes_differ"}, point.tests
    assert not point.significant and point.causes == []
    clear = scaling_point(_processes(2, [0.56e-3, 0.58e-3, 0.60e-3]), _processes(1, [0.95e-3, 0.98e-3, 1.02e-3]))
    assert clear.significant and not clear.provisional and all(clear.tests.values()), clear.tests
