"""What every explain renderer shows, computed once from the explain report: the figures as text (formatted with
hloscope.render.fmt, so the terminal, Markdown and HTML reports print the same), never markup. Each renderer escapes
what it prints: mode names, op groups, claims and paths come from the user's runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from msgspec import UnsetType

from hloscope.render import fmt
from hloscope.significance import Spread
from hloscope.significance import spread as of_sample

if TYPE_CHECKING:  # the explain layer's types; at run time these modules only read their attributes
    from hloscope.explain.hypotheses import Annotation
    from hloscope.explain.ledger import OpFigures
    from hloscope.explain.report import Contributor, ExplainReport, ModeResult, ModeScaling, OpChange, ScalingPoint
    from hloscope.explain.summary import ModeSummary


def kernels_by_category(summary: ModeSummary | None) -> dict[str, float]:
    """Kernels per step by kind (fusion kinds, library calls, copies, ...); the rest is 'other'."""
    if summary is None:
        return {}
    if summary.kernels is None:
        return {"kernels (trace)": summary.trace_kernels} if summary.trace_kernels else {}
    parts = {k: float(v) for k, v in summary.kernel_kinds.items()}
    rest = summary.kernels - sum(parts.values())
    if rest > 0:
        parts["other"] = parts.get("other", 0.0) + rest
    return parts


def device_time_by_category(summary: ModeSummary | None) -> dict[str, float]:
    """Milliseconds per step by kernel category, plus the time the device sat idle."""
    if summary is None:
        return {}
    parts = {k: v * 1e3 for k, v in summary.categories_s.items()}
    if summary.device_idle_s:
        parts["idle"] = summary.device_idle_s * 1e3
    return parts


def mode_rows(report: ExplainReport) -> list[ModeResult]:
    """Every run in step-table order: fastest first (lowest bound first when compiled), those without a figure last."""
    compiled = report.basis == "roofline_lower_bound"

    def key(entry: ModeResult) -> tuple[bool, float]:
        value = entry.roofline_s if compiled else entry.step_time_s
        return value is None, value or 0.0

    return sorted(report.modes, key=key)


def kernels_per_step(summary: ModeSummary | None) -> float | None:
    """Kernels per step from the HLO, else counted in the trace."""
    if summary is None:
        return None
    return summary.kernels if summary.kernels is not None else summary.trace_kernels


ROOFLINE_LABEL = "roofline lower bound per step (lower bound, not a prediction)"


def is_compiled(report: ExplainReport) -> bool:
    """Whether the modes were compiled for a target GPU and ranked on their roofline lower bound, not timed."""
    return report.basis == "roofline_lower_bound" or (
        bool(report.modes) and all(e.status == "compiled" for e in report.modes))


def compiled_table(report: ExplainReport) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Modes compiled for a target GPU side by side: (mode names, lowest bound first; rows of (figure, one text per
    mode)). Kernel, library-call and copy launches come from XLA's thunk_sequence.txt; fusions, custom calls,
    transposes, FLOPs and bytes from the optimized HLO; the memory estimate from XLA's memory analysis."""
    entries = [e for e in mode_rows(report) if e.status == "compiled" and e.mode in report.summaries]
    modes = [e.mode for e in entries]
    columns = [report.summaries[m] for m in modes]

    def row(label: str, values) -> tuple[str, list[str]]:
        return label, [str(v) for v in values]

    rows = [row("target GPU", [s.target or "-" for s in columns]),
            row(ROOFLINE_LABEL, [_time(e.roofline_s) for e in entries]),
            row("  same, launches overlapping", [_time(s.roofline_aggregate_s) for s in columns]),
            row("  vs lowest bound", [fmt.ratio(e.ratio) for e in entries]),
            row("  gap to lowest bound", [_time(e.gap_s) for e in entries]),
            row("kernels (HLO)", [fmt.count(s.kernels) for s in columns]),
            row("generated kernels (thunks)", [fmt.count(s.thunk_kernels) for s in columns]),
            row("cuBLAS/cuDNN calls (thunks)", [fmt.count(s.thunk_library_calls) for s in columns]),
            row("Triton fusions", [fmt.count(_triton(s)) for s in columns])]
    for kind in _keys([s.fusions for s in columns]):
        rows.append(row(f"fusion {kind}", [fmt.count(s.fusions.get(kind, 0)) for s in columns]))
    for name in _keys([s.custom_calls for s in columns]):
        rows.append(row(f"call {name}", [fmt.count(s.custom_calls.get(name, 0)) for s in columns]))
    rows += [row("copies (thunks)", [fmt.count(s.thunk_copies) for s in columns]),
             row("copy ops (HLO)", [fmt.count(s.copies) for s in columns]),
             row("transposes (HLO)", [fmt.count(s.transposes) for s in columns]),
             row("FLOPs", [fmt.big(s.flops) for s in columns]),
             row("bytes accessed", [_bytes(s.bytes_accessed) for s in columns]),
             row("device memory (XLA estimate)", [_bytes(s.memory_estimate_bytes) for s in columns])]
    return modes, rows


