"""The side-by-side comparison of two modules' statistics (and runs and traces when there are any): pure functions."""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from msgspec import UNSET

from hloscope.diff.graph import Graph, Node
from hloscope.diff.match import Matching, group_by_source, source_group
from hloscope.diff.report import (
    DiffReport,
    GraphRow,
    KernelChange,
    MatchingCounts,
    MatchRate,
    RunsComparison,
    RunTiming,
    SideCounts,
    SideDropped,
    SideGraphs,
    SideSteps,
    SideTotals,
    StatsRecord,
    TimedPair,
    TimeTotals,
    TimeWeighted,
    TracesComparison,
    TraceSummary,
    stats_document,
)
from hloscope.runs.records import RunRecord


def _is_number(value) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def delta(a, b):
    """b - a for numbers, key by key for dicts (missing keys count as 0; zero changes left out); None otherwise."""
    if _is_number(a) or _is_number(b):
        if (a is None or _is_number(a)) and (b is None or _is_number(b)):
            return (b or 0) - (a or 0)
        return None
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
        out = {}
        for key in list(a) + [k for k in b if k not in a]:
            d = delta(a.get(key), b.get(key))
            if d not in (None, 0, {}):
                out[key] = d
        if out and all(_is_number(v) for v in out.values()):
            out = dict(sorted(out.items(), key=lambda kv: (-abs(kv[1]), str(kv[0]))))
        return out
    return None


# Per-module statistics that identify rather than measure: never subtracted.
IDENTITY_KEYS = ("name", "file", "stage", "platform")


def compare_stats(a: dict, b: dict) -> dict:
    """Differences of every numeric statistic of two `hlo stats` module records, b minus a."""
    out = {}
    for key in list(a) + [k for k in b if k not in a]:
        if key in IDENTITY_KEYS:
            continue
        d = delta(a.get(key), b.get(key))
        if d is not None:
            out[key] = d
    return out


def matching_counts(graph_a: Graph, graph_b: Graph, matching: Matching) -> MatchingCounts:
    """Graph instructions of each side, those without a partner and the pairs by the stage that made them."""
    return MatchingCounts(a_instructions=len(graph_a.nodes), b_instructions=len(graph_b.nodes),
                          only_in_a=len(matching.only_in_a), only_in_b=len(matching.only_in_b),
                          by_stage=matching.counts())


TIMING_KEYS = ("median_s", "mean_s", "p10_s", "p90_s", "first_step_s", "throughput_img_s")


def compare_runs(run_a: RunRecord, run_b: RunRecord) -> RunsComparison:
    """Step time side by side from two run.json records."""
    a, b = _timing_row(run_a), _timing_row(run_b)
    ratio = b.median_s / a.median_s if a.median_s and b.median_s else None
    figures_a, figures_b = ({k: getattr(row, k) for k in TIMING_KEYS} for row in (a, b))
    return RunsComparison(a=a, b=b, delta=delta(figures_a, figures_b), ratio=ratio)


def _timing_row(run: RunRecord) -> RunTiming:
    return RunTiming(mode=run.mode, status=run.status, **{k: getattr(run.timing, k) for k in TIMING_KEYS})


STEP_KEYS = ("kernels", "device_busy_us", "device_idle_us", "host_duration_us", "host_runtime_us")


def trace_summary(stats: dict) -> TraceSummary:
    """The scalar figures of a `trace stats` record, plus per-step means over the steps that ran kernels."""
    steps = [s for s in stats.get("per_step") or [] if s.get("kernels")]
    return TraceSummary(
        steps=stats.get("steps"), events=stats.get("events"), kernels=stats.get("kernels"),
        device_time_us=stats.get("device_time_us"), host_runtime_us=stats.get("host_runtime_us"),
        categories=stats.get("categories") or {},
        per_step={k: sum(s.get(k, 0) for s in steps) / len(steps) for k in STEP_KEYS} if steps else {})


def compare_traces(trace_a: dict, trace_b: dict, top: int = 15) -> TracesComparison:
    """Per-step kernels, busy and idle time, time by category and the kernels whose total time changed most."""
    totals_a = {t["name"]: t.get("total_us", 0.0) for t in trace_a.get("top", [])}
    totals_b = {t["name"]: t.get("total_us", 0.0) for t in trace_b.get("top", [])}
    changed = sorted((KernelChange(name=n, a_us=totals_a.get(n, 0.0), b_us=totals_b.get(n, 0.0),
                                   delta_us=totals_b.get(n, 0.0) - totals_a.get(n, 0.0))
                      for n in set(totals_a) | set(totals_b)),
                     key=lambda r: (-abs(r.delta_us), r.name))
    a, b = trace_summary(trace_a), trace_summary(trace_b)
    return TracesComparison(a=a, b=b, delta=compare_stats(a.to_dict(), b.to_dict()),
                            kernels_changed_most=changed[:top])


