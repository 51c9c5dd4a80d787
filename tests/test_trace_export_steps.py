"""`trace export`'s `step` column puts each event in the step `trace stats` does. On two
real DDP traces with device work launched before the profiling window (HTA's V100 `trace_diff/test`, TraceLens'
MI300X `resnet_act_checkpoint`), read back with DuckDB: that work has a null step (the same executions as json.load
finds without a launch, and as `before_window` counts), and every step's kernels, executions and time by category,
device busy and idle (docs/trace.md's "idle per step" query) equal `trace stats`' `per_step`."""

from __future__ import annotations

import gzip
import json

import pytest
from test_trace_job import queries

V100_DDP = "hta/trace_diff__test__test.json.gz"
MI300_DDP = "tracelens/traces__mi300__resnet_act_checkpoint.json.gz"
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
RUNTIME = ("cuda_runtime", "cuda_driver")
EXECUTIONS = "device AND kind IN ('kernel', 'memcpy', 'memset')"


def launched_before_window(path) -> set[int]:
    """json.load: correlation ids of the device executions whose launch is not in the trace."""
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    launches = {e["args"]["correlation"] for e in events if e.get("cat") in RUNTIME and "correlation" in e["args"]}
    return {e["args"]["correlation"] for e in events
            if e.get("cat") in DEVICE and e["args"]["correlation"] not in launches}


@pytest.mark.parametrize("relative,steps", [(V100_DDP, 6), (MI300_DDP, 3)])
def test_export_steps_equal_trace_stats(real_file, tmp_path, cli_run, relative, steps):
    import duckdb
    path = real_file(relative)
    code, out, err = cli_run("trace", "stats", "--json", str(path))
    assert code == 0, err
    (stats,) = json.loads(out)["traces"]
    assert len(stats["per_step"]) == steps
    code, _, err = cli_run("trace", "export", "--jobs", "1", str(path), str(tmp_path / "parquet"))
    assert code == 0, err
    connection = duckdb.connect()
    connection.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{tmp_path}/parquet/**/*.parquet', "
                       "hive_partitioning = true)")

    # launched before the window: in no step, exactly those json.load finds without a launch
    (early,) = connection.sql(f"SELECT count(*), count(*) FILTER (WHERE kind = 'kernel'), sum(dur_us), "
                           f"list(DISTINCT correlation) FROM events WHERE {EXECUTIONS} AND step IS NULL").fetchall()
    before = stats["before_window"]
    assert early[0] == before["executions"] > 0 and early[1] == before["kernels"]
    assert early[2] == pytest.approx(before["device_time_us"], rel=1e-6)
    assert set(early[3]) == launched_before_window(path)

    # every step: kernels, executions and time by category
    per_step = {s["step"]: s for s in stats["per_step"]}
    rows = connection.sql(f"SELECT step, category, count(*), count(*) FILTER (WHERE kind = 'kernel'), sum(dur_us) "
                          f"FROM events WHERE {EXECUTIONS} AND step IS NOT NULL GROUP BY ALL").fetchall()
    assert {step for step, *_ in rows} == set(per_step)
    kernels: dict[int, int] = {}
    for step, category, executions, kernel_count, total in rows:
        kernels[step] = kernels.get(step, 0) + kernel_count
        assert executions == per_step[step]["executions_by_category"][category], (step, category)
        assert total == pytest.approx(per_step[step]["categories_us"][category], abs=1e-2), (step, category)
    assert kernels == {number: s["kernels"] for number, s in per_step.items()}
    # nothing lost: the steps' executions and the early ones are every device execution
    ((total,),) = connection.sql(f"SELECT count(*) FROM events WHERE {EXECUTIONS}").fetchall()
    assert total == sum(stats["executions_by_category"].values())

    # device busy and idle per step, by the documented query
    idle = connection.sql(queries()["idle per step"]).fetchall()
    assert [step for _, step, _, _ in idle] == sorted(per_step)
    for _, step, busy, span_idle in idle:
        assert busy == pytest.approx(per_step[step]["device_busy_us"], abs=1e-3)
        assert span_idle == pytest.approx(per_step[step]["device_idle_us"], abs=1e-3)
    # step markers carry their own number
    markers = connection.sql("SELECT DISTINCT step FROM events WHERE kind = 'step'").fetchall()
    assert {step for (step,) in markers} == set(per_step)
