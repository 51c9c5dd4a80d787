"""`hloscope hlo ...`: analyse XLA HLO text files, XLA dump directories and run directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hloscope.cli.options import SOURCE_DEPTHS, TOP_ROWS
from hloscope.errors import warn
from hloscope.hlo.stats import SOURCE_DEPTH, TOP

if TYPE_CHECKING:
    from hloscope.hlo.load import LoadedModule


@click.group("hlo")
def command() -> None:
    """Analyse XLA HLO text, dump directories and run directories."""


@command.command("stats")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print {\"modules\": [...]} as JSON instead of tables.")
@click.option("--xla-cost/--no-xla-cost", default=True, show_default=True,
              help="Also run XLA's own cost analysis (needs jaxlib) and show it beside hloscope's.")
@click.option("--top", default=TOP, show_default=True, type=TOP_ROWS, help="Rows in the per-instruction and per-source tables.")
@click.option("--source-depth", default=SOURCE_DEPTH, show_default=True, type=SOURCE_DEPTHS,
              help="Path components of metadata op_name kept when grouping kernels by source layer.")
@click.option("--launches", is_flag=True,
              help="With a thunk_sequence.txt beside a GPU module: list every launch (grid, block, shared memory).")
def stats(path: str, as_json: bool, xla_cost: bool, top: int, source_depth: int, launches: bool) -> None:
    """Kernels, fusions, ops, FLOPs and memory of every module in PATH (HLO file, XLA dump dir or run dir)."""
    from hloscope.hlo.load import load_modules
    from hloscope.hlo.stats import stats_records

    loaded = load_modules(path)
    results = stats_records(loaded, top, source_depth, launches, xla_cost)
    if Path(path).is_dir():  # only a run directory has a profile (the trace modules are not imported for a file)
        _add_measured(path, loaded, results, top)
    if as_json:
        click.echo(json.dumps({"modules": results}, indent=1))
        return
    from hloscope.render.hlo_term import render_stats

    render_stats(results)


def _add_measured(path: str, loaded: list[LoadedModule], results: list[dict[str, Any]], top: int) -> None:
    """Run directories with a profile: each module's measured time beside its HLO (`measured`)."""
    from hloscope.trace.hlo_map import measured_instructions
    from hloscope.trace.load import device_events_by_run

    by_run, unread = device_events_by_run(path)
    for error in unread:
        warn(f"no measured time from this run's profile: {error}")
    for item, result in zip(loaded, results):
        events = next((e for run, e in by_run.items() if Path(item.file).resolve().is_relative_to(run)), None)
        measured = measured_instructions(item.module, events, top) if events and item.stage == "after_optimizations" else None
        if measured is not None:
            result["measured"] = measured
