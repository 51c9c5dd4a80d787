"""The diff report as one self-contained HTML file."""

from __future__ import annotations

from html import escape

from hloscope.render import svg
from hloscope.render.diff_views import (
    group_rows,
    kernel_changes,
    match_rate_line,
    matching_line,
    opcode_changes,
    side_by_side,
)
from hloscope.render.html_page import page, table


def render(report: dict) -> str:
    a, b = report["a"], report["b"]
    body = ["<h1>hloscope diff</h1>", f"<p>A: <code>{escape(str(a.get('file', '-')))}</code><br>"
            f"B: <code>{escape(str(b.get('file', '-')))}</code></p>", "<h2>Side by side</h2>",
            table(["", "A", "B", "B - A"], [r for r in side_by_side(report) if r[0] != "file"])]  # files: above
    kinds = [("A", {f"fusion {k}": v for k, v in (a.get("fusions") or {}).items()}),
             ("B", {f"fusion {k}": v for k, v in (b.get("fusions") or {}).items()})]
    body.append(svg.stacked_chart("Fusions by kind", kinds, "fusions"))
    body += ["<h2>Largest opcode changes</h2>",
             table(["opcode", "A", "B", "B - A"], opcode_changes(report)),
             "<h2>Structural matching</h2>", f"<p>{escape(report.get('compared', ''))}</p>", f"<p>{escape(match_rate_line(report))}</p>", f"<p>{escape(matching_line(report))}</p>"]
    for side, title in (("only_in_a", "Only in A, by source op"), ("only_in_b", "Only in B, by source op")):
        body += [f"<h3>{title}</h3>", table(["source op", "count", "opcodes", "examples"], group_rows(report[side], 30))]
    if report.get("traces"):
        body += ["<h2>Kernels whose time changed most</h2>",
                 table(["kernel", "A us", "B us", "B - A us"], kernel_changes(report))]
    body += [f"<p class=\"note\">{escape(n)}</p>" for n in report.get("notes", [])]
    return page("hloscope diff", body)
