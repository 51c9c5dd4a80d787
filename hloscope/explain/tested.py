"""Testing explain's hypotheses by re-runs (`--test-hypotheses` of explain and compare, `api.hypothesis_tests`): for
each significant gap, the slower configuration is run again with one suspected setting changed to the faster one's,
interleaved with both (hloscope/runs/experiments.py), and what each change closed is judged
(hloscope/explain/experiments.py). Two or more changes that each close part of a gap are then run together, to see
whether they add up. The re-runs are ordinary run directories in `tested-<UTC>` comparison directories under `out`.

Nothing here prints: the plan is returned before anything runs (`plan_testing`), and `run_testing` tells a
`TestingProgress` of each pair, directory and process as it starts.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any, Protocol

from hloscope.backends.base import RunOptions
from hloscope.errors import InputError, UsageError
from hloscope.explain.experiments import (
    METHOD,
    PairPlan,
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
from hloscope.explain.report import ExplainReport
from hloscope.machine import check_threads
from hloscope.runs import xla_flags
from hloscope.runs.experiments import Launched, run_configurations
from hloscope.runs.records import RunRecord
from hloscope.runs.rundir import RUN_FILE, create_run_dir, load_run
from hloscope.runs.settings import IN_EFFECT, in_effect

# Minutes of re-runs allowed when no budget is given: small on a CPU (tiny presets), larger on an accelerator.
DEFAULT_BUDGET_MIN_CPU = 10.0
DEFAULT_BUDGET_MIN = 60.0
# A re-run that takes this many times its expected seconds (plus a minute) is stopped and counts as failed.
TIMEOUT_FACTOR = 3.0


def default_budget_min(platform: str) -> float:
    return DEFAULT_BUDGET_MIN_CPU if platform in ("cpu", "") else DEFAULT_BUDGET_MIN


@dataclass
class TestingPlan:
    """What will run, before anything does: each significant gap's tests (those that cannot be tested say why), the
    processes per configuration, the budget, and the seconds one process of each configuration is expected to take
    (the mean over its recorded processes)."""

    pairs: list[PairPlan]
    repeats: int
    budget_s: float
    expected_s: dict[str, float]  # configuration label -> seconds per process
    options: dict[str, dict[str, Any]]  # configuration label -> its recorded run options

    def seconds_per_process(self, pair: PairPlan) -> dict[str, float]:
        """The pair's variants (baseline, slower, each change) -> expected seconds of one process."""
        return {name: self.expected_s.get(pair.fast if name == "baseline" else pair.slow, 0.0)
                for name in pair.variants()}

    @property
    def expected_total_s(self) -> float:
        return sum(self.repeats * sum(self.seconds_per_process(pair).values()) for pair in self.pairs if pair.runnable)


class TestingProgress(Protocol):
    """Told what the re-runs are doing, as they do it (the command prints it; a notebook may ignore it)."""

    def pair(self, slow: str, fast: str) -> None:
        """The tests of one gap start."""

    def configurations(self, count: int, processes: int, directory: Path) -> None:
        """`count` configurations, `processes` each, are about to run into `directory`."""

    def run_started(self, label: str, expected_s: float, used_s: float, budget_s: float) -> None:
        """One process of configuration `label` starts; `used_s` of the budget is spent."""


class QuietProgress:
    """A TestingProgress that is told everything and says nothing."""

    def pair(self, slow: str, fast: str) -> None:
        return None

    def configurations(self, count: int, processes: int, directory: Path) -> None:
        return None

    def run_started(self, label: str, expected_s: float, used_s: float, budget_s: float) -> None:
        return None


def plan_testing(report: ExplainReport, budget_min: float | None = None, repeats: int = 3,
                 rules: list[str] | None = None) -> TestingPlan:
    """The tests of every significant gap of `report` (with `rules`, those hypotheses on every configuration against
    the baseline, found or not), within `budget_min` minutes (default: DEFAULT_BUDGET_MIN_CPU on a CPU,
    DEFAULT_BUDGET_MIN otherwise)."""
    options, expected, platform = recorded_options(report)
    pairs = plan_pairs(report, options, rules)
    refuse_what_this_machine_cannot_run(pairs)
    budget_s = 60 * (budget_min if budget_min is not None else default_budget_min(platform))
    return TestingPlan(pairs, repeats, budget_s, expected, options)


