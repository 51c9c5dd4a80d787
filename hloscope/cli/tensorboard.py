"""`hloscope tensorboard`: every mode's traces in TensorBoard's profile plugin (XProf), runs named `<mode>/<comparison>`."""

from __future__ import annotations

import shutil
import signal
import statistics
import sys
import tempfile
import webbrowser
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hloscope.api import tensorboard_view
from hloscope.errors import InputError, one_line, warn
from hloscope.machine import free_port
from hloscope.render.progress import PhaseProgressBar
from hloscope.tensorboard.logdir import timed_median_ms
from hloscope.tensorboard.server import TensorBoardProcess, check_installed, is_loopback
from hloscope.tensorboard.tools import CPU_NOTE, is_cpu_only

# How often new or rewritten runs under DIR are added to the running TensorBoard.
SYNC_INTERVAL_S = 5.0
PROFILED_STEP_NOTE = ("the profiled steps (what XProf's overview shows: step markers) are not the timed steps: they run "
                      "under the profiler, which records every op (its overhead is in them), and they are few (the "
                      "first is the profiler's warm-up); compare modes with the timed medians (hloscope compare, "
                      "hloscope explain)")
NOT_TRAINING_NOTE = ("XProf's overview hides the step-time graph and the average step time (its data still holds them) "
                     "for profiles it does not take for training, which it decides only from XLA HLO gradient "
                     "metadata (JAX's transpose(jvp(...)) scopes), not from step markers; PyTorch runs have no HLO and "
                     "torch_xla's op names carry no backward scope, so these show as inference there (their profiled "
                     "step is in the table above)")
NO_OP_NAMES_NOTE = ("framework op stats: only IDLE for these XLA runs: their HLO carries no op_name metadata to name "
                    "each XLA op by (torch_xla records it with XLA_HLO_DEBUG=1, which `hloscope run --dump-hlo` sets)")
NO_MEMORY_NOTE = ("memory profile: empty for these runs: XProf draws it from allocator records on the host (PyTorch: "
                  "torch.profiler's profile_memory=True [memory] events, converted), which XLA on the CPU and "
                  "hloscope's runs do not record; the memory viewer shows each XLA module's buffer assignment")
OFFLINE_CHARTS_NOTE = ("XProf's pages load their chart library (Google Charts) from www.gstatic.com; it is not among "
                       "xprof's files, so without internet access its tables and charts stay blank (the trace viewer "
                       "and the data endpoints work offline)")


@click.command(name="tensorboard")
@click.argument("directory", required=False, default="traces", type=click.Path(path_type=Path))
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port to listen on [default: a free one].")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Anything but loopback makes the traces visible to the network.")
@click.option("--open", "open_browser", is_flag=True, help="Open the profile page in a web browser.")
@click.option("--progress/--no-progress", default=None,
              help="A progress bar while a Kineto trace is converted [default: on a terminal].")
def command(directory: Path, port: int | None, host: str, open_browser: bool, progress: bool | None) -> None:
    """Open every profile under DIRECTORY (default: traces/) in TensorBoard's profile plugin.

    Finds JAX and torch_xla xplane.pb sessions (plugins/profile/<session>/) and PyTorch Kineto traces
    (kineto/*.pt.trace.json[.gz], converted to XSpace), and names each run `<mode>/<comparison>`.
    Nothing under DIRECTORY is written: TensorBoard reads a generated logdir of links in a temporary directory.
    Stop with Ctrl-C.
    """
    version = check_installed()
    if not is_loopback(host):
        warn(f"binding to {host}: the traces become visible to everyone who can reach this machine on the network")
    workspace = Path(tempfile.mkdtemp(prefix="hloscope-tensorboard-"))
    server = None
    try:
        with _sigterm_as_interrupt():
            view, sessions = tensorboard_view(directory, workspace / "logdir", progress=_progress_bar(progress),
                                              on_problem=_warn_problem)
            server = TensorBoardProcess(view.root, host, port or free_port(host), workspace / "tensorboard.log")
            server.start()
            server.wait_ready()
            page = server.url + "#profile"
            _print_sessions(sessions, view)
            _print_tool_notes(sessions, view)
            click.echo(f"TensorBoard {version} with the profile plugin: {page}")
            click.echo("Press Ctrl-C to stop.")
            sys.stdout.flush()
            if open_browser:
                webbrowser.open(page)
            _serve(server, view)
    except KeyboardInterrupt:
        click.echo("hloscope: stopping TensorBoard", err=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workspace, ignore_errors=True)


