"""Parse throughput (MB/s) and peak memory of hloscope's HLO parser against XLA's C++ parser
(`jaxlib._hlo.hlo_module_from_text`), on the same files, in one run.

    .venv/bin/python benches/bench_hlo_parse.py [FIXTURES_DIR] [--size-mb 100]

Files: the 3 MB Llama 3.1 fixture, and a ~100 MB module generated into benches/out/ by concatenating renamed copies of
it (every computation and instruction name prefixed per copy, so the module stays valid for XLA). Each measurement runs
in a fresh subprocess; peak memory is the growth of the process's peak RSS (VmHWM) over its RSS after imports,
so it includes whatever the parser needs to hold the text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benches" / "out"
LLAMA = "openxla_xla/benchmarks_hlo/hlo_llama31_8b_bf16_1x8.hlo"

CHILD = r"""
import json, os, sys, time
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
which, path = sys.argv[1], sys.argv[2]
if which == "hloscope":
    from hloscope.hlo.parser import parse_hlo_file
    before = rss("VmRSS:")
    start = time.perf_counter()
    modules = parse_hlo_file(path)
    seconds = time.perf_counter() - start
    instructions = sum(m.instruction_count for m in modules)
else:
    from jaxlib import _hlo
    before = rss("VmRSS:")
    start = time.perf_counter()
    with open(path) as f:
        text = f.read()
    module = _hlo.hlo_module_from_text(text)
    seconds = time.perf_counter() - start
    instructions = sum(len(c.instructions()) for c in module.computations())
print(json.dumps({"seconds": seconds, "peak_bytes": rss("VmHWM:") - before, "instructions": instructions}))
"""


def generate(source: Path, target: Path, size_mb: float) -> Path:
    """A valid ~size_mb module: renamed copies of `source` (an old-format module whose names all start with '%')."""
    if target.exists() and abs(target.stat().st_size / 1e6 - size_mb) < size_mb * 0.1:
        return target
    text = source.read_text()
    header, body = text.split("\n", 1)
    copies = max(1, round(size_mb * 1e6 / len(text)))
    name = re.compile(r"%([A-Za-z_][\w.\-]*)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w") as out:
        out.write(header + "\n")
        for k in range(copies):
            copy = name.sub(lambda m, k=k: f"%c{k}_{m.group(1)}", body)
            if k != copies - 1:
                copy = copy.replace("\nENTRY %", "\n%")
            out.write(copy)
    return target


def measure(which: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", CHILD, which, str(path)], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def best_of(repeats: int, path: Path) -> tuple[dict, dict]:
    """Interleaved runs of both parsers, fastest of each: fair on a shared, noisy machine."""
    ours, xla = [], []
    for _ in range(repeats):
        ours.append(measure("hloscope", path))
        xla.append(measure("xla", path))
    return min(ours, key=lambda r: r["seconds"]), min(xla, key=lambda r: r["seconds"])


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    size_mb = float(sys.argv[sys.argv.index("--size-mb") + 1]) if "--size-mb" in sys.argv else 100.0
    fixtures = Path(args[0]) if args else REPO.parent / "shared" / "fixtures"
    llama = fixtures / LLAMA
    files = [llama, generate(llama, OUT / f"generated_{int(size_mb)}mb.hlo", size_mb)]
    print("| file | MB | instructions | hloscope MB/s | XLA C++ MB/s | speed-up | hloscope peak MB (x text) | XLA peak MB (x text) |")
    print("|---|---|---|---|---|---|---|---|")
    for path in files:
        mb = path.stat().st_size / 1e6
        ours, xla = best_of(5 if mb < 20 else 2, path)
        if ours["instructions"] != xla["instructions"]:  # the two parsers must have read the same module
            raise SystemExit(f"{path.name}: instruction counts differ: hloscope {ours}, XLA {xla}")
        print(
            f"| {path.name} | {mb:.1f} | {ours['instructions']:,} | {mb / ours['seconds']:.1f} | {mb / xla['seconds']:.1f} "
            f"| {xla['seconds'] / ours['seconds']:.2f}x | {ours['peak_bytes'] / 1e6:.0f} ({ours['peak_bytes'] / 1e6 / mb:.1f}x) "
            f"| {xla['peak_bytes'] / 1e6:.0f} ({xla['peak_bytes'] / 1e6 / mb:.1f}x) |",
            flush=True,
        )


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"\n(total {time.time() - t0:.0f} s)")
