"""A comparison's traces are modes, not ranks of one job: `trace stats` names each trace's mode and gives it its rank
within that mode, shows the modes side by side and no job view across them, and `trace export` partitions by mode.
The export's host columns (self time, depth, the profiler's category, input shapes) rebuild the PyTorch profiler's
key_averages table: checked on a real CPU trace made here with torch.profiler, against torch's own key_averages()
and against hloscope's own host-op table."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from statistics import median

import pytest
from helpers import REPO, comparison_of

from hloscope.runs import rundir
from hloscope.trace.load import load_trace
from hloscope.trace.stats import trace_stats


def _documented_query(name: str) -> str:
    """The SQL block of docs/trace.md that starts with `-- name`."""
    text = (REPO / "docs" / "trace.md").read_text()
    (query,) = re.findall(rf"```sql\n(-- {re.escape(name)}\n.*?)```", text, re.DOTALL)
    return query


def _events(duckdb, out: Path):
    connection = duckdb.connect()
    connection.sql(f"CREATE VIEW events AS SELECT * FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true)")
    return connection


def test_export_rebuilds_key_averages(torch_cpu_trace, tmp_path, cli_run):
    import duckdb

    trace, averages = torch_cpu_trace
    code, _, err = cli_run("trace", "export", str(trace), str(tmp_path / "out"))
    assert code == 0, err
    connection = _events(duckdb, tmp_path / "out")
    rows = connection.sql(_documented_query("key_averages: self and total time per op")).fetchall()
    table = {name: (calls, total, self_us, shapes) for name, calls, total, self_us, shapes in rows}
    aten = {key: value for key, value in averages.items() if key.startswith("aten::")}
    assert aten and set(aten) <= set(table)
    # torch folds an op into its caller of the same name when it is that caller's only child (aten::sum calling
    # aten::sum counts once: EventList._remove_dup_nodes); the export keeps both events. Self time is unchanged by
    # the fold; calls and total time lose the folded callee's.
    folded = {name: (calls, total) for name, calls, total in connection.sql("""
        SELECT a.name, count(*), sum(a.dur_us) FROM events a JOIN events b
        ON b.lane = a.lane AND b.name = a.name AND b.depth = a.depth - 1
           AND b.start_us <= a.start_us AND a.start_us < b.start_us + b.dur_us
        WHERE a.profiler_category = 'cpu_op' AND (
            SELECT count(*) FROM events c WHERE c.lane = b.lane AND c.depth = b.depth + 1
            AND b.start_us <= c.start_us AND c.start_us < b.start_us + b.dur_us) = 1
        GROUP BY a.name""").fetchall()}
    assert set(folded) == {"aten::sum"}  # the forward .sum() calls sum.dim_IntList
    for key, (calls, self_us, total_us) in aten.items():
        mine = table[key]
        folded_calls, folded_us = folded.get(key, (0, 0.0))
        assert mine[0] - folded_calls == calls, key
        assert mine[1] - folded_us == pytest.approx(total_us, rel=1e-3, abs=0.01), key
        assert mine[2] == pytest.approx(self_us, rel=1e-3, abs=0.01), key
    assert json.loads(table["aten::addmm"][3]) in ([[64], [16, 32], [32, 64], [], []], [[8], [16, 64], [64, 8], [], []])
    # hloscope's own host-op table (trace stats): calls per step of the aten ops inside no other aten op, and the
    # longest call, over the steps it used
    host = trace_stats(load_trace(trace)).to_dict()["host_ops"]
    steps = ", ".join(map(str, host["steps_used"]))
    top_level = connection.sql(f"""
        SELECT a.step, a.name, count(*) AS calls, max(a.dur_us) AS longest_us FROM events a
        WHERE a.name LIKE 'aten::%' AND a.step IN ({steps}) AND NOT EXISTS (
            SELECT 1 FROM events b WHERE b.lane = a.lane AND b.name LIKE 'aten::%' AND b.depth < a.depth
            AND b.start_us <= a.start_us AND a.start_us < b.start_us + b.dur_us)
        GROUP BY ALL""").fetchall()
    assert host["ops"]
    for row in host["ops"]:
        per_step = {step: (calls, longest) for step, name, calls, longest in top_level if name == row["name"]}
        assert median(per_step.get(step, (0, 0.0))[0] for step in host["steps_used"]) == row["calls_per_step"]
        assert max(longest for _, longest in per_step.values()) == pytest.approx(row["max_call_us"], abs=1e-3)


def test_nullable_integers_for_pandas(torch_cpu_trace, tmp_path, cli_run):
    """`step`, `correlation` and `depth` hold nulls: the files' pandas metadata names nullable integer types, which
    pyarrow's to_pandas() and pandas.read_parquet use (Int64, not float64)."""
    import pyarrow.parquet as pq

    trace, _ = torch_cpu_trace
    code, _, err = cli_run("trace", "export", str(trace), str(tmp_path / "out"))
    assert code == 0, err
    (file,) = (tmp_path / "out").glob("rank=*/*.parquet")
    table = pq.read_table(file)
    described = {column["name"]: column["numpy_type"] for column in table.schema.pandas_metadata["columns"]}
    assert described == {"step": "Int64", "correlation": "Int64", "depth": "Int32"}
    assert table.column("correlation").null_count > 0  # the case pandas would turn into floats
    assert table.schema.field("step").type == "int64" and table.schema.field("depth").type == "int32"


