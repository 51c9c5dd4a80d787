"""Large inputs: a ~500 MB HLO dump and a ~2 GB Kineto trace through the real commands, peak memory and outcome.

    .venv/bin/python benches/bench_large_inputs.py [--hlo-mb 500] [--trace-mb 2000] [--no-gzip] [--skip-hlo|--skip-trace]

Each case runs `python -m hloscope ...` as its own process under `/usr/bin/time -v`, exactly as a user would (default
options), and reports its exit code, the first line of stderr, wall time and peak RSS (`Maximum resident set size`).
The inputs are generated into benches/out/ (git-ignored) by the HLO and trace benchmarks' own generators: renamed
copies of the 3 MB Llama 3.1 HLO fixture (one valid module) and time-shifted copies of the A100 Kineto fixture's
events. Cases:

- `hlo stats` on the 500 MB module (XLA's own cost analysis is skipped above 50 MB, docs/hlo.md), and on a 45 MB one,
  where XLA's cost analysis (and its parser) runs too;
- `hlo stats` on it with HLOSCOPE_HLO_MAX_BYTES=100000000: the up-front refusal a machine without the memory gets;
- `trace stats --json` on the 2 GB trace, and on the same trace gzip'd (`.json.gz`, compression level 1).

Heavy (minutes, several GB of disk and up to ~5 GB of memory): not part of the test suite; run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benches" / "out"
FIXTURES = Path(os.environ.get("HLOSCOPE_FIXTURES", REPO.parent / "shared" / "fixtures"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_hlo_parse
import bench_trace_kineto


def generate_hlo(megabytes: int) -> Path:
    return bench_hlo_parse.generate(FIXTURES / bench_hlo_parse.LLAMA, OUT / f"generated_{megabytes}mb.hlo", megabytes)


def gzip_copy(path: Path) -> Path:
    target = path.with_name(path.name + ".gz")
    if not target.exists():
        partial = target.with_suffix(".partial")
        with open(path, "rb") as source, gzip.open(partial, "wb", compresslevel=1) as sink:
            shutil.copyfileobj(source, sink, 16 << 20)
        partial.rename(target)
    return target


def measure(label: str, path: Path, args: list[str], env: dict | None = None) -> dict:
    """One `hloscope ARGS` process under /usr/bin/time -v: exit code, stderr's first line, wall time, peak RSS."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "time.txt"
        command = ["/usr/bin/time", "-v", "-o", str(report), sys.executable, "-m", "hloscope", *args, str(path)]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, env={**os.environ, "PJRT_DEVICE": "CPU", **(env or {})},
                              capture_output=True, text=True)
        seconds = time.perf_counter() - started
        timing = report.read_text()
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timing).group(1))
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    return {"label": label, "file_mb": path.stat().st_size / 1e6, "exit": done.returncode, "seconds": seconds,
            "peak_rss_mb": peak_kb / 1024, "stderr": errors[0] if errors else "", "stderr_lines": len(errors),
            "stdout_bytes": len(done.stdout), "summary": summarize(done.stdout)}


def summarize(stdout: str) -> str:
    """A few figures from the --json output, to show the analysis really ran to the end."""
    import json

    try:
        data = json.loads(stdout)
    except ValueError:
        return ""
    if "modules" in data:
        return "; ".join(f"{m['name']}: {m['instructions']:,} instructions, {m['kernels']:,} kernels"
                         for m in data["modules"])
    if "traces" in data:
        return "; ".join(f"{t['events']:,} events, {t['kernels']:,} kernels, {t['steps']} steps" for t in data["traces"])
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hlo-mb", type=int, default=500)
    parser.add_argument("--hlo-xla-mb", type=int, default=45, help="a module just under the 50 MB limit of XLA's cost")
    parser.add_argument("--trace-mb", type=int, default=2000)
    parser.add_argument("--no-gzip", action="store_true", help="skip the gzip'd copy of the trace")
    parser.add_argument("--skip-hlo", action="store_true")
    parser.add_argument("--skip-trace", action="store_true")
    args = parser.parse_args()
    cases = []
    if not args.skip_hlo:
        started = time.perf_counter()
        hlo = generate_hlo(args.hlo_mb)
        print(f"# {hlo.name} ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        cases.append(("hlo stats --json", hlo, ["hlo", "stats", "--json"], None))
        below = generate_hlo(args.hlo_xla_mb)
        cases.append(("hlo stats --json (XLA's cost too)", below, ["hlo", "stats", "--json"], None))
        cases.append(("hlo stats, HLOSCOPE_HLO_MAX_BYTES=100000000", hlo, ["hlo", "stats", "--json"],
                      {"HLOSCOPE_HLO_MAX_BYTES": "100000000"}))
    if not args.skip_trace:
        started = time.perf_counter()
        trace = bench_trace_kineto.generate(args.trace_mb)
        print(f"# {trace.name} ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        cases.append(("trace stats --json", trace, ["trace", "stats", "--json"], None))
        if not args.no_gzip:
            started = time.perf_counter()
            packed = gzip_copy(trace)
            print(f"# {packed.name} ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
            cases.append(("trace stats --json", packed, ["trace", "stats", "--json"], None))
    print("| command | input | MB | exit | wall s | peak RSS MB | RSS / file | result |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for label, path, command, env in cases:
        result = measure(label, path, command, env)
        outcome = result["summary"] if result["exit"] == 0 else result["stderr"].replace(str(path), path.name)
        print(f"| `{label}` | {path.name} | {result['file_mb']:,.0f} | {result['exit']} | {result['seconds']:.1f} | "
              f"{result['peak_rss_mb']:,.0f} | {result['peak_rss_mb'] / result['file_mb']:.2f} | {outcome} |")
        print(f"#   {result}", file=sys.stderr)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
