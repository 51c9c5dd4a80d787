"""`compare --devices 1,2,4` end to end: every mode at each device count, one run directory and one
comparison.json entry each, a refused count recorded with its one line, and `explain` on the comparison adding the
scaling efficiency from 1 to N devices, checked against the run.json files read with json.load."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from statistics import median

import helpers
import pytest

pytestmark = pytest.mark.slow


# runs of the frameworks themselves: their address space is not capped
hloscope = partial(helpers.hloscope_forked, memory_limit=None, timeout=600)


def _comparison(out: Path) -> Path:
    (found,) = list(out.glob("compare-*"))
    return found


def _steps(run_dir: Path) -> list[float]:
    return json.loads((run_dir / "run.json").read_text())["timing"]["step_times_s"]


def _node(ledger: dict, node: str) -> list[float]:
    return ledger["nodes"].get(node) or [0.0] * len(ledger["step_s"])


def test_compare_jax_on_1_and_2_devices_then_explain_its_scaling(tmp_path):
    done = hloscope("compare", "--repeats", "1", "--modes", "jax", "--devices", "1,2", "--model", "vit-tiny", "--batch-size", "8",
                    "--steps", "20", "--warmup", "5", "--profile", "--no-audit", "--out", str(tmp_path))
    assert done.code == 0, done.stderr
    comparison_dir = _comparison(tmp_path)
    comparison = json.loads((comparison_dir / "comparison.json").read_text())
    assert comparison["config"]["devices"] == [1, 2] and comparison["status"] == "ok"
    assert [(e["mode"], e["devices"], e["dir"], e["status"]) for e in comparison["modes"]] == [
        ("jax", 1, "jax-1dev", "ok"), ("jax", 2, "jax-2dev", "ok")]
    for entry in comparison["modes"]:
        run = json.loads((comparison_dir / entry["dir"] / "run.json").read_text())
        assert run["config"]["devices"] == entry["devices"]
        assert run["environment"]["devices"]["count"] == entry["devices"] if entry["devices"] > 1 else True
    rows = [line.split()[:2] for line in done.stdout.splitlines() if line.startswith("jax ")]
    assert rows == [["jax", "1"], ["jax", "2"]]  # the table has a row per mode and count, the count in its column
    assert "jax (2 devices): ok" in done.stderr  # the progress lines name each run by its count
    # the same global batch computes the same losses on 1 and 2 devices
    first = [e["loss_first"] for e in comparison["modes"]]
    assert first[1] == pytest.approx(first[0], rel=1e-5)

    explained = hloscope("explain", str(comparison_dir), "--json")
    assert explained.code == 0, explained.stderr
    report = json.loads(explained.stdout)
    (scaling,) = report["scaling"]
    assert scaling["mode"] == "jax" and scaling["reference"] == "jax (1 device)" and scaling["batch_size"] == 8
    assert scaling["shared_cpu"] is True
    (point,) = scaling["points"]
    one, two = _steps(comparison_dir / "jax-1dev"), _steps(comparison_dir / "jax-2dev")
    assert point["devices"] == 2 and point["label"] == "jax (2 devices)"
    assert point["efficiency"] == pytest.approx(median(one) / (2 * median(two)))
    assert point["speedup"] == pytest.approx(median(one) / median(two))
    assert point["lost_s"] == pytest.approx(median(two) - median(one) / 2)
    low, high = point["efficiency_ci"]
    assert low <= point["efficiency"] <= high
    # the causes, from the two runs' ledgers as explain --json records them
    ledger_1 = report["summaries"]["jax (1 device)"]["ledger"]
    ledger_2 = report["summaries"]["jax (2 devices)"]["ledger"]
    assert "device:collective/communication, exposed" in ledger_2["nodes"]  # the gradient all-reduce, profiled
    assert not any("collective" in node for node in ledger_1["nodes"])
    assert point["significant"] == all(point["tests"].values())
    # one process a device count: the spread between processes is unmeasured, and the point says so
    assert point["provisional"] is True and any("one process on a side" in note for note in point["notes"])
    if point["significant"]:  # 2 virtual devices on 2 shared cores: measured 21% efficient here, far below ideal
        # Each cause is a node whose excess passes the test over the few profiled steps; on a noisy machine none may
        # (seen once in CI: a 14% shift between processes), and the loss is then all "within noise" + residual:
        # the figures below are checked either way.
        nodes = set(ledger_1["nodes"]) | set(ledger_2["nodes"])
        excess = {n: median(_node(ledger_2, n)) - median(_node(ledger_1, n)) / 2 for n in nodes}
        for cause in point["causes"]:
            assert cause["seconds"] == pytest.approx(excess[cause["node"]])
            assert cause["p_value"] < 0.05
        assert point["profiled_lost_s"] == pytest.approx(sum(excess.values()))
        assert point["residual_s"] == pytest.approx(point["lost_s"] - point["profiled_lost_s"])
    else:  # a loss within the noise is not split into causes
        assert point["causes"] == [] and point["profiled_lost_s"] is None and point["residual_s"] is None
    terminal = hloscope("explain", str(comparison_dir))
    assert "partitioning and collective overhead, not a speed-up" in " ".join(terminal.stdout.split())


def test_compare_jax_on_4_devices_with_a_refused_count(tmp_path):
    """Four virtual CPU devices, and a count the batch does not divide: refused in one line,
    recorded, and the other counts run."""
    done = hloscope("compare", "--repeats", "1", "--modes", "jax,torchax", "--devices", "1,3,4", "--model", "vit-tiny", "--batch-size",
                    "8", "--steps", "10", "--warmup", "3", "--check-parity", "--out", str(tmp_path))
    assert done.code == 0, done.stderr
    comparison_dir = _comparison(tmp_path)
    comparison = json.loads((comparison_dir / "comparison.json").read_text())
    # the fairness audit set the modes up at the smallest count and audits the timed runs at that count only: the
    # device count (and XLA_FLAGS) differs between one mode's runs by design, not between the modes
    assert comparison["audit"]["before_timing"]["modes"] == comparison["audit"]["timed_runs"]["modes"] == ["jax", "torchax"]
    assert comparison["audit"]["timed_runs"]["mismatches"] == []
    entries = {e["devices"]: e for e in comparison["modes"] if e["mode"] == "jax"}
    # --check-parity: every run that ran, named by its count, computes the same first step (the refused one is left out)
    parity = comparison["parity"]
    assert parity["ok"], parity["failures"]
    assert [m["mode"] for m in parity["modes"]] == ["jax (1 device)", "torchax (1 device)", "jax (4 devices)",
                                                      "torchax (4 devices)"]
    assert [entries[n]["status"] for n in (1, 3, 4)] == ["ok", "refused", "ok"]
    assert comparison["status"] == "ok"  # a refused count is not a failure
    assert entries[3]["error"].startswith("--devices 3 --batch-size 8: the global batch must divide by the device count")
    assert not (comparison_dir / entries[3]["dir"]).exists()
    assert "jax (3 devices) refused: --devices 3 --batch-size 8" in " ".join(done.stderr.split())
    run = json.loads((comparison_dir / "jax-4dev" / "run.json").read_text())
    assert run["environment"]["devices"]["count"] == 4 and run["environment"]["devices"]["per_device_batch"] == 2
    assert entries[4]["loss_first"] == pytest.approx(entries[1]["loss_first"], rel=1e-5)

    report = json.loads(hloscope("explain", str(comparison_dir), "--json").stdout)
    scaling, _torchax = report["scaling"]
    assert [p["devices"] for p in scaling["points"]] == [4]
    one, four = _steps(comparison_dir / "jax-1dev"), _steps(comparison_dir / "jax-4dev")
    assert scaling["points"][0]["efficiency"] == pytest.approx(median(one) / (4 * median(four)))
    assert scaling["notes"] == [f"3 devices: refused: {entries[3]['error']}"]
