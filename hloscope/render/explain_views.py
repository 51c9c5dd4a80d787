"""What every explain renderer shows, computed once from the explain report (plain data, no formatting)."""

from __future__ import annotations

from hloscope.render import fmt


def kernels_by_category(summary: dict) -> dict[str, float]:
    """Kernels per step by kind (fusion kinds, library calls, copies, ...); the rest is 'other'."""
    kernels = summary.get("kernels")
    if kernels is None:
        trace_kernels = summary.get("trace_kernels")
        return {"kernels (trace)": trace_kernels} if trace_kernels else {}
    parts = {k: float(v) for k, v in (summary.get("kernel_kinds") or {}).items()}
    rest = kernels - sum(parts.values())
    if rest > 0:
        parts["other"] = parts.get("other", 0.0) + rest
    return parts


def device_time_by_category(summary: dict) -> dict[str, float]:
    """Milliseconds per step by kernel category, plus the time the device sat idle."""
    parts = {k: v * 1e3 for k, v in (summary.get("categories_s") or {}).items()}
    if summary.get("device_idle_s"):
        parts["idle"] = summary["device_idle_s"] * 1e3
    return parts


def mode_rows(report: dict) -> list[dict]:
    """One row per mode for the step-time table, slowest last."""
    summaries = report.get("summaries", {})
    rows = []
    for entry in report.get("modes", []):
        summary = summaries.get(entry["mode"], {})
        kernels = summary.get("kernels")
        rows.append({**entry, "throughput_img_s": summary.get("throughput_img_s"), "kernels": kernels,
                     "trace_kernels": summary.get("trace_kernels"),
                     "kernels_per_step": kernels if kernels is not None else summary.get("trace_kernels"),
                     "device_busy_s": summary.get("device_busy_s"),
                     "device_idle_s": summary.get("device_idle_s"), "compiles_in_window": summary.get("compiles_in_window"),
                     "first_step_s": summary.get("first_step_s")})
    key = "roofline_s" if report.get("basis") == "roofline_lower_bound" else "step_time_s"
    return sorted(rows, key=lambda r: (r.get(key) is None, r.get(key) or 0.0))


def slower_modes(report: dict) -> list[dict]:
    """The rows of the modes slower than the fastest, in table order: the ones whose gap is explained (a comparison
    compiled for a target GPU has no measured gap to explain: its side-by-side table says what differs)."""
    if is_compiled(report):
        return []
    return [row for row in mode_rows(report) if row.get("gap_s") and row["mode"] != report.get("fastest")]


ROOFLINE_LABEL = "roofline lower bound per step (lower bound, not a prediction)"


def is_compiled(report: dict) -> bool:
    """Whether the modes were compiled for a target GPU and ranked on their roofline lower bound, not timed."""
    return report.get("basis") == "roofline_lower_bound" or (
        bool(report.get("modes")) and all(e.get("status") == "compiled" for e in report["modes"]))


def compiled_table(report: dict) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Modes compiled for a target GPU side by side: (mode names, lowest bound first; rows of (figure, one text per
    mode)). Kernel, library-call and copy launches come from XLA's thunk_sequence.txt; fusions, custom calls,
    transposes, FLOPs and bytes from the optimized HLO; the memory estimate from XLA's memory analysis."""
    summaries = report.get("summaries", {})
    entries = sorted((e for e in report.get("modes", []) if e.get("status") == "compiled"),
                     key=lambda e: (e.get("roofline_s") is None, e.get("roofline_s") or 0.0))
    modes = [e["mode"] for e in entries]
    columns = [summaries.get(m, {}) for m in modes]

    def row(label: str, values) -> tuple[str, list[str]]:
        return label, [str(v) for v in values]

    rows = [row("target GPU", [s.get("target") or "-" for s in columns]),
            row(ROOFLINE_LABEL, [_time(e.get("roofline_s")) for e in entries]),
            row("  same, launches overlapping", [_time(s.get("roofline_aggregate_s")) for s in columns]),
            row("  vs lowest bound", [fmt.ratio(e.get("ratio")) for e in entries]),
            row("  gap to lowest bound", [_time(e.get("gap_s")) for e in entries]),
            row("kernels (HLO)", [fmt.count(s.get("kernels")) for s in columns]),
            row("generated kernels (thunks)", [fmt.count(s.get("thunk_kernels")) for s in columns]),
            row("cuBLAS/cuDNN calls (thunks)", [fmt.count(s.get("thunk_library_calls")) for s in columns]),
            row("Triton fusions", [fmt.count(_triton(s)) for s in columns])]
    for kind in _keys(columns, "fusions"):
        rows.append(row(f"fusion {kind}", [fmt.count((s.get("fusions") or {}).get(kind, 0)) for s in columns]))
    for name in _keys(columns, "custom_calls"):
        rows.append(row(f"call {name}", [fmt.count((s.get("custom_calls") or {}).get(name, 0)) for s in columns]))
    rows += [row("copies (thunks)", [fmt.count(s.get("thunk_copies")) for s in columns]),
             row("copy ops (HLO)", [fmt.count(s.get("copies")) for s in columns]),
             row("transposes (HLO)", [fmt.count(s.get("transposes")) for s in columns]),
             row("FLOPs", [fmt.big(s.get("flops")) for s in columns]),
             row("bytes accessed", [_bytes(s.get("bytes_accessed")) for s in columns]),
             row("device memory (XLA estimate)", [_bytes(s.get("memory_estimate_bytes")) for s in columns])]
    return modes, rows


def _keys(columns: list[dict], field: str) -> list[str]:
    """The keys of one dict field over every mode, most frequent first."""
    totals: dict[str, float] = {}
    for summary in columns:
        for key, value in (summary.get(field) or {}).items():
            totals[key] = totals.get(key, 0) + value
    return sorted(totals, key=lambda k: (-totals[k], k))


def _triton(summary: dict) -> int | None:
    fusions = summary.get("fusions")
    return None if summary.get("kernels") is None else sum(
        n for kind, n in (fusions or {}).items() if "triton" in kind.lower())


def _time(seconds: float | None) -> str:
    """Roofline bounds of small steps are microseconds: 3 significant digits, not fmt.ms's 3 decimals."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.3g} µs" if abs(seconds) < 1e-3 else f"{seconds * 1e3:.4g} ms"


def _bytes(value: float | None) -> str:
    return "-" if value is None else f"{fmt.big(value)}B"


def estimate(contributor: dict, gap_s: float) -> str:
    """`~12.3 ms, 45% of the gap`, or `not sized`."""
    seconds = contributor["seconds"]
    return "not sized" if seconds is None else f"~{fmt.ms(seconds)}, {fmt.share(seconds, gap_s)} of the gap"


def config_text(meta: dict) -> str:
    """The comparison's scalar settings, `model=vit-tiny, batch_size=8, ...`."""
    return ", ".join(f"{k}={v}" for k, v in (meta.get("config") or {}).items() if not isinstance(v, (dict, list)))


def notes(report: dict) -> list[tuple[str, str]]:
    """(mode, note) for everything a mode could not read."""
    return [(mode, note) for mode, summary in report.get("summaries", {}).items() for note in summary.get("notes", [])]
