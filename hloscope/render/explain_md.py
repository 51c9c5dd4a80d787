"""The explain report as Markdown."""

from __future__ import annotations

from hloscope.render import fmt
from hloscope.render.explain_views import (compiled_table, config_text, estimate, is_compiled, mode_rows, notes,
                                           slower_modes)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: dict) -> str:
    meta = report.get("comparison") or {}
    lines = ["# Why the modes differ", ""]
    if meta.get("path"):
        lines += [f"Comparison: `{meta['path']}`", ""]
    if config_text(meta):
        lines += ["Configuration: " + config_text(meta), ""]
    if is_compiled(report):
        lines += _compiled(report)
    else:
        lines += _timed(report)
    if notes(report):
        lines += ["", "## Notes", ""] + [f"- {mode}: {_cell(note)}" for mode, note in notes(report)]
    return "\n".join(lines) + "\n"


def _compiled(report: dict) -> list[str]:
    """Modes compiled for a target GPU, not timed: their figures side by side, ranked on the roofline lower bound."""
    modes, rows = compiled_table(report)
    fastest = report.get("fastest")
    lines = ["Compiled for a target GPU, not timed: the modes are ranked on their roofline lower bound per step "
             "(a lower bound, not a prediction: per launch max(FLOPs / peak FLOP/s, bytes / memory bandwidth)).", ""]
    if fastest:
        lines += [f"Lowest roofline lower bound: **{fastest}**", ""]
    lines += ["| | " + " | ".join(_cell(m) for m in modes) + " |", "|---" + "|---" * len(modes) + "|"]
    lines += [f"| {_cell(label)} | " + " | ".join(_cell(v) for v in values) + " |" for label, values in rows]
    return lines


def _timed(report: dict) -> list[str]:
    fastest = report.get("fastest")
    lines = [f"Fastest mode: **{fastest}**" if fastest else "No mode finished with a step time.", ""]
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
    return lines
