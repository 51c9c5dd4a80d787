"""The explain report on the terminal, with rich.

Every string that comes from the runs (mode names, op groups, settings, claims, paths) is printed as rich.text.Text,
never parsed as markup: a mode named `[bold]x` or an op group with brackets prints as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, Group
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from hloscope.render import explain_startup, fmt
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
    is_compiled,
    mode_views,
    notes,
    scaling_views,
    step_rows,
)
from hloscope.render.tested_views import (
    TEST_COLUMNS,
    TESTED_HEADING,
    VERDICT_STYLES,
    lead_lines,
    pair_views,
)

if TYPE_CHECKING:
    from hloscope.explain.experiments import TestedBlock
    from hloscope.explain.report import ExplainReport


def _ms(text: str) -> str:
    """A figure formatted by fmt.ms without its unit, which the column header carries."""
    return text.removesuffix(" ms")


def _plain(table: Table, *cells: str) -> None:
    table.add_row(*(Text(str(c)) for c in cells))


def render_compiled(report: ExplainReport, console: Console) -> None:
    """Modes compiled for a target GPU, not timed: their figures side by side, ranked on the roofline lower bound."""
    meta = report.comparison
    modes, rows = compiled_table(report)
    table = Table(title=Text(f"Compiled, not timed{' — ' + str(meta['path']) if meta.get('path') else ''}"),
                  box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True,
                  caption="the roofline bound is a lower bound, not a prediction: per launch max(FLOPs / peak FLOP/s, "
                          "bytes / memory bandwidth) of the target GPU")
    table.add_column("", min_width=24)  # labels wrap on a narrow terminal; mode names and figures never do
    for mode in modes:
        table.add_column(Text(str(mode)), justify="right", no_wrap=True)
    for label, values in rows:
        _plain(table, label, *values)
    console.print(table)
    if report.baseline:
        console.print(Text(f"lowest roofline lower bound: {report.baseline}"))


def _notes(report: ExplainReport, console: Console) -> None:
    for mode, note in notes(report):
        console.print(Text(f"note: {mode}: {note}", style="yellow"))


def _audit(report: ExplainReport, console: Console) -> None:
    """The fairness audit's mismatches, in red, before anything else."""
    mismatches = audit_mismatches(report)
    if mismatches:
        console.print(Text(AUDIT_HEADING, style="bold red"))
        for line in mismatches:
            _line(console, Text(line, style="red"))
        console.print()


def render(report: ExplainReport, console: Console) -> None:
    report = fmt.printable(report)  # what the files wrote is shown escaped, never run as terminal control
    _audit(report, console)
    if is_compiled(report):
        render_compiled(report, console)
        _notes(report, console)
        return
    if report.tested is not None:  # the controlled re-runs lead: they are tested, the rest is correlation
        render_tested(report.tested, console)
    meta = report.comparison
    console.print(_step_table(report, meta))
    console.print(Text(baseline_line(report), style="dim"))
    for view in mode_views(report):
        _mode(view, console)
    memory = memory_views(report)
    if memory:
        console.print(Text(f"\n{MEMORY_HEADING}", style="bold"))
    for memory_view in memory:
        _memory(memory_view, console)
    scaling = scaling_views(report)
    if scaling:
        console.print(Text(f"\n{SCALING_HEADING}", style="bold"))
    for scaling_view in scaling:
        _scaling(scaling_view, console)
    explain_startup.render_term(report, console)
    _notes(report, console)


