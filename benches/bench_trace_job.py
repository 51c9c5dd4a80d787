"""issue 19: `trace stats` on a whole job, serial vs a 2-process pool vs a 2-worker local Dask cluster.

The job: 64 ranks generated from HTA's two real ranks (tests/trace_job_data.py: time-shifted copies, one straggler),
in a temporary directory. Each configuration runs in a fresh Python process; each worker reports its own peak RSS
(getrusage) with every file it summarises, so "peak MB per worker" is the largest worker's, the work of the files
included. Wall time includes starting the pool / connecting to the cluster (the cluster's own start is shown apart).
The merged job view of every configuration is checked to be identical to the serial one.

    .venv/bin/python benches/bench_trace_job.py [--ranks 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def measured_summary(file: str, top: int = 10) -> dict:
    """summarize_file plus the worker's pid and peak RSS so far (MB)."""
    import os

    from hloscope.trace.job import summarize_file

    result = summarize_file(file, top=top)
    result["_worker"] = (os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result


def run_config(config: str, directory: str) -> dict:
    from hloscope.trace import job
    from hloscope.trace.load import trace_files

    start = time.perf_counter()
    files = [str(f) for f in trace_files(directory)]
    ranks, _ = job.job_ranks(files)
    cluster_start = 0.0
    if config == "dask":
        from distributed import Client, LocalCluster

        began = time.perf_counter()
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=":0")
        client = Client(cluster)
        client.run(lambda: __import__("hloscope.trace.job"))  # workers import hloscope once, as a pool's do
        cluster_start = time.perf_counter() - began
        start += cluster_start
        results = job.run_per_file(measured_summary, files, scheduler=client)
    else:
        results = job.run_per_file(measured_summary, files, jobs=1 if config == "serial" else 2)
    wall = time.perf_counter() - start
    peaks: dict[int, float] = {}
    for result in results:
        pid, peak = result.pop("_worker")
        peaks[pid] = max(peaks.get(pid, 0.0), peak)
    view = job.job_view(results, ranks)
    if config == "dask":
        client.close()
        cluster.close()
    size = sum(Path(f).stat().st_size for f in files)
    return {"config": config, "files": len(files), "mb_gz": size / 2**20, "wall_s": wall,
            "files_per_s": len(files) / wall, "workers": len(peaks), "peak_mb_per_worker": max(peaks.values()),
            "cluster_start_s": cluster_start, "view": json.dumps(view, sort_keys=True)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.config:
        print(json.dumps(run_config(args.config, args.dir)))
        return
    from trace_job_data import make_job

    with tempfile.TemporaryDirectory() as tmp:
        directory = make_job(Path(tmp) / "job", ranks=args.ranks)
        best: dict[str, dict] = {}
        for _ in range(args.repeat):
            for config in ("serial", "pool", "dask"):
                out = subprocess.run([sys.executable, __file__, "--config", config, "--dir", str(directory)],
                                     capture_output=True, text=True, check=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                if config not in best or row["wall_s"] < best[config]["wall_s"]:
                    best[config] = row
    reference = best["serial"]["view"]
    print(f"{args.ranks} ranks, {best['serial']['mb_gz']:.1f} MB gzip; best of {args.repeat}")
    print("| configuration | workers | wall s | files/s | peak MB per worker | same job view as serial |")
    print("|---|---:|---:|---:|---:|---|")
    names = {"serial": "serial (`--jobs 1`)", "pool": "process pool (`--jobs 2`)",
             "dask": "Dask LocalCluster, 2 worker processes (`--scheduler`)"}
    for config in ("serial", "pool", "dask"):
        row = best[config]
        extra = f" (+{row['cluster_start_s']:.1f} s cluster start)" if config == "dask" else ""
        print(f"| {names[config]} | {row['workers']} | {row['wall_s']:.2f}{extra} | {row['files_per_s']:.1f} | "
              f"{row['peak_mb_per_worker']:.0f} | {'yes' if row['view'] == reference else 'NO'} |")


if __name__ == "__main__":
    main()
