"""`api.hlo_kernels_table`: one row per module and kernel launch, holding the figures `hlo stats --json` prints for the
same modules (its kernel counts by kind, its kernels by source, its top instructions' cost, and XLA's thunk sequence
launch by launch), on real GPU and TPU dumps; `api.hlo_stats` returns typed records whose `to_dict()` is the JSON."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers import REPO, fixture

from hloscope import api
from hloscope.errors import UsageError
from hloscope.hlo.results import Measured, ModuleStats, ThunkCheck

GPU_DUMPS = ["gpu_aot/mlp_sm90_triton", "gpu_aot/vit_tiny_sm90_triton"]
TPU_MODULE = REPO / "tests" / "data" / "tpu_v5e" / "module_0343.jit_train_step.cl_933746096.after_optimizations.txt"


def _printed(cli_run, path, *options: str) -> list[dict]:
    code, out, err = cli_run("hlo", "stats", str(path), "--json", "--no-xla-cost", "--top", "1000", *options)
    assert code == 0, err
    return json.loads(out)["modules"]


def _rows_of(table, module: dict) -> list[dict]:
    return [row for row in table.to_pylist()
            if (row["file"], row["module"], row["module_index"]) == (module["file"], module["name"], module["module_index"])]


def _assert_matches_the_json(rows: list[dict], module: dict) -> None:
    assert all((row["stage"], row["platform"]) == (module["stage"], module["platform"]) for row in rows)
    assert [row["launch"] for row in rows] == list(range(len(rows)))
    # kinds: the kernel breakdown; every launch but copies: `kernels`
    assert dict(Counter(row["kind"] for row in rows)) == module["kernel_breakdown"]
    assert sum(row["kind"] != "copy" for row in rows) == module["kernels"]
    # sources: kernels_by_source (every group: --top 1000), with its fusions
    by_source: dict[str, list[int]] = {}
    for row in rows:
        group = by_source.setdefault(row["source"], [0, 0])
        group[0] += 1
        group[1] += row["opcode"] == "fusion"
    assert by_source == {group["source"]: [group["kernels"], group["fusions"]] for group in module["kernels_by_source"]}
    # cost: each top instruction that is a launch has the same figures
    named = {row["name"]: row for row in rows}
    shared = [top for top in module["top_instructions"] if top["name"] in named]
    assert shared
    for top in shared:
        row = named[top["name"]]
        assert {key: row[key] for key in top} == top


@pytest.mark.parametrize("folder", GPU_DUMPS)
def test_gpu_kernels_table_holds_what_hlo_stats_prints(cli_run, folder):
    path = fixture(folder)
    printed = _printed(cli_run, path, "--launches", "--source-depth", "3")
    table = api.hlo_kernels_table(path, source_depth=3)
    assert table.num_rows == sum(len(_rows_of(table, module)) for module in printed)
    before, after = printed
    for module in printed:
        _assert_matches_the_json(_rows_of(table, module), module)
    # the optimized module: XLA's thunk sequence, launch by launch
    thunks = ("thunk_index", "thunk_kind", "kernel_name", "grid", "block", "shared_memory_bytes", "reused_kernel")
    launches = after["thunk_sequence"]["launches"]
    rows = _rows_of(table, after)
    assert len(rows) == len(launches) > 0
    for row, launch in zip(rows, launches):
        assert {key: row[key] for key in ("name", "kind", "opcode", "detail", "computation", *thunks)} == {
            key: launch[key] for key in ("name", "kind", "opcode", "detail", "computation", *thunks)}
    # before optimizations: no thunk sequence, so nothing from it
    assert all(row[key] is None for row in _rows_of(table, before) for key in thunks)


def test_tpu_kernels_table_and_frame(cli_run):
    (module,) = _printed(cli_run, TPU_MODULE)
    table = api.hlo_kernels_table(TPU_MODULE)
    _assert_matches_the_json(table.to_pylist(), module)
    assert table.num_rows == module["kernels"] + module["copies"] == 142 + 53
    frame = api.hlo_kernels_frame(TPU_MODULE)
    assert len(frame) == table.num_rows and list(frame.columns) == table.column_names
    assert str(frame["thunk_index"].dtype) == "Int64" and frame["thunk_index"].isna().all()
    assert frame["flops"].sum() == pytest.approx(sum(row["flops"] for row in table.to_pylist()))


def test_kernels_table_checks_its_source_depth():
    with pytest.raises(UsageError):
        api.hlo_kernels_table(TPU_MODULE, source_depth=0)


def test_hlo_stats_records_are_typed_and_print_as_the_command(cli_run):
    path = fixture("gpu_aot/mlp_sm90_triton")
    records = api.hlo_stats(path, xla_cost=False, launches=True)
    assert all(isinstance(record, ModuleStats) for record in records)
    code, out, err = cli_run("hlo", "stats", str(path), "--json", "--no-xla-cost", "--launches")
    assert code == 0, err
    assert json.dumps({"modules": [record.to_dict() for record in records]}, indent=1) + "\n" == out
    before, after = records
    assert "thunk_sequence" not in before.to_dict() and "xla_cost" not in before.to_dict()
    assert isinstance(after.thunk_sequence, ThunkCheck) and after.thunk_sequence.agrees
    assert after.memory.parameter_bytes == after.to_dict()["memory"]["parameter_bytes"]


def test_measured_time_is_set_on_the_record_of_a_run_with_a_profile(tmp_path):
    """A run directory holding the TPU module and the profile of the same run: the record's `measured` section."""
    import shutil

    from hloscope.runs import rundir

    run = tmp_path / "run"
    (run / "hlo").mkdir(parents=True)
    (run / "profile").mkdir()
    shutil.copy(TPU_MODULE, run / "hlo" / TPU_MODULE.name)
    shutil.copy(TPU_MODULE.parent / "jax_vit_tiny.xplane.pb", run / "profile")
    rundir.write_run(run, {
        "schema_version": 1, "run_id": "r1", "mode": "jax", "status": "ok", "error": None, "config": {},
        "environment": {}, "timing": {}, "artifacts": [
            {"kind": "hlo", "path": f"hlo/{TPU_MODULE.name}", "module": "jit_train_step",
             "stage": "after_optimizations", "train_step": True, "format": "text"},
            {"kind": "trace", "path": "profile", "format": "xplane"}]})  # fmt: skip
    (record,) = api.hlo_stats(run, xla_cost=False, top=3)
    assert isinstance(record.measured, Measured)
    assert record.measured.events == 1398 and len(record.measured.top) == 3  # trace stats: 233 kernels x 6 steps
    assert record.to_dict()["measured"]["top"][0]["name"] == record.measured.top[0].name
    assert list(record.to_dict())[-1] == "measured"
