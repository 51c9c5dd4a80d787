"""--mode pytorch --devices 2: DistributedDataParallel over 2 gloo processes on the CPU. The per-rank Kineto
traces are found and read by `trace stats` as a job (ranks 0 and 1, checked against json.load of each trace's own
distributedInfo), the gloo all-reduces are in every rank's trace, the loss equals the one-device run on the same global
batch, and the reported step is the slowest rank's of each step."""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import helpers
import pytest
from helpers import DEVICE_RUN_PROFILE_STEPS, DEVICE_RUN_STEPS

from hloscope.backends.timing import rank_timing
from hloscope.modes import DATA_PARALLEL_MODES
from hloscope.tensorboard.logdir import find_sessions

# torch.distributed's variables of a job this test run may be in, removed: each run starts its own ranks
CLEAN_ENV: dict[str, str | None] = {"HLOSCOPE_NO_PROGRESS": "1", **dict.fromkeys(
    ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS"))}


# runs of the frameworks (address space not capped), outside any torch.distributed job this test run is in
hloscope = partial(helpers.hloscope, memory_limit=None, timeout=600, env=CLEAN_ENV)


def test_the_pytorch_modes_are_data_parallel():
    assert {"pytorch", "pytorch+compile"} <= set(DATA_PARALLEL_MODES)


def test_the_job_step_is_the_slowest_rank_of_each_step():
    slowest, ranks = rank_timing([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]], batch_size=4)
    assert slowest == [3.0, 5.0, 2.5]
    assert [r.rank for r in ranks] == [0, 1]
    assert ranks[0].median_s == 2.0 and ranks[1].median_s == 2.5
    assert ranks[1].throughput_img_s == 4 / 2.5


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _length(intervals) -> float:
    return sum(b - a for a, b in _union(intervals))


def _gloo_per_step(events: list[dict]) -> dict[int, tuple[float, float]]:
    """Per ProfilerStep#N (from its start to the next one's, the last to its end): the union of gloo's records, and
    its part with neither an aten op nor hloscope's input annotation running on any thread; each record in the step
    it starts in, cut at that step's end."""
    complete = [e for e in events if e.get("ph") == "X"]
    markers = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in complete
                     if e["name"].startswith("ProfilerStep#"))
    out = {}
    for index, (start, end, number) in enumerate(markers):
        stop = markers[index + 1][0] if index + 1 < len(markers) else end

        def clipped(predicate, start=start, stop=stop):
            return [(e["ts"], min(e["ts"] + e["dur"], stop)) for e in complete
                    if predicate(e["name"]) and start <= e["ts"] < stop]

        gloo = clipped(lambda name: name.startswith("gloo:"))
        work = clipped(lambda name: name.startswith(("aten::", "hloscope/input")))
        out[number] = (_length(gloo), _length(gloo + work) - _length(work))
    return out


