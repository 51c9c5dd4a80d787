"""`hloscope diff A B`: two runs, dump directories or HLO files side by side, with a structural matching."""

from __future__ import annotations

from pathlib import Path

import click

from hloscope.api import diff
from hloscope.render.output import check_writable, choose_format, deliver


@click.command("diff")
@click.argument("a", type=click.Path(path_type=Path))
@click.argument("b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), help="Render Markdown or self-contained HTML.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write to this new file instead of stdout ('-': stdout).")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@click.option("--module", help="Compare the module whose name contains this (default: the largest).")
@click.option("--stage", type=click.Choice(["before", "after"]),
              help="Compare modules before or after optimizations (default: after when present).")
@click.option("--xla-cost/--no-xla-cost", default=True, show_default=True,
              help="Also run XLA's own cost analysis on both modules (needs jaxlib), as `hloscope hlo stats` does.")
def command(a: Path, b: Path, as_json: bool, fmt: str | None, output: Path | None, force: bool,
            module: str | None, stage: str | None, xla_cost: bool) -> None:
    """Compare A and B (run directories, XLA dump directories or HLO text files)."""
    form = choose_format(as_json, fmt, output)
    check_writable(output, force)  # fail before the work, not after
    report = diff(a, b, module, stage, xla_cost)
    deliver(report.to_dict() if form == "json" else report, form, output, force, "diff")
