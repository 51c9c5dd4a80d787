"""Replay benchmark (issue 20): per XLA mode, the run's step time, the replayed program's time (jaxlib's XLA, the
program alone) and the measured framework overhead (step - replay, 95% bootstrap interval).

    python benches/bench_replay.py [COMPARISON_DIR]

Without an argument it runs `hloscope compare --modes jax,torch_xla,torch_xla+compile --model vit-tiny --batch-size 8
--steps 20 --warmup 5 --dump-hlo --profile` first; then `hloscope replay` on each run (same steps and warm-up) and
prints the Markdown table of benches/README.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ("jax", "torch_xla", "torch_xla+compile")


def _hloscope(*args: str) -> None:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-m", "hloscope", *args], check=True, env=env, stdout=subprocess.DEVNULL)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        comparison = Path(argv[1])
    else:
        out = Path(tempfile.mkdtemp(prefix="bench-replay-"))
        _hloscope("compare", "--modes", ",".join(MODES), "--model", "vit-tiny", "--batch-size", "8", "--steps", "20",
                  "--warmup", "5", "--dump-hlo", "--profile", "--out", str(out))
        (comparison,) = out.glob("compare-*")
    print("| mode | step (run) | replayed program | overhead (step - replay), 95% | run's own device time | "
          "idle-based estimate | compiled by (run / replay) |")
    print("|---|---|---|---|---|---|---|")
    for mode in MODES:
        run_dir = comparison / mode.replace("+", "_")
        if not (run_dir / "replay.json").exists():
            _hloscope("replay", str(run_dir), "--steps", "20", "--warmup", "5")
        record = json.loads((run_dir / "replay.json").read_text())
        c, f = record["comparison"], record.get("framework_device") or {}
        low, high = c["overhead_ci_s"]
        idle = f.get("device_idle_s")
        print(f"| {mode} | {c['run_median_s'] * 1e3:.2f} ms | {c['replay_median_s'] * 1e3:.2f} ms | "
              f"{c['overhead_s'] * 1e3:.2f} ms ({low * 1e3:.2f} .. {high * 1e3:.2f}) | "
              f"{(f.get('device_busy_s') or 0) * 1e3:.2f} ms | {(idle or 0) * 1e3:.2f} ms | "
              f"{record['compiler']['run']['xla']} / {record['compiler']['replay']['xla']} |")


if __name__ == "__main__":
    main(sys.argv)
