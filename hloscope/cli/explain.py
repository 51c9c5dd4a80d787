"""`hloscope explain [COMPARISON]`: every mode's step-time gap to the fastest, broken into ranked contributors."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from hloscope.api import explain
from hloscope.cli import tested
from hloscope.cli.compare import DEFAULT_REPEATS
from hloscope.cli.options import MIN_GAP
from hloscope.errors import one_line
from hloscope.explain.inputs import latest_comparison
from hloscope.explain.tested import output_folder
from hloscope.render.output import STDOUT, check_writable, choose_format, deliver, fresh_path


@click.command("explain")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--baseline", metavar="RUN", help="The run every gap is measured to (a mode or run label as the report "
                                                 "names it); default: the fastest.")
@click.option("--min-gap", type=MIN_GAP, default=0.05, show_default=True,
              help="Smallest gap, as a fraction of the baseline's median step, that counts as a difference.")
@click.option("--json", "as_json", is_flag=True, help="Print the explanation as JSON.")
@click.option("--format", "fmt", type=click.Choice(["md", "html"]), help="Render Markdown or self-contained HTML.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Write to this new file instead of stdout ('-': stdout). --format html without -o writes a new "
                   "explain.html (explain-2.html, ...) in the comparison directory.")
@click.option("--force", is_flag=True, help="Overwrite --output if it exists.")
@tested.options
def command(paths: tuple[Path, ...], baseline: str | None, min_gap: float, as_json: bool, fmt: str | None,
            output: Path | None, force: bool, test_hypotheses: bool = False, budget_min: float | None = None,
            test_repeats: int | None = None, rules: tuple[str, ...] = ()) -> None:
    """Explain the step-time gaps between runs: a `hloscope compare` directory, run directories or folders of runs
    (any number, together); without PATHS, the newest comparison under ./traces. Each run is tested against the
    baseline (the fastest unless --baseline): a gap inside the noise is reported as no difference."""
    tested.check_flags(test_hypotheses, budget_min, test_repeats, rules)
    to_stdout = output == STDOUT
    form = choose_format(as_json, fmt, output)
    check_writable(output, force)  # fail before the work, not after
    if not paths:
        paths = (latest_comparison(Path("traces")),)
        click.echo(f"explaining {paths[0]} (the newest comparison under traces/)", err=True)
    summaries: list = []
    report = explain(*paths, baseline=baseline, min_gap=min_gap, summaries=summaries)
    if test_hypotheses:
        _fail_on_unreadable_runs(summaries)  # nothing is re-run from runs that cannot be read
        tested.test_hypotheses(report, output_folder(paths), budget_min, test_repeats or DEFAULT_REPEATS,
                               Console(stderr=True), list(rules))
    comparison = paths[0]
    if form == "html" and output is None and not to_stdout:  # a page is for a browser, not a terminal
        output = fresh_path(comparison if comparison.is_dir() else comparison.parent, "explain", ".html")
    deliver(report.to_dict() if form == "json" else report, form, output, force, "explain")
    _fail_on_unreadable_runs(summaries)
    tested.exit_if_interrupted(report.tested)


def _fail_on_unreadable_runs(summaries) -> None:
    """A run that cannot be read (its directory missing or not one, its run.json broken or refused) is shown in the
    report as `unreadable` with the others, and a corrupt file of a readable run (HLO, trace, replay record) as a note
    on the run; each still fails the command: one line on stderr naming the file and why, exit code 2 (bad input)."""
    unreadable = [summary.notes[0] for summary in summaries if summary.status == "unreadable"]
    corrupt = [error for summary in summaries if summary.status != "unreadable" for error in summary.unreadable_files]
    for error in unreadable + corrupt:
        click.echo(f"hloscope: error: {one_line(error)}", err=True)
    if unreadable or corrupt:
        sys.exit(2)

