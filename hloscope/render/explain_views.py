"""What every explain renderer shows, computed once from the explain report: the figures as text (formatted with
hloscope.render.fmt, so the terminal, Markdown and HTML reports print the same), never markup. Each renderer escapes
what it prints: mode names, op groups, claims and paths come from the user's runs."""

from __future__ import annotations

from dataclasses import dataclass, field

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


def config_text(meta: dict) -> str:
    """The comparison's scalar settings, `model=vit-tiny, batch_size=8, ...`."""
    return ", ".join(f"{k}={v}" for k, v in (meta.get("config") or {}).items() if not isinstance(v, (dict, list)))


AUDIT_HEADING = "The modes did not run the same settings (compare's fairness audit):"


def audit_mismatches(report: dict) -> list[str]:
    """The fairness audit's mismatches recorded in the comparison (`MISMATCH setting: mode=value, ...`), which every
    renderer shows first: a gap between modes that ran different settings is not only the frameworks'."""
    lines = (report.get("comparison") or {}).get("audit_mismatches")
    return [str(line) for line in lines] if isinstance(lines, list) else []


def notes(report: dict) -> list[tuple[str, str]]:
    """(mode, note) for everything a mode could not read."""
    return [(mode, note) for mode, summary in report.get("summaries", {}).items() for note in summary.get("notes", [])]


# --- Timed comparisons: the gap of every run to the baseline, with its interval, verdict and measured parts ---------

WITHIN_NOISE = "within noise"  # the engine's node for the summed non-significant ledger parts
RESIDUAL_LABEL = "residual (timed gap - profiled gap: profiler effect and noise)"
MODE_ANNOTATIONS_LABEL = "hypotheses with no significant part of the step to explain"
OP_TOP = 10


def baseline_name(report: dict) -> str | None:
    return report.get("baseline") or report.get("fastest")


def baseline_line(report: dict) -> str:
    """`Baseline: jax (the fastest run)`."""
    name = baseline_name(report)
    if not name:
        return "No run finished with a step time."
    why = "chosen with --baseline" if report.get("baseline_chosen") else "the fastest run"
    return f"Baseline: {name} ({why}); every gap is this run's median step minus the baseline's."


def method_lines(report: dict) -> list[str]:
    """How gaps and parts are judged, from the report's `method`."""
    method = report.get("method")
    if not isinstance(method, dict):
        return []
    lines = []
    if method.get("gap"):
        lines.append(f"gap: {method['gap']}")
    if method.get("significant"):
        lines.append(f"significant gap: {method['significant']}")
    if method.get("nodes"):
        lines.append(f"significant part of the step: {method['nodes']}")
    return lines


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _spread(entry: dict, summary: dict) -> dict | None:
    spread = entry.get("step_spread")
    if isinstance(spread, dict) and _number(spread.get("median")):
        return spread
    times = summary.get("step_times_s")
    if isinstance(times, list) and times and all(_number(t) for t in times):
        from hloscope.significance import spread as of_sample

        return of_sample(times)
    return None


def spread_text(spread: dict | None) -> str:
    """`27.100-27.500 ms` (p10-p90)."""
    if not spread or not _number(spread.get("p10")) or not _number(spread.get("p90")):
        return "-"
    return f"{fmt.ms(spread['p10']).removesuffix(' ms')}-{fmt.ms(spread['p90'])}"


def step_text(entry: dict, summary: dict) -> str:
    """`27.300 ms (p10-p90 27.100-27.500 ms, 10 steps)`."""
    spread = _spread(entry, summary)
    median = entry.get("step_time_s")
    if not _number(median):
        return "-"
    if spread is None:
        return fmt.ms(median)
    steps = f", {spread['n']} steps" if _number(spread.get("n")) else ""
    return f"{fmt.ms(median)} (p10-p90 {spread_text(spread)}{steps})"


def gap_text(entry: dict) -> str:
    """`+1.100 ms (+1.010 to +1.180 ms)`: the gap per step and its 95% interval."""
    if not _number(entry.get("gap_s")):
        return "-"
    interval = entry.get("gap_ci_s")
    return fmt.signed_ms(entry["gap_s"]) + (f" ({fmt.ms_interval(interval)})" if interval else "")


