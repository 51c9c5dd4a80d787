"""explain's first-step section in every form (terminal, Markdown, HTML): per run, its time to the first step against
the baseline's, the ledger of where that time went with the instrument behind each part, cache hits and misses, and
the recompilations inside the timed window with their causes. The views are plain strings; each renderer lays them
out."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from hloscope.render.html_page import table as html_table
from hloscope.render.markdown import row as md_row
from hloscope.render.markdown import text as md_text

if TYPE_CHECKING:  # the explain layer's types; at run time this module only reads their attributes
    from hloscope.explain.report import ExplainReport
    from hloscope.explain.startup import PartDelta, StartupComparison

FIRST_STEP = "first step"  # the phase whose parts the one-line summary ranks

STARTUP_HEADING = "Time to the first step (compilation, caches) against the baseline"
PART_HEADERS = ("phase", "part", "run", "baseline", "difference", "measured by")


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def signed_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f} s"


@dataclass
class StartupView:
    mode: str
    summary: str  # `first step 46.65 s against 2.00 s (jax): +44.65 s, slower`
    total: str  # imports + setup + first step
    moved: str | None  # the parts that moved most, in one line
    rows: list[tuple[str, str, str, str, str, str]]
    cache: str | None
    recompilations: list[str]
    notes: list[str]


def _summary(mode: str, baseline: str, item: StartupComparison) -> str:
    first = f"first step {seconds(item.first_step_s)}"
    if item.verdict == "baseline":
        return f"{first} (the baseline)"
    against = f" against {seconds(item.baseline_first_step_s)} ({baseline})"
    return f"{first}{against}: {signed_seconds(item.gap_s)}, {item.verdict}"


def _cache(item: StartupComparison) -> str | None:
    counts = ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in sorted(item.cache_counts.items()))
    where = f"persistent compile cache {item.compile_cache}" if item.compile_cache else \
        "persistent compile cache: the framework's default"
    return f"{where}; up to the first step: {counts or 'no cache lookups recorded'}"


def _recompilations(item: StartupComparison) -> list[str]:
    lines = []
    if item.window_compile_s:
        lines.append(f"compiled again inside the timed window: {seconds(item.window_compile_s)} of compilation "
                     "in the timed steps")
    for found in item.recompilations:
        cost = f" ({seconds(found.seconds)})" if found.seconds is not None else ""
        cause = "; ".join(line.strip() for line in found.cause.splitlines() if line.strip())  # jax's is a paragraph
        where = f" at {found.frame}" if found.frame else ""
        lines.append(f"{cause}{where}{cost} [{found.source}]")
    return lines


def largest_differences(item: StartupComparison, limit: int = 3) -> list[PartDelta]:
    """The first step's parts that moved most against the baseline (the one-line summary)."""
    moved = [p for p in item.parts if p.delta_s is not None and p.phase == FIRST_STEP]
    return sorted(moved, key=lambda p: -abs(p.delta_s or 0.0))[:limit]


def startup_views(report: ExplainReport) -> list[StartupView]:
    """One view per run with a startup ledger, the baseline first."""
    entries = [m for m in report.modes if m.startup is not None]
    entries.sort(key=lambda m: m.mode != report.baseline)
    views = []
    for entry in entries:
        item = entry.startup
        if item is None:
            continue
        own = item.verdict == "baseline"  # its own reference: no second column
        rows = [(p.phase, p.name, seconds(p.seconds), "" if own else seconds(p.baseline_seconds),
                 "" if own else signed_seconds(p.delta_s), p.source) for p in item.parts]
        moved = largest_differences(item) if item.verdict in ("slower", "faster") else []
        moved_line = ("largest differences in the first step: " + "; ".join(
            f"{p.name} {signed_seconds(p.delta_s)}" for p in moved)) if moved else None
        total = (f"imports + setup + first step: {seconds(item.total_s)}"
                 + (f" (baseline {seconds(item.baseline_total_s)})" if item.verdict != "baseline" and
                    item.baseline_total_s is not None else ""))
        views.append(StartupView(entry.mode, _summary(entry.mode, report.baseline or "?", item), total, moved_line,
                                 rows, _cache(item), _recompilations(item), list(item.notes)))
    return views


# -- terminal ---------------------------------------------------------------------------------------------------------
def render_term(report: ExplainReport, console: Console) -> None:
    views = startup_views(report)
    if not views:
        return
    console.print(Text(f"\n{STARTUP_HEADING}", style="bold"))
    for view in views:
        head = Text("\n")
        head.append(view.mode, style="bold")
        head.append(f": {view.summary}")
        console.print(head)
        console.print(Text(f"  {view.total}"))
        if view.moved:
            console.print(Text(f"  {view.moved}"))
        parts = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        for header in PART_HEADERS:
            parts.add_column(header, justify="right" if header in ("run", "baseline", "difference") else "left")
        for cells in view.rows:
            parts.add_row(*(Text(cell) for cell in cells))
        console.print(Padding(parts, (0, 0, 0, 2)))
        if view.cache:
            console.print(Text(f"  {view.cache}", style="dim"))
        for line in view.recompilations:
            console.print(Text(f"  recompilation: {line}", style="yellow"))
        for note in view.notes:
            console.print(Text(f"  note: {note}", style="yellow"))


# -- Markdown ---------------------------------------------------------------------------------------------------------
def render_md(report: ExplainReport) -> list[str]:
    views = startup_views(report)
    if not views:
        return []
    lines = ["", f"## {md_text(STARTUP_HEADING)}"]
    for view in views:
        lines += ["", f"### {md_text(view.mode)}", "", f"{md_text(view.summary)}; {md_text(view.total)}", ""]
        if view.moved:
            lines += [md_text(view.moved), ""]
        lines += [md_row(list(PART_HEADERS)), "|---|---|---:|---:|---:|---|"]
        lines += [md_row([md_text(cell) for cell in cells]) for cells in view.rows]
        lines.append("")
        if view.cache:
            lines += [md_text(view.cache), ""]
        lines += [f"- recompilation: {md_text(line)}" for line in view.recompilations]
        lines += [f"Note: {md_text(note)}  " for note in view.notes]
    return lines


# -- HTML -------------------------------------------------------------------------------------------------------------
def render_html(report: ExplainReport) -> list[str]:
    views = startup_views(report)
    if not views:
        return []
    body = [f"<h2>{escape(STARTUP_HEADING)}</h2>"]
    for view in views:
        body.append(f"<h3>{escape(view.mode)}</h3><p>{escape(view.summary)}; {escape(view.total)}</p>")
        if view.moved:
            body.append(f"<p>{escape(view.moved)}</p>")
        body.append(html_table(list(PART_HEADERS), [list(cells) for cells in view.rows]))
        if view.cache:
            body.append(f"<p>{escape(view.cache)}</p>")
        if view.recompilations:
            body.append("<ul>" + "".join(f"<li>recompilation: <pre>{escape(line)}</pre></li>"
                                         for line in view.recompilations) + "</ul>")
        body += [f'<p class="note">{escape(note)}</p>' for note in view.notes]
    return body
