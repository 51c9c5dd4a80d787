"""Whole-process time and peak memory of hloscope commands, two or more variants side by side.

    .venv/bin/python benches/bench_whole_process.py --repeat 7 \
        --variant "C=$PWD" --variant "Python=$PWD:HLOSCOPE_PURE_PYTHON=1" \
        --command "trace stats --json" ../shared/fixtures/hta/trace_diff__control__control.json.gz \
        --command "hlo stats --json --no-xla-cost" ../shared/fixtures/openxla_xla/benchmarks_hlo/hlo_llama31_8b_bf16_1x8.hlo

Each run is one `python -m hloscope COMMAND FILE` process (interpreter start-up, imports, reading, analysis, JSON),
started from a directory outside any checkout so that it imports the variant's source tree (`NAME=TREE[:VAR=VALUE]...`:
PYTHONPATH=TREE plus those environment variables). The variants alternate run by run, their order rotating each round,
so that a shared machine's load falls on all of them alike. Wall time is measured around the process; CPU time
(user + system, all threads) and peak memory are its `ru_utime + ru_stime` and `ru_maxrss` from wait4 (what
`/usr/bin/time -v` prints as user + system time and "Maximum resident set size"): on a loaded machine the CPU time
moves much less than the wall time. Byte-code is compiled
first in every tree, as an installed package has it. Each variant's stdout and exit code must be the same as the
first variant's (the check stops the run otherwise): a faster path that changes the answer is not a speed-up.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def parse_variant(text: str) -> tuple[str, str, dict[str, str]]:
    name, _, rest = text.partition("=")
    tree, *settings = rest.split(":")
    env = dict(setting.split("=", 1) for setting in settings)
    return name, str(Path(tree).resolve()), env


def run_once(tree: str, env_extra: dict[str, str], args: list[str], cwd: str) -> tuple[float, float, int, str, int]:
    env = {key: value for key, value in os.environ.items() if key != "HLOSCOPE_PURE_PYTHON"}
    env.update(PYTHONPATH=tree, PJRT_DEVICE="CPU", **env_extra)
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "hloscope", *args], cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        digest = hashlib.sha256(out.read()).hexdigest()
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, digest, process.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", action="append", required=True, help="NAME=TREE[:VAR=VALUE]...")
    parser.add_argument("--command", nargs=2, action="append", required=True, metavar=("COMMAND", "FILE"),
                        help='e.g. "trace stats --json" trace.json.gz')
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    variants = [parse_variant(text) for text in options.variant]
    for tree in {tree for _, tree, _ in variants}:
        compileall.compile_dir(str(Path(tree) / "hloscope"), quiet=1)
    with tempfile.TemporaryDirectory(prefix="bench_whole_process_") as cwd:
        measure(variants, options.command, options.repeat, cwd)


def measure(variants: list[tuple[str, str, dict[str, str]]], commands: list[list[str]], repeat: int, cwd: str) -> None:
    print("| command | file | MB | variant | best s | median s | median CPU s | peak RSS MB (max) | "
          "median / the first variant's (wall, CPU) |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for command, file in commands:
        args = [*command.split(), str(Path(file).resolve())]
        times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        peaks: dict[str, list[int]] = {name: [] for name, _, _ in variants}
        cpu: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        reference: tuple[str, int] | None = None
        for round_ in range(repeat):
            shift = round_ % len(variants)
            for name, tree, env in variants[shift:] + variants[:shift]:
                seconds, cpu_seconds, peak, digest, code = run_once(tree, env, args, cwd)
                if reference is None:
                    reference = (digest, code)
                elif (digest, code) != reference:
                    sys.exit(f"{name}: stdout or exit code differ from the first run's on {command} {file}")
                times[name].append(seconds)
                cpu[name].append(cpu_seconds)
                peaks[name].append(peak)
        first = statistics.median(times[variants[0][0]])
        first_cpu = statistics.median(cpu[variants[0][0]])
        megabytes = Path(file).stat().st_size / 1e6
        for name, _, _ in variants:
            median, median_cpu = statistics.median(times[name]), statistics.median(cpu[name])
            print(f"| `{command}` | {Path(file).name} | {megabytes:.1f} | {name} | {min(times[name]):.3f} | "
                  f"{median:.3f} | {median_cpu:.3f} | {max(peaks[name])} | {median / first:.2f}x, "
                  f"{median_cpu / first_cpu:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
