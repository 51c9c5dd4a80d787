"""Rich tables for `hloscope run` and `hloscope compare` (rendering only: records in, tables out)."""

from __future__ import annotations

from rich.table import Table


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


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
    table = Table(title=f"hloscope run: {record['mode']} - {config.get('model')} batch {config.get('batch_size')} "
                        f"({record['status']})", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    table.add_row("step time (median)", ms(timing.get("median_s")))
    spread = " / ".join(ms(timing.get(k)) for k in ("mean_s", "p10_s", "p90_s", "std_s"))
    table.add_row("mean / p10 / p90 / std", spread)
    table.add_row("window mean", ms(timing.get("window_mean_s")))
    table.add_row("timed steps", str(len(timing.get("step_times_s", []))))
    throughput = timing.get("throughput_img_s")
    table.add_row("throughput", "-" if throughput is None else f"{rate(throughput)} images/s")
    table.add_row("first step (compile)", sec(timing.get("first_step_s")))
    if timing.get("profiled_step_times_s"):
        table.add_row("profiled steps", ", ".join(ms(t) for t in timing["profiled_step_times_s"]))
    peak, what = peak_memory(record.get("memory", {}))
    table.add_row(f"peak memory ({what})", mib(peak))
    if compiles:
        table.add_row("compilations (total / in timed window)",
                      ", ".join(f"{name} {total} / {compiles['in_window'].get(name, 0)}"
                                for name, total in compiles.get("total", {}).items()))
    if loss:
        table.add_row("loss first -> last", f"{loss['first']:.4f} -> {loss['last']:.4f}")
    precision = record.get("environment", {}).get("precision")
    if precision:
        table.add_row("precision in effect", ", ".join(f"{k}={v}" for k, v in precision.items()))
    if record.get("artifacts"):
        kinds: dict[str, int] = {}
        for artifact in record["artifacts"]:
            kinds[artifact["kind"]] = kinds.get(artifact["kind"], 0) + 1
        table.add_row("artifacts", ", ".join(f"{n} {k}" for k, n in kinds.items()))
    if record.get("error"):
        table.add_row("error", record["error"])
    for warning in record.get("warnings", []):
        table.add_row("warning", warning)
    return table


def comparison_table(comparison: dict) -> Table:
    entries = comparison["modes"]
    medians = [e["median_s"] for e in entries if e.get("status") == "ok" and e.get("median_s")]
    fastest = min(medians) if medians else None
    config = comparison.get("config", {})
    table = Table(title=f"hloscope compare: {config.get('model')} batch {config.get('batch_size')}, "
                        f"{config.get('steps')} timed steps, {config.get('precision')}, data {config.get('data')}")
    for column, justify in (("mode", "left"), ("step (median)", "right"), ("vs fastest", "right"),
                            ("throughput", "right"), ("compile / first step", "right"), ("peak memory", "right"),
                            ("status", "left")):
        table.add_column(column, justify=justify)
    for entry in entries:
        ok = entry.get("status") == "ok"
        median = entry.get("median_s")
        ratio = f"{median / fastest:.2f}x" if ok and median and fastest else "-"
        throughput = entry.get("throughput_img_s")
        status = entry.get("status", "?")
        if entry.get("error") and not ok:  # the short reason; compare prints the full error below the table
            status += f" ({entry['error'].split(';')[0].splitlines()[0][:40]})"
        style = {"ok": "green", "failed": "red", "interrupted": "yellow"}.get(entry.get("status"), "")
        table.add_row(entry["mode"], ms(median) if ok else "-", ratio,
                      f"{rate(throughput)} img/s" if ok and throughput else "-", sec(entry.get("first_step_s")),
                      mib(entry.get("peak_memory_bytes")), f"[{style}]{status}[/{style}]" if style else status)
    return table
