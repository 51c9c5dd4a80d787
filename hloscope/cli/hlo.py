"""`hloscope hlo ...`: analyse XLA HLO text files, XLA dump directories and run directories."""

from __future__ import annotations

import json

import click

from hloscope.api import hlo_stats
from hloscope.cli.options import SOURCE_DEPTHS, TOP_ROWS
from hloscope.hlo.stats import SOURCE_DEPTH, TOP

# The renderers (rich) are imported only for the tables: `hlo stats --json` starts 20-35 ms sooner without them.


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
    results = hlo_stats(path, xla_cost, top, source_depth, launches)
    if as_json:
        click.echo(json.dumps({"modules": [result.to_dict() for result in results]}, indent=1))
        return
    from hloscope.render.hlo_term import render_stats

    render_stats(results)

