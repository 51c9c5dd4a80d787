"""Controlled re-runs of explain's hypotheses (`explain --test-hypotheses`): which settings to change, how long the
runs should take, and what each re-run concludes. Pure: reads explain's report and the re-runs' summaries, no I/O.

A hypothesis says why the slower configuration of a pair may be slower ("the precision differs", "the input pipeline
is in the step"). Where it names a setting that hloscope sets for a run (`--precision`, `--data`, `--attention`,
`--batch-size`, `--xla-flags`: the XLA flags in effect, given or inherited; `--donate`, `--compile-mode`,
`--fullgraph`, `--threads`: what the run had in effect, asked for or its mode's own), the slower configuration is run
again with only that setting changed to the faster one's value,
interleaved with both original configurations in fresh processes, and the share of the gap the change closed is

    share = (gap before - gap after) / gap before,  gap before = slow - fast,  gap after = changed - fast,

each a difference of pooled medians, with a 95% interval from independent two-level bootstraps (processes, then steps)
of the three configurations. The verdict reads that interval:
- the gap did not reproduce in the re-run (its interval includes zero, it is below the practical threshold, or the
  process medians do not tell the slower configuration from the faster: a one-sided Student's t at PROCESS_ALPHA,
  variance pooled over the three configurations): "cannot tell" (the steps' bootstrap alone resamples the same few
  processes, and identical configurations whose processes landed apart would get a "gap" to refute);
- the interval lies below MEANINGFUL_SHARE (the change closes no meaningful part, or widens the gap): "refuted";
- the change moved the step by no more than the spread between processes of one configuration (the faster one's
  only where its processes do not vary significantly more than those of the two compared: a one-sided F-test at
  VARIANCE_ALPHA, significance.variance_larger_p), or by an amount the process medians do not tell from that
  variation (Student's t, variance pooled over the slower and the changed configuration, the two compared: a much
  faster baseline varies more relative to its step, and pooling its variation would hide closures the two show
  plainly; p not below PROCESS_ALPHA): "cannot tell" (the closure is inside the machine's own variation: never
  confirmed by noise);
- the interval lies above MEANINGFUL_SHARE and the estimate reaches CONFIRMED_SHARE: "confirmed";
- the interval lies above zero otherwise: "partly";
- anything else (the interval holds both no closure and a meaningful one): "cannot tell".
A hypothesis whose setting hloscope does not set, whose setting is the same on both sides, or whose value the slower
side's mode cannot take (donation in eager PyTorch, a compile mode where nothing calls torch.compile), is "could not
test", with the reason, and nothing runs for it. When two or more changes each close part of the gap (confirmed or
partly: effects that add up split the gap, so that at most one of them can reach CONFIRMED_SHARE), one more re-run
applies them all, beside each of them alone again, and the joint closure is set against the sum of the single ones
measured beside it (the interaction). On a busy machine the configurations' threads may wait for a CPU differently
(a process that sleeps is favoured by the scheduler when it wakes, a burst of load meets one process and not the
next). A thread waits in proportion to the time it runs at a given load, so each configuration's wait beyond its
share (`contention`) is what differs: a closure's verdict must hold with the two sides' difference taken out of what
it closed, and the interaction's with the same combination taken out of the excess, or it is "cannot tell".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from statistics import median
from typing import Any

import numpy as np

from hloscope.explain.report import ExplainReport, ModeResult
from hloscope.explain.summary import ModeSummary, contention
from hloscope.modes import BY_NAME, donation_in_effect, setting_refusal
from hloscope.runs.records import RunRecord
from hloscope.runs.settings import IN_EFFECT
from hloscope.significance import (
    CONFIDENCE,
    PROCESS_ALPHA,
    VARIANCE_ALPHA,
    ProcessVariation,
    percentile_interval,
    pooled_median_resamples,
    pooled_process_variation,
    process_spread,
    process_test,
    variance_larger_p,
)

# A change that closes less than this share of the gap explains no meaningful part of it.
MEANINGFUL_SHARE = 0.2
# A change that closes at least this share of the gap (and whose interval clears MEANINGFUL_SHARE) is the cause.
CONFIRMED_SHARE = 0.5
# The gap before must still be a practical difference in the re-run: this fraction of the faster side's step.
MIN_GAP = 0.05
# The interaction's interval: an interaction is reported at the processes' own level (PROCESS_ALPHA), so that effects
# built to add up are called overlapping or compounding by chance in at most 0.5% of re-runs.
INTERACTION_CONFIDENCE = 1 - PROCESS_ALPHA
# Seconds a fresh process spends before its first step (interpreter, framework import, model build) when the run
# record does not say how long the process took.
STARTUP_S = 10.0

CONFIRMED, PARTLY, REFUTED, CANNOT_TELL, NOT_TESTED = "confirmed", "partly", "refuted", "cannot tell", "could not test"

# Hypothesis rule -> the run option (RunOptions field) whose value it blames.
RULE_SETTINGS = {"compute_dtype": "precision", "matmul_precision": "precision", "input_pipeline": "data",
                 "attention": "attention", "batch_size": "batch_size", "xla_flags": "xla_flags"}
# Hypotheses that blame a setting only where the two sides differ in it as said: copies and transposes are the
# donation's (--donate) where the faster side donates its state and the slower does not; otherwise they follow from
# the framework's layout choices (UNTESTABLE).
DONATION_RULES = ("layout_changes",)
# Configuration difference (hloscope.runs.settings) -> the run option that sets it.
# env.XLA_FLAGS: the flags in effect, whether given with --xla-flags or inherited (hloscope.runs.xla_flags.recorded
# gives each side's requested flags, hloscope's own dump flags and the device count --devices set left out)
DIFFERENCE_SETTINGS = {"precision": "precision", "data": "data", "attention": "attention", "batch_size": "batch_size",
                       "env.XLA_FLAGS": "xla_flags", "donate": "donate", "compile_mode": "compile_mode",
                       "fullgraph": "fullgraph", "threads": "threads", "env.OMP_NUM_THREADS": "threads",
                       "inject_host_delay_ms": "inject_host_delay_ms"}
# Differences named by a prefix -> the run option that sets them: the thread figures each framework records
# (threads.cpu_affinity, threads.torch_num_threads...) follow from --threads
DIFFERENCE_PREFIXES = {"threads.": "threads"}
SETTING_FLAGS = {"precision": "--precision", "data": "--data", "attention": "--attention",
                 "batch_size": "--batch-size", "xla_flags": "--xla-flags", "donate": "--donate",
                 "compile_mode": "--compile-mode", "fullgraph": "--fullgraph", "threads": "--threads",
                 "inject_host_delay_ms": "--inject-host-delay"}
# Settings whose value a run has in effect without asking (hloscope.runs.settings.in_effect): a side whose options
# leave them unset is compared with what it had
IN_EFFECT_SETTINGS = ("donate", "compile_mode", "fullgraph", "threads")
# Why a setting cannot be changed when a side's run record does not say what it was (default: not recorded).
NOT_RECORDED = {"xla_flags": "the XLA flags in effect are not recorded on both sides (a run record without its "
                             "environment): export the faster run's XLA_FLAGS, or give --xla-flags, and run again",
                "threads": "the CPUs a run could use are not recorded on both sides (environment.threads."
                           "cpu_affinity): give --threads to both and run again",
                "donate": "donation does not apply to one side (eager PyTorch updates its state in place) or is not "
                          "recorded: there is no donation to match",
                "compile_mode": "one side does not call torch.compile: there is no compile mode to match",
                "fullgraph": "one side does not call torch.compile: there is no fullgraph to match"}
# Hypotheses no run option of hloscope can undo, and why.
UNTESTABLE = {
    "recompilation": "compilations inside the timed window follow from the program and its inputs; no hloscope "
                     "setting removes them",
    "eager_ops": "dispatching framework ops one by one is what the mode is; only another mode removes it, and the "
                 "mode is what the comparison compares",
    "kernel_launches": "the number of executions per step follows from the framework's compiler; no hloscope setting "
                       "changes it",
    "layout_changes": "copies and transposes follow from the framework's layout choices, which hloscope does not set; "
                      "its donation of the state (--donate) is tested only where the faster side donates and the "
                      "slower does not",
    "more_compute": "the FLOPs follow from the compiled program; no hloscope setting changes it",
    "memory_traffic": "the bytes accessed follow from the compiled program's fusion; no hloscope setting changes it",
    "cpu_contention": "other processes held the CPUs: nothing in the run's settings; re-run on a quieter machine",
}
# Configuration differences hloscope records but does not set for a run (by prefix), and why.
UNSET_DIFFERENCES: dict[str, str] = {}
# Rule -> its title where a rule is tested without having fired (the titles hloscope.explain.hypotheses gives).
RULE_TITLES = {"compute_dtype": "Different compute precision", "matmul_precision": "Different matmul precision",
               "input_pipeline": "Input pipeline in the step", "attention": "Different attention implementation",
               "batch_size": "Different batch size", "xla_flags": "Different XLA flags",
               "layout_changes": "Layout changes (copies, transposes)"}
TESTABLE_RULES = tuple(RULE_SETTINGS) + DONATION_RULES
TITLES = {"precision": "matching the precision", "data": "matching the data path", "attention":
          "matching the attention implementation", "batch_size": "matching the batch size",
          "xla_flags": "matching the XLA flags", "donate": "matching the donation of the state",
          "compile_mode": "matching torch.compile's mode", "fullgraph": "matching torch.compile's fullgraph",
          "threads": "matching the CPU threads", "inject_host_delay_ms": "matching the injected host delay"}


@dataclass
class PlannedTest:
    """One setting to change in the slower configuration, and the hypotheses (rules) it tests; `untestable` says why
    a hypothesis cannot be tested (then `setting` may be None)."""

    rules: list[str]
    title: str
    setting: str | None = None
    slow_value: Any = None
    fast_value: Any = None
    untestable: str | None = None

    @property
    def variant(self) -> str:
        """The re-run's name: the slower configuration with this setting changed."""
        return variant_name(str(self.setting), self.fast_value)

    @property
    def change(self) -> str:
        """The change in flags: `--precision bf16 -> fp32` ("" when there is no setting to change)."""
        return _change(self)

    def to_dict(self) -> dict:
        return {"rules": self.rules, "title": self.title, "setting": self.setting, "from": self.slow_value,
                "to": self.fast_value, "untestable": self.untestable}