def _keys(counts: list[dict[str, int]]) -> list[str]:
    """The keys of one count field over every mode, most frequent first."""
    totals: dict[str, float] = {}
    for by_key in counts:
        for key, value in by_key.items():
            totals[key] = totals.get(key, 0) + value
    return sorted(totals, key=lambda k: (-totals[k], k))


def _triton(summary: ModeSummary) -> int | None:
    return None if summary.kernels is None else sum(
        n for kind, n in summary.fusions.items() if "triton" in kind.lower())


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


def audit_mismatches(report: ExplainReport) -> list[str]:
    """The fairness audit's mismatches recorded in the comparison (`MISMATCH setting: mode=value, ...`), which every
    renderer shows first: a gap between modes that ran different settings is not only the frameworks'."""
    lines = report.comparison.get("audit_mismatches")
    return [str(line) for line in lines] if isinstance(lines, list) else []


def notes(report: ExplainReport) -> list[tuple[str, str]]:
    """(mode, note) for everything a mode could not read."""
    return [(mode, note) for mode, summary in report.summaries.items() for note in summary.notes]


# --- Timed comparisons: the gap of every run to the baseline, with its interval, verdict and measured parts ---------

WITHIN_NOISE = "within noise"  # the engine's node for the summed non-significant ledger parts
RESIDUAL_LABEL = "residual (timed gap - profiled gap: profiler effect and noise)"
MODE_ANNOTATIONS_LABEL = "hypotheses with no significant part of the step to explain"
OP_TOP = 10
NOT_SET = "not set"  # a configuration difference's side that did not record the setting


def baseline_line(report: ExplainReport) -> str:
    """`Baseline: jax (the fastest run)`."""
    if not report.baseline:
        return "No run finished with a step time."
    why = "chosen with --baseline" if report.baseline_chosen else "the fastest run"
    line = f"Baseline: {report.baseline} ({why}); every gap is this run's median step minus the baseline's."
    noise = report.process_noise
    if noise is None:
        return line + (" Each configuration ran in one process: the variation between processes is unmeasured and "
                       "every verdict is provisional (`hloscope compare --repeats 3`).")
    # a configuration set apart (its processes vary unlike the others') holds only its own gap to its variation: the
    # control stated is then the others' (hloscope.explain.engine._pair_noise)
    apart = noise.alike is not None and bool(noise.set_apart) and report.baseline not in noise.set_apart
    shown = noise.alike if apart and noise.alike is not None else noise
    line += (f" A/A control: processes of one configuration landed up to {shown.relative:.1%} of a step apart "
             f"({shown.configuration}, {shown.processes} processes); a smaller gap is no difference here, and a "
             "gap must also stand out of their pooled variation.")
    if apart:
        largest = (f"; up to {noise.relative:.1%}, {noise.configuration}" if noise.configuration in noise.set_apart
                   else "")
        whose = "its" if len(noise.set_apart) == 1 else "each one's"
        line += (f" {', '.join(noise.set_apart)} varied between processes significantly more than the others "
                 f"(F-test{largest}): "
                 f"{whose} own gap is held to that variation, no "
                 "other gap is.")
    elif noise.set_apart:  # every gap is against the baseline, whose variation is unlike the others'
        line += (" The baseline's processes varied significantly more than those of other configurations (F-test): "
                 "every gap here is held to that variation.")
    return line


