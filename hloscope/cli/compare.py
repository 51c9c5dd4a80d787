"""`hloscope compare`: every mode in its own fresh subprocess, one comparison directory, one table."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from hloscope.api import explain
from hloscope.backends.devices import check_devices
from hloscope.cli import tested
from hloscope.cli.options import REPEATS, TIMEOUT_S
from hloscope.cli.run import build_options, check_target_settings, common_options
from hloscope.errors import InputError, UsageError
from hloscope.machine import check_threads
from hloscope.models.presets import get_preset
from hloscope.modes import (
    FRAMEWORK_IMPORTS,
    MODE_NAMES,
    MODES,
    TARGET_MODES,
    get_mode,
    parse_device_counts,
    parse_modes,
    run_label,
    settings_refusal,
)
from hloscope.render.explain_term import render_tested
from hloscope.render.run_tables import audit_table, comparison_table, compiled_comparison_table, replay_summary_line
from hloscope.runs.audit import mismatch_lines, run_audit
from hloscope.runs.parity import parity_lines
from hloscope.runs.records import AuditStage, ComparisonEntry, ComparisonRecord, ReplayPlan, amended_comparison
from hloscope.runs.replays import replay_comparison
from hloscope.runs.rundir import create_run_dir, load_run, write_comparison
from hloscope.runs.runner import PlannedRun, run_comparison
from hloscope.targets.run_target import check_target_run

# Processes per mode by default: with 3 a side, explain's known answers on this project's loaded 2-core machine hold
# (identical configurations: no difference; a 3 ms host delay and the loader found); with 1, processes of one
# configuration differ by up to a third of a 1 ms CPU step and nothing shows it (docs/diff-explain.md).
DEFAULT_REPEATS = 3


def available_modes() -> tuple[list[str], list[str]]:
    """(modes whose packages are installed, modes that are not) - checked without importing any framework."""
    available: list[str] = []
    missing: list[str] = []
    for mode in MODES:
        (available if all(find_spec(p) is not None for p in mode.packages) else missing).append(mode.name)
    return available, missing


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
    get_preset(values["model"], values.get("seq_len"))
    tested.check_flags(test_hypotheses, budget_min, test_repeats, rules)
    counts = parse_device_counts(str(values.get("devices") or 1))
    values["devices"] = counts[0]  # the options of each run (and of the audit): the smallest count, set per run below
    console = Console(stderr=True)
    _check_replay_and_target(replay, values, counts, console)
    check_target_settings(values.get("target"), values.get("donate"), values.get("compile_mode"),
                          bool(values.get("fullgraph")), values.get("threads"))
    check_threads(values.get("threads"))
    selected, plan = _select_modes(modes, values, counts, console)
    by_devices = plan is not None
    plan = _refuse_settings(selected, values, plan)
    runnable = [mode for mode in selected if plan is None or any(p.mode == mode and p.refused is None for p in plan)]
    if not runnable and plan:  # every selected mode refuses: one line, as run refuses, and no directory
        raise UsageError(next(str(p.refused) for p in plan if p.refused is not None))
    if values.get("target"):
        repeats = 1  # compiled for another GPU, nothing timed: one process says it all
    options_for = lambda mode: build_options(mode, **values)  # noqa: E731
    config = {k: v for k, v in options_for(selected[0]).to_json().items() if k not in ("mode", "compile_model")}
    config["modes"] = selected
    config["repeats"] = repeats
    if by_devices:
        config["devices"] = counts  # every mode at each count (comparison.json's entries each hold their own)
    comparison_dir = create_run_dir(values["out"], None, prefix="compare")
    at = f" on {', '.join(map(str, counts))} devices" if by_devices else ""
    times = f", {repeats} processes each" if repeats > 1 else ""
    console.print(f"comparing {', '.join(selected)}{at}{times} -> {comparison_dir}", highlight=False, markup=False)
    try:
        audit_before = (None if values.get("target") or no_audit or not runnable else
                        _audit(runnable, options_for, timeout_s, console))
    except KeyboardInterrupt:  # a Ctrl-C during the audit leaves no empty comparison directory behind
        with contextlib.suppress(OSError):
            comparison_dir.rmdir()
        raise
    record = _run_with_progress(selected, options_for, comparison_dir, config, console, timeout_s=timeout_s,
                                audit_before=audit_before, plan=plan, repeats=repeats, by_devices=by_devices)
    if replay:
        record = _replay(record, values, timeout_s, console)
    block = None
    if test_hypotheses and any(entry.status == "ok" for entry in record.modes):
        report = explain(comparison_dir)
        block = tested.test_hypotheses(report, comparison_dir, budget_min, test_repeats or repeats, console,
                                       list(rules))
    if as_json and block is not None:
        sys.stdout.write(json.dumps(dict(record.to_dict(), tested=block.to_dict()), indent=2) + "\n")
    elif as_json:
        sys.stdout.write(json.dumps(record.to_dict(), indent=2) + "\n")
    else:
        _print_outcome(record, values, by_devices, console)
        if block is not None:
            render_tested(block, Console())
        click.echo(f"comparison directory: {comparison_dir}")
        if values.get("dump_hlo") or values.get("profile"):
            click.echo(f"why the modes differ: hloscope explain {comparison_dir}")
    if not any(entry.status in ("ok", "compiled") for entry in record.modes):
        sys.exit(1)
    tested.exit_if_interrupted(block)


def _check_replay_and_target(replay: bool, values: dict, counts: list[int], console: Console) -> None:
    """--replay and --target exclude each other; --replay needs the HLO dumped; --target takes one device count."""
    if replay and values.get("target"):
        raise click.UsageError("--replay times the programs on this machine; --target compiles for another GPU "
                               "without running anything: use one or the other")
    if replay and not values.get("dump_hlo"):
        values["dump_hlo"] = True  # replay runs the dumped program
        console.print("--replay: dumping the HLO (--dump-hlo) so that it can be replayed", highlight=False,
                      markup=False)
    if values.get("max_batch") and not values.get("target"):
        raise click.UsageError("--max-batch searches by compiling for a GPU: give --target h100|a100|PATH")
    if values.get("target") and len(counts) > 1:
        raise click.UsageError("--target compiles for one GPU without running anything: give one --devices count")


def _select_modes(modes: str | None, values: dict, counts: list[int], console: Console) -> tuple[list[str], Any]:
    """The modes to run (every installed one by default, those that compile for --target, those that run on the
    device count), and the plan of (mode, devices) runs when several device counts are given (else None)."""
    if modes is None:
        selected, missing = available_modes()
        for mode in missing:
            console.print(Text.assemble((f"skipping {mode}", "yellow"), ": its framework is not installed"),
                          highlight=False)
    else:
        selected = parse_modes(modes)
    if values.get("target"):
        selected = _target_modes(selected, values["target"], console, bool(values.get("max_batch")))
    plan = None
    if len(counts) > 1:
        plan = _device_plan(selected, counts, values["batch_size"])
    else:
        selected = _devices_modes(selected, counts[0], values["batch_size"], modes is None, console)
    if not selected:
        raise click.UsageError(f"no mode to run: install {_packages_hint()}")
    return selected, plan


def _run_with_progress(selected: list[str], options_for, comparison_dir: Path, config: dict, console: Console,
                       **run: Any) -> ComparisonRecord:
    """run_comparison with a progress bar and one line per finished process."""
    plan, repeats, by_devices = run["plan"], run["repeats"], run.pop("by_devices")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console)
    with progress:
        task = progress.add_task("starting", total=(len(plan) if plan is not None else len(selected)) * repeats)

        def started(mode: str) -> None:
            progress.update(task, description=f"running [bold]{escape(mode)}[/bold]")  # TextColumn reads markup

        def done(entry: ComparisonEntry) -> None:
            colour = {"ok": "green", "compiled": "green", "refused": "yellow"}.get(entry.status or "", "red")
            median = f" {entry.median_s * 1e3:.2f} ms/step" if entry.median_s else ""
            progress.console.print(Text.assemble(f"  {_label(entry, by_devices)}: ",
                                                 (str(entry.status), colour), median), highlight=False)
            progress.advance(task)

        def phase(mode: str, where: str) -> None:
            progress.update(task, description=f"running [bold]{escape(mode)}[/bold] ({escape(where)})")

        return run_comparison(selected, options_for, comparison_dir, config, on_mode_start=started,
                              on_mode_phase=phase, on_mode_done=done, **run)


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


def _replay(comparison: ComparisonRecord, values: dict, timeout_s: float | None,
            console: Console) -> ComparisonRecord:
    """compare --replay: each XLA mode's run replayed in its own subprocess (hloscope/runs/replays.py), one line each;
    comparison.json rewritten with the replays (a replay that fails is recorded with its error, nothing else lost)."""
    with console.status("replaying") as status:
        done = replay_comparison(comparison, values["steps"], values["warmup"], values["device"], timeout_s,
                                 on_start=lambda mode: status.update(f"replaying {mode}'s program alone"),
                                 on_done=lambda mode, replay: console.print(replay_summary_line(mode, replay),
                                                                            highlight=False, markup=False))
    replays = {entry.dir: replay for entry, replay in done}
    # each replayed mode's entry gets its summary
    modes = [msgspec.structs.replace(entry, replay=replays[entry.dir]) if entry.dir in replays else entry
             for entry in comparison.modes]
    replayed = amended_comparison(comparison, modes=modes, replay=ReplayPlan(
        steps=values["steps"], warmup=values["warmup"], device=values["device"],
        how="hloscope replay RUN_DIR, one subprocess per XLA mode, after the timing"))
    write_comparison(replayed.dir, replayed)
    return replayed


def _audit(selected: list[str], options_for, timeout_s: float | None, console: Console) -> AuditStage:
    """The fairness audit before timing (hloscope/runs/audit.py): the table on stderr, each mismatch in red."""
    with console.status("fairness audit: setting every mode up") as status:
        record = run_audit(selected, options_for, timeout_s,
                           on_mode=lambda mode: status.update(f"fairness audit: setting {mode} up"))
    console.print(audit_table(record))
    for line in mismatch_lines(record):
        console.print(Text(line, style="bold red"), highlight=False)
    if record.ok:
        console.print(Text("fairness audit: no mismatch (settings that differ by design are marked)", style="green"),
                      highlight=False)
    return record


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


def _refuse_settings(selected: list[str], values: dict, plan):
    """The modes that refuse --donate/--no-donate, --compile-mode or --fullgraph are planned as refused with the one
    line why, and the others run; the plan as it was (None: one run per mode) when no mode refuses."""
    refusals = {mode: settings_refusal(mode, values.get("donate"), values.get("compile_mode"),
                                       bool(values.get("fullgraph"))) for mode in selected}
    if not any(refusals.values()):
        return plan
    if plan is None:
        return [PlannedRun(mode, refused=refusals[mode]) for mode in selected]
    return [p if p.refused is not None or refusals[p.mode] is None else dataclasses.replace(p, refused=refusals[p.mode])
            for p in plan]


def _device_plan(selected: list[str], counts: list[int], batch_size: int):
    """`--devices 1,2,4`: every selected mode at each count, the smallest count first; a count the mode refuses (one
    device only, a batch the count does not divide) is planned as refused with check_devices' one line."""
    plan = []
    for count in counts:
        for mode in selected:
            try:
                check_devices(mode, count, batch_size)
            except UsageError as error:
                plan.append(PlannedRun(mode, count, refused=str(error)))
                continue
            plan.append(PlannedRun(mode, count))
    return plan