@dataclass
class PairPlan:
    """The re-runs for one significant gap: the slower and the faster configuration as explain named them, their
    run options (RunOptions fields), the tests, and each configuration's expected seconds per process."""

    slow: str
    fast: str
    slow_options: dict[str, Any]
    fast_options: dict[str, Any]
    tests: list[PlannedTest]
    expected_s: dict[str, float] = field(default_factory=dict)  # variant -> seconds per process

    @property
    def runnable(self) -> list[PlannedTest]:
        return [t for t in self.tests if t.untestable is None]

    def variants(self, tests: list[PlannedTest] | None = None) -> dict[str, dict[str, Any]]:
        """variant name -> run options: the faster and the slower configuration, then the slower one with each
        test's setting changed (`tests`: default every runnable test)."""
        out = {"baseline": dict(self.fast_options), "slower": dict(self.slow_options)}
        for test in self.runnable if tests is None else tests:
            out[test.variant] = dict(self.slow_options, **{str(test.setting): test.fast_value})
        return out


@dataclass
class Closure:
    """How much of a gap a change closed: pooled medians of three configurations (fast, slow, slow changed)."""

    gap_before_s: float
    gap_before_ci_s: list[float]
    gap_after_s: float
    gap_after_ci_s: list[float]
    closed_s: float  # gap before - gap after (= slow - changed)
    closed_ci_s: list[float]
    share: float  # closed / gap before
    share_ci: list[float] | None  # None: the gap before is not positive in enough resamples to divide by
    # the largest spread between processes of one of the three configurations (the faster one's only where its
    # processes do not vary significantly more than the two compared'); None: unmeasured
    noise_s: float | None
    # Student's t of the slower configuration's process medians against the changed one's, the variance pooled over
    # the slower and the changed configuration (hloscope.significance.process_test); None: neither ran in several
    # processes
    moved_p_value: float | None = None
    # One-sided Student's t that the slower configuration's process medians are above the faster one's, the variance
    # pooled over the three configurations (the faster one's always counts: it is one of the two compared): whether
    # the gap before stands out of the variation between processes; None: unmeasured (no configuration ran in several
    # processes)
    gap_p_value: float | None = None

    def to_dict(self) -> dict:
        return {"gap_before_s": self.gap_before_s, "gap_before_ci_s": self.gap_before_ci_s,
                "gap_p_value": self.gap_p_value, "gap_after_s": self.gap_after_s,
                "gap_after_ci_s": self.gap_after_ci_s, "closed_s": self.closed_s, "closed_ci_s": self.closed_ci_s,
                "share_closed": self.share, "share_closed_ci": self.share_ci,
                "between_process_spread_s": self.noise_s, "moved_p_value": self.moved_p_value}


