"""`--test-hypotheses` of explain and compare: for each significant gap, run the slower configuration again with one
suspected setting changed to the faster one's, interleaved with both (hloscope/runs/experiments.py), and judge what
each change closed (hloscope/explain/experiments.py). The plan and its expected time are printed first, then each run
as it starts; the re-runs are ordinary run directories in `tested-<UTC>` comparison directories beside the runs
explained."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from statistics import fmean
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from hloscope.backends.base import RunOptions
from hloscope.cli.options import FiniteFloatRange
from hloscope.errors import InputError, UsageError
from hloscope.explain.experiments import (
    METHOD,
    TESTABLE_RULES,
    UNTESTABLE,
    TestedBlock,
    closing_tests,
    conclude,
    expected_run_s,
    fit_repeats,
    interaction,
    joint_variants,
    plan_pairs,
)
from hloscope.explain.inputs import load_summaries
from hloscope.machine import check_threads
from hloscope.runs import xla_flags
from hloscope.runs.experiments import CTRL_C, run_configurations
from hloscope.runs.records import RunRecord
from hloscope.runs.rundir import RUN_FILE, create_run_dir, load_run
from hloscope.runs.settings import IN_EFFECT, in_effect

# Minutes of re-runs allowed when --budget is not given: small on a CPU (tiny presets), larger on an accelerator.
DEFAULT_BUDGET_MIN_CPU = 10.0
DEFAULT_BUDGET_MIN = 60.0
BUDGET_MIN = FiniteFloatRange(0.1, 24 * 60.0)
# A re-run that takes this many times its expected seconds (plus a minute) is stopped and counts as failed.
TIMEOUT_FACTOR = 3.0


def default_budget_min(platform: str) -> float:
    return DEFAULT_BUDGET_MIN_CPU if platform in ("cpu", "") else DEFAULT_BUDGET_MIN


def test_hypotheses(report, base: Path, budget_min: float | None, repeats: int, console: Console,
                    rules: list[str] | None = None):
    """Plan, run and judge the tests of every significant gap of `report`; sets and returns `report.tested`."""
    options, expected, platform = _recorded(report)
    plans = plan_pairs(report, options, rules)
    _refuse_what_this_machine_cannot_run(plans)
    budget_s = 60 * (budget_min if budget_min is not None else default_budget_min(platform))
    block = TestedBlock(budget_s, method=dict(METHOD))
    started = time.monotonic()
    deadline = started + budget_s
    _print_plan(plans, expected, repeats, budget_s, console)

    def on_start(label: str, needed: float) -> None:
        used = time.monotonic() - started
        console.print(f"  running {label} (~{needed:.0f} s; {_clock(used)} of {_clock(budget_s)} used)",
                      highlight=False, markup=False)

    def launch(configurations: dict[str, dict[str, Any]], per_process: dict[str, float], prefix: str):
        fitted = fit_repeats(list(per_process.values()), repeats, deadline - time.monotonic())
        if fitted == 0:
            return None, 0
        directory = create_run_dir(base, None, prefix=prefix)
        timeout_s = TIMEOUT_FACTOR * max(per_process.values()) + 60
        console.print(f"{len(configurations)} configurations, {fitted} process(es) each -> {directory}",
                      highlight=False, markup=False)
        launched = run_configurations({name: _options(fields) for name, fields in configurations.items()}, directory,
                                      fitted, per_process, deadline, timeout_s, on_start=on_start)
        return launched, fitted

    for plan in plans:
        if block.stopped is not None or not plan.runnable:
            why = [f"not run: {block.stopped}"] if block.stopped is not None and plan.runnable else []
            block.pairs.append(conclude(plan, {}, {"baseline": "", "slower": ""}, None, 0, why))
            continue
        variants = plan.variants()
        per_process = {name: expected.get(plan.fast if name == "baseline" else plan.slow, 0.0) for name in variants}
        console.print(Text(f"testing {plan.slow} against {plan.fast}", style="bold"), highlight=False)
        launched, fitted = launch(variants, per_process, "tested")
        if launched is None:
            needed = sum(per_process.values())
            block.stopped = f"the time budget was spent (one process of each configuration needs ~{needed:.0f} s)"
            block.pairs.append(conclude(plan, {}, {"baseline": "", "slower": ""}, None, 0,
                                        [f"not run: {block.stopped}"]))
            continue
        summaries = {s.mode: s for s in load_summaries(launched.directory)[0]}
        result = conclude(plan, summaries, launched.labels, str(launched.directory), fitted, launched.not_run)
        block.stopped = launched.stopped
        closing = closing_tests(result.tests)
        if len(closing) >= 2:  # the interaction: each change alone again and all together, side by side
            name, changes = joint_variants(closing)
            joint = {"baseline": plan.fast_options, "slower": plan.slow_options,
                     **{variant: dict(plan.slow_options, **settings) for variant, settings in changes.items()}}
            per_joint = {key: per_process["baseline" if key == "baseline" else "slower"] for key in joint}
            joined = launch(joint, per_joint, "tested-joint")[0] if block.stopped is None else None
            if joined is None:
                reason = block.stopped or "the time budget was spent"
                result.interaction = interaction(closing, {}, {}, None, [f"not run: {reason}"])
            else:
                joint_summaries = {s.mode: s for s in load_summaries(joined.directory)[0]}
                result.interaction = interaction(closing, joint_summaries, joined.labels, name, joined.not_run)
                block.stopped = joined.stopped
        block.pairs.append(result)
    block.elapsed_s = time.monotonic() - started
    report.tested = block
    return block


def _refuse_what_this_machine_cannot_run(plans) -> None:
    """A thread count above the CPUs this machine gives hloscope (runs made on a larger machine) cannot be re-run
    here: the test says so instead of starting a run that would stop at once."""
    for plan in plans:
        recorded = []  # the pair itself was recorded with --threads N: every re-run of it asks for N again
        for side in (plan.slow_options, plan.fast_options):
            try:
                check_threads(side.get("threads"))
            except UsageError as error:
                recorded.append(str(error))
        for test in plan.runnable:
            if recorded:
                test.untestable = f"this machine cannot re-run the pair as it was recorded: {recorded[0]}"
            elif test.setting == "threads" and isinstance(test.fast_value, int):
                try:
                    check_threads(test.fast_value)
                except UsageError as error:
                    test.untestable = f"this machine cannot run the slower configuration so: {error}"


def _recorded(report) -> tuple[dict[str, dict[str, Any]], dict[str, float], str]:
    """Per configuration label: its run options (run.json config, for RunOptions) and the seconds one process is
    expected to take (the mean over its processes); the platform the runs ran on."""
    options: dict[str, dict[str, Any]] = {}
    expected: dict[str, float] = {}
    platform = ""
    for label, summary in report.summaries.items():
        typed: list[RunRecord] = []
        for run_dir in summary.run_dirs:
            try:
                typed.append(load_run(run_dir, check_artifacts=False))
            except InputError:
                continue
        # the first process's JSON: its config, as written, gives the re-runs their options
        first = typed[0].to_dict() if typed else {}
        config = first.get("config")
        if not isinstance(config, dict) or summary.status != "ok":
            continue
        # the XLA flags the configuration ran with, given or inherited: every re-run of it sets them, whatever this
        # process's XLA_FLAGS (None: not recorded, the re-run inherits)
        try:
            flags = xla_flags.recorded(first)
        except ValueError as error:
            raise InputError(typed[0].file, f"not a valid run.json: its XLA flags: {error}") from None
        # and what it had in effect without asking (threads, donation, compile mode): a tested setting is compared
        # with it
        options[label] = dict(config, xla_flags=flags, **{IN_EFFECT: in_effect(typed[0])})
        expected[label] = fmean(expected_run_s(record) for record in typed)
        platform = platform or summary.platform
    return options, expected, platform


def _options(config: dict[str, Any]):
    """RunOptions from a recorded config: its fields only, and timed here (no --target compile)."""
    names = {f.name for f in dataclasses.fields(RunOptions)}
    return RunOptions(**{k: v for k, v in config.items() if k in names and k != "target"})


def _print_plan(plans, expected: dict[str, float], repeats: int, budget_s: float, console: Console) -> None:
    """The plan before anything runs: per gap, the settings to change, the hypotheses that cannot be tested and why,
    the runs and their expected time against the budget."""
    console.print(Text(f"testing hypotheses: budget {_clock(budget_s)}", style="bold"), highlight=False)
    if not plans:
        console.print("  no significant gap between configurations that can be run again: nothing to test",
                      highlight=False, markup=False)
    total = 0.0
    for plan in plans:
        console.print(f"  {plan.slow} (slower) against {plan.fast}:", highlight=False, markup=False)
        for test in plan.tests:
            if test.untestable is None:
                console.print(f"    test {test.title}: {test.change} ({', '.join(test.rules)})", highlight=False,
                              markup=False)
            else:
                console.print(f"    cannot test {', '.join(test.rules)}: {test.untestable}", highlight=False,
                              markup=False)
        if not plan.runnable:
            continue
        seconds = {name: expected.get(plan.fast if name == "baseline" else plan.slow, 0.0) for name in plan.variants()}
        for name, each in seconds.items():
            console.print(f"    run [{name}]: ~{each:.0f} s per process x {repeats}", highlight=False, markup=False)
        total += repeats * sum(seconds.values())
    if total:
        fits = "fits" if total <= budget_s else "exceeds it: fewer processes, or what fits, will run"
        console.print(f"  expected ~{_clock(total)} in all (more where two or more changes each close part of a gap: "
                      f"they are then run together); the budget {fits}", highlight=False, markup=False)


def exit_if_interrupted(block) -> None:
    """After the report of a test stopped by Ctrl-C is delivered: exit as an interrupted command does (130)."""
    if block is not None and block.stopped == CTRL_C:
        sys.exit(130)


def check_flags(test_hypotheses: bool, budget_min: float | None, test_repeats: int | None,
                rules: tuple[str, ...]) -> None:
    """--budget, --test-repeats and --hypothesis only mean something with --test-hypotheses."""
    given = [flag for flag, value in (("--budget", budget_min), ("--test-repeats", test_repeats),
                                      ("--hypothesis", rules or None)) if value is not None]
    if given and not test_hypotheses:
        raise click.UsageError(f"{', '.join(given)} only applies with --test-hypotheses" if len(given) == 1 else
                               f"{', '.join(given)} only apply with --test-hypotheses")


def output_folder(paths: tuple[Path, ...]) -> Path:
    """Where the re-runs go: inside the comparison (or folder of runs) explained, or beside the run directory given
    first."""
    first = paths[0]
    return first if first.is_dir() and not (first / RUN_FILE).exists() else first.parent


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}"


def options(function):
    """--test-hypotheses, --hypothesis, --budget and --test-repeats, shared by explain and compare."""
    function = click.option("--hypothesis", "rules", multiple=True,
                            type=click.Choice(list(dict.fromkeys([*TESTABLE_RULES, *UNTESTABLE]))),
                            help="With --test-hypotheses: test this hypothesis (repeatable) on every configuration "
                                 "against the baseline, whether or not explain found it or the gap "
                                 "significant.")(function)
    function = click.option("--test-repeats", type=click.IntRange(1, 20), default=None,
                            help="Fresh processes per configuration of the re-runs (default: compare's --repeats "
                                 "default, 3); fewer run when the budget is short.")(function)
    function = click.option("--budget", "budget_min", type=BUDGET_MIN, default=None, metavar="MINUTES",
                            help=f"Minutes the re-runs may take (default: {DEFAULT_BUDGET_MIN_CPU:g} on a CPU, "
                                 f"{DEFAULT_BUDGET_MIN:g} otherwise); the plan is printed first.")(function)
    return click.option("--test-hypotheses", is_flag=True,
                        help="For each significant gap, run the slower configuration again with each suspected "
                             "setting (precision, data path, attention, batch, XLA flags, donation, compile mode, "
                             "fullgraph, threads) changed to the faster "
                             "one's, and report the share of the gap each change closes.")(function)