def diff_report(stats_a: StatsRecord, stats_b: StatsRecord, graph_a: Graph, graph_b: Graph, matching: Matching, *,
                match_rate: dict[str, MatchRate], compared: str, notes: list[str],
                run_a: RunRecord | None = None, run_b: RunRecord | None = None,
                trace_a: dict | None = None, trace_b: dict | None = None,
                records_a: list[StatsRecord] | None = None, records_b: list[StatsRecord] | None = None,
                times_a=None, times_b=None, groups: int = 50) -> DiffReport:
    """The `hloscope diff` report. `records_a/b`: the `hlo stats` record of each graph compared (several when a train
    step runs as several modules; `stats_a/b` are then their sums); `times_a/b`: measured device time per instruction
    and step (hloscope.diff.timing.StepTimes), which weight the matching when both sides have it: the one-sided groups
    then carry their device time per step and are ranked by it. `match_rate`, `compared` and `notes`: the pipeline's
    (hloscope.diff.pipeline)."""
    weighted = times_a is not None and times_b is not None
    na = node_times(graph_a, times_a) if weighted else None
    nb = node_times(graph_b, times_b) if weighted else None
    reverse = {v: k for k, v in matching.pairs.items()}
    return DiffReport(
        a=stats_a, b=stats_b, delta=compare_stats(stats_document(stats_a), stats_document(stats_b)),
        matched=len(matching.pairs), matching=matching_counts(graph_a, graph_b, matching),
        only_in_a=group_by_source(graph_a, matching.only_in_a, times=na)[:groups],
        only_in_b=group_by_source(graph_b, matching.only_in_b, times=nb)[:groups],
        graphs=SideGraphs(a=graph_rows(graph_a, records_a or [stats_a], matching.pairs, graph_b, times_a),
                          b=graph_rows(graph_b, records_b or [stats_b], reverse, graph_a, times_b)),
        time_weighted=time_weighted(graph_a, graph_b, matching, times_a, times_b) if weighted else UNSET,
        runs=compare_runs(run_a, run_b) if run_a is not None and run_b is not None else UNSET,
        traces=compare_traces(trace_a, trace_b) if trace_a is not None and trace_b is not None else UNSET,
        match_rate=match_rate, compared=compared, notes=notes)


# Per-graph figures of the `graphs` table (keys of the `hlo stats` record), summed into the total row.
GRAPH_KEYS = ("instructions", "kernels", "flops", "transcendentals", "bytes_accessed", "copies")
_NOT_SUMMED = {"module_index", "is_scheduled", "gpu_arch", "entry", "siblings"}


def _sum_into(total: dict, record: dict) -> None:
    for key, value in record.items():
        if key in IDENTITY_KEYS or key in _NOT_SUMMED:
            continue
        if _is_number(value):
            total[key] = total.get(key, 0) + value
        elif isinstance(value, dict):
            _sum_into(total.setdefault(key, {}), value)


def total_record(records: list[StatsRecord]) -> dict:
    """The statistics of several modules (the graphs of one train step) summed key by key: counts, FLOPs, bytes,
    opcodes, fusions, kernels by kind, XLA's cost figures. Per-instruction lists (top instructions, matmuls, kernels
    by source) stay in the per-graph records; memory figures are sums over the graphs, not a peak."""
    documents = [stats_document(record) for record in records]
    total: dict = {}
    for key in IDENTITY_KEYS:
        values = list(dict.fromkeys(str(r.get(key)) for r in documents if r.get(key) is not None))
        if key == "file":
            folders = list(dict.fromkeys(v.rsplit("/", 1)[0] for v in values))
            total[key] = folders[0] if len(folders) == 1 else " + ".join(values)
        else:
            total[key] = " + ".join(values)
    total["graphs"] = len(documents)
    for document in documents:
        _sum_into(total, document)
    return total


# The figures of a graph row that its side's total row sums.
_TOTALLED = (*GRAPH_KEYS, "xla_flops", "graph_instructions", "matched", "time_s", "executions")


