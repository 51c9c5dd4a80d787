"""hloscope explain (and diff) on a real CPU comparison of the tiny ViT: JAX against PyTorch/XLA, with HLO dumps and
profiles. The figures in the report are checked against run.json and the hlo/trace statistics read separately."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from statistics import median

import pytest
from helpers import ARTIFACTS, CHROMIUM_FLAGS, MEMORY_LIMIT_BYTES, Result, chromium, command, hloscope, hloscope_forked

from hloscope.render.fmt import ms_interval, signed_ms

pytestmark = pytest.mark.slow


def _hloscope(*args: str, memory_limit: int | None = MEMORY_LIMIT_BYTES,
              env: dict[str, str | None] | None = None) -> Result:
    """`hloscope ARGS` as a user runs it (helpers.hloscope), which must succeed."""
    result = hloscope(*args, timeout=900, memory_limit=memory_limit, env=env)
    assert result.code == 0, result.stderr[-3000:]
    return result


def _explain(*args: str) -> Result:
    """`hloscope explain ARGS` in a process of its own, forked from one that has imported the CLI
    (helpers.hloscope_forked), which must succeed."""
    result = hloscope_forked("explain", *args, timeout=900)
    assert result.code == 0, result.stderr[-3000:]
    return result


def _read(cli_run, *args: str) -> dict:
    """The --json document of a reading command (hlo stats, trace stats, diff) run in this process: the figures
    explain is checked against, read separately from it."""
    code, out, err = cli_run(*args, "--json")
    assert code == 0, err[-3000:]
    return json.loads(out)


@pytest.fixture(scope="module")
def comparison(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compare")
    # 10 profiled steps: the first is the profiler's warm-up and, on a loaded 2-core machine, 1-2 more are dropped as
    # preempted; at least 4 kept a side are needed for a node to differ significantly (exact Mann-Whitney).
    # --no-audit: its set-up processes check nothing read here (test_audit.py runs the audit).
    _hloscope("compare", "--repeats", "2", "--modes", "jax,torch_xla", "--model", "vit-tiny", "--batch-size", "8", "--steps", "12",
              "--warmup", "3", "--dump-hlo", "--profile", "--profile-steps", "10", "--no-audit", "--out", str(out),
              memory_limit=None)
    (path,) = out.glob("compare-*")
    return path


@pytest.fixture(scope="module")
def report(comparison) -> dict:
    return json.loads(_explain(str(comparison), "--json").stdout)


def _step_times(comparison: Path) -> dict[str, list[float]]:
    """Each mode's timed steps, its two processes' pooled (folders `jax` and `jax-r2`)."""
    return {m: [t for folder in (m, f"{m}-r2")
                for t in json.loads((comparison / folder / "run.json").read_text())["timing"]["step_times_s"]]
            for m in ("jax", "torch_xla")}


def _medians(comparison: Path) -> dict[str, float]:
    return {m: median(times) for m, times in _step_times(comparison).items()}


def _process_noise_s(comparison: Path, baseline: str) -> float:
    """The smallest gap this comparison can resolve, from run.json alone: the spread between the two processes of each
    mode, and the larger one relative to its mode's pooled median taken at the baseline's (the A/A control)."""
    pooled = _medians(comparison)
    spreads = {}
    for mode in pooled:
        medians = [median(json.loads((comparison / folder / "run.json").read_text())["timing"]["step_times_s"])
                   for folder in (mode, f"{mode}-r2")]
        spreads[mode] = max(medians) - min(medians)
    control = max(spread / pooled[mode] for mode, spread in spreads.items()) * pooled[baseline]
    return max(*spreads.values(), control)


def _inside_the_noise(comparison: Path, entry: dict, baseline: str) -> bool:
    """Whether the machine's own variation between processes hides this gap (the spreads measured here from the run
    records, or the smallest gap the product says this pair resolves, or its process-level test): then the product
    must say "no significant difference" and name no cause, whatever the load on the machine."""
    resolvable = max(_process_noise_s(comparison, baseline), entry["resolvable_gap_s"] or 0.0)
    inside = abs(entry["gap_s"]) <= resolvable or entry["tests"]["processes_differ"] is False
    if inside:
        assert entry["verdict"] == "no significant difference" and entry["contributors"] == [], entry["tests"]
        assert not all(entry["tests"].values())
    return inside


def test_processes_of_a_mode_are_one_configuration(comparison, report):
    """compare --repeats 2: two fresh processes per mode, pooled by explain, their spread measured."""
    recorded = json.loads((comparison / "comparison.json").read_text())
    assert [(e["dir"], e["replicate"]) for e in recorded["modes"]] == [
        ("jax", 1), ("torch_xla", 1), ("torch_xla-r2", 2), ("jax-r2", 2)]  # the second round in rotated order
    for row in recorded["configurations"]:
        assert row["processes"] == row["timed_processes"] == 2 and len(row["process_medians_s"]) == 2
    assert recorded["between_process_spread"]["relative"] > 0
    for entry in report["modes"]:
        assert entry["replicates"] == 2 and entry["provisional"] is False
        assert entry["between_process_spread_s"] == pytest.approx(max(entry["process_medians_s"]) -
                                                                  min(entry["process_medians_s"]))
    assert report["between_process_spread"]["processes"] == 2


def test_gaps_are_the_run_medians(comparison, report):
    """Each gap is the difference of the two runs' medians of their timed steps (run.json), inside its interval;
    when it is significant, the contributors plus the residual add up to it."""
    times = _step_times(comparison)
    medians = {mode: median(t) for mode, t in times.items()}
    assert medians == pytest.approx(_medians(comparison))
    fastest = min(medians, key=medians.get)
    assert report["fastest"] == report["baseline"] == fastest
    by_mode = {m["mode"]: m for m in report["modes"]}
    assert by_mode[fastest]["verdict"] == "baseline" and by_mode[fastest]["gap_s"] == 0.0
    for mode, value in medians.items():
        assert by_mode[mode]["step_time_s"] == pytest.approx(value)
        assert by_mode[mode]["gap_s"] == pytest.approx(value - medians[fastest])
        low, high = by_mode[mode]["gap_ci_s"]
        assert low <= by_mode[mode]["gap_s"] <= high
    slow = by_mode["torch_xla" if fastest == "jax" else "jax"]
    assert slow["ratio"] == pytest.approx(medians[slow["mode"]] / medians[fastest])
    assert sum(c["seconds"] for c in slow["contributors"]) + slow["residual_s"] == pytest.approx(slow["gap_s"], abs=1e-12)
    if _inside_the_noise(comparison, slow, fastest):
        return
    assert slow["significant"] is True and slow["verdict"] == "slower", slow["tests"]
    assert slow["contributors"], "the slower mode's gap has no contributor"
    for c in slow["contributors"]:
        assert c["claim"] and c["evidence"] and c["kind"] == "measured"
    ledgers = {mode: report["summaries"][mode]["ledger"] for mode in medians}
    assert slow["profiled_gap_s"] == pytest.approx(ledgers[slow["mode"]]["total_s"] - ledgers[fastest]["total_s"])


def test_summaries_agree_with_hlo_and_trace_stats(comparison, report, cli_run):
    """Where the definitions agree (the first process's trace against its part of the pooled ledger): step boundaries (a step is the period from its marker's start to the next
    one's), executions and kernels per step (each in the step it started in), the timeline's step; busy time is
    per loop period in the ledger (clipped to it), so it is checked against the period, not trace stats' figure."""
    for mode in ("jax", "torch_xla"):
        summary = report["summaries"][mode]
        ledger = summary["ledger"]
        trace = _read(cli_run, "trace", "stats", str(comparison / mode))["traces"]
        (per_step,) = [t["per_step"] for t in trace if t.get("per_step")][:1]
        # the ledger pools both processes, the first one's steps first; trace stats reads the first process's trace
        assert ledger["profiled_steps"] == 2 * len(per_step) == 20
        first = f"process 1 step {per_step[0]['step']}"
        assert first in ledger["dropped"] and "warm-up" in ledger["dropped"][first]
        kept = [s for s in per_step if f"process 1 step {s['step']}" not in ledger["dropped"]]
        assert len(kept) >= 4 and ledger["kept_steps"] == len(ledger["step_s"]) >= len(kept) + 4
        following = {s["step"]: n["start_us"] for s, n in itertools.pairwise(per_step)}
        bounded = [(step, length) for step, length in zip(kept, ledger["step_s"]) if step["step"] in following]
        assert len(bounded) >= len(kept) - 1  # only the trace's last step has no next marker to end it
        for step, length in bounded:
            assert length == pytest.approx((following[step["step"]] - step["start_us"]) / 1e6, abs=1e-9)
        for i, length in enumerate(ledger["step_s"]):
            nodes = sum(values[i] for values in ledger["nodes"].values())
            assert nodes == pytest.approx(length, abs=1e-9) and 0 < ledger["busy_s"][i] <= length + 1e-12
        assert summary["device_busy_s"] == pytest.approx(median(ledger["busy_s"]))
        assert summary["profiled_step_s"] == pytest.approx(median(ledger["step_s"]))
        executions = [sum(s["executions_by_category"].values()) for s in kept]
        assert summary["executed_per_step"] == pytest.approx(median(executions))
        assert summary["trace_kernels"] == pytest.approx(median(s["kernels"] for s in kept))
        # the middle kept step's device work, run after its marker under both frameworks, is the timeline strip
        assert len(summary["timeline"]) == executions[len(kept) // 2]
        # both modes ran with --dump-hlo: their HLO is read, and explain counts the kernels hlo stats counts
        modules = [m for m in _read(cli_run, "hlo", "stats", str(comparison / mode))["modules"]
                   if m["stage"] == "after_optimizations"]
        assert modules and summary["kernels"] == sum(m["kernels"] for m in modules)
        assert not any("HLO not read" in n for n in summary["notes"]), summary["notes"]


def test_torch_xla_lazy_mode_is_host_bound_on_the_cpu(comparison, report):
    """FACTS.md: torch_xla's lazy step on the CPU is mostly Python tracing; the device waits for the host. With 5 kept
    profiled steps a side, the largest significant contributor is device idle time while the host traces and syncs
    (unless the machine's variation between processes hides the gap: then no cause is offered)."""
    by_mode = {m["mode"]: m for m in report["modes"]}
    assert report["fastest"] == "jax"
    entry = by_mode["torch_xla"]
    if _inside_the_noise(comparison, entry, "jax"):
        return
    assert entry["significant"] is True
    assert not any("too few" in note for note in entry["notes"]), entry["notes"]
    significant = [c for c in entry["contributors"] if c["significant"]]
    assert significant, entry["contributors"]
    largest = max(significant, key=lambda c: c["seconds"])
    assert largest is significant[0]
    assert largest["node"] in {"idle:Python before the graph sync (lazy tracing, dynamo)", "idle:graph tracing and sync"}
    assert largest["seconds"] > 0 and largest["p_value"] < 0.05
    idle = report["summaries"]["torch_xla"]["device_idle_s"]
    assert idle > report["summaries"]["jax"]["device_idle_s"]


def test_explain_html_in_headless_chromium(comparison, report, tmp_path):
    page = tmp_path / "explain.html"
    _explain(str(comparison), "--format", "html", "-o", str(page))
    html = page.read_text()
    medians = _medians(comparison)
    for value in medians.values():
        assert f"{value * 1e3:.3f} ms" in html.replace("&nbsp;", " ")
    assert html.count("<svg") >= 3
    browser = chromium()
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = command(browser, *flags, "--dump-dom", page.as_uri(), timeout=120)
    assert dom.code == 0, dom.stderr[-2000:]
    text = dom.stdout.replace("&nbsp;", " ").replace("\xa0", " ")  # figures and units never break across lines
    for mode, value in medians.items():
        assert f"{value * 1e3:.3f} ms" in text and mode in text
    gap = {m["mode"]: m for m in report["modes"]}["torch_xla"]
    low, high = gap["gap_ci_s"]
    figures = f"{signed_ms(gap['gap_s'])} ({ms_interval([low, high])})"
    # the verdict as the report gives it: slower, or inside the machine's variation between processes
    expected = f"{figures}: slower" if gap["verdict"] == "slower" else f"no significant difference: {figures}"
    assert expected in text
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "explain_report.png"
    shot.unlink(missing_ok=True)
    run = command(browser, *flags, "--hide-scrollbars", "--window-size=1100,2000", f"--screenshot={shot}", page.as_uri(),
                  timeout=120)
    assert run.code == 0 and shot.stat().st_size > 20_000, run.stderr[-2000:]


def test_diff_of_the_two_runs(comparison, cli_run):
    report = _read(cli_run, "diff", str(comparison / "jax"), str(comparison / "torch_xla"))
    medians = {m: median(json.loads((comparison / m / "run.json").read_text())["timing"]["step_times_s"])
               for m in ("jax", "torch_xla")}  # diff compares two run directories: the first process of each
    assert report["runs"]["a"]["median_s"] == pytest.approx(medians["jax"])
    assert report["runs"]["b"]["median_s"] == pytest.approx(medians["torch_xla"])
    assert report["a"]["stage"] == report["b"]["stage"] == "after_optimizations"
    assert report["delta"]["kernels"] == report["b"]["kernels"] - report["a"]["kernels"]
    assert report["traces"]["a"]["per_step"]["kernels"] > 0


def test_cross_framework_diff_before_optimizations_pairs_the_matmuls(comparison, cli_run):
    """JAX keeps batch dimensions in its dots (f32[8,17,64]) where torch_xla flattens them (f32[136,64]): the loose
    stage pairs the same matmuls, so no dot is reported on one side only when both have as many."""
    report = _read(cli_run, "diff", str(comparison / "jax"), str(comparison / "torch_xla"), "--stage", "before")
    assert report["a"]["stage"] == report["b"]["stage"] == "before_optimizations"
    dots_a, dots_b = report["a"]["opcodes"].get("dot", 0), report["b"]["opcodes"].get("dot", 0)
    assert dots_a > 0 and dots_a == dots_b
    for side in ("only_in_a", "only_in_b"):
        assert all("dot" not in group["opcodes"] for group in report[side])
    assert report["matching"]["by_stage"].get("loose", 0) > 0
