"""The JAX train step as StableHLO lowered for CUDA, built exactly as `hloscope run --mode jax` builds the timed step.

`jax.jit(w.train_step).trace(w.state, *w.batch).lower(lowering_platforms=("cuda",))` runs on any machine (no CUDA plugin
needed). Measured on vit-tiny: the text is identical to what lowering on the compile-only CUDA topology gives, except
for the trivial one-device sharding annotations that topology adds.
"""

from __future__ import annotations

from pathlib import Path


def capture_for_target(preset: str, batch_size: int, precision: str, seed: int, input_dir: Path,
                       work_dir: Path, seq_len: int | None = None) -> tuple[Path, dict]:
    """The mode registry's `target_capture` for jax: lowered in this process (no scratch files in work_dir)."""
    from hloscope.errors import HloscopeError
    from hloscope.targets.compile import TargetCompileError, _first_line

    graph_file = input_dir / "jit_train_step.cuda.stablehlo.mlir"
    try:
        info = lower_jax_train_step(preset, batch_size, precision, seed, graph_file, seq_len)
    except HloscopeError:
        raise
    except Exception as error:  # noqa: BLE001  # a framework error, any type, becomes a failed run with its reason
        raise TargetCompileError(f"lowering the JAX train step failed: {type(error).__name__}: "
                                 f"{_first_line(str(error))}") from None
    return graph_file, info


def lower_jax_train_step(preset: str, batch_size: int, precision: str, seed: int, out_file: Path,
                         seq_len: int | None = None) -> dict:
    """Write the train step's StableHLO (MLIR text) to `out_file` (text presets: sequences of `seq_len` tokens, None:
    the preset's default); returns facts about it for the run record."""
    import os

    # As `run --mode jax`: transformers would import torch for nothing. Only while importing: a later torch_xla
    # capture started from this process must not inherit it.
    previous = os.environ.get("USE_TORCH")
    os.environ.setdefault("USE_TORCH", "0")
    try:
        return _lower(preset, batch_size, precision, seed, out_file, seq_len)
    finally:
        if previous is None:
            os.environ.pop("USE_TORCH", None)


def _lower(preset: str, batch_size: int, precision: str, seed: int, out_file: Path, seq_len: int | None) -> dict:
    import jax

    from hloscope.backends.jax_workload import build_jax_workload
    from hloscope.models.presets import get_preset

    workload = build_jax_workload(get_preset(preset, seq_len), batch_size, precision, seed)
    traced = jax.jit(workload.train_step).trace(workload.state, *workload.batch)
    lowered = traced.lower(lowering_platforms=("cuda",))
    # debug_info keeps source locations, which XLA turns into op_name metadata (per-layer attribution on the GPU HLO)
    out_file.write_text(lowered.as_text(debug_info=True), encoding="utf-8")
    return {"framework": "jax", "format": "mlir", "lowered_for": "cuda", "module": "jit_train_step",
            "matmul_precision": workload.matmul_precision, "dtype": workload.dtype}
