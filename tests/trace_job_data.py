"""A generated job of many ranks made from HTA's two real ranks (tests/data/fetched/hta/trace_filter_ranks): rank r is
a copy of real rank r % 2, shifted in time by r * SHIFT_US, renamed `rank-r.json.gz` with `distributedInfo.rank` = r.
One rank is a straggler: it pauses for STRAGGLER_DELAY_US in the middle of the first step (every event after that
moment starts later; the events spanning it last longer). One rank runs a different kernel mix: every 4th non-NCCL
kernel renamed. Used by tests/test_trace_job.py and benches/bench_trace_job.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "data" / "fetched" / "hta" / "trace_filter_ranks"
SHIFT_US = 7
STRAGGLER_DELAY_US = 50_000
PAUSE_AFTER_STEP_START_US = 100_000
INJECTED_KERNEL = "hloscope_injected_kernel(int)"


def base_documents(source: Path = SOURCE) -> list[dict]:
    return [json.loads(gzip.decompress((source / f"sampled_rank-{r}.json.gz").read_bytes())) for r in (0, 1)]


def make_job(directory: Path, ranks: int = 64, straggler: int | None = 37, odd_mix: int | None = 5,
             source: Path = SOURCE) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    bases = [json.dumps(document) for document in base_documents(source)]
    for rank in range(ranks):
        document = json.loads(bases[rank % 2])
        document["distributedInfo"]["rank"] = rank
        events = document["traceEvents"]
        shift = rank * SHIFT_US
        pause = None
        if rank == straggler:
            first_step = min(e["ts"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
            pause = first_step + PAUSE_AFTER_STEP_START_US
        kernels = 0
        for event in events:
            if "ts" not in event:
                continue
            if pause is not None and event.get("ph") == "X":
                if event["ts"] >= pause:
                    event["ts"] += STRAGGLER_DELAY_US
                elif event["ts"] + event.get("dur", 0) > pause:
                    event["dur"] += STRAGGLER_DELAY_US
            elif pause is not None and event["ts"] >= pause:
                event["ts"] += STRAGGLER_DELAY_US
            event["ts"] += shift
            if rank == odd_mix and event.get("cat") == "kernel" and not event["name"].startswith("nccl"):
                kernels += 1
                if kernels % 4 == 0:
                    event["name"] = INJECTED_KERNEL
        (directory / f"rank-{rank}.json.gz").write_bytes(gzip.compress(json.dumps(document).encode(), 1))
    return directory


def reference(directory: Path) -> dict:
    """Independent figures from json.load of each rank: kernels, step durations, NCCL kernel (start, duration) in
    start order."""
    out = {}
    for path in sorted(directory.glob("rank-*.json.gz")):
        document = json.loads(gzip.decompress(path.read_bytes()))
        events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
        rank = document["distributedInfo"]["rank"]
        out[rank] = {
            "kernels": sum(e.get("cat") == "kernel" for e in events),
            "steps": {int(e["name"].split("#")[1]): float(e["dur"]) for e in events
                      if e["name"].startswith("ProfilerStep#")},
            "nccl": sorted((float(e["ts"]), float(e["dur"])) for e in events
                           if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
            "kernel_names": [e["name"] for e in events if e.get("cat") == "kernel"],
        }
    return out
