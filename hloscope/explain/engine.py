"""Explain runs against a baseline: for each run, is its step time significantly different, and if so which measured
ledger nodes make up the difference, with the hypotheses that explain them attached (pure functions, no I/O).

For every run against the baseline (default: the fastest):
1. the gap is median(step) - median(baseline step) over the timed steps of every process of each configuration
   (`compare --repeats K` runs each in K fresh processes), with a bootstrap interval that resamples processes, then
   steps; it is significant only when the interval excludes zero, the gap is at least `min_gap` x the baseline's
   median, it stands out of the runs' step-to-step spread, it is larger than the spread between processes of one
   configuration (the largest relative spread this comparison measured, its A/A control, at the baseline's median:
   processes spread in proportion to their step), and the process
   medians differ by a t-test with the variance pooled over the comparison's configurations, at PROCESS_ALPHA
   family-wise over the report (Holm). Pooling assumes the configurations' processes vary alike: one whose variation
   is significantly larger than the others' (a one-sided F-test, hloscope.significance.unlike_variations: a framework
   whose processes land 40% apart beside others within 1%) is set apart, and counts in the control and the pool only
   for the pairs it is part of, which stay as hard to call as its processes make them; a pair of the others is judged
   as if it were not there. With one process per side the spread is unmeasured and the verdict is marked
   provisional;
2. when it is, the two ledgers are subtracted node by node (hloscope.explain.ledger): the significant nodes are the
   contributors, the other nodes' deltas are summed into one "within noise" line, and the timed gap minus the profiled
   gap is the residual, so that contributors + residual == gap exactly; when the profiled gap has the other sign or
   the residual is larger than the gap, the profile does not reproduce the gap and no part is offered as its cause;
3. hypotheses (hloscope.explain.hypotheses) annotate the contributors they can explain, or the run when none.
Configuration differences (batch, precision, model, versions...) are listed first; when the batch differs the gap is
also given per sample.
"""

from __future__ import annotations

import dataclasses
import math
from math import comb
from pathlib import Path
from statistics import median

from hloscope import units
from hloscope.errors import UsageError
from hloscope.explain.hypotheses import HYPOTHESES, Annotation
from hloscope.explain.ledger import (
    WITHIN_NOISE,
    NodeDelta,
    OpDelta,
    node_deltas,
    node_title,
)
from hloscope.explain.memory import memory_results
from hloscope.explain.ops import op_rows
from hloscope.explain.replay_split import split
from hloscope.explain.report import (
    ConfigDifference,
    Contributor,
    ExplainReport,
    ModeResult,
    OpChange,
    PerSample,
    ProcessNoise,
)
from hloscope.explain.startup import compare_startup
from hloscope.explain.summary import ModeSummary, contention
from hloscope.runs.settings import differences
from hloscope.significance import (
    ALPHA,
    PROCESS_ALPHA,
    VARIANCE_ALPHA,
    ProcessTest,
    ProcessVariation,
    hierarchical_median_difference,
    hierarchical_median_ratio,
    holm_levels,
    median_difference,
    median_ratio,
    percentile,
    pooled_process_variation,
    process_spread,
    process_test,
    processes_needed,
    smallest_resolvable_fraction,
    spread,
    unlike_variations,
)

MIN_GAP = 0.05  # a gap smaller than this fraction of the baseline's step is no practical difference
# The practical threshold when run.json flagged either run's timed window as noisy: identical JAX runs on this
# project's loaded 2-core machine differed by up to 20% with a noisy baseline (benches/README.md).
NOISY_MIN_GAP = 0.25
NODE_MIN_FRACTION = 0.01  # a ledger node's delta smaller than this fraction of the baseline's profiled step is noise


