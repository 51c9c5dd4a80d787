"""`hloscope.api`'s pyarrow tables (events, kernels, ops, steps) on a comparison of two modes (a real XLA xplane and
a real PyTorch CPU trace): the example in docs/api.md runs as written, and every table holds the figures `trace stats
--json` prints for the same comparison, with the mode and rank of each trace."""

from __future__ import annotations

import json
import re
import shutil
from statistics import median

import pytest
from helpers import REPO, comparison_of

from hloscope import api
from hloscope.trace.model import CATEGORIES


@pytest.fixture(scope="module")
def compared(torch_cpu_trace, tmp_path_factory):
    """(the comparison directory, `trace stats --json`'s traces and modes for it)."""
    from helpers import hloscope

    directory = comparison_of(tmp_path_factory.mktemp("tables"), torch_cpu_trace[0])
    result = hloscope("trace", "stats", "--json", directory)
    assert result.code == 0, result.stderr
    return directory, json.loads(result.stdout)


def _documented_example(path) -> dict:
    """Run the example of docs/api.md's "Tables for notebooks" on `path`; its variables."""
    text = (REPO / "docs" / "api.md").read_text()
    section = text[text.index("## Tables for notebooks"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    code, replaced = re.subn(r'^path = "[^"]*"', f"path = {str(path)!r}", code, flags=re.MULTILINE)
    assert replaced == 1
    variables: dict = {}
    exec(compile(code, "docs/api.md", "exec"), variables)  # noqa: S102 (the documentation's own example)
    return variables


def test_documented_example_matches_trace_stats(compared):
    directory, document = compared
    traces = {trace["mode"]: trace for trace in document["traces"]}
    example = _documented_example(directory)
    for mode, steps, step_us, busy_us in example["per_mode"]:
        row = next(row for row in document["modes"] if row["mode"] == mode)
        assert (steps, step_us, busy_us) == (row["steps"], row["median_step_us"], row["median_step_busy_us"])
    assert {mode for mode, *_ in example["per_mode"]} == {"pytorch"}  # the xplane has no steps
    for mode, name, total_us, share in example["top_kernels"]:
        assert {"name": name, "total_us": total_us, "share": share}.items() <= next(
            row for row in traces[mode]["top"] if row["name"] == name).items()
    assert dict(example["kernel_events"]) == {mode: trace["kernels"] for mode, trace in traces.items() if
                                              trace["kernels"]}
    # the host ops with the most self time, as the ops table holds them (which op leads depends on the machine's load)
    host = sorted((row for row in api.ops_table(directory).to_pylist()
                   if row["kind"] == "host" and row["name"].startswith("aten::")), key=lambda row: -row["self_us"])
    assert [tuple(row) for row in example["host_self_time"]] == [
        (row["mode"], row["name"], row["count"], row["self_us"]) for row in host[:5]]
    assert {name for _, name, *_ in example["host_self_time"]} & {"aten::mm", "aten::addmm", "aten::sum"}


def test_tables_hold_trace_stats_figures(compared):
    directory, document = compared
    kernels = api.kernels_table(directory).to_pylist()
    ops = api.ops_table(directory).to_pylist()
    steps = api.steps_table(directory).to_pylist()
    events = api.events_table(directory)
    assert [(t["mode"], t["rank"]) for t in document["traces"]] == [("jax", 0), ("pytorch", 0)]
    assert [record.to_dict() for record in api.trace_stats(directory)] == document["traces"]
    for trace in document["traces"]:
        key = (trace["mode"], trace["rank"], trace["file"])
        mine = [row for row in kernels if (row["mode"], row["rank"], row["file"]) == key]
        assert [{k: row[k] for k in ("name", "count", "total_us", "share")} for row in mine[:10]] == trace["top"]
        assert sum(row["count"] for row in mine) == sum(trace["executions_by_category"].values())
        hlo = [row for row in ops if (row["mode"], row["rank"], row["file"], row["kind"]) == (*key, "hlo")]
        assert [{"hlo_op": row["name"], "hlo_module": row["hlo_module"], "count": row["count"],
                 "total_us": row["total_us"], "share": row["share"]} for row in hlo[:10]] == trace["hlo_ops"]
        flat = [row for row in steps if (row["mode"], row["rank"], row["file"]) == key]
        assert len(flat) == len(trace["per_step"])
        for row, step in zip(flat, trace["per_step"]):
            for name, value in step.items():
                if isinstance(value, dict):
                    assert [row[f"{name}.{category}"] for category in CATEGORIES] == [value[c] for c in CATEGORIES]
                else:
                    assert row[name] == value, name
        kinds = [kind for mode, kind in zip(events.column("mode").to_pylist(), events.column("kind").to_pylist())
                 if mode == trace["mode"]]
        assert kinds.count("kernel") == trace["kernels"]
    # host ops of the PyTorch trace: as many calls as the events table holds, self time never above the total
    host = {row["name"]: row for row in ops if row["kind"] == "host"}
    names = [name for kind, name in zip(events.column("kind").to_pylist(), events.column("name").to_pylist())
             if kind == "host_op"]
    assert host["aten::mm"]["count"] == names.count("aten::mm") > 0
    assert all(0 <= row["self_us"] <= row["total_us"] + 1e-3 for row in host.values())
    assert host["aten::linear"]["self_us"] < host["aten::linear"]["total_us"] / 2  # its addmm is nested in it


def test_tables_keep_integers_for_pandas(compared):
    """pandas' nullable integers through the tables' pandas metadata (pandas reads it in to_pandas())."""
    directory, _ = compared
    for table in (api.events_table(directory), api.steps_table(directory)):
        described = {c["name"]: c["numpy_type"] for c in table.schema.pandas_metadata["columns"]}
        assert described["rank"] == "Int64"
        assert table.schema.field("rank").type == "int64"
    events = api.events_table(directory)
    assert events.schema.field("step").type == "int64" and events.column("step").null_count > 0


def test_steps_of_a_trace_file_have_no_mode(torch_cpu_trace):
    steps = api.steps_table(torch_cpu_trace[0])
    assert steps.num_rows == 3 and set(steps.column("mode").to_pylist()) == {None}
    assert median(steps.column("host_duration_us").to_pylist()) > 0


def test_frames_are_the_tables_in_pandas(compared):
    """Each DataFrame view holds its table's rows and columns, nullable integers as pandas' Int64."""
    directory, _ = compared
    for table, frame in ((api.events_table, api.events_frame), (api.kernels_table, api.kernels_frame),
                         (api.ops_table, api.ops_frame), (api.steps_table, api.steps_frame)):
        rows, viewed = table(directory), frame(directory)
        assert list(viewed.columns) == rows.column_names
        assert len(viewed) == rows.num_rows > 0
        assert list(viewed["mode"]) == rows.column("mode").to_pylist()
    assert str(api.steps_frame(directory)["rank"].dtype) == "Int64"
    assert str(api.events_frame(directory)["step"].dtype) == "Int64"


def test_step_times_of_a_comparison(compared):
    """One row per timed step of every mode, the seconds run.json recorded; warm-up steps marked as such."""
    directory, _ = compared
    table = api.step_times_table(directory)
    frame = api.step_times_frame(directory)
    assert len(frame) == table.num_rows
    for mode in ("jax", "pytorch"):
        run = api.load_run(directory / mode)
        timed = frame[(frame["mode"] == mode) & (frame["phase"] == "timed")]
        assert list(timed["step_s"]) == run.timing.step_times_s
        assert list(timed["step"]) == list(range(len(run.timing.step_times_s)))
        assert set(timed["process"]) == {1} and set(timed["status"]) == {"ok"}
    assert frame.groupby("mode")["step_s"].median()["pytorch"] == 0.002


def test_step_times_of_a_run_and_of_a_mode_without_record(compared, tmp_path):
    directory, _ = compared
    run = api.step_times_frame(directory / "pytorch")
    assert list(run["mode"]) == ["pytorch", "pytorch"] and list(run["dir"]) == ["pytorch", "pytorch"]
    # a mode whose process was killed before writing run.json: listed by comparison.json, no rows
    copy = tmp_path / "cut"
    shutil.copytree(directory, copy)
    (copy / "pytorch" / "run.json").unlink()
    assert set(api.step_times_frame(copy)["mode"]) == {"jax"}
