"""Rich tables for `hloscope run` and `hloscope compare` (rendering only: records in, tables out)."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from hloscope import units
from hloscope.render import fmt


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


def peak_memory(memory: dict) -> tuple[int | None, str]:
    """(bytes, what) - the device's peak where the framework reports one, else the host's peak RSS."""
    if memory.get("device_peak_bytes") is not None:
        return memory["device_peak_bytes"], "device"
    return memory.get("peak_host_rss_bytes"), "host RSS"


def run_table(record: dict) -> Table:
    timing, loss, compiles = record.get("timing", {}), record.get("loss", {}), record.get("compiles", {})
    config = record.get("config", {})
    table = Table(title=Text(f"hloscope run: {record['mode']} - {config.get('model')} batch {config.get('batch_size')} "
                             f"({record['status']})"), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    add_text_row(table, "step time (median)", ms(timing.get("median_s")))
    spread = " / ".join(ms(timing.get(k)) for k in ("mean_s", "p10_s", "p90_s", "std_s"))
    add_text_row(table, "mean / p10 / p90 / std", spread)
    add_text_row(table, "window mean", ms(timing.get("window_mean_s")))
    add_text_row(table, "timed steps", str(len(timing.get("step_times_s", []))))
    throughput = timing.get("throughput_img_s")
    add_text_row(table, "throughput", "-" if throughput is None else f"{rate(throughput)} images/s")
    add_text_row(table, "first step (compile)", sec(timing.get("first_step_s")))
    if timing.get("profiled_step_times_s"):
        add_text_row(table, "profiled steps", ", ".join(ms(t) for t in timing["profiled_step_times_s"]))
    peak, what = peak_memory(record.get("memory", {}))
    add_text_row(table, f"peak memory ({what})", mib(peak))
    if compiles:
        add_text_row(table, "compilations (total / in timed window)",
                      ", ".join(f"{name} {total} / {compiles['in_window'].get(name, 0)}"
                                for name, total in compiles.get("total", {}).items()))
    if loss:
        add_text_row(table, "loss first -> last", f"{loss['first']:.4f} -> {loss['last']:.4f}")
    parity = record.get("parity")
    if parity:  # --check-parity
        add_text_row(table, "parity probe (first batch)", parity["error"] if parity.get("error") else
                     f"loss {parity['loss']:.6f}, grad norm {parity['grad_norm']:.6f}, "
                     f"weights norm {parity['weights_norm']:.6f}")
    precision = record.get("environment", {}).get("precision")
    if precision:
        add_text_row(table, "precision in effect", ", ".join(f"{k}={v}" for k, v in precision.items()))
    if record.get("artifacts"):
        kinds: dict[str, int] = {}
        for artifact in record["artifacts"]:
            kinds[artifact["kind"]] = kinds.get(artifact["kind"], 0) + 1
        add_text_row(table, "artifacts", ", ".join(f"{n} {k}" for k, n in kinds.items()))
    if record.get("error"):
        add_text_row(table, "error", record["error"])
    for warning in record.get("warnings", []):
        add_text_row(table, "warning", warning)
    return table


def comparison_table(comparison: dict) -> Table:
    """One row per mode, readable whole in an 80-column terminal: short headers, no box, numbers never wrapped.
    A failed mode's reason is not in the table (compare prints it below). `--target` runs are compiled, not timed:
    their rows show the roofline lower bound and the number of generated kernels instead of timings."""
    entries = _pooled_rows(comparison)
    replicated = entries is not comparison["modes"]
    medians = [e["median_s"] for e in entries if e.get("status") == "ok" and e.get("median_s")]
    fastest = min(medians) if medians else None
    config = comparison.get("config", {})
    compiled = any(e.get("status") == "compiled" for e in entries)
    timed = any(e.get("status") != "compiled" for e in entries) and not config.get("target")
    table = Table(title=Text(f"hloscope compare: {config.get('model')} batch {config.get('batch_size')}, "
                             + (f"{config.get('steps')} timed steps, " if timed else "")
                             + f"{config.get('precision')}, data {config.get('data')}"
                             + (f", compiled for {config['target']}" if config.get("target") else "")),
                  box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), pad_edge=False, collapse_padding=True)
    columns: list[tuple[str, JustifyMethod]] = [("mode", "left")]
    by_devices = isinstance(config.get("devices"), list)  # compare --devices 1,2,4: a row per mode and count
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
        ok = entry.get("status") == "ok"
        row: list[str | Text] = [str(entry["mode"])]
        if by_devices:
            row.append(str(entry.get("devices", "-")))
        if timed:
            median, throughput = entry.get("median_s"), entry.get("throughput_img_s")
            row += [step_time(median) if ok else "-", ratio(median / fastest) if ok and median and fastest else "-",
                    rate(throughput) if ok and throughput else "-", sec(entry.get("first_step_s")),
                    mib(entry.get("peak_memory_bytes"))]
        if compiled:
            kernels = entry.get("kernels")
            row += [step_time(entry.get("roofline_lower_bound_s")), "-" if kernels is None else str(kernels)]
        status = entry.get("status", "?")
        style = {"ok": "green", "compiled": "green", "failed": "red", "interrupted": "yellow",
                 "refused": "yellow"}.get(status, "")
        cell = Text(str(status), style=style)
        if replicated:  # the processes pooled in the row, and half the range of their medians, of the step
            relative = entry.get("between_process_spread")
            cell.append(f" {entry['timed_processes']}x" + (f" ±{relative / 2:.0%}" if relative is not None else ""))
        row.append(cell)
        add_text_row(table, *row)
    if compiled:
        table.caption = "compiled, not timed: lower bound = the roofline's time per step"
    elif replicated:
        control = comparison.get("between_process_spread")
        table.caption = ("step: median of every timed step of every process; 3x ±4%: 3 timed processes, their "
                         "medians within ±4% of the step" + (f"; gaps under {control['relative']:.1%} of a step cannot be "
                                                     "told from this machine's own variation" if control else ""))
    return table


def _pooled_rows(comparison: dict) -> list[dict]:
    """The table's rows: the mode entries, or with several processes per mode (`--repeats`) one row per
    configuration, its processes pooled (comparison.json `configurations`)."""
    rows = comparison.get("configurations")
    if not isinstance(rows, list) or not any(row.get("processes", 1) > 1 for row in rows):
        return comparison["modes"]
    by_dir = {entry["dir"]: entry for entry in comparison["modes"]}
    batch = (comparison.get("config") or {}).get("batch_size")
    pooled = []
    for row in rows:
        members = [by_dir[name] for name in row["dirs"] if name in by_dir]
        timed = [m for m in members if m.get("status") == "ok"]
        firsts = sorted(m["first_step_s"] for m in timed if isinstance(m.get("first_step_s"), (int, float)))
        peaks = [m["peak_memory_bytes"] for m in timed if isinstance(m.get("peak_memory_bytes"), (int, float))]
        median = row.get("median_s")
        pooled.append({**row, "status": "ok" if timed else (members[0].get("status") if members else "failed"),
                       "throughput_img_s": batch / median if median and isinstance(batch, int) else None,
                       "first_step_s": firsts[len(firsts) // 2] if firsts else None,
                       "peak_memory_bytes": max(peaks) if peaks else None})
    return pooled


def audit_table(audit_record: dict) -> Table:
    """A rich table: every setting, its value when every mode agrees, else each mode's value; mismatches in red."""
    table = Table(title=f"fairness audit ({audit_record['stage']}): settings in effect per mode", title_justify="left",
                  show_edge=False, pad_edge=False, box=None)
    table.add_column("setting", overflow="fold", max_width=34)
    table.add_column("value (all modes) / per mode", overflow="fold")
    table.add_column("", no_wrap=True)
    versions = [row for row in audit_record["rows"] if row["setting"].startswith("packages.")
                and row["status"] == "same"]
    for row in audit_record["rows"]:
        if row in versions or row["setting"].startswith("model_config."):
            continue  # folded below / said by `model`
        if row["status"] == "same":
            value = next(iter(row["values"].values()))
        else:
            value = "\n".join(f"{mode}: {value}" for mode, value in row["values"].items())
        style = {"mismatch": "bold red", "by design": "yellow"}.get(row["status"], "")
        label = {"mismatch": "MISMATCH", "by design": "by design", "recorded by some": "some modes"}.get(row["status"],
                                                                                                         "")
        table.add_row(Text(row["setting"]), Text(value), Text(label, style=style))
    if versions:
        table.add_row(Text("versions (same in every mode)"),
                      Text(", ".join(f"{row['setting'].removeprefix('packages.')} {next(iter(row['values'].values()))}"
                                     for row in versions)), Text(""))
    for mode, error in audit_record["errors"].items():
        table.add_row(Text(mode), Text(f"not audited: {error}"), Text("error", style="red"))
    return table