def explain(summaries: list[ModeSummary], baseline: str | None = None, min_gap: float = MIN_GAP,
            hypotheses=HYPOTHESES) -> ExplainReport:
    """The explain report: the baseline, then per run its gap (with interval and verdict), configuration
    differences, contributors, residual and op table."""
    timed = [s for s in summaries if s.status == "ok" and _valid_times(s.step_times_s)]
    if not timed:
        return _explain_compiled(summaries)
    reference = _baseline(timed, baseline) if baseline is not None else min(timed, key=_pooled_median)
    noise = process_noise(timed)
    pairs = {s.mode: _pair_noise(timed, noise, s, reference) for s in timed}
    process_tests = _process_tests(timed, reference, pairs)
    modes = [_entry(summary, reference, summary in timed, min_gap, hypotheses, pairs.get(summary.mode),
                    process_tests.get(summary.mode))
             for summary in summaries]
    for summary, entry in zip(summaries, modes, strict=True):
        entry.startup = compare_startup(summary.startups, summary.first_steps_s, reference.startups,
                                        reference.first_steps_s, summary is reference, min_gap)
    method = {"gap": "difference of medians of the timed steps, 95% percentile-bootstrap interval",
              "gap_interval": "two-level bootstrap (processes, then steps within each) when a side ran in several "
                              "processes",
              "significant": f"interval excludes 0, |gap| >= {min_gap:.0%} of the baseline's median, the gap "
                             "exceeds both runs' interquartile range or each median lies outside the other's p10-p90, "
                             "the gap exceeds the spread between processes of one configuration (the largest "
                             "(max - min) / median of the process medians of any configuration here, the pair's own "
                             "two included, at the baseline's median), and the process medians differ: Student's t on their "
                             "logarithms, the variance pooled over every configuration here that ran in several "
                             "processes (one whose processes vary significantly more than the quieter ones', by a "
                             f"one-sided F-test at {VARIANCE_ALPHA:.0%} divided by the number tested, counts in that "
                             "spread and that variance only for its own gap), "
                             f"p below {PROCESS_ALPHA} family-wise over this report's configurations "
                             "(Holm); with one process per side that spread is unmeasured and the verdict is "
                             "provisional; two runs of one mode with the same settings must also keep the gap with their "
                             "difference in contention taken out (each one's CPU wait per step beyond their common "
                             "ratio of waiting to running: contention_s)",
              "nodes": "exact two-sided Mann-Whitney U over the kept profiled steps, p < 0.05, and |delta| >= "
                       f"{NODE_MIN_FRACTION:.0%} of the baseline's profiled step",
              "min_gap": min_gap}
    from hloscope.explain.scaling import SCALING_METHOD, scaling  # cycle: scaling imports engine (its rules)

    found = scaling(summaries, min_gap)
    memory = memory_results(summaries, reference.mode)
    for entry in modes:
        entry.memory = memory.get(entry.mode)
    if found:
        method["scaling"] = SCALING_METHOD
    return ExplainReport(baseline=reference.mode, basis="step_time", modes=modes,
                         summaries={s.mode: s for s in summaries}, baseline_chosen=baseline is not None,
                         method=method, scaling=found, process_noise=noise)


def process_noise(timed: list[ModeSummary]) -> ProcessNoise | None:
    """The comparison's A/A control: the largest relative spread between processes of one configuration, with the
    pooled variation of every configuration's process medians, the configurations whose variation is unlike the
    others' (hloscope.significance.unlike_variations) and the control over the rest; None when no configuration ran
    in more than one process (unmeasured)."""
    found = _control(timed)
    apart = unlike_variations([s.process_medians_s for s in timed])
    if found is None or not apart:
        return found
    return dataclasses.replace(found, set_apart=tuple(timed[index].mode for index in sorted(apart)),
                               alike=_control([s for index, s in enumerate(timed) if index not in apart]))


def _control(members: list[ModeSummary]) -> ProcessNoise | None:
    """The largest relative spread between processes of one of `members`, with the variation of their process
    medians pooled; None when none ran in more than one process."""
    found = None
    for summary in members:
        medians = summary.process_medians_s
        spread_s = process_spread(medians)
        if spread_s is None:
            continue
        relative = spread_s / _pooled_median(summary)  # as compare's `configurations` give it
        if found is None or relative > found.relative:
            found = ProcessNoise(relative, summary.mode, len(medians))
    variation = pooled_process_variation([s.process_medians_s for s in members])
    if found is None or variation is None:
        return found
    return dataclasses.replace(found, log_sd=variation.log_sd, df=variation.df)


def _pair_noise(timed: list[ModeSummary], noise: ProcessNoise | None, summary: ModeSummary,
                reference: ModeSummary) -> ProcessNoise | None:
    """The control one pair is held to: the comparison's, over the configurations whose variation is alike and the
    pair's own two. A configuration set apart as unlike sets the noise of its own pairs (they stay as hard to call as
    its processes make them), never that of a pair it is not part of."""
    if noise is None or not noise.set_apart:
        return noise
    return _control([s for s in timed if s.mode not in noise.set_apart or s is summary or s is reference])


