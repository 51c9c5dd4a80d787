"""`hloscope diff` of whole train steps on a real comparison: JAX's one-module step against torch_xla+compile's
several graphs, time-weighted by the profiles.

Checked against independent readers: XLA's own parser (jaxlib._hlo) for the graph instruction counts, XLA's cost
analysis (jaxlib._jax.hlo_module_cost_analysis) for the FLOPs of every graph, and the trace's raw events (jaxlib's
ProfileData over the xplane.pb: each XLA CPU op event with its hlo_op and hlo_module stats) for the measured times.

The comparison is conftest's, recorded once per session and shared (`hloscope compare --dump-hlo --profile` of every
mode, jax and torch_xla+compile among them) unless HLOSCOPE_TEST_COMPARISON names one recorded with those options (e.g. the one of `--modes
jax,torch_xla,torch_xla+compile --model vit-tiny --batch-size 8 --steps 10 --warmup 3 --dump-hlo --profile`).
"""

from __future__ import annotations

import bisect
import io
import json
from pathlib import Path
from statistics import median

import pytest
from helpers import hloscope

from hloscope import api
from hloscope.diff.report import DiffReport
from hloscope.render import diff_html, diff_md, diff_term

pytestmark = pytest.mark.slow

CONTROL_FLOW = {"kWhile", "kConditional", "kCall"}


@pytest.fixture(scope="module")
def report(comparison) -> DiffReport:
    return api.diff(comparison / "jax", comparison / "torch_xla_compile")


def test_the_command_prints_the_report(comparison, report):
    result = hloscope("diff", comparison / "jax", comparison / "torch_xla_compile", "--json")
    assert result.code == 0, result.stderr
    printed, document = json.loads(result.stdout), report.to_dict()
    assert list(printed) == list(document) and printed["graphs"]["b"][-1].keys() == document["graphs"]["b"][-1].keys()
    assert (printed["matched"], printed["matching"], printed["compared"]) == (
        report.matched, report.matching.to_dict(), report.compared)


def _train_step_files(run_dir: Path, stage: str = "after_optimizations") -> list[Path]:
    record = json.loads((run_dir / "run.json").read_text())
    return [run_dir / a["path"] for a in record["artifacts"]
            if a.get("kind") == "hlo" and a.get("train_step") and a.get("stage") == stage]


def _xla_view(path: Path) -> tuple[str, int, float]:
    """(module name, graph instructions, FLOPs) by XLA itself: the entry computation plus the control-flow bodies it
    reaches, and HloCostAnalysis on the CPU client."""
    from jaxlib import _hlo, _jax

    module = _hlo.hlo_module_from_text(path.read_text())
    by_name = {c.name: c for c in module.computations()}
    entry = module.computations()[-1]  # XLA prints the entry computation last
    count, pending, seen = 0, [entry], {entry.name}
    while pending:
        computation = pending.pop()
        for instruction in computation.instructions():
            count += 1
            if instruction.opcode.name in CONTROL_FLOW:
                for called in instruction.called_computations():
                    if called.name not in seen:
                        seen.add(called.name)
                        pending.append(by_name[called.name])
    flops = float(_jax.hlo_module_cost_analysis(_jax.get_tfrt_cpu_client(), module).get("flops", 0.0))
    return module.name, count, flops


def test_the_whole_torch_xla_compile_step_is_compared_graph_by_graph(comparison, report):
    files = _train_step_files(comparison / "torch_xla_compile")
    assert len(files) >= 3  # forward, backward, optimizer (and dynamo's small helper graphs)
    rows = {r.graph: r for r in report.graphs.b}
    total = rows.pop("total")
    assert len(rows) == len(files)
    flops = 0.0
    for path in files:
        name, instructions, xla_flops = _xla_view(path)
        assert rows[name].graph_instructions == instructions
        assert rows[name].xla_flops == pytest.approx(xla_flops, rel=1e-6)
        assert rows[name].flops == pytest.approx(xla_flops, rel=1e-3)  # hloscope's own count, XLA's conventions
        flops += xla_flops
    # The total row and the side-by-side figures are the sums over every graph: the whole step, not the backward one.
    assert total.xla_flops == pytest.approx(flops, rel=1e-6)
    assert report.record("b")["xla_cost"]["flops"] == pytest.approx(flops, rel=1e-6)
    assert report.matching.b_instructions == sum(r.graph_instructions for r in rows.values())
    assert total.matched == report.matched == sum(r.matched for r in rows.values())
    (a_file,) = _train_step_files(comparison / "jax")
    _, a_instructions, a_flops = _xla_view(a_file)
    assert report.matching.a_instructions == a_instructions
    assert report.record("a")["xla_cost"]["flops"] == pytest.approx(a_flops, rel=1e-6)
    # the same work: JAX's step and torch_xla+compile's graphs together within 5% of each other's FLOPs
    assert flops == pytest.approx(a_flops, rel=0.05)
    # matches land in every large graph of B: JAX's one module holds forward, backward and optimizer
    large = [row for row in rows.values() if row.graph_instructions > 50]
    assert large, rows
    for row in large:
        assert row.matched > 0 and set(row.matched_to) == {"jit_train_step"}