def ratio_text(entry: dict) -> str:
    """`1.23x (1.19-1.27x)`."""
    if not _number(entry.get("ratio")):
        return "-"
    interval = entry.get("ratio_ci")
    return fmt.ratio(entry["ratio"]) + (f" ({fmt.ratio_interval(interval)})" if interval else "")


def verdict_text(entry: dict) -> str:
    """The verdict in words with its figures: `1.23x (1.19-1.27x), +1.100 ms (+1.010 to +1.180 ms): slower`,
    `no significant difference: -0.020 ms (-0.080 to +0.050 ms)`, `baseline`, or the run's status."""
    verdict = entry.get("verdict")
    if verdict is None:
        return str(entry.get("status") or "-")
    if verdict == "baseline":
        return "baseline"
    if verdict == "no significant difference":
        return f"no significant difference: {gap_text(entry)}"
    return f"{ratio_text(entry)}, {gap_text(entry)}: {verdict}"


def status_text(entry: dict) -> str:
    """`ok`, `ok, noisy`, `failed`."""
    status = str(entry.get("status") or "-")
    return f"{status}, noisy" if entry.get("noisy") else status


@dataclass
class AnnotationView:
    title: str
    claim: str
    estimate: bool  # a figure in the claim rests on an assumed constant

    @property
    def label(self) -> str:
        return self.title + (" (estimate)" if self.estimate else "")


@dataclass
class ContributorView:
    rank: int
    title: str
    seconds: str  # `+5.000 ms`
    interval: str  # `+4.800 to +5.200 ms`
    share: str  # `29%` of the gap
    p_value: str  # `p = 0.002`
    kind: str  # "measured" | "estimate"
    claim: str
    annotations: list[AnnotationView] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)  # the node's seconds in each kept profiled step, per run

    @property
    def figures(self) -> str:
        """`+5.000 ms (95% interval +4.800 to +5.200 ms), 29% of the gap, p = 0.002, measured`."""
        interval = f" (95% interval {self.interval})" if self.interval != "-" else ""
        return f"{self.seconds}{interval}, {self.share} of the gap, {self.p_value}, {self.kind}"


@dataclass
class OpRow:
    group: str
    run_calls: str  # calls per step (median over the kept profiled steps)
    run_per_call: str  # median duration of one call
    baseline_calls: str
    baseline_per_call: str
    run_time: str  # time per step
    baseline_time: str
    delta: str  # run - baseline, per step; ` *` when significant
    significant: bool


OP_HEADERS = ("op group", "calls/step", "per call", "time/step", "calls/step", "per call", "time/step", "delta")
# Columns 1-3 are the run's, 4-6 the baseline's (medians over the kept profiled steps); delta = run - baseline.


@dataclass
class ModeView:
    mode: str
    baseline: str
    status: str  # `ok` / `ok, noisy` / `failed`
    noisy: bool
    step: str  # this run's step time with its p10-p90
    baseline_step: str
    verdict: str  # the verdict in words with its figures
    significant: bool
    config_differences: list[tuple[str, str, str]]  # (setting, this run, baseline)
    per_sample: str | None
    contributors: list[ContributorView]
    within_noise: str | None
    residual: str | None  # `+0.600 ms (profiled gap +16.500 ms)`
    annotations: list[AnnotationView]
    ops: list[OpRow]
    notes: list[str]
    replay: str | None = None  # program on device vs framework overhead (hloscope.replay.explain)


def _annotations(items) -> list[AnnotationView]:
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            out.append(AnnotationView(str(item.get("title") or item.get("rule") or "-"), str(item.get("claim") or ""),
                                      item.get("kind") == "estimate"))
    return out


