"""Collective time per step: `trace stats` on a single trace gives each step's time in collectives and
its exposed part (no other device work beside it), and explain's ledger has exposed communication as a node of its
own. Checked on a real `--mode jax --devices 2` profile (2 virtual XLA CPU devices, one all-reduce per device per
step) against the xplane read by jax.profiler.ProfileData and the collectives named by XLA's own HLO parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import hloscope

from hloscope.explain.collect import summarize_run
from hloscope.trace.step_profile import EXPOSED_COLLECTIVES, exposed_time


def test_exposed_time_is_the_collectives_with_nothing_beside_them():
    # collectives 0-10 and 20-30; compute 5-12 and 22-24, 26-28: exposed 0-5, 20-22, 24-26, 28-30
    assert exposed_time([(0, 10), (20, 30)], [(5, 12), (22, 24), (26, 28)]) == 5 + 2 + 2 + 2
    assert exposed_time([(0, 10), (2, 4)], []) == 10  # overlapping collectives (two devices) count once
    assert exposed_time([], [(0, 1)]) == 0.0


def _run(out: Path) -> Path:
    result = hloscope("run", "--mode", "jax", "--model", "vit-tiny", "--batch-size", "8", "--steps", "3", "--warmup", "2",
                      "--devices", "2", "--dump-hlo", "--profile", "--profile-steps", "4", "--out", out, "--run-id",
                      "jax2", "--json", timeout=600, memory_limit=None,
                      env={"HLOSCOPE_NO_PROGRESS": "1", "XLA_FLAGS": None})
    assert result.code == 0, result.stderr[-3000:]
    return out / "jax2"


def _union(intervals):
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _expected_per_step(run: Path) -> dict[int, tuple[float, float]]:
    """Per step number: (union of the collectives, their part with no other op of the program beside them), in us,
    from the xplane and the optimized HLO alone."""
    from jax.profiler import ProfileData
    from jaxlib import _hlo

    (hlo,) = run.glob("hlo/*jit_train_step.cpu_after_optimizations.txt")
    module = _hlo.hlo_module_from_text(hlo.read_text())
    collectives = {i.name for c in module.computations() for i in c.instructions()
                   if i.opcode.name.startswith(("kAllReduce", "kAllGather", "kReduceScatter", "kAllToAll",
                                                "kCollective"))}
    assert collectives
    (xplane,) = run.glob("plugins/profile/*/*.xplane.pb")
    markers, ops = [], []
    for plane in ProfileData.from_file(str(xplane)).planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if event.name == "train_step" and "step_num" in stats:
                    markers.append((event.start_ns / 1e3, int(stats["step_num"])))
                elif stats.get("hlo_module") == "jit_train_step" and "hlo_op" in stats:
                    ops.append((event.start_ns / 1e3, (event.start_ns + event.duration_ns) / 1e3,
                                stats["hlo_op"] in collectives))
    markers.sort()
    by_step: dict[int, list] = {number: [] for _, number in markers}
    for start, end, is_collective in ops:
        earlier = [number for marker, number in markers if marker <= start]
        if earlier:
            by_step[earlier[-1]].append((start, end, is_collective))
    expected = {}
    for number, executions in by_step.items():
        coll = [(s, e) for s, e, c in executions if c]
        other = [(s, e) for s, e, c in executions if not c]
        # exposed: what the collectives add to the others' union
        expected[number] = (_union(coll), _union(coll + other) - _union(other))
    return expected


@pytest.mark.slow
def test_collective_time_per_step_and_in_the_ledger(tmp_path):
    run = _run(tmp_path)
    result = hloscope("trace", "stats", run, "--json", timeout=600, env={"HLOSCOPE_NO_PROGRESS": "1"})
    assert result.code == 0, result.stderr[-2000:]
    (trace,) = json.loads(result.stdout)["traces"]
    expected = _expected_per_step(run)
    steps = trace["per_step"]
    assert [s["step"] for s in steps] == sorted(expected)
    with_collectives = [s for s in steps if s["collective_us"] > 0]
    assert len(with_collectives) >= 3  # every step the program ran in has its all-reduces
    for step in steps:
        union, exposed = expected[step["step"]]
        assert step["collective_us"] == pytest.approx(union, abs=0.01)
        assert step["collective_exposed_us"] == pytest.approx(exposed, abs=0.01)
        assert step["collective_exposed_us"] <= step["collective_us"] <= step["device_busy_us"] + 0.01

    # explain's ledger: exposed communication is a node; the nodes of each kept step still add up to the step

    ledger = summarize_run(run).ledger
    assert ledger is not None and EXPOSED_COLLECTIVES in ledger.nodes
    kept = [s["step"] for s in steps if str(s["step"]) not in ledger.dropped]
    by_number = {s["step"]: s for s in steps}
    for index, number in enumerate(kept):
        total = sum(values[index] for values in ledger.nodes.values())
        assert total == pytest.approx(ledger.step_s[index], abs=1e-9)
        assert ledger.nodes[EXPOSED_COLLECTIVES][index] == pytest.approx(
            by_number[number]["collective_exposed_us"] / 1e6, abs=1e-8)