def graph_rows(graph, records: list[StatsRecord], matching_pairs: dict[str, str], other_graph,
               times=None) -> list[GraphRow]:
    """One row per graph of a side (in the side's order) plus a total row: the `hlo stats` figures, graph
    instructions, how many of them matched (and into which graphs of the other side), and with a profile the measured
    device time and executions per step."""
    nodes_by_graph: dict[str, list[str]] = {}
    for key, node in graph.nodes.items():
        nodes_by_graph.setdefault(node.graph, []).append(key)
    rows = []
    for record in records:
        document = stats_document(record)
        name = str(document.get("name"))
        keys = nodes_by_graph.get(name, [])
        matched_to: dict[str, int] = {}
        for key in keys:
            if key in matching_pairs:
                target = other_graph.nodes[matching_pairs[key]].graph
                matched_to[target] = matched_to.get(target, 0) + 1
        measured = ({"time_s": times.per_module.get(name, 0.0), "executions": times.module_executions.get(name, 0)}
                    if times is not None else {})
        rows.append(GraphRow(graph=name, **{k: document.get(k) for k in GRAPH_KEYS},
                             xla_flops=(document.get("xla_cost") or {}).get("flops"), graph_instructions=len(keys),
                             matched=sum(matched_to.values()), matched_to=matched_to, **measured))
    total: dict[str, Any] = {}
    for key in _TOTALLED:
        values = [value if isinstance(value, (int, float)) else None for value in (r.figure(key) for r in rows)]
        if any(v is not None for v in values):
            numbers = [v for v in values if v is not None]
            total[key] = sum(numbers) if len(numbers) == len(values) else None
    return [*rows, GraphRow(graph="total", **total)]


def node_times(graph, times) -> dict[str, float]:
    """Node key -> measured seconds per step (0 for instructions that did not run in the kept steps)."""
    if times is None:
        return {}
    return {key: times.per_instruction.get((node.graph, node.name), 0.0) for key, node in graph.nodes.items()}


def timed_pair(graph_a: Graph, graph_b: Graph, matching: Matching, ka: str, kb: str, a_s: float,
               b_s: float) -> TimedPair:
    """A matched pair with both sides' device time per step."""
    na, nb = graph_a.nodes[ka], graph_b.nodes[kb]
    return TimedPair(a=na.name, b=nb.name, graph_a=na.graph, graph_b=nb.graph, opcode=opcode_label(na),
                     source_a=source_group(na.op_name), source_b=source_group(nb.op_name), a_s=a_s, b_s=b_s,
                     delta_s=b_s - a_s, how=matching.how.get(ka))


def opcode_label(node: Node) -> str:
    """The opcode, with a fusion's kind: `fusion kLoop`."""
    return node.opcode + (f" {node.detail}" if node.detail and node.opcode == "fusion" else "")


def time_weighted(graph_a, graph_b, matching, times_a, times_b, top: int = 50) -> TimeWeighted:
    """The matching weighted by what it cost: each matched pair with both sides' measured device time per step, ranked
    by the time difference (b - a); totals of matched and one-sided time, and the device time of executions that name
    no instruction of the compared graphs."""
    ta, tb = node_times(graph_a, times_a), node_times(graph_b, times_b)
    pairs = []
    for ka, kb in matching.pairs.items():
        a_s, b_s = ta.get(ka, 0.0), tb.get(kb, 0.0)
        if not a_s and not b_s:
            continue
        pairs.append(timed_pair(graph_a, graph_b, matching, ka, kb, a_s, b_s))
    pairs.sort(key=lambda p: (-abs(p.delta_s), p.a))
    # fsum: correctly rounded in any order, so that the totals do not change with the order of the instructions'
    # sets (Python's hash seed)
    matched_a = math.fsum(ta.get(k, 0.0) for k in matching.pairs)
    matched_b = math.fsum(tb.get(k, 0.0) for k in matching.pairs.values())
    only_a = math.fsum(ta.get(k, 0.0) for k in matching.only_in_a)
    only_b = math.fsum(tb.get(k, 0.0) for k in matching.only_in_b)
    return TimeWeighted(
        basis="measured device time per step: per instruction, the median over the kept profiled steps",
        steps=SideCounts(a=times_a.steps, b=times_b.steps),
        kept_steps=SideSteps(a=times_a.kept, b=times_b.kept),
        dropped_steps=SideDropped(a={str(k): v for k, v in times_a.dropped.items()},
                                  b={str(k): v for k, v in times_b.dropped.items()}),
        totals=SideTotals(a=TimeTotals(matched_s=matched_a, only_s=only_a, unplaced_s=times_a.unplaced_s,
                                       device_s=times_a.device_s),
                          b=TimeTotals(matched_s=matched_b, only_s=only_b, unplaced_s=times_b.unplaced_s,
                                       device_s=times_b.device_s)),
        pairs=pairs[:top], pairs_total=len(pairs))
