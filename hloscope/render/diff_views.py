"""What every diff renderer shows, derived once from the typed diff report (hloscope.diff.report.DiffReport)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hloscope.render import fmt

if TYPE_CHECKING:
    from hloscope.diff.report import DiffReport, MatchRate

# Statistics shown in the side-by-side table as scalars, in this order, and the groups expanded entry by entry.
SCALARS = ("computations", "instructions", "kernels", "flops", "transcendentals", "bytes_accessed", "copies",
           "uncosted_custom_calls")
GROUPS = (("kernel_breakdown", "kernels"), ("fusions", "fusion"), ("custom_calls", "custom-call"),
          ("precision", "dots"), ("memory", "memory"), ("collectives", "collectives"), ("xla_cost", "XLA cost"))


STEP_LABELS = (("median_s", "step time median"), ("p10_s", "step time p10"), ("p90_s", "step time p90"),
               ("first_step_s", "first step (with compilation)"))


def _num(value) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt.big(value) if abs(value) >= 1e5 else fmt.count(value)
    return "-" if value is None else str(value)


def _signed(value) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value == 0:
        return ""
    return ("+" if value > 0 else "-") + _num(abs(value))


def side_by_side(report: DiffReport, full_paths: bool = True) -> list[tuple[str, str, str, str]]:
    """(label, a, b, b - a) rows: identity, then every scalar statistic, then each kind/target/memory entry. The
    sides' statistics are walked key by key (`report.record`): whatever figures their `hlo stats` records hold."""
    a, b = report.record("a"), report.record("b")
    rows = [(key, str(a.get(key, "-")), str(b.get(key, "-")), "") for key in ("name", "file", "platform", "stage")]
    if not full_paths:
        rows[1] = ("file", str(a.get("file", "-")).rsplit("/", 1)[-1], str(b.get("file", "-")).rsplit("/", 1)[-1], "")
    if report.runs:
        for key, label in STEP_LABELS:
            ra, rb = getattr(report.runs.a, key), getattr(report.runs.b, key)
            rows.append((label, fmt.ms(ra), fmt.ms(rb), fmt.signed_ms(rb - ra) if ra is not None and rb is not None
                         else ""))
    for key in SCALARS:
        if key in a or key in b:
            label = "top-level copies" if key == "copies" else key
            rows.append((label, _num(a.get(key)), _num(b.get(key)), _signed(report.delta.get(key))))
    bound_a, bound_b = a.get("roofline") or {}, b.get("roofline") or {}
    for key in ("serial_s", "aggregate_s"):  # GPU modules with XLA's target config beside them
        ra, rb = bound_a.get(key), bound_b.get(key)
        if ra is not None or rb is not None:
            rows.append((f"roofline LOWER BOUND {key[:-2]}", fmt.ms(ra), fmt.ms(rb),
                         fmt.signed_ms(rb - ra) if ra is not None and rb is not None else ""))
    for key, label in (("transpose", "transpose instructions"), ("copy", "copy instructions")):
        ca, cb = (a.get("opcodes") or {}).get(key, 0), (b.get("opcodes") or {}).get(key, 0)
        rows.append((label, _num(ca), _num(cb), _signed(cb - ca)))
    for group, prefix in GROUPS:
        rows.extend(_group_rows(a.get(group), b.get(group), prefix))
    if report.traces:
        ta, tb = report.traces.a.to_dict(), report.traces.b.to_dict()  # their figures, key by key as the records
        rows.extend(_group_rows({k: v for k, v in ta.items() if not isinstance(v, dict)},
                                {k: v for k, v in tb.items() if not isinstance(v, dict)}, "trace"))
        rows.extend(_group_rows(ta.get("per_step"), tb.get("per_step"), "trace per step"))
        rows.extend(_group_rows(ta.get("categories"), tb.get("categories"), "trace us"))
    return rows


def _group_rows(da, db, prefix: str, depth: int = 0) -> list[tuple[str, str, str, str]]:
    """One row per scalar entry of a statistics group; nested groups (buffer_assignment) one level down."""
    da, db = da if isinstance(da, dict) else {}, db if isinstance(db, dict) else {}
    rows = []
    for key in list(da) + [k for k in db if k not in da]:
        va, vb = da.get(key), db.get(key)
        if isinstance(va, dict) or isinstance(vb, dict):
            if depth == 0:
                rows.extend(_group_rows(va, vb, f"{prefix} {key}", depth + 1))
            continue
        if isinstance(va, list) or isinstance(vb, list):
            continue
        numeric = all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in (va, vb))
        rows.append((f"{prefix} {key}", _num(va), _num(vb), _signed((vb or 0) - (va or 0)) if numeric else ""))
    return rows


def opcode_changes(report: DiffReport, limit: int = 15) -> list[tuple[str, int, int, str]]:
    """(opcode, count in A, count in B, signed change) for the opcodes whose count changed most."""
    oa, ob = report.record("a").get("opcodes") or {}, report.record("b").get("opcodes") or {}
    changes = report.delta.get("opcodes") or {}
    return [(op, oa.get(op, 0), ob.get(op, 0), f"{d:+d}") for op, d in list(changes.items())[:limit]]


def kernel_changes(report: DiffReport, limit: int | None = None) -> list[tuple[str, str, str, str]]:
    """(kernel, A us, B us, signed change) for the kernels whose total time changed most; [] without traces."""
    rows = report.traces.kernels_changed_most if report.traces else []
    return [(r.name, f"{r.a_us:.1f}", f"{r.b_us:.1f}", f"{r.delta_us:+.1f}") for r in rows[:limit]]