def run_testing(report: ExplainReport, plan: TestingPlan, out: Path,
                progress: TestingProgress | None = None) -> TestedBlock:
    """Run and judge `plan`'s tests, each pair's configurations into a new tested-<UTC> directory under `out`; the
    block of results, also set as `report.tested`. The budget stops what does not fit (its tests say so); Ctrl-C
    stops the runs and the block says so (`stopped`)."""
    told = progress or QuietProgress()
    block = TestedBlock(plan.budget_s, method=dict(METHOD))
    started = time.monotonic()
    deadline = started + plan.budget_s

    def launch(configurations: dict[str, dict[str, Any]], per_process: dict[str, float],
               prefix: str) -> tuple[Launched | None, int]:
        fitted = fit_repeats(list(per_process.values()), plan.repeats, deadline - time.monotonic())
        if fitted == 0:
            return None, 0
        directory = create_run_dir(out, None, prefix=prefix)
        timeout_s = TIMEOUT_FACTOR * max(per_process.values()) + 60
        told.configurations(len(configurations), fitted, directory)
        launched = run_configurations(
            {name: run_options(fields) for name, fields in configurations.items()}, directory, fitted, per_process,
            deadline, timeout_s,
            on_start=lambda label, needed: told.run_started(label, needed, time.monotonic() - started, plan.budget_s))
        return launched, fitted

    for pair in plan.pairs:
        if block.stopped is not None or not pair.runnable:
            why = [f"not run: {block.stopped}"] if block.stopped is not None and pair.runnable else []
            block.pairs.append(conclude(pair, {}, {"baseline": "", "slower": ""}, None, 0, why))
            continue
        per_process = plan.seconds_per_process(pair)
        told.pair(pair.slow, pair.fast)
        launched, fitted = launch(pair.variants(), per_process, "tested")
        if launched is None:
            needed = sum(per_process.values())
            block.stopped = f"the time budget was spent (one process of each configuration needs ~{needed:.0f} s)"
            block.pairs.append(conclude(pair, {}, {"baseline": "", "slower": ""}, None, 0,
                                        [f"not run: {block.stopped}"]))
            continue
        summaries = {s.mode: s for s in load_summaries(launched.directory)[0]}
        result = conclude(pair, summaries, launched.labels, str(launched.directory), fitted, launched.not_run)
        block.stopped = launched.stopped
        closing = closing_tests(result.tests)
        if len(closing) >= 2:  # the interaction: each change alone again and all together, side by side
            name, changes = joint_variants(closing)
            joint = {"baseline": pair.fast_options, "slower": pair.slow_options,
                     **{variant: dict(pair.slow_options, **settings) for variant, settings in changes.items()}}
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


def refuse_what_this_machine_cannot_run(pairs: list[PairPlan]) -> None:
    """A thread count above the CPUs this machine gives hloscope (runs made on a larger machine) cannot be re-run
    here: the test says so instead of starting a run that would stop at once."""
    for pair in pairs:
        recorded = []  # the pair itself was recorded with --threads N: every re-run of it asks for N again
        for side in (pair.slow_options, pair.fast_options):
            try:
                check_threads(side.get("threads"))
            except UsageError as error:
                recorded.append(str(error))
        for test in pair.runnable:
            if recorded:
                test.untestable = f"this machine cannot re-run the pair as it was recorded: {recorded[0]}"
            elif test.setting == "threads" and isinstance(test.fast_value, int):
                try:
                    check_threads(test.fast_value)
                except UsageError as error:
                    test.untestable = f"this machine cannot run the slower configuration so: {error}"


def recorded_options(report: ExplainReport) -> tuple[dict[str, dict[str, Any]], dict[str, float], str]:
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


def run_options(config: dict[str, Any]) -> RunOptions:
    """RunOptions from a recorded config: its fields only, and timed here (no --target compile)."""
    names = {f.name for f in dataclasses.fields(RunOptions)}
    return RunOptions(**{k: v for k, v in config.items() if k in names and k != "target"})


def output_folder(paths: tuple[Path, ...]) -> Path:
    """Where the re-runs of explaining `paths` go: inside the comparison (or folder of runs) explained, or beside the
    run directory given first."""
    first = paths[0]
    return first if first.is_dir() and not (first / RUN_FILE).exists() else first.parent
