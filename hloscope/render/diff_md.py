"""The diff report as Markdown."""

from __future__ import annotations

from hloscope.render import markdown
from hloscope.render.diff_views import (
    group_rows,
    kernel_changes,
    match_rate_line,
    matching_line,
    opcode_changes,
    side_by_side,
)

_text = markdown.text


def _row(cells) -> str:
    return markdown.row(_text(c) for c in cells)


def render(report: dict) -> str:
    lines = ["# hloscope diff", "", f"A: {_text(report['a'].get('file', '-'))}  ", f"B: {_text(report['b'].get('file', '-'))}", "",
             "## Side by side", "", _row(["", "A", "B", "B - A"]), "|---|---|---|---|"]
    lines += [_row(r) for r in side_by_side(report)]
    lines += ["", "## Largest opcode changes", "", _row(["opcode", "A", "B", "B - A"]), "|---|---|---|---|"]
    lines += [_row(r) for r in opcode_changes(report)]
    lines += ["", "## Structural matching", "", _text(report.get("compared", "")), "", _text(match_rate_line(report)), "", _text(matching_line(report))]
    for side, title in (("only_in_a", "Only in A"), ("only_in_b", "Only in B")):
        lines += ["", f"### {title}, by source op", "", _row(["source op", "count", "opcodes", "examples"]),
                  "|---|---|---|---|"]
        lines += [_row(r) for r in group_rows(report[side])]
    if report.get("traces"):
        lines += ["", "## Traces: kernels whose time changed most", "", _row(["kernel", "A us", "B us", "B - A us"]),
                  "|---|---|---|---|"]
        lines += [_row(r) for r in kernel_changes(report)]
    for note in report.get("notes", []):
        lines.append(f"\nNote: {_text(note)}")
    return "\n".join(lines) + "\n"
