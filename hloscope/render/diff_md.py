"""The diff report as Markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.render import markdown
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

if TYPE_CHECKING:
    from hloscope.diff.report import DiffReport

_text = markdown.text


def _row(cells) -> str:
    return markdown.row(_text(c) for c in cells)


def _table(headers: list[str], rows) -> list[str]:
    return [_row(headers), "|" + "---|" * len(headers), *(_row(r) for r in rows)]


def render(report: DiffReport) -> str:
    lines = ["# hloscope diff", "", f"A: {_text(report.record('a').get('file', '-'))}  ",
             f"B: {_text(report.record('b').get('file', '-'))}", "", f"Compared: {_text(report.compared)}", "",
             "## Side by side", ""]
    lines += _table(["", "A", "B", "B - A"], side_by_side(report))
    for side, title in (("a", "Graphs of A"), ("b", "Graphs of B")):
        lines += ["", f"## {title}", "", *_table(GRAPH_HEADERS, graph_rows_of(report, side))]
    lines += ["", "## Largest opcode changes", "", *_table(["opcode", "A", "B", "B - A"], opcode_changes(report))]
    lines += ["", "## Structural matching", "", _text(report.compared), "", _text(match_rate_line(report.match_rate)),
              "", _text(matching_line(report))]
    if report.time_weighted:
        lines += ["", "### Matched instructions whose measured time per step changed most", "",
                  _text(time_totals_line(report)), "", *_table(PAIR_HEADERS, time_pair_rows(report, 30, graphs=True))]
    ranked = "by measured time per step" if report.time_weighted else "by count"
    for side, title in (("a", "Only in A"), ("b", "Only in B")):
        lines += ["", f"### {title}, by source op, {ranked}", ""]
        lines += _table(group_headers(report), group_rows_of(report, side))
    if report.traces:
        lines += ["", "## Traces: kernels whose time changed most", ""]
        lines += _table(["kernel", "A us", "B us", "B - A us"], kernel_changes(report))
    for note in report.notes:
        lines.append(f"\nNote: {_text(note)}")
    return "\n".join(lines) + "\n"
