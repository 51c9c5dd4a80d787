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

import click
from rich.console import Console
from rich.text import Text

from hloscope.api import explain
from hloscope.cli.compare import DEFAULT_REPEATS
from hloscope.cli.options import REPEATS, TIMEOUT_S, FiniteFloatRange
from hloscope.cli.run import build_options, check_settings, common_options
from hloscope.explain.calibration import calibration
from hloscope.limits import MAX_HOST_DELAY_MS
from hloscope.models.presets import get_preset
from hloscope.modes import MODE_NAMES
from hloscope.render.calibration_term import render
from hloscope.runs.rundir import create_run_dir, measured_host_delay_s
from hloscope.runs.runner import run_variants
from hloscope.writing import atomic_output

CALIBRATION_FILE = "calibration.json"


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
    get_preset(values["model"], values.get("seq_len"))
    if values.get("target"):
        raise click.UsageError("calibrate times steps on this machine; --target compiles for another GPU")
    values["profile"] = True  # the delay is looked for in the profiled steps' ledger
    options = build_options(mode, **values)
    check_settings(options)
    delayed = f"A+{delay_ms:g}ms"
    variants = {"A": {}, "A'": {}, delayed: {"inject_host_delay_ms": delay_ms}}
    directory = create_run_dir(values["out"], None, prefix="calibrate")
    console = Console(stderr=True)
    console.print(f"calibrating {mode}: A, A' and A+{delay_ms:g} ms, {repeats} processes each -> {directory}",
                  highlight=False, markup=False)
    record = run_variants(mode, options, variants, directory, repeats, timeout_s,
                          on_start=lambda label: console.print(f"  running {label}", highlight=False, markup=False))
    labels = [f"{mode} [{name}]" for name in variants]
    if not any(e.status == "ok" and e.mode == labels[0] for e in record.modes):
        console.print(Text(f"{mode} never ran: nothing to calibrate (see {directory}/logs)", style="red"))
        sys.exit(1)
    report = explain(directory, baseline=labels[0])
    result = calibration(report, mode, str(labels[1]), str(labels[2]), delay_ms / 1e3,
                         measured_host_delay_s(directory, delayed))
    with atomic_output(directory / CALIBRATION_FILE, text=True, replace=False) as handle:
        handle.write(json.dumps(result.to_dict(), indent=2) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return

    render(result, Console())
    click.echo(f"calibration directory: {directory} (hloscope explain {directory} for the whole report)")
