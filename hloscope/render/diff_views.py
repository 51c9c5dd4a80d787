"""What every diff renderer shows, derived once from the `hloscope diff --json` document."""

from __future__ import annotations

from hloscope.render import fmt

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


def side_by_side(report: dict, full_paths: bool = True) -> list[tuple[str, str, str, str]]:
    """(label, a, b, b - a) rows: identity, then every scalar statistic, then each kind/target/memory entry."""
    a, b = report["a"], report["b"]
    rows = [(key, str(a.get(key, "-")), str(b.get(key, "-")), "") for key in ("name", "file", "platform", "stage")]
    if not full_paths:
        rows[1] = ("file", str(a.get("file", "-")).rsplit("/", 1)[-1], str(b.get("file", "-")).rsplit("/", 1)[-1], "")
    runs = report.get("runs")
    if runs:
        for key, label in STEP_LABELS:
            ra, rb = runs["a"].get(key), runs["b"].get(key)
            rows.append((label, fmt.ms(ra), fmt.ms(rb), fmt.signed_ms(rb - ra) if ra is not None and rb is not None
                         else ""))
    for key in SCALARS:
        if key in a or key in b:
            label = "top-level copies" if key == "copies" else key
            rows.append((label, _num(a.get(key)), _num(b.get(key)), _signed(report["delta"].get(key))))
    bound_a, bound_b = a.get("roofline") or {}, b.get("roofline") or {}
    for key in ("serial_s", "aggregate_s"):  # GPU modules with XLA's target config beside them
        ra, rb = bound_a.get(key), bound_b.get(key)
        if ra is not None or rb is not None:
            rows.append((f"roofline LOWER BOUND {key[:-2]}", fmt.ms(ra), fmt.ms(rb),
                         f"{(rb - ra) * 1e3:+.3f} ms" if ra is not None and rb is not None else ""))
    for key, label in (("transpose", "transpose instructions"), ("copy", "copy instructions")):
        ca, cb = (a.get("opcodes") or {}).get(key, 0), (b.get("opcodes") or {}).get(key, 0)
        rows.append((label, _num(ca), _num(cb), _signed(cb - ca)))
    for group, prefix in GROUPS:
        rows.extend(_group_rows(a.get(group), b.get(group), prefix))
    traces = report.get("traces")
    if traces:
        ta, tb = traces["a"], traces["b"]
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


def opcode_changes(report: dict, limit: int = 15) -> list[tuple[str, int, int, str]]:
    """(opcode, count in A, count in B, signed change) for the opcodes whose count changed most."""
    oa, ob = report["a"].get("opcodes") or {}, report["b"].get("opcodes") or {}
    changes = report["delta"].get("opcodes") or {}
    return [(op, oa.get(op, 0), ob.get(op, 0), f"{d:+d}") for op, d in list(changes.items())[:limit]]


def kernel_changes(report: dict, limit: int | None = None) -> list[tuple[str, str, str, str]]:
    """(kernel, A us, B us, signed change) for the kernels whose total time changed most; [] without traces."""
    rows = (report.get("traces") or {}).get("kernels_changed_most") or []
    return [(r["name"], f"{r['a_us']:.1f}", f"{r['b_us']:.1f}", f"{r['delta_us']:+.1f}") for r in rows[:limit]]


def match_rate_line(report: dict) -> str:
    """`match rate: after optimizations 60% (192 of 318), before optimizations 60% (666 of 1,115)`."""
    parts = [f"{stage.replace('_', ' ')} {fmt.share(r['matched'], max(r['a_instructions'], r['b_instructions']))} "
             f"({fmt.count(r['matched'])} of {fmt.count(max(r['a_instructions'], r['b_instructions']))})"
             for stage, r in (report.get("match_rate") or {}).items()]
    return "match rate: " + ", ".join(parts) if parts else ""


def matching_line(report: dict) -> str:
    m = report.get("matching", {})
    return (f"{report.get('matched', 0):,} instructions matched; {m.get('only_in_a', 0):,} of "
            f"{m.get('a_instructions', 0):,} only in A, {m.get('only_in_b', 0):,} of {m.get('b_instructions', 0):,} "
            f"only in B (stages: " + ", ".join(f"{k} {v:,}" for k, v in m.get("by_stage", {}).items()) + ")")


def group_rows(groups: list[dict], limit: int = 15, examples: bool = True) -> list[tuple[str, ...]]:
    rows = []
    for g in groups[:limit]:
        row = (g["op_name"], str(g["count"]), ", ".join(f"{op} {n}" for op, n in g["opcodes"].items()))
        rows.append((*row, ", ".join(g["examples"][:3])) if examples else row)
    return rows