def method_lines(report: ExplainReport) -> list[str]:
    """How gaps and parts are judged, from the report's `method`."""
    method = report.method
    if not method:
        return []
    lines = []
    if method.get("gap"):
        lines.append(f"gap: {method['gap']}")
    if method.get("significant"):
        lines.append(f"significant gap: {method['significant']}")
    if method.get("nodes"):
        lines.append(f"significant part of the step: {method['nodes']}")
    if method.get("scaling"):
        lines.append(f"scaling: {method['scaling']}")
    return lines


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _spread(entry: ModeResult, summary: ModeSummary | None) -> Spread | None:
    if entry.step_spread is not None:
        return entry.step_spread
    times = summary.step_times_s if summary is not None else []
    if times and all(_number(t) for t in times):
        return of_sample(times)
    return None


def spread_text(spread: Spread | None) -> str:
    """`27.100-27.500 ms` (p10-p90)."""
    if spread is None:
        return "-"
    return f"{fmt.ms(spread.p10).removesuffix(' ms')}-{fmt.ms(spread.p90)}"


def step_text(entry: ModeResult, summary: ModeSummary | None) -> str:
    """`27.300 ms (p10-p90 27.100-27.500 ms, 10 steps)`."""
    spread = _spread(entry, summary)
    median = entry.step_time_s
    if median is None:
        return "-"
    if spread is None:
        return fmt.ms(median)
    steps = f", {spread.n} steps"
    return f"{fmt.ms(median)} (p10-p90 {spread_text(spread)}{steps})"


def gap_text(entry: ModeResult) -> str:
    """`+1.100 ms (+1.010 to +1.180 ms)`: the gap per step and its 95% interval."""
    if entry.gap_s is None:
        return "-"
    interval = entry.gap_ci_s
    return fmt.signed_ms(entry.gap_s) + (f" ({fmt.ms_interval(interval)})" if interval else "")


def ratio_text(entry: ModeResult) -> str:
    """`1.23x (1.19-1.27x)`."""
    if entry.ratio is None:
        return "-"
    interval = entry.ratio_ci
    return fmt.ratio(entry.ratio) + (f" ({fmt.ratio_interval(interval)})" if interval else "")


def verdict_text(entry: ModeResult) -> str:
    """The verdict in words with its figures: `1.23x (1.19-1.27x), +1.100 ms (+1.010 to +1.180 ms): slower`,
    `no significant difference: -0.020 ms (-0.080 to +0.050 ms)`, `baseline`, or the run's status."""
    verdict = entry.verdict
    if verdict is None:
        return entry.status or "-"
    if verdict == "baseline":
        return "baseline"
    processes = _processes_text(entry)
    if verdict == "no significant difference":
        resolvable = (f"; gaps under {fmt.ms(entry.resolvable_gap_s)} cannot be told apart here"
                      if entry.resolvable_gap_s is not None else "")
        if entry.processes_needed is not None:
            resolvable += (f" (about {entry.processes_needed} processes a side would tell this one: "
                           f"`hloscope compare --repeats {entry.processes_needed}`)")
        return f"no significant difference: {gap_text(entry)}{processes}{resolvable}"
    return f"{ratio_text(entry)}, {gap_text(entry)}: {verdict}{processes}"


def _processes_text(entry: ModeResult) -> str:
    """` (provisional: one process)` or ` (3 processes, spread 0.120 ms)`: how far the verdict can be trusted."""
    if entry.provisional:
        return " (provisional: between-process variation unmeasured on a side that ran once)"
    if entry.processes and entry.processes > 1 and entry.between_process_spread_s is not None:
        return f" ({entry.processes} processes, spread {fmt.ms(entry.between_process_spread_s)})"
    return ""


def status_text(entry: ModeResult) -> str:
    """`ok`, `ok, noisy`, `failed`."""
    status = entry.status or "-"
    return f"{status}, noisy" if entry.noisy else status


