"""An independent clock for the same training step that `hloscope run` timed: is its median taken after the device
finished?

Rebuilds the run's mode object (hloscope/backends) from its run.json `config` (same mode, model, batch, precision, device, data, seed) in a
fresh process and times the step without hloscope's timer (`hloscope.backends.timing`):

- PyTorch on CUDA: a pair of `torch.cuda.Event(enable_timing=True)` recorded on the stream around each step, read
  after the stream has finished (the device's own clock);
- everything else (JAX, torchax on any device; PyTorch on the CPU): `chunk` steps dispatched back to back with a
  single wait at the end (`block_until_ready` for JAX), wall time / chunk; the median over chunks. The device runs the
  chunk's steps end to end, so this is the step's device-bound time, which a timer that stopped the clock before the
  device finished would undercut by far.

    python -m hloscope.gpucheck.timing_probe RUN_DIR [--steps 30] [--warmup 5] [--chunk 5]

hloscope's own timer (`timing.timed`, what `run` records) runs in the same process, alternating with the reference
chunk by chunk. Prints one JSON object: {"mode", "device", "method", "reference_median_s", "samples_s",
"reference_min_s", "hloscope_timer_median_s", "hloscope_timer_min_s", "hloscope_timer_s", "run_median_s"}.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hloscope.backends.base import RunOptions
from hloscope.backends.driver import load_session
from hloscope.backends.timing import timed
from hloscope.errors import InputError, one_line
from hloscope.runs.records import RunRecord
from hloscope.runs.rundir import load_run


def options_from_run(run: RunRecord) -> RunOptions:
    """The run's own options (every RunOptions field its config holds), without dumps or profiles. The config is
    taken as recorded (`section`), since RunOptions has fields that the typed `RunConfig` leaves out (`optimizer`)."""
    config = run.section("config")
    names = {f.name for f in dataclasses.fields(RunOptions)}
    kept = {k: v for k, v in config.items() if k in names}
    kept.update(dump_hlo=False, profile=False, keep_all=False, check_parity=False, target=None)
    if "mode" not in kept and run.mode:
        kept["mode"] = run.mode
    return RunOptions(**kept)


def _cuda_event_times(stepper: Any, first: int, steps: int) -> list[float]:
    import torch

    times = []
    for index in range(first, first + steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        stepper.step(index)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)  # ms -> s
    return times


def _chunk_times(stepper: Any, first: int, steps: int, chunk: int) -> list[float]:
    times = []
    index = first
    for _ in range(max(steps // chunk, 1)):
        start = time.perf_counter()
        outputs = None
        for _ in range(chunk):
            outputs = stepper.step(index)
            index += 1
        stepper.wait(outputs)
        times.append((time.perf_counter() - start) / chunk)
    return times


def _hloscope_times(stepper: Any, first: int, steps: int) -> list[float]:
    """hloscope's own step timer, the one `run` records every step with."""
    return [timed(stepper.step, stepper.wait, index)[1] for index in range(first, first + steps)]


def probe(run_dir: Path, steps: int, warmup: int, chunk: int) -> dict:
    """The reference and hloscope's own timer alternate, one chunk each, so that the machine's load falls on both."""
    run = load_run(run_dir, check_artifacts=False)
    options = options_from_run(run)
    with tempfile.TemporaryDirectory(prefix="hloscope-probe-") as scratch:
        stepper = load_session(options, Path(scratch))
        stepper.setup()
        try:
            for index in range(warmup):
                stepper.wait(stepper.step(index))
            # PyTorch's mode objects hold their torch.device; JAX's place arrays through jax and have none
            torch_cuda = getattr(getattr(stepper, "device", None), "type", "") == "cuda"
            samples: list[float] = []
            ours: list[float] = []
            index = warmup
            for _ in range(max(steps // chunk, 1)):
                if torch_cuda:
                    samples += _cuda_event_times(stepper, index, chunk)
                else:
                    samples += _chunk_times(stepper, index, chunk, chunk)
                index += chunk
                ours += _hloscope_times(stepper, index, chunk)
                index += chunk
            method = ("torch.cuda.Event pairs around each step" if torch_cuda else
                      f"wall time of {chunk} steps dispatched back to back, one wait at the end, / {chunk}")
        finally:
            stepper.close()
    return {"mode": options.mode, "device": options.device, "method": method,
            "reference_median_s": statistics.median(samples), "reference_min_s": min(samples), "samples_s": samples,
            "hloscope_timer_median_s": statistics.median(ours), "hloscope_timer_min_s": min(ours),
            "hloscope_timer_s": ours,
            "run_median_s": run.timing.median_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        result = probe(args.run_dir, args.steps, args.warmup, args.chunk)
    except InputError as error:  # an unreadable run.json: one line naming the file
        print(f"hloscope: error: {one_line(str(error))}", file=sys.stderr)
        return error.exit_code
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