@dataclass
class HypothesisTest:
    """One tested (or untestable) hypothesis and what its re-run concluded."""

    rules: list[str]
    title: str
    setting: str | None
    slow_value: Any
    fast_value: Any
    verdict: str  # confirmed | partly | refuted | cannot tell | could not test
    why: str  # one sentence with the figures
    change: str = ""  # the change in flags: "--precision bf16 -> fp32" ("" when there is no setting to change)
    closure: Closure | None = None
    label: str | None = None  # the re-run configuration's label in the test's comparison
    run_dirs: list[str] = field(default_factory=list)
    processes: int = 0  # timed processes of the changed configuration
    provisional: bool = False  # a configuration ran in one process: the spread between processes is unmeasured
    # The slower configuration's extra CPU wait per step minus the changed one's (`contention`): the part of the
    # closure that different contention accounts for. None: not measured, or no share-based verdict to check
    contention_closed_s: float | None = None

    def to_dict(self) -> dict:
        return {"rules": self.rules, "title": self.title, "setting": self.setting, "from": self.slow_value,
                "to": self.fast_value, "verdict": self.verdict, "why": self.why,
                "change": self.change, "closure": self.closure.to_dict() if self.closure else None, "label": self.label,
                "run_dirs": self.run_dirs, "processes": self.processes, "provisional": self.provisional,
                "contention_closed_s": self.contention_closed_s}


@dataclass
class Interaction:
    """Every change that closed part of the gap (confirmed or partly) applied at once, against the sum of their
    single closures: the excess is what the joint closure adds to that sum (negative: the changes remove the same
    time), with its interval."""

    settings: dict[str, Any]  # setting -> the value applied
    applied: str  # the same in flags: "--precision fp32, --data device"
    single_closed_s: dict[str, float]  # setting -> its single closure
    sum_single_s: float
    joint: Closure | None  # None: the joint configuration was not timed
    verdict: str  # additive | overlapping | compounding | cannot tell | not run
    why: str
    run_dirs: list[str] = field(default_factory=list)
    excess_s: float | None = None  # joint closure - sum of the single closures
    excess_ci_s: list[float] | None = None  # its INTERACTION_CONFIDENCE interval
    margin_s: float | None = None  # MEANINGFUL_SHARE of the joint re-run's gap: an excess inside it is no interaction
    # The same combination of the configurations' extra CPU waits per step (`contention`): the part of the excess
    # that different contention accounts for. None: a configuration did not measure its threads.
    contention_excess_s: float | None = None

    def to_dict(self) -> dict:
        return {"settings": self.settings, "applied": self.applied, "single_closed_s": self.single_closed_s,
                "sum_single_s": self.sum_single_s, "joint": self.joint.to_dict() if self.joint else None,
                "excess_s": self.excess_s, "excess_ci_s": self.excess_ci_s, "margin_s": self.margin_s,
                "contention_excess_s": self.contention_excess_s, "verdict": self.verdict, "why": self.why,
                "run_dirs": self.run_dirs}


@dataclass
class PairTests:
    """The tests of one gap: the pair, where its re-runs are, the tests, the interaction, what did not run."""

    slow: str
    fast: str
    directory: str | None
    repeats: int
    tests: list[HypothesisTest] = field(default_factory=list)
    interaction: Interaction | None = None
    not_run: list[str] = field(default_factory=list)  # configurations planned but not timed, each with why

    def to_dict(self) -> dict:
        return {"slow": self.slow, "fast": self.fast, "directory": self.directory, "repeats": self.repeats,
                "tests": [t.to_dict() for t in self.tests],
                "interaction": self.interaction.to_dict() if self.interaction else None, "not_run": self.not_run}


