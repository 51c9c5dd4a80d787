"""The explain report as Markdown."""

from __future__ import annotations

from hloscope.render import fmt
from hloscope.render.explain_views import mode_rows


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: dict) -> str:
    meta = report.get("comparison") or {}
    lines = ["# Why the modes differ", ""]
    if meta.get("path"):
        lines += [f"Comparison: `{meta['path']}`", ""]
    if meta.get("config"):
        lines += ["Configuration: " + ", ".join(f"{k}={v}" for k, v in meta["config"].items()
                                        if not isinstance(v, (dict, list))), ""]
    fastest = report.get("fastest")
    lines += [f"Fastest mode: **{fastest}**" if fastest else "No mode finished with a step time.", ""]
    lines += ["| mode | status | step (median) | vs fastest | gap | kernels/step | device idle/step | compiles in window |",
              "|---|---|---|---|---|---|---|---|"]
    for row in mode_rows(report):
        kernels = row["kernels"] if row["kernels"] is not None else row["trace_kernels"]
        lines.append(f"| {row['mode']} | {row['status']} | {fmt.ms(row['step_time_s'])} | {fmt.ratio(row['ratio'])} | "
                     f"{fmt.ms(row['gap_s'])} | {fmt.count(kernels)} | {fmt.ms(row['device_idle_s'])} | "
                     f"{fmt.count(row['compiles_in_window'])} |")
    for entry in mode_rows(report):  # fastest first, like the table
        if not entry.get("gap_s") or entry["mode"] == fastest:
            continue
        lines += ["", f"## {entry['mode']}: {fmt.ratio(entry['ratio'])} the step time of {fastest} "
                      f"(+{fmt.ms(entry['gap_s'])} per step)", ""]
        if not entry["contributors"]:
            lines.append("No rule found evidence for this gap in the data recorded (see the notes below).")
        for rank, c in enumerate(entry["contributors"], 1):
            size = (f"~{fmt.ms(c['seconds'])} ({fmt.share(c['seconds'], entry['gap_s'])} of the gap)"
                    if c["seconds"] is not None else "not sized")
            lines.append(f"{rank}. **{c['title']}** — {size}: {_cell(c['claim'])}.")
        lines += ["", f"Explained: {fmt.ms(entry['explained_s'])}; unexplained: {fmt.ms(entry['unexplained_s'])} "
                      "(estimates can overlap)."]
    notes = [(mode, note) for mode, s in report.get("summaries", {}).items() for note in s.get("notes", [])]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {mode}: {_cell(note)}" for mode, note in notes]
    return "\n".join(lines) + "\n"
