"""The explain report on the terminal, with rich."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hloscope.render import fmt
from hloscope.render.explain_views import compiled_table, estimate, is_compiled, mode_rows, notes, slower_modes


def _ms(seconds: float | None) -> str:
    """fmt.ms without its unit, which the column header carries."""
    return fmt.ms(seconds).removesuffix(" ms")


def render_compiled(report: dict, console: Console) -> None:
    """Modes compiled for a target GPU, not timed: their figures side by side, ranked on the roofline lower bound."""
    meta = report.get("comparison") or {}
    modes, rows = compiled_table(report)
    table = Table(title=f"Compiled, not timed{' — ' + str(meta['path']) if meta.get('path') else ''}",
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
                  caption="the roofline bound is a lower bound, not a prediction: per launch max(FLOPs / peak FLOP/s, "
                          "bytes / memory bandwidth) of the target GPU")
    table.add_column("", min_width=24)  # labels wrap on a narrow terminal; mode names and figures never do
    for mode in modes:
        table.add_column(mode, justify="right", no_wrap=True)
    for label, values in rows:
        table.add_row(label, *values)
    console.print(table)
    if report.get("fastest"):
        console.print(f"lowest roofline lower bound: {escape(report['fastest'])}", highlight=False)


def render(report: dict, console: Console) -> None:
    if is_compiled(report):
        render_compiled(report, console)
        for mode, note in notes(report):
            console.print(escape(f"note: {mode}: {note}"), style="yellow", highlight=False)
        return
    fastest = report.get("fastest")
    meta = report.get("comparison") or {}
    # Units in the headers and no frame, so that five modes fit an 80-column terminal without cutting a name or figure.
    table = Table(title=f"Step time{' — ' + str(meta['path']) if meta.get('path') else ''}", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    for header in ("mode", "status", "step ms\n(median)", "vs\nfastest", "gap\nms", "kernels\n/step",
                   "device\nidle ms", "compiles\nin\nwindow"):
        table.add_column(header, justify="left" if header in ("mode", "status") else "right", no_wrap=True)
    for r in mode_rows(report):
        table.add_row(r["mode"], r["status"], _ms(r["step_time_s"]), fmt.ratio(r["ratio"]), _ms(r["gap_s"]),
                      fmt.count(r["kernels_per_step"]), _ms(r["device_idle_s"]), fmt.count(r["compiles_in_window"]))
    console.print(table)
    for entry in slower_modes(report):
        console.print(f"\n[bold]{escape(entry['mode'])}[/bold]: {fmt.ratio(entry['ratio'])} the step time of {fastest} "
                      f"(+{fmt.ms(entry['gap_s'])} per step)", highlight=False)
        if not entry["contributors"]:
            console.print("  no rule found evidence for this gap in the data recorded")
        ranked = Table.grid(padding=(0, 1))  # a hanging indent: a long claim wraps under its own text, not its rank
        ranked.add_column(justify="right", width=4)
        ranked.add_column()
        for rank, c in enumerate(entry["contributors"], 1):
            ranked.add_row(f"{rank}.", Text.from_markup(f"[bold]{escape(c['title'])}[/bold] "
                                                        f"({estimate(c, entry['gap_s'])}): {escape(c['claim'])}."))
        if entry["contributors"]:
            console.print(ranked)
        console.print(f"  explained {fmt.ms(entry['explained_s'])}, unexplained {fmt.ms(entry['unexplained_s'])} "
                      "(estimates can overlap)", style="dim", highlight=False)
    for mode, note in notes(report):
        console.print(escape(f"note: {mode}: {note}"), style="yellow", highlight=False)
