"""The explain report as one self-contained HTML file with inline SVG plots."""

from __future__ import annotations

from html import escape

from hloscope.render import fmt, svg
from hloscope.render.explain_views import (compiled_table, config_text, device_time_by_category, estimate,
                                           is_compiled, kernels_by_category, mode_rows, notes, slower_modes)
from hloscope.render.html_page import evidence, page, table


def render(report: dict) -> str:
    meta = report.get("comparison") or {}
    summaries = report.get("summaries", {})
    fastest = report.get("fastest")
    rows = mode_rows(report)
    body = ["<h1>Why the modes differ</h1>"]
    if meta.get("path"):
        body.append(f"<p>Comparison: <code>{escape(str(meta['path']))}</code></p>")
    if config_text(meta):
        body.append(f"<p>Configuration: {escape(config_text(meta))}</p>")
    if is_compiled(report):
        body += _compiled(report)
        kernel_rows = [(r["mode"], kernels_by_category(summaries.get(r["mode"], {}))) for r in rows]
        body.append(svg.stacked_chart("Kernels per step by category", kernel_rows, "kernels") or "")
        if notes(report):
            body.append(_notes(report))
        return page("hloscope explain" + (f": {meta['path']}" if meta.get("path") else ""), body)
    body.append(f"<p>Fastest mode: <b>{escape(fastest)}</b></p>" if fastest else
                "<p>No mode finished with a step time.</p>")

    body.append("<h2>Step time</h2>")
    body.append(table(["mode", "status", "step (median)", "vs fastest", "gap", "throughput img/s", "kernels/step",
                       "device idle/step", "compiles in window"],
                      [[r["mode"], r["status"], fmt.ms(r["step_time_s"]), fmt.ratio(r["ratio"]), fmt.ms(r["gap_s"]),
                        fmt.count(r["throughput_img_s"]),
                        fmt.count(r["kernels_per_step"]),
                        fmt.ms(r["device_idle_s"]), fmt.count(r["compiles_in_window"])] for r in rows], figures=True))
    body.append(svg.bar_chart("Step time per mode (median)",
                              [(r["mode"], r["step_time_s"] * 1e3) for r in rows if r["step_time_s"]], "ms"))

    body.append("<h2>What explains each gap</h2>")
    for entry in slower_modes(report):
        body.append(f"<h3>{escape(entry['mode'])}: {fmt.ratio(entry['ratio'])} the step time of {escape(fastest)} "
                    f"(+{fmt.ms(entry['gap_s'])} per step)</h3>")
        if not entry["contributors"]:
            body.append("<p>No rule found evidence for this gap in the data recorded.</p>")
        items = [f"<li><b>{escape(c['title'])}</b> <span class=\"est\">{escape(estimate(c, entry['gap_s']))}</span>"
                 f"<p class=\"claim\">{escape(c['claim'])}.</p>{evidence(c['evidence'])}</li>"
                 for c in entry["contributors"]]
        body.append("<ol>" + "".join(items) + "</ol>")
        body.append(f"<p>Explained: {fmt.ms(entry['explained_s'])}; unexplained: {fmt.ms(entry['unexplained_s'])} "
                    "(estimates can overlap).</p>")

    kernel_rows = [(r["mode"], kernels_by_category(summaries.get(r["mode"], {}))) for r in rows]
    time_rows = [(r["mode"], device_time_by_category(summaries.get(r["mode"], {}))) for r in rows]
    timeline_rows = [(r["mode"], [tuple(t) for t in summaries.get(r["mode"], {}).get("timeline") or []]) for r in rows]
    body.append("<h2>Kernels and device time</h2>")
    plots = [svg.stacked_chart("Kernels per step by category", kernel_rows, "kernels"),
             svg.stacked_chart("Device time per step by category", time_rows, "ms"),
             svg.timeline_strips("One step on the device, per mode", timeline_rows)]
    body.extend(p for p in plots if p)
    if not any(plots):
        body.append("<p>No HLO dumps or traces were recorded for these modes.</p>")

    if notes(report):
        body.append(_notes(report))
    return page("hloscope explain" + (f": {meta['path']}" if meta.get("path") else ""), body)


def _compiled(report: dict) -> list[str]:
    """Modes compiled for a target GPU, not timed: their figures side by side, ranked on the roofline lower bound."""
    modes, rows = compiled_table(report)
    fastest = report.get("fastest")
    body = ["<h2>Compiled for a target GPU, not timed</h2>",
            "<p>The modes are ranked on their roofline lower bound per step: a <b>lower bound, not a prediction</b> "
            "(per launch max(FLOPs / peak FLOP/s, bytes / memory bandwidth) of the target GPU).</p>"]
    if fastest:
        body.append(f"<p>Lowest roofline lower bound: <b>{escape(fastest)}</b></p>")
    body.append(table([""] + modes, [[label.strip()] + values for label, values in rows], figures=True))
    return body


def _notes(report: dict) -> str:
    return "<h2>Notes</h2><ul>" + "".join(f"<li class=\"note\">{escape(m)}: {escape(n)}</li>"
                                          for m, n in notes(report)) + "</ul>"