def _step_table(report: ExplainReport, meta: dict) -> Table:
    """Units in the headers and no frame, so that five modes fit an 80-column terminal without cutting a name or a
    figure; ratio and gap are to the baseline (named below the table), their intervals follow in each run's section."""
    table = Table(title=Text(f"Step time{' — ' + str(meta['path']) if meta.get('path') else ''}"),
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for header in ("mode", "status", "step\nmedian\nms", "p10-p90\nms", "ratio", "gap\nms", "verdict"):
        if header == "verdict":  # words: they may wrap on a narrow terminal
            table.add_column(header, min_width=8)
        else:
            table.add_column(header, justify="left" if header in ("mode", "status") else "right", no_wrap=True)
    for r in step_rows(report):
        status = Text(r["status"])
        if r["noisy"]:
            status.append(" noisy", style="yellow")
        table.add_row(Text(r["mode"]), status, r["step"].removesuffix(" ms"), _ms(r["spread"]), r["ratio"],
                      _ms(r["gap"]), Text(r["verdict"]))
    return table


def _mode(view: ModeView, console: Console) -> None:
    head = Text("\n")
    head.append(view.mode, style="bold")
    head.append(f" against {view.baseline}: ")
    head.append(view.verdict, style="bold" if view.significant else "")
    console.print(head)
    lines = Table.grid(padding=(0, 1))  # a hanging indent: long text wraps under itself
    lines.add_column(width=1)
    lines.add_column()
    step = Text(f"step {view.step}")
    if view.noisy:
        step.append(" noisy", style="bold yellow")
        step.append(" (run.json flagged its timed window as noisy)")
    step.append(f"; {view.baseline}: {view.baseline_step}")
    lines.add_row("", step)
    console.print(lines)
    if view.config_differences:  # first, before any cause: the runs did not do the same work
        console.print(Padding(_config_differences(view), (0, 0, 0, 2)))
    if view.per_sample:
        _line(console, Text(f"per sample: {view.per_sample}"))
    if view.replay:
        _line(console, Text(view.replay))
    if view.contributors:
        console.print(Text("  measured contributors, ranked:", style="bold"))
        console.print(_contributors(view))
    if view.within_noise:
        _line(console, Text(view.within_noise))
    if view.residual:
        _line(console, Text(f"{RESIDUAL_LABEL}: {view.residual}"))
    if view.annotations:
        console.print(Text(f"  {MODE_ANNOTATIONS_LABEL}:", style="bold"))
        console.print(Padding(_annotations(view.annotations, "-"), (0, 0, 0, 4)))
    if view.ops:
        console.print(_op_table(view, console.width))
        if view.ops_matching:
            _line(console, Text(view.ops_matching, style="dim"))
    for note in view.notes:
        _line(console, Text(f"note: {note}", style="yellow"))


def _config_differences(view: ModeView) -> Table:
    table = Table(title=Text("configuration differences", style="bold"), title_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True, padding=(0, 1))
    table.add_column("setting", overflow="fold")
    table.add_column(Text(view.mode), overflow="fold")
    table.add_column(Text(view.baseline), overflow="fold")
    for setting, run, base in view.config_differences:
        _plain(table, setting, run, base)
    return table


def _contributors(view: ModeView) -> Table:
    """The measured contributors, ranked, each with its figures, claim and annotations under its title."""
    ranked = Table.grid(padding=(0, 1))
    ranked.add_column(justify="right", width=4)
    ranked.add_column()
    for c in view.contributors:
        parts: list[Text | Table] = [Text(c.title, style="bold"), Text(c.figures)]
        if c.claim:
            parts.append(Text(c.claim))
        if c.annotations:
            parts.append(_annotations(c.annotations, "↳"))
        ranked.add_row(f"{c.rank}.", Group(*parts))
    return ranked


def _memory(view: MemoryView, console: Console) -> None:
    """One run's memory against the baseline: the peak line, the parts side by side, hypotheses beneath them."""
    head = Text("\n")
    head.append(view.mode, style="bold")
    head.append(f" against {view.baseline}: {view.headline}")
    console.print(head)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True, padding=(0, 1))
    for header in MEMORY_HEADERS:
        table.add_column(Text(header), justify="left" if header in ("part", "figure") else "right",
                         no_wrap=header != "figure")
    for row in view.rows:
        table.add_row(Text(row.title, style="bold" if row.differs else ""), Text(row.run), Text(row.baseline),
                      Text(row.difference), Text(row.figure))
    console.print(Padding(table, (0, 0, 0, 2)))
    for row in view.rows:
        if row.annotations:
            _line(console, Text(row.title, style="bold"))
            console.print(Padding(_annotations(row.annotations, "↳"), (0, 0, 0, 4)))
    if view.annotations:
        console.print(Text(f"  {MODE_ANNOTATIONS_LABEL}:", style="bold"))
        console.print(Padding(_annotations(view.annotations, "-"), (0, 0, 0, 4)))
    for note in view.notes:
        _line(console, Text(f"note: {note}", style="dim"))


