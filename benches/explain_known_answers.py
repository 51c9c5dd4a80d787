"""Known-answer experiments for `hloscope explain`: pairs of real runs (tiny ViT, JAX on the CPU) whose right answer
is known by construction, and how often explain gives it over repeated runs.

    .venv/bin/python benches/explain_known_answers.py [--repeats 5] [--out DIR]

Experiments (each: a baseline run and a changed run, profiled, then `hloscope explain --json` on the two):
  identical   the same options twice                       -> "no significant difference", no causes
  loader      --data loader against --data device           -> the input pipeline is the first contributor
  bf16        --precision bf16 against fp32                 -> the compute dtype annotates a device node that grew
  batch       --batch-size 16 against 8                     -> batch_size listed first, a per-sample ratio given
  delay       HLOSCOPE_TEST_HOST_DELAY_S=0.003 on one run   -> device idle for the host sized within 20% of 3 ms
and on every pair: contributors' seconds + residual_s == gap_s.

tests/test_explain_known_answers.py runs each experiment once; this script repeats them and prints the hit rate per
experiment (results: benches/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

BASE = ["--mode", "jax", "--model", "vit-tiny", "--batch-size", "8", "--steps", "30", "--warmup", "5",
        "--profile", "--profile-steps", "7"]
DELAY_S = 0.003


def run(out: Path, run_id: str, *extra: str, env: dict | None = None) -> Path:
    """One profiled run; its directory."""
    result = subprocess.run(
        [sys.executable, "-m", "hloscope", "run", *BASE, *extra, "--out", str(out), "--run-id", run_id],
        capture_output=True, text=True, timeout=900, check=False, env={**os.environ, "PJRT_DEVICE": "CPU", **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"run {run_id} failed: {result.stderr[-2000:]}")
    return out / run_id


def explain(*runs: Path, baseline: str | None = None) -> dict:
    args = [sys.executable, "-m", "hloscope", "explain", *map(str, runs), "--json"]
    if baseline:
        args += ["--baseline", baseline]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"explain failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout)


def changed_entry(report: dict) -> dict:
    """The entry of the run that is not the baseline."""
    return next(m for m in report["modes"] if m["verdict"] != "baseline")


def adds_up(entry: dict) -> bool:
    total = sum(c["seconds"] for c in entry["contributors"]) + entry["residual_s"]
    return abs(total - entry["gap_s"]) < 1e-9


def check_identical(entry: dict) -> str | None:
    if entry["verdict"] != "no significant difference" or entry["contributors"]:
        return f"verdict {entry['verdict']} with gap {entry['gap_s'] * 1e3:.3f} ms {entry['gap_ci_s']}"
    return None


def check_loader(entry: dict) -> str | None:
    first = next((c for c in entry["contributors"] if c["significant"]), None)
    if entry["verdict"] != "slower" or first is None or "input pipeline" not in first["node"]:
        return f"verdict {entry['verdict']}, first contributor {first and first['node']}"
    return None


def check_bf16(entry: dict) -> str | None:
    differences = {d["field"] for d in entry["config_differences"]}
    if "precision" not in differences:
        return f"precision not among the configuration differences {sorted(differences)}"
    if entry["verdict"] == "no significant difference":
        return None  # nothing grew: nothing to annotate, and the setting is still listed
    annotated = [c for c in entry["contributors"] if any(a["rule"] == "compute_dtype" for a in c["annotations"])]
    if not annotated or not all(c["node"].startswith(("device:", "host:inside")) and c["seconds"] * entry["gap_s"] > 0
                                for c in annotated):
        return f"compute dtype annotated on {[c['node'] for c in annotated]}"
    return None


def check_batch(entry: dict) -> str | None:
    if not entry["config_differences"] or entry["config_differences"][0]["field"] != "batch_size":
        return f"configuration differences {entry['config_differences']}"
    if not entry["per_sample"] or not 0 < entry["per_sample"]["ratio"] < entry["ratio"]:
        return f"per sample {entry['per_sample']} against ratio {entry['ratio']}"
    return None


def check_delay(entry: dict) -> str | None:
    waiting = sum(c["seconds"] for c in entry["contributors"] if c["significant"] and c["node"].startswith("idle:"))
    # A sleep never ends early but may end late (0.6 ms on a loaded 2-core machine): the delay the device waited for
    # is DELAY_S or, when the step grew by more, that growth. Within 20% of either is right.
    realized = max(DELAY_S, entry["gap_s"])
    if entry["verdict"] != "slower" or min(abs(waiting - DELAY_S), abs(waiting - realized)) > 0.2 * realized:
        return f"verdict {entry['verdict']}, device idle for the host +{waiting * 1e3:.3f} ms (delay {DELAY_S * 1e3} ms)"
    return None


# name -> (extra options of the changed run, its environment, check)
EXPERIMENTS: dict[str, tuple[list[str], dict, Callable[[dict], str | None]]] = {
    "identical": ([], {}, check_identical),
    "loader": (["--data", "loader"], {}, check_loader),
    "bf16": (["--precision", "bf16"], {}, check_bf16),
    "batch": (["--batch-size", "16"], {}, check_batch),
    "delay": ([], {"HLOSCOPE_TEST_HOST_DELAY_S": str(DELAY_S)}, check_delay),
}


def experiment(name: str, out: Path, baseline: Path, tag: str = "") -> tuple[str | None, dict]:
    """Run the changed side of one experiment and explain it against `baseline`: (failure or None, its entry)."""
    extra, env, check = EXPERIMENTS[name]
    changed = run(out, f"{name}{tag}", *extra, env=env)
    entry = changed_entry(explain(baseline, changed, baseline=f"jax ({baseline.name})"))
    failure = check(entry)
    if failure is None and not adds_up(entry):
        failure = "contributors + residual != gap"
    return failure, entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="explain-known-answers-"))
    hits = dict.fromkeys(EXPERIMENTS, 0)
    for repeat in range(args.repeats):
        baseline = run(out, f"baseline-{repeat}")
        for name in EXPERIMENTS:
            failure, entry = experiment(name, out, baseline, f"-{repeat}")
            hits[name] += failure is None
            print(f"repeat {repeat} {name}: {'ok' if failure is None else 'WRONG: ' + failure} "
                  f"(gap {entry['gap_s'] * 1e3:+.3f} ms, {entry['verdict']})", flush=True)
    print("\n| experiment | right | of |\n|---|---|---|")
    for name, count in hits.items():
        print(f"| {name} | {count} | {args.repeats} |")


if __name__ == "__main__":
    main()