@dataclass
class AnnotationView:
    title: str
    claim: str
    estimate: bool  # a figure in the claim rests on an assumed constant
    tested: str | None = None  # with --test-hypotheses: its re-run's verdict, or "untested"

    @property
    def label(self) -> str:
        label = self.title + (" (estimate)" if self.estimate else "")
        return label + (f" [{self.tested}]" if self.tested else "")


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
        interval = _interval_phrase(self.interval)
        return f"{self.seconds}{interval}, {self.share} of the gap, {self.p_value}, {self.kind}"


def _interval_phrase(interval: str) -> str:
    """` (95% interval +4.800 to +5.200 ms)` after a figure; nothing when there is no interval ("-")."""
    return f" (95% interval {interval})" if interval != "-" else ""


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
    matched: bool = True  # False: the work has no counterpart on the other side (the group says which side has it)


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
    replay: str | None = None  # program on device vs framework overhead (hloscope.explain.replay_split)
    ops_matching: str | None = None  # how the op table paired the two runs' ops, in words


def _annotations(items: list[Annotation], verdicts: dict[str, str] | None = None) -> list[AnnotationView]:
    """`verdicts` (with --test-hypotheses): rule -> what its re-run concluded; a rule not tested is "untested"."""
    return [AnnotationView(item.title or item.rule or "-", item.claim, item.kind == "estimate",
                           None if verdicts is None else _tested_label(verdicts.get(item.rule))) for item in items]


def _tested_label(verdict: str | None) -> str:
    return f"tested: {verdict}" if verdict not in (None, "could not test") else "untested"


def tested_verdicts(report: ExplainReport, mode: str) -> dict[str, str] | None:
    """rule -> the verdict of its re-run for the gap of `mode` against the baseline; None without --test-hypotheses."""
    if report.tested is None:
        return None
    return {rule: test.verdict for pair in report.tested.pairs if mode in (pair.slow, pair.fast)
            for test in pair.tests for rule in test.rules}


def _contributors(entry: ModeResult,
                  verdicts: dict[str, str] | None = None) -> tuple[list[ContributorView], str | None]:
    """The significant contributors ranked, and the within-noise line."""
    ranked: list[ContributorView] = []
    noise = None
    for item in entry.contributors:
        if item.node == WITHIN_NOISE or not item.significant:
            text = f"{item.title or 'Other parts of the step, each within noise'}: {fmt.signed_ms(item.seconds)}"
            if item.claim:
                text += f" ({item.claim})"
            noise = text if noise is None else f"{noise}; {text}"
            continue
        ranked.append(_contributor_view(len(ranked) + 1, item, entry.gap_s, verdicts))
    return ranked, noise


def _contributor_view(rank: int, item: Contributor, gap: float | None,
                      verdicts: dict[str, str] | None = None) -> ContributorView:
    share = fmt.share(item.seconds, gap)
    if item.offset_by:  # more than the whole gap: say what brings it back
        share += f" (offset by {', '.join(item.offset_by)})"
    return ContributorView(rank, item.title or item.node or "-", fmt.signed_ms(item.seconds),
                           fmt.ms_interval(item.interval_s), share, fmt.p_value(item.p_value),
                           "estimate" if item.kind == "estimate" else "measured", item.claim,
                           _annotations(item.annotations, verdicts), item.evidence)


def op_label(item: OpChange, run: str, baseline: str) -> str:
    """An op row's name: the run's op, `run op ↔ baseline op` where the two sides name their counterparts
    differently, or the one side that has the work and why the other has none."""
    if not item.matched:
        present, other = (run, baseline) if item.run_name is not None else (baseline, run)
        name = item.run_name or item.baseline_name or item.group
        why = (f"no counterpart in {other}'s program" if item.matched_by == "structure"
               else f"no op of that name in {other}")
        return f"{name} (only in {present}: {why})"
    if item.run_name and item.baseline_name and item.run_name != item.baseline_name:
        return f"{item.run_name} ↔ {item.baseline_name}"
    return item.group or "-"


