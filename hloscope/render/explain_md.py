"""The explain report as Markdown."""

from __future__ import annotations

from hloscope.render import fmt
from hloscope.render.explain_views import config_text, estimate, mode_rows, notes, slower_modes


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: dict) -> str:
    meta = report.get("comparison") or {}
    lines = ["# Why the modes differ", ""]
    if meta.get("path"):
        lines += [f"Comparison: `{meta['path']}`", ""]
    if config_text(meta):
        lines += ["Configuration: " + config_text(meta), ""]
    fastest = report.get("fastest")
    lines += [f"Fastest mode: **{fastest}**" if fastest else "No mode finished with a step time.", ""]
    lines += ["| mode | status | step (median) | vs fastest | gap | kernels/step | device idle/step | compiles in window |",
              "|---|---|---|---|---|---|---|---|"]
    for row in mode_rows(report):
        lines.append(f"| {row['mode']} | {row['status']} | {fmt.ms(row['step_time_s'])} | {fmt.ratio(row['ratio'])} | "
                     f"{fmt.ms(row['gap_s'])} | {fmt.count(row['kernels_per_step'])} | {fmt.ms(row['device_idle_s'])} | "
                     f"{fmt.count(row['compiles_in_window'])} |")
    for entry in slower_modes(report):
        lines += ["", f"## {entry['mode']}: {fmt.ratio(entry['ratio'])} the step time of {fastest} "
                      f"(+{fmt.ms(entry['gap_s'])} per step)", ""]
        if not entry["contributors"]:
            lines.append("No rule found evidence for this gap in the data recorded (see the notes below).")
        for rank, c in enumerate(entry["contributors"], 1):
            lines.append(f"{rank}. **{c['title']}** ({estimate(c, entry['gap_s'])}): {_cell(c['claim'])}.")
        lines += ["", f"Explained: {fmt.ms(entry['explained_s'])}; unexplained: {fmt.ms(entry['unexplained_s'])} "
                      "(estimates can overlap)."]
    if notes(report):
        lines += ["", "## Notes", ""] + [f"- {mode}: {_cell(note)}" for mode, note in notes(report)]
    return "\n".join(lines) + "\n"