def test_every_output_says_what_was_compared(comparison, report):
    names = [r.graph for r in report.graphs.b if r.graph != "total"]
    assert f"the whole train step, {len(names)} graphs" in report.compared
    assert all(name in report.compared for name in names)
    from rich.console import Console

    buffer = io.StringIO()
    diff_term.render(report, Console(file=buffer, width=400, color_system=None))
    for text in (buffer.getvalue(), diff_md.render(report), diff_html.render(report)):
        assert f"the whole train step, {len(names)} graphs" in text
        assert all(name in text for name in names)
        assert "Graphs of B" in text and "total" in text


def _raw_step_times(run_dir: Path) -> dict[int, dict[tuple[str, str], float]]:
    """Step number -> {(module, instruction): seconds} from the xplane's raw events: a step lasts from its
    `train_step` marker's start to the next one's; an XLA op event (named after its hlo_op stat) counts in the step it
    started in."""
    from jaxlib._profile_data import ProfileData

    (xplane,) = (run_dir / "plugins" / "profile").glob("*/*.xplane.pb")
    data = ProfileData.from_file(str(xplane))
    markers, ops = [], []
    for plane in data.planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if event.name == "train_step" and "step_num" in stats:
                    markers.append((event.start_ns, int(stats["step_num"])))
                elif stats.get("hlo_op") == event.name and stats.get("hlo_module"):
                    ops.append((event.start_ns, event.duration_ns, stats["hlo_module"], event.name))
    markers.sort()
    starts = [s for s, _ in markers]
    steps: dict[int, dict[tuple[str, str], float]] = {n: {} for _, n in markers}
    for start, duration, module, name in ops:
        index = bisect.bisect_right(starts, start) - 1
        if index >= 0:
            table = steps[markers[index][1]]
            table[(module, name)] = table.get((module, name), 0.0) + duration / 1e9
    return steps


def test_time_weighted_pairs_and_groups_match_the_raw_events(comparison, report):
    tw = report.time_weighted
    for side, mode in (("a", "jax"), ("b", "torch_xla_compile")):
        raw = _raw_step_times(comparison / mode)
        kept = tw.kept_steps.a if side == "a" else tw.kept_steps.b
        assert len(kept) >= 3 and min(raw) not in kept  # the profiler's warm-up step is left out
        graph_rows = [r for r in report.graphs.side(side) if r.graph != "total"]
        for row in graph_rows:  # a graph's time: the sum of its instructions' medians over the kept steps
            keys = {k for n in kept for k in raw[n] if k[0] == row.graph}
            expected = sum(median(raw[n].get(k, 0.0) for n in kept) for k in keys)
            assert row.time_s == pytest.approx(expected, rel=1e-6, abs=1e-9)
        for pair in tw.pairs[:20]:
            name, graph, seconds = (pair.a, pair.graph_a, pair.a_s) if side == "a" else (pair.b, pair.graph_b, pair.b_s)
            expected = median(raw[n].get((graph, name), 0.0) for n in kept)
            assert seconds == pytest.approx(expected, rel=1e-6, abs=1e-9)
    deltas = [abs(p.delta_s) for p in tw.pairs]
    assert deltas == sorted(deltas, reverse=True) and deltas[0] > 0  # ranked by time difference, not by count
    for side in ("a", "b"):
        times = [g.time_s for g in report.groups(side)]
        assert times == sorted(times, reverse=True)
    # what the groups and pairs carry adds up to the side's totals
    totals = tw.totals.b
    graph_time = sum(r.time_s for r in report.graphs.b if r.graph != "total")
    assert totals.matched_s + totals.only_s == pytest.approx(graph_time, rel=1e-6)


def test_html_has_the_plots(report):
    html = diff_html.render(report)
    for title in ("FLOPs by graph", "Measured device time per step by graph",
                  "Matched instructions whose time per step changed most", "Only in B: device time per step"):
        assert f'aria-label="{title}' in html, title
    assert "<script" not in html and "http" not in html.split("<body", 1)[-1].replace("http-equiv", "")


def test_table_holds_every_pair_and_the_reports_timed_ones(comparison, report):
    table = api.diff_table(comparison / "jax", comparison / "torch_xla_compile")
    rows = table.to_pylist()
    pairs = [r for r in rows if r["kind"] == "matched"]
    assert len(pairs) == report.matched
    tw = report.time_weighted
    timed = [r for r in pairs if r["time_a_s"] or r["time_b_s"]]
    assert len(timed) == tw.pairs_total
    assert [(r["name_a"], r["graph_b"], r["time_a_s"], r["time_b_s"], r["delta_s"]) for r in timed[:len(tw.pairs)]] == [
        (p.a, p.graph_b, p.a_s, p.b_s, p.delta_s) for p in tw.pairs]
    assert sum(r["time_a_s"] for r in pairs) == pytest.approx(tw.totals.a.matched_s, rel=1e-9)
    assert sum(r["time_b_s"] for r in pairs) == pytest.approx(tw.totals.b.matched_s, rel=1e-9)
    groups_b = [r for r in rows if r["kind"] == "only_in_b"]
    assert [(r["source_b"], r["count_b"], r["time_b_s"]) for r in groups_b[:len(report.only_in_b)]] == [
        (g.op_name, g.count, g.time_s) for g in report.only_in_b]
    names = {r.graph for r in report.graphs.b if r.graph != "total"}
    assert {r["graph_b"] for r in pairs} <= names and len({r["graph_b"] for r in pairs}) > 1
