"""Does hloscope's harness add anything to the step time it reports?

For each mode, in one fresh process: a minimal hand-written training loop (same model, same data, waiting for the
device the same way: block_until_ready / cuda.synchronize / torch_xla.sync + wait_device_ops), then `hloscope run`'s
own driver, then the hand-written loop again. The ratio hloscope median / hand-written median should be 1.00 +- 0.03.

    PJRT_DEVICE=CPU .venv/bin/python benches/bench_step_time.py [--model vit-tiny] [--batch-size 8] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ["pytorch", "pytorch+compile", "torch_xla", "torch_xla+compile", "jax"]


def hand_loop(mode: str, model: str, batch_size: int, steps: int, warmup: int) -> list[float]:
    """The reference: the step written out by hand, timed with perf_counter around step + wait."""
    from hloscope.backends.data import synthetic_pool
    from hloscope.models.presets import get_preset

    preset = get_preset(model)
    pool = synthetic_pool(preset, batch_size, seed=0)
    times = []
    if mode == "jax":
        import jax

        from hloscope.backends.jax_workload import build_jax_workload, to_nhwc

        w = build_jax_workload(preset, batch_size, "fp32", 0)
        step = jax.jit(w.train_step)
        state = jax.device_put(w.state, jax.devices()[0])
        batches = [(jax.device_put(to_nhwc(x), jax.devices()[0]), jax.device_put(y, jax.devices()[0])) for x, y in pool]
        for i in range(warmup + steps):
            start = time.perf_counter()
            state, loss = step(state, *batches[i % len(batches)])
            jax.block_until_ready((state, loss))
            times.append(time.perf_counter() - start)
        return times[warmup:]
    import torch

    from hloscope.backends.torch_common import build_model

    if mode.startswith("torch_xla"):
        import torch_xla
        import torch_xla.backends
        import torch_xla.core.xla_model as xm

        device = torch_xla.device()
        torch_xla.backends.set_mat_mul_precision("highest")

        def wait():
            torch_xla.sync()
            xm.wait_device_ops()
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        torch.set_float32_matmul_precision("highest")

        def wait():
            if device.type == "cuda":
                torch.cuda.synchronize()
    net = build_model(preset, 0).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    if mode.endswith("+compile"):
        net = torch.compile(net, backend="openxla" if mode.startswith("torch_xla") else "inductor")
    batches = [(torch.from_numpy(x).to(device), torch.from_numpy(y).long().to(device)) for x, y in pool]
    for i in range(warmup + steps):
        images, labels = batches[i % len(batches)]
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = net(pixel_values=images, labels=labels).loss
        loss.backward()
        optimizer.step()
        wait()
        times.append(time.perf_counter() - start)
    return times[warmup:]


def worker(mode: str, model: str, batch_size: int, steps: int, warmup: int) -> dict:
    from hloscope.backends.base import RunOptions
    from hloscope.backends.driver import execute
    from hloscope.rundir import create_run_dir

    hand_before = statistics.median(hand_loop(mode, model, batch_size, steps, warmup))
    with tempfile.TemporaryDirectory() as out:
        options = RunOptions(mode=mode, model=model, batch_size=batch_size, steps=steps, warmup=warmup)
        record = execute(options, create_run_dir(out, "bench"))
    hand_after = statistics.median(hand_loop(mode, model, batch_size, steps, warmup))
    hand = (hand_before + hand_after) / 2
    return {"mode": mode, "hloscope_median_s": record["timing"]["median_s"], "hand_median_s": hand,
            "hand_before_s": hand_before, "hand_after_s": hand_after,
            "ratio": record["timing"]["median_s"] / hand}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit-tiny")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.batch_size, args.steps, args.warmup)))
        return
    print(f"{args.model}, batch {args.batch_size}, {args.steps} timed steps after {args.warmup} warm-up steps")
    print("| mode | hloscope median | hand-written median (before / after) | ratio |")
    print("|---|---|---|---|")
    for mode in args.modes.split(","):
        result = subprocess.run([sys.executable, __file__, "--worker", mode, "--model", args.model,
                                 "--batch-size", str(args.batch_size), "--steps", str(args.steps),
                                 "--warmup", str(args.warmup)], capture_output=True, text=True,
                                env={**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"),
                                     "HLOSCOPE_NO_PROGRESS": "1"})
        if result.returncode != 0:
            print(f"| {mode} | failed: {result.stderr.strip().splitlines()[-1:]} | | |")
            continue
        r = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"| {mode} | {r['hloscope_median_s'] * 1e3:.3f} ms | {r['hand_median_s'] * 1e3:.3f} ms "
              f"({r['hand_before_s'] * 1e3:.3f} / {r['hand_after_s'] * 1e3:.3f}) | {r['ratio']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
