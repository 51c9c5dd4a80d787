"""Kernel breakdown of one Kineto trace by hloscope and by Holistic Trace Analysis (HTA), time and peak memory.

Each side runs in its own fresh subprocess (so peak RSS is its own), alternating, in the same run of this script, on
the same machine; with repeats (default 3 for traces under 100 MB) the best time of each side is kept. Usage (from the repository root):

    .venv/bin/pip install -r benches/requirements.txt     # HolisticTraceAnalysis, for this benchmark only
    .venv/bin/python benches/bench_trace_kineto.py                       # largest fixture + generated ~500 MB trace
    .venv/bin/python benches/bench_trace_kineto.py --trace PATH [--no-generated]
    .venv/bin/python benches/bench_trace_kineto.py --generate-mb 2000 --only-hloscope   # bounded-memory check

hloscope side: `trace_stats(load_trace(path))` (per-kernel totals, categories, steps).
HTA side: `TraceAnalysis(trace_dir).get_gpu_kernel_breakdown(visualize=False)` (parse + per-kernel breakdown).
The generated trace repeats the events of the 109,123-event A100 fixture, shifted in time (benches/out/, git-ignored).
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("HLOSCOPE_FIXTURES", REPO.parent / "shared" / "fixtures"))
LARGEST_FIXTURE = FIXTURES / "hta" / "trace_diff__control__control.json.gz"
OUT = REPO / "benches" / "out"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_hloscope(path: str) -> dict:
    from hloscope.trace.load import load_trace
    from hloscope.trace.stats import trace_stats

    start = time.perf_counter()
    stats = trace_stats(load_trace(path), top=1_000_000)
    seconds = time.perf_counter() - start
    kernel_us = sum(row.total_us for row in stats.top)
    return {"seconds": seconds, "kernels": stats.kernels, "device_time_us": kernel_us, "names": len(stats.top)}


def child_hta(path: str) -> dict:
    import logging

    logging.disable(logging.INFO)
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as trace_dir:
        # HTA reads a directory of per-rank traces.
        suffix = ".json.gz" if path.endswith(".gz") else ".json"
        os.symlink(os.path.abspath(path), os.path.join(trace_dir, f"rank-0{suffix}"))
        start = time.perf_counter()
        analysis = TraceAnalysis(trace_dir=trace_dir)
        kernel_types, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "kernel_types": len(kernel_types), "rows": len(kernels)}


def child_whole(path: str) -> dict:
    """`hloscope trace stats --json PATH` as a user runs it: a whole process, interpreter start-up and imports
    included, timed from outside."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hloscope", "trace", "stats", "--json", path], capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(done.stderr.decode()[-300:])
    stats = json.loads(done.stdout)["traces"][0]
    return {"seconds": seconds, "kernels": stats["kernels"]}


# The interpreter of HTA's side: HTA pins pandas and friends, so it may live in an environment of its own
# (`python -m venv benches/out/.venv-hta; benches/out/.venv-hta/bin/pip install HolisticTraceAnalysis==0.5.0`).
HTA_PYTHON = os.environ.get("HTA_PYTHON", sys.executable)


def run_child(side: str, path: Path) -> dict:
    command = [HTA_PYTHON if side == "hta" else sys.executable, __file__, "--child", side, str(path)]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PJRT_DEVICE="CPU"))
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "returncode": done.returncode}
    return json.loads(done.stdout.strip().splitlines()[-1])


def generate(megabytes: int) -> Path:
    """A Kineto trace of about `megabytes` MB: copies of the A100 fixture's events, each copy later in time."""
    target = OUT / f"kineto_generated_{megabytes}mb.json"
    if target.exists():
        return target
    OUT.mkdir(parents=True, exist_ok=True)
    with gzip.open(LARGEST_FIXTURE, "rt") as stream:
        document = json.load(stream)
    events = document.pop("traceEvents")
    complete = [event for event in events if event.get("ph") == "X"]
    span = max(event["ts"] + event.get("dur", 0) for event in complete) - min(event["ts"] for event in complete)
    lines = [json.dumps(event) for event in events]
    one_copy = sum(len(line) + 2 for line in lines)
    copies = max(1, round(megabytes * 1_000_000 / one_copy))
    partial = target.with_suffix(".partial")
    with open(partial, "w") as out:
        out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": ' + json.dumps(document.get("deviceProperties", [])))
        out.write(',\n  "traceEvents": [\n')
        for copy in range(copies):
            shift = copy * (span + 1000)
            for index, event in enumerate(events):
                if copy:
                    event = dict(event)
                    if "ts" in event:
                        event["ts"] = event["ts"] + shift
                    name = event.get("name", "")
                    if isinstance(name, str) and name.startswith("ProfilerStep#"):
                        event["name"] = f"ProfilerStep#{int(name[13:]) + 10 * copy}"
                    args = event.get("args")
                    if isinstance(args, dict) and "correlation" in args:
                        event["args"] = dict(args, correlation=args["correlation"] + copy * 10_000_000)
                    line = json.dumps(event)
                else:
                    line = lines[index]
                last = copy == copies - 1 and index == len(events) - 1
                out.write(f"  {line}{'' if last else ','}\n")
        out.write('  ],\n  "traceName": "generated by benches/bench_trace_kineto.py"\n}\n')
    partial.rename(target)
    return target