def _contributors(entry: dict) -> tuple[list[ContributorView], str | None]:
    """The significant contributors ranked, and the within-noise line."""
    ranked, noise = [], None
    gap = entry.get("gap_s") if _number(entry.get("gap_s")) else None
    for item in entry.get("contributors") or []:
        if not isinstance(item, dict):
            continue
        seconds = item.get("seconds") if _number(item.get("seconds")) else None
        if item.get("node") == WITHIN_NOISE or not item.get("significant"):
            text = f"{item.get('title') or 'Other parts of the step, each within noise'}: {fmt.signed_ms(seconds)}"
            if item.get("claim"):
                text += f" ({item['claim']})"
            noise = text if noise is None else f"{noise}; {text}"
            continue
        ranked.append(ContributorView(
            len(ranked) + 1, str(item.get("title") or item.get("node") or "-"), fmt.signed_ms(seconds),
            fmt.ms_interval(item.get("interval_s")), fmt.share(seconds, gap),
            fmt.p_value(item.get("p_value") if _number(item.get("p_value")) else None),
            "estimate" if item.get("kind") == "estimate" else "measured", str(item.get("claim") or ""),
            _annotations(item.get("annotations")),
            item["evidence"] if isinstance(item.get("evidence"), dict) else {}))
    return ranked, noise


def _op_rows(entry: dict, top: int = OP_TOP) -> list[OpRow]:
    rows = []
    for item in (entry.get("ops") or [])[:top]:
        if not isinstance(item, dict):
            continue
        run = item.get("run") if isinstance(item.get("run"), dict) else {}
        base = item.get("baseline") if isinstance(item.get("baseline"), dict) else {}

        def calls(side: dict) -> str:
            return fmt.count(side.get("calls")) if _number(side.get("calls")) else "-"

        def per_call(side: dict) -> str:
            return fmt.us(side.get("per_call_s")) if _number(side.get("per_call_s")) else "-"

        def time(side: dict) -> str:
            return fmt.ms(side.get("seconds")) if _number(side.get("seconds")) else "-"

        seconds = item.get("seconds") if _number(item.get("seconds")) else None
        significant = bool(item.get("significant"))
        rows.append(OpRow(str(item.get("group") or "-"), calls(run), per_call(run), calls(base), per_call(base),
                          time(run), time(base), fmt.signed_ms(seconds) + (" *" if significant else ""), significant))
    return rows


def _per_sample(entry: dict, baseline: str) -> str | None:
    """`batch 16 against 8 under jax: 1.706 ms per sample against 1.275 ms, 1.34x, +0.431 ms (+0.420 to +0.440 ms)`."""
    data = entry.get("per_sample")
    if not isinstance(data, dict):
        return None
    batch = data.get("batch_size") if isinstance(data.get("batch_size"), dict) else {}
    ratio = fmt.ratio(data["ratio"]) if _number(data.get("ratio")) else "-"
    def seconds(key: str) -> float | None:
        return data[key] if _number(data.get(key)) else None

    interval = data.get("gap_ci_s")
    return (f"batch {batch.get('run', '-')} against {batch.get('baseline', '-')} under {baseline}: "
            f"{fmt.ms(seconds('time_per_sample_s'))} per sample against {fmt.ms(seconds('baseline_time_per_sample_s'))}"
            f", {ratio}, {fmt.signed_ms(seconds('gap_s'))}" + (f" ({fmt.ms_interval(interval)})" if interval else ""))


def _residual(entry: dict) -> str | None:
    if not _number(entry.get("profiled_gap_s")) or not _number(entry.get("residual_s")):
        return None  # no causes were sought (no significant gap) or no profile: nothing was set against the gap
    return f"{fmt.signed_ms(entry['residual_s'])} (profiled gap {fmt.signed_ms(entry['profiled_gap_s'])})"


