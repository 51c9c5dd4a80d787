"""`hloscope explain COMPARISON`: every mode's step-time gap to the fastest, broken into ranked contributors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hloscope.render.output import check_writable, choose_format, emit


@click.command("explain")
@click.argument("comparison", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), help="Render Markdown or self-contained HTML.")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write to this new file instead of stdout.")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
def command(comparison: Path, as_json: bool, fmt: str | None, output: Path | None, force: bool) -> None:
    """Explain the step-time gaps of a `hloscope compare` directory (or any folder of run directories)."""
    from hloscope.errors import InputError
    from hloscope.explain.engine import explain
    from hloscope.explain.inputs import load_summaries

    form = choose_format(as_json, fmt, output)
    check_writable(output, force)  # fail before the work, not after
    if not comparison.exists():
        raise InputError(comparison, "no such file or directory")
    summaries, meta = load_summaries(comparison)
    report = explain(summaries)
    report["comparison"] = meta
    if form == "json":
        emit(json.dumps(report, indent=2, default=str) + "\n", output, force)
    elif form == "md":
        from hloscope.render import explain_md

        emit(explain_md.render(report), output, force)
    elif form == "html":
        from hloscope.render import explain_html

        emit(explain_html.render(report), output, force)
    else:
        from rich.console import Console

        from hloscope.render import explain_term

        explain_term.render(report, Console())
    _fail_on_unreadable_runs(summaries)


def _fail_on_unreadable_runs(summaries) -> None:
    """A run whose run.json cannot be read is shown in the report with the others, and still fails the command:
    one line per broken run on stderr, exit code 2 (bad input)."""
    unreadable = [summary for summary in summaries if summary.status == "unreadable"]
    for summary in unreadable:
        click.echo(f"hloscope: error: {summary.notes[0]}", err=True)
    if unreadable:
        sys.exit(2)
