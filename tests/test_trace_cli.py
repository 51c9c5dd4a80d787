"""`hloscope trace stats`: the JSON schema, the inputs it accepts (file, run directory, logdir) and the tables, which
print kernel and directory names as written however much they look like markup."""

from __future__ import annotations

import json
import shutil

import pytest
from helpers import HOSTILE_NAMES, assert_no_traceback, hloscope, kineto_trace, python

from hloscope.runs import rundir
from hloscope.trace.model import CATEGORIES

KEYS = {"file", "format", "steps", "events", "kernels", "device_time_us", "categories", "top"}


def test_json_schema_on_a_kineto_fixture(cli_run, fixtures_dir):
    path = fixtures_dir / "hta" / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    code, stdout, stderr = cli_run("trace", "stats", str(path), "--json")
    assert code == 0, stderr
    document = json.loads(stdout)
    assert list(document) == ["traces"]
    (trace,) = document["traces"]
    assert set(trace) >= KEYS
    assert trace["file"] == str(path) and trace["format"] == "kineto"
    assert trace["kernels"] == 79  # SOURCES.md: 1,408 events, 79 kernels
    assert isinstance(trace["steps"], int) and isinstance(trace["events"], int)
    assert set(trace["categories"]) == set(CATEGORIES)
    assert all(set(row) == {"name", "count", "total_us", "share"} for row in trace["top"])
    assert [row["total_us"] for row in trace["top"]] == sorted((row["total_us"] for row in trace["top"]), reverse=True)


def _run_record(artifacts: list[dict]) -> dict:
    return {"schema_version": 1, "run_id": "r1", "mode": "jax", "status": "ok", "error": None, "config": {},
            "environment": {}, "timing": {}, "artifacts": artifacts}


def test_run_directory_and_logdir_layouts(cli_run, fixtures_dir, tmp_path):
    """A run directory holds a PyTorch trace and a JAX-style TensorBoard logdir, listed in run.json; both are read."""
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    shutil.copy(fixtures_dir / "hta" / "triton_example__triton_example.json.gz", run / "traces" / "host_1.pt.trace.json.gz")
    profile = run / "plugins" / "profile" / "2026_01_01_00_00_00"
    profile.mkdir(parents=True)
    shutil.copy(
        fixtures_dir / "tracelens" / "test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb",
        profile / "host.xplane.pb",
    )
    rundir.write_run(run, _run_record([
        {"kind": "trace", "path": "traces/host_1.pt.trace.json.gz", "format": "kineto"},
        {"kind": "trace", "path": "plugins", "format": "xplane"},  # a directory: its traces
        {"kind": "hlo", "path": "hlo/missing.txt"},  # not this command's concern
    ]))
    code, stdout, stderr = cli_run("trace", "stats", str(run), "--json")
    assert code == 0, stderr
    traces = json.loads(stdout)["traces"]
    assert [(t["format"], t["kernels"]) for t in traces] == [("kineto", 1), ("xplane", 150)]  # run.json's order
    # The logdir alone (no run.json): searched.
    code, stdout, _ = cli_run("trace", "stats", str(run / "plugins"), "--json")
    assert [t["format"] for t in json.loads(stdout)["traces"]] == ["xplane"]
    # A listed trace that is gone is named.
    (run / "traces" / "host_1.pt.trace.json.gz").unlink()
    code, _, stderr = cli_run("trace", "stats", str(run))
    assert code == 2 and "host_1.pt.trace.json.gz: listed in" in stderr and "missing" in stderr


def test_comparison_directory_reads_the_traces_of_its_modes_in_its_order(cli_run, fixtures_dir, tmp_path):
    """A comparison directory: the traces of the runs comparison.json lists, in its order; a failed mode with no run
    directory is skipped, and a run directory not listed is not read."""
    comparison = tmp_path / "cmp"
    for mode, fixture, name in [
        ("pytorch", "hta/triton_example__triton_example.json.gz", "kineto/vm.1.pt.trace.json.gz"),
        ("jax", "tracelens/test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb",
         "plugins/profile/2026_01_01/vm.xplane.pb"),
        ("stray", "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz", "x.pt.trace.json.gz"),
    ]:  # fmt: skip
        target = comparison / mode / name
        target.parent.mkdir(parents=True)
        shutil.copy(fixtures_dir / fixture, target)
        rundir.write_run(comparison / mode, _run_record([{"kind": "trace", "path": name}]))
    rundir.write_comparison(comparison, {"schema_version": 1, "comparison_id": "cmp", "config": {}, "modes": [
        {"mode": "pytorch", "dir": "pytorch"}, {"mode": "torch_xla", "dir": "torch_xla", "status": "failed"},
        {"mode": "jax", "dir": "jax"}]})  # fmt: skip
    code, stdout, stderr = cli_run("trace", "stats", str(comparison), "--json")
    assert code == 0, stderr
    traces = json.loads(stdout)["traces"]
    # SOURCES.md: the AMD xplane's GPU stream has 150 events; the A100 triton example 1 kernel.
    assert [(t["file"].split("/cmp/")[1].split("/")[0], t["format"], t["kernels"]) for t in traces] == [
        ("pytorch", "kineto", 1), ("jax", "xplane", 150)]


def test_a_run_that_lists_no_trace_is_searched(cli_run, fixtures_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(fixtures_dir / "hta" / "triton_example__triton_example.json.gz", run / "a.pt.trace.json.gz")
    rundir.write_run(run, _run_record([]))
    code, stdout, stderr = cli_run("trace", "stats", str(run), "--json")
    assert code == 0, stderr
    assert [t["kernels"] for t in json.loads(stdout)["traces"]] == [1]


def test_tables_by_default(cli_run, fixtures_dir):
    path = fixtures_dir / "hta" / "trace_diff__control__control.json.gz"
    code, stdout, stderr = cli_run("trace", "stats", str(path), "--top", "3")
    assert code == 0, stderr
    assert "Device time by category" in stdout and "collective/communication" in stdout
    assert "Top 3 kernels" in stdout and "ncclKernel_SendRecv" in stdout
    assert "Per step" in stdout and "1009" in stdout and "1,428" in stdout


def test_reading_traces_imports_no_framework(fixtures_dir):
    """`hloscope trace` works on copied files without torch or JAX: only jaxlib's xplane reader is imported."""
    script = (
        "import sys\n"
        "from hloscope.cli import main\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        main(['trace', 'stats', path, '--json'])\n"
        "    except SystemExit as exit:\n"
        "        assert not exit.code, exit.code\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_xla', 'jax', 'flax'))\n"
        "print('FRAMEWORKS', loaded)\n"
    )
    paths = [
        fixtures_dir / "tracelens" / "test_data_jax_te_fused_attn_categorization__934987a2fc2f.xplane.pb",
        fixtures_dir / "hta" / "triton_example__triton_example.json.gz",
    ]
    done = python("-c", script, *paths, timeout=120)
    assert done.code == 0, done.stderr
    assert "FRAMEWORKS []" in done.stdout


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_kernel_names_and_directories_with_brackets_print_as_written_in_trace_stats(tmp_path, name):
    directory = tmp_path / "run[bs32]" / "x[/]y"
    directory.mkdir(parents=True)
    kineto_trace(directory / "a.pt.trace.json", [name, "gemm"])
    result = hloscope("trace", "stats", tmp_path / "run[bs32]", timeout=120)
    assert_no_traceback(result)
    assert result.code == 0, result.stderr
    flat = result.stdout.replace("\n", "")
    assert name in flat and "run[bs32]" in flat and "x[/]y" in flat, result.stdout
