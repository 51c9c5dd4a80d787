"""`--dump-hlo` in the JAX modes (jax, torchax): the train step's real inputs, saved so that `hloscope replay` can run
the dumped program from the run's own starting point and check that it gives the run's loss trajectory.

Saved: the initial state (parameters and optimizer state, copied to the host before the first step), the batches of
the first `TRAJECTORY_STEPS` steps and the run's loss at each of them, in one `.npz` (numpy's uncompressed zip of
`.npy` arrays: no pickle, read back with `allow_pickle=False`). The arrays are jit's flattened arguments: the state's
leaves (`jax.tree_util.tree_leaves`) then the batch's, which is the order of the `jit_train_step` program's entry
parameters. Keeping the batches and losses costs the steps nothing: references to arrays the step made anyway, read
after the run.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from hloscope.errors import InputError
from hloscope.writing import atomic_output

TRAJECTORY_STEPS = 3
INPUTS_FILE = "hlo/jit_train_step.inputs.npz"
KIND = "program_inputs"


class StepInputs:
    """The initial state (host copies) and the first steps' batches and losses (device references)."""

    def __init__(self, steps: int = TRAJECTORY_STEPS):
        self.steps = steps
        self.state: list | None = None
        self.batches: list[tuple] = []
        self.losses: list = []

    def capture_initial(self, state) -> None:
        """Host copies of the state before the first step (a warm-up step: --warmup is at least 1, so the copy is
        never timed; taken here, not at set-up, so that `run --setup-only` (compare's fairness audit) copies nothing)."""
        import jax

        if self.state is None:
            self.state = [_host(leaf) for leaf in jax.device_get(jax.tree_util.tree_leaves(state))]

    def record(self, index: int, batch: tuple, loss) -> None:
        """Step `index` ran on `batch` and gave `loss` (not waited for: read when saved)."""
        if index == len(self.batches) and index < self.steps:
            self.batches.append(batch)
            self.losses.append(loss)

    def save(self, run_dir: Path, module: str) -> dict | None:
        """Write INPUTS_FILE (atomically) and return its artifact entry; None before any step ran."""
        import jax
        import numpy as np

        if not self.batches or self.state is None:
            return None
        arrays = {f"state_{i}": leaf for i, leaf in enumerate(self.state)}
        batch_leaves = 0
        for k, batch in enumerate(self.batches):
            leaves = [_host(leaf) for leaf in jax.device_get(jax.tree_util.tree_leaves(batch))]
            batch_leaves = len(leaves)
            arrays.update({f"batch{k}_{j}": leaf for j, leaf in enumerate(leaves)})
        losses = [float(loss) for loss in self.losses]
        arrays["losses"] = np.asarray(losses, dtype=np.float64)
        dtypes = {name: str(a.dtype) for name, a in arrays.items()}
        stored = {name: _storable(a) for name, a in arrays.items()}
        stored["dtypes"] = np.asarray([f"{name}={dtype}" for name, dtype in dtypes.items()])
        target = run_dir / INPUTS_FILE
        target.parent.mkdir(exist_ok=True)
        with atomic_output(target) as handle:
            np.savez(handle, **stored)
        return {"kind": KIND, "path": INPUTS_FILE, "module": module, "stage": "inputs", "train_step": False,
                "format": "npz", "state_parameters": len(self.state), "batch_parameters": batch_leaves,
                "steps": len(self.batches), "losses": losses, "bytes": target.stat().st_size,
                "content": "the step's entry parameters as jit flattens them: state_<i> (initial parameters and "
                           "optimizer state, before the first step), batch<k>_<j> (step k's batch), losses (the "
                           "run's loss at steps 0..k)"}


def _host(array):
    import numpy as np

    return np.asarray(array)


def _storable(array):
    """numpy's own dtypes as they are; ml_dtypes' (bfloat16, float8) as unsigned integers of the same width (their
    dtype is recorded in `dtypes`; `.npy` would store them as opaque void)."""
    import numpy as np

    if array.dtype.isbuiltin == 1:  # 2: a dtype registered by another package
        return array
    return array.view(np.dtype(f"u{array.dtype.itemsize}"))


def load(path: str | os.PathLike) -> dict:
    """The saved arrays by name, with their recorded dtypes (no pickle). Raises InputError naming the file."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise InputError(path, f"not a saved step-inputs file (.npz): {str(error).splitlines()[0][:200]}") from None
    dtypes = dict(item.split("=", 1) for item in (str(x) for x in arrays.pop("dtypes", [])))
    for name, dtype in dtypes.items():
        if name in arrays and str(arrays[name].dtype) != dtype:
            import ml_dtypes  # bfloat16 and the float8 types

            arrays[name] = arrays[name].view(np.dtype(getattr(ml_dtypes, dtype, dtype)))
    return arrays
