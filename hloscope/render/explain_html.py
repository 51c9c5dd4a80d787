"""The explain report as one self-contained HTML file with inline SVG plots."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from hloscope.render import explain_startup, fmt, svg
from hloscope.render.explain_memory_views import MEMORY_HEADERS, MEMORY_HEADING, MemoryView, memory_views
from hloscope.render.explain_views import (
    AUDIT_HEADING,
    MODE_ANNOTATIONS_LABEL,
    OP_HEADERS,
    RESIDUAL_LABEL,
    SCALING_HEADERS,
    SCALING_HEADING,
    AnnotationView,
    ModeView,
    ScalingView,
    audit_mismatches,
    baseline_line,
    compiled_table,
    config_text,
    device_time_by_category,
    is_compiled,
    kernels_by_category,
    method_lines,
    mode_rows,
    mode_views,
    notes,
    scaling_views,
    step_rows,
)

if TYPE_CHECKING:
    from hloscope.explain.experiments import TestedBlock
    from hloscope.explain.report import ExplainReport
    from hloscope.explain.summary import ModeSummary
from hloscope.render.html_page import evidence, page, table
from hloscope.render.tested_views import TEST_COLUMNS, TESTED_HEADING, lead_lines, pair_views

# The report's own layout, on top of the shared page style: its tables fit an 800 px window (figures keep their unit
# on their line, intervals go under their figure, op groups wrap anywhere), and a table that still cannot fit scrolls
# inside its own box instead of widening the page.
CSS = """<style>
.scroll{overflow-x:auto;max-width:100%}
table.steps,table.ops,table.config,table.programs{font-size:14px}
table.programs td{white-space:nowrap;overflow-wrap:normal}table.programs td:first-child{white-space:normal}
table.steps td,table.ops td{white-space:nowrap;overflow-wrap:normal}
table.steps td:nth-child(1),table.steps td:nth-child(2),table.steps td:nth-child(5),
table.steps td:nth-child(6),table.steps td:nth-child(7){white-space:normal}
table.steps th,table.ops th{white-space:normal}
table.ops td.group,table.config td{white-space:normal;overflow-wrap:anywhere}table.config td,table.config th{text-align:left}
table.ops td.group{min-width:8em}table.ops th.side{text-align:center;overflow-wrap:anywhere}
.ci{display:block;color:#555;font-size:.88em}
.noisy{background:#fff3cd;color:#8a4b00;font-weight:bold;padding:0 .3em;border-radius:3px;white-space:nowrap}
.verdict{font-size:1.05em}
ol.contributors>li{margin-bottom:.7em}.figures-line{color:#333}
ul.annotations{margin:.2em 0;padding-left:1.2em}ul.annotations li{color:#333}
.kind{color:#555;font-style:italic}tr.significant td{font-weight:bold}
.audit{border:2px solid #b00020;background:#fdecea;color:#7a0014;padding:.4em .8em;margin:.6em 0}
</style>"""


def _unit(text: str) -> str:
    """Escaped text whose figures never break from their unit (`17.100&nbsp;ms`)."""
    return escape(text).replace(" ms", "&nbsp;ms").replace(" µs", "&nbsp;µs")


def _scroll(html: str) -> str:
    return f'<div class="scroll">{html}</div>'


def render(report: ExplainReport) -> str:
    report = fmt.printable(report)  # what the files wrote is shown escaped
    meta = report.comparison
    summaries = report.summaries
    rows = mode_rows(report)
    body = [CSS, "<h1>Why the runs differ</h1>"]
    if audit_mismatches(report):  # first: the modes did not run the same settings
        body.append(f'<div class="audit" id="audit"><p><b>{escape(AUDIT_HEADING)}</b></p><ul>'
                    + "".join(f"<li>{escape(line)}</li>" for line in audit_mismatches(report)) + "</ul></div>")
    if report.tested is not None:  # the controlled re-runs lead: they are tested, the rest is correlation
        body += tested_html(report.tested)
    if meta.get("path"):
        body.append(f"<p>Comparison: <code>{escape(str(meta['path']))}</code></p>")
    if config_text(meta):
        body.append(f"<p>Configuration: {escape(config_text(meta))}</p>")
    if is_compiled(report):
        body += _compiled(report)
        kernel_rows = [(r.mode, kernels_by_category(summaries.get(r.mode))) for r in rows]
        body.append(svg.stacked_chart("Kernels per step by category", kernel_rows, "kernels") or "")
        if notes(report):
            body.append(_notes(report))
        return page("hloscope explain" + (f": {meta['path']}" if meta.get("path") else ""), body)

    body.append(f"<p>{escape(baseline_line(report))}</p>")
    body.append("<h2>Step time</h2>")
    body.append(_scroll(_step_table(report)))
    body.append(_scroll(_program_table(report)))
    method = method_lines(report)
    if method:
        body.append('<ul class="method">' + "".join(f"<li>{escape(line)}</li>" for line in method) + "</ul>")
    body.append(svg.bar_chart("Step time per run (median)",
                              [(r.mode, r.step_time_s * 1e3) for r in rows if r.step_time_s], "ms"))

    body += _per_run_sections(report)
    body += _device_plots(rows, summaries)

    if notes(report):
        body.append(_notes(report))
    return page("hloscope explain" + (f": {meta['path']}" if meta.get("path") else ""), body)


def _per_run_sections(report: ExplainReport) -> list[str]:
    """Each run against the baseline: step time, memory, scaling and the time to the first step, each under its
    heading where any run has it."""
    body: list[str] = []
    views = mode_views(report)
    if views:
        body.append("<h2>Each run against the baseline</h2>")
    for view in views:
        body += _mode(view)
    memory = memory_views(report)
    if memory:
        body.append(f"<h2>{escape(MEMORY_HEADING)}</h2>")
    for memory_view in memory:
        body += _memory(memory_view)
    scaling = scaling_views(report)
    if scaling:
        body.append(f"<h2>{escape(SCALING_HEADING)}</h2>")
    for scaling_view in scaling:
        body += _scaling(scaling_view)
    return body + explain_startup.render_html(report)


def _device_plots(rows: list, summaries: dict[str, ModeSummary]) -> list[str]:
    """Kernels and device time per step by category, and one step on the device, per run; why a run has no strip."""
    kernel_rows = [(r.mode, kernels_by_category(summaries.get(r.mode))) for r in rows]
    time_rows = [(r.mode, device_time_by_category(summaries.get(r.mode))) for r in rows]
    timeline_rows = [(r.mode, _timeline(summaries.get(r.mode))) for r in rows]
    body = ["<h2>Kernels and device time</h2>"]
    plots = [svg.stacked_chart("Kernels per step by category", kernel_rows, "kernels"),
             svg.stacked_chart("Device time per step by category", time_rows, "ms"),
             svg.timeline_strips("One step on the device, per run", timeline_rows)]
    body.extend(p for p in plots if p)
    if not any(plots):
        body.append("<p>No HLO dumps or traces were recorded for these runs.</p>")
    elif plots[2]:
        body += [f'<p class="note">{escape(line)}</p>' for line in _not_plotted(rows, summaries)]
    return body


def _not_plotted(rows: list, summaries: dict[str, ModeSummary]) -> list[str]:
    """Why a run has no strip in the device plots: a failed run, a run without a profile, or a profile with no
    device executions (PyTorch on the CPU runs its ops on the host)."""
    lines = []
    for row in rows:
        summary = summaries.get(row.mode)
        if summary is not None and summary.timeline:
            continue
        if summary is None or summary.status != "ok":
            why = "the run did not finish, so nothing of it was profiled"
        elif summary.framework_ops:
            why = (f"its profile holds no device executions: its {summary.framework_ops:,.0f} framework ops per step "
                   f"ran on the host thread (platform {summary.platform or 'unknown'}), as its section above shows")
        elif summary.ledger is None:
            why = "no profile was recorded for it (run with --profile)"
        else:
            why = "its profiled step holds no device executions"
        lines.append(f"{row.mode} is not in the device plots: {why}.")
    return lines


def _timeline(summary: ModeSummary | None) -> list[tuple[float, float, str]]:
    """One profiled step's (start, duration, category) strips; JSON may have made each a list."""
    return [(start, duration, category) for start, duration, category in summary.timeline] if summary else []


def _step_table(report: ExplainReport) -> str:
    """Per run: step median and p10-p90, ratio and gap to the baseline each with its 95% interval beneath, and the
    verdict. Figures never break; an interval breaks only around its `to`, a mode name only at a space."""
    head = "".join(f"<th>{h}</th>" for h in ("mode", "status", "step (median)", "p10-p90", "vs baseline",
                                              "gap per step", "verdict"))
    rows = []
    for r in step_rows(report):
        status = escape(r["status"].removesuffix(", noisy"))
        if r["noisy"]:
            status += ' <span class="noisy">noisy</span>'
        ratio = _unit(r["ratio"]) + (f'<span class="ci">{_unit(r["ratio_ci"])}</span>' if r["ratio_ci"] else "")
        gap = _unit(r["gap"]) + (f'<span class="ci">{_unit(r["gap_ci"])}</span>' if r["gap_ci"] else "")
        cells = [f"<b>{escape(r['mode'])}</b>", status, _unit(r["step"]), _unit(r["spread"]), ratio, gap,
                 escape(r["verdict"])]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return f'<table class="steps"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _program_table(report: ExplainReport) -> str:
    """What the compiled program and the profile say per step, per run."""
    rows = [[r["mode"], r["kernels"], r["idle"], r["compiles"]] for r in step_rows(report)]
    return table(["mode", "kernels/step", "device idle/step", "compiles in window"], rows).replace(
        "<table>", '<table class="programs">', 1)


def _annotation_items(annotations: list[AnnotationView]) -> str:
    estimate = ' <span class="kind">(estimate)</span>'
    return "".join(f"<li><b>{escape(a.title)}</b>{estimate if a.estimate else ''}: {escape(a.claim)}</li>"
                   for a in annotations)


def _mode(view: ModeView) -> list[str]:
    noisy = (' <span class="noisy">noisy</span> (run.json flagged its timed window as noisy)' if view.noisy else "")
    body = [f"<h3>{escape(view.mode)} against {escape(view.baseline)}</h3>",
            f'<p class="verdict"><b>{_unit(view.verdict)}</b></p>',
            f"<p>Step: {_unit(view.step)}{noisy}; {escape(view.baseline)}: {_unit(view.baseline_step)}</p>"]
    if view.config_differences:  # first, before any cause: the runs did not do the same work
        body += ["<h4>Configuration differences</h4>",
                 _scroll(table(["setting", view.mode, view.baseline],
                               [list(d) for d in view.config_differences]).replace("<table>", '<table class="config">',
                                                                                      1))]
    if view.per_sample:
        body.append(f"<p>Per sample: {_unit(view.per_sample)}</p>")
    if view.replay:
        body.append(f"<p>{_unit(view.replay)}</p>")
    if view.contributors:
        items = []
        for c in view.contributors:
            annotations = (f'<ul class="annotations">{_annotation_items(c.annotations)}</ul>' if c.annotations else "")
            items.append(f'<li><b>{escape(c.title)}</b><br><span class="figures-line">{_unit(c.figures)}</span>'
                         f'<p class="claim">{escape(c.claim)}</p>{annotations}'
                         f'{evidence(c.evidence) if c.evidence else ""}</li>')
        body += ["<h4>Measured contributors, ranked</h4>", '<ol class="contributors">' + "".join(items) + "</ol>"]
    if view.within_noise:
        body.append(f"<p>{_unit(view.within_noise)}</p>")
    if view.residual:
        body.append(f"<p>{escape(RESIDUAL_LABEL)}: {_unit(view.residual)}</p>")
    if view.annotations:
        label = MODE_ANNOTATIONS_LABEL[0].upper() + MODE_ANNOTATIONS_LABEL[1:]
        body += [f"<h4>{escape(label)}</h4>", f'<ul class="annotations">{_annotation_items(view.annotations)}</ul>']
    if view.ops:
        body += ["<h4>Ops whose time changed most</h4>", _scroll(_op_table(view)),
                 '<p class="est">bold, *: significant across the profiled steps'
                 + (f"; {escape(view.ops_matching)}" if view.ops_matching else "") + "</p>"]
    body += [f'<p class="note">{escape(note)}</p>' for note in view.notes]
    return body


def _memory(view: MemoryView) -> list[str]:
    """One run's memory against the baseline: the peak line, the parts side by side (bold: differs), hypotheses."""
    rows = [('<tr class="significant">' if r.differs else "<tr>")
            + "".join(f"<td>{escape(cell)}</td>" for cell in (r.title, r.run, r.baseline, r.difference, r.figure))
            + "</tr>" for r in view.rows]
    head = "".join(f"<th>{escape(h)}</th>" for h in (MEMORY_HEADERS[0], view.mode, view.baseline,
                                                      *MEMORY_HEADERS[3:]))
    body = [f"<h3>{escape(view.mode)} against {escape(view.baseline)}</h3>", f"<p>{escape(view.headline)}</p>",
            _scroll(f'<table class="memory"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'),
            '<p class="est">bold, *: differs from the baseline\'s</p>']
    annotated = [r for r in view.rows if r.annotations]
    if annotated:
        body.append("<ul>" + "".join(f'<li><b>{escape(r.title)}</b><ul class="annotations">'
                                     f"{_annotation_items(r.annotations)}</ul></li>" for r in annotated) + "</ul>")
    if view.annotations:
        label = MODE_ANNOTATIONS_LABEL[0].upper() + MODE_ANNOTATIONS_LABEL[1:]
        body += [f"<h4>{escape(label)}</h4>", f'<ul class="annotations">{_annotation_items(view.annotations)}</ul>']
    body += [f'<p class="note">{escape(note)}</p>' for note in view.notes]
    return body


def _op_table(view: ModeView) -> str:
    """Columns 2-4 are the run's, 5-7 the baseline's; units in the headers so that eight columns fit 800 px."""
    units = ["", "", " (µs)", " (ms)", "", " (µs)", " (ms)", " (ms)"]
    sides = (f'<tr><th></th><th colspan="3" class="side">{escape(view.mode)}</th>'
             f'<th colspan="3" class="side">{escape(view.baseline)}</th><th></th></tr>')
    head = sides + "<tr>" + "".join(f"<th>{escape(h + unit)}</th>" for h, unit in zip(OP_HEADERS, units)) + "</tr>"
    rows = []
    for r in view.ops:
        cells = [r.run_calls, r.run_per_call, r.run_time, r.baseline_calls, r.baseline_per_call, r.baseline_time,
                 r.delta]
        row = '<tr class="significant">' if r.significant else "<tr>"
        rows.append(f'{row}<td class="group">{escape(r.group)}</td>'
                    + "".join(f"<td>{escape(c.replace(' µs', '').replace(' ms', ''))}</td>" for c in cells) + "</tr>")
    return f'<table class="ops"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _compiled(report: ExplainReport) -> list[str]:
    """Modes compiled for a target GPU, not timed: their figures side by side, ranked on the roofline lower bound."""
    modes, rows = compiled_table(report)
    fastest = report.baseline
    body = ["<h2>Compiled for a target GPU, not timed</h2>",
            "<p>The modes are ranked on their roofline lower bound per step: a <b>lower bound, not a prediction</b> "
            "(per launch max(FLOPs / peak FLOP/s, bytes / memory bandwidth) of the target GPU).</p>"]
    if fastest:
        body.append(f"<p>Lowest roofline lower bound: <b>{escape(fastest)}</b></p>")
    body.append(table(["", *modes], [[label.strip(), *values] for label, values in rows], figures=True))
    return body


def _notes(report: ExplainReport) -> str:
    return "<h2>Notes</h2><ul>" + "".join(f"<li class=\"note\">{escape(m)}: {escape(n)}</li>"
                                          for m, n in notes(report)) + "</ul>"


def _scaling(view: ScalingView) -> list[str]:
    """One mode's scaling: the plain CPU warning, a row per device count, the causes of each loss."""
    body = [f"<h3>{escape(view.mode)} against {_unit(view.reference)}</h3>"]
    if view.shared_cpu:
        body.append(f'<p class="audit">{escape(view.shared_cpu)}</p>')
    if view.rows:
        body.append(_scroll(table(list(SCALING_HEADERS), [list(row.cells()) for row in view.rows])
                            .replace("<table>", '<table class="scaling">', 1)))
    for row in view.rows:
        body.append(f"<p>{escape(row.label)}: {_unit(row.lost_line)}</p>")
        if row.causes:
            body.append(f"<h4>Causes of the lost efficiency at {escape(row.label)}</h4>"
                        "<p>Each part of the step against its ideal share, its 1-device time / N.</p>")
            body.append("<ol>" + "".join(f'<li><span class="kind">{escape(c.kind)}</span>: <b>{escape(c.title)}</b>'
                                         f'<br><span class="figures-line">{_unit(c.figures)}</span></li>'
                                         for c in row.causes) + "</ol>")
        if row.within_noise:
            body.append(f"<p>{_unit(row.within_noise)}</p>")
        if row.residual:
            body.append(f"<p>{escape(RESIDUAL_LABEL)}: {_unit(row.residual)}</p>")
        body += [f'<p class="note">{escape(row.label)}: {escape(note)}</p>' for note in row.notes]
    body += [f'<p class="note">{escape(note)}</p>' for note in view.notes]
    return body


def tested_html(block: TestedBlock) -> list[str]:
    """explain --test-hypotheses: the lead sentences, a table per gap, the interaction, what did not run."""
    body = [f'<h2 id="tested">{escape(TESTED_HEADING)}</h2>',
            "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in lead_lines(block)) + "</ul>"]
    for view in pair_views(block):
        body.append(f"<h3>{escape(view.heading)}</h3>")
        if view.directory:
            body.append(f"<p>Re-runs: <code>{escape(view.directory)}</code></p>")
        head = "".join(f"<th>{escape(column)}</th>" for column in TEST_COLUMNS)
        rows = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in view.rows)
        body.append(_scroll(f'<table class="tested"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'))
        if view.interaction:
            body.append(f"<p>{escape(view.interaction)}</p>")
        if view.not_run:
            body.append("<ul>" + "".join(f"<li>not timed: {escape(line)}</li>" for line in view.not_run) + "</ul>")
    return body
