"""The diff report as Markdown."""

from __future__ import annotations

from hloscope.render.diff_views import group_rows, kernel_changes, matching_line, opcode_changes, side_by_side


def _row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def render(report: dict) -> str:
    lines = ["# hloscope diff", "", f"A: `{report['a'].get('file', '-')}`  ", f"B: `{report['b'].get('file', '-')}`", "",
             "## Side by side", "", _row(["", "A", "B", "B - A"]), "|---|---|---|---|"]
    lines += [_row(r) for r in side_by_side(report)]
    lines += ["", "## Largest opcode changes", "", _row(["opcode", "A", "B", "B - A"]), "|---|---|---|---|"]
    lines += [_row(r) for r in opcode_changes(report)]
    lines += ["", "## Structural matching", "", matching_line(report)]
    for side, title in (("only_in_a", "Only in A"), ("only_in_b", "Only in B")):
        lines += ["", f"### {title}, by source op", "", _row(["source op", "count", "opcodes", "examples"]),
                  "|---|---|---|---|"]
        lines += [_row(r) for r in group_rows(report[side])]
    if report.get("traces"):
        lines += ["", "## Traces: kernels whose time changed most", "", _row(["kernel", "A us", "B us", "B - A us"]),
                  "|---|---|---|---|"]
        lines += [_row(r) for r in kernel_changes(report)]
    for note in report.get("notes", []):
        lines.append(f"\nNote: {note}")
    return "\n".join(lines) + "\n"
