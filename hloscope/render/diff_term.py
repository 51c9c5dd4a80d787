"""The diff report on the terminal, with rich."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

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


def _table(title: str, headers: list[str], rows) -> Table:
    table = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold", ratio=3 if i == 0 else 2)
    for row in rows:
        table.add_row(*[escape(str(c)) for c in row])
    return table


def render(report: DiffReport, console: Console) -> None:
    console.print(escape(report.compared), highlight=False)
    console.print(_table("Side by side", ["", "A", "B", "B - A"], side_by_side(report, full_paths=False)))
    for side, title in (("a", "Graphs of A"), ("b", "Graphs of B")):
        console.print(_table(title, GRAPH_HEADERS, graph_rows_of(report, side)))
    console.print(_table("Largest opcode changes", ["opcode", "A", "B", "B - A"], opcode_changes(report)))
    console.print(escape(match_rate_line(report.match_rate)), highlight=False)
    console.print(escape(matching_line(report)), highlight=False)
    if report.time_weighted:
        console.print(escape(time_totals_line(report)), highlight=False)
        console.print(_table("Matched instructions whose measured time per step changed most", PAIR_HEADERS,
                             time_pair_rows(report, 10)))
    ranked = "by measured time per step" if report.time_weighted else "by count"
    for side, title in (("a", "Only in A, by source op"), ("b", "Only in B, by source op")):
        if report.groups(side):
            console.print(_table(f"{title}, {ranked}", group_headers(report, examples=False),
                                 group_rows_of(report, side, 10, examples=False)))
    if report.traces:
        console.print(_table("Kernels whose time changed most (us)", ["kernel", "A", "B", "B - A"],
                             kernel_changes(report, 10)))
    for note in report.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)
