"""The Python API returns what the commands' --json print, on real files (no framework needed)."""

from __future__ import annotations

import json

import pytest

from hloscope import api
from hloscope.errors import InputError, UsageError

SM90 = "gpu_aot/vit_base_sm90_cublas"
SM80 = "gpu_aot/vit_base_sm80_cublas"
ALEXNET = "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


def test_hlo_stats_is_what_the_command_prints(cli_run, fixtures_dir):
    records = api.hlo_stats(fixtures_dir / SM90, xla_cost=False)
    code, out, err = cli_run("hlo", "stats", str(fixtures_dir / SM90), "--json", "--no-xla-cost")
    assert code == 0, err
    assert json.dumps({"modules": [r.to_dict() for r in records]}, indent=1) + "\n" == out  # byte for byte
    after = [r for r in records if r.stage == "after_optimizations"]
    assert after[0].kernels == 789 + 243 + 2  # SOURCES.md: the thunk sequence's launches, copies apart


def test_trace_stats_is_what_the_command_prints(cli_run, fixtures_dir):
    (record,) = api.trace_stats(fixtures_dir / ALEXNET)
    code, out, err = cli_run("trace", "stats", str(fixtures_dir / ALEXNET), "--json")
    assert code == 0, err
    (printed,) = json.loads(out)["traces"]
    assert record.to_dict() == printed
    assert (record.file, record.kernels, record.top[0].name) == (printed["file"], printed["kernels"],
                                                                 printed["top"][0]["name"])


def test_diff_and_explain_return_reports(fixtures_dir, tmp_path):
    report = api.diff(fixtures_dir / SM90, fixtures_dir / SM80, xla_cost=False)
    assert report.delta["kernels"] == 95  # 1,129 - 1,034 (test_diff_fixtures, SOURCES.md)
    assert (report.graphs.a[-1].kernels, report.graphs.b[-1].kernels) == (1034, 1129)
    assert report.to_dict()["delta"]["kernels"] == 95
    run = tmp_path / "a"
    run.mkdir()
    record = {"schema_version": 1, "run_id": "a", "mode": "jax", "status": "ok", "config": {"batch_size": 8},
              "timing": {"step_times_s": [0.002] * 5, "median_s": 0.002}, "artifacts": []}
    (run / "run.json").write_text(json.dumps(record))
    loaded = api.load_run(run)
    assert loaded.mode == "jax" and loaded.timing.median_s == 0.002 and loaded.config.batch_size == 8
    assert loaded.to_dict() == record
    why = api.explain(run)
    assert why.baseline == "jax" and why.modes[0].verdict == "baseline" and why.summaries["jax"].batch_size == 8
    assert why.to_dict()["modes"][0]["verdict"] == "baseline"


def test_bad_input_raises_one_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        api.explain(tmp_path / "nothing")
    (tmp_path / "x.hlo").write_text("HloModule m\n\nENTRY e {\n  ROOT p = f32[] frobnicate()\n}\n")
    with pytest.raises(InputError, match=r"x\.hlo:4:"):
        api.hlo_stats(tmp_path / "x.hlo")


@pytest.mark.parametrize("call", [
    lambda: api.hlo_stats("x.hlo", top=-3),
    lambda: api.hlo_stats("x.hlo", top=1001),
    lambda: api.hlo_stats("x.hlo", source_depth=0),
    lambda: api.hlo_stats("x.hlo", top=2.5),
    lambda: api.trace_stats("x.json", top=0),
    lambda: api.explain("x", min_gap=float("nan")),
    lambda: api.explain("x", min_gap=-0.1),
], ids=["top negative", "top over the bound", "source depth 0", "top not whole", "trace top 0", "min gap nan",
        "min gap negative"])
def test_arguments_outside_the_commands_bounds_raise_usage_error(call):
    """The API checks the bounds the commands' options have (a negative top would silently drop the last rows)."""
    with pytest.raises(UsageError):
        call()
