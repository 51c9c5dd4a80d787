"""Kineto -> XSpace conversion speed on the real GPU Kineto fixtures, next to its references.

    .venv/bin/python benches/bench_tensorboard_convert.py [FIXTURES_DIR]

For each trace: `json.load` of the file (the least any converter must do), hloscope's conversion to an xplane.pb,
and XProf's own trace_viewer conversion of the result (what TensorBoard does when the run is opened). Prints a Markdown
table for benches/README.md. Each figure is the best of 3 runs in this process.
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

TRACES = (
    "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "tracelens/traces__h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/trace_diff__control__control.json.gz",
)


def best_of(runs: int, function) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(fixtures: Path) -> None:
    from xprof.convert import raw_to_tool_data

    from hloscope.tensorboard.convert import convert_kineto_file

    print("| trace | events in | events out | MB in | json.load s | hloscope convert s | xplane MB | XProf trace_viewer s |")
    print("|---|---|---|---|---|---|---|---|")
    for relative in TRACES:
        source = fixtures / relative
        with tempfile.TemporaryDirectory() as out:
            load_s, document = best_of(3, lambda source=source: json.loads(gzip.decompress(source.read_bytes())))
            convert_s, (xplane, conversion) = best_of(3, lambda source=source, out=out: convert_kineto_file(source, Path(out)))
            viewer_s, _ = best_of(3, lambda xplane=xplane: raw_to_tool_data.xspace_to_tool_data([str(xplane)], "trace_viewer", {}))
            raw_mb = len(gzip.decompress(source.read_bytes())) / 1e6
            print(f"| {source.name} | {len(document['traceEvents']):,} | {conversion.events:,} | {raw_mb:.1f} | "
                  f"{load_s:.2f} | {convert_s:.2f} | {xplane.stat().st_size / 1e6:.1f} | {viewer_s:.2f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "fixtures")
