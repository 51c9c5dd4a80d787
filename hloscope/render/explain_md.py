"""The explain report as Markdown.

Every string that comes from the runs (mode names, op groups, settings, claims, paths) goes through `text()`: HTML
is written as entities (no raw `<script>` reaches a Markdown viewer), Markdown punctuation that could start a link,
emphasis, code or a table cell is backslash-escaped, and line breaks become spaces, so a string never starts a block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.render import explain_startup, fmt, markdown
from hloscope.render.explain_memory_views import MEMORY_HEADERS, MEMORY_HEADING, MemoryView, memory_views
from hloscope.render.explain_views import (
    AUDIT_HEADING,
    MODE_ANNOTATIONS_LABEL,
    OP_HEADERS,
    RESIDUAL_LABEL,
    SCALING_HEADERS,
    SCALING_HEADING,
    ModeView,
    ScalingView,
    audit_mismatches,
    baseline_line,
    compiled_table,
    config_text,
    is_compiled,
    method_lines,
    mode_views,
    notes,
    scaling_views,
    step_rows,
)
from hloscope.render.tested_views import TEST_COLUMNS, TESTED_HEADING, lead_lines, pair_views

if TYPE_CHECKING:
    from hloscope.explain.experiments import TestedBlock
    from hloscope.explain.report import ExplainReport

text = markdown.text
_cell = text
_start = markdown.line_start
_row = markdown.row


def render(report: ExplainReport) -> str:
    report = fmt.printable(report)  # what the files wrote is shown escaped
    meta = report.comparison
    lines = ["# Why the runs differ", ""]
    if audit_mismatches(report):  # first: the modes did not run the same settings
        lines += [f"**{text(AUDIT_HEADING)}**", ""] + [f"- {text(line)}" for line in audit_mismatches(report)] + [""]
    if report.tested is not None:  # the controlled re-runs lead: they are tested, the rest is correlation
        lines += tested_lines(report.tested)
    if meta.get("path"):
        lines += [f"Comparison: {text(meta['path'])}", ""]
    if config_text(meta):
        lines += ["Configuration: " + text(config_text(meta)), ""]
    if is_compiled(report):
        lines += _compiled(report)
    else:
        lines += _timed(report)
    if notes(report):
        lines += ["", "## Notes", ""] + [f"- {text(mode)}: {text(note)}" for mode, note in notes(report)]
    return "\n".join(lines) + "\n"


def _compiled(report: ExplainReport) -> list[str]:
    """Modes compiled for a target GPU, not timed: their figures side by side, ranked on the roofline lower bound."""
    modes, rows = compiled_table(report)
    fastest = report.baseline
    lines = ["Compiled for a target GPU, not timed: the modes are ranked on their roofline lower bound per step "
             "(a lower bound, not a prediction: per launch max(FLOPs / peak FLOP/s, bytes / memory bandwidth)).", ""]
    if fastest:
        lines += [f"Lowest roofline lower bound: **{text(fastest)}**", ""]
    lines += ["| | " + " | ".join(_cell(m) for m in modes) + " |", "|---" + "|---" * len(modes) + "|"]
    lines += [f"| {_cell(label)} | " + " | ".join(_cell(v) for v in values) + " |" for label, values in rows]
    return lines


def _timed(report: ExplainReport) -> list[str]:
    lines = [_start(text(baseline_line(report))), ""]
    lines += [_row(["mode", "status", "step (median)", "p10-p90", "vs baseline (95% interval)",
                    "gap per step (95% interval)", "verdict", "kernels/step", "device idle/step",
                    "compiles in window"]), "|---|---|---|---|---|---|---|---|---|---|"]
    for r in step_rows(report):
        status = text(r["status"]) + (" **noisy**" if r["noisy"] else "")
        lines.append(_row([text(r["mode"]), status, r["step"], r["spread"], f"{r['ratio']} {r['ratio_ci']}".strip(),
                           f"{r['gap']} {r['gap_ci']}".strip(), text(r["verdict"]), r["kernels"], r["idle"],
                           r["compiles"]]))
    method = method_lines(report)
    if method:
        lines += [""] + [f"- {text(line)}" for line in method]
    for view in mode_views(report):
        lines += _mode(view)
    memory = memory_views(report)
    if memory:
        lines += ["", f"## {text(MEMORY_HEADING)}"]
    for memory_view in memory:
        lines += _memory(memory_view)
    scaling = scaling_views(report)
    if scaling:
        lines += ["", f"## {text(SCALING_HEADING)}"]
    for scaling_view in scaling:
        lines += _scaling(scaling_view)
    lines += explain_startup.render_md(report)
    return lines


def _mode(view: ModeView) -> list[str]:
    lines = ["", f"## {text(view.mode)} against {text(view.baseline)}", "", f"**{text(view.verdict)}**", ""]
    noisy = " — **noisy** (run.json flagged its timed window as noisy)" if view.noisy else ""
    lines += [f"Step: {text(view.step)}{noisy}; {text(view.baseline)}: {text(view.baseline_step)}", ""]
    if view.config_differences:  # first, before any cause: the runs did not do the same work
        lines += ["### Configuration differences", "", _row(["setting", text(view.mode), text(view.baseline)]),
                  "|---|---|---|"]
        lines += [_row([text(setting), text(run), text(base)]) for setting, run, base in view.config_differences]
        lines.append("")
    if view.per_sample:
        lines += [f"Per sample: {text(view.per_sample)}", ""]
    if view.replay:
        lines += [text(view.replay), ""]
    if view.contributors:
        lines += ["### Measured contributors, ranked", ""]
        for c in view.contributors:
            lines.append(f"{c.rank}. **{text(c.title)}**: {text(c.figures)}. {text(c.claim)}")
            lines += [f"    - *{text(a.label)}*: {text(a.claim)}" for a in c.annotations]
        lines.append("")
    if view.within_noise:
        lines += [_start(text(view.within_noise)), ""]
    if view.residual:
        lines += [f"{text(RESIDUAL_LABEL)}: {text(view.residual)}", ""]
    if view.annotations:
        lines += [f"{text(MODE_ANNOTATIONS_LABEL[0].upper() + MODE_ANNOTATIONS_LABEL[1:])}:", ""]
        lines += [f"- *{text(a.label)}*: {text(a.claim)}" for a in view.annotations]
        lines.append("")
    if view.ops:
        lines += [f"### Ops whose time changed most ({text(view.mode)} against {text(view.baseline)})", "",
                  _row([OP_HEADERS[0]]
                       + [f"{h} ({text(side)})" for h, side in zip(OP_HEADERS[1:7], [view.mode] * 3 + [view.baseline] * 3)]
                       + [OP_HEADERS[7]]),
                  "|---" + "|---:" * 7 + "|"]
        lines += [_row([text(r.group), r.run_calls, r.run_per_call, r.run_time, r.baseline_calls, r.baseline_per_call,
                        r.baseline_time, text(r.delta)]) for r in view.ops]
        lines += ["", "\\* significant across the profiled steps" + (f"; {text(view.ops_matching)}" if view.ops_matching else ""),
                  ""]
    lines += [f"Note: {text(note)}  " for note in view.notes]
    return lines


def _memory(view: MemoryView) -> list[str]:
    lines = ["", f"### {text(view.mode)} against {text(view.baseline)}", "", _start(text(view.headline)), "",
             _row([MEMORY_HEADERS[0], text(view.mode), text(view.baseline), *MEMORY_HEADERS[3:]]),
             "|---|---:|---:|---:|---|"]
    lines += [_row([f"**{text(r.title)}**" if r.differs else text(r.title), r.run, r.baseline, text(r.difference),
                    text(r.figure)]) for r in view.rows]
    lines += ["", "\\* differs from the baseline's", ""]
    for r in view.rows:
        lines += [f"- {text(r.title)}: *{text(a.label)}*: {text(a.claim)}" for a in r.annotations]
    if view.annotations:
        lines += ["", f"{text(MODE_ANNOTATIONS_LABEL[0].upper() + MODE_ANNOTATIONS_LABEL[1:])}:", ""]
        lines += [f"- *{text(a.label)}*: {text(a.claim)}" for a in view.annotations]
    lines += [""] + [f"Note: {text(note)}  " for note in view.notes]
    return lines


def _scaling(view: ScalingView) -> list[str]:
    lines = ["", f"### {text(view.mode)} against {text(view.reference)}", ""]
    if view.shared_cpu:
        lines += [f"**{text(view.shared_cpu)}**", ""]
    if view.rows:
        lines += [_row(list(SCALING_HEADERS)), "|---" + "|---:" * (len(SCALING_HEADERS) - 2) + "|---|"]
        lines += [_row([text(cell) for cell in row.cells()]) for row in view.rows]
        lines.append("")
    for row in view.rows:
        lines += [f"{text(row.label)}: {text(row.lost_line)}", ""]
        if row.causes:
            lines += [f"Causes of the lost efficiency at {text(row.label)} (each part against its ideal share, its "
                      "1-device time / N):", ""]
            lines += [f"- {text(c.kind)}: **{text(c.title)}**: {text(c.figures)}" for c in row.causes]
            lines.append("")
        if row.within_noise:
            lines += [_start(text(row.within_noise)), ""]
        if row.residual:
            lines += [f"{text(RESIDUAL_LABEL)}: {text(row.residual)}", ""]
        lines += [f"Note: {text(row.label)}: {text(note)}  " for note in row.notes]
    lines += [f"Note: {text(note)}  " for note in view.notes]
    return lines


def tested_lines(block: TestedBlock) -> list[str]:
    """explain --test-hypotheses in Markdown: the lead sentences, a table per gap, the interaction, what did not
    run."""
    lines = [f"## {TESTED_HEADING}", ""] + [f"- {text(line)}" for line in lead_lines(block)] + [""]
    for view in pair_views(block):
        lines += [f"### {text(view.heading)}", ""]
        if view.directory:
            lines += [f"Re-runs: {text(view.directory)}", ""]
        lines += [markdown.row(TEST_COLUMNS), markdown.row(["---"] * len(TEST_COLUMNS))]
        lines += [markdown.row([text(cell) for cell in row]) for row in view.rows]
        lines.append("")
        if view.interaction:
            lines += [text(view.interaction), ""]
        lines += [f"- not timed: {text(line)}" for line in view.not_run]
        if view.not_run:
            lines.append("")
    return lines
