"""The loss-trajectory check: the run's dumped train-step program, replayed from the run's own initial state on the
run's own first batches (saved by `--dump-hlo` in the JAX modes: hloscope/backends/step_inputs.py), must give the
losses the run recorded at those steps, within the float tolerance of the run's precision (hloscope.runs.parity's).
It shows that what replay times is the program the framework ran, fed the way the framework fed it."""

from __future__ import annotations

from pathlib import Path

from hloscope.backends.step_inputs import KIND
from hloscope.errors import HloscopeError
from hloscope.replay.inputs import load_saved
from hloscope.replay.program import Program, Shape, loss_index
from hloscope.runs.parity import relative_difference, tolerances
from hloscope.runs.records import Artifact, RunRecord


def saved_inputs(run: RunRecord | None) -> Artifact | None:
    """run.json's artifact entry of the saved step inputs, or None."""
    for artifact in run.artifacts if run is not None else []:
        if artifact.kind == KIND:
            return artifact
    return None


def check_trajectory(program: Program, run_dir: Path, saved: str, precision: str, device) -> dict:
    """Run `program` for the saved steps (the file `saved`, relative to `run_dir`) from the saved state, threading its
    state outputs back; the record's `trajectory` field, compared within the tolerance of the run's `precision`. A
    mismatch of shapes or a missing file is recorded as `error`, never raised."""
    import jax

    try:
        arrays = load_saved(run_dir / saved, program.parameters, program.name)
    except HloscopeError as error:
        return {"file": saved, "ok": False, "error": str(error)}
    n_state = sum(1 for name in arrays if name.startswith("state_"))
    steps = sum(1 for name in arrays if name.startswith("batch") and name.endswith("_0"))
    state = [arrays[f"state_{i}"] for i in range(n_state)]
    n_batch = sum(1 for name in arrays if name.startswith("batch0_"))
    batches = [[arrays[f"batch{k}_{j}"] for j in range(n_batch)] for k in range(steps)]
    out: dict = {"file": saved, "steps": steps, "run_losses": [float(x) for x in arrays.get("losses", [])]}
    problem = _mismatch(program, state, batches, n_state)
    if problem:
        return {**out, "ok": False, "error": problem}
    index = loss_index(program)
    if index is None:
        return {**out, "ok": False, "error": f"{program.name}: no scalar loss output to compare"}
    wide = any(a.dtype.itemsize == 8 for a in state + [x for b in batches for x in b])
    losses = []
    with jax.enable_x64(wide):
        current = [jax.device_put(a, device) for a in state]
        for batch in batches:
            outputs = program.executable.execute(current + [jax.device_put(a, device) for a in batch])
            losses.append(float(outputs[index]))
            current = [outputs[program.feeds[i]] for i in range(n_state)]
    rtol = tolerances(precision)["loss"]
    differences = [relative_difference(a, b) for a, b in zip(losses, out["run_losses"])]
    return {**out, "replay_losses": losses, "max_relative_difference": max(differences, default=None),
            "rtol": rtol, "precision": precision,
            "ok": len(losses) == len(out["run_losses"]) and all(d <= rtol for d in differences)}


def _mismatch(program: Program, state: list, batches: list[list], n_state: int) -> str | None:
    """Why the saved arrays cannot be the program's parameters (None when they can)."""
    if not batches:
        return f"{program.name}: the saved inputs hold no batch"
    saved = state + batches[0]
    if len(saved) != len(program.parameters):
        return (f"{program.name}: {len(program.parameters)} entry parameters, {len(saved)} saved arrays "
                f"({n_state} state + {len(batches[0])} batch)")
    for i, (array, shape) in enumerate(zip(saved, program.parameters)):
        if tuple(array.shape) != shape.dims or _hlo_type(array.dtype) != shape.dtype:
            return (f"{program.name}: parameter {i} is {shape.text}, the saved array "
                    f"{Shape(_hlo_type(array.dtype), tuple(array.shape)).text}")
    missing = [i for i in range(n_state) if i not in program.feeds]
    if missing:
        return f"{program.name}: state parameter(s) {missing[:5]} are not returned by the step (nothing to thread back)"
    return None


def _hlo_type(dtype) -> str:
    name = str(dtype)
    table = {"bool": "pred", "bfloat16": "bf16"}
    if name in table:
        return table[name]
    kind = {"i": "s", "u": "u", "f": "f", "c": "c"}.get(dtype.kind, "?")
    return f"{kind}{dtype.itemsize * 8}"
