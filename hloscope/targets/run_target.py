"""`hloscope run --target`: a run directory whose run.json says `compiled` (for a named GPU), not `ok` (timed).

The record has the same fields as a timed run (written when it starts, rewritten when it ends, atomically), with an
empty `timing` and these additions: `target` (the GPU and the compiler versions), `kernels` (XLA's thunk counts),
`roofline` (the step's lower bound), `notes`. `compiles` holds the capture, the GPU compile time, the GEMM backend and
any Triton -> cuBLAS fallback.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hloscope.backends.driver import FRAMEWORK_MODULES, new_parts
from hloscope.errors import HloscopeError, InputError
from hloscope.hlo.gpu_spec import resolve_target
from hloscope.runs.records import RunRecord, amended_run, decode_run, run_document
from hloscope.runs.rundir import RUN_FILE, write_run
from hloscope.targets import device_memory
from hloscope.targets.compile import compile_for_target, peak_at_batch, require_target_mode
from hloscope.targets.cuda_env import require_target_python
from hloscope.targets.max_batch import search_max_batch


class TargetCompileFailed(HloscopeError):
    """The compile for the target failed; run.json says `failed` with the reason."""

    exit_code = 1


def check_target_run(mode: str, target: str, max_batch: bool = False) -> None:
    """Everything that can be refused before a run directory exists: the mode, the target file (with --max-batch: its
    device memory), the plugin env."""
    require_target_mode(mode)
    gpu = resolve_target(target)
    if max_batch and gpu.device_memory_bytes is None:
        raise InputError(gpu.path, "--max-batch needs the device's memory: the GPU target file has no "
                                   "gpu_device_info.device_memory_size")
    require_target_python()


def execute_target(options, target: str, run_dir: Path, on_point: Callable[[dict], None] | None = None) -> RunRecord:
    """Compile `options.mode`'s train step for `target` into `run_dir`; returns the final run record. With
    `options.max_batch`, then search the largest batch that fits the target's memory (run.json `max_batch`, rewritten
    after each compile; `on_point` is told each compile of the search)."""
    parts = new_parts(options, run_dir)
    parts.config["target"] = target
    # What the compile adds, as compile_for_target reports it: its compiles (the capture and the GPU compile, which
    # records.Compiles does not hold), then target, kernels, roofline, notes and max_batch after the parts every run has.
    compiled: dict[str, Any] = {}

    def save() -> RunRecord:
        record = amended_run(decode_run(run_dir / RUN_FILE, run_document(parts)), compiled)
        write_run(run_dir, record)
        return record

    def finish(status: str, error: str | None) -> RunRecord:
        parts.frameworks_imported = sorted(m for m in FRAMEWORK_MODULES if m in sys.modules)
        parts.status, parts.error = status, error
        parts.finished_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return save()

    save()
    try:
        result = compile_for_target(options.mode, options.model, options.batch_size, options.precision, target,
                                    run_dir, seed=options.seed, keep_all=options.keep_all, seq_len=options.seq_len)
    except KeyboardInterrupt:
        finish("interrupted", "interrupted by the user (Ctrl-C) before the GPU compile finished")
        raise
    except HloscopeError as error:
        finish("failed", str(error))
        raise
    # The mode's boundary: any framework error is this run's recorded failure
    except Exception as error:  # noqa: BLE001
        message = f"{type(error).__name__}: {error}".strip().splitlines()[0]
        finish("failed", message)
        raise TargetCompileFailed(f"{options.mode}: {message} (run.json in {run_dir})") from None
    parts.memory, parts.artifacts = result["memory"], result["artifacts"]
    compiled.update((key, result[key]) for key in ("compiles", "target", "kernels", "roofline", "notes"))
    if options.max_batch and result["status"] == "compiled":
        try:
            compiled["max_batch"] = _search(options, target, run_dir, result["memory"], compiled, save, on_point)
        except KeyboardInterrupt:
            finish("interrupted", "interrupted by the user (Ctrl-C) during the --max-batch search (run.json "
                                  "max_batch holds the compiles so far)")
            raise
    record = finish(result["status"], result["error"])
    if result["status"] != "compiled":
        raise TargetCompileFailed(f"{options.mode}: {result['error']} (run.json in {run_dir})")
    return record


def _search(options, target: str, run_dir: Path, memory: dict, compiled: dict, save: Callable[[], object],
            on_point: Callable[[dict], None] | None) -> dict:
    """--max-batch from the run's own compile (its `memory`, and `compiled`: the parts the compile added); each further
    compile in a scratch directory inside the run directory (removed after it); `compiled["max_batch"]` holds the
    search so far and run.json is saved after each compile, so that an interrupted search leaves what it found."""
    gpu = resolve_target(target)
    python = require_target_python()
    usable = device_memory.usable_bytes(gpu)
    if usable is None:  # check_target_run refused such a file; a caller of the API gets the same line
        raise TargetCompileFailed(f"{gpu.path}: --max-batch needs gpu_device_info.device_memory_size")
    peak = (memory.get("target_peak") or {}).get("peak_bytes")
    capture = compiled["compiles"].get("capture") or {}
    first = {"batch_size": options.batch_size, "status": "compiled", "peak_bytes": peak,
             "fits": None if peak is None else peak <= usable, "capture_s": capture.get("seconds"),
             "compile_s": compiled["compiles"].get("target_compile_s"),
             "gemm_backend": compiled["compiles"].get("gemm_backend"), "run": True}
    partial: dict = {"compiles": [first]}
    compiled["max_batch"] = partial

    def told(point: dict) -> None:
        partial["compiles"].append(point)
        save()
        if on_point is not None:
            on_point(point)

    def try_batch(batch: int) -> dict:
        return peak_at_batch(options.mode, options.model, batch, options.precision, gpu, python,
                             run_dir / f".max_batch_{batch}", seed=options.seed, seq_len=options.seq_len)

    result = search_max_batch(first, try_batch, usable, options.max_batch_compiles, on_point=told)
    result["reserve"] = device_memory.RESERVE
    result["reserve_bytes"] = (gpu.device_memory_bytes or 0) - usable
    result["device_memory_bytes"] = gpu.device_memory_bytes
    return result