def ops_matching(entry: ModeResult, baseline: str) -> str | None:
    """How the op table paired the ops, said under it."""
    if not entry.ops:
        return None
    if any(item.matched_by == "structure" for item in entry.ops):
        return (f"ops paired by the structural match of the two programs (as `hloscope diff`); a ↔ b: the op named a "
                f"under {entry.mode} is b under {baseline}")
    return "ops paired by name (the two runs have no optimized HLO to match by structure)"


def _op_rows(entry: ModeResult, baseline: str, top: int = OP_TOP) -> list[OpRow]:
    rows = []
    item: OpChange
    for item in entry.ops[:top]:
        run, base = item.run, item.baseline

        def calls(side: OpFigures) -> str:
            return fmt.count(side.calls)

        def per_call(side: OpFigures) -> str:
            return fmt.us(side.per_call_s) if side.per_call_s is not None else "-"

        def time(side: OpFigures) -> str:
            return fmt.ms(side.seconds)

        significant = item.significant
        absent = None if item.matched else ("baseline" if item.run_name is not None else "run")
        run_cells = ("-", "-", "-") if absent == "run" else (calls(run), per_call(run), time(run))
        base_cells = ("-", "-", "-") if absent == "baseline" else (calls(base), per_call(base), time(base))
        # the side without a counterpart shows no figures: its absence is said in the op's name, not as a zero
        rows.append(OpRow(op_label(item, entry.mode, baseline), run_cells[0], run_cells[1], base_cells[0], base_cells[1],
                          run_cells[2], base_cells[2], fmt.signed_ms(item.seconds) + (" *" if significant else ""),
                          significant, item.matched))
    return rows


def _per_sample(entry: ModeResult, baseline: str) -> str | None:
    """`batch 16 against 8 under jax: 1.706 ms per sample against 1.275 ms, 1.34x, +0.431 ms (+0.420 to +0.440 ms)`."""
    data = entry.per_sample
    if data is None:
        return None
    interval = data.gap_ci_s
    return (f"batch {data.batch} against {data.baseline_batch} under {baseline}: "
            f"{fmt.ms(data.time_per_sample_s)} per sample against {fmt.ms(data.baseline_time_per_sample_s)}"
            f", {fmt.ratio(data.ratio)}, {fmt.signed_ms(data.gap_s)}"
            + (f" ({fmt.ms_interval(interval)})" if interval else ""))


def _residual(entry: ModeResult) -> str | None:
    if entry.profiled_gap_s is None or entry.residual_s is None:
        return None  # no causes were sought (no significant gap) or no profile: nothing was set against the gap
    return f"{fmt.signed_ms(entry.residual_s)} (profiled gap {fmt.signed_ms(entry.profiled_gap_s)})"


def mode_views(report: ExplainReport) -> list[ModeView]:
    """One view per timed run other than the baseline, in step-table order (fastest first)."""
    if is_compiled(report):
        return []
    base = report.baseline or "-"
    base_entry = next((e for e in report.modes if e.mode == base), None)
    base_step = step_text(base_entry, report.summaries.get(base)) if base_entry else "-"
    views = []
    for entry in mode_rows(report):
        if entry.verdict in (None, "baseline"):
            continue
        verdicts = tested_verdicts(report, entry.mode)
        contributors, noise = _contributors(entry, verdicts)
        differences = [(d.field, _setting_text(d.a), _setting_text(d.b)) for d in entry.config_differences]
        views.append(ModeView(
            entry.mode, base, status_text(entry), bool(entry.noisy), step_text(entry, report.summaries.get(entry.mode)),
            base_step, verdict_text(entry), bool(entry.significant), differences, _per_sample(entry, base),
            contributors, noise, _residual(entry), _annotations(entry.annotations, verdicts), _op_rows(entry, base),
            list(entry.notes), replay=replay_line(entry, base_entry), ops_matching=ops_matching(entry, base)))
    return views


def _setting_text(value) -> str:
    """A configuration difference's value; None: the run did not set it (an environment variable, an option)."""
    return NOT_SET if value is None else str(value)


