"""The diff report as one self-contained HTML file, with inline SVG plots (hloscope.render.svg, as explain's)."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from hloscope.render import svg
from hloscope.render.diff_views import (
    GRAPH_HEADERS,
    PAIR_HEADERS,
    graph_rows_of,
    group_headers,
    group_rows_of,
    kernel_changes,
    match_rate_line,
    matching_line,
    opcode_changes,
    side_by_side,
    time_pair_rows,
    time_totals_line,
)
from hloscope.render.html_page import page, table

if TYPE_CHECKING:
    from hloscope.diff.report import DiffReport


def _by_graph(report: DiffReport, key: str, scale: float = 1.0) -> list[tuple[str, dict[str, float]]]:
    rows = []
    for side in ("a", "b"):
        graphs = [r for r in report.graphs.side(side) if r.graph != "total"]
        rows.append((side.upper(), {f"{side.upper()} {r.graph}": (r.figure(key) or 0) * scale for r in graphs}))
    return rows


def plots(report: DiffReport) -> list[str]:
    """Per-graph FLOPs and measured time, where the measured time goes (matched, one side only), the matched pairs
    whose time changed most, the one-sided groups and the fusions by kind."""
    out = [svg.stacked_chart("FLOPs by graph (XLA's cost-analysis conventions)", _by_graph(report, "flops"), "FLOPs")]
    tw = report.time_weighted
    if tw:
        out.append(svg.stacked_chart("Measured device time per step by graph", _by_graph(report, "time_s", 1e6), "µs"))
        ta, tb = tw.totals.a, tw.totals.b
        out.append(svg.stacked_chart("Measured device time per step: matched and one-sided instructions", [
            ("A", {"matched": ta.matched_s * 1e6, "only in A": ta.only_s * 1e6,
                   "in no compared instruction": ta.unplaced_s * 1e6}),
            ("B", {"matched": tb.matched_s * 1e6, "only in B": tb.only_s * 1e6,
                   "in no compared instruction": tb.unplaced_s * 1e6})], "µs"))
        out.append(svg.paired_bars("Matched instructions whose time per step changed most",
                                   [(f"{p.a} | {p.b}", p.a_s * 1e6, p.b_s * 1e6) for p in tw.pairs[:12]], "µs"))
        for side, title in (("a", "Only in A: device time per step by source op"),
                            ("b", "Only in B: device time per step by source op")):
            out.append(svg.bar_chart(title, [(svg._short(g.op_name, 24), (g.time_s or 0.0) * 1e6)
                                             for g in report.groups(side)[:10]], "µs"))
    else:
        for side, title in (("a", "Only in A: instructions by source op"),
                            ("b", "Only in B: instructions by source op")):
            out.append(svg.bar_chart(title, [(svg._short(g.op_name, 24), g.count) for g in report.groups(side)[:10]],
                                     "instructions"))
    a, b = report.record("a"), report.record("b")
    kinds = [("A", {f"fusion {k}": v for k, v in (a.get("fusions") or {}).items()}),
             ("B", {f"fusion {k}": v for k, v in (b.get("fusions") or {}).items()})]
    out.append(svg.stacked_chart("Fusions by kind", kinds, "fusions"))
    return [p for p in out if p]


def render(report: DiffReport) -> str:
    a, b = report.record("a"), report.record("b")
    body = ["<h1>hloscope diff</h1>", f"<p>A: <code>{escape(str(a.get('file', '-')))}</code><br>"
            f"B: <code>{escape(str(b.get('file', '-')))}</code></p>",
            f"<p><b>Compared:</b> {escape(report.compared)}</p>", "<h2>Side by side</h2>",
            table(["", "A", "B", "B - A"], [r for r in side_by_side(report) if r[0] != "file"])]  # files: above
    for side, title in (("a", "Graphs of A"), ("b", "Graphs of B")):
        body += [f"<h2>{title}</h2>", table(GRAPH_HEADERS, graph_rows_of(report, side))]
    body += ["<h2>Plots</h2>", *plots(report)]
    body += ["<h2>Largest opcode changes</h2>",
             table(["opcode", "A", "B", "B - A"], opcode_changes(report)),
             "<h2>Structural matching</h2>", f"<p>{escape(report.compared)}</p>",
             f"<p>{escape(match_rate_line(report.match_rate))}</p>", f"<p>{escape(matching_line(report))}</p>"]
    if report.time_weighted:
        body += ["<h3>Matched instructions whose measured time per step changed most</h3>",
                 f"<p>{escape(time_totals_line(report))}</p>",
                 table(PAIR_HEADERS, time_pair_rows(report, 30, graphs=True))]
    ranked = "by measured time per step" if report.time_weighted else "by count"
    for side, title in (("a", "Only in A, by source op"), ("b", "Only in B, by source op")):
        body += [f"<h3>{title}, {ranked}</h3>", table(group_headers(report), group_rows_of(report, side, 30))]
    if report.traces:
        body += ["<h2>Kernels whose time changed most</h2>",
                 table(["kernel", "A us", "B us", "B - A us"], kernel_changes(report))]
    body += [f"<p class=\"note\">{escape(n)}</p>" for n in report.notes]
    return page("hloscope diff", body)