def compiled_run_table(record: dict) -> Table:
    """A rich table summarising a compiled run (what the compiler says; no timing)."""
    target, kernels, memory = record.get("target", {}), record.get("kernels") or {}, record.get("memory", {})
    compiles, roofline = record.get("compiles", {}), record.get("roofline")
    config = record.get("config", {})
    table = Table(title=Text(f"hloscope run: {record['mode']} - {config.get('model')} batch {config.get('batch_size')} "
                             f"compiled for {target.get('device')} ({record['status']}, not timed)"), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    add_text_row(table, "target", f"{target.get('name')}: sm_{target.get('compute_capability')}, {target.get('sm_count')} SMs")
    add_text_row(table, "GPU compile", f"{compiles.get('target_compile_s') or 0:.1f} s, GEMMs: {compiles.get('gemm_backend')}"
                  + (" (Triton GEMMs failed: cuBLAS fallback)" if compiles.get("triton_gemm_fallback") else ""))
    if kernels:
        add_text_row(table, "launches (XLA thunks)", f"{kernels['kernel_launches']} generated kernels, "
                      f"{kernels['library_calls']} cuBLAS/cuDNN calls, {kernels['copies']} copies")
        add_text_row(table, "thunks by kind", ", ".join(f"{k} {v}" for k, v in sorted(kernels["by_kind"].items())))
    if memory.get("device_peak_estimate_bytes") is not None:
        add_text_row(table, "device memory (XLA)", f"{memory['device_peak_estimate_bytes'] / 2**20:,.1f} MiB = arguments "
                      f"{memory['argument_bytes'] / 2**20:,.1f} + outputs {memory['output_bytes'] / 2**20:,.1f} + temp "
                      f"{memory['temp_bytes'] / 2**20:,.1f} - aliased {memory['alias_bytes'] / 2**20:,.1f}")
    if roofline:
        add_text_row(table, "roofline LOWER BOUND", f"{fmt.ms(roofline['serial_s'])}/step serial, "
                      f"{fmt.ms(roofline['aggregate_s'])}/step aggregate (not a prediction)")
        add_text_row(table, "FLOPs / bytes", f"{roofline['flops']:.3e} / {roofline['bytes']:.3e}")
    for note in record.get("notes", []):
        add_text_row(table, "note", note)
    return table


def compiled_comparison_table(records: list[dict]) -> Table:
    """Compiled runs side by side (one column per mode): what each framework's graph became on the target GPU."""
    device = next((r.get("target", {}).get("device") for r in records if r.get("target")), "?")
    table = Table(title=Text(f"compiled for {device} (XLA deviceless compile; not timed)"))
    table.add_column("", style="bold")
    for record in records:
        table.add_column(Text(str(record["mode"])), justify="right")

    def row(label: str, value) -> None:
        add_text_row(table, label, *[value(r) for r in records])

    def get(record: dict, *keys: str, default: str | None = None) -> Any:
        value: Any = record  # a JSON leaf (count, name or number) at the end of `keys`, or None on the way
        for key in keys:
            value = (value or {}).get(key) if isinstance(value, dict) else None
        return default if value is None else value

    row("status", lambda r: r["status"])
    row("generated kernels", lambda r: str(get(r, "kernels", "kernel_launches", default="-")))
    row("cuBLAS / cuDNN calls", lambda r: str(get(r, "kernels", "library_calls", default="-")))
    row("copies", lambda r: str(get(r, "kernels", "copies", default="-")))
    row("GEMM backend", lambda r: str(get(r, "compiles", "gemm_backend", default="-")))
    row("device memory MiB", lambda r: "-" if get(r, "memory", "device_peak_estimate_bytes") is None
        else f"{get(r, 'memory', 'device_peak_estimate_bytes') / 2**20:,.1f}")
    row("FLOPs", lambda r: "-" if get(r, "roofline", "flops") is None else f"{get(r, 'roofline', 'flops'):.3e}")
    row("bytes accessed", lambda r: "-" if get(r, "roofline", "bytes") is None else f"{get(r, 'roofline', 'bytes'):.3e}")
    row("roofline LOWER BOUND ms", lambda r: "-" if get(r, "roofline", "serial_s") is None
        else f"{get(r, 'roofline', 'serial_s') * 1e3:.3f}")
    return table


def replay_summary_line(entry: dict) -> str:
    """One line for a mode entry's `replay` (compare --replay, hloscope replay COMPARISON_DIR): the program's time and
    the framework's measured overhead, or why the replay failed."""
    replay = entry.get("replay") or {}
    status = replay.get("status")
    if status in ("ok", "partial"):
        line = f"  {entry['mode']} replayed: program {ms(replay.get('median_s'))}"
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
    return f"  {entry['mode']} replay {status}: {replay.get('error')}"