@dataclasses.dataclass(frozen=True)
class _ProcessVerdict:
    """One configuration's process-level test against the baseline, and Holm's verdict on it within the report."""

    test: ProcessTest
    differs: bool
    level: float
    variation: ProcessVariation  # the pair's, pooled (_pair_noise)


def _process_tests(timed: list[ModeSummary], reference: ModeSummary,
                   pairs: dict[str, ProcessNoise | None]) -> dict[str, _ProcessVerdict]:
    """label -> the process-level test of each timed configuration but the baseline, its variance pooled as its pair's
    control says (_pair_noise), held family-wise to PROCESS_ALPHA over the report (Holm); empty when between-process
    variation is unmeasured."""
    found = {s.mode: _variation(pairs.get(s.mode)) for s in timed if s is not reference}
    variations = {label: v for label, v in found.items() if v is not None}
    if not variations or len(variations) < len(found):
        return {}
    tests = {s.mode: process_test(s.process_medians_s, reference.process_medians_s, variations[s.mode])
             for s in timed if s is not reference}
    levels = holm_levels([t.p_value for t in tests.values()], PROCESS_ALPHA)
    return {label: _ProcessVerdict(test, differs, level, variations[label])
            for (label, test), (differs, level) in zip(tests.items(), levels, strict=True)}


def _variation(noise: ProcessNoise | None) -> ProcessVariation | None:
    if noise is None or noise.log_sd is None or noise.df is None:
        return None
    return ProcessVariation(noise.log_sd, noise.df)


def _beyond_process_spread(entry: ModeResult, summary: ModeSummary, reference: ModeSummary, gap: float, base: float,
                           noise: ProcessNoise | None) -> bool:
    """Whether the gap is larger than the spread between processes of one configuration: the pair's A/A control
    (_pair_noise, relative, the pair's own two among the configurations it is taken over) at the baseline's median.
    Unmeasured (one process per side, no control): True, and the verdict is marked provisional with a note saying
    why."""
    spreads = _process_spreads(summary, reference, base, noise)
    single = [s.mode for s in (summary, reference) if len(s.processes) < 2]
    entry.provisional = bool(single)
    if single:
        measured = (f"the spread between processes is taken from this comparison's other configurations (up to "
                    f"{noise.relative:.1%} of a step, {noise.configuration})" if noise is not None else
                    "between-process variation is unmeasured")
        entry.notes.append(f"{' and '.join(single)} ran in one process: {measured}, so this verdict is provisional "
                           "(`hloscope compare --repeats 3` runs each configuration in 3 fresh processes)")
    return abs(gap) > max(spreads) if spreads else True


def _process_spreads(summary: ModeSummary, reference: ModeSummary, base: float,
                     noise: ProcessNoise | None) -> list[float]:
    """The spread between processes a gap must exceed, in seconds: the pair's A/A control (_pair_noise: the largest
    relative spread of one configuration, the pair's own two among them) at the baseline's median. Relative, because
    processes spread in proportion to their step: lazy torch_xla at 5.9 ms a step against torchax's 1.0 ms, its three
    processes 6.4 ms apart (one slowed by other work), was called no different for a 4.9 ms gap inside that absolute
    spread, 5.9x as slow. Empty when no configuration ran in several processes."""
    return [noise.relative * base] if noise is not None else []


def _processes_differ(entry: ModeResult, summary: ModeSummary, reference: ModeSummary, base: float, min_gap: float,
                      noise: ProcessNoise | None, processes: _ProcessVerdict | None, gap: float) -> bool:
    """The process-level test's verdict (True when unmeasured: the verdict is then provisional), recorded on the
    entry with the smallest gap this pair could have been called different by: the test's, the spreads' and the
    practical minimum's, whichever is largest. The test reads the ratio of the processes' geometric means, the gap
    is a difference of pooled medians: a gap no larger than the smallest the test resolves is no difference either,
    so that the report never calls slower a gap below the resolution it states."""
    if processes is None:
        return True
    entry.process_p_value, entry.process_level = processes.test.p_value, processes.level
    smallest = base * smallest_resolvable_fraction(processes.variation, len(summary.process_medians_s),
                                                   len(reference.process_medians_s), processes.level)
    entry.resolvable_gap_s = max([smallest, min_gap * base, *_process_spreads(summary, reference, base, noise)])
    if not processes.differs and abs(processes.test.log_ratio) >= math.log1p(min_gap):
        # a gap large enough to matter, hidden by the variation between processes: say what would resolve it
        entry.processes_needed = processes_needed(processes.variation, processes.test.log_ratio, processes.level)
    return processes.differs and abs(gap) > smallest


