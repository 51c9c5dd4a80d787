"""The memory section of the explain report as text, shared by the terminal, Markdown and HTML renderers: per run with
a memory ledger, its peak against the baseline's with the verdict, then every ledger part side by side (those that
differ first, marked `*`) with the hypotheses beneath them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hloscope import units
from hloscope.render.explain_views import AnnotationView, _annotations

if TYPE_CHECKING:
    from hloscope.explain.memory import ModeMemory, PartChange
    from hloscope.explain.report import ExplainReport

MEMORY_HEADING = "Memory (peak, then the ledger's parts: run.json memory.ledger)"
MEMORY_HEADERS = ("part", "run", "baseline", "difference", "figure")


@dataclass
class MemoryRow:
    title: str
    run: str
    baseline: str
    difference: str  # `+650 kB *` where the part differs
    figure: str  # "measured" | "estimate" | "not measured", and "within <part>" for a breakdown
    differs: bool
    annotations: list[AnnotationView] = field(default_factory=list)


@dataclass
class MemoryView:
    mode: str
    baseline: str
    headline: str  # `peak 1.06 GB against 547 MB: +508 MB, more (the process peaks differ: p = ...)`
    rows: list[MemoryRow]
    annotations: list[AnnotationView]  # hypotheses no differing part could take
    notes: list[str]


def _signed(n: int | None) -> str:
    return "-" if n is None else ("+" if n > 0 else "") + units.size(n)


def _verdict(memory: ModeMemory) -> str:
    """The verdict with its reason (ModeMemory.why: the spread, the process-level test with the smallest difference it
    resolves, a deterministic peak, a provisional call)."""
    return f"{memory.verdict} ({memory.why})" if memory.why else memory.verdict


def _row(part: PartChange) -> MemoryRow:
    figure = "not measured" if part.bytes is None else "estimate" if part.estimate else "measured"
    if part.within:
        figure += f", within {part.within}"
    return MemoryRow(title=part.title, run=units.size(part.bytes), baseline=units.size(part.baseline_bytes),
                     difference=_signed(part.difference_bytes) + (" *" if part.differs else ""), figure=figure,
                     differs=part.differs, annotations=_annotations(part.annotations))


def memory_views(report: ExplainReport) -> list[MemoryView]:
    """The runs other than the baseline that have a memory ledger, in the report's order."""
    views = []
    for entry in report.modes:
        memory = entry.memory
        if memory is None or memory.verdict == "baseline" or report.baseline is None:
            continue
        headline = (f"peak {units.size(memory.peak_bytes)} against {units.size(memory.baseline_peak_bytes)}: "
                    f"{_signed(memory.difference_bytes)}, {_verdict(memory)}; {memory.peak_source}")
        notes = list(memory.notes)
        if memory.compiled:
            compiled = memory.compiled
            notes.append(f"XLA's analysis of the compiled step: arguments {units.size(compiled.get('argument_bytes'))}"
                         f", outputs {units.size(compiled.get('output_bytes'))}, aliased "
                         f"{units.size(compiled.get('alias_bytes'))}, temporaries "
                         f"{units.size(compiled.get('temp_bytes'))}")
        views.append(MemoryView(mode=entry.mode, baseline=report.baseline, headline=headline,
                                rows=[_row(part) for part in memory.parts],
                                annotations=_annotations(memory.annotations), notes=notes))
    return views
