"""Rich tables for `hloscope run` and `hloscope compare` (rendering only: records in, tables out)."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import msgspec
from rich import box
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from hloscope import units
from hloscope.render import fmt
from hloscope.runs.records import (
    AuditStage,
    ComparisonEntry,
    ComparisonRecord,
    Configuration,
    MaxBatch,
    Memory,
    Number,
    RunRecord,
    TargetPeak,
)
from hloscope.significance import (
    PROCESS_ALPHA,
    pooled_process_variation,
    smallest_resolvable_fraction,
    unlike_variations,
)


def add_text_row(table: Table, *cells: str | Text) -> None:
    """A row whose strings are plain text, never rich markup: mode names, errors, paths and warnings come from
    run.json and comparison.json, which anyone can edit (`[/]` would raise MarkupError, `[bs32]` would vanish)."""
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


ms = step_time = units.ms


def ratio(value: float) -> str:
    return f"{value:.2f}x" if value < 10 else f"{value:.1f}x" if value < 100 else f"{value:.0f}x"


def sec(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def rate(images_per_s: float | None) -> str:
    """Images/s with three significant digits for slow CPU runs, thousands separators for fast ones."""
    if images_per_s is None:
        return "-"
    return f"{images_per_s:,.0f}" if images_per_s >= 100 else f"{images_per_s:.3g}"


def mib(n_bytes: int | None) -> str:
    return "-" if n_bytes is None else f"{n_bytes / 2**20:.0f} MiB"


def peak_memory(memory: Memory) -> tuple[int | None, str]:
    """(bytes, what) - the device's peak where the framework reports one, else the host's peak RSS."""
    if memory.device_peak_bytes is not None:
        return memory.device_peak_bytes, "device"
    return memory.peak_host_rss_bytes, "host RSS"


def run_table(record: RunRecord) -> Table:
    timing, loss, compiles, config = record.timing, record.loss, record.compiles, record.config
    table = Table(title=Text(f"hloscope run: {record.mode} - {config.model} batch {config.batch_size} "
                             f"({record.status})"), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    add_text_row(table, "step time (median)", ms(timing.median_s))
    spread = " / ".join(ms(value) for value in (timing.mean_s, timing.p10_s, timing.p90_s, timing.std_s))
    add_text_row(table, "mean / p10 / p90 / std", spread)
    add_text_row(table, "window mean", ms(timing.window_mean_s))
    add_text_row(table, "timed steps", str(len(timing.step_times_s)))
    throughput = timing.throughput_img_s
    add_text_row(table, "throughput", "-" if throughput is None else f"{rate(throughput)} images/s")
    add_text_row(table, "first step (compile)", sec(timing.first_step_s))
    if timing.profiled_step_times_s:
        add_text_row(table, "profiled steps", ", ".join(ms(t) for t in timing.profiled_step_times_s))
    peak, what = peak_memory(record.memory)
    add_text_row(table, f"peak memory ({what})", mib(peak))
    if record.section("compiles"):
        in_window = compiles.in_window or {}
        add_text_row(table, "compilations (total / in timed window)",
                      ", ".join(f"{name} {total} / {in_window.get(name, 0)}"
                                for name, total in (compiles.total or {}).items()))
    if loss.first is not None and loss.last is not None:
        add_text_row(table, "loss first -> last", f"{loss.first:.4f} -> {loss.last:.4f}")
    parity = record.parity  # --check-parity: its figures, or why there are none
    if parity is not None and parity.error:
        add_text_row(table, "parity probe (first batch)", parity.error)
    elif parity is not None and parity.loss is not None and parity.grad_norm is not None and \
            parity.weights_norm is not None:
        add_text_row(table, "parity probe (first batch)", f"loss {parity.loss:.6f}, grad norm {parity.grad_norm:.6f}, "
                     f"weights norm {parity.weights_norm:.6f}")
    precision = record.environment.precision
    if precision is not None:
        add_text_row(table, "precision in effect", ", ".join(
            f"{k}={v}" for k, v in msgspec.structs.asdict(precision).items() if v is not None))
    if record.artifacts:
        kinds: dict[str, int] = {}
        for artifact in record.artifacts:
            kinds[artifact.kind] = kinds.get(artifact.kind, 0) + 1
        add_text_row(table, "artifacts", ", ".join(f"{n} {k}" for k, n in kinds.items()))
    if record.error:
        add_text_row(table, "error", record.error)
    for warning in record.warnings:
        add_text_row(table, "warning", warning)
    return table


@dataclass(frozen=True)
class _Row:
    """One row of the comparison table: a mode entry, or a configuration whose processes are pooled."""

    mode: str
    status: str
    devices: int | None = None
    median_s: Number | None = None
    throughput_img_s: Number | None = None
    first_step_s: Number | None = None
    peak_memory_bytes: int | None = None
    kernels: int | None = None
    roofline_lower_bound_s: Number | None = None
    timed_processes: int = 1
    between_process_spread: Number | None = None

    @classmethod
    def of(cls, entry: ComparisonEntry) -> _Row:
        return cls(mode=entry.mode or entry.dir, status=entry.status or "?", devices=entry.devices,
                   median_s=entry.median_s, throughput_img_s=entry.throughput_img_s, first_step_s=entry.first_step_s,
                   peak_memory_bytes=entry.peak_memory_bytes, kernels=entry.kernels,
                   roofline_lower_bound_s=entry.roofline_lower_bound_s)


def comparison_table(comparison: ComparisonRecord) -> Table:
    """One row per mode, readable whole in an 80-column terminal: short headers, no box, numbers never wrapped.
    A failed mode's reason is not in the table (compare prints it below). `--target` runs are compiled, not timed:
    their rows show the roofline lower bound and the number of generated kernels instead of timings."""
    pooled = _pooled_rows(comparison)
    replicated = pooled is not None
    entries = pooled if pooled is not None else [_Row.of(entry) for entry in comparison.modes]
    medians = [e.median_s for e in entries if e.status == "ok" and e.median_s]
    fastest = min(medians) if medians else None
    config = comparison.config
    compiled = any(e.status == "compiled" for e in entries)
    timed = any(e.status != "compiled" for e in entries) and not config.target
    table = Table(title=Text(f"hloscope compare: {config.model} batch {config.batch_size}, "
                             + (f"{config.steps} timed steps, " if timed else "")
                             + f"{config.precision}, data {config.data}"
                             + (f", compiled for {config.target}" if config.target else "")),
                  box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), pad_edge=False, collapse_padding=True)
    columns: list[tuple[str, JustifyMethod]] = [("mode", "left")]
    by_devices = isinstance(config.devices, list)  # compare --devices 1,2,4: a row per mode and count
    if by_devices:
        columns += [("dev", "right")]
    if timed:
        columns += [("step", "right"), ("vs best", "right"), ("img/s", "right"), ("1st step", "right"),
                    ("peak mem", "right")]
    if compiled:
        columns += [("lower bound", "right"), ("kernels", "right")]
    for column, justify in columns:
        table.add_column(column, justify=justify, no_wrap=True)
    table.add_column("status", min_width=len("interrupted"), no_wrap=True)
    for entry in entries:
        ok = entry.status == "ok"
        row: list[str | Text] = [entry.mode]
        if by_devices:
            row.append("-" if entry.devices is None else str(entry.devices))
        if timed:
            median, throughput = entry.median_s, entry.throughput_img_s
            row += [step_time(median) if ok else "-", ratio(median / fastest) if ok and median and fastest else "-",
                    rate(throughput) if ok and throughput else "-", sec(entry.first_step_s),
                    mib(entry.peak_memory_bytes)]
        if compiled:
            kernels = entry.kernels
            row += [step_time(entry.roofline_lower_bound_s), "-" if kernels is None else str(kernels)]
        style = {"ok": "green", "compiled": "green", "failed": "red", "interrupted": "yellow",
                 "refused": "yellow"}.get(entry.status, "")
        cell = Text(entry.status, style=style)
        if replicated:  # the processes pooled in the row, and half the range of their medians, of the step
            relative = entry.between_process_spread
            cell.append(f" {entry.timed_processes}x" + (f" ±{relative / 2:.0%}" if relative is not None else ""))
        row.append(cell)
        add_text_row(table, *row)
    if compiled:
        table.caption = "compiled, not timed: lower bound = the roofline's time per step"
    elif replicated:
        apart = varying_unlike(comparison)
        relative = resolvable_fraction(comparison, apart)
        table.caption = ("step: median of every timed step of every process; 3x ±4%: 3 timed processes, their "
                         "medians within ±4% of the step" + (f"; gaps under {relative:.1%} of a step cannot be "
                                                     "told from this machine's own variation"
                                                     if relative is not None else "")
                         + (f" ({', '.join(apart)} varied more between processes: "
                            f"{'its' if len(apart) == 1 else 'their'} own gaps must be larger)"
                            if apart and relative is not None else ""))
    return table


def resolvable_fraction(comparison: ComparisonRecord, apart: list[str]) -> float | None:
    """The smallest gap, as a fraction of a step, that explain could call significant between two configurations of
    this comparison whose processes vary alike: larger than the A/A control (the largest relative spread between
    processes of one of them) and than what the process-level test resolves between two configurations of the usual
    number of processes at its least strict level (hloscope.significance). The configurations `apart` (varying_unlike)
    are left out, as explain leaves each out of every pair it is not part of. None when unmeasured."""
    control = comparison.between_process_spread
    if control is None or control.relative is None:
        return None
    kept = [row for row in _measured_rows(comparison) if row.mode not in apart]
    relative = (float(control.relative) if not apart else
                max((float(row.between_process_spread) for row in kept if row.between_process_spread is not None),
                    default=0.0))
    medians = [[float(m) for m in row.process_medians_s] for row in kept]
    variation = pooled_process_variation(medians)
    if variation is None:
        return relative
    processes = int(median(len(m) for m in medians))
    return max(relative, smallest_resolvable_fraction(variation, processes, processes, PROCESS_ALPHA))


def varying_unlike(comparison: ComparisonRecord) -> list[str]:
    """The configurations whose processes vary significantly more than the others' (significance.unlike_variations),
    in the comparison's order."""
    rows = _measured_rows(comparison)
    apart = unlike_variations([[float(m) for m in row.process_medians_s] for row in rows])
    return [row.mode for index, row in enumerate(rows) if index in apart]


