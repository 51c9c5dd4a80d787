"""`hloscope trace ...`: analyse profiler traces (xplane.pb, Kineto JSON) from files, run directories and logdirs."""

from __future__ import annotations

import json
import sys

import click

from hloscope.errors import HloscopeError, InputError


@click.group(name="trace")
def command() -> None:
    """Analyse profiler traces: xplane.pb (JAX, PyTorch/XLA, XProf) and Kineto / Chrome JSON (.json, .json.gz)."""


@command.command(name="stats")
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print {\"traces\": [...]} as JSON instead of tables.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(1, 1000), help="How many kernels to list.")
def stats(path: str, as_json: bool, top: int) -> None:
    """Steps, kernel counts, device time by category and top kernels of every trace at PATH
    (a trace file, a run directory or a TensorBoard log directory).

    A trace inside a run directory that recorded its optimized HLO (--dump-hlo) gets each XLA op's category from the
    HLO it executes; other executions are categorised by kernel name."""
    from rich.console import Console

    from hloscope.trace.load import load_trace, trace_files, trace_rank
    from hloscope.trace.report import rank_summary, render_ranks, render_stats
    from hloscope.trace.stats import trace_stats

    results: list[dict] = []
    failures: list[HloscopeError] = []
    console = Console(markup=False)  # names and paths from the trace are text, never rich markup
    resolvers: dict = {}
    for file in trace_files(path):
        try:
            result = trace_stats(load_trace(file), top=top, categories=_resolver_for(file, resolvers))
        except InputError as error:  # one broken trace does not hide the others
            failures.append(error)
            continue
        result["rank"] = trace_rank(file)
        results.append(result)
        if not as_json:
            render_stats(console, result)
    ranks = rank_summary(results)
    if as_json:
        click.echo(json.dumps({"traces": results, **({"ranks": ranks} if ranks else {})}, indent=1))
    elif ranks:
        render_ranks(console, ranks)
    if failures:
        for error in failures[:-1]:
            click.echo(f"hloscope: error: {error}", err=True)
        raise failures[-1]
    sys.stdout.flush()


def _resolver_for(file, cache: dict):
    """The HLO category resolver of the run directory `file` lies in (one per run), or None: no run, no HLO, or HLO
    that cannot be read (then a warning, and categories by name)."""
    from hloscope.trace.program_categories import resolver_for_run, run_dir_of

    run = run_dir_of(file)
    if run is None:
        return None
    if run not in cache:
        try:
            cache[run] = resolver_for_run(run)
        except HloscopeError as error:
            click.echo(f"hloscope: warning: {error}: categories of {run} by kernel name only", err=True)
            cache[run] = None
    return cache[run]
