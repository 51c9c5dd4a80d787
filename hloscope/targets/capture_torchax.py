"""The torchax train step as StableHLO lowered for CUDA, built exactly as `hloscope run --mode torchax` builds the timed
step (the PyTorch ViT traced by torchax, optax SGD, one `jax.jit` function), as `capture_jax` does for the Flax step.

Lowering needs no CUDA plugin; the compile for the target GPU then happens in the CUDA-plugin environment like every
other mode's, so the torchax graph meets the same XLA GPU compiler as JAX's.
"""

from __future__ import annotations

from pathlib import Path

from hloscope.backends.torchax_workload import build_torchax_workload
from hloscope.errors import HloscopeError
from hloscope.models.presets import get_preset
from hloscope.targets.capture_jax import OPTIMIZER, lower_step, reuse_workload
from hloscope.targets.compile import TargetCompileError, _first_line


def capture_for_target(preset: str, batch_size: int, precision: str, seed: int, input_dir: Path,
                       work_dir: Path, seq_len: int | None = None) -> tuple[Path, dict]:
    """The mode registry's `target_capture` for torchax: lowered in this process (no scratch files in work_dir)."""
    graph_file = input_dir / "jit_train_step.torchax.cuda.stablehlo.mlir"
    try:
        info = lower_torchax_train_step(preset, batch_size, precision, seed, graph_file, seq_len)
    except HloscopeError:
        raise
    except Exception as error:  # noqa: BLE001  # a framework error, any type, becomes a failed run with its reason
        raise TargetCompileError(f"lowering the torchax train step failed: {type(error).__name__}: "
                                 f"{_first_line(str(error))}") from None
    return graph_file, info


def lower_torchax_train_step(preset: str, batch_size: int, precision: str, seed: int, out_file: Path,
                             seq_len: int | None = None) -> dict:
    """Write the train step's StableHLO (MLIR text) to `out_file` (text presets: sequences of `seq_len` tokens, None:
    the preset's default); returns facts about it for the run record."""
    key = ("torchax", preset, precision, seed, seq_len)
    workload, reused = reuse_workload(key, lambda: build_torchax_workload(get_preset(preset, seq_len), batch_size,
                                                                          precision, seed, optimizer=OPTIMIZER))
    params, buffers, opt_state = workload.state
    info = lower_step(workload.train_step, workload.state, workload.batch, batch_size, out_file,
                      parts=(params, buffers, opt_state))
    return {"framework": "torchax", "format": "mlir", "lowered_for": "cuda", "module": "jit_train_step",
            "matmul_precision": workload.matmul_precision, "dtype": workload.dtype, "optimizer": OPTIMIZER,
            "reused_workload": reused, **info}