@dataclass
class TestedBlock:
    """explain --test-hypotheses: the plan's budget, each gap's tests, and why the testing stopped early if it did
    (`stopped`: the budget, or Ctrl-C)."""

    budget_s: float
    pairs: list[PairTests] = field(default_factory=list)
    stopped: str | None = None
    elapsed_s: float = 0.0
    method: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"budget_s": self.budget_s, "elapsed_s": self.elapsed_s, "stopped": self.stopped,
                "method": self.method, "pairs": [p.to_dict() for p in self.pairs]}


METHOD = {
    "share_closed": "(gap before - gap after) / gap before; gap before = slower - faster, gap after = slower with "
                    "the setting changed - faster, each a difference of pooled medians of the re-runs",
    "interval": f"{CONFIDENCE:.0%} percentile interval of independent two-level bootstraps (processes, then steps) of "
                "the three configurations",
    "confirmed": f"share's interval above {MEANINGFUL_SHARE:.0%}, estimate at least {CONFIRMED_SHARE:.0%}, and the "
                 "closure larger than the spread between processes of one configuration and significant by the "
                 f"process medians (Student's t on their logarithms, variance pooled over the slower and the changed "
                 "configuration, "
                 f"p < {PROCESS_ALPHA:g})",
    "partly": "share's interval above 0 and the closure larger than that spread and significant, not confirmed",
    "refuted": f"share's interval below {MEANINGFUL_SHARE:.0%}",
    "cannot tell": f"otherwise, or the gap did not reproduce in the re-run (interval includes 0 or below "
                   f"{MIN_GAP:.0%} of the faster step, or the process medians do not tell the slower configuration "
                   f"from the faster: one-sided Student's t on their logarithms, p not below {PROCESS_ALPHA:g}), or "
                   "the verdict would differ with the slower and the changed configuration's difference in contention "
                   "(each one's CPU wait per step beyond what its running time gives at their common ratio of waiting "
                   "to running) taken out of the closure",
    "interaction": f"excess = joint closure - sum of single closures, measured side by side in one re-run of the "
                   "baseline, the slower side, each change alone and all together; "
                   f"{INTERACTION_CONFIDENCE:.0%} interval from independent bootstraps of the slower, each changed "
                   f"and the joint configuration; additive when it lies within {MEANINGFUL_SHARE:.0%} of the gap either way, "
                   "overlapping or compounding when it excludes 0 and the estimate is beyond that; cannot tell when "
                   "the same combination of the configurations' extra CPU waits (as for a closure), taken out of the "
                   "excess, would change the verdict",
}


# ---------------------------------------------------------------------------------------------------------- planning

def plan_pairs(report: ExplainReport, options: dict[str, dict[str, Any]],
               rules: list[str] | None = None) -> list[PairPlan]:
    """One plan per significant gap of the report: its hypotheses, each as a setting to change or why it cannot be.
    `options`: configuration label -> its run options (run.json config); a label without them cannot be re-run.
    `rules`: hypotheses to test whether or not they fired, on every timed configuration against the baseline, the
    gap significant or not (the re-run measures it again): where it is not, the configuration is taken as the slower
    side, since the hypothesis blames its setting."""
    baseline = report.baseline
    plans = []
    for result in report.modes:
        wanted = result.significant or (rules and result.gap_s is not None)
        if not wanted or result.verdict == "baseline" or baseline is None or result.gap_s is None:
            continue
        # a significant gap's slower side; a named hypothesis on a gap within noise blames the run, not the baseline
        # (the re-run measures the gap again, and a gap that does not reproduce cannot be closed)
        slow, fast = ((baseline, result.mode) if result.significant and result.gap_s < 0 else
                      (result.mode, baseline))
        if slow not in options or fast not in options:
            continue
        plans.append(PairPlan(slow, fast, options[slow], options[fast],
                              plan_tests(result, options[slow], options[fast], rules)))
    return plans


def plan_tests(result: ModeResult, slow_options: dict[str, Any], fast_options: dict[str, Any],
               rules: list[str] | None = None) -> list[PlannedTest]:
    """The tests of one significant gap: its hypotheses grouped by the setting they blame (a setting is changed
    once however many hypotheses name it), then the settings that differ without a hypothesis, then the hypotheses
    and differences no setting can undo. `rules`: test these hypotheses whether or not they fired."""
    fired: dict[str, str] = {}
    annotations = [a for c in result.contributors if c.significant for a in c.annotations] + result.annotations
    for annotation in annotations if result.significant else []:
        fired.setdefault(annotation.rule, annotation.title)
    for rule in rules or []:
        fired.setdefault(rule, RULE_TITLES.get(rule, rule))
    by_setting: dict[str, list[str]] = {}
    tests: list[PlannedTest] = []
    for rule, title in fired.items():
        setting = RULE_SETTINGS.get(rule)
        if rule in DONATION_RULES and _donation_differs(slow_options, fast_options):
            setting = "donate"
        if setting is None:
            why = UNTESTABLE.get(rule, "no hloscope setting corresponds to this hypothesis")
            tests.append(PlannedTest([rule], title, untestable=why))
            continue
        by_setting.setdefault(setting, []).append(rule)
    for difference in result.config_differences:
        name = difference.field
        setting = DIFFERENCE_SETTINGS.get(name) or next(
            (named for prefix, named in DIFFERENCE_PREFIXES.items() if name.startswith(prefix)), None)
        if setting is not None:
            by_setting.setdefault(setting, [])
            continue
        unset = next((text for prefix, text in UNSET_DIFFERENCES.items() if name.startswith(prefix)), None)
        if unset is not None:
            tests.append(PlannedTest([name], f"{name} differs", untestable=unset))
    testable = []
    for setting, named in by_setting.items():
        slow_value, fast_value = setting_value(slow_options, setting), setting_value(fast_options, setting)
        test = PlannedTest(named or [setting], TITLES[setting], setting, slow_value, fast_value)
        refusal = _refusal(slow_options, setting, fast_value)
        if refusal is not None:
            test.untestable = f"the slower configuration cannot be run so: {refusal}"
        elif slow_value is None or fast_value is None:
            test.untestable = NOT_RECORDED.get(setting, f"{SETTING_FLAGS[setting]} is not recorded on both sides")
        elif slow_value == fast_value and setting == "threads" and named == []:
            # OMP_NUM_THREADS or a framework's thread count differs while the CPUs are the same: --threads sets
            # both together and cannot change one alone
            test.untestable = (f"both runs could use {slow_value} CPUs; the thread figures that differ "
                               "(OMP_NUM_THREADS, a framework's thread count) are not set alone by hloscope: "
                               "--threads sets the CPUs and OMP_NUM_THREADS together")
        elif slow_value == fast_value:
            test.untestable = (f"{SETTING_FLAGS[setting]} is {slow_value} on both sides: there is nothing to change, "
                               "so this hypothesis cannot hold here")
        testable.append(test)
    return testable + tests


