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
    from hloscope.runs.rundir import write_run
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
    for key in ("compiles", "memory", "artifacts", "target", "kernels", "roofline", "notes"):
        record[key] = result[key]
    finish(result["status"], result["error"])
    if result["status"] != "compiled":
        raise TargetCompileFailed(f"{options.mode}: {result['error']} (run.json in {run_dir})")
    return record
