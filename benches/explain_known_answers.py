"""Known-answer experiments for `hloscope explain`: configurations of one mode (tiny ViT, JAX on the CPU by default)
whose right answer is known by construction, each run in K fresh processes interleaved as `compare --repeats K` runs
modes (hloscope.runs.runner.run_variants), optionally beside a CPU-bound neighbour, then explained against the
baseline configuration. How often explain gives the right answer, per K.

    .venv/bin/python benches/explain_known_answers.py [--attempts 3] [--repeats 1,2,3,5] [--neighbours 1] [--out DIR]

Configurations and right answers (each against `base`):
  identical   the same options                  -> "no significant difference", no causes
  loader      --data loader                     -> slower, the input pipeline first; or "no significant
                                                   difference" for a stated reason (a miss, counted)
  bf16        --precision bf16                  -> precision listed; when significant, the compute dtype annotates
                                                   a device node that grew
  batch       --batch-size 16 (base: 8)         -> batch_size listed first, a per-sample ratio given
  delay       --inject-host-delay 3 (ms)        -> slower, host-side parts of the ledger within 25% of the sleep
                                                   the runs measured (3 ms, or more when the host woke late)
and on every pair: contributors' seconds + residual_s == gap_s, the estimate inside its interval, the verdict
following its tests. A wrong verdict on `identical` is a false positive; `loader` or `delay` not called slower is a
false negative (results: benches/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hloscope.api import explain
from hloscope.backends.base import RunOptions
from hloscope.explain.calibration import delay_found, host_side_parts  # calibrate's rule for a found delay
from hloscope.runs.rundir import measured_host_delay_s
from hloscope.runs.runner import run_variants

MODE = "jax"
BASE = RunOptions(mode=MODE, model="vit-tiny", batch_size=8, steps=30, warmup=5, precision="fp32", device="cpu",
                  data="device", seed=0, dump_hlo=False, profile=True, profile_steps=7, keep_all=False)
DELAY_S = 0.003
# A real gap must be found when it is at least this many times the smallest gap explain says the pair resolves.
POWER_MARGIN = 2.0
# name -> RunOptions fields the configuration changes
VARIANTS: dict[str, dict[str, Any]] = {
    "base": {}, "identical": {}, "loader": {"data": "loader"}, "bf16": {"precision": "bf16"},
    "batch": {"batch_size": 16}, "delay": {"inject_host_delay_ms": DELAY_S * 1e3},
}


def label(name: str, mode: str = MODE) -> str:
    return f"{mode} [{name}]"


def adds_up(entry: dict) -> bool:
    total = sum(c["seconds"] for c in entry["contributors"]) + entry["residual_s"]
    return abs(total - entry["gap_s"]) < 1e-9


def invariants(entry: dict) -> str | None:
    """What must hold whatever the machine does: the parts add up, the estimate lies in its interval, the verdict is
    exactly what its tests say."""
    if not adds_up(entry):
        return "contributors + residual != gap"
    if not entry["gap_ci_s"][0] <= entry["gap_s"] <= entry["gap_ci_s"][1]:
        return f"gap {entry['gap_s']} outside its interval {entry['gap_ci_s']}"
    if (entry["verdict"] != "no significant difference") != all(entry["tests"].values()):
        return f"verdict {entry['verdict']} does not follow its tests {entry['tests']}"
    return None


def check_identical(entry: dict, resolvable: float | None = None) -> str | None:
    if entry["verdict"] != "no significant difference" or entry["contributors"]:
        return f"verdict {entry['verdict']} with gap {entry['gap_s'] * 1e3:.3f} ms {entry['gap_ci_s']}"
    return None


def resolvable_s(report: dict, entry: dict | None = None) -> float | None:
    """The smallest gap this comparison resolves, as explain states it: for one configuration against the baseline,
    its `resolvable_gap_s` (the process-level test's, the spreads between processes' and the practical minimum's);
    for the comparison as a whole, its A/A control at the baseline's median. None when unmeasured."""
    if entry is not None and entry.get("resolvable_gap_s") is not None:
        return entry["resolvable_gap_s"]
    control = report["between_process_spread"]
    if not control:
        return None
    base = next(m for m in report["modes"] if m["verdict"] == "baseline")
    return control["relative"] * base["step_time_s"]


def check_loader(entry: dict, resolvable: float | None = None) -> str | None:
    if entry["verdict"] == "no significant difference":
        # the loader's cost is not known in advance: "cannot tell" is right exactly when a test of the gap failed
        # (the invariants check that the verdict follows the tests); the benchmark counts it as a miss
        return None
    first = next((c for c in entry["contributors"] if c["significant"]), None)
    if entry["verdict"] != "slower" or first is None or "input pipeline" not in first["node"]:
        return f"verdict {entry['verdict']}, first contributor {first and first['node']}"
    return None


def check_bf16(entry: dict, resolvable: float | None = None) -> str | None:
    differences = {d["field"] for d in entry["config_differences"]}
    if "precision" not in differences:
        return f"precision not among the configuration differences {sorted(differences)}"
    if entry["verdict"] == "no significant difference" or entry["profile_reproduces_gap"] is False:
        return None  # nothing grew that the profile shows: nothing to annotate, and the setting is still listed
    annotated = [c for c in entry["contributors"] if any(a["rule"] == "compute_dtype" for a in c["annotations"])]
    if not annotated or not all(c["node"].startswith(("device:", "host:inside")) and c["seconds"] * entry["gap_s"] > 0
                                for c in annotated):
        return f"compute dtype annotated on {[c['node'] for c in annotated]}"
    return None


def check_batch(entry: dict, resolvable: float | None = None) -> str | None:
    if not entry["config_differences"] or entry["config_differences"][0]["field"] != "batch_size":
        return f"configuration differences {entry['config_differences']}"
    if not entry["per_sample"] or not 0 < entry["per_sample"]["ratio"] < entry["ratio"]:
        return f"per sample {entry['per_sample']} against ratio {entry['ratio']}"
    return None


def host_parts(entry: dict) -> float:
    """The significant host-side parts of the ledger (device idle for a host cause, or host time), summed."""
    return sum(host_side_parts((c["node"], c["seconds"], c["significant"]) for c in entry["contributors"]).values())


def check_delay(entry: dict, resolvable: float | None = None) -> str | None:
    # "No significant difference" is right when the sleep is not clearly above the smallest gap explain says this pair
    # resolves (`resolvable`, its process-level test's critical gap among others): a true gap right at that critical
    # value is missed half the time by any test, so the delay must be found only when it is at least POWER_MARGIN
    # times that gap (then a miss needs the estimate below half its true value: about as rare as the test's level).
    # Otherwise the delay must be found as calibrate finds it (hloscope.explain.calibration.delay_found), against the
    # sleep the runs measured (`slept_s`, put there by `attempt`; DELAY_S where unmeasured).
    slept = entry.get("slept_s") or DELAY_S
    if (entry["verdict"] == "no significant difference" and resolvable is not None
            and resolvable * POWER_MARGIN >= slept):
        return None
    found = host_parts(entry)
    if not delay_found(entry["verdict"], found, slept, entry["gap_s"]):
        return (f"verdict {entry['verdict']}, host-side parts +{found * 1e3:.3f} ms (slept {slept * 1e3:.3f} ms, "
                f"delay {DELAY_S * 1e3} ms, resolvable {'unmeasured' if resolvable is None else f'{resolvable * 1e3:.3f} ms'})")
    return None


# name -> check(its explain entry, the comparison's resolvable gap in seconds): None when right, else what was wrong
CHECKS: dict[str, Callable[[dict, float | None], str | None]] = {
    "identical": check_identical, "loader": check_loader, "bf16": check_bf16, "batch": check_batch,
    "delay": check_delay,
}


@contextlib.contextmanager
def neighbours(count: int) -> Iterator[None]:
    """`count` CPU-bound processes beside the experiment: the loaded machine explain must hold on."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


def attempt(out: Path, repeats: int, busy: int = 1, names: tuple[str, ...] = tuple(CHECKS)) -> dict[str, Any]:
    """The configurations `names` and `base`, each in `repeats` processes beside `busy` neighbours, explained against
    `base`: name -> its explain entry (the JSON document's; the delay's also holds `slept_s`, the median sleep its
    processes measured), and under "report" the whole document."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    out.mkdir(parents=True)
    variants = {name: VARIANTS[name] for name in ("base", *names)}
    with neighbours(busy):
        comparison = run_variants(MODE, BASE, variants, out, repeats, timeout_s=900)
    failed = [e for e in comparison.modes if e.status != "ok"]
    if failed:
        raise RuntimeError(f"runs failed: {[(e.dir, e.error) for e in failed]}")
    report = explain(out, baseline=label("base")).to_dict()
    by_label = {m["mode"]: m for m in report["modes"]}
    entries = {"report": report, **{name: by_label[label(name)] for name in names}}
    if "delay" in names:  # the sleep the delay's processes measured, which check_delay compares with
        entries["delay"]["slept_s"] = measured_host_delay_s(out, "delay")
    return entries


def judge(entries: dict[str, Any]) -> dict[str, str | None]:
    """name -> None when right, else what was wrong (invariants first), for each configuration explained."""
    report = entries["report"]
    return {name: invariants(entries[name]) or CHECKS[name](entries[name], resolvable_s(report, entries[name]))
            for name in CHECKS if name in entries}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--repeats", default="1,2,3,5", help="processes per configuration, a comma-separated list")
    parser.add_argument("--neighbours", type=int, default=1, help="CPU-bound processes beside the runs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="explain-known-answers-"))
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs; {args.neighbours} neighbour(s)",
          flush=True)
    rows = []
    for repeats in [int(k) for k in args.repeats.split(",")]:
        right = dict.fromkeys(CHECKS, 0)
        false_positive = false_negative = 0
        started = time.monotonic()
        for index in range(args.attempts):
            entries = attempt(out / f"k{repeats}-{index}", repeats, args.neighbours)
            wrong = judge(entries)
            for name, failure in wrong.items():
                right[name] += failure is None
                slept = entries[name].get("slept_s")
                print(f"K={repeats} attempt {index} {name}: {'ok' if failure is None else 'WRONG: ' + failure} "
                      f"(gap {entries[name]['gap_s'] * 1e3:+.3f} ms, {entries[name]['verdict']}"
                      f"{'' if slept is None else f', slept {slept * 1e3:.3f} ms'})", flush=True)
            false_positive += entries["identical"]["verdict"] != "no significant difference"
            false_negative += sum(entries[name]["verdict"] != "slower" for name in ("loader", "delay"))
            resolvable = resolvable_s(entries["report"])
            print(f"K={repeats} attempt {index}: resolvable gap "
                  f"{'unmeasured' if resolvable is None else f'{resolvable * 1e3:.3f} ms'}", flush=True)
        minutes = (time.monotonic() - started) / 60
        rows.append((repeats, right, false_positive, false_negative, minutes))
    print("\n| K | " + " | ".join(CHECKS) + " | false positives | false negatives (loader, delay) | minutes |")
    print("|---|" + "---|" * (len(CHECKS) + 3))
    for repeats, right, fp, fn, minutes in rows:
        cells = " | ".join(f"{right[name]}/{args.attempts}" for name in CHECKS)
        print(f"| {repeats} | {cells} | {fp}/{args.attempts} | {fn}/{2 * args.attempts} | {minutes:.1f} |")


if __name__ == "__main__":
    main()