def setting_value(options: dict[str, Any], setting: str) -> Any:
    """A side's value of `setting`: its run option where given, else for the settings a run has in effect without
    asking (IN_EFFECT_SETTINGS) what its record says it had (hloscope.runs.settings.in_effect, under IN_EFFECT)."""
    value = options.get(setting)
    if setting == "fullgraph" and value is False:
        value = None  # the default: what the mode had is in IN_EFFECT (None where it does not call torch.compile)
    if value is None and setting in IN_EFFECT_SETTINGS:
        recorded = options.get(IN_EFFECT)
        if isinstance(recorded, dict):
            return recorded.get(setting)
        mode = options.get("mode")
        if setting == "donate" and isinstance(mode, str) and mode in BY_NAME:
            return donation_in_effect(mode, None)
    return value


def _donation_differs(slow_options: dict[str, Any], fast_options: dict[str, Any]) -> bool:
    """The faster side donates its state and the slower does not (hypotheses of DONATION_RULES)."""
    return setting_value(fast_options, "donate") is True and setting_value(slow_options, "donate") is not True


def _refusal(slow_options: dict[str, Any], setting: str, value: Any) -> str | None:
    """Why the slower configuration's mode cannot take `value` for `setting` (eager PyTorch has no donation, a mode
    without torch.compile no compile mode), or None; None also when its mode is not recorded."""
    mode = slow_options.get("mode")
    if setting not in ("donate", "compile_mode", "fullgraph") or not isinstance(mode, str) or mode not in BY_NAME:
        return None
    if setting == "donate" and value is None:  # the faster side updates in place: the slower cannot be made to
        return None
    return setting_refusal(mode, setting, value)


def expected_run_s(record: RunRecord) -> float:
    """Seconds one fresh process of a configuration is expected to take, from its run record: the time it took from
    start to finish plus interpreter start-up, or else its first step, warm-up, timed and profiled steps."""
    took = _seconds_between(record.started_at, record.finished_at)
    if took is not None:
        return took + STARTUP_S
    timing, config = record.timing, record.config
    step = timing.median_s or 0.0
    first = timing.first_step_s or step
    steps = (config.warmup or 0) + (config.steps or 0) + ((config.profile_steps or 0) if config.profile else 0)
    return STARTUP_S + first + steps * step


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if start is None or end is None:
        return None
    try:
        took = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return None
    return took if took >= 0 else None


def fit_repeats(expected: list[float], repeats: int, budget_s: float) -> int:
    """The most processes per configuration (at most `repeats`, at least 1) whose interleaved rounds fit the budget;
    0 when not even one round does."""
    per_round = sum(expected)
    for count in range(repeats, 0, -1):
        if count * per_round <= budget_s:
            return count
    return 0


# ----------------------------------------------------------------------------------------------------------- verdicts

def closure(fast: list[list[float]], slow: list[list[float]], changed: list[list[float]]) -> Closure | None:
    """The gap before and after a change and the share it closed, each with its interval; None when a configuration
    has no timed step. Each side is a list of processes' step times."""
    draws = [pooled_median_resamples(side, seed) for side, seed in ((fast, 1), (slow, 2), (changed, 3))]
    if any(d is None or not len(d) for d in draws):
        return None
    count = min(len(d) for d in draws if d is not None)
    f, s, c = (np.asarray(d)[:count] for d in draws)
    mf, ms, mc = (median([t for p in side for t in p]) for side in (fast, slow, changed))
    before, after = ms - mf, mc - mf
    tail = (1 - CONFIDENCE) / 2
    gaps = s - f
    share_ci = None
    if np.mean(gaps <= 0) < tail:  # the denominator is positive in all but the tail: the ratio's interval is defined
        positive = gaps > 0
        share_ci = _interval((s[positive] - c[positive]) / gaps[positive])
    medians = [[median(p) for p in side if p] for side in (fast, slow, changed)]
    # the faster one's spread counts unless its processes vary significantly more than those of the two compared
    kept = medians[1:] if variance_larger_p(medians[0], medians[1:]) < VARIANCE_ALPHA else medians
    measured = [x for x in (process_spread(m) for m in kept) if x is not None]
    variation = pooled_process_variation(medians[1:])  # the two compared: the baseline's own noise is not theirs
    moved = process_test(medians[1], medians[2], variation).p_value if variation is not None else None
    return Closure(before, _interval(gaps), after, _interval(c - f), ms - mc, _interval(s - c),
                   (ms - mc) / before if before > 0 else 0.0, share_ci, max(measured) if measured else None, moved,
                   _gap_p_value(medians[0], medians[1], pooled_process_variation(medians)))


