"""`hloscope trace ...`: analyse profiler traces (xplane.pb, Kineto JSON) from files, run directories and logdirs."""

from __future__ import annotations

import json
import sys

import click

from hloscope.cli.options import TOP_ROWS
from hloscope.errors import one_line


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
    from hloscope.trace import job
    from hloscope.trace.stats import mode_summary, rank_summary

    if scheduler is not None:
        job.scheduler_address(scheduler)
    files, ranks, modes = _selected_files(path, rank, ranks_spec)
    state = job.StateDir(state_dir, {"top": top}) if state_dir else None
    names = [str(file) for file in files]
    summaries = job.run_per_file(
        job.summarize_file, names, kwargs={"top": top}, jobs=jobs, scheduler=scheduler,
        progress=_progress_bar(progress),
        done=state.load(names) if state else None,
        on_result=(lambda index, result: state.save(names[index], result)) if state else None)
    for summary, file_rank, mode in zip(summaries, ranks, modes):
        if "error" not in summary and mode is not None:  # a run's trace: its mode, and its rank within that mode
            summary["stats"]["mode"] = mode
            summary["stats"]["rank"] = file_rank
    results = [summary["stats"] for summary in summaries if "error" not in summary]
    failures = [error for summary in summaries if (error := job.summary_error(summary)) is not None]
    modes_table = mode_summary(results)
    # A job view (ranks, slowest rank per step) within one mode only: the modes of a comparison are separate runs.
    per_mode: dict[str | None, tuple[list[dict], dict | None]] = {}
    for mode in dict.fromkeys(modes):
        picked = [index for index, file_mode in enumerate(modes) if file_mode == mode]
        mine = [summaries[index] for index in picked]
        ok = [summary["stats"] for summary in mine if "error" not in summary]
        view = job.job_view(mine, [ranks[index] for index in picked], top=top) if len(ok) >= 2 else None
        per_mode[mode] = (rank_summary(ok), view)
    if as_json:
        if modes_table:
            by_mode = {str(mode): {**({"ranks": table} if table else {}), **({"job": view} if view else {})}
                       for mode, (table, view) in per_mode.items() if table or view}
            document = {"traces": results, "modes": modes_table, **({"jobs": by_mode} if by_mode else {})}
        else:
            ranks_table, view = next((found for found in per_mode.values() if found[0] or found[1]), ([], None))
            document = {"traces": results, **({"ranks": ranks_table} if ranks_table else {}),
                        **({"job": view} if view else {})}
        click.echo(json.dumps(document, indent=1))
    else:  # rich and the renderers only for the tables (--json is for scripts: 0.05 s less start-up)
        from rich.console import Console

        from hloscope.render.job_term import render_job
        from hloscope.render.trace_term import render_modes, render_ranks, render_stats

        console = Console(markup=False)  # names and paths from the trace are text, never rich markup
        for result in results:
            render_stats(console, result)
        if modes_table:
            render_modes(console, modes_table)
        for mode, (ranks_table, view) in per_mode.items():
            label = f" of mode {mode}" if modes_table else ""
            if ranks_table:
                render_ranks(console, ranks_table, label)
            if view:
                render_job(console, view, label=label)
    if failures:
        for error in failures[:-1]:
            click.echo(f"hloscope: error: {one_line(str(error))}", err=True)
        raise failures[-1]
    sys.stdout.flush()


def _progress_bar(asked: bool | None):
    """A bar over files on stderr when asked (--progress), or by default when stderr is a terminal."""
    if not (sys.stderr.isatty() if asked is None else asked):
        return None
    from hloscope.render.progress import FileProgressBar

    return FileProgressBar()


def _selected_files(path: str, rank: tuple[int, ...], ranks_spec: str | None):
    """The trace files at PATH with their job ranks (within each mode for runs) and modes (None for traces outside
    hloscope runs), only the ranks asked for (--rank, --ranks)."""
    from hloscope.errors import UsageError
    from hloscope.trace import job
    from hloscope.trace.load import trace_files_and_modes

    try:
        wanted = job.parse_ranks(ranks_spec or "", rank)
    except ValueError as error:
        raise UsageError(f"--ranks: {error}") from error
    files, modes = trace_files_and_modes(path)
    ranks = job.ranks_within_modes(files, modes) if any(modes) else job.job_ranks(files)[0]
    if wanted:
        kept = [(file, r, m) for file, r, m in zip(files, ranks, modes) if r in wanted]
        if not kept:
            raise UsageError(f"no trace at {path} has rank {wanted} "
                             f"(ranks there: {', '.join(map(str, sorted(set(ranks))[:16]))})")
        files, ranks, modes = [f for f, _, _ in kept], [r for _, r, _ in kept], [m for _, _, m in kept]
    return files, ranks, modes


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
    from hloscope.trace import export as exporting
    from hloscope.trace import job

    if scheduler is not None:
        job.scheduler_address(scheduler)
    files, ranks, modes = _selected_files(path, rank, ranks_spec)
    tasks = exporting.plan(files, ranks, out, modes)
    results = job.run_per_file(
        exporting.export_task, tasks, jobs=jobs, scheduler=scheduler, label="export",
        progress=_progress_bar(progress))
    failures = [error for result in results if (error := job.summary_error(result)) is not None]
    written = [result for result in results if "error" not in result]
    rows = sum(result["rows"] for result in written)
    reused = sum(result["reused"] for result in written)
    click.echo(f"{rows:,} events of {len(written)} trace(s) in {out} ({reused} already exported, kept)")
    if failures:
        for error in failures[:-1]:
            click.echo(f"hloscope: error: {one_line(str(error))}", err=True)
        raise failures[-1]