def _target_modes(selected: list[str], target: str, console: Console, max_batch: bool = False) -> list[str]:
    """--target compiles the modes that have a target capture (hloscope.modes.TARGET_MODES): skip the other modes;
    refuse a bad target file up front."""
    kept = [mode for mode in selected if mode in TARGET_MODES]
    for mode in selected:
        if mode not in kept:
            console.print(Text.assemble((f"skipping {mode}", "yellow"), ": --target needs an XLA graph "
                                        f"({', '.join(sorted(TARGET_MODES))})"), highlight=False)
    if kept:
        check_target_run(kept[0], target, max_batch)
    return kept


def _packages_hint() -> str:
    """`torch, torch_xla or jax (with flax, optax, transformers)`: the frameworks, then the other packages."""
    main = list(FRAMEWORK_IMPORTS)
    extra = sorted({p for m in MODES for p in m.packages} - set(main))
    named = ", ".join(main[:-1]) + f" or {main[-1]}" if len(main) > 1 else main[0]
    return f"{named} (with {', '.join(extra)})" if extra else named


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


def _devices_modes(selected: list[str], devices: int, batch_size: int, by_default: bool, console: Console) -> list[str]:
    """--devices N > 1: modes named with --modes must all support it (else one line naming the mode); the default
    set keeps those that do, saying which it skips."""
    if devices > 1 and by_default:
        for mode in [m for m in selected if not get_mode(m).data_parallel]:
            console.print(Text.assemble((f"skipping {mode}", "yellow"), f": runs on one device only (--devices {devices})"),
                          highlight=False)
        selected = [m for m in selected if get_mode(m).data_parallel]
    for mode in selected:
        check_devices(mode, devices, batch_size)
    return selected