def _holds_at_equal_contention(entry: ModeResult, summary: ModeSummary, reference: ModeSummary,
                               gap_ci: list[float], smallest: float) -> bool | None:
    """Whether a significant gap between two runs of one mode with the same settings holds with their difference in
    contention taken out (summary.contention: each one's CPU wait per step beyond the pair's common ratio of waiting
    to running): its interval still excludes zero on the same side and it stays above `smallest`. With nothing set
    differently, a burst of load that met one side's processes and not the other's is the machine's doing; the gap
    is then no difference, said in a note. Runs that differ in a setting or a mode are not judged so: a DataLoader's
    workers or another framework's threads contend for the CPUs by design, and that cost is part of what is
    compared. None where it is not measured or no other work ran beside them (summary.contention)."""
    sides = contention([summary, reference])
    if sides is None:
        return None
    shift = entry.contention_s = sides[0].extra_s - sides[1].extra_s
    gap = entry.gap_s or 0.0
    low, high = gap_ci[0] - shift, gap_ci[1] - shift
    holds = (low > 0 if gap > 0 else high < 0) and abs(gap - shift) > smallest
    if not holds:
        entry.notes.append(
            f"at equal contention the gap would be {_ms(gap - shift)} ({_ms(low)} to {_ms(high)}), not "
            f"{_ms(gap)}: the threads of {summary.mode} waited {_ms(sides[0].waiting_s)} a step for a CPU over "
            f"{_ms(sides[0].running_s)} of running, those of {reference.mode} {_ms(sides[1].waiting_s)} over "
            f"{_ms(sides[1].running_s)}; the machine's other work, not the configuration, may make the difference "
            "(re-run on a quieter machine)")
    return holds


def _pooled_median(summary: ModeSummary) -> float:
    """The configuration's median step over every timed step of every process (pooled when it was read)."""
    return summary.step_time_s if summary.step_time_s is not None else median(summary.step_times_s)


def _baseline(timed: list[ModeSummary], wanted: str) -> ModeSummary:
    """The run --baseline names: a run directory's path (any process of a configuration), a label as the report
    writes it, or a mode that only one configuration has."""
    path = Path(wanted)
    chosen = []
    if path.exists():
        resolved = path.resolve()
        chosen = [s for s in timed if any(Path(d).resolve() == resolved for d in s.run_dirs)]
    chosen = chosen or [s for s in timed if s.mode == wanted] or [s for s in timed if s.run_mode == wanted]
    names = ", ".join(repr(s.mode) for s in (chosen if len(chosen) > 1 else timed))
    if not chosen:
        raise UsageError(f"--baseline {wanted!r} is not a timed run here: give a run directory, a label or a mode "
                         f"(timed runs: {names})")
    if len(chosen) > 1:
        raise UsageError(f"--baseline {wanted!r} is ambiguous: {len(chosen)} timed runs match; name one of {names}")
    return chosen[0]


def _valid_times(times: list[float]) -> bool:
    """Timed steps explain can compare: at least one, every one positive and finite (run.json is checked on reading;
    this keeps the statistics defined whatever a summary holds)."""
    return bool(times) and all(isinstance(t, (int, float)) and 0 < t < float("inf") for t in times)


def _empty_entry(summary: ModeSummary) -> ModeResult:
    return ModeResult(summary.mode, summary.status, step_time_s=summary.step_time_s, step_spread=summary.step_spread,
                      noisy=summary.noisy)