def _measured_rows(comparison: ComparisonRecord) -> list[Configuration]:
    return [row for row in comparison.configurations if row.process_medians_s]


def _pooled_rows(comparison: ComparisonRecord) -> list[_Row] | None:
    """With several processes per mode (`--repeats`), one row per configuration, its processes pooled (comparison.json
    `configurations`); None when every configuration ran once (a row per mode entry)."""
    rows = comparison.configurations
    if not any((row.processes or 1) > 1 for row in rows):
        return None
    by_dir = {entry.dir: entry for entry in comparison.modes}
    batch = comparison.config.batch_size
    pooled = []
    for row in rows:
        members = [by_dir[name] for name in row.dirs if name in by_dir]
        timed = [m for m in members if m.status == "ok"]
        firsts = sorted(m.first_step_s for m in timed if m.first_step_s is not None)
        peaks = [m.peak_memory_bytes for m in timed if m.peak_memory_bytes is not None]
        step_s = row.median_s
        pooled.append(_Row(mode=row.mode, devices=row.devices, median_s=step_s,
                           status="ok" if timed else ((members[0].status or "?") if members else "failed"),
                           throughput_img_s=batch / step_s if step_s and batch is not None else None,
                           first_step_s=median(firsts) if firsts else None,
                           peak_memory_bytes=max(peaks) if peaks else None, timed_processes=row.timed_processes or 0,
                           between_process_spread=row.between_process_spread))
    return pooled


