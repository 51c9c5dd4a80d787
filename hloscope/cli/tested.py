"""`--test-hypotheses` of explain and compare on the terminal: the options, the plan before anything runs, then each
run as it starts (the testing itself is hloscope/explain/tested.py, through `api.hypothesis_tests`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text

from hloscope.api import hypothesis_tests
from hloscope.cli.options import FiniteFloatRange
from hloscope.explain.experiments import TESTABLE_RULES, UNTESTABLE, TestedBlock
from hloscope.explain.report import ExplainReport
from hloscope.explain.tested import DEFAULT_BUDGET_MIN, DEFAULT_BUDGET_MIN_CPU, TestingPlan
from hloscope.limits import MAX_BUDGET_MIN, MAX_TEST_REPEATS
from hloscope.runs.experiments import CTRL_C

BUDGET_MIN = FiniteFloatRange(0.1, MAX_BUDGET_MIN)


def test_hypotheses(report: ExplainReport, out: Path, budget_min: float | None, repeats: int, console: Console,
                    rules: list[str] | None = None) -> TestedBlock:
    """Plan, print the plan, run and judge the tests of every significant gap of `report`, telling `console` of each
    run; sets and returns `report.tested`."""
    return hypothesis_tests(report, out, budget_min, repeats, rules or (),
                            on_plan=lambda plan: _print_plan(plan, console), progress=ConsoleProgress(console))


class ConsoleProgress:
    """The re-runs as they start, one line each on stderr."""

    def __init__(self, console: Console):
        self.console = console

    def pair(self, slow: str, fast: str) -> None:
        self.console.print(Text(f"testing {slow} against {fast}", style="bold"), highlight=False)

    def configurations(self, count: int, processes: int, directory: Path) -> None:
        self.console.print(f"{count} configurations, {processes} process(es) each -> {directory}", highlight=False,
                           markup=False)

    def run_started(self, label: str, expected_s: float, used_s: float, budget_s: float) -> None:
        self.console.print(f"  running {label} (~{expected_s:.0f} s; {_clock(used_s)} of {_clock(budget_s)} used)",
                           highlight=False, markup=False)


def _print_plan(plan: TestingPlan, console: Console) -> None:
    """The plan before anything runs: per gap, the settings to change, the hypotheses that cannot be tested and why,
    the runs and their expected time against the budget."""
    console.print(Text(f"testing hypotheses: budget {_clock(plan.budget_s)}", style="bold"), highlight=False)
    if not plan.pairs:
        console.print("  no significant gap between configurations that can be run again: nothing to test",
                      highlight=False, markup=False)
    for pair in plan.pairs:
        console.print(f"  {pair.slow} (slower) against {pair.fast}:", highlight=False, markup=False)
        for test in pair.tests:
            if test.untestable is None:
                console.print(f"    test {test.title}: {test.change} ({', '.join(test.rules)})", highlight=False,
                              markup=False)
            else:
                console.print(f"    cannot test {', '.join(test.rules)}: {test.untestable}", highlight=False,
                              markup=False)
        if not pair.runnable:
            continue
        for name, each in plan.seconds_per_process(pair).items():
            console.print(f"    run [{name}]: ~{each:.0f} s per process x {plan.repeats}", highlight=False,
                          markup=False)
    total = plan.expected_total_s
    if total:
        fits = "fits" if total <= plan.budget_s else "exceeds it: fewer processes, or what fits, will run"
        console.print(f"  expected ~{_clock(total)} in all (more where two or more changes each close part of a gap: "
                      f"they are then run together); the budget {fits}", highlight=False, markup=False)


def exit_if_interrupted(block: TestedBlock | None) -> None:
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
    function = click.option("--test-repeats", type=click.IntRange(1, MAX_TEST_REPEATS), default=None,
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