def _entry(summary: ModeSummary, reference: ModeSummary, timed: bool, min_gap: float, hypotheses,
           noise: ProcessNoise | None = None, processes: _ProcessVerdict | None = None) -> ModeResult:
    entry = _empty_entry(summary)
    if not timed:
        if summary.status == "ok" and summary.step_times_s:
            entry.notes.append("its step times are not all positive and finite: it is left out of the comparison")
        return entry

    entry.replay = split(summary, reference)
    entry.processes = len(summary.processes)
    entry.process_medians_s = summary.process_medians_s
    entry.between_process_spread_s = process_spread(entry.process_medians_s)
    if len(summary.processes) > 1 or len(reference.processes) > 1:
        interval = hierarchical_median_difference(summary.processes, reference.processes)
        ratio = hierarchical_median_ratio(summary.processes, reference.processes)
    else:
        interval = median_difference(summary.step_times_s, reference.step_times_s)
        ratio = median_ratio(summary.step_times_s, reference.step_times_s)
    if interval is None or ratio is None:  # timed runs have positive, finite steps on both sides
        raise RuntimeError(f"no step times to compare: {summary.mode} against {reference.mode}")
    gap = interval.estimate
    base = median(reference.step_times_s)
    entry.gap_s, entry.gap_ci_s, entry.ratio, entry.ratio_ci = gap, interval.as_list(), ratio.estimate, ratio.as_list()
    if summary.batch_size and reference.batch_size and summary.batch_size != reference.batch_size:
        entry.per_sample = _per_sample(summary, reference, summary.batch_size, reference.batch_size)
    if summary is reference:
        entry.verdict, entry.significant = "baseline", False
        entry.provisional = len(summary.processes) < 2
        entry.residual_s = entry.explained_s = entry.unexplained_s = 0.0
        return entry
    entry.config_differences = [ConfigDifference(d["field"], d["a"], d["b"])
                                for d in differences(summary.settings, reference.settings)]
    outside_spread = beyond_spread(summary.step_times_s, reference.step_times_s)
    if summary.noisy or reference.noisy:  # a noisy window's median moves by up to ~20% between identical processes
        min_gap = max(min_gap, NOISY_MIN_GAP)
    beyond_processes = _beyond_process_spread(entry, summary, reference, gap, base, noise)
    processes_differ = _processes_differ(entry, summary, reference, base, min_gap, noise, processes, gap)
    significant = (interval.excludes_zero and abs(gap) >= min_gap * base and outside_spread and beyond_processes
                   and processes_differ)
    entry.tests = {"interval_excludes_zero": interval.excludes_zero, "at_least_min_gap": abs(gap) >= min_gap * base,
                   "beyond_step_spread": outside_spread, "beyond_process_spread": beyond_processes,
                   "processes_differ": processes_differ}
    if significant and summary.run_mode == reference.run_mode and not entry.config_differences:
        holds = _holds_at_equal_contention(entry, summary, reference, interval.as_list(),
                                           max(min_gap * base, entry.resolvable_gap_s or 0.0))
        if holds is not None:
            entry.tests["at_equal_contention"] = significant = holds
    entry.significant = significant
    entry.verdict = "no significant difference" if not significant else "slower" if gap > 0 else "faster"
    slow, fast = (summary, reference) if gap >= 0 else (reference, summary)
    annotations = [a for a in (h(slow, fast) for h in hypotheses) if a is not None]
    if not significant:
        # No causes for a difference that is not there; the configuration differences are still listed above.
        entry.residual_s, entry.explained_s, entry.unexplained_s = gap, 0.0, gap
        return entry
    if summary.ledger is None or reference.ledger is None:
        missing = summary.mode if summary.ledger is None else reference.mode
        entry.notes.append(f"{missing} has no usable profile: the gap cannot be split into measured parts "
                           "(run with --profile)")
        entry.residual_s, entry.explained_s, entry.unexplained_s = gap, 0.0, gap
        entry.annotations = annotations
        return entry
    practical = NODE_MIN_FRACTION * median(reference.ledger.step_s or [base])
    fewest = min(len(summary.ledger.step_s), len(reference.ledger.step_s))
    if _smallest_p(fewest) >= ALPHA:
        entry.notes.append(
            f"only {fewest} profiled step(s) kept on one side: too few for any part of the step to differ "
            f"significantly ({_steps_needed()} or more kept per run are needed; the first profiled step is dropped as "
            "the profiler's warm-up)")
    deltas = node_deltas(summary.ledger, reference.ledger, practical)
    profiled_gap = sum(d.seconds for d in deltas)
    contributors = _contributors(deltas, summary, reference, gap)
    entry.profiled_gap_s, entry.residual_s = profiled_gap, gap - profiled_gap
    if profiled_gap * gap <= 0 or abs(gap - profiled_gap) > abs(gap):
        # The profiled steps do not show this gap: their parts describe the profile, not the gap's causes.
        entry.profile_reproduces_gap = False
        entry.profile_parts = contributors
        entry.residual_s = gap
        entry.notes.append(
            f"the profile does not reproduce this gap: the profiled steps differ by {_ms(profiled_gap)} against a "
            f"timed gap of {_ms(gap)}, so no part of the profile is offered as its cause (the profiled steps' parts "
            "are listed as profile_parts; profile more steps, or on a quieter machine)")
        entry.annotations = annotations
        entry.explained_s, entry.unexplained_s = 0.0, gap
        entry.ops = [_op_change(d) for d in op_rows(summary, reference, practical)]
        entry.notes += _profile_notes(summary) + _profile_notes(reference)
        return entry
    _offsets(contributors, gap)
    attached = _attach(annotations, contributors, gap)
    entry.contributors = contributors
    entry.annotations = [a for a in annotations if a.rule not in attached]
    explained = sum(c.seconds for c in contributors if c.significant)
    entry.explained_s, entry.unexplained_s = explained, gap - explained
    entry.ops = [_op_change(d) for d in op_rows(summary, reference, practical)]
    entry.notes += _profile_notes(summary) + _profile_notes(reference)
    return entry


