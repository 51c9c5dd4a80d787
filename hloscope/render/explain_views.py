"""What every explain renderer shows, computed once from the explain report (plain data, no formatting)."""

from __future__ import annotations


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
        rows.append({**entry, "throughput_img_s": summary.get("throughput_img_s"), "kernels": summary.get("kernels"),
                     "trace_kernels": summary.get("trace_kernels"), "device_busy_s": summary.get("device_busy_s"),
                     "device_idle_s": summary.get("device_idle_s"), "compiles_in_window": summary.get("compiles_in_window"),
                     "first_step_s": summary.get("first_step_s")})
    return sorted(rows, key=lambda r: (r["step_time_s"] is None, r["step_time_s"] or 0.0))
