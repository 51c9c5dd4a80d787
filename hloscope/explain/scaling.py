"""Scaling efficiency from 1 to N devices, per mode (`compare --devices 1,2,4`): strong scaling, the same global batch
at every N, so the ideal N-device step is the 1-device step / N (pure functions over the summaries, no I/O).

For each mode timed on one device and on N > 1 devices:
- efficiency = step(1) / (N x step(N)) (medians of the timed steps), with a percentile-bootstrap interval from both
  runs' timed steps (hloscope.significance.median_ratio, divided by N); speed-up = step(1) / step(N);
- the time lost per step, step(N) - step(1) / N, is judged with the engine's gap rules (hloscope.explain.engine):
  its interval excludes zero, it is at least `min_gap` of the ideal step (25% when a window was noisy), and it stands
  out of the runs' spread, the 1-device steps scaled by 1 / N standing for the ideal run; with several processes a
  device count (`--repeats K`) the intervals resample processes, then steps, and the loss must also exceed the spread
  between processes and stand out of their variation (Student's t on log process medians, p < PROCESS_ALPHA); with
  one process on a side the point is provisional, that spread unmeasured;
- when it is significant and both runs were profiled, its causes: each ledger node's excess over its ideal share (the
  N-device run's time in that node minus the 1-device run's / N), tested like the engine's nodes (exact Mann-Whitney U
  over the kept profiled steps, p < 0.05, and at least 1% of the ideal profiled step); nodes are grouped as exposed
  communication (collectives), idle (the device waiting on the host) and compute (device or host work). The excesses
  sum to the profiled loss; the timed loss minus that is the residual.
"""

from __future__ import annotations

from statistics import median

from hloscope.explain.engine import MIN_GAP, NODE_MIN_FRACTION, NOISY_MIN_GAP, beyond_spread
from hloscope.explain.ledger import RunLedger, node_deltas, node_title
from hloscope.explain.report import ModeScaling, ScalingCause, ScalingPoint
from hloscope.explain.summary import ModeSummary
from hloscope.significance import (
    PROCESS_ALPHA,
    hierarchical_median_difference,
    hierarchical_median_ratio,
    median_difference,
    median_ratio,
    pooled_process_variation,
    process_spread,
    process_test,
)

SCALING_METHOD = ("strong scaling (same global batch): ideal step = step(1) / N, efficiency = step(1) / (N x step(N)) "
                  "with a 95% bootstrap interval; the loss step(N) - step(1)/N is judged by the gap rules against the "
                  "1-device steps / N, and split by ledger node: the N-device node minus the 1-device node / N")


def node_kind(node: str) -> str:
    """A ledger node as a cause of lost efficiency: exposed communication, idle or compute."""
    if "collective" in node:
        return "communication"
    return "idle" if node.startswith("idle:") else "compute"


def scaling(summaries: list[ModeSummary], min_gap: float = MIN_GAP) -> list[ModeScaling]:
    """One ModeScaling per mode that has a timed 1-device run and at least one other device count."""
    by_mode: dict[str, list[ModeSummary]] = {}
    for summary in summaries:
        if summary.run_mode and summary.devices is not None:
            by_mode.setdefault(summary.run_mode, []).append(summary)
    out = []
    for mode, runs in by_mode.items():
        if len({s.devices for s in runs}) < 2:
            continue
        single = [s for s in runs if s.devices == 1 and _timed(s)]
        if not single:
            continue
        reference = single[0]
        result = ModeScaling(mode, reference.mode, median(reference.step_times_s), reference.batch_size,
                             shared_cpu=False, cpu_cores=_cores(reference))
        for run in sorted((s for s in runs if s.devices != 1), key=lambda s: s.devices or 0):
            if not _timed(run):
                why = "; ".join(run.notes) or "no timed steps"
                result.notes.append(f"{run.devices} devices: {run.status}: {why}")
            elif run.batch_size != reference.batch_size:
                result.notes.append(f"{run.devices} devices: global batch {run.batch_size} against "
                                    f"{reference.batch_size} on one device: not strong scaling, left out")
            else:
                result.points.append(scaling_point(run, reference, min_gap))
                result.shared_cpu = result.shared_cpu or run.platform == "cpu"
        out.append(result)
    return out


