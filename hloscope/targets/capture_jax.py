"""The JAX train step as StableHLO lowered for CUDA, built exactly as `hloscope run --mode jax` builds the timed step.

`jax.jit(w.train_step).trace(w.state, *w.batch).lower(lowering_platforms=("cuda",))` runs on any machine (no CUDA plugin
needed). Measured on vit-tiny: the text is identical to what lowering on the compile-only CUDA topology gives, except
for the trivial one-device sharding annotations that topology adds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hloscope.backends.jax_workload import build_jax_workload
from hloscope.errors import HloscopeError
from hloscope.models.presets import get_preset
from hloscope.targets.compile import TargetCompileError, _first_line


def capture_for_target(preset: str, batch_size: int, precision: str, seed: int, input_dir: Path,
                       work_dir: Path, seq_len: int | None = None) -> tuple[Path, dict]:
    """The mode registry's `target_capture` for jax: lowered in this process (no scratch files in work_dir)."""
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
    # Unlike `run --mode jax`, no USE_TORCH=0 here: transformers reads it once, at its first import, so it would
    # hide torch from every later PyTorch model built in this process (a torch_xla capture, an API caller's run).
    return _lower(preset, batch_size, precision, seed, out_file, seq_len)


def _lower(preset: str, batch_size: int, precision: str, seed: int, out_file: Path, seq_len: int | None) -> dict:
    key = ("jax", preset, precision, seed, seq_len)
    workload, reused = reuse_workload(key, lambda: build_jax_workload(get_preset(preset, seq_len), batch_size,
                                                                      precision, seed, optimizer=OPTIMIZER))
    state = workload.state
    batch_stats = getattr(state, "batch_stats", None)
    info = lower_step(workload.train_step, state, workload.batch, batch_size, out_file,
                      parts=(state.params, batch_stats, (state.opt_state, state.step)))
    return {"framework": "jax", "format": "mlir", "lowered_for": "cuda", "module": "jit_train_step",
            "matmul_precision": workload.matmul_precision, "dtype": workload.dtype, "optimizer": OPTIMIZER,
            "reused_workload": reused, **info}


# The optimizer the captured step updates with (the workload builders' default, named here to record it).
OPTIMIZER = "sgd"

# Workloads built by this process, by (framework, preset, precision, seed, seq_len): `--max-batch` lowers the same
# step at other batch sizes without building the model again (the state does not depend on the batch).
_BUILT: dict[tuple, Any] = {}


def reuse_workload(key: tuple, build: Callable[[], Any]) -> tuple[Any, bool]:
    """The workload built for `key` earlier in this process, or a new one; (workload, whether it was reused)."""
    if key in _BUILT:
        return _BUILT[key], True
    _BUILT.clear()  # one model at a time: a search never goes back to an earlier configuration
    _BUILT[key] = build()
    return _BUILT[key], False


def lower_step(train_step: Callable[..., Any], state: Any, batch: tuple, batch_size: int, out_file: Path,
               parts: tuple[Any, Any, Any]) -> dict:
    """Lower `train_step(state, *batch)` for CUDA with the batch's leading dimension set to `batch_size` (shapes only:
    the graph does not depend on the values) and write its StableHLO to `out_file`; returns the bytes of the step's
    arguments by part (`parts`: the parameters, the model buffers, the optimizer state, each a pytree or None)."""
    import jax

    shapes = tuple(jax.ShapeDtypeStruct((batch_size, *leaf.shape[1:]), leaf.dtype) for leaf in batch)
    traced = jax.jit(train_step).trace(state, *shapes)
    lowered = traced.lower(lowering_platforms=("cuda",))
    # debug_info keeps source locations, which XLA turns into op_name metadata (per-layer attribution on the GPU HLO)
    out_file.write_text(lowered.as_text(debug_info=True), encoding="utf-8")
    parameters, buffers, optimizer_state = (_tree_bytes(part) for part in parts)
    return {"batch_size": batch_size,
            "arguments": {"parameters": parameters, "buffers": buffers, "optimizer_state": optimizer_state,
                          "inputs": _tree_bytes(shapes)}}


def _tree_bytes(tree: Any) -> int:
    import jax

    return sum(int(leaf.size) * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree))
