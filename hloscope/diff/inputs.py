"""Read one side of a diff: the module to compare (and, for a run directory, its run record and trace statistics)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hloscope.diff.compare import total_record
from hloscope.diff.report import StatsRecord, stats_document
from hloscope.errors import HloscopeError, InputError, UsageError
from hloscope.hlo.load import LoadedModule, load_modules
from hloscope.hlo.stats import stats_records, validate_all
from hloscope.runs.records import RunRecord
from hloscope.runs.rundir import load_run
from hloscope.trace.load import load_traces
from hloscope.trace.program_categories import categorized, resolver_for_run
from hloscope.trace.stats import trace_stats


@dataclass
class Side:
    path: str
    loaded: LoadedModule  # the largest of `graphs`
    stats: StatsRecord  # the `hlo stats` record of the one graph, or the sum over `graphs` (compare.total_record)
    run: RunRecord | None = None
    trace: dict | None = None
    notes: list[str] = field(default_factory=list)
    modules: list = field(default_factory=list)  # every module read from the path (both stages)
    graphs: list = field(default_factory=list)  # the modules compared: every graph of the train step at the stage
    graph_stats: list[StatsRecord] = field(default_factory=list)  # their `hlo stats` records, in the same order
    trace_data: object = None  # hloscope.trace.model.Trace, for the measured time per instruction
    warmup_steps: int = 1  # profiled steps that are the profiler's warm-up (run.json profile.warmup_steps)


def pick_module(loaded: list, path: str, module: str | None = None, stage: str | None = None):
    """The one module to compare: matching --module (a substring of the name) and --stage when given; else the
    largest module after optimizations (a train step dwarfs the helper modules around it), else the largest one."""
    candidates = loaded
    if module:
        candidates = [m for m in candidates if module in m.module.name]
        if not candidates:
            names = sorted({m.module.name for m in loaded})
            raise UsageError(f"{path}: no module named like {module!r} (modules: {', '.join(names[:10])})")
    if stage:
        wanted = f"{stage}_optimizations"
        staged = [m for m in candidates if m.stage == wanted]
        if not staged:
            raise UsageError(f"{path}: no module {wanted.replace('_', ' ')} (stages: "
                             f"{', '.join(sorted({m.stage for m in candidates}))})")
        candidates = staged
    else:
        after = [m for m in candidates if m.stage == "after_optimizations"]
        candidates = after or candidates
    return max(candidates, key=lambda m: m.module.instruction_count)


def pick_graphs(loaded: list, path: str, module: str | None = None, stage: str | None = None) -> list:
    """The modules that make up one train step at the compared stage: with --module, the one module `pick_module`
    picks; for a run directory (its train-step modules, as run.json lists them), every module at the stage, in the
    order the run dumped them (torch_xla+compile: forward, backward, optimizer...; a module name dumped twice counts
    once, its largest copy); for an XLA dump directory or an HLO file, the largest module."""
    chosen = pick_module(loaded, path, module, stage)
    if module or not all(m.extra.get("run_dir") for m in loaded):
        return [chosen]
    by_name: dict[str, LoadedModule] = {}
    for m in loaded:
        if m.stage == chosen.stage and (m.module.name not in by_name
                                        or m.module.instruction_count > by_name[m.module.name].module.instruction_count):
            by_name[m.module.name] = m
    return list(by_name.values())


def _trace(run_dir: Path, notes: list[str]):
    """(trace, its `trace stats` record) of the first readable trace of the run, or (None, None). XLA ops take the
    category of what their HLO computes, by the resolver `trace stats` uses, so that both sort time alike."""
    try:
        traces = load_traces(run_dir)
    except InputError as error:
        notes.append(f"no trace read: {error}")
        return None, None
    try:
        resolver = resolver_for_run(run_dir)
    except HloscopeError as error:
        notes.append(f"{error}: trace categories by kernel name only")
        resolver = None
    if resolver is not None:
        traces = [categorized(trace, resolver) for trace in traces]
    for trace in traces:
        try:
            return trace, stats_document(trace_stats(trace))  # step_times and compare_traces read it by key
        except HloscopeError as error:
            notes.append(f"trace {trace.file} not read: {error}")
    return None, None


def _warmup_steps(run: RunRecord) -> int:
    value = run.profile.warmup_steps
    return value if value is not None and value >= 0 else 1


def read_side(path: str | os.PathLike, module: str | None = None,
              stage: str | None = None) -> tuple[list[LoadedModule], list[LoadedModule]]:
    """(every module read from `path`, the graphs of it to compare), the graphs checked as `hlo stats` checks a
    module (HloModule.validate): a module hloscope refuses is refused here, before anything runs on either side."""
    modules = load_modules(Path(path))
    graphs = pick_graphs(modules, str(path), module, stage)
    validate_all(graphs)
    return modules, graphs


def load_side(path: str | os.PathLike, module: str | None = None, stage: str | None = None,
              xla_cost: bool = True, read: tuple[list[LoadedModule], list[LoadedModule]] | None = None) -> Side:
    """One side of a diff; `read`: what `read_side` read of `path` already."""
    path = Path(path)
    modules, graphs = read if read is not None else read_side(path, module, stage)
    chosen = max(graphs, key=lambda m: m.module.instruction_count)
    # each graph's record is exactly the one `hloscope hlo stats --json` prints for that module
    records: list[StatsRecord] = list(stats_records(graphs, xla_cost=xla_cost))
    side = Side(path=str(path), loaded=chosen, stats=records[0] if len(records) == 1 else total_record(records),
                modules=modules, graphs=graphs, graph_stats=records)
    if len(graphs) > 1:
        names = ", ".join(f"{m.module.name} ({m.module.instruction_count:,})" for m in graphs)
        side.notes.append(f"the train step runs as {len(graphs)} graphs, all compared and summed in the table: "
                          f"{names} (per-graph rows under 'graphs'; pick one with --module)")
    same_stage = list({m.module.name: m for m in modules if m.stage == chosen.stage
                       and all(m.module.name != g.module.name for g in graphs)}.values())
    if same_stage and module is None:
        left_out = ", ".join(f"{m.module.name} ({m.module.instruction_count:,})" for m in same_stage[:8])
        side.notes.append(f"{len(same_stage) + len(graphs)} modules at this stage; only the largest, "
                          f"{chosen.module.name} ({chosen.module.instruction_count:,} instructions), is compared, not "
                          f"the others: {left_out} (a dump directory does not say which modules make up the train "
                          "step; pick one with --module, or pass the run directory)")
    if path.is_dir() and (path / "run.json").is_file():
        side.run = load_run(path)
        side.warmup_steps = _warmup_steps(side.run)
        side.trace_data, side.trace = _trace(path, side.notes)
    return side
