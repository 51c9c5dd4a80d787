"""Read one side of a diff: the module to compare (and, for a run directory, its run record and trace statistics)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from hloscope.errors import HloscopeError, InputError, UsageError


@dataclass
class Side:
    path: str
    loaded: object  # hloscope.hlo.load.LoadedModule
    stats: dict
    run: dict | None = None
    trace: dict | None = None
    notes: list[str] = field(default_factory=list)
    modules: list = field(default_factory=list)  # every module read from the path (both stages)


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


def _trace_stats(run_dir: Path, notes: list[str]) -> dict | None:
    from hloscope.trace.load import load_traces
    from hloscope.trace.stats import trace_stats

    try:
        traces = load_traces(run_dir)
    except InputError as error:
        notes.append(f"no trace read: {error}")
        return None
    for trace in traces:
        try:
            return trace_stats(trace)
        except HloscopeError as error:
            notes.append(f"trace {trace.file} not read: {error}")
    return None


def load_side(path: str | os.PathLike, module: str | None = None, stage: str | None = None,
              xla_cost: bool = True) -> Side:
    from hloscope.hlo.load import load_modules
    from hloscope.hlo.stats import stats_record

    path = Path(path)
    modules = load_modules(path)
    chosen = pick_module(modules, str(path), module, stage)
    # exactly the record `hloscope hlo stats --json` prints for this module
    side = Side(path=str(path), loaded=chosen, stats=stats_record(chosen, xla_cost=xla_cost), modules=modules)
    same_stage = list({m.module.name: m for m in modules
                       if m.stage == chosen.stage and m.module.name != chosen.module.name}.values())
    if same_stage and module is None:
        graphs = ", ".join(f"{m.module.name} ({m.module.instruction_count:,})" for m in same_stage[:8])
        side.notes.append(f"{len(same_stage) + 1} modules at this stage; only the largest, {chosen.module.name} "
                          f"({chosen.module.instruction_count:,} instructions), is compared, not the others: {graphs} "
                          "(torch_xla+compile runs one train step as several graphs; pick one with --module)")
    if path.is_dir() and (path / "run.json").is_file():
        from hloscope.rundir import load_run

        side.run = load_run(path)
        side.run.pop("_dir", None)
        side.trace = _trace_stats(path, side.notes)
    return side