def _contributors(deltas: list[NodeDelta], summary: ModeSummary, reference: ModeSummary,
                  gap: float) -> list[Contributor]:
    """The significant nodes, largest in the gap's direction first, then one line for the rest (within noise)."""
    if summary.ledger is None or reference.ledger is None:  # the caller asks only for profiled runs
        raise RuntimeError(f"no profile to break the gap down: {summary.mode} against {reference.mode}")
    run_ledger, base_ledger = summary.ledger, reference.ledger
    sign = 1.0 if gap >= 0 else -1.0
    significant = sorted((d for d in deltas if d.significant), key=lambda d: -sign * d.seconds)
    out = [Contributor(
        d.node, node_title(d.node), True, d.seconds, d.interval_s, d.p_value,
        claim=(f"{_ms(d.slow_s)} per profiled step under {summary.mode} against {_ms(d.fast_s)} under "
               f"{reference.mode} (medians of {len(run_ledger.step_s)} and {len(base_ledger.step_s)} profiled steps)"),
        evidence={summary.mode: run_ledger.nodes.get(d.node, []), reference.mode: base_ledger.nodes.get(d.node, [])},
    ) for d in significant]
    rest = [d for d in deltas if not d.significant]
    noise = sum(d.seconds for d in rest)
    if rest and noise != 0.0:
        out.append(Contributor(WITHIN_NOISE, "Other parts of the step, each within noise", False, noise, None, None,
                               claim=f"{len(rest)} ledger parts whose differences are not significant, summed",
                               evidence={d.node: d.seconds for d in rest}))
    return out


def _offsets(contributors: list[Contributor], gap: float) -> None:
    """A part larger than the whole gap (a share above 100%) names the parts, moving against the gap, that bring the
    sum back to the gap."""
    against = [c for c in contributors if c.seconds * gap < 0]
    for contributor in contributors:
        if contributor.significant and contributor.seconds * gap > 0 and abs(contributor.seconds) > abs(gap):
            contributor.offset_by = [c.node for c in against]


def _attach(annotations: list[Annotation], contributors: list[Contributor], gap: float) -> set[str]:
    """Attach each hypothesis to the largest significant contributor, moving with the gap, whose node it names (the
    other nodes it could explain are listed in `also_nodes`); the names of those attached."""
    attached = set()
    for annotation in annotations:
        matching = [c for c in contributors if c.significant and c.seconds * gap > 0
                    and c.node.startswith(annotation.nodes)]
        if matching:
            annotation.also_nodes = [c.node for c in matching[1:]]
            matching[0].annotations.append(annotation)
            attached.add(annotation.rule)
    return attached


