"""`hloscope diff A B`: two runs, dump directories or HLO files side by side, with a structural matching."""

from __future__ import annotations

from pathlib import Path

import click

from hloscope.render.output import check_writable, choose_format, deliver


@click.command("diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), help="Render Markdown or self-contained HTML.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write to this new file instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@click.option("--module", help="Compare the module whose name contains this (default: the largest).")
@click.option("--stage", type=click.Choice(["before", "after"]),
              help="Compare modules before or after optimizations (default: after when present).")
@click.option("--xla-cost/--no-xla-cost", default=True, show_default=True,
              help="Also run XLA's own cost analysis on both modules (needs jaxlib), as `hloscope hlo stats` does.")
def command(a: Path, b: Path, as_json: bool, fmt: str | None, output: Path | None, force: bool,
            module: str | None, stage: str | None, xla_cost: bool) -> None:
    """Compare A and B (run directories, XLA dump directories or HLO text files)."""
    from hloscope.diff.adapt import graph_from_module
    from hloscope.diff.compare import TIMING_KEYS, diff_report
    from hloscope.diff.inputs import load_side
    from hloscope.diff.match import match_graphs
    from hloscope.run_fields import RunFields

    form = choose_format(as_json, fmt, output)
    check_writable(output, force)  # fail before the work, not after
    side_a, side_b = load_side(a, module, stage, xla_cost), load_side(b, module, stage, xla_cost)
    for side in (side_a, side_b):  # a wrong-typed timing field is one line naming run.json, not a crash later
        if side.run is not None:
            fields = RunFields(side.run, Path(side.path) / "run.json")
            for key in TIMING_KEYS:
                fields.number("timing", key)
    graph_a, graph_b = graph_from_module(side_a.loaded.module), graph_from_module(side_b.loaded.module)
    report = diff_report(side_a.stats, side_b.stats, graph_a, graph_b, match_graphs(graph_a, graph_b),
                         side_a.run, side_b.run, side_a.trace, side_b.trace)
    report["notes"] = [f"A: {n}" for n in side_a.notes] + [f"B: {n}" for n in side_b.notes]
    deliver(report, form, output, force, "diff")
