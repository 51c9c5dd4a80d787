"""The explain report on the terminal, with rich."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hloscope.render import fmt
from hloscope.render.explain_views import estimate, mode_rows, notes, slower_modes


def render(report: dict, console: Console) -> None:
    fastest = report.get("fastest")
    meta = report.get("comparison") or {}
    table = Table(title=f"Step time{' — ' + str(meta['path']) if meta.get('path') else ''}")
    for header in ("mode", "status", "step (median)", "vs fastest", "gap", "kernels/step", "device idle/step",
                   "compiles in window"):
        table.add_column(header, justify="left" if header in ("mode", "status") else "right")
    for r in mode_rows(report):
        table.add_row(r["mode"], r["status"], fmt.ms(r["step_time_s"]), fmt.ratio(r["ratio"]), fmt.ms(r["gap_s"]),
                      fmt.count(r["kernels_per_step"]), fmt.ms(r["device_idle_s"]), fmt.count(r["compiles_in_window"]))
    console.print(table)
    for entry in slower_modes(report):
        console.print(f"\n[bold]{escape(entry['mode'])}[/bold]: {fmt.ratio(entry['ratio'])} the step time of {fastest} "
                      f"(+{fmt.ms(entry['gap_s'])} per step)", highlight=False)
        if not entry["contributors"]:
            console.print("  no rule found evidence for this gap in the data recorded")
        for rank, c in enumerate(entry["contributors"], 1):
            console.print(f"  {rank}. [bold]{escape(c['title'])}[/bold] ({estimate(c, entry['gap_s'])}): "
                          f"{escape(c['claim'])}.", highlight=False, soft_wrap=False)
        console.print(f"  explained {fmt.ms(entry['explained_s'])}, unexplained {fmt.ms(entry['unexplained_s'])} "
                      "(estimates can overlap)", style="dim", highlight=False)
    for mode, note in notes(report):
        console.print(escape(f"note: {mode}: {note}"), style="yellow", highlight=False)