def _per_sample(summary: ModeSummary, reference: ModeSummary, batch: int, reference_batch: int) -> PerSample:
    a = [t / batch for t in summary.step_times_s]
    b = [t / reference_batch for t in reference.step_times_s]
    if len(summary.processes) > 1 or len(reference.processes) > 1:  # processes, then steps, as the gap's interval
        interval = hierarchical_median_difference([[t / batch for t in p] for p in summary.processes],
                                                  [[t / reference_batch for t in p] for p in reference.processes])
    else:
        interval = median_difference(a, b)
    if interval is None:  # timed runs have steps
        raise RuntimeError(f"no step times per sample: {summary.mode} against {reference.mode}")
    return PerSample(batch, reference_batch, median(a), median(b), interval.estimate, interval.as_list(),
                     median(a) / median(b))


def _op_change(delta: OpDelta) -> OpChange:
    """The run is the slow side of the op table's rows, the baseline the fast side (hloscope.explain.ops)."""
    return OpChange(delta.group, delta.slow, delta.fast, delta.seconds, delta.p_value, delta.significant,
                    run_name=delta.slow_name, baseline_name=delta.fast_name, matched=delta.matched,
                    matched_by=delta.matched_by,
                    instructions={"run": delta.instructions.get("slow", []),
                                  "baseline": delta.instructions.get("fast", [])},
                    instruction_counts={"run": delta.instruction_counts.get("slow", 0),
                                        "baseline": delta.instruction_counts.get("fast", 0)},
                    match_stages=delta.match_stages)


def _profile_notes(summary: ModeSummary) -> list[str]:
    ledger = summary.ledger
    if ledger is None:
        return []
    return [f"{summary.mode}: profiled step {n} left out: {why}" for n, why in ledger.dropped.items()]


def beyond_spread(a: list[float], b: list[float]) -> bool:
    """Whether the gap stands out of the runs' own step-to-step spread: it is larger than either run's interquartile
    range, or each run's median lies outside the other's p10-p90.
    The bootstrap interval only knows the noise inside each run; two processes of one configuration also differ
    (thread placement, memory layout, what else the machine runs): on this project's 2-core machine under load 4-5,
    by up to 20% of a 1 ms CPU step with intervals excluding zero (benches/README.md). A gap within the runs' spread
    is not told apart from that."""
    sa, sb = spread(a), spread(b)
    if sa is None or sb is None or sa.n < 4 or sb.n < 4:
        return True
    by_iqr = abs(sa.median - sb.median) > max(_iqr(a), _iqr(b))
    high, low = (sa, sb) if sa.median >= sb.median else (sb, sa)
    by_band = high.median > low.p90 and low.median < high.p10
    return by_iqr or by_band


def _iqr(values: list[float]) -> float:
    """The interquartile range, from the one percentile definition (interpolated, as run.json's p10/p90)."""
    ordered = sorted(values)
    return percentile(ordered, 0.75) - percentile(ordered, 0.25)


def _smallest_p(n: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney test can give with n steps a side: 2 / C(2n, n)."""
    return 2 / comb(2 * n, n) if n > 0 else 1.0


def _steps_needed() -> int:
    return next(n for n in range(1, 50) if _smallest_p(n) < ALPHA)


_ms = units.ms


def _explain_compiled(summaries: list[ModeSummary]) -> ExplainReport:
    """No mode was timed. Modes compiled for a target GPU (`compare --target`) are ranked on their roofline lower
    bound per step instead; nothing was measured, so there is no ledger and no significance."""
    bounds = {s.mode: s.roofline_s for s in summaries if s.status == "compiled" and s.roofline_s}
    lowest = min((s for s in summaries if s.mode in bounds), key=lambda s: bounds[s.mode]) if bounds else None
    lowest_s = bounds[lowest.mode] if lowest is not None else None
    modes = []
    for summary in summaries:
        entry = _empty_entry(summary)
        entry.roofline_s = summary.roofline_s
        bound = bounds.get(summary.mode)
        if lowest_s is not None and bound is not None:
            entry.gap_s = bound - lowest_s
            entry.ratio = bound / lowest_s
        modes.append(entry)
    return ExplainReport(baseline=lowest.mode if lowest else None,
                         basis="roofline_lower_bound" if lowest else "step_time", modes=modes,
                         summaries={s.mode: s for s in summaries})