@pytest.mark.slow
def test_ddp_on_two_processes(device_run):
    one = device_run("pytorch", 1)  # conftest's, shared with the other device tests
    two = device_run("pytorch", 2)
    run = Path(two["_dir"])
    assert two["status"] == "ok" and two["config"]["devices"] == 2

    # the same global batch, split over the ranks: the loss of the global batch is the one-device run's
    assert two["loss"]["first"] == pytest.approx(one["loss"]["first"], rel=1e-5)
    assert two["loss"]["last"] == pytest.approx(one["loss"]["last"], rel=1e-5)

    devices = two["environment"]["devices"]
    assert devices["count"] == 2 and devices["backend"] == "gloo" and devices["per_device_batch"] == 4
    assert devices["processes"] == 2 and "torchrun" in devices["made_by"]
    # torchrun's environment, set in rank 0 before torch started (its OpenMP pool reads it once)
    env = two["environment"]["env"]
    assert env["OMP_NUM_THREADS"] == "1" and env["WORLD_SIZE"] == "2" and env["MASTER_ADDR"] == "127.0.0.1"
    assert devices["threads_per_rank"] == 1

    # every rank's own step times, and the job's step: the slowest rank of each step
    timing = two["timing"]
    ranks = timing["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(len(r["step_times_s"]) == DEVICE_RUN_STEPS for r in ranks)
    assert timing["step_times_s"] == [max(a, b) for a, b in zip(ranks[0]["step_times_s"], ranks[1]["step_times_s"])]

    # one Kineto trace per rank, each under kineto/rank-N/, with its rank in distributedInfo and gloo's all-reduces
    traces = [a["path"] for a in two["artifacts"] if a["kind"] == "trace"]
    assert [Path(p).parent.name for p in traces] == ["rank-0", "rank-1"]
    for rank, path in enumerate(traces):
        document = json.loads((run / path).read_text())
        info = document["distributedInfo"]
        assert info["rank"] == rank and info["world_size"] == 2 and info["backend"] == "gloo"
        names = [event.get("name") for event in document["traceEvents"]]
        steps = [name for name in names if str(name).startswith("ProfilerStep#")]
        assert len(steps) == DEVICE_RUN_PROFILE_STEPS
        # DDP's gradient buckets: at least one all-reduce per step (vit-tiny's 81k parameters fit one 25 MB bucket)
        assert names.count("gloo:all_reduce") >= len(steps), sorted({n for n in names if "gloo" in str(n)})

    # trace stats reads the run directory as a job of ranks 0 and 1
    stats = hloscope("trace", "stats", str(run), "--json", "--jobs", "1")
    assert stats.code == 0, stats.stderr[-2000:]
    document = json.loads(stats.stdout)
    assert [t["rank"] for t in document["traces"]] == [0, 1]
    # each step's time in gloo's collectives, and its exposed part (no framework op computing beside it)
    for path, trace in zip(traces, document["traces"]):
        expected = _gloo_per_step(json.loads((run / path).read_text())["traceEvents"])
        assert [s["step"] for s in trace["per_step"]] == sorted(expected)
        for step in trace["per_step"]:
            union, exposed = expected[step["step"]]
            assert union > 0
            assert step["collective_us"] == pytest.approx(union, abs=0.01)
            assert step["collective_exposed_us"] == pytest.approx(exposed, abs=0.01)
        assert "host:collectives (gloo / NCCL), outside framework ops" in trace["host_ops"]["parts_us"]
    job = document["job"]
    assert [r["rank"] for r in job["ranks"]] == [0, 1]
    assert all(r["steps"] == DEVICE_RUN_PROFILE_STEPS for r in job["ranks"])  # the profiled steps
    # tensorboard lists each rank's trace as a session of the run, named by its rank

    sessions = find_sessions(run)
    assert [s.name.split("/")[1].split("-kineto-")[0] for s in sessions] == ["rank-0", "rank-1"]
    assert all(s.name.startswith(f"{run.name}/") and s.format == "kineto" for s in sessions)
    assert {s["ranks"] for s in job["steps"]} == {2}


def test_a_failing_rank_0_stops_the_other_ranks_at_once(tmp_path):
    env_hook = {"HLOSCOPE_TEST_CRASH": "pytorch:raise"}  # rank 0 raises after setup; rank 1 waits in its first step
    started = time.monotonic()
    result = hloscope("run", "--mode", "pytorch", "--model", "vit-tiny", "--batch-size", "8", "--steps", "2", "--warmup",
                      "1", "--devices", "2", "--out", tmp_path, "--run-id", "crash", timeout=300,
                      env={**CLEAN_ENV, **env_hook})
    assert result.code == 1, result.stderr[-2000:]
    assert json.loads((tmp_path / "crash" / "run.json").read_text())["status"] == "failed"
    # not gloo's 300 s timeout, nor the 60 s rank 0 gives the others to finish: rank 1 was stopped
    assert time.monotonic() - started < 50
    assert "rank 1" not in result.stderr