def audit_table(stage: AuditStage) -> Table:
    """A rich table: every setting, its value when every mode agrees, else each mode's value; mismatches in red."""
    table = Table(title=f"fairness audit ({stage.stage}): settings in effect per mode", title_justify="left",
                  show_edge=False, pad_edge=False, box=None)
    table.add_column("setting", overflow="fold", max_width=34)
    table.add_column("value (all modes) / per mode", overflow="fold")
    table.add_column("", no_wrap=True)
    versions = [row for row in stage.rows if row.setting.startswith("packages.") and row.status == "same"]
    for row in stage.rows:
        if row in versions or row.setting.startswith("model_config."):
            continue  # folded below / said by `model`
        if row.status == "same":
            value = next(iter(row.values.values()))
        else:
            value = "\n".join(f"{mode}: {value}" for mode, value in row.values.items())
        style = {"mismatch": "bold red", "by design": "yellow"}.get(row.status or "", "")
        label = {"mismatch": "MISMATCH", "by design": "by design", "recorded by some": "some modes"}.get(
            row.status or "", "")
        table.add_row(Text(row.setting), Text(value), Text(label, style=style))
    if versions:
        table.add_row(Text("versions (same in every mode)"),
                      Text(", ".join(f"{row.setting.removeprefix('packages.')} {next(iter(row.values.values()))}"
                                     for row in versions)), Text(""))
    for mode, error in stage.errors.items():
        table.add_row(Text(mode), Text(f"not audited: {error}"), Text("error", style="red"))
    return table