def step_rows(report: ExplainReport) -> list[dict[str, str]]:
    """The step table's cells as text, one row per run (fastest first): mode, status (with `noisy`), step median,
    p10-p90, ratio and gap to the baseline each with its 95% interval, verdict, kernels/step, device idle/step,
    compiles in the timed window. `noisy` is "noisy" or ""."""
    rows = []
    for row in mode_rows(report):
        summary = report.summaries.get(row.mode)
        baseline = row.verdict == "baseline"
        idle = summary.device_idle_s if summary is not None else None
        compiles = summary.compiles_in_window if summary is not None else None
        rows.append({
            "mode": row.mode, "status": row.status or "-", "noisy": "noisy" if row.noisy else "",
            "step": fmt.ms(row.step_time_s) if row.step_time_s is not None else "-",
            "spread": spread_text(_spread(row, summary)),
            "ratio": fmt.ratio(row.ratio) if row.ratio is not None else "-",
            "ratio_ci": "" if baseline or not row.ratio_ci else f"({fmt.ratio_interval(row.ratio_ci)})",
            "gap": fmt.signed_ms(row.gap_s) if row.gap_s is not None else "-",
            "gap_ci": "" if baseline or not row.gap_ci_s else f"({fmt.ms_interval(row.gap_ci_s)})",
            "verdict": row.verdict or "-",
            "kernels": fmt.count(kernels_per_step(summary)),
            "idle": fmt.ms(idle) if idle is not None else "-",
            "compiles": fmt.count(compiles),
        })
    return rows


def replay_line(entry: ModeResult, base: ModeResult | None = None) -> str | None:
    """One line for the renderers: the measured split (and against the baseline), or that the split is inferred. An
    overhead flagged as not measurable (a busy machine, on this side or the baseline's) is not compared with anything:
    neither the profile's idle estimate nor the baseline's overhead."""
    data = entry.replay
    if data is None:
        return None
    program, overhead = data.program_s, data.overhead_s
    if not data.measured:
        if not isinstance(program, UnsetType) and not isinstance(overhead, UnsetType):
            return (f"program vs framework overhead (inferred from the profile, no replay): device busy "
                    f"{fmt.ms(program)}, idle {fmt.ms(overhead)} per profiled step")
        return "program vs framework overhead: inferred only (no replay.json; run `hloscope replay RUN_DIR`)"
    if isinstance(program, UnsetType) or isinstance(overhead, UnsetType) or isinstance(data.overhead_ci_s, UnsetType):
        raise ValueError(f"{entry.mode}: a measured replay split without its program and overhead")
    low, high = data.overhead_ci_s
    compiler = None if isinstance(data.compiler, UnsetType) else data.compiler
    line = f"replayed (measured, {compiler}): program on device {fmt.ms(program)}, "
    anomaly = data.overhead_anomaly is True
    if anomaly:  # the replay slower than the run, or a side timed under load: no overhead to report
        line += str(None if isinstance(data.overhead_note, UnsetType) else data.overhead_note)
    else:
        line += f"framework overhead {fmt.ms(overhead)} (95% {fmt.ms(low)} to {fmt.ms(high)})"
        if not isinstance(data.inferred_overhead_s, UnsetType):
            agree = "within" if data.inferred_within_interval is True else "outside"
            line += f"; the profile's idle estimate {fmt.ms(data.inferred_overhead_s)} is {agree} that interval"
    gap = data.against_baseline
    if not isinstance(gap, UnsetType):
        line += (f"; against the baseline: program {fmt.signed_ms(gap.program_gap_s)} "
                 f"(95% {fmt.ms_interval(gap.program_gap_ci_s)})")
        base_anomaly = base is not None and base.replay is not None and base.replay.overhead_anomaly is True
        if not anomaly and not base_anomaly:
            line += (f", overhead {fmt.signed_ms(gap.overhead_gap_s)} "
                     f"(95% {fmt.ms_interval(gap.overhead_gap_ci_s)})")
    return line


# --- Scaling from 1 to N devices (compare --devices 1,2,4): per mode, efficiency and the causes of what is lost ------

SCALING_HEADING = "Scaling from 1 to N devices (same global batch: ideal step = 1-device step / N)"
SCALING_HEADERS = ("devices", "step", "ideal", "speed-up", "efficiency (95%)", "lost/step", "verdict")


