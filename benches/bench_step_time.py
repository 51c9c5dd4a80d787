"""Does hloscope's harness add anything to the step time it reports?

For each mode, in one fresh process: hloscope's own Session and step timer (what `hloscope run` records) and a minimal
hand-written training step (same model, same data, waiting for the device the same way: block_until_ready /
cuda.synchronize / torch_xla.sync + wait_device_ops), timed alternately step by step, --steps times each.
The ratio hloscope median / hand-written median should be 1.00 +- 0.03.

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


def hand_stepper(mode: str, model: str, batch_size: int):
    """The reference: the step written out by hand. Returns step(i) that runs one step and waits for the device."""
    from hloscope.backends.data import synthetic_pool
    from hloscope.models.presets import get_preset

    preset = get_preset(model)
    pool = synthetic_pool(preset, batch_size, seed=0)
    if mode == "jax":
        import jax

        from hloscope.backends.jax_workload import build_jax_workload, to_nhwc

        w = build_jax_workload(preset, batch_size, "fp32", 0)
        train_step = jax.jit(w.train_step)
        device = jax.devices()[0]
        holder = {"state": jax.device_put(w.state, device)}
        batches = [(jax.device_put(to_nhwc(x), device), jax.device_put(y, device)) for x, y in pool]

        def step(i):
            holder["state"], loss = train_step(holder["state"], *batches[i % len(batches)])
            jax.block_until_ready((holder["state"], loss))
        return step
    import torch

    from hloscope.backends.torch_workload import build_model

    if mode.startswith("torch_xla"):
        import torch_xla
        import torch_xla.core.xla_model as xm

        device = torch_xla.device()

        def wait():
            torch_xla.sync()
            xm.wait_device_ops()
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

        def wait():
            if device.type == "cuda":
                torch.cuda.synchronize()
    net = build_model(preset, 0).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    if mode.endswith("+compile"):
        net = torch.compile(net, backend="openxla" if mode.startswith("torch_xla") else "inductor")
    batches = [(torch.from_numpy(x).to(device), torch.from_numpy(y).long().to(device)) for x, y in pool]

    def step(i):
        images, labels = batches[i % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        loss = net(pixel_values=images, labels=labels).loss
        loss.backward()
        optimizer.step()
        wait()
    return step


def hand_timed(hand_step, i: int) -> float:
    start = time.perf_counter()
    hand_step(i)
    return time.perf_counter() - start


def worker(mode: str, model: str, batch_size: int, steps: int, warmup: int) -> dict:
    """hloscope's Session timed by hloscope's own step timer (`timing.timed`, what `run_loop` records for every step)
    and the hand-written step timed by hand, in the same process, alternating step by step so that the machine's load
    falls equally on both. The first `warmup` steps of each (compilation) are not counted."""
    from hloscope.backends.base import RunOptions
    from hloscope.backends.driver import load_session
    from hloscope.backends.timing import timed

    with tempfile.TemporaryDirectory() as out:
        options = RunOptions(mode=mode, model=model, batch_size=batch_size, steps=steps, warmup=warmup)
        session = load_session(options, Path(out))
        session.setup()
        hand_step = hand_stepper(mode, model, batch_size)
        ours, hand = [], []
        for i in range(warmup + steps):
            if i % 2:  # alternate which goes first, so neither always runs on the other's warm caches
                _, seconds = timed(session.step, session.wait, i)
                hand_seconds = hand_timed(hand_step, i)
            else:
                hand_seconds = hand_timed(hand_step, i)
                _, seconds = timed(session.step, session.wait, i)
            if i >= warmup:
                ours.append(seconds)
                hand.append(hand_seconds)
        session.close()
    ours_median, hand_median = statistics.median(ours), statistics.median(hand)
    return {"mode": mode, "hloscope_median_s": ours_median, "hand_median_s": hand_median,
            "ratio": ours_median / hand_median, "steps_each": len(ours)}


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
    print(f"{args.model}, batch {args.batch_size}, {args.steps} alternating steps each after {args.warmup} warm-up")
    print("| mode | hloscope median | hand-written median | ratio |")
    print("|---|---|---|---|")
    for mode in args.modes.split(","):
        result = subprocess.run([sys.executable, __file__, "--worker", mode, "--model", args.model,
                                 "--batch-size", str(args.batch_size), "--steps", str(args.steps),
                                 "--warmup", str(args.warmup)],
                                capture_output=True, text=True,
                                env={**os.environ, "PJRT_DEVICE": os.environ.get("PJRT_DEVICE", "CPU"),
                                     "HLOSCOPE_NO_PROGRESS": "1"})
        if result.returncode != 0:
            print(f"| {mode} | failed: {result.stderr.strip().splitlines()[-1:]} | | |")
            continue
        r = json.loads(result.stdout.strip().splitlines()[-1])
        print(f"| {mode} | {r['hloscope_median_s'] * 1e3:.3f} ms | {r['hand_median_s'] * 1e3:.3f} ms "
              f"| {r['ratio']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