def test_stats_of_a_comparison_are_modes(torch_cpu_trace, tmp_path, cli_run):
    directory = comparison_of(tmp_path, torch_cpu_trace[0])
    code, out, err = cli_run("trace", "stats", "--json", str(directory))
    assert code == 0, err
    document = json.loads(out)
    assert [(t["mode"], t["rank"]) for t in document["traces"]] == [("jax", 0), ("pytorch", 0)]
    assert [row["mode"] for row in document["modes"]] == ["jax", "pytorch"]
    assert "job" not in document and "ranks" not in document and "jobs" not in document
    for row, trace in zip(document["modes"], document["traces"]):
        assert (row["traces"], row["steps"], row["kernels"]) == (1, trace["steps"], trace["kernels"])
        steps = [s["host_duration_us"] for s in trace["per_step"]]
        assert row["median_step_us"] == (median(steps) if steps else None)
    assert document["modes"][1]["median_step_us"] is not None  # the PyTorch trace's three profiled steps
    code, out, err = cli_run("trace", "stats", str(directory))
    assert code == 0, err
    assert "Modes: 2" in out
    assert "ranks" not in out and "Slowest rank" not in out and "Per rank" not in out


def test_export_of_a_comparison_is_partitioned_by_mode(torch_cpu_trace, tmp_path, cli_run):
    import duckdb

    directory = comparison_of(tmp_path, torch_cpu_trace[0])
    out = tmp_path / "out"
    code, _, err = cli_run("trace", "export", str(directory), str(out))
    assert code == 0, err
    assert sorted(p.relative_to(out).parent.as_posix() for p in out.rglob("*.parquet")) == [
        "mode=jax/rank=0", "mode=pytorch/rank=0"]
    counts = dict(_events(duckdb, out).sql(
        "SELECT mode, count(*) FILTER (WHERE kind = 'kernel') FROM events GROUP BY mode").fetchall())
    stats = json.loads(cli_run("trace", "stats", "--json", str(directory))[1])["traces"]
    assert counts == {trace["mode"]: trace["kernels"] for trace in stats}


def test_ranks_of_one_mode_get_a_job_view_of_their_own(torch_cpu_trace, tmp_path, cli_run):
    """A mode whose run holds two ranks' traces: rank and job views within that mode, titled with it; none across
    the modes."""
    from helpers import FETCHED

    directory = comparison_of(tmp_path, torch_cpu_trace[0])
    run = rundir.create_run_dir(directory, run_id="ddp")
    (run / "profile").mkdir()
    ranks = sorted((FETCHED / "hta" / "trace_filter_ranks").glob("*.json.gz"))
    for source in ranks:
        shutil.copy(source, run / "profile" / source.name.replace(".json.gz", ".pt.trace.json.gz"))
    rundir.write_run(run, {"schema_version": 1, "run_id": "ddp", "mode": "ddp", "status": "ok", "error": None,
                           "config": {"model": "vit-tiny", "batch_size": 8}, "environment": {"platform": "gpu"},
                           "timing": {"step_times_s": [0.002], "median_s": 0.002, "mean_s": 0.002, "first_step_s": 1.0},
                           "artifacts": [{"kind": "trace", "path": "profile", "format": "kineto", "module": None,
                                          "stage": "profile", "train_step": True}]})
    record = rundir.load_comparison(directory).to_dict()
    rundir.write_comparison(directory, {**record, "modes": [*record["modes"], {"mode": "ddp", "dir": "ddp"}]})
    code, out, err = cli_run("trace", "stats", "--json", str(directory))
    assert code == 0, err
    document = json.loads(out)
    assert [(t["mode"], t["rank"]) for t in document["traces"]] == [("jax", 0), ("pytorch", 0), ("ddp", 0), ("ddp", 1)]
    assert [row["mode"] for row in document["modes"]] == ["jax", "pytorch", "ddp"]
    assert list(document["jobs"]) == ["ddp"] and "job" not in document
    assert [row["rank"] for row in document["jobs"]["ddp"]["job"]["ranks"]] == [0, 1]
    code, out, err = cli_run("trace", "stats", str(directory))
    assert code == 0, err
    flowing = " ".join(out.split())
    assert "Job of mode ddp: 2 ranks" in flowing and "Per rank of mode ddp" in flowing