def _gap_beyond_processes(found: Closure) -> bool:
    """Whether the gap before stands out of the variation between processes (True where that is unmeasured)."""
    return found.gap_p_value is None or found.gap_p_value < PROCESS_ALPHA


def _gap_p_value(fast: list[float], slow: list[float], variation: ProcessVariation | None) -> float | None:
    """One-sided p-value that the slower configuration's process medians are above the faster one's (Closure's
    gap_p_value). The steps' bootstrap alone cannot say it: with two processes a side it resamples the same two, and
    identical configurations whose processes landed 30% apart on a busy machine got a gap whose interval excluded 0."""
    if variation is None or not fast or not slow:
        return None
    test = process_test(slow, fast, variation)
    return test.p_value / 2 if test.log_ratio > 0 else 1 - test.p_value / 2


def _interval(samples: np.ndarray) -> list[float]:
    """The CONFIDENCE percentile interval of bootstrap samples, as the report lists it."""
    return list(percentile_interval(samples))


def judge(found: Closure, fast_step_s: float, change: str) -> tuple[str, str]:
    """(verdict, why) of one re-run (module docstring). `change`: the change in words ("--precision fp32")."""
    low, high = found.gap_before_ci_s
    if low <= 0 or found.gap_before_s < MIN_GAP * fast_step_s or found.share_ci is None:
        return CANNOT_TELL, (f"the gap did not reproduce in the re-run ({_ms(found.gap_before_s)}, interval "
                             f"{_ms(low)} to {_ms(high)}): there is no gap to close")
    if not _gap_beyond_processes(found):
        return CANNOT_TELL, (f"the gap did not reproduce in the re-run beyond the variation between processes "
                             f"({_ms(found.gap_before_s)}; the process medians give p = {found.gap_p_value:.2g}, needs "
                             f"< {PROCESS_ALPHA:g}): there is no gap to close, and none to leave open")
    share, (share_low, share_high) = found.share, found.share_ci
    closes = f"{change} closes {share:.0%} ({share_low:.0%} to {share_high:.0%}) of the gap"
    verdict = share_verdict(share, share_low, share_high)
    if verdict == REFUTED:
        return REFUTED, f"{closes}: its interval excludes a closure of {MEANINGFUL_SHARE:.0%} or more"
    noise = found.noise_s
    if noise is not None and abs(found.closed_s) <= noise:
        return CANNOT_TELL, (f"{closes}, but the step moved by {_ms(found.closed_s)}, within the "
                             f"{_ms(noise)} spread between processes of one configuration")
    if found.moved_p_value is not None and found.moved_p_value >= PROCESS_ALPHA:
        return CANNOT_TELL, (f"{closes}, but the step moved by {_ms(found.closed_s)}, and the process medians do "
                             f"not tell it from the variation between processes (p = {found.moved_p_value:.2g}, "
                             f"needs < {PROCESS_ALPHA:g})")
    if verdict == CANNOT_TELL:
        return CANNOT_TELL, f"{closes}: the interval holds both no closure and a meaningful one"
    return verdict, closes


def share_verdict(share: float, low: float, high: float) -> str:
    """What the share closed and its interval say on their own (module docstring): refuted, confirmed, partly, or
    cannot tell."""
    if high < MEANINGFUL_SHARE:
        return REFUTED
    if low >= MEANINGFUL_SHARE and share >= CONFIRMED_SHARE:
        return CONFIRMED
    return PARTLY if low > 0 else CANNOT_TELL


def _at_equal_contention(entry: HypothesisTest, found: Closure, slow: ModeSummary, changed: ModeSummary) -> None:
    """The closure's verdict (refuted, partly, confirmed) must hold with the two sides' difference in contention
    (extra waits, `contention`) taken out of what it closed, or it is "cannot tell": that part is the machine's
    doing, not the setting's."""
    sides = contention([slow, changed])
    if sides is None or entry.verdict not in (REFUTED, CONFIRMED, PARTLY) or found.share_ci is None:
        return
    entry.contention_closed_s = sides[0].extra_s - sides[1].extra_s
    shift = entry.contention_closed_s / found.gap_before_s  # judged: the gap before is positive
    low, high = found.share_ci
    if share_verdict(found.share - shift, low - shift, high - shift) == entry.verdict:
        return
    entry.verdict = CANNOT_TELL
    entry.why += (f"; but the slower configuration's threads waited {_ms(sides[0].waiting_s)} a step for a CPU over "
                  f"{_ms(sides[0].running_s)} of running, the changed one's {_ms(sides[1].waiting_s)} over "
                  f"{_ms(sides[1].running_s)}, and at equal contention it would close {found.share - shift:.0%} "
                  f"({low - shift:.0%} to {high - shift:.0%}): the machine's other work, not the setting, may decide "
                  "it; re-run on a quieter machine")