@dataclass
class ScalingCauseView:
    kind: str  # "exposed communication" | "idle" | "compute"
    title: str
    seconds: str  # `+0.400 ms` over its ideal share
    interval: str
    share: str  # of the time lost per step
    p_value: str

    @property
    def figures(self) -> str:
        interval = _interval_phrase(self.interval)
        return f"{self.seconds}{interval}, {self.share} of the loss, {self.p_value}"


@dataclass
class ScalingRowView:
    label: str
    devices: int
    step: str
    ideal: str
    speedup: str
    efficiency: str  # `48% (41-55%)`
    lost: str  # `+0.520 ms` per step over the ideal step
    lost_interval: str  # `+0.400 to +0.610 ms`
    verdict: str
    causes: list[ScalingCauseView]
    within_noise: str | None
    residual: str | None
    notes: list[str]

    def cells(self) -> tuple[str, ...]:
        return str(self.devices), self.step, self.ideal, self.speedup, self.efficiency, self.lost, self.verdict

    @property
    def lost_line(self) -> str:
        """`time lost per step against the ideal: +0.520 ms (95% interval +0.400 to +0.610 ms)`."""
        interval = _interval_phrase(self.lost_interval)
        return f"time lost per step against the ideal: {self.lost}{interval}"


@dataclass
class ScalingView:
    mode: str
    reference: str  # the 1-device run and its step: `jax (1 device): 0.900 ms`
    shared_cpu: str | None  # the plain warning when the N devices share one CPU's cores
    rows: list[ScalingRowView]
    notes: list[str]


def _percent_interval(interval: list[float] | None) -> str:
    if not interval or len(interval) != 2:
        return ""
    return f" ({interval[0]:.0%}-{interval[1]:.0%})"


def _scaling_verdict(point: ScalingPoint) -> str:
    if not point.significant:
        return "within noise"
    return "below ideal" if point.lost_s > 0 else "above ideal"


def _scaling_row(point: ScalingPoint) -> ScalingRowView:
    causes = [ScalingCauseView(c.kind, c.title or c.node, fmt.signed_ms(c.seconds),
                               fmt.ms_interval(c.interval_s), fmt.share(c.seconds, point.lost_s), fmt.p_value(c.p_value))
              for c in point.causes]
    noise = None if point.within_noise_s is None else (
        f"other parts of the step, each within noise: {fmt.signed_ms(point.within_noise_s)}")
    residual = None if point.residual_s is None or point.profiled_lost_s is None else (
        f"{fmt.signed_ms(point.residual_s)} (profiled loss {fmt.signed_ms(point.profiled_lost_s)})")
    return ScalingRowView(point.label, point.devices, fmt.ms(point.step_time_s), fmt.ms(point.ideal_step_s),
                          fmt.ratio(point.speedup), f"{point.efficiency:.0%}{_percent_interval(point.efficiency_ci)}",
                          fmt.signed_ms(point.lost_s), fmt.ms_interval(point.lost_ci_s), _scaling_verdict(point), causes, noise, residual, list(point.notes))


def _shared_cpu_line(scaling: ModeScaling) -> str | None:
    if not scaling.shared_cpu:
        return None
    cores = f"this host's {scaling.cpu_cores} CPU cores" if scaling.cpu_cores else "this host's CPU cores"
    return (f"The N devices of {scaling.mode} are CPU devices sharing {cores}: there is no more hardware at N than at "
            "1, so the efficiency here measures partitioning and collective overhead, not a speed-up.")


def scaling_views(report: ExplainReport) -> list[ScalingView]:
    """One view per mode run at several device counts, its counts in increasing order."""
    views = []
    for scaling in report.scaling:
        reference = f"{scaling.reference}: {fmt.ms(scaling.step_time_s)}"
        if scaling.batch_size:
            reference += f", global batch {scaling.batch_size}"
        views.append(ScalingView(scaling.mode, reference, _shared_cpu_line(scaling),
                                 [_scaling_row(p) for p in scaling.points], list(scaling.notes)))
    return views
