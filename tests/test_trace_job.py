"""The job view of a directory of per-rank profiles, parallel (process pool, Dask) and serial alike, the
Parquet export read by DuckDB, progress and resumability. On HTA's two real ranks and on a generated 64-rank job made
from them (tests/trace_job_data.py: time-shifted copies, a straggler rank, a rank with another kernel mix), checked
against json.load of each rank."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from pathlib import Path
from statistics import median

import pytest
from helpers import hloscope
from trace_job_data import (
    INJECTED_KERNEL,
    STRAGGLER_DELAY_US,
    make_job,
    reference,
)

from hloscope.render.progress import FileProgressBar
from hloscope.trace import job
from hloscope.trace.load import trace_files

RANKS = "hta/trace_filter_ranks"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "trace.md"


def queries() -> dict[str, str]:
    """The ```sql blocks of docs/trace.md, by their first line's comment (`-- top kernels per rank`)."""
    found = {}
    for block in re.findall(r"```sql\n(.*?)```", DOCS.read_text(), re.DOTALL):
        first, _, _rest = block.partition("\n")
        found[first.removeprefix("--").strip()] = block
    return found


@pytest.fixture
def two_ranks(real_file, tmp_path):
    source = real_file(RANKS)
    directory = tmp_path / "two"
    shutil.copytree(source, directory)
    return directory


@pytest.fixture(scope="module")
def job64(tmp_path_factory):
    from trace_job_data import SOURCE

    assert SOURCE.is_dir(), f"{SOURCE} is in git (tests/data/fetched/SOURCES.md)"
    return make_job(tmp_path_factory.mktemp("job64") / "job")


@pytest.fixture(scope="module")
def job64_serial(job64):
    result = hloscope("trace", "stats", "--json", "--jobs", "1", job64)
    assert result.code == 0, result.stderr
    return result.stdout


def _nccl_reference(ref: dict) -> list[dict]:
    """Matched NCCL calls from json.load: n-th call on every rank -> (start spread, shortest, last rank)."""
    calls = []
    count = min(len(r["nccl"]) for r in ref.values())
    for n in range(count):
        starts = {rank: r["nccl"][n][0] for rank, r in ref.items()}
        last = max(starts, key=lambda rank: (starts[rank], -rank))
        calls.append({"spread": max(starts.values()) - min(starts.values()),
                      "shortest": min(r["nccl"][n][1] for r in ref.values()), "last": last})
    return calls


def test_two_real_ranks_against_json_load(two_ranks, cli_run):
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "1", str(two_ranks))
    assert code == 0, err
    view = json.loads(out)["job"]
    ref = reference_two(two_ranks)
    assert [row["rank"] for row in view["ranks"]] == [0, 1]
    assert [row["kernels"] for row in view["ranks"]] == [ref[0]["kernels"], ref[1]["kernels"]]
    for step in view["steps"]:
        times = {rank: ref[rank]["steps"][step["step"]] for rank in ref}
        slowest = max(times, key=times.get)
        assert step["slowest_rank"] == slowest
        assert step["behind_next_us"] == pytest.approx(max(times.values()) - min(times.values()))
    calls = _nccl_reference(ref)
    collectives = view["collectives"]
    assert collectives["matched"] == len(calls) == 10
    assert collectives["start_spread_us"] == pytest.approx(sum(c["spread"] for c in calls))
    assert collectives["transfer_us"] == pytest.approx(sum(c["shortest"] for c in calls))
    assert [row["last_to_arrive"] for row in view["ranks"]] == [sum(c["last"] == r for c in calls) for r in (0, 1)]


def reference_two(directory):
    out = {}
    for path in sorted(directory.glob("*rank-*.json.gz")):
        document = json.loads(gzip.decompress(path.read_bytes()))
        events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
        out[document["distributedInfo"]["rank"]] = {
            "kernels": sum(e.get("cat") == "kernel" for e in events),
            "steps": {int(e["name"].split("#")[1]): float(e["dur"]) for e in events
                      if e["name"].startswith("ProfilerStep#")},
            "nccl": sorted((float(e["ts"]), float(e["dur"])) for e in events
                           if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
        }
    return out


def test_rank_selection(two_ranks, cli_run):
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "1", "--rank", "1", str(two_ranks))
    assert code == 0, err
    document = json.loads(out)
    assert [t["rank"] for t in document["traces"]] == [1] and "job" not in document
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "1", "--ranks", "0-1", str(two_ranks))
    assert code == 0 and len(json.loads(out)["job"]["ranks"]) == 2
    code, _, err = cli_run("trace", "stats", "--rank", "7", str(two_ranks))
    assert code == 2 and "has rank 7" in err
    code, _, err = cli_run("trace", "stats", "--ranks", "3-1", str(two_ranks))
    assert code == 2 and "--ranks" in err


def test_job64_against_json_load(job64, job64_serial):
    document = json.loads(job64_serial)
    view = document["job"]
    ref = reference(job64)
    assert len(ref) == 64 and [row["rank"] for row in view["ranks"]] == list(range(64))
    assert [row["kernels"] for row in view["ranks"]] == [ref[r]["kernels"] for r in range(64)]
    # the straggler: slowest in the first step, by exactly its pause over the next slowest
    first, second = view["steps"]
    times = {rank: ref[rank]["steps"][first["step"]] for rank in ref}
    assert first["slowest_rank"] == 37 == max(times, key=times.get)
    assert first["behind_next_us"] == pytest.approx(STRAGGLER_DELAY_US)
    assert first["median_us"] == pytest.approx(median(times.values()))
    times2 = {rank: ref[rank]["steps"][second["step"]] for rank in ref}
    assert second["slowest_us"] == pytest.approx(max(times2.values()))
    # collectives: spread and transfer as json.load gives them; the straggler arrives last after its pause
    calls = _nccl_reference(ref)
    collectives = view["collectives"]
    assert collectives["ranks"] == 64 and collectives["matched"] == len(calls) == 10
    assert collectives["start_spread_us"] == pytest.approx(sum(c["spread"] for c in calls))
    assert collectives["transfer_us"] == pytest.approx(sum(c["shortest"] for c in calls))
    assert collectives["top"][0]["last_rank"] == 37
    assert collectives["top"][0]["start_spread_us"] == pytest.approx(max(c["spread"] for c in calls))
    by_rank = {row["rank"]: row for row in view["ranks"]}
    assert by_rank[37]["last_to_arrive"] == sum(c["last"] == 37 for c in calls) > 0
    # the kernel mix: only rank 5 differs, and by the injected kernel
    mix = view["kernel_mix"]
    assert mix["differs"] == [5]
    row5 = next(row for row in mix["ranks"] if row["rank"] == 5)
    assert row5["more"][0]["name"] == INJECTED_KERNEL
    names = ref[5]["kernel_names"]
    assert row5["more"][0]["share_delta"] == pytest.approx(names.count(INJECTED_KERNEL) / len(names), abs=1e-4)


def test_pool_equals_serial(job64, job64_serial, cli_run):
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "2", str(job64))
    assert code == 0, err
    assert out == job64_serial


def test_dask_local_cluster_equals_serial(job64, job64_serial, cli_run):
    """Two worker processes (not threads of this one): the per-file tasks are pickled, run in other interpreters
    and their summaries sent back over TCP, as on a real cluster."""
    import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", protocol="tcp",
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        code, out, err = cli_run("trace", "stats", "--json", "--scheduler", cluster.scheduler_address, str(job64))
        pids = client.run(os.getpid)
        executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
    assert code == 0, err
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert sum(executed.values()) == 64  # every file summarised in a worker process
    assert out == job64_serial


def test_merge_does_not_depend_on_order(job64):
    files = [str(f) for f in trace_files(job64)][:8]
    ranks, source = job.job_ranks(files)
    assert source == "trace"
    summaries = [job.summarize_file(f) for f in files]
    forward = job.job_view(summaries, ranks)
    backward = job.job_view(summaries[::-1], ranks[::-1])
    assert forward == backward and json.dumps(forward.to_dict()) == json.dumps(backward.to_dict())


def test_state_dir_resumes(job64, job64_serial, tmp_path, cli_run, monkeypatch):
    state = tmp_path / "state"
    code, out, err = cli_run("trace", "stats", "--json", "--jobs", "1", "--state", str(state), str(job64))
    assert code == 0 and out == job64_serial, err
    saved = sorted(state.glob("*.json"))
    assert len(saved) == 64 and not list(state.glob(".*tmp"))
    for path in saved[:5]:  # as if interrupted before these five
        path.unlink()
    calls = []
    real = job.summarize_file
    monkeypatch.setattr(job, "summarize_file", lambda file, **kw: calls.append(file) or real(file, **kw))
    code, out, _err = cli_run("trace", "stats", "--json", "--jobs", "1", "--state", str(state), str(job64))
    assert code == 0 and out == job64_serial
    assert len(calls) == 5


def test_progress_bar_counts_files(job64, capsys):
    files = [str(f) for f in sorted(job64.glob("rank-*.json.gz"))][:3]
    bar = FileProgressBar()
    resumed = job.summarize_file(files[0])
    results = job.run_per_file(job.summarize_file, files, jobs=1, progress=bar, done={0: resumed})
    assert [r.file for r in results] == files and results[0] is resumed
    assert bar.completed == 3  # one resumed, two read


def test_export_duckdb_matches_trace_stats(job64, job64_serial, tmp_path, cli_run):
    import duckdb
    out_dir = tmp_path / "parquet"
    code, out, err = cli_run("trace", "export", "--jobs", "2", str(job64), str(out_dir))
    assert code == 0, err
    files = sorted(out_dir.glob("rank=*/*.parquet"))
    assert len(files) == 64 and not list(out_dir.rglob(".*tmp"))
    source = f"read_parquet('{out_dir}/**/*.parquet', hive_partitioning = true)"
    kernels = dict(duckdb.sql(f"SELECT rank, count(*) FROM {source} WHERE kind = 'kernel' GROUP BY rank").fetchall())
    traces = json.loads(job64_serial)["traces"]
    assert kernels == {t["rank"]: t["kernels"] for t in traces}
    per_step = duckdb.sql(f"SELECT rank, step, count(*) FROM {source} WHERE kind = 'kernel' AND step IS NOT NULL "
                          "GROUP BY ALL").fetchall()
    expected = {(t["rank"], s["step"]): s["kernels"] for t in traces for s in t["per_step"]}
    assert {(r, s): n for r, s, n in per_step} == expected
    events = dict(duckdb.sql(f"SELECT rank, count(*) FROM {source} GROUP BY rank").fetchall())
    assert events == {t["rank"]: t["events"] for t in traces}
    # resumable: a rerun keeps every finished file, rewrites only the one missing
    stamps = {f: f.stat().st_mtime_ns for f in files}
    files[3].unlink()
    code, out, err = cli_run("trace", "export", "--jobs", "1", str(job64), str(out_dir))
    assert code == 0 and "(63 already exported, kept)" in out
    assert all(f.stat().st_mtime_ns == stamps[f] for f in files if f != files[3]) and files[3].exists()


def test_docs_queries_run(job64, job64_serial, tmp_path, cli_run):
    """The DuckDB queries of docs/trace.md, on the export of the 64-rank job, agree with `trace stats`."""
    import duckdb
    out_dir = tmp_path / "parquet"
    code, _, err = cli_run("trace", "export", str(out_dir.parent / "missing"), str(out_dir))
    assert code == 2
    code, _, err = cli_run("trace", "export", "--jobs", "1", str(job64), str(out_dir))
    assert code == 0, err
    found = queries()
    assert set(found) >= {"top kernels per rank", "idle per step", "collective skew"}
    connection = duckdb.connect()
    connection.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{out_dir}/**/*.parquet', "
                       "hive_partitioning = true)")
    document = json.loads(job64_serial)
    traces = {t["rank"]: t for t in document["traces"]}
    top = connection.sql(found["top kernels per rank"]).fetchall()
    assert {(r, n) for r, n, *_ in top if r == 0} == {(0, row["name"]) for row in traces[0]["top"][:5]}
    idle = connection.sql(found["idle per step"]).fetchall()
    for rank, step, busy, span_idle in idle:
        expected = next(s for s in traces[rank]["per_step"] if s["step"] == step)
        assert busy == pytest.approx(expected["device_busy_us"], abs=1e-3)
        assert span_idle == pytest.approx(expected["device_idle_us"], abs=1e-3)
    skew = connection.sql(found["collective skew"]).fetchall()
    view = document["job"]["collectives"]
    assert skew[0][2] == pytest.approx(view["top"][0]["start_spread_us"])
    assert skew[0][3] == pytest.approx(view["top"][0]["shortest_us"])
