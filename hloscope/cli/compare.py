"""`hloscope compare`: every mode in its own fresh subprocess, one comparison directory, one table."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.status import Status
from rich.text import Text

from hloscope.api import compare, explain
from hloscope.cli import tested
from hloscope.cli.options import REPEATS, TIMEOUT_S
from hloscope.cli.run import build_options, common_options
from hloscope.errors import InputError
from hloscope.modes import (
    MODE_NAMES,
    MODES,
    parse_device_counts,
    parse_modes,
    run_label,
)
from hloscope.render.explain_term import render_tested
from hloscope.render.run_tables import audit_table, comparison_table, compiled_comparison_table, replay_summary_line
from hloscope.runs.audit import mismatch_lines
from hloscope.runs.parity import parity_lines
from hloscope.runs.records import AuditStage, ComparisonEntry, ComparisonRecord
from hloscope.runs.rundir import load_run

# Processes per mode by default: with 3 a side, explain's known answers on this project's loaded 2-core machine hold
# (identical configurations: no difference; a 3 ms host delay and the loader found); with 1, processes of one
# configuration differ by up to a third of a 1 ms CPU step and nothing shows it (docs/diff-explain.md).
DEFAULT_REPEATS = 3


@click.command(name="compare")
@click.option("--modes", default=None,
              help=f"Comma-separated modes: {','.join(MODE_NAMES)} "
                   "(default: every mode whose framework is installed).")
@common_options(device_counts=True)
@click.option("--timeout", "timeout_s", type=TIMEOUT_S, default=None,
              help="Give up on a mode after this many seconds (it is reported as failed).")
@click.option("--repeats", type=REPEATS, default=DEFAULT_REPEATS, show_default=True,
              help="Fresh processes per mode, run round-robin with the order rotated each round; explain pools them "
                   "and needs a gap larger than the spread between processes of one configuration (1: that spread "
                   "is unmeasured and explain's verdicts are provisional).")
@click.option("--json", "as_json", is_flag=True, help="Print comparison.json to stdout instead of the table.")
@click.option("--no-audit", is_flag=True,
              help="Skip the fairness audit (every mode set up once before timing to record the settings in effect).")
@click.option("--replay", "replay", is_flag=True,
              help="After timing, replay each XLA mode's program alone (hloscope replay, one subprocess each) so that "
                   "explain splits its step into program and framework overhead, measured. Implies --dump-hlo.")
@tested.options
def command(modes: str | None, timeout_s: float | None, as_json: bool, no_audit: bool = False, replay: bool = False,
            repeats: int = DEFAULT_REPEATS, test_hypotheses: bool = False, budget_min: float | None = None,
            test_repeats: int | None = None, rules: tuple[str, ...] = (), **values) -> None:
    """Run every mode in its own subprocess and compare step times."""
    tested.check_flags(test_hypotheses, budget_min, test_repeats, rules)
    counts = parse_device_counts(str(values.get("devices") or 1))
    values["devices"] = counts[0]  # the options of each run (and of the audit): the smallest count, set per run
    console = Console(stderr=True)
    _dump_for_replay(replay, values, console)
    options = build_options(MODES[0].name, **values)  # every run's options; compare sets each run's mode
    progress = TerminalProgress(console)
    try:
        record = compare(options, parse_modes(modes) if modes is not None else None, values["out"], repeats, counts,
                         timeout_s, audit=not no_audit, replay=replay, progress=progress)
    finally:  # a Ctrl-C or an error in the audit or a replay: the terminal gets its cursor and its output back
        progress.close()
    block = None
    if test_hypotheses and any(entry.status == "ok" for entry in record.modes):
        report = explain(record.dir)
        block = tested.test_hypotheses(report, record.dir, budget_min, test_repeats or repeats, console,
                                       list(rules))
    if as_json and block is not None:
        sys.stdout.write(json.dumps(dict(record.to_dict(), tested=block.to_dict()), indent=2) + "\n")
    elif as_json:
        sys.stdout.write(json.dumps(record.to_dict(), indent=2) + "\n")
    else:
        _print_outcome(record, values, len(counts) > 1, console)
        if block is not None:
            render_tested(block, Console())
        click.echo(f"comparison directory: {record.dir}")
        if values.get("dump_hlo") or values.get("profile"):
            click.echo(f"why the modes differ: hloscope explain {record.dir}")
    if not any(entry.status in ("ok", "compiled") for entry in record.modes):
        sys.exit(1)
    tested.exit_if_interrupted(block)


class TerminalProgress:
    """compare on the terminal (api.CompareProgress): what it skips, the audit's table, a progress bar with one line
    per finished process, one line per replay."""

    def __init__(self, console: Console):
        self.console = console
        self.status: Status | None = None
        self.bar: Progress | None = None
        self.task: TaskID | None = None
        self.by_devices = False

    def skipped(self, mode: str, why: str) -> None:
        self.console.print(Text.assemble((f"skipping {mode}", "yellow"), f": {why}"), highlight=False)

    def started(self, directory: Path, modes: list[str], device_counts: list[int], repeats: int) -> None:
        self.by_devices = len(device_counts) > 1
        at = f" on {', '.join(map(str, device_counts))} devices" if self.by_devices else ""
        times = f", {repeats} processes each" if repeats > 1 else ""
        self.console.print(f"comparing {', '.join(modes)}{at}{times} -> {directory}", highlight=False, markup=False)

    def auditing(self, mode: str) -> None:
        if self.status is None:
            self.status = self.console.status("fairness audit: setting every mode up")
            self.status.start()
        self.status.update(f"fairness audit: setting {mode} up")

    def audited(self, audit: AuditStage) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        self.console.print(audit_table(audit))
        for line in mismatch_lines(audit):
            self.console.print(Text(line, style="bold red"), highlight=False)
        if audit.ok:
            self.console.print(Text("fairness audit: no mismatch (settings that differ by design are marked)",
                                    style="green"), highlight=False)

    def running(self, runs: int) -> None:
        if self.status is not None:  # an audit cut short
            self.status.stop()
            self.status = None
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=self.console)
        self.bar.start()
        self.task = self.bar.add_task("starting", total=runs)

    def run_started(self, label: str) -> None:
        if self.bar is not None and self.task is not None:  # TextColumn reads markup
            self.bar.update(self.task, description=f"running [bold]{escape(label)}[/bold]")

    def run_phase(self, mode: str, where: str) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=f"running [bold]{escape(mode)}[/bold] ({escape(where)})")

    def run_done(self, entry: ComparisonEntry) -> None:
        colour = {"ok": "green", "compiled": "green", "refused": "yellow"}.get(entry.status or "", "red")
        median = f" {entry.median_s * 1e3:.2f} ms/step" if entry.median_s else ""
        self.console.print(Text.assemble(f"  {_label(entry, self.by_devices)}: ", (str(entry.status), colour),
                                         median), highlight=False)
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)

    def runs_done(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def close(self) -> None:
        """Stop whatever is still drawing (a status, the bar)."""
        self.runs_done()
        if self.status is not None:
            self.status.stop()
            self.status = None

    def replay_started(self, mode: str) -> None:
        if self.status is None:
            self.status = self.console.status("replaying")
            self.status.start()
        self.status.update(f"replaying {mode}'s program alone")

    def replay_done(self, mode: str, summary: dict) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        self.console.print(replay_summary_line(mode, summary), highlight=False, markup=False)


def _dump_for_replay(replay: bool, values: dict, console: Console) -> None:
    """--replay runs the dumped programs: the HLO is dumped for it, and the user told so."""
    if replay and not values.get("dump_hlo") and not values.get("target"):
        values["dump_hlo"] = True
        console.print("--replay: dumping the HLO (--dump-hlo) so that it can be replayed", highlight=False,
                      markup=False)


def _print_outcome(record: ComparisonRecord, values: dict, per_device_count: bool, console: Console) -> None:
    """The comparison table, then what went wrong: mismatched settings, parity, warnings, failed processes."""
    Console().print(comparison_table(record))
    if values.get("target"):
        _print_compiled(record)
    _print_new_mismatches(record, console)
    if record.parity:  # --check-parity
        lines = parity_lines(record.parity)
        colour = "green" if record.parity.ok else "red"
        for line in lines[:-1]:
            console.print(line, highlight=False, markup=False)
        console.print(Text(lines[-1], style=colour), highlight=False)
    for entry in record.modes:
        for warning in entry.warnings:  # noisy timing, recompiles in the window
            console.print(Text.assemble(("warning", "yellow"), f" {_label(entry, per_device_count)}: {warning}"),
                          highlight=False)
        if entry.status in ("ok", "compiled"):
            continue
        reason = (entry.error or "").split("; stderr ends with:")[0]  # the tail follows in full
        colour = "yellow" if entry.status == "refused" else "red"
        console.print(Text.assemble((f"{_label(entry, per_device_count)} {entry.status}", colour),
                                    f": {reason}"), highlight=False)
        if entry.stderr_tail:
            console.print(f"  last lines of its stderr ({entry.stderr_log}):", highlight=False, markup=False)
            console.print(entry.stderr_tail, markup=False, highlight=False)


def _print_new_mismatches(comparison: ComparisonRecord, console: Console) -> None:
    """After timing: mismatches in the timed runs that the audit before timing had not seen."""
    audit = comparison.audit
    if audit is None or audit.timed_runs is None:
        return
    seen = set(mismatch_lines(audit.before_timing)) if audit.before_timing is not None else set()
    for line in mismatch_lines(audit.timed_runs):
        if line not in seen:
            console.print(Text(f"{line} (in the timed runs)", style="bold red"), highlight=False)


def _label(entry: ComparisonEntry, by_devices: bool) -> str:
    """A comparison entry's name on the terminal: the mode, with its device count when the comparison has several."""
    mode = entry.mode or entry.dir
    label = run_label(mode, entry.devices) if by_devices else mode
    return f"{label} (process {entry.replicate})" if entry.replicate else label


def _print_compiled(comparison: ComparisonRecord) -> None:
    records = []
    for entry in comparison.modes:
        try:
            records.append(load_run(comparison.dir / entry.dir, check_artifacts=False))
        except InputError:
            continue
    if records:
        Console().print(compiled_comparison_table(records))
    for record in records:  # --max-batch: the answer in words, with what it rests on
        if record.max_batch is not None and record.max_batch.message:
            click.echo(f"{record.mode} max batch: {record.max_batch.message}")


