"""`hloscope trace ...`: analyse profiler traces (xplane.pb, Kineto JSON) from files, run directories and logdirs."""

from __future__ import annotations

import json
import sys

import click

from hloscope.api import trace_export, trace_job
from hloscope.cli.options import TOP_ROWS
from hloscope.errors import InputError, one_line
from hloscope.trace.results import ModeJob

# rich and the renderers are imported only where they are used, the tables and the progress bar: `trace stats --json`
# starts without them.


@click.group(name="trace")
def command() -> None:
    """Analyse profiler traces: xplane.pb (JAX, PyTorch/XLA, XProf) and Kineto / Chrome JSON (.json, .json.gz)."""


@command.command(name="stats")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print {\"traces\": [...]} as JSON instead of tables.")
@click.option("--top", default=10, show_default=True, type=TOP_ROWS, help="How many kernels to list.")
@click.option("--rank", "rank", type=click.IntRange(0), multiple=True, help="Only this rank (repeatable).")
@click.option("--ranks", "ranks_spec", default=None, help="Only these ranks: 0-7, 0,3,5-6.")
@click.option("--jobs", "-j", type=click.IntRange(1, 4096), default=None,
              help="Processes reading traces in parallel [default: every core].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Send the per-file work to the Dask distributed scheduler at ADDRESS (tcp://host:8786).")
@click.option("--state", "state_dir", default=None, type=click.Path(path_type=str),
              help="Keep each file's summary in DIR: an interrupted run restarts where it stopped.")
@click.option("--progress/--no-progress", default=None, help="A progress bar over files [default: on a terminal].")
def stats(path: str, as_json: bool, top: int, rank: tuple[int, ...], ranks_spec: str | None, jobs: int | None,
          scheduler: str | None, state_dir: str | None, progress: bool | None) -> None:
    """Steps, kernel counts, device time by category and top kernels of every trace at PATH
    (a trace file, a run directory or a TensorBoard log directory); for a directory of several ranks' or hosts'
    profiles, the job view too: per-rank steps and busy/idle, the slowest rank per step, collectives' waiting vs
    transfer, ranks whose kernel mix differs.

    A trace inside a run directory that recorded its optimized HLO (--dump-hlo) gets each XLA op's category from the
    HLO it executes; other executions are categorised by kernel name."""
    failures: list[InputError] = []
    document = trace_job(path, top, rank, ranks_spec, jobs, scheduler, state_dir, _progress_bar(progress), failures)
    if as_json:
        click.echo(json.dumps(document.to_dict(), indent=1))
    else:  # rich and the renderers only for the tables (--json is for scripts: 20-30 ms less start-up)
        from rich.console import Console

        from hloscope.render.job_term import render_job
        from hloscope.render.trace_term import render_modes, render_ranks, render_stats

        console = Console(markup=False)  # names and paths from the trace are text, never rich markup
        for result in document.traces:
            render_stats(console, result)
        modes_table = document.modes or []
        if modes_table:
            render_modes(console, modes_table)
        # the job view of each mode of a comparison, or of the one job
        views = (document.jobs or {}) if modes_table else {"": ModeJob(ranks=document.ranks, job=document.job)}
        for mode, found in views.items():
            label = f" of mode {mode}" if modes_table else ""
            if found.ranks:
                render_ranks(console, found.ranks, label)
            if found.job:
                render_job(console, found.job, label=label)
    _raise_failures(failures)
    sys.stdout.flush()


def _raise_failures(failures: list[InputError]) -> None:
    """Each trace that could not be read, one line each; the last one raised (its exit code)."""
    if failures:
        for error in failures[:-1]:
            click.echo(f"hloscope: error: {one_line(str(error))}", err=True)
        raise failures[-1]


def _progress_bar(asked: bool | None):
    """A bar over files on stderr when asked (--progress), or by default when stderr is a terminal."""
    if not (sys.stderr.isatty() if asked is None else asked):
        return None
    from hloscope.render.progress import FileProgressBar

    return FileProgressBar()


@command.command(name="export")
@click.argument("path", type=click.Path(path_type=str))
@click.argument("out", type=click.Path(path_type=str))
@click.option("--rank", "rank", type=click.IntRange(0), multiple=True, help="Only this rank (repeatable).")
@click.option("--ranks", "ranks_spec", default=None, help="Only these ranks: 0-7, 0,3,5-6.")
@click.option("--jobs", "-j", type=click.IntRange(1, 4096), default=None,
              help="Processes exporting traces in parallel [default: every core].")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Send the per-file work to the Dask distributed scheduler at ADDRESS (tcp://host:8786).")
@click.option("--progress/--no-progress", default=None, help="A progress bar over files [default: on a terminal].")
def export(path: str, out: str, rank: tuple[int, ...], ranks_spec: str | None, jobs: int | None,
           scheduler: str | None, progress: bool | None) -> None:
    """Every event of every trace at PATH as Parquet under OUT/rank=N/ (one file per trace; docs/trace.md has the
    schema and DuckDB queries). A file already exported from the same trace is kept: an interrupted export restarts
    where it stopped."""
    failures: list[InputError] = []
    done = trace_export(path, out, rank, ranks_spec, jobs, scheduler, _progress_bar(progress), failures)
    click.echo(f"{done.events:,} events of {done.traces} trace(s) in {out} ({done.reused} already exported, kept)")
    _raise_failures(failures)