def compiled_run_table(record: RunRecord) -> Table:
    """A rich table summarising a compiled run (what the compiler says; no timing)."""
    target, kernels, memory = record.target, record.kernels, record.memory
    compiles, roofline, config = record.compiles, record.roofline, record.config
    table = Table(title=Text(f"hloscope run: {record.mode} - {config.model} batch {config.batch_size} "
                             f"compiled for {target.device} ({record.status}, not timed)"), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    add_text_row(table, "target", f"{target.name}: sm_{target.compute_capability}, {target.sm_count} SMs")
    add_text_row(table, "GPU compile", f"{compiles.target_compile_s or 0:.1f} s, GEMMs: {compiles.gemm_backend}"
                  + (" (Triton GEMMs failed: cuBLAS fallback)" if compiles.triton_gemm_fallback else ""))
    if record.section("kernels"):
        add_text_row(table, "launches (XLA thunks)", f"{kernels.kernel_launches} generated kernels, "
                      f"{kernels.library_calls} cuBLAS/cuDNN calls, {kernels.copies} copies")
        add_text_row(table, "thunks by kind", ", ".join(f"{k} {v}" for k, v in sorted(kernels.by_kind.items())))
    if memory.device_peak_estimate_bytes is not None:
        add_text_row(table, "device memory (XLA)", f"{memory.device_peak_estimate_bytes / 2**20:,.1f} MiB = arguments "
                      f"{_mib(memory.argument_bytes)} + outputs {_mib(memory.output_bytes)} + temp "
                      f"{_mib(memory.temp_bytes)} - aliased {_mib(memory.alias_bytes)}")
    if memory.target_peak is not None:
        add_text_row(table, "peak vs target memory", _fit_text(memory.target_peak))
    if record.max_batch is not None:
        add_text_row(table, "max batch (--max-batch)", _max_batch_text(record.max_batch))
        add_text_row(table, "search compiles", ", ".join(
            f"{c.batch_size}: {_mib(c.peak_bytes)} MiB {_fits_word(c.fits)}" for c in record.max_batch.compiles))
    if record.section("roofline"):
        add_text_row(table, "roofline LOWER BOUND", f"{fmt.ms(roofline.serial_s)}/step serial, "
                      f"{fmt.ms(roofline.aggregate_s)}/step aggregate (not a prediction)")
        add_text_row(table, "FLOPs / bytes", f"{_sci(roofline.flops)} / {_sci(roofline.bytes)}")
    for note in record.notes:
        add_text_row(table, "note", note)
    return table


def _fits_word(fits: bool | None) -> str:
    return "failed" if fits is None else ("fits" if fits else "does not fit")


def _fit_text(peak: TargetPeak) -> str:
    """The peak against the usable memory (the device's minus the reserve) and the headroom; without a device memory
    in the target file, the peak alone."""
    if peak.usable_bytes is None or peak.headroom_bytes is None:
        return f"{_mib(peak.peak_bytes)} MiB (the target file states no device memory)"
    verdict = "fits" if peak.fits else "DOES NOT FIT"
    return (f"{_mib(peak.peak_bytes)} MiB of {_mib(peak.usable_bytes)} MiB usable ({_mib(peak.device_memory_bytes)} "
            f"MiB device - {_mib(peak.reserve_bytes)} MiB reserve): headroom {_mib(peak.headroom_bytes)} MiB, "
            f"{verdict}")


def _max_batch_text(search: MaxBatch) -> str:
    return search.message or ("-" if search.batch_size is None else str(search.batch_size))


def _mib(n_bytes: int | None) -> str:
    return "-" if n_bytes is None else f"{n_bytes / 2**20:,.1f}"


def _sci(value: Number | None) -> str:
    return "-" if value is None else f"{value:.3e}"


def compiled_comparison_table(records: list[RunRecord]) -> Table:
    """Compiled runs side by side (one column per mode): what each framework's graph became on the target GPU."""
    device = next((r.target.device for r in records if r.section("target")), "?")
    table = Table(title=Text(f"compiled for {device} (XLA deviceless compile; not timed)"))
    table.add_column("", style="bold")
    for record in records:
        table.add_column(Text(record.mode), justify="right")

    def row(label: str, value) -> None:
        add_text_row(table, label, *[value(r) for r in records])

    def text(value: object) -> str:
        return "-" if value is None else str(value)

    row("status", lambda r: r.status)
    row("generated kernels", lambda r: text(r.kernels.kernel_launches))
    row("cuBLAS / cuDNN calls", lambda r: text(r.kernels.library_calls))
    row("copies", lambda r: text(r.kernels.copies))
    row("GEMM backend", lambda r: text(r.compiles.gemm_backend))
    row("device memory MiB", lambda r: _mib(r.memory.device_peak_estimate_bytes))
    if any(r.memory.target_peak is not None for r in records):
        row("target memory usable MiB", lambda r: _mib(r.memory.target_peak.usable_bytes if r.memory.target_peak else None))
        row("headroom MiB", lambda r: _mib(r.memory.target_peak.headroom_bytes if r.memory.target_peak else None))
    if any(r.max_batch is not None for r in records):
        row("max batch (--max-batch)", lambda r: _max_batch_cell(r.max_batch))
        row("compiles searched", lambda r: "-" if r.max_batch is None else str(len(r.max_batch.compiles)))
    row("FLOPs", lambda r: _sci(r.roofline.flops))
    row("bytes accessed", lambda r: _sci(r.roofline.bytes))
    row("roofline LOWER BOUND ms", lambda r: "-" if r.roofline.serial_s is None else f"{r.roofline.serial_s * 1e3:.3f}")
    return table


def _max_batch_cell(search: MaxBatch | None) -> str:
    if search is None:
        return "-"
    if search.batch_size is None:
        return "none fits" if search.smallest_not_fitting == 1 else "not found"
    return f"at least {search.batch_size}" if search.at_least else str(search.batch_size)


def replay_summary_line(mode: str, replay: dict) -> str:
    """One line for a mode's `replay` summary (compare --replay, hloscope replay COMPARISON_DIR): the program's time
    and the framework's measured overhead, or why the replay failed."""
    status = replay.get("status")
    if status in ("ok", "partial"):
        line = f"  {mode} replayed: program {ms(replay.get('median_s'))}"
        if replay.get("overhead_anomaly"):
            line += f", {replay.get('overhead_note')}"
        elif replay.get("overhead_s") is not None:
            low, high = replay.get("overhead_ci_s") or (None, None)
            line += f", framework overhead {ms(replay['overhead_s'])} (95% {ms(low)} .. {ms(high)})"
        if replay.get("trajectory_ok") is not None:
            line += ", loss trajectory " + ("as the run's" if replay["trajectory_ok"] else "DIFFERS from the run's")
        if status == "partial":
            line += f"; not replayed: {'; '.join(replay.get('skipped') or [])}"
        return line + f" ({replay.get('file')})"
    return f"  {mode} replay {status}: {replay.get('error')}"
