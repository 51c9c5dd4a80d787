"""`hloscope hlo stats --json --no-xla-cost` end to end against XLA's C++ parse plus its cost analysis, on the same
file, in one run (the speed target).

    .venv/bin/python benches/bench_hlo_stats.py [FIXTURES_DIR] [--repeat 5] [--file PATH] [--generated-mb 110]

With --generated-mb, a module of about that size is generated into benches/out/ (git-ignored) from renamed copies of
the Llama fixture (bench_hlo_parse.generate: one valid module for XLA) and measured too, with --large-repeat runs.

Each measurement runs in a fresh subprocess, the two sides alternating; the best time of each is kept. Times exclude
interpreter start-up and imports ("past start-up"): hloscope's side is the CLI's own `main([...])` call with stdout
discarded (read, parse, validation, cost walk, kernels, attribution, JSON); XLA's side reads the file, runs
`jaxlib._hlo.hlo_module_from_text` and `_jax.hlo_module_cost_analysis` on a CPU client made beforehand; a third
column is XLA's parse alone (the stretch goal of `hlo stats`'s speed: as fast as that; benches/README.md). Peak
memory is the growth of the process's peak RSS (VmHWM) over its RSS after imports.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LLAMA = "openxla_xla/benchmarks_hlo/hlo_llama31_8b_bf16_1x8.hlo"

CHILD = r"""
import contextlib, io, json, os, sys, time
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
which, path = sys.argv[1], sys.argv[2]
if which == "hloscope":
    from hloscope.cli import main
    import hloscope.hlo.stats, hloscope.hlo.load, hloscope.cli.hlo, hloscope.hlo.reading, hloscope.machine  # imports outside the timing
    sink = io.StringIO()
    before = rss("VmRSS:")
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        try:
            main(["hlo", "stats", "--json", "--no-xla-cost", path])
        except SystemExit as done:
            assert not done.code, done.code
    seconds = time.perf_counter() - start
    instructions = sum(m["instructions"] for m in json.loads(sink.getvalue())["modules"]) if sink.getvalue() else None
else:
    from jaxlib import _hlo, _jax
    client = _jax.get_tfrt_cpu_client()
    before = rss("VmRSS:")
    start = time.perf_counter()
    with open(path) as f:
        text = f.read()
    module = _hlo.hlo_module_from_text(text)
    if which == "xla":
        cost = _jax.hlo_module_cost_analysis(client, module)
    seconds = time.perf_counter() - start
    instructions = sum(len(c.instructions()) for c in module.computations())
print(json.dumps({"seconds": seconds, "peak_bytes": rss("VmHWM:") - before, "instructions": instructions}))
"""


def run(which: str, path: Path, tree: Path = REPO, **env: str) -> dict:
    """One measurement in a fresh process that imports hloscope from `tree` (its working directory: the first entry
    of sys.path, ahead of the editable install)."""
    done = subprocess.run([sys.executable, "-c", CHILD, which, str(path.resolve())], capture_output=True, text=True,
                          cwd=tree, env={**os.environ, "PYTHONPATH": str(tree), **env})
    if done.returncode:
        raise SystemExit(f"{which} failed: {done.stderr[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fixtures", nargs="?", type=Path, default=REPO.parent / "shared" / "fixtures")
    parser.add_argument("--file", type=Path, action="append", help="HLO file(s) (default: the Llama 3.1 fixture)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--generated-mb", type=float, default=0.0, help="also a generated module of this size (MB)")
    parser.add_argument("--large-repeat", type=int, default=1, help="runs of each side on files over 20 MB")
    parser.add_argument("--python-path", action="store_true",
                        help="also hloscope without its compiled fast paths (HLOSCOPE_PURE_PYTHON=1), alternating")
    parser.add_argument("--before", type=Path, help="also hloscope from this source tree (e.g. a git archive of an "
                        "older commit: the directory that holds its hloscope/ package), alternating")
    args = parser.parse_args()
    files = args.file or [args.fixtures / LLAMA]
    if args.generated_mb:
        from bench_hlo_parse import OUT, generate

        size = args.generated_mb
        files.append(generate(args.fixtures / LLAMA, OUT / f"generated_{int(size)}mb.hlo", size))
    print("| file | MB | hloscope hlo stats s | XLA parse + cost s | ratio (XLA / hloscope) | XLA parse alone s "
          "| ratio | hloscope peak MB (x text) | XLA peak MB (x text) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for path in files:
        ours, theirs, parse_only = [], [], []
        extra: dict[str, list[dict]] = {}
        for _ in range(args.repeat if path.stat().st_size < 20e6 else args.large_repeat):
            ours.append(run("hloscope", path))
            theirs.append(run("xla", path))
            parse_only.append(run("xla-parse", path))
            if args.python_path:
                extra.setdefault("python path", []).append(run("hloscope", path, HLOSCOPE_PURE_PYTHON="1"))
            if args.before:
                extra.setdefault("before", []).append(run("hloscope", path, tree=args.before.resolve()))
        best_ours = min(ours, key=lambda r: r["seconds"])
        best_theirs = min(theirs, key=lambda r: r["seconds"])
        best_parse = min(parse_only, key=lambda r: r["seconds"])
        megabytes = path.stat().st_size / 1e6
        print(f"| {path.name} | {megabytes:.1f} | {best_ours['seconds']:.3f} | {best_theirs['seconds']:.3f} | "
              f"{best_theirs['seconds'] / best_ours['seconds']:.2f} | {best_parse['seconds']:.3f} | "
              f"{best_parse['seconds'] / best_ours['seconds']:.2f} | {best_ours['peak_bytes'] / 1e6:.0f} "
              f"({best_ours['peak_bytes'] / 1e6 / megabytes:.1f}x) | {best_theirs['peak_bytes'] / 1e6:.0f} "
              f"({best_theirs['peak_bytes'] / 1e6 / megabytes:.1f}x) |")
        if best_ours["instructions"] != best_theirs["instructions"]:  # both must have counted the same module
            raise SystemExit(f"{path.name}: instruction counts differ: hloscope {best_ours}, XLA {best_theirs}")
        print(f"#   all runs: hloscope {[round(r['seconds'], 3) for r in ours]}; "
              f"XLA {[round(r['seconds'], 3) for r in theirs]}; XLA parse {[round(r['seconds'], 3) for r in parse_only]}",
              file=sys.stderr)
        for side, results in extra.items():
            best = min(results, key=lambda r: r["seconds"])
            print(f"#   hloscope, {side}: best {best['seconds']:.3f} s ({best['peak_bytes'] / 1e6:.0f} MB), XLA parse + "
                  f"cost / it = {best_theirs['seconds'] / best['seconds']:.2f}; all runs "
                  f"{[round(r['seconds'], 3) for r in results]}")


if __name__ == "__main__":
    main()