def match_rate_line(rates: dict[str, MatchRate]) -> str:
    """`match rate: after optimizations 60% (192 of 318), before optimizations 60% (666 of 1,115)`."""
    parts = [f"{stage.replace('_', ' ')} {fmt.share(r.matched, max(r.a_instructions, r.b_instructions))} "
             f"({fmt.count(r.matched)} of {fmt.count(max(r.a_instructions, r.b_instructions))})"
             for stage, r in rates.items()]
    return "match rate: " + ", ".join(parts) if parts else ""


def matching_line(report: DiffReport) -> str:
    m = report.matching
    return (f"{report.matched:,} instructions matched; {m.only_in_a:,} of "
            f"{m.a_instructions:,} only in A, {m.only_in_b:,} of {m.b_instructions:,} "
            f"only in B (stages: " + ", ".join(f"{k} {v:,}" for k, v in m.by_stage.items()) + ")")


GRAPH_HEADERS = ["graph", "instructions", "graph instructions", "matched", "kernels", "FLOPs", "XLA FLOPs",
                 "bytes accessed", "device time / step", "executions / step"]


def graph_rows_of(report: DiffReport, side: str) -> list[tuple[str, ...]]:
    """The per-graph table of one side (`graphs.a` / `graphs.b`) with its total row; measured columns only with a
    profile."""
    rows: list[tuple[str, ...]] = []
    for r in report.graphs.side(side):
        matched, graph_instructions = r.figure("matched"), r.figure("graph_instructions")
        rows.append((r.graph, _num(r.figure("instructions")), _num(graph_instructions),
                     f"{_num(matched)} ({fmt.share(matched, graph_instructions)})" if matched is not None else "-",
                     _num(r.figure("kernels")), fmt.big(r.figure("flops")), fmt.big(r.figure("xla_flops")),
                     fmt.big(r.figure("bytes_accessed")), fmt.ms(r.figure("time_s")), _num(r.figure("executions"))))
    return rows


def several_graphs(report: DiffReport) -> bool:
    return any(len(report.graphs.side(side)) > 2 for side in ("a", "b"))  # a graph and the total row: one graph


def time_totals_line(report: DiffReport) -> str:
    """`measured device time per step (median over 5 / 4 kept profiled steps): A 0.922 ms ...`."""
    tw = report.time_weighted
    if not tw:
        return ""
    a, b = tw.totals.a, tw.totals.b
    return (f"measured device time per step (per instruction, the median over {tw.steps.a} / "
            f"{tw.steps.b} kept profiled steps): matched instructions A {fmt.ms(a.matched_s)}, "
            f"B {fmt.ms(b.matched_s)} ({fmt.signed_ms(b.matched_s - a.matched_s)}); only in A "
            f"{fmt.ms(a.only_s)}; only in B {fmt.ms(b.only_s)}; in no compared instruction A "
            f"{fmt.ms(a.unplaced_s)}, B {fmt.ms(b.unplaced_s)}; whole device time (median of the per-step sums) "
            f"A {fmt.ms(a.device_s)}, B {fmt.ms(b.device_s)}")


PAIR_HEADERS = ["A instruction", "B instruction", "opcode", "source op (A | B)", "A / step", "B / step", "B - A"]


def time_pair_rows(report: DiffReport, limit: int | None = 15, graphs: bool = False) -> list[tuple[str, ...]]:
    """Matched pairs ranked by the difference of their measured device time per step."""
    rows: list[tuple[str, ...]] = []
    for p in (report.time_weighted.pairs if report.time_weighted else [])[:limit]:
        a, b = p.a, p.b
        if graphs:
            a, b = f"{a} ({p.graph_a})", f"{b} ({p.graph_b})"
        rows.append((a, b, p.opcode, f"{p.source_a} | {p.source_b}", fmt.us(p.a_s), fmt.us(p.b_s),
                     _signed_us(p.delta_s)))
    return rows


def _signed_us(seconds: float) -> str:
    text = fmt.us(abs(seconds))
    return text if text == fmt.us(0.0) else ("+" if seconds > 0 else "-") + text


def group_headers(report: DiffReport, examples: bool = True) -> list[str]:
    headers = ["source op", "count", "opcodes"]
    if report.time_weighted:
        headers.append("device time / step")
    if several_graphs(report):
        headers.append("graphs")
    return [*headers, "examples"] if examples else headers


def group_rows_of(report: DiffReport, side: str, limit: int = 15, examples: bool = True) -> list[tuple[str, ...]]:
    """One-sided groups of side "a" or "b" with their measured time per step (when both sides have profiles: then
    ranked by it) and the graphs they sit in (when a side has several)."""
    timed, graphs = bool(report.time_weighted), several_graphs(report)
    rows = []
    for g in report.groups(side)[:limit]:
        row = [g.op_name, str(g.count), ", ".join(f"{op} {n}" for op, n in g.opcodes.items())]
        if timed:
            row.append(fmt.us(g.time_s or 0.0))
        if graphs:
            row.append(", ".join(f"{name} {n}" for name, n in (g.graphs or {}).items()))
        if examples:
            row.append(", ".join(g.examples[:3]))
        rows.append(tuple(row))
    return rows
