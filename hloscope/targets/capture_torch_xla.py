"""Capture the HLO graph PyTorch/XLA builds for its ViT train step, on the CPU, to compile it for a GPU elsewhere.

PyTorch/XLA 2.9 has no CUDA backend, but the graph it hands XLA does not depend on the device: it is what
`torch_xla.sync()` compiles (`SyncTensorsGraph.N`). We run a few real steps on the CPU with `--xla_dump_to` and keep
the `before_optimizations.txt` of the graph the steady state reuses: the one compiled during the last step that
compiled anything, provided the following steps compiled nothing (plain SGD creates no optimizer state, so on ViT the
first step's graph is already the steady one). The model, optimizer, batches, precision and step are the ones
`hloscope run --mode torch_xla` times: both build them with `hloscope.backends.torch_workload.build_torch_workload`,
with the matmul precision of `hloscope.backends.torch_xla_mode.PRECISIONS`.

`capture_for_target` (the mode registry's `target_capture` for torch_xla) runs this module as
`python -m hloscope.targets.capture_torch_xla --model M --batch-size B --precision P --seed S --out DIR`
(a subprocess: XLA_FLAGS must be set before torch_xla starts its runtime). It writes DIR/train_step.hlo.txt and
DIR/capture.json, and exits 1 with the reason in capture.json when there is no steady graph.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from hloscope.backends.torch_workload import build_torch_workload
from hloscope.backends.torch_xla_mode import PRECISIONS
from hloscope.models.presets import get_preset
from hloscope.targets.compile import TargetCompileError, _last_line

STEPS = 3  # the graph compiled in step 1 must be reused by steps 2 and 3
CAPTURE_TIMEOUT_S = 3600


def _dumped_graphs(dump_dir: Path) -> set[str]:
    return {p.name for p in dump_dir.glob("module_*.SyncTensorsGraph.*.before_optimizations.txt")} \
        if dump_dir.is_dir() else set()


def capture(model_name: str, batch_size: int, precision: str, seed: int, out_dir: Path,
            seq_len: int | None = None) -> dict:
    dump_dir = out_dir / "cpu_dump"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_dump_to={dump_dir} --xla_dump_hlo_module_re=SyncTensorsGraph"
                               " --xla_dump_hlo_as_text").strip()
    os.environ["PJRT_DEVICE"] = "CPU"
    # op_name/source metadata on every instruction (aten op names): measured to leave the graph itself unchanged.
    os.environ.setdefault("XLA_HLO_DEBUG", "1")
    import torch
    import torch_xla
    import torch_xla.backends

    # What `hloscope run --mode torch_xla` builds and steps (TorchXlaSession.setup / step / wait), from the same code.
    if torch_xla.backends.get_mat_mul_precision() != PRECISIONS[precision]:
        torch_xla.backends.set_mat_mul_precision(PRECISIONS[precision])
    workload = build_torch_workload(get_preset(model_name, seq_len), batch_size, seed, torch_xla.device(),
                                    precision=precision,
                                    autocast_device="xla", sync=torch_xla.sync)
    torch_xla.sync()

    seen = _dumped_graphs(dump_dir)
    new_per_step: list[list[str]] = []
    losses = []
    for step in range(STEPS):
        loss = workload.train_step(*workload.batch(step))
        workload.sync()
        losses.append(float(loss.item()))
        now = _dumped_graphs(dump_dir)
        new_per_step.append(sorted(now - seen))
        seen = now
    info = {"framework": "torch_xla", "format": "hlo", "steps": STEPS, "losses": losses,
            "graphs_compiled_per_step": new_per_step, "torch": torch.__version__, "torch_xla": torch_xla.__version__,
            "optimizer": "sgd", "batch_size": batch_size, "arguments": _argument_bytes(workload)}
    compiling = [i for i, new in enumerate(new_per_step) if new]
    if not compiling or compiling[-1] >= STEPS - 1 or len(new_per_step[compiling[-1]]) != 1:
        info["error"] = ("no steady train-step graph: torch_xla compiled a new graph in the last step or several "
                         f"graphs in one step ({new_per_step})")
        return info
    graph_file = dump_dir / new_per_step[compiling[-1]][0]
    shutil.copyfile(graph_file, out_dir / "train_step.hlo.txt")
    info["module"] = graph_file.name.split(".", 1)[1].rsplit(".before_optimizations.txt", 1)[0]
    info["source_file"] = graph_file.name
    shutil.rmtree(dump_dir, ignore_errors=True)
    return info


def _tensor_bytes(tensors) -> int:
    return sum(int(t.numel()) * t.element_size() for t in tensors)


def _argument_bytes(workload) -> dict[str, int]:
    """The graph's device data by part: the model's parameters and buffers, the optimizer's state tensors, one batch."""
    import torch

    model = workload.model
    state = [value for per_parameter in workload.optimizer.state.values() for value in per_parameter.values()
             if isinstance(value, torch.Tensor)]
    return {"parameters": _tensor_bytes(model.parameters()), "buffers": _tensor_bytes(model.buffers()),
            "optimizer_state": _tensor_bytes(state),
            "inputs": _tensor_bytes(t for t in workload.batch(0) if isinstance(t, torch.Tensor))}


def capture_for_target(preset: str, batch_size: int, precision: str, seed: int, input_dir: Path,
                       work_dir: Path, seq_len: int | None = None) -> tuple[Path, dict]:
    """The mode registry's `target_capture` for torch_xla: `capture` in a fresh Python on the CPU (torch_xla reads
    XLA_FLAGS when its runtime starts), then the graph moved into input_dir."""
    command = [sys.executable, "-m", "hloscope.targets.capture_torch_xla", "--model", preset, "--batch-size",
               str(batch_size), "--precision", precision, "--seed", str(seed), "--out", str(work_dir)]
    command += ["--seq-len", str(seq_len)] if seq_len else []
    env = {**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE") or "CPU"}
    env.pop("USE_TORCH", None)  # USE_TORCH=0 (set for JAX runs) would hide torch from transformers
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CAPTURE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TargetCompileError(f"capturing the torch_xla train step took over {CAPTURE_TIMEOUT_S} s") from None
    info_file = work_dir / "capture.json"
    if not info_file.is_file():
        raise TargetCompileError(f"capturing the torch_xla train step failed: {_last_line(done.stderr)}")
    info = json.loads(info_file.read_text(encoding="utf-8"))
    if "error" in info:
        raise TargetCompileError(f"capturing the torch_xla train step failed: {info['error']}")
    graph_file = input_dir / f"{info['module']}.torch_xla.hlo.txt"
    shutil.move(str(work_dir / "train_step.hlo.txt"), graph_file)
    return graph_file, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seq-len", type=int, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    info = capture(args.model, args.batch_size, args.precision, args.seed, args.out, args.seq_len)
    (args.out / "capture.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    return 1 if "error" in info else 0


if __name__ == "__main__":
    sys.exit(main())
