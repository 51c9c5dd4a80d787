"""Replay benchmark: per preset and XLA mode, the run's step time, the replayed program's time (jaxlib's
XLA, the program alone) and the measured framework overhead (step - replay, 95% bootstrap interval), beside the run's
own profiled device time and explain's idle-based estimate.

    python benches/bench_replay.py [--presets vit-tiny,vit-small] [--batch-size 8] [--steps 20] [--warmup 5]
                                   [COMPARISON_DIR ...]

Without comparison directories it runs, per preset, `hloscope compare --modes jax,torchax,torch_xla,torch_xla+compile
--model PRESET --batch-size 8 --steps 20 --warmup 5 --dump-hlo --profile --replay --no-audit` (the replays are
compare's own, one subprocess per mode); a comparison given without replays is replayed with `hloscope replay DIR`.
Prints the Markdown table of benches/README.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from msgspec import UNSET

from hloscope.runs.replay_record import FrameworkDevice, load_replay
from hloscope.runs.rundir import load_comparison

MODES = ("jax", "torchax", "torch_xla", "torch_xla+compile")


def _hloscope(*args: str) -> None:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-m", "hloscope", *args], check=True, env=env, stdout=subprocess.DEVNULL)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def _set(value: Any) -> Any:
    """A field of the replay record that may be absent (msgspec's UNSET), as None when it is."""
    return None if value is UNSET else value


def _rows(comparison: Path) -> list[str]:
    record = load_comparison(comparison)
    preset = record.config.model
    rows = []
    for entry in record.modes:
        run_dir = comparison / entry.dir
        if entry.status != "ok":
            rows.append(f"| {preset} | {entry.mode} | failed: {entry.error} | | | | | | |")
            continue
        if not (run_dir / "replay.json").exists():
            _hloscope("replay", str(comparison), "--steps", str(record.config.steps), "--warmup",
                      str(record.config.warmup))
        replay = load_replay(run_dir / "replay.json")
        c = replay.comparison or None
        f = replay.framework_device or FrameworkDevice()
        low, high = c.overhead_ci_s if c else (None, None)
        trajectory = replay.trajectory or None
        same = "-" if not trajectory else ("same" if trajectory.ok else "DIFFERS")
        run_xla = replay.compiler.run.xla if replay.compiler.run else None
        rows.append(f"| {preset} | {entry.mode} | {_ms(c and c.run_median_s)} | {_ms(c and c.replay_median_s)} | "
                    f"{_ms(c and c.overhead_s)} ({_ms(low)} .. {_ms(high)}) | {_ms(_set(f.device_busy_s))} | "
                    f"{_ms(_set(f.device_idle_s))} | {same} | "
                    f"{(run_xla or '-').split(' (')[0]} / {replay.compiler.replay.xla} |")
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("comparisons", nargs="*", type=Path)
    parser.add_argument("--presets", default="vit-tiny,vit-small")
    parser.add_argument("--batch-size", default="8")
    parser.add_argument("--steps", default="20")
    parser.add_argument("--warmup", default="5")
    args = parser.parse_args(argv[1:])
    comparisons = list(args.comparisons)
    if not comparisons:
        for preset in args.presets.split(","):
            out = Path(tempfile.mkdtemp(prefix=f"bench-replay-{preset}-"))
            _hloscope("compare", "--modes", ",".join(MODES), "--model", preset, "--batch-size", args.batch_size,
                      "--steps", args.steps, "--warmup", args.warmup, "--dump-hlo", "--profile", "--replay",
                      "--no-audit", "--out", str(out))
            (comparison,) = out.glob("compare-*")
            print(f"{preset}: {comparison}", file=sys.stderr)
            comparisons.append(comparison)
    print("| preset | mode | step (run) | replayed program | overhead (step - replay), 95% | run's own device time | "
          "idle-based estimate | loss trajectory | compiled by (run / replay) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for comparison in comparisons:
        for row in _rows(comparison):
            print(row)


if __name__ == "__main__":
    main(sys.argv)
