"""Write a small comparison directory with REAL profiler output for every mode, for the TensorBoard tests.

    python tests/tensorboard_traces.py OUT_DIR

Layout as `hloscope compare` writes it (see docs/run-directory.md): OUT_DIR/<mode-dir>/plugins/profile/<ts>/<host>.xplane.pb
for jax and torch_xla, OUT_DIR/<mode-dir>/kineto/*.pt.trace.json for the PyTorch modes. Each mode profiles two
training steps of a tiny MLP with its framework's own profiler, each mode in its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")
STEPS = 2


def torch_model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def pytorch_mode(run_dir: Path, compile_model: bool) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    model = torch_model()
    step_model = torch.compile(model) if compile_model else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16)

    def step():
        loss = step_model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()  # compile (inductor) outside the profile
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=0, active=STEPS, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(run_dir / "kineto")),
    ) as profiler:
        for _ in range(STEPS):
            step()
            profiler.step()


def torch_xla_mode(run_dir: Path, compile_model: bool) -> None:
    import torch
    import torch_xla
    import torch_xla.debug.profiler as xp

    device = torch_xla.device()
    model = torch_model().to(device)
    step_model = torch.compile(model, backend="openxla") if compile_model else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16).to(device)

    def step():
        loss = step_model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step()
    torch_xla.sync()
    server = xp.start_server(9012 + int(compile_model))  # noqa: F841 - the trace needs a live profiler server
    xp.start_trace(str(run_dir))
    for index in range(STEPS):
        with xp.StepTrace("train_step", step_num=index):  # syncs (executes the graph) on exit
            step()
    xp.stop_trace()


def jax_mode(run_dir: Path) -> None:
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(w, x):
        return w - 0.1 * jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)

    w, x = jnp.ones((16, 4)), jnp.ones((8, 16))
    step(w, x).block_until_ready()
    with jax.profiler.trace(str(run_dir)):
        for index in range(STEPS):
            with jax.profiler.StepTraceAnnotation("train", step_num=index):
                w = step(w, x)
        w.block_until_ready()


MODES = {
    "pytorch": lambda d: pytorch_mode(d, compile_model=False),
    "pytorch_compile": lambda d: pytorch_mode(d, compile_model=True),
    "torch_xla": lambda d: torch_xla_mode(d, compile_model=False),
    "torch_xla_compile": lambda d: torch_xla_mode(d, compile_model=True),
    "jax": jax_mode,
}


def main(out: Path) -> None:
    """Each mode in its own process, as `hloscope compare` runs them (torch_xla must not follow eager autograd)."""
    out.mkdir(parents=True, exist_ok=True)
    for mode_dir in MODES:
        subprocess.run([sys.executable, __file__, str(out), mode_dir], check=True)
    (out / "comparison.json").write_text(json.dumps({"schema_version": 1, "comparison_id": out.name,
                                                     "modes": [{"dir": mode_dir} for mode_dir in MODES]}))


if __name__ == "__main__":
    if len(sys.argv) == 3:
        run_dir = Path(sys.argv[1]) / sys.argv[2]
        run_dir.mkdir()
        MODES[sys.argv[2]](run_dir)
    else:
        main(Path(sys.argv[1]))