def conclude(plan: PairPlan, summaries: dict[str, ModeSummary], labels: dict[str, str], directory: str | None,
             repeats: int, not_run: list[str]) -> PairTests:
    """The tests of one pair from the re-runs' summaries (by label; `labels`: variant -> label)."""
    result = PairTests(plan.slow, plan.fast, directory, repeats, not_run=list(not_run))
    fast, slow = summaries.get(labels["baseline"]), summaries.get(labels["slower"])
    for test in plan.tests:
        entry = HypothesisTest(test.rules, test.title, test.setting, test.slow_value, test.fast_value, NOT_TESTED,
                               test.untestable or "", change=test.change)
        result.tests.append(entry)
        if test.untestable is not None:
            continue
        label = labels.get(test.variant)
        entry.label = label
        changed = summaries.get(label) if label is not None else None
        if changed is not None:
            entry.run_dirs = list(changed.run_dirs)
        missing = [name for name, s in (("the faster configuration", fast), ("the slower configuration", slow),
                                        ("the changed configuration", changed)) if not _timed(s)]
        if missing or fast is None or slow is None or changed is None:  # a missing summary is never timed
            entry.why = f"not timed in the re-run: {', '.join(missing)} ({_why_not(changed, not_run)})"
            continue
        found = closure(fast.processes, slow.processes, changed.processes)
        if found is None:
            entry.why = "a configuration has no timed step"
            continue
        entry.closure, entry.processes = found, len(changed.processes)
        entry.provisional = min(len(s.processes) for s in (fast, slow, changed)) < 2
        entry.verdict, entry.why = judge(found, median(fast.step_times_s), _flag(test))
        _at_equal_contention(entry, found, slow, changed)
        if entry.provisional:
            entry.why += "; provisional: a configuration ran in one process, its spread between processes unmeasured"
    return result


def closing_tests(tests: list[HypothesisTest]) -> list[HypothesisTest]:
    """The changes that closed part of the gap (confirmed or partly): applied together, they test the interaction
    when there are two or more. Partly counts: two effects that add up to the gap each close a share of it, and only
    one of them can reach CONFIRMED_SHARE."""
    return [test for test in tests if test.verdict in (CONFIRMED, PARTLY)]


def joint_variants(closing: list[HypothesisTest]) -> tuple[str, dict[str, dict[str, Any]]]:
    """The joint re-run's configurations besides the pair's own: each closing change alone again, then all of them
    together. Returns the joint variant's name and variant name -> the settings it changes."""
    settings = {str(t.setting): t.fast_value for t in closing}
    singles = {variant_name(key, value): {key: value} for key, value in settings.items()}
    joint = "slower, " + ", ".join(f"{k}={_short(k, v)}" for k, v in settings.items())
    return joint, {**singles, joint: settings}


def interaction(closing: list[HypothesisTest], summaries: dict[str, ModeSummary], labels: dict[str, str],
                joint_name: str | None, not_run: list[str]) -> Interaction:
    """The joint closure of every closing change (closing_tests) against the sum of their single closures, all from
    one re-run (`summaries` by label; `labels`: variant name -> label) in which the baseline, the slower side, each
    change alone and the joint configuration ran interleaved. Measured side by side, the excess (joint - sum) =
    (S - J) - sum(S - C_i) is made of configurations that met the same load, and its interval comes from independent
    two-level bootstraps of those. Additive when the interval lies within MEANINGFUL_SHARE of the gap either way;
    overlapping (the changes remove the same time) or compounding when the interval excludes zero and the estimate
    is beyond that margin; otherwise cannot tell."""
    settings = {str(t.setting): t.fast_value for t in closing}
    applied = ", ".join(f"{SETTING_FLAGS.get(k, k)} {_shown(k, v)}" for k, v in settings.items())
    first = {str(t.setting): t.closure.closed_s for t in closing if t.closure is not None}  # the pair's own re-run
    fast, slow = summaries.get(labels.get("baseline", "")), summaries.get(labels.get("slower", ""))
    joint = summaries.get(labels.get(joint_name, "")) if joint_name is not None else None
    changed = {key: summaries.get(labels.get(variant_name(key, value), "")) for key, value in settings.items()}
    if fast is None or slow is None or joint is None or not (_timed(fast) and _timed(slow) and _timed(joint)):
        return Interaction(settings, applied, first, sum(first.values()), None, "not run", _why_not(joint, not_run))
    found = closure(fast.processes, slow.processes, joint.processes)
    alone = [c.processes for c in changed.values() if c is not None and _timed(c)]
    if found is None or len(alone) < len(changed):
        missing = next((_why_not(c, not_run) for c in changed.values() if not _timed(c)), "no timed step")
        return Interaction(settings, applied, first, sum(first.values()), None, "not run",
                           f"a change alone was not timed beside the joint one: {missing}")
    singles = {key: closure(fast.processes, slow.processes, c.processes) for key, c in changed.items() if c is not None}
    singly = {key: c.closed_s for key, c in singles.items() if c is not None}
    total = sum(singly.values())
    excess, excess_ci = _excess(slow.processes, alone, joint.processes)
    low, high = excess_ci
    margin = MEANINGFUL_SHARE * max(found.gap_before_s, 0.0)
    waited = _contention_excess(slow, joint, [c for c in changed.values() if c is not None])
    result = Interaction(settings, applied, singly, total, found, CANNOT_TELL, "", list(joint.run_dirs), excess,
                         excess_ci, margin, waited)
    together = (f"together they close {_ms(found.closed_s)} against {_ms(total)} summed singly beside them: "
                f"{_signed_ms(excess)} ({_signed_ms(low)} to {_signed_ms(high)})")
    verdict = _interaction_verdict(excess, low, high, margin)
    if found.gap_before_ci_s[0] <= 0 or not _gap_beyond_processes(found):
        result.why = together + "; the gap did not reproduce in this re-run beyond the variation between processes"
    elif waited is not None and _interaction_verdict(excess - waited, low - waited, high - waited, margin) != verdict:
        # A host sleep, a loader's threads or a lighter step change how the scheduler treats a process on a busy
        # machine: configurations then wait for a CPU differently, and that need not add up even when the settings do
        result.why = (f"{together}; but their threads met different contention (their waits for a CPU beyond "
                      f"what their running time gives, combined as the excess is: {_signed_ms(waited)} a step), and "
                      "at equal contention the verdict would differ: the machine's other work, not the settings, "
                      "may make them interact; re-run on a quieter machine")
    else:
        result.verdict = verdict
        result.why = together + {
            "additive": f", within {_ms(margin)} ({MEANINGFUL_SHARE:.0%} of the gap) either way",
            "overlapping": ": the changes remove part of the same time",
            "compounding": ": together they close more than their single effects",
            CANNOT_TELL: f": the interval holds both effects that add up (within {_ms(margin)}) and ones that do not",
        }[verdict]
    return result