def describe(path: Path) -> str:
    size = path.stat().st_size / 1e6
    return f"{path.name} ({size:,.1f} MB{' gzip' if path.suffix == '.gz' else ''})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--trace", type=Path, action="append", help="trace(s) to measure (default: largest fixture)")
    parser.add_argument("--generate-mb", type=int, default=500, help="size of the generated trace (default 500)")
    parser.add_argument("--no-generated", action="store_true", help="skip the generated trace")
    parser.add_argument("--repeat", type=int, default=0, help="runs per side (default: 3 below 100 MB, else 1)")
    parser.add_argument("--only-hloscope", action="store_true", help="do not run HTA (e.g. on a 2 GB trace)")
    args = parser.parse_args()
    if args.child:
        side, path = args.child
        if side == "generate":
            print(generate(int(path)))
            return
        result = {"hloscope": child_hloscope, "whole": child_whole, "hta": child_hta}[side](path)
        result["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(result))
        return
    # Byte-code as an installed package has it (pip compiles it at install; HTA's environment has it): an editable
    # checkout run with PYTHONDONTWRITEBYTECODE set, as on our machines, would compile hloscope's modules again at
    # every start (~15 ms of the whole process).
    compileall.compile_dir(REPO / "hloscope", quiet=1)
    traces = args.trace or [LARGEST_FIXTURE]
    if not args.no_generated:
        started = time.perf_counter()
        # In a process of its own: Linux keeps a process's peak RSS across fork and exec, so a parent grown by the
        # generation would raise every child's measured peak to its own.
        subprocess.run([sys.executable, __file__, "--child", "generate", str(args.generate_mb)], check=True)
        traces.append(generate(args.generate_mb))
        print(f"# generated trace ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print("| trace | tool | time (s) | peak RSS (MB) | speed-up | memory ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for path in traces:
        # Interleaved repeats, best time of each side: the machine is shared, and load comes and goes.
        repeats = args.repeat if args.repeat else (3 if path.stat().st_size < 100e6 else 1)
        ours, whole, theirs = {}, {}, {"error": "not run"}
        for _ in range(repeats):
            ours = _best(ours, run_child("hloscope", path))
            whole = _best(whole, run_child("whole", path))
            if not args.only_hloscope:
                theirs = _best(theirs if "seconds" in theirs else {}, run_child("hta", path))
        print(f"| {describe(path)} | hloscope | {ours.get('seconds', float('nan')):.2f} | "
              f"{ours.get('peak_rss_mb', float('nan')):.0f} | | |")
        whole_ratio = f"{theirs['seconds'] / whole['seconds']:.1f}x" if "seconds" in theirs and "seconds" in whole else ""
        print(f"| {describe(path)} | `hloscope trace stats --json`, whole process | "
              f"{whole.get('seconds', float('nan')):.2f} | | {whole_ratio} | |")
        if "error" in theirs:
            print(f"| {describe(path)} | HTA | {theirs['error']} | | | |")
        else:
            print(
                f"| {describe(path)} | HTA {hta_version()} | {theirs['seconds']:.2f} | {theirs['peak_rss_mb']:.0f} | "
                f"{theirs['seconds'] / ours['seconds']:.1f}x | {ours['peak_rss_mb'] / theirs['peak_rss_mb']:.2f} |"
            )
        print(f"#   {path.name}: hloscope {json.dumps(ours)}; HTA {json.dumps(theirs)}", file=sys.stderr)
        sys.stdout.flush()


def _best(previous: dict, new: dict) -> dict:
    if "seconds" not in new:
        return new
    if not previous or "seconds" not in previous or new["seconds"] < previous["seconds"]:
        return new
    return previous


def hta_version() -> str:
    """HTA's version in the interpreter that runs it (HTA_PYTHON: often its own environment)."""
    probe = subprocess.run([HTA_PYTHON, "-c", "from importlib.metadata import version; "
                            "print(version('HolisticTraceAnalysis'))"], capture_output=True, text=True)
    return probe.stdout.strip() if probe.returncode == 0 else "?"


if __name__ == "__main__":
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    main()
