"""Several processes of one configuration read as one: `compare --repeats K` runs every mode K times, each in a fresh
process, and explain pools them. The pooled summary keeps each process's timed steps apart (`replicates`), so that the
gap's interval can resample processes before steps and the verdict can ask for a gap larger than the spread between
processes; its ledger holds the kept profiled steps of every process."""

from __future__ import annotations

import dataclasses
from statistics import fmean, median

from hloscope.explain.collect import set_ledger
from hloscope.explain.ledger import OpSeries, RunLedger
from hloscope.explain.summary import ModeSummary
from hloscope.significance import spread


def pool(label: str, summaries: list[ModeSummary]) -> ModeSummary:
    """One summary for the processes of one configuration. The timed processes (status ok, with steps) are pooled;
    the figures that are not per step (HLO statistics, settings) are the first timed process's. A process that
    failed is a note; when none was timed, the first process stands for the configuration."""
    timed = [s for s in summaries if s.status == "ok" and s.step_times_s]
    if not timed:
        first = dataclasses.replace(summaries[0], mode=label)
        first.run_dirs = [d for s in summaries for d in s.run_dirs]
        first.notes = [note for s in summaries for note in s.notes]
        return first
    pooled = dataclasses.replace(timed[0], mode=label)
    pooled.replicates = [list(s.step_times_s) for s in timed]
    pooled.step_times_s = [t for s in timed for t in s.step_times_s]
    pooled.step_time_s, pooled.mean_s = median(pooled.step_times_s), fmean(pooled.step_times_s)
    pooled.step_spread = spread(pooled.step_times_s)
    pooled.noisy = any(s.noisy for s in timed) if any(s.noisy is not None for s in timed) else None
    pooled.run_dirs = [d for s in summaries for d in s.run_dirs]
    pooled.notes = list(timed[0].notes)
    pooled.unreadable_files = [f for s in summaries for f in s.unreadable_files]
    pooled.startups = [record for s in timed for record in s.startups]
    pooled.first_steps_s = [t for s in timed for t in s.first_steps_s]
    pooled.cpu_per_step = [cpu for s in timed for cpu in s.cpu_per_step]
    for summary in summaries:
        if summary not in timed:
            where = summary.run_dirs[0] if summary.run_dirs else summary.mode
            why = "; ".join(summary.notes) or summary.status
            pooled.notes.append(f"a process of this configuration ({where}) is left out: {why}")
            if summary.status == "unreadable":  # bad input still fails the command, named
                pooled.unreadable_files += summary.notes[:1]
    ledgers = [s.ledger for s in timed if s.ledger is not None]
    if ledgers:
        set_ledger(pooled, merge_ledgers(ledgers))
    return pooled


def merge_ledgers(ledgers: list[RunLedger]) -> RunLedger:
    """The kept profiled steps of several processes as one ledger: every node's and op group's per-step values
    concatenated (0 where a process had no such node or op), the dropped steps named by process."""
    names = sorted({node for ledger in ledgers for node in ledger.nodes})
    nodes = {name: [v for ledger in ledgers for v in (ledger.nodes.get(name) or [0.0] * len(ledger.step_s))]
             for name in names}
    dropped = {(f"process {index + 1} step {step}" if len(ledgers) > 1 else step): why
               for index, ledger in enumerate(ledgers) for step, why in ledger.dropped.items()}
    return RunLedger(nodes, _merged_series(ledgers, "ops"), [t for ledger in ledgers for t in ledger.step_s],
                     sum(ledger.profiled_steps for ledger in ledgers), dropped, any(ledger.device for ledger in ledgers),
                     [b for ledger in ledgers for b in ledger.busy_s], _merged_series(ledgers, "instructions"))


def _merged_series(ledgers: list[RunLedger], table: str) -> dict[str, OpSeries]:
    """The op groups (`ops`) or per-instruction series (`instructions`, which the op table pairs by structure) of
    several processes: per-step values concatenated, 0 where a process had no such key."""
    out: dict[str, OpSeries] = {}
    for key in sorted({k for ledger in ledgers for k in getattr(ledger, table)}):
        series = [getattr(ledger, table).get(key) for ledger in ledgers]
        calls = [c for ledger, s in zip(ledgers, series) for c in (s.calls if s else [0] * len(ledger.step_s))]
        seconds = [v for ledger, s in zip(ledgers, series) for v in (s.seconds if s else [0.0] * len(ledger.step_s))]
        present = [s for s in series if s is not None]
        out[key] = OpSeries(calls, seconds, median(s.per_call_s for s in present),
                            max(s.per_call_max_s for s in present))
    return out


def group_processes(summaries: list[ModeSummary]) -> list[ModeSummary]:
    """Summaries that share a label (the processes of one configuration in a comparison) pooled into one, in the
    order each label first appears."""
    groups: dict[str, list[ModeSummary]] = {}
    for summary in summaries:
        groups.setdefault(summary.mode, []).append(summary)
    return [members[0] if len(members) == 1 else pool(label, members) for label, members in groups.items()]