def _interaction_verdict(excess: float, low: float, high: float, margin: float) -> str:
    """additive, overlapping or compounding by the excess, its interval and the margin (METHOD["interaction"]);
    CANNOT_TELL otherwise."""
    if -margin <= low and high <= margin:
        return "additive"
    if high < 0 and excess <= -margin:
        return "overlapping"
    if low > 0 and excess >= margin:
        return "compounding"
    return CANNOT_TELL


def _contention_excess(slow: ModeSummary, joint: ModeSummary, changed: list[ModeSummary]) -> float | None:
    """(e_S - e_J) - sum(e_S - e_Ci) over the configurations' extra waits (`contention`): what the excess would hold
    if only the contention differed. None where it is not measured."""
    sides = contention([slow, joint, *changed])
    if sides is None:
        return None
    e_slow, e_joint, *e_changed = (side.extra_s for side in sides)
    return (e_slow - e_joint) - sum(e_slow - e for e in e_changed)


def _excess(slow: list[list[float]], changed: list[list[list[float]]], joint: list[list[float]],
            ) -> tuple[float, list[float]]:
    """joint closure - sum of single closures = (S - J) - sum(S - C_i), all from one re-run, with its
    INTERACTION_CONFIDENCE interval from independent two-level bootstraps of S, J and each C_i (one draw of S serves
    every term it appears in: it is one measurement)."""
    sides = [slow, joint, *changed]
    draws = [pooled_median_resamples(side, seed) for seed, side in enumerate(sides, start=11)]
    count = min(len(d) for d in draws if d is not None)
    s, j, *c = (np.asarray(d)[:count] for d in draws if d is not None)
    pooled = [median([t for p in side for t in p]) for side in sides]
    point = (pooled[0] - pooled[1]) - sum(pooled[0] - value for value in pooled[2:])
    values = (s - j) - sum((s - each for each in c), np.zeros(count))
    return point, list(percentile_interval(values, INTERACTION_CONFIDENCE))


def _timed(summary: ModeSummary | None) -> bool:
    return summary is not None and summary.status == "ok" and bool(summary.step_times_s)


def _why_not(summary: ModeSummary | None, not_run: list[str]) -> str:
    if summary is not None and summary.notes:
        return summary.notes[0]
    if summary is not None and summary.status != "ok":
        return summary.status
    return "; ".join(not_run) or "not run"


def _change(test: PlannedTest) -> str:
    if test.setting is None:
        return ""
    if test.setting in SWITCHES:  # on/off options: each side as the option it ran with
        return f"{_switch(test.setting, test.slow_value)} -> {_switch(test.setting, test.fast_value)}"
    return (f"{SETTING_FLAGS.get(test.setting, test.setting)} {_shown(test.setting, test.slow_value)} -> "
            f"{_shown(test.setting, test.fast_value)}")


def _flag(test: PlannedTest) -> str:
    if test.setting in SWITCHES:
        return _switch(str(test.setting), test.fast_value)
    return f"{SETTING_FLAGS.get(str(test.setting), str(test.setting))} {_shown(test.setting, test.fast_value)}"


# On/off settings -> how a run is given each value: --donate / --no-donate, --fullgraph / no option
SWITCHES = {"donate": ("--donate", "--no-donate"), "fullgraph": ("--fullgraph", "without --fullgraph")}


def _switch(setting: str, value: Any) -> str:
    """An on/off setting's value as the option that sets it (`--no-donate`); None: the side has no such setting."""
    on, off = SWITCHES[setting]
    return on if value is True else off if value is False else f"no {SETTING_FLAGS[setting]} (not applicable)"


def _shown(setting: str | None, value: Any) -> str:
    """A setting's value as the option takes it: XLA flags quoted (several words, or none)."""
    return f'"{value}"' if setting == "xla_flags" and isinstance(value, str) else str(value)


# XLA flags in a re-run's name (its label and folder): at most this many characters
_SHORT_FLAGS = 48


def variant_name(setting: str, value: Any) -> str:
    """A re-run's name: the slower configuration with `setting` changed to `value`."""
    return f"slower, {setting}={_short(setting, value)}"


def _short(setting: str | None, value: Any) -> str:
    """A setting's value in a re-run's name: XLA flags "none" when empty, long ones cut (one XLA test per pair)."""
    if setting != "xla_flags" or not isinstance(value, str):
        return str(value)
    return "none" if not value else value if len(value) <= _SHORT_FLAGS else value[:_SHORT_FLAGS - 3] + "..."


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _signed_ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.3g} ms"