def mode_views(report: dict) -> list[ModeView]:
    """One view per timed run other than the baseline, in step-table order (fastest first)."""
    if is_compiled(report):
        return []
    summaries = report.get("summaries") or {}
    base = baseline_name(report) or "-"
    base_entry = next((e for e in report.get("modes", []) if e.get("mode") == base), {})
    base_step = step_text(base_entry, summaries.get(base) or {}) if base_entry else "-"
    views = []
    for entry in mode_rows(report):
        if entry.get("verdict") in (None, "baseline"):
            continue
        summary = summaries.get(entry["mode"]) or {}
        contributors, noise = _contributors(entry)
        differences = [(str(d.get("field")), str(d.get("a")), str(d.get("b")))
                       for d in entry.get("config_differences") or [] if isinstance(d, dict)]
        views.append(ModeView(
            str(entry["mode"]), str(base), status_text(entry), bool(entry.get("noisy")), step_text(entry, summary),
            base_step, verdict_text(entry), bool(entry.get("significant")), differences, _per_sample(entry, str(base)),
            contributors, noise, _residual(entry), _annotations(entry.get("annotations")), _op_rows(entry),
            [str(n) for n in entry.get("notes") or []], replay=replay_line(entry)))
    return views


def step_rows(report: dict) -> list[dict]:
    """The step table's cells as text, one row per run (fastest first): mode, status (with `noisy`), step median,
    p10-p90, ratio and gap to the baseline each with its 95% interval, verdict, kernels/step, device idle/step,
    compiles in the timed window."""
    summaries = report.get("summaries") or {}
    rows = []
    for row in mode_rows(report):
        entry_spread = _spread(row, summaries.get(row["mode"]) or {})
        baseline = row.get("verdict") == "baseline"
        rows.append({
            "mode": str(row["mode"]), "status": str(row.get("status") or "-"), "noisy": bool(row.get("noisy")),
            "step": fmt.ms(row["step_time_s"]) if _number(row.get("step_time_s")) else "-",
            "spread": spread_text(entry_spread),
            "ratio": fmt.ratio(row["ratio"]) if _number(row.get("ratio")) else "-",
            "ratio_ci": "" if baseline or not row.get("ratio_ci") else f"({fmt.ratio_interval(row['ratio_ci'])})",
            "gap": fmt.signed_ms(row["gap_s"]) if _number(row.get("gap_s")) else "-",
            "gap_ci": "" if baseline or not row.get("gap_ci_s") else f"({fmt.ms_interval(row['gap_ci_s'])})",
            "verdict": str(row.get("verdict") or "-"),
            "kernels": fmt.count(row["kernels_per_step"]) if _number(row.get("kernels_per_step")) else "-",
            "idle": fmt.ms(row["device_idle_s"]) if _number(row.get("device_idle_s")) else "-",
            "compiles": fmt.count(row["compiles_in_window"]) if _number(row.get("compiles_in_window")) else "-",
        })
    return rows


def replay_line(entry: dict) -> str | None:
    """One line for the renderers: the measured split (and against the baseline), or that the split is inferred."""
    data = entry.get("replay")
    if not isinstance(data, dict):
        return None
    if not data.get("measured"):
        if "program_s" in data:
            return (f"program vs framework overhead (inferred from the profile, no replay): device busy "
                    f"{fmt.ms(data['program_s'])}, idle {fmt.ms(data['overhead_s'])} per profiled step")
        return "program vs framework overhead: inferred only (no replay.json; run `hloscope replay RUN_DIR`)"
    low, high = data["overhead_ci_s"]
    line = (f"replayed (measured, {data.get('compiler')}): program on device {fmt.ms(data['program_s'])}, framework "
            f"overhead {fmt.ms(data['overhead_s'])} (95% {fmt.ms(low)} to {fmt.ms(high)})")
    if "inferred_overhead_s" in data:
        agree = "within" if data["inferred_within_interval"] else "outside"
        line += f"; the profile's idle estimate {fmt.ms(data['inferred_overhead_s'])} is {agree} that interval"
    gap = data.get("against_baseline")
    if gap:
        line += (f"; against the baseline: program {fmt.signed_ms(gap['program_gap_s'])} "
                 f"(95% {fmt.ms_interval(gap['program_gap_ci_s'])}), overhead "
                 f"{fmt.signed_ms(gap['overhead_gap_s'])} (95% {fmt.ms_interval(gap['overhead_gap_ci_s'])})")
    return line
