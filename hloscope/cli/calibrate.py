"""`hloscope calibrate`: before trusting a comparison on a shared machine, measure what this machine can resolve.

Three configurations of one mode, each in `--repeats` fresh processes, interleaved as compare runs them: A, A' (the
same options: an A/A pair) and A with `--delay` ms slept on the host before every step (`--inject-host-delay`,
outside any annotation). Then explain against A: the smallest gap this machine resolves at these settings, whether
A' was called different, and whether the delay was found, how large, and in which ledger node. Everything is written
into a `calibrate-<UTC>` directory under --out (calibration.json beside comparison.json), so that `explain`,
`trace stats` and `tensorboard` read it too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console

from hloscope.api import calibrate
from hloscope.cli.compare import DEFAULT_REPEATS
from hloscope.cli.options import REPEATS, TIMEOUT_S, FiniteFloatRange
from hloscope.cli.run import build_options, common_options
from hloscope.limits import MAX_HOST_DELAY_MS
from hloscope.modes import MODE_NAMES
from hloscope.render.calibration_term import render


@click.command(name="calibrate")
@click.option("--mode", type=click.Choice(MODE_NAMES), default="jax", show_default=True,
              help="The mode whose measurements are calibrated.")
@common_options
@click.option("--repeats", type=REPEATS, default=DEFAULT_REPEATS, show_default=True,
              help="Fresh processes per configuration (as compare --repeats).")
@click.option("--delay", "delay_ms", type=FiniteFloatRange(0.01, MAX_HOST_DELAY_MS), default=3.0, show_default=True,
              help="Milliseconds slept on the host before every step of the third configuration.")
@click.option("--timeout", "timeout_s", type=TIMEOUT_S, default=None,
              help="Give up on a process after this many seconds (it is reported as failed).")
@click.option("--json", "as_json", is_flag=True, help="Print calibration.json to stdout instead of the summary.")
def command(mode: str, repeats: int, delay_ms: float, timeout_s: float | None, as_json: bool, **values) -> None:
    """Measure the smallest gap this machine resolves, and check explain on an A/A pair and a known host delay."""
    options = build_options(mode, **values)  # calibrate checks them, and profiles every run
    console = Console(stderr=True)

    def announce(directory: Path) -> None:
        console.print(f"calibrating {mode}: A, A' and A+{delay_ms:g} ms, {repeats} processes each -> {directory}",
                      highlight=False, markup=False)

    result = calibrate(options, values["out"], repeats, delay_ms, timeout_s, on_directory=announce,
                       on_start=lambda label: console.print(f"  running {label}", highlight=False, markup=False))
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return
    render(result, Console())
    click.echo(f"calibration directory: {result.dir} (hloscope explain {result.dir} for the whole report)")
