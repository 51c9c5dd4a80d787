"""The `hloscope` command line: a click group whose subcommands are imported only when used.

Each subcommand lives in its own module `hloscope.cli.<name>` and exposes a click command called `command`.
Lazy loading keeps `hloscope hlo ...` and `hloscope trace ...` free of torch and JAX start-up costs.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys

import click

from hloscope import __version__
from hloscope.errors import HloscopeError, one_line

# name -> (module, one-line help shown by `hloscope --help` without importing the module)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("hloscope.cli.run", "Time one mode's full training step and record everything in a run directory."),
    "compare": ("hloscope.cli.compare", "Run every mode in its own subprocess and compare step times."),
    "hlo": ("hloscope.cli.hlo", "Analyse XLA HLO text, dump directories and run directories."),
    "trace": ("hloscope.cli.trace", "Analyse profiler traces (xplane.pb, Kineto JSON)."),
    "diff": ("hloscope.cli.diff", "Compare two runs, dump directories or HLO modules side by side."),
    "explain": ("hloscope.cli.explain", "Each run against the baseline: the gap with its interval and verdict, and the measured parts that make it up."),
    "calibrate": ("hloscope.cli.calibrate", "Measure the smallest gap this machine resolves: an A/A pair and a known host delay, explained."),
    "replay": ("hloscope.cli.replay", "Replay a run's captured XLA program alone with jaxlib's XLA, timed."),
    "tensorboard": ("hloscope.cli.tensorboard", "Open every mode's traces in TensorBoard's profile plugin."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(COMMANDS[name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hloscope")
def cli() -> None:
    """Time a training step under PyTorch, torch.compile, PyTorch/XLA and JAX, and explain why the speeds differ."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn every HloscopeError into one line on stderr and its exit code."""
    try:
        _main(argv)
    finally:
        if argv is None:  # hloscope run as a program (tests and scripts pass argv): the process ends after this
            # Out of the collector's reach: the interpreter's shutdown collection would walk every object of the
            # imported modules (typing, click, msgspec), ~9 ms of a 0.22 s `trace stats` (benches/README.md).
            gc.freeze()


def _main(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="hloscope", standalone_mode=False)
    except HloscopeError as error:
        # one line, always: a newline or an escape sequence in a file name or a quoted input line is shown escaped
        click.echo(f"hloscope: error: {one_line(str(error))}", err=True)
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo("hloscope: interrupted", err=True)
        sys.exit(130)
    except click.UsageError as error:
        # click's own usage errors (a missing argument, an unknown option, a bad value) as the same one line, with
        # where to look instead of click's three (usage, hint, error)
        where = f" (see '{error.ctx.command_path} --help')" if error.ctx is not None else ""
        click.echo(f"hloscope: error: {one_line(error.format_message())}{where}", err=True)
        sys.exit(2)
    except click.ClickException as error:
        click.echo(f"hloscope: error: {one_line(error.format_message())}", err=True)
        sys.exit(error.exit_code)
    except PermissionError as error:
        # belt and braces: a file or folder the readers met that this user may not read or list (a dump directory
        # with mode 000) is one line naming it, like every other input error, never a traceback
        if error.filename is None:
            raise
        name = os.fsdecode(error.filename)
        click.echo(f"hloscope: error: {one_line(f'{name}: cannot read: {error.strerror or error}')}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("hloscope: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