def _annotations(annotations: list[AnnotationView], bullet: str) -> Table:
    """Hypotheses beneath what they explain, each with a hanging indent; `(estimate)` where a figure is assumed."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=1)
    grid.add_column()
    for a in annotations:
        text = Text(f"{a.label}: ", style="italic")
        text.append(a.claim, style="")
        grid.add_row(bullet, text)
    return grid


def _line(console: Console, text: Text, indent: int = 2) -> None:
    grid = Table.grid()
    grid.add_column(width=indent)
    grid.add_column()
    grid.add_row("", text)
    console.print(grid)


def _op_table(view: ModeView, width: int = 80) -> Table:
    """One line per op group: a long scoped name (a Flax op) is cut in the middle to the room the figures leave."""
    longest = max((len(r.group) for r in view.ops), default=0)
    overhead = Measurement.get(Console(width=10_000), Console(width=10_000).options, _ops(view, longest)).maximum
    return _ops(view, max(16, width - (overhead - max(longest, 12))))


def _ops(view: ModeView, room: int) -> Table:
    table = Table(title=Text(f"ops whose time changed most: {view.mode} (first three figures) against {view.baseline} "
                               "(next three); * significant"),
                  title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    units = ("", "", " µs", " ms", "", " µs", " ms", " ms")
    for i, (header, unit) in enumerate(zip(OP_HEADERS, units)):
        if i == 0:
            table.add_column(header, overflow="ellipsis", no_wrap=True, min_width=12)
        else:
            table.add_column(header.replace("/", "\n/") + unit.replace(" ", "\n", 1) if unit else
                             header.replace("/", "\n/"), justify="right", no_wrap=True)
    for r in view.ops:
        table.add_row(Text(fmt.middle_ellipsis(r.group, room)), r.run_calls, r.run_per_call.removesuffix(" µs"),
                      _ms(r.run_time), r.baseline_calls, r.baseline_per_call.removesuffix(" µs"), _ms(r.baseline_time),
                      Text(r.delta.replace(" ms", ""), style="bold" if r.significant else ""))
    return table


def _scaling(view: ScalingView, console: Console) -> None:
    """One mode's scaling: its 1-device step, the plain CPU warning, a row per device count, then the causes."""
    head = Text("\n")
    head.append(view.mode, style="bold")
    head.append(f" against {view.reference}")
    console.print(head)
    if view.shared_cpu:
        _line(console, Text(view.shared_cpu, style="yellow"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for header in SCALING_HEADERS:
        table.add_column(header.replace(" (", "\n("), justify="left" if header == "verdict" else "right", no_wrap=True)
    for row in view.rows:
        _plain(table, *row.cells())
    if view.rows:
        console.print(Padding(table, (0, 0, 0, 2)))
    for row in view.rows:
        _line(console, Text(f"{row.label}: {row.lost_line}"))
        if row.causes:
            console.print(Text(f"  {row.label}: causes of the lost efficiency (each part against its ideal share, "
                               "its 1-device time / N):", style="bold"))
            for cause in row.causes:
                _line(console, Text(f"{cause.kind}: {cause.title}: {cause.figures}"), indent=4)
        if row.within_noise:
            _line(console, Text(row.within_noise), indent=4)
        if row.residual:
            _line(console, Text(f"{RESIDUAL_LABEL}: {row.residual}"), indent=4)
        for note in row.notes:
            _line(console, Text(f"note: {row.label}: {note}", style="yellow"))
    for note in view.notes:
        _line(console, Text(f"note: {note}", style="yellow"))


def render_tested(block: TestedBlock, console: Console) -> None:
    """explain --test-hypotheses: the lead sentences, then per gap a row per hypothesis, the interaction, and what
    did not run."""
    block = fmt.printable(block)
    console.print(Text(TESTED_HEADING, style="bold"))
    for line in lead_lines(block):
        _line(console, Text(line))
    for view in pair_views(block):
        console.print(Text(f"\n{view.heading}", style="bold"))
        if view.directory:
            _line(console, Text(f"re-runs: {view.directory}", style="dim"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for column in TEST_COLUMNS[:-1]:  # the figures in columns; each row's why in full beneath
            table.add_column(column, overflow="fold")
        for row, verdict in zip(view.rows, view.verdicts):
            table.add_row(*(Text(cell, style=VERDICT_STYLES.get(verdict, "") if index == 2 else "")
                            for index, cell in enumerate(row[:-1])))
        console.print(table)
        for row in view.rows:
            _line(console, Text(f"{row[0]}: {row[-1]}"))
        if view.interaction:
            _line(console, Text(view.interaction))
        for line in view.not_run:
            _line(console, Text(f"not timed: {line}", style="yellow"))
    console.print()
