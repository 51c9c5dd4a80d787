"""`hloscope run --target`: a run directory whose run.json says `compiled` (for a named GPU), not `ok` (timed).

The record has the same fields as a timed run (written when it starts, rewritten when it ends, atomically), with an
empty `timing` and these additions: `target` (the GPU and the compiler versions), `kernels` (XLA's thunk counts),
`roofline` (the step's lower bound), `notes`. `compiles` holds the capture, the GPU compile time, the GEMM backend and
any Triton -> cuBLAS fallback.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hloscope.errors import HloscopeError


class TargetCompileFailed(HloscopeError):
    """The compile for the target failed; run.json says `failed` with the reason."""

    exit_code = 1


def check_target_run(mode: str, target: str) -> None:
    """Everything that can be refused before a run directory exists: the mode, the target file, the plugin env."""
    from hloscope.hlo.gpu_spec import resolve_target
    from hloscope.targets.compile import require_target_mode
    from hloscope.targets.cuda_env import require_target_python

    require_target_mode(mode)
    resolve_target(target)
    require_target_python()


def execute_target(options, target: str, run_dir: Path) -> dict:
    """Compile `options.mode`'s train step for `target` into `run_dir`; returns the final run record."""
    from hloscope.backends.driver import FRAMEWORK_MODULES, new_record
    from hloscope.rundir import write_run
    from hloscope.targets.compile import compile_for_target

    record = new_record(options, run_dir)
    record["config"]["target"] = target
    write_run(run_dir, record)

    def finish(status: str, error: str | None) -> dict:
        record["environment"]["frameworks_imported"] = sorted(m for m in FRAMEWORK_MODULES if m in sys.modules)
        record.update(status=status, error=error, finished_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        write_run(run_dir, record)
        return record

    try:
        result = compile_for_target(options.mode, options.model, options.batch_size, options.precision, target,
                                    run_dir, seed=options.seed, keep_all=options.keep_all)
    except KeyboardInterrupt:
        finish("interrupted", "interrupted by the user (Ctrl-C) before the GPU compile finished")
        raise
    except HloscopeError as error:
        finish("failed", str(error))
        raise
    except Exception as error:
        message = f"{type(error).__name__}: {error}".strip().splitlines()[0]
        finish("failed", message)
        raise TargetCompileFailed(f"{options.mode}: {message} (run.json in {run_dir})") from None
    for key in ("compiles", "memory", "artifacts", "target", "kernels", "roofline", "notes"):
        record[key] = result[key]
    finish(result["status"], result["error"])
    if result["status"] != "compiled":
        raise TargetCompileFailed(f"{options.mode}: {result['error']} (run.json in {run_dir})")
    return record


def compiled_table(record: dict):
    """A rich table summarising a compiled run (what the compiler says; no timing)."""
    from rich.table import Table
    from rich.text import Text

    from hloscope.run_tables import add_text_row

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
        add_text_row(table, "roofline LOWER BOUND", f"{roofline['serial_s'] * 1e3:.3f} ms/step serial, "
                      f"{roofline['aggregate_s'] * 1e3:.3f} ms/step aggregate (not a prediction)")
        add_text_row(table, "FLOPs / bytes", f"{roofline['flops']:.3e} / {roofline['bytes']:.3e}")
    for note in record.get("notes", []):
        add_text_row(table, "note", note)
    return table


def compiled_comparison_table(records: list[dict]):
    """Compiled runs side by side (one column per mode): what each framework's graph became on the target GPU."""
    from rich.table import Table
    from rich.text import Text

    from hloscope.run_tables import add_text_row

    device = next((r.get("target", {}).get("device") for r in records if r.get("target")), "?")
    table = Table(title=Text(f"compiled for {device} (XLA deviceless compile; not timed)"))
    table.add_column("", style="bold")
    for record in records:
        table.add_column(Text(str(record["mode"])), justify="right")

    def row(label: str, value) -> None:
        add_text_row(table, label, *[value(r) for r in records])

    def get(record: dict, *keys, default=None):
        value = record
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