def scaling_point(run: ModeSummary, reference: ModeSummary, min_gap: float = MIN_GAP) -> ScalingPoint:
    """`run` (N devices) against `reference` (the same mode on one device, same global batch)."""
    n = run.devices or 1
    ideal = [t / n for t in reference.step_times_s]
    ideal_processes = [[t / n for t in steps] for steps in reference.processes]
    if len(run.processes) > 1 or len(reference.processes) > 1:  # compare --devices ... --repeats K
        ratio = hierarchical_median_ratio(reference.processes, run.processes)  # processes, then steps
        lost = hierarchical_median_difference(run.processes, ideal_processes)
    else:
        ratio = median_ratio(reference.step_times_s, run.step_times_s)
        lost = median_difference(run.step_times_s, ideal)
    if ratio is None or lost is None:  # both runs timed: positive steps on each side
        raise RuntimeError(f"no step times for scaling: {run.mode} against {reference.mode}")
    ideal_s = median(ideal)
    if run.noisy or reference.noisy:
        min_gap = max(min_gap, NOISY_MIN_GAP)
    run_medians, ideal_medians = run.process_medians_s, [m / n for m in reference.process_medians_s]
    tests = {"interval_excludes_zero": lost.excludes_zero, "at_least_min_gap": abs(lost.estimate) >= min_gap * ideal_s,
             "beyond_step_spread": beyond_spread(run.step_times_s, ideal),
             "beyond_process_spread": _beyond_process_spread(lost.estimate, run_medians, ideal_medians),
             "processes_differ": _processes_differ(run_medians, ideal_medians)}
    point = ScalingPoint(run.mode, n, median(run.step_times_s), ideal_s, ratio.estimate / n,
                         [ratio.low / n, ratio.high / n], ratio.estimate, lost.estimate, lost.as_list(),
                         significant=all(tests.values()), tests=tests,
                         provisional=min(len(run_medians), len(ideal_medians)) < 2)
    if point.provisional:
        point.notes.append("one process on a side: the spread between processes is unmeasured, and a loss this "
                           "size may be one process's luck (`compare --devices 1,N --repeats 3` measures it)")
    if not point.significant:
        return point
    if run.ledger is None or reference.ledger is None:
        missing = run.mode if run.ledger is None else reference.mode
        point.notes.append(f"{missing} has no usable profile: the loss cannot be split into measured parts "
                           "(run with --profile)")
        return point
    ideal_ledger = _scaled(reference.ledger, n)
    practical = NODE_MIN_FRACTION * median(ideal_ledger.step_s or [ideal_s])
    deltas = node_deltas(run.ledger, ideal_ledger, practical)
    point.profiled_lost_s = sum(d.seconds for d in deltas)
    point.residual_s = lost.estimate - point.profiled_lost_s
    sign = 1.0 if lost.estimate >= 0 else -1.0
    point.causes = [ScalingCause(d.node, node_title(d.node), node_kind(d.node), d.seconds, d.interval_s, d.p_value,
                                 True)
                    for d in sorted((d for d in deltas if d.significant), key=lambda d: -sign * d.seconds)]
    rest = [d.seconds for d in deltas if not d.significant]
    point.within_noise_s = sum(rest) if rest else None
    return point


def _beyond_process_spread(lost_s: float, run_medians: list[float], ideal_medians: list[float]) -> bool:
    """Whether the loss exceeds the spread between processes of either side (True where no side measured one)."""
    spreads = [x for x in (process_spread(run_medians), process_spread(ideal_medians)) if x is not None]
    return not spreads or abs(lost_s) > max(spreads)


def _processes_differ(run_medians: list[float], ideal_medians: list[float]) -> bool:
    """Whether the N-device processes' medians stand apart from the ideal ones by Student's t on their logarithms,
    the variance pooled over both, at PROCESS_ALPHA, as explain's gaps are held (True where unmeasured)."""
    variation = pooled_process_variation([run_medians, ideal_medians])
    return variation is None or process_test(run_medians, ideal_medians, variation).p_value < PROCESS_ALPHA


def _scaled(ledger: RunLedger, n: int) -> RunLedger:
    """The 1-device ledger as the ideal N-device run would have it: every node and step / N."""
    return RunLedger({node: [v / n for v in values] for node, values in ledger.nodes.items()}, {},
                     [s / n for s in ledger.step_s], ledger.profiled_steps, {}, ledger.device,
                     [b / n for b in ledger.busy_s])


def _timed(summary: ModeSummary) -> bool:
    return summary.status == "ok" and bool(summary.step_times_s) and all(0 < t < float("inf")
                                                                         for t in summary.step_times_s)


def _cores(summary: ModeSummary) -> int | None:
    text = summary.settings.get("machine.cpu_count")
    return int(text) if text and text.isdigit() else None
