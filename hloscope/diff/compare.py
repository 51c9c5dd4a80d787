"""The side-by-side comparison of two modules' statistics (and runs and traces when there are any): pure functions."""

from __future__ import annotations

from numbers import Number

from hloscope.diff.graph import Graph
from hloscope.diff.match import Matching, group_by_source


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


def matching_report(graph_a: Graph, graph_b: Graph, matching: Matching, groups: int = 50) -> dict:
    return {
        "matched": len(matching.pairs),
        "matching": {"a_instructions": len(graph_a.nodes), "b_instructions": len(graph_b.nodes),
                     "only_in_a": len(matching.only_in_a), "only_in_b": len(matching.only_in_b),
                     "by_stage": matching.counts()},
        "only_in_a": group_by_source(graph_a, matching.only_in_a)[:groups],
        "only_in_b": group_by_source(graph_b, matching.only_in_b)[:groups],
    }


TIMING_KEYS = ("median_s", "mean_s", "p10_s", "p90_s", "first_step_s", "throughput_img_s")


def compare_runs(run_a: dict, run_b: dict) -> dict:
    """Step time side by side from two run.json records."""
    a, b = _timing_row(run_a), _timing_row(run_b)
    ratio = b["median_s"] / a["median_s"] if a.get("median_s") and b.get("median_s") else None
    return {"a": a, "b": b, "delta": delta({k: a[k] for k in TIMING_KEYS}, {k: b[k] for k in TIMING_KEYS}),
            "ratio": ratio}


def _timing_row(run: dict) -> dict:
    timing = run.get("timing") or {}
    return {"mode": run.get("mode"), "status": run.get("status"), **{k: timing.get(k) for k in TIMING_KEYS}}


STEP_KEYS = ("kernels", "device_busy_us", "device_idle_us", "host_duration_us", "host_runtime_us")


def trace_summary(stats: dict) -> dict:
    """The scalar figures of a `trace stats` record, plus per-step means over the steps that ran kernels."""
    out = {k: stats.get(k) for k in ("steps", "events", "kernels", "device_time_us", "host_runtime_us")}
    out["categories"] = stats.get("categories") or {}
    steps = [s for s in stats.get("per_step") or [] if s.get("kernels")]
    out["per_step"] = {k: sum(s.get(k, 0) for s in steps) / len(steps) for k in STEP_KEYS} if steps else {}
    return out


def compare_traces(trace_a: dict, trace_b: dict, top: int = 15) -> dict:
    """Per-step kernels, busy and idle time, time by category and the kernels whose total time changed most."""
    totals_a = {t["name"]: t.get("total_us", 0.0) for t in trace_a.get("top", [])}
    totals_b = {t["name"]: t.get("total_us", 0.0) for t in trace_b.get("top", [])}
    changed = sorted(({"name": n, "a_us": totals_a.get(n, 0.0), "b_us": totals_b.get(n, 0.0),
                       "delta_us": totals_b.get(n, 0.0) - totals_a.get(n, 0.0)} for n in set(totals_a) | set(totals_b)),
                     key=lambda r: (-abs(r["delta_us"]), r["name"]))
    a, b = trace_summary(trace_a), trace_summary(trace_b)
    return {"a": a, "b": b, "delta": compare_stats(a, b), "kernels_changed_most": changed[:top]}


def diff_report(stats_a: dict, stats_b: dict, graph_a: Graph, graph_b: Graph, matching: Matching,
                run_a: dict | None = None, run_b: dict | None = None,
                trace_a: dict | None = None, trace_b: dict | None = None) -> dict:
    """The `hloscope diff --json` document."""
    report = {"a": stats_a, "b": stats_b, "delta": compare_stats(stats_a, stats_b),
              **matching_report(graph_a, graph_b, matching)}
    if run_a is not None and run_b is not None:
        report["runs"] = compare_runs(run_a, run_b)
    if trace_a is not None and trace_b is not None:
        report["traces"] = compare_traces(trace_a, trace_b)
    return report
