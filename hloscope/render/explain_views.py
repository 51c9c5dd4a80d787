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
    return sorted(rows, key=lambda r: (r["step_time_s"] is None, r["step_time_s"] or 0.0))


def slower_modes(report: dict) -> list[dict]:
    """The rows of the modes slower than the fastest, in table order: the ones whose gap is explained."""
    return [row for row in mode_rows(report) if row.get("gap_s") and row["mode"] != report.get("fastest")]


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