def _progress_bar(asked: bool | None):
    """Phases of a Kineto trace's conversion on stderr when asked (--progress), or by default on a terminal."""
    if not (sys.stderr.isatty() if asked is None else asked):
        return None

    return PhaseProgressBar()


def _serve(server, view) -> None:
    """Keep the view in sync with DIRECTORY until TensorBoard exits (an error) or the user interrupts."""
    known = set(view.problems)
    while server.wait(SYNC_INTERVAL_S) is None:
        try:
            view.sync()
        except InputError:  # DIRECTORY emptied or removed meanwhile: keep serving what is there
            continue
        _warn_problems({name: why for name, why in view.problems.items() if name not in known})
        known = set(view.problems)
    raise server.exit_error()


def _print_sessions(sessions, view) -> None:
    table = Table(title="Runs", title_justify="left")
    # Never cut a run name: it is what to look for in TensorBoard.
    table.add_column("run", no_wrap=True, min_width=max(len(s.name) for s in sessions))
    table.add_column("format", no_wrap=True)
    table.add_column("profiled step\n(median, steps)", justify="right", no_wrap=True)
    table.add_column("timed step\n(median)", justify="right", no_wrap=True)
    table.add_column("profile", overflow="fold")
    for session in sessions:
        fmt = "xplane" if session.format == "xplane" else "Kineto -> XSpace"
        steps = view.step_ms.get(session.name) or []
        profiled = f"{statistics.median(steps):.2f} ms ({len(steps)})" if steps else "-"
        timed = timed_median_ms(session.run_dir)
        table.add_row(Text(one_line(session.name)), fmt, profiled, f"{timed:.2f} ms" if timed else "-",
                      Text(one_line(session.source.name)))
    Console(soft_wrap=True).print(table)
    click.echo(one_line(f"note: {PROFILED_STEP_NOTE}"))


def _print_tool_notes(sessions, view) -> None:
    """Say which runs XProf's tools cannot show and why, so an empty page is not a mystery."""
    cpu = [s.name for s in sessions if is_cpu_only(sorted(view.session_dir(s.name).glob("*.xplane.pb")))]
    if cpu:
        click.echo(one_line(f"note: {CPU_NOTE}: " + ", ".join(cpu)))
    inference = [s.name for s in sessions if s.name not in view.training]
    if inference:
        click.echo(one_line(f"note: {NOT_TRAINING_NOTE}: " + ", ".join(inference)))
    framework = [f"{s.name} ({view.framework_ops[s.name]:,} op executions)" for s in sessions
                 if view.framework_ops.get(s.name)]
    if framework:
        click.echo(one_line("note: framework op stats of the XLA runs name each XLA op by the framework op of its HLO "
                            "metadata (op_name), added to the view's copy of the xplane: " + ", ".join(framework)))
    unnamed = [s.name for s in sessions if s.format == "xplane" and not view.framework_ops.get(s.name)]
    if unnamed:
        click.echo(one_line(f"note: {NO_OP_NAMES_NOTE}: " + ", ".join(unnamed)))
    no_memory = [s.name for s in sessions if s.name not in view.memory_records]
    if no_memory:
        click.echo(one_line(f"note: {NO_MEMORY_NOTE}: " + ", ".join(no_memory)))
    click.echo(one_line(f"note: {OFFLINE_CHARTS_NOTE}"))
    filtered = [(s.name, *view.module_filters[s.name]) for s in sessions if s.name in view.module_filters]
    if filtered:
        click.echo(one_line("note: graph viewer and memory viewer list only the XLA modules that ran in the profiled "
                            "steps: " + "; ".join(f"{name}: {', '.join(kept)} ({dropped} other modules compiled in the "
                                                  "profiling window left out)" for name, kept, dropped in filtered)))


def _warn_problems(problems: dict[str, str]) -> None:
    for name, why in problems.items():
        _warn_problem(name, why)


def _warn_problem(name: str, why: str) -> None:
    warn(f"run {name} left out: {why}")


@contextmanager
def _sigterm_as_interrupt():
    """`kill PID` stops us like Ctrl-C does, so the TensorBoard child is always terminated."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
